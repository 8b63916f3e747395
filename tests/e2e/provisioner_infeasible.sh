#!/bin/bash
# e2e: InvalidArgument from CreateVolume is infeasible (sig-storage-lib-external-provisioner v13,
# external-provisioner v6.3): the claim shows "Volume provisioning failed with infeasible error.
# Retries will be delayed.", CreateVolume is not called again before --retry-interval-max has
# passed, and a recreated StorageClass (another UID: the user fixed it) ends the wait at once.
# A selected node is kept (an infeasible request is not rescheduled). csi-testdriver.
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
DRV=testdriver.kcsi.dev
. "$(dirname "$0")/lib_provisioner.sh"

calls() { grep -c "^CreateVolume .*\"name\":\"$1\"" "$T/td.rec" 2>/dev/null || true; }

emu_start
topo_node n1
mk_sc std
mk_sc fixme
td_start --fail CreateVolume=INVALID_ARGUMENT --fail-count CreateVolume=2
prov_start p "$T/td.sock" --retry-interval-start 200ms --retry-interval-max 8s

# 1. Held back for --retry-interval-max, then provisioned.
mk_pvc held std
HPV=$(pv_of held)
wait_for "infeasible shown on the claim" 10 has_event PersistentVolumeClaim held \
	"ProvisioningFailed: Volume provisioning failed with infeasible error. Retries will be delayed. rpc error: code = InvalidArgument"
T0=$SECONDS

# 2. Another claim fails too; its class is recreated, which ends its wait at once.
mk_pvc fixed fixme
FPV=$(pv_of fixed)
wait_for "the second claim infeasible too" 10 has_event PersistentVolumeClaim fixed "infeasible error"
kc delete storageclass fixme >/dev/null
mk_sc fixme
wait_for "provisioned soon after its class was recreated" 5 pv_exists "$FPV"
check "the first claim still waits meanwhile (one call)" eq "$(calls "$HPV")" 1
check "no PV for it yet" bash -c "! kubectl --kubeconfig '$KC' get pv '$HPV' >/dev/null 2>&1"
wait_for "the first claim provisioned after the wait" 15 pv_exists "$HPV"
check "not before --retry-interval-max (8 s, less the seconds before T0)" bash -c "[ $((SECONDS - T0)) -ge 6 ]"
check "two CreateVolume calls for it in all" eq "$(calls "$HPV")" 2
rc=0; att_stop p || rc=$?
check "SIGTERM exits 0" eq "$rc" 0
td_stop
att_finish
