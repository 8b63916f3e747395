/*
 * Node expansion's rules (resize.h): when a claim needs NodeExpandVolume on this node, what a
 * failure means, and the claim's status patch per outcome. The kubelet's names and semantics:
 * condition types Resizing, FileSystemResizePending, ControllerResizeError, NodeResizeError;
 * allocatedResourceStatuses NodeResizePending, NodeResizeInProgress, NodeResizeInfeasible.
 */
#include "node/resize.h"

#include <stdio.h>
#include <string.h>

#include "kube/objects.h"
#include "kube/quantity.h"

static bool streq(const char *a, const char *b)
{
	return a && b && !strcmp(a, b);
}

static bool node_stage_of_resize(uint8_t s)
{
	return s == KUBE_RESIZE_NODE_PENDING || s == KUBE_RESIZE_NODE_IN_PROGRESS;
}

void nd_resize_decide(const struct nd_resize_in *in, struct nd_resize_plan *out)
{
	memset(out, 0, sizeof(*out));
	out->verdict = ND_RESIZE_NONE;
	out->new_size = in->pv_capacity;
	/* Only a bound claim whose PV is larger than what the claim reports needs the node. */
	if (in->pv_capacity <= 0 || in->pvc_capacity <= 0 || in->pv_capacity <= in->pvc_capacity)
		return;
	if (in->done_size >= in->pv_capacity)
		return; /* done here; the claim's status is on its way */
	/* A mounted volume waits for the resizer's word; a mount expands on the sizes alone. */
	if (!in->at_mount && !in->fs_resize_pending && !node_stage_of_resize(in->resize_status))
		return;
	out->recovery = in->resize_status != KUBE_RESIZE_NONE || in->allocated >= 0;
	/* A resizer that records allocatedResourceStatuses hands over with NodeResizePending;
	 * anything else (controller stages, NodeResizeInfeasible, none) is not the node's turn. */
	if (out->recovery && !node_stage_of_resize(in->resize_status))
		return;
	if (in->failed_final_size == in->pv_capacity)
		return; /* the driver's final answer for this size stands until the size changes */
	if (in->readonly) {
		out->verdict = ND_RESIZE_READONLY;
		return;
	}
	if (!in->driver_expands) {
		out->verdict = ND_RESIZE_FINISH;
		return;
	}
	out->mark_infeasible = out->recovery && in->failed_final_size > 0 &&
			       in->pvc_request != in->pv_capacity;
	out->verdict = ND_RESIZE_EXPAND;
}

enum nd_resize_error nd_resize_classify(int code)
{
	switch (code) {
	case 1:  /* CANCELLED */
	case 4:  /* DEADLINE_EXCEEDED */
	case 8:  /* RESOURCE_EXHAUSTED */
	case 10: /* ABORTED */
	case 14: /* UNAVAILABLE */
		return ND_RESIZE_ERR_RETRY;
	case 9:  /* FAILED_PRECONDITION: the driver cannot expand it while in use */
		return ND_RESIZE_ERR_PRECONDITION;
	case 3:  /* INVALID_ARGUMENT */
	case 5:  /* NOT_FOUND */
	case 11: /* OUT_OF_RANGE */
		return ND_RESIZE_ERR_INFEASIBLE;
	default:
		return ND_RESIZE_ERR_FINAL;
	}
}

static bool is_resize_condition(const char *type)
{
	return streq(type, "Resizing") || streq(type, "FileSystemResizePending") ||
	       streq(type, "ControllerResizeError") || streq(type, "NodeResizeError");
}

static const char *storage_status(const json_t *status)
{
	return json_string_value(
		json_object_get(json_object_get(status, "allocatedResourceStatuses"), "storage"));
}

/* The claim's conditions without the resize ones (FINISHED). */
static json_t *conditions_without_resize(const json_t *conds)
{
	json_t *out = json_array();
	size_t i;
	json_t *c;
	json_array_foreach(conds, i, c)
		if (!is_resize_condition(json_string_value(json_object_get(c, "type"))))
			json_array_append(out, c);
	return out;
}

/* The claim's conditions with NodeResizeError True; NULL when it is already there. */
static json_t *conditions_with_error(const json_t *conds, const char *msg, const char *now)
{
	json_t *out = json_array(), *c;
	size_t i;
	json_array_foreach(conds, i, c) {
		const char *type = json_string_value(json_object_get(c, "type"));
		if (!streq(type, "NodeResizeError")) {
			json_array_append(out, c);
			continue;
		}
		if (streq(json_string_value(json_object_get(c, "status")), "True")) {
			json_decref(out);
			return NULL; /* as the kubelet's merge: a condition of the same status stays */
		}
	}
	char text[1200];
	snprintf(text, sizeof(text), "failed to expand pvc with %s", msg ? msg : "");
	json_array_append_new(out, json_pack("{s:s, s:s, s:s, s:s}", "type", "NodeResizeError",
					     "status", "True", "lastTransitionTime", now, "message",
					     text));
	return out;
}

/* {"storage": null}, or null for the whole map when storage is its only key. */
static json_t *without_storage_status(const json_t *status)
{
	const json_t *m = json_object_get(status, "allocatedResourceStatuses");
	if (json_object_size(m) <= 1)
		return json_null();
	return json_pack("{s:n}", "storage");
}

json_t *nd_resize_patch(const json_t *pvc, enum nd_resize_mark mark, int64_t new_size,
			const char *msg, const char *now)
{
	const json_t *status = json_object_get(pvc, "status");
	const json_t *conds = json_object_get(status, "conditions");
	const char *cur = storage_status(status);
	json_t *st = json_object();
	bool with_rv = false;
	switch (mark) {
	case ND_MARK_IN_PROGRESS:
		if (streq(cur, "NodeResizeInProgress"))
			break;
		json_object_set_new(st, "allocatedResourceStatuses",
				    json_pack("{s:s}", "storage", "NodeResizeInProgress"));
		with_rv = true;
		break;
	case ND_MARK_FINISHED: {
		char q[KUBE_QUANTITY_BUFLEN];
		kube_quantity_format(new_size, true, q, sizeof(q));
		json_object_set_new(st, "capacity", json_pack("{s:s}", "storage", q));
		json_object_set_new(st, "conditions", conditions_without_resize(conds));
		if (cur)
			json_object_set_new(st, "allocatedResourceStatuses",
					    without_storage_status(status));
		with_rv = true;
		break;
	}
	case ND_MARK_FAILED:
	case ND_MARK_INFEASIBLE: {
		json_t *nc = conditions_with_error(conds, msg, now);
		if (nc)
			json_object_set_new(st, "conditions", nc);
		if (mark == ND_MARK_INFEASIBLE && !streq(cur, "NodeResizeInfeasible"))
			json_object_set_new(st, "allocatedResourceStatuses",
					    json_pack("{s:s}", "storage", "NodeResizeInfeasible"));
		break;
	}
	}
	if (json_object_size(st) == 0) {
		json_decref(st);
		return NULL;
	}
	json_t *patch = json_pack("{s:o}", "status", st);
	const char *rv = json_string_value(
		json_object_get(json_object_get(pvc, "metadata"), "resourceVersion"));
	if (with_rv && rv)
		json_object_set_new(patch, "metadata", json_pack("{s:s}", "resourceVersion", rv));
	return patch;
}
