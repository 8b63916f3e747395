#!/bin/bash
# e2e (issue 34): the CSI socket as the kubelet and a sidecar see it, under a hostile HTTP/2
# client (h2_hostile.py: rapid reset, CONTINUATION flood, SETTINGS flood, WINDOW_UPDATE flood on
# streams opened and never ended, 100 calls whose answers are never read), against
# csi-testdriver and kcsi-loopplugin: every legitimate Probe (kcsi identity probe, a new
# connection each) answered within 1 s, no thread per attacker, file descriptors back down,
# memory bounded and back down (normal build; ASan's quarantine keeps freed memory). Runs in the
# sanitizer build too: nghttp2's callbacks and the server's threads under attack.
set -u
. "$(dirname "$0")/lib_proc.sh" hostile-csi
. "$(dirname "$0")/lib_hostile.sh"
H2_SECS=8

# The legitimate client is kcsi's CLI, a new process each Probe. The 1 s claim is the normal
# build's (a kubelet probe's default timeoutSeconds). In the sanitizer build both it and the server
# run under ASan on 2 cores beside the five attackers, and the client's start-up alone varies: CI
# saw 1,173 ms there once and 2,240 ms (19 of 20 within 2 s) on 2026-11-29. That build is there for
# nghttp2's callbacks and the threads under attack; a starved server still fails it (5 s).
h2_storm() { # NAME PID SOCKET
	local name=$1 pid=$2 out kv bound=1
	settle "$pid"
	sanitized "$(readlink -f "/proc/$pid/exe")" && bound=5
	out=$(timeout 60 python3 "$KCSI_SRC/tests/e2e/h2_hostile.py" "$3" "$pid" $H2_SECS "$KCSI_BIN/kcsi" \
		$bound 2>&1 | tail -1)
	echo "hostile $name (kcsi): $out"
	h_ok=-1 h_probes=0
	for kv in $out; do
		case "$kv" in *=*[!0-9]*|*=) ;; [a-z]*=*) printf -v "h_${kv%%=*}" '%s' "${kv#*=}" ;; esac
	done
	kill -0 "$pid" 2>/dev/null || { fail "$name died under the storm"; return; }
	[ "$h_probes" -ge 10 ] && [ "$h_ok" -eq "$h_probes" ] ||
		fail "$name: $h_ok of $h_probes legitimate Probes answered within $bound s"
	[ "${h_after_ok:-0}" = 1 ] || fail "$name: no Probe answered after the storm"
	[ "$h_threads_peak" -le $((h_threads_before + 2)) ] ||
		fail "$name: threads $h_threads_before -> $h_threads_peak under the storm"
	[ "$h_fds_after" -le $((h_fds_before + 2)) ] ||
		fail "$name: file descriptors $h_fds_before -> $h_fds_after after the storm"
	sanitized "$(readlink -f "/proc/$pid/exe")" && return
	# (before the server stopped reading a peer that does not read: +28 MB in these 8 s, growing)
	[ "$h_rss_kb_peak" -le $((h_rss_kb_before + 16384)) ] ||
		fail "$name: RSS $h_rss_kb_before -> $h_rss_kb_peak KiB under the storm"
	[ "$h_rss_kb_after" -le $((h_rss_kb_before + 8192)) ] ||
		fail "$name: RSS $h_rss_kb_before -> $h_rss_kb_after KiB after the storm"
}

"$KCSI_TESTS/csi-testdriver" --endpoint "unix://$T/td.sock" >"$T/td.log" 2>&1 &
TD=$!; PIDS+=($TD)
wait_for "csi-testdriver socket" 10 test -S "$T/td.sock" && h2_storm csi-testdriver $TD "$T/td.sock"

mkdir -p "$T/pool"
"$KCSI_BIN/kcsi-loopplugin" --mode controller --endpoint "unix://$T/lp.sock" --nodeid n1 \
	--pool-dir "$T/pool" >"$T/lp.log" 2>&1 &
LP=$!; PIDS+=($LP)
wait_for "kcsi-loopplugin socket" 10 test -S "$T/lp.sock" && h2_storm kcsi-loopplugin $LP "$T/lp.sock"

if [ $FAILS -ne 0 ]; then tail -n 5 "$T/td.log" "$T/lp.log"; echo "$FAILS failure(s)"; exit 1; fi
echo PASS
