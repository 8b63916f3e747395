#!/bin/bash
# e2e (issue 32): bench/cluster_scale at scale 0.01 (10 nodes, 200 volumes, waves of 10): every
# component, kcsi's and upstream's (from the peers, scripts/peers.sh), reaches sync, every wave
# finishes, and the table has every row. Figures are printed, never asserted.
set -u
: "${KCSI_BIN:?}" "${KCSI_SRC:?}" "${KCSI_PEERS:?}"
out=$(mktemp /tmp/kcsi-cluster-scale-smoke.XXXXXX)
trap 'rm -f "$out"' EXIT
rc=0
python3 "$KCSI_SRC/bench/cluster_scale" --scale 0.01 --build "$(dirname "$KCSI_BIN")" \
	--peers "$KCSI_PEERS" >"$out" || rc=$?
cat "$out"
FAILS=0
fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
[ $rc -eq 0 ] || fail "bench/cluster_scale exited $rc"
grep -q "did not sync" "$out" && fail "a component did not reach sync"
for c in csi-attacher csi-provisioner csi-resizer csi-snapshotter snapshot-controller controller-manager; do
	for f in "time to synced, s" "CPU to synced, s" "RSS after sync, MB" "private after sync, MB" \
		"RSS peak, MB" "private peak, MB"; do
		# kcsi's and upstream's figures are both numbers
		grep -Eq "^\| $c \| $f \| [0-9.]+ \| [0-9.]+ \| ([0-9.]+|-) \|$" "$out" ||
			fail "row '$c | $f' is missing or lacks a figure"
	done
done
for w in "csi-attacher | attach" "csi-attacher | detach" "csi-provisioner | provision" \
	"csi-resizer | expand" "csi-snapshotter | snapshot" "snapshot-controller | snapshot"; do
	for f in "CPU s" "wall s"; do
		grep -Eq "^\| ${w} wave of 10: $f \| [0-9.]+ \| [0-9.]+ \|" "$out" ||
			fail "row '$w wave: $f' is missing or lacks a figure"
	done
done
for c in csi-attacher csi-provisioner csi-resizer csi-snapshotter snapshot-controller; do
	grep -Eq "^\| $c \| [0-9.]+ \(" "$out" || fail "idle row for $c is missing"
done
if [ $FAILS -ne 0 ]; then echo "$FAILS failure(s)"; exit 1; fi
echo PASS
