#!/bin/bash
# e2e (issue 32): `kcsi up --nodes 50` runs the node side as three processes for all nodes (the
# loop driver's node service, the registrar and kcsi-node, each with --fleet-size), and every node
# is still a node: Ready, its CSINode lists the driver with its own node ID (registered through
# its own registration socket), and WaitForFirstConsumer claim+pod pairs placed on six distinct
# nodes run with the pod's volume path a real ext4 mount of a loop device whose image is in the
# pool, staged and published under that node's own kubelet dir. SIGTERM then leaves no process,
# mount or loop device. Combinations the many-nodes mode does not serve are refused (exit 2).
set -u
: "${KCSI_BIN:?}" "${KCSI_SRC:?}"
kubectl=${KUBECTL:-kubectl}
FAILS=0
fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
t=$(mktemp -d /tmp/kcsi-upfleet-test.XXXXXX)
. "$(dirname "$0")/lib_up.sh"
cleanup() {
	release_below "$t"
	rm -rf "$t"
}
trap cleanup EXIT
leftovers() {
	echo "procs=$(pgrep -f -- "$t/" | wc -l) loops=$(losetup -a | grep -cF "$t/")" \
		"mounts=$(grep -cF " $t/" /proc/self/mountinfo)"
}
NONE="procs=0 loops=0 mounts=0"
N=50
NODES=(node-3 node-8 node-17 node-29 node-41 node-50)

# ---- refused combinations ----
for extra in "--provisioning=distributed" "--driver-cmd=true" "--kubeconfig=/dev/null"; do
	"$KCSI_BIN/kcsi" up --dir "$t/refused" --nodes 17 "$extra" >"$t/refused.out" 2>&1
	rc=$?
	[ $rc = 2 ] || fail "kcsi up --nodes 17 $extra: exit $rc, want 2"
	grep -q "above 16" "$t/refused.out" || fail "kcsi up --nodes 17 $extra: no reason given: $(cat "$t/refused.out")"
done

# ---- 1. fifty nodes ----
d=$t/stack
t0=$(date +%s%N)
if start_up "$d" --nodes $N; then
	echo "kcsi up --nodes $N ready after $((($(date +%s%N) - t0) / 1000000)) ms; $(grep 'ready in' "$d.out")"
	export KUBECONFIG=$d/kubeconfig
	# three node-side processes, not four per node
	for p in driver/nodes csi-node-driver-registrar/nodes kcsi-node/nodes; do
		grep -q "^  $p .*running" "$d.out" || fail "kcsi up did not list $p as running"
	done
	nproc=$(grep -c " pid .*running" "$d.out")
	[ "$nproc" -le 12 ] || fail "$nproc processes for $N nodes; want the node side in 3"
	grep -q "kcsi-node/node-1 " "$d.out" && fail "a per-node kcsi-node was started"
	ready=$($kubectl get nodes -o jsonpath='{range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c '^node-[0-9]*=True$')
	[ "$ready" = $N ] || fail "$ready of $N nodes Ready"
	ids=$($kubectl get csinodes -o jsonpath='{range .items[*]}{.metadata.name}={.spec.drivers[?(@.name=="loop.kcsi.io")].nodeID}{"\n"}{end}')
	good=$(echo "$ids" | awk -F= '$1 == $2' | grep -c '^node-')
	[ "$good" = $N ] || fail "$good of $N CSINodes list loop.kcsi.io with their own node ID: $(echo "$ids" | head -3)"
	for n in "${NODES[@]}"; do
		[ -S "$d/nodes/$n/kubelet/plugins_registry/loop.kcsi.io-reg.sock" ] ||
			fail "$n has no registration socket"
		[ -S "$d/nodes/$n/plugins/loop.kcsi.io/csi.sock" ] || fail "$n has no driver socket"
	done

	# ---- 2. WFFC claim+pod pairs on six distinct nodes ----
	$kubectl apply -f "$KCSI_SRC/examples/storageclass-wffc.yaml" >/dev/null || fail "storage class"
	for n in "${NODES[@]}"; do
		cat <<EOF
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: c-$n}
spec:
  storageClassName: kcsi-loop-wffc
  accessModes: ["ReadWriteOnce"]
  resources: {requests: {storage: 16Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: p-$n}
spec:
  nodeSelector: {kubernetes.io/hostname: $n}
  containers: [{name: app, image: busybox, volumeMounts: [{name: d, mountPath: /d}]}]
  volumes: [{name: d, persistentVolumeClaim: {claimName: c-$n}}]
EOF
	done >"$t/pairs.yaml"
	t1=$(date +%s%N)
	$kubectl apply -f "$t/pairs.yaml" >/dev/null || fail "kubectl apply of the pairs failed"
	for n in "${NODES[@]}"; do
		wait_for 30 phase_is "pod/p-$n" Running || fail "pod/p-$n not Running within 30 s"
	done
	echo "${#NODES[@]} pairs Running after $((($(date +%s%N) - t1) / 1000000)) ms"
	for n in "${NODES[@]}"; do
		on=$($kubectl get pod "p-$n" -o jsonpath='{.spec.nodeName}')
		[ "$on" = "$n" ] || { fail "pod/p-$n runs on '$on'"; continue; }
		uid=$($kubectl get pod "p-$n" -o jsonpath='{.metadata.uid}')
		pv=$($kubectl get pvc "c-$n" -o jsonpath='{.spec.volumeName}')
		va=$($kubectl get volumeattachments -o jsonpath="{range .items[?(@.spec.source.persistentVolumeName==\"$pv\")]}{.spec.nodeName}{end}")
		[ "$va" = "$n" ] || fail "$pv attached to '$va', want $n"
		mnt=$d/nodes/$n/kubelet/pods/$uid/volumes/kubernetes.io~csi/$pv/mount
		src=$(findmnt -n -o SOURCE --mountpoint "$mnt" 2>/dev/null)
		fs=$(findmnt -n -o FSTYPE --mountpoint "$mnt" 2>/dev/null)
		case "$src" in
		/dev/loop*) ;;
		*) fail "$mnt is not a mount of a loop device (source '$src')"; continue ;;
		esac
		[ "$fs" = ext4 ] || fail "$mnt is $fs, want ext4"
		back=$(losetup -n -O BACK-FILE "$src")
		case "$back" in
		"$d/pool/"*) ;;
		*) fail "$src of $n is backed by '$back', not an image in $d/pool" ;;
		esac
		# the same device staged under this node's own globalmount
		grep -F " $d/nodes/$n/kubelet/plugins/kubernetes.io/csi/loop.kcsi.io/" /proc/self/mountinfo |
			grep -q "/globalmount " || fail "$n has no staging mount of its volume"
		echo "on $n" >"$mnt/hello" && [ "$(cat "$mnt/hello")" = "on $n" ] || fail "cannot write to $mnt"
		echo "  $n: $mnt <- $src ($back)"
	done
	t2=$(date +%s%N)
	stop_up TERM || fail "kcsi up exited non-zero on SIGTERM"
	echo "stopped with ${#NODES[@]} volumes mounted in $((($(date +%s%N) - t2) / 1000000)) ms"
	[ "$(leftovers)" = "$NONE" ] || fail "left behind after SIGTERM: $(leftovers)"
fi

[ "$FAILS" = 0 ] && echo "PASS: up_fleet" && exit 0
echo "$FAILS failure(s)"
exit 1
