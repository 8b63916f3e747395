/*
 * Reservation-style token bucket: a caller takes a token even when the bucket is empty, driving
 * the count negative, and sleeps for the time the refill needs to pay it back. Sleeping happens
 * outside the lock, so one slow caller never blocks the bookkeeping of others.
 */
#include "kube/ratelimit.h"

#include "base/timeutil.h"

void kube_ratelimit_init(struct kube_ratelimit *rl, double qps, int burst)
{
	pthread_mutex_init(&rl->mu, NULL);
	rl->qps = qps;
	rl->burst = burst > 0 ? burst : 1;
	rl->tokens = rl->burst;
	rl->last_ns = mono_now_ns();
}

void kube_ratelimit_destroy(struct kube_ratelimit *rl)
{
	pthread_mutex_destroy(&rl->mu);
}

static void refill(struct kube_ratelimit *rl, int64_t now)
{
	rl->tokens += (double)(now - rl->last_ns) / NSEC_PER_SEC * rl->qps;
	if (rl->tokens > rl->burst)
		rl->tokens = rl->burst;
	rl->last_ns = now;
}

int64_t kube_ratelimit_reserve(struct kube_ratelimit *rl)
{
	if (rl->qps <= 0)
		return 0;
	pthread_mutex_lock(&rl->mu);
	refill(rl, mono_now_ns());
	rl->tokens -= 1;
	int64_t wait = rl->tokens >= 0 ? 0 : (int64_t)(-rl->tokens / rl->qps * NSEC_PER_SEC);
	pthread_mutex_unlock(&rl->mu);
	return wait;
}

void kube_ratelimit_wait(struct kube_ratelimit *rl)
{
	int64_t d = kube_ratelimit_reserve(rl);
	if (d > 0)
		sleep_ns(d);
}

bool kube_ratelimit_try(struct kube_ratelimit *rl)
{
	if (rl->qps <= 0)
		return true;
	pthread_mutex_lock(&rl->mu);
	refill(rl, mono_now_ns());
	bool ok = rl->tokens >= 1;
	if (ok)
		rl->tokens -= 1;
	pthread_mutex_unlock(&rl->mu);
	return ok;
}
