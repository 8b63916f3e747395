#!/bin/bash
# e2e: kcsi's CSI transport (src/csi) against grpc-go (google.golang.org/grpc), the gRPC of the
# kubelet and of every upstream sidecar, both directions: kcsi's client (interop_client) against
# a grpc-go server (csipeer server, tests/peers/csipeer), and a grpc-go client (csipeer client)
# against kcsi's server (csi-testdriver). Each client program starts the servers it talks to,
# because it kills and restarts them in the connection-loss case; this script gives them a temp
# dir, removes every process they left (by the pid files in it) and reports. Cases: round trips
# of every field kind, deadlines, status codes 1..16 with awkward messages and details trailers,
# 4 MiB limits, 64 concurrent calls, connection loss and reconnect, keepalive both ways and
# grpc-go's ping policy, 64 KiB flow-control windows, cancellation, 100+ streams on one
# connection (docs/development.md, "Interoperability with grpc-go").
#
# csipeer is built by `make peers` (scripts/peers.sh) into $KCSI_PEERS: without it this test
# fails (it never skips).
set -u
: "${KCSI_TESTS:?}" "${KCSI_PEERS:?}"
PEER=$KCSI_PEERS/csipeer
[ -x "$PEER" ] || {
	echo "FAIL: $PEER is missing: run make peers (scripts/peers.sh builds kcsi's grpc-go peer)"
	exit 1
}

T=$(mktemp -d /tmp/grpc_interop_go.XXXXXX)
FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
# The client programs start the servers; each server's pid is in a file under $T.
cleanup() {
	local f p
	for f in "$T"/*/*.pid; do
		[ -e "$f" ] || continue
		p=$(cat "$f" 2>/dev/null)
		[ -n "$p" ] && kill -KILL "$p" 2>/dev/null
	done
	rm -rf "$T"
}
trap cleanup EXIT

# Prints the logs of one direction when it failed.
show_logs() {
	local f
	for f in "$@"; do
		[ -s "$f" ] || continue
		echo "--- $(basename "$f") (last 30 lines)"
		tail -n 30 "$f"
	done
}

# kcsi's client -> grpc-go server.
mkdir -p "$T/c"
"$KCSI_TESTS/interop_client" --peer "$PEER" --dir "$T/c" 2>"$T/c/client.log"
rc=$?
head -n 1 "$T"/c/peer.log 2>/dev/null # the grpc-go version the peer was built with
[ $rc -eq 0 ] || { fail "kcsi client -> grpc-go server: exit $rc"; show_logs "$T/c/client.log" "$T"/c/*.log; }

# grpc-go client -> kcsi's server. (csipeer's --libgrpc-server turns the keepalive case's
# too_many_pings GOAWAY into a known deviation, for a run against a libgrpc-based server such as
# csi-testdriver-libgrpc; kcsi's own server must pass it.)
mkdir -p "$T/go"
"$PEER" client --testdriver "$KCSI_TESTS/csi-testdriver" --dir "$T/go" 2>"$T/go/client.log"
rc=$?
[ $rc -eq 0 ] || { fail "grpc-go client -> kcsi server: exit $rc"; show_logs "$T/go/client.log" "$T"/go/*.log; }

echo "$FAILS failures"
[ "$FAILS" -eq 0 ]
