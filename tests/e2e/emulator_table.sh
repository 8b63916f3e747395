#!/bin/bash
# kubectl sees kube-emulator as a cluster: server-side Tables (kubectl get, -o wide, -w, -A,
# --show-labels) with kube-apiserver's columns, kubectl wait, describe with events, delete
# --wait, and the generators that send protobuf (create namespace / secret / configmap).
. "$(dirname "$0")/lib_emulator.sh"
command -v kubectl >/dev/null || { echo "kubectl not installed: install Debian's kubernetes-client"; exit 1; }
emu_start
K=("${KUBECTL:-kubectl}" --kubeconfig "$KC" --request-timeout=20s)

cat >"$T/objs.yaml" <<'YAML'
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: loop, annotations: {storageclass.kubernetes.io/is-default-class: "true"}}
provisioner: loop.kcsi.io
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-1}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Delete
  storageClassName: loop
  claimRef: {namespace: default, name: claim-1}
  csi: {driver: loop.kcsi.io, volumeHandle: vol-1}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: claim-1, labels: {app: web}}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: loop
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers: [{name: c, image: busybox}]
---
apiVersion: v1
kind: Node
metadata: {name: node-1, labels: {node-role.kubernetes.io/worker: ""}}
---
apiVersion: storage.k8s.io/v1
kind: VolumeAttachment
metadata: {name: va-1}
spec: {attacher: loop.kcsi.io, nodeName: node-1, source: {persistentVolumeName: pv-1}}
---
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata: {name: snap-1}
spec: {volumeSnapshotClassName: loop, source: {persistentVolumeClaimName: claim-1}}
---
apiVersion: groupsnapshot.storage.k8s.io/v1beta2
kind: VolumeGroupSnapshot
metadata: {name: group-1}
spec: {volumeGroupSnapshotClassName: loop-group, source: {selector: {matchLabels: {app: web}}}}
---
apiVersion: groupsnapshot.storage.k8s.io/v1beta2
kind: VolumeGroupSnapshotContent
metadata: {name: groupsnapcontent-1}
spec:
  deletionPolicy: Delete
  driver: loop.kcsi.io
  volumeGroupSnapshotClassName: loop-group
  volumeGroupSnapshotRef: {name: group-1, namespace: default}
  source: {volumeHandles: [vol-1, vol-2]}
---
apiVersion: groupsnapshot.storage.k8s.io/v1beta2
kind: VolumeGroupSnapshotClass
metadata: {name: loop-group}
driver: loop.kcsi.io
deletionPolicy: Retain
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: csi-loop}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: loop-runner}
rules: [{apiGroups: [""], resources: [pods], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: loop-runner}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: loop-runner}
subjects:
- {kind: ServiceAccount, name: csi-loop, namespace: default}
- {kind: User, name: alice}
YAML
"${K[@]}" create -f "$T/objs.yaml" >/dev/null || fail "kubectl create -f"

# columns as kubectl prints kube-apiserver's Tables (headers and cells)
hdr() { "${K[@]}" get "$@" 2>&1 | head -1 | tr -s ' '; }
row() { "${K[@]}" get "$@" --no-headers 2>&1 | head -1 | tr -s ' '; }
check "pvc columns" eq "$(hdr pvc)" "NAME STATUS VOLUME CAPACITY ACCESS MODES STORAGECLASS VOLUMEATTRIBUTESCLASS AGE"
check "unbound pvc row" bash -c "[[ '$(row pvc)' =~ ^claim-1\ Pending\ loop\ \<unset\>\ [0-9]+s$ ]]"
check "pv columns" eq "$(hdr pv)" "NAME CAPACITY ACCESS MODES RECLAIM POLICY STATUS CLAIM STORAGECLASS VOLUMEATTRIBUTESCLASS REASON AGE"
check "pv row" bash -c "[[ '$(row pv)' =~ ^pv-1\ 1Gi\ RWO\ Delete\ Pending\ default/claim-1\ loop\ \<unset\>\ [0-9]+s$ ]]"
check "pod columns" eq "$(hdr pods)" "NAME READY STATUS RESTARTS AGE"
check "pod -o wide columns" eq "$(hdr pods -o wide)" "NAME READY STATUS RESTARTS AGE IP NODE NOMINATED NODE READINESS GATES"
check "pod row" bash -c "[[ '$(row pods)' =~ ^web\ 0/1\ Pending\ 0\ [0-9]+s$ ]]"
check "node row (roles from labels)" bash -c "[[ '$(row nodes)' =~ ^node-1\ Unknown\ worker\ [0-9]+s ]]"
check "storageclass row marks the default" bash -c "[[ '$(row sc)' =~ ^loop\ \(default\)\ loop.kcsi.io\ Delete\ WaitForFirstConsumer\ false ]]"
check "volumeattachment columns" eq "$(hdr volumeattachments)" "NAME ATTACHER PV NODE ATTACHED AGE"
check "volumeattachment row" bash -c "[[ '$(row volumeattachments)' =~ ^va-1\ loop.kcsi.io\ pv-1\ node-1\ false ]]"
check "namespaces" eq "$("${K[@]}" get ns --no-headers | awk '{print $1 "=" $2}' | tr '\n' ' ')" "default=Active kube-node-lease=Active kube-public=Active kube-system=Active "
check "volumesnapshot columns (CRD printer columns)" eq "$(hdr vs)" "NAME READYTOUSE SOURCEPVC SOURCESNAPSHOTCONTENT RESTORESIZE SNAPSHOTCLASS SNAPSHOTCONTENT CREATIONTIME AGE"
check "volumegroupsnapshot columns" eq "$(hdr vgs)" "NAME READYTOUSE VOLUMEGROUPSNAPSHOTCLASS VOLUMEGROUPSNAPSHOTCONTENT CREATIONTIME AGE"
check "volumegroupsnapshot row" bash -c "[[ '$(row vgs)' =~ ^group-1\ loop-group\ [0-9]+s$ ]]"
check "volumegroupsnapshotcontent columns" eq "$(hdr vgsc)" "NAME READYTOUSE DELETIONPOLICY DRIVER VOLUMEGROUPSNAPSHOTCLASS VOLUMEGROUPSNAPSHOTNAMESPACE VOLUMEGROUPSNAPSHOT AGE"
check "volumegroupsnapshotcontent row" bash -c "[[ '$(row vgsc)' =~ ^groupsnapcontent-1\ Delete\ loop.kcsi.io\ loop-group\ default\ group-1\ [0-9]+s$ ]]"
check "volumegroupsnapshotclass row" bash -c "[[ '$(row vgsclass)' =~ ^loop-group\ loop.kcsi.io\ Retain\ [0-9]+s$ ]]"
check "serviceaccount columns" eq "$(hdr sa)" "NAME SECRETS AGE"
check "clusterrole columns" eq "$(hdr clusterroles)" "NAME CREATED AT"
check "clusterrole row (creation time)" bash -c "[[ '$(row clusterroles)' =~ ^loop-runner\ 20[0-9-]+T[0-9:]+Z$ ]]"
check "clusterrolebinding -o wide" eq "$(hdr clusterrolebindings -o wide)" "NAME ROLE AGE USERS GROUPS SERVICEACCOUNTS"
check "clusterrolebinding row" bash -c "[[ '$(row clusterrolebindings -o wide)' =~ ^loop-runner\ ClusterRole/loop-runner\ [0-9]+s\ alice\ default/csi-loop$ ]]"
check "get -A adds the namespace" bash -c "[[ '$(row pvc -A)' =~ ^default\ claim-1\  ]]"
check "--show-labels" bash -c "[[ '$("${K[@]}" get pvc --show-labels --no-headers)' == *app=web ]]"
check "get by name" bash -c "[[ '$(row pvc claim-1)' =~ ^claim-1\ Pending ]]"

# kubectl get -w prints the rows of later changes; kubectl wait returns once the condition holds
"${K[@]}" get pvc -w >"$T/watch.out" 2>&1 &
WPID=$!
# kubectl wait --for=jsonpath came with kubectl 1.23; Debian's 1.20 waits for a condition only
MINOR=$("${K[0]}" version --client -o json 2>/dev/null | jq -r '.clientVersion.minor' | tr -dc 0-9)
if [ "${MINOR:-0}" -ge 23 ]; then
	"${K[@]}" wait --for=jsonpath='{.status.phase}'=Bound pvc/claim-1 --timeout=20s >"$T/wait.out" 2>&1 &
else
	( until [ "$("${K[@]}" get pvc claim-1 -o jsonpath='{.status.phase}')" = Bound ]; do sleep 0.2; done
	  echo "condition met" >"$T/wait.out" ) &
fi
WAIT1=$!
"${K[@]}" wait --for=condition=Ready pod/web --timeout=20s >"$T/wait2.out" 2>&1 &
WAIT2=$!
sleep 1
check "kubectl wait pvc is still waiting" kill -0 $WAIT1
"${K[@]}" patch pvc claim-1 --type=merge -p '{"spec":{"volumeName":"pv-1"}}' >/dev/null
# status over HTTP: kubectl 1.20 has no --subresource
req PATCH /api/v1/namespaces/default/persistentvolumeclaims/claim-1/status '{"status":{"phase":"Bound","capacity":{"storage":"1Gi"},"accessModes":["ReadWriteOnce"]}}' application/merge-patch+json
req PATCH /api/v1/namespaces/default/pods/web/status '{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}' application/merge-patch+json
check "kubectl wait --for=jsonpath returns 0" wait $WAIT1
check "kubectl wait --for=condition=Ready returns 0" wait $WAIT2
check "kubectl wait says condition met" grep -q "condition met" "$T/wait.out"
check "bound pvc row" bash -c "[[ '$(row pvc)' =~ ^claim-1\ Bound\ pv-1\ 1Gi\ RWO\ loop\ \<unset\>\  ]]"
sleep 0.5
kill $WPID 2>/dev/null
wait $WPID 2>/dev/null
check "get -w shows the header once and the bound row" bash -c "[ \$(grep -c '^NAME' '$T/watch.out') = 1 ] && grep -qE '^claim-1 +Bound +pv-1 +1Gi +RWO' '$T/watch.out'"

# describe lists the object's events (fieldSelector on involvedObject)
UIDP=$("${K[@]}" get pod web -o jsonpath='{.metadata.uid}')
req POST /api/v1/namespaces/default/events "{\"metadata\":{\"name\":\"web.1\"},\"involvedObject\":{\"kind\":\"Pod\",\"namespace\":\"default\",\"name\":\"web\",\"uid\":\"$UIDP\"},\"reason\":\"Scheduled\",\"message\":\"assigned default/web to node-1\",\"type\":\"Normal\",\"source\":{\"component\":\"kcsi-scheduler\"},\"count\":1}"
check "describe pod shows its event" bash -c "'${K[0]}' --kubeconfig '$KC' describe pod web | grep -qE 'Normal +Scheduled .* kcsi-scheduler +assigned default/web to node-1'"
check "events columns" eq "$(hdr events)" "LAST SEEN TYPE REASON OBJECT MESSAGE"
check "event row" bash -c "[[ '$(row events)' =~ ^[0-9]+s\ Normal\ Scheduled\ pod/web\ assigned ]]"

# generators that send protobuf bodies
check "kubectl create namespace" "${K[@]}" create namespace team-a
check "kubectl create secret generic" "${K[@]}" create secret generic s1 -n team-a --from-literal=user=admin --from-literal=pw=hunter2
check "kubectl create configmap" "${K[@]}" create configmap c1 -n team-a --from-literal=k=v
check "secret data decoded" eq "$("${K[@]}" get secret s1 -n team-a -o jsonpath='{.data.user}' | base64 -d)" "admin"
check "secret row" bash -c "[[ '$(row secrets -n team-a)' =~ ^s1\ Opaque\ 2\  ]]"
check "configmap data" eq "$("${K[@]}" get cm c1 -n team-a -o jsonpath='{.data.k}')" "v"
pbreq() { CODE=$(curl -s -o "$T/out" -w '%{http_code}' -X POST -H 'Content-Type: application/vnd.kubernetes.protobuf' --data-binary "@$1" "$S/api/v1/namespaces"); }
printf 'k8s\0\x0a\x0e\x0a\x02v1\x12\x08Endpoint' >"$T/pb1"
pbreq "$T/pb1"
expect_code 415 "protobuf of another kind"
check "415 names what is decoded, whole" bash -c "jq -r .message '$T/out' | grep -q 'decodes protobuf only for v1 Namespace, Secret, ConfigMap, Binding, Event (v1 and events.k8s.io/v1), PersistentVolume.*, not v1 Endpoint; send JSON\$'"
printf 'k8s\0\x0a\xff\xff' >"$T/pb2"
pbreq "$T/pb2"
expect_code 415 "malformed protobuf"
check "415 says malformed" bash -c "jq -r .message '$T/out' | grep -q malformed"
# a Namespace whose name is 3 bytes though the length says 100: refused, nothing created
printf 'k8s\0\x0a\x0f\x0a\x02v1\x12\x09Namespace\x12\x07\x0a\x05\x0a\x64abc' >"$T/pb3"
pbreq "$T/pb3"
expect_code 415 "truncated protobuf"

# delete --wait waits until the object is gone
"${K[@]}" delete namespace team-a --timeout=20s >/dev/null || fail "kubectl delete namespace --wait"
check "namespace gone after delete --wait" bash -c "! '${K[0]}' --kubeconfig '$KC' get ns team-a >/dev/null 2>&1"
"${K[@]}" delete pvc claim-1 --timeout=20s >/dev/null || fail "kubectl delete pvc"
check "pvc gone" eq "$("${K[@]}" get pvc --no-headers 2>&1)" "No resources found in default namespace."
finish
