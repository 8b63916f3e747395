#!/bin/bash
# e2e: csi-resizer with the loop driver (a real ControllerExpandVolume: the image file grows).
# A claim grows from 16Mi to 32Mi: the volume's size in the driver, the PV, NodeResizePending.
# A larger request while the node's step is pending waits for it (upstream's rule: let the node
# finish before a new controller expansion), and goes on once the node reports the new capacity.
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
DRV=loop.kcsi.io
. "$(dirname "$0")/lib_provisioner.sh"
. "$(dirname "$0")/lib_resizer.sh"

lp_size() {
	"$KCSI_BIN/kcsi" --endpoint "unix://$T/lp.sock" -o json controller list-volumes |
		jq -r --arg v "$1" '.entries[] | select(.volume.volume_id==$v) | .volume.capacity_bytes'
}
pv_is() { [ "$(kubectl --kubeconfig "$KC" get pv "pv-$1" -o jsonpath='{.spec.capacity.storage}')" = "$2" ]; }

emu_start
mk_sc grow '{"allowVolumeExpansion":true}'
lp_start n1 --mode controller
VOL=$(lp_volume grow-me)
check "a 16Mi volume" eq "$(lp_size "$VOL")" 16777216
rsz_start r1 "$T/lp.sock"
mk_bound lc 16Mi grow "$VOL"

resize lc 32Mi
wait_for "PV 32Mi" 20 pv_is lc 32Mi
check "the driver's volume grew to 32Mi" eq "$(lp_size "$VOL")" 33554432
check "the image file grew" bash -c "[ \$(find '$T/pool' -type f -size +30M | wc -l) -ge 1 ]"
rstatus_is() { [ "$(kubectl --kubeconfig "$KC" get pvc "$1" -o jsonpath='{.status.allocatedResourceStatuses.storage}')" = "$2" ]; }
wait_for "NodeResizePending (a filesystem must grow on the node)" 10 rstatus_is lc NodeResizePending
check "FileSystemResizePending" eq "$(cond_of lc FileSystemResizePending)" True
check "allocatedResources 32Mi" eq "$(pvc_field lc .status.allocatedResources.storage)" 32Mi
wait_for "event FileSystemResizeRequired" 10 has_event PersistentVolumeClaim lc "FileSystemResizeRequired"

# A larger request while the node is pending: nothing until the node has finished.
resize lc 48Mi
sleep 2
check "the driver is not asked while the node is pending" eq "$(lp_size "$VOL")" 33554432
check "PV still 32Mi" eq "$(pv_cap lc)" 32Mi
# What the kubelet writes when NodeExpandVolume is done (kcsi-node's part, another helper's):
status_patch "/api/v1/namespaces/default/persistentvolumeclaims/lc" \
	'{"status":{"capacity":{"storage":"32Mi"},"allocatedResourceStatuses":null,"conditions":null}}'
wait_for "then PV 48Mi" 20 pv_is lc 48Mi
check "the driver's volume is 48Mi" eq "$(lp_size "$VOL")" 50331648
check "allocatedResources 48Mi" eq "$(pvc_field lc .status.allocatedResources.storage)" 48Mi
att_stop r1 || fail "exit on SIGTERM"
rsz_finish
