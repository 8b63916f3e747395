#!/bin/bash
# e2e, drop-in differential: upstream's csi-attacher v4.13.0 and kcsi's, the same story with the
# same flags on one kube-emulator and one kcsi-loopplugin (controller mode), compared field by
# field (lib_diff.sh): the VolumeAttachment, the PV, the leader-election Lease and the events.
#   1. a VolumeAttachment to a node the driver does not know: ControllerPublishVolume NOT_FOUND,
#      status.attachError (and the PV finalizer the attacher adds first)
#   2. the node's driver starts: the retry attaches (attachError gone, attachmentMetadata)
#   3. the volume is staged on the node and the VolumeAttachment deleted: ControllerUnpublish
#      FAILED_PRECONDITION ("still staged"), status.detachError, the finalizer stays
#   4. unstaged: the retry detaches, the VolumeAttachment goes
#   5. SIGTERM: the Lease as the attacher leaves it
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
. "$(dirname "$0")/lib_provisioner.sh"
. "$(dirname "$0")/lib_diff.sh"

emu_start
lp_start controller-host --mode controller
MNT=SINGLE_NODE_WRITER,mount,ext4
KINDS=(volumeattachments persistentvolumes leases)

for side in upstream kcsi; do
	diff_side $side
	diff_start att csi-attacher --csi-address "unix://$T/lp.sock" --kubeconfig "$KC" \
		--leader-election --leader-election-namespace "$NS" --timeout 15s \
		--retry-interval-start 200ms --retry-interval-max 1s -v 4
	N=node-$TAG
	mk_node "$N"
	mk_csinode "$N" "$DRV" "$N"
	H=$(lp_volume "vol-$TAG")
	mk_pv "pv-$TAG" "$DRV" "$H"
	mk_va "va-$TAG" "$DRV" "$N" "pv-$TAG"
	wait_for "$side: attachError (node unknown to the driver)" 30 va_has_error "va-$TAG" attachError
	diff_snap 1-attach-error "${KINDS[@]}"

	lp_node_start "$N"
	wait_for "$side: attached after the node's driver started" 30 va_attached "va-$TAG"
	diff_snap 2-attached "${KINDS[@]}"

	NK=("$KCSI_BIN/kcsi" --endpoint "unix://$T/lp-$N.sock" --timeout 60s)
	mkdir -p "$T/stage-$TAG"
	"${NK[@]}" node stage "$H" "$T/stage-$TAG" --cap "$MNT" >/dev/null ||
		fail "$side: NodeStageVolume on $N"
	kc delete volumeattachment "va-$TAG" --wait=false >/dev/null
	wait_for "$side: detachError (still staged)" 30 va_has_error "va-$TAG" detachError
	diff_snap 3-detach-error "${KINDS[@]}"

	"${NK[@]}" node unstage "$H" "$T/stage-$TAG" >/dev/null || fail "$side: NodeUnstageVolume"
	wait_for "$side: detached after unstage" 30 va_gone "va-$TAG"
	diff_snap 4-detached "${KINDS[@]}"

	diff_stop att
	diff_snap 5-stopped "${KINDS[@]}"
done

diff_check csi-attacher
att_finish
