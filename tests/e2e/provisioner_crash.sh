#!/bin/bash
# e2e (SLOW): kill -9 of csi-provisioner at random moments during 200 provisions and then 200
# deletions. At the end every claim has exactly one PV, the driver holds exactly those volumes
# (ListVolumes), and after the deletions no PV (and so no PV finalizer) and no volume is left.
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
DRV=testdriver.kcsi.dev
. "$(dirname "$0")/lib_provisioner.sh"
N=${N:-200}

emu_start
topo_node n1
td_start --threads 8
mk_sc std
# churn COND: restart the provisioner and kill -9 it after a random 0.2-1.2 s until COND holds.
churn() {
	local kills=0 end=$((SECONDS + 150))
	while ! "$@"; do
		[ $SECONDS -lt $end ] || { fail "churn did not converge: $*"; return 1; }
		prov_start p "$T/td.sock" --worker-threads 16 --kube-api-qps 1000 --kube-api-burst 1000
		sleep "$(awk -v r=$RANDOM 'BEGIN{printf "%.2f", 0.2 + (r % 100) / 100}')"
		kill -KILL "${ATT_PIDS[p]}" 2>/dev/null; wait "${ATT_PIDS[p]}" 2>/dev/null; unset "ATT_PIDS[p]"
		kills=$((kills + 1))
	done
	echo "  converged after $kills kill -9"
}
npv() { kc get pv -o json | jq '.items | length'; }
all_pvs() { [ "$(npv)" -ge "$N" ]; }
no_pvs() { [ "$(npv)" -eq 0 ]; }

for i in $(seq 1 "$N"); do printf 'c%03d\n' "$i"; done >"$T/claims"
while read -r c; do
	jq -n --arg n "$c" --arg d "$DRV" '{apiVersion:"v1",kind:"PersistentVolumeClaim",
	  metadata:{name:$n,namespace:"default",annotations:{"volume.kubernetes.io/storage-provisioner":$d}},
	  spec:{storageClassName:"std",accessModes:["ReadWriteOnce"],resources:{requests:{storage:"1Mi"}}}}'
done <"$T/claims" | jq -s '{apiVersion:"v1",kind:"List",items:.}' | kc create -f - >/dev/null

churn all_pvs
prov_start p "$T/td.sock"
sleep 2 # a last, undisturbed pass
kc get pv -o json >"$T/pvs.json"
kc get pvc -n default -o json >"$T/pvcs.json"
check "exactly $N PVs" eq "$(jq '.items | length' "$T/pvs.json")" "$N"
check "every claim has exactly one PV, named after its UID" eq \
	"$(jq -r '.items[] | "pvc-\(.metadata.uid)"' "$T/pvcs.json" | sort | tr '\n' ' ')" \
	"$(jq -r '.items[].metadata.name' "$T/pvs.json" | sort | tr '\n' ' ')"
check "every PV's claimRef matches its claim" eq \
	"$(jq -r '.items[] | select(.metadata.name != "pvc-\(.spec.claimRef.uid)")' "$T/pvs.json" | wc -l)" 0
check "the driver holds exactly the PVs' volumes" eq "$(td_volumes | sort | tr '\n' ' ')" \
	"$(jq -r '.items[].spec.csi.volumeHandle' "$T/pvs.json" | sort | tr '\n' ' ')"
att_stop p

# The binder's part, then deletions under kill -9.
# (the PV names from pvcs.json: a kubectl run per claim would be 200 × 0.2 s of CPU)
while read -r c pv; do bind "$c" "$pv"; done < <(jq -r '.items[] | "\(.metadata.name) pvc-\(.metadata.uid)"' "$T/pvcs.json")
kc delete pvc -n default --all --wait=false >/dev/null
for pv in $(jq -r '.items[].metadata.name' "$T/pvs.json"); do
	status_patch "/api/v1/persistentvolumes/$pv" '{"status":{"phase":"Released"}}'
done
churn no_pvs
check "no PV left (so no PV finalizer left)" eq "$(npv)" 0
check "the driver holds no volume" eq "$(td_volumes | wc -l)" 0
att_finish
