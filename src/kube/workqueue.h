/*
 * kube workqueue: client-go's rate-limited work queue for string keys.
 *
 * Semantics (what controllers rely on):
 *   - a key is queued at most once, however often it is added while waiting;
 *   - a key is handed to one worker at a time: added while being processed, it is queued again
 *     only after kube_workqueue_done();
 *   - add_after() queues a key after a delay; add_rate_limited() after the key's own exponential
 *     delay (start, doubling per failure, capped at max) until forget() resets it;
 *   - get() blocks until a key is ready or the queue shuts down (then returns NULL);
 *   - after shutdown, adds are ignored and get() returns NULL at once (keys still queued are
 *     dropped); shutdown_drain() instead lets workers take the keys already queued and returns
 *     once they and every key in flight are done (client-go's ShutDownWithDrain).
 *
 * get() returns a malloc'd copy of the key that the caller frees after done(). Thread-safe.
 *
 * Metrics (snapshot with kube_workqueue_metrics): depth, adds, retries, and the latency a key
 * waited in the queue and the time it was processed, as totals and counts.
 */
#ifndef KCSI_KUBE_WORKQUEUE_H
#define KCSI_KUBE_WORKQUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kube_workqueue;

/* client-go's workqueue histogram buckets: 10ns, 100ns, ..., 10s (ExponentialBuckets(1e-8, 10, 10)). */
#define KUBE_WQ_BUCKETS 10

struct kube_workqueue_metrics {
	size_t depth;
	uint64_t adds;
	uint64_t retries;
	uint64_t processed;
	int64_t queue_latency_ns_total; /* sum over processed keys of time from queued to get */
	int64_t work_duration_ns_total; /* sum over processed keys of time from get to done */
	int64_t longest_running_ns;     /* of the keys being processed now */
	int64_t unfinished_work_ns;     /* sum of how long each key being processed has run */
	size_t unfinished;              /* keys being processed now */
	size_t idle_workers;            /* workers blocked in get() now (not rendered) */
	size_t workers;                 /* threads of a served queue now (not rendered) */
	/* Counts per bucket, not cumulative: slot i holds values in (bound i-1, bound i]; the last
	 * slot holds values above 10 s. */
	uint64_t queue_latency_buckets[KUBE_WQ_BUCKETS + 1];
	uint64_t work_duration_buckets[KUBE_WQ_BUCKETS + 1];
};

/* name is for logs and metrics; start/max are --retry-interval-start / --retry-interval-max. */
struct kube_workqueue *kube_workqueue_new(const char *name, int64_t retry_start_ns,
					  int64_t retry_max_ns);
void kube_workqueue_free(struct kube_workqueue *q);

void kube_workqueue_add(struct kube_workqueue *q, const char *key);
void kube_workqueue_add_after(struct kube_workqueue *q, const char *key, int64_t delay_ns);
void kube_workqueue_add_rate_limited(struct kube_workqueue *q, const char *key);
/* Forgets the key's failures (its next rate-limited delay is the start value again). */
void kube_workqueue_forget(struct kube_workqueue *q, const char *key);
/* How many times the key was added rate-limited since the last forget. */
unsigned kube_workqueue_num_requeues(struct kube_workqueue *q, const char *key);

/* Blocks for a key; NULL after shutdown. Free the key after calling done(). */
char *kube_workqueue_get(struct kube_workqueue *q);
void kube_workqueue_done(struct kube_workqueue *q, const char *key);

/*
 * A served queue runs its own workers: one from the start, which stays, and more started when
 * a key finds no idle worker, up to max_workers, each ending after idle_ns without a key (0:
 * never; the timer of delayed keys stays). A thread the system refuses later is logged once
 * and the running workers take its keys. fn handles a key; its result says what happens to it
 * then: DONE forgets its failures, RETRY adds it rate-limited, AGAIN adds it at once, LATER
 * nothing (fn added it with a delay of its own; its failures stay).
 *
 * kube_workqueue_serve() serves a component's n queues at once: every queue gets its first
 * worker before any gets more. Returns 0, or -1 with err when a first worker could not start
 * (shut down and wait for the queues as usual then). Stop with shutdown() (or
 * shutdown_drain()), then wait_workers(), then free.
 */
enum kube_work_result { KUBE_WORK_DONE, KUBE_WORK_RETRY, KUBE_WORK_AGAIN, KUBE_WORK_LATER };
typedef enum kube_work_result (*kube_work_fn)(void *arg, const char *key);
struct kube_serve {
	struct kube_workqueue *q;
	int max_workers;
	kube_work_fn fn;
	void *arg;
};
#define KUBE_WORKER_STACK (512 * 1024)
#define KUBE_WORKER_IDLE_NS (30 * 1000000000LL) /* the idle time the components use */
int kube_workqueue_serve(const struct kube_serve *qs, size_t n, int64_t idle_ns, char *err,
			 size_t errlen);
/* Blocks until every worker of a served queue has ended (after shutdown). */
void kube_workqueue_wait_workers(struct kube_workqueue *q);

void kube_workqueue_shutdown(struct kube_workqueue *q);
/* Blocks until the queued and in-flight keys are done; needs running workers. */
void kube_workqueue_shutdown_drain(struct kube_workqueue *q);
bool kube_workqueue_shutting_down(struct kube_workqueue *q);
size_t kube_workqueue_len(struct kube_workqueue *q);
void kube_workqueue_metrics(struct kube_workqueue *q, struct kube_workqueue_metrics *m);

struct strbuf;
/*
 * Appends the Prometheus text of n queues with client-go's workqueue metric names and a
 * name="<queue name>" label: workqueue_depth, workqueue_adds_total, workqueue_retries_total,
 * workqueue_queue_duration_seconds, workqueue_work_duration_seconds (histograms),
 * workqueue_unfinished_work_seconds, workqueue_longest_running_processor_seconds.
 */
void kube_workqueue_render_metrics(struct kube_workqueue *const *qs, size_t n, struct strbuf *out);

#endif
