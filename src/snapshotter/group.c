/*
 * csi-snapshotter's group contents: for each VolumeGroupSnapshotContent of our driver the step
 * snap_plan_group_sidecar() picks, with the CSI call and the content writes around it.
 * CreateVolumeGroupSnapshot is idempotent by name (from the group snapshot's uid), so a
 * content not ready yet is asked again with the queue's backoff, which is the polling.
 */
#include "snapshotter/internal.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/timeutil.h"
#include "csi/msg.h"
#include "snapshots/snapshots.h"

static void changed(struct snapper *s, const struct kube_obj *o)
{
	const struct kube_vgsc *c = kube_vgsc_of(o);

	if (c && c->driver && !strcmp(c->driver, s->o.driver))
		kube_workqueue_add(s->gq, o->name);
}

static void on_add(const struct kube_obj *o, void *ud) { changed(ud, o); }
static void on_update(const struct kube_obj *old, const struct kube_obj *o, void *ud)
{
	(void)old;
	changed(ud, o);
}

void snapper_group_new(struct snapper *s)
{
	struct kube_informer_opts vo = { .kind = &KUBE_KIND_VOLUMEGROUPSNAPSHOTCONTENT,
					 .resync_ns = s->o.resync_ns };
	struct kube_informer_opts co = { .kind = &KUBE_KIND_VOLUMEGROUPSNAPSHOTCLASS,
					 .resync_ns = s->o.resync_ns };
	struct kube_handlers h = { on_add, on_update, NULL, s };

	s->vgsc_inf = kube_informer_new(s->kc, &vo);
	s->vgsclass_inf = kube_informer_new(s->kc, &co);
	kube_informer_add_handlers(s->vgsc_inf, &h);
	s->gq = kube_workqueue_new("csi-snapshotter-groupsnapshotcontent", s->o.retry_start_ns,
				   s->o.retry_max_ns);
}

/* upstream's updateGroupSnapshotContentErrorStatusWithEvent: once per new message. */
static void group_error(struct snapper *s, const struct kube_vgsc *c, const char *reason,
			const char *msg)
{
	snap_error_status(s->kc, s->o.recorder, &c->meta, c->error_message, reason, msg);
}

/* The driver's answer as the content's status (v1beta2: volumeSnapshotInfoList). */
static int write_status(struct snapper *s, const struct kube_vgsc *c,
			const Csi__V1__VolumeGroupSnapshot *g)
{
	char t[64];
	struct kube_err ke;
	json_t *list = json_array();

	for (size_t i = 0; i < g->n_snapshots; i++) {
		const Csi__V1__Snapshot *m = g->snapshots[i];
		json_array_append_new(list, json_pack("{s:s,s:s,s:b,s:I,s:I}", "volumeHandle",
						      m->source_volume_id ? m->source_volume_id : "",
						      "snapshotHandle", m->snapshot_id ? m->snapshot_id : "",
						      "readyToUse", m->ready_to_use, "restoreSize",
						      (json_int_t)m->size_bytes, "creationTime",
						      (json_int_t)snap_csi_time_ns(m->creation_time)));
	}
	snap_time_text(snap_csi_time_ns(g->creation_time), t, sizeof(t));
	json_t *patch = json_pack("{s:{s:s,s:s,s:b,s:o,s:n}}", "status", "volumeGroupSnapshotHandle",
				  g->group_snapshot_id, "creationTime", c->creation_time ? c->creation_time : t,
				  "readyToUse", g->ready_to_use, "volumeSnapshotInfoList", list, "error");
	char *body = json_dumps(patch, JSON_COMPACT);
	int rc = snap_patch(s->kc, &c->meta, true, body, &ke);
	free(body);
	json_decref(patch);
	if (rc)
		KLOG_E("error updating status for group snapshot content %s: %s", c->meta.name,
		       ke.message);
	return rc;
}

/* Parameters, secrets, name and volumes of the request; 0, or -1 with err. */
static int build_create(struct snapper *s, const struct kube_vgsc *c,
			const struct kube_vsclass *cls, struct csi_arena *a,
			Csi__V1__CreateVolumeGroupSnapshotRequest *req, char *err, size_t errlen)
{
	struct kube_kv params[cls->nparameters + 1];
	char name[256], sname[256], sns[128];
	int n = snap_csi_params(cls->parameters, cls->nparameters, params, err, errlen);

	if (n < 0)
		return -1;
	for (int i = 0; i < n; i++)
		csi_map_add(a, &req->base, "parameters", params[i].key, params[i].value);
	if (s->o.extra_create_metadata) {
		csi_map_add(a, &req->base, "parameters", SNAP_META_VGS_NAME, c->ref_name ? c->ref_name : "");
		csi_map_add(a, &req->base, "parameters", SNAP_META_VGS_NS, c->ref_ns ? c->ref_ns : "");
		csi_map_add(a, &req->base, "parameters", SNAP_META_VGSC_NAME, c->meta.name);
	}
	if (snap_csi_name(s->o.group_prefix, c->ref_uid, s->o.group_uuid_length, name,
			  sizeof(name), err, errlen))
		return -1;
	req->name = csi_arena_strdup(a, name);
	for (size_t i = 0; i < c->nvolume_handles; i++)
		csi_repeated_add(a, &req->base, "source_volume_ids",
				 csi_arena_strdup(a, c->volume_handles[i]));
	int ref = snap_secret_ref(SNAP_SECRET_GROUP, cls->parameters, cls->nparameters,
				  c->meta.name, c->ref_name, c->ref_ns, sname, sizeof(sname), sns,
				  sizeof(sns), err, errlen);
	if (ref <= 0)
		return ref;
	return sidecar_add_secrets(s->kc, a, &req->base, "secrets", sns, sname, err, errlen);
}

static int create_group(struct snapper *s, const struct kube_vgsc *c)
{
	char err[900], msg[1100], g[1024];
	struct kube_obj *hold = NULL;
	struct csi_arena *a = csi_arena_new();
	Csi__V1__CreateVolumeGroupSnapshotRequest *req =
		csi_msg_new(a, &csi__v1__create_volume_group_snapshot_request__descriptor);
	Csi__V1__CreateVolumeGroupSnapshotResponse *resp = NULL;
	struct csi_status st = { 0 };
	int rc = RETRY;

	KLOG_I("createGroupSnapshotWrapper: Creating group snapshot for group snapshot content %s "
	       "through the plugin ...", c->meta.name);
	hold = c->class_name ? kube_store_get(kube_informer_store(s->vgsclass_inf), NULL, c->class_name)
			     : NULL;
	const struct kube_vsclass *cls = kube_vgsclass_of(hold);
	if (!cls || !*c->ref_uid || !c->nvolume_handles) {
		snprintf(msg, sizeof(msg), "Failed to create group snapshot: %s",
			 !cls ? "cannot find the group snapshot class of the content"
			 : !*c->ref_uid ? "the content is not bound to a group snapshot"
					: "the content names no source volumes");
		goto fail;
	}
	if (build_create(s, c, cls, a, req, err, sizeof(err))) {
		snprintf(msg, sizeof(msg), "Failed to create group snapshot: failed to get input "
			 "parameters to create group snapshot for content %s: \"%s\"", c->meta.name, err);
		goto fail;
	}
	KLOG_V(2, "CreateVolumeGroupSnapshot %s of %zu volumes for content %s", req->name,
	       req->n_source_volume_ids, c->meta.name);
	if (csi_create_volume_group_snapshot(s->o.csi, req, &resp, s->o.timeout_ns, &st) != 0) {
		snap_grpc_error(st.code, st.message, g, sizeof(g));
		snprintf(msg, sizeof(msg), "Failed to create group snapshot: failed to take group "
			 "snapshot of the volumes %.200s: \"%.600s\"", c->volume_handles[0], g);
		goto fail;
	}
	const Csi__V1__VolumeGroupSnapshot *gs = resp->group_snapshot;
	if (!gs || !gs->group_snapshot_id || !*gs->group_snapshot_id) {
		snprintf(msg, sizeof(msg), "Failed to create group snapshot: CreateVolumeGroupSnapshot "
			 "of content %s returned no group snapshot ID", c->meta.name);
		goto fail;
	}
	if (write_status(s, c, gs) == 0)
		rc = gs->ready_to_use ? DONE : RETRY;
	goto out;
fail:
	group_error(s, c, "GroupSnapshotCreationFailed", msg);
out:
	csi_msg_free(resp);
	csi_arena_free(a);
	kube_obj_unref(hold);
	return rc;
}

static int delete_group(struct snapper *s, const struct kube_vgsc *c)
{
	char err[600];
	struct csi_arena *a = csi_arena_new();
	Csi__V1__DeleteVolumeGroupSnapshotRequest *req =
		csi_msg_new(a, &csi__v1__delete_volume_group_snapshot_request__descriptor);
	Csi__V1__DeleteVolumeGroupSnapshotResponse *resp = NULL;
	struct csi_status st = { 0 };
	struct kube_err ke;
	int rc = RETRY;

	req->group_snapshot_id = csi_arena_strdup(a, c->status_handle);
	for (size_t i = 0; i < c->nmembers; i++)
		if (c->members[i].snapshot_handle)
			csi_repeated_add(a, &req->base, "snapshot_ids",
					 csi_arena_strdup(a, c->members[i].snapshot_handle));
	if (c->deletion_secret_name && c->deletion_secret_ns &&
	    sidecar_add_secrets(s->kc, a, &req->base, "secrets", c->deletion_secret_ns,
				c->deletion_secret_name, err, sizeof(err))) {
		KLOG_E("failed to get input parameters to delete group snapshot for content %s: %s",
		       c->meta.name, err);
		snap_event(s->o.recorder, &c->meta, true, "GroupSnapshotDeleteError",
			   "Failed to get group snapshot credentials");
		goto out;
	}
	KLOG_V(2, "DeleteVolumeGroupSnapshot %s for content %s", req->group_snapshot_id,
	       c->meta.name);
	if (csi_delete_volume_group_snapshot(s->o.csi, req, &resp, s->o.timeout_ns, &st) != 0) {
		KLOG_E("failed to delete group snapshot %s: %s", c->meta.name, st.message);
		snap_event(s->o.recorder, &c->meta, true, "GroupSnapshotDeleteError",
			   "Failed to delete group snapshot");
		goto out;
	}
	/* Gone from the storage: the handle goes, then the finalizer (next step). */
	if (snap_patch(s->kc, &c->meta, true,
		       "{\"status\":{\"volumeGroupSnapshotHandle\":null,\"readyToUse\":null}}", &ke)) {
		snap_event(s->o.recorder, &c->meta, true, "GroupSnapshotDeleteError",
			   "Failed to clear group snapshot content status");
		goto out;
	}
	rc = DONE;
out:
	csi_msg_free(resp);
	csi_arena_free(a);
	return rc;
}

enum kube_work_result snapper_group_work(void *arg, const char *key)
{
	struct snapper *s = arg;
	struct kube_obj *o = kube_store_get(kube_informer_store(s->vgsc_inf), NULL, key);
	const struct kube_vgsc *c = kube_vgsc_of(o);
	struct kube_err ke;
	int rc = DONE;

	if (!c || !c->driver || strcmp(c->driver, s->o.driver))
		goto out;
	switch (snap_plan_group_sidecar(c)) {
	case SNAP_GSC_ADD_FINALIZER:
		if (snap_patch_finalizers(s->kc, o, NULL, NULL, SNAP_GFIN_CONTENT, &ke))
			rc = kube_err_is_conflict(&ke) ? AGAIN : RETRY;
		break;
	case SNAP_GSC_CREATE:
		rc = create_group(s, c);
		break;
	case SNAP_GSC_DELETE:
		rc = delete_group(s, c);
		break;
	case SNAP_GSC_REMOVE_FINALIZER:
		if (snap_patch_finalizers(s->kc, o, SNAP_GFIN_CONTENT, NULL, NULL, &ke))
			rc = kube_err_is_conflict(&ke) ? AGAIN : kube_err_is_not_found(&ke) ? DONE : RETRY;
		break;
	case SNAP_GSC_NOTHING:
		break;
	}
out:
	kube_obj_unref(o);
	return (enum kube_work_result)rc;
}
