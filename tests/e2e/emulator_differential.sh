#!/bin/bash
# e2e: kube-emulator against the real kube-apiserver v1.37.2, request by request. The corpus
# (tests/e2e/differential/corpus.yaml: every kind kube-emulator serves; defaulting, validation,
# each patch type, the status subresource, finalizers and deletion, selectors, watches and their
# 410, error bodies, Tables) runs against both with the same client, the answers are normalised
# (uids, resourceVersions, timestamps, managedFields) and compared (tests/e2e/differential.py).
# Passes only when the differences are exactly those docs/kube-emulator.md lists, so a new
# difference, or a listed one that is gone, fails. The real control plane runs without
# kube-controller-manager and kube-scheduler, so nothing but the corpus writes to it; it gets the
# snapshot CRDs of deploy/kubernetes/snapshot-crds, which kube-emulator serves as built-in kinds.
# kube-emulator keeps a short history (--watch-history 50), so a watch from revision 2 is too old
# on both servers (the real server's watch cache of a CRD's kind starts when the CRD is made).
set -u
: "${KCSI_BIN:?}" "${KCSI_SRC:?}"
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_realcp.sh"
realcp_missing_peers && exit 1
python3 -c 'import yaml' 2>/dev/null || { echo "FAIL: python3 with yaml (python3-yaml) is needed"; exit 1; }
emu_start --watch-history 50
realcp_start --no-controllers
K() { kubectl --kubeconfig "$RKC" "$@"; }
K apply -k "$KCSI_SRC/deploy/kubernetes/snapshot-crds" >/dev/null || fail "applying the snapshot CRDs"
K wait --for=condition=Established crd --all --timeout=30s >/dev/null || fail "CRDs not Established"
# the kinds answer 429 until their watch cache is ready
for _ in $(seq 1 100); do K get volumesnapshots -A >/dev/null 2>&1 && break; sleep 0.1; done
python3 "$KCSI_SRC/tests/e2e/differential.py" --corpus "$KCSI_SRC/tests/e2e/differential/corpus.yaml" \
	--docs "$KCSI_SRC/docs/kube-emulator.md" ${DIFF_SHOW_ALL:+--show-all} "$KC" "$RKC" || fail "differences"
realcp_stop
finish
