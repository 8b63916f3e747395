#!/bin/bash
# e2e: csi-node-driver-registrar against a real driver (kcsi-loopplugin) and a client that plays
# the kubelet's plugin watcher: the registration socket answers GetInfo, a stale socket is
# replaced, /healthz reports the registration socket (not the driver, as upstream v2.17), a
# refused registration ends the registrar
# with status 1 and the error, SIGTERM ends it within a second with status 0 while it waits for a
# driver that never comes. As upstream since v2.9: GetInfo writes no probe file (a read-only root
# filesystem works) and the deprecated --mode=kubelet-registration-probe exits 0 at once.
set -u
. "$(dirname "$0")/lib_proc.sh" reg
RC="$KCSI_TESTS/plugin-reg-client"
mkdir -p "$T/registry" "$T/plugin" "$T/pool"

# Waits for a driver that is not there yet: SIGTERM still ends it at once, status 0.
"$KCSI_BIN/csi-node-driver-registrar" --csi-address "$T/plugin/csi.sock" \
	--kubelet-registration-path /var/lib/kubelet/plugins/loop.kcsi.io/csi.sock \
	--plugin-registration-path "$T/registry" >"$T/reg0.log" 2>&1 &
pid=$!
sleep 0.7
start=$(date +%s%N)
kill -TERM $pid; wait $pid; rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
[ $rc -eq 0 ] || fail "SIGTERM while waiting for the driver: exit $rc"
[ $ms -lt 1000 ] || fail "SIGTERM took ${ms} ms"

# A stale socket from an earlier run is replaced.
python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$T/registry/loop.kcsi.io-reg.sock"

"$KCSI_BIN/csi-node-driver-registrar" --csi-address "unix://$T/plugin/csi.sock" \
	--kubelet-registration-path "$T/plugin/csi.sock" --plugin-registration-path "$T/registry" \
	--http-endpoint 127.0.0.1:0 --connection-timeout 5s -v 2 >"$T/reg.log" 2>&1 &
REG=$!; PIDS+=($REG)
sleep 0.3
# The driver comes up after the registrar: it retries until GetPluginInfo answers.
"$KCSI_BIN/kcsi-loopplugin" --mode node --endpoint "unix://$T/plugin/csi.sock" --nodeid n1 \
	--pool-dir "$T/pool" >"$T/lp.log" 2>&1 &
LP=$!; PIDS+=($LP)
wait_for "registrar logs its HTTP port" 10 grep -q 'Starting HTTP server' "$T/reg.log"
port=$(sed -n 's/.*Starting HTTP server .* port=\([0-9]*\).*/\1/p' "$T/reg.log" | tail -1)
grep -q 'connection-timeout is deprecated' "$T/reg.log" || fail "no deprecation warning for --connection-timeout"

info=$("$RC" "$T/registry/loop.kcsi.io-reg.sock" info) || fail "GetInfo failed"
[ "$(jq -r .type <<<"$info")" = CSIPlugin ] || fail "GetInfo type: $info"
[ "$(jq -r .name <<<"$info")" = loop.kcsi.io ] || fail "GetInfo name: $info"
[ "$(jq -r .endpoint <<<"$info")" = "$T/plugin/csi.sock" ] || fail "GetInfo endpoint: $info"
[ "$(jq -c .supported_versions <<<"$info")" = '["1.0.0"]' ] || fail "GetInfo versions: $info"
[ -e "$T/plugin/registration" ] && fail "GetInfo wrote a registration probe file (upstream v2.9 stopped)"
"$KCSI_BIN/csi-node-driver-registrar" --mode kubelet-registration-probe \
	--kubelet-registration-path "$T/plugin/csi.sock" >"$T/probe.log" 2>&1 || fail "probe mode: not exit 0"
grep -q 'deprecated' "$T/probe.log" || fail "probe mode: no deprecation warning"
rc=0; "$KCSI_BIN/csi-node-driver-registrar" --mode kubelet-registration-probe >"$T/probe2.log" 2>&1 || rc=$?
[ $rc -eq 1 ] && grep -q 'kubelet-registration-path is a required parameter' "$T/probe2.log" ||
	fail "probe mode without --kubelet-registration-path: exit $rc, want 1 (upstream checks the path first)"
[ "$(stat -c %a "$T/registry/loop.kcsi.io-reg.sock")" = 600 ] || fail "socket mode is not 0600"

code=$(curl -s -o "$T/hz" -w '%{http_code}' "http://127.0.0.1:$port/healthz")
[ "$code" = 200 ] && [ "$(cat "$T/hz")" = ok ] || fail "/healthz: $code $(cat "$T/hz")"
# The driver goes away: upstream's /healthz checks only the registrar's own socket, so it stays
# 200 (a driver's liveness is livenessprobe's to report).
kill -TERM $LP; wait $LP
code=$(curl -s -o "$T/hz" -w '%{http_code}' "http://127.0.0.1:$port/healthz")
[ "$code" = 200 ] && [ "$(cat "$T/hz")" = ok ] || fail "/healthz with the driver gone: $code $(cat "$T/hz")"
"$KCSI_BIN/kcsi-loopplugin" --mode node --endpoint "unix://$T/plugin/csi.sock" --nodeid n1 \
	--pool-dir "$T/pool" >>"$T/lp.log" 2>&1 &
LP=$!; PIDS+=($LP)
# The registration socket moved away: 404; a plain file in its place: 500 with the reason;
# the socket back: 200 (the bound socket follows its file).
SOCK="$T/registry/loop.kcsi.io-reg.sock"
mv "$SOCK" "$SOCK.away"
code=$(curl -s -o "$T/hz" -w '%{http_code}' "http://127.0.0.1:$port/healthz")
[ "$code" = 404 ] && [ "$(cat "$T/hz")" = "registration socket does not exist" ] ||
	fail "/healthz without the socket: $code $(cat "$T/hz")"
: >"$SOCK"
code=$(curl -s -o "$T/hz" -w '%{http_code}' "http://127.0.0.1:$port/healthz")
[ "$code" = 500 ] && grep -q "but it's not a socket" "$T/hz" ||
	fail "/healthz with a plain file for the socket: $code $(cat "$T/hz")"
rm "$SOCK"; mv "$SOCK.away" "$SOCK"
wait_for "/healthz ok again" 10 bash -c "[ \$(curl -s http://127.0.0.1:$port/healthz) = ok ]"

# A successful registration keeps it running; a refused one ends it with the error.
"$RC" "$T/registry/loop.kcsi.io-reg.sock" notify true >/dev/null || fail "notify true failed"
sleep 0.3
kill -0 $REG 2>/dev/null || fail "registrar exited after a successful registration"
"$RC" "$T/registry/loop.kcsi.io-reg.sock" notify false "driver loop.kcsi.io: incompatible versions" >/dev/null 2>&1
rc=0; wait $REG || rc=$?
[ $rc -eq 1 ] || fail "refused registration: exit $rc, want 1"
grep -q 'Registration process failed with error, restarting registration container err="driver loop.kcsi.io: incompatible versions"' "$T/reg.log" ||
	fail "the kubelet's error is not logged"
[ -e "$T/registry/loop.kcsi.io-reg.sock" ] && fail "registration socket left after exit"

# SIGTERM while serving: exit 0 within a second, socket removed.
"$KCSI_BIN/csi-node-driver-registrar" --csi-address "$T/plugin/csi.sock" \
	--kubelet-registration-path "$T/plugin/csi.sock" --plugin-registration-path "$T/registry" \
	>"$T/reg2.log" 2>&1 &
REG=$!; PIDS+=($REG)
wait_for "registration socket" 10 test -S "$T/registry/loop.kcsi.io-reg.sock"
start=$(date +%s%N)
kill -TERM $REG; rc=0; wait $REG || rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
[ $rc -eq 0 ] || fail "SIGTERM: exit $rc"
[ $ms -lt 1000 ] || fail "SIGTERM took ${ms} ms"
[ -e "$T/registry/loop.kcsi.io-reg.sock" ] && fail "registration socket left after SIGTERM"

# Start-up failures end with status 1, as upstream v2.17's main (FlushAndExit(1), never
# klog.Fatal): GetPluginInfo failing or answering no name is not retried; the error is in err=.
for how in "--fail GetPluginInfo=INTERNAL" "--fail GetPluginInfo=UNAVAILABLE"; do
	# shellcheck disable=SC2086
	"$KCSI_TESTS/csi-testdriver" --endpoint "unix://$T/bad.sock" $how >"$T/bad-td.log" 2>&1 &
	BTD=$!
	for _ in $(seq 1 100); do [ -S "$T/bad.sock" ] && break; sleep 0.05; done
	rc=0
	timeout 10 "$KCSI_BIN/csi-node-driver-registrar" --csi-address "$T/bad.sock" \
		--kubelet-registration-path "$T/bad.sock" --plugin-registration-path "$T/registry" \
		>"$T/bad.log" 2>&1 || rc=$?
	[ $rc -eq 1 ] || fail "driver $how: exit $rc, want 1"
	grep -q 'Error retreiving CSI driver name err="rpc error: code = ' "$T/bad.log" ||
		fail "driver $how: no error line: $(tail -2 "$T/bad.log")"
	kill -TERM $BTD; wait $BTD 2>/dev/null; rm -f "$T/bad.sock"
done
rc=0
timeout 10 "$KCSI_BIN/csi-node-driver-registrar" --kubelet-registration-path /x --csi-address "$T/plugin/csi.sock" \
	--plugin-registration-path /nonexistent/dir >"$T/o" 2>&1 || rc=$?
[ $rc -eq 1 ] && grep -q 'Failed to listen on socket socketPath=' "$T/o" ||
	fail "registration socket in a missing folder: exit $rc, $(tail -1 "$T/o")"

# Flags: required path, the health-port/http-endpoint exclusion, --version.
"$KCSI_BIN/csi-node-driver-registrar" --csi-address "$T/plugin/csi.sock" >"$T/o" 2>&1 &&
	fail "ran without --kubelet-registration-path"
grep -q 'kubelet-registration-path is a required parameter' "$T/o" || fail "no message for the missing path"
"$KCSI_BIN/csi-node-driver-registrar" --kubelet-registration-path /x --health-port 9809 \
	--http-endpoint :9810 >"$T/o" 2>&1 && fail "accepted --health-port with --http-endpoint"
[ $? -eq 1 ] || fail "--health-port with --http-endpoint: not exit 1"
"$KCSI_BIN/csi-node-driver-registrar" --version | grep -q 'csi-node-driver-registrar v' || fail "--version"

kill -TERM $LP; wait $LP
if [ $FAILS -ne 0 ]; then
	for f in "$T"/*.log; do echo "---- $f" >&2; tail -30 "$f" >&2; done
	exit 1
fi
echo PASS
