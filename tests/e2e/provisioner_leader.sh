#!/bin/bash
# e2e: two csi-provisioner replicas with leader election: only the leader provisions; after
# kill -9 of the leader the standby takes the Lease (named after the driver, as upstream) and
# provisions; /healthz/leader-election answers on both.
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
DRV=testdriver.kcsi.dev
. "$(dirname "$0")/lib_provisioner.sh"
LE=(--leader-election --leader-election-namespace default --leader-election-lease-duration 2s
    --leader-election-renew-deadline 1500ms --leader-election-retry-period 300ms --http-endpoint 127.0.0.1:0)
holder() { kc get lease "$DRV" -n default -o jsonpath='{.spec.holderIdentity}' 2>/dev/null; }
acquired() { grep -q "Successfully acquired lease" "$T/$1.log"; }

emu_start
topo_node n1
td_start
mk_sc std
prov_start a "$T/td.sock" "${LE[@]}"
wait_for "replica a leads" 20 acquired a
prov_start b "$T/td.sock" "${LE[@]}"
check "the Lease is named after the driver" bash -c "[ -n \"\$(kubectl --kubeconfig '$KC' get lease '$DRV' -n default -o jsonpath='{.spec.holderIdentity}')\" ]"
mk_pvc one std
wait_for "the leader provisions" 20 pv_exists "$(pv_of one)"
sleep 1
check "the standby did nothing" bash -c "! grep -q 'CreateVolume' '$T/b.log'"
check "the standby is healthy" eq "$(curl -s "http://127.0.0.1:$(att_http_port b)/healthz/leader-election")" ok
H1=$(holder)
kill -KILL "${ATT_PIDS[a]}"; wait "${ATT_PIDS[a]}" 2>/dev/null; unset "ATT_PIDS[a]"
wait_for "the standby takes over after kill -9 of the leader" 20 acquired b
check "the Lease changed hands" bash -c "[ '$(holder)' != '$H1' ]"
mk_pvc two std
wait_for "the new leader provisions" 20 pv_exists "$(pv_of two)"
check "one volume per claim" eq "$(td_volumes | sort | tr '\n' ' ')" "$(echo "vol-$(pv_of one) vol-$(pv_of two)" | tr ' ' '\n' | sort | tr '\n' ' ')"
rc=0; att_stop b || rc=$?
check "SIGTERM of the leader exits 0" eq "$rc" 0
check "the leader released the Lease" eq "$(holder)" ""
att_finish
