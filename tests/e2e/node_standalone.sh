#!/bin/bash
# e2e: kcsi-node --enable-controller-attach-detach=false (the kubelet's enableControllerAttachDetach:
# false; seed 002's kubelet that attaches its own volumes) beside a controller-managed node, with
# kcsi-controller-manager (its attach/detach controller) running all along, kcsi-loopplugin and
# csi-attacher:
#   - the standalone node's Node loses the controller-managed-attach-detach annotation an earlier
#     life left; the managed node has it;
#   - a pod on the standalone node: kcsi-node creates the VolumeAttachment (named as Kubernetes
#     names it), csi-attacher publishes, the volume is staged and published, the pod Running,
#     SuccessfulAttachVolume from the kubelet; the controller neither attaches it nor lists it in
#     the node's volumesAttached; a pod on the managed node is attached by the controller;
#   - a restarted kcsi-controller-manager leaves the standalone node's VolumeAttachment alone;
#   - the pod deleted: unpublished, unstaged, then kcsi-node deletes the VolumeAttachment, the
#     driver unpublishes and the object goes;
#   - an attach the driver refuses: the VolumeAttachment's attachError is a FailedAttachVolume
#     event on the pod, which never runs; deleting it deletes the VolumeAttachment;
#   - kcsi-node stopped while its pod is deleted: at its restart it finds its VolumeAttachment
#     and detaches it after unmounting; SIGTERM exits 0 within a second.
: "${KCSI_SRC:?}"
source "$KCSI_SRC/tests/e2e/lib_emulator.sh"
source "$KCSI_SRC/tests/e2e/lib_attacher.sh"
source "$KCSI_SRC/tests/e2e/lib_node.sh"
CM_PID=""
cm_start() {
	"$KCSI_BIN/kcsi-controller-manager" --kubeconfig "$KC" --controllers '*,-nodelifecycle' -v 4 \
		>>"$T/cm.log" 2>&1 &
	CM_PID=$!
}
cm_stop() { kill -TERM "$CM_PID"; wait "$CM_PID"; local rc=$?; CM_PID=""; return $rc; }
trap '[ -n "$CM_PID" ] && kill -KILL "$CM_PID" 2>/dev/null; node_cleanup' EXIT
CMAD=volumes.kubernetes.io/controller-managed-attach-detach
annotation() { node_json "$1" | jq -r --arg a "$CMAD" '.metadata.annotations[$a] // "none"'; }
attached_count() { node_json "$1" | jq '(.status.volumesAttached // []) | length'; }
event_from() { # POD REASON: the source component of the pod's event with REASON
	kc get events -o json | jq -r --arg p "$1" --arg r "$2" \
		'[.items[] | select(.involvedObject.name==$p and .reason==$r)][0].source.component // ""'
}
# claim_on NAME NODE POD: volume NAME as PV pv-NAME, claim c-NAME, pod POD on NODE; handle on stdout
claim_on() {
	local h
	h=$(lp_volume "$1" --cap SINGLE_NODE_WRITER,mount,ext4)
	mk_pv "pv-$1" loop.kcsi.io "$h" '{"csi":{"driver":"loop.kcsi.io","volumeHandle":"'"$h"'","fsType":"ext4"},"claimRef":{"namespace":"default","name":"c-'"$1"'"}}'
	mk_claim "c-$1" "pv-$1"
	mk_pod "$3" "$2" "c-$1"
	echo "$h"
}

emu_start
# n1 was a controller-managed node before: the annotation is on its Node.
kc create -f - >/dev/null <<EOF
{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1","annotations":{"$CMAD":"true"}}}
EOF
controller_up
node_up n1 --enable-controller-attach-detach=false
node_up n2
cm_start
wait_for "n1 registered" 15 csinode_has n1 loop.kcsi.io
wait_for "n2 registered" 15 csinode_has n2 loop.kcsi.io
check "n1 (standalone) has no controller-managed annotation" eq "$(annotation n1)" none
check "n2 (managed) has the annotation" eq "$(annotation n2)" true
grep -q 'Successfully registered node node="n1" controllerAttachDetach=false' "$T/nodes/n1/kcsi-node.log" ||
	fail "kcsi-node does not say n1 attaches its own volumes"

# ---- a pod on the standalone node ----
h=$(claim_on v1 n1 p1)
VA=$(va_of "$h" n1)
wait_for "p1 Running" 40 pod_running p1
check "VolumeAttachment names driver, node and PV" eq \
	"$(va_field "$VA" '.spec.attacher + " " + .spec.nodeName + " " + .spec.source.persistentVolumeName')" \
	"loop.kcsi.io n1 pv-v1"
check "VolumeAttachment attached" va_attached "$VA"
grep -q "VolumeAttachment $VA for volume \"pv-v1\" created" "$T/nodes/n1/kcsi-node.log" ||
	fail "kcsi-node did not create $VA"
check "the driver published the volume to n1" lp_published "$h" n1
uid=$(pod_uid p1)
tgt=$(pod_target n1 "$uid" pv-v1)
stg=$(staging_of n1 "$h")
mountpoint -q "$stg" || fail "not staged at $stg"
mountpoint -q "$tgt" || fail "not published at $tgt"
check "SuccessfulAttachVolume from the kubelet" eq "$(event_from p1 SuccessfulAttachVolume)" kubelet
check "n1's volumesAttached stays empty (no controller attach)" eq "$(attached_count n1)" 0
pat="$VA|(Attach|Detach)Volume.*node \"n1\""
grep -Eq "$pat" "$T/cm.log" && fail "kcsi-controller-manager acted on n1's volume: $(grep -E "$pat" "$T/cm.log" | head -3)"

# ---- a pod on the managed node: the controller attaches it ----
h2=$(claim_on v2 n2 p2)
wait_for "p2 Running" 40 pod_running p2
check "the controller attached p2's volume" eq "$(event_from p2 SuccessfulAttachVolume)" attachdetach-controller
check "n2's volumesAttached lists it" eq "$(attached_count n2)" 1

# ---- kcsi-controller-manager restarted: n1's VolumeAttachment is left alone ----
cm_stop || fail "kcsi-controller-manager did not exit 0 on SIGTERM"
cm_start
wait_for "kcsi-controller-manager read its state back again" 20 \
	bash -c "[ \$(grep -c 'attachdetach: actual state read back' '$T/cm.log') -ge 2 ]"
# n2's attachment only: n1's is its own kubelet's
check "the restarted controller adopted n2's attachment only" \
	grep -q 'actual state read back: 1 pair(s) from Node.status.volumesAttached, 0 more' "$T/cm.log"
sleep 2
check "n1's VolumeAttachment survives a controller restart" va_attached "$VA"
check "still published on n1" lp_published "$h" n1
mountpoint -q "$tgt" || fail "p1's volume lost its mount after the controller restart"

# ---- the pod goes: unmount, then kcsi-node detaches ----
kc delete pod p1 --wait=false >/dev/null
wait_for "p1 gone" 30 pod_gone p1
wait_for "VolumeAttachment $VA gone" 30 va_gone "$VA"
check "unstaged before the detach" bash -c "! mountpoint -q '$stg'"
check "the driver unpublished the volume" lp_not_published "$h" n1
grep -q "Deleted VolumeAttachment $VA of volume \"pv-v1\"" "$T/nodes/n1/kcsi-node.log" ||
	fail "kcsi-node did not delete $VA"
wait_for "kcsi-node reports the detach" 5 \
	grep -q 'DetachVolume.Detach succeeded for volume "pv-v1" node="n1"' "$T/nodes/n1/kcsi-node.log"

# ---- a failed attach: the attacher's attachError reaches the pod; the pod's end detaches ----
mk_pv pv-bad loop.kcsi.io lv-0000000000000bad '{"claimRef":{"namespace":"default","name":"c-bad"}}'
mk_claim c-bad pv-bad
mk_pod pbad n1 c-bad
VABAD=$(va_of lv-0000000000000bad n1)
wait_for "FailedAttachVolume with the attacher's error" 30 \
	pod_event pbad FailedAttachVolume 'AttachVolume.Attach failed for volume "pv-bad" : '
check "the failed attach is the driver's NotFound" pod_event pbad FailedAttachVolume "lv-0000000000000bad"
check "pbad is not Running" bash -c "! kubectl --kubeconfig '$KC' get pod pbad -o json | jq -e '.status.phase==\"Running\"'"
kc delete pod pbad --wait=false >/dev/null
wait_for "pbad gone" 30 pod_gone pbad
wait_for "its VolumeAttachment deleted by kcsi-node" 30 va_gone "$VABAD"

# ---- kcsi-node down while its pod is deleted: detached after the restart ----
mk_pod p3 n1 c-v1
wait_for "p3 Running" 40 pod_running p3
wait_for "VolumeAttachment $VA again" 10 va_attached "$VA"
kill -TERM "${NODE_PIDS[n1:node]}"
start=$(date +%s%N)
wait "${NODE_PIDS[n1:node]}"
rc=$?
check "kcsi-node exits 0 on SIGTERM" eq "$rc" 0
check "within a second" test $(( ($(date +%s%N) - start) / 1000000 )) -lt 1000
kc delete pod p3 --wait=false >/dev/null
sleep 1
check "the VolumeAttachment stays while kcsi-node is down" va_attached "$VA"
kcsi_node_start n1 --enable-controller-attach-detach=false
wait_for "p3 gone" 30 pod_gone p3
wait_for "VolumeAttachment $VA gone after the restart" 30 va_gone "$VA"
grep -q 'Found 1 VolumeAttachment(s) of node "n1" from before the start' "$T/nodes/n1/kcsi-node.log" ||
	fail "kcsi-node did not take its VolumeAttachment back at start"
check "the driver unpublished the volume" lp_not_published "$h" n1

kc delete pod p2 --wait=false >/dev/null
wait_for "p2 gone" 30 pod_gone p2
# Clean exits, so that a sanitizer build (build-asan) reports leaks and errors in the logs.
cm_stop || fail "kcsi-controller-manager did not exit 0 on SIGTERM"
for n in n1 n2; do
	kill -TERM "${NODE_PIDS[$n:node]}"
	wait "${NODE_PIDS[$n:node]}" || fail "kcsi-node $n exited $? on SIGTERM"
done
san=$(grep -lE "ERROR: (Address|Leak)Sanitizer|runtime error:" "$T"/*.log "$T"/nodes/*/*.log 2>/dev/null)
[ -z "$san" ] || fail "sanitizer report in $san: $(grep -hA20 -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' $san | head -40)"
node_finish
