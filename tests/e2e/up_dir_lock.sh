#!/bin/bash
# e2e: one owner per folder. A `kcsi up --dir D` runs with a pod whose volume is mounted. A
# second `kcsi up --dir D` exits at once (non-zero) with "D is in use by another kcsi up (pid
# <the first's>)", and the first stack is untouched: its kubeconfig, its sockets, its ready
# file and lock, the pod's mount; a new claim and pod still get Running. The same for the parts
# the stack's children own: a second kcsi-loopplugin node service of node-1 on D/pool and a
# second kcsi-node on node-1's root dir are refused at once, naming the holder's PID, and leave
# its socket alone; a driver for another node ID with the controller service on the same pool
# (what deploy/kubernetes' two controller replicas and a shared pool do) still starts. Last,
# SIGTERM ends the first stack within 1 s and leaves no process, mount or loop device.
# Before the fix the second kcsi up started, rewrote D/kubeconfig, replaced the sockets and, at
# its exit, unmounted the first stack's volume.
set -u
: "${KCSI_BIN:?}" "${KCSI_SRC:?}"
kubectl=${KUBECTL:-kubectl}
FAILS=0
fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
t=$(mktemp -d /tmp/kcsi-up-lock.XXXXXX)
d=$t/stack
. "$(dirname "$0")/lib_up.sh"
second=
cleanup() {
	[ -n "$second" ] && kill -TERM "$second" 2>/dev/null && wait "$second" 2>/dev/null
	release_below "$t"
	rm -rf "$t"
}
trap cleanup EXIT
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }
# refused WHAT MAXMS WORDS CMD...: CMD exits non-zero within MAXMS with WORDS in its output
refused() {
	local what=$1 max=$2 words=$3 t0 rc ms
	shift 3
	t0=$(date +%s%N)
	timeout 20 "$@" >"$t/refused.out" 2>&1 &
	second=$!
	wait "$second"
	rc=$?
	second=
	ms=$(ms_since "$t0")
	[ "$rc" != 0 ] || fail "$what: exit 0"
	[ "$rc" != 124 ] || fail "$what: still running after 20 s"
	[ "$ms" -le "$max" ] || fail "$what: took $ms ms to refuse (at most $max)"
	grep -qF -- "$words" "$t/refused.out" || fail "$what: no '$words' in: $(head -c 600 "$t/refused.out")"
	echo "$what: refused in $ms ms: $(grep -F -- "$words" "$t/refused.out" | head -1)"
}
pod_yaml() { # name claim
	cat <<YAML
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: $2}
spec:
  storageClassName: loop
  accessModes: ["ReadWriteOnce"]
  resources: {requests: {storage: 32Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: $1}
spec:
  containers: [{name: app, image: busybox, command: ["sleep", "3600"],
                volumeMounts: [{name: v, mountPath: /data}]}]
  volumes: [{name: v, persistentVolumeClaim: {claimName: $2}}]
YAML
}
state() { # what of the first stack a second one must not touch
	md5sum "$d/kubeconfig" "$d/ready" "$d/kcsi-up.lock"
	find "$d" -type s | sort
	grep -F " $d/" /proc/self/mountinfo | awk '{print $5}' | sort
}

start_up "$d" --nodes 1 || exit 1
export KUBECONFIG=$d/kubeconfig
$kubectl apply -f - >/dev/null <<'YAML' || fail "kubectl apply of the StorageClass"
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: loop}
provisioner: loop.kcsi.io
YAML
pod_yaml app data | $kubectl apply -f - >/dev/null || fail "kubectl apply of pod/app"
wait_for 30 phase_is pod/app Running || fail "pod/app not Running"
uid=$($kubectl get pod app -o jsonpath='{.metadata.uid}')
pv=$($kubectl get pvc data -o jsonpath='{.spec.volumeName}')
mnt=$d/nodes/node-1/kubelet/pods/$uid/volumes/kubernetes.io~csi/$pv/mount
mountpoint -q "$mnt" || fail "the volume of pod/app is not mounted at $mnt"
[ "$(cat "$d/kcsi-up.lock" 2>/dev/null)" = "$up_pid" ] || fail "D/kcsi-up.lock does not hold kcsi up's PID $up_pid"
before=$(state)

# ---- a second kcsi up on the same folder ----
refused "a second kcsi up --dir $d" 1000 "kcsi up: $d is in use by another kcsi up (pid $up_pid)" \
	"$KCSI_BIN/kcsi" up --dir "$d" --nodes 1
grep -q "work dir\|ready in" "$t/refused.out" && fail "the second kcsi up went on: $(head -3 "$t/refused.out")"

# ---- the stack's children's folders: a second node service, a second kcsi-node ----
lp_pid=$(sed -n 's|^ *driver/node-1 *pid \([0-9]*\) .*|\1|p' "$d.out")
node_pid=$(sed -n 's|^ *kcsi-node/node-1 *pid \([0-9]*\) .*|\1|p' "$d.out")
[ -n "$lp_pid" ] && [ -n "$node_pid" ] || fail "no PIDs of driver/node-1 and kcsi-node/node-1 in the status table"
refused "a second node service of node-1 on $d/pool" 1000 \
	"pool $d/pool: node node-1 is in use by another kcsi-loopplugin (pid $lp_pid)" \
	"$KCSI_BIN/kcsi-loopplugin" --mode node --nodeid node-1 --pool-dir "$d/pool" \
	--endpoint "unix://$t/second.sock"
[ -e "$t/second.sock" ] && fail "the refused node service made its socket"
refused "a second kcsi-node on node-1's root dir" 1000 \
	"$d/nodes/node-1/kubelet is in use by another kcsi-node (pid $node_pid)" \
	"$KCSI_BIN/kcsi-node" --kubeconfig "$d/kubeconfig" --node-name node-1 \
	--root-dir "$d/nodes/node-1/kubelet"
# a driver of another node, with the controller service, shares the pool as designed
"$KCSI_BIN/kcsi-loopplugin" --mode all --nodeid other --pool-dir "$d/pool" \
	--endpoint "unix://$t/other.sock" >"$t/other.log" 2>&1 &
other=$!
wait_for 10 "$KCSI_BIN/kcsi" --endpoint "unix://$t/other.sock" --timeout 2s identity probe ||
	fail "a driver for another node on the same pool did not start: $(tail -3 "$t/other.log")"
kill -TERM "$other"
wait "$other" || fail "the driver for another node exited non-zero on SIGTERM"

after=$(state)
[ "$before" = "$after" ] || fail "the first stack was touched: $(diff <(echo "$before") <(echo "$after"))"
mountpoint -q "$mnt" || fail "the volume of pod/app is no longer mounted"
phase_is pod/app Running || fail "pod/app is no longer Running"
pod_yaml app2 data2 | $kubectl apply -f - >/dev/null || fail "kubectl apply of pod/app2"
wait_for 30 phase_is pod/app2 Running || fail "pod/app2 not Running after the refused ones"

# ---- SIGTERM still ends the first stack, at once and whole ----
t0=$(date +%s%N)
stop_up TERM || fail "kcsi up exited non-zero on SIGTERM"
ms=$(ms_since "$t0")
echo "the first stack stopped $ms ms after SIGTERM"
# The 1 s claim is the normal build's. Under ASan every one of the stack's 13 processes runs
# LeakSanitizer's heap scan as it exits, on 2 cores: CI's timing phase saw 1,285 and 1,656 ms.
stop_ms=1000
ldd "$KCSI_BIN/kcsi" 2>/dev/null | grep -q libasan && stop_ms=3000
[ "$ms" -le $stop_ms ] || fail "kcsi up took $ms ms to stop after SIGTERM (at most $stop_ms)"
[ "$(pgrep -f -- "$t/" | wc -l)" = 0 ] || fail "processes left: $(pgrep -af -- "$t/")"
[ "$(grep -cF " $t/" /proc/self/mountinfo)" = 0 ] || fail "mounts left"
[ "$(losetup -a | grep -cF "$t/")" = 0 ] || fail "loop devices left"
[ -f "$d/kcsi-up.lock" ] || fail "D/kcsi-up.lock was removed (a third kcsi up could then lock a new file)"

if [ $FAILS -ne 0 ]; then
	tail -n 30 "$d.out" >&2
	for f in "$d"/logs/*.log; do echo "--- $f" >&2; tail -n 10 "$f" >&2; done
	exit 1
fi
echo PASS
