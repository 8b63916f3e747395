#!/bin/bash
# What the Node authorizer refuses kcsi-node: starts the real control plane (scripts/realcp.sh,
# etcd and kube-apiserver only), signs a kubelet's client certificate (CN=system:node:node-1,
# O=system:nodes) with its CA, makes a claim, its PV and a pod on node-1 as the admin, runs
# kcsi-node with the node's credentials for 15 s and prints every distinct "forbidden" line of its
# log and the objects it wrote; then stops everything. docs/kcsi-node.md has a run's answer.
#   scripts/node_authz.sh [BUILD_BIN_DIR]      (default build/bin; peers from build-peers/bin)
set -u
cd "$(dirname "$0")/.."
bin=${1:-build/bin}
peers=${KCSI_PEERS:-build-peers/bin}
out=$(bash scripts/realcp.sh start --peers "$peers" --no-controllers 2>&1) || { echo "$out"; exit 1; }
KC=$(echo "$out" | sed -n 's/^KUBECONFIG=//p')
D=$(dirname "$KC")
root=$(mktemp -d /tmp/kcsi-node-authz.XXXXXX)
mkdir -p "$root/kubelet"
trap 'bash scripts/realcp.sh stop "$D"; rm -rf "$root"' EXIT
echo "$out" | grep '^realcp:'
K() { "$peers/kubectl" --kubeconfig "$KC" "$@"; }
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$D/pki/node.key" \
	-subj "/O=system:nodes/CN=system:node:node-1" -out "$D/pki/node.csr" 2>/dev/null
printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n' >"$D/pki/node.ext"
openssl x509 -req -in "$D/pki/node.csr" -CA "$D/ca.crt" -CAkey "$D/ca.key" -set_serial 0x1234 -days 1 \
	-extfile "$D/pki/node.ext" -out "$D/pki/node.crt" 2>/dev/null
sed -e "s|client-certificate-data: .*|client-certificate-data: $(base64 -w0 "$D/pki/node.crt")|" \
	-e "s|client-key-data: .*|client-key-data: $(base64 -w0 "$D/pki/node.key")|" "$KC" >"$D/node.kubeconfig"
K create serviceaccount default >/dev/null
K apply -f - >/dev/null <<Y
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-a}
spec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], storageClassName: x, claimRef: {namespace: default, name: c-a}, csi: {driver: loop.kcsi.io, volumeHandle: vol-a}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: c-a, namespace: default}
spec: {accessModes: [ReadWriteOnce], storageClassName: x, volumeName: pv-a, resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: Pod
metadata: {name: p-a, namespace: default}
spec: {nodeName: node-1, containers: [{name: a, image: busybox}], volumes: [{name: d, persistentVolumeClaim: {claimName: c-a}}]}
Y
timeout -s TERM 15 "$bin/kcsi-node" --kubeconfig "$D/node.kubeconfig" --node-name node-1 \
	--root-dir "$root/kubelet" -v=4 >"$root/kcsi-node.log" 2>&1
echo "refused (count, log line):"
grep -i "forbidden" "$root/kcsi-node.log" | sed 's/^[IWE][0-9]* [0-9:.]* *[0-9]* //' | sort | uniq -c | sort -rn
echo "objects kcsi-node wrote:"
K get node node-1 -o name 2>&1
K get csinode node-1 -o name 2>&1
K -n kube-node-lease get lease node-1 -o name 2>&1
