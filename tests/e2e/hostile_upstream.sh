#!/bin/bash
# e2e (issue 34): kcsi's and upstream's csi-attacher (v4.12.0) and csi-provisioner (v6.3.0, Go
# net/http; from the peers, scripts/peers.sh) side by side, same driver, same storm
# (lib_hostile.sh) and the same 64 silent connections re-opened as they drop: kcsi's answers are
# asserted, upstream's printed for the README's hardening table. (Upstream's livenessprobe, the
# listener of issue 34's report, is not served by this machine's module proxy; its --http-endpoint
# server is the same net/http ListenAndServe as these.)
set -u
. "$(dirname "$0")/lib_proc.sh" hostile-up
. "$(dirname "$0")/lib_hostile.sh"
HOSTILE_SECS=6
REOPEN=1
. "$(dirname "$0")/lib_hostile_stack.sh"
for c in csi-attacher csi-provisioner; do
	common=(--kubeconfig "$KC" --csi-address "$SOCK")
	listener "$c --http-endpoint /metrics" /metrics "$KCSI_BIN/$c" "${common[@]}" --http-endpoint 127.0.0.1:@PORT@
	up=$(upstream $c) || { FAILS=$((FAILS + 1)); continue; }
	listener "upstream $c --http-endpoint /metrics" /metrics "$up" "${common[@]}" --http-endpoint 127.0.0.1:@PORT@
done
if [ $FAILS -ne 0 ]; then echo "$FAILS failure(s)"; exit 1; fi
echo PASS
