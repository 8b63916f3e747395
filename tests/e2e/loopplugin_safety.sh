#!/bin/bash
# kcsi-loopplugin called out of order (issue 16): the controller refuses to drop an attachment or
# an image under a staged volume (FAILED_PRECONDITION), NodeStageVolume answers repeats as the CSI
# spec says (identical: OK; same path, other capability: ALREADY_EXISTS; another path:
# FAILED_PRECONDITION, not "damaged"), and a plugin killed -9 while a snapshot holds a filesystem
# frozen thaws it at its next start. kcsi exit codes are 10 + the gRPC code.
set -euo pipefail

BIN=${KCSI_BIN:?KCSI_BIN must point at the built binaries}
source "${KCSI_SRC:?}/tests/e2e/lib_lp.sh"
D=$(mktemp -d /tmp/kcsi-lp-safe-XXXXXX)
PID= CPID= WPID= SNPID=

fail() {
	echo "FAIL: $*" >&2
	echo "--- plugin logs (tail)" >&2
	tail -30 "$D"/*.log >&2 || true
	exit 1
}

cleanup() {
	set +e
	for p in $PID $CPID $SNPID; do kill -9 "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	# a filesystem a failed run left frozen: thaw it, or the writer and the unmount hang
	grep -F "$D" /proc/self/mountinfo | awk '{print $5}' | while read -r m; do
		fsfreeze -u "$m" 2>/dev/null
	done
	[ -n "$WPID" ] && wait "$WPID" 2>/dev/null
	lp_host_cleanup "$D"
	rm -rf "$D"
}
trap cleanup EXIT

# start_plugin SOCKNAME NODE MODE [ENV=VALUE...]: sets PID (CPID for the controller)
start_plugin() {
	local sock=$1 node=$2 mode=$3; shift 3
	env "$@" "$BIN/kcsi-loopplugin" --endpoint "unix://$D/$sock" --pool-dir "$D/pool" \
		--nodeid "$node" --mode "$mode" -v 2 >>"$D/$sock.log" 2>&1 &
	if [ "$mode" = controller ]; then CPID=$!; else PID=$!; fi
	lp_wait_ready "$D/$sock"
}
json() { python3 -c 'import json,sys
v=json.load(sys.stdin)
for p in sys.argv[1].split("."): v=v[int(p)] if isinstance(v,list) else v[p]
print(v)' "$1"; }
# expect SOCK CODE WORDS kcsi-args...: exit code and a phrase of the message
expect() {
	local sock=$1 want=$2 words=$3; shift 3
	set +e; out=$("$BIN/kcsi" --endpoint "unix://$D/$sock" --timeout 60s "$@" 2>&1); rc=$?; set -e
	[ "$rc" -eq "$want" ] || fail "kcsi $* exited $rc, want $want: $out"
	[ -z "$words" ] || grep -qF -- "$words" <<<"$out" || fail "kcsi $*: no '$words' in: $out"
}
check_clean() {
	! losetup -a | grep -qF "$D" || fail "loop device left: $(losetup -a | grep -F "$D")"
	! grep -qF "$D" /proc/self/mountinfo || fail "mount left: $(grep -F "$D" /proc/self/mountinfo)"
}
MNT="SINGLE_NODE_WRITER,mount,ext4"
mkdir -p "$D/s1" "$D/s2" "$D/pods"

echo "== split controller and node: no unpublish or delete under a staged volume"
start_plugin ctrl.sock ctrl-0 controller
start_plugin node.sock node-1 node
kc() { "$BIN/kcsi" --endpoint "unix://$D/ctrl.sock" --timeout 60s "$@"; }
kn() { "$BIN/kcsi" --endpoint "unix://$D/node.sock" --timeout 60s "$@"; }
V=$(kc -o json controller create-volume pvc-safe --cap-bytes 32Mi --cap "$MNT" | json volume.volume_id)
kc controller publish "$V" node-1 --cap "$MNT" >/dev/null
kn node stage "$V" "$D/s1" --cap "$MNT" >/dev/null
expect ctrl.sock 19 "still staged on node node-1" controller unpublish "$V" node-1
expect ctrl.sock 19 "" controller delete-volume "$V"
[ -f "$D/pool/volumes/$V.img" ] || fail "the image of a staged volume was removed"
echo "still here" >"$D/s1/f" && sync
# the normal order (unstage, then unpublish, then delete) still works
kn node unstage "$V" "$D/s1" >/dev/null
kc controller unpublish "$V" node-1 >/dev/null
kc controller delete-volume "$V" >/dev/null
check_clean
kill "$PID" "$CPID"; wait "$PID" "$CPID" 2>/dev/null || true; PID= CPID=

echo "== one process (mode all): the same refusals"
start_plugin all.sock node-1 all
k() { "$BIN/kcsi" --endpoint "unix://$D/all.sock" --timeout 60s "$@"; }
V=$(k -o json controller create-volume pvc-all --cap-bytes 64Mi --cap "$MNT" | json volume.volume_id)
k controller publish "$V" node-1 --cap "$MNT" >/dev/null
k node stage "$V" "$D/s1" --cap "$MNT" >/dev/null
expect all.sock 19 "still staged" controller unpublish "$V" node-1

echo "== NodeStageVolume repeats"
k node stage "$V" "$D/s1" --cap "$MNT" >/dev/null                       # identical: OK
expect all.sock 16 "fs type ext4, not xfs" node stage "$V" "$D/s1" --cap "SINGLE_NODE_WRITER,mount,xfs"
expect all.sock 16 "mount flags [], not [noatime]" node stage "$V" "$D/s1" --cap "$MNT,noatime"
expect all.sock 16 "access mode" node stage "$V" "$D/s1" --cap "SINGLE_NODE_SINGLE_WRITER,mount,ext4"
expect all.sock 19 "already staged on this node at $D/s1" node stage "$V" "$D/s2" --cap "$MNT"
! grep -qF "$D/s2" /proc/self/mountinfo || fail "the second stage mounted the volume"
expect all.sock 19 "staged at $D/s1, not at $D/s2" node unstage "$V" "$D/s2"
grep -qF "$D/s1" /proc/self/mountinfo || fail "the staged mount went away"
k node stage "$V" "$D/s1" --cap "$MNT" >/dev/null                       # still OK after all that

echo "== kill -9 during a snapshot of a staged volume: the next start thaws"
k node publish "$V" "$D/pods/vol" --staging "$D/s1" --cap "$MNT" >/dev/null
echo before >"$D/pods/vol/before.txt"
kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
start_plugin all.sock node-1 all KCSI_LOOPPLUGIN_TEST_FREEZE_HOLD_MS=60000
k controller create-snapshot snap-frozen "$V" >/dev/null 2>&1 &
SNPID=$!
for _ in $(seq 1 100); do grep -q "Froze filesystem" "$D/all.sock.log" && break; sleep 0.05; done
grep -q "Froze filesystem" "$D/all.sock.log" || fail "the snapshot did not freeze the filesystem"
kill -9 "$PID"; wait "$PID" 2>/dev/null || true; PID=
kill "$SNPID" 2>/dev/null || true; wait "$SNPID" 2>/dev/null || true; SNPID=
# a writer now blocks (in the kernel) until someone thaws the filesystem
sh -c "echo after >'$D/pods/vol/after.txt'" &
WPID=$!
sleep 0.3
kill -0 "$WPID" 2>/dev/null || fail "the filesystem was not frozen (test setup)"
start_plugin all.sock node-1 all
for _ in $(seq 1 100); do kill -0 "$WPID" 2>/dev/null || break; sleep 0.05; done
! kill -0 "$WPID" 2>/dev/null || fail "a write to the volume still hangs after the plugin restarted"
wait "$WPID"; WPID=
grep -q after "$D/pods/vol/after.txt" || fail "the write after the thaw is lost"
grep -q "Thawed a filesystem" "$D/all.sock.log" || fail "no log line for the thaw"
S=$(k -o json controller create-snapshot snap-frozen "$V" | json snapshot.snapshot_id)
[ -z "$(ls "$D/pool/frozen/node-1" 2>/dev/null)" ] || fail "a freeze record remains"

echo "== SIGTERM while a snapshot holds the filesystem frozen: exit 0 within 1 s, thawed"
kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
start_plugin all.sock node-1 all KCSI_LOOPPLUGIN_TEST_FREEZE_HOLD_MS=60000
before=$(grep -c "Froze filesystem" "$D/all.sock.log")
k controller create-snapshot snap-term "$V" >/dev/null 2>&1 &
SNPID=$!
for _ in $(seq 1 100); do
	[ "$(grep -c "Froze filesystem" "$D/all.sock.log")" -gt "$before" ] && break; sleep 0.05
done
[ "$(grep -c "Froze filesystem" "$D/all.sock.log")" -gt "$before" ] || fail "the second snapshot did not freeze"
t0=$(date +%s%N)
kill -TERM "$PID"
for _ in $(seq 1 150); do kill -0 "$PID" 2>/dev/null || break; sleep 0.01; done
ms=$((($(date +%s%N) - t0) / 1000000))
if kill -0 "$PID" 2>/dev/null; then fail "kcsi-loopplugin still running ${ms} ms after SIGTERM with a snapshot in flight"; fi
rc=0; wait "$PID" || rc=$?; PID=
[ "$rc" -eq 0 ] || fail "kcsi-loopplugin exited $rc after SIGTERM (want 0)"
[ "$ms" -le 1000 ] || fail "kcsi-loopplugin took $ms ms to exit after SIGTERM"
kill "$SNPID" 2>/dev/null || true; wait "$SNPID" 2>/dev/null || true; SNPID=
timeout 5 sh -c "echo term >'$D/pods/vol/term.txt'" || fail "the filesystem stayed frozen after SIGTERM"
[ -z "$(ls "$D/pool/frozen/node-1" 2>/dev/null)" ] || fail "a freeze record remains after SIGTERM"
echo "  exit $rc in $ms ms"
start_plugin all.sock node-1 all

echo "== tear down in order"
k node unpublish "$V" "$D/pods/vol" >/dev/null
k node unstage "$V" "$D/s1" >/dev/null
k controller unpublish "$V" node-1 >/dev/null
k controller delete-snapshot "$S" >/dev/null
k controller delete-volume "$V" >/dev/null
check_clean
[ -z "$(ls "$D/pool/staged/node-1" 2>/dev/null)" ] || fail "a stage record remains"
echo "PASS"
