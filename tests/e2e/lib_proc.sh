# lib_proc.sh: what a scenario that starts its own processes (no emulator) shares. Sourcing it
# with a name makes the temp dir $T (/tmp/kcsi-NAME-e2e.XXXXXX), removed at exit after every
# pid in PIDS is killed; fail MSG counts into FAILS; wait_for WHAT SECS CMD... polls CMD (every
# 50 ms at first, 400 ms after the first second) and fails after SECS.
#   . "$(dirname "$0")/lib_proc.sh" reg
: "${KCSI_BIN:?}" "${KCSI_TESTS:?}"
T=$(mktemp -d "/tmp/kcsi-$1-e2e.XXXXXX")
FAILS=0
PIDS=()
. "$(dirname "${BASH_SOURCE[0]}")/lib_kids.sh"
fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
cleanup() {
	kill_kids -KILL "${PIDS[@]}"
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
	rm -rf "$T"
}
trap cleanup EXIT
# The pause between two tries grows from 50 ms to 400 ms, and is 1 s once the wait has lasted 5 s:
# a poll that runs kubectl (0.2 s of CPU a run) or curl would otherwise keep a core busy while
# many tests run at once (ctest -j); in a full run kubectl was half of all the tests' CPU.
wait_for() {
	local what=$1 secs=$2 _wf_pause=0.05; shift 2
	local end=$((SECONDS + secs)) _wf_start=$SECONDS
	while [ $SECONDS -lt $end ]; do
		"$@" >/dev/null 2>&1 && return 0
		sleep $_wf_pause
		case $_wf_pause in 0.05) _wf_pause=0.1 ;; 0.1) _wf_pause=0.2 ;; *) _wf_pause=0.4 ;; esac
		[ $((SECONDS - _wf_start)) -lt 5 ] || _wf_pause=1
	done
	fail "timed out after ${secs}s waiting for: $what"; return 1
}
