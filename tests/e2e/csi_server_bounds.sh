#!/bin/bash
# e2e: what a client can make kcsi's CSI server hold while its only worker is busy (Probe takes
# 3 s): calls queued by connections that then close leave with them, so 1,500 connections of 128
# queued calls each do not grow the driver (they took ~100 MB before the fix); a flood of calls
# reset right after being sent does not grow it (nghttp2 may end such a connection: rapid-reset
# protection) and the driver answers afterwards; a request with 20 KB of metadata is reset (16 KiB
# header list) and the connection goes on; calls that expire while queued are answered
# DEADLINE_EXCEEDED without harm. Raw HTTP/2 from tests/e2e/h2_load.py.
set -u
TESTS=${KCSI_TESTS:?}
SRC=${KCSI_SRC:?}
BIN=${KCSI_BIN:?}
TMP=$(mktemp -d /tmp/csi_server_bounds.XXXXXX)
DRV=
cleanup() {
	# SIGKILL: a graceful stop would wait for a 3 s handler
	[ -n "$DRV" ] && kill -9 "$DRV" 2>/dev/null && wait "$DRV" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
ok() { echo "ok: $*"; }
SOCK=$TMP/d.sock
rss_mb() { awk '/^VmRSS/{print int($2 / 1024)}' "/proc/$DRV/status"; }

"$TESTS/csi-testdriver" --endpoint "unix://$SOCK" --slow Probe=3s --threads 1 2>"$TMP/d.log" &
DRV=$!
for _ in $(seq 1 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
[ -S "$SOCK" ] || { echo "driver did not start"; cat "$TMP/d.log"; exit 1; }
# occupy the only worker; the flood's own Probes keep it busy afterwards
"$BIN/kcsi" --endpoint "unix://$SOCK" --timeout 10s identity probe >/dev/null 2>&1 &
sleep 0.3
before=$(rss_mb)

python3 "$SRC/tests/e2e/h2_load.py" "$SOCK" queue 1500 128 || fail "h2_load queue"
after=$(rss_mb)
[ "$after" -lt $((before + 24)) ] && ok "1,500 closed connections x 128 queued calls: RSS $before -> $after MB" ||
	fail "queued calls of closed connections are kept: RSS $before -> $after MB"

python3 "$SRC/tests/e2e/h2_load.py" "$SOCK" cancel 20000 0
after2=$(rss_mb)
[ "$after2" -lt $((before + 24)) ] && ok "20,000 calls reset while queued: RSS $after2 MB" ||
	fail "reset calls are kept: RSS $before -> $after2 MB"
# calls that expire while queued, on a connection that stays open: answered DEADLINE_EXCEEDED
# by the worker when it gets to them (a double free once took the driver down here)
"$BIN/kcsi" --endpoint "unix://$SOCK" --timeout 10s identity probe >/dev/null 2>&1 &
sleep 0.3
n=$(python3 "$SRC/tests/e2e/h2_load.py" "$SOCK" expire 20 5)
kill -0 "$DRV" 2>/dev/null && [ "${n:-0}" -gt 0 ] && ok "20 calls expired in the queue: answered ($n bytes), driver alive" ||
	fail "calls that expired in the queue: driver alive? $(kill -0 "$DRV" 2>/dev/null && echo yes || echo no), $n bytes of answers"
out=$("$BIN/kcsi" --endpoint "unix://$SOCK" --timeout 15s identity info 2>&1) &&
	ok "the driver still answers (GetPluginInfo)" || fail "the driver stopped answering: $out"

# 20 KB of metadata (over the 16 KiB header list kcsi's server announces): only that stream is
# reset, and the next call on the same connection is answered
res=$(timeout 20 python3 "$SRC/tests/e2e/h2_load.py" "$SOCK" bigmeta 20000 10 2>&1)
case "$res" in
"reset="[0-9]*" answered=yes open=yes") ok "20 KB of metadata: stream reset ($res), next call on the connection answered" ;;
*) fail "20 KB of metadata: got '$res', want the stream reset, the next call answered, the connection open" ;;
esac

echo "$((5 - FAILS)) passed, $FAILS failed"
[ $FAILS -eq 0 ]
