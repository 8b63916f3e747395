#!/bin/bash
# e2e: csi-resizer against csi-testdriver, what a user sees when a claim grows: the PV's capacity,
# allocatedResources, NodeResizePending and FileSystemResizePending, the events; a class without
# allowVolumeExpansion (nothing happens); a request above the driver's maximum (OUT_OF_RANGE:
# ControllerResizeInfeasible, ControllerResizeError) and its recovery by lowering the request; a
# driver that needs no node step (VolumeResizeSuccessful, capacity); the expand secret from the
# class's templates; AnnotateFsResize (beta, on, in v2.3): the PV's pre-resize-capacity
# annotation while the node is pending, removed once it is done; flags and help (v2.3's
# --resize-timeout and --modify-timeout; RecoverVolumeExpansionFailure is no gate any more); a
# claim resized before its PV is in the resizer's cache (requeued until the PV comes).
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
DRV=testdriver.kcsi.dev
. "$(dirname "$0")/lib_provisioner.sh"
. "$(dirname "$0")/lib_resizer.sh"

expands() { grep -c "^ControllerExpandVolume .*\"volume_id\":\"$1\"" "$T/td.rec" 2>/dev/null || true; }

emu_start
mk_sc grow '{"allowVolumeExpansion":true,"parameters":{"csi.storage.k8s.io/controller-expand-secret-name":"${pvc.name}-key","csi.storage.k8s.io/controller-expand-secret-namespace":"${pvc.namespace}"}}'
mk_sc fixed
mk_secret c1-key password hunter2
mk_secret c3-key password x
mk_secret c4-key password x
mk_secret c5-key password x
td_start --max-volume-size 1Gi
rsz_start r1 "$T/td.sock" -v 5 --http-endpoint 127.0.0.1:0

# 1. Help and flags as upstream.
"$KCSI_BIN/csi-resizer" --help >"$T/help" 2>&1
for f in csi-address timeout workers resync-period retry-interval-start retry-interval-max \
	handle-volume-inuse-error extra-modify-metadata feature-gates leader-election \
	leader-election-namespace http-endpoint metrics-address metrics-path kube-api-qps \
	kube-api-burst kubeconfig leader-election-labels automaxprocs resize-timeout modify-timeout; do
	check "--help lists --$f" grep -q -- "-$f" "$T/help"
done
# --workers 0 is taken, as upstream's flag.Int takes it: no worker, and the log says so
rsz_start r0 "$T/td.sock" --workers 0
wait_for "the --workers 0 resizer started" 20 grep -q "Starting external resizer" "$T/r0.log"
check "--workers 0: the log says nothing is expanded" \
	grep -q -- "--workers=0: no claim is expanded" "$T/r0.log"
att_stop r0 || fail "csi-resizer --workers 0 exited non-zero on SIGTERM"
out=$("$KCSI_BIN/csi-resizer" --feature-gates NoSuchGate=true 2>&1); rc=$?
check "an unknown feature gate is refused" bash -c "[ $rc -ne 0 ] && grep -q 'unrecognized feature gate: NoSuchGate' <<<'$out'"
check "--timeout defaults to 10s as upstream" bash -c "grep -A1 -- '-timeout duration' '$T/help' | grep -q 'default 10s'"
check "--resize-timeout defaults to 10s" bash -c "grep -A1 -- '-resize-timeout duration' '$T/help' | grep -q 'default 10s'"
check "--modify-timeout defaults to 10s" bash -c "grep -A1 -- '-modify-timeout duration' '$T/help' | grep -q 'default 10s'"
for v in true false; do
	out=$("$KCSI_BIN/csi-resizer" --feature-gates "RecoverVolumeExpansionFailure=$v" 2>&1); rc=$?
	check "RecoverVolumeExpansionFailure=$v is refused (removed in v2.3), exit 1" bash -c "[ $rc -eq 1 ] && grep -q 'unrecognized feature gate: RecoverVolumeExpansionFailure' <<<'$out'"
done

# 2. A controller expansion that needs the node: PV grows, claim waits for the node.
mk_bound c1 100Mi grow h-c1
resize c1 200Mi
wait_for "PV capacity 200Mi" 20 bash -c "[ \"\$(kubectl --kubeconfig '$KC' get pv pv-c1 -o jsonpath='{.spec.capacity.storage}')\" = 200Mi ]"
wait_for "FileSystemResizePending" 10 bash -c ". '$KCSI_SRC/tests/e2e/lib_resizer.sh'; KC='$KC'; $(declare -f kc pvc_json pvc_field cond_of); [ \"\$(cond_of c1 FileSystemResizePending)\" = True ]"
check "allocatedResources 200Mi" eq "$(pvc_field c1 .status.allocatedResources.storage)" 200Mi
check "NodeResizePending" eq "$(rstatus_of c1)" NodeResizePending
check "Resizing stays beside it (upstream keeps the older resize conditions)" eq "$(cond_of c1 Resizing)" True
check "status.capacity waits for the node" eq "$(pvc_field c1 .status.capacity.storage)" 100Mi
check "one ControllerExpandVolume" eq "$(expands h-c1)" 1
check "required_bytes 200Mi" grep -Eq '"volume_id":"h-c1".*"required_bytes":"?209715200' "$T/td.rec"
check "the class's templated secret was sent" grep -q '"secrets":{"password":"hunter2"}' "$T/td.rec"
check "the secret never reaches the log" bash -c "! grep -q hunter2 '$T/r1.log'"
check "a mount capability with the PV's fsType" grep -q '"fs_type":"ext4"' "$T/td.rec"
wait_for "event Resizing" 10 has_event PersistentVolumeClaim c1 "Resizing: External resizer is resizing volume pv-c1"
wait_for "event FileSystemResizeRequired" 10 has_event PersistentVolumeClaim c1 "FileSystemResizeRequired: Require file system resize of volume on node"
sleep 1
check "no second call once the node is pending" eq "$(expands h-c1)" 1
pre_resize() { pv_field "pv-$1" '.metadata.annotations["volume.alpha.kubernetes.io/pre-resize-capacity"] // ""'; }
check "AnnotateFsResize: the PV records the claim's size before" eq "$(pre_resize c1)" 100Mi
# The node's part, as the kubelet writes it: the claim reaches the PV's size.
status_patch /api/v1/namespaces/default/persistentvolumeclaims/c1 \
	'{"status":{"capacity":{"storage":"200Mi"},"allocatedResourceStatuses":null}}'
wait_for "the annotation goes once the node is done" 20 bash -c "[ -z \"\$(kubectl --kubeconfig '$KC' get pv pv-c1 -o json | jq -r '.metadata.annotations[\"volume.alpha.kubernetes.io/pre-resize-capacity\"] // empty')\" ]"
check "the PV keeps its capacity" eq "$(pv_cap c1)" 200Mi
check "and no further call" eq "$(expands h-c1)" 1

# client-go's REST client counter, which v2.3 serves: the API server's host, code and verb.
PORT=$(att_http_port r1)
curl -s "http://127.0.0.1:$PORT/metrics" >"$T/metrics"
API=$(sed -n 's|.*server: https\?://\([^/]*\).*|\1|p' "$KC" | head -1)
check "rest_client_requests_total counts the LISTs" grep -Eq "^rest_client_requests_total\{code=\"200\",host=\"$API\",method=\"GET\"\} [1-9]" "$T/metrics"
check "and the status PATCHes" grep -Eq "^rest_client_requests_total\{code=\"200\",host=\"$API\",method=\"PATCH\"\} [1-9]" "$T/metrics"
check "with its HELP" grep -q '^# HELP rest_client_requests_total \[ALPHA\] Number of HTTP requests, partitioned by status code, method, and host.' "$T/metrics"

# 3. A class without allowVolumeExpansion: the API server refuses the larger request (as
# kube-apiserver's PersistentVolumeClaimResize admission does) and nothing happens.
mk_bound c2 100Mi fixed h-c2
req PATCH "/api/v1/namespaces/default/persistentvolumeclaims/c2" \
	'{"spec":{"resources":{"requests":{"storage":"300Mi"}}}}' application/merge-patch+json
expect_code 403 "growing a claim whose class does not allow expansion"
sleep 2
check "no call for a class without allowVolumeExpansion" eq "$(expands h-c2)" 0
check "PV unchanged" eq "$(pv_cap c2)" 100Mi
check "no status written" eq "$(rstatus_of c2)" ""

# 4. Above the driver's maximum: infeasible, then recovered by lowering the request.
mk_bound c3 100Mi grow h-c3
resize c3 5Gi
wait_for "ControllerResizeInfeasible" 20 bash -c "[ \"\$(kubectl --kubeconfig '$KC' get pvc c3 -o jsonpath='{.status.allocatedResourceStatuses.storage}')\" = ControllerResizeInfeasible ]"
check "ControllerResizeError condition" eq "$(cond_of c3 ControllerResizeError)" True
check "its message has the driver's answer" bash -c "kubectl --kubeconfig '$KC' get pvc c3 -o json | jq -r '.status.conditions[] | select(.type==\"ControllerResizeError\") | .message' | grep -q 'failed to expand pvc with rpc error: code = OutOfRange desc = requested'"
wait_for "event VolumeResizeFailed" 10 has_event PersistentVolumeClaim c3 "VolumeResizeFailed: resize volume \"pv-c3\" by resizer \"$DRV\" failed: rpc error: code = OutOfRange"
check "allocatedResources records the request" eq "$(pvc_field c3 .status.allocatedResources.storage)" 5Gi
check "PV unchanged" eq "$(pv_cap c3)" 100Mi
n=$(expands h-c3)
sleep 1.5
check "infeasible requests wait in the slow set (at most one more call in 1.5s)" bash -c "[ $(expands h-c3) -le $((n + 1)) ]"
resize c3 500Mi
wait_for "recovered to 500Mi" 20 bash -c "[ \"\$(kubectl --kubeconfig '$KC' get pv pv-c3 -o jsonpath='{.spec.capacity.storage}')\" = 500Mi ]"
wait_for "NodeResizePending after recovery" 10 bash -c "[ \"\$(kubectl --kubeconfig '$KC' get pvc c3 -o jsonpath='{.status.allocatedResourceStatuses.storage}')\" = NodeResizePending ]"
check "allocatedResources follows the lowered request" eq "$(pvc_field c3 .status.allocatedResources.storage)" 500Mi
att_stop r1 || fail "csi-resizer exited non-zero on SIGTERM"
td_stop

# 5. A driver that needs no node step: finished at once.
td_start --node-expansion-required=false
rsz_start r2 "$T/td.sock"
mk_bound c4 100Mi grow h-c4
resize c4 150Mi
wait_for "status.capacity 150Mi" 20 bash -c "[ \"\$(kubectl --kubeconfig '$KC' get pvc c4 -o jsonpath='{.status.capacity.storage}')\" = 150Mi ]"
check "PV 150Mi" eq "$(pv_cap c4)" 150Mi
check "no allocatedResourceStatuses left" eq "$(rstatus_of c4)" ""
check "no resize condition left" eq "$(pvc_field c4 '[.status.conditions[]? | select(.type|test("Resiz"))] | length')" 0
wait_for "event VolumeResizeSuccessful" 10 has_event PersistentVolumeClaim c4 "VolumeResizeSuccessful: Resize volume succeeded"
check "no pre-resize annotation without a node step" eq "$(pv_field pv-c4 '.metadata.annotations["volume.alpha.kubernetes.io/pre-resize-capacity"] // ""')" ""

# 6. A claim resized before its PV reached the resizer's cache (CI saw it: the PVC's update came
# first): the claim is requeued with back-off, as upstream, not left until the next resync (10 min).
jq -n '{apiVersion: "v1", kind: "PersistentVolumeClaim", metadata: {name: "c5", namespace: "default"},
	spec: {storageClassName: "grow", accessModes: ["ReadWriteOnce"], volumeName: "pv-c5",
	       resources: {requests: {storage: "150Mi"}}}}' | kc create -f - >/dev/null
status_patch /api/v1/namespaces/default/persistentvolumeclaims/c5 \
	'{"status":{"phase":"Bound","capacity":{"storage":"100Mi"}}}'
wait_for "the resizer looked for the missing PV" 10 grep -q "PV pv-c5 bound to pvc default/c5 not found" "$T/r2.log"
jq -n --arg d "$DRV" --arg u "$(pvc_uid c5)" '{apiVersion: "v1", kind: "PersistentVolume",
	metadata: {name: "pv-c5"}, spec: {capacity: {storage: "100Mi"}, accessModes: ["ReadWriteOnce"],
	storageClassName: "grow", persistentVolumeReclaimPolicy: "Delete",
	claimRef: {namespace: "default", name: "c5", uid: $u},
	csi: {driver: $d, volumeHandle: "h-c5", fsType: "ext4"}}}' | kc create -f - >/dev/null
status_patch /api/v1/persistentvolumes/pv-c5 '{"status":{"phase":"Bound"}}'
wait_for "the PV that came late grows to 150Mi" 10 bash -c "[ \"\$(kubectl --kubeconfig '$KC' get pv pv-c5 -o jsonpath='{.spec.capacity.storage}')\" = 150Mi ]"
att_stop r2 || fail "csi-resizer exited non-zero on SIGTERM"
rsz_finish
