#!/bin/bash
# e2e: kcsi-controller-manager's persistentvolume-binder, pvc-protection and pv-protection on
# kube-emulator: claims bound to the smallest matching static volume, to pre-bound volumes and
# by a pre-bound claim, with a selector; phases, annotations and status as Kubernetes sets them
# (a volume whose node expansion was pending when its claim went gives the new claim the size
# before, from csi-resizer's pre-resize-capacity annotation, so the node expands it again);
# the external provisioner's annotations and events, WaitForFirstConsumer, default class; a
# deleted claim releases its volume; a claim in use by a pod is kept until the pod is gone.
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
. "$(dirname "$0")/lib_cm.sh"

emu_start
pv() { # NAME SIZE MODE [extra-json]
	jq -n --arg n "$1" --arg s "$2" --arg m "$3" --argjson x "${4:-{\}}" '({apiVersion: "v1",
		kind: "PersistentVolume", metadata: {name: $n},
		spec: {capacity: {storage: $s}, accessModes: [$m], persistentVolumeReclaimPolicy: "Retain",
		       csi: {driver: "loop.kcsi.io", volumeHandle: ("h-" + $n)}}} * $x)' | kc create -f - >/dev/null
}
claim() { # NAME SIZE [extra-spec-json] [annotations-json]
	jq -n --arg n "$1" --arg s "$2" --argjson x "${3:-{\}}" --argjson a "${4:-{\}}" '{apiVersion: "v1",
		kind: "PersistentVolumeClaim", metadata: {name: $n, namespace: "default", annotations: $a},
		spec: ({accessModes: ["ReadWriteOnce"], resources: {requests: {storage: $s}},
		        storageClassName: ""} * $x)}' | kc create -f - >/dev/null
}
cj() { kc get pvc "$1" -o json 2>/dev/null | jq -r "$2"; }
pj() { kc get pv "$1" -o json 2>/dev/null | jq -r "$2"; }
claim_is() { [ "$(cj "$1" "$2")" = "$3" ]; }
pv_is() { [ "$(pj "$1" "$2")" = "$3" ]; }
claim_gone() { ! kc get pvc "$1" >/dev/null 2>&1; }
claim_event() { kc get events -n default -o json | jq -r --arg c "$1" --arg r "$2" \
	'.items[] | select(.involvedObject.kind == "PersistentVolumeClaim" and .involvedObject.name == $c and .reason == $r) | .message' | grep -qF "$3"; }

pv pv-small 1Gi ReadWriteOnce
pv pv-big 5Gi ReadWriteOnce
pv pv-rwx 2Gi ReadWriteMany
pv pv-gold 3Gi ReadWriteOnce '{"metadata":{}}'
kc label pv pv-gold tier=gold >/dev/null
pv pv-pre 1Gi ReadWriteOnce '{"spec":{"claimRef":{"namespace":"default","name":"claim-pre"}}}'
pv pv-block 1Gi ReadWriteOnce '{"spec":{"volumeMode":"Block"}}'
pv pv-resumed 2Gi ReadWriteOnce '{"metadata":{"annotations":{"volume.alpha.kubernetes.io/pre-resize-capacity":"1Gi"}},"spec":{"claimRef":{"namespace":"default","name":"claim-resumed"}}}'

cm_start cm --controllers 'persistentvolume-binder,pvc-protection,pv-protection' \
	--pvclaimbinder-sync-period 2s --http-endpoint 127.0.0.1:0 -v 3
wait_for "pv-small Available" 20 pv_is pv-small .status.phase Available

# Smallest fit among static volumes.
claim claim-a 500Mi
wait_for "claim-a Bound" 20 claim_is claim-a .status.phase Bound
check "claim-a got the smallest fitting volume" eq "$(cj claim-a .spec.volumeName)" pv-small
check "claim-a annotations" eq "$(cj claim-a '.metadata.annotations["pv.kubernetes.io/bind-completed"] + "/" + .metadata.annotations["pv.kubernetes.io/bound-by-controller"]')" yes/yes
check "claim-a status capacity and modes" eq "$(cj claim-a '.status.capacity.storage + " " + (.status.accessModes | join(","))')" "1Gi ReadWriteOnce"
check "pv-small claimRef has the claim's uid" eq "$(pj pv-small .spec.claimRef.uid)" "$(cj claim-a .metadata.uid)"
check "pv-small bound-by-controller" eq "$(pj pv-small '.metadata.annotations["pv.kubernetes.io/bound-by-controller"]')" yes
check "pv-small Bound" eq "$(pj pv-small .status.phase)" Bound

# A volume pre-bound to a claim; a claim pre-bound to a volume; a selector; volumeMode.
claim claim-pre 1Gi
claim claim-named 2Gi '{"volumeName":"pv-big"}'
claim claim-sel 1Gi '{"selector":{"matchLabels":{"tier":"gold"}}}'
claim claim-blk 1Gi '{"volumeMode":"Block"}'
claim claim-none 100Gi
wait_for "claim-pre Bound" 20 claim_is claim-pre .status.phase Bound
check "claim-pre bound to the volume pre-bound to it" eq "$(cj claim-pre .spec.volumeName)" pv-pre
check "pv-pre was bound by the user, not the controller" eq "$(pj pv-pre '.metadata.annotations["pv.kubernetes.io/bound-by-controller"] // "none"')" none
claim claim-resumed 2Gi
wait_for "claim-resumed Bound" 20 claim_is claim-resumed .status.phase Bound
check "claim-resumed: the capacity before the pending expansion, not the PV's 2Gi" eq "$(cj claim-resumed .status.capacity.storage)" 1Gi
check "the annotation stays for csi-resizer to remove" eq "$(pj pv-resumed '.metadata.annotations["volume.alpha.kubernetes.io/pre-resize-capacity"]')" 1Gi
wait_for "claim-named Bound to pv-big" 20 claim_is claim-named .status.phase Bound
check "claim-named: bind-completed, not bound-by-controller" eq "$(cj claim-named '.metadata.annotations["pv.kubernetes.io/bind-completed"] + "/" + (.metadata.annotations["pv.kubernetes.io/bound-by-controller"] // "none")')" yes/none
check "pv-big points back" eq "$(pj pv-big .spec.claimRef.name)" claim-named
wait_for "claim-sel Bound" 20 claim_is claim-sel .status.phase Bound
check "claim-sel got the labelled volume" eq "$(cj claim-sel .spec.volumeName)" pv-gold
wait_for "claim-blk Bound" 20 claim_is claim-blk .status.phase Bound
check "claim-blk got the Block volume" eq "$(cj claim-blk .spec.volumeName)" pv-block
wait_for "FailedBinding for claim-none" 20 claim_event claim-none FailedBinding \
	"no persistent volumes available for this claim and no storage class is set"
check "claim-none stays unbound" eq "$(cj claim-none '.spec.volumeName // "none"')" none

# External provisioner: annotations and event; WaitForFirstConsumer waits for selected-node.
echo '{"apiVersion":"storage.k8s.io/v1","kind":"StorageClass","metadata":{"name":"fast"},"provisioner":"loop.kcsi.io"}' | kc create -f - >/dev/null
echo '{"apiVersion":"storage.k8s.io/v1","kind":"StorageClass","metadata":{"name":"late"},"provisioner":"loop.kcsi.io","volumeBindingMode":"WaitForFirstConsumer"}' | kc create -f - >/dev/null
claim claim-dyn 1Gi '{"storageClassName":"fast"}'
claim claim-late 1Gi '{"storageClassName":"late"}'
wait_for "claim-dyn annotated for the provisioner" 20 claim_is claim-dyn \
	'.metadata.annotations["volume.kubernetes.io/storage-provisioner"] + "/" + .metadata.annotations["volume.beta.kubernetes.io/storage-provisioner"]' \
	loop.kcsi.io/loop.kcsi.io
wait_for "ExternalProvisioning event" 20 claim_event claim-dyn ExternalProvisioning \
	"Waiting for a volume to be created either by the external provisioner 'loop.kcsi.io'"
check "the binder's event comes from persistentvolume-controller" \
	eq "$(event_source claim-dyn ExternalProvisioning)" "persistentvolume-controller persistentvolume-controller"
wait_for "WaitForFirstConsumer event" 20 claim_event claim-late WaitForFirstConsumer \
	"waiting for first consumer to be created before binding"
check "claim-late not annotated before a node is chosen" eq "$(cj claim-late '.metadata.annotations["volume.kubernetes.io/storage-provisioner"] // "none"')" none
kc annotate pvc claim-late volume.kubernetes.io/selected-node=node-1 >/dev/null
wait_for "claim-late annotated once the node is chosen" 20 claim_is claim-late \
	'.metadata.annotations["volume.kubernetes.io/storage-provisioner"]' loop.kcsi.io
# The provisioner's volume appears: the claim is bound to it (pre-bound by the provisioner).
pv pvc-dyn 1Gi ReadWriteOnce "{\"spec\":{\"storageClassName\":\"fast\",\"claimRef\":{\"namespace\":\"default\",\"name\":\"claim-dyn\",\"uid\":\"$(cj claim-dyn .metadata.uid)\"}}}"
wait_for "claim-dyn Bound to the provisioned volume" 20 claim_is claim-dyn .spec.volumeName pvc-dyn
wait_for "claim-dyn phase Bound" 20 claim_is claim-dyn .status.phase Bound
check "claim-dyn's capacity is its volume's" eq "$(cj claim-dyn .status.capacity.storage)" 1Gi
# The resizer grows the volume: the bound claim keeps its capacity until the node has grown the
# filesystem (kube-controller-manager writes capacity only as a claim becomes Bound).
kc patch pv pvc-dyn --type merge -p '{"spec":{"capacity":{"storage":"2Gi"}}}' >/dev/null
kc annotate pvc claim-dyn kcsi.test/resync=1 >/dev/null
sleep 1
check "a bound claim keeps its capacity when its volume grows" eq "$(cj claim-dyn .status.capacity.storage)" 1Gi

# Default class for a claim that names none.
echo '{"apiVersion":"storage.k8s.io/v1","kind":"StorageClass","metadata":{"name":"std","annotations":{"storageclass.kubernetes.io/is-default-class":"true"}},"provisioner":"loop.kcsi.io"}' | kc create -f - >/dev/null
echo '{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"claim-def","namespace":"default"},"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}}}}' | kc create -f - >/dev/null
wait_for "claim-def gets the default class" 20 claim_is claim-def .spec.storageClassName std

# Protection finalizers.
wait_for "claim-a has the pvc-protection finalizer" 20 claim_is claim-a '.metadata.finalizers | index("kubernetes.io/pvc-protection") != null' true
wait_for "pv-rwx has the pv-protection finalizer" 20 pv_is pv-rwx '.metadata.finalizers | index("kubernetes.io/pv-protection") != null' true
mk_pod user node-1 claim-pre
sleep 0.5
kc delete pvc claim-pre --wait=false >/dev/null
sleep 2
check "claim-pre kept while a pod uses it" eq "$(cj claim-pre '.metadata.deletionTimestamp != null')" true
kc delete pod user --grace-period=0 --force --wait=false >/dev/null 2>&1
wait_for "claim-pre removed once the pod is gone" 20 claim_gone claim-pre
kc delete pv pv-rwx --wait=false >/dev/null
wait_for "unbound pv-rwx deleted" 20 pv_gone pv-rwx

# A deleted claim releases its volume; Retain leaves it there.
kc delete pvc claim-a --wait=false >/dev/null
wait_for "pv-small Released" 20 pv_is pv-small .status.phase Released
check "Released volume keeps its claimRef" eq "$(pj pv-small .spec.claimRef.name)" claim-a
wait_for "pv-pre Released too (claim-pre gone)" 20 pv_is pv-pre .status.phase Released
kc delete pv pv-pre --wait=false >/dev/null
wait_for "Released pv-pre deleted (not Bound: pv-protection lets it go)" 20 pv_gone pv-pre

PORT=$(cm_http_port cm)
curl -s "http://127.0.0.1:$PORT/metrics" >"$T/metrics"
check "workqueue metrics of the binder" grep -q '^workqueue_adds_total{name="claims"} [1-9]' "$T/metrics"
check "workqueue metrics of pvc-protection" grep -q '^workqueue_adds_total{name="pvcprotection"} [1-9]' "$T/metrics"
cm_stop cm
check "SIGTERM exits 0" eq "$?" 0
cm_finish
