#!/bin/bash
# e2e: kcsi's CSI transport (src/csi) against @grpc/grpc-js, a gRPC implementation kcsi did not
# write, both directions: kcsi's client (interop_client) against a grpc-js server
# (tests/interop/csi_peer.js server), and a grpc-js client (csi_peer.js client) against kcsi's
# server (csi-testdriver). Each client program starts the server it talks to, because it kills
# and restarts it in the connection-loss case; this script gives them a temp dir, removes every
# process they left (by the pid files in it) and reports. Cases: round trips of every field
# kind, deadlines, status codes 1..16 with awkward messages, 4 MiB limits, 64 concurrent calls,
# connection loss and reconnect, keepalive (docs/development.md, "Interoperability with grpc-js").
#
# Node.js and the packages of tests/interop/package-lock.json are prerequisites that
# scripts/deps.sh installs: without them this test fails (it never skips).
set -u
: "${KCSI_SRC:?}" "${KCSI_TESTS:?}"
INTEROP=$KCSI_SRC/tests/interop

NODE=$(command -v node) || {
	echo "FAIL: node is not installed: run scripts/deps.sh (Debian package nodejs)"
	exit 1
}
for m in @grpc/grpc-js @grpc/proto-loader; do
	[ -f "$INTEROP/node_modules/$m/package.json" ] || {
		echo "FAIL: $m is missing from $INTEROP/node_modules: run scripts/deps.sh (npm ci in tests/interop)"
		exit 1
	}
done
echo "node $("$NODE" --version)," \
	"@grpc/grpc-js $("$NODE" -p "require('$INTEROP/node_modules/@grpc/grpc-js/package.json').version")"

T=$(mktemp -d /tmp/grpc_interop_js.XXXXXX)
FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
# The client programs start the servers; each server writes its pid to a file under $T.
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

# kcsi's client -> grpc-js server.
mkdir -p "$T/c"
"$KCSI_TESTS/interop_client" --node "$NODE" --peer "$INTEROP/csi_peer.js" --dir "$T/c" \
	2>"$T/c/client.log"
rc=$?
[ $rc -eq 0 ] || { fail "kcsi client -> grpc-js server: exit $rc"; show_logs "$T/c/client.log" "$T/c/peer.log"; }

# grpc-js client -> kcsi's server. (csi_peer.js's --libgrpc-server turns the keepalive case's
# too_many_pings GOAWAY into a known deviation, for a run against a libgrpc-based server such as
# csi-testdriver-libgrpc; kcsi's own server must pass it.)
mkdir -p "$T/js"
"$NODE" "$INTEROP/csi_peer.js" client --testdriver "$KCSI_TESTS/csi-testdriver" --dir "$T/js" \
	2>"$T/js/client.log"
rc=$?
[ $rc -eq 0 ] || { fail "grpc-js client -> kcsi server: exit $rc"; show_logs "$T/js/client.log" "$T"/js/*.log; }

echo "$FAILS failures"
[ "$FAILS" -eq 0 ]
