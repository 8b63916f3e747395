#!/bin/bash
# e2e: snapshots with the real kcsi-loopplugin. A claim provisioned by csi-provisioner is
# written (a marker in its image), snapshotted through snapshot-controller and csi-snapshotter
# until readyToUse, and a claim restored from that VolumeSnapshot is provisioned by
# csi-provisioner with the marker in its image; deleting the snapshot deletes the driver's copy.
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
. "$(dirname "$0")/lib_provisioner.sh"
. "$(dirname "$0")/lib_snapshot.sh"

emu_start
lp_start node-1
topo_node node-1
mk_sc std
mk_vsclass loop
prov_start p "$T/lp.sock" -v 5
sctrl_start -v 4
snapper_start snapper "$T/lp.sock" -v 4

mk_pvc src std
SPV=$(pv_of src)
wait_for "source PV" 20 pv_exists "$SPV"
bind src
SVOL=$(pv_field "$SPV" .spec.csi.volumeHandle)
IMG="$T/pool/volumes/$SVOL.img"
check "the source image exists" test -f "$IMG"
printf 'KCSI-SNAPSHOT-MARKER' | dd of="$IMG" bs=1 seek=1048576 conv=notrunc status=none

mk_vs snap '{"spec":{"volumeSnapshotClassName":"loop","source":{"persistentVolumeClaimName":"src"}}}'
wait_for "snapshot readyToUse" 30 vs_ready snap
VSC=$(content_of snap)
H=$(vsc_field "$VSC" .status.snapshotHandle)
check "the loop driver holds the snapshot" test -f "$T/pool/snapshots/$H.img"
check "restoreSize is the claim's size" eq "$(vs_field snap .status.restoreSize)" 16Mi

mk_pvc restored std '{"spec":{"dataSource":{"kind":"VolumeSnapshot","apiGroup":"snapshot.storage.k8s.io","name":"snap"}}}'
RPV=$(pv_of restored)
wait_for "restored PV" 30 pv_exists "$RPV"
RVOL=$(pv_field "$RPV" .spec.csi.volumeHandle)
check "CreateVolume named the snapshot's handle" grep -q "\"volume_content_source\":{\"snapshot\":{\"snapshot_id\":\"$H\"}}" "$T/p.log"
check "the restored image holds what was written" grep -q KCSI-SNAPSHOT-MARKER "$T/pool/volumes/$RVOL.img"

# Deleting the snapshot waits while a claim restoring from it is Pending, then goes on.
kc delete volumesnapshot snap -n default --wait=false >/dev/null
wait_for "event SnapshotDeletePending" 10 has_event VolumeSnapshot snap "SnapshotDeletePending: Snapshot is being used to restore a PVC"
check "kept while the restore is Pending" vs_exists snap
bind restored
gone() { ! vs_exists snap && ! vsc_exists "$VSC"; }
wait_for "snapshot and content gone" 30 gone
check "DeleteSnapshot removed the driver's copy" test ! -e "$T/pool/snapshots/$H.img"

for n in snapper sctrl; do
	kill -TERM "${ATT_PIDS[$n]}"
	rc=0
	wait "${ATT_PIDS[$n]}" || rc=$?
	unset "ATT_PIDS[$n]"
	check "$n exits 0 on SIGTERM" eq "$rc" 0
done
[ "$FAILS" -eq 0 ] || { tail -30 "$T/sctrl.log" >&2; tail -30 "$T/snapper.log" >&2; tail -20 "$T/lp.log" >&2; }
finish
