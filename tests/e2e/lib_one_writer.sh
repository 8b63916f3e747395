# lib_one_writer.sh: issue 35's "one writer means one writer" scenario on `kcsi up` (sourced, not
# run), shared by up_one_writer.sh (kcsi-controller-manager's volume-scheduler places the pods)
# and up_one_writer_kube_scheduler.sh (the real kube-scheduler does). The caller has started the
# stack with two nodes, exported KUBECONFIG, sourced lib_up.sh and defined fail() and kubectl.
#
# one_writer STACK_DIR SCHEDULER_NAME
#   One ReadWriteOncePod claim (WaitForFirstConsumer) and three pods using it: a1 with
#   schedulerName SCHEDULER_NAME and a node selector for node-1; once a1 runs, a3 with nodeName
#   node-1 (no scheduler involved) and a2 with SCHEDULER_NAME and no selector.
#   - a1 Running on node-1;
#   - a3 refused by kcsi-node and the driver: a FailedMount event naming FailedPrecondition and
#     SINGLE_NODE_SINGLE_WRITER, a3 not Running, the volume published once on node-1;
#   - a2 not placed: a FailedScheduling event with kube-scheduler's ReadWriteOncePod reason, and
#     no spec.nodeName;
#   - the claim is handed on: a1 deleted -> a3 Running (a2 still unplaced, a3 holds the claim);
#     a3 deleted -> a2 placed and Running. Then everything is deleted, no PV left.

# event_text POD REASON: the messages of the pod's events with that reason, as `kubectl get
# events` (core/v1) lists them: those the real kube-scheduler records through events.k8s.io/v1
# too, which kube-emulator keeps in the same storage, as kube-apiserver does.
event_text() {
	$kubectl get events -o json 2>/dev/null | jq -r --arg p "$1" --arg r "$2" \
		'.items[] | select(.involvedObject.name == $p and .reason == $r) | .message'
}
has_event() { event_text "$1" "$2" | grep -qF -- "$3"; }
node_of() { $kubectl get pod "$1" -o jsonpath='{.spec.nodeName}'; }

RWOP_REASON="node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod"

one_writer() {
	local d=$1 sched=$2 pv n
	$kubectl apply -f "$KCSI_SRC/examples/storageclass-wffc.yaml" >/dev/null ||
		fail "kubectl apply of the class failed"
	$kubectl apply -f - >/dev/null <<YAML || fail "kubectl apply of claim and a1 failed"
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: solo}
spec:
  storageClassName: kcsi-loop-wffc
  accessModes: ["ReadWriteOncePod"]
  resources: {requests: {storage: 16Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: a1}
spec:
  schedulerName: $sched
  nodeSelector: {kubernetes.io/hostname: node-1}
  containers: [{name: app, image: busybox:1.36, volumeMounts: [{name: d, mountPath: /d}]}]
  volumes: [{name: d, persistentVolumeClaim: {claimName: solo}}]
YAML
	wait_for 30 phase_is pod/a1 Running || { fail "a1 not Running within 30 s"; return; }
	[ "$(node_of a1)" = node-1 ] || fail "a1 runs on '$(node_of a1)', not node-1"
	pv=$($kubectl get pvc solo -o jsonpath='{.spec.volumeName}')
	$kubectl apply -f - >/dev/null <<YAML || fail "kubectl apply of a2 and a3 failed"
apiVersion: v1
kind: Pod
metadata: {name: a3}
spec:
  nodeName: node-1
  containers: [{name: app, image: busybox:1.36, volumeMounts: [{name: d, mountPath: /d}]}]
  volumes: [{name: d, persistentVolumeClaim: {claimName: solo}}]
---
apiVersion: v1
kind: Pod
metadata: {name: a2}
spec:
  schedulerName: $sched
  containers: [{name: app, image: busybox:1.36, volumeMounts: [{name: d, mountPath: /d}]}]
  volumes: [{name: d, persistentVolumeClaim: {claimName: solo}}]
YAML
	# The guard on the node: kcsi-node sends SINGLE_NODE_SINGLE_WRITER, the driver refuses.
	wait_for 15 has_event a3 FailedMount "code = FailedPrecondition" ||
		fail "no FailedMount (FailedPrecondition) event on a3: $(event_text a3 FailedMount)"
	has_event a3 FailedMount "SINGLE_NODE_SINGLE_WRITER" ||
		fail "a3's FailedMount does not name the access mode: $(event_text a3 FailedMount | head -1)"
	# The guard in the scheduler: a2 is placed nowhere.
	wait_for 15 has_event a2 FailedScheduling "$RWOP_REASON" ||
		fail "no FailedScheduling with the ReadWriteOncePod reason on a2: $(event_text a2 FailedScheduling)"
	sleep 1 # a pass more of each, then nothing may have changed
	phase_is pod/a3 Running && fail "a3 went Running beside a1"
	[ -z "$(node_of a2)" ] || fail "a2 was placed on '$(node_of a2)'"
	n=$(grep -F " $d/nodes/node-1/kubelet/pods/" /proc/self/mountinfo | grep -cF "/$pv/mount ")
	[ "$n" = 1 ] || fail "the volume is published $n times on node-1, want once"
	echo "a3 refused (FailedMount), a2 unplaced (FailedScheduling): $(event_text a3 FailedMount | head -1)"

	# The claim is handed on: a3 (already on node-1) when a1 leaves, a2 when a3 leaves.
	$kubectl delete pod a1 --timeout=30s >/dev/null || fail "deleting a1"
	wait_for 70 phase_is pod/a3 Running || fail "a3 not Running within 70 s of a1's deletion"
	[ -z "$(node_of a2)" ] || fail "a2 was placed on '$(node_of a2)' while a3 holds the claim"
	$kubectl delete pod a3 --timeout=30s >/dev/null || fail "deleting a3"
	wait_for 30 phase_is pod/a2 Running || fail "a2 not Running within 30 s of a3's deletion"
	$kubectl delete pod a2 --timeout=30s >/dev/null || fail "deleting a2"
	$kubectl delete pvc solo --timeout=30s >/dev/null || fail "deleting the claim"
	wait_for 20 no_objects pv || fail "PVs left: $($kubectl get pv -o name)"
}
