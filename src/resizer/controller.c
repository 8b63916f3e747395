/*
 * The resize controller's I/O: informers feed claim keys into the queue; a worker reads the
 * claim, its volume and class from the caches, asks decide.c what to do, and then writes the
 * claim's status, calls ControllerExpandVolume, patches the PV's capacity and records events,
 * in upstream's order (mark in progress -> expand -> PV capacity -> node pending or finished).
 *
 * Besides the objects, three sets remember what upstream remembers in memory: claims whose last
 * call ended with a final error, claims in the slow set (infeasible lately: retried only after
 * --retry-interval-max), and claims whose driver answered FailedPrecondition (retried only while
 * no pod uses them, with --handle-volume-inuse-error). A restart forgets them, as upstream's do.
 * The sets' and the writes' helpers, which modify.c uses too, are in shared.c.
 */
#include "resizer/resizer.h"

#include "base/log.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "kube/quantity.h"

#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static bool same(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

/*
 * spec.capacity.storage of the PV and, with AnnotateFsResize when the node must finish, the
 * pre-resize annotation (the claim's capacity before; an annotation already there stays, so a
 * second expansion before the node's keeps the first size).
 */
static int patch_pv_capacity(struct rsz_ctrl *c, const struct kube_pv *pv, int64_t old_cap,
			     int64_t size, bool fs_resize, struct kube_err *e)
{
	char q[64], oq[64], body[512];

	kube_quantity_format(size, true, q, sizeof(q));
	if (c->o.gates.annotate_fs_resize && fs_resize && !pv->pre_resize_capacity) {
		/* a claim without status.capacity records "0", as Go's zero Quantity prints */
		kube_quantity_format(old_cap > 0 ? old_cap : 0, true, oq, sizeof(oq));
		snprintf(body, sizeof(body),
			 "{\"metadata\":{\"annotations\":{\"" RSZ_ANN_PRE_RESIZE_CAPACITY "\":\"%s\"}},"
			 "\"spec\":{\"capacity\":{\"storage\":\"%s\"}}}", oq, q);
	} else {
		snprintf(body, sizeof(body), "{\"spec\":{\"capacity\":{\"storage\":\"%s\"}}}", q);
	}
	return kube_patch_discard(c->kc, &KUBE_RES_PERSISTENTVOLUMES, NULL, pv->meta.name, false,
				  KUBE_PATCH_STRATEGIC, body, e);
}

/* Upstream's deletePreResizeCapAnnotation: the node finished, the annotation goes. */
static int drop_pre_resize_ann(struct rsz_ctrl *c, const struct kube_pv *pv, struct kube_err *e)
{
	return kube_patch_discard(c->kc, &KUBE_RES_PERSISTENTVOLUMES, NULL, pv->meta.name, false,
				  KUBE_PATCH_STRATEGIC,
				  "{\"metadata\":{\"annotations\":{\"" RSZ_ANN_PRE_RESIZE_CAPACITY "\":null}}}",
				  e);
}

/* ---- the CSI call ---- */

/* The access mode upstream's accessmodes.ToCSIAccessMode gives, or -1. */
static int csi_access_mode(unsigned m, bool snmw)
{
	if (m & KUBE_RWOP)
		return m != KUBE_RWOP ? -1
		       : snmw ? CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_SINGLE_WRITER
			      : CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER;
	if (m & KUBE_RWX)
		return CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_MULTI_WRITER;
	if ((m & KUBE_ROX) && (m & KUBE_RWO))
		return -1;
	if (m & KUBE_ROX)
		return CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_READER_ONLY;
	if (m & KUBE_RWO)
		return snmw ? CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_MULTI_WRITER
			    : CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER;
	return -1;
}

static Csi__V1__VolumeCapability *volume_capability(struct rsz_ctrl *c, struct csi_arena *a,
						    const struct kube_pv *pv, char *err,
						    size_t errlen)
{
	int mode = csi_access_mode(pv->access_modes, c->o.snmw);
	if (mode < 0) {
		snprintf(err, errlen, "failed to get capabilities of volume %s with unsupported access modes",
			 pv->meta.name);
		return NULL;
	}
	Csi__V1__VolumeCapability *cap = csi_msg_new(a, &csi__v1__volume_capability__descriptor);
	cap->access_mode = csi_msg_new(a, &csi__v1__volume_capability__access_mode__descriptor);
	cap->access_mode->mode = mode;
	if (pv->block) {
		cap->access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;
		cap->block = csi_msg_new(a, &csi__v1__volume_capability__block_volume__descriptor);
		return cap;
	}
	cap->access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
	cap->mount = csi_msg_new(a, &csi__v1__volume_capability__mount_volume__descriptor);
	cap->mount->fs_type = (char *)(pv->fs_type ? pv->fs_type : "");
	for (uint16_t i = 0; i < pv->nmount_options; i++)
		csi_repeated_add(a, &cap->mount->base, "mount_flags",
				 csi_arena_strdup(a, pv->mount_options[i]));
	return cap;
}

struct expand_result {
	int code;          /* 0, a gRPC code, or RSZ_NOT_GRPC */
	int64_t size;
	bool fs_resize;
	char error[1100];  /* as the Go sidecars word it: "rpc error: code = ... desc = ..." */
};

/* Upstream's csiResizer.Resize (or the trivial resizer without EXPAND_VOLUME). */
static void resize_volume(struct rsz_ctrl *c, const struct kube_pvc *pvc, const struct kube_pv *pv,
			  const struct kube_storageclass *sc, int64_t size, struct expand_result *r)
{
	struct csi_arena *a;
	struct rsz_secret_ref ref;
	struct csi_status st = { 0 };
	Csi__V1__ControllerExpandVolumeResponse *resp = NULL;

	*r = (struct expand_result){ .size = size, .fs_resize = true };
	if (!c->o.controller_expand)
		return; /* the node does all the work: the PV only records the new size */
	r->code = RSZ_NOT_GRPC;
	if (!pv->volume_handle || !*pv->volume_handle) {
		snprintf(r->error, sizeof(r->error), "empty volume handle");
		return;
	}
	if (rsz_secret_ref(pv, pvc, sc, &ref, r->error, sizeof(r->error)))
		return;
	a = csi_arena_new();
	Csi__V1__ControllerExpandVolumeRequest *req =
		csi_msg_new(a, &csi__v1__controller_expand_volume_request__descriptor);
	req->volume_id = (char *)pv->volume_handle;
	req->capacity_range = csi_msg_new(a, &csi__v1__capacity_range__descriptor);
	req->capacity_range->required_bytes = size;
	req->volume_capability = volume_capability(c, a, pv, r->error, sizeof(r->error));
	if (req->volume_capability &&
	    (!ref.set || !sidecar_add_secrets(c->kc, a, &req->base, "secrets", ref.ns, ref.name,
					      r->error, sizeof(r->error)))) {
		if (csi_controller_expand_volume(c->o.csi, req, &resp, c->o.resize_timeout_ns, &st)) {
			r->code = st.code;
			snprintf(r->error, sizeof(r->error), "rpc error: code = %s desc = %s",
				 csi_code_go_name(st.code), st.message);
		} else {
			r->code = 0;
			r->size = resp->capacity_bytes;
			r->fs_resize = resp->node_expansion_required;
			csi_msg_free(resp);
		}
	}
	csi_arena_free(a);
}

/* ---- one claim ---- */

/* True when a pod that has not ended uses the claim (pods are indexed by claim name). */
static bool claim_in_use(struct rsz_ctrl *c, const struct kube_pvc *pvc)
{
	size_t n = 0;
	bool used = false;
	struct kube_obj **v;

	if (!c->pod_inf)
		return false;
	v = kube_store_by_index(kube_informer_store(c->pod_inf), "claim", pvc->meta.name, &n);
	for (size_t i = 0; i < n && !used; i++) {
		const struct kube_pod *p = kube_pod_of(v[i]);
		used = p && same(p->meta.ns, pvc->meta.ns) && !kube_pod_terminated(p);
	}
	kube_objs_free(v, n);
	return used;
}

static enum kube_work_result failed(struct rsz_ctrl *c, const char *key, const struct kube_pvc *pvc,
				    const struct kube_pv *pv, const struct expand_result *r)
{
	struct kube_err e;
	char msg[1300];

	if (rsz_is_inuse(r->code))
		rsz_set_add(c, &c->inuse, key);
	enum rsz_failure f = rsz_classify_failure(r->code);
	if (f == RSZ_FAIL_RETRY) {
		rsz_set_del(c, &c->slow, key);
		rsz_set_del(c, &c->final, key);
	} else {
		rsz_set_add(c, &c->final, key);
		if (f == RSZ_FAIL_FINAL)
			rsz_set_del(c, &c->slow, key);
		struct rsz_patch p = rsz_mark_failed(pvc, f == RSZ_FAIL_INFEASIBLE, r->error, msg,
						     sizeof(msg));
		if (rsz_patch_claim(c, pvc, &p, &e))
			KLOG_ERR(e.message, "resizing failed in controller with %s but failed to update PVC %s/%s",
				 r->error, pvc->meta.ns, pvc->meta.name);
	}
	snprintf(msg, sizeof(msg), "resize volume \"%s\" by resizer \"%s\" failed: %s",
		 pv->meta.name, c->o.driver, r->error);
	rsz_event(c, pvc, true, RSZ_EV_FAILED, "%s", msg);
	KLOG_ERR(msg, "Error syncing PVC %s", key);
	return KUBE_WORK_RETRY;
}

/* The claim's status write answered: a conflict is retried at once with fresh data. */
static enum kube_work_result write_failed(const char *what, const char *key, struct kube_err *e)
{
	KLOG_ERR(e->message, "Error syncing PVC %s: %s", key, what);
	return kube_err_is_conflict(e) ? KUBE_WORK_AGAIN : KUBE_WORK_RETRY;
}

static enum kube_work_result expand(struct rsz_ctrl *c, const char *key, const struct kube_pvc *pvc,
				    const struct kube_pv *pv, const struct kube_storageclass *sc,
				    const struct rsz_plan *plan)
{
	struct kube_err e;
	struct expand_result r;

	struct rsz_patch p = rsz_mark_in_progress(pvc, plan);
	if (rsz_patch_claim(c, pvc, &p, &e))
		return write_failed("marking pvc as resizing failed", key, &e);
	if (rsz_set_has(c, &c->inuse, key) && claim_in_use(c, pvc)) {
		rsz_event(c, pvc, true, RSZ_EV_FAILED,
			  "Unable to expand %s because CSI driver %s only supports offline expansion and volume is currently in-use",
			  key, c->o.driver);
		return KUBE_WORK_RETRY;
	}
	rsz_event(c, pvc, false, RSZ_EV_RESIZING, "External resizer is resizing volume %s",
		  pv->meta.name);
	rsz_set_del(c, &c->inuse, key);
	resize_volume(c, pvc, pv, sc, plan->new_size, &r);
	if (r.code)
		return failed(c, key, pvc, pv, &r);
	rsz_set_del(c, &c->final, key);
	rsz_set_del(c, &c->slow, key);
	KLOG_V(4, "Resize volume succeeded, start to update PV's capacity pv=%s", pv->meta.name);
	if (patch_pv_capacity(c, pv, pvc->capacity, r.size, r.fs_resize, &e)) {
		KLOG_ERR(e.message, "Error syncing PVC %s: error updating pv %s by resizer",
			 key, pv->meta.name);
		return KUBE_WORK_RETRY;
	}
	/* The claim's resourceVersion moved with the in-progress write: no precondition now. */
	p = r.fs_resize ? rsz_mark_node_pending(pvc) : rsz_mark_finished(pvc, r.size);
	p.rv = NULL;
	if (rsz_patch_claim(c, pvc, &p, &e))
		return write_failed(r.fs_resize ? "mark PVC as node expansion required failed"
						: "mark PVC as resize finished failed", key, &e);
	if (r.fs_resize)
		rsz_event(c, pvc, false, RSZ_EV_FS_REQUIRED, "Require file system resize of volume on node");
	else
		rsz_event(c, pvc, false, RSZ_EV_SUCCESS, "Resize volume succeeded");
	KLOG_V(2, "Expanded PVC %s to %lld bytes (node expansion %s)", key, (long long)r.size,
	       r.fs_resize ? "required" : "not required");
	return KUBE_WORK_DONE;
}

static enum kube_work_result plan_and_expand(struct rsz_ctrl *c, const char *key,
					     const struct kube_pvc *pvc, const struct kube_pv *pv,
					     const struct kube_storageclass *sc)
{
	int64_t left = 0;

	/* Upstream's markForSlowRetry: an infeasible claim waits out the slow set. */
	if (pvc->resize_status == KUBE_RESIZE_CONTROLLER_INFEASIBLE)
		rsz_slow_add(c, &c->slow, key);
	struct rsz_memory mem = { .final_error = rsz_set_has(c, &c->final, key),
				  .slow = rsz_slow_has(c, &c->slow, key, &left) };
	struct rsz_plan plan = rsz_plan_recover(pvc, pv, &mem, c->o.controller_expand);
	switch (plan.action) {
	case RSZ_NOTHING:
		KLOG_V(4, "No need to resize PV %s", pv->meta.name);
		return KUBE_WORK_DONE;
	case RSZ_DELAY:
		KLOG_V(4, "skipping volume expansion for pvc %s, because expansion previously failed with infeasible error",
		       key);
		kube_workqueue_add_after(c->q, key, left);
		return KUBE_WORK_DONE;
	case RSZ_EXPAND:
		break;
	}
	return expand(c, key, pvc, pv, sc, &plan);
}

static enum kube_work_result claim_work(void *arg, const char *key)
{
	struct rsz_ctrl *c = arg;
	char ns[256];
	const char *name;
	enum kube_work_result res = KUBE_WORK_DONE;

	rsz_split_key(key, ns, sizeof(ns), &name);
	KLOG_V(4, "Started PVC processing key=%s", key);
	struct kube_obj *co = rsz_get(c->pvc_inf, ns, name);
	const struct kube_pvc *pvc = kube_pvc_of(co);
	if (!pvc) {
		KLOG_V(3, "PVC %s is deleted or does not exist", key);
		kube_obj_unref(co);
		return KUBE_WORK_DONE;
	}
	struct kube_obj *vo = NULL, *so = NULL;
	if (!pvc->volume_name || !*pvc->volume_name) {
		KLOG_V(4, "PV bound to PVC %s is not created yet", key);
		goto out;
	}
	vo = rsz_get(c->pv_inf, NULL, pvc->volume_name);
	const struct kube_pv *pv = kube_pv_of(vo);
	if (!pv) {
		/* Requeued with back-off, as upstream: the PV informer may not have it yet (a claim
		 * resized right after binding was otherwise left until the next resync). */
		KLOG_E("Error syncing PVC %s: PV %s bound to pvc %s not found", key, pvc->volume_name,
		       key);
		res = KUBE_WORK_RETRY;
		goto out;
	}
	if (c->o.gates.annotate_fs_resize && rsz_pre_resize_ann_done(pvc, pv)) {
		struct kube_err e;
		if (drop_pre_resize_ann(c, pv, &e)) {
			KLOG_ERR(e.message, "Error syncing PVC %s: failed removing annotation "
				 RSZ_ANN_PRE_RESIZE_CAPACITY " from pv %s", key, pv->meta.name);
			res = KUBE_WORK_RETRY;
			goto out;
		}
	}
	if (!rsz_claim_needs_resize(pvc)) {
		KLOG_V(4, "No need to resize PVC %s", key);
		goto out;
	}
	if (!rsz_pv_here(c, pv)) {
		KLOG_V(4, "PV %s of PVC %s is not on node %s: left to that node's resizer",
		       pv->meta.name, key, c->o.node);
		goto out;
	}
	so = pvc->storage_class ? rsz_get(c->sc_inf, NULL, pvc->storage_class) : NULL;
	const struct kube_storageclass *sc = kube_storageclass_of(so);
	enum rsz_skip skip = rsz_can_expand(pvc, pv, sc, c->o.driver);
	if (skip != RSZ_OK) {
		KLOG_V(4, "%s: PVC %s, PV %s", rsz_skip_reason(skip), key, pv->meta.name);
		goto out;
	}
	res = plan_and_expand(c, key, pvc, pv, sc);
out:
	kube_obj_unref(so);
	kube_obj_unref(vo);
	kube_obj_unref(co);
	return res;
}

/* ---- informer handlers ---- */

static void enqueue(struct rsz_ctrl *c, const struct kube_obj *o, bool resize, bool modify)
{
	char key[600];

	kube_obj_key(o, key, sizeof(key));
	if (resize && c->o.resize)
		kube_workqueue_add(c->q, key);
	if (modify && c->mq)
		kube_workqueue_add(c->mq, key);
}

static void pvc_added(const struct kube_obj *o, void *ud)
{
	enqueue(ud, o, true, true);
}

/*
 * Upstream's updatePVC: our own status writes come back as updates, so only another request
 * (larger, or smaller to recover from a failure), a new resizer annotation, a resync (same
 * resourceVersion), a larger capacity (node expansion finished) or a new resize status (the
 * node's answer) requeue a claim for the resize queue.
 */
static void pvc_updated(const struct kube_obj *old, const struct kube_obj *o, void *ud)
{
	const struct kube_pvc *a = kube_pvc_of(old), *b = kube_pvc_of(o);
	bool resync = same(a->meta.rv, b->meta.rv);
	bool resize = resync || b->request != a->request || !same(a->resizer, b->resizer) ||
		      b->capacity > a->capacity || a->resize_status != b->resize_status;
	/* Upstream's modify updatePVC: a new class, or no modification status (a resync, the
	 * status cleared); only bound claims. */
	bool modify = (!same(a->vac_name, b->vac_name) || b->modify_status == KUBE_MODIFY_NONE) &&
		      b->phase == KUBE_PVC_BOUND;

	enqueue(ud, o, resize, modify);
}

static void pvc_deleted(const struct kube_obj *o, void *ud)
{
	struct rsz_ctrl *c = ud;
	char key[600];

	kube_obj_key(o, key, sizeof(key));
	kube_workqueue_forget(c->q, key);
	rsz_set_del(c, &c->final, key);
	rsz_set_del(c, &c->slow, key);
	rsz_set_del(c, &c->inuse, key);
	if (c->mq) {
		kube_workqueue_forget(c->mq, key);
		rsz_set_del(c, &c->uncertain, key);
		rsz_set_del(c, &c->mslow, key);
	}
}

/* A new class releases the claims that waited for it (modifyVolumeStatus Pending). */
static void vac_added(const struct kube_obj *o, void *ud)
{
	struct rsz_ctrl *c = ud;
	size_t n = 0;
	struct kube_obj **v = kube_store_list(kube_informer_store(c->pvc_inf), &n);

	for (size_t i = 0; i < n; i++) {
		const struct kube_pvc *pvc = kube_pvc_of(v[i]);
		if (pvc && same(pvc->vac_name, o->name))
			enqueue(c, v[i], false, true);
	}
	kube_objs_free(v, n);
}

static size_t index_pod_by_claim(const struct kube_obj *o, const char **vals, size_t max)
{
	const struct kube_pod *p = kube_pod_of(o);
	size_t n = 0;

	for (uint16_t i = 0; p && i < p->nvolumes && n < max; i++)
		if (p->volumes[i].claim_name && *p->volumes[i].claim_name)
			vals[n++] = p->volumes[i].claim_name;
	return n;
}

/* ---- life cycle ---- */

static struct kube_informer *informer(struct rsz_ctrl *c, const struct kube_kind *k, int64_t resync,
				      const struct kube_handlers *h)
{
	struct kube_informer_opts io = { .kind = k, .resync_ns = resync };
	struct kube_informer *inf = kube_informer_new(c->kc, &io);

	if (h)
		kube_informer_add_handlers(inf, h);
	return inf;
}

struct rsz_ctrl *rsz_ctrl_new(struct kube_client *kc, const struct rsz_ctrl_opts *o)
{
	struct rsz_ctrl *c = xcalloc(1, sizeof(*c));
	struct kube_handlers ph = { pvc_added, pvc_updated, pvc_deleted, c };
	struct kube_handlers vh = { vac_added, NULL, NULL, c };
	char name[300];

	c->o = *o;
	c->kc = kc;
	pthread_mutex_init(&c->mu, NULL);
	c->pvc_inf = informer(c, &KUBE_KIND_PERSISTENTVOLUMECLAIM, o->resync_ns, &ph);
	c->pv_inf = informer(c, &KUBE_KIND_PERSISTENTVOLUME, 0, NULL);
	c->sc_inf = informer(c, &KUBE_KIND_STORAGECLASS, 0, NULL);
	if (o->handle_inuse_error) {
		KLOG_I("Register Pod informer for resizer controller=%s", o->driver);
		c->pod_inf = informer(c, &KUBE_KIND_POD_T, 0, NULL);
		kube_informer_add_index(c->pod_inf, "claim", index_pod_by_claim);
	}
	/* Queue names as upstream ("<driver>-pvc"), so workqueue metrics carry the same labels. */
	snprintf(name, sizeof(name), "%s-pvc", o->driver);
	c->q = kube_workqueue_new(name, o->retry_start_ns, o->retry_max_ns);
	if (o->modify) {
		c->vac_inf = informer(c, &KUBE_KIND_VOLUMEATTRIBUTESCLASS, 0, &vh);
		snprintf(name, sizeof(name), "%s-modify-pvc", o->driver);
		c->mq = kube_workqueue_new(name, o->retry_start_ns, o->retry_max_ns);
	}
	if (o->node) {
		char sel[300];
		snprintf(sel, sizeof(sel), "metadata.name=%s", o->node);
		struct kube_informer_opts io = { .kind = &KUBE_KIND_NODE_T, .field_selector = sel };
		c->node_inf = kube_informer_new(kc, &io);
	}
	return c;
}

/* The informers this controller runs, into v (room for 6); returns how many. */
static size_t informers(struct rsz_ctrl *c, struct kube_informer **v)
{
	struct kube_informer *all[6] = { c->pvc_inf, c->pv_inf,  c->sc_inf,
					 c->pod_inf, c->vac_inf, c->node_inf };
	size_t n = 0;

	for (size_t i = 0; i < 6; i++)
		if (all[i])
			v[n++] = all[i];
	return n;
}

int rsz_ctrl_start(struct rsz_ctrl *c, char *err, size_t errlen)
{
	struct kube_informer *inf[6];
	size_t n = informers(c, inf);
	struct kube_stop stop = { .mu = &c->mu, .flag = &c->stop };
	char why[200];

	if (kube_informers_start(inf, n, err, errlen))
		return -1;
	KLOG_I("Starting external resizer controller=%s", c->o.driver);
	if (kube_informers_wait_synced(inf, n, "the pod, pv and pvc caches", &stop, 0, err, errlen))
		return -1;
	malloc_trim(0); /* the initial LISTs' pages go back; the steady state is the records */
	struct kube_serve serve[2];
	size_t nserve = 0;
	if (c->o.resize)
		serve[nserve++] = (struct kube_serve){ c->q, c->o.workers, claim_work, c };
	if (c->mq) {
		rsz_modify_init(c);
		serve[nserve++] = (struct kube_serve){ c->mq, c->o.workers, rsz_modify_work, c };
	}
	if (c->o.workers > 0 &&
	    kube_workqueue_serve(serve, nserve, KUBE_WORKER_IDLE_NS, why, sizeof(why))) {
		snprintf(err, errlen, "%s (--workers=%d)", why, c->o.workers);
		rsz_ctrl_stop(c);
		return -1;
	}
	return 0;
}

void rsz_ctrl_stop(struct rsz_ctrl *c)
{
	struct kube_informer *inf[6];
	size_t n = informers(c, inf);

	pthread_mutex_lock(&c->mu);
	c->stop = true;
	pthread_mutex_unlock(&c->mu);
	kube_informers_stop(inf, n);
	kube_workqueue_shutdown(c->q);
	if (c->mq)
		kube_workqueue_shutdown(c->mq);
	kube_workqueue_wait_workers(c->q);
	if (c->mq)
		kube_workqueue_wait_workers(c->mq);
	KLOG_I("Shutting down external resizer controller=%s", c->o.driver);
}

void rsz_ctrl_free(struct rsz_ctrl *c)
{
	struct kube_informer *inf[6];

	if (!c)
		return;
	size_t n = informers(c, inf);
	for (size_t i = 0; i < n; i++)
		kube_informer_free(inf[i]);
	kube_workqueue_free(c->q);
	if (c->mq)
		kube_workqueue_free(c->mq);
	kube_hmap_clear(&c->final);
	kube_hmap_clear(&c->slow);
	kube_hmap_clear(&c->inuse);
	kube_hmap_clear(&c->uncertain);
	kube_hmap_clear(&c->mslow);
	pthread_mutex_destroy(&c->mu);
	free(c);
}
