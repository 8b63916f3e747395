#!/bin/bash
# e2e (issue 34): csi-attacher's and csi-provisioner's --http-endpoint and --metrics-address under
# hostile clients (lib_hostile.sh). The same against upstream's: e2e.hostile_upstream; the other
# sidecars: e2e.hostile_sidecars2.
set -u
. "$(dirname "$0")/lib_proc.sh" hostile-sc
. "$(dirname "$0")/lib_hostile.sh"
HOSTILE_SECS=6
. "$(dirname "$0")/lib_hostile_stack.sh"
for c in csi-attacher csi-provisioner; do
	common=(--kubeconfig "$KC" --csi-address "$SOCK")
	listener "$c --http-endpoint /metrics" /metrics "$KCSI_BIN/$c" "${common[@]}" --http-endpoint 127.0.0.1:@PORT@
	listener "$c --metrics-address /metrics" /metrics "$KCSI_BIN/$c" "${common[@]}" --metrics-address 127.0.0.1:@PORT@
done
if [ $FAILS -ne 0 ]; then echo "$FAILS failure(s)"; exit 1; fi
echo PASS
