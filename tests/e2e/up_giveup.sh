#!/bin/bash
# e2e: one component of `kcsi up` that cannot run does not take the others down.
#  1. node-2's driver exits at every start (a --driver-cmd wrapper refuses node-2): kcsi up
#     restarts it with its back-off (1, 2, 4, 8 s), gives it up after 5 failures in a row saying
#     which component, why and its last log lines, becomes ready without node-2, lists it as given
#     up, and the README's writer pod runs on node-1 with its volume mounted; SIGTERM: status 0.
#  2. a core component (kcsi-controller-manager, killed twice with --restart-limit 2) given up
#     ends the stack: kcsi up says so and exits 1, leaving no process, mount or loop device.
set -u
: "${KCSI_BIN:?}" "${KCSI_SRC:?}"
. "$(dirname "$0")/lib_proc.sh" up-giveup
. "$(dirname "$0")/lib_up.sh"
kubectl=${KUBECTL:-kubectl}
_prev=$(trap -p EXIT | sed "s/^trap -- '\(.*\)' EXIT\$/\1/")
trap "release_below $T; $_prev" EXIT
leftovers() {
	echo "procs=$(pgrep -f -- "$T/" | wc -l) loops=$(losetup -a | grep -cF "$T/")" \
		"mounts=$(grep -cF " $T/" /proc/self/mountinfo)"
}

# ---- 1. a node's driver that never runs ----
cat >"$T/driver.sh" <<SH
#!/bin/sh
# \$1 endpoint, \$2 node id, \$3 mode
if [ "\$2" = node-2 ]; then
	echo "driver for node-2: /dev/loop-control refused (by the test)" >&2
	exit 3
fi
exec "$KCSI_BIN/kcsi-loopplugin" --endpoint "\$1" --nodeid "\$2" --mode "\$3" --pool-dir "$T/pool" --zone local
SH
chmod +x "$T/driver.sh"
mkdir -p "$T/pool"
d=$T/stack
t0=$SECONDS
if start_up "$d" --nodes 2 --driver-cmd "$T/driver.sh {endpoint} {nodeid} {mode}"; then
	echo "ready in $((SECONDS - t0)) s with node-2's driver given up"
	grep -q "giving up on driver/node-2: it failed 5 times in a row (last: exited with status 3); the rest of the stack keeps running" "$d.out" ||
		fail "no give-up message for driver/node-2"
	grep -q "| driver for node-2: /dev/loop-control refused" "$d.out" ||
		fail "the give-up message does not show the driver's last log lines"
	[ "$(grep -c "driver/node-2 exited with status 3; restarting in" "$d.out")" = 4 ] ||
		fail "driver/node-2 was not restarted 4 times before being given up"
	grep -qE "^  driver/node-2 +pid 0 +given up" "$d.out" || fail "the status does not list driver/node-2 as given up"
	grep -qE "^  kcsi-node/node-1 +pid [0-9]+ +running" "$d.out" || fail "kcsi-node/node-1 is not listed running"
	grep -q "without the components given up above" "$d.out" || fail "the ready line does not mention what was given up"
	export KUBECONFIG=$d/kubeconfig
	$kubectl apply -f "$KCSI_SRC/examples/storageclass-wffc.yaml" -f "$KCSI_SRC/examples/pvc-filesystem.yaml" \
		-f "$KCSI_SRC/examples/pod-writer.yaml" >/dev/null || fail "kubectl apply of the examples"
	if wait_for 60 phase_is pod/writer Running; then
		pv=$($kubectl get pvc data -o jsonpath='{.spec.volumeName}')
		uid=$($kubectl get pod writer -o jsonpath='{.metadata.uid}')
		mountpoint -q "$d/nodes/node-1/kubelet/pods/$uid/volumes/kubernetes.io~csi/$pv/mount" ||
			fail "the writer's volume is not mounted on node-1"
	else
		fail "pod/writer not Running: $($kubectl get pod writer -o jsonpath='{.status}')"
	fi
	$kubectl delete pod writer --grace-period=0 --timeout=60s >/dev/null 2>&1 || fail "deleting pod/writer"
	$kubectl delete pvc data --timeout=60s >/dev/null || fail "deleting pvc/data"
	wait_for 30 no_objects pv || fail "PVs left after the claim was deleted"
	kill -0 "$up_pid" 2>/dev/null || fail "kcsi up is gone before SIGTERM"
	stop_up; rc=$?
	[ $rc = 0 ] || fail "kcsi up exited $rc on SIGTERM with a non-core component given up (want 0)"
	[ "$(leftovers)" = "procs=0 loops=0 mounts=0" ] || fail "left behind: $(leftovers)"
fi

# ---- 2. a core component given up ends the stack ----
d=$T/core
if start_up "$d" --nodes 1 --restart-limit 2; then
	cm_pid() { sed -n 's/^  kcsi-controller-manager  *pid \([0-9]*\) .*/\1/p' "$d.out"; }
	pid=$(cm_pid)
	kill -9 "$pid" || fail "no kcsi-controller-manager pid in the status"
	# restarted after 1 s: find its new pid, then kill that one too
	new_cm() { p=$(pgrep -f -- "kcsi-controller-manager --kubeconfig $d/"); [ -n "$p" ] && [ "$p" != "$pid" ]; }
	wait_for 30 new_cm || fail "kcsi-controller-manager was not restarted within 30 s"
	kill -9 "$(pgrep -f -- "kcsi-controller-manager --kubeconfig $d/")"
	for _ in $(seq 1 200); do kill -0 "$up_pid" 2>/dev/null || break; sleep 0.05; done
	if kill -0 "$up_pid" 2>/dev/null; then
		fail "kcsi up still runs after kcsi-controller-manager was given up"
		stop_up
	else
		wait "$up_pid"; rc=$?
		up_pid=
		[ $rc = 1 ] || fail "kcsi up exited $rc after giving up a core component (want 1)"
	fi
	grep -q "giving up on kcsi-controller-manager: it failed 2 times in a row (last: was killed by signal 9 (Killed)); it is a core component, so the stack stops" "$d.out" ||
		fail "no give-up message for kcsi-controller-manager"
	grep -q "kcsi up: stopped" "$d.out" || fail "kcsi up did not stop in order"
	[ "$(leftovers)" = "procs=0 loops=0 mounts=0" ] || fail "left behind: $(leftovers)"
fi

if [ $FAILS -ne 0 ]; then
	for f in "$T"/*.out; do echo "--- $f" >&2; tail -n 60 "$f" >&2; done
	exit 1
fi
echo PASS
