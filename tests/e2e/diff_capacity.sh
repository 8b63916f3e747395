#!/bin/bash
# e2e, drop-in differential: storage capacity tracking of upstream's csi-provisioner v6.4.0 and
# kcsi's, with the flags it needs (--enable-capacity, --capacity-ownerref-level 1, the POD_NAME
# and NAMESPACE environment of a pod of a StatefulSet), the same story on one kube-emulator and one
# kcsi-loopplugin (controller mode, zone zone-a, its pool a 2 GiB tmpfs so that the free bytes it
# reports are the same for both runs), compared field by field (lib_diff.sh): the
# CSIStorageCapacity objects (labels, ownerReferences, storageClassName, nodeTopology, capacity,
# maximumVolumeSize; names from generateName numbered by content), the owner and the events.
#   1. two nodes, in zone-a and zone-b, a WaitForFirstConsumer class and an Immediate one: one
#      object per (segment, WaitForFirstConsumer class): zone-a with the pool's room; zone-b, where
#      the driver answers 0, has upstream's zero object and none of kcsi's (a listed difference)
#   2. a second WaitForFirstConsumer class: its objects
#   3. the first class deleted: its objects go
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
. "$(dirname "$0")/lib_provisioner.sh"
. "$(dirname "$0")/lib_diff.sh"
ZK=topology.loop.kcsi.io/zone
KINDS=(csistoragecapacities statefulsets pods)

# csisc_of CLASS: how many capacity objects name CLASS
csisc_of() { kc get csistoragecapacities -A -o json | jq --arg c "$1" '[.items[] | select(.storageClassName == $c)] | length'; }
csisc_is() { [ "$(csisc_of "$1")" = "$2" ]; }
# zone_a CLASS: the object of CLASS for zone-a (the driver's zone) is there
zone_a() { kc get csistoragecapacities -A -o json | jq -e --arg c "$1" --arg k "$ZK" \
	'.items[] | select(.storageClassName == $c and .nodeTopology.matchLabels[$k] == "zone-a")' >/dev/null; }

mkdir -p "$T/pool"
mount -t tmpfs -o size=2g kcsi-diff-pool "$T/pool" || { echo "REFUSED: mount of a tmpfs for the pool: $?"; exit 1; }
emu_start
lp_start controller-host --mode controller --zone zone-a

for side in upstream kcsi; do
	diff_side $side
	for z in a b; do
		echo "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"node-$z-$TAG\",\"labels\":{\"$ZK\":\"zone-$z\"}}}" |
			kc create -f - >/dev/null
		echo "{\"apiVersion\":\"storage.k8s.io/v1\",\"kind\":\"CSINode\",\"metadata\":{\"name\":\"node-$z-$TAG\"},
		\"spec\":{\"drivers\":[{\"name\":\"$DRV\",\"nodeID\":\"node-$z-$TAG\",\"topologyKeys\":[\"$ZK\"]}]}}" |
			kc create -f - >/dev/null
	done
	mk_sc "late-$TAG" '{"volumeBindingMode":"WaitForFirstConsumer"}'
	mk_sc "now-$TAG"
	jq -n --arg ns "$NS" '{apiVersion: "apps/v1", kind: "StatefulSet", metadata: {name: "prov", namespace: $ns},
		spec: {serviceName: "prov", selector: {matchLabels: {app: "prov"}},
		       template: {metadata: {labels: {app: "prov"}}, spec: {containers: [{name: "p", image: "x"}]}}}}' |
		kc create -f - >/dev/null
	SUID=$(kc get statefulset prov -n "$NS" -o jsonpath='{.metadata.uid}')
	jq -n --arg ns "$NS" --arg u "$SUID" '{apiVersion: "v1", kind: "Pod",
		metadata: {name: "prov-0", namespace: $ns, labels: {app: "prov"},
			   ownerReferences: [{apiVersion: "apps/v1", kind: "StatefulSet", name: "prov", uid: $u,
					      controller: true, blockOwnerDeletion: true}]},
		spec: {containers: [{name: "p", image: "x"}]}}' | kc create -f - >/dev/null
	POD_NAME=prov-0 NAMESPACE=$NS diff_start prov csi-provisioner --csi-address "unix://$T/lp.sock" \
		--kubeconfig "$KC" --enable-capacity --capacity-ownerref-level 1 --capacity-poll-interval 5s

	wait_for "$side: capacity object of late-$TAG in zone-a" 30 zone_a "late-$TAG"
	diff_snap 1-capacity "${KINDS[@]}"

	mk_sc "later-$TAG" '{"volumeBindingMode":"WaitForFirstConsumer"}'
	wait_for "$side: capacity object of later-$TAG in zone-a" 30 zone_a "later-$TAG"
	diff_snap 2-second-class "${KINDS[@]}"

	kc delete storageclass "late-$TAG" >/dev/null
	wait_for "$side: capacity objects of late-$TAG gone" 30 csisc_is "late-$TAG" 0
	diff_snap 3-class-deleted "${KINDS[@]}"

	diff_stop prov
	# Not compared: the other side must not see this side's nodes and classes.
	kc delete storageclass "later-$TAG" "now-$TAG" >/dev/null
	kc delete csinode "node-a-$TAG" "node-b-$TAG" >/dev/null
	kc delete node "node-a-$TAG" "node-b-$TAG" >/dev/null
done

diff_check csi-provisioner-capacity
att_finish
