#!/bin/bash
# e2e: a demo step that fails stops the demo with its status and leaves nothing behind (issue 34):
# kubectl fails at its Nth call, for several N (before any volume, while the writer pod starts, in
# a command substitution, with the volume attached and mounted), and afterwards no process, loop
# device, mount or folder of the demo is left. (Before the fix the EXIT trap stopped at the
# failed step's already-reaped pid and left the whole `kcsi up` stack running.)
set -u
: "${KCSI_BIN:?}" "${KCSI_SRC:?}"
FAILS=0
fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
# The demo makes its folder in this test's own (TMPDIR=$T): another demo running beside it is
# not counted as this one's leftovers.
T=$(mktemp -d /tmp/kdf.XXXXXX)
trap 'rm -rf "$T"' EXIT
leftovers() {
	echo "procs=$(pgrep -f "$T/kcsi-demo\\." | wc -l) loops=$(losetup -a | grep -cF "$T/kcsi-demo.")" \
		"mounts=$(grep -cF "$T/kcsi-demo." /proc/self/mountinfo) dirs=$(ls -d "$T"/kcsi-demo.* 2>/dev/null | wc -l)"
}

real=$(command -v kubectl) || { echo "FAIL: no kubectl on PATH" >&2; exit 1; }
# kubectl that fails (exit 1) at its $FAIL_AT-th call and runs the real one otherwise
cat >"$T/kubectl" <<EOK
#!/bin/bash
n=\$((\$(cat "$T/calls" 2>/dev/null || echo 0) + 1))
echo \$n >"$T/calls"
if [ \$n -eq "\$FAIL_AT" ]; then echo "kubectl: injected failure at call \$n" >&2; exit 1; fi
exec "$real" "\$@"
EOK
chmod +x "$T/kubectl"

# 1: the first `kubectl get nodes`; 7: `kubectl wait` for the writer pod; 10: the PV's name in
# $(...); 14: `kubectl get node`, with the volume attached to node-1 and mounted in the pod
for n in 1 7 10 14; do
	rm -f "$T/calls"
	TMPDIR=$T FAIL_AT=$n KUBECTL="$T/kubectl" KCSI_BIN="$KCSI_BIN" \
		bash "$KCSI_SRC/scripts/demo-run.sh" >"$T/out.$n" 2>&1
	rc=$?
	[ $rc -eq 1 ] || fail "step $n: demo exited $rc, not 1"
	grep -q "kubectl: injected failure at call $n" "$T/out.$n" || fail "step $n: kubectl was not called $n times"
	grep -q 'demo: a step failed (exit 1); stopping kcsi up' "$T/out.$n" || fail "step $n: no failure message"
	if [ $n -eq 14 ]; then
		grep -qE '^csi-[0-9a-f]{64} ' "$T/out.$n" || fail "step 14: no volume was attached when kubectl failed"
	fi
	for _ in $(seq 1 50); do [ "$(leftovers)" = "procs=0 loops=0 mounts=0 dirs=0" ] && break; sleep 0.1; done
	[ "$(leftovers)" = "procs=0 loops=0 mounts=0 dirs=0" ] || fail "step $n: left behind: $(leftovers)"
	echo "kubectl failing at call $n: exit $rc, $(leftovers), last step: $(grep '^\$ ' "$T/out.$n" | tail -1)"
done
if [ $FAILS -ne 0 ]; then tail -20 "$T/out.14" >&2; exit 1; fi
echo PASS
