#!/bin/bash
# e2e, drop-in differential: upstream's csi-provisioner v6.4.0 and kcsi's, each with its default
# flags (only the socket and the kubeconfig given, and --snapshot-orphan-sweep-interval=2s so the
# sweep's work shows within the scenario), the same story on one kube-emulator and one
# kcsi-loopplugin (controller mode, zone zone-a), compared field by field (lib_diff.sh): claims,
# PVs, the snapshot a restore reads, and the events. The scenario plays the PV binder and the
# scheduler (volumeName and phases, the selected-node annotation); kcsi's snapshot-controller
# and csi-snapshotter, the same for both sides, make the snapshot.
#   0. an Immediate claim while no node carries the driver's topology key: refused and retried
#      ("no available topology found"), no CreateVolume; the claim deleted, then the node made
#   1. an Immediate claim: CreateVolume, the PV (topology, provisioner identity, finalizers)
#   2. a WaitForFirstConsumer claim with allowed topologies, no node selected: left alone
#   3. the node selected: the PV in the node's zone
#   4. a clone of the first claim (and the source claim's protection while it runs)
#   5. a restore from a VolumeSnapshot of the first claim
#   6. the clone deleted (policy Delete): DeleteVolume, the PV gone
#   7. a restore the driver refuses for good (a class parameter it does not know): the snapshot
#      keeps the provisioner's source-protection finalizer while the claim is Pending
#   8. that claim deleted: the orphan sweep takes the finalizer off the snapshot
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
. "$(dirname "$0")/lib_provisioner.sh"
. "$(dirname "$0")/lib_snapshot.sh"
. "$(dirname "$0")/lib_diff.sh"
ZK=topology.loop.kcsi.io/zone
KINDS=(persistentvolumeclaims persistentvolumes volumesnapshots volumesnapshotcontents)

# claim NAME CLASS [extra-json]: a claim in $NS, annotated for $DRV as the binder would
claim() {
	local extra=${3:-"{}"}
	jq -n --arg n "$1" --arg ns "$NS" --arg sc "$2" --arg d "$DRV" --argjson x "$extra" '{
		apiVersion: "v1", kind: "PersistentVolumeClaim",
		metadata: {name: $n, namespace: $ns,
			   annotations: {"volume.kubernetes.io/storage-provisioner": $d}},
		spec: {storageClassName: $sc, accessModes: ["ReadWriteOnce"], volumeMode: "Filesystem",
		       resources: {requests: {storage: "16Mi"}}}} * $x' | kc create -f - >/dev/null
}
claim_pv() { echo "pvc-$(kc get pvc "$1" -n "$NS" -o jsonpath='{.metadata.uid}')"; }
# bind_claim NAME: the binder's part once the PV exists
bind_claim() {
	local pv
	pv=$(claim_pv "$1")
	req PATCH "/api/v1/namespaces/$NS/persistentvolumeclaims/$1" \
		"{\"spec\":{\"volumeName\":\"$pv\"}}" application/merge-patch+json
	expect_code 200 "bind $1"
	status_patch "/api/v1/namespaces/$NS/persistentvolumeclaims/$1" '{"status":{"phase":"Bound"}}'
	status_patch "/api/v1/persistentvolumes/$pv" '{"status":{"phase":"Bound"}}'
}
# release_claim NAME: the claim deleted, its PV Released
release_claim() {
	local pv
	pv=$(claim_pv "$1")
	kc delete pvc "$1" -n "$NS" --wait=false >/dev/null
	status_patch "/api/v1/persistentvolumes/$pv" '{"status":{"phase":"Released"}}'
}
claim_provisioned() { pv_exists "$(claim_pv "$1")"; }
SF=provisioner.storage.kubernetes.io/volumesnapshot-as-source-protection
# snap_protected NAME: the VolumeSnapshot in $NS carries the provisioner's finalizer
snap_protected() { kc get volumesnapshot "$1" -n "$NS" -o json | jq -e --arg f "$SF" '.metadata.finalizers // [] | index($f) != null' >/dev/null; }
snap_unprotected() { ! snap_protected "$1"; }
# failed_in_ns NAME: a ProvisioningFailed event about claim NAME in $NS
failed_in_ns() { kc get events -n "$NS" -o json | jq -e --arg n "$1" '[.items[] | select(.involvedObject.name == $n and .reason == "ProvisioningFailed")] | length > 0' >/dev/null; }
# no_topology NAME: that event says no node offers the driver's topology
no_topology() { kc get events -n "$NS" -o json | jq -e --arg n "$1" '[.items[] | select(.involvedObject.name == $n and .reason == "ProvisioningFailed" and (.message | contains("error generating accessibility requirements: no available topology found")))] | length > 0' >/dev/null; }

emu_start
lp_start controller-host --mode controller --zone zone-a
sctrl_start
snapper_start snapper "$T/lp.sock"

for side in upstream kcsi; do
	diff_side $side
	N=node-$TAG
	mk_sc "imm-$TAG" '{"parameters":{"type":"thin","csi.storage.k8s.io/fstype":"ext4"}}'
	mk_sc "late-$TAG" '{"volumeBindingMode":"WaitForFirstConsumer","allowedTopologies":[{"matchLabelExpressions":[{"key":"'$ZK'","values":["zone-a"]}]}]}'
	mk_sc "bad-$TAG" '{"parameters":{"type":"bogus"}}'
	mk_vsclass "snap-$TAG"
	diff_start prov csi-provisioner --csi-address "unix://$T/lp.sock" --kubeconfig "$KC" \
		--snapshot-orphan-sweep-interval=2s

	claim notopo "imm-$TAG"
	wait_for "$side: the Immediate claim refused for want of topology" 30 no_topology notopo
	check "$side: no volume without topology" eq "$(lp_volumes | wc -l)" 0
	diff_snap 0-no-topology "${KINDS[@]}"
	kc delete pvc notopo -n "$NS" --wait=false >/dev/null

	echo "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"$N\",\"labels\":{\"$ZK\":\"zone-a\"}}}" |
		kc create -f - >/dev/null
	echo "{\"apiVersion\":\"storage.k8s.io/v1\",\"kind\":\"CSINode\",\"metadata\":{\"name\":\"$N\"},
	\"spec\":{\"drivers\":[{\"name\":\"$DRV\",\"nodeID\":\"$N\",\"topologyKeys\":[\"$ZK\"]}]}}" |
		kc create -f - >/dev/null

	claim src "imm-$TAG"
	wait_for "$side: PV of the Immediate claim" 30 claim_provisioned src
	diff_snap 1-provisioned "${KINDS[@]}"
	bind_claim src

	claim late "late-$TAG"
	sleep 2
	diff_snap 2-wffc-waiting "${KINDS[@]}"
	kc annotate pvc late -n "$NS" "volume.kubernetes.io/selected-node=$N" >/dev/null
	wait_for "$side: PV of the WaitForFirstConsumer claim" 30 claim_provisioned late
	diff_snap 3-wffc-provisioned "${KINDS[@]}"
	bind_claim late

	claim clone "imm-$TAG" '{"spec":{"dataSource":{"kind":"PersistentVolumeClaim","name":"src"}}}'
	wait_for "$side: PV of the clone" 30 claim_provisioned clone
	diff_snap 4-cloned "${KINDS[@]}"
	bind_claim clone

	jq -n --arg ns "$NS" --arg c "snap-$TAG" '{apiVersion: "snapshot.storage.k8s.io/v1",
		kind: "VolumeSnapshot", metadata: {name: "snap", namespace: $ns},
		spec: {volumeSnapshotClassName: $c, source: {persistentVolumeClaimName: "src"}}}' |
		kc create -f - >/dev/null
	snap_ready() { [ "$(kc get volumesnapshot snap -n "$NS" -o jsonpath='{.status.readyToUse}')" = true ]; }
	wait_for "$side: snapshot of the first claim" 30 snap_ready
	claim restore "imm-$TAG" '{"spec":{"dataSource":{"apiGroup":"snapshot.storage.k8s.io","kind":"VolumeSnapshot","name":"snap"}}}'
	wait_for "$side: PV of the restore" 30 claim_provisioned restore
	diff_snap 5-restored "${KINDS[@]}"
	bind_claim restore

	CPV=$(claim_pv clone)
	release_claim clone
	wait_for "$side: PV of the deleted clone gone" 30 pv_gone "$CPV"
	diff_snap 6-deleted "${KINDS[@]}"

	claim refused "bad-$TAG" '{"spec":{"dataSource":{"apiGroup":"snapshot.storage.k8s.io","kind":"VolumeSnapshot","name":"snap"}}}'
	wait_for "$side: the refused restore reported" 30 failed_in_ns refused
	check "$side: the snapshot protected while the refused claim is Pending" snap_protected snap
	diff_snap 7-restore-refused "${KINDS[@]}"
	kc delete pvc refused -n "$NS" --wait=false >/dev/null
	wait_for "$side: the orphaned finalizer swept" 20 snap_unprotected snap
	diff_snap 8-swept "${KINDS[@]}"

	# Not compared: what is left goes, so the driver ends empty.
	kc delete volumesnapshot snap -n "$NS" --wait=false >/dev/null
	PVS=()
	for c in src late restore; do PVS+=("$(claim_pv $c)"); release_claim $c; done
	for pv in "${PVS[@]}"; do wait_for "$side: PV $pv gone" 30 pv_gone "$pv"; done
	diff_stop prov
	kc delete csinode "$N" >/dev/null
	kc delete node "$N" >/dev/null # the next side starts with no node again (step 0)
done

# The snapshot-controller is kcsi's on both sides: its events say when the scenario's writes
# reached its cache, not what either provisioner did (CI saw a 409 once on kcsi's side).
DIFF_SHARED_EVENTS=snapshot-controller diff_check csi-provisioner
sigterm_checked sctrl snapper
check "the driver holds no volume" eq "$(lp_volumes | wc -l)" 0
att_finish
