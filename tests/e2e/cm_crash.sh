#!/bin/bash
# e2e (SLOW): kill -9 of kcsi-controller-manager at random moments during 100 pod create/delete
# cycles over 3 nodes and 3 ReadWriteOnce volumes, with csi-attacher and kcsi-loopplugin. Each
# restart reads the actual state back (Node.status.volumesAttached, VolumeAttachments). At the
# end, a known set of pods must have exactly their volumes attached (VolumeAttachments and
# volumesAttached), and once they are deleted nothing may stay attached.
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
. "$(dirname "$0")/lib_cm.sh"
DRV=loop.kcsi.io
NODES=(node-1 node-2 node-3)
CYCLES=${CM_CRASH_CYCLES:-100}

emu_start
lp_start node-1
lp_node_start node-2
lp_node_start node-3
declare -A H=()
for n in "${NODES[@]}"; do
	mk_mnode "$n"
	mk_csinode "$n" $DRV "$n"
done
for i in 1 2 3; do
	H[$i]=$(lp_volume "vol-$i")
	mk_pv "pv-$i" $DRV "${H[$i]}"
	mk_bound_claim "claim-$i" "pv-$i"
done
att_start att "$T/lp.sock"
gen=0
# nodelifecycle off: the script's nodes post no heartbeats (they would turn Unknown after 50 s).
cm_up() { gen=$((gen + 1)); cm_start "cm$gen" --controllers '*,-nodelifecycle' -v 2; }
cm_up

RANDOM=12
alive=()
kills=0
for c in $(seq 1 "$CYCLES"); do
	mk_pod "p-$c" "${NODES[$((RANDOM % 3))]}" "claim-$((RANDOM % 3 + 1))"
	alive+=("p-$c")
	if [ ${#alive[@]} -gt 3 ]; then
		k=$((RANDOM % ${#alive[@]}))
		kc delete pod "${alive[$k]}" --wait=false >/dev/null
		alive=("${alive[@]:0:$k}" "${alive[@]:$((k + 1))}")
	fi
	sleep "0.$((RANDOM % 3))"
	if [ $((RANDOM % 8)) -eq 0 ]; then
		cm_kill "cm$gen"
		kills=$((kills + 1))
		[ $((RANDOM % 2)) -eq 0 ] && sleep "0.$((RANDOM % 5))"
		cm_up
	fi
done
echo "cycles=$CYCLES kills=$kills" >&2
for p in "${alive[@]}"; do kc delete pod "$p" --wait=false >/dev/null; done

# The final set: claim-i on node-i.
for i in 1 2 3; do mk_pod "final-$i" "node-$i" "claim-$i"; done
want_vas() {
	local got
	got=$(kc get volumeattachments -o json | jq -r '[.items[] | select(.status.attached == true) | .metadata.name] | sort | join(" ")')
	[ "$got" = "$(for i in 1 2 3; do va_name "${H[$i]}" "node-$i"; done | sort | tr '\n' ' ' | sed 's/ $//')" ] &&
		[ "$(va_count)" = 3 ]
}
wait_for "exactly the final pods' volumes attached" 90 want_vas
for i in 1 2 3; do
	wait_for "node-$i lists exactly its volume" 20 node_exactly "node-$i" "$(uniq "${H[$i]}")"
	check "driver publishes vol-$i on node-$i only" eq "$("$KCSI_BIN/kcsi" --endpoint "unix://$T/lp.sock" -o json controller list-volumes |
		jq -r ".entries[] | select(.volume.volume_id==\"${H[$i]}\") | .status.published_node_ids // [] | join(\",\")")" "node-$i"
done
# One more crash with everything attached, then delete the pods: nothing may stay attached.
cm_kill "cm$gen"
cm_up
for i in 1 2 3; do kc delete pod "final-$i" --wait=false >/dev/null; done
wait_for "no VolumeAttachment left" 60 no_vas
for n in "${NODES[@]}"; do
	wait_for "$n lists nothing attached" 20 node_exactly "$n"
done
cm_stop "cm$gen"
check "SIGTERM exits 0" eq "$?" 0
cm_finish
