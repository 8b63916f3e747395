#!/bin/bash
# e2e (issue 34): the sidecars' --http-endpoint and --metrics-address under hostile clients
# (lib_hostile.sh), one scenario over the components named as arguments:
#   e2e.hostile_sidecars   csi-attacher csi-provisioner
#   e2e.hostile_sidecars2  csi-resizer csi-snapshotter snapshot-controller
# snapshot-controller has no CSI socket and no --metrics-address. The same against upstream's:
# e2e.hostile_upstream.
set -u
[ $# -gt 0 ] || { echo "usage: $0 COMPONENT..." >&2; exit 2; }
. "$(dirname "$0")/lib_proc.sh" "hostile-$1"
. "$(dirname "$0")/lib_hostile.sh"
HOSTILE_SECS=6
. "$(dirname "$0")/lib_hostile_stack.sh"
for c in "$@"; do
	if [ "$c" = snapshot-controller ]; then
		# at its default 5 requests a second its eight informers' first lists come 200 ms
		# apart and its workers start 1.5 s in, or later on a loaded machine: past settle's
		# quiet second, so the storm would count them. A bigger burst makes start-up one step.
		listener "$c --http-endpoint /metrics" /metrics "$KCSI_BIN/$c" \
			--kubeconfig "$KC" --http-endpoint 127.0.0.1:@PORT@ --kube-api-burst 50
		continue
	fi
	common=(--kubeconfig "$KC" --csi-address "$SOCK")
	listener "$c --http-endpoint /metrics" /metrics "$KCSI_BIN/$c" "${common[@]}" --http-endpoint 127.0.0.1:@PORT@
	listener "$c --metrics-address /metrics" /metrics "$KCSI_BIN/$c" "${common[@]}" --metrics-address 127.0.0.1:@PORT@
done
if [ $FAILS -ne 0 ]; then echo "$FAILS failure(s)"; exit 1; fi
echo PASS
