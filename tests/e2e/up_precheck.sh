#!/bin/bash
# e2e: what kcsi up checks before it starts anything, and what it keeps when start-up fails.
#   - a --listen it cannot bind (taken port, not an address of this machine, bad syntax), a
#     --driver-cmd whose program does not exist, a --dir that is a file, the loop driver without
#     root: each refused within a second, exit 1, with the reason, and nothing started (no "work
#     dir" line, no folder made);
#   - a bad flag: a short usage, not the table of all flags;
#   - files an earlier run left in D/pool: a warning that names them;
#   - a stack that cannot become ready in a temporary folder: the folder and its logs are kept
#     and named (they used to be deleted with the logs that said why).
set -u
: "${KCSI_BIN:?}"
FAILS=0
fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
t=$(mktemp -d /tmp/kcsi-up-pre.XXXXXX)
holder=
cleanup() {
	[ -n "$holder" ] && kill "$holder" 2>/dev/null
	grep -F " $t/" /proc/self/mountinfo | awk '{print $5}' | sort -r | xargs -r -n1 umount -l 2>/dev/null
	losetup -a | grep -F "$t/" | cut -d: -f1 | xargs -r -n1 losetup -d 2>/dev/null
	rm -rf "$t"
}
trap cleanup EXIT

# refused WHAT PATTERN ARGS...: kcsi up ARGS exits 1 within 2 s, PATTERN on stderr, nothing begun
refused() {
	local what=$1 pat=$2 t0=$SECONDS rc
	shift 2
	TMPDIR=$t/tmp timeout 20 "$KCSI_BIN/kcsi" up "$@" >"$t/out" 2>"$t/err"
	rc=$?
	[ $rc = 1 ] || fail "$what: exit $rc, want 1"
	[ $((SECONDS - t0)) -le 2 ] || fail "$what: took $((SECONDS - t0)) s"
	grep -q -- "$pat" "$t/err" || fail "$what: stderr lacks \"$pat\": $(cat "$t/err")"
	! grep -q "work dir" "$t/out" || fail "$what: kcsi up began: $(head -2 "$t/out")"
	[ -z "$(ls -A "$t/tmp")" ] || fail "$what: kcsi up made $(ls "$t/tmp")"
}
mkdir -p "$t/tmp"

python3 -c 'import socket,time; s=socket.socket(); s.bind(("127.0.0.1",0)); s.listen(1); print(s.getsockname()[1], flush=True); time.sleep(60)' >"$t/port" &
holder=$!
for _ in $(seq 1 50); do [ -s "$t/port" ] && break; sleep 0.1; done
port=$(cat "$t/port")
refused "--listen on a taken port" "cannot listen there: Address already in use" --listen "127.0.0.1:$port"
refused "--listen not of this machine" "cannot listen there: Cannot assign requested address" --listen 192.0.2.1:0
refused "--listen without a port" "want HOST:PORT" --listen 127.0.0.1
refused "--listen with a bad port" "the port must be a number" --listen 127.0.0.1:99999
refused "--driver-cmd not found" "nosuch-csi-driver: command not found" --driver-cmd "nosuch-csi-driver --endpoint {endpoint}"
refused "--driver-cmd path not found" "/nowhere/driver: no such file" --driver-cmd "/nowhere/driver --endpoint {endpoint}"
touch "$t/afile"
refused "--dir a file" "is not a directory" --dir "$t/afile"

# the loop driver without root, as the user nobody (kcsi copied where nobody may run it)
mkdir -p "$t/bin" && cp "$KCSI_BIN/kcsi" "$t/bin/" && chmod 755 "$t" "$t/bin" "$t/tmp"
TMPDIR=$t/tmp timeout 20 setpriv --reuid=nobody --regid=nogroup --clear-groups \
	"$t/bin/kcsi" up --bin-dir "$KCSI_BIN" >"$t/out" 2>"$t/err"
rc=$?
[ $rc = 1 ] || fail "not root: exit $rc, want 1 ($(cat "$t/err"))"
grep -q "need root: run kcsi up as root" "$t/err" || fail "not root: stderr lacks the reason: $(cat "$t/err")"
[ -z "$(ls -A "$t/tmp")" ] || fail "not root: kcsi up made $(ls "$t/tmp")"

"$KCSI_BIN/kcsi" up --bogus >"$t/out" 2>"$t/err"
rc=$?
[ $rc = 2 ] || fail "bad flag: exit $rc, want 2"
[ "$(wc -l <"$t/err")" -le 2 ] || fail "bad flag: $(wc -l <"$t/err") lines, want a short usage"
grep -q "kcsi up --help" "$t/err" || fail "bad flag: does not point at --help: $(cat "$t/err")"

# leftovers in a named D, and a stack that cannot become ready: a driver that exits at once
mkdir -p "$t/d/pool" && head -c 1048576 /dev/urandom >"$t/d/pool/pvc-old.img"
timeout 60 "$KCSI_BIN/kcsi" up --dir "$t/d" --nodes 1 --driver-cmd "false {endpoint}" \
	--ready-timeout 3s >"$t/out" 2>"$t/err"
rc=$?
[ $rc = 1 ] || fail "a stack that cannot start: exit $rc, want 1"
grep -q "warning: 1 file(s) left in $t/d/pool by an earlier run (1.0 MiB" "$t/err" ||
	fail "no warning about the image left in the pool: $(cat "$t/err")"

TMPDIR=$t/tmp timeout 60 "$KCSI_BIN/kcsi" up --nodes 1 --driver-cmd "false {endpoint}" \
	--ready-timeout 3s >"$t/out" 2>"$t/err"
rc=$?
[ $rc = 1 ] || fail "a stack that cannot start (temporary folder): exit $rc, want 1"
kept=$(sed -n 's|^kcsi up: logs kept in \(.*\)/logs$|\1|p' "$t/out")
[ -n "$kept" ] && [ -d "$kept/logs" ] || fail "the temporary folder of a failed start was not kept: $(cat "$t/out")"
case $kept in "$t"/tmp/kcsi-up-*) ;; *) fail "kept folder $kept is not under TMPDIR" ;; esac
ls "$kept"/logs/*.log >/dev/null 2>&1 || fail "no logs in the kept folder $kept"
grep -q "the driver did not create .*/controller/csi.sock in time" "$t/err" || fail "the failure is not explained: $(cat "$t/err")"

if [ $FAILS -ne 0 ]; then
	echo "--- last stdout"; cat "$t/out"; echo "--- last stderr"; cat "$t/err"
	exit 1
fi
echo PASS
