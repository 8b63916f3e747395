/* Unit tests for base/timeutil: Go durations both ways, RFC 3339, clocks. */
#include "base/timeutil.h"
#include "check.h"

static int64_t parse_ok(const char *s)
{
	int64_t ns = -12345;
	char err[128];

	if (duration_parse(s, &ns, err, sizeof(err)) != 0) {
		fprintf(stderr, "unexpected error for %s: %s\n", s, err);
		check_failures++;
	}
	return ns;
}

static void test_duration_parse(void)
{
	CHECK_INT(parse_ok("15s"), 15 * NSEC_PER_SEC);
	CHECK_INT(parse_ok("1m30s"), 90 * NSEC_PER_SEC);
	CHECK_INT(parse_ok("500ms"), 500 * NSEC_PER_MSEC);
	CHECK_INT(parse_ok("1h2m3.5s"), 3723 * NSEC_PER_SEC + 500 * NSEC_PER_MSEC);
	CHECK_INT(parse_ok("0"), 0);
	CHECK_INT(parse_ok("-0"), 0);
	CHECK_INT(parse_ok("-1.5h"), -90 * NSEC_PER_MIN);
	CHECK_INT(parse_ok("+5m"), 5 * NSEC_PER_MIN);
	CHECK_INT(parse_ok("1us"), 1000);
	CHECK_INT(parse_ok("1\xc2\xb5s"), 1000);
	CHECK_INT(parse_ok("10ns"), 10);
	CHECK_INT(parse_ok(".5s"), 500 * NSEC_PER_MSEC);
	CHECK_INT(parse_ok("1.s"), NSEC_PER_SEC);
	CHECK_INT(parse_ok("2562047h"), 2562047 * NSEC_PER_HOUR);
}

static void test_duration_parse_errors(void)
{
	const char *bad[] = { "", "s", "10", "1x", "1.5", ".s", "-", "1m30", "abc", "1s ",
			      "3000000h", "9223372036854775808ns", "1h-1m" };
	char err[128];
	int64_t ns;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		if (duration_parse(bad[i], &ns, err, sizeof(err)) == 0) {
			fprintf(stderr, "accepted bad duration \"%s\"\n", bad[i]);
			check_failures++;
		}
		CHECK(strstr(err, "time: ") == err);
	}
	duration_parse("10", &ns, err, sizeof(err));
	CHECK_STR(err, "time: missing unit in duration \"10\"");
	duration_parse("1x", &ns, err, sizeof(err));
	CHECK_STR(err, "time: unknown unit in duration \"1x\"");
}

static void check_fmt(int64_t ns, const char *want)
{
	char buf[DURATION_BUFLEN];

	duration_format(ns, buf, sizeof(buf));
	CHECK_STR(buf, want);
}

static void test_duration_format(void)
{
	check_fmt(0, "0s");
	check_fmt(1, "1ns");
	check_fmt(1500, "1.5\xc2\xb5s");
	check_fmt(500 * NSEC_PER_MSEC, "500ms");
	check_fmt(15 * NSEC_PER_SEC, "15s");
	check_fmt(90 * NSEC_PER_SEC, "1m30s");
	check_fmt(5 * NSEC_PER_MIN, "5m0s");
	check_fmt(10 * NSEC_PER_MIN, "10m0s");
	check_fmt(2 * NSEC_PER_HOUR, "2h0m0s");
	check_fmt(3723 * NSEC_PER_SEC + 500 * NSEC_PER_MSEC, "1h2m3.5s");
	check_fmt(-90 * NSEC_PER_SEC, "-1m30s");
	check_fmt(INT64_MIN, "-2562047h47m16.854775808s");
}

static void test_roundtrip(void)
{
	const char *cases[] = { "1h2m3.5s", "5m0s", "250ms", "1.5\xc2\xb5s", "7ns", "-3s" };
	char buf[DURATION_BUFLEN];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		duration_format(parse_ok(cases[i]), buf, sizeof(buf));
		CHECK_STR(buf, cases[i]);
	}
}

static void test_rfc3339(void)
{
	char buf[RFC3339_BUFLEN];
	time_t t;

	rfc3339_format(0, buf, sizeof(buf));
	CHECK_STR(buf, "1970-01-01T00:00:00Z");
	rfc3339_format(1795341600, buf, sizeof(buf));
	CHECK_STR(buf, "2026-11-22T10:00:00Z");
	CHECK_INT(rfc3339_parse("2026-11-22T10:00:00Z", &t), 0);
	CHECK_INT(t, 1795341600);
	CHECK_INT(rfc3339_parse("2026-11-22T10:00:00.123456Z", &t), 0);
	CHECK_INT(t, 1795341600);
	CHECK_INT(rfc3339_parse("2026-11-22T12:30:00+02:30", &t), 0);
	CHECK_INT(t, 1795341600);
	CHECK_INT(rfc3339_parse("2026-11-22T07:00:00-03:00", &t), 0);
	CHECK_INT(t, 1795341600);
	CHECK_INT(rfc3339_parse("2024-02-29T00:00:00Z", &t), 0);

	const char *bad[] = { "", "2026-11-22", "2026-11-22 10:00:00Z", "2026-13-01T00:00:00Z",
			      "2026-02-29T00:00:00Z", "2026-11-22T24:00:00Z", "2026-11-22T10:00:00",
			      "2026-11-22T10:00:00ZZ", "2026-11-22T10:00:00.Z", "2026-11-22T10:00:00+0200",
			      "20x6-11-22T10:00:00Z" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (rfc3339_parse(bad[i], &t) == 0) {
			fprintf(stderr, "accepted bad timestamp \"%s\"\n", bad[i]);
			check_failures++;
		}
	}
}

static void test_clocks(void)
{
	int64_t a = mono_now_ns();
	sleep_ns(20 * NSEC_PER_MSEC);
	int64_t b = mono_now_ns();

	CHECK(b - a >= 20 * NSEC_PER_MSEC);
	CHECK(wall_now_ns() > 1700000000LL * NSEC_PER_SEC);
}

/* A timed wait given wall_deadline(d) ends d from now: a normalized timespec, not in the past. */
static void test_wall_deadline(void)
{
	int64_t before = wall_now_ns();
	struct timespec ts = wall_deadline(1500 * NSEC_PER_MSEC);
	int64_t at = (int64_t)ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
	CHECK(ts.tv_nsec >= 0 && ts.tv_nsec < NSEC_PER_SEC);
	CHECK(at >= before + 1500 * NSEC_PER_MSEC);
	CHECK(at <= wall_now_ns() + 1500 * NSEC_PER_MSEC);
}

int main(void)
{
	RUN(test_duration_parse);
	RUN(test_wall_deadline);
	RUN(test_duration_parse_errors);
	RUN(test_duration_format);
	RUN(test_roundtrip);
	RUN(test_rfc3339);
	RUN(test_clocks);
	return CHECK_DONE();
}
