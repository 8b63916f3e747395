#!/bin/bash
# e2e (issue 35): kube-apiserver killed (-9) and restarted (etcd keeps the state) in the middle of
# an attach, on one host of the fault bed (tests/e2e/lib_hosts.sh) under kcsi-controller-manager,
# kcsi's csi-attacher and kcsi-node. Measures, from the moment the API server answers /readyz
# again, the time until the VolumeAttachment is attached and until the pod is Running, and
# requires the pod Running within BOUND (10 s; kube-controller-manager v1.37.2 with the same
# stack takes ~3.4 s from the pod's creation, docs/faults.md). Two interleavings:
#   after    the restart comes once the VolumeAttachment exists (faults.sh's apiserver scenario)
#   inflight the controller driver is stopped (SIGSTOP) so that ControllerPublishVolume is still
#            in flight when the API server dies; it is resumed while the API server is down, so
#            the attacher's status write fails and must be retried
# Prints "APIRESTART case=.. attached=.. running=.." (seconds after the API server is back).
set -u
: "${KCSI_BIN:?}" "${KCSI_SRC:?}"
. "$(dirname "$0")/lib_proc.sh" apirestart
. "$(dirname "$0")/lib_realcp.sh"
. "$(dirname "$0")/lib_hosts.sh"
realcp_missing_peers && exit 1
trap 'exit 143' TERM INT
BOUND=${BOUND:-10}
t_start=$SECONDS
bed_up kcsi 1 || { fail "the bed did not come up"; exit 1; }
echo "apirestart: bed up in $((SECONDS - t_start)) s"

secs() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.1f", b - a}'; }
va_attached() { # CLAIM HOST: its VolumeAttachment to HOST has status.attached
	local pv
	pv=$(K get pvc "$1" -o jsonpath='{.spec.volumeName}')
	K get volumeattachments -o json | jq -e --arg pv "$pv" --arg n "$2" \
		'[.items[] | select(.spec.source.persistentVolumeName == $pv and .spec.nodeName == $n and .status.attached == true)] | length > 0' >/dev/null
}
# measure CASE CLAIM POD T_UP: polls both conditions from T_UP on, prints and checks the figures
measure() {
	local c=$1 claim=$2 p=$3 t_up=$4 t_att="" t_run="" end=$((SECONDS + 60))
	while [ $SECONDS -lt $end ] && [ -z "$t_run" ]; do
		[ -z "$t_att" ] && va_attached "$claim" host-1 && t_att=$(now)
		[ -n "$t_att" ] && pod_running "$p" && t_run=$(now)
		sleep 0.05
	done
	[ -n "$t_run" ] || { fail "$c: $p not Running 60 s after the API server came back"; return 1; }
	local a r
	a=$(secs "$t_up" "$t_att")
	r=$(secs "$t_up" "$t_run")
	echo "APIRESTART case=$c attached=$a running=$r"
	awk -v r="$r" -v b="$BOUND" 'BEGIN {exit !(r <= b)}' ||
		fail "$c: $p Running $r s after the API server came back (bound $BOUND s)"
}
cleanup_case() {
	K delete pod "$2" --grace-period=0 --force --wait=false >/dev/null 2>&1
	wait_for "pod/$2 gone" 60 pod_gone "$2"
	K delete pvc "$1" --wait=false >/dev/null 2>&1
	wait_for "no VolumeAttachment after $2" 60 no_vas
	wait_for "no PV after $2" 60 no_pvs
}
no_pvs() { [ -z "$(K get pv -o name 2>/dev/null)" ]; }

# after: the VolumeAttachment exists, then the API server dies
claim after-data || exit 1
pod after-w after-data host-1
wait_for "a VolumeAttachment for after-w" 30 va_on after-data host-1
apiserver_restart
measure after after-data after-w "$(now)"
cleanup_case after-data after-w

# inflight: ControllerPublishVolume blocked in the stopped driver while the API server dies
drv=${CTL_PIDS[0]}
claim inflight-data || exit 1
kill -STOP "$drv"
pod inflight-w inflight-data host-1
wait_for "a VolumeAttachment for inflight-w" 30 va_on inflight-data host-1
sleep 1 # the attacher has called the driver by now
pid=$(rcp_pid kube-apiserver)
cmd=()
mapfile -d '' cmd <"/proc/$pid/cmdline"
kill -KILL "$pid"
while kill -0 "$pid" 2>/dev/null && [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ]; do sleep 0.05; done
kill -CONT "$drv"
sleep 2 # the attacher's status write meets a dead API server
setsid "${cmd[@]}" </dev/null >>"$RCP/kube-apiserver.log" 2>&1 &
sed -i "s/^kube-apiserver $pid\$/kube-apiserver $!/" "$RCP/pids"
wait_for "kube-apiserver ready again" 60 apiserver_ready
measure inflight inflight-data inflight-w "$(now)"
cleanup_case inflight-data inflight-w

bed_leaks
t_stop=$SECONDS
bed_stop
echo "apirestart: stopped in $((SECONDS - t_stop)) s"
bed_netns_left && fail "a netns or the bridge is left"
realcp_stop
echo "apirestart: total $((SECONDS - t_start)) s"
if [ "$FAILS" -ne 0 ]; then
	for f in "$T"/cm.log "$T"/ctl/*.log "$T"/hosts/*/kcsi-node.log; do
		[ -f "$f" ] || continue
		echo "---- $f (last 40 lines)" >&2
		tail -40 "$f" >&2
	done
	exit 1
fi
echo PASS
