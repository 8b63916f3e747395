/*
 * Which informer updates of a content csi-snapshotter syncs: upstream's
 * ShouldEnqueueContentChange, and since v8.7 ShouldEnqueueGroupContentChange for group contents.
 * A content that is not ready is asked about again with the queue's back-off; an update the
 * sidecar caused itself (its status, its finalizer, its being-created annotation) must not
 * queue it at once, or the back-off is cut short and the driver is asked again and again.
 *
 * Upstream compares the whole object with those fields put back; kcsi's records hold what the
 * sidecar reads, so the same comparison is made on those: the spec (through metadata.generation,
 * which the API server raises on every spec change), the deletion, the annotations the
 * snapshot-controller writes, the node label. One difference of form: kcsi makes one step per
 * sync and upstream chains its steps in one sync, so an update that changes the next step
 * (its finalizer added, the status handle cleared after a deletion) is followed here too.
 */
#include "snapshots/snapshots.h"

#include <string.h>

static bool same(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

/* What upstream syncs whatever else changed: a resync (no new version), a content that turned
 * ready (a deletion that waited for the creation to end goes on then). */
static bool always(const struct kube_obj *old, const struct kube_obj *new, uint8_t old_ready,
		   uint8_t new_ready)
{
	return same(old->rv, new->rv) ||
	       (old_ready != KUBE_COND_TRUE && new_ready == KUBE_COND_TRUE);
}

static bool meta_changed(const struct kube_obj *old, const struct kube_obj *new)
{
	return old->generation != new->generation || old->deletion_ts != new->deletion_ts;
}

bool snap_sidecar_update_wanted(const struct kube_vsc *old, const struct kube_vsc *new)
{
	return always(&old->meta, &new->meta, old->ready, new->ready) ||
	       meta_changed(&old->meta, &new->meta) || old->being_deleted != new->being_deleted ||
	       old->in_group != new->in_group || !same(old->managed_by, new->managed_by) ||
	       !same(old->deletion_secret_name, new->deletion_secret_name) ||
	       !same(old->deletion_secret_ns, new->deletion_secret_ns) ||
	       snap_plan_sidecar(old) != snap_plan_sidecar(new);
}

bool snap_group_sidecar_update_wanted(const struct kube_vgsc *old, const struct kube_vgsc *new)
{
	return always(&old->meta, &new->meta, old->ready, new->ready) ||
	       meta_changed(&old->meta, &new->meta) || old->being_deleted != new->being_deleted ||
	       !same(old->deletion_secret_name, new->deletion_secret_name) ||
	       !same(old->deletion_secret_ns, new->deletion_secret_ns) ||
	       snap_plan_group_sidecar(old) != snap_plan_group_sidecar(new);
}
