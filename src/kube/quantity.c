/*
 * Quantities are parsed exactly with 128-bit integers: the digits form an integer mantissa, the
 * suffix contributes a power of ten and/or a power of two, and a fractional result is rounded up
 * with a single division at the end. No floating point, so "8Ei" minus one byte stays exact.
 */
#include "kube/quantity.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

typedef __int128 i128;

#define LIMIT ((i128)1 << 120) /* above this any further scaling would overflow i128 */

static int fail(char *err, size_t errlen, const char *s, const char *why)
{
	snprintf(err, errlen, "invalid quantity \"%s\": %s", s, why);
	return -1;
}

/* Parses the suffix: returns 0 and sets the power of ten and the power of two it adds. */
static int parse_suffix(const char *p, int *exp10, int *exp2)
{
	static const struct { const char *s; int e10, e2; } tab[] = {
		{ "", 0, 0 },    { "n", -9, 0 },  { "u", -6, 0 },  { "m", -3, 0 },
		{ "k", 3, 0 },   { "M", 6, 0 },   { "G", 9, 0 },   { "T", 12, 0 },
		{ "P", 15, 0 },  { "E", 18, 0 },  { "Ki", 0, 10 }, { "Mi", 0, 20 },
		{ "Gi", 0, 30 }, { "Ti", 0, 40 }, { "Pi", 0, 50 }, { "Ei", 0, 60 },
	};
	for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++) {
		if (strcmp(p, tab[i].s) == 0) {
			*exp10 = tab[i].e10;
			*exp2 = tab[i].e2;
			return 0;
		}
	}
	if (*p == 'e' || *p == 'E') {
		const char *q = p + 1;
		int sign = 1, v = 0, nd = 0;
		if (*q == '+' || *q == '-')
			sign = (*q++ == '-') ? -1 : 1;
		for (; isdigit((unsigned char)*q); q++, nd++) {
			if (v > 1000)
				return -1;
			v = v * 10 + (*q - '0');
		}
		if (!nd || *q)
			return -1;
		*exp10 = sign * v;
		*exp2 = 0;
		return 0;
	}
	return -1;
}

int kube_quantity_parse(const char *s, int64_t *bytes, char *err, size_t errlen)
{
	const char *p = s;
	int neg = 0;
	if (!s || !*s)
		return fail(err, errlen, s ? s : "", "empty");
	if (*p == '+' || *p == '-')
		neg = (*p++ == '-');
	i128 mant = 0;
	int ndigits = 0, frac = 0, seen_dot = 0;
	for (;; p++) {
		if (isdigit((unsigned char)*p)) {
			if (mant > LIMIT / 10)
				return fail(err, errlen, s, "too many digits");
			mant = mant * 10 + (*p - '0');
			ndigits++;
			frac += seen_dot;
		} else if (*p == '.' && !seen_dot) {
			seen_dot = 1;
		} else {
			break;
		}
	}
	if (!ndigits)
		return fail(err, errlen, s, "no digits");
	int exp10, exp2;
	if (parse_suffix(p, &exp10, &exp2) != 0)
		return fail(err, errlen, s, "unknown suffix");
	exp10 -= frac;
	for (int i = 0; i < exp2; i++) {
		if (mant > LIMIT)
			return fail(err, errlen, s, "out of range");
		mant *= 2;
	}
	for (; exp10 > 0; exp10--) {
		if (mant > LIMIT / 10)
			return fail(err, errlen, s, "out of range");
		mant *= 10;
	}
	if (exp10 < 0) {
		i128 div = 1;
		for (; exp10 < 0 && div <= LIMIT / 10; exp10++)
			div *= 10;
		if (exp10 < 0) /* the divisor exceeds any mantissa: result is 0 or rounds up to 1 */
			mant = mant ? 1 : 0;
		else
			mant = mant / div + (mant % div ? 1 : 0);
	}
	if (mant > INT64_MAX)
		return fail(err, errlen, s, "out of range for a 64-bit quantity");
	*bytes = neg ? -(int64_t)mant : (int64_t)mant;
	return 0;
}

void kube_quantity_format(int64_t bytes, bool binary, char *buf, size_t len)
{
	static const char *bin[] = { "", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei" };
	static const char *dec[] = { "", "k", "M", "G", "T", "P", "E" };
	if (bytes == 0) {
		snprintf(buf, len, "0");
		return;
	}
	uint64_t v = bytes < 0 ? -(uint64_t)bytes : (uint64_t)bytes;
	const char *sign = bytes < 0 ? "-" : "";
	int i = 0;
	if (binary && v % 1024 == 0) {
		while (i < 6 && v % 1024 == 0) {
			v /= 1024;
			i++;
		}
		snprintf(buf, len, "%s%llu%s", sign, (unsigned long long)v, bin[i]);
		return;
	}
	while (i < 6 && v % 1000 == 0) {
		v /= 1000;
		i++;
	}
	snprintf(buf, len, "%s%llu%s", sign, (unsigned long long)v, dec[i]);
}
