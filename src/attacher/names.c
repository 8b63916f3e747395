/*
 * Names the attacher writes into the API (its finalizer and its Lease) are derived from the
 * driver name with the upstream sanitization, so that kcsi and the Go sidecar recognise each
 * other's objects: an admin can switch images without orphaned finalizers or two leaders.
 */
#include "attacher/att.h"

#include <stdio.h>
#include <string.h>

void att_sanitize_name(const char *in, char *out, size_t outlen)
{
	size_t n = 0;

	if (outlen == 0)
		return;
	for (; *in && n + 2 < outlen; in++) {
		char ch = *in;
		bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
			  (ch >= '0' && ch <= '9') || ch == '-';
		out[n++] = ok ? ch : '-';
	}
	if (n > 0 && out[n - 1] == '-')
		out[n++] = 'X';
	out[n] = '\0';
}

void att_finalizer_name(const char *driver, char *out, size_t outlen)
{
	char s[256];

	att_sanitize_name(driver, s, sizeof(s));
	snprintf(out, outlen, "external-attacher/%s", s);
}
