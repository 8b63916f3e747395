#!/bin/bash
# e2e: the VolumeSnapshot source-protection finalizer of external-provisioner v6.3 and its orphan
# sweep, with csi-testdriver and VolumeSnapshots made by hand (no snapshot-controller: nothing
# else touches their finalizers):
#   1. a restore whose CreateVolume is slow: the snapshot carries the finalizer while it runs (the
#      sweep, every second, leaves it: the claim is Pending); deleting the snapshot then waits
#      for the restore, which goes on; the finalizer goes with the PV, and the snapshot with it;
#   2. CreateVolume failing for good: the finalizer stays while the claim is Pending; the claim
#      deleted, the sweep removes it;
#   3. a provisioner killed (-9) while its CreateVolume runs leaves the finalizer; its claim is
#      deleted meanwhile. A new provisioner with --snapshot-orphan-sweep-interval=0 leaves it;
#      one with 1s removes it (the log names the snapshot);
#   4. a snapshot being deleted that does not carry the finalizer refuses a new restore, in
#      upstream's words, and gets no finalizer;
#   5. the update that sets the finalizer refused once (409, the emulator's fault rule): the
#      attempt fails before CreateVolume, the retry protects, provisions and releases.
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
DRV=testdriver.kcsi.dev
. "$(dirname "$0")/lib_provisioner.sh"
F=provisioner.storage.kubernetes.io/volumesnapshot-as-source-protection
VS=/apis/snapshot.storage.k8s.io/v1

# mk_snap NAME [extra-json]: a VolumeSnapshot in "default", bound to a ready content of $DRV
mk_snap() {
	local extra=${2:-"{}"} uid
	jq -n --arg n "$1" --argjson x "$extra" '{apiVersion: "snapshot.storage.k8s.io/v1",
		kind: "VolumeSnapshot", metadata: {name: $n, namespace: "default"},
		spec: {source: {volumeSnapshotContentName: ("content-" + $n)}}} * $x' | kc create -f - >/dev/null
	uid=$(kc get volumesnapshot "$1" -n default -o jsonpath='{.metadata.uid}')
	jq -n --arg n "$1" --arg u "$uid" --arg d "$DRV" '{apiVersion: "snapshot.storage.k8s.io/v1",
		kind: "VolumeSnapshotContent", metadata: {name: ("content-" + $n)},
		spec: {driver: $d, deletionPolicy: "Retain", source: {snapshotHandle: ("handle-" + $n)},
		       volumeSnapshotRef: {name: $n, namespace: "default", uid: $u}}}' | kc create -f - >/dev/null
	status_patch "$VS/volumesnapshotcontents/content-$1" "{\"status\":{\"snapshotHandle\":\"handle-$1\",\"readyToUse\":true,\"restoreSize\":16777216}}"
	status_patch "$VS/namespaces/default/volumesnapshots/$1" "{\"status\":{\"boundVolumeSnapshotContentName\":\"content-$1\",\"readyToUse\":true,\"restoreSize\":\"16Mi\"}}"
}
restore() { mk_pvc "$1" std "{\"spec\":{\"dataSource\":{\"apiGroup\":\"snapshot.storage.k8s.io\",\"kind\":\"VolumeSnapshot\",\"name\":\"$2\"}}}"; }
fins() { kc get volumesnapshot "$1" -n default -o json 2>/dev/null | jq -r '.metadata.finalizers // [] | join(",")'; }
held() { [ "$(fins "$1")" = "$F" ]; }
free_() { [ -z "$(fins "$1")" ]; }
snap_gone() { ! kc get volumesnapshot "$1" -n default >/dev/null 2>&1; }
claim_gone() { ! kc get pvc "$1" -n default >/dev/null 2>&1; }
kill9() { kill -KILL "${ATT_PIDS[$1]}"; wait "${ATT_PIDS[$1]}" 2>/dev/null; unset "ATT_PIDS[$1]"; }
stop_checked() { local rc=0; att_stop "$1" || rc=$?; check "$1: SIGTERM exits 0" eq "$rc" 0; }

emu_start
topo_node n1
mk_sc std

# 1. Held while CreateVolume runs; a deletion waits for the restore.
td_start --hold CreateVolume="$T/go" # CreateVolume waits until the checks below are done
prov_start p1 "$T/td.sock" --snapshot-orphan-sweep-interval=1s --timeout 30s -v 3
mk_snap s1
restore r1 s1
PV1=$(pv_of r1)
wait_for "the finalizer while CreateVolume runs" 10 held s1
check "no PV yet" bash -c "! kubectl --kubeconfig '$KC' get pv '$PV1' >/dev/null 2>&1"
kc delete volumesnapshot s1 -n default --wait=false >/dev/null
sleep 1.5 # the sweep has run at least once since
check "the snapshot being deleted stays while its restore runs" held s1
check "... marked for deletion" bash -c "[ -n \"\$(kubectl --kubeconfig '$KC' get volumesnapshot s1 -n default -o jsonpath='{.metadata.deletionTimestamp}')\" ]"
touch "$T/go"
wait_for "the restore goes on to its PV" 20 pv_exists "$PV1"
wait_for "the snapshot goes once the restore is done" 10 snap_gone s1
check "one CreateVolume, from the snapshot" eq "$(grep '^CreateVolume ' "$T/td.rec" | grep -c '"snapshot_id":"handle-s1"')" 1
check "the log says what was added and removed" bash -c "grep -q 'Added finalizer $F to snapshot default/s1' '$T/p1.log' && grep -q 'Removed finalizer $F from snapshot default/s1' '$T/p1.log'"
stop_checked p1
td_stop

# 2. A final failure keeps it while the claim is Pending; the claim deleted, the sweep removes it.
td_start --fail CreateVolume=RESOURCE_EXHAUSTED
prov_start p2 "$T/td.sock" --snapshot-orphan-sweep-interval=1s
mk_snap s2
restore r2 s2
wait_for "the failure shown on the claim" 10 has_event PersistentVolumeClaim r2 "ProvisioningFailed: .*code = ResourceExhausted"
sleep 2
check "the finalizer stays while the claim is Pending" held s2
kc delete pvc r2 -n default --wait=false >/dev/null
wait_for "the claim gone" 10 claim_gone r2
wait_for "the sweep removes the finalizer of the deleted claim" 5 free_ s2
check "the snapshot itself stays" bash -c "kubectl --kubeconfig '$KC' get volumesnapshot s2 -n default >/dev/null"
stop_checked p2
td_stop

# 3. A provisioner killed mid-restore leaves an orphan; 0 disables the sweep, 1s sweeps it.
td_start --slow CreateVolume=8s
prov_start p3 "$T/td.sock" --timeout 30s
mk_snap s3
restore r3 s3
wait_for "the finalizer while CreateVolume runs" 10 held s3
kill9 p3
kc delete pvc r3 -n default --wait=false >/dev/null
wait_for "the claim gone" 10 claim_gone r3
check "the killed provisioner left the finalizer" held s3
prov_start p4 "$T/td.sock" --snapshot-orphan-sweep-interval=0
wait_for "p4 started" 10 grep -q "Started provisioner controller" "$T/p4.log"
sleep 2
check "--snapshot-orphan-sweep-interval=0: not swept" held s3
check "... and no sweep started" bash -c "! grep -q SnapshotFinalizerProtection '$T/p4.log'"
stop_checked p4
prov_start p5 "$T/td.sock" --snapshot-orphan-sweep-interval=1s
wait_for "the orphan swept" 10 free_ s3
check "the log names it" grep -q "SnapshotFinalizerProtection: removed orphaned finalizer from snapshot default/s3" "$T/p5.log"

# 4. A snapshot being deleted without the finalizer refuses a new restore.
mk_snap s4 '{"metadata":{"finalizers":["test.kcsi.dev/keep"]}}'
kc delete volumesnapshot s4 -n default --wait=false >/dev/null
restore r4 s4
wait_for "the refusal shown on the claim" 10 has_event PersistentVolumeClaim r4 \
	"ProvisioningFailed: error getting handle for DataSource Type VolumeSnapshot by Name s4: snapshot s4 is being deleted"
check "no finalizer added to it" eq "$(fins s4)" "test.kcsi.dev/keep"
check "no CreateVolume for it" eq "$(grep -c "\"name\":\"$(pv_of r4)\"" "$T/td.rec")" 0
req PATCH "$VS/namespaces/default/volumesnapshots/s4" '{"metadata":{"finalizers":null}}' application/merge-patch+json
# 5. The finalizer's update refused (409): no CreateVolume without it; the retry sets it.
req POST /emulator/faults '{"reset":true,"rules":[{"verb":"update","resource":"volumesnapshots","code":409,"times":1}]}'
expect_code 200 "fault rule"
mk_snap s5
restore r5 s5
wait_for "the conflict shown on the claim" 10 has_event PersistentVolumeClaim r5 "ProvisioningFailed: .*Operation cannot be fulfilled on volumesnapshots"
wait_for "the retry protects the snapshot" 10 held s5
wait_for "... and provisions" 20 pv_exists "$(pv_of r5)"
wait_for "... and releases it" 10 free_ s5
check "one CreateVolume for it, none before the finalizer was set" eq "$(grep -c "^CreateVolume .*\"name\":\"$(pv_of r5)\"" "$T/td.rec")" 1
stop_checked p5
td_stop
check "no sanitizer report from a provisioner" bash -c "! grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' '$T'/p[1-5].log"
att_finish
