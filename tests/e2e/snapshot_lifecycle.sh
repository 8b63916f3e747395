#!/bin/bash
# e2e: snapshot-controller and csi-snapshotter with kube-emulator and csi-testdriver. A dynamic
# snapshot field by field (content, statuses, finalizers, events, the CreateSnapshot request),
# the default class, deletion with Delete (DeleteSnapshot, secrets from the content's
# annotations) and Retain (nothing called), a pre-provisioned content bound and made ready by
# ListSnapshots, metrics (snapshot-controller's operation_total_seconds as v8.6 labels it), a
# clean SIGTERM of both.
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
. "$(dirname "$0")/lib_provisioner.sh"
DRV=testdriver.kcsi.dev
. "$(dirname "$0")/lib_snapshot.sh"

emu_start
td_start
mk_secret snapsecret token s3cr3t
mk_vsclass gold '{"parameters":{"type":"fast","csi.storage.k8s.io/snapshotter-secret-name":"snapsecret",
	"csi.storage.k8s.io/snapshotter-secret-namespace":"${volumesnapshot.namespace}"}}'
mk_vsclass keep '{"deletionPolicy":"Retain"}'
mk_bound_claim c1 vol-1
sctrl_start --http-endpoint 127.0.0.1:0 -v 5
snapper_start snapper "$T/td.sock" --http-endpoint 127.0.0.1:0 --extra-create-metadata -v 5
SPORT=$(att_http_port snapper)

# 1. A dynamic snapshot becomes ready.
mk_vs s1 '{"spec":{"volumeSnapshotClassName":"gold","source":{"persistentVolumeClaimName":"c1"}}}'
wait_for "s1 readyToUse" 20 vs_ready s1
UID1=$(vs_field s1 .metadata.uid)
VSC=snapcontent-$UID1
C=$(vsc_json "$VSC")
c() { echo "$C" | jq -r "$1"; }
check "content named snapcontent-<snapshot uid>" eq "$(c .metadata.name)" "$VSC"
check "content spec from the class and the volume" eq \
	"$(c '.spec | "\(.driver) \(.deletionPolicy) \(.source.volumeHandle) \(.volumeSnapshotClassName) \(.sourceVolumeMode)"')" \
	"$DRV Delete vol-1 gold Filesystem"
check "volumeSnapshotRef names the snapshot with its uid" eq \
	"$(c '.spec.volumeSnapshotRef | "\(.kind) \(.apiVersion) \(.namespace)/\(.name) \(.uid)"')" \
	"VolumeSnapshot snapshot.storage.k8s.io/v1 default/s1 $UID1"
check "volumeSnapshotRef carries a resourceVersion" bash -c "[ -n '$(c .spec.volumeSnapshotRef.resourceVersion)' ]"
check "deletion secret annotations from the class" eq \
	"$(c '.metadata.annotations | "\(.["snapshot.storage.kubernetes.io/deletion-secret-name"]) \(.["snapshot.storage.kubernetes.io/deletion-secret-namespace"])"')" \
	"snapsecret default"
check "no being-created annotation once ready" eq \
	"$(c '.metadata.annotations["snapshot.storage.kubernetes.io/volumesnapshot-being-created"] // "none"')" none
check "content status: handle, ready, size, creationTime in ns" eq \
	"$(c '.status | "\(.snapshotHandle) \(.readyToUse) \(.restoreSize) \(.creationTime > 1000000000000000000)"')" \
	"snap-snapshot-$UID1 true 1073741824 true"
check "content finalizer" eq "$(c '.metadata.finalizers | join(",")')" \
	snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection
S=$(vs_json s1)
s() { echo "$S" | jq -r "$1"; }
check "snapshot status copied from the content" eq \
	"$(s '.status | "\(.boundVolumeSnapshotContentName) \(.readyToUse) \(.restoreSize)"')" "$VSC true 1Gi"
check "snapshot creationTime set" bash -c "[ '$(s '.status.creationTime // ""')' != '' ]"
both_fins() { [ "$(vs_field s1 '.metadata.finalizers | sort | join(",")')" = \
	"snapshot.storage.kubernetes.io/volumesnapshot-as-source-protection,snapshot.storage.kubernetes.io/volumesnapshot-bound-protection" ]; }
wait_for "snapshot finalizers as-source and bound" 10 both_fins
no_pvc_fin() { [ "$(pvc_field c1 '.metadata.finalizers // [] | join(",")')" = "" ]; }
wait_for "claim finalizer released once the snapshot is cut" 10 no_pvc_fin
wait_for "event CreatingSnapshot" 10 has_event VolumeSnapshot s1 "CreatingSnapshot: Waiting for a snapshot default/s1 to be created by the CSI driver."
wait_for "event SnapshotCreated" 10 has_event VolumeSnapshot s1 "SnapshotCreated: Snapshot default/s1 was successfully created by the CSI driver."
wait_for "event SnapshotReady" 10 has_event VolumeSnapshot s1 "SnapshotReady: Snapshot default/s1 is ready to use."
R=$(td_calls CreateSnapshot | head -1)
check "one CreateSnapshot" eq "$(td_calls CreateSnapshot | wc -l)" 1
check "CreateSnapshot name and source" eq "$(echo "$R" | jq -r '"\(.name) \(.source_volume_id)"')" "snapshot-$UID1 vol-1"
check "parameters without csi.storage.k8s.io/ keys, with extra metadata" eq \
	"$(echo "$R" | jq -S -c '.parameters')" \
	"{\"csi.storage.k8s.io/volumesnapshot/name\":\"s1\",\"csi.storage.k8s.io/volumesnapshot/namespace\":\"default\",\"csi.storage.k8s.io/volumesnapshotcontent/name\":\"$VSC\",\"type\":\"fast\"}"
check "secrets from the templated class secret" eq "$(echo "$R" | jq -c '.secrets')" '{"token":"s3cr3t"}'
check "the secret value is not logged" bash -c "! grep -q s3cr3t '$T/snapper.log' '$T/sctrl.log'"
check "the driver holds the snapshot" bash -c "td_snapshots() { '$KCSI_BIN/kcsi' --endpoint 'unix://$T/td.sock' -o json controller list-snapshots | jq -r '.entries[]?.snapshot.snapshot_id'; }; td_snapshots | grep -qx 'snap-snapshot-$UID1'"
check "kubectl shows READYTOUSE true" bash -c "kubectl --kubeconfig '$KC' get volumesnapshot s1 -n default | grep -q 'true'"

# 2. The default class of the volume's driver is named in a snapshot without a class.
mk_vsclass def '{"metadata":{"annotations":{"snapshot.storage.kubernetes.io/is-default-class":"true"}}}'
mk_vs s2 '{"spec":{"source":{"persistentVolumeClaimName":"c1"}}}'
wait_for "s2 readyToUse" 20 vs_ready s2
check "default class written into the snapshot" eq "$(vs_field s2 .spec.volumeSnapshotClassName)" def

# 3. Delete: DeleteSnapshot with the deletion secrets, content and snapshot gone.
kc delete volumesnapshot s1 -n default --wait=false >/dev/null
gone_s1() { ! vs_exists s1 && ! vsc_exists "$VSC"; }
wait_for "s1 and its content gone" 20 gone_s1
D=$(td_calls DeleteSnapshot | head -1)
check "DeleteSnapshot of the handle" eq "$(echo "$D" | jq -r .snapshot_id)" "snap-snapshot-$UID1"
check "DeleteSnapshot secrets from the content's annotations" eq "$(echo "$D" | jq -c .secrets)" '{"token":"s3cr3t"}'
check "the driver no longer holds it" bash -c "! '$KCSI_BIN/kcsi' --endpoint 'unix://$T/td.sock' -o json controller list-snapshots | grep -q 'snap-snapshot-$UID1'"

# 4. Retain: the snapshot goes, the content and the driver's snapshot stay.
mk_vs s3 '{"spec":{"volumeSnapshotClassName":"keep","source":{"persistentVolumeClaimName":"c1"}}}'
wait_for "s3 readyToUse" 20 vs_ready s3
VSC3=$(content_of s3)
H3=$(vsc_field "$VSC3" .status.snapshotHandle)
check "Retain: no bound finalizer on the snapshot" eq "$(vs_field s3 '.metadata.finalizers | join(",")')" \
	snapshot.storage.kubernetes.io/volumesnapshot-as-source-protection
kc delete volumesnapshot s3 -n default --wait=false >/dev/null
wait_for "s3 gone" 20 bash -c "! kubectl --kubeconfig '$KC' get volumesnapshot s3 -n default >/dev/null 2>&1"
sleep 1
check "Retain: content kept" vsc_exists "$VSC3"
check "Retain: content marked being-deleted" eq \
	"$(vsc_field "$VSC3" '.metadata.annotations["snapshot.storage.kubernetes.io/volumesnapshot-being-deleted"]')" yes
check "Retain: DeleteSnapshot not called" eq "$(td_calls DeleteSnapshot | grep -c "$H3")" 0

# 5. Pre-provisioned: a content with the retained handle, bound by a snapshot naming it.
jq -n --arg d "$DRV" --arg h "$H3" '{apiVersion: "snapshot.storage.k8s.io/v1", kind: "VolumeSnapshotContent",
	metadata: {name: "pre-1"}, spec: {driver: $d, deletionPolicy: "Retain",
	source: {snapshotHandle: $h}, volumeSnapshotRef: {name: "s4", namespace: "default"}}}' |
	kc create -f - >/dev/null
mk_vs s4 '{"spec":{"source":{"volumeSnapshotContentName":"pre-1"}}}'
wait_for "s4 readyToUse" 20 vs_ready s4
check "pre-provisioned content bound to the snapshot's uid" eq "$(vsc_field pre-1 .spec.volumeSnapshotRef.uid)" \
	"$(vs_field s4 .metadata.uid)"
check "pre-provisioned status from ListSnapshots" eq "$(vsc_field pre-1 '"\(.status.snapshotHandle) \(.status.readyToUse)"')" "$H3 true"
check "ListSnapshots asked by snapshot ID" bash -c "grep '^ListSnapshots ' '$T/td.rec' | grep -q '\"snapshot_id\":\"$H3\"'"
check "snapshot bound to pre-1" eq "$(vs_field s4 .status.boundVolumeSnapshotContentName)" pre-1

# 6. Metrics and a clean SIGTERM.
curl -s "http://127.0.0.1:$SPORT/metrics" >"$T/m"
check "workqueue metrics of the content queue" grep -q 'workqueue_adds_total{name="csi-snapshotter-content"}' "$T/m"
check "CSI call metrics" grep -q 'csi_sidecar_operations_seconds_count{.*method_name="/csi.v1.Controller/CreateSnapshot"' "$T/m"
# snapshot-controller's operation metric, labelled as v8.6's: driver, operation, type, status.
curl -s "http://127.0.0.1:$(att_http_port sctrl)/metrics" >"$T/cm"
opcount() { sed -n "s/^snapshot_controller_operation_total_seconds_count{driver_name=\"$DRV\",operation_name=\"$1\",operation_status=\"$2\",snapshot_type=\"$3\"} //p" "$T/cm"; }
check "CreateSnapshot of the dynamic snapshots observed" bash -c "[ '$(opcount CreateSnapshot success dynamic)' -ge 2 ]"
check "CreateSnapshotAndReady of the dynamic snapshots observed" bash -c "[ '$(opcount CreateSnapshotAndReady success dynamic)' -ge 2 ]"
check "CreateSnapshotAndReady of the pre-provisioned one observed" eq "$(opcount CreateSnapshotAndReady success pre-provisioned)" 1
check "DeleteSnapshot of s1 and s3 observed" eq "$(opcount DeleteSnapshot success dynamic)" 2
check "upstream's buckets (le 600, +Inf)" grep -q 'snapshot_controller_operation_total_seconds_bucket{driver_name=.*,le="600"}' "$T/cm"
check "operations in flight: none pending" grep -qx 'snapshot_controller_operations_in_flight 0' "$T/cm"
sigterm_checked snapper sctrl
[ "$FAILS" -eq 0 ] || { tail -40 "$T/sctrl.log" >&2; tail -40 "$T/snapper.log" >&2; }
finish
