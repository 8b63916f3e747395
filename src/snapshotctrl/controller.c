/*
 * snapshot-controller's I/O: informers, three served queues (snapshots, contents, claims) and
 * the writes of one sync. Which write comes next is decided by src/snapshots; each sync makes
 * at most a few writes and returns, and the informer's echo queues the next step.
 */
#include "snapshotctrl/snapshotctrl.h"

#include <jansson.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/strbuf.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "kube/informer.h"
#include "kube/quantity.h"
#include "kube/workqueue.h"
#include "snapshots/snapshots.h"

#include "snapshotctrl/internal.h"

/* ---- cache indexes ---- */

static size_t by_claim(const struct kube_obj *o, const char **vals, size_t max)
{
	const struct kube_vs *vs = kube_vs_of(o);
	static _Thread_local char key[512];

	if (!vs || !vs->source_pvc || !max)
		return 0;
	snprintf(key, sizeof(key), "%s/%s", o->ns ? o->ns : "", vs->source_pvc);
	vals[0] = key;
	return 1;
}

static size_t by_namespace(const struct kube_obj *o, const char **vals, size_t max)
{
	if (!o->ns || !max)
		return 0;
	vals[0] = o->ns;
	return 1;
}

/* ---- handlers: queue keys only ---- */

static void queue_obj(struct kube_workqueue *q, const struct kube_obj *o)
{
	char key[512];

	kube_obj_key(o, key, sizeof(key));
	kube_workqueue_add(q, key);
}

static void vs_changed(struct sctrl *c, const struct kube_obj *o)
{
	const struct kube_vs *vs = kube_vs_of(o);
	char key[512];

	queue_obj(c->vsq, o);
	if (vs && vs->source_pvc) {
		snprintf(key, sizeof(key), "%s/%s", o->ns ? o->ns : "", vs->source_pvc);
		kube_workqueue_add(c->claimq, key);
	}
}

static void on_vs_add(const struct kube_obj *o, void *ud) { vs_changed(ud, o); }
static void on_vs_update(const struct kube_obj *old, const struct kube_obj *o, void *ud)
{
	(void)old;
	vs_changed(ud, o);
}
static const char *snapshot_driver(struct sctrl *c, const struct kube_vs *vs, char *buf,
				   size_t len);
static void on_vs_delete(const struct kube_obj *o, void *ud)
{
	struct sctrl *c = ud;
	const struct kube_vs *vs = kube_vs_of(o);
	char uid[64], drv[256];

	/* upstream's deleteSnapshot: the deletion's operation ends when the object is gone */
	if (vs) {
		sctrl_opm_success(c->opm, SCTRL_OP_DELETE, kube_obj_uid(o, uid, sizeof(uid)),
				  snapshot_driver(c, vs, drv, sizeof(drv)));
		sctrl_opm_forget(c->opm, uid);
	}
	vs_changed(c, o);
}

static void vsc_changed(struct sctrl *c, const struct kube_obj *o)
{
	const struct kube_vsc *vsc = kube_vsc_of(o);
	char key[512];

	queue_obj(c->vscq, o);
	if (vsc && vsc->ref_name && vsc->ref_ns) {
		snprintf(key, sizeof(key), "%s/%s", vsc->ref_ns, vsc->ref_name);
		kube_workqueue_add(c->vsq, key);
	}
}

static void on_vsc_add(const struct kube_obj *o, void *ud) { vsc_changed(ud, o); }
static void on_vsc_update(const struct kube_obj *old, const struct kube_obj *o, void *ud)
{
	(void)old;
	vsc_changed(ud, o);
}
static void on_vsc_delete(const struct kube_obj *o, void *ud) { vsc_changed(ud, o); }

/* A claim restored from a snapshot may hold up that snapshot's deletion; one with our
 * finalizer may be released. */
static void pvc_changed(struct sctrl *c, const struct kube_obj *o)
{
	const struct kube_pvc *pvc = kube_pvc_of(o);
	char key[512];

	if (!pvc)
		return;
	if (kube_obj_has_finalizer(o, SNAP_FIN_PVC))
		queue_obj(c->claimq, o);
	if (pvc->data_source_kind && !strcmp(pvc->data_source_kind, "VolumeSnapshot") &&
	    pvc->data_source_name) {
		snprintf(key, sizeof(key), "%s/%s", o->ns ? o->ns : "", pvc->data_source_name);
		kube_workqueue_add(c->vsq, key);
	}
}

static void on_pvc_add(const struct kube_obj *o, void *ud) { pvc_changed(ud, o); }
static void on_pvc_update(const struct kube_obj *old, const struct kube_obj *o, void *ud)
{
	(void)old;
	pvc_changed(ud, o);
}

/* ---- snapshot status writes ---- */

static void vs_key(const struct kube_vs *vs, char *buf, size_t len)
{
	kube_obj_key(&vs->meta, buf, len);
}

/* upstream's updateSnapshotErrorStatusWithEvent: one write and one event per new message. */
static void status_error(struct sctrl *c, const struct kube_vs *vs, const struct snap_error *e)
{
	char now[64];
	struct kube_err ke;

	if (!e->reason)
		return;
	if (vs->error_message && !strcmp(vs->error_message, e->message)) {
		KLOG_V(4, "updateSnapshotErrorStatusWithEvent[%s]: the same error is already set",
		       vs->meta.name);
		return;
	}
	snap_time_text((int64_t)time(NULL) * NSEC_PER_SEC, now, sizeof(now));
	json_t *st = json_pack("{s:{s:s,s:s}}", "error", "time", now, "message", e->message);
	if (!e->keep_ready)
		json_object_set_new(st, "readyToUse", json_false());
	json_t *patch = json_pack("{s:o}", "status", st);
	char *body = json_dumps(patch, JSON_COMPACT);
	if (snap_patch(c->kc, &vs->meta, true, body, &ke))
		KLOG_ERR(ke.message, "failed to update snapshot %s/%s error status",
			 vs->meta.ns, vs->meta.name);
	free(body);
	json_decref(patch);
	snap_event(c->o.recorder, &vs->meta, true, e->reason, "%s", e->message);
}

static void simple_error(struct sctrl *c, const struct kube_vs *vs, const char *reason,
			 bool keep_ready, const char *msg)
{
	struct snap_error e = { .reason = reason, .keep_ready = keep_ready };

	snprintf(e.message, sizeof(e.message), "%.*s", (int)sizeof(e.message) - 1, msg);
	status_error(c, vs, &e);
}

/* upstream's getSnapshotDriverName: the class's driver, else the bound or source content's. */
static const char *snapshot_driver(struct sctrl *c, const struct kube_vs *vs, char *buf,
				   size_t len)
{
	struct kube_obj *o = vs->class_name ? sctrl_get(c, INF_CLASS, NULL, vs->class_name) : NULL;
	const char *d = o ? kube_vsclass_of(o)->driver : NULL;

	if (!d) {
		kube_obj_unref(o);
		o = sctrl_get(c, INF_VSC, NULL, vs->bound_content ? vs->bound_content : vs->source_content);
		d = o ? kube_vsc_of(o)->driver : NULL;
	}
	snprintf(buf, len, "%s", d ? d : "");
	kube_obj_unref(o);
	return buf;
}

/* upstream's updateSnapshotStatus: the content's status merged into the snapshot's. */
static int update_status(struct sctrl *c, const struct kube_vs *vs, const struct kube_vsc *content)
{
	struct snap_vs_status st;
	struct kube_err ke;
	char key[512], t[64];

	snap_status_from_content(vs, content, &st);
	if (!st.changed)
		return DONE;
	json_t *s = json_pack("{s:s,s:b}", "boundVolumeSnapshotContentName", st.bound,
			      "readyToUse", st.ready);
	if (st.creation_ns >= 0) {
		snap_time_text(st.creation_ns, t, sizeof(t));
		json_object_set_new(s, "creationTime", json_string(t));
	}
	if (st.restore_size >= 0) {
		char q[64];
		kube_quantity_format(st.restore_size, true, q, sizeof(q)); /* BinarySI, as upstream */
		json_object_set_new(s, "restoreSize", json_string(q));
	}
	if (st.error_message)
		json_object_set_new(s, "error", json_pack("{s:s,s:s}", "message", st.error_message,
							  "time", st.error_time ? st.error_time : ""));
	else
		json_object_set_new(s, "error", json_null());
	json_t *patch = json_pack("{s:o}", "status", s);
	char *body = json_dumps(patch, JSON_COMPACT);
	int rc = snap_patch(c->kc, &vs->meta, true, body, &ke);
	free(body);
	json_decref(patch);
	vs_key(vs, key, sizeof(key));
	if (rc) {
		char msg[600];
		snprintf(msg, sizeof(msg), "Snapshot status update failed, %s", ke.message);
		simple_error(c, vs, "SnapshotStatusUpdateFailed", false, msg);
		return RETRY;
	}
	char uid[64];
	kube_obj_uid(&vs->meta, uid, sizeof(uid));
	if (st.created_event) {
		sctrl_opm_success(c->opm, SCTRL_OP_CREATE, uid, content->driver);
		snap_event(c->o.recorder, &vs->meta, false, "SnapshotCreated",
			   "Snapshot %s was successfully created by the CSI driver.", key);
	}
	if (st.ready_event) {
		sctrl_opm_success(c->opm, SCTRL_OP_CREATE_READY, uid, content->driver);
		snap_event(c->o.recorder, &vs->meta, false, "SnapshotReady",
			   "Snapshot %s is ready to use.", key);
	}
	return DONE;
}

/* ---- creating a dynamic snapshot's content ---- */

/* The node a distributed snapshot's content is managed by: the first node the PV's affinity
 * admits ("" when none), as upstream's getManagedByNode. */
static void managed_by_node(struct sctrl *c, const struct kube_pv *pv, char *buf, size_t len)
{
	size_t n = 0;
	struct kube_obj **nodes = kube_store_list(kube_informer_store(c->inf[INF_NODE]), &n);

	buf[0] = '\0';
	for (size_t i = 0; i < n && pv->nnode_affinity; i++) {
		const struct kube_node *nd = kube_node_of(nodes[i]);
		if (nd && kube_node_selector_match(pv->node_affinity, pv->nnode_affinity, nd->labels,
						   nd->nlabels)) {
			snprintf(buf, len, "%s", nd->meta.name);
			break;
		}
	}
	kube_objs_free(nodes, n);
}

static json_t *content_json(struct sctrl *c, const struct kube_vs *vs,
			    const struct kube_vsclass *cls, const struct kube_pv *pv,
			    const char *name, const char *sname, const char *sns)
{
	char uid[64], node[256];
	json_t *md = json_pack("{s:s}", "name", name);
	json_t *spec = json_pack(
		"{s:{s:s,s:s,s:s,s:s,s:s,s:s},s:{s:s},s:s,s:s,s:s}", "volumeSnapshotRef",
		"kind", "VolumeSnapshot", "namespace", vs->meta.ns ? vs->meta.ns : "", "name",
		vs->meta.name, "uid", kube_obj_uid(&vs->meta, uid, sizeof(uid)), "apiVersion",
		SNAP_API_VERSION, "resourceVersion", vs->meta.rv, "source", "volumeHandle",
		pv->volume_handle ? pv->volume_handle : "", "volumeSnapshotClassName",
		cls->meta.name, "deletionPolicy",
		cls->policy == KUBE_SNAP_RETAIN ? "Retain" : "Delete", "driver", cls->driver);

	if (c->o.prevent_mode_conversion)
		json_object_set_new(spec, "sourceVolumeMode",
				    json_string(pv->block ? "Block" : "Filesystem"));
	if (sname)
		json_object_set_new(md, "annotations",
				    json_pack("{s:s,s:s}", SNAP_ANN_SECRET_NAME, sname,
					      SNAP_ANN_SECRET_NS, sns));
	if (c->o.distributed) {
		managed_by_node(c, pv, node, sizeof(node));
		if (*node)
			json_object_set_new(md, "labels", json_pack("{s:s}", SNAP_LABEL_MANAGED_BY, node));
	}
	return json_pack("{s:s,s:s,s:o,s:o}", "apiVersion", SNAP_API_VERSION, "kind",
			 "VolumeSnapshotContent", "metadata", md, "spec", spec);
}

/* upstream's ensurePVCFinalizer: the claim stays until its snapshot is cut. */
static int ensure_claim_finalizer(struct sctrl *c, const struct kube_pvc *pvc, char *err,
				  size_t errlen)
{
	struct kube_err ke;

	if (pvc->meta.deletion_ts) {
		snprintf(err, errlen, "%s: cannot add finalizer on claim because it is being deleted",
			 pvc->meta.name);
		return -1;
	}
	if (kube_obj_has_finalizer(&pvc->meta, SNAP_FIN_PVC))
		return 0;
	if (snap_patch_finalizers(c->kc, &pvc->meta, NULL, NULL, SNAP_FIN_PVC, &ke)) {
		snprintf(err, errlen, "%s", ke.message);
		return -1;
	}
	return 0;
}

/* Everything createSnapshotContent needs; 0, or -1 with err worded as upstream. */
static int create_input(struct sctrl *c, const struct kube_vs *vs, const struct kube_vsclass *cls,
			struct kube_obj **pvco, struct kube_obj **pvo, char *err, size_t errlen)
{
	char why[512];
	const struct kube_pvc *pvc;

	*pvco = sctrl_get(c, INF_PVC, vs->meta.ns, vs->source_pvc);
	pvc = kube_pvc_of(*pvco);
	*pvo = pvc ? sctrl_get(c, INF_PV, NULL, pvc->volume_name) : NULL;
	int src = snap_check_source(vs, pvc, kube_pv_of(*pvo), why, sizeof(why));
	if (src == 0 && cls)
		return 0;
	if (src == 0)
		snprintf(why, sizeof(why), "failed to take snapshot %s without a snapshot class",
			 vs->meta.name);
	snprintf(err, errlen, "failed to get input parameters to create snapshot %s: \"%s\"",
		 vs->meta.name, why);
	return -1;
}

static int create_content(struct sctrl *c, const struct kube_vs *vs, const struct kube_vsclass *cls)
{
	char name[128], err[700], sname[256], sns[128], key[512];
	struct kube_obj *pvco = NULL, *pvo = NULL;
	struct kube_err ke;
	int rc = RETRY;

	snap_content_name(vs, name, sizeof(name));
	vs_key(vs, key, sizeof(key));
	KLOG_I("createSnapshotContent: Creating content for snapshot %s through the plugin ...", key);
	if (create_input(c, vs, cls, &pvco, &pvo, err, sizeof(err)) ||
	    ensure_claim_finalizer(c, kube_pvc_of(pvco), err, sizeof(err)))
		goto fail;
	int ref = snap_secret_ref(SNAP_SECRET_CREATE, cls->parameters, cls->nparameters, name,
				  vs->meta.name, vs->meta.ns, sname, sizeof(sname), sns, sizeof(sns),
				  err, sizeof(err));
	if (ref < 0)
		goto fail;
	json_t *obj = content_json(c, vs, cls, kube_pv_of(pvo), name, ref ? sname : NULL, sns);
	char *body = json_dumps(obj, JSON_COMPACT);
	json_decref(obj);
	int cr = kube_create_discard(c->kc, &KUBE_RES_VOLUMESNAPSHOTCONTENTS, NULL, body, &ke);
	free(body);
	if (cr && !kube_err_is_already_exists(&ke)) {
		snprintf(err, sizeof(err), "Error creating volume snapshot content object for snapshot %.200s: %.400s.",
			 key, ke.message);
		KLOG_E("%s", err);
		snap_event(c->o.recorder, &vs->meta, true, "CreateSnapshotContentFailed", "%s", err);
		goto fail;
	}
	KLOG_V(3, "volume snapshot content %s for snapshot %s %s", name, key,
	       cr ? "already exists, reusing" : "saved");
	snap_event(c->o.recorder, &vs->meta, false, "CreatingSnapshot",
		   "Waiting for a snapshot %s to be created by the CSI driver.", key);
	/* Bound at once, not ready: the content's status fills the rest. */
	json_t *patch = json_pack("{s:{s:s,s:b}}", "status", "boundVolumeSnapshotContentName", name,
				  "readyToUse", 0);
	body = json_dumps(patch, JSON_COMPACT);
	json_decref(patch);
	if (snap_patch(c->kc, &vs->meta, true, body, &ke)) {
		snprintf(err, sizeof(err), "Snapshot status update failed, %s", ke.message);
		simple_error(c, vs, "SnapshotStatusUpdateFailed", false, err);
	} else {
		rc = DONE;
	}
	free(body);
	goto out;
fail: {
	char msg[800];
	snprintf(msg, sizeof(msg), "Failed to create snapshot content with error %s", err);
	simple_error(c, vs, "SnapshotContentCreationFailed", false, msg);
}
out:
	kube_obj_unref(pvco);
	kube_obj_unref(pvo);
	return rc;
}

/* ---- the class of a snapshot ---- */

/* Names the default class when the snapshot has none: 1 patched, 0 nothing to do, -1 error. */
static int set_default_class(struct sctrl *c, const struct kube_vs *vs)
{
	struct kube_obj *pvco = sctrl_get(c, INF_PVC, vs->meta.ns, vs->source_pvc), *pvo = NULL;
	const struct kube_pvc *pvc = kube_pvc_of(pvco);
	char err[512], msg[600];
	struct kube_err ke;
	size_t n = 0;
	int rc = -1;

	pvo = pvc ? sctrl_get(c, INF_PV, NULL, pvc->volume_name) : NULL;
	struct kube_obj **all = kube_store_list(kube_informer_store(c->inf[INF_CLASS]), &n);
	const struct kube_vsclass *def = NULL;
	if (snap_check_source(vs, pvc, kube_pv_of(pvo), err, sizeof(err)) == 0)
		def = snap_default_class((const struct kube_vsclass *const *)all, n,
					 kube_pv_of(pvo)->driver, err, sizeof(err));
	if (def) {
		char body[600];
		snprintf(body, sizeof(body), "{\"spec\":{\"volumeSnapshotClassName\":\"%s\"}}",
			 def->meta.name);
		rc = snap_patch(c->kc, &vs->meta, false, body, &ke) ? -1 : 1;
		if (rc < 0)
			snprintf(err, sizeof(err), "%s", ke.message);
		else
			KLOG_V(5, "setDefaultSnapshotClass [%s]: default VolumeSnapshotClassName [%s]",
			       vs->meta.name, def->meta.name);
	}
	if (rc < 0) {
		snprintf(msg, sizeof(msg), "Failed to set default snapshot class with error %s", err);
		simple_error(c, vs, "SetDefaultSnapshotClassFailed", true, msg);
	}
	kube_objs_free(all, n);
	kube_obj_unref(pvco);
	kube_obj_unref(pvo);
	return rc;
}

/* ---- one snapshot ---- */

/* A group member: upstream's test (an ownerReference to a VolumeGroupSnapshot), or the
 * finalizer the group's sync gives it. */
static bool group_member(const struct kube_vs *vs)
{
	return vs->owner_group || kube_obj_has_finalizer(&vs->meta, SNAP_FIN_IN_GROUP);
}

/*
 * A member deleted alone waits for its group, as upstream: SnapshotDeletePending while the
 * group lives (its deletion deletes the members and drops their in-group finalizer); with the
 * group gone or going, the in-group finalizer goes here. DONE/RETRY/AGAIN when it acted, -1
 * when the usual deletion proceeds.
 */
static int member_deleting(struct sctrl *c, const struct kube_vs *vs)
{
	const char *gname = vs->group_name ? vs->group_name : vs->owner_group;
	struct kube_obj *go = gname && c->inf[INF_VGS] ? sctrl_get(c, INF_VGS, vs->meta.ns, gname)
						       : NULL;
	struct kube_err ke;
	char key[512];
	int rc = -1;

	if (go && !go->deletion_ts) {
		vs_key(vs, key, sizeof(key));
		snap_event(c->o.recorder, &vs->meta, true, "SnapshotDeletePending",
			   "deletion of the individual volume snapshot %s is not allowed as it belongs "
			   "to group snapshot %s/%s. Deleting the group snapshot will trigger the "
			   "deletion of all the individual volume snapshots that are part of the "
			   "group.", key, vs->meta.ns, gname);
		rc = RETRY;
	} else if (!go && kube_obj_has_finalizer(&vs->meta, SNAP_FIN_IN_GROUP)) {
		rc = snap_patch_finalizers(c->kc, &vs->meta, SNAP_FIN_IN_GROUP, NULL, NULL, &ke)
			     ? (kube_err_is_conflict(&ke) ? AGAIN : RETRY)
			     : DONE;
	}
	kube_obj_unref(go);
	return rc;
}

static int sync_deleting(struct sctrl *c, const struct kube_vs *vs)
{
	char name[128], key[512];
	struct snap_deletion d;
	struct kube_err ke;
	size_t n = 0;
	const char *cname = vs->bound_content;

	if (!cname && !vs->source_content) {
		snap_content_name(vs, name, sizeof(name));
		cname = name;
	}
	char uid[64], drv[256];
	sctrl_opm_start(c->opm, SCTRL_OP_DELETE, kube_obj_uid(&vs->meta, uid, sizeof(uid)),
			snapshot_driver(c, vs, drv, sizeof(drv)), vs->source_content != NULL);
	struct kube_obj *co = sctrl_get(c, INF_VSC, NULL, cname);
	struct kube_obj **claims = kube_store_by_index(kube_informer_store(c->inf[INF_PVC]), "ns",
						       vs->meta.ns ? vs->meta.ns : "", &n);
	bool restoring = snap_restoring(vs, (const struct kube_pvc *const *)claims, n);
	kube_objs_free(claims, n);
	const struct kube_vsc *content = kube_vsc_of(co);
	int rc = DONE;

	if (group_member(vs) && (rc = member_deleting(c, vs)) >= 0)
		goto out;
	rc = DONE;
	snap_plan_deletion(vs, content, restoring, &d);
	vs_key(vs, key, sizeof(key));
	if (d.pending) {
		snap_event(c->o.recorder, &vs->meta, true, "SnapshotDeletePending",
			   "Snapshot is being used to restore a PVC");
		goto out;
	}
	if (d.annotate_content &&
	    snap_patch_annotation(c->kc, &content->meta, SNAP_ANN_BEING_DELETED, "yes", &ke)) {
		KLOG_ERR(ke.message, "failed to set %s on content %s",
			 SNAP_ANN_BEING_DELETED, cname);
		rc = RETRY;
		goto out;
	}
	if (d.delete_content &&
	    kube_delete(c->kc, &KUBE_RES_VOLUMESNAPSHOTCONTENTS, NULL, cname, NULL, NULL, &ke) &&
	    !kube_err_is_not_found(&ke)) {
		snap_event(c->o.recorder, &vs->meta, true, "SnapshotContentObjectDeleteError",
			   "Failed to delete snapshot content API object");
		rc = RETRY;
		goto out;
	}
	if ((d.remove_source || d.remove_bound) &&
	    snap_patch_finalizers(c->kc, &vs->meta, d.remove_source ? SNAP_FIN_SOURCE : NULL,
				  d.remove_bound ? SNAP_FIN_BOUND : NULL, NULL, &ke))
		rc = kube_err_is_conflict(&ke) ? AGAIN : kube_err_is_not_found(&ke) ? DONE : RETRY;
out:
	kube_obj_unref(co);
	return rc;
}

static int add_finalizers(struct sctrl *c, const struct kube_vs *vs, const struct kube_vsc *content)
{
	bool source, bound;
	struct kube_err ke;

	/* a member gets no bound finalizer: upstream looks for it under snapcontent-<its uid>, which
	 * a member's content is not named, so finds none */
	snap_finalizers_needed(vs, content && snap_ref_is(content, vs) && !group_member(vs) ? content
											   : NULL,
			       &source, &bound);
	if (!source && !bound)
		return -1;
	/* One write per sync: the second finalizer comes with the echo of the first. */
	if (snap_patch_finalizers(c->kc, &vs->meta, NULL, NULL,
				  source ? SNAP_FIN_SOURCE : SNAP_FIN_BOUND, &ke) == 0)
		return DONE;
	if (kube_err_is_conflict(&ke))
		return AGAIN;
	snap_event(c->o.recorder, &vs->meta, true, "SnapshotFinalizerError",
		   "Failed to check and update snapshot: %s", ke.message);
	return RETRY;
}

/* upstream's checkandBindSnapshotContent: the uid (and class) written into the content. */
static int bind_content(struct sctrl *c, const struct kube_vs *vs, const struct kube_vsc *content)
{
	char uid[64], body[700], msg[800];
	struct kube_err ke;

	if (vs->class_name && !content->class_name)
		snprintf(body, sizeof(body),
			 "{\"spec\":{\"volumeSnapshotRef\":{\"uid\":\"%s\"},\"volumeSnapshotClassName\":\"%s\"}}",
			 kube_obj_uid(&vs->meta, uid, sizeof(uid)), vs->class_name);
	else
		snprintf(body, sizeof(body), "{\"spec\":{\"volumeSnapshotRef\":{\"uid\":\"%s\"}}}",
			 kube_obj_uid(&vs->meta, uid, sizeof(uid)));
	if (snap_patch(c->kc, &content->meta, false, body, &ke) == 0)
		return DONE;
	snprintf(msg, sizeof(msg), "Snapshot failed to bind VolumeSnapshotContent, %s", ke.message);
	simple_error(c, vs, "SnapshotBindFailed", false, msg);
	return RETRY;
}

static int sync_unready(struct sctrl *c, const struct kube_vs *vs, const struct kube_vsc *content,
			const struct kube_vsclass *cls)
{
	struct snap_error e = { 0 };
	char uid[64], drv[256];

	/* upstream's syncUnreadySnapshot starts the create operations (once each) */
	kube_obj_uid(&vs->meta, uid, sizeof(uid));
	snprintf(drv, sizeof(drv), "%s", cls && cls->driver ? cls->driver :
		 content && content->driver ? content->driver : "");
	if (!vs->creation_time)
		sctrl_opm_start(c->opm, SCTRL_OP_CREATE, uid, drv, vs->source_content != NULL);
	sctrl_opm_start(c->opm, SCTRL_OP_CREATE_READY, uid, drv, vs->source_content != NULL);

	if (vs->source_content) {
		switch (snap_check_preprovisioned(vs, content, &e)) {
		case SNAP_BIND_NEEDED:
			return bind_content(c, vs, content);
		case SNAP_BIND_OK:
			return update_status(c, vs, content);
		default:
			status_error(c, vs, &e);
			return RETRY;
		}
	}
	if (!content)
		return create_content(c, vs, cls);
	if (snap_check_dynamic(vs, content, &e)) {
		KLOG_V(4, "%s", e.message);
		status_error(c, vs, &e);
		return RETRY;
	}
	return update_status(c, vs, content);
}

static int sync_vs(struct sctrl *c, const struct kube_vs *vs)
{
	struct kube_obj *clo = NULL, *co = NULL;
	const char *msg;
	char name[128];
	int rc;

	/* a member of a group snapshot: its content is made by the group's sync, pre-bound */
	bool member = group_member(vs);

	if (vs->meta.deletion_ts)
		return sync_deleting(c, vs);
	if ((msg = snap_validate_vs(vs))) {
		KLOG_E("syncSnapshot[%s/%s]: validation error, %s", vs->meta.ns, vs->meta.name, msg);
		simple_error(c, vs, "SnapshotValidationError", false, msg);
		return RETRY;
	}
	if (vs->class_name) {
		clo = sctrl_get(c, INF_CLASS, NULL, vs->class_name);
		if (!clo) {
			char m[600];
			snprintf(m, sizeof(m), "Failed to get snapshot class with error failed to retrieve "
				 "snapshot class %s from the informer: \"volumesnapshotclass.snapshot.storage.k8s.io \\\"%s\\\" not found\"",
				 vs->class_name, vs->class_name);
			simple_error(c, vs, "GetSnapshotClassFailed", true, m);
			return RETRY;
		}
	} else if (vs->source_pvc && !member) {
		return set_default_class(c, vs) < 0 ? RETRY : DONE;
	}
	if (member && !vs->bound_content)
		return DONE; /* the group's sync names its content next */
	if (vs->source_content) {
		co = sctrl_get(c, INF_VSC, NULL, vs->source_content);
	} else if (member) {
		co = sctrl_get(c, INF_VSC, NULL, vs->bound_content);
	} else {
		snap_content_name(vs, name, sizeof(name));
		co = sctrl_get(c, INF_VSC, NULL, name);
	}
	const struct kube_vsc *content = kube_vsc_of(co);
	rc = add_finalizers(c, vs, content);
	if (rc >= 0)
		goto out;
	if (vs->ready == KUBE_COND_TRUE && vs->bound_content) {
		struct snap_error e = { 0 };
		struct kube_obj *bo = sctrl_get(c, INF_VSC, NULL, vs->bound_content);
		if (!snap_check_ready(vs, kube_vsc_of(bo), &e))
			status_error(c, vs, &e);
		kube_obj_unref(bo);
		rc = DONE;
		goto out;
	}
	rc = sync_unready(c, vs, content, kube_vsclass_of(clo));
out:
	kube_obj_unref(co);
	kube_obj_unref(clo);
	return rc;
}

static enum kube_work_result vs_work(void *arg, const char *key)
{
	struct sctrl *c = arg;
	struct kube_obj *o = sctrl_get_key(c, INF_VS, key);
	const struct kube_vs *vs = kube_vs_of(o);
	int rc = vs ? sync_vs(c, vs) : DONE;
	kube_obj_unref(o);
	return (enum kube_work_result)rc;
}

/* ---- one content ---- */

static enum kube_work_result vsc_work(void *arg, const char *key)
{
	struct sctrl *c = arg;
	struct kube_obj *o = sctrl_get(c, INF_VSC, NULL, key), *so = NULL;
	const struct kube_vsc *vsc = kube_vsc_of(o);
	struct kube_err ke;
	int rc = DONE;

	if (!vsc)
		goto out;
	so = vsc->ref_ns ? sctrl_get(c, INF_VS, vsc->ref_ns, vsc->ref_name) : NULL;
	switch (snap_plan_content(vsc, kube_vs_of(so))) {
	case SNAP_VSC_INVALID:
		KLOG_E("syncContent[%s]: validation error, %s", key, snap_validate_vsc(vsc));
		snap_event(c->o.recorder, o, true, "ContentValidationError", "%s",
			   snap_validate_vsc(vsc));
		rc = RETRY;
		break;
	case SNAP_VSC_ADD_FINALIZER:
		if (snap_patch_finalizers(c->kc, o, NULL, NULL, SNAP_FIN_CONTENT, &ke))
			rc = kube_err_is_conflict(&ke) ? AGAIN : RETRY;
		break;
	case SNAP_VSC_ANNOTATE_DELETE:
		if (snap_patch_annotation(c->kc, o, SNAP_ANN_BEING_DELETED, "yes", &ke))
			rc = RETRY;
		break;
	case SNAP_VSC_NOTHING:
		break;
	}
out:
	kube_obj_unref(so);
	kube_obj_unref(o);
	return (enum kube_work_result)rc;
}

/* ---- one claim: release pvc-as-source-protection once no snapshot of it waits ---- */

static enum kube_work_result claim_work(void *arg, const char *key)
{
	struct sctrl *c = arg;
	struct kube_err ke;
	size_t n = 0;
	int rc = DONE;
	struct kube_obj *o = sctrl_get_key(c, INF_PVC, key);
	const struct kube_pvc *pvc = kube_pvc_of(o);
	if (!pvc || !kube_obj_has_finalizer(o, SNAP_FIN_PVC))
		goto out;
	struct kube_obj **snaps = kube_store_by_index(kube_informer_store(c->inf[INF_VS]), "claim",
						      key, &n);
	bool in_use = snap_claim_in_use(pvc, (const struct kube_vs *const *)snaps, n, NULL);
	kube_objs_free(snaps, n);
	if (!in_use && snap_patch_finalizers(c->kc, o, SNAP_FIN_PVC, NULL, NULL, &ke))
		rc = kube_err_is_conflict(&ke) ? AGAIN : RETRY;
out:
	kube_obj_unref(o);
	return (enum kube_work_result)rc;
}

/* ---- life cycle ---- */

struct sctrl *sctrl_new(struct kube_client *kc, const struct sctrl_opts *o)
{
	struct sctrl *c = xcalloc(1, sizeof(*c));
	static const struct kube_kind *const kinds[NINF] = {
		&KUBE_KIND_VOLUMESNAPSHOT, &KUBE_KIND_VOLUMESNAPSHOTCONTENT,
		&KUBE_KIND_VOLUMESNAPSHOTCLASS, &KUBE_KIND_PERSISTENTVOLUMECLAIM,
		&KUBE_KIND_PERSISTENTVOLUME, &KUBE_KIND_NODE_T, &KUBE_KIND_VOLUMEGROUPSNAPSHOT,
		&KUBE_KIND_VOLUMEGROUPSNAPSHOTCONTENT, &KUBE_KIND_VOLUMEGROUPSNAPSHOTCLASS,
	};

	c->o = *o;
	c->kc = kc;
	pthread_mutex_init(&c->mu, NULL);
	c->opm = sctrl_opm_new();
	for (int i = 0; i < NINF; i++) {
		if ((i == INF_NODE && !o->distributed) || (i >= INF_VGS && !o->groups))
			continue;
		struct kube_informer_opts io = { .kind = kinds[i], .resync_ns = o->resync_ns };
		c->inf[i] = kube_informer_new(kc, &io);
	}
	kube_informer_add_index(c->inf[INF_VS], "claim", by_claim);
	kube_informer_add_index(c->inf[INF_PVC], "ns", by_namespace);
	struct kube_handlers vh = { on_vs_add, on_vs_update, on_vs_delete, c };
	struct kube_handlers ch = { on_vsc_add, on_vsc_update, on_vsc_delete, c };
	struct kube_handlers ph = { on_pvc_add, on_pvc_update, NULL, c };
	kube_informer_add_handlers(c->inf[INF_VS], &vh);
	kube_informer_add_handlers(c->inf[INF_VSC], &ch);
	kube_informer_add_handlers(c->inf[INF_PVC], &ph);
	/* Queue names as upstream's, for the workqueue metrics' name label. */
	c->vsq = kube_workqueue_new("snapshot-controller-snapshot", o->retry_start_ns, o->retry_max_ns);
	c->vscq = kube_workqueue_new("snapshot-controller-content", o->retry_start_ns, o->retry_max_ns);
	c->claimq = kube_workqueue_new("snapshot-controller-claim", o->retry_start_ns, o->retry_max_ns);
	if (o->groups) {
		c->vgsq = kube_workqueue_new("snapshot-controller-group-snapshot", o->retry_start_ns,
					     o->retry_max_ns);
		sctrl_group_handlers(c);
	}
	return c;
}

int sctrl_start(struct sctrl *c, char *err, size_t errlen)
{
	char why[200];

	struct kube_stop stop = { .mu = &c->mu, .flag = &c->stop };

	if (kube_informers_start(c->inf, NINF, err, errlen))
		return -1;
	KLOG_I("Starting snapshot controller");
	if (kube_informers_wait_synced(c->inf, NINF, "the snapshot controller's caches", &stop, 0, err,
				       errlen))
		return -1;
	malloc_trim(0);
	struct kube_serve serve[] = { { c->vsq, c->o.workers, vs_work, c },
				      { c->vscq, c->o.workers, vsc_work, c },
				      { c->claimq, c->o.workers, claim_work, c },
				      { c->vgsq, c->o.workers, sctrl_group_work, c } };
	/* --worker-threads 0 (or less) serves no queue: upstream's loop then starts no worker. */
	if (c->o.workers > 0 &&
	    kube_workqueue_serve(serve, c->vgsq ? 4 : 3, KUBE_WORKER_IDLE_NS, why, sizeof(why))) {
		snprintf(err, errlen, "%s (-worker-threads=%d)", why, c->o.workers);
		sctrl_stop(c);
		return -1;
	}
	return 0;
}

void sctrl_stop(struct sctrl *c)
{
	pthread_mutex_lock(&c->mu);
	c->stop = true;
	pthread_mutex_unlock(&c->mu);
	kube_informers_stop(c->inf, NINF);
	struct kube_workqueue *qs[] = { c->vsq, c->vscq, c->claimq, c->vgsq };
	int nq = c->vgsq ? 4 : 3;
	for (int i = 0; i < nq; i++)
		kube_workqueue_shutdown(qs[i]);
	for (int i = 0; i < nq; i++)
		kube_workqueue_wait_workers(qs[i]);
	KLOG_I("Shutting down snapshot controller");
}

void sctrl_free(struct sctrl *c)
{
	if (!c)
		return;
	for (int i = 0; i < NINF; i++)
		if (c->inf[i])
			kube_informer_free(c->inf[i]);
	kube_workqueue_free(c->vsq);
	kube_workqueue_free(c->vscq);
	kube_workqueue_free(c->claimq);
	if (c->vgsq)
		kube_workqueue_free(c->vgsq);
	pthread_mutex_destroy(&c->mu);
	sctrl_opm_free(c->opm);
	free(c);
}

void sctrl_render_metrics(struct sctrl *c, struct strbuf *out)
{
	struct kube_workqueue *qs[] = { c->vsq, c->vscq, c->claimq, c->vgsq };

	kube_workqueue_render_metrics(qs, c->vgsq ? 4 : 3, out);
	sctrl_opm_render(c->opm, out);
}
