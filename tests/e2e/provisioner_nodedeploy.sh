#!/bin/bash
# e2e: csi-provisioner --node-deployment: three emulated nodes, each with its own csi-testdriver
# (topology.kcsi.dev/zone = the node name) and its own provisioner (NODE_NAME). WaitForFirstConsumer
# claims are provisioned by their selected node only; immediate claims are taken by exactly one
# node each (the selected-node annotation), spread over the nodes with room, never by the full
# node (capacity 0); a released volume is deleted by its own node; capacity objects are per node;
# NODE_NAME is required.
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
DRV=testdriver.kcsi.dev
. "$(dirname "$0")/lib_provisioner.sh"
ZK=topology.kcsi.dev/zone
declare -A TDS=()

td_node() { # NODE CAPACITY [driver flags]
	local n=$1 cap=$2
	shift 2
	"$KCSI_TESTS/csi-testdriver" --endpoint "unix://$T/td-$n.sock" --node-id "$n" --zone "$n" \
		--capacity "$cap" --record "$T/td-$n.rec" "$@" >>"$T/td-$n.log" 2>&1 &
	TDS[$n]=$!
	wait_sock "$T/td-$n.sock" || { echo "csi-testdriver $n did not start" >&2; exit 1; }
	echo "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"$n\",\"labels\":{\"$ZK\":\"$n\"}}}" | kc create -f - >/dev/null
}
vols_of() { "$KCSI_BIN/kcsi" --endpoint "unix://$T/td-$1.sock" -o json controller list-volumes | jq -r '.entries[]?.volume.volume_id'; }
holder() { # VOLUME: the nodes whose driver holds it
	local n out=""
	for n in n1 n2 n3; do vols_of $n | grep -qx "$1" && out="$out$n "; done
	echo "$out"
}
selected() { pvc_field "$1" '.metadata.annotations["volume.kubernetes.io/selected-node"] // ""'; }
all_pvs() { for c in "$@"; do pv_exists "$(pv_of "$c")" || return 1; done; }
nodeprov() { # NODE [flags]
	local n=$1
	shift
	NODE_NAME=$n POD_NAME=prov-$n NAMESPACE=default prov_start "p-$n" "$T/td-$n.sock" \
		--node-deployment --node-deployment-base-delay 200ms --node-deployment-max-delay 1s "$@"
}

emu_start
td_node n1 10Gi
td_node n2 10Gi
td_node n3 0   # full
td_node n4 10Gi --fail CreateVolume=RESOURCE_EXHAUSTED   # says it is full only when asked
for n in n1 n2 n3; do
	echo "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"prov-$n\",\"namespace\":\"default\"},\"spec\":{\"containers\":[{\"name\":\"p\",\"image\":\"x\"}]}}" | kc create -f - >/dev/null
done

# NODE_NAME is required.
rc=0
"$KCSI_BIN/csi-provisioner" --csi-address "unix://$T/td-n1.sock" --kubeconfig "$KC" \
	--node-deployment >"$T/nonode.log" 2>&1 || rc=$?
check "without NODE_NAME it exits non-zero" eq "$([ $rc -ne 0 ] && echo yes)" yes
check "and says why" grep -q "NODE_NAME env variable is required" "$T/nonode.log"

# Every flag combination runs: n1 plain, n2 with capacity (owner: its pod), n3 with capacity
# and without an owner.
nodeprov n1
nodeprov n2 --enable-capacity --capacity-ownerref-level 0
nodeprov n3 --enable-capacity --capacity-ownerref-level -1
nodeprov n4 --node-deployment-immediate-binding=false
mk_sc late '{"volumeBindingMode":"WaitForFirstConsumer"}'
mk_sc now

# WaitForFirstConsumer: the selected node provisions, nobody else.
mk_pvc w1 late '{"metadata":{"annotations":{"volume.kubernetes.io/selected-node":"n1"}}}'
mk_pvc w2 late '{"metadata":{"annotations":{"volume.kubernetes.io/selected-node":"n2"}}}'
wait_for "PVs of the WFFC claims" 15 all_pvs w1 w2
check "w1's volume is on n1 only" eq "$(holder "vol-$(pv_of w1)")" "n1 "
check "w2's volume is on n2 only" eq "$(holder "vol-$(pv_of w2)")" "n2 "
check "w1's PV is pinned to n1's topology" eq "$(pv_field "$(pv_of w1)" '.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[0]')" n1

# ResourceExhausted on the selected node hands the claim back (the annotation goes).
mk_pvc w4 late '{"metadata":{"annotations":{"volume.kubernetes.io/selected-node":"n4"}}}'
wait_for "n4's ResourceExhausted removes the selected-node annotation" 15 bash -c "[ -z \"\$(kubectl --kubeconfig '$KC' get pvc w4 -n default -o json | jq -r '.metadata.annotations[\"volume.kubernetes.io/selected-node\"] // empty')\" ]"
check "n4 was asked to create it" grep -q "^CreateVolume .*$(pv_of w4)" "$T/td-n4.rec"
check "and no PV exists for it" bash -c "! kubectl --kubeconfig '$KC' get pv '$(pv_of w4)' >/dev/null 2>&1"

# Immediate binding: each claim is taken by exactly one node, never the full one (n4 does not
# take immediate claims: --node-deployment-immediate-binding=false).
IMM=()
for i in $(seq 1 8); do mk_pvc "i$i" now; IMM+=("i$i"); done
wait_for "PVs of the immediate claims" 30 all_pvs "${IMM[@]}"
n1c=0 n2c=0
for c in "${IMM[@]}"; do
	s=$(selected "$c")
	h=$(holder "vol-$(pv_of "$c")")
	check "$c: its volume is on its selected node only ($s)" eq "$h" "$s "
	[ "$s" = n1 ] && n1c=$((n1c + 1))
	[ "$s" = n2 ] && n2c=$((n2c + 1))
done
check "the full node took none" eq "$((n1c + n2c))" 8
check "spread over both nodes with room (n1=$n1c n2=$n2c)" test "$n1c" -ge 1 -a "$n2c" -ge 1
check "the full node was asked for its capacity" grep -q "^GetCapacity " "$T/td-n3.rec"
check "n4 never competed for immediate claims (no capacity check)" bash -c "! grep -q '^GetCapacity ' '$T/td-n4.rec'"
check "and never asked to create a volume" bash -c "! grep -q '^CreateVolume ' '$T/td-n3.rec'"

# Capacity: one object per node, owned as configured.
wait_for "a capacity object for n2's segment" 10 bash -c "kubectl --kubeconfig '$KC' get csistoragecapacities -n default -o json | jq -e '.items[] | select(.metadata.labels[\"csi.storage.k8s.io/managed-by\"]==\"external-provisioner-n2\" and .nodeTopology.matchLabels[\"$ZK\"]==\"n2\" and .metadata.ownerReferences[0].kind==\"Pod\" and .metadata.ownerReferences[0].name==\"prov-n2\")'"
# the full node reports zero: no object for its segment (seed 004: only a non-zero capacity)
wait_for "the full node's capacity was asked for its segment" 10 bash -c "grep -q '^GetCapacity .*\"n3\"' '$T/td-n3.rec'"
check "and no object is published for it" bash -c "! kubectl --kubeconfig '$KC' get csistoragecapacities -n default -o json | jq -e '.items[] | select(.metadata.labels[\"csi.storage.k8s.io/managed-by\"]==\"external-provisioner-n3\")'"

# Deletion: only the node holding the volume deletes it.
c=${IMM[0]}
s=$(selected "$c")
pv=$(pv_of "$c")
release "$c"
wait_for "the released PV is deleted" 15 pv_gone "$pv"
check "its volume is gone from $s" eq "$(holder "vol-$pv")" ""
check "no other node tried to delete it" bash -c "! grep -h '^DeleteVolume ' $(for n in n1 n2 n3; do [ "$n" != "$s" ] && printf "'%s' " "$T/td-$n.rec"; done) 2>/dev/null | grep -q '$pv'"

for n in n1 n2 n3 n4; do
	rc=0; att_stop "p-$n" || rc=$?
	check "p-$n: SIGTERM exits 0" eq "$rc" 0
done
for n in n1 n2 n3 n4; do kill -TERM "${TDS[$n]}"; wait "${TDS[$n]}" 2>/dev/null; done
att_finish
