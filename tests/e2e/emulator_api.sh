#!/bin/bash
# kube-emulator over raw HTTP: create/get/update/patch/delete semantics and every Status error
# the issue lists, pagination, the status subresource, generation, finalizers, preconditions,
# token auth and discovery.
. "$(dirname "$0")/lib_emulator.sh"
emu_start --token s3cret

# --- token auth ---
req GET /api/v1/namespaces
expect_code 401 "request without a token"
check "401 is a Status" eq "$(jqo .reason)" "Unauthorized"
CURL_EXTRA=(-H "Authorization: Bearer wrong")
req GET /api/v1/namespaces
expect_code 401 "request with a wrong token"
CURL_EXTRA=(-H "Authorization: Bearer s3cret")
req GET /api/v1/namespaces
expect_code 200 "request with the token"
check "the namespaces kube-apiserver creates exist" eq "$(jqo '[.items[].metadata.name]|join(",")')" "default,kube-node-lease,kube-public,kube-system"

# --- discovery ---
req GET /version
expect_code 200 "/version"
check "version major" eq "$(jqo .major)" "1"
req GET /api/v1
check "pv discovery entry" eq "$(jqo '.resources[]|select(.name=="persistentvolumes")|"\(.kind) \(.namespaced) \(.shortNames[0])"')" "PersistentVolume false pv"
check "pv/status discovery entry" eq "$(jqo '[.resources[].name]|index("persistentvolumes/status") != null')" "true"
req GET /apis/storage.k8s.io/v1
check "volumeattachments discovered" eq "$(jqo '.resources[]|select(.name=="volumeattachments")|.verbs|index("watch") != null')" "true"
req GET /apis
check "groups" eq "$(jqo '[.groups[].name]|sort|join(",")')" "apps,coordination.k8s.io,events.k8s.io,groupsnapshot.storage.k8s.io,policy,rbac.authorization.k8s.io,resource.k8s.io,snapshot.storage.k8s.io,storage.k8s.io"
# what kube-scheduler lists and watches before it schedules anything (issue 35)
for path in /api/v1/services /api/v1/replicationcontrollers /apis/policy/v1/poddisruptionbudgets \
	/apis/resource.k8s.io/v1/deviceclasses /apis/resource.k8s.io/v1/devicetaintrules /apis/resource.k8s.io/v1/resourceclaims \
	/apis/resource.k8s.io/v1/resourceslices; do
	req GET "$path"
	check "$path lists" eq "$(jqo '.items|length')" "0"
done
req GET /apis/resource.k8s.io/v1
check "resourceclaims discovered, namespaced, with status" eq "$(jqo '[.resources[]|select(.name|startswith("resourceclaims"))|"\(.name) \(.namespaced)"]|join(",")')" "resourceclaims true,resourceclaims/status true"

curl -s -D "$T/h" -o "$T/out" -H "Authorization: Bearer s3cret" -H "Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf" "$S/openapi/v2"
check "/openapi/v2 as protobuf: an empty document kubectl 1.20 can parse" bash -c "grep -qi '^Content-Type: application/octet-stream' '$T/h' && test ! -s '$T/out'"
req GET /openapi/v3
check "/openapi/v3 lists group-versions" eq "$(jqo '.paths["apis/storage.k8s.io/v1"].serverRelativeURL|startswith("/openapi/v3/apis/storage.k8s.io/v1")')" "true"
req GET /openapi/v3/apis/storage.k8s.io/v1
check "/openapi/v3 declares fieldValidation on PATCH" eq "$(jqo '.paths["/apis/storage.k8s.io/v1/volumeattachments/{name}"].patch.parameters[0].name')" "fieldValidation"

PV='{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"pv-a","labels":{"tier":"gold"}},"spec":{"capacity":{"storage":"1Gi"},"accessModes":["ReadWriteOnce"]},"status":{"phase":"Bound"}}'

# --- create ---
req POST /api/v1/persistentvolumes "$PV"
expect_code 201 "create pv"
check "server sets uid" test -n "$(jqo .metadata.uid)"
check "no generation on a PV (kube-apiserver keeps none)" eq "$(jqo .metadata.generation)" "null"
check "server sets creationTimestamp" test -n "$(jqo .metadata.creationTimestamp)"
check "status reset on create" eq "$(jqo .status.phase)" "Pending"
RV1=$(jqo .metadata.resourceVersion)
req POST /api/v1/persistentvolumes "$PV"
expect_code 409 "create twice"
check "AlreadyExists reason" eq "$(jqo .reason)" "AlreadyExists"
check "AlreadyExists message" eq "$(jqo .message)" 'persistentvolumes "pv-a" already exists'
req POST /api/v1/persistentvolumes '{"metadata":{"name":"Bad_Name"},"spec":{}}'
expect_code 422 "non-DNS-1123 name"
check "Invalid reason" eq "$(jqo .reason)" "Invalid"
check "Invalid names the field" eq "$(jqo '.details.causes[0].field')" "metadata.name"
req POST /api/v1/persistentvolumes '{"metadata":{},"spec":{}}'
expect_code 422 "missing name"
req POST /api/v1/persistentvolumes '{"metadata":{"generateName":"pv-gen-"},"spec":{}}'
expect_code 201 "generateName"
check "generated name" bash -c "[[ '$(jqo .metadata.name)' =~ ^pv-gen-[a-z0-9]{5}$ ]]"
req POST /api/v1/persistentvolumes '{"metadata":{"name":"x"'
expect_code 400 "malformed JSON"
check "BadRequest reason" eq "$(jqo .reason)" "BadRequest"
req POST /api/v1/persistentvolumes '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"}}'
expect_code 400 "wrong kind"
req POST /api/v1/persistentvolumes '{"apiVersion":"storage.k8s.io/v1","kind":"PersistentVolume","metadata":{"name":"x"}}'
expect_code 400 "wrong apiVersion"
req POST /api/v1/persistentvolumes '[1,2]'
expect_code 400 "body not an object"
req POST /api/v1/namespaces/nope/persistentvolumeclaims '{"metadata":{"name":"c"},"spec":{}}'
expect_code 404 "namespace does not exist"
check "404 names the namespace" eq "$(jqo .message)" 'namespaces "nope" not found'
req POST /api/v1/namespaces/default/persistentvolumeclaims '{"metadata":{"name":"c","namespace":"other"},"spec":{}}'
expect_code 400 "namespace mismatch between URL and body"
req POST /api/v1/persistentvolumes "$PV" application/vnd.kubernetes.protobuf
expect_code 415 "protobuf body"
req DELETE /api/v1/persistentvolumes
expect_code 200 "deletecollection is served"
req POST /api/v1/persistentvolumes "$PV"
RV1=$(jqo .metadata.resourceVersion)

# --- get / 404 / 405 ---
req GET /api/v1/persistentvolumes/pv-a
expect_code 200 "get"
check "apiVersion and kind filled in" eq "$(jqo '.apiVersion+"/"+.kind')" "v1/PersistentVolume"
req GET /api/v1/persistentvolumes/missing
expect_code 404 "get missing"
check "NotFound Status" eq "$(jqo '.kind+" "+.reason+" "+(.code|tostring)')" "Status NotFound 404"
req GET /apis/storage.k8s.io/v1/volumeattachments/missing
check "group in NotFound message" eq "$(jqo .message)" 'volumeattachments.storage.k8s.io "missing" not found'
req POST /api/v1/persistentvolumes/pv-a "$PV"
expect_code 405 "POST on an object"
check "MethodNotAllowed" eq "$(jqo .reason)" "MethodNotAllowed"
check "405 in kube-apiserver's words" eq "$(jqo '.message+" "+(.details|tojson)')" \
	"the server does not allow this method on the requested resource {}"
req GET /api/v1/frobnicators
expect_code 404 "unknown resource"

# --- update (PUT) ---
req GET /api/v1/persistentvolumes/pv-a
OBJ=$(cat "$T/out")
req PUT /api/v1/persistentvolumes/pv-a "$(echo "$OBJ" | jq -c 'del(.metadata.resourceVersion)')"
expect_code 200 "PUT without resourceVersion is unconditional"
req PUT /api/v1/persistentvolumes/pv-a "$(echo "$OBJ" | jq -c '.metadata.resourceVersion="1"')"
expect_code 409 "PUT with a stale resourceVersion"
check "Conflict reason" eq "$(jqo .reason)" "Conflict"
req PUT /api/v1/persistentvolumes/pv-b "$OBJ"
expect_code 400 "name mismatch between URL and body"
req PUT /api/v1/persistentvolumes/pv-a "$(echo "$OBJ" | jq -c '.metadata.labels.x="1" | .status.phase="Failed"')"
expect_code 200 "PUT metadata change"
check "main endpoint ignores status" eq "$(jqo .status.phase)" "Pending"
check "resourceVersion increases" test "$(jqo .metadata.resourceVersion)" -gt "$RV1"
OBJ=$(cat "$T/out")
req PUT /api/v1/persistentvolumes/pv-a "$(echo "$OBJ" | jq -c '.spec.capacity.storage="2Gi"')"
check "spec change leaves a PV without generation" eq "$(jqo .metadata.generation)" "null"
RV2=$(jqo .metadata.resourceVersion)
req PUT /api/v1/persistentvolumes/pv-a "$(cat "$T/out")"
check "no-op update keeps resourceVersion" eq "$(jqo .metadata.resourceVersion)" "$RV2"

# --- status subresource ---
req GET /api/v1/persistentvolumes/pv-a
OBJ=$(cat "$T/out")
req PUT /api/v1/persistentvolumes/pv-a/status "$(echo "$OBJ" | jq -c '.status.phase="Available" | .spec.capacity.storage="9Gi" | .metadata.labels.y="2"')"
expect_code 200 "PUT status"
check "/status changes status" eq "$(jqo .status.phase)" "Available"
check "/status ignores spec" eq "$(jqo .spec.capacity.storage)" "2Gi"
check "/status keeps metadata changes (as kube-apiserver)" eq "$(jqo '.metadata.labels.y // "none"')" "2"
req PATCH /api/v1/persistentvolumes/pv-a/status '{"status":{"phase":"Released"},"spec":{"capacity":{"storage":"5Gi"}}}' application/merge-patch+json
expect_code 200 "PATCH status"
check "PATCH /status changes status" eq "$(jqo .status.phase)" "Released"
check "PATCH /status ignores spec" eq "$(jqo .spec.capacity.storage)" "2Gi"
req GET /api/v1/namespaces/default/configmaps/x/status
expect_code 404 "no status subresource on configmaps"

# --- patch ---
req PATCH /api/v1/persistentvolumes/pv-a '{"metadata":{"labels":{"tier":null,"new":"1"}}}' application/merge-patch+json
expect_code 200 "merge patch"
check "merge patch deletes and adds" eq "$(jqo '.metadata.labels|keys|join(",")')" "new,x,y"
req PATCH /api/v1/persistentvolumes/pv-a '[{"op":"test","path":"/metadata/labels/new","value":"1"},{"op":"add","path":"/metadata/annotations","value":{"a":"b"}}]' application/json-patch+json
expect_code 200 "json patch with a passing test"
check "json patch applied" eq "$(jqo .metadata.annotations.a)" "b"
req PATCH /api/v1/persistentvolumes/pv-a '[{"op":"test","path":"/metadata/labels/new","value":"2"}]' application/json-patch+json
expect_code 422 "json patch with a failing test"
# kube-apiserver's answers on a ConfigMap without labels or annotations (csi-snapshotter's first
# write to a content is such a replace)
req POST /api/v1/namespaces/default/configmaps '{"metadata":{"name":"jp"},"data":{"k":"v"}}'
req PATCH /api/v1/namespaces/default/configmaps/jp '[{"op":"replace","path":"/metadata/annotations","value":{"a":"b"}}]' application/json-patch+json
expect_code 200 "json patch replace of missing annotations adds them"
check "replaced annotations are there" eq "$(jqo .metadata.annotations.a)" "b"
req PATCH /api/v1/namespaces/default/configmaps/jp '[{"op":"replace","path":"/data/zz","value":"1"}]' application/json-patch+json
expect_code 200 "json patch replace of a missing data key adds it"
check "replaced data key is there" eq "$(jqo .data.zz)" "1"
for op in '{"op":"remove","path":"/data/nope"}' '{"op":"test","path":"/data/nope","value":"x"}' \
	  '{"op":"replace","path":"/metadata/labels/k","value":"v"}' \
	  '{"op":"add","path":"/metadata/labels/k","value":"v"}'; do
	req PATCH /api/v1/namespaces/default/configmaps/jp "[$op]" application/json-patch+json
	expect_code 422 "json patch $op on a missing member"
done
req PATCH /api/v1/persistentvolumes/pv-a '{"metadata":{"finalizers":["a"]}}' application/strategic-merge-patch+json
req PATCH /api/v1/persistentvolumes/pv-a '{"metadata":{"finalizers":["b"]}}' application/strategic-merge-patch+json
expect_code 200 "strategic merge patch"
check "strategic merge unions finalizers" eq "$(jqo '.metadata.finalizers|join(",")')" "a,b"
req PATCH /api/v1/persistentvolumes/pv-a '{"spec":{"$retainKeys":["x"]}}' application/strategic-merge-patch+json
expect_code 422 "unsupported strategic directive"
check "directive refusal is clear" bash -c "jq -r .message '$T/out' | grep -q 'not supported'"
req PATCH /api/v1/persistentvolumes/pv-a '{"metadata":{"resourceVersion":"1"}}' application/merge-patch+json
expect_code 409 "patch with a stale resourceVersion precondition"
req PATCH /api/v1/persistentvolumes/pv-a '{"a":1}' text/plain
expect_code 415 "patch with an unknown content type"
check "UnsupportedMediaType" eq "$(jqo .reason)" "UnsupportedMediaType"
req PATCH /api/v1/persistentvolumes/pv-a '{"a":' application/merge-patch+json
expect_code 400 "malformed patch"
req PATCH /api/v1/persistentvolumes/missing '{}' application/merge-patch+json
expect_code 404 "patch missing object"

# --- delete with finalizers ---
req GET /api/v1/persistentvolumes/pv-a
UID_A=$(jqo .metadata.uid)
req DELETE /api/v1/persistentvolumes/pv-a '{"preconditions":{"uid":"00000000-0000-0000-0000-000000000000"}}'
expect_code 409 "delete with a wrong uid precondition"
req DELETE /api/v1/persistentvolumes/pv-a '{"preconditions":{"resourceVersion":"1"}}'
expect_code 409 "delete with a wrong resourceVersion precondition"
req DELETE /api/v1/persistentvolumes/pv-a "{\"preconditions\":{\"uid\":\"$UID_A\"}}"
expect_code 200 "delete with finalizers answers the object"
check "deletionTimestamp set" test -n "$(jqo '.metadata.deletionTimestamp // ""')"
check "deletionGracePeriodSeconds 0" eq "$(jqo .metadata.deletionGracePeriodSeconds)" "0"
req GET /api/v1/persistentvolumes/pv-a
expect_code 200 "object with finalizers stays"
req PATCH /api/v1/persistentvolumes/pv-a '{"metadata":{"finalizers":["a","b","c"]}}' application/merge-patch+json
expect_code 422 "adding a finalizer while deleting"
req PATCH /api/v1/persistentvolumes/pv-a '{"metadata":{"finalizers":["b"]}}' application/merge-patch+json
expect_code 200 "removing one finalizer"
req GET /api/v1/persistentvolumes/pv-a
expect_code 200 "still there with one finalizer"
req PATCH /api/v1/persistentvolumes/pv-a '{"metadata":{"finalizers":null}}' application/merge-patch+json
expect_code 200 "removing the last finalizer"
req GET /api/v1/persistentvolumes/pv-a
expect_code 404 "removing the last finalizer removes the object"
req POST /api/v1/namespaces/default/configmaps '{"metadata":{"name":"cm1"},"data":{"k":"v"}}'
req DELETE /api/v1/namespaces/default/configmaps/cm1
expect_code 200 "delete without finalizers"
check "delete answers a Success Status" eq "$(jqo .status)" "Success"
req GET /api/v1/namespaces/default/configmaps/cm1
expect_code 404 "deleted object is gone"
req DELETE /api/v1/namespaces/default/configmaps/cm1
expect_code 404 "delete missing object"

# --- dryRun ---
req POST "/api/v1/persistentvolumes?dryRun=All" '{"metadata":{"name":"pv-dry"},"spec":{}}'
expect_code 201 "dry-run create answers"
req GET /api/v1/persistentvolumes/pv-dry
expect_code 404 "dry-run create stores nothing"
req POST /api/v1/namespaces/default/configmaps '{"metadata":{"name":"cm-dry"},"data":{"k":"v"}}'
req PATCH "/api/v1/namespaces/default/configmaps/cm-dry?dryRun=All" '{"data":{"k":"w"}}' application/merge-patch+json
check "dry-run patch answers the patched object" eq "$(jqo .data.k)" "w"
req DELETE "/api/v1/namespaces/default/configmaps/cm-dry?dryRun=All"
req GET /api/v1/namespaces/default/configmaps/cm-dry
check "dry-run patch and delete change nothing" eq "$(jqo .data.k)" "v"
req DELETE "/api/v1/namespaces/default/configmaps/cm-dry?dryRun=Some"
expect_code 400 "unknown dryRun value"

# --- list: pagination, selectors ---
for i in $(seq -w 1 7); do
	req POST /apis/storage.k8s.io/v1/volumeattachments "{\"metadata\":{\"name\":\"va-$i\",\"labels\":{\"n\":\"$i\"}},\"spec\":{\"attacher\":\"x\",\"nodeName\":\"node-$((10#$i % 2))\",\"source\":{\"persistentVolumeName\":\"pv-$i\"}}}"
	expect_code 201 "create va-$i"
done
req GET "/apis/storage.k8s.io/v1/volumeattachments?limit=3"
check "page 1 has 3 items" eq "$(jqo '.items|length')" "3"
check "remainingItemCount" eq "$(jqo .metadata.remainingItemCount)" "4"
LRV=$(jqo .metadata.resourceVersion)
TOK=$(jqo .metadata.continue)
NAMES=$(jqo '[.items[].metadata.name]|join(",")')
# changes between pages do not show: continued pages are the first page's snapshot, as etcd's
req PATCH /apis/storage.k8s.io/v1/volumeattachments/va-4 '{"metadata":{"labels":{"n":"changed"}}}' application/merge-patch+json
req DELETE /apis/storage.k8s.io/v1/volumeattachments/va-5
req POST /apis/storage.k8s.io/v1/volumeattachments '{"metadata":{"name":"va-4a"},"spec":{"attacher":"x","nodeName":"n","source":{"persistentVolumeName":"p"}}}'
req GET "/apis/storage.k8s.io/v1/volumeattachments?limit=3&continue=$TOK"
NAMES="$NAMES,$(jqo '[.items[].metadata.name]|join(",")')"
check "continued page shows the snapshot's labels" eq "$(jqo '.items[0].metadata.labels.n')" "4"
check "continued list keeps the first list's resourceVersion" eq "$(jqo .metadata.resourceVersion)" "$LRV"
TOK=$(jqo .metadata.continue)
req GET "/apis/storage.k8s.io/v1/volumeattachments?limit=3&continue=$TOK"
NAMES="$NAMES,$(jqo '[.items[].metadata.name]|join(",")')"
check "last page has no continue" eq "$(jqo '.metadata.continue // "none"')" "none"
check "pages cover every object of the snapshot once, in order" eq "$NAMES" "va-1,va-2,va-3,va-4,va-5,va-6,va-7"
req GET "/apis/storage.k8s.io/v1/volumeattachments"
check "a new list shows the changes" eq "$(jqo '[.items[].metadata.name]|join(",")')" "va-1,va-2,va-3,va-4,va-4a,va-6,va-7"
req PATCH /apis/storage.k8s.io/v1/volumeattachments/va-1 '{"spec":{"nodeName":"elsewhere"}}' application/merge-patch+json
expect_code 422 "VolumeAttachment spec is immutable"
check "immutable field named" eq "$(jqo '.details.causes[0].field')" "spec"
req PATCH /apis/storage.k8s.io/v1/volumeattachments/va-1/status '{"status":{"attached":true}}' application/merge-patch+json
expect_code 200 "VolumeAttachment status is not"
req GET "/apis/storage.k8s.io/v1/volumeattachments?resourceVersion=$LRV&resourceVersionMatch=Exact"
check "list at an exact resourceVersion is that snapshot" eq "$(jqo '[.items[].metadata.name]|join(",")')" "va-1,va-2,va-3,va-4,va-5,va-6,va-7"
check "exact list carries that resourceVersion" eq "$(jqo .metadata.resourceVersion)" "$LRV"
req GET "/apis/storage.k8s.io/v1/volumeattachments?resourceVersion=$LRV"
check "not-older-than list is the latest state" eq "$(jqo '[.items[].metadata.name]|join(",")')" "va-1,va-2,va-3,va-4,va-4a,va-6,va-7"
req GET "/apis/storage.k8s.io/v1/volumeattachments?resourceVersion=999999"
expect_code 504 "list at a future resourceVersion"
req GET "/apis/storage.k8s.io/v1/volumeattachments?resourceVersionMatch=Exact"
expect_code 422 "resourceVersionMatch without resourceVersion"
req GET "/apis/storage.k8s.io/v1/volumeattachments?limit=3&continue=garbage"
expect_code 400 "invalid continue token"
req GET "/apis/storage.k8s.io/v1/volumeattachments?labelSelector=n%20in%20(2,3),n!=3"
check "set-based label selector" eq "$(jqo '[.items[].metadata.name]|join(",")')" "va-2"
req GET "/apis/storage.k8s.io/v1/volumeattachments?fieldSelector=metadata.name%3Dva-6"
check "field selector on name" eq "$(jqo '[.items[].metadata.name]|join(",")')" "va-6"
req GET "/apis/storage.k8s.io/v1/volumeattachments?fieldSelector=spec.nodeName%3Dx"
expect_code 400 "unsupported field selector"
req GET "/apis/storage.k8s.io/v1/volumeattachments?labelSelector=n%20in%20(2"
expect_code 400 "bad label selector"
req POST /api/v1/namespaces/kube-system/pods '{"metadata":{"name":"p1"},"spec":{"nodeName":"node-a"}}'
req POST /api/v1/namespaces/default/pods '{"metadata":{"name":"p2"},"spec":{"nodeName":"node-b"}}'
req GET "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a"
check "cluster-wide pod list by spec.nodeName" eq "$(jqo '[.items[]|.metadata.namespace+"/"+.metadata.name]|join(",")')" "kube-system/p1"
req GET "/api/v1/namespaces/default/pods"
check "namespaced list" eq "$(jqo '[.items[].metadata.name]|join(",")')" "p2"

# --- namespace deletion: Terminating, content removed, gone when empty ---
req DELETE /api/v1/namespaces/default
expect_code 403 "the default namespace may not be deleted"
req POST /api/v1/namespaces '{"metadata":{"name":"doomed"}}'
req POST /api/v1/namespaces/doomed/configmaps '{"metadata":{"name":"plain"}}'
req POST /api/v1/namespaces/doomed/configmaps '{"metadata":{"name":"held","finalizers":["x/y"]}}'
req DELETE /api/v1/namespaces/doomed
expect_code 200 "delete a namespace with content"
check "namespace is Terminating" eq "$(jqo .status.phase)" "Terminating"
req GET /api/v1/namespaces/doomed/configmaps/plain
expect_code 404 "content without finalizers is deleted with the namespace"
req GET /api/v1/namespaces/doomed/configmaps/held
check "content with finalizers is pending deletion" test -n "$(jqo '.metadata.deletionTimestamp // ""')"
req POST /api/v1/namespaces/doomed/configmaps '{"metadata":{"name":"late"}}'
expect_code 403 "no new content in a terminating namespace"
req GET /api/v1/namespaces/doomed
expect_code 200 "namespace stays while content remains"
req PATCH /api/v1/namespaces/doomed/configmaps/held '{"metadata":{"finalizers":[]}}' application/merge-patch+json
req GET /api/v1/namespaces/doomed
expect_code 404 "namespace goes with its last object"
req POST /api/v1/namespaces '{"metadata":{"name":"empty-ns"}}'
req DELETE /api/v1/namespaces/empty-ns
req GET /api/v1/namespaces/empty-ns
expect_code 404 "an empty namespace goes at once"

# --- hostile input: clear 4xx answers, and the server stays up ---
req POST /api/v1/persistentvolumes '{"metadata":{"name":"pv-t","labels":"x"}}'
expect_code 400 "labels that are not a map"
req POST /api/v1/persistentvolumes '{"metadata":{"name":"pv-t","finalizers":[1]}}'
expect_code 400 "finalizers that are not strings"
req POST /api/v1/persistentvolumes '{"metadata":{"name":5}}'
expect_code 400 "a name that is not a string"
req POST /api/v1/persistentvolumes "$(python3 -c 'print("["*5000+"]"*5000)')"
expect_code 400 "nesting too deep"
head -c 4000000 /dev/zero | tr '\0' 'a' >"$T/big"
CODE=$(curl -s -o "$T/out" -w '%{http_code}' "${CURL_EXTRA[@]}" -H 'Content-Type: application/json' --data-binary @"$T/big" "$S/api/v1/persistentvolumes")
expect_code 413 "a body over 3 MiB"
req POST /api/v1/persistentvolumes "{\"metadata\":{\"name\":\"$(printf 'n%.0s' $(seq 1 300))\"}}"
expect_code 422 "a name over 253 characters"
req GET "/api/v1/persistentvolumes?fieldSelector=%5C"
expect_code 400 "a field selector that is one backslash"
req GET "/api/v1/persistentvolumes?labelSelector=!"
expect_code 400 "a label selector that is one !"
req GET "/api/v1/persistentvolumes?watch=1&resourceVersion=abc"
expect_code 400 "a watch resourceVersion that is not a number"
req GET "/api/v1/persistentvolumes?limit=-1"
expect_code 400 "a negative limit"
req POST /api/v1/namespaces/default/configmaps '{"metadata":{"name":"cm-del"}}'
req DELETE /api/v1/namespaces/default/configmaps/cm-del '{"preconditions":"x"}'
expect_code 400 "preconditions that are not an object"
req PATCH /api/v1/namespaces/default/configmaps/cm-del '[{"op":"add","path":"/metadata/finalizers","value":[{"x":1}]}]' application/json-patch+json
expect_code 400 "a JSON patch that makes finalizers invalid"
req GET /healthz
expect_code 200 "the server is still up"

finish
