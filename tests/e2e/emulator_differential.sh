#!/bin/bash
# e2e: kube-emulator against the real kube-apiserver v1.36.1, request by request. The corpus
# (tests/e2e/differential/corpus.yaml: every kind kube-emulator serves; defaulting, validation,
# each patch type, the status subresource, finalizers and deletion, selectors, watches and their
# 410, error bodies, Tables) runs against both with the same client, the answers are normalised
# (uids, resourceVersions, timestamps, managedFields) and compared (tests/e2e/differential.py).
# Passes only when the differences are exactly those docs/kube-emulator.md lists, so a new
# difference, or a listed one that is gone, fails. The real control plane runs without
# kube-controller-manager and kube-scheduler, so nothing but the corpus writes to it.
set -u
: "${KCSI_BIN:?}" "${KCSI_SRC:?}"
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_realcp.sh"
realcp_missing_peers && exit 1
python3 -c 'import yaml' 2>/dev/null || { echo "FAIL: python3 with yaml (python3-yaml) is needed"; exit 1; }
emu_start
realcp_start --no-controllers
python3 "$KCSI_SRC/tests/e2e/differential.py" --corpus "$KCSI_SRC/tests/e2e/differential/corpus.yaml" \
	--docs "$KCSI_SRC/docs/kube-emulator.md" ${DIFF_SHOW_ALL:+--show-all} "$KC" "$RKC" || fail "differences"
realcp_stop
finish
