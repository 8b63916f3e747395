#!/bin/bash
# e2e: one release, one deletion. Claims of a Delete class are released and each volume must get
# exactly one DeleteVolume and its PV exactly one DELETE, however the PV's finalizers move while
# csi-provisioner removes its own (the fault bed saw three of each within 35 ms: the attacher and
# the pv-protection controller had removed theirs after the provisioner read the PV, its merge
# patch of the whole list put them back, the API server refused it, and the retry deleted again).
# csi-testdriver records the DeleteVolumes; kube-emulator's fault rules count the PV DELETEs (a
# 1 ms delay rule's "injected") and make the race certain:
#   1. each PV carries a second finalizer; the provisioner's finalizer PATCHes are held by the
#      emulator until the test releases them, and meanwhile the other finalizer goes (by PUT,
#      which the rule does not hold);
#   2. the finalizer PATCH fails once per PV (500): the retry removes the finalizer only.
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
DRV=testdriver.kcsi.dev
. "$(dirname "$0")/lib_provisioner.sh"
HOLD=test.kcsi.dev/hold
PF=external-provisioner.volume.kubernetes.io/finalizer
N=3

# PUT of the PV with its finalizers replaced (jq filter on .metadata.finalizers); retried on 409.
put_fins() {
	local pv=$1 filter=$2 i
	for i in 1 2 3 4 5; do
		pv_json "$pv" | jq -c ".metadata.finalizers |= ($filter)" >"$T/put.json"
		[ -s "$T/put.json" ] || return 1
		req PUT "/api/v1/persistentvolumes/$pv" "$(cat "$T/put.json")"
		[ "$CODE" = 200 ] && return 0
		[ "$CODE" = 409 ] || break
	done
	fail "PUT of $pv's finalizers: HTTP $CODE: $(head -c 300 "$T/out")"
}
# release_put PVC: as release, with the Released phase written by PUT (the held rule is PATCH)
release_put() {
	local pv
	pv=$(pv_of "$1")
	kc delete pvc "$1" -n default --wait=false >/dev/null
	pv_json "$pv" | jq -c '.status.phase = "Released"' >"$T/put.json"
	req PUT "/api/v1/persistentvolumes/$pv/status" "$(cat "$T/put.json")"
	expect_code 200 "Released $pv"
}
deleting() { [ "$(pv_field "$1" '.metadata.deletionTimestamp // ""')" != "" ]; }
pv_gone() { ! pv_exists "$1"; }
pv_deletes() { curl -s "$S/emulator/faults" | jq -r '[.rules[] | select(.verb=="delete") | .injected] | add // 0'; }
delete_volumes() { grep -c "^DeleteVolume .*\"$1\"" "$T/td.rec"; }
faults() {
	req POST /emulator/faults "$1"
	expect_code 200 "fault rules"
}

# provision NAME...: claims of class del, bound, each PV with $HOLD beside the provisioner's
provision() {
	local c pv
	for c in "$@"; do mk_pvc "$c" del; done
	for c in "$@"; do
		pv=$(pv_of "$c")
		wait_for "PV of claim $c" 20 pv_exists "$pv" || continue
		bind "$c"
		put_fins "$pv" ". + [\"$HOLD\"]"
	done
}
# one_each ROUND NAME...: every claim's volume deleted once and its PV DELETEd once
one_each() {
	local round=$1 c pv vid
	shift
	for c in "$@"; do
		pv=$(cat "$T/pv.$c")
		vid=$(cat "$T/vid.$c")
		wait_for "$round: $pv gone" 20 pv_gone "$pv"
		check "$round: one DeleteVolume of $c's volume" eq "$(delete_volumes "$vid")" 1
	done
	check "$round: one DELETE per PV" eq "$(pv_deletes)" "$#"
}
remember() {
	local c
	for c in "$@"; do
		pv_of "$c" >"$T/pv.$c"
		pv_field "$(cat "$T/pv.$c")" .spec.csi.volumeHandle >"$T/vid.$c"
	done
}

emu_start
topo_node n1
mk_sc del
td_start
prov_start p "$T/td.sock" -v 4

# 1. Another finalizer leaves while the provisioner's removal is on its way.
CLAIMS=()
for i in $(seq 1 $N); do CLAIMS+=("a$i"); done
provision "${CLAIMS[@]}"
remember "${CLAIMS[@]}"
faults "{\"reset\":true,\"rules\":[{\"verb\":\"patch\",\"resource\":\"persistentvolumes\",\"latencyMs\":60000,\"times\":$N},
	{\"verb\":\"delete\",\"resource\":\"persistentvolumes\",\"latencyMs\":1}]}"
for c in "${CLAIMS[@]}"; do release_put "$c"; done
for c in "${CLAIMS[@]}"; do
	pv=$(cat "$T/pv.$c")
	wait_for "$pv being deleted" 20 deleting "$pv" && put_fins "$pv" "map(select(. != \"$HOLD\"))"
	check "the race: $HOLD left $pv before the provisioner's finalizer" \
		eq "$(jq -r '.metadata.finalizers | join(",")' "$T/put.json")" "$PF"
done
# A rule delays the first $N matching requests and "release" ends only the delays in progress:
# a PATCH sent after it would be held its whole 60 s (ASan CI saw a PV still there 20 s later and
# a provisioner whose shutdown waited for that PATCH), so release once all $N are held.
patches_held() { [ "$(curl -s "$S/emulator/faults" | jq -r '[.rules[] | select(.verb=="patch") | .injected] | add // 0')" = "$1" ]; }
wait_for "the provisioner's $N finalizer PATCHes held" 20 patches_held "$N"
faults '{"release":true}' # the held finalizer PATCHes go on now
one_each "finalizer race" "${CLAIMS[@]}"
check "no refused finalizer removal" bash -c "! grep -q 'no new finalizers can be added' '$T/p.log'"

# 2. The finalizer removal fails once: only the removal is tried again.
CLAIMS=()
for i in $(seq 1 $N); do CLAIMS+=("b$i"); done
faults '{"reset":true}'
provision "${CLAIMS[@]}"
remember "${CLAIMS[@]}"
for c in "${CLAIMS[@]}"; do put_fins "$(cat "$T/pv.$c")" "map(select(. != \"$HOLD\"))"; done
faults "{\"reset\":true,\"rules\":[{\"verb\":\"patch\",\"resource\":\"persistentvolumes\",\"code\":500,\"times\":$N},
	{\"verb\":\"delete\",\"resource\":\"persistentvolumes\",\"latencyMs\":1}]}"
for c in "${CLAIMS[@]}"; do release_put "$c"; done
one_each "failed removal" "${CLAIMS[@]}"
check "the failures were met" eq "$(curl -s "$S/emulator/faults" | jq -r .counters.errors500)" "$N"
check "... and logged" grep -q "Failed to remove finalizer for persistentvolume" "$T/p.log"

rc=0
att_stop p || rc=$?
check "SIGTERM exits 0" eq "$rc" 0
td_stop
check "no sanitizer report" bash -c "! grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' '$T/p.log'"
att_finish
