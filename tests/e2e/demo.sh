#!/bin/bash
# e2e: the README's demo (scripts/demo-run.sh) runs to the end, shows each step with the objects'
# state, and leaves no process, loop device, mount or folder behind, also when interrupted.
set -u
: "${KCSI_BIN:?}" "${KCSI_SRC:?}"
FAILS=0
fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
out=$(mktemp /tmp/kcsi-demo-test.XXXXXX)
trap 'rm -f "$out"' EXIT
leftovers() {
	echo "procs=$(pgrep -f '/tmp/kcsi-demo\.' | wc -l) loops=$(losetup -a | grep -c '/tmp/kcsi-demo\.')" \
		"mounts=$(grep -c '/tmp/kcsi-demo\.' /proc/self/mountinfo) dirs=$(ls -d /tmp/kcsi-demo.* 2>/dev/null | wc -l)"
}
[ "$(leftovers)" = "procs=0 loops=0 mounts=0 dirs=0" ] || { echo "SKIP: another demo is running"; exit 0; }

KCSI_BIN=$KCSI_BIN bash "$KCSI_SRC/scripts/demo-run.sh" >"$out" 2>&1
rc=$?
[ $rc -eq 0 ] || fail "demo exited $rc"
for want in 'attached=true  finalizers=external-attacher/loop-kcsi-io  node-id=demo-node' \
	'VolumeAttachment pv-bd5c744990a724c218762f97f510a4ca59e328e35d47616212eb208208fe17f0' \
	'read back through the staging mount: hello from kcsi' \
	'the VolumeAttachment is gone' 'the PV is gone'; do
	grep -qF "$want" "$out" || fail "demo output lacks: $want"
done
[ "$(leftovers)" = "procs=0 loops=0 mounts=0 dirs=0" ] || fail "left behind after the demo: $(leftovers)"

# Interrupt it in the middle (after the volume is staged), as Ctrl-C does to the process group.
setsid bash -c "KCSI_BIN=$KCSI_BIN exec bash $KCSI_SRC/scripts/demo-run.sh" >"$out" 2>&1 &
pid=$!
for _ in $(seq 1 300); do grep -q 'NodePublishVolume' "$out" && break; sleep 0.02; done
kill -INT -- "-$pid" 2>/dev/null
wait "$pid"
sleep 0.5
[ "$(leftovers)" = "procs=0 loops=0 mounts=0 dirs=0" ] || fail "left behind after Ctrl-C: $(leftovers)"
if [ $FAILS -ne 0 ]; then cat "$out" >&2; exit 1; fi
echo PASS
