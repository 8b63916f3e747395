#!/bin/bash
# e2e: external-snapshotter v8.7's start-up of snapshot-controller and csi-snapshotter, with
# kube-emulator (a 404 fault rule plays a cluster without a CRD) and csi-testdriver.
#  1. The group CRDs missing, the gate at its default (on, GA in v8.7): both log upstream's
#     warning and run without group snapshots (v8.6 with the gate on exited 1); single
#     snapshots work and no group kind is asked for again.
#  2. The snapshot CRDs missing: snapshot-controller exits 1 after --retry-crd-interval-max with
#     upstream's message.
#  3. --worker-threads=0 is accepted as upstream accepts it: nothing is processed;
#     CSIVolumeGroupSnapshot=false logs upstream's GA warning and skips the group check.
#  4. The kinds served, no gate given: a group snapshot becomes ready. The driver answers the
#     group not ready at first: csi-snapshotter asks again after the queue's back-off, not at
#     the echo of its own status write (v8.7, "requeue ... with backoff").
#  5. --resync is refused by both, as upstream refuses it.
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
. "$(dirname "$0")/lib_provisioner.sh"
DRV=testdriver.kcsi.dev
. "$(dirname "$0")/lib_snapshot.sh"

# sc_start NAME [flags]: a snapshot-controller logging to $T/NAME.log (ATT_PIDS[NAME]).
sc_start() {
	local name=$1
	shift
	"$KCSI_BIN/snapshot-controller" --kubeconfig "$KC" --retry-interval-start 200ms \
		--retry-interval-max 2s "$@" >"$T/$name.log" 2>&1 &
	ATT_PIDS[$name]=$!
}
faults() { curl -s -X POST -H 'Content-Type: application/json' --data-binary "$1" "$S/emulator/faults" >/dev/null; }
not_found() { curl -s "$S/emulator/faults" | jq -r .counters.notFound404; }
GROUP_KINDS_GONE='{"reset":true,"rules":[
	{"resource":"volumegroupsnapshots","code":404},
	{"resource":"volumegroupsnapshotcontents","code":404},
	{"resource":"volumegroupsnapshotclasses","code":404}]}'
WARN='VolumeGroupSnapshot CRDs were not found; disabling the VolumeGroupSnapshot feature for this run. Install the VolumeGroupSnapshot CRDs to use this feature: '

emu_start
td_start --group-unready-calls 1
mk_vsclass gold
mk_bound_claim c1 vol-1
mk_bound_claim c2 vol-2
kc label pvc c1 c2 -n default app=db >/dev/null
jq -n --arg d "$DRV" '{apiVersion: "groupsnapshot.storage.k8s.io/v1",
	kind: "VolumeGroupSnapshotClass", metadata: {name: "group-gold", annotations:
	{"groupsnapshot.storage.kubernetes.io/is-default-class": "true"}},
	driver: $d, deletionPolicy: "Delete"}' | kc create -f - >/dev/null

# ---- 1. the group CRDs missing ----
faults "$GROUP_KINDS_GONE"
sc_start sctrl1 --retry-crd-interval-max 1s -v 2
snapper_start snapper1 "$T/td.sock" -v 2
wait_for "snapshot-controller's warning" 15 grep -qF "${WARN}context deadline exceeded" "$T/sctrl1.log"
wait_for "csi-snapshotter's warning, with the API's error" 15 \
	grep -qF "${WARN}the server could not find the requested resource" "$T/snapper1.log"
check "snapshot-controller looked for the group kinds as upstream logs it" \
	grep -q 'Failed to list v1 volumegroupsnapshots with error=' "$T/sctrl1.log"
mk_vs s1 '{"spec":{"volumeSnapshotClassName":"gold","source":{"persistentVolumeClaimName":"c1"}}}'
wait_for "a single snapshot still becomes ready" 20 vs_ready s1
n=$(not_found)
sleep 2
check "no group kind is asked for once the warning is out (no informer retrying)" eq "$(not_found)" "$n"
check "both still run" bash -c "kill -0 ${ATT_PIDS[sctrl1]} && kill -0 ${ATT_PIDS[snapper1]}"
check "no GroupController call without the group kinds" eq "$(td_calls CreateVolumeGroupSnapshot | wc -l)" 0
sigterm_checked snapper1 sctrl1

# ---- 2. the snapshot CRDs missing: exit 1 ----
faults '{"reset":true,"rules":[{"verb":"list","resource":"volumesnapshotclasses","code":404}]}'
start=$SECONDS
rc=0
timeout 20 "$KCSI_BIN/snapshot-controller" --kubeconfig "$KC" --retry-crd-interval-max 1s \
	>"$T/sctrl2.log" 2>&1 || rc=$?
check "snapshot-controller without the snapshot kinds exits 1" eq "$rc" 1
check "... after --retry-crd-interval-max, not at once" bash -c "[ $((SECONDS - start)) -le 10 ]"
check "... each failed list logged as upstream" \
	grep -q 'Failed to list v1 volumesnapshotclasses with error=' "$T/sctrl2.log"
check "... and upstream's reason" grep -q \
	'Exiting due to failure to ensure CRDs exist during startup: context deadline exceeded' "$T/sctrl2.log"

# ---- 3. --worker-threads=0, and the gate turned off ----
faults "$GROUP_KINDS_GONE"
sc_start sctrl3 --worker-threads=0 --feature-gates CSIVolumeGroupSnapshot=false
snapper_start snapper3 "$T/td.sock" --worker-threads 0 --feature-gates CSIVolumeGroupSnapshot=false
wait_for "both warn that no worker runs" 15 bash -c \
	"grep -q 'worker-threads=0: no worker' '$T/sctrl3.log' && grep -q 'worker-threads=0: no worker' '$T/snapper3.log'"
check "setting the GA gate logs upstream's warning" \
	grep -q 'Warning: setting GA feature gate. It will be removed in a future release. featureGate="CSIVolumeGroupSnapshot" value=false' "$T/sctrl3.log"
mk_vs s3 '{"spec":{"volumeSnapshotClassName":"gold","source":{"persistentVolumeClaimName":"c1"}}}'
sleep 2
check "with no worker the snapshot is left as it is" eq "$(vs_field s3 '.status // "none"')" none
check "the gate off: no group check, no warning" bash -c \
	"! grep -q 'VolumeGroupSnapshot CRDs were not found' '$T/sctrl3.log' '$T/snapper3.log'"
check "the gate off: no group kind asked for" eq "$(not_found)" 0
sigterm_checked snapper3 sctrl3
kc delete volumesnapshot s3 -n default --wait=false >/dev/null

# ---- 4. the kinds served, the gate at its default: groups, polled with back-off ----
faults '{"reset":true}'
sc_start sctrl4
snapper_start snapper4 "$T/td.sock" --retry-interval-start 3s -v 4
jq -n '{apiVersion: "groupsnapshot.storage.k8s.io/v1", kind: "VolumeGroupSnapshot",
	metadata: {name: "g1", namespace: "default"},
	spec: {source: {selector: {matchLabels: {app: "db"}}}}}' | kc create -f - >/dev/null
cgs() { td_calls CreateVolumeGroupSnapshot | wc -l; }
wait_for "the first CreateVolumeGroupSnapshot" 20 bash -c "[ \$(grep -c '^CreateVolumeGroupSnapshot ' '$T/td.rec') -ge 1 ]"
sleep 1
check "not ready: the sidecar's own status write does not bring the next call before the back-off (3s)" eq "$(cgs)" 1
wait_for "the group ready by default" 30 vgs_ready g1
check "ready at the second call" eq "$(cgs)" 2
GC=$(kc get volumegroupsnapshot g1 -n default -o jsonpath='{.status.boundVolumeGroupSnapshotContentName}')
check "the content lists both members" eq \
	"$(kc get volumegroupsnapshotcontent "$GC" -o json | jq '.status.volumeSnapshotInfoList | length')" 2
check "no warning with the kinds served" bash -c \
	"! grep -q 'VolumeGroupSnapshot CRDs were not found' '$T/sctrl4.log' '$T/snapper4.log'"
kc delete volumegroupsnapshot g1 -n default --wait=false >/dev/null
kc delete volumesnapshot s1 -n default --wait=false >/dev/null
wait_for "everything deleted" 30 group_all_gone g1 "$GC"
sigterm_checked snapper4 sctrl4

# ---- 5. --resync is not a flag of either ----
for b in snapshot-controller csi-snapshotter; do
	rc=0
	"$KCSI_BIN/$b" --resync 1m >"$T/resync.log" 2>&1 || rc=$?
	check "$b --resync: exit 2" eq "$rc" 2
	check "$b --resync: Go's message" grep -q 'flag provided but not defined: -resync' "$T/resync.log"
done

[ "$FAILS" -eq 0 ] || for f in sctrl1 snapper1 sctrl3 snapper3 sctrl4 snapper4; do
	echo "--- $f" >&2; tail -30 "$T/$f.log" >&2
done
finish
