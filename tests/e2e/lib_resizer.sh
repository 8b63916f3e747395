# lib_resizer.sh: helpers for csi-resizer e2e scenarios (sourced after lib_emulator.sh,
# lib_attacher.sh and lib_provisioner.sh). The scenarios make bound claims themselves, as the
# provisioner and the binder would leave them:
#
# rsz_start NAME SOCK [flags]      csi-resizer NAME against SOCK, log in $T/NAME.log (ATT_PIDS)
# mk_bound CLAIM SIZE SC HANDLE [pv-spec-json]
#                                  a claim of SIZE bound to PV "pv-CLAIM" of driver $DRV
# resize CLAIM SIZE                sets the claim's request, as "kubectl edit" would
# rsz_finish                       att_finish after a check of every log for sanitizer reports
# cond_of CLAIM TYPE               the status of a claim condition ("" when absent)
# rstatus_of CLAIM                 status.allocatedResourceStatuses.storage ("" when absent)
rsz_start() {
	local name=$1 sock=$2
	shift 2
	"$KCSI_BIN/csi-resizer" --csi-address "unix://$sock" --kubeconfig "$KC" \
		--retry-interval-start 200ms --retry-interval-max 2s "$@" >>"$T/$name.log" 2>&1 &
	ATT_PIDS[$name]=$!
}

mk_bound() {
	local claim=$1 size=$2 sc=$3 handle=$4 extra=${5:-"{}"} uid
	jq -n --arg n "$claim" --arg sc "$sc" --arg s "$size" '{
		apiVersion: "v1", kind: "PersistentVolumeClaim", metadata: {name: $n, namespace: "default"},
		spec: {storageClassName: $sc, accessModes: ["ReadWriteOnce"], volumeName: ("pv-" + $n),
		       resources: {requests: {storage: $s}}}}' | kc create -f - >/dev/null
	uid=$(pvc_uid "$claim")
	jq -n --arg n "$claim" --arg sc "$sc" --arg s "$size" --arg d "$DRV" --arg h "$handle" \
		--arg u "$uid" --argjson x "$extra" '{
		apiVersion: "v1", kind: "PersistentVolume", metadata: {name: ("pv-" + $n)},
		spec: ({capacity: {storage: $s}, accessModes: ["ReadWriteOnce"], storageClassName: $sc,
		        persistentVolumeReclaimPolicy: "Delete",
		        claimRef: {namespace: "default", name: $n, uid: $u},
		        csi: {driver: $d, volumeHandle: $h, fsType: "ext4"}} * $x)}' | kc create -f - >/dev/null
	status_patch "/api/v1/namespaces/default/persistentvolumeclaims/$claim" \
		"{\"status\":{\"phase\":\"Bound\",\"capacity\":{\"storage\":\"$size\"}}}"
	status_patch "/api/v1/persistentvolumes/pv-$claim" '{"status":{"phase":"Bound"}}'
}

resize() {
	req PATCH "/api/v1/namespaces/default/persistentvolumeclaims/$1" \
		"{\"spec\":{\"resources\":{\"requests\":{\"storage\":\"$2\"}}}}" application/merge-patch+json
	expect_code 200 "resize $1 to $2"
}

cond_of() { pvc_field "$1" "[.status.conditions[]? | select(.type==\"$2\") | .status][0] // \"\""; }
rstatus_of() { pvc_field "$1" '.status.allocatedResourceStatuses.storage // ""'; }
pv_cap() { pv_field "pv-$1" .spec.capacity.storage; }

# rsz_finish: fails on a sanitizer report in any component's log (the -DKCSI_SANITIZE=ON build
# checks csi-resizer and the drivers, not only the emulator), then att_finish.
rsz_finish() {
	if grep -lE "ERROR: (Address|Leak)Sanitizer|runtime error:" "$T"/*.log >/dev/null 2>&1; then
		fail "sanitizer report in $(grep -lE "ERROR: (Address|Leak)Sanitizer|runtime error:" "$T"/*.log | tr '\n' ' ')"
		grep -hA30 -E "ERROR: (Address|Leak)Sanitizer|runtime error:" "$T"/*.log | head -80 >&2
	fi
	att_finish
}
