#!/bin/bash
# e2e: what csi-attacher sends to the driver, and its other handlers.
#  - capability mapping (block, read-only many + PUBLISH_READONLY, ReadWriteOncePod, mount flags),
#    volume context and node ID, checked in the requests csi-testdriver recorded;
#  - controllerPublishSecretRef: the Secret's data reaches the driver and never the log at -v=10;
#  - --dummy: VAs of "csi/dummy" attached without a driver, finalizers or CSI calls;
#  - trivial handler: a driver without the controller service gets VAs attached, no finalizers.
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
DRV=testdriver.kcsi.dev
SECRET=planted-att-s3cret-value

emu_start
td_start
TD() { "$KCSI_BIN/kcsi" --endpoint "unix://$T/td.sock" "$@" >/dev/null; }
for v in blk ro rwop sec; do TD controller create-volume "$v"; done
mk_node node-1
mk_csinode node-1 $DRV td-node-1
echo "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"pub\",\"namespace\":\"default\"},
  \"data\":{\"password\":\"$(printf %s "$SECRET" | base64)\"}}" | kc create -f - >/dev/null
mk_pv pv-blk $DRV vol-blk '{"volumeMode":"Block"}'
mk_pv pv-ro $DRV vol-ro '{"accessModes":["ReadOnlyMany"],"csi":{"readOnly":true,"volumeAttributes":{"zone":"z1"}}}'
mk_pv pv-rwop $DRV vol-rwop '{"accessModes":["ReadWriteOncePod"],"mountOptions":["noatime"],"csi":{"fsType":"xfs"}}'
mk_pv pv-sec $DRV vol-sec '{"csi":{"controllerPublishSecretRef":{"name":"pub","namespace":"default"}}}'
for v in blk ro rwop sec; do mk_va "va-$v" $DRV node-1 "pv-$v"; done

# An inline volume (CSI migration): the VA carries the PV spec itself.
TD controller create-volume inline
jq -n '{apiVersion:"storage.k8s.io/v1",kind:"VolumeAttachment",metadata:{name:"va-inline"},
  spec:{attacher:"testdriver.kcsi.dev",nodeName:"node-1",source:{inlineVolumeSpec:{
    accessModes:["ReadWriteMany"],csi:{driver:"testdriver.kcsi.dev",volumeHandle:"vol-inline",fsType:"ext4"}}}}}' |
	kc create -f - >/dev/null
att_start a "$T/td.sock" -v 10 --default-fstype ext4
for v in blk ro rwop sec inline; do wait_for "va-$v attached" 20 va_attached "va-$v"; done

# req VOLUME JQ-CONDITION: the last ControllerPublishVolume for VOLUME satisfies the condition
req() {
	grep '^ControllerPublishVolume ' "$T/td.rec" | cut -d' ' -f2- |
		jq -e -s "map(select(.volume_id==\"$1\")) | last | $2" >/dev/null
}
check "block volume gets a block capability" req vol-blk '.volume_capability.block == {} and .volume_capability.access_mode.mode == "SINGLE_NODE_WRITER"'
check "node ID from the CSINode" req vol-blk '.node_id == "td-node-1"'
check "ReadOnlyMany + readOnly: MULTI_NODE_READER_ONLY and readonly (driver has PUBLISH_READONLY)" \
	req vol-ro '.readonly == true and .volume_capability.access_mode.mode == "MULTI_NODE_READER_ONLY"'
check "volumeAttributes become the volume context" req vol-ro '.volume_context == {"zone":"z1"}'
check "--default-fstype fills an empty fsType" req vol-ro '.volume_capability.mount.fs_type == "ext4"'
check "ReadWriteOncePod without SINGLE_NODE_MULTI_WRITER: SINGLE_NODE_WRITER, PV fsType and mount options" \
	req vol-rwop '.volume_capability.access_mode.mode == "SINGLE_NODE_WRITER" and .volume_capability.mount == {"fs_type":"xfs","mount_flags":["noatime"]}'
check "inline volume spec: its handle and access mode" req vol-inline '.volume_capability.access_mode.mode == "MULTI_NODE_MULTI_WRITER" and .volume_capability.mount.fs_type == "ext4"'
check "inline volume VA has the finalizer" eq "$(va_field va-inline '.metadata.finalizers | join(",")')" external-attacher/testdriver-kcsi-dev
check "the Secret reaches the driver" req vol-sec ".secrets == {\"password\":\"$SECRET\"}"
check "a request without secret ref has none" req vol-blk '(.secrets // {}) == {}'
check "-v=10 logged the publish request" grep -q 'ControllerPublishVolume' "$T/a.log"
if grep -q "$SECRET" "$T/a.log"; then fail "the secret value appears in the attacher log at -v=10"; fi
check "the log shows the secret as stripped" grep -q 'stripped' "$T/a.log"
check "attachmentMetadata from the publish context" eq "$(va_field va-blk .status.attachmentMetadata.devicePath)" /dev/test/vol-blk
att_stop a || fail "attacher exit status"

# A driver with SINGLE_NODE_MULTI_WRITER and without PUBLISH_READONLY.
td_stop
td_start --controller-caps PUBLISH_UNPUBLISH_VOLUME,SINGLE_NODE_MULTI_WRITER
for v in snmw-rwo snmw-rwop snmw-ro; do TD controller create-volume "$v"; done
mk_pv pv-snmw-rwo $DRV vol-snmw-rwo
mk_pv pv-snmw-rwop $DRV vol-snmw-rwop '{"accessModes":["ReadWriteOncePod"]}'
mk_pv pv-snmw-ro $DRV vol-snmw-ro '{"accessModes":["ReadOnlyMany"],"csi":{"readOnly":true}}'
for v in snmw-rwo snmw-rwop snmw-ro; do mk_va "va-$v" $DRV node-1 "pv-$v"; done
att_start b "$T/td.sock"
for v in snmw-rwo snmw-rwop snmw-ro; do wait_for "va-$v attached" 20 va_attached "va-$v"; done
check "ReadWriteOnce with SINGLE_NODE_MULTI_WRITER: SINGLE_NODE_MULTI_WRITER" \
	req vol-snmw-rwo '.volume_capability.access_mode.mode == "SINGLE_NODE_MULTI_WRITER"'
check "ReadWriteOncePod with SINGLE_NODE_MULTI_WRITER: SINGLE_NODE_SINGLE_WRITER" \
	req vol-snmw-rwop '.volume_capability.access_mode.mode == "SINGLE_NODE_SINGLE_WRITER"'
check "readOnly is not sent to a driver without PUBLISH_READONLY" req vol-snmw-ro '(.readonly // false) == false'
att_stop b || fail "attacher exit status"

# --dummy: no socket at all.
mk_pv pv-d csi/dummy h-d
mk_va va-dummy csi/dummy node-1 pv-d
mk_va va-notdummy other.io node-1 pv-d
att_start d "$T/nonexistent.sock" --dummy
wait_for "dummy VA attached" 20 va_attached va-dummy
check "dummy adds no finalizer" eq "$(va_field va-dummy '.metadata.finalizers // [] | length')" 0
check "dummy leaves other attachers' VAs alone" eq "$(va_field va-notdummy '.status.attached // false')" false
check "dummy adds no PV finalizer" eq "$(kc get pv pv-d -o json | jq '.metadata.finalizers // [] | length')" 0
att_stop d || fail "dummy attacher exit status"

# Trivial handler: a node-only loop plugin has no controller service.
lp_start node-1 --mode node
mk_csinode node-2 loop.kcsi.io node-2 2>/dev/null
mk_pv pv-t loop.kcsi.io some-handle
mk_va va-trivial loop.kcsi.io node-1 pv-t
att_start t "$T/lp.sock" -v 2
wait_for "trivial VA attached" 20 va_attached va-trivial
check "trivial handler was chosen" grep -q "does not support Plugin Controller Service, using trivial handler" "$T/t.log"
check "trivial adds no VA finalizer" eq "$(va_field va-trivial '.metadata.finalizers // [] | length')" 0
check "trivial adds no PV finalizer" eq "$(kc get pv pv-t -o json | jq '.metadata.finalizers // [] | length')" 0
kc delete volumeattachment va-trivial --wait=false >/dev/null
wait_for "trivial VA deleted at once (no finalizer)" 10 va_gone va-trivial
att_stop t || fail "trivial attacher exit status"
att_finish
