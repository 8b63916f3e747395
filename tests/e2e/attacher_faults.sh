#!/bin/bash
# e2e: csi-attacher converges while the API server misbehaves: 500s and 409s on writes, 429s with
# Retry-After on everything, watches ended every few seconds and all closed at once. In the end
# every VolumeAttachment that exists is attached and published by the driver, every deleted one is
# unpublished, and the emulator's counters prove each fault was injected.
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
DRV=loop.kcsi.io
N=16

emu_start
lp_start node-1
mk_node node-1
mk_csinode node-1 $DRV node-1
for i in $(seq 1 $N); do
	V=$(lp_volume "vol-$i")
	echo "$V" >"$T/vol-$i"
	mk_pv "pv-$i" $DRV "$V"
done
req POST /emulator/faults '{"reset":true,"watchMaxSeconds":3,"rules":[
  {"verb":"patch","resource":"volumeattachments","code":500,"fraction":0.3},
  {"verb":"patch","resource":"persistentvolumes","code":409,"fraction":0.3},
  {"verb":"*","resource":"*","code":429,"fraction":0.1,"retryAfterSeconds":1},
  {"verb":"get","resource":"*","latencyMs":20,"fraction":0.2}]}'
expect_code 200 "set faults"
att_start a "$T/lp.sock" --kube-api-qps 100 --kube-api-burst 200
for i in $(seq 1 $N); do mk_va "va-$i" $DRV node-1 "pv-$i" 2>/dev/null || mk_va "va-$i" $DRV node-1 "pv-$i"; done
for i in $(seq 1 $N); do wait_for "va-$i attached under faults" 60 va_attached "va-$i"; done
req POST /emulator/faults '{"closeWatches":true}'
for i in $(seq 1 $((N / 2))); do kc delete volumeattachment "va-$i" --wait=false >/dev/null 2>&1 ||
	kc delete volumeattachment "va-$i" --wait=false >/dev/null; done
for i in $(seq 1 $((N / 2))); do wait_for "va-$i detached under faults" 60 va_gone "va-$i"; done

req GET /emulator/faults
check "500s were injected" test "$(jqo '[.rules[] | select(.code==500) | .injected] | add')" -gt 0
check "409s were injected" test "$(jqo '[.rules[] | select(.code==409) | .injected] | add')" -gt 0
check "429s were injected" test "$(jqo '[.rules[] | select(.code==429) | .injected] | add')" -gt 0
req POST /emulator/faults '{"reset":true}'

for i in $(seq 1 $N); do
	V=$(cat "$T/vol-$i")
	if [ "$i" -le $((N / 2)) ]; then
		check "vol-$i unpublished after its VA was deleted" lp_not_published "$V" node-1
	else
		check "vol-$i published while its VA exists" lp_published "$V" node-1
		check "va-$i has exactly one finalizer" eq "$(va_field "va-$i" '.metadata.finalizers | length')" 1
	fi
	check "pv-$i has exactly one finalizer" eq "$(kc get pv "pv-$i" -o json | jq '.metadata.finalizers | length')" 1
done
att_stop a || fail "attacher exit status"
att_finish
