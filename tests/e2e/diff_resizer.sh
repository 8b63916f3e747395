#!/bin/bash
# e2e, drop-in differential: upstream's csi-resizer v2.3.0 (the peers' build) and kcsi's, each
# with its default flags (only the socket and the kubeconfig given, and the gates a user turning
# them on would pass: VolumeAttributesClass, GA and on in both; AnnotateFsResize, beta and on in
# v2.3.0 (named anyway, as a manifest written for v2.2 does), so the PVs carry the
# pre-resize annotation on both sides; not RecoverVolumeExpansionFailure, which v2.3 removed and
# refuses), the same story on one kube-emulator and one kcsi-loopplugin (controller mode,
# --max-volume-size 1Ti), compared field by field (lib_diff.sh): the claims, their PVs and the
# events with their messages (DIFF_EVENT_MESSAGES=1).
#   1. claim "grow" 64Mi -> 128Mi: ControllerExpandVolume, the PV's capacity, allocatedResources,
#      NodeResizePending and FileSystemResizePending (the filesystem grows on the node)
#   2. claim "back" 64Mi -> 9223372036854775807 bytes: OUT_OF_RANGE, ControllerResizeInfeasible
#   3. the same claim -> 100Ti: infeasible again, allocatedResources 100Ti
#   4. the user lowers it to 1Gi (RecoverVolumeExpansionFailure): expanded at once, not after
#      --retry-interval-max (5 minutes by default; the wait below allows 40 s)
#   5. claim "vac": spec.volumeAttributesClassName set to class "gold" (type=thick):
#      ControllerModifyVolume, the claim's current class, the PV's class; its PV names a modify
#      secret (volume.kubernetes.io/controller-modify-secret-* annotations) that exists
#   6. the same claim -> class "bad" (type=bogus): INVALID_ARGUMENT, modifyVolumeStatus Infeasible
#   7. the user rolls back to "gold": the modification ends, the status goes
#   8. claim "nosec": its PV's modify-secret annotations name a secret that does not exist
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
. "$(dirname "$0")/lib_provisioner.sh"
. "$(dirname "$0")/lib_diff.sh"
export DIFF_EVENT_MESSAGES=1
KINDS=(persistentvolumeclaims persistentvolumes)
GATES=VolumeAttributesClass=true,AnnotateFsResize=true

# bound CLAIM SIZE [pv-metadata-json]: a loop volume of SIZE, its PV and claim CLAIM in $NS,
# bound as the binder leaves them.
bound() {
	local claim=$1 size=$2 meta=${3:-"{}"} h uid
	h=$(lp_volume "$claim-$TAG" --cap-bytes "$size")
	jq -n --arg n "$claim" --arg ns "$NS" --arg t "$TAG" --arg s "$size" '{
		apiVersion: "v1", kind: "PersistentVolumeClaim", metadata: {name: $n, namespace: $ns},
		spec: {storageClassName: ("grow-" + $t), accessModes: ["ReadWriteOnce"],
		       volumeMode: "Filesystem", volumeName: ("pv-" + $n + "-" + $t),
		       resources: {requests: {storage: $s}}}}' | kc create -f - >/dev/null
	uid=$(kc get pvc "$claim" -n "$NS" -o jsonpath='{.metadata.uid}')
	jq -n --arg n "$claim" --arg ns "$NS" --arg t "$TAG" --arg s "$size" --arg d "$DRV" \
		--arg h "$h" --arg u "$uid" --argjson m "$meta" '{
		apiVersion: "v1", kind: "PersistentVolume", metadata: ({name: ("pv-" + $n + "-" + $t)} * $m),
		spec: {capacity: {storage: $s}, accessModes: ["ReadWriteOnce"], volumeMode: "Filesystem",
		       storageClassName: ("grow-" + $t), persistentVolumeReclaimPolicy: "Retain",
		       claimRef: {kind: "PersistentVolumeClaim", namespace: $ns, name: $n, uid: $u},
		       csi: {driver: $d, volumeHandle: $h, fsType: "ext4"}}}' | kc create -f - >/dev/null
	status_patch "/api/v1/namespaces/$NS/persistentvolumeclaims/$claim" \
		"{\"status\":{\"phase\":\"Bound\",\"accessModes\":[\"ReadWriteOnce\"],\"capacity\":{\"storage\":\"$size\"}}}"
	status_patch "/api/v1/persistentvolumes/pv-$claim-$TAG" '{"status":{"phase":"Bound"}}'
}
# patch_claim CLAIM SPEC-JSON: what "kubectl edit" of the claim's spec does
patch_claim() {
	req PATCH "/api/v1/namespaces/$NS/persistentvolumeclaims/$1" "{\"spec\":$2}" application/merge-patch+json
	expect_code 200 "patch of claim $1: $2"
}
cf() { kc get pvc "$1" -n "$NS" -o json | jq -r "$2"; }
pvcap_is() { [ "$(kc get pv "pv-$1-$TAG" -o jsonpath='{.spec.capacity.storage}')" = "$2" ]; }
rstatus_is() { [ "$(cf "$1" '.status.allocatedResourceStatuses.storage // ""')" = "$2" ]; }
alloc_is() { [ "$(cf "$1" '.status.allocatedResources.storage // ""')" = "$2" ]; }
mstatus_is() { [ "$(cf "$1" '.status.modifyVolumeStatus.status // ""')" = "$2" ]; }
current_is() { [ "$(cf "$1" '.status.currentVolumeAttributesClassName // ""')" = "$2" ]; }
modify_done() { current_is "$1" "$2" && mstatus_is "$1" ""; }
has_reason() { kc get events -n "$NS" -o json | jq -e --arg n "$1" --arg r "$2" \
	'.items[] | select(.involvedObject.name == $n and .reason == $r)' >/dev/null; }

emu_start
lp_start controller-host --mode controller

for side in upstream kcsi; do
	diff_side $side
	mk_sc "grow-$TAG" '{"allowVolumeExpansion":true}'
	for v in gold:thick bad:bogus; do
		jq -n --arg n "${v%%:*}-$TAG" --arg d "$DRV" --arg t "${v#*:}" '{
			apiVersion: "storage.k8s.io/v1", kind: "VolumeAttributesClass",
			metadata: {name: $n}, driverName: $d, parameters: {type: $t}}' | kc create -f - >/dev/null
	done
	jq -n --arg ns "$NS" '{apiVersion: "v1", kind: "Secret", metadata: {name: "modify-key", namespace: $ns},
		data: {key: "c2VjcmV0"}}' | kc create -f - >/dev/null
	sec() { jq -n --arg ns "$NS" --arg s "$1" '{annotations: {
		"volume.kubernetes.io/controller-modify-secret-name": $s,
		"volume.kubernetes.io/controller-modify-secret-namespace": $ns}}'; }
	bound grow 64Mi
	bound back 64Mi
	bound vac 64Mi "$(sec modify-key)"
	bound nosec 64Mi "$(sec no-such-key)"
	diff_start rsz csi-resizer --csi-address "unix://$T/lp.sock" --kubeconfig "$KC" --feature-gates "$GATES"

	patch_claim grow '{"resources":{"requests":{"storage":"128Mi"}}}'
	wait_for "$side: grow's PV 128Mi" 30 pvcap_is grow 128Mi
	wait_for "$side: grow NodeResizePending" 10 rstatus_is grow NodeResizePending
	diff_snap 1-expanded "${KINDS[@]}"

	patch_claim back '{"resources":{"requests":{"storage":"9223372036854775807"}}}'
	wait_for "$side: back ControllerResizeInfeasible (max int64)" 30 rstatus_is back ControllerResizeInfeasible
	diff_snap 2-infeasible-max "${KINDS[@]}"

	patch_claim back '{"resources":{"requests":{"storage":"100Ti"}}}'
	wait_for "$side: back allocatedResources 100Ti" 30 alloc_is back 100Ti
	wait_for "$side: back ControllerResizeInfeasible (100Ti)" 30 rstatus_is back ControllerResizeInfeasible
	diff_snap 3-infeasible-100Ti "${KINDS[@]}"

	t0=$SECONDS
	patch_claim back '{"resources":{"requests":{"storage":"1Gi"}}}'
	wait_for "$side: back recovered to 1Gi at once" 40 pvcap_is back 1Gi
	wait_for "$side: back NodeResizePending at 1Gi" 10 rstatus_is back NodeResizePending
	echo "  $side: lowered to 1Gi, expanded after $((SECONDS - t0)) s"
	diff_snap 4-recovered "${KINDS[@]}"

	patch_claim vac "{\"volumeAttributesClassName\":\"gold-$TAG\"}"
	wait_for "$side: vac modified to gold" 30 modify_done vac "gold-$TAG"
	diff_snap 5-modified "${KINDS[@]}"

	patch_claim vac "{\"volumeAttributesClassName\":\"bad-$TAG\"}"
	wait_for "$side: vac modify to bad Infeasible" 30 mstatus_is vac Infeasible
	diff_snap 6-modify-infeasible "${KINDS[@]}"

	patch_claim vac "{\"volumeAttributesClassName\":\"gold-$TAG\"}"
	wait_for "$side: vac rolled back to gold" 30 modify_done vac "gold-$TAG"
	diff_snap 7-rolled-back "${KINDS[@]}"

	patch_claim nosec "{\"volumeAttributesClassName\":\"gold-$TAG\"}"
	wait_for "$side: nosec's modification started" 30 has_reason nosec VolumeModify
	sleep 2
	diff_snap 8-no-secret "${KINDS[@]}"

	diff_stop rsz
done

diff_check csi-resizer
# Not compared: the volumes go, so the driver ends empty.
for h in $("$KCSI_BIN/kcsi" --endpoint "unix://$T/lp.sock" -o json controller list-volumes | jq -r '.entries[]?.volume.volume_id'); do
	"$KCSI_BIN/kcsi" --endpoint "unix://$T/lp.sock" controller delete-volume "$h" >/dev/null || fail "DeleteVolume $h"
done
att_finish
