/*
 * strbuf: growable NUL-terminated buffer (see strbuf.h for the invariants).
 *
 * Growth is geometric (x1.5 plus slack) so appends are amortised O(1). An empty strbuf points at
 * the shared strbuf_empty so that `buf` is always a valid string without allocating.
 */
#include "base/strbuf.h"
#include "base/xalloc.h"

#include <assert.h>
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char strbuf_empty[1];

void strbuf_init(struct strbuf *sb, size_t hint)
{
	sb->alloc = 0;
	sb->len = 0;
	sb->buf = strbuf_empty;
	if (hint)
		strbuf_grow(sb, hint);
}

void strbuf_release(struct strbuf *sb)
{
	if (sb->alloc)
		free(sb->buf);
	strbuf_init(sb, 0);
}

char *strbuf_detach(struct strbuf *sb, size_t *len)
{
	char *res;

	if (len)
		*len = sb->len;
	if (!sb->alloc)
		strbuf_grow(sb, 0);
	res = sb->buf;
	strbuf_init(sb, 0);
	return res;
}

void strbuf_grow(struct strbuf *sb, size_t extra)
{
	int fresh = sb->alloc == 0;
	size_t need;

	if (extra > SIZE_MAX - sb->len - 1) {
		fprintf(stderr, "kcsi: strbuf size overflow\n");
		abort();
	}
	need = sb->len + extra + 1;
	if (need <= sb->alloc)
		return;
	size_t alloc = sb->alloc + sb->alloc / 2 + 16;
	if (alloc < need)
		alloc = need;
	sb->buf = xrealloc(fresh ? NULL : sb->buf, alloc);
	if (fresh)
		sb->buf[0] = '\0';
	sb->alloc = alloc;
}

void strbuf_setlen(struct strbuf *sb, size_t len)
{
	assert(len <= (sb->alloc ? sb->alloc - 1 : 0));
	sb->len = len;
	if (sb->alloc)
		sb->buf[len] = '\0';
}

void strbuf_add(struct strbuf *sb, const void *data, size_t len)
{
	if (!len)
		return;
	strbuf_grow(sb, len);
	memcpy(sb->buf + sb->len, data, len);
	strbuf_setlen(sb, sb->len + len);
}

void strbuf_addstr(struct strbuf *sb, const char *s)
{
	strbuf_add(sb, s, strlen(s));
}

void strbuf_addch(struct strbuf *sb, char c)
{
	strbuf_grow(sb, 1);
	sb->buf[sb->len] = c;
	strbuf_setlen(sb, sb->len + 1);
}

void strbuf_vaddf(struct strbuf *sb, const char *fmt, va_list ap)
{
	va_list cp;
	int n;

	strbuf_grow(sb, 64);
	va_copy(cp, ap);
	n = vsnprintf(sb->buf + sb->len, sb->alloc - sb->len, fmt, cp);
	va_end(cp);
	if (n < 0)
		return;
	if ((size_t)n >= sb->alloc - sb->len) {
		strbuf_grow(sb, (size_t)n);
		n = vsnprintf(sb->buf + sb->len, sb->alloc - sb->len, fmt, ap);
	}
	strbuf_setlen(sb, sb->len + (size_t)n);
}

void strbuf_addf(struct strbuf *sb, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	strbuf_vaddf(sb, fmt, ap);
	va_end(ap);
}

void strbuf_addquoted(struct strbuf *sb, const char *s)
{
	strbuf_addch(sb, '"');
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '"': strbuf_addstr(sb, "\\\""); break;
		case '\\': strbuf_addstr(sb, "\\\\"); break;
		case '\n': strbuf_addstr(sb, "\\n"); break;
		case '\t': strbuf_addstr(sb, "\\t"); break;
		case '\r': strbuf_addstr(sb, "\\r"); break;
		default:
			if (*p < 0x20 || *p == 0x7f)
				strbuf_addf(sb, "\\x%02x", *p);
			else
				strbuf_addch(sb, (char)*p);
		}
	}
	strbuf_addch(sb, '"');
}

void strbuf_trim(struct strbuf *sb)
{
	size_t start = 0, end = sb->len;

	while (end > 0 && isspace((unsigned char)sb->buf[end - 1]))
		end--;
	while (start < end && isspace((unsigned char)sb->buf[start]))
		start++;
	if (!sb->alloc)
		return;
	memmove(sb->buf, sb->buf + start, end - start);
	strbuf_setlen(sb, end - start);
}

void errbuf_printf(char *err, size_t errlen, const char *fmt, ...)
{
	if (!err || !errlen)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

int hex_digit(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Length of the valid UTF-8 sequence at s[0..n) (lead byte >= 0x80), or 0 when it is not one. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	unsigned char lo = 0x80, hi = 0xbf;
	size_t len;

	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4;
	else
		return 0;
	if (len > n)
		return 0;
	if (c == 0xe0)
		lo = 0xa0; /* overlong */
	else if (c == 0xed)
		hi = 0x9f; /* surrogates */
	else if (c == 0xf0)
		lo = 0x90; /* overlong */
	else if (c == 0xf4)
		hi = 0x8f; /* beyond U+10FFFF */
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return len;
}

void strbuf_addjson(struct strbuf *sb, const char *str, size_t len)
{
	const unsigned char *s = (const unsigned char *)str, *end = s + len, *run = s;

	strbuf_addch(sb, '"');
	while (s < end) {
		unsigned char c = *s;
		if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
			s++;
			continue;
		}
		strbuf_add(sb, run, (size_t)(s - run));
		size_t n = c >= 0x80 ? utf8_len(s, (size_t)(end - s)) : 0;
		if (n) {
			strbuf_add(sb, s, n);
			s += n;
		} else {
			switch (c) {
			case '"': strbuf_addstr(sb, "\\\""); break;
			case '\\': strbuf_addstr(sb, "\\\\"); break;
			case '\n': strbuf_addstr(sb, "\\n"); break;
			case '\r': strbuf_addstr(sb, "\\r"); break;
			case '\t': strbuf_addstr(sb, "\\t"); break;
			default:
				if (c >= 0x80)
					strbuf_addstr(sb, "\\ufffd");
				else
					strbuf_addf(sb, "\\u%04x", c);
			}
			s++;
		}
		run = s;
	}
	strbuf_add(sb, run, (size_t)(s - run));
	strbuf_addch(sb, '"');
}

char *str_replace_all(const char *s, const char *from, const char *to)
{
	struct strbuf sb = STRBUF_INIT;
	size_t n = strlen(from);
	for (const char *hit; n && (hit = strstr(s, from)); s = hit + n) {
		strbuf_add(&sb, s, (size_t)(hit - s));
		strbuf_addstr(&sb, to);
	}
	strbuf_addstr(&sb, s);
	return strbuf_detach(&sb, NULL);
}
