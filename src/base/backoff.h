/*
 * backoff: jittered exponential backoff.
 *
 * Each call to backoff_next() returns the delay to wait before the next attempt: first `start`,
 * then the previous delay times `factor`, never more than `max`. With jitter j (0..1) the returned
 * delay is d + rand[0, j*d), capped at max, so that many clients retrying together spread out.
 *
 * A struct backoff is plain data owned by its user; it is not thread-safe.
 */
#ifndef KCSI_BASE_BACKOFF_H
#define KCSI_BASE_BACKOFF_H

#include <stdint.h>

struct backoff {
	int64_t start_ns;
	int64_t max_ns;
	double factor;
	double jitter;
	int64_t next_ns; /* the un-jittered delay the next call returns; 0 before the first */
	unsigned attempts;
};

void backoff_init(struct backoff *b, int64_t start_ns, int64_t max_ns, double factor, double jitter);
int64_t backoff_next(struct backoff *b);
void backoff_reset(struct backoff *b);

/* A thread-safe uniform random number in [0, 1), seeded once from the clock and pid. */
double random_unit(void);

#endif
