/*
 * passloop: one thread, one mutex and one condition variable per loop. The pass runs without
 * the mutex; a kick that comes during a pass is remembered (kicked) so the next wait ends at
 * once and nothing a pass should have seen is lost.
 */
#include "base/passloop.h"

#include "base/timeutil.h"

void pass_loop_init(struct pass_loop *l, int64_t (*pass)(void *ud), void *ud)
{
	*l = (struct pass_loop){ .pass = pass, .ud = ud };
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->wake, NULL);
}

static void *pass_loop_main(void *arg)
{
	struct pass_loop *l = arg;
	bool idle = false; /* a pass asked for no more passes */

	pthread_mutex_lock(&l->mu);
	while (!l->stopping) {
		if (idle) {
			pthread_cond_wait(&l->wake, &l->mu);
			continue;
		}
		l->kicked = false;
		pthread_mutex_unlock(&l->mu);
		int64_t wait = l->pass(l->ud);
		pthread_mutex_lock(&l->mu);
		if (wait == PASS_LOOP_NEVER) {
			idle = true;
			continue;
		}
		struct timespec ts = wall_deadline(wait > 0 ? wait : 0);
		while (!l->stopping && !l->kicked)
			if (pthread_cond_timedwait(&l->wake, &l->mu, &ts))
				break;
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

int pass_loop_start(struct pass_loop *l)
{
	if (pthread_create(&l->thread, NULL, pass_loop_main, l))
		return -1;
	l->started = true;
	return 0;
}

void pass_loop_kick(void *loop)
{
	struct pass_loop *l = loop;

	pthread_mutex_lock(&l->mu);
	l->kicked = true;
	pthread_cond_signal(&l->wake);
	pthread_mutex_unlock(&l->mu);
}

bool pass_loop_stopping(struct pass_loop *l)
{
	pthread_mutex_lock(&l->mu);
	bool stop = l->stopping;
	pthread_mutex_unlock(&l->mu);
	return stop;
}

void pass_loop_stop(struct pass_loop *l)
{
	pthread_mutex_lock(&l->mu);
	l->stopping = true;
	pthread_cond_signal(&l->wake);
	pthread_mutex_unlock(&l->mu);
	if (l->started)
		pthread_join(l->thread, NULL);
	l->started = false;
}

void pass_loop_destroy(struct pass_loop *l)
{
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->wake);
}
