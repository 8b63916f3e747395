#!/bin/bash
# e2e (issue 40): csi-attacher after its API server's store went back in time. kube-emulator
# crashes (-9) and comes back on the same port with an empty store, so every resourceVersion the
# attacher's informers hold is past the new store's. Their watches are told "Too large resource
# version" (504, cause ResourceVersionTooLarge) and, as client-go's reflector, they relist: a
# VolumeAttachment made in the new store is attached, and the attacher's log says why it relisted.
# Before, each watch asked again from its stale resourceVersion for ever and the new
# VolumeAttachment was never seen. Prints "RELIST attached=<s>" (seconds after the restart).
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
DRV=testdriver.kcsi.dev
# bookmarks every second: the informers' resourceVersions follow the store's between events
EMU_FLAGS=(--bookmark-interval 1s)

emu_start "${EMU_FLAGS[@]}"
td_start
# csi-testdriver names a volume vol-<name>
for v in 1 2; do "$KCSI_BIN/kcsi" --endpoint "unix://$T/td.sock" controller create-volume "$v" >/dev/null; done
mk_node node-1
mk_csinode node-1 $DRV td-node-1
mk_pv pv-1 $DRV vol-1
mk_va va-1 $DRV node-1 pv-1
att_start a "$T/td.sock" -v 2
wait_for "va-1 attached" 30 va_attached va-1

# 100 writes: the old store's resourceVersion is far past what the new one reaches below
for i in $(seq 1 100); do
	req PATCH /api/v1/persistentvolumes/pv-1 "{\"metadata\":{\"labels\":{\"n\":\"$i\"}}}" \
		application/merge-patch+json
done
expect_code 200 "label pv-1"
OLD_RV=$(curl -s "$S/api/v1/persistentvolumes" | jq -r .metadata.resourceVersion)
sleep 2 # a bookmark brings every informer to OLD_RV

t0=$(date +%s.%N)
emu_crash_restart 0.5 "${EMU_FLAGS[@]}"
mk_node node-1
mk_csinode node-1 $DRV td-node-1
mk_pv pv-2 $DRV vol-2
mk_va va-2 $DRV node-1 pv-2
NEW_RV=$(curl -s "$S/api/v1/persistentvolumes" | jq -r .metadata.resourceVersion)
check "the new store is behind the old one ($NEW_RV < $OLD_RV)" test "$NEW_RV" -lt "$OLD_RV"
if wait_for "va-2 (made in the new store) attached" 60 va_attached va-2; then
	echo "RELIST attached=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')"
fi
check "the driver published vol-2" bash -c "grep '^ControllerPublishVolume ' '$T/td.rec' | cut -d' ' -f2- | jq -e -s 'map(select(.volume_id==\"vol-2\")) | length > 0'"
check "the attacher said why it relisted" grep -q 'Too large resource version' "$T/a.log"
check "va-2 has the attacher's finalizer" eq "$(va_field va-2 '.metadata.finalizers | join(",")')" external-attacher/testdriver-kcsi-dev
# va-1 and pv-1 went with the old store: their deletes reach the attacher only through the relist
# (client-go hands such a delete over as a tombstone, which crashed csi-attacher before v4.13).
# Nothing is left to detach, as upstream: the attacher lives on and never unpublishes vol-1.
check "the attacher lives on after deletes learned from the relist (va-1, pv-1)" \
	kill -0 "${ATT_PIDS[a]}"
check "vol-1 (va-1's, gone with the store) is not unpublished" bash -c \
	"! grep -q '^ControllerUnpublishVolume .*\"vol-1\"' '$T/td.rec'"
check "pv-2 has the attacher's finalizer" bash -c "kubectl --kubeconfig '$KC' get pv pv-2 -o json | jq -e '.metadata.finalizers | index(\"external-attacher/testdriver-kcsi-dev\")'"

# and it keeps watching the new store: a detach
kc delete volumeattachment va-2 --wait=false >/dev/null
wait_for "va-2 detached and gone" 30 va_gone va-2
att_stop a || fail "attacher exit status"
att_finish
