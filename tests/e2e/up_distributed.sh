#!/bin/bash
# e2e: `kcsi up --provisioning=distributed`: no controller-mode driver; each node's driver runs
# all services in its own zone with its own csi-provisioner --node-deployment. A
# WaitForFirstConsumer claim is provisioned, bound and mounted on the node its pod is scheduled
# to (node-2 here), its PV pinned to that node; deleting it removes the volume; SIGTERM leaves
# nothing.
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
	grep -q "csi-provisioner/$n .*running" "$d.out" || fail "no csi-provisioner/$n"
	pgrep -f -- "kcsi-loopplugin --mode all .*--nodeid $n .*$d/" >/dev/null ||
		pgrep -f -- "kcsi-loopplugin --mode all .*$d/.*--nodeid $n" >/dev/null ||
		fail "the driver of $n does not run all services"
done
export KUBECONFIG=$d/kubeconfig
$kubectl apply -f - >/dev/null <<'YAML' || fail "kubectl apply failed"
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local-wffc}
provisioner: loop.kcsi.io
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: local}
spec:
  storageClassName: local-wffc
  accessModes: ["ReadWriteOnce"]
  resources: {requests: {storage: 64Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: app}
spec:
  nodeSelector: {kubernetes.io/hostname: node-2}
  containers: [{name: app, image: busybox, command: ["sleep", "3600"],
                volumeMounts: [{name: v, mountPath: /data}]}]
  volumes: [{name: v, persistentVolumeClaim: {claimName: local}}]
YAML
wait_for 20 phase_is pod/app Running || fail "pod/app not Running"
phase_is pvc/local Bound || fail "pvc/local not Bound"
pv=$($kubectl get pvc local -o jsonpath='{.spec.volumeName}')
aff=$($kubectl get pv "$pv" -o jsonpath='{.spec.nodeAffinity.required.nodeSelectorTerms[*].matchExpressions[*].values[*]}')
[ "$aff" = node-2 ] || fail "the PV is not pinned to node-2 (affinity '$aff')"
# Only node-2's driver serves zone node-2: the affinity says which instance created the volume.
uid=$($kubectl get pod app -o jsonpath='{.metadata.uid}')
mnt=$d/nodes/node-2/kubelet/pods/$uid/volumes/kubernetes.io~csi/$pv/mount
mountpoint -q "$mnt" || fail "the volume is not mounted on node-2 at $mnt"
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
