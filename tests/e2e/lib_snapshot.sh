# lib_snapshot.sh: helpers for the snapshot e2e scenarios (sourced after lib_emulator.sh,
# lib_attacher.sh and lib_provisioner.sh).
#
# sctrl_start [flags]             snapshot-controller, log in $T/sctrl.log (ATT_PIDS[sctrl])
# snapper_start NAME SOCK [flags] csi-snapshotter NAME against SOCK, log in $T/NAME.log
# mk_vsclass NAME [extra-json]    VolumeSnapshotClass of driver $DRV, policy Delete
# mk_bound_claim NAME HANDLE      a claim and a CSI volume of $DRV bound to each other
# mk_vs NAME [extra-json]         a VolumeSnapshot in "default" (merged with extra)
# vs_json / vsc_json / vs_field / vsc_field / vs_exists / vsc_exists
# vs_ready NAME                   readyToUse is true
# content_of NAME                 "snapcontent-<uid of the snapshot>"
# td_calls METHOD                 the recorded requests of one CSI method (JSON, one a line)
# td_snapshots                    snapshot IDs the test driver holds
# vgs_ready NAME                  a VolumeGroupSnapshot in "default" is readyToUse
# group_all_gone NAME CONTENT     the group, its content and every VolumeSnapshot(Content) gone
# sigterm_checked NAME...         SIGTERM each, check exit 0 within a second and no sanitizer report

sctrl_start() {
	"$KCSI_BIN/snapshot-controller" --kubeconfig "$KC" --retry-interval-start 200ms \
		--retry-interval-max 2s "$@" >>"$T/sctrl.log" 2>&1 &
	ATT_PIDS[sctrl]=$!
}

snapper_start() {
	local name=$1 sock=$2
	shift 2
	"$KCSI_BIN/csi-snapshotter" --csi-address "unix://$sock" --kubeconfig "$KC" \
		--retry-interval-start 200ms --retry-interval-max 2s "$@" >>"$T/$name.log" 2>&1 &
	ATT_PIDS[$name]=$!
}

mk_vsclass() {
	local extra=${2:-"{}"}
	jq -n --arg n "$1" --arg d "$DRV" --argjson x "$extra" '{
		apiVersion: "snapshot.storage.k8s.io/v1", kind: "VolumeSnapshotClass",
		metadata: {name: $n}, driver: $d, deletionPolicy: "Delete"} * $x' |
		kc create -f - >/dev/null
}

mk_bound_claim() {
	local name=$1 handle=$2 uid
	jq -n --arg n "$name" '{apiVersion: "v1", kind: "PersistentVolumeClaim",
		metadata: {name: $n, namespace: "default"},
		spec: {accessModes: ["ReadWriteOnce"], volumeName: ("pv-" + $n),
		       resources: {requests: {storage: "16Mi"}}}}' | kc create -f - >/dev/null
	uid=$(pvc_uid "$name")
	jq -n --arg n "$name" --arg u "$uid" --arg d "$DRV" --arg h "$handle" '{
		apiVersion: "v1", kind: "PersistentVolume", metadata: {name: ("pv-" + $n)},
		spec: {capacity: {storage: "16Mi"}, accessModes: ["ReadWriteOnce"], volumeMode: "Filesystem",
		       persistentVolumeReclaimPolicy: "Delete", csi: {driver: $d, volumeHandle: $h},
		       claimRef: {kind: "PersistentVolumeClaim", namespace: "default", name: $n, uid: $u}}}' |
		kc create -f - >/dev/null
	status_patch "/api/v1/namespaces/default/persistentvolumeclaims/$name" '{"status":{"phase":"Bound"}}'
	status_patch "/api/v1/persistentvolumes/pv-$name" '{"status":{"phase":"Bound"}}'
}

mk_vs() {
	local extra=${2:-"{}"}
	jq -n --arg n "$1" --argjson x "$extra" '{
		apiVersion: "snapshot.storage.k8s.io/v1", kind: "VolumeSnapshot",
		metadata: {name: $n, namespace: "default"}, spec: {}} * $x' | kc create -f - >/dev/null
}

vs_json() { kc get volumesnapshot "$1" -n default -o json 2>/dev/null || true; }
vsc_json() { kc get volumesnapshotcontent "$1" -o json 2>/dev/null || true; }
vs_field() { vs_json "$1" | jq -r "$2"; }
vsc_field() { vsc_json "$1" | jq -r "$2"; }
vs_exists() { kc get volumesnapshot "$1" -n default >/dev/null 2>&1; }
vsc_exists() { kc get volumesnapshotcontent "$1" >/dev/null 2>&1; }
vs_ready() { [ "$(vs_field "$1" .status.readyToUse)" = true ]; }
content_of() { echo "snapcontent-$(vs_field "$1" .metadata.uid)"; }
td_calls() { grep "^$1 " "$T/td.rec" | cut -d' ' -f2- || true; }
td_snapshots() {
	"$KCSI_BIN/kcsi" --endpoint "unix://$T/td.sock" -o json controller list-snapshots |
		jq -r '.entries[]?.snapshot.snapshot_id'
}

sigterm_checked() {
	local n f start rc
	for n in "$@"; do
		start=$SECONDS
		kill -TERM "${ATT_PIDS[$n]}"
		rc=0
		wait "${ATT_PIDS[$n]}" || rc=$?
		unset "ATT_PIDS[$n]"
		check "$n exits 0 on SIGTERM" eq "$rc" 0
		check "$n exits within a second" bash -c "[ $((SECONDS - start)) -le 1 ]"
	done
	for f in "$@"; do
		if grep -qE "ERROR: (Address|Leak)Sanitizer|runtime error:" "$T/$f.log"; then
			fail "sanitizer report in $f.log"
			grep -A30 -E "ERROR: (Address|Leak)Sanitizer|runtime error:" "$T/$f.log" | head -40 >&2
		fi
	done
}

vgs_ready() {
	[ "$(kc get volumegroupsnapshot "$1" -n default -o jsonpath='{.status.readyToUse}' 2>/dev/null)" = true ]
}
group_all_gone() {
	! kc get volumegroupsnapshot "$1" -n default >/dev/null 2>&1 &&
		! kc get volumegroupsnapshotcontent "$2" >/dev/null 2>&1 &&
		[ "$(kc get volumesnapshots -A -o json | jq '.items | length')" = 0 ] &&
		[ "$(kc get volumesnapshotcontents -o json | jq '.items | length')" = 0 ]
}
