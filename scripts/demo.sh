#!/usr/bin/env bash
# The kcsi demo: kube-emulator + kcsi-loopplugin + csi-attacher attaching a real loop-device
# volume. It is delivered with the csi-attacher; until that binary exists this says so and fails.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x build/bin/csi-attacher ] || [ ! -x build/bin/kcsi-loopplugin ] || [ ! -x build/bin/kube-emulator ]; then
  echo "kcsi demo: not there yet." >&2
  echo "The demo needs csi-attacher, kcsi-loopplugin and kube-emulator; they are still being built" >&2
  echo "(see the open issues). Nothing was started." >&2
  exit 1
fi
exec bash scripts/demo-run.sh "$@"
