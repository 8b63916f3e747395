#!/bin/bash
# e2e (issue 40, defect 5): a pod that volume-scheduler cannot place gets what kube-scheduler
# gives it: a Warning FailedScheduling event from default-scheduler and the condition
# PodScheduled=False, reason Unschedulable, with kube-scheduler's message, as `kubectl describe
# pod` shows them; PodScheduled turns True once the pod is placed; the event is recorded again
# on each attempt (1 s doubling to 10 s) and counted on one Event, not re-created in a loop.
#
# Every scenario runs twice side by side: pod k-X for kcsi-controller-manager's volume-scheduler
# and its twin u-X for the real kube-scheduler v1.37.2 (a peer, profile "kube-scheduler"), and
# both must carry the same message, word for word: a missing claim, a claim being deleted, an
# unbound Immediate claim, a volume's node affinity, the attach limit, ReadWriteOncePod in use,
# and an untolerated taint beside a node selector.
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
. "$(dirname "$0")/lib_cm.sh"
: "${KCSI_PEERS:?}"
ks=$KCSI_PEERS/kube-scheduler
[ -x "$ks" ] || { echo "FAIL: no kube-scheduler peer at $ks (build the peers: make peers)" >&2; exit 1; }

emu_start
for n in n1:a n2:b; do
	mk_mnode "${n%%:*}"
	kc label node "${n%%:*}" zone="${n#*:}" >/dev/null
	# kube-scheduler's NodeResourcesFit admits no pod on a node without allocatable pods
	node_status "${n%%:*}" '{"status":{"allocatable":{"pods":"110","cpu":"4","memory":"8Gi"},
		"capacity":{"pods":"110","cpu":"4","memory":"8Gi"}}}'
done
cm_start cm --controllers '*,volume-scheduler,-nodelifecycle' --pvclaimbinder-sync-period 1s -v 2
cat >"$T/scheduler.yaml" <<YAML
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $KC
  contentType: application/json
leaderElection:
  leaderElect: false
profiles:
  - schedulerName: kube-scheduler
YAML
"$ks" --config "$T/scheduler.yaml" --secure-port=0 -v=2 >"$T/kube-scheduler.log" 2>&1 &
CM_PIDS[ks]=$!

# twin NAME JSON-VOLUMES [NODE-SELECTOR-JSON]: pods k-NAME (volume-scheduler) and u-NAME
# (kube-scheduler) with those volumes
twin() {
	local sel=${3:-'{}'} who
	for who in k:default-scheduler u:kube-scheduler; do
		jq -n --arg n "${who%%:*}-$1" --arg s "${who#*:}" --argjson v "$2" --argjson sel "$sel" \
			'{apiVersion: "v1", kind: "Pod", metadata: {name: $n, namespace: "default"},
			spec: {schedulerName: $s, nodeSelector: $sel,
			       containers: [{name: "c", image: "busybox"}], volumes: $v}}' |
			kc create -f - >/dev/null || fail "creating pod ${who%%:*}-$1"
	done
}
claim_vol() { jq -cn --arg c "$1" '[{name: "d", persistentVolumeClaim: {claimName: $c}}]'; }
# cond POD FIELD: a field of the pod's PodScheduled condition
cond() { kc get pod "$1" -o json | jq -r --arg f "$2" '.status.conditions // [] | .[] | select(.type == "PodScheduled") | .[$f] // ""'; }
# ks_note POD: the note of kube-scheduler's latest FailedScheduling (events.k8s.io/v1) about POD
ks_note() {
	kc get events.events.k8s.io -o json | jq -r --arg p "$1" \
		'[.items[] | select(.regarding.name == $p and .reason == "FailedScheduling")] | last | .note // ""'
}
# describe_event POD MESSAGE: `kubectl describe pod` lists a Warning FailedScheduling from
# default-scheduler with exactly MESSAGE
describe_event() {
	kc describe pod "$1" | awk -v m="$2" '
		/^Events:/ { e = 1; next }
		e && $1 == "Warning" && $2 == "FailedScheduling" && $0 ~ /default-scheduler +0\// &&
			substr($0, length($0) - length(m) + 1) == m { found = 1 }
		END { exit !found }'
}
describe_cond() { # POD STATUS: describe's Conditions table shows PodScheduled STATUS
	kc describe pod "$1" | awk -v s="$2" '/^Conditions:/ { c = 1; next } c && /^[^ ]/ { c = 0 }
		c && $1 == "PodScheduled" && $2 == s { ok = 1 } END { exit !ok }'
}

# expect NAME MESSAGE: both twins refused with MESSAGE, as event, condition and describe say
expect() {
	local name=$1 want=$2
	wait_for "k-$name: PodScheduled False with the message" 20 eval '[ "$(cond k-'"$name"' message)" = "$want" ]' ||
		echo "  k-$name's condition: $(cond "k-$name" message)" >&2
	check "k-$name: reason Unschedulable" eq "$(cond "k-$name" reason)" Unschedulable
	check "k-$name: not placed" eq "$(kc get pod "k-$name" -o jsonpath='{.spec.nodeName}')" ""
	wait_for "k-$name: kubectl describe shows FailedScheduling from default-scheduler" 20 describe_event "k-$name" "$want" ||
		kc describe pod "k-$name" | sed -n '/^Events:/,$p' >&2
	check "k-$name: kubectl describe shows PodScheduled False" describe_cond "k-$name" False
	wait_for "u-$name: kube-scheduler's event" 30 eval '[ -n "$(ks_note u-'"$name"')" ]'
	check "u-$name: kube-scheduler's event says the same" eq "$(ks_note "u-$name")" "$want"
	check "u-$name: kube-scheduler's condition says the same" eq "$(cond "u-$name" message)" "$want"
	check "u-$name: kube-scheduler's reason" eq "$(cond "u-$name" reason)" Unschedulable
}
gone() { kc delete pod "k-$1" "u-$1" --grace-period=0 --force >/dev/null 2>&1; }
# What kube-scheduler's PostFilter plugins add: DynamicResources (no resource claims), then
# DefaultPreemption; after a prefilter refusal DynamicResources fails instead ("not found": its
# PreFilter never ran), and that error is all kube-scheduler v1.37.2 adds.
NOT_HELPFUL="preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
NO_VICTIMS="preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
PREFILTER_TAIL="not found"

# A missing claim: no event at all before issue 40.
twin ghost "$(claim_vol ghost)"
expect ghost "0/2 nodes are available: persistentvolumeclaim \"ghost\" not found. $PREFILTER_TAIL"
# The event is recorded on each attempt, after 1 s, 2 s, 4 s ..., onto one Event whose count
# grows; a tight loop (or the old 200 ms steps) would have counted more than 4 in 5 s.
ev_count() {
	kc get events --field-selector involvedObject.name=k-ghost,reason=FailedScheduling -o json |
		jq -r '[.items | length, (.[0].count // 0)] | join(" ")'
}
ev_more() { read -r n c <<<"$(ev_count)"; [ "$n" = 1 ] && [ "$c" -ge 2 ]; }
wait_for "k-ghost's FailedScheduling counted again on its one Event" 15 ev_more
sleep 4
read -r nev count <<<"$(ev_count)"
check "k-ghost: one Event object" eq "$nev" 1
check "k-ghost: recorded again with the backoff, not in a loop (count $count after about 5 s)" \
	test "$count" -ge 2 -a "$count" -le 4
kc describe pod k-ghost | grep -q 'FailedScheduling .*(x[0-9]* over' ||
	fail "kubectl describe does not show the event's count (x N over ...)"
# The claim appears, bound to a volume: the pod is placed, PodScheduled turns True.
jq -n '{apiVersion: "v1", kind: "PersistentVolume", metadata: {name: "pv-ghost"},
	spec: {capacity: {storage: "1Gi"}, accessModes: ["ReadWriteOnce"], storageClassName: "",
	claimRef: {namespace: "default", name: "ghost"}, csi: {driver: "loop.kcsi.io", volumeHandle: "h-ghost"}}}' |
	kc create -f - >/dev/null
mk_bound_claim ghost pv-ghost
wait_for "k-ghost placed once its claim is bound" 20 eval '[ -n "$(kc get pod k-ghost -o jsonpath="{.spec.nodeName}")" ]'
check "k-ghost: PodScheduled True" eq "$(cond k-ghost status)" True
check "k-ghost: kubectl describe shows PodScheduled True" describe_cond k-ghost True
check "k-ghost: a Scheduled event" eval 'kc describe pod k-ghost | grep -q "Normal  *Scheduled .*default-scheduler  Successfully assigned default/k-ghost to n"'
gone ghost

# A claim being deleted (a finalizer of the test's own keeps it).
jq -n '{apiVersion: "v1", kind: "PersistentVolumeClaim", metadata: {name: "dying", namespace: "default",
	finalizers: ["kcsi.io/test-hold"]}, spec: {accessModes: ["ReadWriteOnce"], storageClassName: "",
	resources: {requests: {storage: "1Gi"}}}}' | kc create -f - >/dev/null
kc delete pvc dying --wait=false >/dev/null
twin dying "$(claim_vol dying)"
expect dying "0/2 nodes are available: persistentvolumeclaim \"dying\" is being deleted. $PREFILTER_TAIL"
gone dying
kc patch pvc dying --type=json -p '[{"op":"remove","path":"/metadata/finalizers"}]' >/dev/null 2>&1

# An unbound claim of an Immediate class (nothing provisions it).
echo '{"apiVersion":"storage.k8s.io/v1","kind":"StorageClass","metadata":{"name":"now"},"provisioner":"nobody.kcsi.io"}' |
	kc create -f - >/dev/null
jq -n '{apiVersion: "v1", kind: "PersistentVolumeClaim", metadata: {name: "now-c", namespace: "default"},
	spec: {accessModes: ["ReadWriteOnce"], storageClassName: "now", resources: {requests: {storage: "1Gi"}}}}' |
	kc create -f - >/dev/null
twin now "$(claim_vol now-c)"
expect now "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims. $PREFILTER_TAIL"
gone now

# A bound volume whose node affinity no node matches.
jq -n '{apiVersion: "v1", kind: "PersistentVolume", metadata: {name: "pv-far"},
	spec: {capacity: {storage: "1Gi"}, accessModes: ["ReadWriteOnce"], storageClassName: "",
	claimRef: {namespace: "default", name: "far"}, csi: {driver: "loop.kcsi.io", volumeHandle: "h-far"},
	nodeAffinity: {required: {nodeSelectorTerms: [{matchExpressions: [{key: "zone", operator: "In", values: ["far"]}]}]}}}}' |
	kc create -f - >/dev/null
mk_bound_claim far pv-far
wait_for "the binder completes far's binding" 20 eval '[ -n "$(kc get pvc far -o jsonpath="{.metadata.annotations.pv\.kubernetes\.io/bind-completed}")" ]'
twin far "$(claim_vol far)"
expect far "0/2 nodes are available: 2 node(s) didn't match PersistentVolume's node affinity. $NOT_HELPFUL"
gone far

# The attach limit: each node's CSINode takes one volume of loop.kcsi.io, and holds one.
for i in 1 2 3; do
	jq -n --arg i "$i" '{apiVersion: "v1", kind: "PersistentVolume", metadata: {name: ("pv-l" + $i)},
		spec: {capacity: {storage: "1Gi"}, accessModes: ["ReadWriteOnce"], storageClassName: "",
		claimRef: {namespace: "default", name: ("l" + $i)}, csi: {driver: "loop.kcsi.io", volumeHandle: ("h-l" + $i)}}}' |
		kc create -f - >/dev/null
	mk_bound_claim "l$i" "pv-l$i"
done
for n in 1 2; do
	jq -n --arg n "n$n" '{apiVersion: "storage.k8s.io/v1", kind: "CSINode", metadata: {name: $n},
		spec: {drivers: [{name: "loop.kcsi.io", nodeID: $n, allocatable: {count: 1}}]}}' | kc create -f - >/dev/null
	mk_pod "hold-$n" "n$n" "l$n"
done
wait_for "the binder completes l3's binding" 20 eval '[ -n "$(kc get pvc l3 -o jsonpath="{.metadata.annotations.pv\.kubernetes\.io/bind-completed}")" ]'
twin limit "$(claim_vol l3)"
expect limit "0/2 nodes are available: 2 node(s) exceed max volume count. $NO_VICTIMS"
gone limit

# ReadWriteOncePod: the claim's one user runs on n1.
jq -n '{apiVersion: "v1", kind: "PersistentVolume", metadata: {name: "pv-solo"},
	spec: {capacity: {storage: "1Gi"}, accessModes: ["ReadWriteOncePod"], storageClassName: "",
	claimRef: {namespace: "default", name: "solo"}, csi: {driver: "other.kcsi.io", volumeHandle: "h-solo"}}}' |
	kc create -f - >/dev/null
jq -n '{apiVersion: "v1", kind: "PersistentVolumeClaim", metadata: {name: "solo", namespace: "default"},
	spec: {accessModes: ["ReadWriteOncePod"], resources: {requests: {storage: "1Gi"}},
	       volumeName: "pv-solo", storageClassName: ""}}' | kc create -f - >/dev/null
wait_for "the binder completes solo's binding" 20 eval '[ -n "$(kc get pvc solo -o jsonpath="{.metadata.annotations.pv\.kubernetes\.io/bind-completed}")" ]'
mk_pod solo-holder n1 solo
twin solo "$(claim_vol solo)"
expect solo "0/2 nodes are available: 2 node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod. $NO_VICTIMS"
gone solo

# A taint on n1, and a selector for zone a (n1): each node refuses for its own reason.
kc taint node n1 dedicated=db:NoSchedule >/dev/null
twin taint '[]' '{"zone":"a"}'
expect taint "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) had untolerated taint(s). $NOT_HELPFUL"
kc taint node n1 dedicated- >/dev/null
wait_for "k-taint placed on n1 once the taint is gone" 30 eval '[ "$(kc get pod k-taint -o jsonpath="{.spec.nodeName}")" = n1 ]'
check "k-taint: PodScheduled True" eq "$(cond k-taint status)" True
wait_for "u-taint placed too" 30 eval '[ "$(kc get pod u-taint -o jsonpath="{.spec.nodeName}")" = n1 ]'

cm_stop cm
check "SIGTERM exits 0" eq "$?" 0
if [ $FAILS -ne 0 ]; then
	echo "--- kube-scheduler" >&2
	grep -v 'Caches populated' "$T/kube-scheduler.log" | tail -n 20 >&2
	echo "--- kcsi-controller-manager" >&2
	tail -n 30 "$T/cm.log" >&2
fi
cm_finish
