# lib_emulator.sh: shared helpers for the kube-emulator e2e scenarios (sourced, not run).
#
# emu_start [flags...]   starts build/bin/kube-emulator on 127.0.0.1:0 with a kubeconfig in $T,
#                        waits for the kubeconfig, sets EMU_PID, S (server URL), KC (kubeconfig)
# emu_crash_restart SECS [flags...]
#                        kills it (-9: its store is lost), leaves the port closed SECS seconds
#                        (clients meet "connection refused"), starts it again on the same port
# req METHOD PATH [BODY] [CONTENT-TYPE]
#                        one HTTP request; sets CODE and writes the body to $T/out (jq reads it)
# expect_code N "what"   fails the scenario unless CODE is N
# check "what" cond...   fails unless the command succeeds
# Everything started here is stopped, and $T removed, by the EXIT trap.
set -u
: "${KCSI_BIN:?KCSI_BIN must point at the build bin directory}"
T=$(mktemp -d /tmp/kcsi-emu-e2e.XXXXXX)
EMU_PID=""
FAILS=0
CURL_EXTRA=()
. "$(dirname "${BASH_SOURCE[0]}")/lib_kids.sh"
emu_cleanup() {
	if [ -n "$EMU_PID" ]; then
		kill_kids -TERM "$EMU_PID"
		wait "$EMU_PID" 2>/dev/null
	fi
	for p in $(jobs -p); do kill "$p" 2>/dev/null; done
	rm -rf "$T"
}
trap emu_cleanup EXIT

fail() {
	echo "FAIL: $*" >&2
	FAILS=$((FAILS + 1))
}

emu_start() {
	emu_listen 127.0.0.1:0 "$@"
}

emu_crash_restart() {
	local down=$1 port=${S##*:}
	shift
	kill -KILL "$EMU_PID"
	wait "$EMU_PID" 2>/dev/null
	sleep "$down"
	emu_listen "127.0.0.1:$port" "$@"
}

emu_listen() {
	local addr=$1
	shift
	rm -f "$T/kubeconfig"
	"$KCSI_BIN/kube-emulator" --listen "$addr" --write-kubeconfig "$T/kubeconfig" "$@" \
		>>"$T/emulator.log" 2>&1 &
	EMU_PID=$!
	for _ in $(seq 1 200); do
		[ -s "$T/kubeconfig" ] && break
		kill -0 "$EMU_PID" 2>/dev/null || break
		sleep 0.05
	done
	if [ ! -s "$T/kubeconfig" ]; then
		echo "kube-emulator did not start:" >&2
		cat "$T/emulator.log" >&2
		exit 1
	fi
	KC="$T/kubeconfig"
	S=$(awk '/server:/ {print $2}' "$KC")
}

# Stops the emulator with SIGTERM and returns its exit status.
emu_stop() {
	kill -TERM "$EMU_PID"
	local rc=0
	wait "$EMU_PID" || rc=$?
	EMU_PID=""
	return $rc
}

req() {
	local method=$1 path=$2 body=${3:-} ct=${4:-application/json}
	local args=(-s -o "$T/out" -w '%{http_code}' -X "$method" "${CURL_EXTRA[@]}")
	if [ -n "$body" ]; then
		args+=(-H "Content-Type: $ct" --data-binary "$body")
	fi
	CODE=$(curl "${args[@]}" "$S$path")
}

expect_code() {
	if [ "$CODE" != "$1" ]; then
		fail "$2: expected HTTP $1, got $CODE: $(head -c 400 "$T/out")"
		return 1
	fi
}

# jqo FILTER: runs jq on the last response body.
jqo() { jq -r "$1" "$T/out"; }

check() {
	local what=$1
	shift
	if ! "$@"; then
		fail "$what"
	fi
}

# eq A B: string equality as a command, for check.
eq() { [ "$1" = "$2" ] || { echo "  '$1' != '$2'" >&2; return 1; }; }

# Stops the emulator (SIGTERM must exit 0) and fails on any sanitizer report in its log, so the
# -DKCSI_SANITIZE=ON build checks the server, not only the scripts.
finish() {
	if [ -n "$EMU_PID" ]; then
		local rc=0
		emu_stop || rc=$?
		[ "$rc" -eq 0 ] || fail "kube-emulator exited $rc on SIGTERM"
	fi
	if grep -qE "ERROR: (Address|Leak)Sanitizer|runtime error:" "$T/emulator.log"; then
		fail "sanitizer report in the emulator log"
		grep -A30 -E "ERROR: (Address|Leak)Sanitizer|runtime error:" "$T/emulator.log" | head -60 >&2
	fi
	if [ "$FAILS" -ne 0 ]; then
		echo "$FAILS check(s) failed; emulator log:" >&2
		tail -50 "$T/emulator.log" >&2
		exit 1
	fi
	echo "PASS"
	exit 0
}
