#!/bin/bash
# e2e: kcsi-node's node expansion and volume stats, with kcsi-loopplugin (controller and node
# mode), csi-attacher and kube-emulator; the test plays the attach/detach controller, the binder
# (claim status) and the resizer (ControllerExpandVolume with the kcsi CLI, the PV's new
# capacity, the claim's FileSystemResizePending / NodeResizePending):
#   - online: an ext4 volume of a running pod grows (df), the claim's status records the size
#     and loses the resize condition and allocatedResourceStatuses, FileSystemResizeSuccessful
#     (where resize2fs may grow a mounted ext4: CAP_SYS_RESOURCE; elsewhere the driver's final
#     error is checked: VolumeResizeFailed, NodeResizeError, no retry);
#   - a block volume grows (blockdev --getsize64 on the publish path), older resizer's form;
#   - offline: grown while no pod used it, expanded after NodeStage, before the next pod sees it;
#   - /metrics has kubelet_volume_stats_* for the claim: capacity = the filesystem's size, used
#     grows after writing a file; no health gauge (CSI v1.13 removed VolumeCondition, the kubelet
#     v1.37 its gauge and event): a mount lost behind kcsi-node's back is the driver's
#     NodeGetVolumeHealth answer (NotPublishedAtPath, asked with the kcsi CLI), not an event;
#   - bad input: the condition without a larger PV makes no call; a driver error is an event and
#     is retried (older resizer) or, infeasible, recorded as NodeResizeInfeasible and not retried.
: "${KCSI_SRC:?}"
source "$KCSI_SRC/tests/e2e/lib_emulator.sh"
source "$KCSI_SRC/tests/e2e/lib_attacher.sh"
source "$KCSI_SRC/tests/e2e/lib_node.sh"
emu_start
controller_up
node_up n1 --http-endpoint 127.0.0.1:0 --volume-stats-agg-period 1s
wait_for "n1 registered" 15 csinode_has n1 loop.kcsi.io
port=$(grep -o 'Starting HTTP server endpoint="127.0.0.1:0" port=[0-9]*' "$T/nodes/n1/kcsi-node.log" | grep -o '[0-9]*$')
[ -n "$port" ] || fail "kcsi-node did not log its HTTP port"

MI=$((1024 * 1024))
claim_status() {
	curl -sk "${CURL_EXTRA[@]}" -X PATCH -H 'Content-Type: application/merge-patch+json' \
		--data "$2" "$S/api/v1/namespaces/default/persistentvolumeclaims/$1/status" >/dev/null
}
claim_json() { kc get pvc "$1" -o json; }
# resize_to HANDLE PV CLAIM MIB [legacy]: the resizer's part: ControllerExpandVolume, PV capacity,
# the claim's FileSystemResizePending (+ NodeResizePending and allocatedResources, unless legacy)
resize_to() {
	"$KCSI_BIN/kcsi" --endpoint "unix://$T/lp.sock" controller expand "$1" $(($4 * MI)) >/dev/null ||
		fail "ControllerExpandVolume $1"
	kc patch pv "$2" --type merge -p "{\"spec\":{\"capacity\":{\"storage\":\"$4Mi\"}}}" >/dev/null
	local cond='{"type":"FileSystemResizePending","status":"True","message":"Waiting for user to (re-)start a pod to finish file system resize of volume on node."}'
	if [ "${5:-}" = legacy ]; then
		claim_status "$3" "{\"status\":{\"conditions\":[$cond]}}"
	else
		claim_status "$3" "{\"status\":{\"conditions\":[$cond],\"allocatedResourceStatuses\":{\"storage\":\"NodeResizePending\"},\"allocatedResources\":{\"storage\":\"$4Mi\"}}}"
	fi
}
# claim_resized CLAIM MIB: capacity recorded, resize condition and storage status gone
claim_resized() {
	claim_json "$1" | jq -e --arg q "$2Mi" '.status.capacity.storage==$q
		and ([.status.conditions[]? | select(.type=="FileSystemResizePending")] | length == 0)
		and (.status.allocatedResourceStatuses.storage // "") == ""' >/dev/null
}
fs_size() { df -B1 --output=size "$1" | tail -1 | tr -d ' '; }
fs_at_least() { [ "$(fs_size "$1")" -ge "$2" ]; }
metric() {
	curl -s "http://127.0.0.1:$port/metrics" | grep "^$1{namespace=\"default\",persistentvolumeclaim=\"$2\"}" |
		awk '{print $2}'
}
metric_is() { [ "$(metric "$1" "$2")" = "$3" ]; }
metric_at_least() { local v; v=$(metric "$1" "$2"); [ -n "$v" ] && [ "$v" -ge "$3" ]; }
# mk_bound PV HANDLE CLAIM [extra PV spec]: a 16Mi PV and its claim, Bound with capacity 16Mi
mk_bound() {
	local x=${4:-}
	[ -n "$x" ] || x='{}'
	mk_pv "$1" loop.kcsi.io "$2" "$(jq -nc --arg c "$3" --argjson x "$x" \
		'{capacity: {storage: "16Mi"}, claimRef: {namespace: "default", name: $c}} * $x')"
	mk_claim "$3" "$1"
	claim_status "$3" '{"status":{"phase":"Bound","capacity":{"storage":"16Mi"}}}'
}

# ---- an ext4 volume of a running pod ----
h=$(lp_volume vol1 --cap SINGLE_NODE_WRITER,mount,ext4)
[ -n "$h" ] || fail "create-volume failed"
mk_bound pv1 "$h" c1 '{"csi":{"fsType":"ext4"}}'
ad_attach "$h" pv1 n1
mk_pod p1 n1 c1
wait_for "p1 Running" 30 pod_running p1
tgt=$(pod_target n1 "$(pod_uid p1)" pv1)
size0=$(fs_size "$tgt")
[ "$size0" -gt $((12 * MI)) ] && [ "$size0" -le $((16 * MI)) ] || fail "a 16Mi volume has a $size0-byte filesystem"

# ---- /metrics: the claim's figures from NodeGetVolumeStats ----
wait_for "kubelet_volume_stats_capacity_bytes for c1 = the filesystem's size" 10 \
	metric_is kubelet_volume_stats_capacity_bytes c1 "$size0"
used0=$(metric kubelet_volume_stats_used_bytes c1)
avail0=$(metric kubelet_volume_stats_available_bytes c1)
[ "$used0" -gt 0 ] && [ "$avail0" -gt 0 ] && [ "$avail0" -lt "$size0" ] || fail "used $used0 available $avail0 of $size0"
metric_at_least kubelet_volume_stats_inodes c1 100 || fail "inodes: $(metric kubelet_volume_stats_inodes c1)"
metric_at_least kubelet_volume_stats_inodes_free c1 100 || fail "inodes_free"
metric_at_least kubelet_volume_stats_inodes_used c1 1 || fail "inodes_used"
curl -s "http://127.0.0.1:$port/metrics" | grep -q health_status_abnormal && fail "a health gauge, which CSI v1.13 has no source for"
curl -s "http://127.0.0.1:$port/metrics" | grep -q '^# TYPE kubelet_volume_stats_used_bytes gauge$' || fail "no TYPE line"
dd if=/dev/urandom of="$tgt/data" bs=1M count=4 status=none conv=fsync || fail "cannot write through p1's mount"
wait_for "used_bytes grows by the 4 MiB written" 10 metric_at_least kubelet_volume_stats_used_bytes c1 $((used0 + 4 * MI))

# ---- bad input: the condition without a larger PV makes no NodeExpandVolume ----
calls() { grep -c 'Expanded volume on node' "$T/nodes/n1/lp.log"; }
claim_status c1 '{"status":{"conditions":[{"type":"FileSystemResizePending","status":"True"}]}}'
sleep 1.5
[ "$(calls)" = 0 ] || fail "NodeExpandVolume called without a larger PV"
claim_json c1 | jq -e '.status.capacity.storage=="16Mi"' >/dev/null || fail "claim status changed without an expansion"
claim_status c1 '{"status":{"conditions":null}}'

# ---- online expansion, the current resizer's form (allocatedResourceStatuses) ----
# resize2fs grows a mounted ext4 only with CAP_SYS_RESOURCE; without it (a container) the loop
# driver's answer is final (Internal), which kcsi-node must report and not retry.
cap_sys_resource() { local eff; eff=$(awk '/^CapEff/ {print $2}' /proc/self/status); (((16#$eff >> 24) & 1)); }
resize_to "$h" pv1 c1 32
if cap_sys_resource; then
	wait_for "p1's filesystem grows online" 20 fs_at_least "$tgt" $((28 * MI))
	wait_for "c1's status records 32Mi, no resize condition" 10 claim_resized c1 32
	wait_for "FileSystemResizeSuccessful on p1" 10 pod_event p1 FileSystemResizeSuccessful \
		'MountVolume.NodeExpandVolume succeeded for volume "pv1" n1'
	[ "$(cat "$tgt/data" | wc -c)" = $((4 * MI)) ] || fail "the file written before the expansion is gone"
	wait_for "capacity_bytes follows the expansion" 10 metric_at_least kubelet_volume_stats_capacity_bytes c1 $((28 * MI))
	[ "$(calls)" = 1 ] || fail "NodeExpandVolume called $(calls) times for one expansion"
else
	echo "no CAP_SYS_RESOURCE: online ext4 growth is checked as a final failure, reported once" >&2
	wait_for "VolumeResizeFailed on p1 with the driver's message" 10 pod_event p1 VolumeResizeFailed \
		'NodeExpandVolume.NodeExpandVolume failed for volume "pv1" : Expander.NodeExpand failed to expand the volume : rpc error: code = Internal'
	node_error() {
		claim_json c1 | jq -e '.status.allocatedResourceStatuses.storage=="NodeResizeInProgress"
			and ([.status.conditions[]? | select(.type=="NodeResizeError" and
			      (.message | startswith("failed to expand pvc with Expander.NodeExpand")))] | length == 1)
			and .status.capacity.storage=="16Mi"' >/dev/null
	}
	wait_for "c1: NodeResizeError, NodeResizeInProgress, capacity unchanged" 10 node_error
	n=$(grep -c 'NodeExpandVolume failed for volume "pv1"' "$T/nodes/n1/kcsi-node.log")
	sleep 1.5
	[ "$(grep -c 'NodeExpandVolume failed for volume "pv1"' "$T/nodes/n1/kcsi-node.log")" = "$n" ] ||
		fail "a final NodeExpandVolume failure was retried"
fi

# ---- a block volume, the older resizer's form (condition only) ----
hb=$(lp_volume volb --cap SINGLE_NODE_WRITER,block)
mk_bound pvb "$hb" cb '{"volumeMode":"Block"}'
ad_attach "$hb" pvb n1
mk_pod pb n1 cb block
wait_for "pb Running" 30 pod_running pb
pub=$T/nodes/n1/kubelet/plugins/kubernetes.io/csi/volumeDevices/publish/pvb/$(pod_uid pb)
[ "$(blockdev --getsize64 "$pub")" = $((16 * MI)) ] || fail "block device: $(blockdev --getsize64 "$pub")"
resize_to "$hb" pvb cb 24 legacy
wait_for "the published block device grows" 20 bash -c "[ \"\$(blockdev --getsize64 '$pub')\" = $((24 * MI)) ]"
wait_for "cb's status records 24Mi" 10 claim_resized cb 24

# ---- offline: grown while no pod uses it, expanded at the next stage ----
kc delete pod p1 --wait=false >/dev/null
wait_for "p1 gone" 20 pod_gone p1
stg=$(staging_of n1 "$h")
wait_for "pv1 unstaged" 10 bash -c "! mountpoint -q '$stg'"
c_before=$(calls)
resize_to "$h" pv1 c1 48
sleep 1
[ "$(calls)" = "$c_before" ] || fail "NodeExpandVolume for a volume no pod uses"
mk_pod p2 n1 c1
wait_for "p2 Running" 30 pod_running p2
tgt2=$(pod_target n1 "$(pod_uid p2)" pv1)
fs_at_least "$tgt2" $((40 * MI)) || fail "p2 sees a $(fs_size "$tgt2")-byte filesystem, not 48Mi"
wait_for "c1's status records 48Mi" 10 claim_resized c1 48
exp=$(grep -n 'NodeExpandVolume succeeded for volume "pv1" pod="default/p2"' "$T/nodes/n1/kcsi-node.log" | head -1 | cut -d: -f1)
set_up=$(grep -n 'SetUp succeeded for volume "pv1" pod="default/p2"' "$T/nodes/n1/kcsi-node.log" | head -1 | cut -d: -f1)
[ -n "$exp" ] && [ -n "$set_up" ] && [ "$exp" -lt "$set_up" ] || fail "offline expansion not between stage and publish (lines $exp, $set_up)"
[ "$(cat "$tgt2/data" | wc -c)" = $((4 * MI)) ] || fail "the file is gone after the offline expansion"

# ---- driver errors (csi-testdriver): retried with the older resizer, infeasible with the newer ----
"$KCSI_TESTS/csi-testdriver" --endpoint "unix://$T/td.sock" --record "$T/td.rec" \
	--fail NodeExpandVolume=INVALID_ARGUMENT --fail-count NodeExpandVolume=1 >"$T/td.log" 2>&1 &
TD_PID=$!
"$KCSI_BIN/csi-node-driver-registrar" --csi-address "$T/td.sock" --kubelet-registration-path "$T/td.sock" \
	--plugin-registration-path "$T/nodes/n1/kubelet/plugins_registry" >"$T/td-reg.log" 2>&1 &
NODE_PIDS[td:reg]=$!
NODE_PIDS[td:drv]=$TD_PID
wait_for "testdriver registered" 15 csinode_has n1 testdriver.kcsi.dev
echo '{"apiVersion":"storage.k8s.io/v1","kind":"CSIDriver","metadata":{"name":"testdriver.kcsi.dev"},"spec":{"attachRequired":false}}' |
	kc create -f - >/dev/null
mk_td() { # mk_td PV HANDLE CLAIM POD
	mk_pv "$1" testdriver.kcsi.dev "$2" "{\"capacity\":{\"storage\":\"1Gi\"},\"claimRef\":{\"namespace\":\"default\",\"name\":\"$3\"}}"
	mk_claim "$3" "$1"
	claim_status "$3" '{"status":{"phase":"Bound","capacity":{"storage":"1Gi"}}}'
	mk_pod "$4" n1 "$3"
}
mk_td pvt tvol-1 ct pt
wait_for "pt Running" 20 pod_running pt
kc patch pv pvt --type merge -p '{"spec":{"capacity":{"storage":"2Gi"}}}' >/dev/null
claim_status ct '{"status":{"conditions":[{"type":"FileSystemResizePending","status":"True"}]}}'
wait_for "VolumeResizeFailed on pt with the driver's message" 10 pod_event pt VolumeResizeFailed \
	'NodeExpandVolume.NodeExpandVolume failed for volume "pvt" : Expander.NodeExpand failed to expand the volume : rpc error: code = InvalidArgument desc = injected failure'
wait_for "retried: ct records 2Gi" 10 bash -c "kubectl --kubeconfig $KC get pvc ct -o jsonpath='{.status.capacity.storage}' | grep -qx 2Gi"
req=$(grep '^NodeExpandVolume' "$T/td.rec" | tail -1 | cut -d' ' -f2-)
jq -e --arg t "$(pod_target n1 "$(pod_uid pt)" pvt)" --arg s "$T/nodes/n1/kubelet/plugins/kubernetes.io/csi/testdriver.kcsi.dev/$(sha256 tvol-1)/globalmount" \
	'.volume_id=="tvol-1" and .volume_path==$t and .staging_target_path==$s
	 and (.capacity_range.required_bytes|tonumber)==2147483648 and .volume_capability.mount != null' <<<"$req" >/dev/null ||
	fail "NodeExpandVolume request: $req"
[ "$(grep -c '^NodeExpandVolume' "$T/td.rec")" = 2 ] || fail "NodeExpandVolume calls: $(grep -c '^NodeExpandVolume' "$T/td.rec")"

# the newer resizer's form: an infeasible answer is final (its count exhausted, make it fail again)
kill "$TD_PID"; wait "$TD_PID" 2>/dev/null
"$KCSI_TESTS/csi-testdriver" --endpoint "unix://$T/td.sock" --record "$T/td.rec" \
	--fail NodeExpandVolume=OUT_OF_RANGE >>"$T/td.log" 2>&1 &
TD_PID=$!
NODE_PIDS[td:drv]=$TD_PID
wait_sock "$T/td.sock"
kc patch pv pvt --type merge -p '{"spec":{"capacity":{"storage":"3Gi"}}}' >/dev/null
claim_status ct '{"status":{"conditions":[{"type":"FileSystemResizePending","status":"True"}],"allocatedResourceStatuses":{"storage":"NodeResizePending"},"allocatedResources":{"storage":"3Gi"}}}'
infeasible() {
	claim_json ct | jq -e '.status.allocatedResourceStatuses.storage=="NodeResizeInfeasible"
		and ([.status.conditions[]? | select(.type=="NodeResizeError" and .status=="True"
		      and (.message | contains("OutOfRange")))] | length == 1)' >/dev/null
}
wait_for "ct marked NodeResizeInfeasible with a NodeResizeError condition" 15 infeasible
n=$(grep -c '^NodeExpandVolume' "$T/td.rec")
sleep 2
[ "$(grep -c '^NodeExpandVolume' "$T/td.rec")" = "$n" ] || fail "an infeasible expansion was retried"
claim_json ct | jq -e '.status.capacity.storage=="2Gi"' >/dev/null || fail "ct's capacity changed after a failed expansion"
kill -0 "${NODE_PIDS[n1:node]}" || fail "kcsi-node died"

# ---- volume health: p2's mount gone behind kcsi-node's back, as NodeGetVolumeHealth says ----
node_health() {
	"$KCSI_BIN/kcsi" --endpoint "unix://$T/nodes/n1/plugins/loop.kcsi.io/csi.sock" -o json \
		node volume-health "$h" --publish "$tgt2"
}
node_health | jq -e '(.volume_health.health_statuses // []) == []' >/dev/null ||
	fail "p2's volume abnormal while mounted: $(node_health)"
umount "$tgt2" || fail "cannot unmount p2's target"
node_health | jq -e '.volume_health.health_statuses == [{"status":"INACCESSIBLE","reason":"NotPublishedAtPath","message":"the volume is not published at the path given"}]' >/dev/null ||
	fail "p2's lost mount: $(node_health)"
sleep 2
pod_event p2 VolumeConditionAbnormal '' && fail "a VolumeConditionAbnormal event, which the kubelet v1.37 no longer sends"

# ---- shutdown of the pods: nothing left mounted ----
kc delete pod p2 pb pt --wait=false >/dev/null
wait_for "pods gone" 20 bash -c "! kubectl --kubeconfig $KC get pod p2 pb pt -o name 2>/dev/null | grep -q ."
wait_for "metrics drop the claims no pod uses" 10 bash -c "! curl -s http://127.0.0.1:$port/metrics | grep -q persistentvolumeclaim=\\\"c1\\\""
sleep 0.5
grep -q " $T/nodes" /proc/self/mountinfo && fail "mounts left: $(grep -o " $T/nodes[^ ]*" /proc/self/mountinfo)"
# SIGTERM ends kcsi-node within a second and cleanly (under ASan: no error, no leak)
pid=${NODE_PIDS[n1:node]}
kill -TERM "$pid"
for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
kill -0 "$pid" 2>/dev/null && fail "kcsi-node still running 1 s after SIGTERM"
wait "$pid"
rc=$?
unset 'NODE_PIDS[n1:node]'
[ "$rc" = 0 ] || fail "kcsi-node exited $rc after SIGTERM: $(grep -A5 Sanitizer "$T/nodes/n1/kcsi-node.log" | head -8)"
node_finish
