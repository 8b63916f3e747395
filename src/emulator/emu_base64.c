/*
 * emu_base64: one encoder for both alphabets (padded standard, unpadded URL-safe) and one decoder
 * that accepts either, so a continue token or Secret value decodes whichever way it was written.
 */
#include "emulator/emu_base64.h"

#include <stdlib.h>
#include <string.h>

#include "base/xalloc.h"

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

char *emu_base64_encode(const unsigned char *d, size_t len, bool url)
{
	const char *a = url ? b64url : b64;
	char *out = xmalloc(4 * ((len + 2) / 3) + 1), *p = out;
	for (size_t i = 0; i < len; i += 3) {
		unsigned v = (unsigned)d[i] << 16 | (i + 1 < len ? (unsigned)d[i + 1] << 8 : 0) |
			     (i + 2 < len ? d[i + 2] : 0);
		*p++ = a[v >> 18 & 63];
		*p++ = a[v >> 12 & 63];
		if (i + 1 < len || !url)
			*p++ = i + 1 < len ? a[v >> 6 & 63] : '=';
		if (i + 2 < len || !url)
			*p++ = i + 2 < len ? a[v & 63] : '=';
	}
	*p = '\0';
	return out;
}

static int b64_value(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+' || c == '-')
		return 62;
	if (c == '/' || c == '_')
		return 63;
	return -1;
}

unsigned char *emu_base64_decode(const char *s, size_t *len)
{
	size_t n = strlen(s);
	while (n && s[n - 1] == '=')
		n--;
	if (n % 4 == 1)
		return NULL;
	unsigned char *out = xmalloc(n / 4 * 3 + 3);
	size_t o = 0;
	unsigned acc = 0;
	int bits = 0;
	for (size_t i = 0; i < n; i++) {
		int v = b64_value(s[i]);
		if (v < 0) {
			free(out);
			return NULL;
		}
		acc = acc << 6 | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(acc >> bits);
		}
	}
	out[o] = '\0';
	*len = o;
	return out;
}
