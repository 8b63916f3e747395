/*
 * csi-snapshotter's rule for one content of its driver, as upstream's sidecar syncContent:
 * delete only when the snapshot-controller asked (being-deleted annotation) and no
 * CreateSnapshot may still be running (being-created annotation), else create or poll until
 * ready. Pure: src/snapshotter does the calls and writes.
 */
#include "snapshots/snapshots.h"

static bool should_delete(const struct kube_vsc *c)
{
	if (c->meta.deletion_ts == 0)
		return false;
	/* An unbound pre-provisioned content can go at once. */
	if (c->snapshot_handle && !*c->ref_uid)
		return true;
	/* A CreateSnapshot without a final answer: wait for it, or a snapshot would leak. */
	if (c->being_created)
		return false;
	return c->being_deleted;
}

enum snap_sidecar_step snap_plan_sidecar(const struct kube_vsc *c)
{
	if (should_delete(c)) {
		/* a group's member goes with DeleteVolumeGroupSnapshot: drivers may refuse to
		 * delete it alone (the loop driver does, as the CSI spec allows) */
		if (c->policy == KUBE_SNAP_DELETE && c->status_handle && !c->in_group)
			return SNAP_SC_DELETE;
		return kube_obj_has_finalizer(&c->meta, SNAP_FIN_CONTENT) ? SNAP_SC_REMOVE_FINALIZER
									  : SNAP_SC_NOTHING;
	}
	/* a group's member: snapshot-controller writes the handle the group's call returned */
	if (c->in_group && !c->status_handle)
		return SNAP_SC_NOTHING;
	if (c->volume_handle && !c->has_status)
		return SNAP_SC_CREATE;
	if (c->ready == KUBE_COND_TRUE)
		return c->being_created ? SNAP_SC_CLEAR_CREATING : SNAP_SC_NOTHING;
	/* a member not ready yet is asked about by its ID, as a pre-provisioned handle */
	return c->snapshot_handle || c->in_group ? SNAP_SC_LIST : SNAP_SC_CREATE;
}
