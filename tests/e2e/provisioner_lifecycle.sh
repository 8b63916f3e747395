#!/bin/bash
# e2e: csi-provisioner with kube-emulator and the real kcsi-loopplugin. Immediate and
# WaitForFirstConsumer classes, Filesystem and Block, access modes, the PV field by field,
# topology, events, deletion with the Delete policy and the PV finalizer, Retain left alone,
# metrics, a clean SIGTERM.
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
. "$(dirname "$0")/lib_provisioner.sh"
ZK=topology.loop.kcsi.io/zone

emu_start
lp_start node-1 --zone zone-a
for n in node-1 node-2; do
	z=zone-a; [ $n = node-2 ] && z=zone-b
	echo "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"$n\",\"labels\":{\"$ZK\":\"$z\"}}}" | kc create -f - >/dev/null
	echo "{\"apiVersion\":\"storage.k8s.io/v1\",\"kind\":\"CSINode\",\"metadata\":{\"name\":\"$n\"},
	\"spec\":{\"drivers\":[{\"name\":\"$DRV\",\"nodeID\":\"$n\",\"topologyKeys\":[\"$ZK\"]}]}}" | kc create -f - >/dev/null
done
mk_sc fast '{"parameters":{"type":"thin","csi.storage.k8s.io/fstype":"ext4"},"mountOptions":["noatime"]}'
mk_sc keep '{"reclaimPolicy":"Retain"}'
mk_sc late '{"volumeBindingMode":"WaitForFirstConsumer","allowedTopologies":[{"matchLabelExpressions":[{"key":"'$ZK'","values":["zone-a"]}]}]}'

# No --feature-gates: as upstream v6.3, Topology is on and the PV finalizer is always added.
prov_start p "$T/lp.sock" --http-endpoint 127.0.0.1:0 --extra-create-metadata -v 5
PORT=$(att_http_port p)

# 1. Immediate, Filesystem, RWO: the PV field by field.
mk_pvc fs fast
PV=$(pv_of fs)
wait_for "PV of claim fs" 20 pv_exists "$PV"
J=$(pv_json "$PV")
f() { echo "$J" | jq -r "$1"; }
check "claimRef names the claim and its UID" eq "$(f '.spec.claimRef | "\(.kind) \(.namespace)/\(.name) \(.uid) \(.apiVersion)"')" \
	"PersistentVolumeClaim default/fs $(pvc_uid fs) v1"
check "claimRef carries the claim's resourceVersion" bash -c "[ -n '$(f .spec.claimRef.resourceVersion)' ]"
check "provisioned-by annotation" eq "$(f '.metadata.annotations["pv.kubernetes.io/provisioned-by"]')" "$DRV"
check "empty deletion-secret annotations" eq "$(f '.metadata.annotations | [.["volume.kubernetes.io/provisioner-deletion-secret-name"], .["volume.kubernetes.io/provisioner-deletion-secret-namespace"]] | join("|")')" "|"
check "the PV deletion-protection finalizer, without a gate" eq "$(f '.metadata.finalizers | join(",")')" external-provisioner.volume.kubernetes.io/finalizer
check "capacity is the driver's, binary SI" eq "$(f .spec.capacity.storage)" 16Mi
check "fsType from csi.storage.k8s.io/fstype" eq "$(f .spec.csi.fsType)" ext4
check "mount options from the class" eq "$(f '.spec.mountOptions | join(",")')" noatime
check "reclaim policy from the class" eq "$(f .spec.persistentVolumeReclaimPolicy)" Delete
check "storage class, volume mode, access modes" eq "$(f '"\(.spec.storageClassName) \(.spec.volumeMode) \(.spec.accessModes | join(","))"')" "fast Filesystem ReadWriteOnce"
check "driver and volume handle" bash -c "[ '$(f .spec.csi.driver)' = '$DRV' ] && [ -n '$(f .spec.csi.volumeHandle)' ]"
check "provisioner identity in the volume attributes" bash -c "[[ '$(f '.spec.csi.volumeAttributes["storage.kubernetes.io/csiProvisionerIdentity"]')' == *-$DRV ]]"
check "nodeAffinity from accessible_topology" eq "$(f '.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0] | "\(.key) \(.operator) \(.values[0])"')" "$ZK In zone-a"
check "the driver holds the volume" lp_has "$(f .spec.csi.volumeHandle)"
wait_for "event Provisioning" 10 has_event PersistentVolumeClaim fs "Provisioning: External provisioner is provisioning volume for claim \"default/fs\""
wait_for "event ProvisioningSucceeded" 10 has_event PersistentVolumeClaim fs "ProvisioningSucceeded: Successfully provisioned volume $PV"
check "extra-create-metadata reached the driver" grep -q 'csi.storage.k8s.io/pvc/name' "$T/p.log"

# 2. Block, ROX and RWOP claims.
mk_pvc blk fast '{"spec":{"volumeMode":"Block"}}'
mk_pvc rox fast '{"spec":{"accessModes":["ReadOnlyMany"]}}'
mk_pvc rwop fast '{"spec":{"accessModes":["ReadWriteOncePod"]}}'
mk_pvc rwx fast '{"spec":{"accessModes":["ReadWriteMany"]}}'
wait_for "PV of claim blk" 20 pv_exists "$(pv_of blk)"
wait_for "PV of claim rox" 20 pv_exists "$(pv_of rox)"
wait_for "PV of claim rwop" 20 pv_exists "$(pv_of rwop)"
check "Block PV: volumeMode Block, no fsType" eq "$(pv_field "$(pv_of blk)" '"\(.spec.volumeMode) \(.spec.csi.fsType // "none")"')" "Block none"
check "ROX PV keeps the access mode" eq "$(pv_field "$(pv_of rox)" '.spec.accessModes | join(",")')" ReadOnlyMany
check "RWOP PV keeps the access mode" eq "$(pv_field "$(pv_of rwop)" '.spec.accessModes | join(",")')" ReadWriteOncePod
# The loop driver cannot share a local device between nodes: the user sees why, on the claim.
# InvalidArgument is infeasible (v6.3): its own message, retried no sooner than --retry-interval-max.
wait_for "RWX refused with the driver's reason" 20 has_event PersistentVolumeClaim rwx "ProvisioningFailed: Volume provisioning failed with infeasible error. Retries will be delayed. rpc error: code = InvalidArgument"
check "no PV for the RWX claim" bash -c "! kubectl --kubeconfig '$KC' get pv '$(pv_of rwx)' >/dev/null 2>&1"

# 3. WaitForFirstConsumer: nothing until a node is selected, then the node's topology.
mk_pvc late1 late
sleep 1
check "WFFC claim without a selected node is left alone" bash -c "! kubectl --kubeconfig '$KC' get pv '$(pv_of late1)' >/dev/null 2>&1"
kc annotate pvc late1 -n default volume.kubernetes.io/selected-node=node-1 >/dev/null
wait_for "PV of WFFC claim after node selection" 20 pv_exists "$(pv_of late1)"
check "WFFC PV is in the selected node's zone" eq "$(pv_field "$(pv_of late1)" '.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[0]')" zone-a
check "requisite was the allowed topology" grep -q "\"requisite\":\[{\"segments\":{\"$ZK\":\"zone-a\"}}\]" "$T/p.log"

# 4. Deletion: Released + Delete -> DeleteVolume, finalizer removed, PV gone.
VOL=$(pv_field "$PV" .spec.csi.volumeHandle)
bind fs
wait_for "PV finalizer stays while bound" 5 bash -c "[ \"\$(kubectl --kubeconfig '$KC' get pv '$PV' -o jsonpath='{.metadata.finalizers}')\" != '' ]"
release fs
wait_for "PV of claim fs deleted" 20 pv_gone "$PV"
check "the driver deleted the volume" lp_lacks "$VOL"

# 5. Retain: released PV and its volume are left alone.
mk_pvc kept keep
KPV=$(pv_of kept)
wait_for "PV of claim kept" 20 pv_exists "$KPV"
KVOL=$(pv_field "$KPV" .spec.csi.volumeHandle)
# The PV is written with the finalizer while the gate is on; the sync of a Retain PV drops it.
no_finalizer() { [ "$(pv_field "$1" '.metadata.finalizers // [] | length')" = 0 ]; }
wait_for "Retain PV has no provisioner finalizer" 10 no_finalizer "$KPV"
bind kept
release kept
sleep 1.5
check "Retain PV stays" pv_exists "$KPV"
check "Retain volume stays" lp_has "$KVOL"

# 6. Metrics with upstream's names.
curl -s "http://127.0.0.1:$PORT/metrics" >"$T/metrics"
check "provision counter" grep -q '^controller_persistentvolumeclaim_provision_total{class="fast",source=""} ' "$T/metrics"
check "provision failures counted" grep -q '^controller_persistentvolumeclaim_provision_failed_total{class="fast"' "$T/metrics"
check "delete counter" grep -q '^controller_persistentvolume_delete_total{class="fast"} 1$' "$T/metrics" || grep "persistentvolume_delete" "$T/metrics" >&2
check "provision duration histogram" grep -q '^controller_persistentvolumeclaim_provision_duration_seconds_bucket' "$T/metrics"
check "CSI operation metrics" grep -q '^csi_sidecar_operations_seconds_count{.*method_name="/csi.v1.Controller/CreateVolume"' "$T/metrics"
check "workqueue metrics for claims" grep -q 'workqueue_adds_total{name="claims"}' "$T/metrics"
check "process metrics" grep -q '^process_resident_memory_bytes' "$T/metrics"

# Clean up what the driver holds, then SIGTERM.
LEFT=()
for c in blk rox rwop late1; do LEFT+=("$(pv_of $c)"); bind $c; release $c; done
for pv in "${LEFT[@]}"; do wait_for "PV $pv deleted" 20 pv_gone "$pv"; done
t0=$(date +%s%N); rc=0; att_stop p || rc=$?
check "SIGTERM exits 0" eq "$rc" 0
check "SIGTERM exits within 1 s" bash -c "[ $(( ($(date +%s%N) - t0) / 1000000 )) -le 1000 ]"
check "orderly shutdown, not the watchdog" bash -c "! grep -q 'did not finish in time' '$T/p.log'"

att_finish
