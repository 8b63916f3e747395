#!/bin/bash
# e2e (SLOW): kill -9 of csi-resizer at random moments while 100 claims grow 100Mi -> 200Mi and
# then 200Mi -> 300Mi. At the end every claim's capacity, its PV and the driver's volume are at
# the requested size, and every ControllerExpandVolume the driver saw asked for one of the sizes
# the claim requested, in order (a repeated call after a kill asks the same size again:
# idempotent).
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
DRV=testdriver.kcsi.dev
. "$(dirname "$0")/lib_provisioner.sh"
. "$(dirname "$0")/lib_resizer.sh"
N=${N:-100}

emu_start
# Each call takes 100 ms and 4 workers run, so a round takes seconds and kills land mid-call.
td_start --threads 8 --node-expansion-required=false --slow ControllerExpandVolume=100ms
mk_sc grow '{"allowVolumeExpansion":true}'

# churn COND: restart the resizer and kill -9 it after a random 0.2-1.2 s until COND holds.
churn() {
	local kills=0 end=$((SECONDS + 150))
	while ! "$@"; do
		[ $SECONDS -lt $end ] || { fail "churn did not converge: $*"; return 1; }
		rsz_start r "$T/td.sock" --workers 4 --kube-api-qps 1000 --kube-api-burst 1000
		sleep "$(awk -v r=$RANDOM 'BEGIN{printf "%.2f", 0.2 + (r % 100) / 100}')"
		kill -KILL "${ATT_PIDS[r]}" 2>/dev/null; wait "${ATT_PIDS[r]}" 2>/dev/null; unset "ATT_PIDS[r]"
		kills=$((kills + 1))
	done
	echo "  converged after $kills kill -9"
}
# all_at SIZE: every claim's status.capacity is SIZE.
all_at() {
	[ "$(kc get pvc -n default -o json | jq --arg s "$1" '[.items[] | select(.status.capacity.storage == $s)] | length')" -eq "$N" ]
}

for i in $(seq 1 "$N"); do printf 'k%03d\n' "$i"; done >"$T/claims"
while read -r c; do
	jq -n --arg n "$c" '{apiVersion:"v1",kind:"PersistentVolumeClaim",metadata:{name:$n,namespace:"default"},
	  spec:{storageClassName:"grow",accessModes:["ReadWriteOnce"],volumeName:("pv-" + $n),
	        resources:{requests:{storage:"100Mi"}}}}'
done <"$T/claims" | jq -s '{apiVersion:"v1",kind:"List",items:.}' | kc create -f - >/dev/null
kc get pvc -n default -o json | jq --arg d "$DRV" '{apiVersion:"v1",kind:"List",items:[.items[] | {
	apiVersion:"v1",kind:"PersistentVolume",metadata:{name:("pv-" + .metadata.name)},
	spec:{capacity:{storage:"100Mi"},accessModes:["ReadWriteOnce"],storageClassName:"grow",
	      claimRef:{namespace:"default",name:.metadata.name,uid:.metadata.uid},
	      csi:{driver:$d,volumeHandle:("h-" + .metadata.name)}}}]}' | kc create -f - >/dev/null
while read -r c; do
	status_patch "/api/v1/namespaces/default/persistentvolumeclaims/$c" \
		'{"status":{"phase":"Bound","capacity":{"storage":"100Mi"}}}'
done <"$T/claims"

for size in 200Mi 300Mi; do
	while read -r c; do resize "$c" "$size"; done <"$T/claims"
	churn all_at "$size"
done
rsz_start r "$T/td.sock"
sleep 2 # a last, undisturbed pass
kc get pv -o json >"$T/pvs.json"
check "every PV is 300Mi" eq "$(jq '[.items[] | select(.spec.capacity.storage == "300Mi")] | length' "$T/pvs.json")" "$N"
check "every claim is 300Mi" all_at 300Mi
check "no claim left with a resize status" eq \
	"$(kc get pvc -n default -o json | jq '[.items[] | select(.status.allocatedResourceStatuses.storage)] | length')" 0
# Per volume, the sizes asked, collapsed: 200Mi then 300Mi, never another size or order.
grep '^ControllerExpandVolume ' "$T/td.rec" | sed 's/^ControllerExpandVolume //' |
	jq -r '"\(.volume_id) \(.capacity_range.required_bytes)"' >"$T/calls"
check "every volume was asked 200Mi then 300Mi, nothing else" eq \
	"$(awk '{ if ($2 != last[$1]) { seq[$1] = seq[$1] " " $2; last[$1] = $2 } } END { for (v in seq) print seq[v] }' "$T/calls" | sort | uniq -c | awk '{$1=$1; print}')" \
	"$N 209715200 314572800"
echo "  $(wc -l <"$T/calls") ControllerExpandVolume calls for $((2 * N)) expansions"
att_stop r || fail "exit on SIGTERM"
rsz_finish
