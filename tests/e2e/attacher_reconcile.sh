#!/bin/bash
# e2e: the reconciler (the loop driver has LIST_VOLUMES_PUBLISHED_NODES). The volume is
# unpublished behind the attacher's back; within --reconcile-sync the attacher notices that the
# VolumeAttachment says attached while the driver does not publish it, and attaches it again.
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
DRV=loop.kcsi.io

emu_start
lp_start node-1
mk_node node-1
mk_csinode node-1 $DRV node-1
V=$(lp_volume vol-r)
mk_pv pv-r $DRV "$V"
mk_va va-r $DRV node-1 pv-r
att_start a "$T/lp.sock" --reconcile-sync 1s --max-entries 1 --http-endpoint 127.0.0.1:0
PORT=$(att_http_port a)
wait_for "va-r attached" 20 va_attached va-r
check "driver publishes the volume" lp_published "$V" node-1
# A second volume so ListVolumes pages with --max-entries 1.
V2=$(lp_volume vol-r2)

# The reconciler (1 s period) may re-publish before a check of the driver's state could run, so
# the unpublish is checked by its answer and the driver's log line, not by reading state after it.
check "kcsi unpublishes the volume behind the attacher's back" bash -c \
	"'$KCSI_BIN/kcsi' --endpoint 'unix://$T/lp.sock' controller unpublish '$V' node-1 >/dev/null"
check "the driver unpublished it" grep -q "Unpublished volume volume=\"$V\" node=\"node-1\"" "$T/lp.log"
wait_for "reconciler re-publishes the volume" 30 lp_published "$V" node-1
check "reconciler reported the difference" grep -qE 'VA "?va-r"? for volume .* has attached status true but actual state false' "$T/a.log"
wait_for "va-r attached again" 20 va_attached va-r
publishes=$(curl -s "http://127.0.0.1:$PORT/metrics" |
	awk '/^csi_sidecar_operations_seconds_count.*ControllerPublishVolume/ {print $2}')
check "ControllerPublishVolume called again ($publishes)" test "${publishes:-0}" -ge 2
check "ListVolumes calls appear in the metrics" bash -c "curl -s http://127.0.0.1:$PORT/metrics | grep -q 'ListVolumes\"} '"
att_stop a || fail "attacher exit status"
att_finish
