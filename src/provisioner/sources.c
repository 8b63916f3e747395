/*
 * Data sources: a clone's source claim and its volume (getPVCSource, with the cloning-protection
 * finalizer on the source), a VolumeSnapshot and its content (getSnapshotSource, then the
 * source-protection finalizer of snapfinalizer.c on the snapshot), and the "cloning-protection"
 * worker that takes the finalizer off a source being deleted once no clone of it is Pending.
 * These GET the sources from the API: the caches hold claims only. A source that fails its
 * checks is reported as upstream words it: "error getting handle for DataSource Type <kind> by
 * Name <name>: <why>"; a finalizer that cannot be set, without that prefix.
 */
#include "provisioner/prov.h"

#include "base/log.h"
#include "kube/quantity.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- reading the sources ---- */

/* The source claim of a clone, from the cache or the API. Reference or NULL with err. */
static struct kube_obj *get_pvc(struct prov_ctrl *c, const char *ns, const char *name, char *err,
				size_t errlen)
{
	struct kube_obj *o = prov_store_get(c->pvc_inf, ns, name);
	struct kube_err e;
	char e2[256];

	if (o)
		return o;
	json_t *j = kube_get(c->kc, &KUBE_RES_PERSISTENTVOLUMECLAIMS, ns, name, &e);
	if (!j) {
		snprintf(err, errlen, "error getting PVC %s (namespace \"%s\") from api server: %s", name,
			 ns, e.message);
		return NULL;
	}
	o = kube_decode_json(&KUBE_KIND_PERSISTENTVOLUMECLAIM, j, e2, sizeof(e2));
	json_decref(j);
	if (!o)
		snprintf(err, errlen, "error decoding PVC %s/%s: %s", ns, name, e2);
	return o;
}

/* The string at a dotted path of a JSON object, or NULL. */
static const char *jstr(json_t *o, const char *path)
{
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", path);
	json_t *cur = o;
	for (char *tok = strtok(buf, "."); tok && cur; tok = strtok(NULL, "."))
		cur = json_object_get(cur, tok);
	return json_string_value(cur);
}

/* Prefixes err with upstream's words for a data source that failed its checks. */
static void source_failed(const char *kind, const char *name, char *err, size_t errlen)
{
	char why[1024];
	snprintf(why, sizeof(why), "%s", err);
	snprintf(err, errlen, "error getting handle for DataSource Type %s by Name %s: %s", kind, name,
		 why);
}

/* getPVCSource: checks and the source volume's handle; setCloneFinalizer. */
int prov_clone_source(struct prov_ctrl *c, const struct kube_pvc *pvc,
		      const struct kube_storageclass *sc, struct prov_prep *p, char *err,
		      size_t errlen)
{
	struct kube_obj *so = get_pvc(c, pvc->meta.ns, pvc->data_source_name, err, errlen);
	const struct kube_pvc *src = kube_pvc_of(so);
	struct kube_err e;
	int rc = -1;
	char uid[64];

	if (!src) {
		source_failed("PersistentVolumeClaim", pvc->data_source_name, err, errlen);
		return -1;
	}
	if (src->phase != KUBE_PVC_BOUND)
		snprintf(err, errlen, "the PVC DataSource %s must have a status of Bound", src->meta.name);
	else if (so->deletion_ts)
		snprintf(err, errlen, "the PVC DataSource %s is currently being deleted", src->meta.name);
	else if (!src->storage_class)
		snprintf(err, errlen, "the source PVC (%s) storageclass cannot be empty", src->meta.name);
	else if (!pvc->storage_class)
		snprintf(err, errlen, "the requested PVC (%s) storageclass cannot be empty", pvc->meta.name);
	else if ((pvc->request > 0 ? pvc->request : 0) < (src->request > 0 ? src->request : 0))
		snprintf(err, errlen, "error, new PVC request must be greater than or equal in size to the specified PVC data source, requested %lld but source is %lld",
			 (long long)pvc->request, (long long)src->request);
	else if (!src->volume_name || !*src->volume_name)
		snprintf(err, errlen, "volume name is empty in source PVC %s", src->meta.name);
	else
		rc = 0;
	if (rc) {
		source_failed("PersistentVolumeClaim", pvc->data_source_name, err, errlen);
		kube_obj_unref(so);
		return -1;
	}
	rc = -1;
	json_t *pv = kube_get(c->kc, &KUBE_RES_PERSISTENTVOLUMES, NULL, src->volume_name, &e);
	const char *driver = jstr(pv, "spec.csi.driver"), *handle = jstr(pv, "spec.csi.volumeHandle");
	const char *mode = jstr(pv, "spec.volumeMode");
	bool src_block = mode && !strcmp(mode, "Block");
	kube_obj_uid(so, uid, sizeof(uid));
	if (!pv || !driver || !handle || strcmp(driver, sc->provisioner) != 0 ||
	    !jstr(pv, "spec.claimRef.uid") || strcmp(jstr(pv, "spec.claimRef.uid"), uid) != 0 ||
	    !prov_streq(jstr(pv, "spec.claimRef.name"), src->meta.name) ||
	    !prov_streq(jstr(pv, "spec.claimRef.namespace"), src->meta.ns) ||
	    !prov_streq(jstr(pv, "status.phase"), "Bound")) {
		KLOG_W("the source volume %s for PVC %s/%s is missing, not bound to it, or of another driver",
		       src->volume_name, src->meta.ns, src->meta.name);
		snprintf(err, errlen, "claim in dataSource not bound or invalid");
	} else if (!pvc->block && src_block) {
		snprintf(err, errlen, "the source PVC and destination PVCs must have the same volume mode for cloning.  Source is Block, but new PVC requested Filesystem");
	} else if (pvc->block && !src_block) {
		snprintf(err, errlen, "the source PVC and destination PVCs must have the same volume mode for cloning.  Source is Filesystem, but new PVC requested Block");
	} else {
		Csi__V1__VolumeContentSource *cs = csi_msg_new(p->a, &csi__v1__volume_content_source__descriptor);
		cs->type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_VOLUME;
		cs->volume = csi_msg_new(p->a, &csi__v1__volume_content_source__volume_source__descriptor);
		cs->volume->volume_id = csi_arena_strdup(p->a, handle);
		p->req->volume_content_source = cs;
		rc = 0;
	}
	json_decref(pv);
	if (rc)
		source_failed("PersistentVolumeClaim", pvc->data_source_name, err, errlen);
	/* setCloneFinalizer: protect the source until the clone leaves Pending. */
	if (rc == 0 && !kube_obj_has_finalizer(so, PROV_CLONE_FINALIZER)) {
		if (prov_patch_finalizers(c, &KUBE_RES_PERSISTENTVOLUMECLAIMS, so, NULL,
				     PROV_CLONE_FINALIZER, true, &e)) {
			snprintf(err, errlen, "cannot add finalizer %s to PVC %s/%s: %s",
				 PROV_CLONE_FINALIZER, so->ns, so->name, e.message);
			rc = -1;
		}
	}
	kube_obj_unref(so);
	return rc;
}

/* getSnapshotSource: the snapshot, bound to a ready content of this driver, and its handle. */
int prov_snapshot_source(struct prov_ctrl *c, const struct kube_pvc *pvc,
			 const struct kube_storageclass *sc, struct prov_prep *p, char *err,
			 size_t errlen)
{
	struct kube_err e;
	const char *name = pvc->data_source_name;
	json_t *snap = kube_get(c->kc, &KUBE_RES_VOLUMESNAPSHOTS, pvc->meta.ns, name, &e);
	json_t *content = NULL;
	int rc = -1;

	if (!snap) {
		snprintf(err, errlen, "error getting snapshot %s from api server: %s", name, e.message);
		source_failed("VolumeSnapshot", name, err, errlen);
		return -1;
	}
	const char *bound = jstr(snap, "status.boundVolumeSnapshotContentName");
	json_t *ready = json_object_get(json_object_get(snap, "status"), "readyToUse");
	bool deleting = jstr(snap, "metadata.deletionTimestamp") != NULL;
	bool held = prov_snapshot_protected(snap);
	if (deleting && held)
		/* A restore that began before the deletion goes on (else its volume could leak);
		 * the finalizer keeps the snapshot until it ends. */
		KLOG_V(3, "Snapshot %s/%s is being deleted but has volumesnapshot-as-source-protection finalizer, allowing provisioning to continue",
		       pvc->meta.ns, name);
	if (deleting && !held) {
		snprintf(err, errlen, "snapshot %s is being deleted", name);
	} else if (!bound) {
		snprintf(err, errlen, "snapshot %s not bound", name);
	} else if (!(content = kube_get(c->kc, &KUBE_RES_VOLUMESNAPSHOTCONTENTS, NULL, bound, &e))) {
		KLOG_W("error getting snapshotcontent %s for snapshot %s/%s from api server: %s", bound,
		       pvc->meta.ns, name, e.message);
		snprintf(err, errlen, "snapshot %s not bound", name);
	} else if (!prov_streq(jstr(content, "spec.volumeSnapshotRef.uid"), jstr(snap, "metadata.uid")) ||
		   !prov_streq(jstr(content, "spec.volumeSnapshotRef.name"), name) ||
		   !prov_streq(jstr(content, "spec.volumeSnapshotRef.namespace"), pvc->meta.ns)) {
		KLOG_W("snapshotcontent %s for snapshot %s/%s is bound to a different snapshot", bound,
		       pvc->meta.ns, name);
		snprintf(err, errlen, "snapshot %s not bound", name);
	} else if (!prov_streq(jstr(content, "spec.driver"), sc->provisioner)) {
		KLOG_W("snapshotcontent %s for snapshot %s/%s is handled by a different CSI driver than requested by StorageClass %s",
		       bound, pvc->meta.ns, name, sc->meta.name);
		snprintf(err, errlen, "snapshot %s not bound", name);
	} else if (!json_is_true(ready)) {
		snprintf(err, errlen, "snapshot %s is not Ready", name);
	} else if (!jstr(content, "status.snapshotHandle")) {
		snprintf(err, errlen, "snapshot handle %s is not available", name);
	} else {
		const char *rs = jstr(snap, "status.restoreSize");
		json_t *rsj = json_object_get(json_object_get(snap, "status"), "restoreSize");
		int64_t restore = -1;
		char qerr[128];
		if (rs)
			kube_quantity_parse(rs, &restore, qerr, sizeof(qerr));
		else if (json_is_integer(rsj))
			restore = json_integer_value(rsj);
		const char *svm = jstr(content, "spec.sourceVolumeMode");
		json_t *anns = json_object_get(json_object_get(content, "metadata"), "annotations");
		const char *allow = json_string_value(json_object_get(anns, "snapshot.storage.kubernetes.io/allow-volume-mode-change"));
		if (restore >= 0 && pvc->request < restore) {
			snprintf(err, errlen, "requested volume size %lld is less than the size %lld for the source snapshot %s",
				 (long long)pvc->request, (long long)restore, name);
		} else if (c->o.prevent_volume_mode_conversion && svm &&
			   strcmp(svm, pvc->block ? "Block" : "Filesystem") != 0 &&
			   !(allow && !strcasecmp(allow, "true"))) {
			snprintf(err, errlen, "requested volume %s/%s modifies the mode of the source volume but does not have permission to do so. snapshot.storage.kubernetes.io/allow-volume-mode-change is not set to true on snapshotcontent %s",
				 pvc->meta.ns, pvc->meta.name, bound);
		} else {
			if (restore >= 0 && pvc->request > restore)
				KLOG_W("requested volume size %lld is greater than the size %lld for the source snapshot %s. Volume plugin needs to handle volume expansion.",
				       (long long)pvc->request, (long long)restore, name);
			Csi__V1__VolumeContentSource *cs = csi_msg_new(p->a, &csi__v1__volume_content_source__descriptor);
			cs->type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT;
			cs->snapshot = csi_msg_new(p->a, &csi__v1__volume_content_source__snapshot_source__descriptor);
			cs->snapshot->snapshot_id = csi_arena_strdup(p->a, jstr(content, "status.snapshotHandle"));
			p->req->volume_content_source = cs;
			rc = 0;
		}
	}
	json_decref(content);
	if (rc)
		source_failed("VolumeSnapshot", name, err, errlen);
	else
		rc = prov_snapshot_protect(c, snap, err, errlen);
	json_decref(snap);
	return rc;
}

/* ---- cloning protection: the source keeps its finalizer while a clone of it is Pending ---- */

enum prov_work prov_sync_clone_source(struct prov_ctrl *c, const char *key)
{
	char ns[256], name[256];
	struct kube_err e;

	if (prov_split_key(key, ns, sizeof(ns), name, sizeof(name)))
		return PROV_WORK_DONE;
	struct kube_obj *o = prov_store_get(c->pvc_inf, ns, name);
	if (!o || !o->deletion_ts || !kube_obj_has_finalizer(o, PROV_CLONE_FINALIZER)) {
		kube_obj_unref(o);
		return PROV_WORK_DONE;
	}
	size_t n = 0;
	struct kube_obj **all = kube_store_list(kube_informer_store(c->pvc_inf), &n);
	const char *pending = NULL;
	for (size_t i = 0; i < n && !pending; i++) {
		const struct kube_pvc *p = kube_pvc_of(all[i]);
		if (p && prov_streq(all[i]->ns, ns) && prov_streq(p->data_source_kind, "PersistentVolumeClaim") &&
		    prov_streq(p->data_source_name, name) && p->phase == KUBE_PVC_PENDING)
			pending = all[i]->name;
	}
	enum prov_work r = PROV_WORK_DONE;
	if (pending) {
		KLOG_V(3, "PVC '%s' is in 'Pending' state, cloning from %s in progress", pending, key);
		r = PROV_WORK_RETRY;
	} else if (prov_patch_finalizers(c, &KUBE_RES_PERSISTENTVOLUMECLAIMS, o, PROV_CLONE_FINALIZER,
				    NULL, true, &e) && !kube_err_is_not_found(&e)) {
		KLOG_I("failed to remove clone finalizer from PVC %s: %s", key, e.message);
		r = kube_err_is_conflict(&e) ? PROV_WORK_AGAIN : PROV_WORK_RETRY;
	} else {
		KLOG_V(2, "Removed the cloning-protection finalizer from PVC %s", key);
	}
	kube_objs_free(all, n);
	kube_obj_unref(o);
	return r;
}
