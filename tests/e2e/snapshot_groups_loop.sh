#!/bin/bash
# e2e: a group snapshot with the real kcsi-loopplugin. Two claims provisioned by csi-provisioner
# and labelled app=db get a marker each in their images; a VolumeGroupSnapshot of app=db becomes
# ready through snapshot-controller and csi-snapshotter (CreateVolumeGroupSnapshot); each member
# VolumeSnapshot restores into a new claim provisioned by csi-provisioner, with its own marker;
# deleting the group removes the driver's group snapshot.
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
. "$(dirname "$0")/lib_provisioner.sh"
. "$(dirname "$0")/lib_snapshot.sh"

GATE=(--feature-gates CSIVolumeGroupSnapshot=true)
emu_start
lp_start node-1
topo_node node-1
mk_sc std
prov_start p "$T/lp.sock" -v 5
sctrl_start "${GATE[@]}" -v 4
snapper_start snapper "$T/lp.sock" "${GATE[@]}" -v 4
jq -n --arg d "$DRV" '{apiVersion: "groupsnapshot.storage.k8s.io/v1beta2",
	kind: "VolumeGroupSnapshotClass", metadata: {name: "loop-group"},
	driver: $d, deletionPolicy: "Delete"}' | kc create -f - >/dev/null

for c in a b; do
	mk_pvc "$c" std '{"metadata":{"labels":{"app":"db"}}}'
	wait_for "PV of $c" 20 pv_exists "$(pv_of "$c")"
	bind "$c"
	VOL=$(pv_field "$(pv_of "$c")" .spec.csi.volumeHandle)
	printf 'KCSI-GROUP-MARKER-%s' "$c" | dd of="$T/pool/volumes/$VOL.img" bs=1 seek=1048576 conv=notrunc status=none
done

jq -n '{apiVersion: "groupsnapshot.storage.k8s.io/v1beta2", kind: "VolumeGroupSnapshot",
	metadata: {name: "g", namespace: "default"},
	spec: {volumeGroupSnapshotClassName: "loop-group", source: {selector: {matchLabels: {app: "db"}}}}}' |
	kc create -f - >/dev/null
wait_for "group readyToUse" 40 vgs_ready g
GUID=$(kc get volumegroupsnapshot g -n default -o jsonpath='{.metadata.uid}')
GH=$(kc get volumegroupsnapshotcontent "groupsnapcontent-$GUID" -o jsonpath='{.status.volumeGroupSnapshotHandle}')
check "the loop driver returned a group handle" bash -c "[ -n '$GH' ]"
check "CreateVolumeGroupSnapshot logged by the sidecar" grep -q "CreateVolumeGroupSnapshot groupsnapshot-$GUID of 2 volumes" "$T/snapper.log"

# each member restores into a claim holding its source's marker
for c in a b; do
	VOL=$(pv_field "$(pv_of "$c")" .spec.csi.volumeHandle)
	M="snapshot-$(printf '%s%s' "$GUID" "$VOL" | sha256sum | cut -d' ' -f1)"
	wait_for "member of $c ready" 20 vs_ready "$M"
	check "member of $c names its claim" eq "$(vs_field "$M" .spec.source.persistentVolumeClaimName)" "$c"
	MH=$(vsc_field "$(vs_field "$M" .status.boundVolumeSnapshotContentName)" .status.snapshotHandle)
	check "the loop driver holds member $MH of $c" test -f "$T/pool/snapshots/$MH.img"
	mk_pvc "r-$c" std "{\"spec\":{\"dataSource\":{\"kind\":\"VolumeSnapshot\",\"apiGroup\":\"snapshot.storage.k8s.io\",\"name\":\"$M\"}}}"
	wait_for "restored PV of $c" 30 pv_exists "$(pv_of "r-$c")"
	bind "r-$c"
	RVOL=$(pv_field "$(pv_of "r-$c")" .spec.csi.volumeHandle)
	check "restored image of $c holds its marker" grep -q "KCSI-GROUP-MARKER-$c" "$T/pool/volumes/$RVOL.img"
done

kc delete volumegroupsnapshot g -n default --wait=false >/dev/null
wait_for "group, members and contents gone" 40 group_all_gone g "groupsnapcontent-$GUID"
check "DeleteVolumeGroupSnapshot logged by the sidecar" grep -q "DeleteVolumeGroupSnapshot $GH" "$T/snapper.log"
check "no snapshot image left in the pool" bash -c "[ -z \"\$(ls -A '$T/pool/snapshots' 2>/dev/null | grep '\\.img$')\" ]"

sigterm_checked snapper sctrl
[ "$FAILS" -eq 0 ] || { tail -40 "$T/sctrl.log" >&2; tail -40 "$T/snapper.log" >&2; tail -20 "$T/lp.log" >&2; }
finish
