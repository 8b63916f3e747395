/* Unit tests for base/backoff: growth, cap, jitter bounds, reset. */
#include "base/backoff.h"
#include "base/timeutil.h"
#include "check.h"

static void test_doubling_without_jitter(void)
{
	struct backoff b;

	backoff_init(&b, NSEC_PER_SEC, 5 * NSEC_PER_MIN, 2.0, 0);
	CHECK_INT(backoff_next(&b), NSEC_PER_SEC);
	CHECK_INT(backoff_next(&b), 2 * NSEC_PER_SEC);
	CHECK_INT(backoff_next(&b), 4 * NSEC_PER_SEC);
	for (int i = 0; i < 20; i++)
		backoff_next(&b);
	CHECK_INT(backoff_next(&b), 5 * NSEC_PER_MIN); /* capped at max, never beyond */
	backoff_reset(&b);
	CHECK_INT(backoff_next(&b), NSEC_PER_SEC);
}

static void test_jitter_bounds(void)
{
	struct backoff b;
	int64_t prev_base = 0;
	int differs = 0;

	backoff_init(&b, 100 * NSEC_PER_MSEC, 10 * NSEC_PER_SEC, 1.5, 0.5);
	for (int i = 0; i < 50; i++) {
		int64_t d = backoff_next(&b);
		CHECK(d >= b.next_ns);
		CHECK(d <= b.max_ns);
		CHECK(d <= b.next_ns + b.next_ns / 2);
		if (d != b.next_ns)
			differs++;
		CHECK(b.next_ns >= prev_base);
		prev_base = b.next_ns;
	}
	CHECK(differs > 10); /* jitter actually spreads the delays */
}

static void test_bad_parameters_are_clamped(void)
{
	struct backoff b;

	backoff_init(&b, 0, -5, 0.5, -1);
	CHECK(backoff_next(&b) >= 1);
	CHECK(backoff_next(&b) >= 1);
}

static void test_random_unit_range(void)
{
	double sum = 0;

	for (int i = 0; i < 10000; i++) {
		double r = random_unit();
		CHECK(r >= 0 && r < 1);
		sum += r;
	}
	CHECK(sum / 10000 > 0.45 && sum / 10000 < 0.55);
}

int main(void)
{
	RUN(test_doubling_without_jitter);
	RUN(test_jitter_bounds);
	RUN(test_bad_parameters_are_clamped);
	RUN(test_random_unit_range);
	return CHECK_DONE();
}
