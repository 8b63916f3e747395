#!/bin/bash
# e2e: csi-attacher failure paths.
#  - driver errors: attachError {time, message} + Warning event + backoff, then success once the
#    real loop driver can serve the node (its node plugin starts);
#  - --timeout with a slow driver: DeadlineExceeded recorded, never marked attached or detached;
#  - detach failure: detachError, attached stays true, finalizer kept, FailedDetach event;
#  - bad objects: missing PV, PV without spec.csi, malformed Node nodeid annotation: an error in
#    status, no crash.
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
DRV=loop.kcsi.io

emu_start
lp_start node-1
mk_node node-1
mk_node node-2
mk_csinode node-1 $DRV node-1
mk_csinode node-2 $DRV node-2
V=$(lp_volume vol-late)
mk_pv pv-late $DRV "$V"
mk_va va-late $DRV node-2 pv-late
att_start a "$T/lp.sock" -v 2

event_for() { # VA REASON: a Warning event with that reason exists for the VA
	kc get events -n default -o json |
		jq -e ".items[] | select(.involvedObject.name==\"$1\" and .reason==\"$2\" and .type==\"Warning\")" >/dev/null
}
wait_for "attachError on va-late while node-2 is unknown to the driver" 20 va_has_error va-late attachError
check "attachError carries the gRPC error" bash -c "kubectl --kubeconfig '$KC' get volumeattachment va-late -o json | jq -e '.status.attachError.message | test(\"rpc error: code = NotFound\")'"
check "attachError has a time" bash -c "kubectl --kubeconfig '$KC' get volumeattachment va-late -o json | jq -e '.status.attachError.time | test(\"Z$\")'"
check "va-late is not attached" eq "$(va_field va-late '.status.attached // false')" false
wait_for "FailedAttach event" 10 event_for va-late FailedAttach
sleep 3
attempts=$(grep -c 'Error processing "va-late"' "$T/a.log")
check "the attacher retried" test "$attempts" -ge 2
check "with backoff, not a hot loop ($attempts attempts)" test "$attempts" -lt 40
lp_node_start node-2
wait_for "va-late attached once the driver recovers" 20 va_attached va-late
check "attachError cleared on success" eq "$(va_field va-late '.status.attachError // "none"')" none

# Bad objects give an error in status, not a crash.
mk_va va-nopv $DRV node-1 no-such-pv
echo '{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"pv-hostpath"},
  "spec":{"capacity":{"storage":"1Gi"},"accessModes":["ReadWriteOnce"],"hostPath":{"path":"/tmp"}}}' |
	kc create -f - >/dev/null
mk_va va-nocsi $DRV node-1 pv-hostpath
mk_node node-bad 'this is { not json'
V2=$(lp_volume vol-bad)
mk_pv pv-bad $DRV "$V2"
mk_va va-badnode $DRV node-bad pv-bad
wait_for "missing PV reported" 20 va_has_error va-nopv attachError
check "missing PV message" bash -c "kubectl --kubeconfig '$KC' get volumeattachment va-nopv -o json | jq -e '.status.attachError.message | test(\"no-such-pv\")'"
wait_for "non-CSI PV reported" 20 va_has_error va-nocsi attachError
check "non-CSI PV message" bash -c "kubectl --kubeconfig '$KC' get volumeattachment va-nocsi -o json | jq -e '.status.attachError.message | test(\"not a CSI volume\")'"
wait_for "malformed nodeid annotation reported" 20 va_has_error va-badnode attachError
check "malformed annotation message" bash -c "kubectl --kubeconfig '$KC' get volumeattachment va-badnode -o json | jq -e '.status.attachError.message | test(\"malformed csi.volume.kubernetes.io/nodeid annotation on Node node-bad\")'"
check "no finalizer on a VA that could not be checked" eq "$(va_field va-badnode '.metadata.finalizers // [] | length')" 0
check "attacher still running" kill -0 "${ATT_PIDS[a]}"
kc delete volumeattachment va-late va-nopv va-nocsi va-badnode --wait=false >/dev/null
wait_for "va-late detached" 20 va_gone va-late
wait_for "va-badnode deleted (no finalizer to hold it)" 20 va_gone va-badnode
att_stop a || fail "attacher exit status"

# A driver that fails three times, then succeeds.
td_start --fail-count ControllerPublishVolume=3 --fail ControllerPublishVolume=INTERNAL
"$KCSI_BIN/kcsi" --endpoint "unix://$T/td.sock" controller create-volume flaky >/dev/null
mk_csinode node-td testdriver.kcsi.dev td-1
mk_pv pv-flaky testdriver.kcsi.dev vol-flaky
mk_va va-flaky testdriver.kcsi.dev node-td pv-flaky
att_start f "$T/td.sock"
wait_for "va-flaky attached after three failures" 30 va_attached va-flaky
check "four publish calls reached the driver" eq "$(grep -c '^ControllerPublishVolume ' "$T/td.rec")" 4
check "attachError cleared once attached" eq "$(va_field va-flaky '.status.attachError // "none"')" none
wait_for "the failures were recorded as events" 10 event_for va-flaky FailedAttach
att_stop f || fail "attacher exit status"
td_stop

# Slow driver and --timeout; then unpublish failures.
td_start --slow ControllerPublishVolume=3s --fail ControllerUnpublishVolume=INTERNAL
"$KCSI_BIN/kcsi" --endpoint "unix://$T/td.sock" controller create-volume slow >/dev/null
mk_pv pv-slow testdriver.kcsi.dev vol-slow
mk_va va-slow testdriver.kcsi.dev node-td pv-slow
att_start s "$T/td.sock" --timeout 1s
wait_for "DeadlineExceeded recorded" 20 bash -c "kubectl --kubeconfig '$KC' get volumeattachment va-slow -o json | jq -e '.status.attachError.message | test(\"DeadlineExceeded\")'"
check "a timed-out attach is not marked attached" eq "$(va_field va-slow '.status.attached // false')" false
att_stop s || fail "attacher exit status"
att_start s2 "$T/td.sock" --timeout 10s
wait_for "va-slow attached with a longer --timeout" 30 va_attached va-slow
kc delete volumeattachment va-slow --wait=false >/dev/null
wait_for "detachError recorded" 20 va_has_error va-slow detachError
check "failed detach keeps attached=true" eq "$(va_field va-slow .status.attached)" true
check "failed detach keeps the finalizer" eq "$(va_field va-slow '.metadata.finalizers | join(",")')" external-attacher/testdriver-kcsi-dev
check "detachError message" bash -c "kubectl --kubeconfig '$KC' get volumeattachment va-slow -o json | jq -e '.status.detachError.message | test(\"code = Internal\")'"
wait_for "FailedDetach event" 10 event_for va-slow FailedDetach

# Losing the driver connection ends the attacher with an error, so the orchestrator restarts it.
td_stop
att_exited() { ! kill -0 "${ATT_PIDS[s2]}" 2>/dev/null; }
wait_for "csi-attacher exits when the driver goes away" 20 att_exited
rc=0
wait "${ATT_PIDS[s2]}" || rc=$?
unset "ATT_PIDS[s2]"
check "exit status after connection loss is non-zero ($rc)" test "$rc" -ne 0
check "the log says why" grep -q "Lost connection to CSI driver" "$T/s2.log"
att_finish
