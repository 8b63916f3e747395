#!/bin/bash
# e2e: group snapshots with kube-emulator, csi-testdriver, snapshot-controller and
# csi-snapshotter (both with --feature-gates CSIVolumeGroupSnapshot=true). A VolumeGroupSnapshot
# of two labelled claims (a third, unlabelled, stays out) gets its content from the default
# group class, CreateVolumeGroupSnapshot is called once with both volumes, the group becomes ready
# with two member VolumeSnapshots bound to pre-provisioned style contents; deleting the group
# (policy Delete) calls DeleteVolumeGroupSnapshot and leaves nothing behind; snapshot-controller's
# operation metric counts the group's create, ready and delete. The driver reports
# the members not ready at first (--group-members-unready): csi-snapshotter asks ListSnapshots
# about each member with the group class's secret (copied into the member contents'
# deletion-secret annotations), never CreateSnapshot.
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
. "$(dirname "$0")/lib_provisioner.sh"
DRV=testdriver.kcsi.dev
. "$(dirname "$0")/lib_snapshot.sh"

GATE=(--feature-gates CSIVolumeGroupSnapshot=true)
emu_start
td_start --group-members-unready
mk_secret groupsecret token g-s3cr3t
mk_bound_claim c1 vol-1
mk_bound_claim c2 vol-2
mk_bound_claim c3 vol-3
kc label pvc c1 c2 -n default app=db >/dev/null
jq -n --arg d "$DRV" '{apiVersion: "groupsnapshot.storage.k8s.io/v1",
	kind: "VolumeGroupSnapshotClass", metadata: {name: "group-gold", annotations:
	{"groupsnapshot.storage.kubernetes.io/is-default-class": "true"}},
	driver: $d, deletionPolicy: "Delete", parameters: {type: "fast",
	"csi.storage.k8s.io/group-snapshotter-secret-name": "groupsecret",
	"csi.storage.k8s.io/group-snapshotter-secret-namespace": "default"}}' | kc create -f - >/dev/null
sctrl_start "${GATE[@]}" --http-endpoint 127.0.0.1:0 -v 5
snapper_start snapper "$T/td.sock" "${GATE[@]}" -v 5

# 1. A group snapshot of the claims labelled app=db becomes ready.
jq -n '{apiVersion: "groupsnapshot.storage.k8s.io/v1", kind: "VolumeGroupSnapshot",
	metadata: {name: "g1", namespace: "default"},
	spec: {source: {selector: {matchLabels: {app: "db"}}}}}' | kc create -f - >/dev/null
g_json() { kc get volumegroupsnapshot "$1" -n default -o json 2>/dev/null || true; }
wait_for "g1 readyToUse" 30 vgs_ready g1
G=$(g_json g1)
GUID=$(echo "$G" | jq -r .metadata.uid)
GC=groupsnapcontent-$GUID
check "default group class named in the group" eq "$(echo "$G" | jq -r .spec.volumeGroupSnapshotClassName)" group-gold
check "group bound to groupsnapcontent-<uid>" eq "$(echo "$G" | jq -r .status.boundVolumeGroupSnapshotContentName)" "$GC"
check "group creationTime set" bash -c "[ -n '$(echo "$G" | jq -r '.status.creationTime // ""')' ]"
check "group finalizer" eq "$(echo "$G" | jq -r '.metadata.finalizers | join(",")')" \
	groupsnapshot.storage.kubernetes.io/volumegroupsnapshot-bound-protection
C=$(kc get volumegroupsnapshotcontent "$GC" -o json)
check "content spec: driver, policy, class, the two labelled volumes" eq \
	"$(echo "$C" | jq -r '.spec | "\(.driver) \(.deletionPolicy) \(.volumeGroupSnapshotClassName) \(.source.volumeHandles | sort | join(","))"')" \
	"$DRV Delete group-gold vol-1,vol-2"
check "content ref names the group with its uid" eq \
	"$(echo "$C" | jq -r '.spec.volumeGroupSnapshotRef | "\(.namespace)/\(.name) \(.uid)"')" "default/g1 $GUID"
check "content status: the driver's group handle, ready, two members" eq \
	"$(echo "$C" | jq -r '.status | "\(.volumeGroupSnapshotHandle) \(.readyToUse) \(.volumeSnapshotInfoList | length)"')" \
	"group-groupsnapshot-$GUID true 2"
check "content finalizer" eq "$(echo "$C" | jq -r '.metadata.finalizers | join(",")')" \
	groupsnapshot.storage.kubernetes.io/volumegroupsnapshotcontent-bound-protection
R=$(td_calls CreateVolumeGroupSnapshot | head -1)
check "one CreateVolumeGroupSnapshot" eq "$(td_calls CreateVolumeGroupSnapshot | wc -l)" 1
check "CreateVolumeGroupSnapshot name, volumes, parameters" eq \
	"$(echo "$R" | jq -r '"\(.name) \(.source_volume_ids | sort | join(",")) \(.parameters | tojson)"')" \
	"groupsnapshot-$GUID vol-1,vol-2 {\"type\":\"fast\"}"
check "CreateVolumeGroupSnapshot with the class's group secret" eq "$(echo "$R" | jq -c .secrets)" '{"token":"g-s3cr3t"}'

# the members: snapshot-<sha256(group uid + handle)> bound to snapcontent-<same>
member() { printf 'snapshot-%s' "$(printf '%s%s' "$GUID" "$1" | sha256sum | cut -d' ' -f1)"; }
M1=$(member vol-1)
M2=$(member vol-2)
m_ready() { vs_ready "$M1" && vs_ready "$M2"; }
wait_for "member snapshots ready" 20 m_ready
MS=$(vs_json "$M1")
check "member's claim, content and group" eq \
	"$(echo "$MS" | jq -r '"\(.spec.source.persistentVolumeClaimName) \(.status.boundVolumeSnapshotContentName)"')" \
	"c1 snapcontent-${M1#snapshot-}"
check "member owned by the group" eq \
	"$(echo "$MS" | jq -r '.metadata.ownerReferences[0] | "\(.kind) \(.name) \(.uid)"')" "VolumeGroupSnapshot g1 $GUID"
check "member in-group finalizer" bash -c "echo '$(echo "$MS" | jq -c .metadata.finalizers)' | grep -q volumesnapshot-in-group-protection"
MC=$(vsc_json "snapcontent-${M2#snapshot-}")
check "member content: handle from the group, bound to the member" eq \
	"$(echo "$MC" | jq -r '"\(.status.snapshotHandle) \(.status.readyToUse) \(.spec.source.volumeHandle) \(.spec.volumeSnapshotRef.name)"')" \
	"group-groupsnapshot-$GUID-vol-2 true vol-2 $M2"
check "member content: the group's secret in its deletion-secret annotations" eq \
	"$(echo "$MC" | jq -r '.metadata.annotations | "\(.["snapshot.storage.kubernetes.io/deletion-secret-name"]) \(.["snapshot.storage.kubernetes.io/deletion-secret-namespace"])"')" \
	"groupsecret default"
L=$(td_calls ListSnapshots | jq -c 'select(.snapshot_id == "group-groupsnapshot-'"$GUID"'-vol-2")' | tail -1)
check "a member not ready: ListSnapshots by its ID with the group's secret" eq "$(echo "$L" | jq -c .secrets)" '{"token":"g-s3cr3t"}'
check "no CreateSnapshot for the members" eq "$(td_calls CreateSnapshot | wc -l)" 0
check "the secret value is not logged" bash -c "! grep -q g-s3cr3t '$T/snapper.log' '$T/sctrl.log'"
check "kubectl get vgs shows the group ready" bash -c "kubectl --kubeconfig '$KC' get vgs g1 -n default --no-headers | grep -q '^g1 *true *group-gold *$GC'"
wait_for "event GroupSnapshotReady" 10 has_event VolumeGroupSnapshot g1 "GroupSnapshotReady: GroupSnapshot default/g1 is ready to use."

# 2. Deleting the group: members, contents, the driver's group all go.
kc delete volumegroupsnapshot g1 -n default --wait=false >/dev/null
wait_for "group, content, members and their contents gone" 30 group_all_gone g1 "$GC"
check "DeleteVolumeGroupSnapshot called for the group" bash -c \
	"grep '^DeleteVolumeGroupSnapshot ' '$T/td.rec' | grep -q '\"group_snapshot_id\":\"group-groupsnapshot-$GUID\"'"
check "DeleteVolumeGroupSnapshot with the group's deletion secret" eq \
	"$(td_calls DeleteVolumeGroupSnapshot | tail -1 | jq -c .secrets)" '{"token":"g-s3cr3t"}'
check "the driver holds no snapshot" eq "$(td_snapshots | wc -l)" 0

# 3. snapshot-controller's operation metric has the group operations, as v8.6 labels them.
curl -s "http://127.0.0.1:$(att_http_port sctrl)/metrics" >"$T/cm"
opcount() { sed -n "s/^snapshot_controller_operation_total_seconds_count{driver_name=\"$DRV\",operation_name=\"$1\",operation_status=\"$2\",snapshot_type=\"$3\"} //p" "$T/cm"; }
check "CreateGroupSnapshot observed once" eq "$(opcount CreateGroupSnapshot success dynamic)" 1
check "CreateGroupSnapshotAndReady observed once" eq "$(opcount CreateGroupSnapshotAndReady success dynamic)" 1
check "DeleteGroupSnapshot observed once" eq "$(opcount DeleteGroupSnapshot success dynamic)" 1
check "operations in flight: none pending" grep -qx 'snapshot_controller_operations_in_flight 0' "$T/cm"

sigterm_checked snapper sctrl
[ "$FAILS" -eq 0 ] || { tail -60 "$T/sctrl.log" >&2; tail -40 "$T/snapper.log" >&2; }
finish
