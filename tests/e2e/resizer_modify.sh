#!/bin/bash
# e2e: csi-resizer's modify controller (VolumeAttributesClass) against csi-testdriver: a claim
# that names a class gets ControllerModifyVolume with the class's parameters as
# mutable_parameters (and, with --extra-modify-metadata, the claim's and PV's names), then
# currentVolumeAttributesClassName and the PV's class; an absent class leaves the claim Pending
# until it is created; an InvalidArgument answer is Infeasible, shown, and retried; kubectl
# prints VolumeAttributesClasses as kube-apiserver does; a modify-only driver runs the modify
# controller alone; a driver that can do neither is refused at start.
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
DRV=testdriver.kcsi.dev
. "$(dirname "$0")/lib_provisioner.sh"
. "$(dirname "$0")/lib_resizer.sh"

mk_vac() {
	jq -n --arg n "$1" --arg d "$DRV" --argjson p "$2" '{apiVersion: "storage.k8s.io/v1",
		kind: "VolumeAttributesClass", metadata: {name: $n}, driverName: $d, parameters: $p}' |
		kc create -f - >/dev/null
}
set_vac() {
	req PATCH "/api/v1/namespaces/default/persistentvolumeclaims/$1" \
		"{\"spec\":{\"volumeAttributesClassName\":\"$2\"}}" application/merge-patch+json
	expect_code 200 "set class of $1"
}
current_is() { [ "$(kubectl --kubeconfig "$KC" get pvc "$1" -o jsonpath='{.status.currentVolumeAttributesClassName}')" = "$2" ]; }
mstatus() { pvc_field "$1" '.status.modifyVolumeStatus.status // ""'; }
mstatus_is() { [ "$(mstatus "$1")" = "$2" ]; }
modifies() { grep -c "^ControllerModifyVolume .*\"volume_id\":\"$1\"" "$T/td.rec" 2>/dev/null || true; }

emu_start
mk_sc grow '{"allowVolumeExpansion":true}'
mk_vac gold '{"iops":"3000","throughput":"125"}'
td_start --controller-caps CREATE_DELETE_VOLUME,EXPAND_VOLUME,MODIFY_VOLUME \
	--fail ControllerModifyVolume=INVALID_ARGUMENT --fail-count ControllerModifyVolume=1
rsz_start r1 "$T/td.sock" --extra-modify-metadata

# 1. kubectl shows the class as kube-apiserver prints it.
kc get volumeattributesclasses >"$T/vac.txt" 2>&1
check "columns NAME DRIVERNAME AGE" bash -c "head -1 '$T/vac.txt' | grep -Eq '^NAME +DRIVERNAME +AGE'"
check "row for gold" grep -Eq "^gold +$DRV +[0-9]+s" "$T/vac.txt"
check "short name vac" bash -c "kubectl --kubeconfig '$KC' get vac gold -o jsonpath='{.driverName}' | grep -qx '$DRV'"
check "parameters are immutable" bash -c "! kubectl --kubeconfig '$KC' patch vac gold --type merge -p '{\"parameters\":{\"iops\":\"1\"}}' >/dev/null 2>&1"

# 2. The first call answers InvalidArgument: Infeasible and shown; the retry succeeds.
mk_bound m1 100Mi grow h-m1
set_vac m1 gold
wait_for "event VolumeModifyFailed" 20 has_event PersistentVolumeClaim m1 "VolumeModifyFailed: rpc error: code = InvalidArgument"
wait_for "modified after the retry" 20 current_is m1 gold
check "two calls" eq "$(modifies h-m1)" 2
check "mutable_parameters from the class" grep -q '"mutable_parameters":{[^}]*"iops":"3000"' "$T/td.rec"
check "throughput too" grep -q '"throughput":"125"' "$T/td.rec"
check "--extra-modify-metadata adds the claim's name" grep -q '"csi.storage.k8s.io/pvc/name":"m1"' "$T/td.rec"
check "and the PV's" grep -q '"csi.storage.k8s.io/pv/name":"pv-m1"' "$T/td.rec"
check "PV's class" eq "$(pv_field pv-m1 .spec.volumeAttributesClassName)" gold
check "no modifyVolumeStatus once done" eq "$(mstatus m1)" ""
check "no modify condition left" eq "$(pvc_field m1 '[.status.conditions[]? | select(.type|test("Modif"))] | length')" 0
wait_for "event VolumeModify" 10 has_event PersistentVolumeClaim m1 "VolumeModify: external resizer is modifying volume m1 with vac gold"
wait_for "event VolumeModifySuccessful" 10 has_event PersistentVolumeClaim m1 "VolumeModifySuccessful: external resizer modified volume m1 with vac gold successfully"

# 3. A class that does not exist yet: Pending, then done when it is created.
set_vac m1 silver
wait_for "Pending" 20 mstatus_is m1 Pending
check "target silver" eq "$(pvc_field m1 .status.modifyVolumeStatus.targetVolumeAttributesClassName)" silver
check "current stays gold" eq "$(pvc_field m1 .status.currentVolumeAttributesClassName)" gold
n=$(modifies h-m1)
mk_vac silver '{"iops":"500"}'
wait_for "modified to silver" 20 current_is m1 silver
check "one more call" eq "$(modifies h-m1)" $((n + 1))
check "with silver's parameters" bash -c "grep '^ControllerModifyVolume ' '$T/td.rec' | tail -1 | grep -q '\"iops\":\"500\"'"

# 4. Expansion and modification of one claim at once (two queues, one claim).
mk_bound m2 100Mi grow h-m2
set_vac m2 gold
resize m2 200Mi
wait_for "m2 modified" 20 current_is m2 gold
wait_for "m2 expanded" 20 bash -c "[ \"\$(kubectl --kubeconfig '$KC' get pv pv-m2 -o jsonpath='{.spec.capacity.storage}')\" = 200Mi ]"
att_stop r1 || fail "exit on SIGTERM"
td_stop

# 5. A driver without MODIFY_VOLUME: classes are left alone. (With leader election: the Lease is
# named as upstream names it.)
td_start --controller-caps CREATE_DELETE_VOLUME,EXPAND_VOLUME
rsz_start r2 "$T/td.sock" --leader-election --leader-election-namespace default \
	--leader-election-labels team=storage,tier=controller
wait_for "Lease external-resizer-testdriver-kcsi-dev" 20 kc get lease external-resizer-testdriver-kcsi-dev -n default
check "the Lease carries --leader-election-labels" eq \
	"$(kc get lease external-resizer-testdriver-kcsi-dev -n default -o jsonpath='{.metadata.labels.team},{.metadata.labels.tier}')" storage,controller
mk_bound m3 100Mi grow h-m3
set_vac m3 gold
sleep 2
check "no call without MODIFY_VOLUME" eq "$(grep -c '^ControllerModifyVolume' "$T/td.rec")" 0
check "no status written" eq "$(mstatus m3)" ""
att_stop r2 || fail "exit on SIGTERM"
td_stop

# 6. A modify-only driver (MODIFY_VOLUME, no EXPAND_VOLUME on either side) runs: the modify
# controller alone, as upstream v2.x; a larger request is left alone.
td_start --controller-caps CREATE_DELETE_VOLUME,MODIFY_VOLUME --no-node-expand
rsz_start r3 "$T/td.sock"
mk_bound m4 100Mi grow h-m4
set_vac m4 gold
wait_for "m4 modified by a modify-only driver" 20 current_is m4 gold
resize m4 200Mi
sleep 2
check "no expansion call" eq "$(grep -c '^ControllerExpandVolume' "$T/td.rec")" 0
check "the claim's capacity stays" eq "$(pvc_field m4 .status.capacity.storage)" 100Mi
grep -q "Resize not supported" "$T/r3.log" || fail "r3 does not log that resize is not supported"
att_stop r3 || fail "exit on SIGTERM"
td_stop

# 7. Neither resize nor modify: a start-up error, exit 255 as upstream's klog.Fatalf.
td_start --controller-caps CREATE_DELETE_VOLUME --no-node-expand
rc=0
timeout 10 "$KCSI_BIN/csi-resizer" --csi-address "unix://$T/td.sock" --kubeconfig "$KC" >"$T/r4.log" 2>&1 || rc=$?
check "exit 255 for a driver that can neither resize nor modify" eq "$rc" 255
grep -q "CSI driver does not support resize nor modify" "$T/r4.log" || fail "r4: $(tail -2 "$T/r4.log")"
rsz_finish
