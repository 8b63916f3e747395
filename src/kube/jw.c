#include "kube/jw.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (lead byte >= 0x80), or 0 when it is not one. */
static size_t utf8_len(const unsigned char *s)
{
	unsigned char c = s[0];
	unsigned char lo = 0x80, hi = 0xbf;
	size_t n;

	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
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
	for (size_t i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return n;
}

void jw_quote(struct strbuf *sb, const char *str)
{
	const unsigned char *s = (const unsigned char *)(str ? str : "");
	const unsigned char *run = s;

	strbuf_addch(sb, '"');
	for (;;) {
		unsigned char c = *s;
		if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
			s++;
			continue;
		}
		strbuf_add(sb, run, (size_t)(s - run));
		if (!c)
			break;
		if (c >= 0x80) {
			size_t n = utf8_len(s);
			if (n) {
				strbuf_add(sb, s, n);
				s += n;
			} else {
				strbuf_addstr(sb, "\\ufffd");
				s++;
			}
		} else {
			switch (c) {
			case '"': strbuf_addstr(sb, "\\\""); break;
			case '\\': strbuf_addstr(sb, "\\\\"); break;
			case '\n': strbuf_addstr(sb, "\\n"); break;
			case '\r': strbuf_addstr(sb, "\\r"); break;
			case '\t': strbuf_addstr(sb, "\\t"); break;
			default: strbuf_addf(sb, "\\u%04x", c); break;
			}
			s++;
		}
		run = s;
	}
	strbuf_addch(sb, '"');
}

/* The separator before a value or key at the current depth. */
static void before_value(struct jw *w)
{
	if (w->after_key) {
		w->after_key = false;
		return;
	}
	uint64_t bit = 1ull << w->depth;
	if (w->depth && (w->nonempty & bit))
		strbuf_addch(w->sb, ',');
	w->nonempty |= bit;
}

static void begin(struct jw *w, char open)
{
	before_value(w);
	strbuf_addch(w->sb, open);
	if (w->depth + 1 < JW_MAX_DEPTH)
		w->depth++;
	w->nonempty &= ~(1ull << w->depth);
}

static void end(struct jw *w, char close)
{
	strbuf_addch(w->sb, close);
	if (w->depth)
		w->depth--;
}

void jw_begin_object(struct jw *w) { begin(w, '{'); }
void jw_end_object(struct jw *w) { end(w, '}'); }
void jw_begin_array(struct jw *w) { begin(w, '['); }
void jw_end_array(struct jw *w) { end(w, ']'); }

void jw_key(struct jw *w, const char *key)
{
	before_value(w);
	jw_quote(w->sb, key);
	strbuf_addch(w->sb, ':');
	w->after_key = true;
}

void jw_str(struct jw *w, const char *s)
{
	before_value(w);
	jw_quote(w->sb, s);
}

void jw_int(struct jw *w, int64_t v)
{
	before_value(w);
	strbuf_addf(w->sb, "%" PRId64, v);
}

void jw_bool(struct jw *w, bool v)
{
	before_value(w);
	strbuf_addstr(w->sb, v ? "true" : "false");
}
