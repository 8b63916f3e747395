/*
 * Node expansion of one volume, as the kubelet's operation generator does it: the claim comes
 * from the informer, resize_plan.c decides, then this file marks the claim
 * (NodeResizeInProgress), calls NodeExpandVolume, and records the outcome on the claim's status
 * (new capacity, or NodeResizeError / NodeResizeInfeasible) with events on the pod and the claim.
 *
 * Retries: a transient failure backs off per volume (500 ms doubling to 2 min 2 s, the kubelet's
 * operation backoff); a final failure is not retried for the same size (the caller keeps
 * failed_size), so no volume is ever expanded in a tight loop.
 */
#include "node/node_int.h"
#include "node/resize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/timeutil.h"
#include "kube/config.h"

#define EXPAND_MAX_DELAY (122 * NSEC_PER_SEC)

static void expand_backoff(struct nd_expand *x)
{
	int64_t d = *x->delay ? *x->delay * 2 : 500 * NSEC_PER_MSEC;
	*x->delay = d > EXPAND_MAX_DELAY ? EXPAND_MAX_DELAY : d;
	*x->next_try = mono_now_ns() + *x->delay;
}

/* Reads the claim and PATCHes its status toward `mark`; 0 when done or nothing to change. */
static int mark_claim(struct nd *nd, const struct kube_pvc *pvc, enum nd_resize_mark mark,
		      int64_t size, const char *msg)
{
	struct kube_err e;
	json_t *cur = kube_get(nd->kc, &KUBE_RES_PERSISTENTVOLUMECLAIMS, pvc->meta.ns,
			       pvc->meta.name, &e);
	if (!cur) {
		KLOG_ERR(e.message, "Cannot read claim pvc=\"%s/%s\"", pvc->meta.ns, pvc->meta.name);
		return -1;
	}
	char now[RFC3339_BUFLEN];
	rfc3339_format(time(NULL), now, sizeof(now));
	json_t *patch = nd_resize_patch(cur, mark, size, msg, now);
	json_decref(cur);
	if (!patch)
		return 0;
	char *body = json_dumps(patch, JSON_COMPACT);
	json_decref(patch);
	json_t *res = kube_patch(nd->kc, &KUBE_RES_PERSISTENTVOLUMECLAIMS, pvc->meta.ns,
				 pvc->meta.name, true, KUBE_PATCH_MERGE, body, &e);
	free(body);
	if (!res) {
		KLOG_ERR(e.message, "patchPVCStatus failed to patch PVC \"%s/%s\"",
			 pvc->meta.ns, pvc->meta.name);
		return -1;
	}
	json_decref(res);
	return 0;
}

static int call_expand(struct nd *nd, struct nd_driver *drv, const struct nd_expand *x,
		       int64_t size, struct csi_status *st)
{
	struct csi_arena *a = csi_arena_new();
	Csi__V1__NodeExpandVolumeRequest *req =
		csi_msg_new(a, &csi__v1__node_expand_volume_request__descriptor);
	req->volume_id = csi_arena_strdup(a, x->pv->volume_handle);
	req->volume_path = csi_arena_strdup(a, x->volume_path);
	req->staging_target_path = x->staging_path ? csi_arena_strdup(a, x->staging_path) : NULL;
	req->capacity_range = csi_msg_new(a, &csi__v1__capacity_range__descriptor);
	req->capacity_range->required_bytes = size;
	req->volume_capability = nd_pv_capability(a, x->pv, drv->snmw);
	Csi__V1__NodeExpandVolumeResponse *resp = NULL;
	int rc = csi_node_expand_volume(drv->conn, req, &resp, nd->cfg->timeout_ns, st);
	csi_msg_free(resp);
	csi_arena_free(a);
	return rc;
}

/* A failed NodeExpandVolume: claim status, event, backoff. Returns nd_expand_volume's value. */
static int expand_failed(struct nd *nd, struct nd_expand *x, const struct kube_pvc *pvc,
			 const struct nd_resize_plan *plan, const struct csi_status *st)
{
	char msg[1200];
	snprintf(msg, sizeof(msg),
		 "Expander.NodeExpand failed to expand the volume : rpc error: code = %s desc = %.400s",
		 csi_code_go_name(st->code), st->message);
	enum nd_resize_error cls = nd_resize_classify(st->code);
	/* The older resizer (no allocatedResourceStatuses) gets the older kubelet: retry all but
	 * FailedPrecondition. With recovery semantics only transient errors are retried. */
	bool retry = cls == ND_RESIZE_ERR_RETRY ||
		     (!plan->recovery && cls != ND_RESIZE_ERR_PRECONDITION);
	if (plan->recovery && cls != ND_RESIZE_ERR_RETRY)
		mark_claim(nd, pvc,
			   cls == ND_RESIZE_ERR_INFEASIBLE || plan->mark_infeasible
				   ? ND_MARK_INFEASIBLE : ND_MARK_FAILED,
			   plan->new_size, msg);
	if (!retry)
		*x->failed_size = plan->new_size;
	if (x->at_mount)
		nd_event(nd, &x->pod->meta, true, "FailedMount",
			 "MountVolume.MountDevice failed while expanding volume for volume \"%s\" : %s",
			 x->spec, msg);
	else
		nd_event(nd, &x->pod->meta, true, "VolumeResizeFailed",
			 "NodeExpandVolume.NodeExpandVolume failed for volume \"%s\" : %s", x->spec, msg);
	KLOG_ERR(msg, "NodeExpandVolume failed for volume \"%s\" pod=\"%s/%s\" retry=%d",
		 x->spec, x->pod->meta.ns, x->pod->meta.name, retry);
	expand_backoff(x);
	return x->at_mount && retry ? -1 : 0;
}

static int expand_run(struct nd *nd, struct nd_driver *drv, struct nd_expand *x,
		      const struct kube_pvc *pvc, const struct nd_resize_plan *plan)
{
	if (plan->recovery && mark_claim(nd, pvc, ND_MARK_IN_PROGRESS, plan->new_size, NULL)) {
		expand_backoff(x);
		return x->at_mount ? -1 : 0;
	}
	struct csi_status st;
	if (call_expand(nd, drv, x, plan->new_size, &st))
		return expand_failed(nd, x, pvc, plan, &st);
	nd_event(nd, &x->pod->meta, false, "FileSystemResizeSuccessful",
		 "MountVolume.NodeExpandVolume succeeded for volume \"%s\" %s", x->spec,
		 nd->cfg->node_name);
	nd_event(nd, &pvc->meta, false, "FileSystemResizeSuccessful",
		 "MountVolume.NodeExpandVolume succeeded for volume \"%s\" %s", x->spec,
		 nd->cfg->node_name);
	KLOG_I("MountVolume.NodeExpandVolume succeeded for volume \"%s\" pod=\"%s/%s\" size=%lld",
	       x->spec, x->pod->meta.ns, x->pod->meta.name, (long long)plan->new_size);
	/* The claim not updated: NodeExpandVolume is idempotent, the next try repeats both. */
	if (mark_claim(nd, pvc, ND_MARK_FINISHED, plan->new_size, NULL)) {
		expand_backoff(x);
		return 0;
	}
	*x->done_size = plan->new_size;
	*x->delay = 0;
	return 0;
}

static int expand_decided(struct nd *nd, struct nd_driver *drv, struct nd_expand *x,
			  const struct kube_pvc *pvc, const struct nd_resize_plan *plan)
{
	switch (plan->verdict) {
	case ND_RESIZE_NONE:
		return 0;
	case ND_RESIZE_READONLY:
		nd_event(nd, &x->pod->meta, true, "FileSystemResizeFailed",
			 "MountVolume.NodeExpandVolume failed for volume \"%s\" requested read-only file system",
			 x->spec);
		nd_event(nd, &pvc->meta, true, "FileSystemResizeFailed",
			 "MountVolume.NodeExpandVolume failed for volume \"%s\" requested read-only file system",
			 x->spec);
		*x->done_size = plan->new_size;
		return 0;
	case ND_RESIZE_FINISH:
		/* No EXPAND_VOLUME: nothing to do on the node but to record the size. */
		if (mark_claim(nd, pvc, ND_MARK_FINISHED, plan->new_size, NULL)) {
			expand_backoff(x);
			return 0;
		}
		KLOG_I("Driver %s has no node expansion; recorded size %lld for volume \"%s\"",
		       drv->name, (long long)plan->new_size, x->spec);
		*x->done_size = plan->new_size;
		return 0;
	case ND_RESIZE_EXPAND:
		return expand_run(nd, drv, x, pvc, plan);
	}
	return 0;
}

int nd_expand_volume(struct nd *nd, struct nd_driver *drv, struct nd_expand *x)
{
	if (!x->pv || !x->pv->claim_name)
		return 0;
	if (mono_now_ns() < *x->next_try)
		return x->at_mount && *x->failed_size != x->pv->capacity ? -1 : 0;
	struct kube_obj *o = kube_store_get(kube_informer_store(nd->pvcs), x->pv->claim_ns,
					    x->pv->claim_name);
	const struct kube_pvc *pvc = kube_pvc_of(o);
	if (!pvc) {
		kube_obj_unref(o);
		return 0;
	}
	struct nd_resize_in in = {
		.pv_capacity = x->pv->capacity, .pvc_capacity = pvc->capacity,
		.pvc_request = pvc->request,
		.fs_resize_pending = (pvc->conds & KUBE_PVC_FS_RESIZE_PENDING) != 0,
		.resize_status = pvc->resize_status, .allocated = pvc->allocated,
		.at_mount = x->at_mount, .driver_expands = drv->expand, .readonly = x->readonly,
		.done_size = *x->done_size, .failed_final_size = *x->failed_size,
	};
	struct nd_resize_plan plan;
	nd_resize_decide(&in, &plan);
	int rc = expand_decided(nd, drv, x, pvc, &plan);
	kube_obj_unref(o);
	return rc;
}
