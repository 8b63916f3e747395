/*
 * A hand-written scanner over the selector text: one requirement at a time, with the position
 * and the token of the first problem in every error. Label and field selectors share one
 * representation, an array of (key, op, values) that must all hold, because matching is the same
 * AND either way; only where a key's value comes from differs, and the caller's lookup says that.
 */
#include "kube/selector.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "base/xalloc.h"
#include "kube/names.h"

enum op { OP_EQ, OP_NE, OP_IN, OP_NOTIN, OP_EXISTS, OP_NOTEXISTS, OP_GT, OP_LT };

struct req {
	char *key;
	enum op op;
	char **values;
	size_t nvalues;
};

struct kube_selector {
	struct req *reqs;
	size_t n, cap;
};

void kube_selector_free(struct kube_selector *sel)
{
	if (!sel)
		return;
	for (size_t i = 0; i < sel->n; i++) {
		free(sel->reqs[i].key);
		for (size_t j = 0; j < sel->reqs[i].nvalues; j++)
			free(sel->reqs[i].values[j]);
		free(sel->reqs[i].values);
	}
	free(sel->reqs);
	free(sel);
}

static struct req *sel_add(struct kube_selector *sel, char *key, enum op op)
{
	if (sel->n == sel->cap) {
		sel->cap = sel->cap ? 2 * sel->cap : 4;
		sel->reqs = xrealloc(sel->reqs, sel->cap * sizeof(*sel->reqs));
	}
	struct req *r = &sel->reqs[sel->n++];
	memset(r, 0, sizeof(*r));
	r->key = key;
	r->op = op;
	return r;
}

static void add_value(struct req *r, char *v)
{
	r->values = xrealloc(r->values, (r->nvalues + 1) * sizeof(char *));
	r->values[r->nvalues++] = v;
}

bool kube_selector_empty(const struct kube_selector *sel)
{
	return !sel || sel->n == 0;
}

size_t kube_selector_len(const struct kube_selector *sel)
{
	return sel ? sel->n : 0;
}

const char *kube_selector_key(const struct kube_selector *sel, size_t i)
{
	return sel->reqs[i].key;
}

/* ---- label selector scanner ---- */

struct scan {
	const char *s;
	size_t pos;
	char *err;
	size_t errlen;
};

static int fail(struct scan *sc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct scan *sc, const char *fmt, ...)
{
	char why[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	snprintf(sc->err, sc->errlen, "invalid label selector \"%s\": at position %zu: %s", sc->s,
		 sc->pos, why);
	return -1;
}

static void skip_ws(struct scan *sc)
{
	while (sc->s[sc->pos] == ' ' || sc->s[sc->pos] == '\t')
		sc->pos++;
}

/* What ends a word, as in labels.Parse's lexer. */
static bool is_special(char c)
{
	return c == '\0' || c == ' ' || c == '\t' || c == ',' || c == '=' || c == '!' ||
	       c == '(' || c == ')' || c == '<' || c == '>';
}

static char *scan_word(struct scan *sc)
{
	size_t start = sc->pos;
	while (!is_special(sc->s[sc->pos]))
		sc->pos++;
	return xstrndup(sc->s + start, sc->pos - start);
}

/* "found '<token at pos>', <expected>": the token is a word, an operator, or '' at the end. */
static int fail_found(struct scan *sc, const char *expected)
{
	const char *p = sc->s + sc->pos;
	size_t n = 0;
	if (!strncmp(p, "==", 2) || !strncmp(p, "!=", 2))
		n = 2;
	else if (*p && is_special(*p))
		n = 1;
	else
		while (!is_special(p[n]))
			n++;
	return fail(sc, "found '%.*s', %s", n > 64 ? 64 : (int)n, p, expected);
}

static int scan_value(struct scan *sc, struct req *r)
{
	skip_ws(sc);
	size_t at = sc->pos;
	char *v = scan_word(sc);
	if (!kube_name_is_label_value(v, strlen(v))) {
		sc->pos = at;
		fail(sc, "invalid value \"%s\": " KUBE_LABEL_VALUE_RULE, v);
		free(v);
		return -1;
	}
	add_value(r, v);
	return 0;
}

static int scan_set(struct scan *sc, struct req *r)
{
	skip_ws(sc);
	if (sc->s[sc->pos] != '(')
		return fail_found(sc, "expected '(' after in/notin");
	sc->pos++;
	for (;;) {
		if (scan_value(sc, r) < 0)
			return -1;
		skip_ws(sc);
		char c = sc->s[sc->pos];
		if (c == ',') {
			sc->pos++;
			continue;
		}
		if (c == ')') {
			sc->pos++;
			break;
		}
		return fail_found(sc, "expected ',' or ')' in a value set");
	}
	if (r->nvalues == 1 && r->values[0][0] == '\0')
		return fail(sc, "for 'in', 'notin' operators, values set can't be empty");
	return 0;
}

static bool is_integer(const char *v)
{
	char *end;
	errno = 0;
	strtoll(v, &end, 10);
	return *v && !*end && !errno;
}

static int scan_operator(struct scan *sc, struct req *r)
{
	const char *p = sc->s + sc->pos;
	if (!strncmp(p, "==", 2) || !strncmp(p, "!=", 2)) {
		r->op = p[0] == '!' ? OP_NE : OP_EQ;
		sc->pos += 2;
		return scan_value(sc, r);
	}
	if (*p == '=' || *p == '>' || *p == '<') {
		r->op = *p == '=' ? OP_EQ : *p == '>' ? OP_GT : OP_LT;
		sc->pos++;
		if (scan_value(sc, r) < 0)
			return -1;
		if (r->op != OP_EQ && !is_integer(r->values[0]))
			return fail(sc, "expected an integer for > or <, found \"%s\"", r->values[0]);
		return 0;
	}
	size_t at = sc->pos;
	char *w = scan_word(sc);
	int rc;
	if (!strcmp(w, "in") || !strcmp(w, "notin")) {
		r->op = w[0] == 'i' ? OP_IN : OP_NOTIN;
		rc = scan_set(sc, r);
	} else {
		sc->pos = at;
		rc = fail_found(sc, "expected an operator (=, ==, !=, in, notin, >, <)");
	}
	free(w);
	return rc;
}

static int scan_requirement(struct scan *sc, struct kube_selector *sel)
{
	skip_ws(sc);
	bool neg = false;
	if (sc->s[sc->pos] == '!') {
		neg = true;
		sc->pos++;
		skip_ws(sc);
	}
	size_t at = sc->pos;
	char *key = scan_word(sc);
	if (!*key || !kube_name_is_qualified(key, strlen(key))) {
		sc->pos = at;
		if (*key)
			fail(sc, "invalid label key \"%s\": " KUBE_QUALIFIED_NAME_RULE, key);
		else
			fail_found(sc, "expected a label key");
		free(key);
		return -1;
	}
	struct req *r = sel_add(sel, key, neg ? OP_NOTEXISTS : OP_EXISTS);
	skip_ws(sc);
	char c = sc->s[sc->pos];
	if (neg || c == ',' || c == '\0')
		return 0;
	return scan_operator(sc, r);
}

struct kube_selector *kube_selector_parse(const char *text, char *err, size_t errlen)
{
	struct kube_selector *sel = xcalloc(1, sizeof(*sel));
	struct scan sc = { text ? text : "", 0, err, errlen };
	skip_ws(&sc);
	if (!sc.s[sc.pos])
		return sel;
	for (;;) {
		if (scan_requirement(&sc, sel) < 0)
			break;
		skip_ws(&sc);
		if (!sc.s[sc.pos])
			return sel;
		if (sc.s[sc.pos] != ',') {
			fail_found(&sc, "expected ',' between requirements");
			break;
		}
		sc.pos++;
	}
	kube_selector_free(sel);
	return NULL;
}

/* ---- field selector ---- */

/* The end of the term at p: the first unescaped ',' or the NUL. */
static const char *field_term_end(const char *p)
{
	for (; *p && *p != ','; p++)
		if (*p == '\\' && p[1])
			p++;
	return p;
}

static char *unescape(const char *p, size_t n, bool *ok)
{
	struct strbuf sb = STRBUF_INIT;
	for (size_t i = 0; i < n; i++) {
		if (p[i] == '\\') {
			if (i + 1 >= n || (p[i + 1] != '\\' && p[i + 1] != ',' && p[i + 1] != '='))
				*ok = false;
			else
				i++;
		}
		strbuf_addch(&sb, p[i]);
	}
	return strbuf_detach(&sb, NULL);
}

static int field_term(struct kube_selector *sel, const char *p, size_t n, char *err,
		      size_t errlen)
{
	size_t i;
	for (i = 0; i < n; i++) {
		if (p[i] == '\\') {
			i++;
			continue;
		}
		if (p[i] == '=' || (p[i] == '!' && i + 1 < n && p[i + 1] == '='))
			break;
	}
	if (i >= n || i == 0) {
		snprintf(err, errlen, "invalid selector: '%.*s'; can't understand '%.*s'", (int)n, p,
			 (int)n, p);
		return -1;
	}
	enum op op = p[i] == '!' ? OP_NE : OP_EQ;
	size_t vstart = i + (p[i] == '!' || (i + 1 < n && p[i + 1] == '=') ? 2 : 1);
	bool ok = true;
	char *v = unescape(p + vstart, n - vstart, &ok);
	if (!ok) {
		snprintf(err, errlen, "invalid field selector value: invalid escape sequence in '%.*s'",
			 (int)n, p);
		free(v);
		return -1;
	}
	add_value(sel_add(sel, xstrndup(p, i), op), v);
	return 0;
}

struct kube_selector *kube_field_selector_parse(const char *text, char *err, size_t errlen)
{
	struct kube_selector *sel = xcalloc(1, sizeof(*sel));
	const char *p = text ? text : "";
	while (*p) {
		const char *end = field_term_end(p);
		if (field_term(sel, p, (size_t)(end - p), err, errlen) < 0) {
			kube_selector_free(sel);
			return NULL;
		}
		p = *end ? end + 1 : end;
	}
	return sel;
}

/* ---- matching ---- */

static bool in_values(const struct req *r, const char *v)
{
	for (size_t i = 0; i < r->nvalues; i++)
		if (!strcmp(r->values[i], v))
			return true;
	return false;
}

static bool req_match(const struct req *r, const char *v /* NULL: absent */)
{
	switch (r->op) {
	case OP_EQ:
	case OP_IN:
		return v && in_values(r, v);
	case OP_NE:
	case OP_NOTIN:
		return !v || !in_values(r, v);
	case OP_EXISTS:
		return v != NULL;
	case OP_NOTEXISTS:
		return v == NULL;
	case OP_GT:
	case OP_LT: {
		if (!v || !is_integer(v))
			return false;
		long long have = strtoll(v, NULL, 10), want = strtoll(r->values[0], NULL, 10);
		return r->op == OP_GT ? have > want : have < want;
	}
	}
	return false;
}

bool kube_selector_match(const struct kube_selector *sel, kube_selector_lookup_fn lookup,
			 void *arg)
{
	for (size_t i = 0; sel && i < sel->n; i++) {
		char tmp[32];
		if (!req_match(&sel->reqs[i], lookup(arg, sel->reqs[i].key, tmp, sizeof(tmp))))
			return false;
	}
	return true;
}

struct kv_set {
	const struct kube_kv *kv;
	size_t n;
};

static const char *kv_lookup(void *arg, const char *key, char *tmp, size_t tmplen)
{
	const struct kv_set *set = arg;
	(void)tmp;
	(void)tmplen;
	for (size_t i = 0; i < set->n; i++)
		if (!strcmp(set->kv[i].key, key))
			return set->kv[i].value;
	return NULL;
}

bool kube_selector_matches(const struct kube_selector *sel, const struct kube_kv *labels, size_t n)
{
	struct kv_set set = { labels, n };
	return kube_selector_match(sel, kv_lookup, &set);
}
