# lib_up.sh: shared helpers for the `kcsi up` e2e scenarios (sourced, not run). The caller
# defines fail() and sets kubectl.
#
# start_up DIR [args...]  kcsi up --dir DIR in the background (output in DIR.out), waits for
#                         DIR/ready (30 s); sets up_pid
# stop_up [SIGNAL]        signals kcsi up (TERM) and returns its exit status
# release_below DIR       unmounts and detaches whatever a failed run left under DIR
# wait_for SECONDS CMD... polls CMD every 50 ms
up_pid=
start_up() {
	local dir=$1
	shift
	"$KCSI_BIN/kcsi" up --dir "$dir" "$@" >"$dir.out" 2>&1 &
	up_pid=$!
	for _ in $(seq 1 600); do
		[ -f "$dir/ready" ] && return 0
		kill -0 "$up_pid" 2>/dev/null || break
		sleep 0.05
	done
	fail "kcsi up $* did not become ready"
	cat "$dir.out" >&2
	return 1
}
stop_up() {
	kill -"${1:-TERM}" "$up_pid"
	wait "$up_pid"
	local rc=$?
	up_pid=
	return $rc
}
release_below() {
	[ -n "$up_pid" ] && kill -TERM "$up_pid" 2>/dev/null && wait "$up_pid" 2>/dev/null
	grep -F " $1/" /proc/self/mountinfo | awk '{print $5}' | sort -r | xargs -r -n1 umount -l 2>/dev/null
	losetup -a | grep -F "$1/" | cut -d: -f1 | xargs -r -n1 losetup -d 2>/dev/null
}
# wait_for SECS CMD...: true once CMD succeeds, false after SECS; the pause between tries grows
# from 50 ms to 400 ms, and is 1 s once the wait has lasted 5 s (kubectl polled often by many
# tests at once keeps the cores busy: 0.2 s of CPU a run).
wait_for() {
	local _wf_end=$((SECONDS + $1)) _wf_pause=0.05 _wf_start=$SECONDS
	shift
	while [ $SECONDS -lt $_wf_end ]; do
		"$@" >/dev/null 2>&1 && return 0
		sleep $_wf_pause
		case $_wf_pause in 0.05) _wf_pause=0.1 ;; 0.1) _wf_pause=0.2 ;; *) _wf_pause=0.4 ;; esac
		[ $((SECONDS - _wf_start)) -lt 5 ] || _wf_pause=1
	done
	"$@" >/dev/null 2>&1
}
phase_is() { [ "$($kubectl get "$1" -o jsonpath='{.status.phase}')" = "$2" ]; }
no_objects() { [ -z "$($kubectl get "$@" -o name 2>/dev/null)" ]; }
