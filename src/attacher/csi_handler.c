/*
 * The CSI handler: attaches and detaches volumes for VolumeAttachments through
 * ControllerPublishVolume / ControllerUnpublishVolume, as the external-attacher does.
 *
 * Attach (no deletionTimestamp, not attached yet):
 *   PV checks (exists, not being deleted) -> PV finalizer (once per PV) -> capability, secrets,
 *   node ID (all checked before the VA finalizer, which would block deletion on a bad object)
 *   -> one VA metadata patch: finalizer + node-id annotation -> ControllerPublishVolume
 *   -> one status patch: attached, attachmentMetadata, attachError cleared.
 * Detach (deletionTimestamp and our finalizer):
 *   ControllerUnpublishVolume -> finalizer patch -> status patch (attached false), upstream's
 *   v4.9+ order: a deleted VA without our finalizer is detached, so no second unpublish.
 * A failed CSI call records attachError/detachError on the VA, a Warning event, and the key
 * is retried with backoff; a timeout is a failure like any other: the volume may be attaching,
 * so it is retried, never marked detached.
 */
#include "attacher/att.h"
#include "base/log.h"
#include "base/timeutil.h"
#include "base/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a VA points at: a PV from the cache, or its inline spec decoded into a PV record. */
struct att_source {
	const struct kube_pv *pv; /* reference */
	bool is_inline;
};

static enum att_result from_kube_err(const struct kube_err *e)
{
	return kube_err_is_conflict(e) ? ATT_CONFLICT : ATT_RETRY;
}

/* Decodes spec.source.inlineVolumeSpec (a PersistentVolumeSpec) with the PV decoder. */
static const struct kube_pv *inline_source(struct att_ctrl *c, const struct kube_va *va, char *err,
					   size_t errlen)
{
	struct kube_err e;
	json_t *obj = kube_get(c->kc, &KUBE_RES_VOLUMEATTACHMENTS, NULL, va->meta.name, &e);
	json_t *spec, *fake;
	struct kube_obj *o = NULL;

	if (!obj) {
		snprintf(err, errlen, "cannot read VolumeAttachment %s: %s", va->meta.name, e.message);
		return NULL;
	}
	spec = json_object_get(json_object_get(json_object_get(obj, "spec"), "source"),
			       "inlineVolumeSpec");
	if (!json_is_object(json_object_get(spec, "csi"))) {
		snprintf(err, errlen, "inline volume spec contains nil CSI source");
	} else {
		fake = json_pack("{s:{s:s},s:O}", "metadata", "name", va->meta.name, "spec", spec);
		o = kube_decode_json(&KUBE_KIND_PERSISTENTVOLUME, fake, err, errlen);
		json_decref(fake);
	}
	json_decref(obj);
	return kube_pv_of(o);
}

static int resolve_source(struct att_ctrl *c, const struct kube_va *va, struct att_source *src,
			  char *err, size_t errlen)
{
	memset(src, 0, sizeof(*src));
	if (va->pv_name && va->inline_spec) {
		snprintf(err, errlen, "both InlineCSIVolumeSource and PersistentVolumeName "
				      "specified in VA source");
		return -1;
	}
	if (va->pv_name) {
		src->pv = att_get_pv(c, va->pv_name);
		if (!src->pv) {
			snprintf(err, errlen, "persistentvolume \"%s\" not found", va->pv_name);
			return -1;
		}
		return 0;
	}
	if (va->inline_spec) {
		src->pv = inline_source(c, va, err, errlen);
		src->is_inline = true;
		return src->pv ? 0 : -1;
	}
	snprintf(err, errlen, "neither InlineCSIVolumeSource nor PersistentVolumeName specified "
			      "in VA source");
	return -1;
}

static enum att_result add_pv_finalizer(struct att_ctrl *c, const struct kube_pv *pv, char *err,
					size_t errlen)
{
	struct kube_err e;
	json_t *patch;
	int rc;

	if (kube_obj_has_finalizer(&pv->meta, c->finalizer))
		return ATT_DONE;
	patch = json_pack("{s:{s:o,s:s}}", "metadata", "finalizers",
			  att_finalizers_json(&pv->meta, NULL, c->finalizer), "resourceVersion",
			  pv->meta.rv);
	rc = att_patch_only(c, &KUBE_RES_PERSISTENTVOLUMES, pv->meta.name, false, patch, &e);
	json_decref(patch);
	if (rc) {
		snprintf(err, errlen, "could not add PersistentVolume finalizer: %s", e.message);
		return from_kube_err(&e);
	}
	KLOG_V(4, "PV finalizer added to %s", LOGQ(pv->meta.name));
	return ATT_DONE;
}

/*
 * Saves attachError or detachError {time, message} with one status patch. An attachError from a
 * failed ControllerPublishVolume also carries errorCode, the gRPC code (grpc_code >= 0), as
 * upstream writes it since Kubernetes 1.33's MutableCSINodeAllocatableCount (GA, on by default):
 * the attach/detach controller reads it to tell a node out of attach slots (RESOURCE_EXHAUSTED).
 * Upstream writes no code into detachError.
 */
static void save_error(struct att_ctrl *c, const struct kube_va *va, bool attach, const char *msg,
		       int grpc_code)
{
	char ts[RFC3339_BUFLEN];
	struct kube_err e;
	json_t *patch;
	int rc;

	rfc3339_format(time(NULL), ts, sizeof(ts));
	patch = json_pack("{s:{s:{s:s,s:s}}}", "status", attach ? "attachError" : "detachError",
			  "time", ts, "message", msg);
	if (attach && grpc_code >= 0)
		json_object_set_new(json_object_get(json_object_get(patch, "status"), "attachError"),
				    "errorCode", json_integer(grpc_code));
	rc = att_patch_only(c, &KUBE_RES_VOLUMEATTACHMENTS, va->meta.name, true, patch, &e);
	json_decref(patch);
	if (rc)
		KLOG_V(2, "Failed to save %s error to %s: %s", attach ? "attach" : "detach",
		       LOGQ(va->meta.name), e.message);
	att_event(c, va, "Warning", attach ? "FailedAttach" : "FailedDetach", "%s", msg);
}

/*
 * Adds our finalizer and the node-id annotation with one patch when either is missing. The
 * answer is not decoded: what the attach goes on to use (name, status.attachmentMetadata) is
 * what the patch left alone, and the informer delivers the patched VA anyway. Returns a new
 * reference to va, or NULL with *e filled.
 */
static const struct kube_va *prepare_va(struct att_ctrl *c, const struct kube_va *va,
					const char *node_id, struct kube_err *e)
{
	bool has_fin = kube_obj_has_finalizer(&va->meta, c->finalizer);
	bool has_id = va->node_id && strcmp(va->node_id, node_id) == 0;
	json_t *patch, *meta;
	int rc;

	if (!has_fin || !has_id) {
		meta = json_pack("{s:s}", "resourceVersion", va->meta.rv);
		if (!has_fin)
			json_object_set_new(meta, "finalizers",
					    att_finalizers_json(&va->meta, NULL, c->finalizer));
		if (!has_id)
			json_object_set_new(meta, "annotations",
					    json_pack("{s:s}", ATT_NODE_ID_ANNOTATION, node_id));
		patch = json_pack("{s:o}", "metadata", meta);
		rc = att_patch_only(c, &KUBE_RES_VOLUMEATTACHMENTS, va->meta.name, false, patch, e);
		json_decref(patch);
		if (rc)
			return NULL;
	}
	return (const struct kube_va *)kube_obj_ref((struct kube_obj *)&va->meta);
}

static enum att_result mark_attached(struct att_ctrl *c, const struct kube_va *va,
				     const Csi__V1__ControllerPublishVolumeResponse *resp)
{
	json_t *md = json_object(), *patch;
	struct kube_err e;
	int rc;

	for (size_t i = 0; resp && i < resp->n_publish_context; i++)
		json_object_set_new(md, resp->publish_context[i]->key,
				    json_string(resp->publish_context[i]->value));
	/* A merge patch merges maps: keys of an earlier attachment that are gone must be nulled. */
	for (size_t i = 0; i < va->nmetadata; i++)
		if (!json_object_get(md, va->metadata[i].key))
			json_object_set_new(md, va->metadata[i].key, json_null());
	patch = json_pack("{s:{s:b,s:o,s:n}}", "status", "attached", 1, "attachmentMetadata", md,
			  "attachError");
	rc = att_patch_only(c, &KUBE_RES_VOLUMEATTACHMENTS, va->meta.name, true, patch, &e);
	json_decref(patch);
	if (rc) {
		KLOG_W("Failed to mark %s as attached: %s", LOGQ(va->meta.name), e.message);
		return from_kube_err(&e);
	}
	return ATT_DONE;
}

static enum att_result csi_attach(struct att_ctrl *c, const struct kube_va *va)
{
	char err[1536] = "";
	struct att_source src;
	struct csi_arena *a = NULL;
	Csi__V1__ControllerPublishVolumeRequest *req;
	Csi__V1__ControllerPublishVolumeResponse *resp = NULL;
	const struct kube_va *cur = NULL;
	struct csi_status st;
	struct kube_err e;
	char *node_id = NULL;
	enum att_result res = ATT_RETRY;
	int grpc_code = -1; /* the driver's answer, when the failure is ControllerPublishVolume's */

	if (resolve_source(c, va, &src, err, sizeof(err)))
		goto fail;
	if (!src.is_inline) {
		if (src.pv->meta.deletion_ts) {
			snprintf(err, sizeof(err), "PersistentVolume \"%s\" is marked for deletion",
				 src.pv->meta.name);
			goto fail;
		}
		res = add_pv_finalizer(c, src.pv, err, sizeof(err));
		if (res != ATT_DONE)
			goto fail;
		res = ATT_RETRY;
	}
	if (!src.pv->driver) {
		snprintf(err, sizeof(err), "PersistentVolume \"%s\" is not a CSI volume (no spec.csi)",
			 src.pv->meta.name);
		goto fail;
	}
	a = csi_arena_new();
	req = csi_msg_new(a, &csi__v1__controller_publish_volume_request__descriptor);
	req->volume_capability = att_capability(a, src.pv, c->o.single_node_multi_writer,
						c->o.default_fstype, err, sizeof(err));
	if (!req->volume_capability)
		goto fail;
	req->volume_id = csi_arena_strdup(a, src.pv->volume_handle ? src.pv->volume_handle : "");
	/* "CO MUST set this field to false if SP does not have PUBLISH_READONLY" */
	req->readonly = src.pv->read_only && c->o.publish_readonly;
	for (size_t i = 0; i < src.pv->nvolume_attributes; i++)
		csi_map_add(a, &req->base, "volume_context", src.pv->volume_attributes[i].key,
			    src.pv->volume_attributes[i].value);
	if (src.pv->secret_name &&
	    att_add_secrets(c, a, &req->base, "secrets", src.pv->secret_ns ? src.pv->secret_ns : "",
			    src.pv->secret_name, err, sizeof(err)))
		goto fail;
	node_id = att_node_id(c, va->node_name, NULL, err, sizeof(err));
	if (!node_id)
		goto fail;
	req->node_id = csi_arena_strdup(a, node_id);

	cur = prepare_va(c, va, node_id, &e);
	if (!cur) {
		snprintf(err, sizeof(err), "could not save VolumeAttachment: %s", e.message);
		res = from_kube_err(&e);
		/* A conflict is not the driver's fault: retry without recording an error. */
		if (res == ATT_CONFLICT)
			goto out;
		goto fail;
	}
	KLOG_V(2, "Attaching %s", LOGQ(va->meta.name));
	if (csi_controller_publish_volume(c->o.csi, req, &resp, c->o.timeout_ns, &st) != 0) {
		att_grpc_error(&st, err, sizeof(err));
		grpc_code = st.code;
		va = cur;
		goto fail;
	}
	KLOG_V(2, "Attached %s", LOGQ(va->meta.name));
	res = mark_attached(c, cur, resp);
	goto out;

fail:
	if (res != ATT_CONFLICT) {
		KLOG_V(2, "Error processing %s: failed to attach: %s", LOGQ(va->meta.name), err);
		save_error(c, va, true, err, grpc_code);
		res = ATT_RETRY;
	}
out:
	csi_msg_free(resp);
	csi_arena_free(a);
	free(node_id);
	kube_obj_unref((struct kube_obj *)(cur ? &cur->meta : NULL));
	kube_obj_unref((struct kube_obj *)(src.pv ? &src.pv->meta : NULL));
	return res;
}

/*
 * upstream's markAsDetached (v4.9+): the finalizer goes first, then status.attached=false. A VA
 * being deleted without our finalizer counts as detached whatever its status says, so a crash
 * between the two patches never calls ControllerUnpublishVolume again; the other order left a
 * window (finalizer on, attached false) that reads as "a detach that may have timed out" and
 * was unpublished a second time. Once the finalizer is gone the API server may remove the VA:
 * a 404 on the status patch is success.
 */
static enum att_result mark_detached(struct att_ctrl *c, const struct kube_va *va)
{
	bool has_fin = kube_obj_has_finalizer(&va->meta, c->finalizer);
	struct kube_err e;
	json_t *patch;
	int rc;

	if (!has_fin && !va->attached)
		return ATT_DONE;
	if (has_fin) {
		patch = json_pack("{s:{s:o,s:s}}", "metadata", "finalizers",
				  att_finalizers_json(&va->meta, c->finalizer, NULL), "resourceVersion",
				  va->meta.rv ? va->meta.rv : "");
		rc = att_patch_only(c, &KUBE_RES_VOLUMEATTACHMENTS, va->meta.name, false, patch, &e);
		json_decref(patch);
		if (rc && kube_err_is_not_found(&e))
			return ATT_DONE;
		if (rc) {
			KLOG_W("Failed to remove finalizer from %s: %s", LOGQ(va->meta.name), e.message);
			return from_kube_err(&e);
		}
		KLOG_V(4, "Finalizer removed from %s", LOGQ(va->meta.name));
	}
	patch = json_pack("{s:{s:b,s:n,s:n}}", "status", "attached", 0, "detachError",
			  "attachmentMetadata");
	rc = att_patch_only(c, &KUBE_RES_VOLUMEATTACHMENTS, va->meta.name, true, patch, &e);
	json_decref(patch);
	if (rc && !kube_err_is_not_found(&e)) {
		KLOG_W("Failed to mark %s as detached: %s", LOGQ(va->meta.name), e.message);
		return from_kube_err(&e);
	}
	return ATT_DONE;
}

static enum att_result csi_detach(struct att_ctrl *c, const struct kube_va *va)
{
	char err[1536] = "";
	struct att_source src;
	struct csi_arena *a = NULL;
	Csi__V1__ControllerUnpublishVolumeRequest *req;
	Csi__V1__ControllerUnpublishVolumeResponse *resp = NULL;
	struct csi_status st;
	char *node_id = NULL;
	enum att_result res = ATT_RETRY;

	if (resolve_source(c, va, &src, err, sizeof(err)))
		goto fail;
	if (!src.pv->driver) {
		snprintf(err, sizeof(err), "PersistentVolume \"%s\" is not a CSI volume (no spec.csi)",
			 src.pv->meta.name);
		goto fail;
	}
	a = csi_arena_new();
	req = csi_msg_new(a, &csi__v1__controller_unpublish_volume_request__descriptor);
	req->volume_id = csi_arena_strdup(a, src.pv->volume_handle ? src.pv->volume_handle : "");
	if (src.pv->secret_name &&
	    att_add_secrets(c, a, &req->base, "secrets", src.pv->secret_ns ? src.pv->secret_ns : "",
			    src.pv->secret_name, err, sizeof(err)))
		goto fail;
	node_id = att_node_id(c, va->node_name, va, err, sizeof(err));
	if (!node_id)
		goto fail;
	req->node_id = csi_arena_strdup(a, node_id);
	KLOG_V(2, "Detaching %s", LOGQ(va->meta.name));
	if (csi_controller_unpublish_volume(c->o.csi, req, &resp, c->o.timeout_ns, &st) != 0) {
		att_grpc_error(&st, err, sizeof(err));
		goto fail;
	}
	KLOG_V(2, "Detached %s", LOGQ(va->meta.name));
	res = mark_detached(c, va);
	goto out;
fail:
	KLOG_V(2, "Error processing %s: failed to detach: %s", LOGQ(va->meta.name), err);
	save_error(c, va, false, err, -1);
out:
	csi_msg_free(resp);
	csi_arena_free(a);
	free(node_id);
	kube_obj_unref((struct kube_obj *)(src.pv ? &src.pv->meta : NULL));
	return res;
}

static enum att_result csi_sync_va(struct att_ctrl *c, const struct kube_va *va)
{
	bool force = att_consume_force_sync(c, va->meta.name);

	if (!va->meta.deletion_ts) {
		if (!force && va->attached) {
			KLOG_V(4, "%s is already attached", LOGQ(va->meta.name));
			return ATT_DONE;
		}
		return csi_attach(c, va);
	}
	if (!force && !kube_obj_has_finalizer(&va->meta, c->finalizer)) {
		KLOG_V(4, "%s is already detached", LOGQ(va->meta.name));
		return ATT_DONE;
	}
	return csi_detach(c, va);
}

/* Removes our finalizer from a PV being deleted once no VolumeAttachment refers to it. */
static enum att_result csi_sync_pv(struct att_ctrl *c, const struct kube_pv *pv)
{
	struct kube_err e;
	json_t *patch;
	int rc;

	if (!pv->meta.deletion_ts || !kube_obj_has_finalizer(&pv->meta, c->finalizer))
		return ATT_DONE;
	if (att_pv_in_use(c, pv->meta.name)) {
		KLOG_V(4, "PV %s is still used by a VolumeAttachment", LOGQ(pv->meta.name));
		return ATT_DONE; /* the VA's deletion requeues the PV */
	}
	patch = json_pack("{s:{s:o,s:s}}", "metadata", "finalizers",
			  att_finalizers_json(&pv->meta, c->finalizer, NULL), "resourceVersion",
			  pv->meta.rv);
	rc = att_patch_only(c, &KUBE_RES_PERSISTENTVOLUMES, pv->meta.name, false, patch, &e);
	json_decref(patch);
	if (rc && !kube_err_is_not_found(&e)) {
		KLOG_ERR(e.message, "Failed to remove finalizer from PV %s", LOGQ(pv->meta.name));
		return from_kube_err(&e);
	}
	KLOG_V(2, "Removed finalizer from PV %s", LOGQ(pv->meta.name));
	return ATT_DONE;
}

const struct att_handler att_csi_handler = { "csi", csi_sync_va, csi_sync_pv };

/* ---- trivial handler: attached without finalizers or CSI calls ---- */

static enum att_result trivial_sync_va(struct att_ctrl *c, const struct kube_va *va)
{
	struct kube_err e;
	json_t *patch;
	int rc;

	if (va->meta.deletion_ts || va->attached)
		return ATT_DONE;
	patch = json_pack("{s:{s:b}}", "status", "attached", 1);
	rc = att_patch_only(c, &KUBE_RES_VOLUMEATTACHMENTS, va->meta.name, true, patch, &e);
	json_decref(patch);
	if (rc) {
		KLOG_W("Failed to mark %s as attached: %s", LOGQ(va->meta.name), e.message);
		return from_kube_err(&e);
	}
	KLOG_V(2, "Marked %s as attached", LOGQ(va->meta.name));
	return ATT_DONE;
}

static enum att_result trivial_sync_pv(struct att_ctrl *c, const struct kube_pv *pv)
{
	(void)c;
	(void)pv;
	return ATT_DONE;
}

const struct att_handler att_trivial_handler = { "trivial", trivial_sync_va, trivial_sync_pv };
