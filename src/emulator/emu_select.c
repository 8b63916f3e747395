/*
 * emu_select: selector parsing and matching, and name validation.
 *
 * Both selector kinds share one representation, a flat array of requirements, because matching
 * is the same AND over requirements; only the source of the value differs (labels map versus a
 * field path). The label grammar is parsed by a small hand-written scanner: the grammar is tiny,
 * and a scanner gives precise error messages ("expected ')'") that a regex-based split cannot.
 */
#include "emulator/emu_select.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "base/xalloc.h"

enum sel_op { OP_EQ, OP_NE, OP_IN, OP_NOTIN, OP_EXISTS, OP_NOTEXISTS, OP_GT, OP_LT };

struct sel_req {
	char *key;
	enum sel_op op;
	char **values;
	size_t nvalues;
};

struct emu_selector {
	struct sel_req *reqs;
	size_t len, cap;
};

static struct emu_selector *sel_new(void)
{
	return xcalloc(1, sizeof(struct emu_selector));
}

void emu_selector_free(struct emu_selector *sel)
{
	if (!sel)
		return;
	for (size_t i = 0; i < sel->len; i++) {
		free(sel->reqs[i].key);
		for (size_t j = 0; j < sel->reqs[i].nvalues; j++)
			free(sel->reqs[i].values[j]);
		free(sel->reqs[i].values);
	}
	free(sel->reqs);
	free(sel);
}

static struct sel_req *sel_add(struct emu_selector *sel, char *key, enum sel_op op)
{
	if (sel->len == sel->cap) {
		sel->cap = sel->cap ? 2 * sel->cap : 4;
		sel->reqs = xrealloc(sel->reqs, sel->cap * sizeof(*sel->reqs));
	}
	struct sel_req *r = &sel->reqs[sel->len++];
	memset(r, 0, sizeof(*r));
	r->key = key;
	r->op = op;
	return r;
}

static void req_add_value(struct sel_req *r, char *v)
{
	r->values = xrealloc(r->values, (r->nvalues + 1) * sizeof(char *));
	r->values[r->nvalues++] = v;
}

size_t emu_selector_len(const struct emu_selector *sel)
{
	return sel ? sel->len : 0;
}

const char *emu_selector_key(const struct emu_selector *sel, size_t i)
{
	return sel->reqs[i].key;
}

/* ---- names ---- */

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

bool emu_name_is_dns1123_subdomain(const char *s, char *err, size_t errlen)
{
	size_t n = strlen(s);
	bool ok = n > 0 && n <= 253;
	for (const char *p = s; ok && *p;) {
		const char *dot = strchr(p, '.');
		size_t len = dot ? (size_t)(dot - p) : strlen(p);
		/* kube-apiserver's subdomain check limits only the whole name (253), not each
		 * part: VolumeAttachment names such as "csi-" + 64 hex digits are valid. */
		ok = dns_label_ok(p, len, 253);
		p = dot ? dot + 1 : p + len;
		if (dot && !*p)
			ok = false;
	}
	if (!ok)
		snprintf(err, errlen, n > 253 ? "must be no more than 253 characters" :
			 "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
			 "characters, '-' or '.', and must start and end with an alphanumeric "
			 "character (e.g. 'example.com')");
	return ok;
}

bool emu_name_is_dns1123_label(const char *s, char *err, size_t errlen)
{
	size_t n = strlen(s);
	if (dns_label_ok(s, n, 63))
		return true;
	snprintf(err, errlen, n > 63 ? "must be no more than 63 characters" :
		 "a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
		 "or '-', and must start and end with an alphanumeric character (e.g. 'my-name')");
	return false;
}

/* Label values and the name part of keys: <=63 chars, alnum at both ends, -_. inside. */
static bool label_name_ok(const char *s, bool allow_empty)
{
	size_t n = strlen(s);
	if (n == 0)
		return allow_empty;
	if (n > 63 || !is_alnum(s[0]) || !is_alnum(s[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
			return false;
	return true;
}

static bool label_key_ok(const char *key)
{
	const char *slash = strchr(key, '/');
	if (!slash)
		return label_name_ok(key, false);
	char prefix[256], e[8];
	size_t plen = (size_t)(slash - key);
	if (plen == 0 || plen >= sizeof(prefix))
		return false;
	memcpy(prefix, key, plen);
	prefix[plen] = '\0';
	return emu_name_is_dns1123_subdomain(prefix, e, sizeof(e)) && label_name_ok(slash + 1, false);
}

/* ---- label selector scanner ---- */

struct scan {
	const char *s;
	size_t i;
	char *err;
	size_t errlen;
};

static void skip_ws(struct scan *sc)
{
	while (sc->s[sc->i] == ' ' || sc->s[sc->i] == '\t')
		sc->i++;
}

static bool is_special(char c)
{
	return c == '\0' || c == ' ' || c == '\t' || c == ',' || c == '=' || c == '!' ||
	       c == '(' || c == ')' || c == '<' || c == '>';
}

static char *scan_word(struct scan *sc)
{
	size_t start = sc->i;
	while (!is_special(sc->s[sc->i]))
		sc->i++;
	return xstrndup(sc->s + start, sc->i - start);
}

static int fail(struct scan *sc, const char *fmt, const char *arg)
{
	snprintf(sc->err, sc->errlen, fmt, arg);
	return -1;
}

static int scan_value(struct scan *sc, struct sel_req *r)
{
	skip_ws(sc);
	char *v = scan_word(sc);
	if (!label_name_ok(v, true)) {
		fail(sc, "invalid label value: \"%s\": a valid label must be an empty string or "
		     "consist of alphanumeric characters, '-', '_' or '.', and must start and end "
		     "with an alphanumeric character", v);
		free(v);
		return -1;
	}
	req_add_value(r, v);
	return 0;
}

static int scan_set(struct scan *sc, struct sel_req *r)
{
	skip_ws(sc);
	if (sc->s[sc->i] != '(')
		return fail(sc, "found '%s', expected: '(' after 'in'/'notin'", sc->s + sc->i);
	sc->i++;
	for (;;) {
		if (scan_value(sc, r) < 0)
			return -1;
		skip_ws(sc);
		char c = sc->s[sc->i];
		if (c == ',') {
			sc->i++;
			continue;
		}
		if (c == ')') {
			sc->i++;
			break;
		}
		return fail(sc, "found '%s', expected: ',' or ')'", sc->s + sc->i);
	}
	if (r->nvalues == 1 && r->values[0][0] == '\0')
		return fail(sc, "%sfor 'in', 'notin' operators, values set can't be empty", "");
	return 0;
}

static int scan_operator(struct scan *sc, struct sel_req *r)
{
	const char *p = sc->s + sc->i;
	if (!strncmp(p, "==", 2) || !strncmp(p, "!=", 2)) {
		r->op = p[0] == '!' ? OP_NE : OP_EQ;
		sc->i += 2;
		return scan_value(sc, r);
	}
	if (*p == '=' || *p == '>' || *p == '<') {
		r->op = *p == '=' ? OP_EQ : *p == '>' ? OP_GT : OP_LT;
		sc->i++;
		if (scan_value(sc, r) < 0)
			return -1;
		char *end;
		errno = 0;
		if (r->op != OP_EQ && (strtoll(r->values[0], &end, 10), errno || *end || !*r->values[0]))
			return fail(sc, "for 'Gt', 'Lt' operators, the value must be an integer: %s",
				    r->values[0]);
		return 0;
	}
	if (!strncmp(p, "in", 2) && (p[2] == ' ' || p[2] == '(' || p[2] == '\t')) {
		r->op = OP_IN;
		sc->i += 2;
		return scan_set(sc, r);
	}
	if (!strncmp(p, "notin", 5) && (p[5] == ' ' || p[5] == '(' || p[5] == '\t')) {
		r->op = OP_NOTIN;
		sc->i += 5;
		return scan_set(sc, r);
	}
	return fail(sc, "found '%s', expected: in, notin, =, ==, !=, gt, lt", p);
}

static int scan_requirement(struct scan *sc, struct emu_selector *sel)
{
	skip_ws(sc);
	bool neg = false;
	if (sc->s[sc->i] == '!') {
		neg = true;
		sc->i++;
		skip_ws(sc);
	}
	char *key = scan_word(sc);
	if (!label_key_ok(key)) {
		fail(sc, "invalid label key \"%s\": a qualified name must consist of alphanumeric "
		     "characters, '-', '_' or '.', with an optional DNS subdomain prefix and '/'", key);
		free(key);
		return -1;
	}
	struct sel_req *r = sel_add(sel, key, neg ? OP_NOTEXISTS : OP_EXISTS);
	skip_ws(sc);
	char c = sc->s[sc->i];
	if (neg || c == ',' || c == '\0')
		return 0;
	return scan_operator(sc, r);
}

int emu_label_selector_parse(const char *s, struct emu_selector **out, char *err, size_t errlen)
{
	struct scan sc = { s ? s : "", 0, err, errlen };
	struct emu_selector *sel = sel_new();
	*out = NULL;
	skip_ws(&sc);
	while (sc.s[sc.i]) {
		if (scan_requirement(&sc, sel) < 0)
			goto fail;
		skip_ws(&sc);
		if (sc.s[sc.i] == ',') {
			sc.i++;
			skip_ws(&sc);
			if (!sc.s[sc.i]) {
				fail(&sc, "%sfound '', expected: identifier after ','", "");
				goto fail;
			}
		} else if (sc.s[sc.i]) {
			fail(&sc, "found '%s', expected: ',' or end of string", sc.s + sc.i);
			goto fail;
		}
	}
	*out = sel;
	return 0;
fail:
	emu_selector_free(sel);
	return -1;
}

/* ---- field selector ---- */

/* Splits at unescaped `sep`; returns a pointer past the term (at sep or NUL). */
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

static int field_term(struct emu_selector *sel, const char *p, size_t n, char *err, size_t errlen)
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
	enum sel_op op = p[i] == '!' ? OP_NE : OP_EQ;
	size_t vstart = i + (p[i] == '!' || (i + 1 < n && p[i + 1] == '=') ? 2 : 1);
	bool ok = true;
	char *v = unescape(p + vstart, n - vstart, &ok);
	if (!ok) {
		snprintf(err, errlen, "invalid field selector value: invalid escape sequence in '%.*s'",
			 (int)n, p);
		free(v);
		return -1;
	}
	struct sel_req *r = sel_add(sel, xstrndup(p, i), op);
	req_add_value(r, v);
	return 0;
}

int emu_field_selector_parse(const char *s, struct emu_selector **out, char *err, size_t errlen)
{
	struct emu_selector *sel = sel_new();
	*out = NULL;
	const char *p = s ? s : "";
	while (*p) {
		const char *end = field_term_end(p);
		if (field_term(sel, p, (size_t)(end - p), err, errlen) < 0) {
			emu_selector_free(sel);
			return -1;
		}
		p = *end ? end + 1 : end;
	}
	*out = sel;
	return 0;
}

/* ---- matching ---- */

static bool in_values(const struct sel_req *r, const char *v)
{
	for (size_t i = 0; i < r->nvalues; i++)
		if (!strcmp(r->values[i], v))
			return true;
	return false;
}

static bool req_match(const struct sel_req *r, const char *v /* NULL: absent */)
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
		if (!v)
			return false;
		char *end;
		errno = 0;
		long long have = strtoll(v, &end, 10);
		if (errno || *end || !*v)
			return false;
		long long want = strtoll(r->values[0], NULL, 10);
		return r->op == OP_GT ? have > want : have < want;
	}
	}
	return false;
}

bool emu_selector_match_labels(const struct emu_selector *sel, const json_t *labels)
{
	if (!sel)
		return true;
	for (size_t i = 0; i < sel->len; i++) {
		const json_t *v = json_is_object(labels) ? json_object_get(labels, sel->reqs[i].key) : NULL;
		if (!req_match(&sel->reqs[i], json_is_string(v) ? json_string_value(v) : NULL))
			return false;
	}
	return true;
}

const char *emu_json_path_string(const json_t *obj, const char *path, char *tmp, size_t tmplen)
{
	const json_t *cur = obj;
	const char *p = path;
	while (cur && *p) {
		const char *dot = strchr(p, '.');
		size_t n = dot ? (size_t)(dot - p) : strlen(p);
		char key[128];
		if (n >= sizeof(key) || !json_is_object(cur))
			return "";
		memcpy(key, p, n);
		key[n] = '\0';
		cur = json_object_get(cur, key);
		p += n + (dot ? 1 : 0);
	}
	if (json_is_string(cur))
		return json_string_value(cur);
	if (json_is_integer(cur)) {
		snprintf(tmp, tmplen, "%lld", (long long)json_integer_value(cur));
		return tmp;
	}
	if (json_is_boolean(cur))
		return json_is_true(cur) ? "true" : "false";
	return "";
}

bool emu_selector_match_fields(const struct emu_selector *sel, const json_t *obj)
{
	if (!sel)
		return true;
	for (size_t i = 0; i < sel->len; i++) {
		char tmp[32];
		const char *v = emu_json_path_string(obj, sel->reqs[i].key, tmp, sizeof(tmp));
		if (!req_match(&sel->reqs[i], v))
			return false;
	}
	return true;
}
