#!/bin/bash
# e2e: two kcsi-controller-managers with leader election on the Lease kcsi-controller-manager in
# kube-system. Only the leader attaches; kill -9 of the leader hands over to the standby, which
# attaches the next pod's volume; SIGTERM of the leader releases the Lease.
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
. "$(dirname "$0")/lib_cm.sh"
DRV=loop.kcsi.io
LE=(--leader-election --leader-election-lease-duration 2s --leader-election-renew-deadline 1500ms
	--leader-election-retry-period 300ms)

emu_start
lp_start node-1
mk_mnode node-1
mk_csinode node-1 $DRV node-1
V1=$(lp_volume vol-1)
V2=$(lp_volume vol-2)
mk_pv pv-1 $DRV "$V1"
mk_pv pv-2 $DRV "$V2"
mk_bound_claim claim-1 pv-1
mk_bound_claim claim-2 pv-2
att_start att "$T/lp.sock"

holder() { kc get lease -n kube-system kcsi-controller-manager -o json 2>/dev/null | jq -r '.spec.holderIdentity // ""'; }
has_holder() { [ -n "$(holder)" ]; }
cm_start cm-a "${LE[@]}" --http-endpoint 127.0.0.1:0
wait_for "cm-a holds the Lease" 20 has_holder
cm_start cm-b "${LE[@]}" --http-endpoint 127.0.0.1:0
PA=$(cm_http_port cm-a)
PB=$(cm_http_port cm-b)
sleep 1
check "cm-a is master" grep -q '^leader_election_master_status{name="kcsi-controller-manager"} 1' <(curl -s "http://127.0.0.1:$PA/metrics")
check "cm-b stands by" grep -q '^leader_election_master_status{name="kcsi-controller-manager"} 0' <(curl -s "http://127.0.0.1:$PB/metrics")
first=$(holder)

mk_pod pod-1 node-1 claim-1
wait_for "pod-1's volume attached by the leader" 30 va_attached "$(va_name "$V1" node-1)"
check "the standby did not start controllers" bash -c "! grep -q 'Started \"attachdetach\"' '$T/cm-b.log'"

cm_kill cm-a
mk_pod pod-2 node-1 claim-2
wait_for "the standby takes over and attaches pod-2's volume" 30 va_attached "$(va_name "$V2" node-1)"
check "the Lease changed hands" test "$(holder)" != "$first"
check "cm-b is master now" grep -q '^leader_election_master_status{name="kcsi-controller-manager"} 1' <(curl -s "http://127.0.0.1:$PB/metrics")
check "pod-1's volume stayed attached across the failover" va_attached "$(va_name "$V1" node-1)"

start=$(date +%s%N)
cm_stop cm-b
check "SIGTERM exits 0" eq "$?" 0
check "SIGTERM exits within 1s" test $(( ($(date +%s%N) - start) / 1000000 )) -lt 1000
check "the Lease is released" eq "$(holder)" ""
kc delete pod pod-1 pod-2 --wait=false >/dev/null
cm_finish
