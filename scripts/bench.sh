#!/usr/bin/env bash
# Runs every kcsi benchmark with its defaults and prints their figures. Benchmarks never fail on
# a figure; this script fails only when a benchmark cannot run.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${KCSI_BUILD:-build}
run() { echo; echo "### $*"; "$@"; }
run "$B/bin/emulator_bench" "$B/bin/kube-emulator"
run "$B/bench/kube_bench"
run "$B/tests/csi_bench"
run "$B/tests/loopplugin_bench" "$B/bin/kcsi-loopplugin"
run "$B/tests/attacher_bench" --driver test
run "$B/tests/attacher_bench" --driver loop
run "$B/tests/controller_bench"
run env KCSI_BIN="$B/bin" KCSI_TESTS="$B/tests" bench/livenessprobe_bench.sh
run "$B/tests/snapshot_bench" --bin "$B/bin" --tests "$B/tests"
