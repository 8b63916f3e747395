/*
 * The two passes of a record decoder (objects_pack.h says how they work): the header every
 * record has (metadata: name, namespace, uid as 16 bytes when canonical, resourceVersion,
 * labels, annotations, finalizers, owner), the shared packers of maps, string lists, arrays of
 * structs and node selector terms, and pk_decode(), which runs a kind's fields function twice
 * into one slab record.
 */
#include "kube/objects_pack.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "base/timeutil.h"
#include "kube/quantity.h"

static int hexval(char c)
{
	if (c >= '0' && c <= '9') return c - '0';
	if (c >= 'a' && c <= 'f') return c - 'a' + 10;
	return -1;
}

/* Parses a lowercase canonical UUID into 16 bytes. */
static bool uuid_parse(const char *s, uint8_t out[16])
{
	if (!s || strlen(s) != 36)
		return false;
	int j = 0;
	for (int i = 0; i < 36;) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i++] != '-')
				return false;
			continue;
		}
		int a = hexval(s[i]), b = hexval(s[i + 1]);
		if (a < 0 || b < 0)
			return false;
		out[j++] = (uint8_t)(a << 4 | b);
		i += 2;
	}
	return true;
}

/*
 * Fills the common header from metadata. Returns -1 when the object has no name.
 */
int pk_meta(struct packer *pk, const jv_t *obj, struct kube_obj *m, char *err, size_t errlen)
{
	const jv_t *md = jv_get(obj, "metadata");
	const char *name = pk_jstr(md, "name");
	if (!name || !*name) {
		snprintf(err, errlen, "object without metadata.name");
		return -1;
	}
	m->name = pk_str(pk, name);
	m->ns = kube_intern(pk_jstr(md, "namespace"));
	m->rv = pk_str(pk, pk_jstr(md, "resourceVersion") ? pk_jstr(md, "resourceVersion") : "");
	const char *uid = pk_jstr(md, "uid");
	if (uuid_parse(uid, m->uid.bin)) {
		m->flags |= KUBE_OBJ_UID_BINARY;
	} else {
		m->flags &= ~KUBE_OBJ_UID_BINARY;
		m->uid.str = pk_str(pk, uid ? uid : "");
	}
	m->generation = jv_int(jv_get(md, "generation"));
	const char *dts = pk_jstr(md, "deletionTimestamp");
	time_t t = 0;
	m->deletion_ts = (dts && rfc3339_parse(dts, &t) == 0) ? (int64_t)t : (dts ? 1 : 0);
	const jv_t *fin = jv_get(md, "finalizers");
	size_t n = jv_is_array(fin) ? jv_size(fin) : 0;
	if (n > UINT16_MAX)
		n = UINT16_MAX;
	const char **arr = pk_alloc(pk, n * sizeof(char *), sizeof(char *));
	m->nfinalizers = (uint16_t)n;
	m->finalizers = arr;
	const jv_t *fe = jv_first(fin);
	for (size_t i = 0; i < n; i++, fe = jv_next(fe)) {
		const char *f = kube_intern(jv_str(fe));
		if (arr)
			arr[i] = f ? f : kube_intern("");
	}
	return 0;
}

/* Packs a string map (labels, annotations, attributes) as a kv array. */
const struct kube_kv *pk_map(struct packer *pk, const jv_t *map, uint16_t *count)
{
	size_t n = jv_is_object(map) ? jv_size(map) : 0;
	if (n > UINT16_MAX)
		n = UINT16_MAX;
	struct kube_kv *kv = pk_alloc(pk, n * sizeof(*kv), sizeof(char *));
	size_t i = 0;
	const char *k;
	const jv_t *v;
	jv_object_foreach(map, k, v) {
		if (i >= n)
			break;
		/* Keys repeat across objects (devicePath, attribute names): interned. */
		const char *ks = kube_intern(k), *vs = pk_str(pk, jv_is_string(v) ? jv_str(v) : "");
		if (kv) {
			kv[i].key = ks;
			kv[i].value = vs;
		}
		i++;
	}
	*count = (uint16_t)n;
	return kv;
}

/* Packs a JSON array of strings; interned when the values repeat across objects. */
const char *const *pk_strv(struct packer *pk, const jv_t *arr, bool intern, uint16_t *count)
{
	size_t n = jv_is_array(arr) ? jv_size(arr) : 0;
	if (n > UINT16_MAX)
		n = UINT16_MAX;
	const char **v = pk_alloc(pk, n * sizeof(char *), sizeof(char *));
	const jv_t *ae = jv_first(arr);
	for (size_t i = 0; i < n; i++, ae = jv_next(ae)) {
		const char *e = jv_str(ae);
		e = intern ? kube_intern(e ? e : "") : pk_str(pk, e ? e : "");
		if (v)
			v[i] = e;
	}
	*count = (uint16_t)n;
	return v;
}

static uint8_t selector_op(const char *op)
{
	if (!op || !strcmp(op, "In")) return KUBE_OP_IN;
	if (!strcmp(op, "NotIn")) return KUBE_OP_NOT_IN;
	if (!strcmp(op, "Exists")) return KUBE_OP_EXISTS;
	if (!strcmp(op, "DoesNotExist")) return KUBE_OP_DOES_NOT_EXIST;
	if (!strcmp(op, "Gt")) return KUBE_OP_GT;
	if (!strcmp(op, "Lt")) return KUBE_OP_LT;
	return KUBE_OP_DOES_NOT_EXIST + 16; /* unknown operator: matches nothing */
}

/*
 * Packs node selector terms. `exprs` names the member holding the requirements:
 * "matchExpressions" (nodeAffinity) or "matchLabelExpressions" (allowedTopologies, op In).
 */
const struct kube_node_selector_term *pk_terms(struct packer *pk, const jv_t *terms,
					       const char *exprs, uint16_t *count)
{
	size_t n = jv_is_array(terms) ? jv_size(terms) : 0;
	if (n > UINT16_MAX)
		n = UINT16_MAX;
	struct kube_node_selector_term *t = pk_alloc(pk, n * sizeof(*t), sizeof(char *));
	const jv_t *te = jv_first(terms);
	for (size_t i = 0; i < n; i++, te = jv_next(te)) {
		const jv_t *ex = jv_get(te, exprs);
		size_t nr = jv_is_array(ex) ? jv_size(ex) : 0;
		if (nr > UINT16_MAX)
			nr = UINT16_MAX;
		struct kube_node_selector_req *r = pk_alloc(pk, nr * sizeof(*r), sizeof(char *));
		const jv_t *e = jv_first(ex);
		for (size_t k = 0; k < nr; k++, e = jv_next(e)) {
			const char *key = kube_intern(pk_jstr(e, "key"));
			uint16_t nv;
			const char *const *vals = pk_strv(pk, jv_get(e, "values"), true, &nv);
			if (r) {
				r[k].key = key ? key : kube_intern("");
				r[k].values = vals;
				r[k].nvalues = nv;
				r[k].op = selector_op(pk_jstr(e, "operator"));
			}
		}
		if (t) {
			t[i].reqs = r;
			t[i].nreqs = (uint16_t)nr;
		}
	}
	*count = (uint16_t)n;
	return t;
}

struct kube_obj *pk_decode(const jv_t *obj, size_t size, uint8_t kind, pk_fields_fn fn,
			   char *err, size_t errlen)
{
	_Alignas(max_align_t) char scratch[512];
	if (size > sizeof(scratch))
		abort();
	memset(scratch, 0, size);
	struct packer pk = { NULL, size };
	if (fn(&pk, obj, scratch, err, errlen) != 0)
		return NULL;
	uint8_t cls;
	char *mem = kube_slab_alloc(pk.off, &cls);
	pk.base = mem;
	pk.off = size;
	fn(&pk, obj, mem, err, errlen);
	struct kube_obj *o = (struct kube_obj *)mem;
	atomic_init(&o->refs, 1);
	o->kind = kind;
	o->flags = (uint8_t)((o->flags & KUBE_OBJ_UID_BINARY) | (cls << 1));
	return o;
}

/*
 * Packs a JSON array whose elements become fixed-size structs: elem() fills one element from its
 * JSON (it packs the element's strings itself, so it runs in both passes; in the sizing pass its
 * result lands in a scratch element and is dropped).
 */
void *pk_array(struct packer *pk, const jv_t *arr, size_t size, pk_elem_fn elem,
	       uint16_t *count)
{
	_Alignas(max_align_t) char scratch[64];
	size_t n = jv_is_array(arr) ? jv_size(arr) : 0;
	if (n > UINT16_MAX)
		n = UINT16_MAX;
	assert(size <= sizeof(scratch));
	char *a = pk_alloc(pk, n * size, sizeof(char *));
	const jv_t *e = jv_first(arr);
	for (size_t i = 0; i < n; i++, e = jv_next(e))
		elem(pk, e, a ? a + i * size : scratch);
	*count = (uint16_t)n;
	return a;
}

/* A quantity of a map (status.capacity, allocatable, ...) in its unit; -1 when absent or bad. */
int64_t pk_quantity(const jv_t *map, const char *key)
{
	const char *q = pk_jstr(map, key);
	char err[128];
	int64_t v;
	return (q && kube_quantity_parse(q, &v, err, sizeof(err)) == 0) ? v : -1;
}

uint8_t pk_word(const char *s, const char *const *words, size_t n, uint8_t other)
{
	if (!s)
		return 0;
	for (size_t i = 1; i < n; i++)
		if (!strcmp(s, words[i]))
			return (uint8_t)i;
	return other;
}

/*
 * A LabelSelector (matchLabels, matchExpressions) as selector text: "k=v,k in (a,b),!k".
 * Writes "!" (matches nothing: "!" is not a valid selector, so it is refused) when the
 * selector does not fit or uses an unknown operator.
 */
void pk_selector_text(const jv_t *sel, char *buf, size_t len)
{
	struct strbuf sb;
	const char *k;
	const jv_t *v, *e;
	size_t i;
	bool bad = false;

	strbuf_init(&sb, 64);
	jv_object_foreach(jv_get(sel, "matchLabels"), k, v) {
		strbuf_addf(&sb, "%s%s=%s", sb.len ? "," : "", k, jv_is_string(v) ? jv_str(v) : "");
	}
	jv_array_foreach(jv_get(sel, "matchExpressions"), i, e) {
		const char *key = pk_jstr(e, "key"), *op = pk_jstr(e, "operator");
		const jv_t *vals = jv_get(e, "values"), *x;
		size_t j;
		if (!key || !op) {
			bad = true;
			break;
		}
		if (sb.len)
			strbuf_addch(&sb, ',');
		if (!strcmp(op, "Exists"))
			strbuf_addstr(&sb, key);
		else if (!strcmp(op, "DoesNotExist"))
			strbuf_addf(&sb, "!%s", key);
		else if (!strcmp(op, "In") || !strcmp(op, "NotIn")) {
			strbuf_addf(&sb, "%s %s (", key, !strcmp(op, "In") ? "in" : "notin");
			jv_array_foreach(vals, j, x)
				strbuf_addf(&sb, "%s%s", j ? "," : "", jv_is_string(x) ? jv_str(x) : "");
			strbuf_addch(&sb, ')');
		} else {
			bad = true;
			break;
		}
	}
	snprintf(buf, len, "%s", bad || sb.len >= len ? "!" : sb.buf ? sb.buf : "");
	strbuf_release(&sb);
}
