#!/bin/bash
# e2e (issue 34): csi-resizer's and csi-snapshotter's --http-endpoint and --metrics-address and
# snapshot-controller's --http-endpoint under hostile clients (lib_hostile.sh).
set -u
. "$(dirname "$0")/lib_proc.sh" hostile-sc2
. "$(dirname "$0")/lib_hostile.sh"
HOSTILE_SECS=6
. "$(dirname "$0")/lib_hostile_stack.sh"
for c in csi-resizer csi-snapshotter; do
	common=(--kubeconfig "$KC" --csi-address "$SOCK")
	listener "$c --http-endpoint /metrics" /metrics "$KCSI_BIN/$c" "${common[@]}" --http-endpoint 127.0.0.1:@PORT@
	listener "$c --metrics-address /metrics" /metrics "$KCSI_BIN/$c" "${common[@]}" --metrics-address 127.0.0.1:@PORT@
done
listener "snapshot-controller --http-endpoint /metrics" /metrics "$KCSI_BIN/snapshot-controller" \
	--kubeconfig "$KC" --http-endpoint 127.0.0.1:@PORT@
if [ $FAILS -ne 0 ]; then echo "$FAILS failure(s)"; exit 1; fi
echo PASS
