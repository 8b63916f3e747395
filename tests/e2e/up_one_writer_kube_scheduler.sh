#!/bin/bash
# e2e (issue 35): the ReadWriteOncePod scenario of up_one_writer.sh with the real kube-scheduler
# v1.37.2 (a peer, KCSI_PEERS) placing the pods against kube-emulator: its profile
# "kube-scheduler" takes the pods that name it, so kcsi-controller-manager's volume-scheduler
# leaves them alone. kube-scheduler refuses a2 with its VolumeRestrictions reason, kcsi-node and
# the driver refuse a3, and kube-scheduler places a2 once the claim is free.
#
# kube-scheduler runs as a user would run it outside a cluster: a KubeSchedulerConfiguration with
# the stack's kubeconfig, no leader election and no serving port, and its default content type
# (protobuf): kube-emulator decodes the bindings and events.k8s.io Events it posts, and `kubectl
# get events` lists those Events (lib_one_writer.sh's event_text).
set -u
: "${KCSI_BIN:?}" "${KCSI_SRC:?}" "${KCSI_PEERS:?}"
kubectl=${KUBECTL:-kubectl}
FAILS=0
fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
ks=$KCSI_PEERS/kube-scheduler
if [ ! -x "$ks" ]; then
	echo "FAIL: no kube-scheduler peer at $ks (build the peers: make peers)" >&2
	exit 1
fi
t=$(mktemp -d /tmp/kcsi-up-1wks.XXXXXX)
d=$t/stack
ks_pid=
. "$(dirname "$0")/lib_up.sh"
. "$(dirname "$0")/lib_one_writer.sh"
cleanup() {
	[ -n "$ks_pid" ] && kill -TERM "$ks_pid" 2>/dev/null && wait "$ks_pid" 2>/dev/null
	release_below "$t"
	rm -rf "$t"
}
trap cleanup EXIT

start_up "$d" --nodes 2 || exit 1
export KUBECONFIG=$d/kubeconfig
cat >"$t/scheduler.yaml" <<YAML
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $d/kubeconfig
leaderElection:
  leaderElect: false
profiles:
  - schedulerName: kube-scheduler
YAML
"$ks" --config "$t/scheduler.yaml" --secure-port=0 -v=2 >"$t/kube-scheduler.log" 2>&1 &
ks_pid=$!
one_writer "$d" kube-scheduler
grep -q 'Successfully bound pod to node" pod="default/a1" node="node-1"' "$t/kube-scheduler.log" ||
	fail "kube-scheduler did not bind a1 (its log says nothing of it)"
grep -q 'Successfully bound pod to node" pod="default/a2"' "$t/kube-scheduler.log" ||
	fail "kube-scheduler did not bind a2 once the claim was free"
grep -q 'Successfully bound pod to node' "$d/logs/kcsi-controller-manager.log" &&
	fail "kcsi-controller-manager's volume-scheduler bound a pod of kube-scheduler's"
kill -TERM "$ks_pid"
wait "$ks_pid"
ks_pid=
stop_up TERM || fail "kcsi up exited non-zero on SIGTERM"
[ "$(grep -cF " $d/" /proc/self/mountinfo)" = 0 ] || fail "mounts left under the stack"
if [ $FAILS -ne 0 ]; then
	echo "--- kube-scheduler" >&2
	grep -v 'Caches populated' "$t/kube-scheduler.log" | tail -n 30 >&2
	for f in "$d"/logs/kcsi-node_node-1.log "$d"/logs/driver_node-1.log; do
		echo "--- $f" >&2
		tail -n 30 "$f" >&2
	done
	exit 1
fi
echo PASS
