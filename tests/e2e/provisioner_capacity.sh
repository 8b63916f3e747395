#!/bin/bash
# e2e: csi-provisioner --enable-capacity against csi-testdriver: CSIStorageCapacity objects per
# (topology segment, WaitForFirstConsumer class) with the driver's capacity, the pod's StatefulSet
# as owner and upstream's labels; they follow the driver's capacity, a new node, a new and a
# deleted class; a restart adopts them (no duplicates); objects of other owners are left alone and
# stale ones of ours are deleted; missing NAMESPACE is a clear error (POD_NAMESPACE, the leader
# election's, does not count: upstream reads NAMESPACE only).
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
DRV=testdriver.kcsi.dev
. "$(dirname "$0")/lib_provisioner.sh"
ZK=topology.kcsi.dev/zone
OWNER=11111111-1111-4111-8111-111111111111
OTHER=22222222-2222-4222-8222-222222222222

topo_node() { # NAME ZONE|"" DRIVER
	local labels="{}"
	[ -n "$2" ] && labels="{\"$ZK\":\"$2\"}"
	echo "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"$1\",\"labels\":$labels}}" | kc create -f - >/dev/null
	echo "{\"apiVersion\":\"storage.k8s.io/v1\",\"kind\":\"CSINode\",\"metadata\":{\"name\":\"$1\"},\"spec\":{\"drivers\":[{\"name\":\"$3\",\"nodeID\":\"$1\",\"topologyKeys\":[\"$ZK\"]}]}}" | kc create -f - >/dev/null
}
# csisc NAME MANAGED-BY OWNER-UID CLASS ZONE CAPACITY: an object made by someone else
csisc() {
	jq -n --arg n "$1" --arg m "$2" --arg u "$3" --arg c "$4" --arg z "$5" --arg cap "$6" --arg d "$DRV" --arg k "$ZK" '{
		apiVersion: "storage.k8s.io/v1", kind: "CSIStorageCapacity",
		metadata: {name: $n, namespace: "default",
			   labels: {"csi.storage.k8s.io/drivername": $d, "csi.storage.k8s.io/managed-by": $m},
			   ownerReferences: [{apiVersion: "apps/v1", kind: "StatefulSet", name: "prov", uid: $u, controller: true}]},
		storageClassName: $c, nodeTopology: {matchLabels: {($k): $z}}, capacity: $cap}' | kc create -f - >/dev/null
}
all_csisc() { kc get csistoragecapacities -n default -o json | jq -c '[.items[]]'; }
# ours: the objects owned by $OWNER, as "class zone capacity max" lines, sorted
ours() {
	kc get csistoragecapacities -n default -o json | jq -r --arg u "$OWNER" --arg k "$ZK" \
		'.items[] | select(.metadata.ownerReferences[0].uid == $u and .metadata.labels["csi.storage.k8s.io/managed-by"] == "external-provisioner") |
		 "\(.storageClassName) \(.nodeTopology.matchLabels[$k]) \(.capacity) \(.maximumVolumeSize)"' | sort
}
ours_is() { [ "$(ours | tr '\n' ';')" = "$1" ]; }
names() { kc get csistoragecapacities -n default -o json | jq -r '.items[].metadata.name' | sort | tr '\n' ' '; }
rv_of() { kc get csistoragecapacities "$1" -n default -o json | jq -r .metadata.resourceVersion; }
metric() { curl -s "http://127.0.0.1:$PORT/metrics" | awk -v m="$1" '$1 == m {print $2}'; }

emu_start
topo_node n1 z1 "$DRV"
topo_node n2 z2 "$DRV"
topo_node n3 z1 "$DRV"            # same segment as n1: no second object
topo_node n4 z9 other.kcsi.dev    # another driver's node: not a segment of ours
topo_node n5 "" "$DRV"            # the label is not there yet: skipped until it is
jq -n --arg u "$OWNER" '{apiVersion: "v1", kind: "Pod", metadata: {name: "prov-0", namespace: "default",
	ownerReferences: [{apiVersion: "apps/v1", kind: "StatefulSet", name: "prov", uid: $u, controller: true}]},
	spec: {containers: [{name: "p", image: "x"}]}}' | kc create -f - >/dev/null
mk_sc late '{"volumeBindingMode":"WaitForFirstConsumer","parameters":{"type":"fast"}}'
mk_sc now
csisc foreign external-provisioner "$OTHER" late z1 1Gi          # same labels, another owner
csisc otherdrv someone-else "$OWNER" late z1 1Gi                 # another manager
csisc stale external-provisioner "$OWNER" gone z1 7Gi           # ours, class long gone
FOREIGN_RV=$(rv_of foreign)
OTHERDRV_RV=$(rv_of otherdrv)

echo 5Gi >"$T/cap"
td_start --capacity-file "$T/cap" --max-volume-size 2Gi

# A missing namespace is a clear error, not a silent no-op; POD_NAMESPACE is not read for it.
rc=0
POD_NAME=prov-0 POD_NAMESPACE=default "$KCSI_BIN/csi-provisioner" --csi-address "unix://$T/td.sock" \
	--kubeconfig "$KC" --enable-capacity >"$T/nons.log" 2>&1 || rc=$?
check "without NAMESPACE (POD_NAMESPACE set) it exits as upstream's klog.Fatal" eq "$rc" 255
check "and says why" grep -q "need NAMESPACE env variable for CSIStorageCapacity objects" "$T/nons.log"

POD_NAME=prov-0 NAMESPACE=default prov_start p1 "$T/td.sock" --enable-capacity \
	--capacity-poll-interval 1s --capacity-threads 2 --http-endpoint 127.0.0.1:0
PORT=$(att_http_port p1)
wait_for "one object per segment of the WFFC class" 15 ours_is "late z1 5Gi 2Gi;late z2 5Gi 2Gi;"
OBJ=$(kc get csistoragecapacities -n default -o json | jq -c --arg u "$OWNER" --arg k "$ZK" \
	'[.items[] | select(.metadata.ownerReferences[0].uid == $u and .nodeTopology.matchLabels[$k] == "z1" and .metadata.name != "otherdrv")][0]')
check "generated name csisc-..." bash -c "[[ '$(jq -r .metadata.name <<<"$OBJ")' == csisc-* ]]"
check "labelled as upstream" eq "$(jq -r '.metadata.labels | "\(.["csi.storage.k8s.io/drivername"]) \(.["csi.storage.k8s.io/managed-by"])"' <<<"$OBJ")" "$DRV external-provisioner"
check "owned by the pod's StatefulSet" eq "$(jq -r '.metadata.ownerReferences[0] | "\(.apiVersion) \(.kind) \(.name) \(.controller)"' <<<"$OBJ")" "apps/v1 StatefulSet prov true"
check "nodeTopology is the segment" eq "$(jq -c .nodeTopology <<<"$OBJ")" "{\"matchLabels\":{\"$ZK\":\"z1\"}}"
check "GetCapacity got the class parameters and the segment" \
	grep -q "^GetCapacity .*\"type\".*\"fast\".*\"z2\"" "$T/td.rec"
wait_for "the stale object of ours is deleted" 10 bash -c "! kubectl --kubeconfig '$KC' get csistoragecapacities stale -n default"
check "the other owner's object is untouched" eq "$(rv_of foreign)" "$FOREIGN_RV"
check "another manager's object is untouched" eq "$(rv_of otherdrv)" "$OTHERDRV_RV"
wait_for "metrics: goal 2" 10 bash -c "[ \"\$(curl -s http://127.0.0.1:$PORT/metrics | awk '\$1==\"csistoragecapacities_desired_goal\"{print \$2}')\" = 2 ]"
check "metrics: current 2" eq "$(metric csistoragecapacities_desired_current)" 2
check "metrics: obsolete 0" eq "$(metric csistoragecapacities_obsolete)" 0

# The driver's capacity changes: the objects follow at the next poll.
echo 3Gi >"$T/cap"
wait_for "capacity follows the driver" 10 ours_is "late z1 3Gi 2Gi;late z2 3Gi 2Gi;"
# The driver fails GetCapacity: the objects keep their last value while it is asked again.
echo fail >"$T/cap"
n0=$(grep -c '^GetCapacity ' "$T/td.rec")
wait_for "GetCapacity asked again (and failing)" 10 bash -c "[ \$(grep -c '^GetCapacity ' '$T/td.rec') -ge $((n0 + 4)) ]"
check "a GetCapacity error keeps the old value" ours_is "late z1 3Gi 2Gi;late z2 3Gi 2Gi;"
echo 3Gi >"$T/cap"
# A node gets its label, a new node joins: new segments at once.
kc label node n5 "$ZK=z5" >/dev/null
topo_node n6 z6 "$DRV"
wait_for "objects for the new segments" 10 ours_is "late z1 3Gi 2Gi;late z2 3Gi 2Gi;late z5 3Gi 2Gi;late z6 3Gi 2Gi;"
# A new class gets objects, and loses them when deleted.
mk_sc late2 '{"volumeBindingMode":"WaitForFirstConsumer"}'
wait_for "objects for the new class" 10 bash -c "[ \$(kubectl --kubeconfig '$KC' get csistoragecapacities -n default -o json | jq '[.items[] | select(.storageClassName==\"late2\")] | length') -eq 4 ]"
kc delete storageclass late2 >/dev/null
wait_for "they disappear with the class" 10 bash -c "[ \$(kubectl --kubeconfig '$KC' get csistoragecapacities -n default -o json | jq '[.items[] | select(.storageClassName==\"late2\")] | length') -eq 0 ]"
check "never one for the immediate class" eq "$(all_csisc | jq '[.[] | select(.storageClassName=="now")] | length')" 0
# An object of ours deleted by someone comes back.
kc delete csistoragecapacities "$(jq -r .metadata.name <<<"$OBJ")" -n default >/dev/null
wait_for "a deleted object is made again" 10 ours_is "late z1 3Gi 2Gi;late z2 3Gi 2Gi;late z5 3Gi 2Gi;late z6 3Gi 2Gi;"
# Seed 004: no object for a zero capacity; they come back when the driver has capacity again.
echo 0 >"$T/cap"
wait_for "zero capacity: no object kept" 10 ours_is ""
echo 3Gi >"$T/cap"
wait_for "capacity again: objects again" 10 ours_is "late z1 3Gi 2Gi;late z2 3Gi 2Gi;late z5 3Gi 2Gi;late z6 3Gi 2Gi;"

# Restart: the new instance adopts the objects instead of making more.
BEFORE=$(names)
rc=0; att_stop p1 || rc=$?
check "SIGTERM exits 0" eq "$rc" 0
echo 4Gi >"$T/cap"
POD_NAME=prov-0 NAMESPACE=default prov_start p2 "$T/td.sock" --enable-capacity \
	--capacity-poll-interval 1s
wait_for "the restarted instance updates the same objects" 15 ours_is "late z1 4Gi 2Gi;late z2 4Gi 2Gi;late z5 4Gi 2Gi;late z6 4Gi 2Gi;"
check "no duplicates, same names" eq "$(names)" "$BEFORE"
check "the other owner's object is still untouched" eq "$(rv_of foreign)" "$FOREIGN_RV"
rc=0; att_stop p2 || rc=$?
check "SIGTERM exits 0" eq "$rc" 0

# --capacity-ownerref-level 2: the pod's ReplicaSet's Deployment owns the objects (each level is
# read from the API server); one level more than the chain has is a clear error.
owned_by() { # KIND NAME OWNER-KIND OWNER-NAME OWNER-UID
	jq -n --arg k "$1" --arg n "$2" --arg ok "$3" --arg on "$4" --arg ou "$5" '{
		apiVersion: (if $k == "Pod" then "v1" else "apps/v1" end), kind: $k,
		metadata: ({name: $n, namespace: "default"} + (if $ok == "" then {} else
			{ownerReferences: [{apiVersion: "apps/v1", kind: $ok, name: $on, uid: $ou, controller: true}]} end))} +
		(if $k == "Pod" then {spec: {containers: [{name: "p", image: "csi-provisioner"}]}} else {} end)' |
		kc create -f - -o jsonpath='{.metadata.uid}'
}
others() { kc get csistoragecapacities -n default -o json | jq -r '.items[] | select(.metadata.ownerReferences[0].kind != "Deployment") | .metadata.name' | sort | tr '\n' ' '; }
OTHERS=$(others)
DEP_UID=$(owned_by Deployment web "" "" "")
RS_UID=$(owned_by ReplicaSet web-5d Deployment web "$DEP_UID")
owned_by Pod web-5d-x ReplicaSet web-5d "$RS_UID" >/dev/null
POD_NAME=web-5d-x NAMESPACE=default prov_start p3 "$T/td.sock" --enable-capacity \
	--capacity-poll-interval 1s --capacity-ownerref-level 2
wait_for "level 2: the Deployment owns a new set of objects" 15 bash -c "kubectl --kubeconfig '$KC' get csistoragecapacities -n default -o json | jq -e --arg u '$DEP_UID' '[.items[] | select(.metadata.ownerReferences[0] | .uid == \$u and .kind == \"Deployment\" and .name == \"web\" and .apiVersion == \"apps/v1\")] | length == 4'"
check "the StatefulSet's objects are left alone" eq "$(others)" "$OTHERS"
rc=0; att_stop p3 || rc=$?
check "SIGTERM exits 0" eq "$rc" 0
rc=0
POD_NAME=web-5d-x NAMESPACE=default timeout 20 "$KCSI_BIN/csi-provisioner" --csi-address "unix://$T/td.sock" \
	--kubeconfig "$KC" --enable-capacity --capacity-ownerref-level 3 >"$T/level3.log" 2>&1 || rc=$?
check "level 3 (past the Deployment) exits non-zero" eq "$([ $rc -ne 0 ] && [ $rc -ne 124 ] && echo yes)" yes
check "and says the Deployment has no owner" grep -q "deployments/web has no controller owner" "$T/level3.log"
att_finish
