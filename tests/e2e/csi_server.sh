#!/bin/bash
# e2e: the CSI server layer as a separate process (csi-testdriver): SIGTERM finishes the call in
# flight and exits 0, a live socket is never stolen, a stale one (driver killed -9) is replaced,
# the socket is created 0660, and a kcsi started before the driver waits for it.
set -u
BIN=${KCSI_BIN:?}
TESTS=${KCSI_TESTS:?}
TMP=$(mktemp -d /tmp/csi_server.XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
ok() { echo "ok: $*"; }
SOCK=$TMP/csi.sock
wait_sock() { for _ in $(seq 1 100); do [ -S "$SOCK" ] && return 0; sleep 0.1; done; return 1; }
K() { "$BIN/kcsi" --endpoint "unix://$SOCK" "$@"; }

"$TESTS/csi-testdriver" --endpoint "unix://$SOCK" --slow NodeUnstageVolume=2s 2>"$TMP/d1.log" &
D1=$!; PIDS+=($D1)
wait_sock || { fail "driver 1 did not start"; cat "$TMP/d1.log"; exit 1; }
[ "$(stat -c %a "$SOCK")" = 660 ] && ok "socket mode 0660" || fail "socket mode $(stat -c %a "$SOCK")"

"$TESTS/csi-testdriver" --endpoint "unix://$SOCK" 2>"$TMP/d2.log"
rc=$?
[ $rc -ne 0 ] && grep -q "another server is listening" "$TMP/d2.log" && ok "live socket not stolen" ||
	{ fail "second driver on a live socket: rc=$rc"; cat "$TMP/d2.log"; }
K identity probe >/dev/null && ok "first driver still serves" || fail "first driver broken"

# SIGTERM during a 2 s call: the call completes, the driver exits 0 and removes its socket.
K node unstage vol-1 /st >"$TMP/k.out" 2>&1 &
KP=$!
sleep 0.7
kill -TERM "$D1"
wait "$KP"; krc=$?
wait "$D1"; drc=$?
[ $krc -eq 0 ] && ok "call in flight finished during graceful stop" || { fail "in-flight call rc=$krc"; cat "$TMP/k.out"; }
[ $drc -eq 0 ] && ok "driver exited 0 on SIGTERM" || { fail "driver exit $drc"; tail "$TMP/d1.log"; }
[ ! -e "$SOCK" ] && ok "socket removed at stop" || fail "socket left behind"

# A driver killed -9 leaves a stale socket; the next one replaces it.
"$TESTS/csi-testdriver" --endpoint "unix://$SOCK" 2>"$TMP/d3.log" &
D3=$!; PIDS+=($D3)
wait_sock || fail "driver 3 did not start"
kill -9 "$D3"; wait "$D3" 2>/dev/null
[ -S "$SOCK" ] && ok "stale socket left by kill -9" || fail "no stale socket to test with"
"$TESTS/csi-testdriver" --endpoint "unix://$SOCK" 2>"$TMP/d4.log" &
D4=$!; PIDS+=($D4)
sleep 0.3
for _ in $(seq 1 50); do K identity probe >/dev/null 2>&1 && break; sleep 0.1; done
K identity probe >/dev/null && ok "stale socket replaced" || { fail "stale socket not replaced"; cat "$TMP/d4.log"; }
grep -q "Removing stale socket" "$TMP/d4.log" || fail "stale removal not logged"
kill -TERM "$D4"; wait "$D4"

# kcsi started before the driver waits for the socket.
K --connect-timeout 20s identity info >"$TMP/late.out" 2>&1 &
KP=$!
sleep 1
"$TESTS/csi-testdriver" --endpoint "unix://$SOCK" 2>"$TMP/d5.log" &
D5=$!; PIDS+=($D5)
wait "$KP" && grep -q testdriver.kcsi.dev "$TMP/late.out" && ok "kcsi waited for a late driver" ||
	{ fail "late driver"; cat "$TMP/late.out"; }
kill -TERM "$D5"; wait "$D5"

echo "$FAILS failures"
[ "$FAILS" -eq 0 ]
