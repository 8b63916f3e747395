/*
 * kube ratelimit: a token bucket (client-go's flowcontrol.NewTokenBucketRateLimiter semantics).
 *
 * The bucket holds up to `burst` tokens and refills at `qps` tokens per second. kube_ratelimit_wait()
 * reserves one token and sleeps until it is due, so waiting callers are served in arrival order
 * and the long-run rate never exceeds qps. qps <= 0 disables limiting. Thread-safe.
 */
#ifndef KCSI_KUBE_RATELIMIT_H
#define KCSI_KUBE_RATELIMIT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct kube_ratelimit {
	pthread_mutex_t mu;
	double qps;
	double burst;
	double tokens;   /* may go negative: tokens reserved by sleeping callers */
	int64_t last_ns; /* mono time of the last refill */
};

void kube_ratelimit_init(struct kube_ratelimit *rl, double qps, int burst);
void kube_ratelimit_destroy(struct kube_ratelimit *rl);
/* Reserves a token; returns the delay in ns the caller must wait before using it (0 if none). */
int64_t kube_ratelimit_reserve(struct kube_ratelimit *rl);
/* Reserves a token and sleeps until it is due. */
void kube_ratelimit_wait(struct kube_ratelimit *rl);
/* Takes a token only if one is available now. */
bool kube_ratelimit_try(struct kube_ratelimit *rl);

#endif
