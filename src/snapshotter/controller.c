/*
 * csi-snapshotter's I/O: the content and class informers, one served queue of content names,
 * and for each step snap_plan_sidecar() picks the CSI call and the content writes around it.
 * A content that is not ready yet is requeued with the queue's backoff, which is the polling;
 * the echoes of the sidecar's own writes do not queue it sooner (snap_sidecar_update_wanted()).
 */
#include "snapshotter/snapshotter.h"

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
#include "csi/msg.h"
#include "kube/informer.h"
#include "kube/workqueue.h"
#include "snapshots/snapshots.h"

#include "snapshotter/internal.h"

static const char *driver_of(const struct kube_obj *o)
{
	const struct kube_vsc *c = kube_vsc_of(o);

	return c ? c->driver : NULL;
}

static bool wanted(const struct kube_obj *old, const struct kube_obj *o)
{
	const struct kube_vsc *a = kube_vsc_of(old), *b = kube_vsc_of(o);

	return !a || !b || snap_sidecar_update_wanted(a, b);
}

/* ---- content status writes ---- */

/* upstream's updateContentErrorStatusWithEvent: one write and one event per new message. */
static void content_error(struct snapper *s, const struct kube_vsc *c, const char *reason,
			  const char *msg)
{
	snap_error_status(s->kc, s->o.recorder, &c->meta, c->error_message, reason, msg);
}

/* upstream's updateSnapshotContentStatus: fields already set stay, readyToUse follows. */
static int write_status(struct snapper *s, const struct kube_vsc *c, const char *handle,
			bool ready, int64_t created_ns, int64_t size)
{
	json_t *st = json_object();

	if (!c->status_handle)
		json_object_set_new(st, "snapshotHandle", json_string(handle));
	if (c->ready != (ready ? KUBE_COND_TRUE : KUBE_COND_FALSE)) {
		json_object_set_new(st, "readyToUse", json_boolean(ready));
		if (ready && c->error_message)
			json_object_set_new(st, "error", json_null());
	}
	if (c->creation_time < 0)
		json_object_set_new(st, "creationTime", json_integer(created_ns));
	if (c->restore_size < 0)
		json_object_set_new(st, "restoreSize", json_integer(size));
	return snapper_patch_status(s, &c->meta, st, "volume snapshot content");
}

/* ---- inputs ---- */

static const struct kube_vsclass *class_of(struct snapper *s, const struct kube_vsc *c,
					   struct kube_obj **hold, char *err, size_t errlen)
{
	*hold = c->class_name ? kube_store_get(kube_informer_store(s->class_inf), NULL, c->class_name)
			      : NULL;
	if (c->class_name && !*hold)
		snprintf(err, errlen, "failed to retrieve snapshot class %s from the informer: "
			 "\"volumesnapshotclass.snapshot.storage.k8s.io \\\"%s\\\" not found\"",
			 c->class_name, c->class_name);
	else if (!c->class_name && c->volume_handle)
		snprintf(err, errlen, "failed to take snapshot %s without a snapshot class",
			 c->meta.name);
	else
		return kube_vsclass_of(*hold);
	return NULL;
}

/* Secrets of the class (create or list) into msg; 0 or -1 with err. */
static int class_secrets(struct snapper *s, const struct kube_vsc *c, const struct kube_vsclass *cls,
			 enum snap_secret_kind kind, struct csi_arena *a, ProtobufCMessage *msg,
			 char *err, size_t errlen)
{
	char name[256], ns[128];
	bool create = kind == SNAP_SECRET_CREATE;
	int ref;

	if (!cls)
		return 0;
	ref = snap_secret_ref(kind, cls->parameters, cls->nparameters, c->meta.name,
			      create ? c->ref_name : NULL, create ? c->ref_ns : NULL, name,
			      sizeof(name), ns, sizeof(ns), err, errlen);
	if (ref <= 0)
		return ref;
	return sidecar_add_secrets(s->kc, a, msg, "secrets", ns, name, err, errlen);
}

static int build_create(struct snapper *s, const struct kube_vsc *c, const struct kube_vsclass *cls,
			struct csi_arena *a, Csi__V1__CreateSnapshotRequest *req, char *err,
			size_t errlen)
{
	const char *const extra[6] = { SNAP_META_VS_NAME, c->ref_name, SNAP_META_VS_NS, c->ref_ns,
				       SNAP_META_VSC_NAME, c->meta.name };

	if (snapper_add_params(s, a, &req->base, cls, extra, err, errlen))
		return -1;
	char name[256];
	if (snap_csi_name(s->o.name_prefix, c->ref_uid, s->o.uuid_length, name, sizeof(name), err,
			  errlen))
		return -1;
	req->name = csi_arena_strdup(a, name);
	req->source_volume_id = csi_arena_strdup(a, c->volume_handle);
	return class_secrets(s, c, cls, SNAP_SECRET_CREATE, a, &req->base, err, errlen);
}

/* ---- steps ---- */

/*
 * The being-created annotation, and with it the content's finalizer when the
 * snapshot-controller has not added it yet (a departure: upstream leaves the finalizer to the
 * controller, and a snapshot deleted in that window deletes its content at once while
 * CreateSnapshot runs, leaking the driver's snapshot). Guarded by resourceVersion.
 */
static int mark_creating(struct snapper *s, const struct kube_vsc *c, struct kube_err *e)
{
	if (c->being_created && kube_obj_has_finalizer(&c->meta, SNAP_FIN_CONTENT))
		return 0;
	json_t *fins = json_array();
	for (size_t i = 0; i < c->meta.nfinalizers; i++)
		json_array_append_new(fins, json_string(c->meta.finalizers[i]));
	if (!kube_obj_has_finalizer(&c->meta, SNAP_FIN_CONTENT))
		json_array_append_new(fins, json_string(SNAP_FIN_CONTENT));
	json_t *patch = json_pack("{s:{s:s,s:o,s:{s:s}}}", "metadata", "resourceVersion", c->meta.rv,
				  "finalizers", fins, "annotations", SNAP_ANN_BEING_CREATED, "yes");
	char *body = json_dumps(patch, JSON_COMPACT);
	int rc = snap_patch(s->kc, &c->meta, false, body, e);
	free(body);
	json_decref(patch);
	return rc;
}

static int create_snapshot(struct snapper *s, const struct kube_vsc *c)
{
	char err[900], msg[1100], g[1024];
	struct kube_obj *hold = NULL;
	struct csi_arena *a = csi_arena_new();
	Csi__V1__CreateSnapshotRequest *req = csi_msg_new(a, &csi__v1__create_snapshot_request__descriptor);
	Csi__V1__CreateSnapshotResponse *resp = NULL;
	struct csi_status st = { 0 };
	struct kube_err ke;
	int rc = RETRY;

	KLOG_I("createSnapshotWrapper: Creating snapshot for content %s through the plugin ...",
	       c->meta.name);
	const struct kube_vsclass *cls = class_of(s, c, &hold, err, sizeof(err));
	if (!cls) {
		snprintf(msg, sizeof(msg), "Failed to create snapshot: failed to get input parameters "
			 "to create snapshot for content %s: \"%s\"", c->meta.name, err);
		goto fail;
	}
	if (!*c->ref_uid) {
		snprintf(msg, sizeof(msg), "Failed to create snapshot: cannot create snapshot. "
			 "Snapshot content %s not bound to a snapshot", c->meta.name);
		goto fail;
	}
	if (build_create(s, c, cls, a, req, err, sizeof(err))) {
		snprintf(msg, sizeof(msg), "Failed to create snapshot: failed to get input parameters "
			 "to create snapshot for content %s: \"%s\"", c->meta.name, err);
		goto fail;
	}
	/* Marked before the call: until a final answer the content may not be deleted. */
	if (mark_creating(s, c, &ke)) {
		if (kube_err_is_conflict(&ke)) {
			rc = AGAIN;
			goto out;
		}
		snprintf(msg, sizeof(msg), "Failed to create snapshot: failed to add "
			 "VolumeSnapshotBeingCreated annotation on the content %s: \"%s\"",
			 c->meta.name, ke.message);
		goto fail;
	}
	KLOG_V(2, "CreateSnapshot %s of volume %s for content %s", req->name, req->source_volume_id,
	       c->meta.name);
	if (csi_create_snapshot(s->o.csi, req, &resp, s->o.timeout_ns, &st) != 0) {
		KLOG_I("createSnapshotWrapper: CreateSnapshot for content %s returned error: %s",
		       c->meta.name, st.message);
		if (snap_csi_final(st.code))
			snap_patch_annotation(s->kc, &c->meta, SNAP_ANN_BEING_CREATED, NULL, &ke);
		snap_grpc_error(st.code, st.message, g, sizeof(g));
		snprintf(msg, sizeof(msg), "Failed to create snapshot: failed to take snapshot of the "
			 "volume %s: \"%s\"", c->volume_handle, g);
		goto fail;
	}
	const Csi__V1__Snapshot *snap = resp->snapshot;
	if (!snap || !snap->snapshot_id || !*snap->snapshot_id) {
		snprintf(msg, sizeof(msg), "Failed to create snapshot: CreateSnapshot of content %s "
			 "returned no snapshot ID", c->meta.name);
		goto fail;
	}
	if (write_status(s, c, snap->snapshot_id, snap->ready_to_use,
			 snap_csi_time_ns(snap->creation_time), snap->size_bytes) == 0 &&
	    snap_patch_annotation(s->kc, &c->meta, SNAP_ANN_BEING_CREATED, NULL, &ke) == 0)
		rc = snap->ready_to_use ? DONE : RETRY;
	goto out;
fail:
	content_error(s, c, "SnapshotCreationFailed", msg);
out:
	csi_msg_free(resp);
	csi_arena_free(a);
	kube_obj_unref(hold);
	return rc;
}

/*
 * A group member's secret for ListSnapshots: the one its content's deletion-secret annotations
 * name (snapshot-controller copies the group's there; a member has no class), as upstream's
 * GetCredentialsFromAnnotation. 0 (none, or added), -1 with err.
 */
static int member_secrets(struct snapper *s, const struct kube_vsc *c, struct csi_arena *a,
			  ProtobufCMessage *msg, char *err, size_t errlen)
{
	char e[600];

	if (!c->deletion_secret_name && !c->deletion_secret_ns)
		return 0;
	if (!c->deletion_secret_name || !c->deletion_secret_ns || !*c->deletion_secret_name ||
	    !*c->deletion_secret_ns) {
		snprintf(err, errlen, "failed to get credentials from annotation for snapshot content "
			 "%s: secret name or namespace not specified", c->meta.name);
		return -1;
	}
	if (sidecar_add_secrets(s->kc, a, msg, "secrets", c->deletion_secret_ns,
				c->deletion_secret_name, e, sizeof(e))) {
		snprintf(err, errlen, "failed to get credentials from annotation for snapshot content "
			 "%s: %s", c->meta.name, e);
		return -1;
	}
	return 0;
}

/*
 * A pre-provisioned handle, or a group member's status handle: ListSnapshots by ID says whether
 * it exists and is ready.
 */
static int check_handle(struct snapper *s, const struct kube_vsc *c)
{
	char err[900], msg[1100], g[1024];
	struct kube_obj *hold = NULL;
	struct csi_arena *a = csi_arena_new();
	Csi__V1__ListSnapshotsRequest *req = csi_msg_new(a, &csi__v1__list_snapshots_request__descriptor);
	Csi__V1__ListSnapshotsResponse *resp = NULL;
	struct csi_status st = { 0 };
	int rc = RETRY;

	const struct kube_vsclass *cls = class_of(s, c, &hold, err, sizeof(err));
	if (c->class_name && !cls) {
		snprintf(msg, sizeof(msg), "Failed to check and update snapshot content: %s", err);
		goto fail;
	}
	const char *id = c->snapshot_handle ? c->snapshot_handle : c->status_handle;
	bool member = !c->snapshot_handle && c->in_group;
	req->snapshot_id = csi_arena_strdup(a, id);
	if (member ? member_secrets(s, c, a, &req->base, err, sizeof(err))
		   : class_secrets(s, c, cls, SNAP_SECRET_LIST, a, &req->base, err, sizeof(err))) {
		snprintf(msg, sizeof(msg), "Failed to check and update snapshot content: %s", err);
		goto fail;
	}
	if (csi_list_snapshots(s->o.csi, req, &resp, s->o.timeout_ns, &st) != 0) {
		snap_grpc_error(st.code, st.message, g, sizeof(g));
		snprintf(msg, sizeof(msg), "Failed to check and update snapshot content: %s", g);
		goto fail;
	}
	const Csi__V1__Snapshot *snap = NULL;
	for (size_t i = 0; i < resp->n_entries && !snap; i++)
		if (resp->entries[i]->snapshot && resp->entries[i]->snapshot->snapshot_id &&
		    !strcmp(resp->entries[i]->snapshot->snapshot_id, id))
			snap = resp->entries[i]->snapshot;
	if (!snap) {
		snprintf(msg, sizeof(msg), "Failed to check and update snapshot content: can not find "
			 "snapshot for snapshotID %s", id);
		goto fail;
	}
	if (write_status(s, c, id, snap->ready_to_use,
			 snap_csi_time_ns(snap->creation_time), snap->size_bytes) == 0)
		rc = snap->ready_to_use ? DONE : RETRY;
	goto out;
fail:
	content_error(s, c, "SnapshotContentCheckandUpdateFailed", msg);
out:
	csi_msg_free(resp);
	csi_arena_free(a);
	kube_obj_unref(hold);
	return rc;
}

static void fill_delete(ProtobufCMessage *msg, struct csi_arena *a, const void *ud)
{
	const struct kube_vsc *c = ud;
	Csi__V1__DeleteSnapshotRequest *req = (Csi__V1__DeleteSnapshotRequest *)msg;

	req->snapshot_id = csi_arena_strdup(a, c->status_handle);
}

static int call_delete(struct snapper *s, ProtobufCMessage *msg, const void *ud,
		       struct csi_status *st)
{
	const struct kube_vsc *c = ud;
	Csi__V1__DeleteSnapshotRequest *req = (Csi__V1__DeleteSnapshotRequest *)msg;
	Csi__V1__DeleteSnapshotResponse *resp = NULL;

	KLOG_V(2, "DeleteSnapshot %s for content %s", req->snapshot_id, c->meta.name);
	int rc = csi_delete_snapshot(s->o.csi, req, &resp, s->o.timeout_ns, st);
	csi_msg_free(resp);
	return rc;
}

static int delete_snapshot(struct snapper *s, const struct kube_vsc *c)
{
	struct snapper_delete d = {
		.meta = &c->meta, .what = "snapshot", .clear_what = "", .reason = "SnapshotDeleteError",
		.secret_ns = c->deletion_secret_ns, .secret_name = c->deletion_secret_name,
		.request = &csi__v1__delete_snapshot_request__descriptor,
		.fill = fill_delete, .call = call_delete,
		.clear_status = "{\"status\":{\"snapshotHandle\":null,\"readyToUse\":null,"
				"\"creationTime\":null,\"restoreSize\":null}}",
		.ud = c,
	};

	return snapper_delete(s, &d);
}

static enum kube_work_result work(void *arg, const char *key)
{
	struct snapper *s = arg;
	struct kube_obj *o = kube_store_get(kube_informer_store(s->vsc_inf), NULL, key);
	const struct kube_vsc *c = kube_vsc_of(o);
	struct kube_err ke;
	int rc = DONE;

	if (!c || !c->driver || strcmp(c->driver, s->o.driver))
		goto out;
	if (!c->has_status && snap_plan_sidecar(c) == SNAP_SC_CREATE) {
		o = snapper_fresh(s, o, &KUBE_RES_VOLUMESNAPSHOTCONTENTS,
				  &KUBE_KIND_VOLUMESNAPSHOTCONTENT);
		c = kube_vsc_of(o);
	}
	switch (snap_plan_sidecar(c)) {
	case SNAP_SC_CREATE:
		rc = create_snapshot(s, c);
		break;
	case SNAP_SC_LIST:
		rc = check_handle(s, c);
		break;
	case SNAP_SC_DELETE:
		rc = delete_snapshot(s, c);
		break;
	case SNAP_SC_REMOVE_FINALIZER:
		if (snap_patch_finalizers(s->kc, o, SNAP_FIN_CONTENT, NULL, NULL, &ke))
			rc = snapper_patch_result(&ke);
		break;
	case SNAP_SC_CLEAR_CREATING:
		if (snap_patch_annotation(s->kc, o, SNAP_ANN_BEING_CREATED, NULL, &ke))
			rc = RETRY;
		break;
	case SNAP_SC_NOTHING:
		break;
	}
out:
	kube_obj_unref(o);
	return (enum kube_work_result)rc;
}

/* ---- life cycle ---- */

struct snapper *snapper_new(struct kube_client *kc, const struct snapper_opts *o)
{
	struct snapper *s = xcalloc(1, sizeof(*s));
	struct kube_informer_opts vo = { .kind = &KUBE_KIND_VOLUMESNAPSHOTCONTENT,
					 .resync_ns = o->resync_ns };
	struct kube_informer_opts co = { .kind = &KUBE_KIND_VOLUMESNAPSHOTCLASS,
					 .resync_ns = o->resync_ns };

	s->o = *o;
	s->kc = kc;
	pthread_mutex_init(&s->mu, NULL);
	if (o->node) {
		snprintf(s->selector, sizeof(s->selector), "%s=%s", SNAP_LABEL_MANAGED_BY, o->node);
		vo.label_selector = s->selector;
	}
	s->vsc_inf = kube_informer_new(kc, &vo);
	s->class_inf = kube_informer_new(kc, &co);
	s->q = kube_workqueue_new("csi-snapshotter-content", o->retry_start_ns, o->retry_max_ns);
	s->watch = (struct snapper_watch){ s, s->q, driver_of, wanted };
	snapper_watch(&s->watch, s->vsc_inf);
	if (o->groups)
		snapper_group_new(s);
	return s;
}

int snapper_start(struct snapper *s, char *err, size_t errlen)
{
	/* The group informers exist only with the group gate on (NULL otherwise). */
	struct kube_informer *infs[] = { s->vsc_inf, s->class_inf, s->vgsc_inf, s->vgsclass_inf };
	struct kube_stop stop = { .mu = &s->mu, .flag = &s->stop };
	char why[200];

	if (kube_informers_start(infs, 4, err, errlen))
		return -1;
	KLOG_I("Starting CSI snapshotter");
	if (kube_informers_wait_synced(infs, 4, "the VolumeSnapshotContent and VolumeSnapshotClass caches",
				       &stop, 0, err, errlen))
		return -1;
	malloc_trim(0);
	struct kube_serve serve[] = { { s->q, s->o.workers, work, s },
				      { s->gq, s->o.workers, snapper_group_work, s } };
	/* --worker-threads 0 (or less) serves no queue: upstream's loop then starts no worker. */
	if (s->o.workers > 0 &&
	    kube_workqueue_serve(serve, s->gq ? 2 : 1, KUBE_WORKER_IDLE_NS, why, sizeof(why))) {
		snprintf(err, errlen, "%s (-worker-threads=%d)", why, s->o.workers);
		snapper_stop(s);
		return -1;
	}
	return 0;
}

void snapper_stop(struct snapper *s)
{
	struct kube_informer *infs[] = { s->vsc_inf, s->class_inf, s->vgsc_inf, s->vgsclass_inf };

	pthread_mutex_lock(&s->mu);
	s->stop = true;
	pthread_mutex_unlock(&s->mu);
	kube_informers_stop(infs, 4);
	if (s->gq)
		kube_workqueue_shutdown(s->gq);
	kube_workqueue_shutdown(s->q);
	kube_workqueue_wait_workers(s->q);
	if (s->gq)
		kube_workqueue_wait_workers(s->gq);
	KLOG_I("Shutting down CSI snapshotter");
}

void snapper_free(struct snapper *s)
{
	if (!s)
		return;
	kube_informer_free(s->vsc_inf);
	kube_informer_free(s->class_inf);
	kube_workqueue_free(s->q);
	if (s->gq) {
		kube_informer_free(s->vgsc_inf);
		kube_informer_free(s->vgsclass_inf);
		kube_workqueue_free(s->gq);
	}
	pthread_mutex_destroy(&s->mu);
	free(s);
}

void snapper_render_metrics(struct snapper *s, struct strbuf *out)
{
	struct kube_workqueue *qs[] = { s->q, s->gq };

	kube_workqueue_render_metrics(qs, s->gq ? 2 : 1, out);
}
