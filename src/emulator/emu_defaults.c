/*
 * emu_defaults: kube-apiserver's defaults and update rules for the storage kinds (emu_defaults.h).
 *
 * A table of (group, plural, JSON path, default) covers the scalar defaults; the few that are not
 * scalars (a CSIDriver's volumeLifecycleModes) are written out. The claim rule compares the two
 * specs after masking what may change, as upstream's validation does, so any other spec change,
 * whatever its field, is refused.
 */
#include "emulator/emu_defaults.h"

#include <stdlib.h>

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "emulator/emu_base64.h"

struct field_default {
	const char *group, *plural;
	const char *parent; /* "" for the object itself, else a top-level field ("spec", "status") */
	const char *field;
	const char *json;   /* the default, as JSON */
};

static const struct field_default defaults[] = {
	{ "storage.k8s.io", "storageclasses", "", "reclaimPolicy", "\"Delete\"" },
	{ "storage.k8s.io", "storageclasses", "", "volumeBindingMode", "\"Immediate\"" },
	{ "", "persistentvolumes", "spec", "persistentVolumeReclaimPolicy", "\"Retain\"" },
	{ "", "persistentvolumes", "spec", "volumeMode", "\"Filesystem\"" },
	{ "", "persistentvolumeclaims", "spec", "volumeMode", "\"Filesystem\"" },
	{ "", "secrets", "", "type", "\"Opaque\"" },
	{ "storage.k8s.io", "csidrivers", "spec", "attachRequired", "true" },
	{ "storage.k8s.io", "csidrivers", "spec", "podInfoOnMount", "false" },
	{ "storage.k8s.io", "csidrivers", "spec", "storageCapacity", "false" },
	{ "storage.k8s.io", "csidrivers", "spec", "fsGroupPolicy", "\"ReadWriteOnceWithFSType\"" },
	{ "storage.k8s.io", "csidrivers", "spec", "requiresRepublish", "false" },
	{ "storage.k8s.io", "csidrivers", "spec", "seLinuxMount", "false" },
	/* v1.37: VolumeLimitScaling (beta, on) defaults it */
	{ "storage.k8s.io", "csidrivers", "spec", "preventPodSchedulingIfMissing", "false" },
	{ "storage.k8s.io", "csidrivers", "spec", "volumeLifecycleModes", "[\"Persistent\"]" },
	/* fields Go serializes although unset (non-pointer structs, strings without omitempty) */
	{ "", "events", "", "eventTime", "null" },
	{ "", "events", "", "involvedObject", "{}" },
	{ "", "events", "", "source", "{}" },
	{ "", "events", "", "firstTimestamp", "null" },
	{ "", "events", "", "lastTimestamp", "null" },
	{ "", "events", "", "reportingComponent", "\"\"" },
	{ "", "events", "", "reportingInstance", "\"\"" },
	{ "storage.k8s.io", "csinodes", "", "status", "{}" }, /* v1.37's CSINodeStatus */
};

/* A missing field, or an empty string where the Go field is a plain string, takes the default. */
static bool is_unset(const json_t *v, const char *def_json)
{
	if (!v)
		return true;
	if (json_is_null(v))
		return strcmp(def_json, "null") != 0;
	if (def_json[0] == '[')
		return json_is_array(v) && json_array_size(v) == 0;
	return def_json[0] == '"' && json_is_string(v) && !*json_string_value(v);
}

/* A Secret's stringData goes into data, base64-encoded, and is not stored. */
static void secret_string_data(json_t *obj)
{
	json_t *sd = json_object_get(obj, "stringData");
	if (!json_is_object(sd))
		return;
	json_t *data = json_object_get(obj, "data");
	if (!json_is_object(data)) {
		data = json_object();
		json_object_set_new(obj, "data", data);
	}
	const char *key;
	json_t *v;
	json_object_foreach(sd, key, v) {
		if (!json_is_string(v))
			continue;
		char *b = emu_base64_encode((const unsigned char *)json_string_value(v),
					    json_string_length(v), false);
		json_object_set_new(data, key, json_string(b));
		free(b);
	}
	json_object_del(obj, "stringData");
}

/* A Namespace's kubernetes.io/metadata.name label and its "kubernetes" finalizer. */
static void namespace_defaults(json_t *obj)
{
	json_t *meta = json_object_get(obj, "metadata");
	const char *name = json_string_value(json_object_get(meta, "name"));
	if (!name)
		return;
	json_t *labels = json_object_get(meta, "labels");
	if (!json_is_object(labels)) {
		labels = json_object();
		json_object_set_new(meta, "labels", labels);
	}
	json_object_set_new(labels, "kubernetes.io/metadata.name", json_string(name));
	json_t *spec = json_object_get(obj, "spec");
	if (!json_is_object(spec)) {
		spec = json_object();
		json_object_set_new(obj, "spec", spec);
	}
	if (!json_object_get(spec, "finalizers"))
		json_object_set_new(spec, "finalizers", json_pack("[s]", "kubernetes"));
}

/*
 * The DefaultTolerationSeconds admission plugin (on create and update of pods proper): a pod
 * with no toleration of node.kubernetes.io/not-ready:NoExecute (same key or none, NoExecute or
 * any effect) gets one, Exists, tolerationSeconds 300; the same for unreachable.
 */
static void pod_default_tolerations(json_t *obj)
{
	static const char *const keys[] = { "node.kubernetes.io/not-ready",
					    "node.kubernetes.io/unreachable" };
	json_t *spec = json_object_get(obj, "spec");
	if (!json_is_object(spec))
		return;
	json_t *tols = json_object_get(spec, "tolerations");
	if (tols && !json_is_array(tols) && !json_is_null(tols))
		return; /* a wrong type is the validation's to refuse */
	bool have[2] = { false, false };
	size_t i;
	json_t *t;
	json_array_foreach(tols, i, t) {
		const char *k = json_string_value(json_object_get(t, "key"));
		const char *e = json_string_value(json_object_get(t, "effect"));
		bool effect_ok = !e || !*e || !strcmp(e, "NoExecute");
		for (size_t j = 0; j < 2; j++)
			if (effect_ok && (!k || !*k || !strcmp(k, keys[j])))
				have[j] = true;
	}
	for (size_t j = 0; j < 2; j++) {
		if (have[j])
			continue;
		if (!json_is_array(tols)) {
			tols = json_array();
			json_object_set_new(spec, "tolerations", tols);
		}
		json_array_append_new(tols, json_pack("{s:s, s:s, s:s, s:I}", "key", keys[j],
						      "operator", "Exists", "effect", "NoExecute",
						      "tolerationSeconds", (json_int_t)300));
	}
}

/*
 * Go writes an empty or null status.conditions of a built-in kind as nothing (the field is
 * omitempty in every core and apps type), so a client that clears the list reads it absent; a
 * custom resource keeps what was written, as the real server stores its JSON as it is.
 */
static void drop_empty_conditions(json_t *obj)
{
	json_t *st = json_object_get(obj, "status");
	json_t *conds = json_object_get(st, "conditions");

	if (json_is_null(conds) || (json_is_array(conds) && !json_array_size(conds)))
		json_object_del(st, "conditions");
}

void emu_apply_defaults(const char *group, const char *plural, json_t *obj)
{
	if (!json_is_object(obj))
		return;
	if (!*group || !strcmp(group, "apps"))
		drop_empty_conditions(obj);
	if (!*group && !strcmp(plural, "secrets"))
		secret_string_data(obj);
	if (!*group && !strcmp(plural, "namespaces"))
		namespace_defaults(obj);
	if (!*group && !strcmp(plural, "pods"))
		pod_default_tolerations(obj);
	if (!*group && !strcmp(plural, "nodes")) { /* allocatable defaults to the capacity */
		json_t *st = json_object_get(obj, "status");
		json_t *cap = json_object_get(st, "capacity");
		if (json_is_object(cap) && !json_object_get(st, "allocatable"))
			json_object_set_new(st, "allocatable", json_deep_copy(cap));
	}
	for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++) {
		const struct field_default *d = &defaults[i];
		if (strcmp(d->group, group) || strcmp(d->plural, plural))
			continue;
		json_t *parent = obj;
		if (*d->parent) {
			parent = json_object_get(obj, d->parent);
			if (!parent || json_is_null(parent)) {
				parent = json_object();
				json_object_set_new(obj, d->parent, parent);
			}
			if (!json_is_object(parent))
				continue; /* a wrong type is the validation's to refuse, not ours to mend */
		}
		if (is_unset(json_object_get(parent, d->field), d->json))
			json_object_set_new(parent, d->field, json_loads(d->json, JSON_DECODE_ANY, NULL));
	}
}

static const char *phase_of(const json_t *obj)
{
	const char *p = json_string_value(json_object_get(json_object_get(obj, "status"), "phase"));
	return p ? p : "";
}

static const char *claim_refused(const json_t *old, const json_t *proposed, char *detail,
				 size_t len)
{
	json_t *ospec = json_object_get(old, "spec"), *nspec = json_object_get(proposed, "spec");
	json_t *o = json_is_object(ospec) ? json_deep_copy(ospec) : json_object();
	json_t *n = json_is_object(nspec) ? json_deep_copy(nspec) : json_object();
	const char *ovn = json_string_value(json_object_get(o, "volumeName"));
	if (!ovn || !*ovn) { /* volumeName may be set once (the binder's write) */
		json_object_del(o, "volumeName");
		json_object_del(n, "volumeName");
	}
	const json_t *ann = json_object_get(json_object_get(old, "metadata"), "annotations");
	if (!json_object_get(o, "storageClassName") &&
	    !json_object_get(ann, "volume.beta.kubernetes.io/storage-class"))
		json_object_del(n, "storageClassName"); /* a class may be set where none was */
	if (!strcmp(phase_of(proposed), "Bound")) {
		json_t *oreq = json_object_get(json_object_get(o, "resources"), "requests");
		json_t *nreq = json_object_get(json_object_get(n, "resources"), "requests");
		if (json_is_object(nreq)) {
			json_t *s = json_object_get(oreq, "storage");
			if (s)
				json_object_set(nreq, "storage", s);
			else
				json_object_del(nreq, "storage");
		}
		json_t *vac = json_object_get(o, "volumeAttributesClassName");
		if (vac)
			json_object_set(n, "volumeAttributesClassName", vac);
		else
			json_object_del(n, "volumeAttributesClassName");
	}
	bool same = json_equal(o, n);
	json_decref(o);
	json_decref(n);
	if (same)
		return NULL;
	snprintf(detail, len, "Forbidden: spec is immutable after creation except resources.requests "
		 "and volumeAttributesClassName for bound claims");
	return "spec";
}

const char *emu_update_refused(const char *group, const char *plural, const json_t *old,
			       const json_t *proposed, char *detail, size_t len)
{
	if (!*group && !strcmp(plural, "persistentvolumeclaims"))
		return claim_refused(old, proposed, detail, len);
	return NULL;
}
