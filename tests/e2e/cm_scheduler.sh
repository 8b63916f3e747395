#!/bin/bash
# e2e: volume-scheduler (with the binder) on kube-emulator: pending pods are spread over Ready
# nodes; a pod with a bound volume goes where the volume's nodeAffinity allows; a
# WaitForFirstConsumer claim gets volume.kubernetes.io/selected-node on a node of the class's
# allowedTopologies, or one whose CSIStorageCapacity has room (only for a driver whose CSIDriver
# sets storageCapacity), and the pod is bound once the claim is (the script plays the
# provisioner); an Immediate claim makes its pod wait until bound. A NoSchedule taint keeps pods
# that do not tolerate it away; CSINode's allocatable.count caps the volumes of a driver on a node.
# nodelifecycle is off: the script's nodes post no heartbeats (cm_nodelifecycle.sh tests it).
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
. "$(dirname "$0")/lib_cm.sh"

emu_start
mk_mnode node-1
mk_mnode node-2
mk_mnode node-3
kc label node node-1 zone=a >/dev/null
kc label node node-2 zone=b >/dev/null
kc label node node-3 zone=c >/dev/null
node_ready node-3 False
cm_start cm --controllers '*,volume-scheduler,-nodelifecycle' --pvclaimbinder-sync-period 1s -v 3
pod_node() { kc get pod "$1" -o json 2>/dev/null | jq -r '.spec.nodeName // ""'; }
pod_on() { [ "$(pod_node "$1")" = "$2" ]; }
pod_placed() { [ -n "$(pod_node "$1")" ]; }
cj() { kc get pvc "$1" -o json 2>/dev/null | jq -r "$2"; }
claim_sel() { [ "$(cj "$1" '.metadata.annotations["volume.kubernetes.io/selected-node"] // ""')" = "$2" ]; }
sc() { echo "$1" | kc create -f - >/dev/null; }
claim() { # NAME CLASS SIZE
	jq -n --arg n "$1" --arg c "$2" --arg s "$3" '{apiVersion: "v1", kind: "PersistentVolumeClaim",
		metadata: {name: $n, namespace: "default"}, spec: {accessModes: ["ReadWriteOnce"],
		resources: {requests: {storage: $s}}, storageClassName: $c}}' | kc create -f - >/dev/null
}
provision() { # CLAIM PV NODE-ZONE: what an external provisioner does
	jq -n --arg c "$1" --arg pv "$2" --arg z "$3" --arg uid "$(cj "$1" .metadata.uid)" --arg cls "$(cj "$1" .spec.storageClassName)" '{
		apiVersion: "v1", kind: "PersistentVolume", metadata: {name: $pv,
		annotations: {"pv.kubernetes.io/provisioned-by": "loop.kcsi.io"}},
		spec: {capacity: {storage: "1Gi"}, accessModes: ["ReadWriteOnce"], storageClassName: $cls,
		claimRef: {namespace: "default", name: $c, uid: $uid},
		csi: {driver: "loop.kcsi.io", volumeHandle: $pv},
		nodeAffinity: {required: {nodeSelectorTerms: [{matchExpressions: [{key: "zone", operator: "In", values: [$z]}]}]}}}}' |
		kc create -f - >/dev/null
}

# Pods without volumes: spread over the Ready nodes (node-3 is not Ready).
mk_pod web-1 ""
mk_pod web-2 ""
wait_for "web-1 placed" 20 pod_placed web-1
wait_for "web-2 placed" 20 pod_placed web-2
check "web-1 and web-2 on different Ready nodes" test "$(pod_node web-1)" != "$(pod_node web-2)"
check "nothing on the NotReady node" bash -c "[ '$(pod_node web-1)' != node-3 ] && [ '$(pod_node web-2)' != node-3 ]"
wait_for "Scheduled event" 10 has_event web-1 Scheduled "Successfully assigned default/web-1 to"
check "it comes from the scheduler's name" eq "$(event_source web-1 Scheduled)" "default-scheduler default-scheduler"

# A bound volume with nodeAffinity zone=b pins its pod to node-2.
jq -n '{apiVersion: "v1", kind: "PersistentVolume", metadata: {name: "pv-b"},
	spec: {capacity: {storage: "1Gi"}, accessModes: ["ReadWriteOnce"], storageClassName: "",
	csi: {driver: "loop.kcsi.io", volumeHandle: "hb"},
	nodeAffinity: {required: {nodeSelectorTerms: [{matchExpressions: [{key: "zone", operator: "In", values: ["b"]}]}]}}}}' |
	kc create -f - >/dev/null
claim claim-b "" 1Gi
mk_pod db-b "" claim-b
wait_for "db-b on node-2 (the volume's zone)" 20 pod_on db-b node-2

# WaitForFirstConsumer with allowedTopologies zone=a.
sc '{"apiVersion":"storage.k8s.io/v1","kind":"StorageClass","metadata":{"name":"late-a"},"provisioner":"loop.kcsi.io","volumeBindingMode":"WaitForFirstConsumer",
	"allowedTopologies":[{"matchLabelExpressions":[{"key":"zone","values":["a"]}]}]}'
claim claim-late late-a 1Gi
mk_pod app-late "" claim-late
wait_for "claim-late gets selected-node=node-1" 20 claim_sel claim-late node-1
sleep 1
check "app-late waits while its claim is unbound" eq "$(pod_node app-late)" ""
wait_for "binder annotates claim-late for the provisioner" 20 eval '[ "$(cj claim-late ".metadata.annotations[\"volume.kubernetes.io/storage-provisioner\"]")" = loop.kcsi.io ]'
provision claim-late pv-late a
wait_for "claim-late bound" 20 eval '[ "$(cj claim-late .status.phase)" = Bound ]'
wait_for "app-late bound to node-1 once its claim is" 20 pod_on app-late node-1

# CSIStorageCapacity: zone a has 1Gi, zone b 10Gi; a 5Gi claim goes to node-2. The driver asks
# for capacity tracking in its CSIDriver.
sc '{"apiVersion":"storage.k8s.io/v1","kind":"CSIDriver","metadata":{"name":"loop.kcsi.io"},"spec":{"storageCapacity":true}}'
sc '{"apiVersion":"storage.k8s.io/v1","kind":"StorageClass","metadata":{"name":"cap"},"provisioner":"loop.kcsi.io","volumeBindingMode":"WaitForFirstConsumer"}'
for z in a:1Gi b:10Gi; do
	jq -n --arg z "${z%%:*}" --arg c "${z#*:}" '{apiVersion: "storage.k8s.io/v1", kind: "CSIStorageCapacity",
		metadata: {name: ("cap-" + $z), namespace: "default"}, storageClassName: "cap", capacity: $c,
		nodeTopology: {matchLabels: {zone: $z}}}' | kc create -f - >/dev/null
done
claim claim-big cap 5Gi
mk_pod app-big "" claim-big
wait_for "claim-big gets selected-node=node-2 (the zone with room)" 20 claim_sel claim-big node-2

# An Immediate claim: the pod waits until the claim is bound.
sc '{"apiVersion":"storage.k8s.io/v1","kind":"StorageClass","metadata":{"name":"now"},"provisioner":"loop.kcsi.io"}'
claim claim-now now 1Gi
mk_pod app-now "" claim-now
wait_for "FailedScheduling for the unbound Immediate claim" 20 has_event app-now FailedScheduling "pod has unbound immediate PersistentVolumeClaims"
check "app-now not placed" eq "$(pod_node app-now)" ""
provision claim-now pv-now c
wait_for "claim-now bound" 20 eval '[ "$(cj claim-now .status.phase)" = Bound ]'
sleep 1
check "app-now still waits: its volume is only in zone c (NotReady node)" eq "$(pod_node app-now)" ""
node_ready node-3 True
wait_for "app-now placed on node-3 once it is Ready" 20 pod_on app-now node-3

# A driver whose CSIDriver does not set storageCapacity: its CSIStorageCapacity objects (no room
# anywhere) are ignored, as kube-scheduler ignores them.
sc '{"apiVersion":"storage.k8s.io/v1","kind":"CSIDriver","metadata":{"name":"nocap.kcsi.io"},"spec":{"storageCapacity":false}}'
sc '{"apiVersion":"storage.k8s.io/v1","kind":"StorageClass","metadata":{"name":"nocap"},"provisioner":"nocap.kcsi.io","volumeBindingMode":"WaitForFirstConsumer"}'
for z in a b c; do
	jq -n --arg z "$z" '{apiVersion: "storage.k8s.io/v1", kind: "CSIStorageCapacity",
		metadata: {name: ("nocap-" + $z), namespace: "default"}, storageClassName: "nocap", capacity: "1Mi",
		nodeTopology: {matchLabels: {zone: $z}}}' | kc create -f - >/dev/null
done
claim claim-nocap nocap 5Gi
mk_pod app-nocap "" claim-nocap
wait_for "claim-nocap gets a selected-node though its capacity objects say no room" 20 \
	eval '[ -n "$(cj claim-nocap ".metadata.annotations[\"volume.kubernetes.io/selected-node\"] // \"\"")" ]'
check "no 'not enough free storage' for app-nocap" eq "$(pod_events app-nocap FailedScheduling | grep -c 'enough free storage')" 0

sel_pod() { # NAME ZONE TOLERATIONS-JSON [CLAIM...]
	local name=$1 zone=$2 tols=$3
	shift 3
	jq -n --arg n "$name" --arg z "$zone" --argjson t "$tols" --args '{apiVersion: "v1", kind: "Pod",
		metadata: {name: $n, namespace: "default"},
		spec: {nodeSelector: {zone: $z}, tolerations: $t,
		       containers: [{name: "c", image: "busybox"}],
		       volumes: [$ARGS.positional | to_entries[] | {name: ("v" + (.key|tostring)), persistentVolumeClaim: {claimName: .value}}]}}' "$@" |
		kc create -f - >/dev/null
}

# Taints: node-t has dedicated=db:NoSchedule. A pod pinned to it without a toleration waits with
# kube-scheduler's message; one that tolerates it is placed there.
mk_mnode node-t
kc label node node-t zone=t >/dev/null
kc taint node node-t dedicated=db:NoSchedule >/dev/null
sel_pod tol-no t '[]'
wait_for "FailedScheduling: an untolerated taint (kube-scheduler v1.36 names none)" 20 has_event tol-no FailedScheduling "node(s) had untolerated taint(s)"
check "tol-no not placed" eq "$(pod_node tol-no)" ""
sel_pod tol-yes t '[{"key":"dedicated","operator":"Equal","value":"db","effect":"NoSchedule"}]'
wait_for "tol-yes (tolerates the taint) placed on node-t" 20 pod_on tol-yes node-t
sel_pod tol-all t '[{"operator":"Exists"}]'
wait_for "tol-all (empty key, Exists) placed on node-t" 20 pod_on tol-all node-t
check "tol-no still not placed" eq "$(pod_node tol-no)" ""

# Attach limit: node-l's CSINode allows 1 volume of loop.kcsi.io. The second pod with another
# claim waits; a pod sharing the first pod's volume fits (no new attachment).
mk_mnode node-l
kc label node node-l zone=l >/dev/null
jq -n '{apiVersion: "storage.k8s.io/v1", kind: "CSINode", metadata: {name: "node-l"},
	spec: {drivers: [{name: "loop.kcsi.io", nodeID: "node-l", allocatable: {count: 1}}]}}' | kc create -f - >/dev/null
for i in 1 2; do
	jq -n --arg i "$i" '{apiVersion: "v1", kind: "PersistentVolume", metadata: {name: ("pv-lim-" + $i)},
		spec: {capacity: {storage: "16Mi"}, accessModes: ["ReadWriteOnce"], storageClassName: "",
		claimRef: {namespace: "default", name: ("lim-" + $i)},
		csi: {driver: "loop.kcsi.io", volumeHandle: ("h-lim-" + $i)}}}' | kc create -f - >/dev/null
	mk_bound_claim "lim-$i" "pv-lim-$i"
done
sel_pod lim-a l '[]' lim-1
wait_for "lim-a (first volume) placed on node-l" 20 pod_on lim-a node-l
sel_pod lim-b l '[]' lim-2
wait_for "FailedScheduling: node(s) exceed max volume count" 20 has_event lim-b FailedScheduling "1 node(s) exceed max volume count"
sel_pod lim-c l '[]' lim-1
wait_for "lim-c (the volume already there) placed on node-l" 20 pod_on lim-c node-l
check "lim-b still waits" eq "$(pod_node lim-b)" ""
kc delete pod lim-a lim-c --grace-period=0 --force >/dev/null 2>&1
wait_for "lim-b placed once the first volume's pods are gone" 20 pod_on lim-b node-l

# Allocatable pods: node-p takes one pod (status.allocatable.pods 1, as a kubelet with --max-pods 1
# reports); the second waits with kube-scheduler's NodeResourcesFit reason.
mk_mnode node-p
kc label node node-p zone=p >/dev/null
node_status node-p '{"status":{"allocatable":{"pods":"1"},"capacity":{"pods":"1"}}}'
sel_pod pods-a p '[]'
wait_for "pods-a placed on node-p" 20 pod_on pods-a node-p
sel_pod pods-b p '[]'
wait_for "FailedScheduling: Too many pods" 20 has_event pods-b FailedScheduling "1 Too many pods"
check "pods-b not placed" eq "$(pod_node pods-b)" ""

# A bound volume pinned to a zone no Node has: the pod's FailedScheduling names the affinity
# conflict on every node, and the claim gets a Warning naming the PV's affinity.
jq -n '{apiVersion: "v1", kind: "PersistentVolume", metadata: {name: "pv-gone"},
	spec: {capacity: {storage: "1Gi"}, accessModes: ["ReadWriteOnce"], storageClassName: "",
	claimRef: {namespace: "default", name: "claim-gone"},
	csi: {driver: "loop.kcsi.io", volumeHandle: "h-gone"},
	nodeAffinity: {required: {nodeSelectorTerms: [{matchExpressions: [{key: "zone", operator: "In", values: ["gone"]}]}]}}}}' |
	kc create -f - >/dev/null
mk_bound_claim claim-gone pv-gone
mk_pod app-gone "" claim-gone
wait_for "FailedScheduling: the volume's node affinity" 20 has_event app-gone FailedScheduling "node(s) didn't match PersistentVolume's node affinity"
wait_for "Warning on the claim naming the PV's affinity" 20 has_event claim-gone VolumeNodeAffinityConflict \
	"PersistentVolume pv-gone can be used only on nodes with zone in (gone), and no Node matches"
check "app-gone not placed" eq "$(pod_node app-gone)" ""

cm_stop cm
check "SIGTERM exits 0" eq "$?" 0
cm_finish
