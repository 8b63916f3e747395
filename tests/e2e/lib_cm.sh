# lib_cm.sh: helpers for kcsi-controller-manager scenarios (sourced after lib_emulator.sh and
# lib_attacher.sh). The scenarios play the node agent themselves: they write CSINode and the
# node's status (Ready, volumesInUse) with the API, as kubelet would.
#
# cm_start NAME [flags]       kcsi-controller-manager NAME, log in $T/NAME.log (CM_PIDS[NAME])
# cm_stop NAME                SIGTERM; returns its exit status
# cm_kill NAME                SIGKILL
# mk_mnode NODE               a Ready node with the controller-managed-attach-detach annotation
# node_status NODE JSON       merge-patches the node's status with JSON
# node_in_use NODE [UNIQ...]  sets status.volumesInUse
# node_ready NODE True|False  sets the Ready condition
# mk_bound_claim NAME PV      a claim bound to PV (spec.volumeName and status.phase Bound)
# mk_pod NAME NODE CLAIM...   a pod on NODE ("" for none) using the claims
# uniq HANDLE [DRIVER]        kubernetes.io/csi/<driver>^<handle>
# va_name HANDLE NODE [DRIVER] Kubernetes' csi-<sha256(handle+driver+node)>
# attached_list NODE          the names in NODE's status.volumesAttached, one per line
# pod_events POD REASON       the messages of the pod's events with REASON
# event_source NAME REASON    "source.component reportingComponent" of the first Event about NAME
#                             with REASON (any namespace); "" when there is none
declare -A CM_PIDS=()
CM_DRV=${CM_DRV:-loop.kcsi.io}

cm_cleanup() {
	for n in "${!CM_PIDS[@]}"; do
		kill_kids -KILL "${CM_PIDS[$n]}"
		wait "${CM_PIDS[$n]}" 2>/dev/null
	done
	att_cleanup
}
trap cm_cleanup EXIT

cm_start() {
	local name=$1
	shift
	"$KCSI_BIN/kcsi-controller-manager" --kubeconfig "$KC" "$@" >>"$T/$name.log" 2>&1 &
	CM_PIDS[$name]=$!
}

cm_stop() {
	local name=$1 rc=0
	kill -TERM "${CM_PIDS[$name]}"
	wait "${CM_PIDS[$name]}" || rc=$?
	unset "CM_PIDS[$name]"
	return $rc
}

cm_kill() {
	kill -KILL "${CM_PIDS[$1]}" 2>/dev/null
	wait "${CM_PIDS[$1]}" 2>/dev/null
	unset "CM_PIDS[$1]"
}

cm_http_port() { att_http_port "$1"; }

node_status() {
	req PATCH "/api/v1/nodes/$1/status" "$2" application/merge-patch+json
	[ "$CODE" = 200 ] || { echo "node status patch failed: $CODE $(cat "$T/out")" >&2; return 1; }
}

node_ready() {
	node_status "$1" "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"$2\"}]}}"
}

node_in_use() {
	local n=$1
	shift
	node_status "$n" "$(jq -cn --args '{status: {volumesInUse: $ARGS.positional}}' "$@")"
}

mk_mnode() {
	echo "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"$1\",
	\"annotations\":{\"volumes.kubernetes.io/controller-managed-attach-detach\":\"true\"}}}" |
		kc create -f - >/dev/null
	node_ready "$1" True
}

mk_bound_claim() {
	jq -n --arg n "$1" --arg pv "$2" '{apiVersion: "v1", kind: "PersistentVolumeClaim",
		metadata: {name: $n, namespace: "default"},
		spec: {accessModes: ["ReadWriteOnce"], resources: {requests: {storage: "16Mi"}},
		       volumeName: $pv, storageClassName: ""}}' | kc create -f - >/dev/null
	req PATCH "/api/v1/namespaces/default/persistentvolumeclaims/$1/status" \
		'{"status":{"phase":"Bound","accessModes":["ReadWriteOnce"],"capacity":{"storage":"16Mi"}}}' \
		application/merge-patch+json
}

mk_pod() {
	local name=$1 node=$2
	shift 2
	jq -n --arg n "$name" --arg node "$node" --args '{apiVersion: "v1", kind: "Pod",
		metadata: {name: $n, namespace: "default"},
		spec: ({containers: [{name: "c", image: "busybox",
		         volumeMounts: [$ARGS.positional | to_entries[] | {name: ("v" + (.key|tostring)), mountPath: ("/m" + (.key|tostring))}]}],
		       volumes: [$ARGS.positional | to_entries[] | {name: ("v" + (.key|tostring)), persistentVolumeClaim: {claimName: .value}}]}
		       + (if $node == "" then {} else {nodeName: $node} end))}' "$@" | kc create -f - >/dev/null
}

uniq() { echo "kubernetes.io/csi/${2:-$CM_DRV}^$1"; }
va_name() { echo "csi-$(printf '%s%s%s' "$1" "${3:-$CM_DRV}" "$2" | sha256sum | cut -d' ' -f1)"; }
attached_list() { kc get node "$1" -o json | jq -r '.status.volumesAttached // [] | .[].name'; }
node_lists() { attached_list "$1" | grep -qxF "$2"; }
node_lists_not() { ! node_lists "$@"; }
pod_events() {
	kc get events -n default -o json |
		jq -r --arg p "$1" --arg r "$2" '.items[] | select(.involvedObject.name == $p and .reason == $r) | .message'
}
has_event() { pod_events "$1" "$2" | grep -qF "$3"; }
event_source() {
	kc get events -A -o json | jq -r --arg n "$1" --arg r "$2" \
		'[.items[] | select(.involvedObject.name == $n and .reason == $r)][0] // empty |
		 (.source.component // "") + " " + (.reportingComponent // "")'
}
no_vas() { [ "$(va_count)" = 0 ]; }
# node_exactly NODE [UNIQ...]: volumesAttached holds exactly these names
node_exactly() {
	local n=$1
	shift
	[ "$(attached_list "$n" | sort | tr '\n' ' ')" = "$(printf '%s\n' "$@" | sed '/^$/d' | sort | tr '\n' ' ')" ]
}
va_count() { kc get volumeattachments -o json | jq '.items | length'; }

cm_finish() {
	for f in "$T"/cm*.log; do
		[ -e "$f" ] || continue
		if grep -qE "ERROR: (Address|Leak)Sanitizer|runtime error:" "$f"; then
			fail "sanitizer report in $f"
		fi
	done
	att_finish
}
