# lib_attacher.sh: helpers for csi-attacher e2e scenarios (sourced after lib_emulator.sh).
#
# lp_start NODE [flags]      kcsi-loopplugin on $T/lp.sock with its pool in $T/pool (LP_PID)
# td_start [flags]           csi-testdriver on $T/td.sock recording requests in $T/td.rec (TD_PID)
# td_stop                    stops it and forgets its record
# att_start NAME SOCK [flags] csi-attacher NAME against SOCK, log in $T/NAME.log (ATT_PIDS[NAME])
# att_stop NAME              SIGTERM; returns its exit status
# kc ARGS...                 kubectl against the emulator (its commonest reads by curl: lib_kget.sh)
# wait_for "what" SECS cmd.. polls cmd until it succeeds; fails the scenario after SECS
# va_json NAME               the VolumeAttachment as JSON on stdout ("" when absent)
# mk_node / mk_csinode / mk_pv / mk_va   create objects with kubectl (see each for arguments)
# The EXIT trap stops every process, deletes volumes it made and checks nothing is left behind.
: "${KCSI_TESTS:?KCSI_TESTS must point at the build tests directory}"
LP_PID=""
LP_NODE_PIDS=()
TD_PID=""
declare -A ATT_PIDS=()

att_cleanup() {
	for n in "${!ATT_PIDS[@]}"; do
		kill_kids -KILL "${ATT_PIDS[$n]}"
		wait "${ATT_PIDS[$n]}" 2>/dev/null
	done
	if [ -n "$LP_PID" ]; then
		# Unpublish and delete what the scenario left, so no loop device or image stays.
		"$KCSI_BIN/kcsi" --endpoint "unix://$T/lp.sock" -o json controller list-volumes 2>/dev/null |
			jq -r '.entries[]? | .volume.volume_id + " " + ((.status.published_node_ids // []) | join(" "))' \
				>"$T/leftover" 2>/dev/null
		local dels=()
		while read -r v nodes; do
			for n in $nodes; do
				"$KCSI_BIN/kcsi" --endpoint "unix://$T/lp.sock" controller unpublish "$v" "$n" >/dev/null 2>&1
			done
			"$KCSI_BIN/kcsi" --endpoint "unix://$T/lp.sock" controller delete-volume "$v" >/dev/null 2>&1 &
			dels+=($!)
		done <"$T/leftover"
		[ ${#dels[@]} -eq 0 ] || wait "${dels[@]}" 2>/dev/null
		kill_kids -TERM "$LP_PID" "${LP_NODE_PIDS[@]}"
		wait "$LP_PID" "${LP_NODE_PIDS[@]}" 2>/dev/null
	fi
	if [ -n "$TD_PID" ]; then
		kill_kids -TERM "$TD_PID"
		wait "$TD_PID" 2>/dev/null
	fi
	if losetup -a | grep -q "$T/"; then
		echo "FAIL: loop devices left behind:" >&2
		losetup -a | grep "$T/" >&2
	fi
	emu_cleanup
}
trap att_cleanup EXIT

. "$(dirname "${BASH_SOURCE[0]}")/lib_kget.sh"
# (scenarios also copy kc into `bash -c` with declare -f, where kc_fast and $S are not: kubectl)
kc() {
	local rc=3
	if declare -F kc_fast >/dev/null; then
		kc_fast "$@"
		rc=$?
	fi
	[ $rc = 3 ] || return $rc
	kubectl --kubeconfig "$KC" "$@"
}

wait_sock() {
	for _ in $(seq 1 200); do [ -S "$1" ] && return 0; sleep 0.05; done
	return 1
}

lp_start() {
	local node=$1
	shift
	mkdir -p "$T/pool"
	"$KCSI_BIN/kcsi-loopplugin" --endpoint "unix://$T/lp.sock" --nodeid "$node" \
		--pool-dir "$T/pool" "$@" >>"$T/lp.log" 2>&1 &
	LP_PID=$!
	wait_sock "$T/lp.sock" || { echo "kcsi-loopplugin did not start" >&2; cat "$T/lp.log" >&2; exit 1; }
}

td_start() {
	"$KCSI_TESTS/${KCSI_TESTDRIVER:-csi-testdriver}" --endpoint "unix://$T/td.sock" --record "$T/td.rec" "$@" \
		>>"$T/td.log" 2>&1 &
	TD_PID=$!
	wait_sock "$T/td.sock" || { echo "csi-testdriver did not start" >&2; cat "$T/td.log" >&2; exit 1; }
}

td_stop() {
	kill -TERM "$TD_PID" 2>/dev/null
	wait "$TD_PID" 2>/dev/null
	TD_PID=""
	rm -f "$T/td.rec"
}

att_start() {
	local name=$1 sock=$2
	shift 2
	"$KCSI_BIN/csi-attacher" --csi-address "unix://$sock" --kubeconfig "$KC" \
		--retry-interval-start 200ms --retry-interval-max 2s "$@" >>"$T/$name.log" 2>&1 &
	ATT_PIDS[$name]=$!
}

# att_http_port NAME: the port the attacher's --http-endpoint (given as host:0) listens on
att_http_port() {
	local p=""
	for _ in $(seq 1 200); do
		p=$(sed -n 's/.*ServeMux listening at .* port=\([0-9]*\).*/\1/p' "$T/$1.log" | tail -1)
		[ -n "$p" ] && break
		sleep 0.05
	done
	echo "$p"
}

att_stop() {
	local name=$1 rc=0
	kill -TERM "${ATT_PIDS[$name]}"
	wait "${ATT_PIDS[$name]}" || rc=$?
	unset "ATT_PIDS[$name]"
	return $rc
}

# wait_for WHAT SECS CMD...: the pause between tries grows from 50 ms to 400 ms, and is 1 s once
# the wait has lasted 5 s. A poll that often runs kubectl (0.2 s of CPU a run) or curl would
# otherwise keep a core busy while many tests run at once (ctest -j); in a full run kubectl was
# half of all the tests' CPU.
wait_for() {
	local what=$1 secs=$2
	shift 2
	local end=$((SECONDS + secs)) _wf_pause=0.05 _wf_start=$SECONDS
	while [ $SECONDS -lt $end ]; do
		"$@" >/dev/null 2>&1 && return 0
		sleep $_wf_pause
		case $_wf_pause in 0.05) _wf_pause=0.1 ;; 0.1) _wf_pause=0.2 ;; *) _wf_pause=0.4 ;; esac
		[ $((SECONDS - _wf_start)) -lt 5 ] || _wf_pause=1
	done
	fail "timed out after ${secs}s waiting for: $what"
	return 1
}

va_json() { kc get volumeattachment "$1" -o json 2>/dev/null || true; }
va_field() { va_json "$1" | jq -r "$2"; }
va_attached() { [ "$(va_field "$1" .status.attached)" = "true" ]; }
va_gone() { ! kc get volumeattachment "$1" >/dev/null 2>&1; }
pv_gone() { ! kc get pv "$1" >/dev/null 2>&1; }
va_has_error() { [ "$(va_field "$1" ".status.${2}.message // empty")" != "" ]; }

# mk_node NAME [nodeid-annotation-json]
mk_node() {
	local ann=""
	[ -n "${2:-}" ] && ann="\"annotations\":{\"csi.volume.kubernetes.io/nodeid\":$(jq -Rn --arg v "$2" '$v')},"
	echo "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{$ann\"name\":\"$1\"}}" | kc create -f - >/dev/null
}
# mk_csinode NODE DRIVER NODEID
mk_csinode() {
	echo "{\"apiVersion\":\"storage.k8s.io/v1\",\"kind\":\"CSINode\",\"metadata\":{\"name\":\"$1\"},
	\"spec\":{\"drivers\":[{\"name\":\"$2\",\"nodeID\":\"$3\"}]}}" | kc create -f - >/dev/null
}
# mk_pv NAME DRIVER HANDLE [extra-spec-json] (access mode ReadWriteOnce unless extra sets one)
mk_pv() {
	local extra=${4:-"{}"}
	jq -n --arg n "$1" --arg d "$2" --arg h "$3" --argjson x "$extra" '{
		apiVersion: "v1", kind: "PersistentVolume", metadata: {name: $n},
		spec: ({capacity: {storage: "64Mi"}, accessModes: ["ReadWriteOnce"],
		        csi: {driver: $d, volumeHandle: $h}} * $x)}' | kc create -f - >/dev/null
}
# mk_va NAME ATTACHER NODE PV
mk_va() {
	jq -n --arg n "$1" --arg a "$2" --arg node "$3" --arg pv "$4" '{
		apiVersion: "storage.k8s.io/v1", kind: "VolumeAttachment", metadata: {name: $n},
		spec: {attacher: $a, nodeName: $node, source: {persistentVolumeName: $pv}}}' |
		kc create -f - >/dev/null
}
# lp_volume NAME [create-volume flags]: creates a loopplugin volume, prints its ID
lp_volume() {
	local name=$1
	shift
	"$KCSI_BIN/kcsi" --endpoint "unix://$T/lp.sock" -o json controller create-volume "$name" \
		--cap-bytes 16Mi "$@" | jq -r .volume.volume_id
}
# lp_node_start NODE: a second plugin in node mode on the same pool, so the pool knows NODE
lp_node_start() {
	"$KCSI_BIN/kcsi-loopplugin" --endpoint "unix://$T/lp-$1.sock" --nodeid "$1" --mode node \
		--pool-dir "$T/pool" >>"$T/lp-$1.log" 2>&1 &
	LP_NODE_PIDS+=($!)
	wait_sock "$T/lp-$1.sock" || { echo "node plugin did not start" >&2; exit 1; }
}
lp_not_published() { ! lp_published "$@"; }
# lp_published VOLUME NODE: the loop driver reports VOLUME published on NODE
lp_published() {
	"$KCSI_BIN/kcsi" --endpoint "unix://$T/lp.sock" -o json controller list-volumes |
		jq -e ".entries[] | select(.volume.volume_id==\"$1\") | .status.published_node_ids // [] | index(\"$2\")" >/dev/null
}

att_finish() {
	if [ "$FAILS" -ne 0 ]; then
		for f in "$T"/*.log; do
			echo "---- $f (last 40 lines)" >&2
			tail -40 "$f" >&2
		done
	fi
	finish
}
