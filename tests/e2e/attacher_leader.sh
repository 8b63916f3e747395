#!/bin/bash
# e2e: two csi-attachers with --leader-election. Only the leader attaches; kill -9 of the leader
# hands over to the standby within lease duration + retry period; SIGTERM releases the Lease.
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
DRV=loop.kcsi.io
LEASE=external-attacher-leader-loop-kcsi-io
LE=(--leader-election --leader-election-namespace kube-system --leader-election-lease-duration 4s
    --leader-election-renew-deadline 3s --leader-election-retry-period 1s -v 2)

emu_start
lp_start node-1
mk_node node-1
mk_csinode node-1 $DRV node-1
att_start a1 "$T/lp.sock" "${LE[@]}" --http-endpoint 127.0.0.1:0 \
	--leader-election-labels team:storage,tier:controller
PORT1=$(att_http_port a1)
wait_for "a1 leads" 20 grep -q "became leader" "$T/a1.log"
att_start a2 "$T/lp.sock" "${LE[@]}" --http-endpoint 127.0.0.1:0
PORT2=$(att_http_port a2)
healthz() { curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$1/healthz/leader-election"; }
master_status() { curl -s "http://127.0.0.1:$1/metrics" | awk '/^leader_election_master_status/ {print $2}'; }
healthz_ok() { [ "$(healthz "$1")" = 200 ]; }
wait_for "a2 serves diagnostics" 10 healthz_ok "$PORT2"
check "/healthz/leader-election is ok on the leader" eq "$(healthz $PORT1)" 200
check "leader_election_master_status is 1 on the leader" eq "$(master_status $PORT1)" 1
check "leader_election_master_status is 0 on the standby" eq "$(master_status $PORT2)" 0
check "the metric names the lease" bash -c "curl -s http://127.0.0.1:$PORT1/metrics | grep -q 'leader_election_master_status{name=\"$LEASE\"} 1'"
# client-go's leader election metrics provider, which upstream's sidecars register: its HELP text
help=$(curl -s "http://127.0.0.1:$PORT1/metrics" | grep '^# HELP leader_election_master_status ')
check "the metric's HELP is client-go's" eq "$help" "# HELP leader_election_master_status [ALPHA] Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name."
lease_holder() { kc get lease -n kube-system "$LEASE" -o json 2>/dev/null | jq -r '.spec.holderIdentity // ""'; }
check "the Lease has upstream's name and a holder" test -n "$(lease_holder)"
check "the Lease carries --leader-election-labels in upstream's k:v form" eq \
	"$(kc get lease -n kube-system "$LEASE" -o json | jq -c '.metadata.labels')" '{"team":"storage","tier":"controller"}'

for i in 1 2 3; do
	V=$(lp_volume "vol-$i")
	mk_pv "pv-$i" $DRV "$V"
	mk_va "va-$i" $DRV node-1 "pv-$i"
done
for i in 1 2 3; do wait_for "va-$i attached" 20 va_attached "va-$i"; done
sleep 2
check "the standby is not leading" bash -c "! grep -q 'became leader' '$T/a2.log'"
check "the standby wrote nothing" bash -c "! grep -q -e 'Attaching' -e 'Detaching' '$T/a2.log'"
holder1=$(lease_holder)

kill -KILL "${ATT_PIDS[a1]}"
wait "${ATT_PIDS[a1]}" 2>/dev/null
unset "ATT_PIDS[a1]"
killed_at=$SECONDS
V=$(lp_volume vol-4)
mk_pv pv-4 $DRV "$V"
mk_va va-4 $DRV node-1 pv-4
wait_for "a2 takes over" 20 grep -q "became leader" "$T/a2.log"
took=$((SECONDS - killed_at))
check "takeover within lease duration + retry period + slack (${took}s)" test "$took" -le 10
wait_for "va-4 attached by the new leader" 20 va_attached va-4
check "the Lease changed hands" test "$(lease_holder)" != "$holder1"
check "leader_election_master_status is 1 on the new leader" eq "$(master_status $PORT2)" 1

att_stop a2 || fail "a2 exit status"
check "SIGTERM released the Lease" eq "$(lease_holder)" ""
att_start a3 "$T/lp.sock" "${LE[@]}"
wait_for "a released Lease is taken at once" 4 grep -q "became leader" "$T/a3.log"
att_stop a3 || fail "a3 exit status"
att_finish
