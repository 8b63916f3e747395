#!/bin/bash
# e2e: what goes wrong around snapshots, reported as upstream's external-snapshotter v8 does:
# a missing or unbound claim, a missing class, no default class, a class of another driver, a
# pre-provisioned content of another snapshot, both sources (the CRD's rule, kube-emulator has
# no CEL), a driver failing then succeeding, a snapshot deleted while CreateSnapshot runs, a
# driver without CREATE_DELETE_SNAPSHOT, a driver that dies.
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
. "$(dirname "$0")/lib_provisioner.sh"
DRV=testdriver.kcsi.dev
. "$(dirname "$0")/lib_snapshot.sh"

emu_start
# The first two CreateSnapshot calls fail for good (INTERNAL); later ones take 3 s.
td_start --fail-count CreateSnapshot=2 --fail CreateSnapshot=INTERNAL
mk_vsclass gold
mk_vsclass other '{"driver":"other.kcsi.dev"}'
mk_bound_claim c1 vol-1
sctrl_start -v 4
snapper_start snapper "$T/td.sock" -v 4
vs_error() { vs_field "$1" '.status.error.message // ""'; }
err_has() { vs_error "$1" | grep -qF -- "$2"; }

# 1. A driver error: on the content and the snapshot, then retried until it succeeds.
mk_vs s1 '{"spec":{"volumeSnapshotClassName":"gold","source":{"persistentVolumeClaimName":"c1"}}}'
VSC1=$(content_of s1)
wait_for "event SnapshotCreationFailed on the content" 15 has_event VolumeSnapshotContent "$VSC1" \
	"SnapshotCreationFailed: Failed to create snapshot: failed to take snapshot of the volume vol-1: \"rpc error: code = Internal desc = injected failure"
wait_for "s1 ready after the driver recovers" 30 vs_ready s1
check "error cleared once ready" eq "$(vs_error s1)" ""
check "being-created annotation removed after the final error and the success" eq \
	"$(vsc_field "$VSC1" '.metadata.annotations["snapshot.storage.kubernetes.io/volumesnapshot-being-created"] // "none"')" none
check "one driver snapshot for the content" eq "$(td_snapshots | grep -c "$(vs_field s1 .metadata.uid)")" 1

# 2. A claim that does not exist, one that is not bound.
mk_vs nopvc '{"spec":{"volumeSnapshotClassName":"gold","source":{"persistentVolumeClaimName":"ghost"}}}'
wait_for "claim missing reported" 15 has_event VolumeSnapshot nopvc \
	'SnapshotContentCreationFailed: Failed to create snapshot content with error failed to get input parameters to create snapshot nopvc: "failed to retrieve PVC ghost from the lister'
check "not ready" eq "$(vs_field nopvc .status.readyToUse)" false
jq -n '{apiVersion:"v1",kind:"PersistentVolumeClaim",metadata:{name:"pending",namespace:"default"},
	spec:{accessModes:["ReadWriteOnce"],resources:{requests:{storage:"1Mi"}}}}' | kc create -f - >/dev/null
mk_vs unbound '{"spec":{"volumeSnapshotClassName":"gold","source":{"persistentVolumeClaimName":"pending"}}}'
wait_for "unbound claim reported" 15 err_has unbound "the PVC pending is not yet bound to a PV, will not attempt to take a snapshot"

# 3. A missing class, no default class, a class of another driver.
mk_vs noclass '{"spec":{"volumeSnapshotClassName":"ghost","source":{"persistentVolumeClaimName":"c1"}}}'
wait_for "GetSnapshotClassFailed" 15 has_event VolumeSnapshot noclass \
	'GetSnapshotClassFailed: Failed to get snapshot class with error failed to retrieve snapshot class ghost from the informer'
mk_vs nodefault '{"spec":{"source":{"persistentVolumeClaimName":"c1"}}}'
wait_for "SetDefaultSnapshotClassFailed" 15 has_event VolumeSnapshot nodefault \
	'SetDefaultSnapshotClassFailed: Failed to set default snapshot class with error cannot find default snapshot class'
mk_vs foreign '{"spec":{"volumeSnapshotClassName":"other","source":{"persistentVolumeClaimName":"c1"}}}'
wait_for "content of the other driver" 15 vsc_exists "$(content_of foreign)"
sleep 1
check "content carries the class's driver" eq "$(vsc_field "$(content_of foreign)" .spec.driver)" other.kcsi.dev
check "our driver is never asked" bash -c "! grep '^CreateSnapshot ' '$T/td.rec' | grep -q '$(vs_field foreign .metadata.uid)'"
check "the foreign snapshot is not ready" eq "$(vs_field foreign .status.readyToUse)" false

# 4. Both sources; a pre-provisioned content bound to another snapshot.
mk_vs both '{"spec":{"source":{"persistentVolumeClaimName":"c1","volumeSnapshotContentName":"x"}}}'
wait_for "SnapshotValidationError" 15 has_event VolumeSnapshot both \
	'SnapshotValidationError: Exactly one of PersistentVolumeClaimName and VolumeSnapshotContentName should be specified'
jq -n --arg d "$DRV" '{apiVersion:"snapshot.storage.k8s.io/v1",kind:"VolumeSnapshotContent",metadata:{name:"taken"},
	spec:{driver:$d,deletionPolicy:"Retain",source:{snapshotHandle:"h-x"},volumeSnapshotRef:{name:"owner",namespace:"default"}}}' |
	kc create -f - >/dev/null
mk_vs thief '{"spec":{"source":{"volumeSnapshotContentName":"taken"}}}'
wait_for "SnapshotContentMisbound" 15 has_event VolumeSnapshot thief \
	'SnapshotContentMisbound: VolumeSnapshotContent \[taken\] is bound to a different snapshot'
check "the content is never rebound" eq "$(vsc_field taken '.spec.volumeSnapshotRef | "\(.name) \(.uid // "")"')" "owner "

# 5. Deleted while CreateSnapshot runs: the call finishes, then the snapshot is deleted.
kill -KILL "${ATT_PIDS[snapper]}"; wait "${ATT_PIDS[snapper]}" 2>/dev/null
td_stop
td_start --slow CreateSnapshot=3s
snapper_start snapper "$T/td.sock" -v 4
mk_vs slow '{"spec":{"volumeSnapshotClassName":"gold","source":{"persistentVolumeClaimName":"c1"}}}'
VSCS=$(content_of slow)
creating() { [ "$(vsc_field "$VSCS" '.metadata.annotations["snapshot.storage.kubernetes.io/volumesnapshot-being-created"] // ""')" = yes ]; }
wait_for "CreateSnapshot in progress" 15 creating
kc delete volumesnapshot slow -n default --wait=false >/dev/null
gone_slow() { ! vs_exists slow && ! vsc_exists "$VSCS"; }
wait_for "snapshot and content gone after the call ended" 30 gone_slow
UIDS=${VSCS#snapcontent-}
check "DeleteSnapshot of the snapshot the slow call made" bash -c "grep '^DeleteSnapshot ' '$T/td.rec' | grep -q 'snap-snapshot-$UIDS'"
check "nothing leaked on the driver" bash -c "! '$KCSI_BIN/kcsi' --endpoint 'unix://$T/td.sock' -o json controller list-snapshots | grep -q '$UIDS'"

# 6. A driver without CREATE_DELETE_SNAPSHOT; a driver that dies.
"$KCSI_TESTS/csi-testdriver" --endpoint "unix://$T/nosnap.sock" --controller-caps CREATE_DELETE_VOLUME \
	>>"$T/nosnap.log" 2>&1 &
NOSNAP=$!
wait_sock "$T/nosnap.sock"
rc=0
timeout 20 "$KCSI_BIN/csi-snapshotter" --csi-address "unix://$T/nosnap.sock" --kubeconfig "$KC" \
	>"$T/nosnap-sidecar.log" 2>&1 || rc=$?
check "exits 1 without CREATE_DELETE_SNAPSHOT" eq "$rc" 1
check "says why" grep -q "CSI driver testdriver.kcsi.dev does not support ControllerCreateSnapshot" "$T/nosnap-sidecar.log"
kill -TERM "$NOSNAP"; wait "$NOSNAP" 2>/dev/null
td_stop
rc=0
for _ in $(seq 1 50); do kill -0 "${ATT_PIDS[snapper]}" 2>/dev/null || break; sleep 0.1; done
wait "${ATT_PIDS[snapper]}" || rc=$?
unset "ATT_PIDS[snapper]"
check "csi-snapshotter exits non-zero when its driver dies" bash -c "[ $rc -ne 0 ]"
check "and says so" grep -q "Lost connection to CSI driver" "$T/snapper.log"

if grep -qE "ERROR: (Address|Leak)Sanitizer|runtime error:" "$T/snapper.log" "$T/sctrl.log"; then
	fail "sanitizer report in a snapshot component's log"
fi
[ "$FAILS" -eq 0 ] || { tail -30 "$T/sctrl.log" >&2; grep -v "controller.c:63]" "$T/snapper.log" | tail -60 >&2; }
finish
