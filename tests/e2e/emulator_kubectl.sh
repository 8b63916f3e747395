#!/bin/bash
# kubectl (unchanged, real binary) against kube-emulator: create -f of the storage objects,
# get -o json, patch --type=merge/json, delete --wait=false with a finalizer, finalizer removal,
# get --watch, label selectors, and a plain delete that waits for the object to go.
. "$(dirname "$0")/lib_emulator.sh"
command -v kubectl >/dev/null || { echo "kubectl not installed: install Debian's kubernetes-client"; exit 1; }
# No token here: kubectl does not send bearer tokens over plain HTTP (emulator_tls.sh covers
# kubectl with a token over HTTPS).
emu_start
# KUBECTL may name another kubectl build (e.g. Debian's 1.20 kubernetes-client) to try it by hand.
K=("${KUBECTL:-kubectl}" --kubeconfig "$KC" --request-timeout=20s)

cat >"$T/objs.yaml" <<'YAML'
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: loop
provisioner: loop.kcsi.io
reclaimPolicy: Delete
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: pv-1
  labels: {tier: gold}
  finalizers: [kubernetes.io/pv-protection]
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: loop
  csi: {driver: loop.kcsi.io, volumeHandle: vol-1, fsType: ext4}
---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: pv-2
  labels: {tier: silver}
spec:
  capacity: {storage: 2Gi}
  accessModes: [ReadWriteOnce]
  csi: {driver: loop.kcsi.io, volumeHandle: vol-2}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: claim-1
  namespace: default
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: loop
  resources: {requests: {storage: 1Gi}}
---
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata:
  name: node-1
spec:
  drivers:
  - name: loop.kcsi.io
    nodeID: node-1
    topologyKeys: [topology.loop.kcsi.io/node]
---
apiVersion: storage.k8s.io/v1
kind: VolumeAttachment
metadata:
  name: csi-0123456789abcdef
spec:
  attacher: loop.kcsi.io
  nodeName: node-1
  source: {persistentVolumeName: pv-1}
YAML

check "kubectl create -f" "${K[@]}" create -f "$T/objs.yaml"
check "get pv -o json" eq "$("${K[@]}" get pv pv-1 -o json | jq -r '.spec.csi.volumeHandle')" "vol-1"
check "get pvc" eq "$("${K[@]}" get pvc claim-1 -o jsonpath='{.spec.storageClassName}')" "loop"
check "get sc" eq "$("${K[@]}" get storageclass loop -o jsonpath='{.provisioner}')" "loop.kcsi.io"
check "get csinode" eq "$("${K[@]}" get csinode node-1 -o jsonpath='{.spec.drivers[0].nodeID}')" "node-1"
check "get va" eq "$("${K[@]}" get volumeattachment csi-0123456789abcdef -o jsonpath='{.spec.source.persistentVolumeName}')" "pv-1"
check "table output lists both PVs" eq "$("${K[@]}" get pv --no-headers | awk '{print $1}' | paste -sd,)" "pv-1,pv-2"
check "label selector" eq "$("${K[@]}" get pv -l tier=gold -o name)" "persistentvolume/pv-1"
check "set-based label selector" eq "$("${K[@]}" get pv -l 'tier in (silver,bronze)' -o name)" "persistentvolume/pv-2"
check "create twice fails" bash -c "! ${K[*]} create -f '$T/objs.yaml' 2>'$T/err'"
check "AlreadyExists is reported" grep -q AlreadyExists "$T/err"

# watch in the background while we change things
"${K[@]}" get pv --watch --output-watch-events -o json >"$T/watch.json" 2>"$T/watch.err" &
WATCH=$!
for _ in $(seq 1 100); do [ -s "$T/watch.json" ] && break; sleep 0.1; done

check "patch --type=merge" "${K[@]}" patch pv pv-2 --type=merge -p '{"metadata":{"labels":{"tier":"gold"}}}'
check "merge patch applied" eq "$("${K[@]}" get pv -l tier=gold -o name | paste -sd,)" "persistentvolume/pv-1,persistentvolume/pv-2"
check "patch --type=json" "${K[@]}" patch volumeattachment csi-0123456789abcdef --type=json \
	-p '[{"op":"add","path":"/metadata/finalizers","value":["external-attacher/loop-kcsi-io"]}]'
# --subresource exists from kubectl 1.24; Debian's kubernetes-client (1.20, what scripts/deps.sh
# installs when no kubectl is present) lacks it, so the status is then patched over raw HTTP.
if "${K[@]}" patch --help 2>/dev/null | grep -q -- '--subresource'; then
	check "patch status subresource" "${K[@]}" patch volumeattachment csi-0123456789abcdef \
		--subresource=status --type=merge -p '{"status":{"attached":true}}'
else
	echo "note: this kubectl has no --subresource; patching status with curl"
	req PATCH /apis/storage.k8s.io/v1/volumeattachments/csi-0123456789abcdef/status \
		'{"status":{"attached":true}}' application/merge-patch+json
	expect_code 200 "patch status subresource over HTTP"
fi
check "status patched" eq "$("${K[@]}" get volumeattachment csi-0123456789abcdef -o jsonpath='{.status.attached}')" "true"
check "strategic patch (kubectl default)" "${K[@]}" patch pvc claim-1 -p '{"metadata":{"annotations":{"a":"b"}}}'
check "strategic patch applied" eq "$("${K[@]}" get pvc claim-1 -o jsonpath='{.metadata.annotations.a}')" "b"

check "delete --wait=false" "${K[@]}" delete pv pv-1 --wait=false
check "object with a finalizer stays, with a deletionTimestamp" test -n \
	"$("${K[@]}" get pv pv-1 -o jsonpath='{.metadata.deletionTimestamp}')"
check "remove the finalizer" "${K[@]}" patch pv pv-1 --type=json -p '[{"op":"remove","path":"/metadata/finalizers"}]'
check "removing the finalizer removes the object" bash -c "! ${K[*]} get pv pv-1 2>/dev/null"
check "delete that waits" "${K[@]}" delete pv pv-2 --timeout=20s
check "waited delete removed it" eq "$("${K[@]}" get pv -o name)" ""

# one line per event: "TYPE name"
watch_lines() { jq -r '"\(.type) \(.object.metadata.name)"' "$T/watch.json" >"$T/watch" 2>/dev/null; }
for _ in $(seq 1 100); do watch_lines; grep -q "DELETED pv-2" "$T/watch" && break; sleep 0.1; done
kill $WATCH 2>/dev/null
wait $WATCH 2>/dev/null
check "get --watch saw the initial objects" grep -q "^ADDED pv-1" "$T/watch"
check "get --watch saw modifications" grep -q "^MODIFIED pv-2" "$T/watch"
check "get --watch saw both deletions" eq "$(grep -c '^DELETED' "$T/watch")" "2"
[ "$FAILS" -eq 0 ] || { echo "watch output:"; cat "$T/watch" "$T/watch.err"; }

# kubectl's generators (create namespace/configmap) send protobuf bodies, which the emulator
# refuses with 415; manifests are sent as JSON.
cat >"$T/ns.yaml" <<'YAML'
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c1, namespace: team-a}
data: {k: v}
YAML
check "namespace and configmap from a manifest" "${K[@]}" apply -f "$T/ns.yaml"
check "apply again is unchanged" bash -c "${K[*]} apply -f '$T/ns.yaml' | grep -q 'configmap/c1 unchanged'"
check "get all (category) works" "${K[@]}" get all -n team-a
check "api-resources lists volumeattachments" bash -c "${K[*]} api-resources | grep -q '^volumeattachments '"
check "describe pvc" bash -c "${K[*]} describe pvc claim-1 | grep -q 'StorageClass:.*loop'"
check "configmap data" eq "$("${K[@]}" -n team-a get configmap c1 -o jsonpath='{.data.k}')" "v"

# the scenarios' reads without kubectl (lib_kget.sh) print what kubectl prints for the same call
. "$(dirname "$0")/lib_kget.sh"
"${K[@]}" create -f - >/dev/null <<'YAML' || fail "kget objects"
apiVersion: v1
kind: PersistentVolume
metadata: {name: kget-pv, labels: {tier: gold}}
spec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], csi: {driver: d, volumeHandle: h, readOnly: false}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: kget-claim, namespace: default, annotations: {volume.kubernetes.io/storage-provisioner: d}}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
YAML
for a in "get pv -o json" "get pv kget-pv -o json" "get pvc -n default -o json" "get pvc -A -o json" \
	"get pvc kget-claim -o json" "get events -A -o json" "get pv kget-pv -o jsonpath={.spec.capacity.storage}" \
	"get pv kget-pv -o jsonpath={.metadata.labels.tier}" "get pvc kget-claim -o jsonpath={.spec.nothere}" \
	"get pv kget-pv -o jsonpath={.spec.csi.readOnly}" "get pv,pvc,events -A -o json" \
	"get pvc,pv -n default -o json" \
	"get pvc kget-claim -o jsonpath={.metadata.annotations.volume\.kubernetes\.io/storage-provisioner}"; do
	# shellcheck disable=SC2086 # the call's words
	fast=$(kc_fast $a; echo "|status $?") # byte for byte: a trailing newline counts
	# shellcheck disable=SC2086
	slow=$("${K[@]}" $a; echo "|status $?")
	case $a in *json) fast="$(jq -S . <<<"${fast%|*}")|${fast##*|}"
		slow="$(jq -S . <<<"${slow%|*}")|${slow##*|}" ;; esac
	check "kc_fast $a: as kubectl prints it" eq "$fast" "$slow"
done
check "kc_fast: a missing object fails as kubectl's get does" eq "$(kc_fast get pv nope -o json 2>/dev/null; echo $?)" 1
check "kc_fast: a selector is kubectl's" eq "$(kc_fast get pv -l tier=gold -o json; echo $?)" 3

finish
