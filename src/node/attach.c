/*
 * attach.c: the kubelet's own attach and detach, for a node whose attach/detach controller does
 * not manage it (--enable-controller-attach-detach=false, the kubelet config's
 * enableControllerAttachDetach; seed 002's "legacy mode" of a kubelet without a master).
 *
 * As the kubelet's CSI attacher (pkg/volume/csi/csi_attacher.go) does it: attaching a PV's volume
 * is creating the VolumeAttachment csi-<sha256(handle + driver + node)> (spec.attacher = the
 * driver, spec.nodeName, spec.source.persistentVolumeName; one that exists already is taken as
 * ours) and waiting until the external attacher sets status.attached (its attachError, or a
 * deletionTimestamp, fails the wait; so does no answer within --timeout). Detaching, once the
 * volume is unpublished and unstaged, is deleting it and waiting until it is gone (its
 * detachError fails the wait and the wait is retried).
 *
 * Nothing here blocks the volume manager's pass: each pass does one step per volume (create,
 * check, delete, check) and the next pass the next, with the volume manager's per-volume
 * backoff after a failure. The records (`vm_attachments`) are per volume manager thread, as the
 * mount records are. After a restart the node's VolumeAttachments (spec.nodeName = this node),
 * read once from the API server when the informers have synced, are taken as attached records,
 * so that a volume attached before the restart and no longer wanted is still detached.
 *
 * Events, as the kubelet's operation generator sends them on the pod: SuccessfulAttachVolume
 * (Normal) "AttachVolume.Attach succeeded for volume \"<pv>\"", FailedAttachVolume (Warning)
 * "AttachVolume.Attach failed for volume \"<pv>\" : <why>".
 */
#include "node/volumes_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "kube/config.h"

struct vm_attachment {
	struct vm_attachment *next;
	char va[80];
	char *unique; /* NULL for an adopted VolumeAttachment whose PV is not known */
	char *spec;   /* the PV's name */
	bool attached, deleting, reported;
	int64_t first_try, next_try, delay;
};

static _Thread_local struct vm_attachment *vm_attachments;
static _Thread_local bool adopted;

static struct vm_attachment *find(const char *va)
{
	for (struct vm_attachment *a = vm_attachments; a; a = a->next)
		if (!strcmp(a->va, va))
			return a;
	return NULL;
}

static struct vm_attachment *add(const char *va, const char *unique, const char *spec)
{
	struct vm_attachment *a = xcalloc(1, sizeof(*a));
	snprintf(a->va, sizeof(a->va), "%s", va);
	a->unique = unique ? xstrdup(unique) : NULL;
	a->spec = xstrdup(spec ? spec : "");
	a->next = vm_attachments;
	vm_attachments = a;
	return a;
}

static void attachment_free(struct vm_attachment *a)
{
	free(a->unique);
	free(a->spec);
	free(a);
}

static void attach_failed(struct nd *nd, const struct desired *d, struct vm_attachment *a,
			  const char *why)
{
	pod_event(nd, d->pod, "FailedAttachVolume", "AttachVolume.Attach failed for volume \"%s\" : %s",
		  d->spec, why);
	KLOG_E("AttachVolume.Attach failed for volume \"%s\" node=\"%s\": %s", d->spec,
	       nd->cfg->node_name, why);
	a->first_try = 0;
	vm_backoff_fail(&a->next_try, &a->delay);
}

static int create_va(struct nd *nd, const struct desired *d, struct vm_attachment *a)
{
	struct kube_err e;
	json_t *obj = json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:s, s:{s:s}}}", "apiVersion",
				"storage.k8s.io/v1", "kind", "VolumeAttachment", "metadata", "name",
				a->va, "spec", "attacher", d->driver, "nodeName", nd->cfg->node_name,
				"source", "persistentVolumeName", d->spec);
	json_t *res = kube_create(nd->kc, &KUBE_RES_VOLUMEATTACHMENTS, NULL, obj, &e);
	json_decref(obj);
	if (!res && !kube_err_is_already_exists(&e)) {
		char why[600];
		snprintf(why, sizeof(why), "cannot create VolumeAttachment %s: %.400s", a->va, e.message);
		attach_failed(nd, d, a, why);
		return -1;
	}
	KLOG_I("VolumeAttachment %s for volume \"%s\" %s node=\"%s\"", a->va, d->spec,
	       res ? "created" : "already exists (not recreated)", nd->cfg->node_name);
	json_decref(res);
	a->deleting = false;
	return 0;
}

int vm_attach(struct nd *nd, const struct desired *d)
{
	char va[80];
	vm_va_name(nd, d->driver, d->handle, va);
	struct vm_attachment *a = find(va);
	if (!a)
		a = add(va, d->unique, d->spec);
	int64_t now = mono_now_ns();
	if (now < a->next_try)
		return 0;
	if (!a->first_try)
		a->first_try = now;
	struct kube_err e;
	json_t *obj = kube_get(nd->kc, &KUBE_RES_VOLUMEATTACHMENTS, NULL, va, &e);
	if (!obj) {
		a->attached = false;
		if (!kube_err_is_not_found(&e)) {
			char why[600];
			snprintf(why, sizeof(why), "cannot read VolumeAttachment %s: %.400s", va, e.message);
			attach_failed(nd, d, a, why);
			return -1;
		}
		return create_va(nd, d, a) ? -1 : 0;
	}
	json_t *status = json_object_get(obj, "status");
	const char *attach_err =
		json_string_value(json_object_get(json_object_get(status, "attachError"), "message"));
	int rc = 0;
	if (json_object_get(json_object_get(obj, "metadata"), "deletionTimestamp")) {
		a->attached = false;
		attach_failed(nd, d, a, "volume attachment is being deleted");
		rc = -1;
	} else if (json_is_true(json_object_get(status, "attached"))) {
		a->attached = true;
		a->first_try = 0;
		a->delay = 0;
		if (!a->reported) {
			a->reported = true;
			nd_event(nd, &d->pod->meta, false, "SuccessfulAttachVolume",
				 "AttachVolume.Attach succeeded for volume \"%s\"", d->spec);
			KLOG_I("AttachVolume.Attach succeeded for volume \"%s\" node=\"%s\" "
			       "volumeAttachment=\"%s\"", d->spec, nd->cfg->node_name, va);
		}
		rc = 1;
	} else if (attach_err) {
		attach_failed(nd, d, a, attach_err);
		rc = -1;
	} else if (now - a->first_try > nd->cfg->timeout_ns) {
		char why[300];
		snprintf(why, sizeof(why), "attachment timeout for volume %s", d->handle);
		attach_failed(nd, d, a, why);
		rc = -1;
	}
	json_decref(obj);
	return rc;
}

static bool wanted(const struct vm_attachment *a, struct desired *want, size_t nwant)
{
	for (size_t i = 0; a->unique && i < nwant; i++)
		if (want[i].resolved && !want[i].inline_vol && !strcmp(want[i].unique, a->unique))
			return true;
	return false;
}

/* Whether a staged device or a pod mount (done or maybe done) still holds the volume. */
static bool held(const struct vm_attachment *a)
{
	if (!a->unique)
		return false;
	for (struct vm_device *d = vm_devices; d; d = d->next)
		if (!strcmp(d->unique, a->unique))
			return true;
	for (struct vm_mount *m = vm_mounts; m; m = m->next)
		if (!strcmp(m->unique, a->unique) && (m->maybe || m->published))
			return true;
	return false;
}

/* One step of one detach: 1 when the VolumeAttachment is gone (forget the record), else 0. */
static int detach_step(struct nd *nd, struct vm_attachment *a)
{
	struct kube_err e;
	if (!a->deleting) {
		if (kube_delete(nd->kc, &KUBE_RES_VOLUMEATTACHMENTS, NULL, a->va, NULL, NULL, &e)) {
			if (kube_err_is_not_found(&e))
				return 1;
			KLOG_E("DetachVolume.Detach failed for volume \"%s\" node=\"%s\": cannot delete "
			       "VolumeAttachment %s: %s", a->spec, nd->cfg->node_name, a->va, e.message);
			vm_backoff_fail(&a->next_try, &a->delay);
			return 0;
		}
		KLOG_I("Deleted VolumeAttachment %s of volume \"%s\" node=\"%s\"; waiting for the "
		       "detach", a->va, a->spec, nd->cfg->node_name);
		a->deleting = true;
		a->attached = false;
		return 0;
	}
	json_t *obj = kube_get(nd->kc, &KUBE_RES_VOLUMEATTACHMENTS, NULL, a->va, &e);
	if (!obj)
		return kube_err_is_not_found(&e) ? 1 : 0;
	const char *msg = json_string_value(json_object_get(
		json_object_get(json_object_get(obj, "status"), "detachError"), "message"));
	if (msg) {
		KLOG_E("DetachVolume.Detach failed for volume \"%s\" node=\"%s\": %s", a->spec,
		       nd->cfg->node_name, msg);
		vm_backoff_fail(&a->next_try, &a->delay);
	}
	json_decref(obj);
	return 0;
}

void vm_detach_unused(struct nd *nd, struct desired *want, size_t nwant)
{
	int64_t now = mono_now_ns();
	for (struct vm_attachment **pp = &vm_attachments; *pp && !atomic_load(&nd->stop);) {
		struct vm_attachment *a = *pp;
		if (wanted(a, want, nwant) || held(a) || now < a->next_try) {
			pp = &a->next;
			continue;
		}
		if (detach_step(nd, a)) {
			KLOG_I("DetachVolume.Detach succeeded for volume \"%s\" node=\"%s\"", a->spec,
			       nd->cfg->node_name);
			*pp = a->next;
			attachment_free(a);
			continue;
		}
		pp = &a->next;
	}
}

/* Takes this node's VolumeAttachments as attached records, once (retried each pass until the
 * API server answers). */
void vm_attach_adopt(struct nd *nd)
{
	if (adopted)
		return;
	struct kube_err e;
	json_t *list = kube_list(nd->kc, &KUBE_RES_VOLUMEATTACHMENTS, NULL, NULL, &e);
	if (!list) {
		KLOG_W("Cannot list VolumeAttachments to find this node's: %s", e.message);
		return;
	}
	size_t i, n = 0;
	json_t *it;
	json_array_foreach(json_object_get(list, "items"), i, it) {
		json_t *spec = json_object_get(it, "spec");
		const char *node = json_string_value(json_object_get(spec, "nodeName"));
		const char *name = json_string_value(json_object_get(json_object_get(it, "metadata"), "name"));
		const char *pvn = json_string_value(
			json_object_get(json_object_get(spec, "source"), "persistentVolumeName"));
		if (!node || !name || strcmp(node, nd->cfg->node_name) || strlen(name) >= 80 || find(name))
			continue;
		struct kube_obj *po = pvn ? kube_store_get(kube_informer_store(nd->pvs), NULL, pvn) : NULL;
		const struct kube_pv *pv = kube_pv_of(po);
		char unique[600];
		bool known = pv && pv->driver && pv->volume_handle;
		if (known)
			vm_unique_name(pv->driver, pv->volume_handle, unique, sizeof(unique));
		struct vm_attachment *a = add(name, known ? unique : NULL, pvn ? pvn : name);
		a->attached = json_is_true(json_object_get(json_object_get(it, "status"), "attached"));
		a->reported = a->attached;
		kube_obj_unref(po);
		n++;
	}
	json_decref(list);
	adopted = true;
	if (n)
		KLOG_I("Found %zu VolumeAttachment(s) of node \"%s\" from before the start",
		       n, nd->cfg->node_name);
}

void vm_attach_forget(void)
{
	while (vm_attachments) {
		struct vm_attachment *a = vm_attachments;
		vm_attachments = a->next;
		attachment_free(a);
	}
	adopted = false;
}
