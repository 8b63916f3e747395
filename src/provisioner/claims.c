/*
 * Claims: the "claims" worker and provisioning (upstream's provisionClaimOperation and
 * csiProvisioner.Provision). prov_provision() goes in four steps: preflight (is there anything to
 * do, the Provisioning event), prepare (prepare.c: the request), call (CreateVolume and what its
 * outcome means: in progress, final, or final with a reschedule), save (the PV, or the unsaved
 * PV queue of volumes.c).
 *
 * Crash safety: the volume name is a function of the claim's UID, so a retry, a restart or a
 * kill -9 at any point calls CreateVolume again with the same name, and an idempotent driver
 * answers with the same volume; a PV that exists ends the claim's work. A claim whose
 * CreateVolume may still be running (timeout, UNAVAILABLE, ABORTED) is kept in `in_progress`
 * even after the claim is deleted, so the call is repeated until it ends and the volume is then
 * recorded in a PV (which the PV binder releases and volumes.c deletes).
 */
#include "provisioner/prov.h"

#include "base/log.h"
#include "base/timeutil.h"
#include "base/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the slow set: claims whose CreateVolume was infeasible (upstream's slowSet) ---- */

struct prov_slow {
	char claim_uid[64], class_uid[64]; /* a new claim or a recreated class starts afresh */
	int64_t until_ns;                  /* no CreateVolume before (monotonic) */
};

static void slow_forget(struct prov_ctrl *c, const char *key)
{
	pthread_mutex_lock(&c->mu);
	free(kube_hmap_del(&c->slow, key));
	pthread_mutex_unlock(&c->mu);
}

/* markForSlowRetry: no CreateVolume for --retry-interval-max unless the class changes. */
static void slow_mark(struct prov_ctrl *c, const char *key, const struct kube_obj *o,
		      const struct kube_storageclass *sc)
{
	struct prov_slow *s = xcalloc(1, sizeof(*s));
	kube_obj_uid(o, s->claim_uid, sizeof(s->claim_uid));
	kube_obj_uid(&sc->meta, s->class_uid, sizeof(s->class_uid));
	s->until_ns = mono_now_ns() + c->o.retry_max_ns;
	pthread_mutex_lock(&c->mu);
	free(kube_hmap_put(&c->slow, key, s));
	pthread_mutex_unlock(&c->mu);
}

/* delayProvisioningIfRecentlyInfeasible: whether the claim must wait still. A class that is gone
 * or was recreated (another UID), or another claim of the same name, ends the wait. */
static bool slow_waits(struct prov_ctrl *c, const char *key, const struct kube_obj *o,
		       const struct kube_storageclass *sc)
{
	char uid[64], cuid[64];
	bool wait = false, drop = false;

	pthread_mutex_lock(&c->mu);
	const struct prov_slow *s = kube_hmap_get(&c->slow, key);
	if (s) {
		drop = !sc || strcmp(s->class_uid, kube_obj_uid(&sc->meta, cuid, sizeof(cuid))) ||
		       strcmp(s->claim_uid, kube_obj_uid(o, uid, sizeof(uid)));
		wait = !drop && mono_now_ns() < s->until_ns;
	}
	pthread_mutex_unlock(&c->mu);
	if (drop)
		slow_forget(c, key);
	return wait;
}

/* ---- claims whose CreateVolume may be in progress ---- */

void prov_claim_done(struct prov_ctrl *c, const char *key)
{
	pthread_mutex_lock(&c->mu);
	struct kube_obj *o = kube_hmap_del(&c->in_progress, key);
	pthread_mutex_unlock(&c->mu);
	kube_obj_unref(o);
	prov_topo_forget(c, key);
	slow_forget(c, key);
}

static void claim_in_progress(struct prov_ctrl *c, const char *key, const struct kube_obj *o)
{
	pthread_mutex_lock(&c->mu);
	struct kube_obj *old = kube_hmap_put(&c->in_progress, key, kube_obj_ref((struct kube_obj *)o));
	pthread_mutex_unlock(&c->mu);
	kube_obj_unref(old);
}

void prov_claims_clear(struct prov_ctrl *c)
{
	for (size_t i = 0; i < c->slow.cap; i++)
		if (c->slow.slots[i].key)
			free(c->slow.slots[i].value);
	kube_hmap_clear(&c->slow);
	for (size_t i = 0; i < c->in_progress.cap; i++)
		if (c->in_progress.slots[i].key)
			kube_obj_unref(c->in_progress.slots[i].value);
	kube_hmap_clear(&c->in_progress);
}

/* ---- rescheduling, and what needs no CreateVolume ---- */

/* rescheduleProvisioning: drop the selected-node annotation so the scheduler picks again. */
static int reschedule(struct prov_ctrl *c, const struct kube_pvc *pvc)
{
	struct kube_err e;
	char body[512];

	snprintf(body, sizeof(body), "{\"metadata\":{\"annotations\":{\"%s\":null},\"resourceVersion\":\"%s\"}}",
		 PROV_ANN_SELECTED_NODE, pvc->meta.rv ? pvc->meta.rv : "");
	if (kube_patch_discard(c->kc, &KUBE_RES_PERSISTENTVOLUMECLAIMS, pvc->meta.ns, pvc->meta.name,
			       false, KUBE_PATCH_MERGE, body, &e) != 0) {
		KLOG_I("Volume rescheduling failed for claim %s/%s: %s", pvc->meta.ns, pvc->meta.name,
		       e.message);
		return -1;
	}
	KLOG_V(2, "Volume of claim %s/%s rescheduled: selected-node annotation removed",
	       pvc->meta.ns, pvc->meta.name);
	return 0;
}

/*
 * Whether the claim needs no CreateVolume now: its PV exists or is being saved, its class names
 * another provisioner, or an external populator fills its data source. (A selected node that is
 * gone is prepare.c's business: the claim is rescheduled unless its topology is cached.) *res then says what becomes of the key. The claims that go
 * on get the Provisioning event.
 */
static bool preflight(struct prov_ctrl *c, const char *key, const struct kube_obj *o,
		      const struct kube_pvc *pvc, const struct kube_storageclass *sc,
		      struct prov_prep *p, enum prov_work *res)
{
	char err[1536], uid[64];

	*res = PROV_WORK_DONE;
	if (prov_volume_name(c->o.prefix, kube_obj_uid(o, uid, sizeof(uid)), c->o.uuid_length,
			     p->name, sizeof(p->name), err, sizeof(err)) == 0) {
		struct kube_obj *pv = prov_store_get(c->pv_inf, NULL, p->name);
		if (pv || prov_unsaved_has(c, p->name)) {
			KLOG_V(4, "PersistentVolume %s of claim %s already exists, skipping", p->name, key);
			kube_obj_unref(pv);
			prov_claim_done(c, key);
			return true;
		}
	}
	if (!prov_streq(sc->provisioner, c->o.driver)) {
		KLOG_E("Unknown provisioner \"%s\" requested in claim %s's StorageClass",
		       sc->provisioner ? sc->provisioner : "", key);
		prov_claim_done(c, key);
		return true;
	}
	prov_event(c, o, KUBE_EVENT_NORMAL, "Provisioning",
		   "External provisioner is provisioning volume for claim \"%s\"", key);

	if (pvc->data_source_kind && strcmp(pvc->data_source_kind, "PersistentVolumeClaim") != 0 &&
	    strcmp(pvc->data_source_kind, "VolumeSnapshot") != 0) {
		prov_event(c, o, KUBE_EVENT_NORMAL, "Provisioning",
			   "Assuming an external populator will provision the volume");
		KLOG_V(4, "data source (%s) of claim %s is not handled by the provisioner",
		       pvc->data_source_kind, key);
		prov_claim_done(c, key);
		return true;
	}
	return false;
}

/* ---- call: CreateVolume and what its outcome means ---- */

/* A failed CreateVolume: in progress (same name again), final, or final and rescheduled. */
static enum prov_work create_failed(struct prov_ctrl *c, const char *key, const struct kube_obj *o,
				    const struct kube_pvc *pvc, const struct kube_storageclass *sc,
				    const struct prov_prep *p, const struct csi_status *st)
{
	bool selected = pvc->selected_node && *pvc->selected_node;
	bool may_reschedule = (c->topo || c->nd) && selected;
	enum prov_state state = prov_check_error(st->code, may_reschedule);
	char err[1536];

	prov_grpc_error(st, err, sizeof(err));
	if (st->code == 3) { /* INVALID_ARGUMENT */
		/* Infeasible: final, never rescheduled, and held back (upstream's slow set). */
		prov_event(c, o, KUBE_EVENT_WARNING, "ProvisioningFailed",
			   "Volume provisioning failed with infeasible error. Retries will be delayed. %s",
			   err);
		KLOG_ERR(err, "CreateVolume %s for claim %s failed with an infeasible error, not retried for %llds unless its StorageClass changes",
			 p->name, key, (long long)(c->o.retry_max_ns / 1000000000));
		prov_metrics_provision(c->metrics, p->cls, p->source, false, 0);
		prov_claim_done(c, key);
		slow_mark(c, key, o, sc);
		return PROV_WORK_RETRY;
	}
	prov_event(c, o, KUBE_EVENT_WARNING, "ProvisioningFailed", "%s", err);
	KLOG_ERR(err, "CreateVolume %s for claim %s failed (%s)",
		 p->name, key, state == PROV_IN_BACKGROUND ? "may be in progress, will retry with the same name" : "final");
	prov_metrics_provision(c->metrics, p->cls, p->source, false, 0);
	if (state == PROV_IN_BACKGROUND) {
		claim_in_progress(c, key, o);
		return PROV_WORK_RETRY;
	}
	prov_claim_done(c, key);
	if (state == PROV_RESCHEDULE && selected && reschedule(c, pvc) == 0) {
		/* Node deployment: let the other nodes try first. */
		if (c->nd && c->nd->immediate_binding)
			prov_owner_backoff(c, key);
		return PROV_WORK_DONE;
	}
	return PROV_WORK_RETRY;
}

/*
 * Whether the created volume can be recorded: it has an ID, and (when the driver says its size)
 * the size asked for and, for a clone or restore, a content source. A volume that is too small
 * or has no content is deleted again. Returns 0 with *cap (the driver's size, or the request's
 * when it answers 0), or -1 after the failure is reported (the claim is retried).
 */
static int check_volume(struct prov_ctrl *c, const char *key, const struct kube_obj *o,
			const struct kube_pvc *pvc, const struct prov_prep *p,
			const Csi__V1__Volume *vol, int64_t *cap)
{
	char err[1536];

	*cap = vol ? vol->capacity_bytes : 0;
	if (!vol || !vol->volume_id || !*vol->volume_id) {
		snprintf(err, sizeof(err), "CreateVolume returned no volume ID");
		prov_event(c, o, KUBE_EVENT_WARNING, "ProvisioningFailed", "%s", err);
		claim_in_progress(c, key, o);
		return -1;
	}
	if (*cap == 0) {
		*cap = p->requested;
		return 0;
	}
	if (*cap >= p->requested && !(pvc->data_source_kind && !vol->content_source))
		return 0;
	char e2[1024];
	bool small = *cap < p->requested;
	if (small)
		snprintf(err, sizeof(err), "created volume capacity %lld less than requested capacity %lld",
			 (long long)*cap, (long long)p->requested);
	else
		snprintf(err, sizeof(err), "volume content source missing");
	if (prov_cleanup_volume(c, vol->volume_id, &p->secrets[PROV_SECRET_PROVISIONER], e2, sizeof(e2)))
		snprintf(err + strlen(err), sizeof(err) - strlen(err),
			 ". %s of volume %s failed, volume is orphaned: %s", small ? "Cleanup" : "cleanup",
			 p->name, e2);
	prov_event(c, o, KUBE_EVENT_WARNING, "ProvisioningFailed", "%s", err);
	prov_metrics_provision(c->metrics, p->cls, p->source, false, 0);
	claim_in_progress(c, key, o);
	return -1;
}

/* CreateVolume. 0: a volume to record in *resp (the caller frees it) of *cap bytes; -1: nothing
 * to record, *res says what becomes of the key. */
static int call_driver(struct prov_ctrl *c, const char *key, const struct kube_obj *o,
		       const struct kube_pvc *pvc, const struct kube_storageclass *sc,
		       const struct prov_prep *p,
		       Csi__V1__CreateVolumeResponse **resp, int64_t *cap, enum prov_work *res)
{
	struct csi_status st = { 0 };

	*resp = NULL;
	*res = PROV_WORK_RETRY;
	KLOG_V(2, "CreateVolume %s for claim %s", p->name, key);
	if (csi_create_volume(c->o.csi, p->req, resp, c->o.timeout_ns, &st) != 0) {
		*res = create_failed(c, key, o, pvc, sc, p, &st);
		return -1;
	}
	if (check_volume(c, key, o, pvc, p, (*resp)->volume, cap)) {
		csi_msg_free(*resp);
		*resp = NULL;
		return -1;
	}
	return 0;
}

/* ---- save: the PV ---- */

/* The PV of a created volume as upstream writes it (pv.c), as JSON text. */
static char *pv_of_volume(struct prov_ctrl *c, const struct kube_obj *o, const struct kube_pvc *pvc,
			  const struct kube_storageclass *sc, const struct prov_prep *p,
			  const Csi__V1__Volume *vol, int64_t cap)
{
	char uid[64];
	struct kube_kv *attrs = xcalloc(vol->n_volume_context + 1, sizeof(*attrs));
	size_t na = 0;

	attrs[na++] = (struct kube_kv){ PROV_IDENTITY_KEY, c->o.identity };
	for (size_t i = 0; i < vol->n_volume_context; i++) {
		if (!strcmp(vol->volume_context[i]->key, PROV_IDENTITY_KEY))
			attrs[0].value = vol->volume_context[i]->value;
		else
			attrs[na++] = (struct kube_kv){ vol->volume_context[i]->key,
							vol->volume_context[i]->value };
	}
	struct prov_terms aff = { 0 };
	if (c->topo) {
		aff.t = xcalloc(vol->n_accessible_topology + 1, sizeof(*aff.t));
		for (size_t i = 0; i < vol->n_accessible_topology; i++) {
			const Csi__V1__Topology *t = vol->accessible_topology[i];
			struct prov_term *pt = &aff.t[aff.n++];
			pt->segs = xcalloc(t->n_segments + 1, sizeof(*pt->segs));
			for (size_t j = 0; j < t->n_segments; j++)
				pt->segs[pt->n++] = (struct kube_kv){ t->segments[j]->key, t->segments[j]->value };
		}
	}
	bool ro = false;
	if (p->req->n_volume_capabilities == 1 &&
	    p->req->volume_capabilities[0]->access_mode->mode ==
		    CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_READER_ONLY &&
	    c->o.controller_publish_readonly)
		ro = true;
	struct prov_pv_spec ps = {
		.name = p->name, .driver = c->o.driver, .volume_handle = vol->volume_id,
		.fs_type = p->fstype, .storage_class = p->cls, .attributes = attrs, .nattributes = na,
		.capacity = cap, .access_modes = pvc->access_modes, .block = pvc->block, .read_only = ro,
		.reclaim = sc->reclaim, .mount_options = sc->mount_options,
		.nmount_options = sc->nmount_options, .secrets = p->secrets, .claim_ns = pvc->meta.ns,
		.claim_name = pvc->meta.name, .claim_uid = kube_obj_uid(o, uid, sizeof(uid)),
		.claim_rv = pvc->meta.rv, .finalizer = c->o.gates.honor_pv_reclaim_policy,
		.affinity = &aff, .vac_name = p->vac,
	};
	char *pvj = prov_pv_json(&ps);
	prov_terms_free(&aff);
	free(attrs);
	return pvj;
}

/* POSTs the PV, or keeps it for the "unsavedpvs" worker: the volume exists either way. */
static void save(struct prov_ctrl *c, const char *key, const struct kube_obj *o,
		 const struct kube_pvc *pvc, const struct kube_storageclass *sc,
		 const struct prov_prep *p, const Csi__V1__Volume *vol, int64_t cap)
{
	char *pvj = pv_of_volume(c, o, pvc, sc, p, vol, cap);
	struct kube_err e;

	KLOG_V(2, "successfully created PV %s for PVC %s and csi volume name %s", p->name,
	       pvc->meta.name, vol->volume_id);
	if (prov_save_pv(c, pvj, &e) == 0) {
		prov_event(c, o, KUBE_EVENT_NORMAL, "ProvisioningSucceeded",
			   "Successfully provisioned volume %s", p->name);
		free(pvj);
		return;
	}
	KLOG_ERR(e.message, "Failed to save volume %s of claim %s", p->name, key);
	prov_unsaved_add(c, p->name, pvj, key, o, vol->volume_id, p->cls,
			 &p->secrets[PROV_SECRET_PROVISIONER], &e);
}

/* ---- provisioning ---- */

/* provisionClaimOperation + csiProvisioner.Provision: preflight, prepare, call, save. */
enum prov_work prov_provision(struct prov_ctrl *c, const char *key, const struct kube_obj *o,
			      const struct kube_pvc *pvc, const struct kube_storageclass *sc)
{
	struct prov_prep p = { 0 };
	char err[1536];
	enum prov_state state;
	int64_t start = mono_now_ns();
	enum prov_work res;
	Csi__V1__CreateVolumeResponse *resp;
	int64_t cap;

	snprintf(p.cls, sizeof(p.cls), "%s", pvc->storage_class ? pvc->storage_class : "");
	if (preflight(c, key, o, pvc, sc, &p, &res))
		return res;
	p.a = csi_arena_new();
	if (prov_prepare(c, pvc, sc, &p, &state, err, sizeof(err))) {
		prov_event(c, o, KUBE_EVENT_WARNING, "ProvisioningFailed", "%s", err);
		KLOG_ERR(err, "Failed to provision volume for claim %s", key);
		prov_metrics_provision(c->metrics, p.cls, p.source, false, 0);
		res = PROV_WORK_RETRY;
		/* The selected node's CSINode is gone: hand the claim back to the scheduler. */
		if (state == PROV_RESCHEDULE && pvc->selected_node && *pvc->selected_node &&
		    reschedule(c, pvc) == 0) {
			prov_claim_done(c, key);
			res = PROV_WORK_DONE;
		}
	} else if (call_driver(c, key, o, pvc, sc, &p, &resp, &cap, &res) == 0) {
		/* The restore is done: its snapshot may go (upstream removes it before the PV is
		 * saved, too). */
		if (p.snapshot)
			prov_snapshot_release(c, pvc->meta.ns, pvc->data_source_name);
		save(c, key, o, pvc, sc, &p, resp->volume, cap);
		csi_msg_free(resp);
		prov_metrics_provision(c->metrics, p.cls, p.source, true, mono_now_ns() - start);
		prov_cap_refresh_class(c->cap, p.cls);
		prov_claim_done(c, key);
		res = PROV_WORK_DONE;
	}
	csi_arena_free(p.a);
	return res;
}

/* ---- the worker ---- */

/* Node deployment: provision this node's claim, forget another's, or wait to own it. */
static enum prov_work node_claim(struct prov_ctrl *c, const char *key, const struct kube_obj *o,
				 const struct kube_pvc *pvc, const struct kube_storageclass *sc)
{
	switch (prov_node_claim(c, key, o, pvc, sc)) {
	case PROV_NODE_PROVISION:
		return prov_provision(c, key, o, pvc, sc);
	case PROV_NODE_SKIP:
		prov_claim_done(c, key);
		return PROV_WORK_DONE;
	case PROV_NODE_LATER:
		break;
	}
	return PROV_WORK_LATER;
}

enum prov_work prov_sync_claim(struct prov_ctrl *c, const char *key)
{
	char ns[256], name[256];

	if (prov_split_key(key, ns, sizeof(ns), name, sizeof(name)))
		return PROV_WORK_DONE;
	struct kube_obj *o = prov_store_get(c->pvc_inf, ns, name);
	if (!o) {
		/* Deleted: only a claim whose CreateVolume may still run is worked on. */
		pthread_mutex_lock(&c->mu);
		o = kube_obj_ref(kube_hmap_get(&c->in_progress, key));
		pthread_mutex_unlock(&c->mu);
		if (!o) {
			if (c->nd)
				prov_owner_forget(c, key);
			prov_topo_forget(c, key);
			slow_forget(c, key);
			return PROV_WORK_DONE;
		}
		KLOG_V(2, "Claim %s was deleted while its volume may be in progress, finishing it", key);
	}
	const struct kube_pvc *pvc = kube_pvc_of(o);
	struct kube_obj *so = pvc && pvc->storage_class ? prov_store_get(c->sc_inf, NULL, pvc->storage_class) : NULL;
	const struct kube_storageclass *sc = kube_storageclass_of(so);
	enum prov_work r = PROV_WORK_DONE;

	if (pvc && slow_waits(c, key, o, sc)) {
		/* upstream's DelayRetryError: requeued with the claim's backoff until the wait ends */
		KLOG_V(4, "skipping volume provisioning for claim %s, because provisioning previously failed with infeasible error",
		       key);
		kube_obj_unref(so);
		kube_obj_unref(o);
		return PROV_WORK_RETRY;
	}
	switch (prov_should_provision(pvc, c->o.driver, sc)) {
	case PROV_IGNORE:
	case PROV_WAIT_FOR_NODE:
		prov_claim_done(c, key);
		if (c->nd)
			prov_owner_forget(c, key);
		break;
	case PROV_NO_CLASS:
		KLOG_E("Error getting claim %s's StorageClass: storageClass \"%s\" not found", key,
		       pvc->storage_class ? pvc->storage_class : "");
		prov_event(c, o, KUBE_EVENT_WARNING, "ProvisioningFailed",
			   "storageclass.storage.k8s.io \"%s\" not found",
			   pvc->storage_class ? pvc->storage_class : "");
		prov_metrics_provision(c->metrics, pvc->storage_class ? pvc->storage_class : "",
				       pvc->data_source_kind, false, 0);
		r = PROV_WORK_RETRY;
		break;
	case PROV_PROVISION:
		r = c->nd ? node_claim(c, key, o, pvc, sc) : prov_provision(c, key, o, pvc, sc);
		break;
	}
	kube_obj_unref(so);
	kube_obj_unref(o);
	return r;
}
