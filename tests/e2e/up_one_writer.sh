#!/bin/bash
# e2e (issue 35): a ReadWriteOncePod claim has one writer on `kcsi up`, with
# kcsi-controller-manager's volume-scheduler placing the pods. A second pod put on the same node
# by hand (nodeName) is refused by kcsi-node and the loop driver (FailedMount, not Running); a
# third, left to the scheduler, is placed nowhere (FailedScheduling with kube-scheduler's reason);
# each gets the claim in turn once the pod before it is gone (lib_one_writer.sh).
set -u
: "${KCSI_BIN:?}" "${KCSI_SRC:?}"
kubectl=${KUBECTL:-kubectl}
FAILS=0
fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
t=$(mktemp -d /tmp/kcsi-up-1w.XXXXXX)
d=$t/stack
. "$(dirname "$0")/lib_up.sh"
. "$(dirname "$0")/lib_one_writer.sh"
cleanup() {
	release_below "$t"
	rm -rf "$t"
}
trap cleanup EXIT

start_up "$d" --nodes 2 || exit 1
export KUBECONFIG=$d/kubeconfig
one_writer "$d" default-scheduler
stop_up TERM || fail "kcsi up exited non-zero on SIGTERM"
[ "$(grep -cF " $d/" /proc/self/mountinfo)" = 0 ] || fail "mounts left under the stack"
if [ $FAILS -ne 0 ]; then
	for f in "$d"/logs/kcsi-controller-manager.log "$d"/logs/kcsi-node_node-1.log \
		"$d"/logs/driver_node-1.log; do
		echo "--- $f" >&2
		tail -n 30 "$f" >&2
	done
	exit 1
fi
echo PASS
