#!/bin/bash
# e2e: csi-resizer with drivers that differ: one without the EXPAND_VOLUME controller capability
# (no call: the PV records the size and the node is left to expand), one that answers
# FailedPrecondition while a pod uses the claim (--handle-volume-inuse-error), a driver socket
# that is absent at start and one that dies (exit non-zero, nothing half-written, done after a
# restart), a claim deleted while ControllerExpandVolume runs, and the per-call deadlines of v2.3
# (--resize-timeout, --modify-timeout, and --timeout on the command line over both).
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
DRV=testdriver.kcsi.dev
. "$(dirname "$0")/lib_provisioner.sh"
. "$(dirname "$0")/lib_resizer.sh"

expands() { grep -c "^ControllerExpandVolume .*\"volume_id\":\"$1\"" "$T/td.rec" 2>/dev/null || true; }
pv_is() { [ "$(kubectl --kubeconfig "$KC" get pv "pv-$1" -o jsonpath='{.spec.capacity.storage}')" = "$2" ]; }
rstatus_is() { [ "$(kubectl --kubeconfig "$KC" get pvc "$1" -o jsonpath='{.status.allocatedResourceStatuses.storage}')" = "$2" ]; }
alive() { kill -0 "${ATT_PIDS[$1]}" 2>/dev/null; }

emu_start
mk_sc grow '{"allowVolumeExpansion":true}'

# 1. No EXPAND_VOLUME controller capability: node-only, no ControllerExpandVolume.
td_start --controller-caps CREATE_DELETE_VOLUME
rsz_start r1 "$T/td.sock"
mk_bound n1 100Mi grow h-n1
resize n1 300Mi
wait_for "PV records 300Mi" 20 pv_is n1 300Mi
wait_for "NodeResizePending" 10 rstatus_is n1 NodeResizePending
check "FileSystemResizePending" eq "$(cond_of n1 FileSystemResizePending)" True
check "allocatedResources 300Mi" eq "$(pvc_field n1 .status.allocatedResources.storage)" 300Mi
check "the driver was never asked" eq "$(grep -c '^ControllerExpandVolume' "$T/td.rec")" 0
check "the log says trivial resizer" grep -q "supports node resize only, using trivial resizer" "$T/r1.log"
att_stop r1 || fail "exit on SIGTERM"
td_stop

# 2. FailedPrecondition while a pod uses the claim: no new call until the pod is gone.
td_start --fail ControllerExpandVolume=FAILED_PRECONDITION --fail-count ControllerExpandVolume=1
rsz_start r2 "$T/td.sock"
mk_bound u1 100Mi grow h-u1
jq -n '{apiVersion:"v1",kind:"Pod",metadata:{name:"user",namespace:"default"},
	spec:{containers:[{name:"c",image:"x"}],volumes:[{name:"v",persistentVolumeClaim:{claimName:"u1"}}]}}' |
	kc create -f - >/dev/null
resize u1 200Mi
wait_for "first call answered FailedPrecondition" 20 bash -c "[ \$(grep -c '^ControllerExpandVolume .*h-u1' '$T/td.rec') -ge 1 ]"
wait_for "the user is told why" 10 has_event PersistentVolumeClaim u1 "only supports offline expansion and volume is currently in-use"
sleep 1.5
check "no second call while the pod exists" eq "$(expands h-u1)" 1
check "PV unchanged" eq "$(pv_cap u1)" 100Mi
kc delete pod user -n default --wait=false >/dev/null
wait_for "expanded once the pod is gone" 20 pv_is u1 200Mi
check "two calls in all" eq "$(expands h-u1)" 2
att_stop r2 || fail "exit on SIGTERM"
td_stop

# 3. The driver socket is absent at start: the resizer waits, then works. (With the node's
# step pending, a larger request waits for it, as upstream: section 1 of resizer_loop.sh.)
rsz_start r3 "$T/td.sock"
sleep 1
check "waiting, not exited" alive r3
# No node step here, so that a second expansion need not wait for a node that never comes.
td_start --node-expansion-required=false
mk_bound s1 100Mi grow h-s1
resize s1 120Mi
wait_for "expanded once the driver came" 20 pv_is s1 120Mi
# The driver dies: the resizer exits non-zero (its orchestrator restarts it), as upstream.
kill -KILL "$TD_PID"
wait "$TD_PID" 2>/dev/null
TD_PID=""
resize s1 140Mi
rc=0
for _ in $(seq 1 100); do alive r3 || break; sleep 0.1; done
wait "${ATT_PIDS[r3]}" || rc=$?
unset "ATT_PIDS[r3]"
check "exits non-zero when the driver is gone" bash -c "[ $rc -ne 0 ]"
check "PV not changed without the driver" eq "$(pv_cap s1)" 120Mi
rm -f "$T/td.sock"
td_start --node-expansion-required=false
rsz_start r4 "$T/td.sock"
wait_for "done after the restart" 20 pv_is s1 140Mi

# 4. The claim is deleted while ControllerExpandVolume runs: no crash, no more calls.
att_stop r4 || fail "exit on SIGTERM"
td_stop
td_start --slow ControllerExpandVolume=1500ms
rsz_start r5 "$T/td.sock"
mk_bound d1 100Mi grow h-d1
resize d1 200Mi
wait_for "the call started" 20 bash -c "grep -q '^ControllerExpandVolume .*h-d1' '$T/td.rec'"
kc delete pvc d1 -n default --wait=false >/dev/null
sleep 3
check "still running" alive r5
check "one call only" eq "$(expands h-d1)" 1
check "the claim stays gone" bash -c "! kubectl --kubeconfig '$KC' get pvc d1 -n default >/dev/null 2>&1"
att_stop r5 || fail "exit on SIGTERM"

# 5. Per-call deadlines: calls of 1.5 s fail with --resize-timeout / --modify-timeout of 300ms
# (the default --timeout of 10s does not count, as it was not given), and succeed when --timeout
# 5s is given, which wins over both.
td_stop
td_start --controller-caps CREATE_DELETE_VOLUME,EXPAND_VOLUME,MODIFY_VOLUME \
	--slow ControllerExpandVolume=1500ms,ControllerModifyVolume=1500ms
jq -n --arg d "$DRV" '{apiVersion: "storage.k8s.io/v1", kind: "VolumeAttributesClass",
	metadata: {name: "gold"}, driverName: $d, parameters: {iops: "3000"}}' | kc create -f - >/dev/null
rsz_start r6 "$T/td.sock" --resize-timeout 300ms --modify-timeout 300ms
mk_bound t1 100Mi grow h-t1
resize t1 200Mi
req PATCH /api/v1/namespaces/default/persistentvolumeclaims/t1 \
	'{"spec":{"volumeAttributesClassName":"gold"}}' application/merge-patch+json
expect_code 200 "set the class of t1"
wait_for "the expansion ends at 300ms" 20 has_event PersistentVolumeClaim t1 "VolumeResizeFailed: .*code = DeadlineExceeded"
wait_for "the modification ends at 300ms" 20 has_event PersistentVolumeClaim t1 "VolumeModifyFailed: .*code = DeadlineExceeded"
check "the PV did not grow" eq "$(pv_cap t1)" 100Mi
check "no class yet" eq "$(pvc_field t1 '.status.currentVolumeAttributesClassName // ""')" ""
att_stop r6 || fail "exit on SIGTERM"
rsz_start r7 "$T/td.sock" --timeout 5s --resize-timeout 300ms --modify-timeout 300ms
wait_for "--timeout 5s wins: expanded" 30 pv_is t1 200Mi
wait_for "--timeout 5s wins: modified" 30 bash -c "[ \"\$(kubectl --kubeconfig '$KC' get pvc t1 -o jsonpath='{.status.currentVolumeAttributesClassName}')\" = gold ]"
att_stop r7 || fail "exit on SIGTERM"
rsz_finish
