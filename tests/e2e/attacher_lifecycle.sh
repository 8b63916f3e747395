#!/bin/bash
# e2e: csi-attacher with kube-emulator and the real kcsi-loopplugin, as separate processes.
# Attach and detach with finalizers, status, node-ID annotation and attachment metadata; the PV
# finalizer stays until the last VolumeAttachment of the PV is gone; metrics; clean SIGTERM.
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
DRV=loop.kcsi.io
FIN=external-attacher/loop-kcsi-io

emu_start
lp_start node-1
lp_node_start node-2
mk_node node-1
mk_node node-2
mk_csinode node-1 $DRV node-1
mk_csinode node-2 $DRV node-2
V1=$(lp_volume vol-1)
V2=$(lp_volume vol-2)
mk_pv pv-rwo $DRV "$V1" '{"csi":{"fsType":"ext4"},"mountOptions":["noatime"]}'
mk_pv pv-rox $DRV "$V2" '{"accessModes":["ReadOnlyMany"]}'
mk_va va-1 $DRV node-1 pv-rwo
mk_va va-other other.driver.io node-1 pv-rwo

att_start a "$T/lp.sock" --http-endpoint 127.0.0.1:0 -v 5
PORT=$(att_http_port a)

wait_for "va-1 attached" 20 va_attached va-1
check "va-1 has the attacher finalizer" eq "$(va_field va-1 '.metadata.finalizers | join(",")')" "$FIN"
check "va-1 remembers the node ID" eq "$(va_field va-1 '.metadata.annotations["csi.alpha.kubernetes.io/node-id"]')" node-1
check "attachmentMetadata is the driver's publish context" \
	eq "$(va_field va-1 '.status.attachmentMetadata.device // empty' | cut -c1-3)" xvd
check "no attachError after success" eq "$(va_field va-1 '.status.attachError // "none"')" none
check "pv-rwo got the finalizer" eq "$(kc get pv pv-rwo -o json | jq -r '.metadata.finalizers | join(",")')" "$FIN"
check "driver publishes vol-1 on node-1" lp_published "$V1" node-1
check "a VA of another driver is untouched" eq "$(va_field va-other '(.status.attached // false|tostring) + "/" + ((.metadata.finalizers // []) | length | tostring)')" "false/0"

# Two read-only attachments of one PV; the PV finalizer waits for the last one.
mk_va va-2 $DRV node-1 pv-rox
mk_va va-3 $DRV node-2 pv-rox
wait_for "va-2 attached" 20 va_attached va-2
wait_for "va-3 attached" 20 va_attached va-3
check "driver publishes vol-2 on both nodes" lp_published "$V2" node-2
kc delete pv pv-rox --wait=false >/dev/null
kc delete volumeattachment va-2 --wait=false >/dev/null
wait_for "va-2 detached and removed" 20 va_gone va-2
sleep 1
check "pv-rox keeps the finalizer while va-3 exists" eq "$(kc get pv pv-rox -o json | jq -r '.metadata.finalizers | join(",")')" "$FIN"
"$KCSI_BIN/kcsi" --endpoint "unix://$T/lp.sock" -o json controller list-volumes |
	jq -e ".entries[] | select(.volume.volume_id==\"$V2\") | .status.published_node_ids == [\"node-2\"]" >/dev/null ||
	fail "vol-2 should be published on node-2 only"
kc delete volumeattachment va-3 --wait=false >/dev/null
wait_for "va-3 removed" 20 va_gone va-3
wait_for "pv-rox finalizer removed and PV deleted" 20 pv_gone pv-rox

# Detach va-1; pv-rwo is not being deleted, so its finalizer stays. Watched as `kubectl get -w`
# shows it: upstream v4.9+'s order, the finalizer goes before status.attached turns false, so
# the VA is never "being deleted, finalizer on, attached false" (which reads as a detach that
# may have timed out, and was unpublished a second time after a crash between the two patches).
kc get volumeattachment va-1 --watch --output-watch-events -o json >"$T/va-1.watch" 2>/dev/null &
WATCH=$!
sleep 0.5
kc delete volumeattachment va-1 --wait=false >/dev/null
wait_for "va-1 removed" 20 va_gone va-1
sleep 0.5
kill "$WATCH" 2>/dev/null; wait "$WATCH" 2>/dev/null
deleting() { jq -c --arg f "$FIN" 'select(.object.metadata.deletionTimestamp) | [.type, ((.object.metadata.finalizers // []) | index($f) != null), (.object.status.attached // false)]' "$T/va-1.watch"; }
check "the watch saw va-1 being deleted" bash -c "[ -n '$(deleting | head -1)' ]"
check "never attached=false while the finalizer is on" eq "$(deleting | grep -c '^\["[A-Z]*",true,false\]')" 0
check "removed with attached=true and no finalizer (finalizer first)" eq "$(deleting | tail -1)" '["DELETED",false,true]'
check "vol-1 unpublished" lp_not_published "$V1" node-1
check "pv-rwo keeps its finalizer (not being deleted)" eq "$(kc get pv pv-rwo -o json | jq -r '.metadata.finalizers | join(",")')" "$FIN"

# Metrics as the Go sidecar exports them.
curl -s "http://127.0.0.1:$PORT/metrics" >"$T/metrics"
check "publish histogram with upstream labels" grep -q \
	'^csi_sidecar_operations_seconds_count{driver_name="loop.kcsi.io",grpc_status_code="OK",method_name="/csi.v1.Controller/ControllerPublishVolume"} [1-9]' "$T/metrics"
check "unpublish counted" grep -q 'method_name="/csi.v1.Controller/ControllerUnpublishVolume"} [1-9]' "$T/metrics"
check "workqueue metrics" grep -q '^workqueue_adds_total{name="csi-attacher-va"} [1-9]' "$T/metrics"
check "process metrics" grep -q '^process_resident_memory_bytes [1-9]' "$T/metrics"
check "log names the driver" grep -q 'CSI driver name: "loop.kcsi.io"' "$T/a.log"

att_stop a
check "SIGTERM exits 0" eq "$?" 0
att_finish
