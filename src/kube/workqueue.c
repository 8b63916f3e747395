/*
 * One mutex guards everything: a FIFO ring of queued keys, the `dirty` set (keys queued or to be
 * requeued; value = the mono time they were queued), the `processing` set (value = the time
 * processing began), the failure counts, a min-heap of delayed keys, and the idle workers.
 *
 * Idle workers wait on a semaphore of their own, kept in a LIFO stack. A key that arrives while
 * one waits is handed to the worker on top of the stack: the adder moves the key to `processing`
 * for it and posts its semaphore after unlocking, so the woken worker returns without taking the
 * mutex again (a condition variable would wake it into the adder's still-held mutex), and the
 * worker that went idle last, whose stack and cache are warm, runs next. With more workers than
 * concurrent keys, the ones at the bottom of the stack stay asleep.
 *
 * The heap has no timer thread: one idle worker, the timer, sleeps until the earliest delayed
 * key is due and moves due keys into the queue itself, so delayed work costs nothing while
 * nobody waits. An add_after() that makes an earlier deadline wakes the timer to sleep again
 * for less, or makes an idle worker the timer when there is none.
 *
 * A served queue (kube_workqueue_serve) starts its worker threads itself: when a key is queued
 * that no idle or starting worker will take, up to the maximum. A worker idle for the idle
 * time ends, unless it is the timer of delayed keys; the last one never leaves delayed keys
 * untimed, and a delayed add to a queue without workers starts one. So a controller with 100
 * workers runs as many threads as it has concurrent keys, and a burst's threads, with the
 * stack pages they touched, end after it.
 */
#include "kube/workqueue.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/strbuf.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "kube/hmap.h"

struct delayed {
	int64_t due;
	char *key;
};

/* A worker blocked in get(), on its own stack. */
struct waiter {
	struct waiter *next; /* in the idle stack, then in the wake list */
	sem_t sem;           /* posted once, after the one who took it off the stack unlocked */
	char *key;           /* the key handed over, already in `processing`; NULL: look again */
	bool taken;          /* off the stack (or the timer seat): a post is coming */
};

struct kube_workqueue {
	char *name;
	int64_t retry_start, retry_max;
	pthread_mutex_t mu;
	pthread_cond_t idle_cond; /* signalled when nothing is queued or in flight while draining */
	struct waiter *idle;      /* idle workers, the last one to go idle on top */
	struct waiter *timer;     /* the idle worker sleeping until the earliest delayed key */
	struct waiter *wake;      /* taken waiters to post once the mutex is released */
	char **ring; /* queued keys (pointers owned by the ring) */
	size_t head, len, cap;
	struct kube_hmap dirty;      /* key -> queued time (int64 cast) */
	struct kube_hmap processing; /* key -> start time */
	struct kube_hmap failures;   /* key -> count */
	struct delayed *heap;
	size_t nheap, capheap;
	bool shutdown, draining;
	struct kube_workqueue_metrics m;
	/* kube_workqueue_serve() */
	kube_work_fn fn;
	void *fn_arg;
	int max_workers;
	int64_t idle_ns;          /* a worker idle this long ends; 0: never */
	int nworkers;             /* running, counted from the decision to start one */
	int starting;             /* started, not yet waiting for a key */
	bool start_failed;        /* logged once */
	bool hold;                /* no more workers until every queue served with it has its first */
	pthread_cond_t workers_gone; /* nworkers reached 0 */
};

/* Index of the smallest bucket bound (10ns * 10^i) >= ns; KUBE_WQ_BUCKETS beyond 10 s. */
static size_t bucket_of(int64_t ns)
{
	int64_t bound = 10;
	size_t i;

	for (i = 0; i < KUBE_WQ_BUCKETS && ns > bound; i++)
		bound *= 10;
	return i;
}

struct kube_workqueue *kube_workqueue_new(const char *name, int64_t retry_start_ns,
					  int64_t retry_max_ns)
{
	struct kube_workqueue *q = xcalloc(1, sizeof(*q));
	q->name = xstrdup(name ? name : "");
	q->retry_start = retry_start_ns > 0 ? retry_start_ns : NSEC_PER_SEC;
	q->retry_max = retry_max_ns >= q->retry_start ? retry_max_ns : q->retry_start;
	pthread_mutex_init(&q->mu, NULL);
	pthread_cond_init(&q->idle_cond, NULL);
	pthread_cond_init(&q->workers_gone, NULL);
	return q;
}

void kube_workqueue_free(struct kube_workqueue *q)
{
	if (!q)
		return;
	for (size_t i = 0; i < q->len; i++)
		free(q->ring[(q->head + i) % q->cap]);
	free(q->ring);
	for (size_t i = 0; i < q->nheap; i++)
		free(q->heap[i].key);
	free(q->heap);
	kube_hmap_clear(&q->dirty);
	kube_hmap_clear(&q->processing);
	kube_hmap_clear(&q->failures);
	pthread_mutex_destroy(&q->mu);
	pthread_cond_destroy(&q->idle_cond);
	pthread_cond_destroy(&q->workers_gone);
	free(q->name);
	free(q);
}

/* Moves the queued keys to a ring of ncap slots (>= len). */
static void ring_resize(struct kube_workqueue *q, size_t ncap)
{
	char **nr = xmalloc(ncap * sizeof(*nr));
	for (size_t i = 0; i < q->len; i++)
		nr[i] = q->ring[(q->head + i) % q->cap];
	free(q->ring);
	q->ring = nr;
	q->cap = ncap;
	q->head = 0;
}

static void ring_push(struct kube_workqueue *q, const char *key)
{
	if (q->len == q->cap)
		ring_resize(q, q->cap ? q->cap * 2 : 16);
	q->ring[(q->head + q->len) % q->cap] = xstrdup(key);
	q->len++;
}

static char *ring_pop(struct kube_workqueue *q)
{
	char *k = q->ring[q->head];
	q->head = (q->head + 1) % q->cap;
	q->len--;
	if (q->cap > 64 && q->len * 8 < q->cap) /* after a burst: 10,000 keys were 80 KB */
		ring_resize(q, q->cap / 4);
	return k;
}

/* Takes the first queued key for the caller, with q->mu held: it moves to `processing`. */
static char *take_locked(struct kube_workqueue *q)
{
	char *key = ring_pop(q);
	int64_t now = mono_now_ns();
	int64_t queued = (int64_t)(intptr_t)kube_hmap_del(&q->dirty, key);
	q->m.queue_latency_ns_total += now - queued;
	q->m.queue_latency_buckets[bucket_of(now - queued)]++;
	kube_hmap_put(&q->processing, key, (void *)(intptr_t)now);
	return key;
}

/* Takes waiter w off the stack (or the timer seat) with q->mu held; it is posted on unlock. */
static void wake_locked(struct kube_workqueue *q, struct waiter *w, char *key)
{
	if (w == q->timer)
		q->timer = NULL;
	else
		q->idle = w->next;
	w->taken = true;
	w->key = key;
	w->next = q->wake;
	q->wake = w;
}

/* Hands queued keys to idle workers, the top of the stack first and the timer last. */
static void dispatch_locked(struct kube_workqueue *q)
{
	while (q->len && (q->idle || q->timer) && !q->shutdown)
		wake_locked(q, q->idle ? q->idle : q->timer, take_locked(q));
}

static void *serve_main(void *arg);

/* How many workers a served queue should start now (q->mu held; counted as running). */
static int workers_to_start(struct kube_workqueue *q)
{
	if (!q->fn || q->hold || (q->shutdown && !q->draining))
		return 0;
	/* Keys no idle worker took (dispatch ran) beyond those the starting ones will take. */
	size_t want = q->len > (size_t)q->starting ? q->len - (size_t)q->starting : 0;
	if (!want && q->nheap && q->nworkers == 0 && !q->shutdown)
		want = 1; /* delayed keys need a timer */
	size_t room = q->max_workers > q->nworkers ? (size_t)(q->max_workers - q->nworkers) : 0;
	int n = (int)(want < room ? want : room);
	q->nworkers += n;
	q->starting += n;
	return n;
}

/* Starts n workers counted already; returns the pthread_create error of the first that failed. */
static int start_workers(struct kube_workqueue *q, int n)
{
	pthread_attr_t attr;
	int rc = 0;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, KUBE_WORKER_STACK);
	for (; n > 0; n--) {
		pthread_t t;
		rc = pthread_create(&t, &attr, serve_main, q);
		if (rc == 0)
			continue;
		/* Fewer threads: the running ones take the keys (there is always one). */
		pthread_mutex_lock(&q->mu);
		q->nworkers -= n;
		q->starting -= n;
		int running = q->nworkers;
		bool log = !q->start_failed;
		q->start_failed = true;
		if (!q->nworkers)
			pthread_cond_broadcast(&q->workers_gone);
		pthread_mutex_unlock(&q->mu);
		if (log && running)
			KLOG_W("Cannot start worker thread %d of %d for queue %s: %s; going on with %d "
			       "(logged once)", running + 1, q->max_workers, q->name, strerror(rc),
			       running);
		break;
	}
	pthread_attr_destroy(&attr);
	return rc;
}

/* Releases q->mu, then posts the waiters taken meanwhile and starts the workers needed. */
static void unlock_and_wake(struct kube_workqueue *q)
{
	struct waiter *w = q->wake;
	q->wake = NULL;
	int start = workers_to_start(q);
	pthread_mutex_unlock(&q->mu);
	while (w) {
		struct waiter *next = w->next; /* w may be gone once posted */
		sem_post(&w->sem);
		w = next;
	}
	if (start) /* q stays valid: the workers counted keep it from being freed */
		(void)start_workers(q, start);
}

/* The core add, with q->mu held; the caller dispatches. */
static void add_locked(struct kube_workqueue *q, const char *key)
{
	if (q->shutdown || kube_hmap_has(&q->dirty, key))
		return;
	q->m.adds++;
	kube_hmap_put(&q->dirty, key, (void *)(intptr_t)mono_now_ns());
	if (kube_hmap_has(&q->processing, key))
		return; /* done() queues it */
	ring_push(q, key);
}

void kube_workqueue_add(struct kube_workqueue *q, const char *key)
{
	pthread_mutex_lock(&q->mu);
	add_locked(q, key);
	dispatch_locked(q);
	unlock_and_wake(q);
}

static void heap_push(struct kube_workqueue *q, int64_t due, const char *key)
{
	if (q->nheap == q->capheap) {
		q->capheap = q->capheap ? q->capheap * 2 : 16;
		q->heap = xrealloc(q->heap, q->capheap * sizeof(*q->heap));
	}
	size_t i = q->nheap++;
	q->heap[i] = (struct delayed){ due, xstrdup(key) };
	while (i && q->heap[(i - 1) / 2].due > q->heap[i].due) {
		struct delayed t = q->heap[i];
		q->heap[i] = q->heap[(i - 1) / 2];
		q->heap[(i - 1) / 2] = t;
		i = (i - 1) / 2;
	}
}

static struct delayed heap_pop(struct kube_workqueue *q)
{
	struct delayed top = q->heap[0];
	q->heap[0] = q->heap[--q->nheap];
	size_t i = 0;
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < q->nheap && q->heap[l].due < q->heap[m].due)
			m = l;
		if (r < q->nheap && q->heap[r].due < q->heap[m].due)
			m = r;
		if (m == i)
			break;
		struct delayed t = q->heap[i];
		q->heap[i] = q->heap[m];
		q->heap[m] = t;
		i = m;
	}
	return top;
}

void kube_workqueue_add_after(struct kube_workqueue *q, const char *key, int64_t delay_ns)
{
	pthread_mutex_lock(&q->mu);
	if (delay_ns <= 0) {
		add_locked(q, key);
		dispatch_locked(q);
	} else if (!q->shutdown) {
		heap_push(q, mono_now_ns() + delay_ns, key);
		/* A new earliest deadline: the timer sleeps again for less, or a worker becomes it. */
		if (!strcmp(q->heap[0].key, key) && (q->timer || q->idle))
			wake_locked(q, q->timer ? q->timer : q->idle, NULL);
	}
	unlock_and_wake(q);
}

void kube_workqueue_add_rate_limited(struct kube_workqueue *q, const char *key)
{
	pthread_mutex_lock(&q->mu);
	uintptr_t n = (uintptr_t)kube_hmap_get(&q->failures, key);
	kube_hmap_put(&q->failures, key, (void *)(n + 1));
	int64_t d = q->retry_start;
	for (uintptr_t i = 0; i < n && d < q->retry_max; i++)
		d *= 2;
	if (d > q->retry_max)
		d = q->retry_max;
	q->m.retries++;
	pthread_mutex_unlock(&q->mu);
	kube_workqueue_add_after(q, key, d);
}

void kube_workqueue_forget(struct kube_workqueue *q, const char *key)
{
	pthread_mutex_lock(&q->mu);
	kube_hmap_del(&q->failures, key);
	pthread_mutex_unlock(&q->mu);
}

unsigned kube_workqueue_num_requeues(struct kube_workqueue *q, const char *key)
{
	pthread_mutex_lock(&q->mu);
	unsigned n = (unsigned)(uintptr_t)kube_hmap_get(&q->failures, key);
	pthread_mutex_unlock(&q->mu);
	return n;
}

/* Moves due delayed keys into the queue; returns the time until the next one (or -1). */
static int64_t promote_due(struct kube_workqueue *q)
{
	int64_t now = mono_now_ns();
	while (q->nheap && q->heap[0].due <= now) {
		struct delayed d = heap_pop(q);
		add_locked(q, d.key);
		free(d.key);
	}
	return q->nheap ? q->heap[0].due - now : -1;
}

/* Sleeps until posted or, for the timer, until deadline; true if the post was consumed. */
static bool waiter_sleep(struct waiter *w, int64_t deadline)
{
	if (deadline < 0) {
		while (sem_wait(&w->sem))
			; /* EINTR */
		return true;
	}
	struct timespec ts = { deadline / NSEC_PER_SEC, deadline % NSEC_PER_SEC };
	for (;;) {
		if (!sem_clockwait(&w->sem, CLOCK_MONOTONIC, &ts))
			return true;
		if (errno == ETIMEDOUT)
			return false;
	}
}

/*
 * A worker ending idle marks the end of a burst: the heap the burst freed (queue entries,
 * decode buffers, in the arenas of threads now gone) goes back to the kernel. At most once a
 * second for the process, as many workers end together.
 */
static void trim_heap(void)
{
	static _Atomic int64_t last;
	int64_t now = mono_now_ns(), prev = atomic_load(&last);
	if (now - prev >= NSEC_PER_SEC && atomic_compare_exchange_strong(&last, &prev, now))
		malloc_trim(0);
}

/* Unlinks w from the idle stack (q->mu held). */
static void idle_remove(struct kube_workqueue *q, struct waiter *w)
{
	for (struct waiter **p = &q->idle; *p; p = &(*p)->next)
		if (*p == w) {
			*p = w->next;
			return;
		}
}

/*
 * The next key, or NULL after shutdown or, for a worker of a served queue (worker), after
 * idle_ns without work; such a worker is no longer counted when NULL comes back.
 */
static char *get_key(struct kube_workqueue *q, bool worker)
{
	struct waiter w = { 0 };
	char *key = NULL;
	bool idle_exit = false;

	sem_init(&w.sem, 0, 0);
	pthread_mutex_lock(&q->mu);
	int64_t idle_until = worker && q->idle_ns > 0 ? mono_now_ns() + q->idle_ns : -1;
	for (;;) {
		int64_t wait = promote_due(q);
		if (q->len && (!q->shutdown || q->draining)) {
			key = take_locked(q);
			dispatch_locked(q); /* keys that came due beyond this one */
			break;
		}
		if (q->shutdown)
			break;
		w.key = NULL;
		w.taken = false;
		int64_t deadline = idle_until;
		bool timer = wait >= 0 && !q->timer;
		if (timer) {
			q->timer = &w;
			deadline = mono_now_ns() + wait;
		} else {
			w.next = q->idle;
			q->idle = &w;
		}
		unlock_and_wake(q);
		bool posted = waiter_sleep(&w, deadline);
		pthread_mutex_lock(&q->mu);
		if (!w.taken) {
			/* The clock ran out: the timer's for the earliest delayed key, or ours. */
			if (timer) {
				q->timer = NULL;
				continue;
			}
			idle_remove(q, &w);
			if ((q->nheap && !q->timer) || q->nworkers <= 1) {
				/* Stay: as the timer of the delayed keys, or as the last worker. */
				idle_until = mono_now_ns() + q->idle_ns;
				continue;
			}
			idle_exit = true;
			break;
		}
		if (!posted) {
			/* Taken as the clock ran out: the post is coming; consume it. */
			pthread_mutex_unlock(&q->mu);
			waiter_sleep(&w, -1);
			pthread_mutex_lock(&q->mu);
		}
		if (w.key) {
			key = w.key;
			break;
		}
	}
	if (!key && worker && --q->nworkers == 0)
		pthread_cond_broadcast(&q->workers_gone);
	unlock_and_wake(q);
	sem_destroy(&w.sem);
	if (idle_exit)
		trim_heap(); /* q may be gone now */
	return key;
}

char *kube_workqueue_get(struct kube_workqueue *q)
{
	return get_key(q, false);
}

static void *serve_main(void *arg)
{
	struct kube_workqueue *q = arg;
	char *key;

	pthread_mutex_lock(&q->mu);
	q->starting--;
	pthread_mutex_unlock(&q->mu);
	/* After the last get_key() this thread no longer counts and must not touch q. */
	while ((key = get_key(q, true))) {
		switch (q->fn(q->fn_arg, key)) {
		case KUBE_WORK_DONE:
			kube_workqueue_forget(q, key);
			break;
		case KUBE_WORK_RETRY:
			kube_workqueue_add_rate_limited(q, key);
			break;
		case KUBE_WORK_AGAIN:
			kube_workqueue_add(q, key);
			break;
		case KUBE_WORK_LATER:
			break;
		}
		kube_workqueue_done(q, key);
		free(key);
	}
	return NULL;
}

int kube_workqueue_serve(const struct kube_serve *qs, size_t n, int64_t idle_ns, char *err,
			 size_t errlen)
{
	/* First workers first: a burst queued on one queue must not take the threads the system
	 * allows before every queue has one. */
	for (size_t i = 0; i < n; i++) {
		struct kube_workqueue *q = qs[i].q;
		pthread_mutex_lock(&q->mu);
		q->fn = qs[i].fn;
		q->fn_arg = qs[i].arg;
		q->max_workers = qs[i].max_workers > 0 ? qs[i].max_workers : 1;
		q->idle_ns = idle_ns;
		q->hold = true;
		q->nworkers++; /* the first worker, which stays */
		q->starting++;
		pthread_mutex_unlock(&q->mu);
		int rc = start_workers(q, 1);
		if (rc) {
			errbuf_printf(err, errlen, "cannot start a worker thread for queue %s: %s",
				      q->name, strerror(rc));
			pthread_mutex_lock(&q->mu);
			q->fn = NULL;
			pthread_mutex_unlock(&q->mu);
			return -1;
		}
	}
	for (size_t i = 0; i < n; i++) {
		pthread_mutex_lock(&qs[i].q->mu);
		qs[i].q->hold = false;
		unlock_and_wake(qs[i].q); /* keys queued before: start their workers */
	}
	return 0;
}

void kube_workqueue_wait_workers(struct kube_workqueue *q)
{
	pthread_mutex_lock(&q->mu);
	while (q->nworkers)
		pthread_cond_wait(&q->workers_gone, &q->mu);
	pthread_mutex_unlock(&q->mu);
}

void kube_workqueue_done(struct kube_workqueue *q, const char *key)
{
	pthread_mutex_lock(&q->mu);
	if (kube_hmap_has(&q->processing, key)) {
		int64_t start = (int64_t)(intptr_t)kube_hmap_del(&q->processing, key);
		int64_t took = mono_now_ns() - start;
		q->m.work_duration_ns_total += took;
		q->m.work_duration_buckets[bucket_of(took)]++;
		q->m.processed++;
		if (kube_hmap_has(&q->dirty, key) && !q->shutdown) {
			ring_push(q, key);
			dispatch_locked(q);
		}
		if (q->draining && !q->len && !q->processing.len)
			pthread_cond_broadcast(&q->idle_cond);
	}
	unlock_and_wake(q);
}

/* Wakes every idle worker to look again, with q->mu held. */
static void wake_all_locked(struct kube_workqueue *q)
{
	while (q->idle || q->timer)
		wake_locked(q, q->idle ? q->idle : q->timer, NULL);
}

void kube_workqueue_shutdown(struct kube_workqueue *q)
{
	pthread_mutex_lock(&q->mu);
	q->shutdown = true;
	wake_all_locked(q);
	unlock_and_wake(q);
}

void kube_workqueue_shutdown_drain(struct kube_workqueue *q)
{
	pthread_mutex_lock(&q->mu);
	q->shutdown = true;
	q->draining = true;
	for (size_t i = 0; i < q->nheap; i++) /* delayed keys are not waited for */
		free(q->heap[i].key);
	q->nheap = 0;
	wake_all_locked(q); /* they take the queued keys; get() never waits after shutdown */
	unlock_and_wake(q);
	pthread_mutex_lock(&q->mu);
	while (q->len || q->processing.len)
		pthread_cond_wait(&q->idle_cond, &q->mu);
	pthread_mutex_unlock(&q->mu);
}

bool kube_workqueue_shutting_down(struct kube_workqueue *q)
{
	pthread_mutex_lock(&q->mu);
	bool s = q->shutdown;
	pthread_mutex_unlock(&q->mu);
	return s;
}

size_t kube_workqueue_len(struct kube_workqueue *q)
{
	pthread_mutex_lock(&q->mu);
	size_t n = q->len;
	pthread_mutex_unlock(&q->mu);
	return n;
}

void kube_workqueue_metrics(struct kube_workqueue *q, struct kube_workqueue_metrics *m)
{
	pthread_mutex_lock(&q->mu);
	*m = q->m;
	m->depth = q->len;
	m->unfinished = q->processing.len;
	m->workers = (size_t)q->nworkers;
	m->idle_workers = q->timer != NULL;
	for (struct waiter *w = q->idle; w; w = w->next)
		m->idle_workers++;
	int64_t now = mono_now_ns(), longest = 0, total = 0;
	for (size_t i = 0; i < q->processing.cap; i++)
		if (q->processing.slots[i].key) {
			int64_t d = now - (int64_t)(intptr_t)q->processing.slots[i].value;
			total += d;
			if (d > longest)
				longest = d;
		}
	m->longest_running_ns = longest;
	m->unfinished_work_ns = total;
	pthread_mutex_unlock(&q->mu);
}

static void render_histogram(struct strbuf *out, const char *metric, const char *queue,
			     const uint64_t *buckets, int64_t sum_ns, uint64_t n)
{
	uint64_t cum = 0;
	double bound = 1e-8;

	for (size_t i = 0; i < KUBE_WQ_BUCKETS; i++, bound *= 10) {
		cum += buckets[i];
		strbuf_addf(out, "%s_bucket{name=\"%s\",le=\"%g\"} %llu\n", metric, queue, bound,
			    (unsigned long long)cum);
	}
	strbuf_addf(out, "%s_bucket{name=\"%s\",le=\"+Inf\"} %llu\n", metric, queue,
		    (unsigned long long)n);
	strbuf_addf(out, "%s_sum{name=\"%s\"} %.9f\n%s_count{name=\"%s\"} %llu\n", metric, queue,
		    (double)sum_ns / 1e9, metric, queue, (unsigned long long)n);
}

void kube_workqueue_render_metrics(struct kube_workqueue *const *qs, size_t n, struct strbuf *out)
{
	struct kube_workqueue_metrics *m = xcalloc(n ? n : 1, sizeof(*m));
	size_t i;

	for (i = 0; i < n; i++)
		kube_workqueue_metrics(qs[i], &m[i]);
	strbuf_addstr(out, "# HELP workqueue_depth Keys waiting in the queue now\n"
			   "# TYPE workqueue_depth gauge\n");
	for (i = 0; i < n; i++)
		strbuf_addf(out, "workqueue_depth{name=\"%s\"} %zu\n", qs[i]->name, m[i].depth);
	strbuf_addstr(out, "# HELP workqueue_adds_total Keys added to the queue\n"
			   "# TYPE workqueue_adds_total counter\n");
	for (i = 0; i < n; i++)
		strbuf_addf(out, "workqueue_adds_total{name=\"%s\"} %llu\n", qs[i]->name,
			    (unsigned long long)m[i].adds);
	strbuf_addstr(out, "# HELP workqueue_retries_total Keys added again after a failure (rate-limited adds)\n"
			   "# TYPE workqueue_retries_total counter\n");
	for (i = 0; i < n; i++)
		strbuf_addf(out, "workqueue_retries_total{name=\"%s\"} %llu\n", qs[i]->name,
			    (unsigned long long)m[i].retries);
	strbuf_addstr(out, "# HELP workqueue_queue_duration_seconds Seconds a key waited in the queue before a worker took it\n"
			   "# TYPE workqueue_queue_duration_seconds histogram\n");
	for (i = 0; i < n; i++)
		render_histogram(out, "workqueue_queue_duration_seconds", qs[i]->name,
				 m[i].queue_latency_buckets, m[i].queue_latency_ns_total,
				 m[i].processed + m[i].unfinished);
	strbuf_addstr(out, "# HELP workqueue_work_duration_seconds Seconds a worker spent on a key\n"
			   "# TYPE workqueue_work_duration_seconds histogram\n");
	for (i = 0; i < n; i++)
		render_histogram(out, "workqueue_work_duration_seconds", qs[i]->name,
				 m[i].work_duration_buckets, m[i].work_duration_ns_total,
				 m[i].processed);
	strbuf_addstr(out, "# HELP workqueue_unfinished_work_seconds Seconds spent so far on the keys being worked on now\n"
			   "# TYPE workqueue_unfinished_work_seconds gauge\n");
	for (i = 0; i < n; i++)
		strbuf_addf(out, "workqueue_unfinished_work_seconds{name=\"%s\"} %.9f\n", qs[i]->name,
			    (double)m[i].unfinished_work_ns / 1e9);
	strbuf_addstr(out, "# HELP workqueue_longest_running_processor_seconds Seconds the longest-running worker has spent on its key\n"
			   "# TYPE workqueue_longest_running_processor_seconds gauge\n");
	for (i = 0; i < n; i++)
		strbuf_addf(out, "workqueue_longest_running_processor_seconds{name=\"%s\"} %.9f\n",
			    qs[i]->name, (double)m[i].longest_running_ns / 1e9);
	free(m);
}
