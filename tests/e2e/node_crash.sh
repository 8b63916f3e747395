#!/bin/bash
# e2e (SLOW): kcsi-node killed with SIGKILL while pods come and go. After each restart it
# rebuilds what is mounted from its root dir and the mount table; once every pod is deleted and
# the volumes detached, no mount, no pod directory and no loop device of this test is left.
#   1. deterministic: a pod deleted while kcsi-node is down is cleaned up after the restart;
#   2. eight rounds: pods created and deleted, kcsi-node killed at a random moment.
: "${KCSI_SRC:?}"
source "$KCSI_SRC/tests/e2e/lib_emulator.sh"
source "$KCSI_SRC/tests/e2e/lib_attacher.sh"
source "$KCSI_SRC/tests/e2e/lib_node.sh"
emu_start
controller_up
node_up n1
wait_for "n1 registered" 15 csinode_has n1 loop.kcsi.io
H=()
for j in 1 2 3; do
	h=$(lp_volume "vol$j" --cap SINGLE_NODE_WRITER,mount,ext4)
	H+=("$h")
	mk_pv "pv$j" loop.kcsi.io "$h" '{"claimRef":{"namespace":"default","name":"c'$j'"}}'
	mk_claim "c$j" "pv$j"
	ad_attach "$h" "pv$j" n1
done
kill9_node() { kill -KILL "${NODE_PIDS[n1:node]}"; wait "${NODE_PIDS[n1:node]}" 2>/dev/null; }
no_mounts() { ! grep -q " $T/nodes/n1/kubelet/" /proc/self/mountinfo; }
no_pod_dirs() { [ -z "$(ls -A "$T/nodes/n1/kubelet/pods" 2>/dev/null)" ]; }
none_in_use() { [ "$(node_json n1 | jq '(.status.volumesInUse // []) | length')" = 0 ]; }

# 1. deleted while down
mk_pod d1 n1 c1
wait_for "d1 Running" 30 pod_running d1
kill9_node
kc delete pod d1 --wait=false >/dev/null
mountpoint -q "$(staging_of n1 "${H[0]}")" || fail "d1's volume should still be staged while kcsi-node is down"
kcsi_node_start n1
wait_for "d1 gone" 30 pod_gone d1
wait_for "d1's volume unmounted and unstaged after the restart" 30 no_mounts
wait_for "d1's pod directory removed" 10 no_pod_dirs
grep -q 'Reconstructed volume' "$T/nodes/n1/kcsi-node.log" || fail "kcsi-node did not reconstruct d1's volume"

# 2. random kills while pods come and go
for round in 1 2 3 4 5 6 7 8; do
	for j in 1 2 3; do mk_pod "r$round-$j" n1 "c$j"; done
	sleep "0.$((RANDOM % 9 + 1))"
	kill9_node
	# some pods are deleted while it is down, the rest after the restart
	kc delete pod "r$round-1" --wait=false >/dev/null
	kcsi_node_start n1
	sleep "0.$((RANDOM % 9 + 1))"
	kc delete pod "r$round-2" "r$round-3" --wait=false >/dev/null
	for j in 1 2 3; do wait_for "r$round-$j gone" 30 pod_gone "r$round-$j"; done
done
wait_for "every volume unmounted and unstaged" 30 no_mounts
wait_for "no pod directory left" 10 no_pod_dirs
wait_for "volumesInUse empty" 10 none_in_use
for j in 0 1 2; do ad_detach "${H[$j]}" n1; done
losetup -a | grep -q "$T/" && fail "loop devices left: $(losetup -a | grep "$T/")"
ls "$T/nodes/n1/kubelet/plugins/kubernetes.io/csi/loop.kcsi.io" 2>/dev/null | grep -q . &&
	fail "global mount directories left: $(ls "$T/nodes/n1/kubelet/plugins/kubernetes.io/csi/loop.kcsi.io")"
node_finish
