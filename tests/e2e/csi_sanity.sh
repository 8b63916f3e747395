#!/bin/bash
# e2e: upstream's CSI conformance suite, csi-sanity v5.6.0 (KCSI_PEERS/csi-sanity, built from
# github.com/kubernetes-csi/csi-test by scripts/peers.sh), against kcsi-loopplugin started the
# way docs/kcsi-loopplugin.md ("Conformance: csi-sanity") tells a user: --mode all on a temporary
# pool with an attach limit, once with mount volumes and once with block volumes. The suite's
# summary line ("N Passed | N Failed | N Pending | N Skipped") must show no failure and no skip:
# kcsi-loopplugin has every capability of CSI v1.13 that csi-sanity v5.6.0 tests (the health
# RPCs, snapshot accessibility constraints, GET_SNAPSHOT), with its default flags, so every spec
# runs and any skip fails, naming the specs skipped. The one pending spec is upstream's own
# (marked pending in the suite, never run). Loop devices and mounts below the temporary folder
# are removed at the end, and their absence checked.
#
# One failure is csi-sanity's, not the driver's, and is accepted only in its exact form (see
# known_defect below): v5.6.0's "creating a snapshot with accessibility requirements" compares
# each topology of the CreateSnapshot answer with the node's using reflect.DeepEqual, which also
# compares protobuf-go's internal size cache; the node's Topology was marshalled into the
# requests (cache set), the answer's was just unmarshalled (cache 0), so any driver that reports
# a snapshot's accessible_topology over gRPC fails it however right its answer is.
# kcsi-loopplugin reports it (docs/kcsi-loopplugin.md, Snapshot accessibility): without it the
# CO would take a pool's snapshots for usable in every zone.
set -u
: "${KCSI_BIN:?}" "${KCSI_PEERS:?KCSI_PEERS must point at the peers scripts/peers.sh built}"
SANITY="$KCSI_PEERS/csi-sanity"
if [ ! -x "$SANITY" ]; then
	echo "FAIL: $SANITY is missing: run scripts/peers.sh (make peers) first" >&2
	exit 1
fi
D=$(mktemp -d /tmp/kcsi-sanity-e2e.XXXXXX)
PID=""
FAILS=0
fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
leftovers() {
	grep -F "$D" /proc/self/mountinfo | awk '{print $5}' | sort -r
	losetup -a | grep -F "$D" | cut -d: -f1
}
cleanup() {
	if [ -n "$PID" ]; then kill -KILL "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; fi
	grep -F "$D" /proc/self/mountinfo | awk '{print $5}' | sort -r | while read -r m; do
		umount -l "$m" 2>/dev/null
	done
	losetup -a | grep -F "$D" | cut -d: -f1 | while read -r l; do losetup -d "$l"; done
	[ -n "${KEEP:-}" ] || rm -rf "$D"
}
trap cleanup EXIT

# csi-sanity --version prints "(dev)" (its version variable is not the one peers.sh sets); the
# cache records the module version next to the binary.
VERSION_FILE="$(readlink -f "$SANITY").version"
[ ! -f "$VERSION_FILE" ] || grep -q " v5.6.0$" "$VERSION_FILE" ||
	fail "csi-sanity is not v5.6.0: $(cat "$VERSION_FILE")"

# True when the run's only failure is that spec, and its two topologies differ in nothing but
# protobuf-go's size cache (printed as sizeCache: the same segments, the same other fields).
known_defect() {
	local log=$1
	[ "$(grep -c '^  \[FAIL\] ' "$log")" = 1 ] || return 1
	grep -q '^  \[FAIL\] CreateSnapshot \[Controller Server\] \[It\] should succeed when creating a snapshot with accessibility requirements$' "$log" || return 1
	local block
	block=$(awk '/^  \[FAILED\] Expected$/ { on = 1 } on { print } /^  In \[It\]/ { if (on) exit }' "$log")
	local want got
	got=$(sed -n '/Expected$/,/to equal$/p' <<<"$block" | grep -vE 'sizeCache|0x[0-9a-f]+|Expected$|to equal$')
	want=$(sed -n '/to equal$/,/In \[It\]/p' <<<"$block" | grep -vE 'sizeCache|0x[0-9a-f]+|to equal$|In \[It\]')
	[ -n "$got" ] && [ "$got" = "$want" ] && grep -q '"topology.loop.kcsi.io/zone": "local"' <<<"$got" &&
		[ "$(grep -c 'sizeCache: 0,' <<<"$block")" = 1 ]
}

# One run: a fresh plugin on a fresh pool, the suite with the given access type.
run() {
	local type=$1 dir="$D/$1"
	mkdir -p "$dir/pool"
	"$KCSI_BIN/kcsi-loopplugin" --endpoint "unix://$dir/csi.sock" --pool-dir "$dir/pool" \
		--nodeid sanity-node --volume-attach-limit 4 \
		>"$dir/plugin.log" 2>&1 &
	PID=$!
	for _ in $(seq 1 200); do [ -S "$dir/csi.sock" ] && break; sleep 0.05; done
	"$SANITY" --csi.endpoint "$dir/csi.sock" --csi.testvolumeaccesstype "$type" \
		--csi.stagingdir "$dir/staging" --csi.mountdir "$dir/target" \
		--csi.testnodevolumeattachlimit --ginkgo.no-color --ginkgo.v >"$dir/sanity.log" 2>&1
	local rc=$?
	local t0
	t0=$(date +%s%N)
	kill -TERM "$PID"
	wait "$PID" || fail "$type: kcsi-loopplugin exited $? on SIGTERM"
	PID=""
	[ $(( ($(date +%s%N) - t0) / 1000000 )) -le 1000 ] || fail "$type: SIGTERM took over a second"
	local sum ran
	ran=$(grep -E '^Ran [0-9]+ of [0-9]+ Specs' "$dir/sanity.log" | tail -1)
	sum=$(grep -oE '[0-9]+ Passed \| [0-9]+ Failed \| [0-9]+ Pending \| [0-9]+ Skipped' "$dir/sanity.log" | tail -1)
	echo "$type: $ran -- $sum (csi-sanity exit $rc)"
	if [ -z "$sum" ]; then
		fail "$type: no summary line from csi-sanity"
		tail -40 "$dir/sanity.log" >&2
		return
	fi
	read -r passed _ _ failed _ _ pending _ _ skipped _ <<<"$sum"
	if [ "$failed" = 1 ] && known_defect "$dir/sanity.log"; then
		echo "$type: the one failure is csi-sanity v5.6.0's size-cache comparison (see the top)"
		failed=0
		[ "$rc" = 1 ] && rc=0
	fi
	[ "$failed" = 0 ] || fail "$type: $failed failed"
	[ "$skipped" = 0 ] || fail "$type: $skipped skipped: $(grep -E '^\s*\[SKIPPED\]' "$dir/sanity.log" | sort | uniq -c | paste -sd';')"
	# every spec of the suite but upstream's pending one ran and passed
	[ "$passed" -ge 101 ] || fail "$type: only $passed passed"
	[ "$pending" -le 1 ] || fail "$type: $pending pending (upstream marks one)"
	[ "$rc" = 0 ] || fail "$type: csi-sanity exited $rc"
	if [ "$failed" != 0 ] || [ "$skipped" != 0 ] || [ "$rc" != 0 ]; then
		grep -E '^\s*\[(FAIL|SKIPPED)\]|^  \[FAIL\]|^\s*(Summarizing|\[FAIL\]|\[SKIPPED\])' \
			"$dir/sanity.log" | head -40 >&2
		tail -20 "$dir/plugin.log" >&2
	fi
	if grep -qE "ERROR: (Address|Leak)Sanitizer|runtime error:" "$dir/plugin.log"; then
		fail "$type: sanitizer report in the plugin log"
		grep -A30 -E "ERROR: (Address|Leak)Sanitizer|runtime error:" "$dir/plugin.log" | head -40 >&2
	fi
	# The suite deletes what it created: no volume may remain in the pool, and nothing of it
	# on the host.
	local left
	left=$(ls "$dir/pool/volumes" "$dir/pool/snapshots" 2>/dev/null | grep -c '\.json$')
	[ "$left" = 0 ] || fail "$type: $left volume(s) left in the pool: $(ls "$dir/pool/volumes")"
	[ -z "$(leftovers | grep -F "$dir")" ] || fail "$type: left on the host: $(leftovers | grep -F "$dir")"
}

run mount
run block

if [ "$FAILS" -ne 0 ]; then
	echo "$FAILS check(s) failed" >&2
	exit 1
fi
echo PASS
