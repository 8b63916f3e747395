#!/bin/bash
# e2e: the real control plane fixture (scripts/realcp.sh, tests/e2e/lib_realcp.sh) starts,
# serves as a cluster does and stops leaving nothing behind. Defaulting as kube-apiserver does it
# (a StorageClass's reclaimPolicy Delete and volumeBindingMode Immediate, a claim's volumeMode
# Filesystem), RBAC enforced on a ServiceAccount token the signer issued, kube-controller-manager
# binding a claim to a PV, kube-scheduler reporting an unschedulable pod; after stop no process,
# no listening port and no directory is left. Prints the ready time and RSS.
set -u
: "${KCSI_BIN:?}" "${KCSI_SRC:?}"
. "$(dirname "$0")/lib_proc.sh" realcp
. "$(dirname "$0")/lib_realcp.sh"
realcp_missing_peers && exit 1
k() { kubectl --kubeconfig "$RKC" --request-timeout=20s "$@"; }

# A missing peer is a clear error and leaves no directory.
before=$(ls -d /tmp/kcsi-realcp.* 2>/dev/null | wc -l)
bash "$KCSI_SRC/scripts/realcp.sh" start --peers "$T/none" >"$T/bad.out" 2>&1 &&
	fail "realcp started without peers"
grep -q "is missing: run scripts/peers.sh" "$T/bad.out" || fail "unclear error without peers: $(cat "$T/bad.out")"
[ "$(ls -d /tmp/kcsi-realcp.* 2>/dev/null | wc -l)" = "$before" ] || fail "a failed start left a directory"

realcp_start
pids=$(awk '{print $2}' "$RCP/pids")
ports=$(cat "$RCP/ports")
[ "$(wc -l <"$RCP/pids")" = 4 ] || fail "expected 4 processes, got: $(cat "$RCP/pids")"
[ -n "$RCP_READY" ] && [ -n "$RCP_RSS" ] || fail "no ready time or RSS printed"

k apply -f - >/dev/null <<'YAML' || fail "kubectl apply to the real API server"
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: plain}
provisioner: loop.kcsi.io
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-a}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: plain
  csi: {driver: loop.kcsi.io, volumeHandle: vol-a}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: c1, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: plain
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: p1, namespace: default}
spec:
  containers: [{name: c, image: busybox}]
YAML
check_eq() { [ "$2" = "$3" ] || fail "$1: expected '$3', got '$2'"; }
check_eq "StorageClass reclaimPolicy default" "$(k get sc plain -o jsonpath='{.reclaimPolicy}')" Delete
check_eq "StorageClass volumeBindingMode default" "$(k get sc plain -o jsonpath='{.volumeBindingMode}')" Immediate
check_eq "PVC volumeMode default" "$(k get pvc c1 -o jsonpath='{.spec.volumeMode}')" Filesystem
check_eq "PV persistentVolumeReclaimPolicy default" "$(k get pv pv-a -o jsonpath='{.spec.persistentVolumeReclaimPolicy}')" Retain
bound() { [ "$(k get pvc c1 -o jsonpath='{.status.phase}')" = Bound ]; }
wait_for "kube-controller-manager binds c1 to pv-a" 30 bound
unsched() { [ "$(k get pod p1 -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].reason}')" = Unschedulable ]; }
wait_for "kube-scheduler marks p1 Unschedulable (no nodes)" 30 unsched

# RBAC: a ServiceAccount token from the signer authenticates, and is refused what no role grants.
k create serviceaccount nobody >/dev/null || fail "creating a ServiceAccount"
tok=$(k create token nobody) || fail "TokenRequest for nobody"
out=$(curl -s -w ' %{http_code}' --cacert "$RCP/ca.crt" -H "Authorization: Bearer $tok" "$RS/api/v1/persistentvolumes")
case $out in
*'persistentvolumes is forbidden: User \"system:serviceaccount:default:nobody\" cannot list resource \"persistentvolumes\"'*' 403') ;;
*) fail "RBAC: expected 403 forbidden for nobody listing PVs, got: $out" ;;
esac
out=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$RCP/ca.crt" -H "Authorization: Bearer $tok" "$RS/api/v1/namespaces/default/serviceaccounts/nobody")
[ "$out" = 403 ] || fail "RBAC: nobody read its own ServiceAccount: HTTP $out"
out=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$RCP/ca.crt" -H "Authorization: Bearer x$tok" "$RS/api/v1/persistentvolumes")
[ "$out" = 401 ] || fail "a forged token was not refused with 401: HTTP $out"
k auth can-i list pv --as system:serviceaccount:default:nobody >/dev/null && fail "can-i says nobody may list PVs"

realcp_stop
for p in $pids; do
	[ -d "/proc/$p" ] && [ "$(awk '{print $3}' /proc/$p/stat)" != Z ] && fail "process $p is left after stop"
done
for p in $ports; do
	ss -Hltn "sport = :$p" | grep -q . && fail "port $p is still listened on after stop"
done
[ -e "$(dirname "$RKC")" ] && fail "$(dirname "$RKC") is left after stop"

[ $FAILS = 0 ] || exit 1
echo "PASS (ready in $RCP_READY s, RSS $RCP_RSS MiB)"
