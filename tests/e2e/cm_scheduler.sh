#!/bin/bash
# e2e: volume-scheduler (with the binder) on kube-emulator: pending pods are spread over Ready
# nodes; a pod with a bound volume goes where the volume's nodeAffinity allows; a
# WaitForFirstConsumer claim gets volume.kubernetes.io/selected-node on a node of the class's
# allowedTopologies, or one whose CSIStorageCapacity has room, and the pod is bound once the
# claim is (the script plays the provisioner); an Immediate claim makes its pod wait until bound.
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
cm_start cm --controllers '*,volume-scheduler' --pvclaimbinder-sync-period 1s -v 3
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

# CSIStorageCapacity: zone a has 1Gi, zone b 10Gi; a 5Gi claim goes to node-2.
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

cm_stop cm
check "SIGTERM exits 0" eq "$?" 0
cm_finish
