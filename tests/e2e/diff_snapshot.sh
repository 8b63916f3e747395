#!/bin/bash
# e2e, drop-in differential: upstream's snapshot-controller and csi-snapshotter v8.6.0 and kcsi's,
# as a pair, with default flags, the same story on one kube-emulator and one kcsi-loopplugin
# (controller mode), compared field by field (lib_diff.sh): the VolumeSnapshot, its
# VolumeSnapshotContent, the source claim (its protection finalizer) and the events.
#   1. a VolumeSnapshot of a bound claim: the content, ready, the statuses
#   2. the snapshot deleted (policy Delete): DeleteSnapshot, both objects gone, the claim's
#      finalizer released
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
. "$(dirname "$0")/lib_provisioner.sh"
. "$(dirname "$0")/lib_snapshot.sh"
. "$(dirname "$0")/lib_diff.sh"
KINDS=(volumesnapshots volumesnapshotcontents persistentvolumeclaims persistentvolumes)

emu_start
lp_start controller-host --mode controller

for side in upstream kcsi; do
	diff_side $side
	H=$(lp_volume "vol-$TAG")
	jq -n --arg ns "$NS" --arg t "$TAG" '{apiVersion: "v1", kind: "PersistentVolumeClaim",
		metadata: {name: "src", namespace: $ns},
		spec: {accessModes: ["ReadWriteOnce"], volumeName: ("pv-" + $t), storageClassName: "",
		       resources: {requests: {storage: "16Mi"}}}}' | kc create -f - >/dev/null
	UID_=$(kc get pvc src -n "$NS" -o jsonpath='{.metadata.uid}')
	jq -n --arg ns "$NS" --arg t "$TAG" --arg u "$UID_" --arg d "$DRV" --arg h "$H" '{
		apiVersion: "v1", kind: "PersistentVolume", metadata: {name: ("pv-" + $t)},
		spec: {capacity: {storage: "16Mi"}, accessModes: ["ReadWriteOnce"], volumeMode: "Filesystem",
		       persistentVolumeReclaimPolicy: "Retain", storageClassName: "",
		       csi: {driver: $d, volumeHandle: $h},
		       claimRef: {kind: "PersistentVolumeClaim", namespace: $ns, name: "src", uid: $u}}}' |
		kc create -f - >/dev/null
	status_patch "/api/v1/namespaces/$NS/persistentvolumeclaims/src" '{"status":{"phase":"Bound"}}'
	status_patch "/api/v1/persistentvolumes/pv-$TAG" '{"status":{"phase":"Bound"}}'
	mk_vsclass "snap-$TAG"
	diff_start sctrl snapshot-controller --kubeconfig "$KC"
	diff_start snapper csi-snapshotter --csi-address "unix://$T/lp.sock" --kubeconfig "$KC"

	jq -n --arg ns "$NS" --arg c "snap-$TAG" '{apiVersion: "snapshot.storage.k8s.io/v1",
		kind: "VolumeSnapshot", metadata: {name: "snap", namespace: $ns},
		spec: {volumeSnapshotClassName: $c, source: {persistentVolumeClaimName: "src"}}}' |
		kc create -f - >/dev/null
	snap_ready() { [ "$(kc get volumesnapshot snap -n "$NS" -o jsonpath='{.status.readyToUse}')" = true ]; }
	wait_for "$side: snapshot ready" 30 snap_ready
	diff_snap 1-ready "${KINDS[@]}"

	kc delete volumesnapshot snap -n "$NS" --wait=false >/dev/null
	snap_gone() { ! kc get volumesnapshot snap -n "$NS" >/dev/null 2>&1; }
	wait_for "$side: snapshot gone" 30 snap_gone
	diff_snap 2-deleted "${KINDS[@]}"

	diff_stop snapper
	diff_stop sctrl
done

diff_check snapshot-controller+csi-snapshotter
check "the driver holds no snapshot" eq "$("$KCSI_BIN/kcsi" --endpoint "unix://$T/lp.sock" -o json controller list-snapshots | jq '.entries // [] | length')" 0
att_finish
