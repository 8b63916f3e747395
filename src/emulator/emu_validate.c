/*
 * emu_validate: see emu_validate.h. Each rule is a small function over the two JSON objects; the
 * words of each answer are kube-apiserver v1.37.2's (pkg/apis/core/validation for pods, apps
 * validation for selectors, the apiextensions CEL and enum errors for the snapshot CRDs).
 */
#include "emulator/emu_validate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emulator/emu_internal.h"
#include "emulator/emu_object.h"

static const char POD_UPDATABLE[] =
	"`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
	"`spec.tolerations` (only additions to existing tolerations),"
	"`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

static const json_t *at(const json_t *obj, const char *a, const char *b)
{
	const json_t *v = json_object_get(obj, a);
	return b ? json_object_get(v, b) : v;
}

static bool same(const json_t *a, const json_t *b)
{
	return (!a && !b) || (a && b && json_equal(a, b));
}

/* A pod spec without what an update may change (and nodeName, which kube-emulator lets an update
 * set once). */
static json_t *pod_spec_masked(const json_t *pod)
{
	json_t *s = json_deep_copy(json_object_get(pod, "spec"));
	if (!json_is_object(s))
		return s;
	static const char *const drop[] = { "activeDeadlineSeconds", "tolerations",
					    "terminationGracePeriodSeconds", "nodeName",
					    "schedulingGates" };
	for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
		json_object_del(s, drop[i]);
	static const char *const lists[] = { "containers", "initContainers" };
	for (size_t i = 0; i < 2; i++) {
		size_t k;
		json_t *c;
		json_array_foreach(json_object_get(s, lists[i]), k, c)
			json_object_del(c, "image");
	}
	return s;
}

static bool pod_update(const struct emu_resource *r, const json_t *old, const json_t *nobj,
		       struct reply *rp)
{
	json_t *a = pod_spec_masked(old), *b = pod_spec_masked(nobj);
	bool ok = same(a, b);
	json_decref(a);
	json_decref(b);
	if (!ok) {
		char detail[700];
		snprintf(detail, sizeof(detail), "Forbidden: pod updates may not change fields other "
			 "than %s", POD_UPDATABLE);
		reply_invalid(rp, r, emu_meta_str(old, "name"), "spec", "FieldValueForbidden", detail);
	}
	return ok;
}

/* apps/v1: spec.selector is immutable (Deployment, ReplicaSet, DaemonSet, StatefulSet). */
static bool apps_selector(const struct emu_resource *r, const json_t *old, const json_t *nobj,
			  struct reply *rp)
{
	const json_t *a = at(old, "spec", "selector"), *b = at(nobj, "spec", "selector");
	if (same(a, b))
		return true;
	char *v = b ? json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	char detail[700];
	snprintf(detail, sizeof(detail), "Invalid value: %.600s: field is immutable", v ? v : "null");
	free(v);
	reply_invalid(rp, r, emu_meta_str(old, "name"), "spec.selector", "FieldValueInvalid", detail);
	return false;
}

/* A CEL rule's answer, as the apiextensions server words it: the new value when it is a string,
 * else its type ("object"). */
static void cel_invalid(struct reply *rp, const struct emu_resource *r, const json_t *obj,
			const char *field, const char *value, const char *message)
{
	char detail[400];
	snprintf(detail, sizeof(detail), "Invalid value: \"%.120s\": %s", value, message);
	reply_invalid(rp, r, emu_meta_str(obj, "name"), field, "FieldValueInvalid", detail);
}

/* VolumeSnapshot spec.source: each source immutable and required once set. */
static bool snapshot_source(const struct emu_resource *r, const json_t *old, const json_t *nobj,
			    struct reply *rp)
{
	const json_t *src = at(nobj, "spec", "source"), *osrc = at(old, "spec", "source");
	static const char *const keys[] = { "persistentVolumeClaimName", "volumeSnapshotContentName" };
	for (size_t i = 0; old && i < 2; i++) {
		const json_t *a = json_object_get(osrc, keys[i]), *b = json_object_get(src, keys[i]);
		char field[96], msg[96];
		if (a && b && !json_equal(a, b)) {
			snprintf(field, sizeof(field), "spec.source.%s", keys[i]);
			snprintf(msg, sizeof(msg), "%s is immutable", keys[i]);
			cel_invalid(rp, r, nobj, field, json_string_value(b) ? json_string_value(b)
								      : "string", msg);
			return false;
		}
		if (a && !b) {
			snprintf(msg, sizeof(msg), "%s is required once set", keys[i]);
			cel_invalid(rp, r, nobj, "spec.source", "object", msg);
			return false;
		}
	}
	/* Not checked: "exactly one of volumeSnapshotContentName and persistentVolumeClaimName",
	 * which snapshot-controller checks again (as upstream's, for CRDs without the rule) and
	 * e2e.snapshot_errors tests; docs/kube-emulator.md lists it. */
	return true;
}

/* deletionPolicy of the snapshot classes and contents: an enum of the CRDs' schema. */
static bool deletion_policy(const struct emu_resource *r, const json_t *nobj, bool in_spec,
			    struct reply *rp)
{
	const json_t *p = in_spec ? at(nobj, "spec", "deletionPolicy") : at(nobj, "deletionPolicy",
									      NULL);
	const char *v = json_string_value(p);
	if (!p || (v && (!strcmp(v, "Delete") || !strcmp(v, "Retain"))))
		return true;
	char detail[200];
	snprintf(detail, sizeof(detail), "Unsupported value: \"%.64s\": supported values: "
		 "\"Delete\", \"Retain\"", v ? v : "");
	reply_invalid(rp, r, emu_meta_str(nobj, "name"), in_spec ? "spec.deletionPolicy"
		      : "deletionPolicy", "FieldValueNotSupported", detail);
	return false;
}

bool emu_validate(const struct emu_resource *r, const json_t *old, const json_t *nobj,
		  struct reply *rp)
{
	if (emu_is_pod(r))
		return !old || pod_update(r, old, nobj, rp);
	if (!strcmp(r->group, "apps"))
		return !old || apps_selector(r, old, nobj, rp);
	if (!strcmp(r->group, "snapshot.storage.k8s.io") ||
	    !strcmp(r->group, "groupsnapshot.storage.k8s.io")) {
		if (!strcmp(r->plural, "volumesnapshots"))
			return snapshot_source(r, old, nobj, rp);
		if (!strcmp(r->plural, "volumesnapshotclasses") ||
		    !strcmp(r->plural, "volumegroupsnapshotclasses"))
			return deletion_policy(r, nobj, false, rp);
		if (!strcmp(r->plural, "volumesnapshotcontents") ||
		    !strcmp(r->plural, "volumegroupsnapshotcontents"))
			return deletion_policy(r, nobj, true, rp);
	}
	return true;
}
