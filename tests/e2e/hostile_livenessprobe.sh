#!/bin/bash
# e2e (issue 34): livenessprobe's listeners under hostile clients on the network (lib_hostile.sh):
# --http-endpoint (/healthz, each a Probe of csi-testdriver), --health-port (the default form,
# on 0.0.0.0, probed here on 127.0.0.1) and its separate --metrics-address. Every legitimate
# request is answered within 1 s, threads and memory stay bounded and come back down. Runs in the
# sanitizer build too: the deferred /healthz replies cross threads.
set -u
. "$(dirname "$0")/lib_proc.sh" hostile-lvp
. "$(dirname "$0")/lib_hostile.sh"
SOCK="$T/csi.sock"
"$KCSI_TESTS/csi-testdriver" --endpoint "unix://$SOCK" >"$T/drv.log" 2>&1 &
PIDS+=($!)
wait_for "driver socket" 10 test -S "$SOCK"

P=$(free_port)
"$KCSI_BIN/livenessprobe" --csi-address "$SOCK" --http-endpoint "127.0.0.1:$P" >"$T/lvp.log" 2>&1 &
LV=$!; PIDS+=($LV)
wait_port "$P" $LV && hostile "livenessprobe --http-endpoint /healthz" $LV "$P" /healthz

HP=$(free_port) MP=$(free_port)
"$KCSI_BIN/livenessprobe" --csi-address "$SOCK" --health-port "$HP" \
	--metrics-address "127.0.0.1:$MP" >"$T/hp.log" 2>&1 &
HV=$!; PIDS+=($HV)
if wait_port "$HP" $HV && wait_port "$MP" $HV; then
	hostile "livenessprobe --health-port /healthz" $HV "$HP" /healthz
	hostile "livenessprobe --metrics-address /metrics" $HV "$MP" /metrics
fi

# SIGTERM still ends it within a second afterwards
start=$(date +%s%N)
kill -TERM $LV; wait $LV; rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
[ $rc -eq 0 ] && [ $ms -lt 1000 ] || fail "SIGTERM after the storm: exit $rc in $ms ms"

if [ $FAILS -ne 0 ]; then tail -20 "$T/lvp.log"; echo "$FAILS failure(s)"; exit 1; fi
echo PASS
