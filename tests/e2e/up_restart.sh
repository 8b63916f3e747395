#!/bin/bash
# e2e (issue 40): `kcsi up` brings a killed core component back whole.
#  1. kube-emulator killed with SIGKILL (the CSIDriver and node-1's CSINode deleted just before):
#     the API answers again within 10 s on the SAME URL, with the claim, its PV, the pod, the
#     Node; the CSIDriver and the CSINode are made again; the pod's volume stayed mounted; the
#     resourceVersion counter went on from where it was (no watch sees the past); a new claim and
#     pod get provisioned, attached, mounted and Running (every component reconnected); kcsi up
#     still runs and says the emulator is back; kill -USR1's status table shows the new PID on
#     kube-emulator's row and the same URL.
#  2. kcsi-controller-manager killed with SIGKILL: restarted, and another new claim and pod get
#     Running.
#  3. kube-emulator killed while another process grabs its port: kcsi up stops the whole stack,
#     exits 1 with a message naming the address and why, and leaves no process, mount or loop
#     device behind.
# Before the fix kube-emulator came back on a new port with an empty store, every component kept
# calling the old port, and kcsi up looked healthy.
set -u
: "${KCSI_BIN:?}" "${KCSI_SRC:?}"
. "$(dirname "$0")/lib_proc.sh" up-restart
. "$(dirname "$0")/lib_up.sh"
kubectl=${KUBECTL:-kubectl}
grabber=
_prev=$(trap -p EXIT | sed "s/^trap -- '\(.*\)' EXIT\$/\1/")
trap '[ -n "$grabber" ] && kill "$grabber" 2>/dev/null; release_below $T; '"$_prev" EXIT
d=$T/stack
leftovers() {
	echo "procs=$(pgrep -f -- "$d/" | wc -l) loops=$(losetup -a | grep -cF "$T/")" \
		"mounts=$(grep -cF " $T/" /proc/self/mountinfo)"
}
emu_pid() { pgrep -f -- "kube-emulator --listen .*$d/kubeconfig"; }
cm_pid() { pgrep -f -- "kcsi-controller-manager --kubeconfig $d/"; }
api_answers() { $kubectl --request-timeout=1s get --raw /readyz; }
# pair NAME: a claim NAME and a pod NAME on node-1 that mounts it
pair() {
	sed "s/name: data/name: $1/" "$KCSI_SRC/examples/pvc-filesystem.yaml" | $kubectl apply -f - >/dev/null &&
		sed -e "s/name: writer/name: $1/" -e "s/claimName: data/claimName: $1/" \
			"$KCSI_SRC/examples/pod-writer.yaml" | $kubectl apply -f - >/dev/null
}
mounted() {
	local pv uid
	pv=$($kubectl get pvc "$1" -o jsonpath='{.spec.volumeName}')
	uid=$($kubectl get pod "$1" -o jsonpath='{.metadata.uid}')
	[ -n "$pv" ] && [ -n "$uid" ] &&
		mountpoint -q "$d/nodes/node-1/kubelet/pods/$uid/volumes/kubernetes.io~csi/$pv/mount"
}
# running NAME WHAT: the pod NAME gets Running with its volume mounted within 60 s
running() {
	if wait_for 60 phase_is "pod/$1" Running && mounted "$1"; then
		return 0
	fi
	fail "$2: pod/$1 not Running with its volume mounted: $($kubectl get pod "$1" -o jsonpath='{.status.phase}') pvc $($kubectl get pvc "$1" -o jsonpath='{.status.phase}')"
	# what each component said last: the failure is theirs to explain
	$kubectl get volumeattachments -o wide >&2
	for f in "$d"/logs/*.log; do
		echo "--- $f" >&2
		tail -n 20 "$f" >&2
	done
	return 1
}
list_rv() { $kubectl get --raw /api/v1/namespaces/default/configmaps | jq -r .metadata.resourceVersion; }

start_up "$d" --nodes 1 || exit 1
export KUBECONFIG=$d/kubeconfig
url=$(awk '/server:/ {print $2}' "$KUBECONFIG")
$kubectl apply -f "$KCSI_SRC/examples/storageclass-wffc.yaml" >/dev/null || fail "kubectl apply of the StorageClass"
pair one || fail "creating claim and pod one"
running one "before any kill"

# ---- 1. kube-emulator killed ----
$kubectl delete csidriver loop.kcsi.io >/dev/null || fail "deleting the CSIDriver"
$kubectl delete csinode node-1 >/dev/null || fail "deleting CSINode node-1"
rv_before=$(list_rv)
pid=$(emu_pid)
[ -n "$pid" ] || fail "no kube-emulator process"
t0=$(date +%s%N)
kill -KILL "$pid"
if wait_for 10 api_answers; then
	echo "the API answered again $((($(date +%s%N) - t0) / 1000000)) ms after kill -9"
else
	fail "the API does not answer on $url within 10 s of kill -9"
fi
[ "$(awk '/server:/ {print $2}' "$KUBECONFIG")" = "$url" ] || fail "the kubeconfig's URL changed"
[ "$(emu_pid)" != "$pid" ] || fail "kube-emulator was not restarted"
[ "$($kubectl get pvc one -o jsonpath='{.status.phase}')" = Bound ] || fail "claim one is not Bound after the restart"
pv=$($kubectl get pvc one -o jsonpath='{.spec.volumeName}')
[ -n "$pv" ] && $kubectl get pv "$pv" >/dev/null || fail "the PV of claim one is gone after the restart"
phase_is pod/one Running || fail "pod one is not Running after the restart"
$kubectl get node node-1 >/dev/null || fail "Node node-1 is gone after the restart"
wait_for 10 $kubectl get csidriver loop.kcsi.io || fail "the CSIDriver was not made again"
has_driver() { [ "$($kubectl get csinode node-1 -o jsonpath='{.spec.drivers[0].name}')" = loop.kcsi.io ]; }
wait_for 20 has_driver || fail "CSINode node-1 with the driver was not made again"
mounted one || fail "the volume of pod one is no longer mounted"
rv_after=$(list_rv)
[ -n "$rv_before" ] && [ "$rv_after" -ge "$rv_before" ] ||
	fail "the resourceVersion went back in time: $rv_before before the kill, $rv_after after"
grep -q "kcsi up: kube-emulator is back at $url with its objects; made again: CSIDriver loop.kcsi.io" "$d.out" ||
	fail "kcsi up did not say the emulator is back and what it made again"
pair two || fail "creating claim and pod two after the emulator's restart"
running two "after kube-emulator's restart"
kill -0 "$up_pid" 2>/dev/null || fail "kcsi up is gone after kube-emulator's restart"
# kill -USR1's table: kube-emulator's row with its new PID and the same URL
emu_row() {
	awk -v u="$url" -v p="$(emu_pid)" '$1 == "kube-emulator" && $3 == p && $NF == u' "$d.out" |
		grep -q .
}
kill -USR1 "$up_pid"
wait_for 5 emu_row ||
	fail "after the restart the status table does not show kube-emulator's new PID and $url: $(grep '^ *kube-emulator ' "$d.out" | tail -1)"

# ---- 2. kcsi-controller-manager killed ----
pid=$(cm_pid)
[ -n "$pid" ] || fail "no kcsi-controller-manager process"
kill -KILL "$pid"
new_cm() { p=$(cm_pid); [ -n "$p" ] && [ "$p" != "$pid" ]; }
wait_for 15 new_cm || fail "kcsi-controller-manager was not restarted"
pair three || fail "creating claim and pod three after the controller-manager's restart"
running three "after kcsi-controller-manager's restart"
kill -0 "$up_pid" 2>/dev/null || fail "kcsi up is gone after kcsi-controller-manager's restart"

# ---- 3. the port taken while kube-emulator is down ----
# The grabber is ready (python started) before the kill and then binds within milliseconds of the
# port's release: kcsi up restarts kube-emulator a second or two later, and a python3 started
# only after the kill took longer than that on a loaded machine.
port=${url##*:}
pid=$(emu_pid)
python3 -c '
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
open(sys.argv[2] + ".ready", "w").write("ready\n")
end = time.time() + 10
while True:
    try:
        s.bind(("127.0.0.1", int(sys.argv[1])))
        break
    except OSError:
        if time.time() > end:
            sys.exit(1)
        time.sleep(0.005)
s.listen(1)
open(sys.argv[2], "w").write("bound\n")
time.sleep(120)
' "$port" "$T/grabbed" &
grabber=$!
wait_for 10 test -s "$T/grabbed.ready" || fail "the port grabber did not start"
kill -KILL "$pid"
wait_for 10 test -s "$T/grabbed" || fail "the test could not take port $port"
for _ in $(seq 1 300); do kill -0 "$up_pid" 2>/dev/null || break; sleep 0.05; done
if kill -0 "$up_pid" 2>/dev/null; then
	fail "kcsi up still runs 15 s after its kube-emulator's port was taken"
	stop_up
else
	wait "$up_pid"; rc=$?
	up_pid=
	[ $rc = 1 ] || fail "kcsi up exited $rc when its port was taken (want 1)"
fi
grep -q "kcsi up: kube-emulator exited with status 3: it cannot listen on 127.0.0.1:$port again, the address every component's kubeconfig names: another process holds that port; stopping the whole stack" "$d.out" ||
	fail "no message naming the port and why"
grep -q "kcsi up: stopped" "$d.out" || fail "kcsi up did not stop in order"
[ "$(leftovers)" = "procs=0 loops=0 mounts=0" ] || fail "left behind: $(leftovers)"
kill "$grabber" 2>/dev/null
wait "$grabber" 2>/dev/null
grabber=

if [ $FAILS -ne 0 ]; then
	tail -n 80 "$d.out" >&2
	exit 1
fi
echo PASS
