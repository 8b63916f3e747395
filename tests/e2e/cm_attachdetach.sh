#!/bin/bash
# e2e: kcsi-controller-manager's attachdetach controller with kube-emulator, csi-attacher and the
# real kcsi-loopplugin as separate processes; the script plays the node agent (CSINode, Ready,
# volumesInUse). Seed 002's loop end to end: attach through a VolumeAttachment named as Kubernetes
# names it, volumesAttached persisted, safe detach waits for volumesInUse, the ReadWriteOnce
# Multi-Attach policy, force detach from a NotReady node after the (shortened) max wait,
# attachRequired=false, metrics, clean SIGTERM.
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
. "$(dirname "$0")/lib_cm.sh"
DRV=loop.kcsi.io

emu_start
lp_start node-1
lp_node_start node-2
mk_mnode node-1
mk_mnode node-2
mk_csinode node-1 $DRV node-1
mk_csinode node-2 $DRV node-2
V1=$(lp_volume vol-1)
mk_pv pv-1 $DRV "$V1"
mk_bound_claim claim-1 pv-1
U1=$(uniq "$V1")

att_start att "$T/lp.sock"
# nodelifecycle is off: the script's nodes post no heartbeats, and would turn Unknown after 50 s.
cm_start cm --controllers '*,-nodelifecycle' --http-endpoint 127.0.0.1:0 --max-wait-for-unmount 10s -v 4
PORT=$(cm_http_port cm)
check "diagnostics port logged" test -n "$PORT"
check "/healthz answers ok" eq "$(curl -s "http://127.0.0.1:$PORT/healthz")" ok

# A pod on node-1: attach, persisted in node-1's volumesAttached, event on the pod.
mk_pod pod-a node-1 claim-1
VA1=$(va_name "$V1" node-1)
wait_for "VolumeAttachment $VA1 attached" 30 va_attached "$VA1"
check "VA spec names driver, node and PV" eq "$(va_field "$VA1" '.spec.attacher + " " + .spec.nodeName + " " + .spec.source.persistentVolumeName')" "$DRV node-1 pv-1"
check "driver publishes the volume on node-1" lp_published "$V1" node-1
wait_for "node-1 lists $U1 in volumesAttached" 10 node_lists node-1 "$U1"
wait_for "SuccessfulAttachVolume event on pod-a" 10 has_event pod-a SuccessfulAttachVolume \
	"AttachVolume.Attach succeeded for volume \"pv-1\""
check "the event comes from attachdetach-controller (kube-controller-manager's source)" \
	eq "$(event_source pod-a SuccessfulAttachVolume)" "attachdetach-controller attachdetach-controller"
check "exactly one VolumeAttachment" eq "$(va_count)" 1

# The node uses it. A second pod on node-2 wants the same ReadWriteOnce volume: Multi-Attach.
node_in_use node-1 "$U1"
mk_pod pod-b node-2 claim-1
wait_for "Multi-Attach event on pod-b" 10 has_event pod-b FailedAttachVolume \
	"Multi-Attach error for volume \"pv-1\" Volume is already used by pod(s) pod-a"
check "no VolumeAttachment for node-2" va_gone "$(va_name "$V1" node-2)"

# pod-a goes; node-1 still lists the volume in use: no detach.
kc delete pod pod-a --wait=false >/dev/null
sleep 2
check "VA kept while node-1 still uses the volume" va_attached "$VA1"
check "node-1 still lists the volume attached" node_lists node-1 "$U1"
check "still no VolumeAttachment for node-2" va_gone "$(va_name "$V1" node-2)"

# The node unmounts: detach, then the pod on node-2 gets the volume.
node_in_use node-1
wait_for "VA on node-1 deleted" 30 va_gone "$VA1"
check "node-1 no longer lists the volume" node_lists_not node-1 "$U1"
check "driver unpublished node-1" lp_not_published "$V1" node-1
VA2=$(va_name "$V1" node-2)
wait_for "VolumeAttachment $VA2 attached" 30 va_attached "$VA2"
wait_for "node-2 lists the volume" 10 node_lists node-2 "$U1"

# node-2 uses it and stops being Ready; its pod is deleted. Force detach after the max wait (10 s:
# long enough that node-1's unmount above is reported within it on a loaded machine too; past
# it, upstream's reconciler counts even a safe detach as forced).
node_in_use node-2 "$U1"
node_ready node-2 False
sleep 0.5
kc delete pod pod-b --wait=false >/dev/null
sleep 1.5
check "NotReady node: VA kept within the max wait" va_attached "$VA2"
wait_for "VA on node-2 force-detached after the max wait" 25 va_gone "$VA2"
check "node-2's volumesAttached is empty" eq "$(attached_list node-2 | wc -l)" 0
curl -s "http://127.0.0.1:$PORT/metrics" >"$T/metrics"
check "forced detach counted" grep -q '^attachdetach_controller_forced_detaches{reason="timeout"} 1' "$T/metrics"
check "attaches counted" grep -q '^kcsi_attachdetach_operations_total{operation="attach",result="success"} 2' "$T/metrics"
check "process metrics" grep -q '^process_resident_memory_bytes [1-9]' "$T/metrics"
check "log says why it forced, in upstream's words" grep -q 'this volume is not safe to detach, but maxWaitForUnmountDuration expired, force detaching duration="10s"' "$T/cm.log"
node_ready node-2 True

# A driver whose CSIDriver says attachRequired: false gets no VolumeAttachment.
echo '{"apiVersion":"storage.k8s.io/v1","kind":"CSIDriver","metadata":{"name":"noattach.kcsi.io"},
	"spec":{"attachRequired":false}}' | kc create -f - >/dev/null
mk_pv pv-na noattach.kcsi.io vol-na
mk_bound_claim claim-na pv-na
mk_pod pod-na node-1 claim-na
# A pod on a node without the controller-managed annotation is left to its kubelet.
mk_node node-3
mk_csinode node-3 $DRV node-3
V3=$(lp_volume vol-3)
mk_pv pv-3 $DRV "$V3"
mk_bound_claim claim-3 pv-3
mk_pod pod-3 node-3 claim-3
# And an unscheduled pod and a pod whose claim is not bound get nothing either.
mk_pod pod-pending "" claim-1
sleep 2
check "no VolumeAttachment for attachRequired=false, unmanaged node, pending pod" eq "$(va_count)" 0

# The first attach fails, the next one works (the attacher's PV cache lagged, its driver was
# down): the controller must try again and tell the node. The script plays the attacher's first
# answer while csi-attacher is stopped. A new pair whose first attach failed once counted as
# attached and never reached the node's volumesAttached: its pod waited for ever.
att_stop att
V4=$(lp_volume vol-4)
mk_pv pv-4 $DRV "$V4"
mk_bound_claim claim-4 pv-4
U4=$(uniq "$V4")
VA4=$(va_name "$V4" node-1)
mk_pod pod-4 node-1 claim-4
wait_for "VolumeAttachment $VA4 created" 10 kc get volumeattachment "$VA4"
kc patch volumeattachment "$VA4" --subresource=status --type=merge -p \
	"{\"status\":{\"attachError\":{\"time\":\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\",\"message\":\"the first try failed\"}}}" >/dev/null
wait_for "FailedAttachVolume event on pod-4" 10 has_event pod-4 FailedAttachVolume "the first try failed"
check "node-1 does not list a volume whose attach failed" node_lists_not node-1 "$U4"
att_start att "$T/lp.sock"
wait_for "VolumeAttachment $VA4 attached on the attacher's next try" 30 va_attached "$VA4"
wait_for "node-1 lists $U4 after the retry" 10 node_lists node-1 "$U4"
wait_for "SuccessfulAttachVolume event on pod-4" 10 has_event pod-4 SuccessfulAttachVolume \
	"AttachVolume.Attach succeeded for volume \"pv-4\""

cm_stop cm
check "SIGTERM exits 0" eq "$?" 0
kc delete pod pod-na pod-3 pod-pending pod-4 --wait=false >/dev/null
cm_finish
