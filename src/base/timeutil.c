/*
 * timeutil: Go-compatible durations, RFC 3339 timestamps, clocks.
 *
 * Durations follow Go's time.ParseDuration and Duration.String() to the letter, because the
 * upstream sidecars print their defaults that way ("5m0s") and users pass values that way
 * ("1m30s"); kcsi's --help and error messages should read the same.
 */
#include "base/timeutil.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int64_t mono_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
}

int64_t wall_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
}

struct timespec wall_deadline(int64_t ns)
{
	int64_t t = wall_now_ns() + ns;
	struct timespec ts = { t / NSEC_PER_SEC, t % NSEC_PER_SEC };

	return ts;
}

void sleep_ns(int64_t ns)
{
	struct timespec req, rem;

	if (ns <= 0)
		return;
	req.tv_sec = ns / NSEC_PER_SEC;
	req.tv_nsec = ns % NSEC_PER_SEC;
	while (nanosleep(&req, &rem) != 0 && errno == EINTR)
		req = rem;
}

static void set_err(char *err, size_t errlen, const char *what, const char *s)
{
	if (err && errlen)
		snprintf(err, errlen, "time: %s \"%s\"", what, s);
}

/* Returns the length of the unit at p and its size in ns, or 0 when p holds no known unit. */
static size_t parse_unit(const char *p, uint64_t *unit)
{
	static const struct { const char *name; uint64_t ns; } units[] = {
		{ "ns", 1 }, { "us", 1000 }, { "\xc2\xb5s", 1000 }, { "\xce\xbcs", 1000 },
		{ "ms", 1000000 }, { "s", 1000000000ULL }, { "m", 60000000000ULL },
		{ "h", 3600000000000ULL },
	};
	size_t best = 0;

	/* Longest match, so that "ms" is not read as "m" followed by garbage. */
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		size_t n = strlen(units[i].name);
		if (n > best && strncmp(p, units[i].name, n) == 0) {
			best = n;
			*unit = units[i].ns;
		}
	}
	return best;
}

int duration_parse(const char *s, int64_t *ns, char *err, size_t errlen)
{
	const char *p = s;
	uint64_t total = 0;
	int neg = 0;

	if (*p == '-' || *p == '+')
		neg = *p++ == '-';
	if (strcmp(p, "0") == 0) {
		*ns = 0;
		return 0;
	}
	if (*p == '\0') {
		set_err(err, errlen, "invalid duration", s);
		return -1;
	}
	while (*p) {
		uint64_t whole = 0, frac = 0, scale = 1, unit = 0;
		int digits = 0, overflow = 0;
		size_t ulen;

		for (; *p >= '0' && *p <= '9'; p++, digits++) {
			if (whole > (UINT64_MAX - 9) / 10)
				overflow = 1;
			else
				whole = whole * 10 + (uint64_t)(*p - '0');
		}
		if (*p == '.') {
			p++;
			for (; *p >= '0' && *p <= '9'; p++, digits++) {
				/* Digits beyond nanosecond resolution of an hour are dropped, as in Go. */
				if (scale < 1000000000000000000ULL) {
					frac = frac * 10 + (uint64_t)(*p - '0');
					scale *= 10;
				}
			}
		}
		if (!digits) {
			set_err(err, errlen, "invalid duration", s);
			return -1;
		}
		ulen = parse_unit(p, &unit);
		if (!ulen) {
			if (*p == '\0')
				set_err(err, errlen, "missing unit in duration", s);
			else
				set_err(err, errlen, "unknown unit in duration", s);
			return -1;
		}
		p += ulen;
		if (overflow || whole > (uint64_t)INT64_MAX / unit) {
			set_err(err, errlen, "invalid duration", s);
			return -1;
		}
		uint64_t v = whole * unit;
		if (frac)
			v += (uint64_t)((double)frac * ((double)unit / (double)scale));
		if (v > (uint64_t)INT64_MAX - total) {
			set_err(err, errlen, "invalid duration", s);
			return -1;
		}
		total += v;
	}
	*ns = neg ? -(int64_t)total : (int64_t)total;
	return 0;
}

/* Appends "<v/div>[.<frac>]" with trailing zeros of the fraction removed. */
static int fmt_frac(char *buf, size_t len, uint64_t v, uint64_t div, int prec)
{
	uint64_t whole = v / div, frac = v % div;
	char digits[24];
	int n;

	if (!frac)
		return snprintf(buf, len, "%llu", (unsigned long long)whole);
	n = snprintf(digits, sizeof(digits), "%0*llu", prec, (unsigned long long)frac);
	while (n > 0 && digits[n - 1] == '0')
		digits[--n] = '\0';
	return snprintf(buf, len, "%llu.%s", (unsigned long long)whole, digits);
}

void duration_format(int64_t ns, char *buf, size_t len)
{
	uint64_t u = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
	const char *sign = ns < 0 ? "-" : "";
	char num[48];

	if (u == 0) {
		snprintf(buf, len, "0s");
		return;
	}
	if (u < 1000) {
		snprintf(buf, len, "%s%lluns", sign, (unsigned long long)u);
		return;
	}
	if (u < 1000000) {
		fmt_frac(num, sizeof(num), u, 1000, 3);
		snprintf(buf, len, "%s%s\xc2\xb5s", sign, num);
		return;
	}
	if (u < 1000000000ULL) {
		fmt_frac(num, sizeof(num), u, 1000000, 6);
		snprintf(buf, len, "%s%sms", sign, num);
		return;
	}
	uint64_t secs = u / 1000000000ULL;
	uint64_t h = secs / 3600, m = secs / 60 % 60;
	fmt_frac(num, sizeof(num), (secs % 60) * 1000000000ULL + u % 1000000000ULL, 1000000000ULL, 9);
	if (h)
		snprintf(buf, len, "%s%lluh%llum%ss", sign, (unsigned long long)h,
			 (unsigned long long)m, num);
	else if (m)
		snprintf(buf, len, "%s%llum%ss", sign, (unsigned long long)m, num);
	else
		snprintf(buf, len, "%s%ss", sign, num);
}

void rfc3339_format(time_t t, char *buf, size_t len)
{
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int digits_at(const char *s, int n, int *out)
{
	int v = 0;

	for (int i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return 0;
}

int rfc3339_parse(const char *s, time_t *t)
{
	static const int mdays[] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	int year, mon, day, hour, min, sec, oh = 0, om = 0;
	struct tm tm = { 0 };
	const char *p;
	long offset = 0;

	if (strlen(s) < 20 || digits_at(s, 4, &year) || s[4] != '-' || digits_at(s + 5, 2, &mon) ||
	    s[7] != '-' || digits_at(s + 8, 2, &day) || s[10] != 'T' ||
	    digits_at(s + 11, 2, &hour) || s[13] != ':' || digits_at(s + 14, 2, &min) ||
	    s[16] != ':' || digits_at(s + 17, 2, &sec))
		return -1;
	if (mon < 1 || mon > 12 || day < 1 || day > mdays[mon - 1] || hour > 23 || min > 59 ||
	    sec > 59)
		return -1;
	if (mon == 2 && day == 29 && !(year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)))
		return -1;
	p = s + 19;
	if (*p == '.') {
		p++;
		if (*p < '0' || *p > '9')
			return -1;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	if (*p == 'Z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		if (digits_at(p + 1, 2, &oh) || p[3] != ':' || digits_at(p + 4, 2, &om) || oh > 23 ||
		    om > 59)
			return -1;
		offset = (oh * 60L + om) * 60L * (*p == '-' ? -1 : 1);
		p += 6;
	} else {
		return -1;
	}
	if (*p != '\0')
		return -1;
	tm.tm_year = year - 1900;
	tm.tm_mon = mon - 1;
	tm.tm_mday = day;
	tm.tm_hour = hour;
	tm.tm_min = min;
	tm.tm_sec = sec;
	*t = timegm(&tm) - offset;
	return 0;
}
