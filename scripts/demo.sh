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
command -v "${KUBECTL:-kubectl}" >/dev/null || { echo "kcsi demo: kubectl not found (scripts/deps.sh installs it)" >&2; exit 1; }
exec bash scripts/demo-run.sh "$@"
