#!/bin/bash
# e2e: csi-attacher against hostile objects and a hostile system (issue 16).
#  - a CSINode whose spec.drivers holds an entry without `name`: skipped with a log line, the
#    attacher keeps running (it used to SIGSEGV, and again at every restart);
#  - a volume handle holding a newline and terminal escapes: the driver's error that quotes it
#    is logged on one line, escaped; no line of the log can be forged;
#  - worker threads the system refuses: workers start as keys arrive, so a refused one is logged
#    once and the running ones take its keys; every VolumeAttachment is still handled, and
#    SIGTERM still ends the attacher cleanly.
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
DRV=loop.kcsi.io

emu_start
lp_start node-1
mk_node node-1 "{\"$DRV\":\"node-1\"}"
echo '{"apiVersion":"storage.k8s.io/v1","kind":"CSINode","metadata":{"name":"node-1"},
  "spec":{"drivers":[{"nodeID":"ghost"},{"name":"'$DRV'","nodeID":"node-1"}]}}' | kc create -f - >/dev/null
V=$(lp_volume vol-ok)
mk_pv pv-ok $DRV "$V"
mk_va va-ok $DRV node-1 pv-ok
FORGED=$'vol-x\nE1122 10:00:00.000000       1 forged.go:1] forged line\x1b[2J\x1b]0;pwned\x07'
mk_pv pv-forge $DRV "$FORGED"
mk_va va-forge $DRV node-1 pv-forge
att_start a "$T/lp.sock" -v 5
wait_for "va-ok attached (node ID from the Node annotation)" 20 va_attached va-ok
check "the bad CSINode was logged and skipped" grep -q 'Skipping undecodable CSINode.*spec.drivers\[0\] has no name' "$T/a.log"
wait_for "va-forge fails (the driver does not know the volume)" 20 va_has_error va-forge attachError
check "attacher still running" kill -0 "${ATT_PIDS[a]}"
check "every log line is a klog line" bash -c "! grep -avE '^[IWEF][0-9]{4} [0-9:.]{15} +[0-9]+ [^ ]+:[0-9]+\] ' '$T/a.log'"
check "no terminal escape reached the log" bash -c "! grep -qa $'\x1b' '$T/a.log'"
check "the handle is logged escaped" grep -qF 'vol-x\nE1122 10:00:00.000000       1 forged.go:1] forged line\x1b[2J' "$T/a.log"
att_stop a || fail "attacher exit status"

# Worker threads the system refuses: RLIMIT_NPROC, which binds only an unprivileged user (root
# ignores it), so this attacher runs as nobody with read access to the kubeconfig and socket.
# 16 threads leave room for the fixed ones and a few workers of the 100 asked for.
jq -n '{apiVersion: "v1", kind: "List", items: [range(30) | tostring as $i |
	{apiVersion: "v1", kind: "PersistentVolume", metadata: {name: ("pv-many-" + $i)},
	 spec: {capacity: {storage: "64Mi"}, accessModes: ["ReadWriteOnce"],
	        csi: {driver: "'$DRV'", volumeHandle: ("no-such-volume-" + $i)}}},
	{apiVersion: "storage.k8s.io/v1", kind: "VolumeAttachment", metadata: {name: ("va-many-" + $i)},
	 spec: {attacher: "'$DRV'", nodeName: "node-1", source: {persistentVolumeName: ("pv-many-" + $i)}}}]}' |
	kc create -f - >/dev/null
chmod 755 "$T"
chmod 644 "$KC"
chmod 666 "$T/lp.sock"
( ulimit -u 16; exec setpriv --reuid=65534 --regid=65534 --clear-groups \
	"$KCSI_BIN/csi-attacher" --csi-address "unix://$T/lp.sock" --kubeconfig "$KC" \
	--worker-threads 100 --kube-api-qps 1000 --kube-api-burst 1000 ) >"$T/threads.log" 2>&1 &
pid=$!
all_failed() {
	[ "$(kc get volumeattachments -o json | jq '[.items[] | select(.metadata.name | startswith("va-many-"))
		| select(.status.attachError.message // "" | length > 0)] | length')" = 30 ]
}
wait_for "all 30 VolumeAttachments handled (each gets the driver's attachError)" 60 all_failed
check "the refused threads were logged (once per queue)" test "$(grep -c 'Cannot start worker thread .* Resource temporarily unavailable; going on with' "$T/threads.log")" -ge 1
check "the attacher still runs" kill -0 $pid
kill -TERM $pid 2>/dev/null
rc=0
wait $pid || rc=$?
check "SIGTERM ends it with exit 0 (got $rc)" eq "$rc" 0
att_finish
