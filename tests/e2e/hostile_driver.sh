#!/bin/bash
# e2e (issue 34): kcsi's CSI client (src/csi/client.c, through the kcsi CLI) against a hostile
# driver, h2_hostile_driver.py, a raw HTTP/2 gRPC server that misbehaves per call:
#   big         a ControllerPublishVolume answer of 100 MB: RESOURCE_EXHAUSTED at once, as
#               grpc-go's client says it ("received message larger than max"), the stream reset
#               after the first frame, RSS bounded;
#   forever     an answer whose message never completes (50 KiB/s of a 3 MiB message) and
#   notrailers  a whole answer and then no trailers: both end DEADLINE_EXCEEDED at --timeout;
#   noread      the driver stops reading while a 1.7 MB request is being sent (the socket
#               buffer fills) and
#   nowindow    the driver reads but never grants flow-control window (64 KiB): both end
#               DEADLINE_EXCEEDED at --timeout, memory bounded.
# Meanwhile a legitimate Probe goes to the same driver every 250 ms and must be answered within
# 1 s; after each case one more must be. RSS is the client's peak (/usr/bin/time's maxrss) against
# a plain Probe's. Then the same five on one long-lived connection (hostile_client, see there).
# Not SLOW: about 40 s, and it runs in the sanitizer build too (RSS checks only in the normal
# build: ASan's shadow memory and quarantine are not the client's).
set -u
. "$(dirname "$0")/lib_proc.sh" hostile-driver
. "$(dirname "$0")/lib_hostile.sh"
K="$KCSI_BIN/kcsi"
DRV="$KCSI_SRC/tests/e2e/h2_hostile_driver.py"
TIMEOUT=3

python3 "$DRV" "$T/d.sock" 16777216 >"$T/d.log" 2>&1 &
PIDS+=($!)
python3 "$DRV" "$T/w.sock" 65535 >"$T/w.log" 2>&1 &
PIDS+=($!)
wait_for "hostile driver sockets" 10 test -S "$T/d.sock" -a -S "$T/w.sock"
SAN=0
sanitized "$K" && SAN=1

probe_once() { # SOCK: a Probe answered within 1 s
	timeout 1 "$K" --endpoint "unix://$1" identity probe >/dev/null 2>&1
}
probe_rss() {
	/usr/bin/time -f %M -o "$T/rss0" "$K" --endpoint "unix://$1" identity probe >/dev/null 2>&1
	tail -1 "$T/rss0"
}
RSS0=$(probe_rss "$T/d.sock")
[ -n "$RSS0" ] || { fail "no Probe answered by the hostile driver"; exit 1; }

# legit SOCK: Probes every 250 ms until $T/stop exists; prints "ok probes"
legit() {
	local ok=0 n=0
	while [ ! -e "$T/stop" ]; do
		n=$((n + 1))
		probe_once "$1" && ok=$((ok + 1))
		sleep 0.25
	done
	echo "$ok $n"
}

# hostile NAME SOCK WANT_CODE MIN_S MAX_S [kcsi publish args...]
hostile_case() {
	local name=$1 sock=$2 want=$3 min=$4 max=$5 rc=0 secs rss ok n
	shift 5
	rm -f "$T/stop"
	legit "$sock" >"$T/legit" &
	local lp=$!
	sleep 0.3
	/usr/bin/time -f "%e %M" -o "$T/time" "$K" --endpoint "unix://$sock" --timeout ${TIMEOUT}s \
		controller publish "hostile-$name" node-1 "$@" >/dev/null 2>"$T/err" || rc=$?
	read -r secs rss < <(tail -1 "$T/time")
	sleep 0.5
	touch "$T/stop"
	wait $lp
	read -r ok n <"$T/legit"
	echo "hostile driver $name: rc=$rc secs=$secs rss_kb=$rss (probe alone: $RSS0) legit=$ok/$n" \
		"error=\"$(head -c 160 "$T/err")\""
	grep -q "^$want: " "$T/err" || fail "$name: wanted $want, got: $(head -c 300 "$T/err")"
	awk -v s="$secs" -v a="$min" -v b="$max" 'BEGIN { exit !(s >= a && s < b) }' ||
		fail "$name: the call took ${secs}s, wanted [$min, $max)"
	[ "$n" -ge 2 ] && [ "$ok" -eq "$n" ] ||
		fail "$name: $ok of $n legitimate Probes answered within 1 s meanwhile"
	probe_once "$sock" || fail "$name: no Probe answered after the hostile call"
	[ $SAN = 1 ] || [ "$rss" -le $((RSS0 + 16384)) ] ||
		fail "$name: client RSS $rss KiB, a Probe alone $RSS0 KiB"
}

hostile_case big "$T/d.sock" RESOURCE_EXHAUSTED 0 1.5
grep -q "larger than max (100000000 vs. 4194304)" "$T/err" ||
	fail "big: not grpc-go's message: $(cat "$T/err")"
hostile_case forever "$T/d.sock" DEADLINE_EXCEEDED $TIMEOUT $((TIMEOUT + 1))
hostile_case notrailers "$T/d.sock" DEADLINE_EXCEEDED $TIMEOUT $((TIMEOUT + 1))
BIG=$(head -c 120000 /dev/zero | tr '\0' a)
SECRETS=()
for i in $(seq 1 14); do SECRETS+=(--secret "k$i=$BIG"); done
hostile_case noread "$T/d.sock" DEADLINE_EXCEEDED $TIMEOUT $((TIMEOUT + 1)) "${SECRETS[@]}"
hostile_case nowindow "$T/w.sock" DEADLINE_EXCEEDED $TIMEOUT $((TIMEOUT + 1)) "${SECRETS[@]}"

# The same on one long-lived connection, as a sidecar holds it (hostile_client): Probes every
# 100 ms on that connection meanwhile. Where the hostility is per stream (big, forever,
# notrailers) every one is answered within 1 s and one after; where the driver stalls the whole
# connection (noread, nowindow: HTTP/2 shares its socket and connection window between streams)
# they cannot be, and only the deadline and memory are checked. Requests of 3.5 MB there.
# h_NAME KEY: the figure KEY of case NAME's line
client_case() { # NAME SOCK WANT MIN_MS MAX_MS REQUEST_BYTES PER_STREAM
	local name=$1 out kv
	out=$(timeout 30 "$KCSI_TESTS/hostile_client" "unix://$2" "$name" $((TIMEOUT * 1000)) "$6")
	echo "hostile driver $name (one connection): $out"
	c_code="" c_ms=-1 c_probes=0 c_probes_ok=-1 c_worst_ms=9999 c_after_ok=0
	for kv in ${out%% message=*}; do printf -v "c_${kv%%=*}" '%s' "${kv#*=}"; done
	[ "$c_code" = "$3" ] || fail "$name (one connection): wanted $3, got $out"
	[ "$c_ms" -ge "$4" ] && [ "$c_ms" -lt "$5" ] ||
		fail "$name (one connection): the call took $c_ms ms, wanted [$4, $5)"
	if [ "$7" = 1 ]; then
		[ "$c_probes" -ge 3 ] && [ "$c_probes_ok" -eq "$c_probes" ] && [ "$c_worst_ms" -lt 1000 ] ||
			fail "$name (one connection): $c_probes_ok of $c_probes Probes answered, worst $c_worst_ms ms"
		[ "$c_after_ok" = 1 ] || fail "$name (one connection): no Probe answered after the call"
	fi
	[ $SAN = 1 ] && return
	[ "$c_rss_peak" -le $((c_rss_before + $6 / 1024 + 16384)) ] ||
		fail "$name (one connection): RSS $c_rss_before -> $c_rss_peak KiB during the call"
	[ "$c_rss_after" -le $((c_rss_before + 8192)) ] ||
		fail "$name (one connection): RSS $c_rss_before -> $c_rss_after KiB after the call"
}
MS=$((TIMEOUT * 1000))
client_case big "$T/d.sock" RESOURCE_EXHAUSTED 0 1500 0 1
client_case forever "$T/d.sock" DEADLINE_EXCEEDED $MS $((MS + 1000)) 0 1
client_case notrailers "$T/d.sock" DEADLINE_EXCEEDED $MS $((MS + 1000)) 0 1
client_case noread "$T/d.sock" DEADLINE_EXCEEDED $MS $((MS + 1000)) 3500000 0
client_case nowindow "$T/w.sock" DEADLINE_EXCEEDED $MS $((MS + 1000)) 3500000 0

# A driver that stopped reading, and callers that go on calling it: each call past its deadline
# waits in the session for a reset that cannot leave (before: ~2 KB each, without end, and the
# connection stalled for good). Past 256 of them the client breaks the connection (UNAVAILABLE,
# on_lost) and the next call connects again: Probes of 5 ms back to back for 6 s after the
# call must find the driver again on a new connection, memory back down.
out=$(timeout 30 "$KCSI_TESTS/hostile_client" "unix://$T/d.sock" noread $MS 3500000 5 0 6000 2>/dev/null)
echo "hostile driver noread, then Probes of 5 ms for 6 s (one connection): $out"
c_after_ok=0 c_rss_before=0 c_rss_after=0
for kv in ${out%% message=*}; do printf -v "c_${kv%%=*}" '%s' "${kv#*=}"; done
[ "$c_after_ok" = 1 ] || fail "stalled connection: never broken, no Probe answered after: $out"
[ $SAN = 1 ] || [ "$c_rss_after" -le $((c_rss_before + 8192)) ] ||
	fail "stalled connection: RSS $c_rss_before -> $c_rss_after KiB"

sleep 0.5
# what the driver saw: the 100 MB answer stopped by a reset long before its end, every other
# hostile stream reset by the client at its deadline
for t in big forever notrailers; do
	[ "$(grep -c "tag=hostile-$t .*reset=1" "$T/d.log")" = 2 ] ||
		fail "$t: the client did not reset both streams"
done
for sent in $(sed -n 's/.*tag=hostile-big bytes=\([0-9]*\).*/\1/p' "$T/d.log"); do
	[ "$sent" -lt $((8 << 20)) ] || fail "big: the driver got to send $sent bytes"
done
echo "driver's record:"; cat "$T/d.log" "$T/w.log"

if [ $FAILS -ne 0 ]; then echo "$FAILS failure(s)"; exit 1; fi
echo PASS
