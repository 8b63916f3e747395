#!/bin/bash
# e2e: csi-provisioner against csi-testdriver with injected failures, and what the user sees:
# a driver that fails N times then succeeds (one volume, same name), a driver that times out (no
# second volume), RESOURCE_EXHAUSTED with a selected node (annotation removed), another final
# error with one (annotation kept), a missing
# StorageClass, a missing secret, secrets with templates (never in the log at -v=10), malformed
# claims.
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
DRV=testdriver.kcsi.dev
. "$(dirname "$0")/lib_provisioner.sh"
ZK=topology.kcsi.dev/zone

calls() { grep -c "^$1 .*\"name\":\"$2\"" "$T/td.rec" 2>/dev/null || true; }
td_count() { td_volumes | grep -cx "$1" || true; }

emu_start
mk_sc std
echo '{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1","labels":{"'$ZK'":"z1"}}}' | kc create -f - >/dev/null
echo '{"apiVersion":"storage.k8s.io/v1","kind":"CSINode","metadata":{"name":"n1"},"spec":{"drivers":[{"name":"'$DRV'","nodeID":"n1","topologyKeys":["'$ZK'"]}]}}' | kc create -f - >/dev/null

# 1. Fails twice with UNAVAILABLE, then succeeds: retried with the same name, one volume.
td_start --fail CreateVolume=UNAVAILABLE --fail-count CreateVolume=2
prov_start p1 "$T/td.sock"
mk_pvc flaky std
PV=$(pv_of flaky)
wait_for "PV after two failures" 20 pv_exists "$PV"
check "CreateVolume called three times with the same name" eq "$(calls CreateVolume "$PV")" 3
check "exactly one volume in the driver" eq "$(td_count "vol-$PV")" 1
wait_for "the failures were shown on the claim" 10 has_event PersistentVolumeClaim flaky "ProvisioningFailed: rpc error: code = Unavailable"
wait_for "then success" 10 has_event PersistentVolumeClaim flaky "ProvisioningSucceeded: Successfully provisioned volume $PV"
att_stop p1
td_stop

# 2. Times out: may be in progress, retried with the same name for ever, never a second volume.
td_start --slow CreateVolume=1500ms
prov_start p2 "$T/td.sock" --timeout 400ms
mk_pvc slow std
PV=$(pv_of slow)
wait_for "three timed-out CreateVolume calls" 20 bash -c "[ \$(grep -c '^CreateVolume .*$PV' '$T/td.rec') -ge 3 ]"
check "no PV while every call times out" bash -c "! kubectl --kubeconfig '$KC' get pv '$PV' >/dev/null 2>&1"
wait_for "timeouts shown on the claim" 10 has_event PersistentVolumeClaim slow "rpc error: code = DeadlineExceeded"
sleep 1.6
check "all calls used one name: one volume" eq "$(td_count "vol-$PV")" 1
check "only this claim's name was ever sent" eq "$(grep '^CreateVolume ' "$T/td.rec" | grep -c -v "$PV")" 0
att_stop p2
prov_start p3 "$T/td.sock" --timeout 5s
wait_for "PV once the driver answers in time" 20 pv_exists "$PV"
check "the PV holds the volume made by the timed-out calls" eq "$(pv_field "$PV" .spec.csi.volumeHandle)" "vol-$PV"
check "still one volume" eq "$(td_count "vol-$PV")" 1
att_stop p3
td_stop

# 3. A final error with a selected node: the annotation goes so the scheduler picks again.
td_start --fail CreateVolume=RESOURCE_EXHAUSTED
prov_start p4 "$T/td.sock" --feature-gates Topology=true
mk_sc late '{"volumeBindingMode":"WaitForFirstConsumer"}'
mk_pvc picky late '{"metadata":{"annotations":{"volume.kubernetes.io/selected-node":"n1"}}}'
wait_for "selected-node annotation removed" 20 bash -c "[ \"\$(kubectl --kubeconfig '$KC' get pvc picky -n default -o json | jq -r '.metadata.annotations[\"volume.kubernetes.io/selected-node\"] // \"gone\"')\" = gone ]"
wait_for "the user sees why" 10 has_event PersistentVolumeClaim picky "ProvisioningFailed: rpc error: code = ResourceExhausted"
check "no PV" bash -c "! kubectl --kubeconfig '$KC' get pv '$(pv_of picky)' >/dev/null 2>&1"
n1=$(calls CreateVolume "$(pv_of picky)")
sleep 1
check "no retry once rescheduled (waits for a new node)" eq "$(calls CreateVolume "$(pv_of picky)")" "$n1"
att_stop p4
td_stop

# 3b. Any other final error keeps the selected node: retried there (only RESOURCE_EXHAUSTED says
# another node may do better, as upstream's checkError has it).
td_start --fail CreateVolume=INTERNAL
prov_start p4b "$T/td.sock"
mk_pvc stays late '{"metadata":{"annotations":{"volume.kubernetes.io/selected-node":"n1"}}}'
wait_for "the user sees why" 10 has_event PersistentVolumeClaim stays "ProvisioningFailed: rpc error: code = Internal"
wait_for "retried on the same node" 10 bash -c "[ \$(grep -c '^CreateVolume .*$(pv_of stays)' '$T/td.rec') -ge 2 ]"
check "the selected node is kept" eq "$(pvc_field stays '.metadata.annotations["volume.kubernetes.io/selected-node"] // "gone"')" n1
att_stop p4b
td_stop

# 4-7 with one well-behaved driver and one provisioner at -v=10.
td_start
prov_start p5 "$T/td.sock" -v 10
# 4. Missing StorageClass: reported, then provisioned once the class exists.
mk_pvc orphan nosuchclass
wait_for "missing class reported" 20 has_event PersistentVolumeClaim orphan 'storageclass.storage.k8s.io "nosuchclass" not found'
mk_sc nosuchclass
wait_for "provisioned once the class exists" 20 pv_exists "$(pv_of orphan)"

# 5. Missing secret: reported, then provisioned once it exists.
mk_sc needsecret '{"parameters":{"csi.storage.k8s.io/provisioner-secret-name":"later","csi.storage.k8s.io/provisioner-secret-namespace":"default"}}'
mk_pvc waits needsecret
wait_for "missing secret reported" 20 has_event PersistentVolumeClaim waits "error getting secret later in namespace default"
mk_secret later k v
wait_for "provisioned once the secret exists" 20 pv_exists "$(pv_of waits)"

# 6. Secrets with templates; the planted value never reaches the log, even at -v=10.
PLANT=planted-secret-value-8d31c2
mk_secret tmpl-prov password $PLANT
mk_secret stage-from-annotation password $PLANT
mk_sc secretive '{"parameters":{
 "csi.storage.k8s.io/provisioner-secret-name":"${pvc.name}-prov",
 "csi.storage.k8s.io/provisioner-secret-namespace":"${pvc.namespace}",
 "csi.storage.k8s.io/node-stage-secret-name":"${pvc.annotations['"'"'team.io/stage'"'"']}",
 "csi.storage.k8s.io/node-stage-secret-namespace":"default",
 "csi.storage.k8s.io/controller-publish-secret-name":"cp-${pv.name}",
 "csi.storage.k8s.io/controller-publish-secret-namespace":"default"}}'
mk_pvc tmpl secretive '{"metadata":{"annotations":{"team.io/stage":"stage-from-annotation"}}}'
TPV=$(pv_of tmpl)
wait_for "PV with secret references" 20 pv_exists "$TPV"
check "the driver got the provisioner secret" grep -q "^CreateVolume .*$PLANT" "$T/td.rec"
check "deletion-secret annotations name the resolved secret" eq "$(pv_field "$TPV" '.metadata.annotations | "\(.["volume.kubernetes.io/provisioner-deletion-secret-name"])/\(.["volume.kubernetes.io/provisioner-deletion-secret-namespace"])"')" "tmpl-prov/default"
check "nodeStageSecretRef from the claim's annotation" eq "$(pv_field "$TPV" '.spec.csi.nodeStageSecretRef | "\(.namespace)/\(.name)"')" "default/stage-from-annotation"
check "controllerPublishSecretRef from \${pv.name}" eq "$(pv_field "$TPV" '.spec.csi.controllerPublishSecretRef.name')" "cp-$TPV"
check "parameters reach the driver without csi.storage.k8s.io/ keys" bash -c "! grep '^CreateVolume .*$TPV' '$T/td.rec' | grep -q 'secret-name'"
bind tmpl
release tmpl
wait_for "templated PV deleted" 20 pv_gone "$TPV"
check "DeleteVolume got the deletion secret" grep -q "^DeleteVolume .*vol-$TPV.*$PLANT" "$T/td.rec"
check "the planted secret value is in no log line (-v=10)" bash -c "! grep -q '$PLANT' '$T/p5.log'"
check "the -v=10 log does show requests (stripped)" grep -q 'stripped' "$T/p5.log"

# 7. Malformed claims: a clear event, nothing created, the provisioner keeps running.
kc create -f - >/dev/null <<JSON
{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"nosize","namespace":"default",
 "annotations":{"volume.kubernetes.io/storage-provisioner":"$DRV"}},
 "spec":{"storageClassName":"std","accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"lots"}}}}
JSON
mk_pvc badsnap std '{"spec":{"dataSource":{"kind":"VolumeSnapshot","apiGroup":"example.com","name":"s"}}}'
mk_pvc selector std '{"spec":{"selector":{"matchLabels":{"a":"b"}}}}'
wait_for "claim without a size reported" 20 has_event PersistentVolumeClaim nosize "has no valid spec.resources.requests.storage"
wait_for "snapshot source of another API group reported" 20 has_event PersistentVolumeClaim badsnap "does not belong to the right APIGroup"
wait_for "claim selector reported" 20 has_event PersistentVolumeClaim selector "claim Selector is not supported"
check "nothing was created for them" eq "$(grep -cE '^CreateVolume .*($(pv_of nosize)|$(pv_of badsnap)|$(pv_of selector))' "$T/td.rec")" 0
check "the provisioner still runs" kill -0 "${ATT_PIDS[p5]}"
rc=0; att_stop p5 || rc=$?
check "SIGTERM exits 0" eq "$rc" 0
att_finish
