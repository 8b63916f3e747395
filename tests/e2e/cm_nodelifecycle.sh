#!/bin/bash
# e2e: kcsi-controller-manager's nodelifecycle on kube-emulator, with an 8 s grace period (a
# heartbeat every second stays well inside it on a loaded machine too, where one post can take
# a second or more). The
# script plays the kubelet: it writes the Node's Ready condition (with lastHeartbeatTime) and its
# Lease in kube-node-lease by hand. A node that registered with the not-ready taint and reports
# Ready loses the taint; a Ready False node gets not-ready (NoSchedule and NoExecute); a node
# whose heartbeat and Lease stop becomes Unknown ("Kubelet stopped posting node status.") with
# the unreachable taints, which go again when both resume; a Lease renewal alone keeps a node
# whose status is not updated Ready. The node's pods (MarkPodsNotReady): when n1 turns Unknown,
# its pod whose Ready is True gets Ready False (reason kept, lastTransitionTime now) and a
# Warning NodeNotReady "Node is not ready" event, a pod without a Ready condition is left alone,
# and a Ready pod bound to n1 while it is Unknown is marked too. Events come from upstream's
# source component, "node-controller". A third node, n3, keeps posting in the background: with every
# node silent upstream's "all zones fully disrupted" rule would add no NoExecute taint at all
# (cm_eviction tests that).
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
. "$(dirname "$0")/lib_cm.sh"

now() { date -u +%Y-%m-%dT%H:%M:%SZ; }
now_us() { date -u +%Y-%m-%dT%H:%M:%S.%6NZ; }
heartbeat() { # NODE STATUS
	node_status "$1" "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"$2\",\"reason\":\"KubeletReady\",\"lastHeartbeatTime\":\"$(now)\",\"lastTransitionTime\":\"2026-01-01T00:00:00Z\"}]}}"
}
renew() { # NODE: creates or renews kube-node-lease/NODE
	local body
	body=$(jq -cn --arg n "$1" --arg t "$(now_us)" '{apiVersion: "coordination.k8s.io/v1", kind: "Lease",
		metadata: {name: $n, namespace: "kube-node-lease"}, spec: {holderIdentity: $n, leaseDurationSeconds: 40, renewTime: $t}}')
	req PATCH "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/$1" \
		"{\"spec\":{\"renewTime\":\"$(now_us)\"}}" application/merge-patch+json
	[ "$CODE" = 200 ] && return 0
	req POST "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases" "$body"
	[ "$CODE" = 201 ] || { echo "lease create: $CODE $(cat "$T/out")" >&2; return 1; }
}
taints() { kc get node "$1" -o json | jq -r '[.spec.taints // [] | .[] | .key + ":" + .effect] | sort | join(" ")'; }
has_taints() { [ "$(taints "$1")" = "$2" ]; }
cond() { kc get node "$1" -o json | jq -r --arg t "$2" ".status.conditions // [] | .[] | select(.type == \$t) | $3"; }
mk_tainted_node() { # NAME: registers as a kubelet does, with the not-ready NoSchedule taint
	jq -n --arg n "$1" '{apiVersion: "v1", kind: "Node", metadata: {name: $n},
		spec: {taints: [{key: "node.kubernetes.io/not-ready", effect: "NoSchedule"}]}}' | kc create -f - >/dev/null
}

emu_start
req POST /api/v1/namespaces '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"kube-node-lease"}}'
mk_tainted_node n1
heartbeat n1 True
renew n1
mk_tainted_node n2
heartbeat n2 False
mk_tainted_node n3
heartbeat n3 True
( while :; do
	curl -s -o /dev/null -X PATCH -H 'Content-Type: application/merge-patch+json' --data-binary \
		"{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"KubeletReady\",\"lastHeartbeatTime\":\"$(now)\",\"lastTransitionTime\":\"2026-01-01T00:00:00Z\"}]}}" \
		"$S/api/v1/nodes/n3/status"
	sleep 1
done ) &
pod_ready() { # POD: sets its Ready condition True, as the kubelet does
	req PATCH "/api/v1/namespaces/default/pods/$1/status" \
		'{"status":{"conditions":[{"type":"Ready","status":"True","reason":"PodReady","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}' \
		application/merge-patch+json
	[ "$CODE" = 200 ] || { echo "pod status patch failed: $CODE $(cat "$T/out")" >&2; return 1; }
}
pod_cond() { kc get pod "$1" -o json | jq -r ".status.conditions // [] | .[] | select(.type == \"Ready\") | $2"; }
mk_pod p-ready n1
pod_ready p-ready
mk_pod p-plain n1
mk_pod p-late ""
pod_ready p-late
cm_start cm --controllers nodelifecycle --node-monitor-period 200ms --node-monitor-grace-period 8s -v 2

wait_for "n1 (Ready True) loses the not-ready taint" 10 has_taints n1 ""
wait_for "n2 (Ready False) gets not-ready NoSchedule and NoExecute" 10 \
	has_taints n2 "node.kubernetes.io/not-ready:NoExecute node.kubernetes.io/not-ready:NoSchedule"
check "the NoExecute taint carries timeAdded" \
	test -n "$(kc get node n2 -o json | jq -r '.spec.taints[] | select(.effect == "NoExecute") | .timeAdded // empty')"

# n1 keeps posting for 10 s (more than the grace period): it stays Ready and untainted.
for _ in $(seq 1 10); do heartbeat n1 True; renew n1; sleep 1; done
check "n1 stays Ready while it posts" eq "$(cond n1 Ready .status)" True
check "n1 stays untainted" has_taints n1 ""

# The Lease alone is a sign of life: Ready stays True though the status is not posted.
for _ in $(seq 1 10); do renew n1; sleep 1; done
check "renewing the Lease alone keeps n1 Ready" eq "$(cond n1 Ready .status)" True

# Both stop: after the grace period every condition is Unknown and the unreachable taints come.
wait_for "n1 Ready Unknown after the grace period" 20 eval '[ "$(cond n1 Ready .status)" = Unknown ]'
check "reason NodeStatusUnknown" eq "$(cond n1 Ready .reason)" NodeStatusUnknown
check "message as kube-controller-manager's" eq "$(cond n1 Ready .message)" "Kubelet stopped posting node status."
check "MemoryPressure added as never posted" eq "$(cond n1 MemoryPressure .reason)" NodeStatusNeverUpdated
check "PIDPressure Unknown" eq "$(cond n1 PIDPressure .status)" Unknown
wait_for "n1 gets the unreachable taints" 10 \
	has_taints n1 "node.kubernetes.io/unreachable:NoExecute node.kubernetes.io/unreachable:NoSchedule"
wait_for "NodeNotReady event" 10 eval 'kc get events -A -o json | jq -e ".items[] | select(.reason == \"NodeNotReady\" and .involvedObject.name == \"n1\")" >/dev/null'
check "the node's event comes from node-controller" eq "$(event_source n1 NodeNotReady)" "node-controller node-controller"

# MarkPodsNotReady: n1's Ready pod is not Ready any more; the other pod has no Ready to change.
wait_for "p-ready on n1 shows Ready False" 10 eval '[ "$(pod_cond p-ready .status)" = False ]'
check "its reason is kept" eq "$(pod_cond p-ready .reason)" PodReady
check "its lastTransitionTime is now" test "$(pod_cond p-ready .lastTransitionTime)" != 2026-01-01T00:00:00Z
wait_for "Warning NodeNotReady on p-ready" 10 has_event p-ready NodeNotReady "Node is not ready"
check "the pod's event comes from node-controller" eq "$(event_source p-ready NodeNotReady)" "node-controller node-controller"
check "p-plain (no Ready condition) is left alone" eq "$(pod_cond p-plain .status)" ""
req POST /api/v1/namespaces/default/pods/p-late/binding \
	'{"apiVersion":"v1","kind":"Binding","metadata":{"name":"p-late"},"target":{"kind":"Node","name":"n1"}}'
check "p-late bound to n1" eq "$CODE" 201
wait_for "p-late, bound to n1 while it is Unknown, shows Ready False" 10 eval '[ "$(pod_cond p-late .status)" = False ]'

# The kubelet comes back: Ready heartbeat and Lease again.
heartbeat n1 True
renew n1
wait_for "n1's unreachable taints go when it is back" 10 has_taints n1 ""
check "n1 Ready again" eq "$(cond n1 Ready .status)" True

# n2 turns Ready: the not-ready taints go.
heartbeat n2 True
wait_for "n2's not-ready taints go when it reports Ready" 10 has_taints n2 ""

cm_stop cm
check "SIGTERM exits 0" eq "$?" 0
cm_finish
