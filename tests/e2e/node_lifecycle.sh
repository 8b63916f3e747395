#!/bin/bash
# e2e: kcsi-node beside kcsi-controller-manager's nodelifecycle, as a kubelet beside
# kube-controller-manager (grace period 4 s here): a Node registered with the API server's
# not-ready taint loses it once kcsi-node reports Ready; a stopped kcsi-node's Node becomes
# Unknown with the unreachable NoSchedule taint; started again, the Node is Ready and the taints are gone.
: "${KCSI_SRC:?}"
source "$KCSI_SRC/tests/e2e/lib_emulator.sh"
source "$KCSI_SRC/tests/e2e/lib_attacher.sh"
source "$KCSI_SRC/tests/e2e/lib_node.sh"

taints() { kc get node n1 -o json | jq -r '[.spec.taints // [] | .[] | .key + ":" + .effect] | sort | join(" ")'; }
has_taints() { [ "$(taints)" = "$1" ]; }
ready_is() { [ "$(kc get node n1 -o json | jq -r '.status.conditions[]? | select(.type=="Ready") | .status')" = "$1" ]; }

emu_start
# The Node as kube-apiserver's admission leaves it for a new kubelet: tainted not-ready.
jq -n '{apiVersion: "v1", kind: "Node", metadata: {name: "n1"},
	spec: {taints: [{key: "node.kubernetes.io/not-ready", effect: "NoSchedule"}]}}' | kc create -f - >/dev/null
"$KCSI_BIN/kcsi-controller-manager" --kubeconfig "$KC" --controllers nodelifecycle \
	--node-monitor-period 1s --node-monitor-grace-period 4s >>"$T/cm.log" 2>&1 &
NODE_PIDS[cm]=$!
FLAGS=(--node-status-update-frequency 1s --node-lease-duration-seconds 4) # Lease renewed every 1 s
node_up n1 "${FLAGS[@]}"
wait_for "n1 Ready" 15 ready_is True
wait_for "the not-ready taint is removed once the node is Ready" 15 has_taints ""
sleep 6 # longer than the grace period: a live kcsi-node keeps its Node Ready
check "a live node stays Ready past the grace period" ready_is True
check "and untainted" has_taints ""

kill -STOP "${NODE_PIDS[n1:node]}" # a hung kubelet: no status, no Lease renewal
wait_for "a silent node becomes Unknown" 20 ready_is Unknown
# n1 is the only node: with it Unknown every zone is in full disruption, where upstream's
# nodelifecycle adds no NoExecute taint (its eviction rate is 0 there; e2e.cm_eviction covers
# NoExecute with a healthy node beside): the unreachable NoSchedule taint only.
wait_for "with the unreachable NoSchedule taint" 10 has_taints "node.kubernetes.io/unreachable:NoSchedule"
check "Unknown says why" eq "$(kc get node n1 -o json | jq -r '.status.conditions[] | select(.type=="Ready") | .message')" \
	"Kubelet stopped posting node status."
kill -KILL "${NODE_PIDS[n1:node]}"
wait "${NODE_PIDS[n1:node]}" 2>/dev/null

kcsi_node_start n1 "${FLAGS[@]}" # the kubelet comes back
wait_for "back: Ready again" 15 ready_is True
wait_for "and the unreachable taints are gone" 15 has_taints ""
node_finish
