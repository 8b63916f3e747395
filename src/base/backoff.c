/*
 * backoff: exponential delays with jitter (see backoff.h).
 *
 * The random source is a xorshift64* generator behind a mutex: cheap, good enough for spreading
 * retries, and not for anything that needs unpredictability.
 */
#include "base/backoff.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t rng_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t rng_state;

double random_unit(void)
{
	uint64_t x;

	pthread_mutex_lock(&rng_lock);
	if (!rng_state) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		rng_state = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^
			    ((uint64_t)getpid() << 40) ^ 0x9e3779b97f4a7c15ULL;
	}
	x = rng_state;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	rng_state = x;
	pthread_mutex_unlock(&rng_lock);
	return (double)((x * 0x2545f4914f6cdd1dULL) >> 11) / (double)(1ULL << 53);
}

void backoff_init(struct backoff *b, int64_t start_ns, int64_t max_ns, double factor, double jitter)
{
	b->start_ns = start_ns > 0 ? start_ns : 1;
	b->max_ns = max_ns >= b->start_ns ? max_ns : b->start_ns;
	b->factor = factor >= 1.0 ? factor : 1.0;
	b->jitter = jitter > 0 ? jitter : 0;
	backoff_reset(b);
}

void backoff_reset(struct backoff *b)
{
	b->next_ns = 0;
	b->attempts = 0;
}

int64_t backoff_next(struct backoff *b)
{
	int64_t d;

	if (b->attempts == 0) {
		d = b->start_ns;
	} else {
		double grown = (double)b->next_ns * b->factor;
		d = grown >= (double)b->max_ns ? b->max_ns : (int64_t)grown;
	}
	b->next_ns = d;
	b->attempts++;
	if (b->jitter > 0) {
		double j = (double)d * b->jitter * random_unit();
		d = (double)d + j >= (double)b->max_ns ? b->max_ns : d + (int64_t)j;
	}
	return d;
}
