#!/bin/bash
# e2e: kill -9 of csi-attacher at random moments during 100 attaches and 100 detaches, with
# restarts; the end state must be exact: every VA attached and published, then after deletion no
# VA, nothing published, no attacher finalizer left on PVs being deleted, all PVs gone.
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
DRV=loop.kcsi.io
N=${ATT_CRASH_N:-100}
NODES=3

emu_start
lp_start node-1
for n in $(seq 2 $NODES); do lp_node_start "node-$n"; done
for n in $(seq 1 $NODES); do mk_node "node-$n"; mk_csinode "node-$n" $DRV "node-$n"; done
# Volumes are created 4 at a time; the objects in one kubectl call.
export KCSI_BIN T
seq 1 $N | xargs -P 4 -I{} sh -c \
	'"$KCSI_BIN/kcsi" --endpoint "unix://$T/lp.sock" -o json controller create-volume vol-{} --cap-bytes 16Mi |
	 jq -r .volume.volume_id >"$T/vol-{}"'
for i in $(seq 1 $N); do
	V=$(cat "$T/vol-$i")
	[ -n "$V" ] || { echo "volume vol-$i was not created" >&2; exit 1; }
	jq -n --arg n "pv-$i" --arg h "$V" '{apiVersion:"v1",kind:"PersistentVolume",metadata:{name:$n},
	  spec:{capacity:{storage:"16Mi"},accessModes:["ReadWriteOnce"],csi:{driver:"loop.kcsi.io",volumeHandle:$h}}}'
	jq -n --arg n "va-$i" --arg pv "pv-$i" --arg node "node-$(( (i % NODES) + 1 ))" '{apiVersion:"storage.k8s.io/v1",
	  kind:"VolumeAttachment",metadata:{name:$n},spec:{attacher:"loop.kcsi.io",nodeName:$node,source:{persistentVolumeName:$pv}}}'
done >"$T/objects.json"
kc create -f "$T/objects.json" >/dev/null

# A modest API rate keeps work in flight when the kill lands.
ATT=(--kube-api-qps 60 --kube-api-burst 10 --worker-threads 4)
chaos() { # kills the attacher at random moments, 6 times
	for round in $(seq 1 6); do
		att_start "run$1-$round" "$T/lp.sock" "${ATT[@]}"
		sleep "0.$((RANDOM % 8 + 2))"
		kill -KILL "${ATT_PIDS[run$1-$round]}"
		wait "${ATT_PIDS[run$1-$round]}" 2>/dev/null
		unset "ATT_PIDS[run$1-$round]"
	done
}
count() { kc get volumeattachments -o json | jq "$1"; }
published_total() {
	"$KCSI_BIN/kcsi" --endpoint "unix://$T/lp.sock" -o json controller list-volumes |
		jq '[.entries[] | .status.published_node_ids // [] | length] | add // 0'
}

chaos attach
echo "info: attached after 6 killed runs: $(count '[.items[] | select(.status.attached == true)] | length')/$N"
att_start final-attach "$T/lp.sock" "${ATT[@]}"
all_attached() { [ "$(count '[.items[] | select(.status.attached == true)] | length')" = "$N" ]; }
wait_for "all $N VAs attached after crashes" 120 all_attached
check "every VA has exactly one finalizer" eq "$(count '[.items[] | select((.metadata.finalizers | length) == 1)] | length')" "$N"
check "the driver publishes exactly $N attachments" eq "$(published_total)" "$N"
kc get volumeattachments -o json >"$T/vas.json"
kc get pv -o json >"$T/pvs.json"
"$KCSI_BIN/kcsi" --endpoint "unix://$T/lp.sock" -o json controller list-volumes >"$T/published.json"
# Every (volume handle, node) of a VA is a (volume, published node) of the driver, and vice versa.
jq -r --slurpfile pvs "$T/pvs.json" '.items[] | .spec.source.persistentVolumeName as $pv |
	($pvs[0].items[] | select(.metadata.name == $pv) | .spec.csi.volumeHandle) + " " + .spec.nodeName' \
	"$T/vas.json" | sort >"$T/want"
jq -r '.entries[] | .volume.volume_id as $v | .status.published_node_ids // [] | .[] | $v + " " + .' \
	"$T/published.json" | sort >"$T/have"
check "the driver publishes exactly what the VAs ask, on the right nodes" cmp -s "$T/want" "$T/have"
check "that is $N attachments" eq "$(wc -l <"$T/want")" "$N"
att_stop final-attach || fail "attacher exit status"

kc delete volumeattachments --all --wait=false >/dev/null
kc delete pv --all --wait=false >/dev/null
chaos detach
echo "info: VAs left after 6 killed runs: $(count '.items | length')/$N"
att_start final-detach "$T/lp.sock" "${ATT[@]}"
no_vas() { [ "$(count '.items | length')" = 0 ]; }
no_pvs() { [ "$(kc get pv -o json | jq '.items | length')" = 0 ]; }
wait_for "all VAs detached and removed after crashes" 120 no_vas
wait_for "all PVs released by the attacher and removed" 60 no_pvs
check "the driver publishes nothing" eq "$(published_total)" 0
att_stop final-detach || fail "attacher exit status"
att_finish
