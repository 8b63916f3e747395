#!/bin/bash
# Leader election between real processes on a kube-emulator Lease: one leads; after kill -9 of
# the leader another leads within lease duration + retry period; SIGTERM releases the lease so
# a standby takes over at once (well before the lease would expire).
set -u
BIN=${KCSI_BIN:?}/kube-emulator
DEMO=${KCSI_TESTS:?}/kube-leader-demo
if [ ! -x "$BIN" ]; then echo "FAIL: kube-emulator is not built ($BIN)" >&2; exit 1; fi
command -v curl >/dev/null || { echo "FAIL: the curl command is needed (scripts/deps.sh)" >&2; exit 1; }
T=$(mktemp -d /tmp/kcsi-kube-leader-XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$T"/*.log; do echo "== $f"; tail -5 "$f"; done; exit 1; }

"$BIN" --listen 127.0.0.1:0 --write-kubeconfig "$T/kc" >"$T/emu.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 200); do [ -s "$T/kc" ] && break; sleep 0.05; done
[ -s "$T/kc" ] || fail "emulator did not start"

# Lease 6s, renew 4s, retry 1s: short enough for a test, long enough that a released lease is
# clearly faster than an expired one.
start() { # name
	"$DEMO" --kubeconfig "$T/kc" --identity "$1" --lease-name kcsi-e2e \
		--leader-election-lease-duration 6s --leader-election-renew-deadline 4s \
		--leader-election-retry-period 1s >"$T/$1.log" 2>&1 &
	PIDS+=($!)
	echo $! >"$T/$1.pid"
}
leads() { grep -q "^LEADING $1" "$T/$1.log"; }
wait_leads() { # name timeout_s -> prints seconds waited
	local t0=$(date +%s.%N)
	for _ in $(seq $(( $2 * 20 ))); do
		if leads "$1"; then awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { print a - b }'; return 0; fi
		sleep 0.05
	done
	return 1
}

start a
wait_leads a 20 >/dev/null || fail "a never led"
start b
sleep 3
leads b && fail "b leads while a holds the lease"

kill -9 "$(cat "$T/a.pid")"
took=$(wait_leads b 30) || fail "b did not take over after kill -9 of a"
echo "b took over ${took}s after kill -9 (lease 6s + retry 1s, plus jitter)"
awk -v t="$took" 'BEGIN { exit !(t <= 6 + 1 + 4) }' || fail "takeover took ${took}s"

start c
sleep 2
leads c && fail "c leads while b holds the lease"
kill -TERM "$(cat "$T/b.pid")"
took=$(wait_leads c 30) || fail "c did not take over after SIGTERM of b"
echo "c took over ${took}s after SIGTERM of b"
# Released: c only needs its next retry (1s + jitter), not the 6s lease expiry.
awk -v t="$took" 'BEGIN { exit !(t < 5) }' || fail "release did not hand over at once (${took}s)"
grep -q STOPPED "$T/b.log" || fail "b did not exit cleanly"

# Losing the lease ends the process (as upstream): another identity takes the Lease behind c's
# back and keeps renewing it; c cannot renew within its deadline and exits non-zero.
SERVER=$(awk '/server:/ { print $2; exit }' "$T/kc")
LEASE="$SERVER/apis/coordination.k8s.io/v1/namespaces/default/leases/kcsi-e2e"
cpid=$(cat "$T/c.pid")
for i in $(seq 40); do
	now=$(date -u +%Y-%m-%dT%H:%M:%S.000000Z)
	curl -s -X PATCH -H 'Content-Type: application/merge-patch+json' "$LEASE" \
		-d "{\"spec\":{\"holderIdentity\":\"intruder\",\"renewTime\":\"$now\",\"leaseDurationSeconds\":6}}" >/dev/null
	kill -0 "$cpid" 2>/dev/null || break
	sleep 0.5
done
kill -0 "$cpid" 2>/dev/null && fail "c kept running after losing its lease"
wait "$cpid"
rc=$?
[ "$rc" -ne 0 ] || fail "c exited 0 after losing its lease"
grep -q "leadership lost" "$T/c.log" || fail "c did not log the loss"
echo "c exited with status $rc after losing the lease"
echo "PASS"
