#!/bin/bash
# deploy/kubernetes on a real node: Kubernetes v1.37.2's own control plane (scripts/realcp.sh),
# the peers' kubelet with Debian's containerd and runc (scripts/realnode.sh), and the images
# `make images` builds, loaded into that runtime (nothing is pulled; the sandbox is kcsi's pause
# image, the workload kcsi's busybox image). `kubectl apply -k` of the manifests with this build's
# image tags; then what a user does with the loop driver, each step checked where a user sees it:
#   the controller Deployment, the snapshot-controller and the node DaemonSet become Ready; the
#   kubelet registers loop.kcsi.io through kcsi's csi-node-driver-registrar (CSINode); a pod with
#   a WaitForFirstConsumer claim is scheduled by kube-scheduler, provisioned by kcsi's
#   csi-provisioner, attached by kube-controller-manager's attach/detach controller and kcsi's
#   csi-attacher, staged and published by the kubelet calling kcsi-loopplugin in its container
#   (its mount reaches the host: Bidirectional propagation), and the pod's process writes a file;
#   a second pod reads it back; the claim grows and the pod sees the bigger filesystem; a
#   snapshot restores into a new claim with the file; deleting everything leaves no
#   VolumeAttachment, PV, snapshot content, loop device or mount.
# A step the machine refuses is named on a "REFUSED:" line with the error it gave, and the test
# goes on as far as it can; docs/deploy.md ("Verified on a real node") says what each would take.
set -uo pipefail
. "$(dirname "$0")/lib_proc.sh" realnode
. "$(dirname "$0")/lib_realcp.sh"
. "$(dirname "$0")/lib_deploy.sh"
: "${KCSI_SRC:?}"
PEERS=${KCSI_PEERS:-$KCSI_SRC/build-peers/bin}
REFUSED=()
refused() { echo "REFUSED: $*"; REFUSED+=("$*"); }
step() { echo "== $* ($((SECONDS - T0)) s)"; }
T0=$SECONDS
NDIR=""

realnode_cleanup() {
	[ -n "$NDIR" ] || return 0
	bash "$KCSI_SRC/scripts/realnode.sh" stop "$NDIR" >/dev/null 2>&1
	NDIR=""
}
_prev=$(trap -p EXIT | sed "s/^trap -- '\(.*\)' EXIT\$/\1/")
# shellcheck disable=SC2064
trap "realnode_cleanup; $_prev" EXIT

if realcp_missing_peers || [ ! -x "$PEERS/kubelet" ]; then
	echo "FAIL: the peers are not built (make peers)"; exit 1
fi
for t in containerd ctr runc buildah; do
	command -v "$t" >/dev/null || { echo "FAIL: $t is not installed (scripts/deps.sh)"; exit 1; }
done
K() { "$PEERS/kubectl" --kubeconfig "$RKC" --request-timeout=20s "$@"; }

# ---- what the machine allows, before anything runs ----------------------------------------
step "what this machine allows"
if ! grep -q "CapBnd:" /proc/self/status ||
	(($((16#$(awk '/^CapBnd/ {print $2}' /proc/self/status))) >> 24 & 1)); then
	echo "  CAP_SYS_RESOURCE: held"
else
	echo "  CAP_SYS_RESOURCE: withheld from every process here (containerd clamps oom_score_adj;" \
		"online ext4 growth is refused)"
fi
LOOP_OK=1
if [ ! -e /dev/loop-control ] || ! losetup -f >/dev/null 2>&1; then
	refused "loop devices: $(losetup -f 2>&1 || echo "no /dev/loop-control")"
	LOOP_OK=0
fi

# ---- images, control plane, node --------------------------------------------------------------
step "images from this build (scripts/images.sh)"
bash "$KCSI_SRC/scripts/images.sh" "$KCSI_BIN" "$T/images" kcsi-loopplugin csi-provisioner \
	csi-attacher csi-resizer csi-snapshotter livenessprobe csi-node-driver-registrar \
	snapshot-controller pause busybox >"$T/images.out" 2>&1 ||
	{ cat "$T/images.out"; echo "FAIL: images.sh"; exit 1; }
V=$("$KCSI_BIN/csi-attacher" --version | awk '{print $2}')
BB=$(/bin/busybox 2>&1 | sed -n '1s/^BusyBox \(v[^ ]*\).*/\1/p')

step "control plane (scripts/realcp.sh)"
realcp_start
step "node (scripts/realnode.sh)"
if ! out=$(bash "$KCSI_SRC/scripts/realnode.sh" start --cp "$RCP" --dir "$T/node" \
	--images "$T/images" --peers "$PEERS" 2>"$T/realnode.err"); then
	cat "$T/realnode.err"
	echo "FAIL: the real node did not start"
	exit 1
fi
NDIR=$T/node
NODE=$(echo "$out" | sed -n 's/^NODE=//p')
echo "$out" | grep '^realnode:'
check_images() { ctr --address "$NDIR/containerd.sock" -n k8s.io images ls -q | grep -c "^docker.io/kcsi/"; }
[ "$(check_images)" = 10 ] || fail "the runtime holds $(check_images) kcsi images, want 10"

# ---- deploy/kubernetes --------------------------------------------------------------------
step "snapshot CRDs (external-snapshotter client/v8, from the Go module cache)"
crd=$(snapshot_crds) || { echo "FAIL: no snapshot CRDs in the Go module cache: make peers"; exit 1; }
for k in volumesnapshotclasses volumesnapshotcontents volumesnapshots; do
	K apply -f "$crd/snapshot.storage.k8s.io_$k.yaml" >/dev/null || fail "CRD $k"
done
K wait --for=condition=Established crd --all --timeout=30s >/dev/null || fail "CRDs not established"

step "kubectl apply -k deploy/kubernetes (images kcsi/*:$V)"
deploy_kustomization "$T/kz" "$V"
K apply -k "$T/kz" >"$T/apply.out" 2>&1 || { cat "$T/apply.out"; fail "apply -k"; }
t=$SECONDS
K -n kcsi rollout status deploy/kcsi-loop-controller --timeout=180s >/dev/null ||
	fail "Deployment kcsi-loop-controller not Ready: $(K -n kcsi get pods -o wide 2>&1)"
K -n kcsi rollout status ds/kcsi-loop-node --timeout=120s >/dev/null ||
	fail "DaemonSet kcsi-loop-node not Ready: $(K -n kcsi get events --field-selector type=Warning 2>&1 | tail -5)"
K -n kcsi rollout status deploy/snapshot-controller --timeout=120s >/dev/null || fail "snapshot-controller not Ready"
echo "  Ready in $((SECONDS - t)) s: $(K -n kcsi get pods --no-headers | awk '{print $1, $2}' | tr '\n' ' ')"
csinode_lists() { [ "$(K get csinode "$NODE" -o jsonpath='{.spec.drivers[*].name}')" = loop.kcsi.io ]; }
wait_for "CSINode $NODE lists loop.kcsi.io" 60 csinode_lists &&
	echo "  CSINode $NODE: loop.kcsi.io (registered by csi-node-driver-registrar)"
has_capacity() { [ "$(K -n kcsi get csistoragecapacities --no-headers 2>/dev/null | wc -l)" -gt 0 ]; }
wait_for "CSIStorageCapacity objects from csi-provisioner" 60 has_capacity

if [ $LOOP_OK = 0 ]; then
	echo "realnode: stopped before the volume steps; refused: ${REFUSED[*]}"
	echo "FAIL: the machine refuses loop devices, which every volume step needs" >&2
	exit 1
fi

# ---- a pod writes, a second reads -----------------------------------------------------------
# pod NAME CLAIM SCRIPT [once]: a busybox pod with CLAIM at /data running SCRIPT; "once" pods end
# (restartPolicy Never) and leave what they print to /dev/termination-log in their status.
pod() {
	local policy=Always
	[ "${4:-}" = once ] && policy=Never
	K apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: default}
spec:
  restartPolicy: $policy
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: kcsi/busybox:$BB
    command: [sh, -c, "$3"]
    volumeMounts: [{name: d, mountPath: /data}]
  volumes: [{name: d, persistentVolumeClaim: {claimName: $2}}]
EOF
}
claim() { # NAME CLASS SIZE [SNAPSHOT]
	local src=""
	[ -z "${4:-}" ] || src="  dataSource: {name: $4, kind: VolumeSnapshot, apiGroup: snapshot.storage.k8s.io}"
	K apply -f - >/dev/null <<EOF
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: $1, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: $2
  resources: {requests: {storage: $3}}
$src
EOF
}
phase() { K get pod "$1" -o jsonpath='{.status.phase}' 2>/dev/null; }
message() { K get pod "$1" -o jsonpath='{.status.containerStatuses[0].state.terminated.message}'; }
wait_phase() { # POD PHASE SECS
	local end=$((SECONDS + $3))
	while [ $SECONDS -lt $end ]; do
		[ "$(phase "$1")" = "$2" ] && return 0
		[ "$(phase "$1")" = Failed ] && break
		sleep 0.5
	done
	fail "pod $1 is $(phase "$1"), not $2; its events: $(K get events --field-selector involvedObject.name="$1" --no-headers 2>&1 | tail -4)"
	return 1
}
delete_pod() { K delete pod "$1" --timeout=90s >/dev/null || fail "pod $1 not deleted"; }

step "a pod writes a file to a WaitForFirstConsumer claim"
MSG="written by pod writer at $(date +%s)"
claim data kcsi-loop-expandable 64Mi
sleep 1
[ "$(K get pvc data -o jsonpath='{.status.phase}')" = Pending ] || fail "the claim bound before a pod used it"
pod writer data "echo '$MSG' >/data/f && sync && sleep 3600"
t=$SECONDS
wait_phase writer Running 120 && K wait --for=condition=Ready pod/writer --timeout=30s >/dev/null
echo "  Running in $((SECONDS - t)) s"
pv=$(K get pvc data -o jsonpath='{.spec.volumeName}')
[ -n "$pv" ] || fail "claim data has no volume"
# kube-scheduler records events.k8s.io/v1 Events: read through core/v1, source is empty and
# reportingComponent/reportingInstance name it (default-scheduler, default-scheduler-HOST).
# kcsi-controller-manager's volume-scheduler records core/v1 Events with the same name in
# source.component too: a Scheduled event with a source was not kube-scheduler's.
sched=$(K get events --field-selector involvedObject.name=writer,reason=Scheduled \
	-o jsonpath='{.items[0].source.component}|{.items[0].reportingComponent}|{.items[0].reportingInstance}')
case $sched in
"|default-scheduler|default-scheduler-"*) ;;
*) fail "writer was not scheduled by kube-scheduler (its Scheduled event's source.component|reportingComponent|reportingInstance: '$sched'; kube-scheduler's: '|default-scheduler|default-scheduler-HOST')" ;;
esac
[ "$(K get pv "$pv" -o jsonpath='{.metadata.annotations.pv\.kubernetes\.io/provisioned-by}')" = loop.kcsi.io ] ||
	fail "PV $pv not provisioned by loop.kcsi.io's csi-provisioner"
grep -q "Successfully provisioned volume $pv" <(K get events --field-selector involvedObject.name=data -o jsonpath='{.items[*].message}') ||
	fail "no ProvisioningSucceeded event from csi-provisioner"
va=$(K get volumeattachment -o jsonpath="{.items[?(@.spec.source.persistentVolumeName==\"$pv\")].metadata.name}")
[ -n "$va" ] && [ "$(K get volumeattachment "$va" -o jsonpath='{.status.attached}')" = true ] ||
	fail "no attached VolumeAttachment for $pv"
[ "$(K get volumeattachment "$va" -o jsonpath='{.spec.nodeName}')" = "$NODE" ] || fail "VA $va not for $NODE"
uid=$(K get pod writer -o jsonpath='{.metadata.uid}')
mnt=/var/lib/kubelet/pods/$uid/volumes/kubernetes.io~csi/$pv/mount
[ "$(findmnt -n -o FSTYPE "$mnt")" = ext4 ] ||
	fail "the driver's publish mount did not reach the host at $mnt (mount propagation)"
findmnt -n -o SOURCE "$mnt" | grep -q '^/dev/loop' || fail "$mnt is not a loop device"
grep -q "$MSG" "$(findmnt -n -o TARGET "$mnt")/f" || fail "the file the pod wrote is not on the volume"
echo "  $pv: provisioned, attached ($va), staged and published at $mnt ($(findmnt -n -o SOURCE "$mnt"))"
delete_pod writer
va_gone() { ! K get volumeattachment "$va" >/dev/null 2>&1; }
wait_for "VolumeAttachment $va deleted after the pod" 90 va_gone && echo "  detached once the pod was gone"

step "a second pod reads it back"
pod reader data 'cat /data/f >/dev/termination-log; df -k /data | tail -1 >>/dev/termination-log' once
wait_phase reader Succeeded 120
got=$(message reader)
[ "$(echo "$got" | head -1)" = "$MSG" ] || fail "reader read '$(echo "$got" | head -1)', want '$MSG'"
size0=$(echo "$got" | sed -n 2p | awk '{print $2}')
echo "  read back: '$(echo "$got" | head -1)'; filesystem ${size0:-?} KiB"
delete_pod reader

step "the claim grows from 64Mi to 128Mi while a pod uses it"
pod holder data "sleep 3600"
wait_phase holder Running 120
K patch pvc data -p '{"spec":{"resources":{"requests":{"storage":"128Mi"}}}}' >/dev/null
end=$((SECONDS + 60)) grown=0 err=""
while [ $SECONDS -lt $end ]; do
	[ "$(K get pvc data -o jsonpath='{.status.capacity.storage}')" = 128Mi ] && { grown=1; break; }
	err=$(K get pvc data -o jsonpath='{.status.conditions[?(@.type=="NodeResizeError")].message}')
	[ -n "$err" ] && break
	sleep 0.5
done
if [ $grown = 1 ]; then
	echo "  grown online"
elif [ -n "$err" ]; then
	refused "online filesystem growth (NodeExpandVolume with the pod running): $err"
else
	fail "claim data neither grew nor reported a NodeResizeError in 60 s: $(K get pvc data -o jsonpath='{.status}')"
fi
delete_pod holder
pod reader2 data 'cat /data/f >/dev/termination-log; df -k /data | tail -1 >>/dev/termination-log' once
wait_phase reader2 Succeeded 120
got=$(message reader2)
size1=$(echo "$got" | sed -n 2p | awk '{print $2}')
[ "$(echo "$got" | head -1)" = "$MSG" ] || fail "after growing, the file reads '$(echo "$got" | head -1)'"
[ "${size1:-0}" -gt $((${size0:-0} + 40000)) ] ||
	fail "the pod's filesystem is ${size1:-?} KiB after growing to 128Mi (was ${size0:-?} KiB)"
claim_grown() { [ "$(K get pvc data -o jsonpath='{.status.capacity.storage}')" = 128Mi ]; }
wait_for "claim data reports 128Mi" 30 claim_grown
echo "  the pod sees ${size1:-?} KiB (was ${size0:-?} KiB)"
delete_pod reader2

step "a snapshot restores into a new claim with the file"
K apply -f - >/dev/null <<EOF
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata: {name: snap, namespace: default}
spec:
  volumeSnapshotClassName: kcsi-loop
  source: {persistentVolumeClaimName: data}
EOF
K wait --for=jsonpath='{.status.readyToUse}'=true volumesnapshot/snap --timeout=90s >/dev/null ||
	fail "snapshot not ready: $(K get volumesnapshot snap -o jsonpath='{.status}')"
claim restored kcsi-loop 128Mi snap
pod restore-reader restored 'cat /data/f >/dev/termination-log' once
wait_phase restore-reader Succeeded 120
[ "$(message restore-reader)" = "$MSG" ] || fail "the restored claim holds '$(message restore-reader)'"
echo "  restored claim reads: '$(message restore-reader)'"
delete_pod restore-reader

step "deletion leaves nothing"
K delete volumesnapshot snap --timeout=90s >/dev/null || fail "snapshot not deleted"
K delete pvc data restored --timeout=90s >/dev/null || fail "claims not deleted"
none() { [ -z "$(K get "$1" --no-headers 2>/dev/null)" ]; }
for kind in volumeattachments persistentvolumes volumesnapshotcontents; do
	wait_for "no $kind left" 90 none "$kind" || echo "  left: $(K get "$kind" --no-headers 2>&1)"
done
losetup -a | grep -q "/var/lib/kcsi-loop/" && fail "loop devices left: $(losetup -a | grep /var/lib/kcsi-loop/)"
grep -E " /var/lib/kubelet/(pods/[^ ]*/volumes/kubernetes.io~csi|plugins/kubernetes.io/csi)/" /proc/self/mountinfo &&
	fail "mounts left under /var/lib/kubelet"
none volumeattachments && none persistentvolumes && echo "  no VolumeAttachment, PV, snapshot content, loop device or mount"

step "kubectl delete -k, node and control plane stop"
K delete -k "$T/kz" --timeout=120s >/dev/null 2>&1 || fail "delete -k"
bash "$KCSI_SRC/scripts/realnode.sh" stop "$NDIR" || fail "realnode stop left something behind"
[ ! -e /var/lib/kubelet ] || fail "/var/lib/kubelet is left"
! ip link show kcsi-rn0 >/dev/null 2>&1 || fail "the bridge kcsi-rn0 is left"
! iptables -t nat -S PREROUTING 2>/dev/null | grep -q kcsi-realnode || fail "the DNAT rule is left"
[ -z "$(find /var/log/containers -maxdepth 1 -lname "$NDIR/*" 2>/dev/null)" ] || fail "log links into $NDIR are left"
! pgrep -f "containerd-shim.*$NDIR/" >/dev/null || fail "containerd shims are left"
NDIR=""
realcp_stop
echo "realnode: $((SECONDS - T0)) s in all; refused: ${#REFUSED[@]}"
for r in "${REFUSED[@]}"; do echo "  refused: $r"; done
[ "$FAILS" -eq 0 ] || { echo "$FAILS check(s) failed"; exit 1; }
echo "realnode: all checks passed"
