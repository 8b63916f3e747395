#!/bin/bash
# e2e: a claim whose CreateVolume may still be running keeps its node (external-provisioner
# v6.3's per-claim topology cache), with csi-testdriver (topology.kcsi.dev/zone):
#   - CreateVolume answers DEADLINE_EXCEEDED (the volume may be in the making); meanwhile the
#     selected node and its CSINode are deleted. The claim keeps its selected-node annotation,
#     every retry asks for the same topology, and the volume the calls made becomes the PV: no
#     second volume, none left behind in the driver;
#   - a claim whose selected node has no CSINode, with nothing started, goes back to the
#     scheduler (annotation removed, ProvisioningFailed naming the CSINode).
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
DRV=testdriver.kcsi.dev
. "$(dirname "$0")/lib_provisioner.sh"
ZK=topology.kcsi.dev/zone

calls() { grep -c "^CreateVolume .*\"name\":\"$1\"" "$T/td.rec" 2>/dev/null || true; }
sel() { pvc_field "$1" '.metadata.annotations["volume.kubernetes.io/selected-node"] // "gone"'; }
mk_node_pair() { # NAME ZONE
	echo '{"apiVersion":"v1","kind":"Node","metadata":{"name":"'$1'","labels":{"'$ZK'":"'$2'"}}}' | kc create -f - >/dev/null
	echo '{"apiVersion":"storage.k8s.io/v1","kind":"CSINode","metadata":{"name":"'$1'"},"spec":{"drivers":[{"name":"'$DRV'","nodeID":"'$1'","topologyKeys":["'$ZK'"]}]}}' | kc create -f - >/dev/null
}

emu_start
mk_sc late '{"volumeBindingMode":"WaitForFirstConsumer"}'
mk_node_pair n1 z1
mk_node_pair n2 z2

# 1. In flight when the node goes.
td_start --fail CreateVolume=DEADLINE_EXCEEDED --fail-count CreateVolume=5
prov_start p "$T/td.sock" --retry-interval-start 500ms --retry-interval-max 1s
mk_pvc inflight late '{"metadata":{"annotations":{"volume.kubernetes.io/selected-node":"n1"}}}'
PV=$(pv_of inflight)
wait_for "first CreateVolume" 20 bash -c "[ \$(grep -c '^CreateVolume .*\"name\":\"$PV\"' '$T/td.rec') -ge 1 ]"
kc delete csinode n1 >/dev/null
kc delete node n1 >/dev/null
wait_for "PV once the driver answers" 30 pv_exists "$PV"
check "CreateVolume was retried past the node's deletion" bash -c "[ $(calls "$PV") -ge 6 ]"
check "the claim was not rescheduled (selected-node kept)" eq "$(sel inflight)" n1
reqs() { grep "^CreateVolume .*\"name\":\"$PV\"" "$T/td.rec" | cut -d' ' -f2- | jq -c .accessibility_requirements | sort -u; }
check "every call asked for the topology it started with" eq "$(reqs | wc -l)" 1
check "... which prefers the selected node's zone and still offers it" eq \
	"$(reqs | jq -r '"\(.preferred[0].segments["topology.kcsi.dev/zone"]) \([.requisite[].segments["topology.kcsi.dev/zone"]] | index("z1") != null)"')" "z1 true"
check "the PV is in that zone" eq "$(pv_field "$PV" '.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[0]')" z1
check "one volume in the driver" eq "$(td_volumes | grep -c .)" 1
check "no reschedule event" eq "$(events_of PersistentVolumeClaim inflight | grep -c CSINode)" 0

# 2. Nothing started, the node's CSINode gone: back to the scheduler.
kc delete csinode n2 >/dev/null
mk_pvc fresh late '{"metadata":{"annotations":{"volume.kubernetes.io/selected-node":"n2"}}}'
wait_for "selected-node removed" 20 bash -c "[ \"\$(kubectl --kubeconfig '$KC' get pvc fresh -n default -o json | jq -r '.metadata.annotations[\"volume.kubernetes.io/selected-node\"] // \"gone\"')\" = gone ]"
wait_for "the user sees why" 10 has_event PersistentVolumeClaim fresh 'ProvisioningFailed: .*failed to get selected CSINode n2'
check "no CreateVolume for it" eq "$(calls "$(pv_of fresh)")" 0
rc=0; att_stop p || rc=$?
check "SIGTERM exits 0" eq "$rc" 0
td_stop
att_finish
