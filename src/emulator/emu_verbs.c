/*
 * emu_verbs: the API verbs over the store — get, list, create, update, patch, delete — with
 * kube-apiserver's semantics (optimistic concurrency, finalizers and deletionTimestamp, status
 * subresource rules, generation, Status errors).
 *
 * Each verb parses its input outside the store lock, then takes the lock once for the whole
 * decision and commit and serializes its answer before releasing it, so an answer always shows
 * the state the operation produced. Answers are built as a `struct reply` (code + JSON text) and
 * sent after the lock is released. Watches live in emu_watch.c.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include "base/log.h"
#include "base/strbuf.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "emulator/emu_defaults.h"
#include "emulator/emu_internal.h"
#include "emulator/emu_patch.h"
#include "emulator/emu_verbs.h"
#include "kube/names.h"
#include "kube/quantity.h"

#define KEY_MAX 600

/* ---- replies ---- */

static const char *qualified(const struct emu_resource *r, char *buf, size_t len)
{
	if (*r->group)
		snprintf(buf, len, "%s.%s", r->plural, r->group);
	else
		snprintf(buf, len, "%s", r->plural);
	return buf;
}

static json_t *details_for(const struct emu_resource *r, const char *name)
{
	json_t *d = json_object();
	if (name)
		json_object_set_new(d, "name", json_string(name));
	if (*r->group)
		json_object_set_new(d, "group", json_string(r->group));
	json_object_set_new(d, "kind", json_string(r->plural));
	return d;
}

static void reply_not_found(struct reply *rp, const struct emu_resource *r, const char *name)
{
	char q[128], msg[1024];
	snprintf(msg, sizeof(msg), "%s \"%s\" not found", qualified(r, q, sizeof(q)), name);
	reply_status(rp, 404, "NotFound", msg, details_for(r, name));
}

static void reply_conflict(struct reply *rp, const struct emu_resource *r, const char *name,
			   const char *why)
{
	char q[128], msg[1400];
	snprintf(msg, sizeof(msg), "Operation cannot be fulfilled on %s \"%s\": %s",
		 qualified(r, q, sizeof(q)), name, why);
	reply_status(rp, 409, "Conflict", msg, details_for(r, name));
}

static const char *const MODIFIED_MSG = "the object has been modified; please apply your changes "
					"to the latest version and try again";

/* 422 Invalid with one cause, shaped like upstream's field errors. */
static void reply_invalid(struct reply *rp, const struct emu_resource *r, const char *name,
			  const char *field, const char *cause_type, const char *detail)
{
	char msg[1600];
	snprintf(msg, sizeof(msg), "%s%s%s \"%s\" is invalid: %s: %s", r->kind, *r->group ? "." : "",
		 r->group, name ? name : "", field, detail);
	json_t *d = json_object();
	if (name)
		json_object_set_new(d, "name", json_string(name));
	if (*r->group)
		json_object_set_new(d, "group", json_string(r->group));
	json_object_set_new(d, "kind", json_string(r->kind));
	json_object_set_new(d, "causes",
			    json_pack("[{s:s, s:s, s:s}]", "reason", cause_type, "message", detail,
				      "field", field));
	reply_status(rp, 422, "Invalid", msg, d);
}

static void reply_object(struct reply *rp, unsigned code, const char *text)
{
	free(rp->text);
	rp->code = code;
	rp->text = xstrdup(text);
}

static void reply_dump(struct reply *rp, unsigned code, const json_t *obj)
{
	free(rp->text);
	rp->code = code;
	rp->text = json_dumps(obj, JSON_COMPACT);
}

static enum MHD_Result send_reply(struct emu_call *k, struct reply *rp)
{
	return emu_reply_text(k->conn, rp->code, rp->text, 0);
}

/* ---- small helpers ---- */

static json_t *meta_of(json_t *obj)
{
	json_t *m = json_object_get(obj, "metadata");
	if (!json_is_object(m)) {
		m = json_object();
		json_object_set_new(obj, "metadata", m);
	}
	return m;
}

static const char *meta_str(const json_t *obj, const char *field)
{
	return json_string_value(json_object_get(json_object_get(obj, "metadata"), field));
}

static void new_uid(char *buf, size_t len)
{
	unsigned char b[16];
	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
		for (size_t i = 0; i < sizeof(b); i++)
			b[i] = (unsigned char)(random() & 0xff);
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
	snprintf(buf, len, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
		 b[13], b[14], b[15]);
}

static void now_rfc3339(char *buf, size_t len)
{
	rfc3339_format(time(NULL), buf, len);
}

static void emu_set_type(const struct emu_resource *r, json_t *obj)
{
	json_object_set_new(obj, "apiVersion", json_string(r->api_version));
	json_object_set_new(obj, "kind", json_string(r->kind));
}

static bool all_strings(const json_t *v, bool map)
{
	if (map ? !json_is_object(v) : !json_is_array(v))
		return false;
	const char *k;
	size_t i;
	json_t *e;
	if (map) {
		json_object_foreach((json_t *)v, k, e)
			if (!json_is_string(e))
				return false;
	} else {
		json_array_foreach((json_t *)v, i, e)
			if (!json_is_string(e))
				return false;
	}
	return true;
}

/*
 * The metadata fields the emulator reads must have their API types, as decoding into ObjectMeta
 * would require upstream: strings, string maps, a string list.
 */
static bool check_meta_types(const json_t *meta, struct reply *rp)
{
	static const char *const strs[] = { "name", "generateName", "namespace", "resourceVersion",
					    "uid" };
	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
		json_t *v = json_object_get(meta, strs[i]);
		if (v && !json_is_string(v) && !json_is_null(v)) {
			reply_bad(rp, "metadata.%s must be a string", strs[i]);
			return false;
		}
	}
	static const char *const maps[] = { "labels", "annotations" };
	for (size_t i = 0; i < 2; i++) {
		json_t *v = json_object_get(meta, maps[i]);
		if (v && !json_is_null(v) && !all_strings(v, true)) {
			reply_bad(rp, "metadata.%s must be a map of strings to strings", maps[i]);
			return false;
		}
	}
	json_t *f = json_object_get(meta, "finalizers");
	if (f && !json_is_null(f) && !all_strings(f, false)) {
		reply_bad(rp, "metadata.finalizers must be an array of strings");
		return false;
	}
	return true;
}

/* Body is an object of this resource's apiVersion/kind (when given) with an object metadata. */
static bool check_type(struct emu_call *k, json_t *obj, struct reply *rp)
{
	if (!json_is_object(obj)) {
		reply_bad(rp, "the request body must be a JSON object (a %s)", k->r->kind);
		return false;
	}
	json_t *av = json_object_get(obj, "apiVersion"), *kind = json_object_get(obj, "kind");
	if (av && (!json_is_string(av) || strcmp(json_string_value(av), k->r->api_version))) {
		reply_bad(rp, "the API version in the data (%s) does not match the expected API "
			  "version (%s)", json_is_string(av) ? json_string_value(av) : "not a string",
			  k->r->api_version);
		return false;
	}
	if (kind && (!json_is_string(kind) || strcmp(json_string_value(kind), k->r->kind))) {
		reply_bad(rp, "the kind in the data (%s) does not match the expected kind (%s) for "
			  "%s", json_is_string(kind) ? json_string_value(kind) : "not a string",
			  k->r->kind, k->r->plural);
		return false;
	}
	json_t *meta = json_object_get(obj, "metadata");
	if (meta && !json_is_object(meta)) {
		reply_bad(rp, "metadata must be a JSON object");
		return false;
	}
	return check_meta_types(meta, rp);
}

static bool namespace_exists(struct emu_server *srv, const char *ns)
{
	int nsres = emu_store_resource(&srv->st, "", "v1", "namespaces");
	return emu_store_get(&srv->st, nsres, ns) != NULL;
}

static void reply_ns_not_found(struct emu_server *srv, struct reply *rp, const char *ns)
{
	int nsres = emu_store_resource(&srv->st, "", "v1", "namespaces");
	reply_not_found(rp, &srv->st.res[nsres], ns);
}

static bool valid_name(struct emu_call *k, const char *name, struct reply *rp)
{
	char why[256];
	bool ok = !strcmp(k->r->plural, "namespaces") ?
		kube_name_is_dns1123_label(name, why, sizeof(why)) :
		kube_name_is_dns1123_subdomain(name, why, sizeof(why));
	if (!ok) {
		char detail[600];
		snprintf(detail, sizeof(detail), "Invalid value: \"%.200s\": %s", name, why);
		reply_invalid(rp, k->r, name, "metadata.name", "FieldValueInvalid", detail);
	}
	return ok;
}

static bool ns_terminating(struct emu_server *srv, const char *ns);
static void ns_maybe_finish(struct emu_server *srv, const char *ns);

/* ---- get ---- */

enum MHD_Result emu_do_get(struct emu_call *k)
{
	struct reply rp = { 0 };
	char key[KEY_MAX];
	emu_store_key(k->r, k->ns, k->name, key, sizeof(key));
	pthread_mutex_lock(&k->srv->st.mu);
	json_t *obj = emu_store_get(&k->srv->st, k->res, key);
	if (obj && k->table) {
		json_t *t = emu_table_new(k->r, &k->treq, meta_str(obj, "resourceVersion"));
		emu_table_add_row(t, k->r, &k->treq, obj, time(NULL));
		reply_dump(&rp, 200, t);
		json_decref(t);
	} else if (obj)
		reply_dump(&rp, 200, obj);
	else
		reply_not_found(&rp, k->r, k->name);
	pthread_mutex_unlock(&k->srv->st.mu);
	return send_reply(k, &rp);
}

/* ---- create ---- */

static void generate_name(const char *prefix, char *buf, size_t len)
{
	static const char alphabet[] = "bcdfghjklmnpqrstvwxz2456789";
	unsigned char b[5];
	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
		for (size_t i = 0; i < sizeof(b); i++)
			b[i] = (unsigned char)random();
	char suffix[6];
	for (int i = 0; i < 5; i++)
		suffix[i] = alphabet[b[i] % (sizeof(alphabet) - 1)];
	suffix[5] = '\0';
	snprintf(buf, len, "%.*s%s", 58, prefix, suffix);
}

/* A PV's status.lastPhaseTransitionTime: now on create (old NULL) and when the phase changes. */
static void set_phase_transition(const struct emu_resource *r, const json_t *old, json_t *nobj)
{
	if (*r->group || strcmp(r->plural, "persistentvolumes"))
		return;
	json_t *st = json_object_get(nobj, "status");
	const char *np = json_string_value(json_object_get(st, "phase"));
	const char *op = old ? json_string_value(json_object_get(json_object_get(old, "status"),
								   "phase")) : NULL;
	if (!json_is_object(st) || !np || (op && !strcmp(op, np)))
		return;
	char ts[RFC3339_BUFLEN];
	now_rfc3339(ts, sizeof(ts));
	json_object_set_new(st, "lastPhaseTransitionTime", json_string(ts));
}

static void reset_server_fields(struct emu_call *k, json_t *obj, json_t *meta)
{
	char uid[40], ts[RFC3339_BUFLEN];
	new_uid(uid, sizeof(uid));
	now_rfc3339(ts, sizeof(ts));
	json_object_set_new(meta, "uid", json_string(uid));
	json_object_set_new(meta, "creationTimestamp", json_string(ts));
	if (emu_resource_has_generation(k->r))
		json_object_set_new(meta, "generation", json_integer(1));
	else
		json_object_del(meta, "generation");
	json_object_del(meta, "resourceVersion");
	json_object_del(meta, "deletionTimestamp");
	json_object_del(meta, "deletionGracePeriodSeconds");
	json_object_del(meta, "selfLink");
	json_object_del(meta, "managedFields");
	if (k->r->create_status && !*k->r->create_status) {
		json_object_del(obj, "status");
	} else if (k->r->create_status) {
		json_t *st = json_loads(k->r->create_status, 0, NULL);
		json_object_set_new(obj, "status", st ? st : json_object());
	}
	emu_set_type(k->r, obj);
	emu_apply_defaults(k->r->group, k->r->plural, obj);
	set_phase_transition(k->r, NULL, obj);
}

/* Fills metadata.name from generateName; false with a reply when there is no usable name. */
static bool choose_name(struct emu_call *k, json_t *meta, const char *ns, struct reply *rp)
{
	json_t *jn = json_object_get(meta, "name");
	if (jn && !json_is_string(jn)) {
		reply_bad(rp, "metadata.name must be a string");
		return false;
	}
	const char *name = json_string_value(jn);
	const char *gen = json_string_value(json_object_get(meta, "generateName"));
	if ((!name || !*name) && gen && *gen) {
		char buf[300], key[KEY_MAX];
		for (int tries = 0; tries < 16; tries++) {
			generate_name(gen, buf, sizeof(buf));
			emu_store_key(k->r, ns, buf, key, sizeof(key));
			if (!emu_store_get(&k->srv->st, k->res, key))
				break;
		}
		json_object_set_new(meta, "name", json_string(buf));
		name = json_string_value(json_object_get(meta, "name"));
	}
	if (!name || !*name) {
		reply_invalid(rp, k->r, NULL, "metadata.name", "FieldValueRequired",
			      "Required value: name or generateName is required");
		return false;
	}
	return valid_name(k, name, rp);
}

enum MHD_Result emu_do_create(struct emu_call *k)
{
	struct reply rp = { 0 };
	json_t *obj = NULL;
	struct emu_store *st = &k->srv->st;
	if (!parse_body(k, &obj, &rp) || !check_type(k, obj, &rp))
		goto out;
	json_t *meta = meta_of(obj);
	if (k->r->namespaced) {
		const char *bns = meta_str(obj, "namespace");
		if (bns && *bns && strcmp(bns, k->ns)) {
			reply_bad(&rp, "the namespace of the provided object (%s) does not match the "
				  "namespace sent on the request (%s)", bns, k->ns);
			goto out;
		}
		json_object_set_new(meta, "namespace", json_string(k->ns));
	} else {
		json_object_del(meta, "namespace");
	}
	pthread_mutex_lock(&st->mu);
	if (k->r->namespaced && !namespace_exists(k->srv, k->ns)) {
		reply_ns_not_found(k->srv, &rp, k->ns);
	} else if (k->r->namespaced && ns_terminating(k->srv, k->ns)) {
		char msg[600];
		snprintf(msg, sizeof(msg), "%s is forbidden: unable to create new content in namespace "
			 "%s because it is being terminated", k->r->plural, k->ns);
		reply_status(&rp, 403, "Forbidden", msg, NULL);
	} else if (choose_name(k, meta, k->ns, &rp)) {
		const char *name = meta_str(obj, "name");
		char key[KEY_MAX], q[128], msg[800];
		emu_store_key(k->r, k->ns, name, key, sizeof(key));
		if (emu_store_get(st, k->res, key)) {
			snprintf(msg, sizeof(msg), "%s \"%s\" already exists",
				 qualified(k->r, q, sizeof(q)), name);
			reply_status(&rp, 409, "AlreadyExists", msg, details_for(k->r, name));
		} else {
			reset_server_fields(k, obj, meta);
			if (k->dry_run) {
				reply_dump(&rp, 201, obj);
				goto unlock;
			}
			const struct emu_event *ev = emu_store_commit(st, k->res, key, obj,
								      EMU_ADDED);
			obj = NULL;
			reply_object(&rp, 201, ev->text);
		}
	}
unlock:
	pthread_mutex_unlock(&st->mu);
out:
	json_decref(obj);
	return send_reply(k, &rp);
}

/* ---- update and patch ---- */

static bool str_in_array(const json_t *arr, const json_t *s)
{
	size_t i;
	json_t *v;
	json_array_foreach((json_t *)arr, i, v)
		if (json_equal(v, s))
			return true;
	return false;
}

/* Everything but metadata, status, apiVersion and kind: what bumps generation. */
static bool spec_changed(const json_t *a, const json_t *b)
{
	json_t *x = json_copy((json_t *)a), *y = json_copy((json_t *)b);
	const char *drop[] = { "metadata", "status", "apiVersion", "kind" };
	for (size_t i = 0; i < 4; i++) {
		json_object_del(x, drop[i]);
		json_object_del(y, drop[i]);
	}
	bool changed = !json_equal(x, y);
	json_decref(x);
	json_decref(y);
	return changed;
}

static void copy_field(json_t *dst, const json_t *src, const char *field)
{
	json_t *v = json_object_get(src, field);
	if (v)
		json_object_set(dst, field, v);
	else
		json_object_del(dst, field);
}

/* Fields upstream's validation makes immutable after create, for the kinds CSI touches. */
static const struct {
	const char *plural, *field;
} immutable_fields[] = {
	{ "volumeattachments", "spec" },
	{ "storageclasses", "provisioner" },
	{ "storageclasses", "parameters" },
	{ "storageclasses", "reclaimPolicy" },
	{ "storageclasses", "volumeBindingMode" },
	{ "volumeattributesclasses", "driverName" },
	{ "volumeattributesclasses", "parameters" },
};

/* The first immutable field that differs between old and proposed, or NULL. */
static const char *immutable_field(const struct emu_resource *r, const json_t *old,
				   const json_t *proposed)
{
	for (size_t i = 0; i < sizeof(immutable_fields) / sizeof(immutable_fields[0]); i++) {
		if (strcmp(r->plural, immutable_fields[i].plural))
			continue;
		const char *f = immutable_fields[i].field;
		const json_t *a = json_object_get(old, f), *b = json_object_get(proposed, f);
		if (!(a == NULL && b == NULL) && !(a && b && json_equal(a, b)))
			return f;
	}
	return NULL;
}

static bool is_pod(const struct emu_resource *r)
{
	return !*r->group && !strcmp(r->plural, "pods");
}

/* spec.nodeName, "" when unset. */
static const char *pod_node(const json_t *pod)
{
	const char *n = json_string_value(json_object_get(json_object_get(pod, "spec"),
							  "nodeName"));
	return n ? n : "";
}

/* A claim's spec.resources.requests.storage in bytes, -1 when absent or unreadable. */
static int64_t claim_request(const json_t *pvc)
{
	const char *s = json_string_value(json_object_get(json_object_get(json_object_get(
		json_object_get(pvc, "spec"), "resources"), "requests"), "storage"));
	int64_t b;
	char err[128];
	return s && kube_quantity_parse(s, &b, err, sizeof(err)) == 0 ? b : -1;
}

/*
 * kube-apiserver's PersistentVolumeClaimResize admission: a claim's request may grow only when
 * its StorageClass exists and allows volume expansion. Caller holds the store lock.
 */
static bool resize_admitted(struct emu_call *k, const json_t *old, const json_t *nobj)
{
	if (*k->r->group || strcmp(k->r->plural, "persistentvolumeclaims"))
		return true;
	int64_t was = claim_request(old), now = claim_request(nobj);
	if (was < 0 || now <= was)
		return true;
	const char *sc = json_string_value(json_object_get(json_object_get(nobj, "spec"),
							   "storageClassName"));
	if (!sc)
		sc = json_string_value(json_object_get(json_object_get(json_object_get(nobj,
			"metadata"), "annotations"), "volume.beta.kubernetes.io/storage-class"));
	int res = emu_store_resource(&k->srv->st, "storage.k8s.io", "v1", "storageclasses");
	if (!sc || !*sc || res < 0)
		return false;
	char key[KEY_MAX];
	emu_store_key(&k->srv->st.res[res], NULL, sc, key, sizeof(key));
	json_t *cls = emu_store_get(&k->srv->st, res, key);
	return cls && json_is_true(json_object_get(cls, "allowVolumeExpansion"));
}

/* Builds the object a main-endpoint write would store; NULL with a reply when refused. */
static json_t *merge_main(struct emu_call *k, const json_t *old, json_t *proposed,
			  struct reply *rp)
{
	json_t *nobj = proposed;
	const json_t *ometa = json_object_get(old, "metadata");
	json_t *nmeta = meta_of(nobj);
	if (k->r->has_status)
		copy_field(nobj, old, "status");
	const char *keep[] = { "uid", "creationTimestamp", "deletionTimestamp",
			       "deletionGracePeriodSeconds", "generation", "name", "namespace" };
	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
		copy_field(nmeta, ometa, keep[i]);
	json_object_del(nmeta, "selfLink");
	json_object_del(nmeta, "managedFields");
	json_t *nfin = json_object_get(nmeta, "finalizers");
	if (nfin && !json_is_array(nfin) && !json_is_null(nfin)) {
		reply_bad(rp, "metadata.finalizers must be an array of strings");
		json_decref(nobj);
		return NULL;
	}
	if (json_object_get(ometa, "deletionTimestamp") && json_is_array(nfin)) {
		json_t *ofin = json_object_get(ometa, "finalizers");
		size_t i;
		json_t *f;
		json_array_foreach(nfin, i, f) {
			if (!json_is_array(ofin) || !str_in_array(ofin, f)) {
				char detail[512];
				snprintf(detail, sizeof(detail), "Forbidden: no new finalizers can be "
					 "added if the object is being deleted, found new finalizers "
					 "[\"%s\"]", json_is_string(f) ? json_string_value(f) : "?");
				reply_invalid(rp, k->r, meta_str(old, "name"), "metadata.finalizers",
					      "FieldValueForbidden", detail);
				json_decref(nobj);
				return NULL;
			}
		}
	}
	if (is_pod(k->r)) {
		const char *on = pod_node(old), *nn = pod_node(nobj);
		if (*on && strcmp(on, nn)) {
			reply_invalid(rp, k->r, meta_str(old, "name"), "spec.nodeName",
				      "FieldValueForbidden", "Forbidden: pod updates may not change "
				      "spec.nodeName once it is set (bind with pods/binding)");
			json_decref(nobj);
			return NULL;
		}
	}
	emu_apply_defaults(k->r->group, k->r->plural, nobj);
	const char *frozen = immutable_field(k->r, old, nobj);
	if (frozen) {
		char detail[256];
		const char *nv = json_string_value(json_object_get(nobj, frozen));
		bool vac = !strcmp(k->r->plural, "volumeattributesclasses");
		if (vac)
			snprintf(detail, sizeof(detail), "Forbidden: updates to %s are forbidden.", frozen);
		else if (nv)
			snprintf(detail, sizeof(detail), "Invalid value: \"%.180s\": field is immutable", nv);
		else
			snprintf(detail, sizeof(detail), "Invalid value: field is immutable");
		reply_invalid(rp, k->r, meta_str(old, "name"), frozen,
			      vac ? "FieldValueForbidden" : "FieldValueInvalid", detail);
		json_decref(nobj);
		return NULL;
	}
	char why[300];
	const char *refused = emu_update_refused(k->r->group, k->r->plural, old, nobj, why,
						 sizeof(why));
	if (refused) {
		reply_invalid(rp, k->r, meta_str(old, "name"), refused, "FieldValueForbidden", why);
		json_decref(nobj);
		return NULL;
	}
	if (!resize_admitted(k, old, nobj)) {
		char msg[600];
		snprintf(msg, sizeof(msg), "%s \"%s\" is forbidden: only dynamically provisioned pvc can "
			 "be resized and the storageclass that provisions the pvc must support resize",
			 k->r->plural, meta_str(old, "name"));
		reply_status(rp, 403, "Forbidden", msg, details_for(k->r, meta_str(old, "name")));
		json_decref(nobj);
		return NULL;
	}
	if (emu_resource_has_generation(k->r) && spec_changed(old, nobj)) {
		json_int_t gen = json_integer_value(json_object_get(ometa, "generation"));
		json_object_set_new(nmeta, "generation", json_integer(gen + 1));
	}
	return nobj;
}

/* Stores proposed (taken) as the new state of old; fills the reply. Caller holds the lock. */
static void finish_update(struct emu_call *k, const char *key, json_t *old, json_t *proposed,
			  struct reply *rp)
{
	json_t *nobj;
	if (k->sub) {
		/* as kube-apiserver's status strategies: the spec stays, metadata changes (labels,
		 * annotations, finalizers: csi-resizer annotates a claim there) are kept */
		nobj = json_deep_copy(old);
		copy_field(nobj, proposed, "status");
		json_t *pmeta = json_object_get(proposed, "metadata");
		if (json_is_object(pmeta)) {
			json_t *nmeta = json_deep_copy(pmeta);
			const json_t *ometa = json_object_get(old, "metadata");
			const char *keep[] = { "uid", "creationTimestamp", "deletionTimestamp",
					       "deletionGracePeriodSeconds", "generation", "name",
					       "namespace" };
			for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
				copy_field(nmeta, ometa, keep[i]);
			json_object_del(nmeta, "selfLink");
			json_object_del(nmeta, "managedFields");
			json_object_set_new(nobj, "metadata", nmeta);
		}
		emu_apply_defaults(k->r->group, k->r->plural, nobj);
		set_phase_transition(k->r, old, nobj);
		json_decref(proposed);
	} else {
		nobj = merge_main(k, old, proposed, rp);
		if (!nobj)
			return;
	}
	emu_set_type(k->r, nobj);
	json_object_set_new(meta_of(nobj), "resourceVersion",
			    json_string(meta_str(old, "resourceVersion")));
	if (json_equal(nobj, old)) {
		json_decref(nobj);
		reply_dump(rp, 200, old);
		return;
	}
	if (k->dry_run) {
		reply_dump(rp, 200, nobj);
		json_decref(nobj);
		return;
	}
	/* as upstream's shouldDeleteDuringUpdate: the last finalizer of an object whose deletion
	 * is due (grace period 0) goes; a gracefully deleted pod waits for its final delete */
	const json_t *ometa = json_object_get(old, "metadata");
	json_t *nmeta = meta_of(nobj), *fin = json_object_get(nmeta, "finalizers");
	const json_t *ogp = json_object_get(ometa, "deletionGracePeriodSeconds");
	bool gone = json_object_get(ometa, "deletionTimestamp") && json_array_size(fin) == 0 &&
		    json_array_size(json_object_get(ometa, "finalizers")) > 0 &&
		    (!ogp || json_integer_value(ogp) == 0);
	const struct emu_event *ev = emu_store_commit(&k->srv->st, k->res, key, nobj,
						      gone ? EMU_DELETED : EMU_MODIFIED);
	reply_object(rp, 200, ev->text);
	if (gone && k->r->namespaced)
		ns_maybe_finish(k->srv, k->ns);
}

static bool check_identity(struct emu_call *k, json_t *obj, struct reply *rp)
{
	const char *name = meta_str(obj, "name");
	if (!name || strcmp(name, k->name)) {
		reply_bad(rp, "the name of the object (%s) does not match the name on the URL (%s)",
			  name ? name : "", k->name);
		return false;
	}
	const char *ns = meta_str(obj, "namespace");
	if (k->r->namespaced && ns && *ns && strcmp(ns, k->ns)) {
		reply_bad(rp, "the namespace of the provided object (%s) does not match the "
			  "namespace sent on the request (%s)", ns, k->ns);
		return false;
	}
	return true;
}

enum MHD_Result emu_do_update(struct emu_call *k)
{
	struct reply rp = { 0 };
	json_t *obj = NULL;
	struct emu_store *st = &k->srv->st;
	if (!parse_body(k, &obj, &rp) || !check_type(k, obj, &rp) || !check_identity(k, obj, &rp))
		goto out;
	const char *rv = meta_str(obj, "resourceVersion");
	bool unconditional = (!rv || !*rv) && !emu_resource_is_crd(k->r);
	if ((!rv || !*rv) && !unconditional) {
		reply_invalid(&rp, k->r, k->name, "metadata.resourceVersion", "FieldValueInvalid",
			      "Invalid value: 0x0: must be specified for an update");
		goto out;
	}
	char key[KEY_MAX];
	emu_store_key(k->r, k->ns, k->name, key, sizeof(key));
	pthread_mutex_lock(&st->mu);
	json_t *old = emu_store_get(st, k->res, key);
	if (!old) {
		reply_not_found(&rp, k->r, k->name);
	} else if (!unconditional && strcmp(rv, meta_str(old, "resourceVersion"))) {
		reply_conflict(&rp, k->r, k->name, MODIFIED_MSG);
	} else {
		finish_update(k, key, old, obj, &rp);
		obj = NULL;
	}
	pthread_mutex_unlock(&st->mu);
out:
	json_decref(obj);
	return send_reply(k, &rp);
}

enum patch_kind { PATCH_MERGE, PATCH_JSON, PATCH_STRATEGIC };

static int patch_kind_of(struct emu_call *k, enum patch_kind *pk, struct reply *rp)
{
	const char *ct = MHD_lookup_connection_value(k->conn, MHD_HEADER_KIND, "Content-Type");
	char type[128] = "";
	if (ct) {
		size_t n = strcspn(ct, "; ");
		snprintf(type, sizeof(type), "%.*s", (int)n, ct);
	}
	if (!strcasecmp(type, "application/merge-patch+json")) {
		*pk = PATCH_MERGE;
	} else if (!strcasecmp(type, "application/json-patch+json")) {
		*pk = PATCH_JSON;
	} else if (!strcasecmp(type, "application/strategic-merge-patch+json")) {
		*pk = PATCH_STRATEGIC;
	} else {
		char msg[512];
		snprintf(msg, sizeof(msg), "the body of the request was in an unknown format (%s) - "
			 "accepted media types include: application/json-patch+json, "
			 "application/merge-patch+json, application/strategic-merge-patch+json%s",
			 *type ? type : "no Content-Type",
			 !strcasecmp(type, "application/apply-patch+yaml") ?
			 " (server-side apply is not supported by kube-emulator)" : "");
		reply_status(rp, 415, "UnsupportedMediaType", msg, NULL);
		return -1;
	}
	return 0;
}

static json_t *apply_patch(enum patch_kind pk, const json_t *old, const json_t *patch,
			   struct reply *rp)
{
	char err[600];
	int code = 422;
	json_t *r;
	if (pk == PATCH_MERGE) {
		if (!json_is_object(patch)) {
			reply_bad(rp, "a merge patch must be a JSON object");
			return NULL;
		}
		return emu_merge_patch(old, patch);
	}
	r = pk == PATCH_JSON ? emu_json_patch(old, patch, &code, err, sizeof(err)) :
			       emu_strategic_patch(old, patch, &code, err, sizeof(err));
	if (!r)
		reply_status(rp, (unsigned)code, code == 400 ? "BadRequest" : "Invalid", err, NULL);
	return r;
}

/* The bounds on what a patch may build (emu_patch.h); false with a 413/422 reply. */
static bool patch_result_bounded(struct emu_call *k, const json_t *res, struct reply *rp)
{
	char msg[300];
	if (emu_json_too_deep(res, EMU_MAX_JSON_DEPTH)) {
		snprintf(msg, sizeof(msg), "Invalid value: the patched object nests deeper than %d "
			 "levels", EMU_MAX_JSON_DEPTH);
		reply_invalid(rp, k->r, k->name, "metadata", "FieldValueInvalid", msg);
		return false;
	}
	size_t n = json_dumpb(res, NULL, 0, JSON_COMPACT);
	if (n > EMU_MAX_OBJECT_BYTES) {
		snprintf(msg, sizeof(msg), "Request entity too large: the patched object would be "
			 "%zu bytes, the limit is %d", n, EMU_MAX_OBJECT_BYTES);
		reply_status(rp, 413, "RequestEntityTooLarge", msg, NULL);
		return false;
	}
	return true;
}

/*
 * A patch is computed outside the store lock, on the stored object it read (stored objects are
 * immutable, so it may be read without the lock), then committed under the lock if that object
 * is still the stored one; otherwise it is recomputed on the newer one, as kube-apiserver's
 * GuaranteedUpdate retries, the last of PATCH_TRIES times under the lock so that it always gets
 * through. A large or slow patch so holds up other requests only after 15 lost races.
 */
#define PATCH_TRIES 16

enum MHD_Result emu_do_patch(struct emu_call *k)
{
	struct reply rp = { 0 };
	json_t *patch = NULL;
	struct emu_store *st = &k->srv->st;
	enum patch_kind pk;
	if (patch_kind_of(k, &pk, &rp) < 0 || !parse_body(k, &patch, &rp))
		goto out;
	char key[KEY_MAX];
	emu_store_key(k->r, k->ns, k->name, key, sizeof(key));
	for (int tries = 0;; tries++) {
		/* the last try holds the lock throughout, so a patch always gets through */
		bool last = tries + 1 == PATCH_TRIES;
		pthread_mutex_lock(&st->mu);
		json_t *old = json_incref(emu_store_get(st, k->res, key));
		if (!last)
			pthread_mutex_unlock(&st->mu);
		if (!old) {
			reply_not_found(&rp, k->r, k->name);
			if (last)
				pthread_mutex_unlock(&st->mu);
			break;
		}
		json_t *res = apply_patch(pk, old, patch, &rp);
		if (!res || !check_type(k, res, &rp) || !patch_result_bounded(k, res, &rp)) {
			if (last)
				pthread_mutex_unlock(&st->mu);
			json_decref(res);
			json_decref(old);
			break;
		}
		if (!last)
			pthread_mutex_lock(&st->mu);
		if (emu_store_get(st, k->res, key) != old) {
			pthread_mutex_unlock(&st->mu);
			json_decref(res);
			json_decref(old);
			continue;
		}
		const char *prv = meta_str(res, "resourceVersion");
		const char *name = meta_str(res, "name"), *ns = meta_str(res, "namespace");
		if (prv && *prv && strcmp(prv, meta_str(old, "resourceVersion"))) {
			reply_conflict(&rp, k->r, k->name, MODIFIED_MSG);
		} else if (!name || strcmp(name, k->name) ||
			   (k->r->namespaced && (!ns || strcmp(ns, k->ns)))) {
			reply_invalid(&rp, k->r, k->name, "metadata.name", "FieldValueInvalid",
				      "Invalid value: the patch changes the name or namespace, "
				      "which are immutable");
		} else {
			finish_update(k, key, old, res, &rp);
			res = NULL;
		}
		json_decref(res);
		pthread_mutex_unlock(&st->mu);
		json_decref(old);
		break;
	}
out:
	json_decref(patch);
	return send_reply(k, &rp);
}

/* ---- delete ---- */

static bool check_preconditions(struct emu_call *k, const json_t *opts, const json_t *old,
				struct reply *rp)
{
	const json_t *pre = json_object_get(opts, "preconditions");
	const json_t *juid = json_object_get(pre, "uid"), *jrv = json_object_get(pre, "resourceVersion");
	if ((pre && !json_is_object(pre) && !json_is_null(pre)) ||
	    (juid && !json_is_string(juid) && !json_is_null(juid)) ||
	    (jrv && !json_is_string(jrv) && !json_is_null(jrv))) {
		reply_bad(rp, "DeleteOptions.preconditions must be {\"uid\": string, "
			  "\"resourceVersion\": string}");
		return false;
	}
	const char *uid = json_string_value(juid);
	const char *rv = json_string_value(jrv);
	char why[512];
	if (uid && strcmp(uid, meta_str(old, "uid"))) {
		snprintf(why, sizeof(why), "Precondition failed: UID in precondition: %s, UID in "
			 "object meta: %s", uid, meta_str(old, "uid"));
		reply_conflict(rp, k->r, k->name, why);
		return false;
	}
	if (rv && strcmp(rv, meta_str(old, "resourceVersion"))) {
		snprintf(why, sizeof(why), "Precondition failed: ResourceVersion in precondition: %s, "
			 "ResourceVersion in object meta: %s", rv, meta_str(old, "resourceVersion"));
		reply_conflict(rp, k->r, k->name, why);
		return false;
	}
	return true;
}

/* What a DELETE asks for: gracePeriodSeconds when given. */
struct grace {
	bool given;
	long long seconds;
};

/* Marks old as being deleted: deletionTimestamp = now + seconds, deletionGracePeriodSeconds. */
static json_t *mark_deleting(const json_t *old, long long seconds, bool bump_generation)
{
	char ts[RFC3339_BUFLEN];
	rfc3339_format(time(NULL) + (time_t)seconds, ts, sizeof(ts));
	json_t *nobj = json_deep_copy(old);
	json_t *nmeta = meta_of(nobj);
	json_object_set_new(nmeta, "deletionTimestamp", json_string(ts));
	json_object_set_new(nmeta, "deletionGracePeriodSeconds", json_integer(seconds));
	json_int_t gen = json_integer_value(json_object_get(nmeta, "generation"));
	if (bump_generation && gen > 0)
		json_object_set_new(nmeta, "generation", json_integer(gen + 1));
	return nobj;
}

/*
 * The grace period of a pod delete, as upstream's pod strategy computes it: the request's
 * gracePeriodSeconds (negative means 1), else spec.terminationGracePeriodSeconds, else 30; 0
 * for a pod no node runs (no spec.nodeName) or one that has terminated.
 */
static long long pod_grace(const json_t *pod, struct grace g)
{
	long long s;
	if (g.given) {
		s = g.seconds < 0 ? 1 : g.seconds;
	} else {
		json_t *t = json_object_get(json_object_get(pod, "spec"),
					    "terminationGracePeriodSeconds");
		s = json_is_integer(t) ? (long long)json_integer_value(t) : 30;
		if (s < 0)
			s = 1;
	}
	const char *phase = json_string_value(json_object_get(json_object_get(pod, "status"),
							      "phase"));
	if (!*pod_node(pod) || (phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"))))
		s = 0;
	return s;
}

/*
 * Graceful deletion of a pod (lock held). Returns true when it answered: the pod got (or already
 * had) a deletionTimestamp with a grace period > 0 and stays, for its node agent to finish the
 * delete with grace period 0 (a shorter period shortens the pending one). False: delete it now.
 */
static bool pod_graceful_delete(struct emu_server *srv, int res, const char *key, json_t *old,
				struct grace g, struct reply *rp)
{
	const json_t *meta = json_object_get(old, "metadata");
	const json_t *jgp = json_object_get(meta, "deletionGracePeriodSeconds");
	long long s;
	json_t *nobj;
	if (json_object_get(meta, "deletionTimestamp")) {
		long long pending = json_integer_value(jgp);
		if (!json_is_integer(jgp) || pending <= 0)
			return false;
		s = g.given ? (g.seconds < 0 ? 1 : g.seconds) : pending;
		if (s == 0)
			return false;
		if (s >= pending) {
			if (rp)
				reply_dump(rp, 200, old);
			return true;
		}
		/* shorten: the deadline moves back by the difference */
		time_t dts;
		const char *dtext = meta_str(old, "deletionTimestamp");
		if (!dtext || rfc3339_parse(dtext, &dts) < 0)
			dts = time(NULL) + (time_t)pending;
		char ts[RFC3339_BUFLEN];
		rfc3339_format(dts - (time_t)(pending - s), ts, sizeof(ts));
		nobj = json_deep_copy(old);
		json_object_set_new(meta_of(nobj), "deletionTimestamp", json_string(ts));
		json_object_set_new(meta_of(nobj), "deletionGracePeriodSeconds", json_integer(s));
	} else {
		s = pod_grace(old, g);
		if (s == 0)
			return false;
		nobj = mark_deleting(old, s, true);
	}
	const struct emu_event *ev = emu_store_commit(&srv->st, res, key, nobj, EMU_MODIFIED);
	if (rp)
		reply_object(rp, 200, ev->text);
	return true;
}

/*
 * Deletes one stored object (lock held): a scheduled pod is deleted gracefully (above);
 * finalizers make an object pending (deletionTimestamp, grace period 0, 200 with the object, as
 * kube-apiserver answers unless orphanDependents is false); else it goes (200 with the object
 * for the kinds whose registry returns it, else a Success Status). rp may be NULL.
 */
static void delete_object(struct emu_server *srv, int res, const char *key, json_t *old,
			  struct grace g, struct reply *rp)
{
	struct emu_resource *r = &srv->st.res[res];
	json_t *meta = json_object_get(old, "metadata");
	if (is_pod(r) && pod_graceful_delete(srv, res, key, old, g, rp))
		return;
	if (json_array_size(json_object_get(meta, "finalizers")) > 0) {
		json_t *jgp = json_object_get(meta, "deletionGracePeriodSeconds");
		if (json_object_get(meta, "deletionTimestamp") &&
		    (!jgp || json_integer_value(jgp) == 0)) {
			if (rp)
				reply_dump(rp, 200, old);
			return;
		}
		const struct emu_event *ev = emu_store_commit(&srv->st, res, key,
							      mark_deleting(old, 0, false),
							      EMU_MODIFIED);
		if (rp)
			reply_object(rp, 200, ev->text);
		return;
	}
	if (emu_resource_returns_deleted(r)) {
		const struct emu_event *ev = emu_store_commit(&srv->st, res, key,
							      json_deep_copy(old), EMU_DELETED);
		if (rp)
			reply_object(rp, 200, ev->text);
		return;
	}
	json_t *d = details_for(r, meta_str(old, "name"));
	json_object_set_new(d, "uid", json_string(meta_str(old, "uid")));
	emu_store_commit(&srv->st, res, key, json_deep_copy(old), EMU_DELETED);
	json_t *s = json_pack("{s:s, s:s, s:{}, s:s, s:o}", "kind", "Status", "apiVersion", "v1",
			      "metadata", "status", "Success", "details", d);
	if (rp) {
		free(rp->text);
		rp->code = 200;
		rp->text = json_dumps(s, JSON_COMPACT);
	}
	json_decref(s);
}

/* ---- namespace termination (what upstream's namespace controller does, done inline) ---- */

static int ns_res(struct emu_server *srv)
{
	return emu_store_resource(&srv->st, "", "v1", "namespaces");
}

static bool ns_terminating(struct emu_server *srv, const char *ns)
{
	json_t *o = emu_store_get(&srv->st, ns_res(srv), ns);
	return o && json_object_get(json_object_get(o, "metadata"), "deletionTimestamp");
}

/* Keys of every object in namespace ns of resource res (caller frees). */
static char **ns_keys(struct emu_store *st, int res, const char *ns, size_t *n)
{
	char prefix[300];
	snprintf(prefix, sizeof(prefix), "%s/", ns);
	struct emu_resource *r = &st->res[res];
	char **keys = NULL;
	*n = 0;
	for (size_t i = emu_store_lower_bound(r, prefix);
	     i < r->n && !strncmp(r->items[i].key, prefix, strlen(prefix)); i++) {
		keys = xrealloc(keys, (*n + 1) * sizeof(char *));
		keys[(*n)++] = xstrdup(r->items[i].key);
	}
	return keys;
}

/* A terminating namespace goes once its last object is gone. */
static void ns_maybe_finish(struct emu_server *srv, const char *ns)
{
	if (!ns || !ns_terminating(srv, ns))
		return;
	for (size_t i = 0; i < srv->st.nres; i++) {
		size_t n;
		char **keys = srv->st.res[i].namespaced ? ns_keys(&srv->st, (int)i, ns, &n) : NULL;
		for (size_t j = 0; keys && j < n; j++)
			free(keys[j]);
		free(keys);
		if (keys)
			return;
	}
	int res = ns_res(srv);
	char *name = xstrdup(ns); /* ns may point into the object being deleted */
	emu_store_commit(&srv->st, res, name, json_deep_copy(emu_store_get(&srv->st, res, name)),
			 EMU_DELETED);
	free(name);
}

static void ns_delete(struct emu_call *k, const char *name, json_t *old, struct reply *rp)
{
	if (!strcmp(name, "default") || !strcmp(name, "kube-system") ||
	    !strcmp(name, "kube-public")) {
		char msg[256];
		snprintf(msg, sizeof(msg), "namespaces \"%s\" is forbidden: this namespace may not "
			 "be deleted", name);
		reply_status(rp, 403, "Forbidden", msg, details_for(k->r, name));
		return;
	}
	if (ns_terminating(k->srv, name)) {
		reply_dump(rp, 200, old);
		return;
	}
	char ts[RFC3339_BUFLEN];
	now_rfc3339(ts, sizeof(ts));
	json_t *nobj = json_deep_copy(old);
	json_object_set_new(meta_of(nobj), "deletionTimestamp", json_string(ts));
	json_object_set_new(nobj, "status", json_pack("{s:s}", "phase", "Terminating"));
	const struct emu_event *ev = emu_store_commit(&k->srv->st, k->res, name, nobj,
						      EMU_MODIFIED);
	reply_object(rp, 200, ev->text);
	for (size_t i = 0; i < k->srv->st.nres; i++) {
		if (!k->srv->st.res[i].namespaced)
			continue;
		size_t n;
		char **keys = ns_keys(&k->srv->st, (int)i, name, &n);
		for (size_t j = 0; j < n; j++) {
			json_t *o = emu_store_get(&k->srv->st, (int)i, keys[j]);
			if (o)
				delete_object(k->srv, (int)i, keys[j], o, (struct grace){ 0 },
					      NULL);
			free(keys[j]);
		}
		free(keys);
	}
	ns_maybe_finish(k->srv, name);
}

void emu_delete_locked(struct emu_call *k, const char *key, json_t *old, struct reply *rp)
{
	if (k->dry_run) {
		reply_dump(rp, 200, old);
		return;
	}
	if (!strcmp(k->r->plural, "namespaces") && !*k->r->group) {
		ns_delete(k, key, old, rp);
		return;
	}
	char ns[300] = "";
	snprintf(ns, sizeof(ns), "%s", meta_str(old, "namespace") ?: "");
	delete_object(k->srv, k->res, key, old,
		      (struct grace){ .given = k->has_grace, .seconds = k->grace }, rp);
	if (k->r->namespaced)
		ns_maybe_finish(k->srv, ns);
}

enum MHD_Result emu_do_delete(struct emu_call *k)
{
	struct reply rp = { 0 };
	json_t *opts = NULL;
	struct emu_store *st = &k->srv->st;
	if (k->body_len) {
		if (!parse_body(k, &opts, &rp))
			goto out;
		if (!json_is_object(opts)) {
			reply_bad(&rp, "DeleteOptions must be a JSON object");
			goto out;
		}
	}
	if (!emu_delete_options(k, opts, &rp))
		goto out;
	char key[KEY_MAX];
	emu_store_key(k->r, k->ns, k->name, key, sizeof(key));
	pthread_mutex_lock(&st->mu);
	json_t *old = emu_store_get(st, k->res, key);
	if (!old)
		reply_not_found(&rp, k->r, k->name);
	else if (check_preconditions(k, opts, old, &rp))
		emu_delete_locked(k, key, old, &rp);
	pthread_mutex_unlock(&st->mu);
out:
	json_decref(opts);
	return send_reply(k, &rp);
}

bool emu_delete_options(struct emu_call *k, const json_t *opts, struct reply *rp)
{
	const char *q = emu_arg(k, "gracePeriodSeconds");
	if (q) {
		char *end;
		long long v = strtoll(q, &end, 10);
		if (!*q || *end) {
			reply_bad(rp, "gracePeriodSeconds: invalid value \"%.64s\": must be an integer",
				  q);
			return false;
		}
		k->has_grace = true;
		k->grace = v;
	}
	json_t *jg = json_object_get(opts, "gracePeriodSeconds");
	if (jg && !json_is_null(jg)) {
		if (!json_is_integer(jg)) {
			reply_bad(rp, "DeleteOptions.gracePeriodSeconds must be an integer");
			return false;
		}
		k->has_grace = true;
		k->grace = (long long)json_integer_value(jg);
	}
	const char *pp = emu_arg(k, "propagationPolicy");
	json_t *jp = json_object_get(opts, "propagationPolicy");
	if (jp && !json_is_null(jp)) {
		if (!json_is_string(jp)) {
			reply_bad(rp, "DeleteOptions.propagationPolicy must be a string");
			return false;
		}
		pp = json_string_value(jp);
	}
	if (pp && strcmp(pp, "Orphan") && strcmp(pp, "Background") && strcmp(pp, "Foreground")) {
		char detail[256];
		snprintf(detail, sizeof(detail), "Unsupported value: \"%.64s\": supported values: "
			 "\"Foreground\", \"Background\", \"Orphan\", \"nil\"", pp);
		reply_invalid(rp, k->r, k->name, "propagationPolicy", "FieldValueNotSupported",
			      detail);
		return false;
	}
	return true;
}

/* The PodScheduled condition a bind sets (True), added or updated in status.conditions. */
static void set_pod_scheduled(json_t *pod)
{
	json_t *status = json_object_get(pod, "status");
	if (!json_is_object(status)) {
		status = json_object();
		json_object_set_new(pod, "status", status);
	}
	json_t *conds = json_object_get(status, "conditions");
	if (!json_is_array(conds)) {
		conds = json_array();
		json_object_set_new(status, "conditions", conds);
	}
	char ts[RFC3339_BUFLEN];
	now_rfc3339(ts, sizeof(ts));
	size_t i;
	json_t *c;
	json_array_foreach(conds, i, c) {
		const char *t = json_string_value(json_object_get(c, "type"));
		if (json_is_object(c) && t && !strcmp(t, "PodScheduled")) {
			json_object_set_new(c, "status", json_string("True"));
			json_object_set_new(c, "lastTransitionTime", json_string(ts));
			return;
		}
	}
	json_array_append_new(conds, json_pack("{s:s, s:s, s:n, s:s}", "type", "PodScheduled",
					       "status", "True", "lastProbeTime",
					       "lastTransitionTime", ts));
}

/* ---- pods/binding ---- */

enum MHD_Result emu_do_binding(struct emu_call *k)
{
	struct reply rp = { 0 };
	json_t *b = NULL;
	struct emu_store *st = &k->srv->st;
	if (!parse_body(k, &b, &rp))
		goto out;
	if (!json_is_object(b)) {
		reply_bad(&rp, "the request body must be a JSON Binding object");
		goto out;
	}
	const char *kind = json_string_value(json_object_get(b, "kind"));
	if (kind && strcmp(kind, "Binding")) {
		reply_bad(&rp, "the kind in the data (%s) does not match the expected kind (Binding)",
			  kind);
		goto out;
	}
	const json_t *bmeta = json_object_get(b, "metadata");
	const char *bname = json_string_value(json_object_get(bmeta, "name"));
	const char *bns = json_string_value(json_object_get(bmeta, "namespace"));
	if ((bname && *bname && strcmp(bname, k->name)) || (bns && *bns && strcmp(bns, k->ns))) {
		reply_bad(&rp, "the name or namespace of the Binding (%s/%s) does not match the "
			  "request (%s/%s)", bns ? bns : "", bname ? bname : "", k->ns, k->name);
		goto out;
	}
	const json_t *target = json_object_get(b, "target");
	const char *tkind = json_string_value(json_object_get(target, "kind"));
	const char *node = json_string_value(json_object_get(target, "name"));
	const json_t *ann = json_object_get(bmeta, "annotations");
	if (!node || !*node) {
		reply_invalid(&rp, k->r, k->name, "target.name", "FieldValueRequired",
			      "Required value");
		goto out;
	}
	if (tkind && *tkind && strcmp(tkind, "Node")) {
		reply_invalid(&rp, k->r, k->name, "target.kind", "FieldValueNotSupported",
			      "Unsupported value: must be empty or \"Node\"");
		goto out;
	}
	if (ann && !json_is_null(ann) && !all_strings(ann, true)) {
		reply_bad(&rp, "metadata.annotations must be a map of strings to strings");
		goto out;
	}
	char key[KEY_MAX], why[600];
	emu_store_key(k->r, k->ns, k->name, key, sizeof(key));
	pthread_mutex_lock(&st->mu);
	json_t *pod = emu_store_get(st, k->res, key);
	const char *buid = json_string_value(json_object_get(bmeta, "uid"));
	if (!pod) {
		reply_not_found(&rp, k->r, k->name);
	} else if (buid && *buid && strcmp(buid, meta_str(pod, "uid"))) {
		snprintf(why, sizeof(why), "Precondition failed: UID in precondition: %s, UID in "
			 "object meta: %s", buid, meta_str(pod, "uid"));
		reply_conflict(&rp, k->r, k->name, why);
	} else if (json_object_get(json_object_get(pod, "metadata"), "deletionTimestamp")) {
		snprintf(why, sizeof(why), "pod %s is being deleted, cannot be assigned to a host",
			 k->name);
		reply_conflict(&rp, k->r, k->name, why);
	} else if (*pod_node(pod)) {
		snprintf(why, sizeof(why), "pod %s is already assigned to node \"%s\"", k->name,
			 pod_node(pod));
		reply_conflict(&rp, k->r, k->name, why);
	} else if (k->dry_run) {
		rp.code = 201;
		rp.text = xstrdup("{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
				  "\"status\":\"Success\",\"code\":201}");
	} else {
		json_t *nobj = json_deep_copy(pod);
		json_t *spec = json_object_get(nobj, "spec");
		if (!json_is_object(spec)) {
			spec = json_object();
			json_object_set_new(nobj, "spec", spec);
		}
		json_object_set_new(spec, "nodeName", json_string(node));
		if (json_object_size(ann)) {
			json_t *m = meta_of(nobj), *a = json_object_get(m, "annotations");
			if (!json_is_object(a)) {
				a = json_object();
				json_object_set_new(m, "annotations", a);
			}
			json_object_update(a, (json_t *)ann);
		}
		set_pod_scheduled(nobj);
		emu_store_commit(st, k->res, key, nobj, EMU_MODIFIED);
		rp.code = 201;
		rp.text = xstrdup("{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
				  "\"status\":\"Success\",\"code\":201}");
	}
	pthread_mutex_unlock(&st->mu);
out:
	json_decref(b);
	return send_reply(k, &rp);
}
