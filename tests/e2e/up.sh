#!/bin/bash
# e2e: `kcsi up` runs the whole stack; kubectl alone drives a PVC and a Pod to a mounted volume on
# two nodes (each driver instance with a livenessprobe whose /healthz is ok), moves it across
# nodes, tears everything down; Ctrl-C and SIGTERM leave no process, mount or loop device; a
# component that dies is reported with its log and restarted; --driver-cmd runs another driver
# (csi-testdriver). The status table, printed when ready and again on kill -USR1, names the API
# server's URL (the kubeconfig's server) on kube-emulator's row.
set -u
: "${KCSI_BIN:?}" "${KCSI_SRC:?}" "${KCSI_TESTS:?}"
kubectl=${KUBECTL:-kubectl}
FAILS=0
fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
t=$(mktemp -d /tmp/kcsi-up-test.XXXXXX)
. "$(dirname "$0")/lib_up.sh"
cleanup() {
	# Whatever a failed run left: unmount and detach only what lives under this test's folder.
	release_below "$t"
	rm -rf "$t"
}
trap cleanup EXIT

leftovers() {
	echo "procs=$(pgrep -f -- "$t/" | wc -l) loops=$(losetup -a | grep -cF "$t/")" \
		"mounts=$(grep -cF " $t/" /proc/self/mountinfo)"
}
NONE="procs=0 loops=0 mounts=0"


# ---- 1. the whole life of a volume, driven by kubectl ----
d=$t/stack
if start_up "$d" --nodes 2; then
	grep -q "export KUBECONFIG=$d/kubeconfig" "$d.out" || fail "kcsi up did not print the export line"
	grep -q "kcsi-node/node-2 .*running" "$d.out" || fail "kcsi up did not list kcsi-node/node-2 as running"
	# one livenessprobe per driver instance, its /healthz the driver's Probe
	for inst in controller node-1 node-2; do
		url=$(sed -n "s|^ *livenessprobe/$inst .*running *\(http://[0-9.:]*\).*|\1|p" "$d.out")
		[ "$(curl -s -m 3 "$url/healthz")" = ok ] || fail "livenessprobe/$inst /healthz at '$url' is not ok"
	done
	# kill -USR1 prints the table again (as the ready line says), with the PIDs of now
	grep -q "kill -USR1 $up_pid prints this table again" "$d.out" || fail "the ready line does not say how to see the table again"
	kill -USR1 "$up_pid"
	wait_for 5 eval '[ "$(grep -c "kcsi-node/node-2 .*running" "$d.out")" = 2 ]' ||
		fail "kill -USR1 did not print the status table again"
	[ "$(grep -c "^export KUBECONFIG=$d/kubeconfig" "$d.out")" = 2 ] || fail "kill -USR1 did not print the export line again"
	# both tables name the API server: kube-emulator's row ends in the URL of its kubeconfig
	api=$(awk '/server:/ {print $2}' "$d/kubeconfig")
	rows=$(awk -v u="$api" '$1 == "kube-emulator" && $NF == u' "$d.out" | wc -l)
	[ -n "$api" ] && [ "$rows" = 2 ] ||
		fail "the status tables do not show the API server's URL $api: $(grep '^ *kube-emulator ' "$d.out")"
	export KUBECONFIG=$d/kubeconfig
	start=$(date +%s%N)
	$kubectl apply -f "$KCSI_SRC/examples/storageclass-immediate.yaml" \
		-f "$KCSI_SRC/examples/storageclass-wffc.yaml" -f "$KCSI_SRC/examples/pvc-filesystem.yaml" \
		-f "$KCSI_SRC/examples/pvc-block.yaml" -f "$KCSI_SRC/examples/pod-writer.yaml" \
		-f "$KCSI_SRC/examples/pod-block.yaml" >/dev/null || fail "kubectl apply of the examples failed"
	wait_for 10 phase_is pvc/data Bound || fail "pvc/data not Bound within 10 s"
	wait_for 10 phase_is pvc/raw Bound || fail "pvc/raw not Bound within 10 s"
	wait_for 10 phase_is pod/writer Running || fail "pod/writer not Running within 10 s"
	wait_for 10 phase_is pod/blockuser Running || fail "pod/blockuser not Running within 10 s"
	echo "examples Bound and Running after $((($(date +%s%N) - start) / 1000000)) ms"
	# What a user reads in `kubectl get pvc`.
	out=$($kubectl get pvc data)
	pv=$($kubectl get pvc data -o jsonpath='{.spec.volumeName}')
	echo "$out" | head -1 | grep -q 'NAME *STATUS *VOLUME *CAPACITY *ACCESS MODES *STORAGECLASS' ||
		fail "kubectl get pvc columns: $out"
	echo "$out" | tail -1 | grep -q "^data *Bound *$pv *64Mi *RWO *kcsi-loop-wffc" ||
		fail "kubectl get pvc row: $out"
	# The volume is mounted where kubelet mounts it; a file written there is read on node-2.
	uid=$($kubectl get pod writer -o jsonpath='{.metadata.uid}')
	mnt=$d/nodes/node-1/kubelet/pods/$uid/volumes/kubernetes.io~csi/$pv/mount
	if mountpoint -q "$mnt"; then
		echo "written on node-1" >"$mnt/hello.txt"
	else
		fail "the writer's volume is not mounted at $mnt"
	fi
	$kubectl delete pod writer --timeout=30s >/dev/null || fail "deleting pod/writer"
	mountpoint -q "$mnt" && fail "the writer's volume is still mounted after its pod is gone"
	$kubectl apply -f "$KCSI_SRC/examples/pod-reader.yaml" >/dev/null
	wait_for 20 phase_is pod/reader Running || fail "pod/reader not Running on node-2"
	uid=$($kubectl get pod reader -o jsonpath='{.metadata.uid}')
	mnt=$d/nodes/node-2/kubelet/pods/$uid/volumes/kubernetes.io~csi/$pv/mount
	[ "$(cat "$mnt/hello.txt" 2>/dev/null)" = "written on node-1" ] ||
		fail "node-2 does not read the file written on node-1"
	node=$($kubectl get volumeattachments -o jsonpath='{.items[*].spec.nodeName}')
	echo "$node" | grep -q node-2 || fail "no VolumeAttachment to node-2 ($node)"
	# Teardown: nothing left with the driver nor on the nodes.
	$kubectl delete pod reader blockuser --timeout=30s >/dev/null || fail "deleting the pods"
	$kubectl delete pvc data raw --timeout=30s >/dev/null || fail "deleting the claims"
	wait_for 20 no_objects pv || fail "PVs left after their claims were deleted: $($kubectl get pv -o name)"
	wait_for 20 no_objects volumeattachments || fail "VolumeAttachments left: $($kubectl get volumeattachments -o name)"
	vols=$("$KCSI_BIN/kcsi" --endpoint "unix://$d/controller/csi.sock" -o json controller list-volumes 2>&1)
	echo "$vols" | grep -q volume_id && fail "the driver still has volumes: $vols"
	[ "$(grep -cF " $d/" /proc/self/mountinfo)" = 0 ] || fail "mounts left under the stack"

	# A component that dies is reported with its log and started again.
	att=$(pgrep -f -- "$KCSI_BIN/csi-attacher .*$d/" | head -1)
	kill -9 "$att"
	wait_for 5 grep -q 'csi-attacher was killed by signal 9' "$d.out" || fail "the attacher's death was not reported"
	wait_for 5 pgrep -f -- "$KCSI_BIN/csi-attacher .*$d/" || fail "the attacher was not restarted"
	stop_up TERM || fail "kcsi up exited non-zero on SIGTERM"
	[ "$(leftovers)" = "$NONE" ] || fail "left behind after SIGTERM: $(leftovers)"
	unset KUBECONFIG
fi

# ---- 2. Ctrl-C with a volume mounted leaves nothing ----
d=$t/intr
if start_up "$d" --nodes 1; then
	export KUBECONFIG=$d/kubeconfig
	$kubectl apply -f "$KCSI_SRC/examples/storageclass-wffc.yaml" \
		-f "$KCSI_SRC/examples/pvc-filesystem.yaml" -f "$KCSI_SRC/examples/pod-writer.yaml" >/dev/null
	wait_for 15 phase_is pod/writer Running || fail "pod/writer not Running (1 node)"
	[ "$(grep -cF " $d/" /proc/self/mountinfo)" -gt 0 ] || fail "nothing mounted while the pod runs"
	stop_up INT || fail "kcsi up exited non-zero on SIGINT"
	[ "$(leftovers)" = "$NONE" ] || fail "left behind after Ctrl-C with a mounted volume: $(leftovers)"
	unset KUBECONFIG
fi

# ---- 3. another driver through --driver-cmd ----
d=$t/testdrv
if start_up "$d" --nodes 1 --driver-cmd "$KCSI_TESTS/csi-testdriver --endpoint {endpoint}"; then
	grep -q 'driver testdriver.kcsi.dev' "$d.out" || fail "kcsi up did not name the test driver"
	export KUBECONFIG=$d/kubeconfig
	cat >"$t/td.yaml" <<'EOF'
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: td}
provisioner: testdriver.kcsi.dev
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: c1}
spec:
  storageClassName: td
  accessModes: ["ReadWriteOnce"]
  resources: {requests: {storage: 1Gi}}
EOF
	$kubectl apply -f "$t/td.yaml" >/dev/null
	wait_for 10 phase_is pvc/c1 Bound || fail "a claim of the test driver was not Bound"
	stop_up TERM || fail "kcsi up (test driver) exited non-zero"
	unset KUBECONFIG
fi

# ---- 4. a bad flag is refused before anything starts ----
"$KCSI_BIN/kcsi" up --nodes 0 >/dev/null 2>"$t/err" && fail "--nodes 0 accepted"
grep -q -- '--nodes 0' "$t/err" || fail "--nodes 0: unclear error: $(cat "$t/err")"

[ "$(leftovers)" = "$NONE" ] || fail "left behind at the end: $(leftovers)"
if [ $FAILS -ne 0 ]; then
	for f in "$t"/*.out; do echo "--- $f" >&2; tail -n 40 "$f" >&2; done
	for f in "$t"/*/logs/*.log; do echo "--- $f" >&2; tail -n 15 "$f" >&2; done
	exit 1
fi
echo PASS
