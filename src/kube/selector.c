/*
 * A hand-written scanner over the selector text: one requirement at a time, with the position
 * of the first problem in every error. Requirements are stored as an array of (key, op, values)
 * and matched with linear scans, since label sets and selectors are both a handful of entries.
 */
#include "kube/selector.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/xalloc.h"

enum op { OP_EQ, OP_NE, OP_IN, OP_NOTIN, OP_EXISTS, OP_NOTEXISTS, OP_GT, OP_LT };

struct req {
	char *key;
	enum op op;
	char **values;
	size_t nvalues;
};

struct kube_selector {
	struct req *reqs;
	size_t n;
};

struct scan {
	const char *s;
	size_t pos;
	char *err;
	size_t errlen;
};

static int fail(struct scan *sc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct scan *sc, const char *fmt, ...)
{
	char why[200];
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

static bool word_char(char c)
{
	return isalnum((unsigned char)c) || c == '-' || c == '_' || c == '.' || c == '/';
}

/* Reads a run of key/value characters; returns a copy (possibly empty). */
static char *read_word(struct scan *sc)
{
	skip_ws(sc);
	size_t start = sc->pos;
	while (word_char(sc->s[sc->pos]))
		sc->pos++;
	return xstrndup(sc->s + start, sc->pos - start);
}

/* name: 1..63 chars, alphanumeric at both ends, '-', '_', '.' inside. */
static bool valid_name(const char *v, size_t n, bool allow_empty)
{
	if (n == 0)
		return allow_empty;
	if (n > 63 || !isalnum((unsigned char)v[0]) || !isalnum((unsigned char)v[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)v[i]) && v[i] != '-' && v[i] != '_' && v[i] != '.')
			return false;
	return true;
}

static bool valid_prefix(const char *p, size_t n)
{
	if (n == 0 || n > 253)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = p[i];
		if (!(islower((unsigned char)c) || isdigit((unsigned char)c) || c == '-' || c == '.'))
			return false;
	}
	return isalnum((unsigned char)p[0]) && isalnum((unsigned char)p[n - 1]);
}

static bool valid_key(const char *k)
{
	const char *slash = strchr(k, '/');
	if (!slash)
		return valid_name(k, strlen(k), false);
	if (strchr(slash + 1, '/'))
		return false;
	return valid_prefix(k, (size_t)(slash - k)) && valid_name(slash + 1, strlen(slash + 1), false);
}

static int add_value(struct scan *sc, struct req *r, char *v, bool numeric)
{
	if (numeric) {
		char *end;
		if (!*v || (strtoll(v, &end, 10), *end)) {
			free(v);
			return fail(sc, "expected an integer for > or <");
		}
	} else if (!valid_name(v, strlen(v), true)) {
		int rc = fail(sc, "invalid value \"%s\"", v);
		free(v);
		return rc;
	}
	r->values = xrealloc(r->values, (r->nvalues + 1) * sizeof(char *));
	r->values[r->nvalues++] = v;
	return 0;
}

static int parse_set(struct scan *sc, struct req *r)
{
	skip_ws(sc);
	if (sc->s[sc->pos] != '(')
		return fail(sc, "expected '(' after in/notin");
	sc->pos++;
	for (;;) {
		char *v = read_word(sc);
		if (add_value(sc, r, v, false))
			return -1;
		skip_ws(sc);
		char c = sc->s[sc->pos];
		if (c == ',') {
			sc->pos++;
			continue;
		}
		if (c == ')') {
			sc->pos++;
			return 0;
		}
		return fail(sc, "expected ',' or ')' in a value set");
	}
}

static int parse_req(struct scan *sc, struct req *r)
{
	skip_ws(sc);
	bool neg = false;
	if (sc->s[sc->pos] == '!') {
		neg = true;
		sc->pos++;
	}
	size_t keypos = sc->pos;
	r->key = read_word(sc);
	if (!*r->key)
		return fail(sc, "expected a label key");
	if (!valid_key(r->key)) {
		sc->pos = keypos;
		return fail(sc, "invalid label key \"%s\"", r->key);
	}
	skip_ws(sc);
	const char *p = sc->s + sc->pos;
	if (neg) {
		r->op = OP_NOTEXISTS;
		return 0;
	}
	if (*p == ',' || *p == 0) {
		r->op = OP_EXISTS;
		return 0;
	}
	if (!strncmp(p, "==", 2) || !strncmp(p, "!=", 2) || *p == '=' || *p == '>' || *p == '<') {
		r->op = *p == '!' ? OP_NE : *p == '>' ? OP_GT : *p == '<' ? OP_LT : OP_EQ;
		sc->pos += (!strncmp(p, "==", 2) || *p == '!') ? 2 : 1;
		return add_value(sc, r, read_word(sc), r->op == OP_GT || r->op == OP_LT);
	}
	size_t save = sc->pos;
	char *w = read_word(sc);
	int rc;
	if (!strcmp(w, "in")) {
		r->op = OP_IN;
		rc = parse_set(sc, r);
	} else if (!strcmp(w, "notin")) {
		r->op = OP_NOTIN;
		rc = parse_set(sc, r);
	} else {
		sc->pos = save;
		rc = fail(sc, "expected an operator (=, ==, !=, in, notin, >, <)");
	}
	free(w);
	return rc;
}

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

struct kube_selector *kube_selector_parse(const char *text, char *err, size_t errlen)
{
	struct kube_selector *sel = xcalloc(1, sizeof(*sel));
	struct scan sc = { text ? text : "", 0, err, errlen };
	skip_ws(&sc);
	if (!sc.s[sc.pos])
		return sel;
	for (;;) {
		sel->reqs = xrealloc(sel->reqs, (sel->n + 1) * sizeof(*sel->reqs));
		struct req *r = &sel->reqs[sel->n++];
		memset(r, 0, sizeof(*r));
		if (parse_req(&sc, r)) {
			kube_selector_free(sel);
			return NULL;
		}
		skip_ws(&sc);
		if (!sc.s[sc.pos])
			return sel;
		if (sc.s[sc.pos] != ',') {
			fail(&sc, "expected ',' between requirements");
			kube_selector_free(sel);
			return NULL;
		}
		sc.pos++;
	}
}

bool kube_selector_empty(const struct kube_selector *sel)
{
	return sel->n == 0;
}

static const char *label(const struct kube_kv *labels, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(labels[i].key, key))
			return labels[i].value;
	return NULL;
}

static bool in_values(const struct req *r, const char *v)
{
	for (size_t i = 0; i < r->nvalues; i++)
		if (!strcmp(r->values[i], v))
			return true;
	return false;
}

bool kube_selector_matches(const struct kube_selector *sel, const struct kube_kv *labels, size_t n)
{
	for (size_t i = 0; i < sel->n; i++) {
		const struct req *r = &sel->reqs[i];
		const char *v = label(labels, n, r->key);
		bool ok;
		char *end;
		long long have;
		switch (r->op) {
		case OP_EQ: ok = v && in_values(r, v); break;
		case OP_NE: ok = !v || !in_values(r, v); break;
		case OP_IN: ok = v && in_values(r, v); break;
		case OP_NOTIN: ok = !v || !in_values(r, v); break;
		case OP_EXISTS: ok = v != NULL; break;
		case OP_NOTEXISTS: ok = v == NULL; break;
		case OP_GT:
		case OP_LT:
			if (!v)
				return false;
			have = strtoll(v, &end, 10);
			if (!*v || *end)
				return false;
			ok = r->op == OP_GT ? have > strtoll(r->values[0], NULL, 10)
					    : have < strtoll(r->values[0], NULL, 10);
			break;
		default: ok = false;
		}
		if (!ok)
			return false;
	}
	return true;
}
