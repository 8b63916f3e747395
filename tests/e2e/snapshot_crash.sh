#!/bin/bash
# e2e (SLOW): kill -9 of csi-snapshotter and snapshot-controller, taking turns every 0.6 s,
# while 100 snapshots are created and then deleted (CreateSnapshot takes 300 ms, so kills land
# inside calls). Every snapshot becomes ready with exactly one driver snapshot, named from its
# uid; after the deletions neither objects nor driver snapshots are left (ListSnapshots).
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
. "$(dirname "$0")/lib_provisioner.sh"
DRV=testdriver.kcsi.dev
. "$(dirname "$0")/lib_snapshot.sh"
N=100

emu_start
td_start --slow CreateSnapshot=300ms
mk_vsclass gold
mk_bound_claim c1 vol-1
start_both() {
	sctrl_start --kube-api-qps 200 --kube-api-burst 400
	snapper_start snapper "$T/td.sock" --kube-api-qps 200 --kube-api-burst 400
}
start_both
KILLS=0
MK=()
# kill_round: kill -9 one of the two (alternating) and start it again.
kill_round() {
	local n=sctrl
	[ $((KILLS % 2)) -eq 0 ] && n=snapper
	kill -KILL "${ATT_PIDS[$n]}" 2>/dev/null
	wait "${ATT_PIDS[$n]}" 2>/dev/null
	if [ $n = sctrl ]; then sctrl_start --kube-api-qps 200 --kube-api-burst 400
	else snapper_start snapper "$T/td.sock" --kube-api-qps 200 --kube-api-burst 400; fi
	KILLS=$((KILLS + 1))
}
# until_or_kill SECS CMD...: kill rounds every 0.6 s until CMD succeeds or SECS pass.
until_or_kill() {
	local end=$((SECONDS + $1))
	shift
	while [ $SECONDS -lt $end ]; do
		"$@" && return 0
		sleep 0.6
		kill_round
	done
	return 1
}
ready_count() { kc get volumesnapshot -n default -o json | jq '[.items[] | select(.status.readyToUse == true)] | length'; }
all_ready() { [ "$(ready_count)" -eq $N ]; }
none_left() {
	[ "$(kc get volumesnapshot -n default -o json | jq '.items | length')" -eq 0 ] &&
		[ "$(kc get volumesnapshotcontent -o json | jq '.items | length')" -eq 0 ]
}

# Ten at a time (waiting for those creations only: the components are background jobs too).
for i in $(seq 1 $N); do
	mk_vs "s$i" '{"spec":{"volumeSnapshotClassName":"gold","source":{"persistentVolumeClaimName":"c1"}}}' &
	MK+=($!)
	if [ $((i % 10)) -eq 0 ]; then
		wait "${MK[@]}"
		MK=()
		kill_round
	fi
done
until_or_kill 240 all_ready || fail "only $(ready_count) of $N snapshots ready"
uids=$(kc get volumesnapshot -n default -o json | jq -r '.items[].metadata.uid' | sort)
want=$(echo "$uids" | sed 's/^/snap-snapshot-/' | sort)
have=$(td_snapshots | sort)
check "one driver snapshot per snapshot, named from its uid" eq "$(echo "$have" | wc -l) $(echo "$have" | sort -u | wc -l)" "$N $N"
check "exactly the snapshots' names" eq "$have" "$want"
check "every content points at its driver snapshot" eq \
	"$(kc get volumesnapshotcontent -o json | jq -r '.items[] | select(.status.snapshotHandle == ("snap-snapshot-" + .spec.volumeSnapshotRef.uid)) | .metadata.name' | wc -l)" "$N"

kc delete volumesnapshot --all -n default --wait=false >/dev/null
until_or_kill 240 none_left || fail "snapshots or contents left after deletion"
check "no driver snapshot leaked" eq "$(td_snapshots | wc -l)" 0
echo "  $KILLS kill -9 rounds"
[ "$FAILS" -eq 0 ] || { tail -30 "$T/sctrl.log" >&2; tail -30 "$T/snapper.log" >&2; }
finish
