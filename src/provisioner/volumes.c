/*
 * Volumes: the "volumes" worker (the PV deletion-protection finalizer, and deletion of
 * Released PVs: DeleteVolume with the deletion secrets, then the PV), and the "unsavedpvs" worker
 * that saves the PV of a volume that exists, or deletes the volume when the PV can never be saved.
 */
#include "provisioner/prov.h"

#include "base/log.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "kube/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the unsaved-PV queue: PVs whose volume exists ---- */

struct unsaved {
	char *pv; /* the PersistentVolume as JSON text */
	char *claim_key;           /* ns/name */
	struct kube_obj *claim;    /* the claim it was made for (events) */
	char *volume_id;
	char *cls;
	struct prov_secret_ref secret; /* provisioner secret, for the clean-up DeleteVolume */
	int permanent_failures;
};

/* A PV that cannot be saved after this many permanent (4xx) answers is given up: its volume is
 * deleted so that it does not leak, and the claim is provisioned again later. */
#define PROV_SAVE_PERMANENT_ATTEMPTS 3
#define PROV_CLEANUP_ATTEMPTS 5

/* The created PV is not decoded: the PV informer delivers it. */
int prov_save_pv(struct prov_ctrl *c, const char *pv, struct kube_err *e)
{
	if (kube_create_discard(c->kc, &KUBE_RES_PERSISTENTVOLUMES, NULL, pv, e) == 0)
		return 0;
	return kube_err_is_already_exists(e) ? 0 : -1;
}

int prov_cleanup_volume(struct prov_ctrl *c, const char *volume_id,
			const struct prov_secret_ref *secret, char *err, size_t errlen)
{
	struct csi_status st = { 0 };
	int rc = -1;

	for (int i = 0; i < PROV_CLEANUP_ATTEMPTS && rc; i++) {
		struct csi_arena *a = csi_arena_new();
		Csi__V1__DeleteVolumeRequest *dr = csi_msg_new(a, &csi__v1__delete_volume_request__descriptor);
		Csi__V1__DeleteVolumeResponse *resp = NULL;
		dr->volume_id = csi_arena_strdup(a, volume_id);
		if (secret && secret->set && prov_add_secrets(c, a, &dr->base, "secrets", secret, err, errlen))
			KLOG_E("%s", err);
		rc = csi_delete_volume(c->o.csi, dr, &resp, c->o.timeout_ns, &st) ? -1 : 0;
		csi_msg_free(resp);
		csi_arena_free(a);
	}
	if (rc)
		prov_grpc_error(&st, err, errlen);
	return rc;
}

static void unsaved_free(struct unsaved *u)
{
	free(u->pv);
	kube_obj_unref(u->claim);
	free(u->claim_key);
	free(u->volume_id);
	free(u->cls);
	free(u);
}

/* A refusal that the same request will meet again. */
static bool permanent_error(const struct kube_err *e)
{
	return kube_err_is_not_found(e) || e->code == 400 || e->code == 403 || e->code == 422;
}

void prov_unsaved_add(struct prov_ctrl *c, const char *name, char *pv, const char *claim_key,
		      const struct kube_obj *claim, const char *volume_id, const char *cls,
		      const struct prov_secret_ref *secret, const struct kube_err *e)
{
	struct unsaved *u = xcalloc(1, sizeof(*u));
	u->pv = pv;
	u->claim_key = xstrdup(claim_key);
	u->claim = kube_obj_ref((struct kube_obj *)claim);
	u->volume_id = xstrdup(volume_id);
	u->cls = xstrdup(cls);
	u->secret = *secret;
	if (permanent_error(e))
		u->permanent_failures = 1;
	pthread_mutex_lock(&c->mu);
	struct unsaved *old = kube_hmap_put(&c->unsaved, name, u);
	pthread_mutex_unlock(&c->mu);
	if (old) /* cannot happen: the claims worker checks first; keep the newest */
		unsaved_free(old);
	kube_workqueue_add_rate_limited(c->saveq, name);
}

bool prov_unsaved_has(struct prov_ctrl *c, const char *name)
{
	pthread_mutex_lock(&c->mu);
	bool has = kube_hmap_has(&c->unsaved, name);
	pthread_mutex_unlock(&c->mu);
	return has;
}

void prov_unsaved_clear(struct prov_ctrl *c)
{
	for (size_t i = 0; i < c->unsaved.cap; i++)
		if (c->unsaved.slots[i].key)
			unsaved_free(c->unsaved.slots[i].value);
	kube_hmap_clear(&c->unsaved);
}

enum prov_work prov_sync_unsaved(struct prov_ctrl *c, const char *name)
{
	pthread_mutex_lock(&c->mu);
	struct unsaved *u = kube_hmap_get(&c->unsaved, name);
	pthread_mutex_unlock(&c->mu);
	struct kube_err e;
	char err[1024];

	if (!u)
		return PROV_WORK_DONE;
	if (prov_save_pv(c, u->pv, &e) == 0) {
		prov_event(c, u->claim, KUBE_EVENT_NORMAL, "ProvisioningSucceeded",
		      "Successfully provisioned volume %s", name);
		KLOG_I("Saved volume %s of claim %s", name, u->claim_key);
	} else {
		bool permanent = permanent_error(&e);
		if (permanent)
			u->permanent_failures++;
		KLOG_ERR(e.message, "Failed to save volume %s of claim %s", name, u->claim_key);
		if (!permanent || u->permanent_failures < PROV_SAVE_PERMANENT_ATTEMPTS)
			return PROV_WORK_RETRY;
		/* It can never be saved: do not leak the volume. */
		prov_event(c, u->claim, KUBE_EVENT_WARNING, "ProvisioningFailed",
		      "Error creating provisioned PV object for claim %s: %s. Deleting the volume.",
		      u->claim_key, e.message);
		if (prov_cleanup_volume(c, u->volume_id, &u->secret, err, sizeof(err))) {
			KLOG_E("Error cleaning provisioned volume for claim %s: %s. Please delete manually.",
			       u->claim_key, err);
			prov_event(c, u->claim, KUBE_EVENT_WARNING, "ProvisioningCleanupFailed",
			      "Error cleaning provisioned volume for claim %s: %s. Please delete manually.",
			      u->claim_key, err);
		}
		kube_workqueue_add_rate_limited(c->claimq, u->claim_key);
	}
	pthread_mutex_lock(&c->mu);
	kube_hmap_del(&c->unsaved, name);
	pthread_mutex_unlock(&c->mu);
	unsaved_free(u);
	return PROV_WORK_DONE;
}

/* ---- the PV finalizer and deletion ---- */

/* shouldDelete: a Released PV with reclaim policy Delete that is ours to delete now. */
static bool should_delete(const struct prov_ctrl *c, const struct kube_obj *o)
{
	const struct kube_pv *pv = kube_pv_of(o);
	bool gate = c->o.gates.honor_pv_reclaim_policy, has = kube_obj_has_finalizer(o, PROV_PV_FINALIZER);
	return pv && pv->phase == KUBE_PV_RELEASED && pv->reclaim == 0 &&
	       (gate ? !(o->deletion_ts && !has) : !o->deletion_ts);
}

enum volume_work { VOLUME_NOTHING, VOLUME_ADD_FINALIZER, VOLUME_REMOVE_FINALIZER, VOLUME_DELETE };

/* What prov_sync_volume has to do for this state of a PV (handleProtectionFinalizer, shouldDelete). */
static enum volume_work volume_work(const struct prov_ctrl *c, const struct kube_obj *o)
{
	const struct kube_pv *pv = kube_pv_of(o);
	if (!pv)
		return VOLUME_NOTHING;
	bool gate = c->o.gates.honor_pv_reclaim_policy, has = kube_obj_has_finalizer(o, PROV_PV_FINALIZER);
	if (gate && pv->reclaim == 0 && !o->deletion_ts && pv->phase == KUBE_PV_BOUND && !has)
		return VOLUME_ADD_FINALIZER;
	if (has && (!gate || pv->reclaim != 0) && !o->deletion_ts)
		return VOLUME_REMOVE_FINALIZER;
	return should_delete(c, o) ? VOLUME_DELETE : VOLUME_NOTHING;
}

bool prov_volume_needs_work(const struct prov_ctrl *c, const struct kube_obj *o)
{
	return volume_work(c, o) != VOLUME_NOTHING;
}

/* handleProtectionFinalizer: adds or removes ours; the update comes back through the informer. */
static enum prov_work volume_finalizer(struct prov_ctrl *c, const struct kube_obj *o,
				       const char *name, bool add)
{
	struct kube_err e;

	if (!prov_patch_finalizers(c, &KUBE_RES_PERSISTENTVOLUMES, o, add ? NULL : PROV_PV_FINALIZER,
				   add ? PROV_PV_FINALIZER : NULL, true, &e))
		return PROV_WORK_DONE;
	if (add)
		KLOG_ERR(e.message, "failed to add finalizer to volume %s", name);
	else
		KLOG_ERR(e.message, "failed to remove finalizer from volume %s", name);
	return kube_err_is_conflict(&e) ? PROV_WORK_AGAIN : PROV_WORK_RETRY;
}

static int delete_secrets(struct prov_ctrl *c, const struct kube_pv *pv, struct csi_arena *a,
			  ProtobufCMessage *req)
{
	struct prov_secret_ref ref = { 0 };
	char err[1024];

	if (pv->delete_secret_name && pv->delete_secret_ns) {
		if (!*pv->delete_secret_name && !*pv->delete_secret_ns) {
			KLOG_V(2, "volume %s does not need any deletion secrets", pv->meta.name);
			return 0;
		}
		snprintf(ref.name, sizeof(ref.name), "%s", pv->delete_secret_name);
		snprintf(ref.ns, sizeof(ref.ns), "%s", pv->delete_secret_ns);
		ref.set = *ref.name && *ref.ns;
	} else if (pv->storage_class && *pv->storage_class) {
		struct kube_obj *so = prov_store_get(c->sc_inf, NULL, pv->storage_class);
		const struct kube_storageclass *sc = kube_storageclass_of(so);
		if (!sc) {
			KLOG_W("failed to get storageclass: %s, proceeding to delete without secrets",
			       pv->storage_class);
			kube_obj_unref(so);
			return 0;
		}
		struct prov_template_ctx tc = { pv->meta.name, pv->claim_name, pv->claim_ns, NULL, 0 };
		int rc = prov_secret_ref(PROV_SECRET_PROVISIONER, sc->parameters, sc->nparameters, &tc,
					 &ref, err, sizeof(err));
		kube_obj_unref(so);
		if (rc) {
			KLOG_ERR(err, "failed to get secretreference for volume %s", pv->meta.name);
			return -1;
		}
	}
	/* A missing Secret does not block deletion (it may be gone already). */
	if (ref.set && prov_add_secrets(c, a, req, "secrets", &ref, err, sizeof(err)))
		KLOG_ERR(err, "Failed to get credentials for volume %s", pv->meta.name);
	return 0;
}

/*
 * The PV as the API server has it now, when it still needs deletion: the cache may be behind
 * (a PV this worker deleted a moment ago comes back with its last update), and deleting twice
 * would call DeleteVolume and count a deletion twice. NULL with *r set otherwise.
 */
static struct kube_obj *fresh_to_delete(struct prov_ctrl *c, const char *name, enum prov_work *r)
{
	struct kube_err e;
	char err[256];
	json_t *j = kube_get(c->kc, &KUBE_RES_PERSISTENTVOLUMES, NULL, name, &e);
	if (!j) {
		if (kube_err_is_not_found(&e)) {
			KLOG_V(4, "persistentvolume %s no longer needs deletion, skipping", LOGQ(name));
			*r = PROV_WORK_DONE;
		} else {
			KLOG_ERR(e.message, "error reading persistentvolume %s", LOGQ(name));
			*r = PROV_WORK_RETRY;
		}
		return NULL;
	}
	struct kube_obj *o = kube_decode_json(&KUBE_KIND_PERSISTENTVOLUME, j, err, sizeof(err));
	json_decref(j);
	*r = PROV_WORK_DONE;
	if (!o) {
		KLOG_ERR(err, "error decoding persistentvolume %s", LOGQ(name));
	} else if (!should_delete(c, o)) {
		KLOG_V(4, "persistentvolume %s no longer needs deletion, skipping", LOGQ(name));
		kube_obj_unref(o);
		o = NULL;
	}
	return o;
}

/*
 * DeleteVolume of the PV's volume, unless a VolumeAttachment still names the PV. 0; 1 with err
 * when the volume is still attached (upstream's VolumeInUseError: deletion postponed, not
 * failed); -1 with err.
 */
static int call_delete(struct prov_ctrl *c, const char *name, const struct kube_pv *pv, char *err,
		       size_t errlen)
{
	int rc = -1;

	if (!pv->driver) {
		snprintf(err, errlen, "invalid CSI PV");
		return -1;
	}
	if (!c->o.cap_controller_service || !c->o.cap_create_delete) {
		snprintf(err, errlen, "CSI driver does not support dynamic provisioning: controller CREATE_DELETE_VOLUME capability is not reported");
		return -1;
	}
	struct csi_arena *a = csi_arena_new();
	Csi__V1__DeleteVolumeRequest *dr = csi_msg_new(a, &csi__v1__delete_volume_request__descriptor);
	dr->volume_id = csi_arena_strdup(a, pv->volume_handle ? pv->volume_handle : "");
	size_t nva = 0;
	struct kube_obj **vas = c->va_inf ? kube_store_by_index(kube_informer_store(c->va_inf), "pv",
								 name, &nva) : NULL;
	if (delete_secrets(c, pv, a, &dr->base)) {
		snprintf(err, errlen, "failed to get secretreference for volume %s", name);
	} else if (nva) {
		snprintf(err, errlen, "persistentvolume %s is still attached to node %s, waiting for detach",
			 name, kube_va_of(vas[0])->node_name ? kube_va_of(vas[0])->node_name : "");
		rc = 1;
	} else {
		Csi__V1__DeleteVolumeResponse *resp = NULL;
		struct csi_status st = { 0 };
		KLOG_V(2, "DeleteVolume %s of PV %s", dr->volume_id, name);
		if (csi_delete_volume(c->o.csi, dr, &resp, c->o.timeout_ns, &st) == 0)
			rc = 0;
		else
			prov_grpc_error(&st, err, errlen);
		csi_msg_free(resp);
	}
	kube_objs_free(vas, nva);
	csi_arena_free(a);
	return rc;
}

/* ---- what a retry need not do again ---- */

/* Whether DeleteVolume already succeeded for this PV (same name and UID). */
static bool volume_deleted(struct prov_ctrl *c, const char *name, const char *uid)
{
	pthread_mutex_lock(&c->mu);
	const char *was = kube_hmap_get(&c->deleted, name);
	bool same = was && !strcmp(was, uid);
	pthread_mutex_unlock(&c->mu);
	return same;
}

static void volume_deleted_set(struct prov_ctrl *c, const char *name, const char *uid)
{
	pthread_mutex_lock(&c->mu);
	free(kube_hmap_put(&c->deleted, name, xstrdup(uid)));
	pthread_mutex_unlock(&c->mu);
}

void prov_volume_gone(struct prov_ctrl *c, const char *name)
{
	pthread_mutex_lock(&c->mu);
	free(kube_hmap_del(&c->deleted, name));
	pthread_mutex_unlock(&c->mu);
}

void prov_volumes_clear(struct prov_ctrl *c)
{
	for (size_t i = 0; i < c->deleted.cap; i++)
		if (c->deleted.slots[i].key)
			free(c->deleted.slots[i].value);
	kube_hmap_clear(&c->deleted);
}

/*
 * Removes our finalizer and nothing else, whatever the list holds now: a strategic merge patch
 * that names only ours. A merge patch of the list as read before the DELETE would put back the
 * finalizers others removed since (the attacher's, pv-protection's), which the API server
 * refuses on an object being deleted.
 */
static int drop_finalizer(struct prov_ctrl *c, const char *name, struct kube_err *e)
{
	static const char body[] = "{\"metadata\":{\"$deleteFromPrimitiveList/finalizers\":[\""
				   PROV_PV_FINALIZER "\"]}}";
	return kube_patch_discard(c->kc, &KUBE_RES_PERSISTENTVOLUMES, NULL, name, false,
				  KUBE_PATCH_STRATEGIC, body, e);
}

/*
 * deleteVolumeOperation: DeleteVolume, then the PV, then our finalizer. A retry after a failed
 * DELETE or finalizer removal goes on from there: DeleteVolume once per PV (by UID, while this
 * process runs), and no DELETE of a PV already being deleted.
 */
static enum prov_work delete_volume(struct prov_ctrl *c, const char *name)
{
	struct kube_err e;
	char err[1200], uid[64];
	enum prov_work r;
	struct kube_obj *o = fresh_to_delete(c, name, &r);

	if (!o) {
		if (r == PROV_WORK_DONE)
			prov_volume_gone(c, name);
		return r;
	}
	const struct kube_pv *pv = kube_pv_of(o);
	bool has = kube_obj_has_finalizer(o, PROV_PV_FINALIZER);
	int64_t start = mono_now_ns();
	const char *cls = pv->storage_class ? pv->storage_class : "";
	kube_obj_uid(o, uid, sizeof(uid));
	bool already = volume_deleted(c, name, uid);
	int rc = already ? 0 : call_delete(c, name, pv, err, sizeof(err));
	if (rc > 0) {
		/* Still attached: expected when a workload and its claim go together. Retried with
		 * the backoff, a Normal event, not counted as a failed deletion. */
		KLOG_V(4, "Volume deletion of PV %s postponed: %s", name, err);
		prov_event(c, o, KUBE_EVENT_NORMAL, "VolumeDelete", "%s", err);
		kube_obj_unref(o);
		return PROV_WORK_RETRY;
	} else if (rc < 0) {
		KLOG_ERR(err, "Volume deletion failed for PV %s", name);
		prov_event(c, o, KUBE_EVENT_WARNING, "VolumeFailedDelete", "%s", err);
		prov_metrics_delete(c->metrics, cls, false, 0);
		kube_obj_unref(o);
		return PROV_WORK_RETRY;
	} else if (already) {
		KLOG_V(4, "Volume of PV %s already deleted", name);
	} else {
		KLOG_V(4, "Volume of PV %s deleted", name);
		volume_deleted_set(c, name, uid);
	}
	if (!o->deletion_ts &&
	    kube_delete(c->kc, &KUBE_RES_PERSISTENTVOLUMES, NULL, name, uid, NULL, &e) &&
	    !kube_err_is_not_found(&e)) {
		KLOG_I("Failed to delete persistentvolume %s: %s", name, e.message);
		kube_obj_unref(o);
		return PROV_WORK_RETRY;
	}
	if (c->o.gates.honor_pv_reclaim_policy && has && drop_finalizer(c, name, &e) &&
	    !kube_err_is_not_found(&e)) {
		KLOG_I("Failed to remove finalizer for persistentvolume %s: %s", name, e.message);
		kube_obj_unref(o);
		return PROV_WORK_RETRY;
	}
	prov_volume_gone(c, name);
	KLOG_V(2, "PersistentVolume %s deleted", name);
	prov_metrics_delete(c->metrics, cls, true, mono_now_ns() - start);
	prov_cap_refresh_class(c->cap, cls);
	kube_obj_unref(o);
	return PROV_WORK_DONE;
}

enum prov_work prov_sync_volume(struct prov_ctrl *c, const char *name)
{
	struct kube_obj *o = prov_store_get(c->pv_inf, NULL, name);
	const struct kube_pv *pv = kube_pv_of(o);
	enum prov_work r = PROV_WORK_DONE;

	if (!pv || (c->nd && !prov_pv_on_node(pv, c->nd->topology, c->nd->ntopology))) {
		/* Node deployment: volumes of other nodes are theirs to delete. */
		kube_obj_unref(o);
		return PROV_WORK_DONE;
	}
	switch (volume_work(c, o)) {
	case VOLUME_ADD_FINALIZER:
		r = volume_finalizer(c, o, name, true);
		break;
	case VOLUME_REMOVE_FINALIZER:
		r = volume_finalizer(c, o, name, false);
		break;
	case VOLUME_DELETE:
		kube_obj_unref(o);
		return delete_volume(c, name); /* reads the PV again: the cache may be behind */
	case VOLUME_NOTHING:
		break;
	}
	kube_obj_unref(o);
	return r;
}
