/*
 * kube names: character-class scans for the name rules in names.h. Written against lengths rather
 * than NUL-terminated strings so that a selector's scanner can check a key or value in place.
 */
#include "kube/names.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static bool is_alnum_lower(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool is_alnum(char c)
{
	return isalnum((unsigned char)c) != 0;
}

static bool dns_label_ok(const char *s, size_t n, size_t max)
{
	if (n == 0 || n > max || !is_alnum_lower(s[0]) || !is_alnum_lower(s[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!is_alnum_lower(s[i]) && s[i] != '-')
			return false;
	return true;
}

/* Every dot-separated part a DNS label; the whole at most 253 bytes. */
static bool subdomain_ok(const char *s, size_t n)
{
	if (n == 0 || n > 253)
		return false;
	for (size_t i = 0; i < n;) {
		const char *dot = memchr(s + i, '.', n - i);
		size_t len = dot ? (size_t)(dot - (s + i)) : n - i;
		/* kube-apiserver's subdomain check limits only the whole name (253), not each
		 * part: VolumeAttachment names such as "csi-" + 64 hex digits are valid. */
		if (!dns_label_ok(s + i, len, 253))
			return false;
		i += len + (dot ? 1 : 0);
		if (dot && i == n)
			return false; /* ends in '.' */
	}
	return true;
}

bool kube_name_is_dns1123_subdomain(const char *s, char *err, size_t errlen)
{
	size_t n = strlen(s);
	if (subdomain_ok(s, n))
		return true;
	if (err)
		snprintf(err, errlen, n > 253 ? "must be no more than 253 characters" :
			 "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
			 "characters, '-' or '.', and must start and end with an alphanumeric "
			 "character (e.g. 'example.com')");
	return false;
}

bool kube_name_is_dns1123_label(const char *s, char *err, size_t errlen)
{
	size_t n = strlen(s);
	if (dns_label_ok(s, n, 63))
		return true;
	if (err)
		snprintf(err, errlen, n > 63 ? "must be no more than 63 characters" :
			 "a lowercase RFC 1123 label must consist of lower case alphanumeric "
			 "characters or '-', and must start and end with an alphanumeric character "
			 "(e.g. 'my-name')");
	return false;
}

bool kube_name_is_label_value(const char *s, size_t n)
{
	if (n == 0)
		return true;
	if (n > 63 || !is_alnum(s[0]) || !is_alnum(s[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
			return false;
	return true;
}

bool kube_name_is_qualified(const char *s, size_t n)
{
	const char *slash = memchr(s, '/', n);
	if (!slash)
		return n > 0 && kube_name_is_label_value(s, n);
	size_t plen = (size_t)(slash - s), rest = n - plen - 1;
	return subdomain_ok(s, plen) && rest > 0 && kube_name_is_label_value(slash + 1, rest);
}
