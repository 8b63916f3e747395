#!/bin/bash
# e2e (issue 34): csi-node-driver-registrar's, kcsi-node's and kcsi-controller-manager's
# --http-endpoint under hostile clients (lib_hostile.sh).
set -u
. "$(dirname "$0")/lib_proc.sh" hostile-node
. "$(dirname "$0")/lib_hostile.sh"
HOSTILE_SECS=6
. "$(dirname "$0")/lib_hostile_stack.sh"
mkdir -p "$T/registry" "$T/kubelet"
listener "csi-node-driver-registrar --http-endpoint /healthz" /healthz \
	"$KCSI_BIN/csi-node-driver-registrar" --csi-address "$SOCK" \
	--kubelet-registration-path "$SOCK" --plugin-registration-path "$T/registry" \
	--http-endpoint 127.0.0.1:@PORT@
listener "kcsi-node --http-endpoint /metrics" /metrics "$KCSI_BIN/kcsi-node" --kubeconfig "$KC" \
	--node-name n1 --root-dir "$T/kubelet" --http-endpoint 127.0.0.1:@PORT@
listener "kcsi-controller-manager --http-endpoint /metrics" /metrics \
	"$KCSI_BIN/kcsi-controller-manager" --kubeconfig "$KC" --http-endpoint 127.0.0.1:@PORT@
if [ $FAILS -ne 0 ]; then echo "$FAILS failure(s)"; exit 1; fi
echo PASS
