#!/bin/bash
# e2e: `kcsi up --provisioning=distributed`: no controller-mode driver; each node's driver runs
# all services in its own zone with its own csi-provisioner, csi-resizer and csi-snapshotter,
# each --node-deployment. A WaitForFirstConsumer claim is provisioned, bound and mounted on the
# node its pod is scheduled to (node-2 here), its PV pinned to that node; node-2's resizer alone
# grows it to 128Mi, and the pod started again finds a 128Mi file system; a snapshot of it is
# taken by node-2's snapshotter (its content labelled managed-by node-2); deleting them removes
# the volumes; SIGTERM leaves nothing.
set -u
: "${KCSI_BIN:?}" "${KCSI_SRC:?}"
kubectl=${KUBECTL:-kubectl}
FAILS=0
fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
t=$(mktemp -d /tmp/kcsi-up-dist.XXXXXX)
d=$t/stack
. "$(dirname "$0")/lib_up.sh"
cleanup() {
	release_below "$t"
	rm -rf "$t"
}
trap cleanup EXIT

start_up "$d" --nodes 2 --provisioning=distributed || exit 1
grep -q "driver/controller" "$d.out" && fail "distributed started a controller-mode driver"
for n in node-1 node-2; do
	for c in csi-provisioner csi-resizer csi-snapshotter; do
		grep -q "$c/$n .*running" "$d.out" || fail "no $c/$n"
	done
	pgrep -f -- "kcsi-loopplugin --mode all .*--nodeid $n .*$d/" >/dev/null ||
		pgrep -f -- "kcsi-loopplugin --mode all .*$d/.*--nodeid $n" >/dev/null ||
		fail "the driver of $n does not run all services"
done
export KUBECONFIG=$d/kubeconfig
# the pod, on node-2; made twice (the second time to finish the file system's growth)
APP='apiVersion: v1
kind: Pod
metadata: {name: app}
spec:
  nodeSelector: {kubernetes.io/hostname: node-2}
  containers: [{name: app, image: busybox, command: ["sleep", "3600"],
                volumeMounts: [{name: v, mountPath: /data}]}]
  volumes: [{name: v, persistentVolumeClaim: {claimName: local}}]
'
$kubectl apply -f - >/dev/null <<'YAML' || fail "kubectl apply failed"
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local-wffc}
provisioner: loop.kcsi.io
volumeBindingMode: WaitForFirstConsumer
allowVolumeExpansion: true
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: local}
spec:
  storageClassName: local-wffc
  accessModes: ["ReadWriteOnce"]
  resources: {requests: {storage: 64Mi}}
YAML
$kubectl apply -f - <<<"$APP" >/dev/null || fail "creating pod/app"
wait_for 20 phase_is pod/app Running || fail "pod/app not Running"
phase_is pvc/local Bound || fail "pvc/local not Bound"
pv=$($kubectl get pvc local -o jsonpath='{.spec.volumeName}')
aff=$($kubectl get pv "$pv" -o jsonpath='{.spec.nodeAffinity.required.nodeSelectorTerms[*].matchExpressions[*].values[*]}')
[ "$aff" = node-2 ] || fail "the PV is not pinned to node-2 (affinity '$aff')"
# Only node-2's driver serves zone node-2: the affinity says which instance created the volume.
uid=$($kubectl get pod app -o jsonpath='{.metadata.uid}')
mnt=$d/nodes/node-2/kubelet/pods/$uid/volumes/kubernetes.io~csi/$pv/mount
mountpoint -q "$mnt" || fail "the volume is not mounted on node-2 at $mnt"

# Expansion: node-2's resizer alone expands the volume. Growing a mounted ext4 needs
# CAP_SYS_RESOURCE, which this machine's sandbox withholds, so the file system grows when the pod
# starts again (kcsi-node's next stage); with the capability it grows while the pod runs.
$kubectl patch pvc local -p '{"spec": {"resources": {"requests": {"storage": "128Mi"}}}}' >/dev/null ||
	fail "asking for 128Mi"
pv_grown() { [ "$($kubectl get pv "$pv" -o jsonpath='{.spec.capacity.storage}')" = 128Mi ]; }
wait_for 30 pv_grown || fail "the PV did not grow to 128Mi: $($kubectl get pvc local -o jsonpath='{.status}')"
grep -q "Expanded PVC default/local" "$d/logs/csi-resizer_node-2.log" || fail "node-2's resizer did not expand it"
grep -q "Expanded PVC default/local" "$d/logs/csi-resizer_node-1.log" && fail "node-1's resizer expanded node-2's volume"
$kubectl delete pod app --timeout=30s >/dev/null || fail "deleting pod/app"
$kubectl apply -f - <<<"$APP" >/dev/null || fail "starting pod/app again"
wait_for 30 phase_is pod/app Running || fail "pod/app not Running again"
grown() { [ "$($kubectl get pvc local -o jsonpath='{.status.capacity.storage}')" = 128Mi ]; }
wait_for 30 grown || fail "pvc/local did not reach 128Mi: $($kubectl get pvc local -o jsonpath='{.status}')"
uid=$($kubectl get pod app -o jsonpath='{.metadata.uid}')
mnt=$d/nodes/node-2/kubelet/pods/$uid/volumes/kubernetes.io~csi/$pv/mount
blocks=$(df -k --output=size "$mnt" 2>/dev/null | tail -1)
[ "${blocks:-0}" -gt 100000 ] || fail "the file system on node-2 is not 128Mi (${blocks:-?} KiB at $mnt)"

# Snapshot: the content is node-2's, and node-2's snapshotter has its driver cut it.
$kubectl apply -f - >/dev/null <<'YAML' || fail "kubectl apply of the snapshot failed"
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshotClass
metadata: {name: local-snap}
driver: loop.kcsi.io
deletionPolicy: Delete
---
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata: {name: local-snap}
spec: {volumeSnapshotClassName: local-snap, source: {persistentVolumeClaimName: local}}
YAML
snap_ready() { [ "$($kubectl get volumesnapshot local-snap -o jsonpath='{.status.readyToUse}')" = true ]; }
wait_for 30 snap_ready || fail "the snapshot is not ready: $($kubectl get volumesnapshot local-snap -o jsonpath='{.status}')"
content=$($kubectl get volumesnapshot local-snap -o jsonpath='{.status.boundVolumeSnapshotContentName}')
owner=$($kubectl get volumesnapshotcontent "$content" -o jsonpath='{.metadata.labels.snapshot\.storage\.kubernetes\.io/managed-by}')
[ "$owner" = node-2 ] || fail "the content is managed by '$owner', not node-2"
$kubectl delete volumesnapshot local-snap --timeout=30s >/dev/null || fail "deleting the snapshot"
wait_for 20 no_objects volumesnapshotcontents || fail "the snapshot's content was not deleted"
$kubectl delete pod app --timeout=30s >/dev/null || fail "deleting pod/app"
$kubectl delete pvc local --timeout=30s >/dev/null || fail "deleting pvc/local"
wait_for 20 no_objects pv || fail "the PV was not deleted by its node's provisioner"
stop_up || fail "kcsi up exited non-zero on SIGTERM"
[ "$(grep -cF " $t/" /proc/self/mountinfo)" = 0 ] || fail "mounts left"
[ "$(losetup -a | grep -cF "$t/")" = 0 ] || fail "loop devices left"

"$KCSI_BIN/kcsi" up --provisioning=spread >/dev/null 2>"$t/err" && fail "--provisioning=spread accepted"
grep -q "want central or distributed" "$t/err" || fail "unclear error: $(cat "$t/err")"
if [ $FAILS -ne 0 ]; then
	tail -n 40 "$d.out" >&2
	for f in "$d"/logs/*.log; do echo "--- $f" >&2; tail -n 15 "$f" >&2; done
	exit 1
fi
echo PASS
