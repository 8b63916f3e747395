/*
 * Workqueue semantics controllers rely on, including under 8 worker threads: a key is never
 * processed by two workers at once, a key added during processing is processed again, and no
 * key is lost.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/timeutil.h"
#include "base/strbuf.h"
#include "check.h"
#include "kube/workqueue.h"

static void test_dedup_and_order(void)
{
	struct kube_workqueue *q = kube_workqueue_new("t", 5 * NSEC_PER_MSEC, 40 * NSEC_PER_MSEC);
	kube_workqueue_add(q, "a");
	kube_workqueue_add(q, "b");
	kube_workqueue_add(q, "a");
	CHECK_INT(kube_workqueue_len(q), 2);
	char *k = kube_workqueue_get(q);
	CHECK_STR(k, "a");
	/* added while processing: not queued now, queued again by done() */
	kube_workqueue_add(q, "a");
	CHECK_INT(kube_workqueue_len(q), 1);
	char *k2 = kube_workqueue_get(q);
	CHECK_STR(k2, "b");
	kube_workqueue_done(q, k2);
	free(k2);
	CHECK_INT(kube_workqueue_len(q), 0);
	kube_workqueue_done(q, k);
	free(k);
	CHECK_INT(kube_workqueue_len(q), 1);
	k = kube_workqueue_get(q);
	CHECK_STR(k, "a");
	kube_workqueue_done(q, k);
	free(k);
	struct kube_workqueue_metrics m;
	kube_workqueue_metrics(q, &m);
	CHECK_INT(m.adds, 3);
	CHECK_INT(m.processed, 3);
	CHECK_INT(m.depth, 0);
	kube_workqueue_free(q);
}

static void test_rate_limited_backoff(void)
{
	struct kube_workqueue *q = kube_workqueue_new("t", 20 * NSEC_PER_MSEC, 80 * NSEC_PER_MSEC);
	int64_t expect[] = { 20, 40, 80, 80 };
	for (int i = 0; i < 4; i++) {
		int64_t t0 = mono_now_ns();
		kube_workqueue_add_rate_limited(q, "x");
		char *k = kube_workqueue_get(q);
		int64_t waited = (mono_now_ns() - t0) / NSEC_PER_MSEC;
		CHECK_STR(k, "x");
		/* at least the delay; the upper bound is generous for loaded machines */
		CHECK(waited >= expect[i] - 1);
		CHECK(waited < expect[i] + 2000);
		kube_workqueue_done(q, k);
		free(k);
	}
	CHECK_INT(kube_workqueue_num_requeues(q, "x"), 4);
	kube_workqueue_forget(q, "x");
	CHECK_INT(kube_workqueue_num_requeues(q, "x"), 0);
	int64_t t0 = mono_now_ns();
	kube_workqueue_add_rate_limited(q, "x");
	char *k = kube_workqueue_get(q);
	CHECK((mono_now_ns() - t0) / NSEC_PER_MSEC >= 19);
	kube_workqueue_done(q, k);
	free(k);
	kube_workqueue_free(q);
}

static void test_add_after_order(void)
{
	struct kube_workqueue *q = kube_workqueue_new("t", NSEC_PER_MSEC, NSEC_PER_SEC);
	kube_workqueue_add_after(q, "late", 60 * NSEC_PER_MSEC);
	kube_workqueue_add_after(q, "early", 10 * NSEC_PER_MSEC);
	kube_workqueue_add(q, "now");
	const char *want[] = { "now", "early", "late" };
	for (int i = 0; i < 3; i++) {
		char *k = kube_workqueue_get(q);
		CHECK_STR(k, want[i]);
		kube_workqueue_done(q, k);
		free(k);
	}
	kube_workqueue_free(q);
}

static void *shutdown_waiter(void *arg)
{
	return kube_workqueue_get(arg);
}

static void test_shutdown_wakes_getters(void)
{
	struct kube_workqueue *q = kube_workqueue_new("t", NSEC_PER_MSEC, NSEC_PER_SEC);
	pthread_t t;
	pthread_create(&t, NULL, shutdown_waiter, q);
	sleep_ns(20 * NSEC_PER_MSEC);
	kube_workqueue_shutdown(q);
	void *r = (void *)1;
	pthread_join(t, &r);
	CHECK(r == NULL);
	kube_workqueue_add(q, "ignored");
	CHECK_INT(kube_workqueue_len(q), 0);
	CHECK(kube_workqueue_shutting_down(q));
	kube_workqueue_free(q);
}

static atomic_int drained;

static void *slow_worker(void *arg)
{
	struct kube_workqueue *q = arg;
	char *k;
	while ((k = kube_workqueue_get(q))) {
		sleep_ns(NSEC_PER_MSEC);
		atomic_fetch_add(&drained, 1);
		kube_workqueue_done(q, k);
		free(k);
	}
	return NULL;
}

static void test_shutdown_drain(void)
{
	struct kube_workqueue *q = kube_workqueue_new("t", NSEC_PER_MSEC, NSEC_PER_SEC);
	char key[16];
	for (int i = 0; i < 50; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		kube_workqueue_add(q, key);
	}
	kube_workqueue_add_after(q, "delayed", 10 * NSEC_PER_SEC);
	pthread_t th[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, slow_worker, q);
	kube_workqueue_shutdown_drain(q); /* returns only when every queued key is done */
	CHECK_INT(atomic_load(&drained), 50);
	kube_workqueue_add(q, "late");
	CHECK_INT(kube_workqueue_len(q), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	CHECK_INT(atomic_load(&drained), 50);
	kube_workqueue_free(q);
}

#define NKEYS 200
#define ROUNDS 20
static atomic_int active[NKEYS];
static atomic_int gen[NKEYS];  /* bumped before each add */
static atomic_int seen[NKEYS]; /* gen as read when processing starts */
static atomic_int overlap;
static atomic_int total;

static void *worker(void *arg)
{
	struct kube_workqueue *q = arg;
	char *k;
	while ((k = kube_workqueue_get(q))) {
		int i = atoi(k + 1);
		if (atomic_fetch_add(&active[i], 1) != 0)
			atomic_fetch_add(&overlap, 1);
		atomic_store(&seen[i], atomic_load(&gen[i]));
		atomic_fetch_add(&total, 1);
		if (i % 7 == 0)
			sleep_ns(100 * NSEC_PER_USEC);
		atomic_fetch_sub(&active[i], 1);
		kube_workqueue_done(q, k);
		free(k);
	}
	return NULL;
}

static void test_eight_workers(void)
{
	struct kube_workqueue *q = kube_workqueue_new("t", NSEC_PER_MSEC, NSEC_PER_SEC);
	pthread_t th[8];
	for (int i = 0; i < 8; i++)
		pthread_create(&th[i], NULL, worker, q);
	char key[16];
	for (int r = 0; r < ROUNDS; r++) {
		for (int i = 0; i < NKEYS; i++) {
			snprintf(key, sizeof(key), "k%d", i);
			atomic_fetch_add(&gen[i], 1);
			kube_workqueue_add(q, key);
		}
	}
	/* Wait until the queue is idle; then every key's last add must have been processed. */
	int64_t deadline = mono_now_ns() + 30 * NSEC_PER_SEC;
	int idle = 0;
	while (idle < 3 && mono_now_ns() < deadline) {
		struct kube_workqueue_metrics m;
		kube_workqueue_metrics(q, &m);
		idle = (m.depth == 0 && m.unfinished == 0) ? idle + 1 : 0;
		sleep_ns(10 * NSEC_PER_MSEC);
	}
	int missing = 0;
	for (int i = 0; i < NKEYS; i++)
		missing += atomic_load(&seen[i]) != ROUNDS;
	CHECK_INT(missing, 0);
	kube_workqueue_shutdown(q);
	for (int i = 0; i < 8; i++)
		pthread_join(th[i], NULL);
	CHECK_INT(atomic_load(&overlap), 0);
	CHECK(atomic_load(&total) >= NKEYS);
	CHECK(atomic_load(&total) <= NKEYS * ROUNDS);
	kube_workqueue_free(q);
}

static size_t idle_workers(struct kube_workqueue *q)
{
	struct kube_workqueue_metrics m;
	kube_workqueue_metrics(q, &m);
	return m.idle_workers;
}

static void wait_idle(struct kube_workqueue *q, size_t n)
{
	int64_t deadline = mono_now_ns() + 10 * NSEC_PER_SEC;
	while (idle_workers(q) != n && mono_now_ns() < deadline)
		sleep_ns(NSEC_PER_MSEC);
	CHECK_INT(idle_workers(q), n);
}

struct tagged {
	struct kube_workqueue *q;
	int id;
	atomic_int *last; /* id of the worker that took the last key */
	atomic_llong *t_early, *t_late;
};

static void *tag_worker(void *arg)
{
	struct tagged *t = arg;
	char *k;
	while ((k = kube_workqueue_get(t->q))) {
		atomic_store(t->last, t->id);
		if (!strcmp(k, "early"))
			atomic_store(t->t_early, mono_now_ns());
		else if (!strcmp(k, "late"))
			atomic_store(t->t_late, mono_now_ns());
		kube_workqueue_done(t->q, k);
		free(k);
	}
	return NULL;
}

/*
 * Idle workers are woken last-in first-out: with four idle, keys added one at a time all go to
 * the worker that went idle last, so the other three never run (their stacks stay cold).
 */
static void test_last_idle_worker_runs(void)
{
	struct kube_workqueue *q = kube_workqueue_new("t", NSEC_PER_MSEC, NSEC_PER_SEC);
	atomic_int last = -1;
	atomic_llong te = 0, tl = 0;
	struct tagged t[4];
	pthread_t th[4];
	for (int i = 0; i < 4; i++) {
		t[i] = (struct tagged){ q, i, &last, &te, &tl };
		pthread_create(&th[i], NULL, tag_worker, &t[i]);
		wait_idle(q, (size_t)i + 1); /* worker i is now on top */
	}
	char key[16];
	for (int i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		kube_workqueue_add(q, key);
		wait_idle(q, 4);
		CHECK_INT(atomic_load(&last), 3);
	}
	kube_workqueue_shutdown(q);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	CHECK_INT(idle_workers(q), 0);
	kube_workqueue_free(q);
}

/*
 * With every worker idle and a key due in 600 ms, a key added with 20 ms must not wait for the
 * first: the sleeping timer worker is woken to sleep for less.
 */
static void test_earlier_delay_rearms_timer(void)
{
	struct kube_workqueue *q = kube_workqueue_new("t", NSEC_PER_MSEC, NSEC_PER_SEC);
	atomic_int last = -1;
	atomic_llong te = 0, tl = 0;
	struct tagged t[3];
	pthread_t th[3];
	for (int i = 0; i < 3; i++) {
		t[i] = (struct tagged){ q, i, &last, &te, &tl };
		pthread_create(&th[i], NULL, tag_worker, &t[i]);
	}
	wait_idle(q, 3);
	int64_t t0 = mono_now_ns();
	kube_workqueue_add_after(q, "late", 600 * NSEC_PER_MSEC);
	sleep_ns(10 * NSEC_PER_MSEC); /* a worker is now asleep until "late" */
	kube_workqueue_add_after(q, "early", 20 * NSEC_PER_MSEC);
	int64_t deadline = t0 + 5 * NSEC_PER_SEC;
	while ((!atomic_load(&te) || !atomic_load(&tl)) && mono_now_ns() < deadline)
		sleep_ns(NSEC_PER_MSEC);
	CHECK(atomic_load(&te) != 0);
	CHECK(atomic_load(&tl) != 0);
	/* "early" did not wait for "late" (due at 600 ms, so it would come after 600 ms too). */
	CHECK(atomic_load(&te) - t0 < 400 * NSEC_PER_MSEC);
	CHECK(atomic_load(&tl) - t0 >= 600 * NSEC_PER_MSEC);
	kube_workqueue_shutdown(q);
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	kube_workqueue_free(q);
}

static size_t workers_now(struct kube_workqueue *q)
{
	struct kube_workqueue_metrics m;
	kube_workqueue_metrics(q, &m);
	return m.workers;
}

static atomic_int served_runs, served_active, served_peak, served_retried;

static enum kube_work_result served_fn(void *arg, const char *key)
{
	(void)arg;
	int a = atomic_fetch_add(&served_active, 1) + 1;
	for (int p = atomic_load(&served_peak); a > p && !atomic_compare_exchange_weak(&served_peak, &p, a);)
		;
	sleep_ns(20 * NSEC_PER_MSEC);
	atomic_fetch_add(&served_runs, 1);
	atomic_fetch_sub(&served_active, 1);
	if (!strcmp(key, "flaky") && atomic_fetch_add(&served_retried, 1) == 0)
		return KUBE_WORK_RETRY;
	return KUBE_WORK_DONE;
}

static void wait_for(atomic_int *v, int want)
{
	int64_t deadline = mono_now_ns() + 10 * NSEC_PER_SEC;
	while (atomic_load(v) < want && mono_now_ns() < deadline)
		sleep_ns(NSEC_PER_MSEC);
	CHECK_INT(atomic_load(v), want);
}

/*
 * A served queue starts threads for the keys it has, up to its maximum, and they end when idle:
 * one thread before the first key, four at most for twenty slow keys, one again after the
 * burst, which serves a delayed key; a RETRY result brings the key back rate-limited.
 */
static void test_served_workers(void)
{
	struct kube_workqueue *q = kube_workqueue_new("t", 10 * NSEC_PER_MSEC, NSEC_PER_SEC);
	char err[200];
	struct kube_serve sv = { q, 4, served_fn, NULL };
	CHECK_INT(kube_workqueue_serve(&sv, 1, 150 * NSEC_PER_MSEC, err, sizeof(err)), 0);
	CHECK_INT(workers_now(q), 1);
	char key[16];
	for (int i = 0; i < 20; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		kube_workqueue_add(q, key);
	}
	CHECK(workers_now(q) >= 1 && workers_now(q) <= 4);
	wait_for(&served_runs, 20);
	CHECK_INT(atomic_load(&served_peak), 4);
	int64_t deadline = mono_now_ns() + 10 * NSEC_PER_SEC;
	while (workers_now(q) > 1 && mono_now_ns() < deadline)
		sleep_ns(5 * NSEC_PER_MSEC);
	CHECK_INT(workers_now(q), 1);
	sleep_ns(300 * NSEC_PER_MSEC); /* the last one stays */
	CHECK_INT(workers_now(q), 1);
	kube_workqueue_add_after(q, "later", 30 * NSEC_PER_MSEC);
	wait_for(&served_runs, 21);
	kube_workqueue_add(q, "flaky"); /* RETRY once: back after 10 ms, then DONE */
	wait_for(&served_runs, 23);
	CHECK_INT(kube_workqueue_num_requeues(q, "flaky"), 0); /* forgotten after DONE */
	kube_workqueue_shutdown(q);
	kube_workqueue_wait_workers(q);
	CHECK_INT(workers_now(q), 0);
	kube_workqueue_free(q);
}

/* Stress: workers start and end (20 ms idle) while adders and delayed adds race them. */
#define SKEYS 64
static atomic_int s_gen[SKEYS], s_seen[SKEYS], s_active[SKEYS], s_overlap;
static struct kube_workqueue *sq;

static enum kube_work_result stress_fn(void *arg, const char *key)
{
	(void)arg;
	int i = atoi(key + 1);
	if (atomic_fetch_add(&s_active[i], 1) != 0)
		atomic_fetch_add(&s_overlap, 1);
	atomic_store(&s_seen[i], atomic_load(&s_gen[i]));
	if (i % 5 == 0)
		sleep_ns(200 * NSEC_PER_USEC);
	atomic_fetch_sub(&s_active[i], 1);
	return KUBE_WORK_DONE;
}

static void *stress_adder(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	char key[16];
	int64_t end = mono_now_ns() + 300 * NSEC_PER_MSEC;
	while (mono_now_ns() < end) {
		int i = rand_r(&seed) % SKEYS;
		snprintf(key, sizeof(key), "k%d", i);
		atomic_fetch_add(&s_gen[i], 1);
		if (rand_r(&seed) % 4 == 0)
			kube_workqueue_add_after(sq, key, (rand_r(&seed) % 30) * NSEC_PER_MSEC);
		else
			kube_workqueue_add(sq, key);
		if (rand_r(&seed) % 8 == 0)
			sleep_ns((rand_r(&seed) % 40) * NSEC_PER_MSEC); /* let workers go idle and end */
	}
	return NULL;
}

static void test_served_stress(void)
{
	sq = kube_workqueue_new("t", NSEC_PER_MSEC, NSEC_PER_SEC);
	struct kube_serve sv = { sq, 8, stress_fn, NULL };
	char err[200];
	CHECK_INT(kube_workqueue_serve(&sv, 1, 20 * NSEC_PER_MSEC, err, sizeof(err)), 0);
	pthread_t th[6];
	for (int i = 0; i < 6; i++)
		pthread_create(&th[i], NULL, stress_adder, (void *)(uintptr_t)(i + 1));
	for (int i = 0; i < 6; i++)
		pthread_join(th[i], NULL);
	/* Delayed adds are due within 30 ms; then the queue must drain to idle. */
	int64_t deadline = mono_now_ns() + 10 * NSEC_PER_SEC;
	int idle = 0;
	while (idle < 5 && mono_now_ns() < deadline) {
		struct kube_workqueue_metrics m;
		kube_workqueue_metrics(sq, &m);
		idle = (m.depth == 0 && m.unfinished == 0) ? idle + 1 : 0;
		sleep_ns(20 * NSEC_PER_MSEC);
	}
	int missing = 0;
	for (int i = 0; i < SKEYS; i++)
		missing += atomic_load(&s_seen[i]) != atomic_load(&s_gen[i]);
	CHECK_INT(missing, 0);
	CHECK_INT(atomic_load(&s_overlap), 0);
	kube_workqueue_shutdown(sq);
	kube_workqueue_wait_workers(sq);
	CHECK_INT(workers_now(sq), 0);
	kube_workqueue_free(sq);
}

/* The Prometheus text has client-go's names, cumulative buckets and one TYPE per family. */
static void test_render_metrics(void)
{
	struct kube_workqueue *a = kube_workqueue_new("csi-attacher-va", NSEC_PER_SEC, NSEC_PER_SEC);
	struct kube_workqueue *b = kube_workqueue_new("csi-attacher-pv", NSEC_PER_SEC, NSEC_PER_SEC);
	struct kube_workqueue *qs[2] = { a, b };
	struct strbuf sb = STRBUF_INIT;
	char *k;

	kube_workqueue_add(a, "x");
	kube_workqueue_add(a, "y");
	k = kube_workqueue_get(a);
	kube_workqueue_done(a, k);
	free(k);
	k = kube_workqueue_get(a); /* still being worked on while rendering */
	kube_workqueue_render_metrics(qs, 2, &sb);
	CHECK(strstr(sb.buf, "workqueue_adds_total{name=\"csi-attacher-va\"} 2\n") != NULL);
	CHECK(strstr(sb.buf, "workqueue_adds_total{name=\"csi-attacher-pv\"} 0\n") != NULL);
	CHECK(strstr(sb.buf, "workqueue_depth{name=\"csi-attacher-va\"} 0\n") != NULL);
	CHECK(strstr(sb.buf, "workqueue_work_duration_seconds_count{name=\"csi-attacher-va\"} 1\n") != NULL);
	CHECK(strstr(sb.buf, "workqueue_work_duration_seconds_bucket{name=\"csi-attacher-va\",le=\"10\"} 1\n") != NULL);
	CHECK(strstr(sb.buf, "workqueue_queue_duration_seconds_count{name=\"csi-attacher-va\"} 2\n") != NULL);
	CHECK(strstr(sb.buf, "workqueue_queue_duration_seconds_bucket{name=\"csi-attacher-va\",le=\"+Inf\"} 2\n") != NULL);
	CHECK(strstr(sb.buf, "workqueue_unfinished_work_seconds{name=\"csi-attacher-va\"} ") != NULL);
	/* one TYPE line per family even with two queues */
	const char *t = strstr(sb.buf, "# TYPE workqueue_depth gauge");
	CHECK(t && !strstr(t + 1, "# TYPE workqueue_depth gauge"));
	kube_workqueue_done(a, k);
	free(k);
	strbuf_release(&sb);
	kube_workqueue_shutdown(a);
	kube_workqueue_shutdown(b);
	kube_workqueue_free(a);
	kube_workqueue_free(b);
}

int main(void)
{
	RUN(test_dedup_and_order);
	RUN(test_rate_limited_backoff);
	RUN(test_add_after_order);
	RUN(test_shutdown_wakes_getters);
	RUN(test_shutdown_drain);
	RUN(test_eight_workers);
	RUN(test_last_idle_worker_runs);
	RUN(test_earlier_delay_rearms_timer);
	RUN(test_served_workers);
	RUN(test_served_stress);
	RUN(test_render_metrics);
	return CHECK_DONE();
}
