#!/bin/bash
# e2e: livenessprobe against csi-testdriver over a real socket and a real HTTP port. A healthy
# driver answers 200 "ok"; a driver that says not ready, a dead or absent socket and a hung
# Probe answer 500 with the reason, the hung one within --probe-timeout, and twenty requests at
# once send the hung driver one Probe, not twenty; a driver restarted on the same socket is
# healthy again; 64 silent connections re-opened as soon as dropped do not keep a probe from its
# answer; the metrics carry the Probe calls; flags upstream refuses are refused; a
# GetPluginInfo error at start ends it with 1; SIGTERM ends it within a second while it waits for
# the driver at start and while a Probe hangs.
set -u
. "$(dirname "$0")/lib_proc.sh" lvp
LVP="$KCSI_BIN/livenessprobe"
SOCK="$T/csi.sock"
DRV=
driver() { # starts csi-testdriver on $SOCK with extra flags; waits for the socket
	rm -f "$SOCK"
	"$KCSI_TESTS/csi-testdriver" --endpoint "unix://$SOCK" --record "$T/record" "$@" \
		>>"$T/drv.log" 2>&1 &
	DRV=$!; PIDS+=($DRV)
	wait_for "driver socket" 10 test -S "$SOCK"
}
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }
# GET url -> "$T/body"; prints the status code
get() { curl -s -m 5 -o "$T/body" -w '%{http_code}' "$1"; }
sigterm_exits() { # PID WHAT: SIGTERM must end it with 0 within a second
	local start rc ms
	start=$(date +%s%N)
	kill -TERM "$1"; wait "$1"; rc=$?
	ms=$(ms_since "$start")
	[ $rc -eq 0 ] || fail "SIGTERM $2: exit $rc"
	[ "$ms" -lt 1000 ] || fail "SIGTERM $2 took ${ms} ms"
}
log_port() { # the port a server logged: log file, line pattern
	sed -n "s/.*$2.* port=\([0-9]*\).*/\1/p" "$1" | tail -1
}

# --- flags upstream refuses ---
"$LVP" --no-such-flag >"$T/bad.log" 2>&1; rc=$?
[ $rc -ne 0 ] && grep -q 'flag provided but not defined: -no-such-flag' "$T/bad.log" ||
	fail "unknown flag: exit $rc, $(cat "$T/bad.log")"
# v2 removed --connection-timeout: a v1 argument list must fail loudly, not half-work
"$LVP" --connection-timeout=3s >"$T/bad.log" 2>&1; rc=$?
[ $rc -ne 0 ] && grep -q 'connection-timeout' "$T/bad.log" || fail "--connection-timeout: exit $rc"
"$LVP" --probe-timeout=soon >"$T/bad.log" 2>&1; rc=$?
[ $rc -ne 0 ] && grep -q 'probe-timeout' "$T/bad.log" || fail "bad duration: exit $rc"
"$LVP" --health-port=9000 --http-endpoint=127.0.0.1:0 --csi-address "$SOCK" >"$T/bad.log" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q 'Only one of `--health-port` and `--http-endpoint`' "$T/bad.log" ||
	fail "--health-port with --http-endpoint: exit $rc, $(cat "$T/bad.log")"
"$LVP" --metrics-address=127.0.0.1:0 --http-endpoint=127.0.0.1:0 --csi-address "$SOCK" >"$T/bad.log" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q 'Only one of `--metrics-address` and `--http-endpoint`' "$T/bad.log" ||
	fail "--metrics-address with --http-endpoint: exit $rc"
"$LVP" --csi-address tcp://127.0.0.1:1 >"$T/bad.log" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q 'Failed to establish connection to CSI driver' "$T/bad.log" ||
	fail "tcp endpoint: exit $rc, $(cat "$T/bad.log")"
"$LVP" --help >"$T/help.log" 2>&1 || fail "--help failed"
for f in csi-address probe-timeout health-port http-endpoint metrics-address metrics-path; do
	grep -q -- "-$f" "$T/help.log" || fail "--help does not list --$f"
done

# --- SIGTERM while waiting for a driver that never comes: exit 0 at once ---
"$LVP" --csi-address "$T/never.sock" --http-endpoint 127.0.0.1:0 >"$T/never.log" 2>&1 &
pid=$!
sleep 0.5
sigterm_exits $pid "while waiting for the driver"

# --- GetPluginInfo failing at start is fatal (exit 1), as upstream ---
driver --fail GetPluginInfo=INTERNAL
"$LVP" --csi-address "$SOCK" --http-endpoint 127.0.0.1:0 >"$T/info.log" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q 'Failed to get CSI driver name' "$T/info.log" ||
	fail "GetPluginInfo error: exit $rc, $(cat "$T/info.log")"
kill -KILL $DRV; wait $DRV 2>/dev/null

# --- the probe starts first and waits for the driver's socket ---
rm -f "$SOCK"
"$LVP" --csi-address "unix://$SOCK" --http-endpoint 127.0.0.1:0 --probe-timeout 1s -v 5 \
	>"$T/lvp.log" 2>&1 &
LV=$!; PIDS+=($LV)
sleep 0.4
kill -0 $LV 2>/dev/null || fail "livenessprobe exited while waiting for the driver"
driver
wait_for "livenessprobe listens" 10 grep -q 'ServeMux listening' "$T/lvp.log"
PORT=$(log_port "$T/lvp.log" 'ServeMux listening')
URL="http://127.0.0.1:$PORT/healthz"
grep -q 'CSI driver name driver="testdriver.kcsi.dev"' "$T/lvp.log" || fail "driver name not logged"
grep -q 'Failed to get CSI driver name err="rpc error: code = Internal' "$T/info.log" ||
	fail "GetPluginInfo error: the error is not in err=: $(cat "$T/info.log")"

# --- the /healthz address already taken: logged, exit 0 (upstream's main returns), while a
# --- taken --metrics-address exits 1 (upstream's FlushAndExit(1)) ---
"$LVP" --csi-address "$SOCK" --http-endpoint "127.0.0.1:$PORT" >"$T/busy.log" 2>&1; rc=$?
[ $rc -eq 0 ] && grep -qi 'Failed to start http server err=".*address already in use' "$T/busy.log" ||
	fail "/healthz address in use: exit $rc, $(tail -2 "$T/busy.log")"
"$LVP" --csi-address "$SOCK" --health-port 0 --metrics-address "127.0.0.1:$PORT" >"$T/busy.log" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q 'Failed to start prometheus metrics endpoint' "$T/busy.log" ||
	fail "metrics address in use: exit $rc, $(tail -2 "$T/busy.log")"

code=$(get "$URL")
[ "$code" = 200 ] && [ "$(cat "$T/body")" = ok ] || fail "healthy driver: $code $(cat "$T/body")"
get "http://127.0.0.1:$PORT/metrics" >/dev/null
grep -q '^csi_sidecar_operations_seconds_count{driver_name="testdriver.kcsi.dev",grpc_status_code="OK",method_name="/csi.v1.Identity/Probe"} [1-9]' "$T/body" ||
	fail "/metrics has no Probe series: $(grep csi_sidecar "$T/body" | head -3)"
grep -q '^process_resident_memory_bytes ' "$T/body" || fail "/metrics has no process metrics"

# --- dead socket (driver killed, file left) and absent socket: 500 at once ---
kill -KILL $DRV; wait $DRV 2>/dev/null
start=$(date +%s%N)
code=$(get "$URL")
ms=$(ms_since "$start")
[ "$code" = 500 ] && grep -q 'code = Unavailable' "$T/body" || fail "dead driver: $code $(cat "$T/body")"
[ "$ms" -lt 1500 ] || fail "dead driver answered after ${ms} ms"
rm -f "$SOCK"
code=$(get "$URL")
[ "$code" = 500 ] && grep -q 'code = Unavailable' "$T/body" || fail "absent socket: $code $(cat "$T/body")"

# --- a driver that answers ready=false ---
driver --probe-not-ready
code=$(get "$URL")
[ "$code" = 500 ] && [ "$(cat "$T/body")" = "driver responded but is not ready" ] ||
	fail "not-ready driver: $code $(cat "$T/body")"
grep -q 'Driver responded but is not ready' "$T/lvp.log" || fail "not ready is not logged"

# --- the driver restarted on the same path: healthy again ---
kill -TERM $DRV; wait $DRV 2>/dev/null
driver
# the first request after the new driver listens already reaches it
code=$(get "$URL")
[ "$code" = 200 ] && [ "$(cat "$T/body")" = ok ] || fail "driver restarted: $code $(cat "$T/body")"

# --- a hung Probe: 500 within the timeout; twenty requests at once send one Probe ---
kill -KILL $DRV; wait $DRV 2>/dev/null
driver --slow Probe=10s
: >"$T/record"
start=$(date +%s%N)
code=$(get "$URL")
ms=$(ms_since "$start")
[ "$code" = 500 ] && grep -q 'code = DeadlineExceeded' "$T/body" || fail "hung driver: $code $(cat "$T/body")"
[ "$ms" -lt 1500 ] || fail "hung driver answered after ${ms} ms (timeout 1s)"
: >"$T/record"
start=$(date +%s%N)
for i in $(seq 20); do
	curl -s -m 5 -o /dev/null -w '%{http_code} %{time_total}\n' "$URL" >"$T/par.$i" &
done
wait_for "twenty answers" 10 bash -c "[ \$(cat $T/par.* 2>/dev/null | wc -l) -eq 20 ]"
ms=$(ms_since "$start")
n500=$(cat "$T/par."* | grep -c '^500 ')
[ "$n500" -eq 20 ] || fail "concurrent requests to a hung driver: $n500 of 20 answered 500: $(cat "$T/par."* | sort | uniq -c)"
[ "$ms" -lt 2500 ] || fail "twenty concurrent requests took ${ms} ms"
probes=$(grep -c '^/csi.v1.Identity/Probe\|^Probe' "$T/record")
[ "$probes" -le 3 ] || fail "twenty concurrent requests sent $probes Probes to the driver"
# the metrics path answers while a Probe hangs
curl -s -m 5 -o /dev/null "$URL" &
sleep 0.2
start=$(date +%s%N)
get "http://127.0.0.1:$PORT/metrics" >/dev/null
ms=$(ms_since "$start")
[ "$ms" -lt 500 ] || fail "/metrics waited ${ms} ms for a hung Probe"
grep -q 'grpc_status_code="DeadlineExceeded",method_name="/csi.v1.Identity/Probe"' "$T/body" ||
	fail "/metrics does not count the timed-out Probes"

# --- 64 silent connections, each re-opened when dropped (issue 34): every probe answered ---
# (the old server had 32 threads: 0 or 1 of 8 probes got an answer; upstream's Go server: 8 of 8)
kill -KILL $DRV; wait $DRV 2>/dev/null
driver
out=$(python3 "$KCSI_SRC/tests/e2e/http_hostile.py" reopen "127.0.0.1:$PORT" /healthz 64 8)
echo "64 re-opened silent connections: $out"
case "$out" in answered=8\ probes=8\ *) ;; *) fail "64 silent connections: $out" ;; esac
kill -KILL $DRV; wait $DRV 2>/dev/null
driver --slow Probe=10s

# --- SIGTERM while a Probe hangs: exit 0 within a second ---
curl -s -m 5 -o /dev/null "$URL" &
sleep 0.3
sigterm_exits $LV "while a Probe hangs"
kill -KILL $DRV; wait $DRV 2>/dev/null

# --- --health-port (the default form) and a separate --metrics-address ---
driver
HP=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$LVP" --csi-address "$SOCK" --health-port "$HP" --metrics-address 127.0.0.1:0 \
	--metrics-path /m >"$T/hp.log" 2>&1 &
HPID=$!; PIDS+=($HPID)
wait_for "health-port server" 10 grep -q '^I.*ServeMux listening address="0.0.0.0:'"$HP"'"' "$T/hp.log"
code=$(get "http://127.0.0.1:$HP/healthz")
[ "$code" = 200 ] && [ "$(cat "$T/body")" = ok ] || fail "--health-port: $code $(cat "$T/body")"
code=$(get "http://127.0.0.1:$HP/metrics")
[ "$code" = 404 ] || fail "metrics served on the health port with --metrics-address: $code"
MP=$(log_port "$T/hp.log" 'Separate metrics ServeMux listening')
code=$(get "http://127.0.0.1:$MP/m")
[ "$code" = 200 ] && grep -q 'method_name="/csi.v1.Identity/Probe"' "$T/body" ||
	fail "--metrics-address /m: $code"
sigterm_exits $HPID "when idle"

if [ $FAILS -ne 0 ]; then
	echo "--- livenessprobe log"; tail -30 "$T/lvp.log"
	echo "$FAILS failure(s)"; exit 1
fi
echo "PASS"
