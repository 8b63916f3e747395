#!/usr/bin/env bash
# The kcsi demo (make demo): `kcsi up` and kubectl only; see scripts/demo-run.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
missing=
for b in kcsi kube-emulator kcsi-loopplugin csi-attacher csi-provisioner kcsi-controller-manager \
	csi-node-driver-registrar livenessprobe kcsi-node; do
	[ -x "build/bin/$b" ] || missing="$missing $b"
done
if [ -n "$missing" ]; then
	echo "kcsi demo: build/bin lacks:$missing (run 'make build'). Nothing was started." >&2
	exit 1
fi
# kubectl: $KUBECTL, else one >= 1.30 on PATH, else v1.37.2 built from its Go module by
# scripts/peers.sh (cached outside the work tree; the first time costs a few minutes).
kubectl_minor() { "$1" version --client -o json 2>/dev/null | sed -n 's/.*"minor": *"\([0-9]*\).*/\1/p' | head -1; }
if [ -z "${KUBECTL:-}" ]; then
	if command -v kubectl >/dev/null && [ "$(kubectl_minor kubectl)" -ge 30 ] 2>/dev/null; then
		KUBECTL=$(command -v kubectl)
	else
		echo "kcsi demo: no kubectl >= 1.30 on PATH; taking v1.37.2 from the peers (scripts/peers.sh kubectl)"
		bash scripts/peers.sh kubectl >&2
		KUBECTL=$PWD/build-peers/bin/kubectl
	fi
fi
command -v "$KUBECTL" >/dev/null || { echo "kcsi demo: kubectl not found: $KUBECTL" >&2; exit 1; }
export KUBECTL
exec bash scripts/demo-run.sh "$@"
