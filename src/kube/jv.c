/*
 * kube/jv: a strict JSON parser into a flat, reusable node array. One pass, no recursion (an
 * explicit stack of open containers, JV_MAX_DEPTH deep), strings unescaped into one buffer.
 *
 * Why not jsmn (Debian's libjsmn-dev), the allocation-free tokenizer: it accepts "[1 2]",
 * {"a"}, raw control characters in strings and invalid UTF-8, and stops at a NUL byte; checking
 * all of that after it is a parser's worth of code. Why not jansson, cJSON or json-c: they
 * malloc a node per value, which is the cost this file exists to remove.
 */
#include "kube/jv.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "base/xalloc.h"

struct parser {
	struct jv_doc *d;
	const char *start, *p, *end;
	char *w; /* where the next unescaped string goes in d->buf */
	char *err;
	size_t errlen;
};

static int fail(struct parser *ps, const char *what)
{
	errbuf_printf(ps->err, ps->errlen, "%s at byte %zu", what, (size_t)(ps->p - ps->start));
	return -1;
}

static void skip_ws(struct parser *ps)
{
	while (ps->p < ps->end &&
	       (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
		ps->p++;
}

/* Appends a node; returns its index. */
static uint32_t push(struct parser *ps, uint8_t type)
{
	struct jv_doc *d = ps->d;
	if (d->nnode == d->node_cap) {
		d->node_cap = d->node_cap ? d->node_cap * 2 : 256;
		d->node = xrealloc(d->node, d->node_cap * sizeof(*d->node));
	}
	jv_t *n = &d->node[d->nnode];
	n->type = type;
	n->flags = 0;
	n->skip = 1;
	n->count = 0;
	n->s = NULL;
	n->i = 0;
	return (uint32_t)d->nnode++;
}

static int hex4(const char *p, const char *end, unsigned *out)
{
	if (end - p < 4)
		return -1;
	unsigned v = 0;
	for (int i = 0; i < 4; i++) {
		int x = hex_digit((unsigned char)p[i]);
		if (x < 0)
			return -1;
		v = v * 16 + (unsigned)x;
	}
	*out = v;
	return 0;
}

static char *put_utf8(char *w, unsigned cp)
{
	if (cp < 0x80) {
		*w++ = (char)cp;
	} else if (cp < 0x800) {
		*w++ = (char)(0xC0 | cp >> 6);
		*w++ = (char)(0x80 | (cp & 0x3F));
	} else if (cp < 0x10000) {
		*w++ = (char)(0xE0 | cp >> 12);
		*w++ = (char)(0x80 | (cp >> 6 & 0x3F));
		*w++ = (char)(0x80 | (cp & 0x3F));
	} else {
		*w++ = (char)(0xF0 | cp >> 18);
		*w++ = (char)(0x80 | (cp >> 12 & 0x3F));
		*w++ = (char)(0x80 | (cp >> 6 & 0x3F));
		*w++ = (char)(0x80 | (cp & 0x3F));
	}
	return w;
}

/* Length of the valid UTF-8 sequence at p (2-4 bytes), or 0 (overlong, surrogate, > U+10FFFF). */
static int utf8_len(const unsigned char *p, const unsigned char *end)
{
	unsigned c = p[0];
	int n;
	unsigned cp;
	if (c >= 0xC2 && c <= 0xDF) {
		n = 2;
		cp = c & 0x1F;
	} else if (c >= 0xE0 && c <= 0xEF) {
		n = 3;
		cp = c & 0x0F;
	} else if (c >= 0xF0 && c <= 0xF4) {
		n = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (end - p < n)
		return 0;
	for (int i = 1; i < n; i++) {
		if ((p[i] & 0xC0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3F);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
	    (cp >= 0xD800 && cp <= 0xDFFF))
		return 0;
	return n;
}

/* Parses the string at ps->p (on its '"') into the buffer; returns it, or NULL. */
static const char *parse_string(struct parser *ps, uint32_t *len)
{
	char *out = ps->w, *w = out;
	ps->p++;
	for (;;) {
		if (ps->p >= ps->end) {
			fail(ps, "unterminated string");
			return NULL;
		}
		unsigned char c = (unsigned char)*ps->p;
		if (c == '"') {
			ps->p++;
			break;
		}
		if (c < 0x20) {
			fail(ps, "control character in a string");
			return NULL;
		}
		if (c >= 0x80) {
			int n = utf8_len((const unsigned char *)ps->p, (const unsigned char *)ps->end);
			if (!n) {
				fail(ps, "invalid UTF-8 in a string");
				return NULL;
			}
			memcpy(w, ps->p, (size_t)n);
			w += n;
			ps->p += n;
			continue;
		}
		if (c != '\\') {
			*w++ = (char)c;
			ps->p++;
			continue;
		}
		if (ps->end - ps->p < 2) {
			fail(ps, "unterminated string");
			return NULL;
		}
		char e = ps->p[1];
		ps->p += 2;
		switch (e) {
		case '"': *w++ = '"'; break;
		case '\\': *w++ = '\\'; break;
		case '/': *w++ = '/'; break;
		case 'b': *w++ = '\b'; break;
		case 'f': *w++ = '\f'; break;
		case 'n': *w++ = '\n'; break;
		case 'r': *w++ = '\r'; break;
		case 't': *w++ = '\t'; break;
		case 'u': {
			unsigned cp, lo;
			if (hex4(ps->p, ps->end, &cp) != 0) {
				fail(ps, "invalid \\u escape");
				return NULL;
			}
			ps->p += 4;
			if (cp >= 0xDC00 && cp <= 0xDFFF) {
				fail(ps, "lone low surrogate in a \\u escape");
				return NULL;
			}
			if (cp >= 0xD800 && cp <= 0xDBFF) {
				if (ps->end - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u' ||
				    hex4(ps->p + 2, ps->end, &lo) != 0 || lo < 0xDC00 || lo > 0xDFFF) {
					fail(ps, "high surrogate without its low half in a \\u escape");
					return NULL;
				}
				ps->p += 6;
				cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
			}
			if (cp == 0) {
				fail(ps, "\\u0000 in a string");
				return NULL;
			}
			w = put_utf8(w, cp);
			break;
		}
		default:
			ps->p -= 2;
			fail(ps, "invalid escape in a string");
			return NULL;
		}
	}
	*w = '\0';
	*len = (uint32_t)(w - out);
	ps->w = w + 1;
	return out;
}

/* A string node (a value, or a key with JV_KEY) from the string at ps->p: its index, or -1. */
static int64_t string_node(struct parser *ps, uint8_t flags)
{
	uint32_t idx = push(ps, JV_STRING), n;
	const char *s = parse_string(ps, &n);
	if (!s)
		return -1;
	ps->d->node[idx].s = s;
	ps->d->node[idx].count = n;
	ps->d->node[idx].flags = flags;
	return idx;
}

static int parse_number(struct parser *ps, uint32_t idx)
{
	const char *s = ps->p, *p = s, *e = ps->end;
	bool real = false;
	if (p < e && *p == '-')
		p++;
	if (p < e && *p == '0') {
		p++;
	} else if (p < e && *p >= '1' && *p <= '9') {
		while (p < e && *p >= '0' && *p <= '9')
			p++;
	} else {
		return fail(ps, "invalid number");
	}
	if (p < e && *p == '.') {
		real = true;
		p++;
		if (p >= e || *p < '0' || *p > '9')
			return fail(ps, "invalid number");
		while (p < e && *p >= '0' && *p <= '9')
			p++;
	}
	if (p < e && (*p == 'e' || *p == 'E')) {
		real = true;
		p++;
		if (p < e && (*p == '+' || *p == '-'))
			p++;
		if (p >= e || *p < '0' || *p > '9')
			return fail(ps, "invalid number");
		while (p < e && *p >= '0' && *p <= '9')
			p++;
	}
	/* the buffer has room for the number's text: strings written so far are shorter */
	size_t n = (size_t)(p - s);
	memcpy(ps->w, s, n);
	ps->w[n] = '\0';
	jv_t *node = &ps->d->node[idx];
	errno = 0;
	if (real) {
		double v = strtod(ps->w, NULL);
		if ((v == HUGE_VAL || v == -HUGE_VAL) && errno == ERANGE)
			return fail(ps, "real number overflow");
		node->type = JV_REAL;
	} else {
		long long v = strtoll(ps->w, NULL, 10);
		if (errno == ERANGE)
			return fail(ps, "too big integer");
		node->type = JV_INT;
		node->i = v;
	}
	ps->p = p;
	return 0;
}

static int parse_literal(struct parser *ps, const char *word, uint8_t type)
{
	size_t n = strlen(word);
	if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
		return fail(ps, "invalid literal");
	ps->p += n;
	push(ps, type);
	return 0;
}

const jv_t *jv_parse(struct jv_doc *d, const char *text, size_t len, char *err, size_t errlen)
{
	if (d->buf_cap < len + 1) {
		free(d->buf);
		d->buf_cap = len + 1;
		d->buf = xmalloc(d->buf_cap);
	}
	d->nnode = 0;
	struct parser ps = { d, text, text, text + len, d->buf, err, errlen };
	uint32_t stack[JV_MAX_DEPTH], last[JV_MAX_DEPTH]; /* open containers, their last child */
	size_t depth = 0;
	skip_ws(&ps);
	if (ps.p == ps.end || (*ps.p != '{' && *ps.p != '[')) {
		fail(&ps, "'[' or '{' expected");
		return NULL;
	}
	for (;;) {
		/* a value starts at ps.p */
		if (depth && d->node[stack[depth - 1]].type == JV_ARRAY) {
			d->node[stack[depth - 1]].count++;
			last[depth - 1] = (uint32_t)d->nnode;
		}
		if (ps.p >= ps.end) {
			fail(&ps, "unexpected end of input");
			return NULL;
		}
		char c = *ps.p;
		if (c == '{' || c == '[') {
			if (depth == JV_MAX_DEPTH) {
				fail(&ps, "maximum parsing depth reached");
				return NULL;
			}
			stack[depth++] = push(&ps, c == '{' ? JV_OBJECT : JV_ARRAY);
			ps.p++;
			skip_ws(&ps);
			if (ps.p < ps.end && *ps.p == (c == '{' ? '}' : ']')) {
				ps.p++;
				depth--; /* empty: no child to mark */
			} else if (c == '{') {
				goto key;
			} else {
				continue;
			}
		} else if (c == '"') {
			if (string_node(&ps, 0) < 0)
				return NULL;
		} else if (c == 't' || c == 'f' || c == 'n') {
			if (parse_literal(&ps, c == 't' ? "true" : c == 'f' ? "false" : "null",
					  c == 't' ? JV_TRUE : c == 'f' ? JV_FALSE : JV_NULL) != 0)
				return NULL;
		} else if (c == '-' || (c >= '0' && c <= '9')) {
			if (parse_number(&ps, push(&ps, JV_INT)) != 0)
				return NULL;
		} else {
			fail(&ps, "unexpected character");
			return NULL;
		}
		/* after a value: close containers, or go on to the next element or member */
		for (;;) {
			if (!depth) {
				skip_ws(&ps);
				if (ps.p != ps.end) {
					fail(&ps, "end of input expected");
					return NULL;
				}
				d->node[0].skip = (uint32_t)d->nnode;
				return &d->node[0];
			}
			uint32_t top = stack[depth - 1];
			d->node[top].skip = (uint32_t)(d->nnode - top);
			skip_ws(&ps);
			if (ps.p >= ps.end) {
				fail(&ps, "unexpected end of input");
				return NULL;
			}
			bool obj = d->node[top].type == JV_OBJECT;
			if (*ps.p == (obj ? '}' : ']')) {
				ps.p++;
				d->node[last[depth - 1]].flags |= JV_LAST;
				depth--;
				continue;
			}
			if (*ps.p != ',') {
				fail(&ps, obj ? "',' or '}' expected" : "',' or ']' expected");
				return NULL;
			}
			ps.p++;
			skip_ws(&ps);
			if (obj)
				goto key;
			break;
		}
		continue;
key:
		/* a member: "key" : value */
		if (ps.p >= ps.end || *ps.p != '"') {
			fail(&ps, "string expected as a key");
			return NULL;
		}
		{
			int64_t idx = string_node(&ps, JV_KEY);
			if (idx < 0)
				return NULL;
			d->node[stack[depth - 1]].count++;
			last[depth - 1] = (uint32_t)idx;
		}
		skip_ws(&ps);
		if (ps.p >= ps.end || *ps.p != ':') {
			fail(&ps, "':' expected");
			return NULL;
		}
		ps.p++;
		skip_ws(&ps);
	}
}

void jv_release(struct jv_doc *d)
{
	free(d->node);
	free(d->buf);
	memset(d, 0, sizeof(*d));
}

/* ---- access ---- */

const jv_t *jv_first(const jv_t *arr)
{
	return jv_is_array(arr) && arr->count ? arr + 1 : NULL;
}

const jv_t *jv_next(const jv_t *elem)
{
	return elem->flags & JV_LAST ? NULL : elem + elem->skip;
}

const jv_t *jv_first_member(const jv_t *obj)
{
	return jv_is_object(obj) && obj->count ? obj + 2 : NULL;
}

const jv_t *jv_next_member(const jv_t *value)
{
	return value[-1].flags & JV_LAST ? NULL : value + value->skip + 1;
}

const jv_t *jv_get(const jv_t *obj, const char *key)
{
	if (!jv_is_object(obj))
		return NULL;
	const jv_t *found = NULL;
	for (const jv_t *v = jv_first_member(obj); v; v = jv_next_member(v))
		if (strcmp(jv_key(v), key) == 0)
			found = v;
	return found;
}

const char *jv_str(const jv_t *v)
{
	return v && v->type == JV_STRING ? v->s : NULL;
}

int64_t jv_int(const jv_t *v)
{
	return v && v->type == JV_INT ? v->i : 0;
}

size_t jv_size(const jv_t *v)
{
	return v && (v->type == JV_ARRAY || v->type == JV_OBJECT) ? v->count : 0;
}
