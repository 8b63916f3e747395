#!/bin/bash
# kube-emulator serves the group snapshot kinds at two versions from one store, as kube-apiserver
# serves a CRD with several served versions (external-snapshotter v8.6's CRDs: v1beta2 stored, v1
# served with the same schema): an object created at one version reads at both, each answer and
# watch event carrying the version the client addressed; discovery lists both, v1 preferred.
. "$(dirname "$0")/lib_emulator.sh"
emu_start
G=/apis/groupsnapshot.storage.k8s.io

# discovery: the group lists v1 and v1beta2, v1 first and preferred; both resource lists answer
req GET /apis/groupsnapshot.storage.k8s.io
expect_code 200 "APIGroup"
check "group versions v1, v1beta2" eq "$(jqo '[.versions[].version] | join(",")')" "v1,v1beta2"
check "preferred version v1" eq "$(jqo .preferredVersion.groupVersion)" "groupsnapshot.storage.k8s.io/v1"
req GET /apis
check "/apis names both versions" eq "$(jqo '.groups[] | select(.name == "groupsnapshot.storage.k8s.io") | [.versions[].version] | join(",")')" "v1,v1beta2"
for v in v1 v1beta2; do
	req GET "$G/$v"
	expect_code 200 "resource list $v"
	check "resource list $v: groupVersion" eq "$(jqo .groupVersion)" "groupsnapshot.storage.k8s.io/$v"
	check "resource list $v: the three kinds" eq "$(jqo '[.resources[] | select(.name | contains("/") | not) | .kind] | sort | join(",")')" \
		"VolumeGroupSnapshot,VolumeGroupSnapshotClass,VolumeGroupSnapshotContent"
done

# a watch at v1 from now, before anything exists (open for a minute: the steps below took more
# than 5 s under ASan on a loaded machine; the test ends the watches once DELETED arrived)
req GET "$G/v1/namespaces/default/volumegroupsnapshots"
RV0=$(jqo .metadata.resourceVersion)
curl -sN "$S$G/v1/namespaces/default/volumegroupsnapshots?watch=1&resourceVersion=$RV0&timeoutSeconds=60" >"$T/w1" &
W1=$!
curl -sN "$S$G/v1beta2/namespaces/default/volumegroupsnapshots?watch=1&resourceVersion=$RV0&timeoutSeconds=60" >"$T/w2" &
W2=$!
sleep 0.5

# created at v1: the answer says v1; read at v1beta2 it says v1beta2; one object, one UID
req POST "$G/v1/namespaces/default/volumegroupsnapshots" \
	'{"apiVersion":"groupsnapshot.storage.k8s.io/v1","kind":"VolumeGroupSnapshot","metadata":{"name":"g1"},"spec":{"volumeGroupSnapshotClassName":"c","source":{"selector":{"matchLabels":{"app":"db"}}}}}'
expect_code 201 "create at v1"
check "create answers at v1" eq "$(jqo .apiVersion)" "groupsnapshot.storage.k8s.io/v1"
UID1=$(jqo .metadata.uid)
req GET "$G/v1beta2/namespaces/default/volumegroupsnapshots/g1"
expect_code 200 "get at v1beta2"
check "get at v1beta2 answers v1beta2" eq "$(jqo .apiVersion)" "groupsnapshot.storage.k8s.io/v1beta2"
check "same object" eq "$(jqo .metadata.uid)" "$UID1"
check "spec kept" eq "$(jqo .spec.source.selector.matchLabels.app)" "db"
req GET "$G/v1/namespaces/default/volumegroupsnapshots/g1"
check "get at v1 answers v1" eq "$(jqo .apiVersion)" "groupsnapshot.storage.k8s.io/v1"

# lists: the list and its items in the addressed version; one item either way
req GET "$G/v1/volumegroupsnapshots"
check "list at v1" eq "$(jqo '[.apiVersion, .kind, (.items | length), .items[0].apiVersion] | join(" ")')" \
	"groupsnapshot.storage.k8s.io/v1 VolumeGroupSnapshotList 1 groupsnapshot.storage.k8s.io/v1"
req GET "$G/v1beta2/volumegroupsnapshots"
check "list at v1beta2" eq "$(jqo '[.apiVersion, (.items | length), .items[0].apiVersion] | join(" ")')" \
	"groupsnapshot.storage.k8s.io/v1beta2 1 groupsnapshot.storage.k8s.io/v1beta2"

# status written at v1beta2 (a v8.5 controller), read at v1 (a v8.6 one)
req PATCH "$G/v1beta2/namespaces/default/volumegroupsnapshots/g1/status" '{"status":{"readyToUse":true}}' application/merge-patch+json
expect_code 200 "status patch at v1beta2"
check "patch answers v1beta2" eq "$(jqo .apiVersion)" "groupsnapshot.storage.k8s.io/v1beta2"
req GET "$G/v1/namespaces/default/volumegroupsnapshots/g1"
check "status seen at v1" eq "$(jqo .status.readyToUse)" "true"
# an update at v1 of an object read at v1
jq '.metadata.labels = {"tier": "gold"}' "$T/out" >"$T/upd"
req PUT "$G/v1/namespaces/default/volumegroupsnapshots/g1" "$(cat "$T/upd")"
expect_code 200 "update at v1"
check "update answers v1" eq "$(jqo .apiVersion)" "groupsnapshot.storage.k8s.io/v1"
# a body naming a version nobody serves is refused
req POST "$G/v1/namespaces/default/volumegroupsnapshots" \
	'{"apiVersion":"groupsnapshot.storage.k8s.io/v1alpha1","kind":"VolumeGroupSnapshot","metadata":{"name":"g2"}}'
expect_code 400 "create with an unserved apiVersion"
req GET "$G/v1alpha1/volumegroupsnapshots"
expect_code 404 "an unserved version"

# delete at v1: the answer at v1; gone at both
req DELETE "$G/v1/namespaces/default/volumegroupsnapshots/g1"
expect_code 200 "delete at v1"
req GET "$G/v1beta2/namespaces/default/volumegroupsnapshots/g1"
expect_code 404 "gone at v1beta2"

# the watches saw ADDED, MODIFIED x2, DELETED, each in their own version only
for _ in $(seq 1 200); do
	grep -q '"DELETED"' "$T/w1" && grep -q '"DELETED"' "$T/w2" && break
	sleep 0.1
done
kill "$W1" "$W2" 2>/dev/null
wait "$W1" "$W2"
check "v1 watch: 4 events" eq "$(jq -r .type "$T/w1" | tr '\n' ' ')" "ADDED MODIFIED MODIFIED DELETED "
check "v1 watch: all v1" eq "$(jq -r .object.apiVersion "$T/w1" | sort -u)" "groupsnapshot.storage.k8s.io/v1"
check "v1beta2 watch: 4 events" eq "$(jq -r .type "$T/w2" | tr '\n' ' ')" "ADDED MODIFIED MODIFIED DELETED "
check "v1beta2 watch: all v1beta2" eq "$(jq -r .object.apiVersion "$T/w2" | sort -u)" "groupsnapshot.storage.k8s.io/v1beta2"

# kubectl reaches the kinds at its preferred version (v1), and names either explicitly
if command -v "${KUBECTL:-kubectl}" >/dev/null; then
	K=("${KUBECTL:-kubectl}" --kubeconfig "$KC" --request-timeout=20s)
	printf 'apiVersion: groupsnapshot.storage.k8s.io/v1\nkind: VolumeGroupSnapshotClass\nmetadata: {name: c}\ndriver: d\ndeletionPolicy: Delete\n' \
		| "${K[@]}" apply -f - >/dev/null || fail "kubectl apply at v1"
	check "kubectl get vgsclass -o json: v1" eq "$("${K[@]}" get vgsclass c -o jsonpath='{.apiVersion}')" "groupsnapshot.storage.k8s.io/v1"
	check "kubectl get at v1beta2" eq "$("${K[@]}" get volumegroupsnapshotclasses.v1beta2.groupsnapshot.storage.k8s.io c -o jsonpath='{.apiVersion}')" "groupsnapshot.storage.k8s.io/v1beta2"
fi
finish
