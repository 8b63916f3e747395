/*
 * csi-snapshotter's group contents: for each VolumeGroupSnapshotContent of our driver the step
 * snap_plan_group_sidecar() picks, with the CSI call and the content writes around it.
 * CreateVolumeGroupSnapshot is idempotent by name (from the group snapshot's uid), so a
 * content not ready yet is asked again with the queue's backoff, which is the polling. A
 * pre-provisioned content (spec.source.groupSnapshotHandles) is asked about with
 * GetVolumeGroupSnapshot the same way.
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

static const char *driver_of(const struct kube_obj *o)
{
	const struct kube_vgsc *c = kube_vgsc_of(o);

	return c ? c->driver : NULL;
}

static bool wanted(const struct kube_obj *old, const struct kube_obj *o)
{
	const struct kube_vgsc *a = kube_vgsc_of(old), *b = kube_vgsc_of(o);

	return !a || !b || snap_group_sidecar_update_wanted(a, b);
}

void snapper_group_new(struct snapper *s)
{
	struct kube_informer_opts vo = { .kind = &KUBE_KIND_VOLUMEGROUPSNAPSHOTCONTENT,
					 .resync_ns = s->o.resync_ns };
	struct kube_informer_opts co = { .kind = &KUBE_KIND_VOLUMEGROUPSNAPSHOTCLASS,
					 .resync_ns = s->o.resync_ns };

	s->vgsc_inf = kube_informer_new(s->kc, &vo);
	s->vgsclass_inf = kube_informer_new(s->kc, &co);
	s->gq = kube_workqueue_new("csi-snapshotter-groupsnapshotcontent", s->o.retry_start_ns,
				   s->o.retry_max_ns);
	s->gwatch = (struct snapper_watch){ s, s->gq, driver_of, wanted };
	snapper_watch(&s->gwatch, s->vgsc_inf);
}

/* upstream's updateGroupSnapshotContentErrorStatusWithEvent: once per new message. */
static void group_error(struct snapper *s, const struct kube_vgsc *c, const char *reason,
			const char *msg)
{
	snap_error_status(s->kc, s->o.recorder, &c->meta, c->error_message, reason, msg);
}

/* The driver's answer as the content's status (v1beta2 and v1: volumeSnapshotInfoList). */
static int write_status(struct snapper *s, const struct kube_vgsc *c,
			const Csi__V1__VolumeGroupSnapshot *g)
{
	char t[64];
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
	json_t *st = json_pack("{s:s,s:s,s:b,s:n}", "volumeGroupSnapshotHandle",
			       g->group_snapshot_id, "creationTime", c->creation_time ? c->creation_time : t,
			       "readyToUse", g->ready_to_use, "error");
	/* v8.7 writes the list only when the driver named members (no empty list) */
	if (json_array_size(list))
		json_object_set_new(st, "volumeSnapshotInfoList", list);
	else
		json_decref(list);
	return snapper_patch_status(s, &c->meta, st, "group snapshot content");
}

/* Parameters, secrets, name and volumes of the request; 0, or -1 with err. */
static int build_create(struct snapper *s, const struct kube_vgsc *c,
			const struct kube_vsclass *cls, struct csi_arena *a,
			Csi__V1__CreateVolumeGroupSnapshotRequest *req, char *err, size_t errlen)
{
	const char *const extra[6] = { SNAP_META_VGS_NAME, c->ref_name, SNAP_META_VGS_NS, c->ref_ns,
				       SNAP_META_VGSC_NAME, c->meta.name };
	char name[256], sname[256], sns[128];

	if (snapper_add_params(s, a, &req->base, cls, extra, err, errlen))
		return -1;
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
	struct kube_err ke;
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
	/* Marked before the call, as upstream: until a final answer the content may not go. */
	if (!c->being_created &&
	    snap_patch_annotation(s->kc, &c->meta, SNAP_GANN_BEING_CREATED, "yes", &ke)) {
		if (kube_err_is_conflict(&ke)) {
			rc = AGAIN;
			goto out;
		}
		snprintf(msg, sizeof(msg), "Failed to create group snapshot: failed to add "
			 "VolumeGroupSnapshotBeingCreated annotation on the group snapshot content "
			 "%s: \"%s\"", c->meta.name, ke.message);
		goto fail;
	}
	KLOG_V(2, "CreateVolumeGroupSnapshot %s of %zu volumes for content %s", req->name,
	       req->n_source_volume_ids, c->meta.name);
	if (csi_create_volume_group_snapshot(s->o.csi, req, &resp, s->o.timeout_ns, &st) != 0) {
		if (snap_csi_final(st.code))
			snap_patch_annotation(s->kc, &c->meta, SNAP_GANN_BEING_CREATED, NULL, &ke);
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
	if (write_status(s, c, gs) == 0 &&
	    snap_patch_annotation(s->kc, &c->meta, SNAP_GANN_BEING_CREATED, NULL, &ke) == 0)
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

/* ---- a pre-provisioned content: GetVolumeGroupSnapshot ---- */

/* The class's group-snapshotter-get secret into req (a content without a class sends none, as
 * upstream); 0, or -1 with err. */
static int get_secrets(struct snapper *s, const struct kube_vgsc *c, struct csi_arena *a,
		       Csi__V1__GetVolumeGroupSnapshotRequest *req, char *err, size_t errlen)
{
	char sname[256], sns[128];

	if (!c->class_name)
		return 0;
	struct kube_obj *hold = kube_store_get(kube_informer_store(s->vgsclass_inf), NULL,
					       c->class_name);
	const struct kube_vsclass *cls = kube_vgsclass_of(hold);
	int rc = -1;
	if (!cls)
		snprintf(err, errlen, "failed to get group snapshot class %s for group snapshot "
			 "content %s: volumegroupsnapshotclass.groupsnapshot.storage.k8s.io \"%s\" "
			 "not found", c->class_name, c->meta.name, c->class_name);
	else
		rc = snap_secret_ref(SNAP_SECRET_GROUP_GET, cls->parameters, cls->nparameters,
				     c->meta.name, NULL, NULL, sname, sizeof(sname), sns, sizeof(sns),
				     err, errlen);
	kube_obj_unref(hold);
	if (rc <= 0)
		return rc;
	return sidecar_add_secrets(s->kc, a, &req->base, "secrets", sns, sname, err, errlen);
}

/*
 * upstream's checkandUpdateGroupSnapshotContentStatusOperation for a content with
 * spec.source.groupSnapshotHandles: the driver's word on the group goes into the status
 * (handle from the spec, readyToUse, creationTime), with no member list, as v8.6 writes it.
 */
static int get_group(struct snapper *s, const struct kube_vgsc *c)
{
	char err[700], g[1024], msg[1100], t[64];
	struct csi_arena *a = csi_arena_new();
	Csi__V1__GetVolumeGroupSnapshotRequest *req =
		csi_msg_new(a, &csi__v1__get_volume_group_snapshot_request__descriptor);
	Csi__V1__GetVolumeGroupSnapshotResponse *resp = NULL;
	struct csi_status st = { 0 };
	int rc = RETRY;

	req->group_snapshot_id = csi_arena_strdup(a, c->group_handle);
	for (size_t i = 0; i < c->nsnapshot_handles; i++)
		csi_repeated_add(a, &req->base, "snapshot_ids",
				 csi_arena_strdup(a, c->snapshot_handles[i]));
	if (get_secrets(s, c, a, req, err, sizeof(err))) {
		snprintf(msg, sizeof(msg), "Failed to check and update group snapshot content: %s", err);
		goto fail;
	}
	KLOG_V(2, "GetVolumeGroupSnapshot %s of %zu snapshots for content %s", req->group_snapshot_id,
	       req->n_snapshot_ids, c->meta.name);
	if (csi_get_volume_group_snapshot(s->o.csi, req, &resp, s->o.timeout_ns, &st) != 0) {
		snap_grpc_error(st.code, st.message, g, sizeof(g));
		snprintf(msg, sizeof(msg), "Failed to check and update group snapshot content: %.900s", g);
		goto fail;
	}
	const Csi__V1__VolumeGroupSnapshot *gs = resp->group_snapshot;
	bool ready = gs && gs->ready_to_use;
	snap_time_text(snap_csi_time_ns(gs ? gs->creation_time : NULL), t, sizeof(t));
	json_t *stj = json_pack("{s:s,s:b,s:n}", "volumeGroupSnapshotHandle", c->group_handle,
				"readyToUse", ready, "error");
	if (!c->creation_time)
		json_object_set_new(stj, "creationTime", json_string(t));
	if (snapper_patch_status(s, &c->meta, stj, "group snapshot content") == 0)
		rc = ready ? DONE : RETRY;
	goto out;
fail:
	group_error(s, c, "GroupSnapshotContentCheckandUpdateFailed", msg);
out:
	csi_msg_free(resp);
	csi_arena_free(a);
	return rc;
}

/* ---- deletion ---- */

/* The members' IDs: the status list of a dynamic content, the spec's of a pre-provisioned one. */
static void fill_delete(ProtobufCMessage *msg, struct csi_arena *a, const void *ud)
{
	const struct kube_vgsc *c = ud;
	Csi__V1__DeleteVolumeGroupSnapshotRequest *req = (Csi__V1__DeleteVolumeGroupSnapshotRequest *)msg;

	req->group_snapshot_id = csi_arena_strdup(a, c->status_handle);
	for (size_t i = 0; i < c->nmembers; i++)
		if (c->members[i].snapshot_handle)
			csi_repeated_add(a, &req->base, "snapshot_ids",
					 csi_arena_strdup(a, c->members[i].snapshot_handle));
	for (size_t i = 0; !c->nmembers && i < c->nsnapshot_handles; i++)
		csi_repeated_add(a, &req->base, "snapshot_ids",
				 csi_arena_strdup(a, c->snapshot_handles[i]));
}

static int call_delete(struct snapper *s, ProtobufCMessage *msg, const void *ud,
		       struct csi_status *st)
{
	const struct kube_vgsc *c = ud;
	Csi__V1__DeleteVolumeGroupSnapshotRequest *req = (Csi__V1__DeleteVolumeGroupSnapshotRequest *)msg;
	Csi__V1__DeleteVolumeGroupSnapshotResponse *resp = NULL;

	KLOG_V(2, "DeleteVolumeGroupSnapshot %s for content %s", req->group_snapshot_id,
	       c->meta.name);
	int rc = csi_delete_volume_group_snapshot(s->o.csi, req, &resp, s->o.timeout_ns, st);
	csi_msg_free(resp);
	return rc;
}

static int delete_group(struct snapper *s, const struct kube_vgsc *c)
{
	struct snapper_delete d = {
		.meta = &c->meta, .what = "group snapshot", .clear_what = "group snapshot ",
		.reason = "GroupSnapshotDeleteError",
		.secret_ns = c->deletion_secret_ns, .secret_name = c->deletion_secret_name,
		.request = &csi__v1__delete_volume_group_snapshot_request__descriptor,
		.fill = fill_delete, .call = call_delete,
		.clear_status = "{\"status\":{\"volumeGroupSnapshotHandle\":null,\"readyToUse\":null}}",
		.ud = c,
	};

	return snapper_delete(s, &d);
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
	if (!c->has_status && snap_plan_group_sidecar(c) == SNAP_GSC_CREATE) {
		o = snapper_fresh(s, o, &KUBE_RES_VOLUMEGROUPSNAPSHOTCONTENTS,
				  &KUBE_KIND_VOLUMEGROUPSNAPSHOTCONTENT);
		c = kube_vgsc_of(o);
	}
	switch (snap_plan_group_sidecar(c)) {
	case SNAP_GSC_ADD_FINALIZER:
		if (snap_patch_finalizers(s->kc, o, NULL, NULL, SNAP_GFIN_CONTENT, &ke))
			rc = snapper_patch_result(&ke);
		break;
	case SNAP_GSC_CREATE:
		rc = create_group(s, c);
		break;
	case SNAP_GSC_GET:
		rc = get_group(s, c);
		break;
	case SNAP_GSC_CLEAR_CREATING:
		if (snap_patch_annotation(s->kc, o, SNAP_GANN_BEING_CREATED, NULL, &ke))
			rc = snapper_patch_result(&ke);
		break;
	case SNAP_GSC_DELETE:
		rc = delete_group(s, c);
		break;
	case SNAP_GSC_REMOVE_FINALIZER:
		if (snap_patch_finalizers(s->kc, o, SNAP_GFIN_CONTENT, NULL, NULL, &ke))
			rc = snapper_patch_result(&ke);
		break;
	case SNAP_GSC_NOTHING:
		break;
	}
out:
	kube_obj_unref(o);
	return (enum kube_work_result)rc;
}
