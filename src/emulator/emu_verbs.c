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
#include "emulator/emu_events.h"
#include "emulator/emu_internal.h"
#include "emulator/emu_object.h"
#include "emulator/emu_patch.h"
#include "emulator/emu_validate.h"
#include "emulator/emu_verbs.h"
#include "kube/names.h"
#include "kube/quantity.h"

#define KEY_MAX 600

static const char *const MODIFIED_MSG = "the object has been modified; please apply your changes "
					"to the latest version and try again";

/* ---- small helpers ---- */

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

static void emu_set_type(const struct emu_resource *r, json_t *obj)
{
	json_object_set_new(obj, "apiVersion", json_string(r->api_version));
	json_object_set_new(obj, "kind", json_string(r->kind));
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
		if (v && !json_is_null(v) && !emu_all_strings(v, true)) {
			reply_bad(rp, "metadata.%s must be a map of strings to strings", maps[i]);
			return false;
		}
	}
	json_t *f = json_object_get(meta, "finalizers");
	if (f && !json_is_null(f) && !emu_all_strings(f, false)) {
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
	/* the addressed version, or the stored one (what a patch of a stored object starts from);
	 * the object is stored at r->api_version either way (emu_set_type) */
	if (av && (!json_is_string(av) || (strcmp(json_string_value(av), k->api_version) &&
					   strcmp(json_string_value(av), k->r->api_version)))) {
		reply_bad(rp, "the API version in the data (%s) does not match the expected API "
			  "version (%s)", json_is_string(av) ? json_string_value(av) : "not a string",
			  k->api_version);
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

/* ---- get ---- */

enum MHD_Result emu_do_get(struct emu_call *k)
{
	struct reply rp = { 0 };
	char key[KEY_MAX];
	emu_store_key(k->r, k->ns, k->name, key, sizeof(key));
	pthread_mutex_lock(&k->srv->st.mu);
	json_t *obj = emu_store_get(&k->srv->st, k->res, key);
	if (obj && k->table) {
		json_t *t = emu_table_new(k->r, &k->treq, emu_meta_str(obj, "resourceVersion"));
		emu_table_add_row(t, k->r, &k->treq, obj, time(NULL));
		reply_dump(&rp, 200, t);
		json_decref(t);
	} else if (obj)
		reply_dump(&rp, 200, obj);
	else
		reply_not_found(&rp, k->r, k->name);
	pthread_mutex_unlock(&k->srv->st.mu);
	return emu_send_reply(k, &rp);
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
	emu_now_rfc3339(ts, sizeof(ts));
	json_object_set_new(st, "lastPhaseTransitionTime", json_string(ts));
}

static void reset_server_fields(struct emu_call *k, json_t *obj, json_t *meta)
{
	char uid[40], ts[RFC3339_BUFLEN];
	new_uid(uid, sizeof(uid));
	emu_now_rfc3339(ts, sizeof(ts));
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
	json_t *meta = emu_meta_of(obj);
	if (k->r->namespaced) {
		const char *bns = emu_meta_str(obj, "namespace");
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
	} else if (k->r->namespaced && emu_ns_terminating(k->srv, k->ns)) {
		char msg[600];
		snprintf(msg, sizeof(msg), "%s is forbidden: unable to create new content in namespace "
			 "%s because it is being terminated", k->r->plural, k->ns);
		reply_status(&rp, 403, "Forbidden", msg, NULL);
	} else if (choose_name(k, meta, k->ns, &rp) && emu_validate(k->r, NULL, obj, &rp)) {
		const char *name = emu_meta_str(obj, "name");
		char key[KEY_MAX], q[128], msg[800];
		emu_store_key(k->r, k->ns, name, key, sizeof(key));
		if (emu_store_get(st, k->res, key)) {
			snprintf(msg, sizeof(msg), "%s \"%s\" already exists",
				 emu_qualified(k->r, q, sizeof(q)), name);
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
	return emu_send_reply(k, &rp);
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
	json_t *nmeta = emu_meta_of(nobj);
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
				reply_invalid(rp, k->r, emu_meta_str(old, "name"), "metadata.finalizers",
					      "FieldValueForbidden", detail);
				json_decref(nobj);
				return NULL;
			}
		}
	}
	if (emu_is_pod(k->r)) {
		const char *on = emu_pod_node(old), *nn = emu_pod_node(nobj);
		if (*on && strcmp(on, nn)) {
			reply_invalid(rp, k->r, emu_meta_str(old, "name"), "spec.nodeName",
				      "FieldValueForbidden", "Forbidden: pod updates may not change "
				      "spec.nodeName once it is set (bind with pods/binding)");
			json_decref(nobj);
			return NULL;
		}
	}
	if (!emu_validate(k->r, old, nobj, rp)) {
		json_decref(nobj);
		return NULL;
	}
	emu_apply_defaults(k->r->group, k->r->plural, nobj);
	const char *frozen = immutable_field(k->r, old, nobj);
	if (frozen) {
		char detail[256];
		const char *nv = json_string_value(json_object_get(nobj, frozen));
		bool vac = !strcmp(k->r->plural, "volumeattributesclasses");
		/* v1.37: a StorageClass's immutability is declarative validation (beta, on),
		 * whose error carries no value */
		if (vac)
			snprintf(detail, sizeof(detail), "Forbidden: updates to %s are forbidden.", frozen);
		else if (!strcmp(k->r->plural, "storageclasses"))
			snprintf(detail, sizeof(detail), "Invalid value: null: field is immutable");
		else if (nv)
			snprintf(detail, sizeof(detail), "Invalid value: \"%.180s\": field is immutable", nv);
		else
			snprintf(detail, sizeof(detail), "Invalid value: field is immutable");
		reply_invalid(rp, k->r, emu_meta_str(old, "name"), frozen,
			      vac ? "FieldValueForbidden" : "FieldValueInvalid", detail);
		json_decref(nobj);
		return NULL;
	}
	char why[300];
	const char *refused = emu_update_refused(k->r->group, k->r->plural, old, nobj, why,
						 sizeof(why));
	if (refused) {
		reply_invalid(rp, k->r, emu_meta_str(old, "name"), refused, "FieldValueForbidden", why);
		json_decref(nobj);
		return NULL;
	}
	if (k->view && (refused = emu_event_update_invalid(old, nobj, why, sizeof(why)))) {
		reply_invalid(rp, k->r, emu_meta_str(old, "name"), refused, "FieldValueInvalid", why);
		json_decref(nobj);
		return NULL;
	}
	if (!resize_admitted(k, old, nobj)) {
		char msg[600];
		snprintf(msg, sizeof(msg), "%s \"%s\" is forbidden: only dynamically provisioned pvc can "
			 "be resized and the storageclass that provisions the pvc must support resize",
			 k->r->plural, emu_meta_str(old, "name"));
		reply_status(rp, 403, "Forbidden", msg, details_for(k->r, emu_meta_str(old, "name")));
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
	json_object_set_new(emu_meta_of(nobj), "resourceVersion",
			    json_string(emu_meta_str(old, "resourceVersion")));
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
	json_t *nmeta = emu_meta_of(nobj), *fin = json_object_get(nmeta, "finalizers");
	const json_t *ogp = json_object_get(ometa, "deletionGracePeriodSeconds");
	bool gone = json_object_get(ometa, "deletionTimestamp") && json_array_size(fin) == 0 &&
		    json_array_size(json_object_get(ometa, "finalizers")) > 0 &&
		    (!ogp || json_integer_value(ogp) == 0);
	const struct emu_event *ev = emu_store_commit(&k->srv->st, k->res, key, nobj,
						      gone ? EMU_DELETED : EMU_MODIFIED);
	reply_object(rp, 200, ev->text);
	if (gone && k->r->namespaced)
		emu_ns_maybe_finish(k->srv, k->ns);
}

static bool check_identity(struct emu_call *k, json_t *obj, struct reply *rp)
{
	const char *name = emu_meta_str(obj, "name");
	if (!name || strcmp(name, k->name)) {
		reply_bad(rp, "the name of the object (%s) does not match the name on the URL (%s)",
			  name ? name : "", k->name);
		return false;
	}
	const char *ns = emu_meta_str(obj, "namespace");
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
	const char *rv = emu_meta_str(obj, "resourceVersion");
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
	} else if (!unconditional && strcmp(rv, emu_meta_str(old, "resourceVersion"))) {
		reply_conflict(&rp, k->r, k->name, MODIFIED_MSG);
	} else {
		finish_update(k, key, old, obj, &rp);
		obj = NULL;
	}
	pthread_mutex_unlock(&st->mu);
out:
	json_decref(obj);
	return emu_send_reply(k, &rp);
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
		const char *prv = emu_meta_str(res, "resourceVersion");
		const char *name = emu_meta_str(res, "name"), *ns = emu_meta_str(res, "namespace");
		if (prv && *prv && strcmp(prv, emu_meta_str(old, "resourceVersion"))) {
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
	return emu_send_reply(k, &rp);
}
