# lib_node.sh: helpers for kcsi-node scenarios (sourced after lib_emulator.sh and lib_attacher.sh).
#
# node_up N [FLAG...] a node: kcsi-loopplugin --mode node, its csi-node-driver-registrar and
#                     kcsi-node (with FLAGs), laid out as `kcsi up` does under $T/nodes/N (PIDs
#                     in NODE_PIDS[N:*])
# controller_up       kcsi-loopplugin --mode controller on $T/lp.sock (pool $T/pool) and csi-attacher
# kcsi_node_start N   (re)starts only kcsi-node for N, log in $T/nodes/N/kcsi-node.log
# pod_with_volume P N an ext4 volume vol1 (handle in $h) as PV pv1 for claim c1, attached to node
#                     N, and pod P of it on N
# node_json N         the Node as JSON
# csinode_driver N D  the CSINode entry of driver D on node N (empty when absent)
# The EXIT trap stops them and checks that no mount under $T is left.
declare -A NODE_PIDS=()

node_cleanup() {
	for k in "${!NODE_PIDS[@]}"; do
		kill_kids -KILL "${NODE_PIDS[$k]}"
		wait "${NODE_PIDS[$k]}" 2>/dev/null
	done
	# What the scenario may have left mounted (a failing run): unmount it, deepest first, and
	# detach the loop devices of this test's pool.
	grep -o " $T/[^ ]*" /proc/self/mountinfo | sort -r | while read -r m; do
		umount -l "$m" 2>/dev/null
	done
	losetup -a | grep "$T/" | cut -d: -f1 | while read -r d; do losetup -d "$d"; done
	att_cleanup
}
trap node_cleanup EXIT

controller_up() {
	lp_start n1 --mode controller
	att_start attacher "$T/lp.sock"
}

kcsi_node_start() {
	local n=$1 d=$T/nodes/$1
	shift
	"$KCSI_BIN/kcsi-node" --kubeconfig "$KC" --node-name "$n" --root-dir "$d/kubelet" \
		--node-labels "topology.loop.kcsi.io/zone=$n" "$@" >>"$d/kcsi-node.log" 2>&1 &
	NODE_PIDS[$n:node]=$!
}

node_up() {
	local n=$1 d=$T/nodes/$1
	shift
	mkdir -p "$d/plugins/loop.kcsi.io" "$d/kubelet/plugins_registry" "$T/pool"
	"$KCSI_BIN/kcsi-loopplugin" --mode node --endpoint "unix://$d/plugins/loop.kcsi.io/csi.sock" \
		--nodeid "$n" --zone "$n" --pool-dir "$T/pool" >>"$d/lp.log" 2>&1 &
	NODE_PIDS[$n:lp]=$!
	"$KCSI_BIN/csi-node-driver-registrar" --csi-address "$d/plugins/loop.kcsi.io/csi.sock" \
		--kubelet-registration-path "$d/plugins/loop.kcsi.io/csi.sock" \
		--plugin-registration-path "$d/kubelet/plugins_registry" >>"$d/registrar.log" 2>&1 &
	NODE_PIDS[$n:reg]=$!
	kcsi_node_start "$n" "$@"
}

node_json() { kc get node "$1" -o json 2>/dev/null; }
csinode_driver() {
	kc get csinode "$1" -o json 2>/dev/null | jq -c ".spec.drivers[]? | select(.name==\"$2\")"
}
csinode_has() { [ -n "$(csinode_driver "$1" "$2")" ]; }
csinode_lacks() { [ -z "$(csinode_driver "$1" "$2")" ]; }

node_finish() {
	if [ "$FAILS" -ne 0 ]; then
		for f in "$T"/*.log "$T"/nodes/*/*.log; do
			[ -f "$f" ] || continue
			echo "---- $f (last 40 lines)" >&2
			tail -40 "$f" >&2
		done
		exit 1
	fi
	echo PASS
}

# ---- playing the attach/detach controller (kcsi-controller-manager is built elsewhere) ----
sha256() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }
# unique_name HANDLE: the volume's name in Node.status.volumesAttached/volumesInUse
unique_name() { echo "kubernetes.io/csi/loop.kcsi.io^$1"; }
va_of() { echo "csi-$(sha256 "$1loop.kcsi.io$2")"; }
node_status_patch() {
	curl -sk "${CURL_EXTRA[@]}" -X PATCH -H 'Content-Type: application/merge-patch+json' \
		--data "$2" "$S/api/v1/nodes/$1/status" >/dev/null
}
in_use() { node_json "$1" | jq -e --arg u "$(unique_name "$2")" '(.status.volumesInUse // []) | index($u)' >/dev/null; }
not_in_use() { ! in_use "$@"; }
# ad_attach HANDLE PV NODE: VolumeAttachment -> attached -> Node.status.volumesAttached
ad_attach() {
	local va
	va=$(va_of "$1" "$3")
	mk_va "$va" loop.kcsi.io "$3" "$2"
	wait_for "VolumeAttachment $va attached" 20 va_attached "$va" || return 1
	local cur
	cur=$(node_json "$3" | jq -c --arg u "$(unique_name "$1")" \
		'[(.status.volumesAttached // [])[] | select(.name != $u)] + [{name: $u, devicePath: ""}]')
	node_status_patch "$3" "{\"status\":{\"volumesAttached\":$cur}}"
}
# ad_detach HANDLE NODE: waits until the node no longer reports the volume in use, then detaches
ad_detach() {
	local va
	va=$(va_of "$1" "$2")
	wait_for "$2 stops reporting $1 in use" 30 not_in_use "$2" "$1" || return 1
	kc delete volumeattachment "$va" --wait=false >/dev/null
	wait_for "VolumeAttachment $va gone" 20 va_gone "$va" || return 1
	local cur
	cur=$(node_json "$2" | jq -c --arg u "$(unique_name "$1")" \
		'[(.status.volumesAttached // [])[] | select(.name != $u)]')
	node_status_patch "$2" "{\"status\":{\"volumesAttached\":$cur}}"
}
# mk_claim NAME PV: a PVC bound to PV (and the PV's claimRef)
mk_claim() {
	jq -n --arg n "$1" --arg pv "$2" '{apiVersion: "v1", kind: "PersistentVolumeClaim",
		metadata: {name: $n, namespace: "default"},
		spec: {accessModes: ["ReadWriteOnce"], volumeName: $pv, storageClassName: "",
		       resources: {requests: {storage: "16Mi"}}}}' | kc create -f - >/dev/null
}
# mk_pod NAME NODE CLAIM [block]
mk_pod() {
	local dev='{"volumeMounts": [{"name": "data", "mountPath": "/data"}]}'
	[ "${4:-}" = block ] && dev='{"volumeDevices": [{"name": "data", "devicePath": "/dev/xvda"}]}'
	jq -n --arg n "$1" --arg node "$2" --arg c "$3" --argjson dev "$dev" '{apiVersion: "v1",
		kind: "Pod", metadata: {name: $n, namespace: "default"},
		spec: {nodeName: $node, volumes: [{name: "data", persistentVolumeClaim: {claimName: $c}}],
		       containers: [({name: "app", image: "busybox"} + $dev)]}}' | kc create -f - >/dev/null
}
pod_with_volume() {
	h=$(lp_volume vol1 --cap SINGLE_NODE_WRITER,mount,ext4)
	[ -n "$h" ] || fail "create-volume failed"
	mk_pv pv1 loop.kcsi.io "$h" '{"csi":{"driver":"loop.kcsi.io","volumeHandle":"'"$h"'","fsType":"ext4"},"claimRef":{"namespace":"default","name":"c1"}}'
	mk_claim c1 pv1
	ad_attach "$h" pv1 "$2"
	mk_pod "$1" "$2" c1
}
pod_uid() { kc get pod "$1" -o jsonpath='{.metadata.uid}'; }
pod_running() {
	kc get pod "$1" -o json 2>/dev/null |
		jq -e '.status.phase=="Running" and ([.status.conditions[]? | select(.type=="Ready" and .status=="True")] | length == 1)' >/dev/null
}
pod_gone() { ! kc get pod "$1" >/dev/null 2>&1; }
# pod_target NODE UID PV: the pod's filesystem publish path
pod_target() { echo "$T/nodes/$1/kubelet/pods/$2/volumes/kubernetes.io~csi/$3/mount"; }
staging_of() { echo "$T/nodes/$1/kubelet/plugins/kubernetes.io/csi/loop.kcsi.io/$(sha256 "$2")/globalmount"; }
# pod_event POD REASON TEXT: an Event on the pod with that reason whose message contains TEXT
pod_event() {
	kc get events -o json | jq -e --arg r "$2" --arg m "$3" \
		'.items[] | select(.involvedObject.name=="'"$1"'" and .reason==$r and (.message | contains($m)))' >/dev/null
}
