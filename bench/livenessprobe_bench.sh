#!/usr/bin/env bash
# livenessprobe_bench: what a livenessprobe costs next to its driver (csi-testdriver).
#   1. idle memory: RSS and private memory (RssAnon) once /healthz has answered once;
#   2. N /healthz requests one after another, each on a new connection as the kubelet's prober
#      makes them: CPU milliseconds of the livenessprobe per 1,000 requests, requests per second,
#      p50/p99 latency, and the RSS afterwards;
#   3. the same with 8 clients at once (the single-flight Probe: how many Probes the driver saw).
# It never fails on a figure; it fails only when the probe cannot run.
#
#   bench/livenessprobe_bench.sh [--requests N]      (KCSI_BIN: build/bin; KCSI_TESTS: build/tests)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
bin=${KCSI_BIN:-$src/build/bin}
tests=${KCSI_TESTS:-$src/build/tests}
requests=2000
while [ $# -gt 0 ]; do
	case $1 in
	--requests) requests=$2; shift 2 ;;
	*) echo "livenessprobe_bench: unknown argument $1" >&2; exit 2 ;;
	esac
done
work=$(mktemp -d /tmp/kcsi-lvpbench.XXXXXX)
pids=()
finish() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap finish EXIT

"$tests/csi-testdriver" --endpoint "unix://$work/csi.sock" --record "$work/record" \
	>"$work/drv.log" 2>&1 &
pids+=($!)
"$bin/livenessprobe" --csi-address "$work/csi.sock" --http-endpoint 127.0.0.1:0 \
	>"$work/lvp.log" 2>&1 &
lvp=$!; pids+=($lvp)
port=
for _ in $(seq 1 200); do
	port=$(sed -n 's/.*ServeMux listening .* port=\([0-9]*\).*/\1/p' "$work/lvp.log")
	[ -n "$port" ] && break
	sleep 0.05
done
[ -n "$port" ] || { cat "$work/lvp.log" >&2; echo "livenessprobe_bench: no HTTP port" >&2; exit 1; }

kb() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$lvp/status"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$lvp/stat"; }
hz=$(getconf CLK_TCK)

# N requests from C clients, a new connection each; prints "seconds p50_ms p99_ms non_200".
load() {
	python3 - "$port" "$1" "$2" <<'EOF'
import http.client, sys, threading, time
port, n, clients = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
lat, bad, lock = [], [0], threading.Lock()
def run(k):
    for _ in range(k):
        t = time.monotonic()
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("GET", "/healthz")
        r = c.getresponse(); r.read(); c.close()
        with lock:
            lat.append(time.monotonic() - t)
            if r.status != 200: bad[0] += 1
t0 = time.monotonic()
th = [threading.Thread(target=run, args=(n // clients,)) for _ in range(clients)]
for x in th: x.start()
for x in th: x.join()
el = time.monotonic() - t0
lat.sort()
print("%.3f %.3f %.3f %d" % (el, lat[len(lat) // 2] * 1e3, lat[int(len(lat) * 0.99)] * 1e3, bad[0]))
EOF
}

load 1 1 >/dev/null
sleep 1
echo "livenessprobe idle: VmRSS $(kb VmRSS) kB, RssAnon $(kb RssAnon) kB, threads $(kb Threads)"

for clients in 1 8; do
	: >"$work/record"
	t0=$(cpu_ticks)
	read -r secs p50 p99 bad < <(load "$requests" "$clients")
	ticks=$(($(cpu_ticks) - t0))
	probes=$(grep -c 'Probe' "$work/record" || true)
	awk -v n="$requests" -v c="$clients" -v s="$secs" -v t="$ticks" -v hz="$hz" -v p50="$p50" \
		-v p99="$p99" -v bad="$bad" -v probes="$probes" 'BEGIN {
		printf "%d requests, %d client(s): %.0f req/s, p50 %.2f ms, p99 %.2f ms, " \
			"CPU %.0f ms per 1,000 requests, %d Probes sent, %d not 200\n",
			n, c, n / s, p50, p99, t * 1000 / hz * 1000 / n, probes, bad }'
done
echo "livenessprobe after load: VmRSS $(kb VmRSS) kB, RssAnon $(kb RssAnon) kB"
