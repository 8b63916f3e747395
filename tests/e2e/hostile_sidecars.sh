#!/bin/bash
# e2e (issue 34): csi-attacher's and csi-provisioner's --http-endpoint and --metrics-address under
# hostile clients (lib_hostile.sh), and the same storm against upstream's csi-attacher v4.12.0
# and csi-provisioner v6.3.0 (Go net/http, from the peers) for the README's figures. The other
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
	up=$(upstream $c)
	[ -n "$up" ] && listener "upstream $c --http-endpoint /metrics" /metrics "$up" "${common[@]}" --http-endpoint 127.0.0.1:@PORT@
done
if [ $FAILS -ne 0 ]; then echo "$FAILS failure(s)"; exit 1; fi
echo PASS
