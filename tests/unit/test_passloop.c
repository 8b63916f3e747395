/*
 * The pass thread every periodic controller runs on (taint eviction, podgc, nodelifecycle, the
 * provisioner's snapshot-finalizer sweep): a kick is seen at once, not after the pass's wait;
 * a kick during a pass is not lost; PASS_LOOP_NEVER stops the passes but not the stop; and a
 * stop ends the thread at once even when the pass asked to sleep for an hour (SIGTERM within a
 * second).
 */
#include <stdatomic.h>
#include <time.h>

#include "base/passloop.h"
#include "base/timeutil.h"
#include "check.h"

struct counter {
	atomic_int passes;
	int64_t wait;       /* what each pass returns */
	int64_t hold_ns;    /* how long each pass takes */
	struct pass_loop *loop;
	atomic_int kick_in_pass; /* kick the loop from inside pass number N (0: never) */
};

static int64_t count_pass(void *ud)
{
	struct counter *c = ud;
	int n = atomic_fetch_add(&c->passes, 1) + 1;

	if (c->hold_ns) {
		struct timespec ts = { 0, c->hold_ns };
		nanosleep(&ts, NULL);
	}
	if (n == atomic_load(&c->kick_in_pass))
		pass_loop_kick(c->loop);
	return c->wait;
}

/* Waits up to ms for passes to reach n; true when it did. */
static bool passes_reach(struct counter *c, int n, int ms)
{
	for (int i = 0; i < ms; i++) {
		if (atomic_load(&c->passes) >= n)
			return true;
		struct timespec ts = { 0, NSEC_PER_MSEC };
		nanosleep(&ts, NULL);
	}
	return atomic_load(&c->passes) >= n;
}

static void test_kick_and_stop(void)
{
	struct pass_loop l;
	struct counter c = { .wait = 3600 * NSEC_PER_SEC, .loop = &l };

	pass_loop_init(&l, count_pass, &c);
	CHECK_INT(pass_loop_start(&l), 0);
	CHECK(passes_reach(&c, 1, 1000)); /* the first pass runs at once */
	pass_loop_kick(&l);
	CHECK(passes_reach(&c, 2, 1000)); /* not after the hour the pass asked for */
	int64_t t0 = mono_now_ns();
	pass_loop_stop(&l);
	CHECK(mono_now_ns() - t0 < NSEC_PER_SEC);
	CHECK_INT(atomic_load(&c.passes), 2);
	pass_loop_destroy(&l);
}

static void test_kick_during_pass(void)
{
	struct pass_loop l;
	struct counter c = { .wait = 3600 * NSEC_PER_SEC, .hold_ns = 20 * NSEC_PER_MSEC, .loop = &l,
			     .kick_in_pass = 1 };

	pass_loop_init(&l, count_pass, &c);
	CHECK_INT(pass_loop_start(&l), 0);
	CHECK(passes_reach(&c, 2, 1000)); /* the kick from inside pass 1 brings pass 2 */
	pass_loop_stop(&l);
	pass_loop_destroy(&l);
}

static void test_never(void)
{
	struct pass_loop l;
	struct counter c = { .wait = PASS_LOOP_NEVER, .loop = &l };

	pass_loop_init(&l, count_pass, &c);
	CHECK_INT(pass_loop_start(&l), 0);
	CHECK(passes_reach(&c, 1, 1000));
	pass_loop_kick(&l);
	CHECK(!passes_reach(&c, 2, 100)); /* no pass after NEVER, kicked or not */
	CHECK(!pass_loop_stopping(&l));
	int64_t t0 = mono_now_ns();
	pass_loop_stop(&l);
	CHECK(mono_now_ns() - t0 < NSEC_PER_SEC);
	CHECK(pass_loop_stopping(&l));
	pass_loop_destroy(&l);
}

int main(void)
{
	RUN(test_kick_and_stop);
	RUN(test_kick_during_pass);
	RUN(test_never);
	return CHECK_DONE();
}
