/*
 * persistentvolume-binder: the part of Kubernetes' PV controller that binds claims and volumes,
 * and that the external-provisioner relies on (it provisions only for claims annotated with its
 * name, and deletes Released volumes it provisioned).
 *
 * Two queues as upstream, one worker each: claims ("ns/name") and volumes ("name"). Informer
 * events enqueue keys; every --pvclaimbinder-sync-period every claim and volume is queued again.
 *
 * A claim without spec.volumeName:
 *   - no storageClassName and a default class exists: the default class is written (upstream's
 *     retroactive default class assignment);
 *   - a matching volume (pvb_best_match: pre-bound to this claim first, else the smallest
 *     Available volume of the same class and volumeMode with enough capacity, the access modes
 *     and the labels the claim's selector asks for) is bound;
 *   - a WaitForFirstConsumer class without volume.kubernetes.io/selected-node: event
 *     WaitForFirstConsumer, nothing else (the scheduler chooses the node first);
 *   - a class with a provisioner: the storage-provisioner annotations (GA and beta) and the
 *     ExternalProvisioning event;
 *   - otherwise the FailedBinding event.
 * A claim with spec.volumeName: bound when the volume is free (VolumeMismatch when it does not
 * satisfy the claim) or already points back; Lost (ClaimLost / ClaimMisbound) when the volume
 * vanished or belongs to another claim after the bind completed.
 * A volume: Available without a claim (or pre-bound to a claim not yet bound); Bound when its
 * claim points back; Released when its claim is gone (Retain: left so; Delete of an external
 * provisioner's volume: that provisioner deletes it); un-bound when the controller had bound it
 * and the claim went to another volume.
 *
 * Binding writes, in upstream's order: the volume's claimRef (+ bound-by-controller), volume
 * phase Bound, the claim's volumeName (+ bind-completed, bound-by-controller), the claim's status
 * (Bound, access modes, capacity: the PV's, or its pre-resize-capacity annotation, so that a
 * volume whose node expansion was pending when its old claim went is expanded again). Each spec
 * write carries the resourceVersion it was decided on, so a concurrent change makes it a 409 and
 * the key is retried with fresh data.
 */
#include "controllers/binder.h"
#include "controllers/cm.h"

#include "base/log.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "kube/objects.h"
#include "kube/quantity.h"
#include "kube/selector.h"
#include "kube/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ANN_BIND_COMPLETED "pv.kubernetes.io/bind-completed"
#define ANN_BOUND_BY_CONTROLLER "pv.kubernetes.io/bound-by-controller"
#define ANN_PROVISIONER "volume.kubernetes.io/storage-provisioner"
#define ANN_PROVISIONER_BETA "volume.beta.kubernetes.io/storage-provisioner"
#define NO_PROVISIONER "kubernetes.io/no-provisioner"

struct pvb {
	struct cm_ctx *cm;
	struct kube_recorder *rec; /* as "persistentvolume-controller", upstream's source */
	struct cm_pool claims, volumes;
	pthread_t resync;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool stop, started;
	int64_t sync_ns;
};

/* ---- matching (pure) ---- */

static const char *cls(const char *c) { return c ? c : ""; }

bool pvb_prebound_to(const struct kube_pv *pv, const struct kube_pvc *claim)
{
	char uid[64];

	if (!pv->claim_name || !pv->claim_ns || strcmp(pv->claim_name, claim->meta.name) ||
	    strcmp(pv->claim_ns, claim->meta.ns ? claim->meta.ns : ""))
		return false;
	return !pv->claim_uid || !*pv->claim_uid ||
	       !strcmp(pv->claim_uid, kube_obj_uid(&claim->meta, uid, sizeof(uid)));
}

const char *pvb_mismatch(const struct kube_pv *pv, const struct kube_pvc *claim)
{
	int64_t want = claim->request > 0 ? claim->request : 0;

	if (pv->capacity < want)
		return "requested PV is too small";
	if (strcmp(cls(pv->storage_class), cls(claim->storage_class)))
		return "storageClassName does not match";
	if (pv->block != claim->block)
		return "incompatible volumeMode";
	if ((pv->access_modes & claim->access_modes) != claim->access_modes)
		return "incompatible accessMode";
	return NULL;
}

static bool selector_ok(const struct kube_pv *pv, const struct kube_pvc *claim)
{
	struct kube_selector *sel;
	char err[256];
	bool ok;

	if (!claim->selector)
		return true;
	sel = kube_selector_parse(claim->selector, err, sizeof(err));
	if (!sel)
		return false;
	ok = kube_selector_matches(sel, pv->labels, pv->nlabels);
	kube_selector_free(sel);
	return ok;
}

const struct kube_pv *pvb_best_match(const struct kube_pvc *claim, struct kube_obj *const *pvs,
				     size_t n, bool delay_binding, const struct kube_node *node)
{
	const struct kube_pv *best = NULL;

	for (size_t i = 0; i < n; i++) {
		const struct kube_pv *pv = kube_pv_of(pvs[i]);
		bool prebound;

		if (!pv || pv->meta.deletion_ts || pvb_mismatch(pv, claim))
			continue;
		prebound = pvb_prebound_to(pv, claim);
		if (pv->claim_name && !prebound)
			continue;
		if (node && !kube_node_selector_match(pv->node_affinity, pv->nnode_affinity,
						      node->labels, node->nlabels))
			continue;
		if (prebound)
			return pv;
		/* Unbound volumes of a delayed claim are the scheduler's to choose. */
		if ((delay_binding && !node) || pv->phase != KUBE_PV_AVAILABLE || !selector_ok(pv, claim))
			continue;
		if (!best || pv->capacity < best->capacity)
			best = pv;
	}
	return best;
}

/* ---- writes ---- */

#define claim_event(b, claim, t, reason, msg) \
	kube_event_about((b)->rec, &(claim)->meta, (t), (reason), "%s", (msg))
#define volume_event(b, pv, t, reason, msg) \
	kube_event_about((b)->rec, &(pv)->meta, (t), (reason), "%s", (msg))

static json_t *modes_json(uint8_t m)
{
	json_t *a = json_array();

	if (m & KUBE_RWO)
		json_array_append_new(a, json_string("ReadWriteOnce"));
	if (m & KUBE_ROX)
		json_array_append_new(a, json_string("ReadOnlyMany"));
	if (m & KUBE_RWX)
		json_array_append_new(a, json_string("ReadWriteMany"));
	if (m & KUBE_RWOP)
		json_array_append_new(a, json_string("ReadWriteOncePod"));
	return a;
}

static const char *pv_phase_name(int p)
{
	static const char *names[] = { "Pending", "Available", "Bound", "Released", "Failed" };
	return names[p];
}

static enum cm_result set_pv_phase(struct pvb *b, const struct kube_pv *pv, int phase)
{
	struct kube_err e;
	json_t *p;
	int rc;

	if (pv->phase == phase)
		return CM_DONE;
	p = json_pack("{s:{s:s}}", "status", "phase", pv_phase_name(phase));
	rc = cm_patch(b->cm, &KUBE_RES_PERSISTENTVOLUMES, NULL, pv->meta.name, true, p, &e);
	json_decref(p);
	if (rc)
		return cm_result_of(&e);
	KLOG_V(2, "volume \"%s\" entered phase \"%s\"", pv->meta.name, pv_phase_name(phase));
	return CM_DONE;
}

static enum cm_result set_claim_phase(struct pvb *b, const struct kube_pvc *claim, const char *phase)
{
	struct kube_err e;
	json_t *p = json_pack("{s:{s:s}}", "status", "phase", phase);
	int rc = cm_patch(b->cm, &KUBE_RES_PERSISTENTVOLUMECLAIMS, claim->meta.ns, claim->meta.name,
			  true, p, &e);

	json_decref(p);
	return rc ? cm_result_of(&e) : CM_DONE;
}

/*
 * The status.capacity a claim gets as it binds: the PV's, or, when the PV carries csi-resizer's
 * volume.alpha.kubernetes.io/pre-resize-capacity (an expansion whose node part was still to come
 * when its old claim went), that size, so the node expands the volume again for the new claim.
 * An annotation that is not a quantity counts as absent, as upstream's.
 */
static void bound_capacity(const struct kube_pv *pv, char *qty, size_t len)
{
	const char *pre = pv->pre_resize_capacity;
	int64_t bytes = pv->capacity > 0 ? pv->capacity : 0;
	char err[128];

	if (pre && kube_quantity_parse(pre, &bytes, err, sizeof(err)) == 0) {
		KLOG_V(2, "Volume requires filesystem resize: setting pvc status capacity volumeName=%s statusCapacity=%s",
		       pv->meta.name, pre);
		kube_quantity_format(bytes, strchr(pre, 'i') != NULL, qty, len);
		return;
	}
	bytes = pv->capacity > 0 ? pv->capacity : 0;
	if (pre)
		KLOG_I("Parsing pre-resize-capacity from PV failed volumeName=%s err=\"%s\"", pv->meta.name, err);
	kube_quantity_format(bytes, true, qty, len);
}

/* Binds claim and volume (each write only when needed, so a retry continues where it stopped). */
static enum cm_result bind(struct pvb *b, const struct kube_pv *pv, const struct kube_pvc *claim)
{
	struct kube_err e;
	char uid[64], qty[64];
	enum cm_result r;
	json_t *p;
	int rc;

	kube_obj_uid(&claim->meta, uid, sizeof(uid));
	if (!pv->claim_uid || strcmp(pv->claim_uid, uid) || !pvb_prebound_to(pv, claim)) {
		json_t *md = json_pack("{s:s}", "resourceVersion", pv->meta.rv);
		if (!pv->claim_name)
			json_object_set_new(md, "annotations",
					    json_pack("{s:s}", ANN_BOUND_BY_CONTROLLER, "yes"));
		p = json_pack("{s:o, s:{s:{s:s, s:s, s:s, s:s, s:s, s:s}}}", "metadata", md, "spec",
			      "claimRef", "kind", "PersistentVolumeClaim", "apiVersion", "v1",
			      "namespace", claim->meta.ns, "name", claim->meta.name, "uid", uid,
			      "resourceVersion", claim->meta.rv);
		rc = cm_patch(b->cm, &KUBE_RES_PERSISTENTVOLUMES, NULL, pv->meta.name, false, p, &e);
		json_decref(p);
		if (rc)
			return cm_result_of(&e) == CM_DONE ? CM_RETRY : cm_result_of(&e);
		KLOG_V(2, "volume \"%s\" bound to claim \"%s/%s\"", pv->meta.name, claim->meta.ns,
		       claim->meta.name);
	}
	if ((r = set_pv_phase(b, pv, KUBE_PV_BOUND)) != CM_DONE)
		return r;
	if (!claim->volume_name || strcmp(claim->volume_name, pv->meta.name) || !claim->bind_completed) {
		json_t *ann = json_pack("{s:s}", ANN_BIND_COMPLETED, "yes");
		if (!claim->volume_name)
			json_object_set_new(ann, ANN_BOUND_BY_CONTROLLER, json_string("yes"));
		p = json_pack("{s:{s:s, s:o}, s:{s:s}}", "metadata", "resourceVersion", claim->meta.rv,
			      "annotations", ann, "spec", "volumeName", pv->meta.name);
		rc = cm_patch(b->cm, &KUBE_RES_PERSISTENTVOLUMECLAIMS, claim->meta.ns, claim->meta.name,
			      false, p, &e);
		json_decref(p);
		if (rc)
			return cm_result_of(&e);
	}
	/*
	 * Capacity is written only as the claim becomes Bound, as kube-controller-manager does: a
	 * bound claim smaller than its volume is a filesystem still waiting for the node's part of
	 * an expansion (the kubelet writes the new size when it has grown it).
	 */
	if (claim->phase != KUBE_PVC_BOUND) {
		bound_capacity(pv, qty, sizeof(qty));
		p = json_pack("{s:{s:s, s:o, s:{s:s}}}", "status", "phase", "Bound", "accessModes",
			      modes_json(pv->access_modes), "capacity", "storage", qty);
		rc = cm_patch(b->cm, &KUBE_RES_PERSISTENTVOLUMECLAIMS, claim->meta.ns, claim->meta.name,
			      true, p, &e);
		json_decref(p);
		if (rc)
			return cm_result_of(&e);
		KLOG_I("claim \"%s/%s\" bound to volume \"%s\"", claim->meta.ns, claim->meta.name,
		       pv->meta.name);
	}
	return CM_DONE;
}

/* ---- claims ---- */

static const struct kube_storageclass *default_class(struct pvb *b, struct kube_obj **keep)
{
	size_t n;
	struct kube_obj **all = kube_store_list(cm_store(b->cm, CM_SCS), &n);
	const struct kube_storageclass *best = NULL;

	for (size_t i = 0; i < n; i++) {
		const struct kube_storageclass *sc = kube_storageclass_of(all[i]);
		if (sc && sc->is_default && !sc->meta.deletion_ts &&
		    (!best || strcmp(sc->meta.name, best->meta.name) < 0))
			best = sc;
	}
	*keep = best ? kube_obj_ref((struct kube_obj *)&best->meta) : NULL;
	kube_objs_free(all, n);
	return best;
}

static enum cm_result sync_unbound_claim(struct pvb *b, const struct kube_pvc *claim)
{
	struct kube_obj *sco = NULL, *nodeo = NULL, **pvs;
	const struct kube_storageclass *sc = NULL;
	const struct kube_pv *pv;
	enum cm_result r = CM_DONE;
	struct kube_err e;
	char msg[512];
	size_t npv;

	if (!claim->storage_class) {
		const struct kube_storageclass *def = default_class(b, &sco);
		if (def) {
			json_t *p = json_pack("{s:{s:s}, s:{s:s}}", "metadata", "resourceVersion",
					      claim->meta.rv, "spec", "storageClassName", def->meta.name);
			int rc = cm_patch(b->cm, &KUBE_RES_PERSISTENTVOLUMECLAIMS, claim->meta.ns,
					  claim->meta.name, false, p, &e);
			json_decref(p);
			KLOG_V(2, "claim \"%s/%s\": assigned the default storage class \"%s\"",
			       claim->meta.ns, claim->meta.name, def->meta.name);
			kube_obj_unref(sco);
			return rc ? cm_result_of(&e) : CM_DONE;
		}
	} else if (*claim->storage_class) {
		sco = kube_store_get(cm_store(b->cm, CM_SCS), NULL, claim->storage_class);
		sc = kube_storageclass_of(sco);
	}
	bool delay = sc && sc->wait_for_first_consumer && !claim->selected_node;
	if (claim->selected_node)
		nodeo = kube_store_get(cm_store(b->cm, CM_NODES), NULL, claim->selected_node);
	pvs = kube_store_list(cm_store(b->cm, CM_PVS), &npv);
	pv = pvb_best_match(claim, pvs, npv, delay, kube_node_of(nodeo));
	if (pv) {
		r = bind(b, pv, claim);
	} else if (delay) {
		claim_event(b, claim, KUBE_EVENT_NORMAL, "WaitForFirstConsumer",
			    "waiting for first consumer to be created before binding");
	} else if (sc && sc->provisioner && strcmp(sc->provisioner, NO_PROVISIONER)) {
		if (!claim->provisioner || strcmp(claim->provisioner, sc->provisioner)) {
			json_t *p = json_pack("{s:{s:s, s:{s:s, s:s}}}", "metadata", "resourceVersion",
					      claim->meta.rv, "annotations", ANN_PROVISIONER,
					      sc->provisioner, ANN_PROVISIONER_BETA, sc->provisioner);
			int rc = cm_patch(b->cm, &KUBE_RES_PERSISTENTVOLUMECLAIMS, claim->meta.ns,
					  claim->meta.name, false, p, &e);
			json_decref(p);
			if (rc)
				r = cm_result_of(&e);
		}
		snprintf(msg, sizeof(msg),
			 "Waiting for a volume to be created either by the external provisioner '%s' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered.",
			 sc->provisioner);
		if (r == CM_DONE)
			claim_event(b, claim, KUBE_EVENT_NORMAL, "ExternalProvisioning", msg);
	} else if (!sc && claim->storage_class && *claim->storage_class) {
		snprintf(msg, sizeof(msg), "storageclass.storage.k8s.io \"%s\" not found",
			 claim->storage_class);
		claim_event(b, claim, KUBE_EVENT_WARNING, "ProvisioningFailed", msg);
	} else {
		claim_event(b, claim, KUBE_EVENT_NORMAL, "FailedBinding",
			    "no persistent volumes available for this claim and no storage class is set");
	}
	kube_objs_free(pvs, npv);
	kube_obj_unref(nodeo);
	kube_obj_unref(sco);
	return r;
}

static enum cm_result sync_claim(void *self, const char *key)
{
	struct pvb *b = self;
	char ns[256], msg[512];
	const char *slash = strchr(key, '/');
	struct kube_obj *co, *vo;
	const struct kube_pvc *claim;
	const struct kube_pv *pv;
	enum cm_result r = CM_DONE;

	if (!slash || (size_t)(slash - key) >= sizeof(ns))
		return CM_DONE;
	memcpy(ns, key, (size_t)(slash - key));
	ns[slash - key] = 0;
	co = kube_store_get(cm_store(b->cm, CM_PVCS), ns, slash + 1);
	claim = kube_pvc_of(co);
	if (!claim || claim->meta.deletion_ts) {
		kube_obj_unref(co);
		return CM_DONE;
	}
	if (!claim->volume_name) {
		r = sync_unbound_claim(b, claim);
		kube_obj_unref(co);
		return r;
	}
	vo = kube_store_get(cm_store(b->cm, CM_PVS), NULL, claim->volume_name);
	pv = kube_pv_of(vo);
	if (!pv) {
		if (claim->bind_completed && claim->phase != KUBE_PVC_LOST) {
			r = set_claim_phase(b, claim, "Lost");
			if (r == CM_DONE)
				claim_event(b, claim, KUBE_EVENT_WARNING, "ClaimLost",
					    "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!");
		}
	} else if (!pv->claim_name) {
		const char *why = pvb_mismatch(pv, claim);
		if (why) {
			snprintf(msg, sizeof(msg), "Cannot bind to requested volume \"%s\": %s",
				 pv->meta.name, why);
			claim_event(b, claim, KUBE_EVENT_WARNING, "VolumeMismatch", msg);
		} else {
			r = bind(b, pv, claim);
		}
	} else if (pvb_prebound_to(pv, claim)) {
		r = bind(b, pv, claim);
	} else if (claim->bind_completed) {
		if (claim->phase != KUBE_PVC_LOST) {
			r = set_claim_phase(b, claim, "Lost");
			if (r == CM_DONE)
				claim_event(b, claim, KUBE_EVENT_WARNING, "ClaimMisbound",
					    "Two claims are bound to the same volume, this one is bound incorrectly");
		}
	} else {
		snprintf(msg, sizeof(msg), "volume \"%s\" already bound to a different claim.",
			 pv->meta.name);
		claim_event(b, claim, KUBE_EVENT_WARNING, "FailedBinding", msg);
	}
	kube_obj_unref(vo);
	kube_obj_unref(co);
	return r;
}

/* ---- volumes ---- */

static enum cm_result sync_volume(void *self, const char *key)
{
	struct pvb *b = self;
	struct kube_obj *vo = kube_store_get(cm_store(b->cm, CM_PVS), NULL, key), *co = NULL;
	const struct kube_pv *pv = kube_pv_of(vo);
	const struct kube_pvc *claim;
	enum cm_result r = CM_DONE;
	char uid[64], ckey[512];

	if (!pv || pv->meta.deletion_ts) {
		kube_obj_unref(vo);
		return CM_DONE;
	}
	if (!pv->claim_name) {
		r = set_pv_phase(b, pv, KUBE_PV_AVAILABLE);
		goto out;
	}
	if (!pv->claim_uid || !*pv->claim_uid) {
		/* Pre-bound by the user to a claim not bound yet: the claim's sync binds it. */
		r = set_pv_phase(b, pv, KUBE_PV_AVAILABLE);
		snprintf(ckey, sizeof(ckey), "%s/%s", pv->claim_ns ? pv->claim_ns : "", pv->claim_name);
		kube_workqueue_add(b->claims.q, ckey);
		goto out;
	}
	co = kube_store_get(cm_store(b->cm, CM_PVCS), pv->claim_ns, pv->claim_name);
	claim = kube_pvc_of(co);
	if (claim && strcmp(kube_obj_uid(&claim->meta, uid, sizeof(uid)), pv->claim_uid))
		claim = NULL; /* a new claim of the same name: ours is gone */
	if (!claim) {
		if (pv->phase != KUBE_PV_RELEASED && pv->phase != KUBE_PV_FAILED) {
			r = set_pv_phase(b, pv, KUBE_PV_RELEASED);
			if (r == CM_DONE)
				KLOG_I("volume \"%s\" is released (claim %s/%s is gone); reclaim policy %s%s",
				       pv->meta.name, pv->claim_ns, pv->claim_name,
				       pv->reclaim == 1 ? "Retain: left for the administrator"
							: pv->reclaim == 0 ? "Delete" : "Recycle",
				       pv->reclaim == 0 && pv->provisioned_by ? ": its external provisioner deletes it" : "");
			if (r == CM_DONE && pv->reclaim == 0 && !pv->provisioned_by)
				volume_event(b, pv, KUBE_EVENT_WARNING, "VolumeFailedDelete",
					     "error getting deleter volume plugin for volume: no deletable volume plugin matched");
		}
		goto out;
	}
	if (!claim->volume_name) {
		snprintf(ckey, sizeof(ckey), "%s/%s", claim->meta.ns, claim->meta.name);
		kube_workqueue_add(b->claims.q, ckey);
		r = set_pv_phase(b, pv, pv->bound_by_controller ? pv->phase : KUBE_PV_AVAILABLE);
	} else if (!strcmp(claim->volume_name, pv->meta.name)) {
		r = set_pv_phase(b, pv, KUBE_PV_BOUND);
	} else if (pv->bound_by_controller) {
		/* We bound it, but the claim went to another volume: free this one. */
		struct kube_err e;
		json_t *p = json_pack("{s:{s:s, s:{s:n}}, s:{s:n}}", "metadata", "resourceVersion",
				      pv->meta.rv, "annotations", ANN_BOUND_BY_CONTROLLER, "spec",
				      "claimRef");
		if (cm_patch(b->cm, &KUBE_RES_PERSISTENTVOLUMES, NULL, pv->meta.name, false, p, &e))
			r = cm_result_of(&e);
		else
			r = CM_CONFLICT; /* again, with the unbound record: phase Available */
		json_decref(p);
	}
out:
	kube_obj_unref(co);
	kube_obj_unref(vo);
	return r;
}

/* ---- informer handlers ---- */

static void enqueue_claim(const struct kube_obj *o, void *ud)
{
	struct pvb *b = ud;
	char key[512];

	kube_obj_key(o, key, sizeof(key));
	kube_workqueue_add(b->claims.q, key);
}
static void claim_update(const struct kube_obj *old, const struct kube_obj *o, void *ud)
{
	(void)old;
	enqueue_claim(o, ud);
}
static void claim_delete(const struct kube_obj *o, void *ud)
{
	struct pvb *b = ud;
	const struct kube_pvc *c = kube_pvc_of(o);

	if (c && c->volume_name)
		kube_workqueue_add(b->volumes.q, c->volume_name);
}

static void enqueue_volume(const struct kube_obj *o, void *ud)
{
	struct pvb *b = ud;
	const struct kube_pv *pv = kube_pv_of(o);
	char key[512];

	kube_workqueue_add(b->volumes.q, o->name);
	if (pv && pv->claim_name) {
		snprintf(key, sizeof(key), "%s/%s", pv->claim_ns ? pv->claim_ns : "", pv->claim_name);
		kube_workqueue_add(b->claims.q, key);
	}
}
static void volume_update(const struct kube_obj *old, const struct kube_obj *o, void *ud)
{
	(void)old;
	enqueue_volume(o, ud);
}
static void volume_delete(const struct kube_obj *o, void *ud)
{
	struct pvb *b = ud;
	const struct kube_pv *pv = kube_pv_of(o);
	char key[512];

	if (pv && pv->claim_name) {
		snprintf(key, sizeof(key), "%s/%s", pv->claim_ns ? pv->claim_ns : "", pv->claim_name);
		kube_workqueue_add(b->claims.q, key);
	}
}

static void enqueue_all(struct pvb *b)
{
	size_t n;
	struct kube_obj **all = kube_store_list(cm_store(b->cm, CM_PVCS), &n);
	char key[512];

	for (size_t i = 0; i < n; i++) {
		kube_obj_key(all[i], key, sizeof(key));
		kube_workqueue_add(b->claims.q, key);
	}
	kube_objs_free(all, n);
	all = kube_store_list(cm_store(b->cm, CM_PVS), &n);
	for (size_t i = 0; i < n; i++)
		kube_workqueue_add(b->volumes.q, all[i]->name);
	kube_objs_free(all, n);
}

static void *resync_main(void *arg)
{
	struct pvb *b = arg;

	pthread_mutex_lock(&b->mu);
	while (!b->stop) {
		struct timespec ts = wall_deadline(b->sync_ns);
		if (pthread_cond_timedwait(&b->cond, &b->mu, &ts) && !b->stop) {
			pthread_mutex_unlock(&b->mu);
			enqueue_all(b);
			pthread_mutex_lock(&b->mu);
		}
	}
	pthread_mutex_unlock(&b->mu);
	return NULL;
}

/* ---- life cycle ---- */

static void *pvb_init(struct cm_ctx *cm)
{
	struct pvb *b = xcalloc(1, sizeof(*b));
	struct kube_handlers ch = { enqueue_claim, claim_update, claim_delete, b };
	struct kube_handlers vh = { enqueue_volume, volume_update, volume_delete, b };

	b->cm = cm;
	b->rec = cm_recorder(cm, "persistentvolume-controller");
	b->sync_ns = cm->cfg->pv_sync_ns > 0 ? cm->cfg->pv_sync_ns : 15 * NSEC_PER_SEC;
	pthread_mutex_init(&b->mu, NULL);
	pthread_cond_init(&b->cond, NULL);
	cm_pool_init(&b->claims, "claims", cm->cfg, sync_claim, b);
	cm_pool_init(&b->volumes, "volumes", cm->cfg, sync_volume, b);
	kube_informer_add_handlers(cm_informer(cm, CM_PVCS), &ch);
	kube_informer_add_handlers(cm_informer(cm, CM_PVS), &vh);
	cm_informer(cm, CM_SCS);
	cm_informer(cm, CM_NODES);
	return b;
}

static int pvb_start(void *self)
{
	struct pvb *b = self;

	if (cm_pool_start(&b->claims, 1) || cm_pool_start(&b->volumes, 1) ||
	    pthread_create(&b->resync, NULL, resync_main, b))
		return -1;
	b->started = true;
	return 0;
}

static void pvb_stop(void *self)
{
	struct pvb *b = self;

	if (!b->started)
		return;
	pthread_mutex_lock(&b->mu);
	b->stop = true;
	pthread_cond_signal(&b->cond);
	pthread_mutex_unlock(&b->mu);
	pthread_join(b->resync, NULL);
	cm_pool_stop(&b->claims);
	cm_pool_stop(&b->volumes);
	b->started = false;
}

static void pvb_free(void *self)
{
	struct pvb *b = self;

	cm_pool_free(&b->claims);
	cm_pool_free(&b->volumes);
	pthread_mutex_destroy(&b->mu);
	pthread_cond_destroy(&b->cond);
	free(b);
}

static size_t pvb_queues(void *self, struct kube_workqueue **out, size_t max)
{
	struct pvb *b = self;

	if (max < 2)
		return 0;
	out[0] = b->claims.q;
	out[1] = b->volumes.q;
	return 2;
}

const struct cm_controller cm_pv_binder = {
	.name = "persistentvolume-binder", .default_on = true,
	.init = pvb_init, .start = pvb_start, .stop = pvb_stop, .free = pvb_free,
	.queues = pvb_queues,
};
