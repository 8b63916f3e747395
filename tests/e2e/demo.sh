#!/bin/bash
# e2e: the README's demo (scripts/demo-run.sh: `kcsi up`, then kubectl only) runs to the end, shows
# the file written on node-1 read back on node-2, and leaves no process, loop device, mount or
# folder behind, also when interrupted in the middle.
set -u
: "${KCSI_BIN:?}" "${KCSI_SRC:?}"
FAILS=0
fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
# The demo makes its folder in a folder of this test's own (TMPDIR), so what another demo running
# beside it leaves is not counted as this one's.
D=$(mktemp -d /tmp/kd.XXXXXX)
out=$D/out
trap 'rm -rf "$D"' EXIT
leftovers() {
	echo "procs=$(pgrep -f "$D/kcsi-demo\\." | wc -l) loops=$(losetup -a | grep -cF "$D/kcsi-demo.")" \
		"mounts=$(grep -cF "$D/kcsi-demo." /proc/self/mountinfo) dirs=$(ls -d "$D"/kcsi-demo.* 2>/dev/null | wc -l)"
}

TMPDIR=$D KCSI_BIN=$KCSI_BIN bash "$KCSI_SRC/scripts/demo-run.sh" >"$out" 2>&1
rc=$?
[ $rc -eq 0 ] || fail "demo exited $rc"
[ "$(grep -c 'hello from node-1' "$out")" -ge 2 ] || fail "the file written on node-1 was not read back on node-2"
for want in 'kcsi up: ready in' 'Bound' 'Running' 'kcsi up: stopped' 'demo: done'; do
	grep -qF "$want" "$out" || fail "demo output lacks: $want"
done
grep -qE '^csi-[0-9a-f]{64} ' "$out" || fail "no VolumeAttachment shown by kubectl"
grep -qE '^data-snap +true +data ' "$out" || fail "kubectl get volumesnapshot did not show data-snap READYTOUSE true"
grep -qE '^grow +Bound +pvc-[0-9a-f-]+ +640Mi +RWO +kcsi-loop-expandable +kcsi-loop-thick ' "$out" ||
	fail "kubectl get pvc did not show grow at 640Mi with its VolumeAttributesClass"
grep -qE '^demo-group +true ' "$out" || fail "kubectl get volumegroupsnapshot did not show demo-group READYTOUSE true"
# df on the grower's mount, before and after the expansion: the filesystem itself grew
sizes=$(sed 's/\x1b\[[0-9;]*m//g' "$out" | awk '$1 ~ /^\/dev\/loop/ && $6 ~ /pvc-/ {print $2}' | tr '\n' ' ')
read -r before after _ <<<"$sizes"
[ -n "$before" ] && [ -n "$after" ] && [ "${after%M}" -gt "$(( ${before%M} + 200 ))" ] 2>/dev/null ||
	fail "the pod's filesystem did not grow under it (df sizes: $sizes)"
[ "$(leftovers)" = "procs=0 loops=0 mounts=0 dirs=0" ] || fail "left behind after the demo: $(leftovers)"

# Interrupt it while the volume is mounted, as Ctrl-C does to the process group. (env resets
# SIGINT, which bash ignores in a background job, as a terminal's foreground job has it.)
setsid env --default-signal=INT TMPDIR="$D" KCSI_BIN="$KCSI_BIN" bash "$KCSI_SRC/scripts/demo-run.sh" >"$out" 2>&1 &
pid=$!
for _ in $(seq 1 2400); do grep -q '^hello from node-1' "$out" && break; sleep 0.05; done
grep -q '^hello from node-1' "$out" || fail "the demo did not reach the mounted volume"
kill -INT -- "-$pid" 2>/dev/null
wait "$pid"
grep -q 'demo: interrupted' "$out" || fail "the demo did not take Ctrl-C at once"
for _ in $(seq 1 100); do [ "$(leftovers)" = "procs=0 loops=0 mounts=0 dirs=0" ] && break; sleep 0.1; done
[ "$(leftovers)" = "procs=0 loops=0 mounts=0 dirs=0" ] || fail "left behind after Ctrl-C: $(leftovers)"
if [ $FAILS -ne 0 ]; then cat "$out" >&2; exit 1; fi
echo PASS
