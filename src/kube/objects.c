/*
 * kube/objects: records, the compact decoded form of the objects kcsi caches (objects.h).
 * This file holds what is asked of a record once decoded (its uid, key and finalizers, node
 * selector terms against labels) and the entry points that decode JSON into one; the rest of
 * the module is split by concern:
 *
 *   objects_pack.h/.c  the two-pass packer and the record header every decoder shares
 *   objects_core.c     core/v1 and storage.k8s.io/v1 decoders and their struct kube_kind
 *   objects_snap.c     snapshot and group snapshot decoders and their struct kube_kind
 *   objects_slab.c     the slab the records live in, their release, interned strings
 */
#include "kube/objects.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- node selector terms ---- */

static const char *label_value(const struct kube_kv *labels, uint16_t n, const char *key)
{
	for (uint16_t i = 0; i < n; i++)
		if (!strcmp(labels[i].key, key))
			return labels[i].value;
	return NULL;
}

static bool req_match(const struct kube_node_selector_req *r, const struct kube_kv *labels,
		      uint16_t nlabels)
{
	const char *v = label_value(labels, nlabels, r->key);
	bool in = false;
	for (uint16_t i = 0; v && i < r->nvalues; i++)
		in = in || !strcmp(v, r->values[i]);
	switch (r->op) {
	case KUBE_OP_IN: return in;
	case KUBE_OP_NOT_IN: return !in;
	case KUBE_OP_EXISTS: return v != NULL;
	case KUBE_OP_DOES_NOT_EXIST: return v == NULL;
	case KUBE_OP_GT:
	case KUBE_OP_LT: {
		if (!v || r->nvalues != 1)
			return false;
		char *end1, *end2;
		long long a = strtoll(v, &end1, 10), b = strtoll(r->values[0], &end2, 10);
		if (*end1 || *end2 || !*v || !*r->values[0])
			return false;
		return r->op == KUBE_OP_GT ? a > b : a < b;
	}
	default: return false;
	}
}

bool kube_node_selector_match(const struct kube_node_selector_term *terms, uint16_t nterms,
			      const struct kube_kv *labels, uint16_t nlabels)
{
	if (nterms == 0)
		return true;
	for (uint16_t t = 0; t < nterms; t++) {
		bool all = true;
		for (uint16_t i = 0; all && i < terms[t].nreqs; i++)
			all = req_match(&terms[t].reqs[i], labels, nlabels);
		/* A term without requirements matches nothing, as in Kubernetes. */
		if (all && terms[t].nreqs > 0)
			return true;
	}
	return false;
}

/* ---- a record's identity ---- */

const char *kube_obj_uid(const struct kube_obj *o, char *buf, size_t len)
{
	if (!(o->flags & KUBE_OBJ_UID_BINARY)) {
		snprintf(buf, len, "%s", o->uid.str);
		return buf;
	}
	const uint8_t *b = o->uid.bin;
	snprintf(buf, len,
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
		 b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
	return buf;
}

bool kube_obj_has_finalizer(const struct kube_obj *o, const char *finalizer)
{
	for (uint16_t i = 0; i < o->nfinalizers; i++)
		if (strcmp(o->finalizers[i], finalizer) == 0)
			return true;
	return false;
}

void kube_obj_key(const struct kube_obj *o, char *buf, size_t len)
{
	if (o->ns && *o->ns)
		snprintf(buf, len, "%s/%s", o->ns, o->name);
	else
		snprintf(buf, len, "%s", o->name);
}

struct kube_obj *kube_decode_text(const struct kube_kind *k, const char *text, size_t len,
				  char *err, size_t errlen)
{
	struct jv_doc doc = { 0 };
	const jv_t *v = jv_parse(&doc, text, len, err, errlen);
	struct kube_obj *o = v ? k->decode(v, err, errlen) : NULL;
	jv_release(&doc);
	return o;
}

struct kube_obj *kube_decode_json(const struct kube_kind *k, json_t *obj, char *err, size_t errlen)
{
	char *text = json_is_object(obj) ? json_dumps(obj, JSON_COMPACT) : NULL;
	if (!text) {
		snprintf(err, errlen, "%s: not a JSON object", k->name);
		return NULL;
	}
	struct kube_obj *o = kube_decode_text(k, text, strlen(text), err, errlen);
	free(text);
	return o;
}
