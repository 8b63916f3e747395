# lib_provisioner.sh: helpers for csi-provisioner e2e scenarios (sourced after lib_emulator.sh and
# lib_attacher.sh). The scenarios play the PV binder themselves (kcsi's PV controller is separate):
#
# prov_start NAME SOCK [flags]   csi-provisioner NAME against SOCK, log in $T/NAME.log (ATT_PIDS)
# mk_sc NAME [extra-json]        StorageClass of driver $DRV (merged with extra)
# mk_pvc NAME SC [extra-json]    claim in "default", annotated for $DRV as the binder would
# pvc_uid NAME / pv_of NAME      the claim's UID / the PV name the provisioner gives it
# pv_json PV / pvc_json PVC      objects as JSON ("" when absent)
# bind PVC                       the binder's part once the PV exists: volumeName and both Bound
# release PVC                    deletes the claim and marks its PV Released
# events_of KIND NAME            "reason: message" lines of the events about an object
# lp_volumes                     volume IDs the loop driver holds
# topo_node NODE [ZONE]          a Node with the driver's zone label and its CSINode registering
#                                the key: an Immediate claim needs one (see the function)
: "${DRV:=loop.kcsi.io}"

prov_start() {
	local name=$1 sock=$2
	shift 2
	"$KCSI_BIN/csi-provisioner" --csi-address "unix://$sock" --kubeconfig "$KC" \
		--retry-interval-start 200ms --retry-interval-max 2s "$@" >>"$T/$name.log" 2>&1 &
	ATT_PIDS[$name]=$!
}

mk_sc() {
	local extra=${2:-"{}"}
	jq -n --arg n "$1" --arg d "$DRV" --argjson x "$extra" '{
		apiVersion: "storage.k8s.io/v1", kind: "StorageClass", metadata: {name: $n},
		provisioner: $d, reclaimPolicy: "Delete", volumeBindingMode: "Immediate"} * $x' |
		kc create -f - >/dev/null
}

mk_pvc() {
	local extra=${3:-"{}"}
	jq -n --arg n "$1" --arg sc "$2" --arg d "$DRV" --argjson x "$extra" '{
		apiVersion: "v1", kind: "PersistentVolumeClaim",
		metadata: {name: $n, namespace: "default",
			   annotations: {"volume.kubernetes.io/storage-provisioner": $d}},
		spec: {storageClassName: $sc, accessModes: ["ReadWriteOnce"], volumeMode: "Filesystem",
		       resources: {requests: {storage: "16Mi"}}}} * $x' | kc create -f - >/dev/null
}

# topo_node NODE [ZONE]: a Node labelled with the driver's zone and its CSINode registering that
# key, as kubelet and the registrar leave a node that runs the driver. With topology (on by
# default) an Immediate claim is refused until some node has registered keys ("no available
# topology found", as upstream). ZONE defaults to the driver's own: csi-testdriver's z1,
# kcsi-loopplugin's local (whose CreateVolume needs its zone among the requisite).
topo_node() {
	local key zone=${2:-}
	case $DRV in
	loop.kcsi.io) key=topology.loop.kcsi.io/zone; zone=${zone:-local} ;;
	*) key=topology.kcsi.dev/zone; zone=${zone:-z1} ;;
	esac
	jq -n --arg n "$1" --arg k "$key" --arg z "$zone" \
		'{apiVersion: "v1", kind: "Node", metadata: {name: $n, labels: {($k): $z}}}' | kc create -f - >/dev/null
	jq -n --arg n "$1" --arg k "$key" --arg d "$DRV" '{apiVersion: "storage.k8s.io/v1", kind: "CSINode",
		metadata: {name: $n}, spec: {drivers: [{name: $d, nodeID: $n, topologyKeys: [$k]}]}}' |
		kc create -f - >/dev/null
}

pvc_json() { kc get pvc "$1" -n default -o json 2>/dev/null || true; }
pv_json() { kc get pv "$1" -o json 2>/dev/null || true; }
pvc_uid() { pvc_json "$1" | jq -r .metadata.uid; }
pv_of() { echo "pvc-$(pvc_uid "$1")"; }
pv_exists() { kc get pv "$1" >/dev/null 2>&1; }
pvc_field() { pvc_json "$1" | jq -r "$2"; }
pv_field() { pv_json "$1" | jq -r "$2"; }

# status PATH JSON: a merge patch of an object's /status.
status_patch() {
	req PATCH "$1/status" "$2" application/merge-patch+json
	expect_code 200 "status patch of $1"
}

# bind CLAIM [PV]: the binder's part (PV defaults to the claim's, looked up with kubectl)
bind() {
	local pv=${2:-}
	[ -n "$pv" ] || pv=$(pv_of "$1")
	req PATCH "/api/v1/namespaces/default/persistentvolumeclaims/$1" \
		"{\"spec\":{\"volumeName\":\"$pv\"}}" application/merge-patch+json
	expect_code 200 "bind $1"
	status_patch "/api/v1/namespaces/default/persistentvolumeclaims/$1" '{"status":{"phase":"Bound"}}'
	status_patch "/api/v1/persistentvolumes/$pv" '{"status":{"phase":"Bound"}}'
}

release() {
	local pv
	pv=$(pv_of "$1")
	kc delete pvc "$1" -n default --wait=false >/dev/null
	status_patch "/api/v1/persistentvolumes/$pv" '{"status":{"phase":"Released"}}'
}

events_of() {
	kc get events -A -o json | jq -r --arg k "$1" --arg n "$2" \
		'.items[] | select(.involvedObject.kind==$k and .involvedObject.name==$n) | "\(.reason): \(.message)"'
}
has_event() { events_of "$1" "$2" | grep -q -- "$3"; }

lp_volumes() {
	"$KCSI_BIN/kcsi" --endpoint "unix://$T/lp.sock" -o json controller list-volumes |
		jq -r '.entries[]?.volume.volume_id'
}
td_volumes() {
	"$KCSI_BIN/kcsi" --endpoint "unix://$T/td.sock" -o json controller list-volumes |
		jq -r '.entries[]?.volume.volume_id'
}
lp_has() { lp_volumes | grep -qx "$1"; }
lp_lacks() { ! lp_has "$1"; }
# mk_secret NAME KEY VALUE: a Secret in "default" (JSON: kubectl's own "create secret" sends protobuf)
mk_secret() {
	jq -n --arg n "$1" --arg k "$2" --arg v "$(printf %s "$3" | base64 -w0)" \
		'{apiVersion:"v1",kind:"Secret",metadata:{name:$n,namespace:"default"},data:{($k):$v}}' |
		kc create -f - >/dev/null
}
