#!/bin/bash
# e2e: issue 35's node-failure behaviour of kcsi-controller-manager on kube-emulator, with
# csi-attacher and the real kcsi-loopplugin. The script plays the kubelets: a background loop
# posts the Ready heartbeat and renews the Lease of every node listed in $T/alive each second;
# a node taken off the list goes silent (grace period 3 s).
#  1. taint eviction: a pod whose toleration does not match the unreachable taint is deleted at
#     once (DisruptionTarget DeletionByTaintManager, TaintManagerEviction event), one with
#     tolerationSeconds 5 about 5 s after the taint's timeAdded, one tolerating for ever and one
#     with the admission's 300 s defaults stay; a node back before the toleration ends cancels
#     ("Cancelling deletion of Pod ...");
#  2. zones (topology.kubernetes.io/zone a: 4 nodes, b: 2): 3 of 4 silent in a is
#     PartialDisruption (a small zone: no new NoExecute taint); all of a silent is FullDisruption
#     while b is up: NoExecute taints come at --node-eviction-rate (the first within 10 s, the
#     next not within 5 s after it); every zone silent: no NoExecute taint anywhere, no pod evicted; the
#     node_collector_* metrics;
#  3. non-graceful shutdown: a silent node's terminating pod whose containers still run keeps
#     its volume attached past --max-wait-for-unmount (upstream's DetermineVolumeAction); the
#     out-of-service taint makes podgc force-delete it and the VolumeAttachment go at once;
#  4. a pod force-deleted from a silent node that still lists the volume in use: detached only
#     after --max-wait-for-unmount (3 s), counted as a timeout forced detach.
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
. "$(dirname "$0")/lib_cm.sh"
DRV=loop.kcsi.io

now() { date -u +%Y-%m-%dT%H:%M:%SZ; }
now_us() { date -u +%Y-%m-%dT%H:%M:%S.%6NZ; }
epoch() { date -u -d "$1" +%s.%N; }
# One kubelet beat of NODE, without touching $T/out (the main script's req uses it).
beat() {
	local n=$1 t
	t=$(now)
	curl -s -o /dev/null -X PATCH -H 'Content-Type: application/merge-patch+json' --data-binary \
		"{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"KubeletReady\",\"lastHeartbeatTime\":\"$t\",\"lastTransitionTime\":\"2026-01-01T00:00:00Z\"}]}}" \
		"$S/api/v1/nodes/$n/status"
	curl -s -o /dev/null -X PATCH -H 'Content-Type: application/merge-patch+json' --data-binary \
		"{\"spec\":{\"renewTime\":\"$(now_us)\"}}" "$S/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/$n"
}
# The nodes of a round beat at once: nodes silenced together must go Unknown in the same pass of
# the controller (every 200 ms here), as a zone's kubelets that lose power together do. Beaten one
# after the other (four requests apart, 0.1-0.4 s on a loaded machine), a2 could go Unknown a pass
# before a3, and for that pass zone a (a1, a2 of 4) is Normal and a2 takes the zone's token.
beat_loop() { while :; do for n in $(cat "$T/alive"); do beat "$n" & done; wait; sleep 1; done; }
alive() { printf '%s\n' "$@" >"$T/alive.new" && mv "$T/alive.new" "$T/alive"; }
mk_znode() { # NAME ZONE
	jq -n --arg n "$1" --arg z "$2" '{apiVersion: "v1", kind: "Node", metadata: {name: $n,
		labels: {"topology.kubernetes.io/region": "r", "topology.kubernetes.io/zone": $z},
		annotations: {"volumes.kubernetes.io/controller-managed-attach-detach": "true"}}}' |
		kc create -f - >/dev/null
	jq -cn --arg n "$1" --arg t "$(now_us)" '{apiVersion: "coordination.k8s.io/v1", kind: "Lease",
		metadata: {name: $n, namespace: "kube-node-lease"}, spec: {holderIdentity: $n, renewTime: $t}}' |
		kc create -f - >/dev/null
	beat "$1"
}
# tpod NAME NODE TOLERATIONS-JSON [CLAIM]
tpod() {
	jq -n --arg n "$1" --arg node "$2" --argjson tol "$3" --arg c "${4:-}" '{apiVersion: "v1", kind: "Pod",
		metadata: {name: $n, namespace: "default"},
		spec: ({nodeName: $node, containers: [{name: "c", image: "busybox"}]}
		       + (if $tol == null then {} else {tolerations: $tol} end)
		       + (if $c == "" then {} else {volumes: [{name: "v", persistentVolumeClaim: {claimName: $c}}]} end))}' |
		kc create -f - >/dev/null
}
running() { # POD: its status as kcsi-node writes it, container running
	req PATCH "/api/v1/namespaces/default/pods/$1/status" '{"status":{"phase":"Running","containerStatuses":[{"name":"c","ready":true,"restartCount":0,"image":"busybox","imageID":"","state":{"running":{"startedAt":"2026-01-01T00:00:00Z"}}}]}}' application/merge-patch+json
}
deleting() { [ -n "$(kc get pod "$1" -o jsonpath='{.metadata.deletionTimestamp}' 2>/dev/null)" ]; }
not_deleting() { kc get pod "$1" >/dev/null 2>&1 && ! deleting "$1"; }
pod_gone() { ! kc get pod "$1" >/dev/null 2>&1; }
noexec() { kc get node "$1" -o json | jq -r '[.spec.taints // [] | .[] | select(.effect == "NoExecute") | .key] | join(" ")'; }
has_noexec() { [ "$(noexec "$1")" = "node.kubernetes.io/unreachable" ]; }
no_noexec() { [ -z "$(noexec "$1")" ]; }
unknown() { [ "$(kc get node "$1" -o json | jq -r '.status.conditions[] | select(.type == "Ready") | .status')" = Unknown ]; }
taint_added() { kc get node "$1" -o json | jq -r '.spec.taints[] | select(.effect == "NoExecute") | .timeAdded'; }
metrics() { curl -s "http://127.0.0.1:$PORT/metrics"; }
metric() { metrics | tr -d '\000' | awk -v m="$1" -v z="$2" '$1 == m "{zone=\"r::" z "\"}" {print $2}'; }

TOL_WRONG='[{"key":"node.kubernetes.io/unreachable","operator":"Equal","value":"x","effect":"NoExecute"},{"key":"node.kubernetes.io/not-ready","operator":"Equal","value":"x","effect":"NoExecute"}]'
tol() { echo "[{\"key\":\"node.kubernetes.io/unreachable\",\"operator\":\"Exists\",\"effect\":\"NoExecute\"$1}]"; }

emu_start
req POST /api/v1/namespaces '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"kube-node-lease"}}'
for n in a1 a2 a3 a4; do mk_znode $n a; done
for n in b1 b2; do mk_znode $n b; done
alive a1 a2 a3 a4 b1 b2
beat_loop &

# ---- 1. taint eviction ----
tpod p-now a1 "$TOL_WRONG"
tpod p-5 a1 "$(tol ',"tolerationSeconds":5')"
tpod p-forever a1 "$(tol '')"
tpod p-default a1 null
tpod p-cancel b1 "$(tol ',"tolerationSeconds":30')"
check "DefaultTolerationSeconds: not-ready and unreachable, Exists, NoExecute, 300 s" eq \
	"$(kc get pod p-default -o json | jq -c '[.spec.tolerations[] | [.key, .operator, .effect, .tolerationSeconds]]')" \
	'[["node.kubernetes.io/not-ready","Exists","NoExecute",300],["node.kubernetes.io/unreachable","Exists","NoExecute",300]]'
check "a pod with its own NoExecute toleration of the key gets none added" eq \
	"$(kc get pod p-5 -o json | jq -c '[.spec.tolerations[].key]')" \
	'["node.kubernetes.io/unreachable","node.kubernetes.io/not-ready"]'

cm_start cm --controllers '*' --http-endpoint 127.0.0.1:0 --node-monitor-period 200ms \
	--node-monitor-grace-period 3s --max-wait-for-unmount 3s -v 2
PORT=$(cm_http_port cm)
sleep 1
check "all nodes healthy: no NoExecute taint" eq "$(for n in a1 b1; do noexec $n; done | tr -d '\n')" ""

T0=$SECONDS
alive a2 a3 a4 b2
wait_for "a1 silent: unreachable NoExecute" 10 has_noexec a1
wait_for "b1 silent: unreachable NoExecute (its own zone's limiter)" 5 has_noexec b1
ADDED=$(taint_added a1)
wait_for "p-now (untolerated) deleted at once" 3 deleting p-now
check "p-now got DisruptionTarget, reason DeletionByTaintManager" eq \
	"$(kc get pod p-now -o json | jq -r '.status.conditions[] | select(.type == "DisruptionTarget") | .status + " " + .reason + " " + .message')" \
	"True DeletionByTaintManager Taint manager: deleting due to NoExecute taint"
wait_for "TaintManagerEviction event for p-now" 5 has_event p-now TaintManagerEviction "Marking for deletion Pod default/p-now"
check "it comes from taint-eviction-controller" \
	eq "$(event_source p-now TaintManagerEviction)" "taint-eviction-controller taint-eviction-controller"
# b1 comes back before p-cancel's 30 s: the taint goes, the eviction is cancelled.
alive a2 a3 a4 b1 b2
wait_for "b1 back: NoExecute taint gone" 10 no_noexec b1
wait_for "cancel event for p-cancel" 5 has_event p-cancel TaintManagerEviction "Cancelling deletion of Pod default/p-cancel"
check "p-cancel stays" not_deleting p-cancel
# p-5 must not go before its 5 s: checked by the server's clock below (deletionTimestamp against
# the taint's timeAdded, at least 4 s), not here, where the steps above may already have taken
# 5 s on a loaded machine (CI: p-5 gone at 5.0 s, as it should be, before this line ran).
[ $((SECONDS - T0)) -ge 4 ] || check "p-5 still there within its 5 s" not_deleting p-5
wait_for "p-5 deleted when its 5 s run out" 10 deleting p-5
D5=$(kc get pod p-5 -o json | jq -r '.metadata.deletionTimestamp')
# deletionTimestamp = the delete + the 30 s grace period
LAT=$(echo "$(epoch "$D5") - 30 - $(epoch "$ADDED")" | bc)
echo "figure: p-5 deleted ${LAT}s after the taint's timeAdded (tolerationSeconds 5; timestamps have 1 s resolution)"
check "p-5 deleted 4..8 s after timeAdded" eval "[ \"\$(echo \"$LAT >= 4 && $LAT <= 8\" | bc)\" = 1 ]"
check "p-forever stays" not_deleting p-forever
check "p-default (300 s) stays" not_deleting p-default
wait_for "deletions counted" 5 eval '[ "$(metrics | awk '"'"'$1 == "taint_eviction_controller_pod_deletions_total" {print $2}'"'"')" = 2 ]'

# ---- 2. zones ----
alive a4 b1 b2  # a1, a2, a3 silent: zone a 3 of 4 not Ready, PartialDisruption
wait_for "a2 Unknown" 10 unknown a2
wait_for "a3 Unknown" 10 unknown a3
wait_for "zone a: 3 unhealthy nodes (metric)" 5 eval '[ "$(metric node_collector_unhealthy_nodes_in_zone a)" = 3 ]'
check "zone a health 25%" eq "$(metric node_collector_zone_health a)" 25
check "zone a size 4" eq "$(metric node_collector_zone_size a)" 4
sleep 11  # longer than the 10 s a token of --node-eviction-rate 0.1 takes
# a2 and a3 stop together, but the controller stamps a node's probe time with the pass that sees
# its heartbeat move (as upstream's): when their last beats straddle a pass (200 ms), the first
# goes Unknown one pass early, while zone a has 2 of 4 unhealthy (Normal), and may take the zone's
# token, as upstream's would (CI-like run of c03e5c7: a3 tainted). Only such a node may have the
# taint; once the zone is PartialDisruption nothing is tainted.
went_unknown() { # NODE: the time of its "Ready True -> Unknown" line in cm.log, in seconds
	awk -v n="node $1:" 'index($0, n) && /Ready True -> Unknown/ {split($2, t, ":"); v = t[1] * 3600 + t[2] * 60 + t[3]}
		END {print v + 0}' "$T/cm.log"
}
alone_first() { # NODE OTHER: NODE went Unknown a pass or more before OTHER
	[ "$(echo "$(went_unknown "$2") - $(went_unknown "$1") >= 0.1" | bc)" = 1 ]
}
for n in a2 a3; do
	other=$([ $n = a2 ] && echo a3 || echo a2)
	if alone_first $n $other; then
		echo "figure: $n went Unknown a pass before $other (zone a then Normal): its taint, if any, is allowed"
	else
		check "PartialDisruption (small zone): $n gets no NoExecute taint" no_noexec $n
	fi
done
check "a1 keeps its taint" has_noexec a1
alive b1 b2     # all of zone a silent, zone b up: FullDisruption of a is evicted at the normal rate
wait_for "a4 Unknown" 10 unknown a4
# upstream swaps in a new bucket, drained as the old (rate 0) one was waiting: 10 s to the first
wait_for "zone a FullDisruption: NoExecute taints resume at the normal rate" 15 eval \
	'[ "$(for n in a2 a3 a4; do noexec $n; done | grep -c unreachable)" -ge 1 ]'
sleep 4
check "the next one waits for the limiter (0.1/s)" eq "$(for n in a2 a3 a4; do noexec $n; done | grep -c unreachable)" 1
check "evictions counted per zone" eval '[ "$(metric node_collector_evictions_total a)" -ge 2 ]'
tpod p-b2 b2 "$(tol ',"tolerationSeconds":2')"
alive           # every zone silent: master disruption mode
wait_for "b2 Unknown" 10 unknown b2
wait_for "all zones down: no NoExecute taint on any node" 10 eval \
	'for n in a1 a2 a3 a4 b1 b2; do no_noexec $n || exit 1; done'
sleep 4
check "all zones down: p-b2 (2 s toleration) not evicted" not_deleting p-b2
check "all zones down: still no NoExecute taint" eval 'for n in a1 a2 a3 a4 b1 b2; do no_noexec $n || exit 1; done'
check "log: master disruption mode" grep -q "Entering master disruption mode" "$T/cm.log"
alive a1 a2 a3 a4 b1 b2
wait_for "all back: zone a healthy" 10 eval '[ "$(metric node_collector_zone_health a)" = 100 ]'
check "log: exits master disruption mode" grep -q "Exiting master disruption mode" "$T/cm.log"
kc delete pod p-b2 p-forever p-default p-cancel --wait=false >/dev/null

# ---- 3. non-graceful shutdown: the out-of-service taint ----
lp_start c1
lp_node_start c2
mk_znode c1 a
mk_znode c2 a
alive a1 a2 a3 a4 b1 b2 c1 c2
mk_csinode c1 $DRV c1
mk_csinode c2 $DRV c2
att_start att "$T/lp.sock"
V1=$(lp_volume vol-1)
mk_pv pv-1 $DRV "$V1"
mk_bound_claim claim-1 pv-1
U1=$(uniq "$V1")
VA1=$(va_name "$V1" c1)
tpod w1 c1 "$(tol ',"tolerationSeconds":1')" claim-1
running w1
wait_for "w1's volume attached to c1" 30 va_attached "$VA1"
node_in_use c1 "$U1"
alive a1 a2 a3 a4 b1 b2 c2   # c1 dies with the volume mounted
wait_for "c1 tainted (its zone's bucket may still be refilling)" 20 has_noexec c1
wait_for "w1 evicted after its 1 s" 10 deleting w1
sleep 5   # past --max-wait-for-unmount (3 s)
check "terminating pod with running containers: still desired, VA kept past the max wait" va_attached "$VA1"
check "no forced detach yet" eq "$(metrics | grep -c '^attachdetach_controller_forced_detaches{reason="timeout"} 0')" 1
T1=$SECONDS
kc taint node c1 node.kubernetes.io/out-of-service=nodeshutdown:NoExecute >/dev/null
wait_for "podgc force-deletes w1 on the out-of-service node" 5 pod_gone w1
wait_for "VA on c1 detached at once" 10 va_gone "$VA1"
echo "figure: out-of-service taint to detach: $((SECONDS - T1))s"
check "forced detach counted as out-of-service" eval "metrics | grep -q '^attachdetach_controller_forced_detaches{reason=\"out-of-service\"} 1'"
check "podgc counted it" eval "metrics | grep -q '^pod_gc_collector_force_delete_pods_total{namespace=\"default\",reason=\"out-of-service\"} 1'"
check "log: out-of-service force detach, upstream's words" grep -q "node has out-of-service taint, force detaching" "$T/cm.log"

# ---- 4. forced detach after --max-wait-for-unmount ----
VA2=$(va_name "$V1" c2)
tpod w2 c2 "$(tol '')" claim-1
running w2
wait_for "w2's volume attached to c2" 30 va_attached "$VA2"
node_in_use c2 "$U1"
alive a1 a2 a3 a4 b1 b2
wait_for "c2 Unknown" 10 unknown c2
kc delete pod w2 --grace-period=0 --force >/dev/null 2>&1
T2=$SECONDS
sleep 1.5
check "within the max wait: VA kept (the node may still use it)" va_attached "$VA2"
wait_for "VA on c2 force-detached after the max wait" 15 va_gone "$VA2"
echo "figure: force delete to detach with --max-wait-for-unmount 3s: $((SECONDS - T2))s"
check "forced detach counted as timeout" eval "metrics | grep -q '^attachdetach_controller_forced_detaches{reason=\"timeout\"} 1'"
check "log: timeout force detach, upstream's words" grep -q 'maxWaitForUnmountDuration expired, force detaching duration="3s"' "$T/cm.log"
echo "figure: scenario time $((SECONDS - T0))s"

cm_stop cm
check "SIGTERM exits 0" eq "$?" 0
kc delete pod --all --force --grace-period=0 >/dev/null 2>&1
cm_finish
