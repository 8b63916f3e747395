/*
 * The VolumeSnapshot source-protection finalizer (external-provisioner v6.3): while a claim is
 * restored from a VolumeSnapshot, the snapshot carries PROV_SNAPSHOT_FINALIZER, so deleting it
 * waits until the volume exists. prepare.c adds it (prov_snapshot_protect, from sources.c once
 * the snapshot passed its checks) before CreateVolume; claims.c removes it after a successful
 * CreateVolume (prov_snapshot_release). Every other end (a claim deleted or failing for good, a
 * provisioner killed in between) leaves it for the sweep.
 *
 * The sweep is upstream's SnapshotFinalizerController: one thread that, every
 * --snapshot-orphan-sweep-interval, takes the finalizer off each VolumeSnapshot that no claim
 * in phase Pending restores from. Its informer caches only the snapshots that carry the
 * finalizer (a filter, so a cluster of many snapshots costs a watch, not their records); the
 * claims it counts are the claim informer's, whose filter (controller.c) also keeps every
 * Pending restore, whatever its driver or node: the finalizer's name is the same for every
 * provisioner, so a claim this one does not provision still holds it.
 *
 * The writes are updates (GET, then PUT with the resourceVersion read), not patches, because
 * upstream's RBAC grants "update" on volumesnapshots and not "patch"; a 403 is logged and
 * provisioning goes on without the protection, as upstream does for older RBAC.
 */
#include "provisioner/prov.h"

#include "base/log.h"
#include "base/passloop.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "kube/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the finalizer in a VolumeSnapshot's JSON ---- */

bool prov_snapshot_protected(json_t *snap)
{
	json_t *f;
	size_t i;

	json_array_foreach(json_object_get(json_object_get(snap, "metadata"), "finalizers"), i, f)
		if (prov_streq(json_string_value(f), PROV_SNAPSHOT_FINALIZER))
			return true;
	return false;
}

/* Removes every copy of the finalizer; whether there was one. */
static bool drop_finalizer(json_t *snap)
{
	json_t *a = json_object_get(json_object_get(snap, "metadata"), "finalizers");
	bool found = false;

	for (size_t i = json_array_size(a); i-- > 0;)
		if (prov_streq(json_string_value(json_array_get(a, i)), PROV_SNAPSHOT_FINALIZER)) {
			json_array_remove(a, i);
			found = true;
		}
	return found;
}

static int put_snapshot(struct prov_ctrl *c, const char *ns, json_t *snap, struct kube_err *e)
{
	json_t *r = kube_update(c->kc, &KUBE_RES_VOLUMESNAPSHOTS, ns, snap, false, e);
	json_decref(r);
	return r ? 0 : -1;
}

/* ---- provisioning: add before CreateVolume, remove after its success ---- */

int prov_snapshot_protect(struct prov_ctrl *c, json_t *snap, char *err, size_t errlen)
{
	json_t *md = json_object_get(snap, "metadata");
	const char *ns = json_string_value(json_object_get(md, "namespace"));
	const char *name = json_string_value(json_object_get(md, "name"));
	struct kube_err e;

	if (prov_snapshot_protected(snap))
		return 0;
	json_t *f = json_object_get(md, "finalizers");
	if (!json_is_array(f)) {
		f = json_array();
		json_object_set_new(md, "finalizers", f);
	}
	json_array_append_new(f, json_string(PROV_SNAPSHOT_FINALIZER));
	if (put_snapshot(c, ns, snap, &e) == 0) {
		KLOG_V(3, "Added finalizer %s to snapshot %s/%s", PROV_SNAPSHOT_FINALIZER, ns, name);
		return 0;
	}
	if (e.code == 403) {
		KLOG_V(3, "Unable to add finalizer to snapshot %s/%s due to missing RBAC permissions (needs 'update' on volumesnapshots): %s. Provisioning will continue without snapshot protection. Please update RBAC to include 'update' verb for volumesnapshots.",
		       ns, name, e.message);
		return 0;
	}
	snprintf(err, errlen, "%s", e.message);
	return -1;
}

/* GET the snapshot and PUT it without the finalizer. 0: removed, or nothing to remove (no
 * finalizer, no snapshot); -1 with e (from the GET or the PUT). */
static int remove_finalizer(struct prov_ctrl *c, const char *ns, const char *name, bool *removed,
			    struct kube_err *e)
{
	json_t *snap = kube_get(c->kc, &KUBE_RES_VOLUMESNAPSHOTS, ns, name, e);
	int rc = 0;

	*removed = false;
	if (!snap)
		return -1;
	if (drop_finalizer(snap)) {
		rc = put_snapshot(c, ns, snap, e);
		*removed = rc == 0;
	}
	json_decref(snap);
	return rc;
}

void prov_snapshot_release(struct prov_ctrl *c, const char *ns, const char *name)
{
	struct kube_err e;
	bool removed;

	if (remove_finalizer(c, ns, name, &removed, &e) == 0) {
		if (removed)
			KLOG_V(3, "Removed finalizer %s from snapshot %s/%s", PROV_SNAPSHOT_FINALIZER, ns,
			       name);
	} else if (kube_err_is_not_found(&e)) {
		/* the snapshot is gone: nothing to protect */
	} else if (e.code == 403) {
		KLOG_V(3, "Unable to remove finalizer from snapshot %s/%s due to missing RBAC permissions (needs 'update' on volumesnapshots): %s. The finalizer will remain on the snapshot. Please update RBAC to include 'update' verb for volumesnapshots.",
		       ns, name, e.message);
	} else {
		/* Provisioning succeeded all the same; the sweep takes the finalizer off later. */
		KLOG_W("Failed to remove snapshot finalizer from %s/%s: %s", ns, name, e.message);
	}
}

/* ---- the orphan sweep ---- */

struct prov_sweep {
	struct prov_ctrl *c;
	struct kube_informer *inf; /* VolumeSnapshots carrying the finalizer */
	int64_t interval_ns;
	struct pass_loop loop; /* the sweep every interval_ns (base/passloop.h) */
	bool synced;           /* the informer runs and its cache synced (the loop's own) */
};

static bool carries_finalizer(const struct kube_obj *o, void *ud)
{
	(void)ud;
	return kube_obj_has_finalizer(o, PROV_SNAPSHOT_FINALIZER);
}

static int64_t sweep_pass(void *ud);

struct prov_sweep *prov_sweep_new(struct prov_ctrl *c)
{
	if (c->o.orphan_sweep_ns <= 0 || !c->o.cap_snapshot)
		return NULL;
	struct prov_sweep *s = xcalloc(1, sizeof(*s));
	struct kube_informer_opts io = { .kind = &KUBE_KIND_VOLUMESNAPSHOT,
					 .filter = carries_finalizer };
	s->c = c;
	s->interval_ns = c->o.orphan_sweep_ns;
	s->inf = kube_informer_new(c->kc, &io);
	pass_loop_init(&s->loop, sweep_pass, s);
	return s;
}

/* One VolumeSnapshot whose finalizer no Pending claim holds. */
static void sweep_one(struct prov_sweep *s, const char *ns, const char *name)
{
	struct kube_err e;
	bool removed;

	if (remove_finalizer(s->c, ns, name, &removed, &e) == 0) {
		if (removed)
			KLOG_I("SnapshotFinalizerProtection: removed orphaned finalizer from snapshot %s/%s",
			       ns, name);
	} else if (kube_err_is_not_found(&e) || kube_err_is_conflict(&e)) {
		KLOG_V(4, "SnapshotFinalizerProtection: transient error removing finalizer from snapshot %s/%s, will retry: %s",
		       ns, name, e.message);
	} else if (e.code == 403) {
		KLOG_V(3, "SnapshotFinalizerProtection: unable to remove finalizer from snapshot %s/%s due to missing RBAC permissions: %s",
		       ns, name, e.message);
	} else {
		KLOG_W("SnapshotFinalizerProtection: failed to remove finalizer from snapshot %s/%s: %s",
		       ns, name, e.message);
	}
}

/* sweepOrphanedFinalizers: the snapshots Pending claims restore from, then every cached
 * snapshot with the finalizer outside that set. */
static void sweep(struct prov_sweep *s)
{
	struct kube_hmap pending = KUBE_HMAP_INIT;
	char key[512];
	size_t n = 0, ns_ = 0;
	struct kube_obj **claims = kube_store_list(kube_informer_store(s->c->pvc_inf), &n);

	for (size_t i = 0; i < n; i++)
		if (prov_snapshot_restore_pending(kube_pvc_of(claims[i]), key, sizeof(key)))
			kube_hmap_put(&pending, key, NULL);
	kube_objs_free(claims, n);
	struct kube_obj **snaps = kube_store_list(kube_informer_store(s->inf), &ns_);
	for (size_t i = 0; i < ns_ && !pass_loop_stopping(&s->loop); i++) {
		if (!kube_obj_has_finalizer(snaps[i], PROV_SNAPSHOT_FINALIZER))
			continue;
		snprintf(key, sizeof(key), "%s/%s", snaps[i]->ns ? snaps[i]->ns : "", snaps[i]->name);
		if (!kube_hmap_has(&pending, key))
			sweep_one(s, snaps[i]->ns, snaps[i]->name);
	}
	kube_objs_free(snaps, ns_);
	kube_hmap_clear(&pending);
}

/* Whether the sweep can run: upstream's check that listing volumesnapshots is allowed (the
 * verbs are optional in its RBAC), and that the API is served at all. */
static bool allowed(struct prov_sweep *s)
{
	struct kube_list_opts lo = { .limit = 1 };
	struct kube_err e;
	json_t *l = kube_list(s->c->kc, &KUBE_RES_VOLUMESNAPSHOTS, NULL, &lo, &e);

	json_decref(l);
	if (l)
		return true;
	if (e.code == 403) {
		KLOG_V(3, "SnapshotFinalizerProtection: disabled, missing list permission on volumesnapshots: %s",
		       e.message);
		return false;
	}
	if (e.code == 404) {
		KLOG_V(3, "SnapshotFinalizerProtection: disabled, the snapshot.storage.k8s.io/v1 API is not served: %s",
		       e.message);
		return false;
	}
	return true; /* anything else may pass: the informer retries */
}

static bool sweep_stopping(void *ud)
{
	return pass_loop_stopping(ud);
}

/* The first pass starts the informer and waits for its cache; every pass then sweeps. */
static int64_t sweep_pass(void *ud)
{
	struct prov_sweep *s = ud;
	struct kube_stop stop = { .fn = sweep_stopping, .ud = &s->loop };
	char err[256];

	if (!s->synced) {
		KLOG_I("Starting SnapshotFinalizerProtection controller");
		if (!allowed(s))
			return PASS_LOOP_NEVER;
		if (kube_informer_start(s->inf)) {
			KLOG_E("SnapshotFinalizerProtection: cannot start the VolumeSnapshot informer");
			return PASS_LOOP_NEVER;
		}
		int rc = kube_informers_wait_synced(&s->inf, 1, NULL, &stop, 0, err, sizeof(err));
		if (rc < 0)
			KLOG_E("SnapshotFinalizerProtection: failed to sync informer caches");
		if (rc)
			return PASS_LOOP_NEVER;
		KLOG_I("Started SnapshotFinalizerProtection controller");
		s->synced = true;
	}
	sweep(s);
	return s->interval_ns;
}

int prov_sweep_start(struct prov_sweep *s)
{
	return s ? pass_loop_start(&s->loop) : 0;
}

void prov_sweep_stop(struct prov_sweep *s)
{
	if (!s || !s->loop.started)
		return;
	pass_loop_stop(&s->loop);
	KLOG_I("Shutting down SnapshotFinalizerProtection controller");
}

struct kube_informer *prov_sweep_informer(struct prov_sweep *s)
{
	return s ? s->inf : NULL;
}

void prov_sweep_free(struct prov_sweep *s)
{
	if (!s)
		return;
	prov_sweep_stop(s);
	kube_informer_free(s->inf);
	pass_loop_destroy(&s->loop);
	free(s);
}
