/*
 * snapshot-controller's rules for one VolumeSnapshot and one VolumeSnapshotContent, as
 * upstream's common controller applies them: validation, finalizers, binding checks, the status
 * copied from the content, deletion. Pure: the controller (src/snapshotctrl) does the writes.
 */
#include "snapshots/snapshots.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/timeutil.h"

const char *snap_validate_vs(const struct kube_vs *vs)
{
	if (!vs->source_pvc == !vs->source_content)
		return "Exactly one of PersistentVolumeClaimName and VolumeSnapshotContentName should be specified";
	return NULL;
}

const char *snap_validate_vsc(const struct kube_vsc *c)
{
	if (!c->volume_handle == !c->snapshot_handle)
		return "Exactly one of VolumeHandle and SnapshotHandle should be specified";
	return NULL;
}

void snap_finalizers_needed(const struct kube_vs *vs, const struct kube_vsc *content,
			    bool *source, bool *bound)
{
	bool live = vs->meta.deletion_ts == 0;

	*source = live && !kube_obj_has_finalizer(&vs->meta, SNAP_FIN_SOURCE);
	*bound = live && content && vs->bound_content && *vs->bound_content &&
		 content->policy == KUBE_SNAP_DELETE &&
		 !kube_obj_has_finalizer(&vs->meta, SNAP_FIN_BOUND);
}

void snap_plan_deletion(const struct kube_vs *vs, const struct kube_vsc *content, bool restoring,
			struct snap_deletion *d)
{
	bool has_source = kube_obj_has_finalizer(&vs->meta, SNAP_FIN_SOURCE);
	bool has_bound = kube_obj_has_finalizer(&vs->meta, SNAP_FIN_BOUND);

	memset(d, 0, sizeof(*d));
	if (!has_source && !has_bound)
		return; /* not a deletion candidate: nothing of ours holds it */
	/* Binding must be two-way before anything is done to a content. */
	if (content && !snap_ref_is(content, vs))
		content = NULL;
	if (vs->bound_content && restoring) {
		d->pending = true;
		return;
	}
	bool delete = content && content->policy == KUBE_SNAP_DELETE;
	d->annotate_content = content && !content->being_deleted;
	d->delete_content = delete && content->meta.deletion_ts == 0;
	d->remove_source = has_source;
	/* With Delete the bound finalizer stays until the content is gone from the API. */
	d->remove_bound = has_bound && (!content || !delete);
}

static void set_error(struct snap_error *e, const char *reason, bool keep_ready, const char *fmt,
		      const char *a)
{
	e->reason = reason;
	e->keep_ready = keep_ready;
	snprintf(e->message, sizeof(e->message), fmt, a);
}

enum snap_bind snap_check_preprovisioned(const struct kube_vs *vs, const struct kube_vsc *c,
					 struct snap_error *e)
{
	char uid[64];

	if (!c) {
		set_error(e, "SnapshotContentMissing", false, "%s", "VolumeSnapshotContent is missing");
		return SNAP_BIND_MISSING;
	}
	if (!c->snapshot_handle) {
		set_error(e, "SnapshotContentMismatch", false, "%s",
			  "VolumeSnapshotContent is dynamically provisioned while expecting a pre-provisioned one");
		return SNAP_BIND_DYNAMIC;
	}
	kube_obj_uid(&vs->meta, uid, sizeof(uid));
	if (!c->ref_name || strcmp(c->ref_name, vs->meta.name) || !c->ref_ns || !vs->meta.ns ||
	    strcmp(c->ref_ns, vs->meta.ns) || (*c->ref_uid && strcmp(c->ref_uid, uid))) {
		set_error(e, "SnapshotContentMisbound", false,
			  "VolumeSnapshotContent [%s] is bound to a different snapshot", c->meta.name);
		return SNAP_BIND_MISBOUND;
	}
	return *c->ref_uid ? SNAP_BIND_OK : SNAP_BIND_NEEDED;
}

int snap_check_dynamic(const struct kube_vs *vs, const struct kube_vsc *c, struct snap_error *e)
{
	char key[300];

	snprintf(key, sizeof(key), "%s/%s", vs->meta.ns ? vs->meta.ns : "", vs->meta.name);
	if (c->snapshot_handle) {
		set_error(e, "SnapshotHandleSet", false,
			  "Snapshot handle should not be set in content %s for dynamic provisioning",
			  key);
		return -1;
	}
	if (!snap_ref_is(c, vs)) {
		/* Upstream only logs and retries here: no status error, no event. */
		e->reason = NULL;
		snprintf(e->message, sizeof(e->message),
			 "snapshot %s expects to be bound to %s, which points to a different snapshot",
			 key, c->meta.name);
		return -1;
	}
	return 0;
}

bool snap_check_ready(const struct kube_vs *vs, const struct kube_vsc *c, struct snap_error *e)
{
	if (!c) {
		set_error(e, "SnapshotContentMissing", false, "%s", "VolumeSnapshotContent is missing");
		return false;
	}
	if (!snap_ref_is(c, vs)) {
		set_error(e, "SnapshotMisbound", false, "%s",
			  "VolumeSnapshotContent is not bound to the VolumeSnapshot correctly");
		return false;
	}
	return true;
}

static bool str_eq(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

void snap_status_from_content(const struct kube_vs *vs, const struct kube_vsc *c,
			      struct snap_vs_status *st)
{
	bool was_ready = vs->ready == KUBE_COND_TRUE;
	bool had_creation = vs->creation_time != NULL;

	memset(st, 0, sizeof(*st));
	st->bound = vs->bound_content ? vs->bound_content : c->meta.name;
	st->ready = c->ready == KUBE_COND_TRUE;
	st->creation_ns = !had_creation && c->creation_time >= 0 ? c->creation_time : -1;
	st->restore_size = vs->restore_size;
	if (c->restore_size >= 0 && (vs->restore_size < 0 || (vs->restore_size == 0 && c->restore_size > 0)))
		st->restore_size = c->restore_size;
	/* The content's error replaces the snapshot's (and none clears it), as upstream. */
	st->error_message = c->error_message;
	st->error_time = c->error_time;
	st->changed = !vs->has_status || !str_eq(vs->bound_content, st->bound) ||
		      vs->ready != (st->ready ? KUBE_COND_TRUE : KUBE_COND_FALSE) ||
		      st->creation_ns >= 0 || st->restore_size != vs->restore_size ||
		      !str_eq(vs->error_message, st->error_message) ||
		      (st->error_message && !str_eq(vs->error_time, st->error_time));
	st->created_event = !had_creation && st->creation_ns >= 0;
	st->ready_event = !was_ready && st->ready;
}

int snap_check_source(const struct kube_vs *vs, const struct kube_pvc *pvc,
		      const struct kube_pv *pv, char *err, size_t errlen)
{
	char uid[64];

	if (!vs->source_pvc || !*vs->source_pvc) {
		snprintf(err, errlen, "the PVC name is not specified in snapshot %s/%s",
			 vs->meta.ns ? vs->meta.ns : "", vs->meta.name);
		return -1;
	}
	if (!pvc) {
		snprintf(err, errlen, "failed to retrieve PVC %s from the lister: \"persistentvolumeclaim \\\"%s\\\" not found\"",
			 vs->source_pvc, vs->source_pvc);
		return -1;
	}
	if (pvc->phase != KUBE_PVC_BOUND || !pvc->volume_name) {
		snprintf(err, errlen, "the PVC %s is not yet bound to a PV, will not attempt to take a snapshot",
			 pvc->meta.name);
		return -1;
	}
	if (!pv) {
		snprintf(err, errlen, "failed to retrieve PV %s from the API server: \"persistentvolumes \\\"%s\\\" not found\"",
			 pvc->volume_name, pvc->volume_name);
		return -1;
	}
	kube_obj_uid(&pvc->meta, uid, sizeof(uid));
	if (!str_eq(pv->claim_name, pvc->meta.name) || !str_eq(pv->claim_ns, pvc->meta.ns) ||
	    !pv->claim_uid || strcmp(pv->claim_uid, uid)) {
		snprintf(err, errlen, "claim in dataSource not bound or invalid");
		return -1;
	}
	if (!pv->driver) {
		snprintf(err, errlen, "snapshotting non-CSI volumes is not supported, snapshot:%s/%s",
			 vs->meta.ns ? vs->meta.ns : "", vs->meta.name);
		return -1;
	}
	return 0;
}

bool snap_restoring(const struct kube_vs *vs, const struct kube_pvc *const *claims, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct kube_pvc *p = claims[i];
		if (p->phase == KUBE_PVC_PENDING && str_eq(p->meta.ns, vs->meta.ns) &&
		    str_eq(p->data_source_name, vs->meta.name) &&
		    str_eq(p->data_source_kind, "VolumeSnapshot") &&
		    str_eq(p->data_source_group, SNAP_GROUP))
			return true;
	}
	return false;
}

bool snap_claim_in_use(const struct kube_pvc *pvc, const struct kube_vs *const *snaps, size_t n,
		       const struct kube_vs *skip)
{
	for (size_t i = 0; i < n; i++) {
		const struct kube_vs *s = snaps[i];
		if (s == skip || !str_eq(s->meta.ns, pvc->meta.ns) ||
		    !str_eq(s->source_pvc, pvc->meta.name))
			continue;
		if (!s->creation_time)
			return true;
	}
	return false;
}

enum snap_vsc_step snap_plan_content(const struct kube_vsc *c, const struct kube_vs *vs)
{
	if (snap_validate_vsc(c))
		return SNAP_VSC_INVALID;
	/* Reserved for a snapshot that has not bound it yet: the snapshot's sync does that. */
	if (!*c->ref_uid)
		return SNAP_VSC_NOTHING;
	if (c->meta.deletion_ts == 0 && !kube_obj_has_finalizer(&c->meta, SNAP_FIN_CONTENT))
		return SNAP_VSC_ADD_FINALIZER;
	if (vs && snap_ref_is(c, vs) && vs->meta.deletion_ts &&
	    (kube_obj_has_finalizer(&vs->meta, SNAP_FIN_SOURCE) ||
	     kube_obj_has_finalizer(&vs->meta, SNAP_FIN_BOUND)) && !c->being_deleted)
		return SNAP_VSC_ANNOTATE_DELETE;
	return SNAP_VSC_NOTHING;
}
