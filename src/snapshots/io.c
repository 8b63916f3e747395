/*
 * The small writes both snapshot controllers make: finalizer lists guarded by resourceVersion,
 * one annotation, a status merge patch, an event. Everything else in src/snapshots is pure.
 */
#include "snapshots/snapshots.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/timeutil.h"
#include "csi/msg.h"
#include "kube/client.h"
#include "kube/events.h"

static const struct kube_resource *resource_of(const struct kube_obj *o)
{
	switch (o->kind) {
	case KUBE_KIND_VS:
		return &KUBE_RES_VOLUMESNAPSHOTS;
	case KUBE_KIND_VSC:
		return &KUBE_RES_VOLUMESNAPSHOTCONTENTS;
	case KUBE_KIND_PVC:
		return &KUBE_RES_PERSISTENTVOLUMECLAIMS;
	case KUBE_KIND_VGS:
		return &KUBE_RES_VOLUMEGROUPSNAPSHOTS;
	case KUBE_KIND_VGSC:
		return &KUBE_RES_VOLUMEGROUPSNAPSHOTCONTENTS;
	case KUBE_KIND_VGSCLASS:
		return &KUBE_RES_VOLUMEGROUPSNAPSHOTCLASSES;
	default:
		return &KUBE_RES_VOLUMESNAPSHOTCLASSES;
	}
}

int snap_patch(struct kube_client *kc, const struct kube_obj *o, bool status, const char *body,
	       struct kube_err *e)
{
	KLOG_V(5, "Patching %s%s%s%s: %s", o->ns ? o->ns : "", o->ns ? "/" : "", o->name,
	       status ? "/status" : "", body);
	return kube_patch_discard(kc, resource_of(o), o->ns, o->name, status, KUBE_PATCH_MERGE,
				  body, e);
}

static int patch_json(struct kube_client *kc, const struct kube_obj *o, bool status,
		      json_t *patch, struct kube_err *e)
{
	char *body = json_dumps(patch, JSON_COMPACT);
	int rc = snap_patch(kc, o, status, body, e);

	free(body);
	json_decref(patch);
	return rc;
}

static bool is(const char *a, const char *b)
{
	return b && !strcmp(a, b);
}

int snap_patch_finalizers(struct kube_client *kc, const struct kube_obj *o, const char *drop1,
			  const char *drop2, const char *add, struct kube_err *e)
{
	json_t *arr = json_array();

	for (size_t i = 0; i < o->nfinalizers; i++)
		if (!is(o->finalizers[i], drop1) && !is(o->finalizers[i], drop2))
			json_array_append_new(arr, json_string(o->finalizers[i]));
	if (add && !kube_obj_has_finalizer(o, add))
		json_array_append_new(arr, json_string(add));
	json_t *md = json_pack("{s:s,s:o}", "resourceVersion", o->rv,
			       "finalizers", json_array_size(arr) ? arr : json_null());
	if (!json_array_size(arr))
		json_decref(arr);
	return patch_json(kc, o, false, json_pack("{s:o}", "metadata", md), e);
}

int snap_patch_annotation(struct kube_client *kc, const struct kube_obj *o, const char *key,
			  const char *value, struct kube_err *e)
{
	json_t *ann = json_object();

	json_object_set_new(ann, key, value ? json_string(value) : json_null());
	return patch_json(kc, o, false, json_pack("{s:{s:o}}", "metadata", "annotations", ann), e);
}

void snap_grpc_error(int code, const char *message, char *out, size_t outlen)
{
	snprintf(out, outlen, "rpc error: code = %s desc = %s", csi_code_go_name(code), message);
}

void snap_time_text(int64_t ns, char *buf, size_t len)
{
	rfc3339_format((time_t)(ns / 1000000000LL), buf, len);
}

void snap_error_status(struct kube_client *kc, struct kube_recorder *rec, const struct kube_obj *o,
		       const char *old_message, const char *reason, const char *msg)
{
	char now[64];
	struct kube_err ke;

	KLOG_ERR(msg, "%s %s", reason, o->name);
	if (old_message && !strcmp(old_message, msg))
		return;
	snap_time_text((int64_t)time(NULL) * NSEC_PER_SEC, now, sizeof(now));
	json_t *patch = json_pack("{s:{s:b,s:{s:s,s:s}}}", "status", "readyToUse", 0, "error",
				  "time", now, "message", msg);
	if (patch_json(kc, o, true, patch, &ke))
		KLOG_ERR(ke.message, "failed to update %s error status", o->name);
	snap_event(rec, o, true, reason, "%s", msg);
}

int64_t snap_csi_time_ns(const Google__Protobuf__Timestamp *t)
{
	if (!t || (t->seconds == 0 && t->nanos == 0))
		return wall_now_ns();
	return t->seconds * NSEC_PER_SEC + t->nanos;
}
