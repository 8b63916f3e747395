#!/bin/bash
# kube-emulator for the controllers: pods/binding sets spec.nodeName once, graceful pod deletion
# (deletionTimestamp + grace period until a grace-0 delete, as a kubelet finishes it),
# DeleteOptions, the snapshot.storage.k8s.io kinds, and the objects node agents and leader
# election write (Node status, CSIDriver, CSIStorageCapacity, events, leases in kube-node-lease).
. "$(dirname "$0")/lib_emulator.sh"
emu_start
P=/api/v1/namespaces/default/pods

# --- pods/binding ---
req POST $P '{"metadata":{"name":"web"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}'
expect_code 201 "create an unscheduled pod"
BIND='{"apiVersion":"v1","kind":"Binding","metadata":{"name":"web"},"target":{"apiVersion":"v1","kind":"Node","name":"node-1"}}'
req POST $P/web/binding "$BIND"
expect_code 201 "bind the pod"
check "binding answers a Success Status" eq "$(jqo .status)" "Success"
req GET $P/web
check "binding sets spec.nodeName" eq "$(jqo .spec.nodeName)" "node-1"
check "binding sets PodScheduled=True" eq "$(jqo '.status.conditions[]|select(.type=="PodScheduled")|.status')" "True"
req POST $P/web/binding "${BIND/node-1/node-2}"
expect_code 409 "a second binding"
check "409 says the pod is already assigned" eq "$(jqo '.message|contains("already assigned to node \"node-1\"")')" "true"
req POST $P/ghost/binding "${BIND/\"web\"/\"ghost\"}"
expect_code 404 "binding a missing pod"
req POST $P/web/binding '{"kind":"Binding","target":{"kind":"Node"}}'
expect_code 422 "binding without target.name"
req GET $P/web/binding
expect_code 405 "GET on pods/binding"
req GET $P/web
RV=$(jqo .metadata.resourceVersion)
req PUT $P/web "$(jq -c '.spec.nodeName="node-9"' "$T/out")"
expect_code 422 "an update may not move a bound pod"
check "422 names spec.nodeName" eq "$(jqo '.details.causes[0].field')" "spec.nodeName"
req PATCH $P/web '{"spec":{"nodeName":"node-9"}}' application/merge-patch+json
expect_code 422 "a patch may not move a bound pod"
req PATCH $P/web '{"metadata":{"labels":{"a":"b"}}}' application/merge-patch+json
expect_code 200 "other updates of a bound pod"

# --- graceful deletion ---
req DELETE $P/web
expect_code 200 "graceful delete of a scheduled pod"
check "the answer is the pod, with deletionTimestamp" eq "$(jqo '.kind + " " + (.metadata.deletionTimestamp != null|tostring)')" "Pod true"
check "default grace period is 30" eq "$(jqo .metadata.deletionGracePeriodSeconds)" "30"
req GET $P/web
expect_code 200 "the pod stays during its grace period"
req PUT $P/web/status "$(jq -c '.status.phase="Running"' "$T/out")"
expect_code 200 "status updates of a terminating pod (the node agent's)"
req GET $P/web
expect_code 200 "a status update does not finish a graceful delete"
req DELETE $P/web
check "a second delete keeps the pending grace period" eq "$(jqo .metadata.deletionGracePeriodSeconds)" "30"
req DELETE $P/web '{"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":10}'
check "a shorter grace period shortens it" eq "$(jqo .metadata.deletionGracePeriodSeconds)" "10"
UID_=$(jqo .metadata.uid)
req DELETE $P/web '{"gracePeriodSeconds":0,"preconditions":{"uid":"wrong"}}'
expect_code 409 "grace-0 delete with a wrong uid precondition"
req DELETE $P/web "{\"gracePeriodSeconds\":0,\"preconditions\":{\"uid\":\"$UID_\"}}"
expect_code 200 "grace-0 delete (the node agent's)"
check "grace-0 delete answers the pod (as kube-apiserver)" eq "$(jqo .metadata.name)" "web"
req GET $P/web
expect_code 404 "the pod is gone after the grace-0 delete"

req POST $P '{"metadata":{"name":"quick"},"spec":{"nodeName":"node-1","terminationGracePeriodSeconds":5}}'
req DELETE "$P/quick?gracePeriodSeconds=0"
expect_code 200 "grace-0 delete in the query"
req GET $P/quick
expect_code 404 "?gracePeriodSeconds=0 removes at once"
req POST $P '{"metadata":{"name":"tgps"},"spec":{"nodeName":"node-1","terminationGracePeriodSeconds":7}}'
req DELETE $P/tgps
check "spec.terminationGracePeriodSeconds is the default grace" eq "$(jqo .metadata.deletionGracePeriodSeconds)" "7"
req POST $P '{"metadata":{"name":"pending"},"spec":{}}'
req DELETE $P/pending
check "an unscheduled pod goes at once (answer: the pod)" eq "$(jqo .kind)" "Pod"
req GET $P/pending
expect_code 404 "the unscheduled pod is gone"
req POST $P '{"metadata":{"name":"done"},"spec":{"nodeName":"node-1"}}'
req GET $P/done
req PUT $P/done/status "$(jq -c '.status.phase="Succeeded"' "$T/out")"
req DELETE $P/done
check "a terminated pod goes at once (answer: the pod)" eq "$(jqo .kind)" "Pod"
req GET $P/done
expect_code 404 "the terminated pod is gone"
req POST $P '{"metadata":{"name":"fin","finalizers":["kcsi.io/test"]},"spec":{"nodeName":"node-1"}}'
req DELETE $P/fin '{"gracePeriodSeconds":0}'
expect_code 200 "grace-0 delete of a pod with a finalizer"
check "it stays with grace 0" eq "$(jqo .metadata.deletionGracePeriodSeconds)" "0"
req PATCH $P/fin '{"metadata":{"finalizers":null}}' application/merge-patch+json
req GET $P/fin
expect_code 404 "removing the finalizer finishes the delete"
req DELETE "$P/tgps?propagationPolicy=Sideways"
expect_code 422 "an unknown propagationPolicy"
req DELETE $P/tgps '{"propagationPolicy":"Foreground","gracePeriodSeconds":0}'
expect_code 200 "propagationPolicy Foreground is accepted"
req POST $P '{"metadata":{"name":"rvp"},"spec":{}}'
req DELETE $P/rvp '{"preconditions":{"resourceVersion":"1"}}'
expect_code 409 "resourceVersion precondition"

# --- snapshot.storage.k8s.io ---
req GET /apis/snapshot.storage.k8s.io/v1
check "snapshot kinds discovered with short names" eq "$(jqo '[.resources[]|select(.shortNames)|.name+":"+(.shortNames|join("/"))]|join(",")')" "volumesnapshots:vs,volumesnapshotcontents:vsc/vscs,volumesnapshotclasses:vsclass/vsclasses"
req POST /apis/snapshot.storage.k8s.io/v1/volumesnapshotclasses '{"apiVersion":"snapshot.storage.k8s.io/v1","kind":"VolumeSnapshotClass","metadata":{"name":"loop"},"driver":"loop.kcsi.io","deletionPolicy":"Delete"}'
expect_code 201 "create a VolumeSnapshotClass"
req POST /apis/snapshot.storage.k8s.io/v1/namespaces/default/volumesnapshots '{"apiVersion":"snapshot.storage.k8s.io/v1","kind":"VolumeSnapshot","metadata":{"name":"snap-1"},"spec":{"volumeSnapshotClassName":"loop","source":{"persistentVolumeClaimName":"claim-1"}},"status":{"readyToUse":true}}'
expect_code 201 "create a VolumeSnapshot"
check "create drops status (status subresource)" eq "$(jqo .status)" "null"
req PUT /apis/snapshot.storage.k8s.io/v1/namespaces/default/volumesnapshots/snap-1/status "$(jq -c '.status={"readyToUse":true,"boundVolumeSnapshotContentName":"snapcontent-1"}' "$T/out")"
expect_code 200 "VolumeSnapshot status update"
req POST /apis/snapshot.storage.k8s.io/v1/volumesnapshotcontents '{"apiVersion":"snapshot.storage.k8s.io/v1","kind":"VolumeSnapshotContent","metadata":{"name":"snapcontent-1"},"spec":{"driver":"loop.kcsi.io","deletionPolicy":"Delete","source":{"volumeHandle":"vol-1"},"volumeSnapshotRef":{"name":"snap-1","namespace":"default"}}}'
expect_code 201 "create a VolumeSnapshotContent"
req PATCH /apis/snapshot.storage.k8s.io/v1/volumesnapshotcontents/snapcontent-1/status '{"status":{"readyToUse":true,"snapshotHandle":"snap-h"}}' application/merge-patch+json
expect_code 200 "VolumeSnapshotContent status patch"
check "content status" eq "$(jqo .status.snapshotHandle)" "snap-h"

# --- what node agents and leader election write ---
req POST /api/v1/nodes '{"metadata":{"name":"node-1"}}'
req PATCH /api/v1/nodes/node-1/status '{"status":{"conditions":[{"type":"Ready","status":"True"}]}}' application/strategic-merge-patch+json
expect_code 200 "Node status patch"
req POST /apis/storage.k8s.io/v1/csidrivers '{"metadata":{"name":"loop.kcsi.io"},"spec":{"attachRequired":true,"podInfoOnMount":false}}'
expect_code 201 "create a CSIDriver"
req POST /apis/storage.k8s.io/v1/namespaces/kube-system/csistoragecapacities '{"metadata":{"generateName":"csisc-"},"storageClassName":"loop","capacity":"10Gi","nodeTopology":{"matchLabels":{"topology.kcsi.io/node":"node-1"}}}'
expect_code 201 "create a CSIStorageCapacity"
req POST /apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases '{"metadata":{"name":"node-1"},"spec":{"holderIdentity":"node-1","leaseDurationSeconds":40}}'
expect_code 201 "a node lease in kube-node-lease (created at start)"
req POST /api/v1/namespaces/default/events '{"metadata":{"name":"web.1"},"involvedObject":{"kind":"Pod","namespace":"default","name":"web"},"reason":"Scheduled","message":"m","type":"Normal"}'
expect_code 201 "create a core/v1 Event"
req POST /apis/events.k8s.io/v1/namespaces/default/events '{"metadata":{"name":"web.2"},"regarding":{"kind":"Pod","namespace":"default","name":"web"},"reason":"Pulled","note":"n","type":"Normal","action":"Pull","eventTime":"2026-01-01T00:00:00.000000Z","reportingController":"kcsi","reportingInstance":"kcsi-1"}'
expect_code 201 "create an events.k8s.io/v1 Event"
# One storage for both groups, as kube-apiserver: kubectl describe (core, by involvedObject)
# lists what kube-scheduler records through events.k8s.io, and each group reads the other's in
# its own field names.
req GET "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dweb,involvedObject.kind%3DPod"
check "events by involvedObject (what kubectl describe lists): both groups'" eq "$(jqo '[.items[].metadata.name]|sort|join(",")')" "web.1,web.2"
req GET /api/v1/namespaces/default/events/web.2
check "an events.k8s.io Event read as core/v1" eq "$(jqo '[.apiVersion, .message, .involvedObject.name, .reportingComponent, .reportingInstance, (.note // "none")]|join(",")')" "v1,n,web,kcsi,kcsi-1,none"
req GET "/apis/events.k8s.io/v1/namespaces/default/events?fieldSelector=regarding.name%3Dweb,reason%3DScheduled"
check "a core Event listed through events.k8s.io by regarding.name" eq "$(jqo '[.items[] | .metadata.name, .note, .regarding.kind, (.message // "none")]|join(",")')" "web.1,m,Pod,none"
req GET "/apis/events.k8s.io/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dweb"
expect_code 400 "events.k8s.io refuses the core field label"
check "its reason" eq "$(jqo .message)" "field label not supported: involvedObject.name"
# through events.k8s.io an Event is immutable but for its series (as kube-apiserver's update
# rules for that version); through core/v1 it is not
req PATCH /apis/events.k8s.io/v1/namespaces/default/events/web.2 '{"note":"patched"}' application/merge-patch+json
expect_code 422 "events.k8s.io: note may not change"
check "named as kube-apiserver names it" eq "$(jqo .message)" 'Event "web.2" is invalid: message: Invalid value: "patched": field is immutable'
req PATCH /apis/events.k8s.io/v1/namespaces/default/events/web.2 '{"series":{"count":2,"lastObservedTime":"2026-01-01T00:00:09.000000Z"}}' application/merge-patch+json
expect_code 200 "events.k8s.io: the series may change"
check "the series, read as core/v1" eq "$(req GET /api/v1/namespaces/default/events/web.2; jqo .series.count)" "2"
req PATCH /api/v1/namespaces/default/events/web.2 '{"message":"patched through core"}' application/merge-patch+json
expect_code 200 "core/v1: message may change"
req GET /apis/events.k8s.io/v1/namespaces/default/events/web.2
check "the patch, read as events.k8s.io note" eq "$(jqo .note)" "patched through core"
req POST /apis/events.k8s.io/v1/namespaces/default/events '{"metadata":{"name":"web.3"},"regarding":{"kind":"Pod","namespace":"default","name":"web"},"reason":"Pulled","note":"n","type":"Normal"}'
expect_code 422 "an events.k8s.io Event without eventTime"
check "named as kube-apiserver names it" eq "$(jqo '.details.causes[0].field')" "eventTime"
req POST /apis/events.k8s.io/v1/namespaces/default/events '{"metadata":{"name":"web.4"},"regarding":{"kind":"Pod","namespace":"default","name":"web"},"reason":"Pulled","note":"n","type":"Normal","eventTime":"2026-01-01T00:00:00.000000Z","reportingInstance":"kcsi-1","action":"Pull"}'
expect_code 422 "an events.k8s.io Event without reportingController"
check "named as kube-apiserver names it" eq "$(jqo '.details.causes[0].field')" "reportingController"
finish
