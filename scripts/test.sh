#!/usr/bin/env bash
# make test's runner: the tests of the normal build (build/) and of the ASan+UBSan build
# (build-asan/, names asan.*) in one ctest run, KCSI_TEST_JOBS at a time (default 6: most tests
# wait on polls, back-offs and leases, so more tests than cores keep both cores busy; the figures
# are in docs/development.md), with the 20 s fuzz smoke run of every harness beside them at a
# lower priority. One ctest for both builds so that one scheduler shares the cores and a
# RESOURCE_LOCK of tests/resources.cmake holds against the other build's tests too.
#
#   scripts/test.sh [ctest args...]   e.g. scripts/test.sh -R 'e2e\.up' (no fuzz run then)
#
# The run's folder is build-tests/: its CTestTestfile.cmake names both builds; ctest keeps each
# test's last time there (Testing/Temporary/CTestCostData.txt) and starts the longest first in
# the next run. Exits non-zero when a test or a harness failed. KCSI_TEST_STRESS=N runs N CPU hogs
# (`yes`) beside it all (make test-stress).
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
jobs=${KCSI_TEST_JOBS:-6}
run=$src/build-tests
mkdir -p "$run"
for b in build build-asan; do
	[ -f "$src/$b/CTestTestfile.cmake" ] || { echo "test: $b is not configured (make $b)" >&2; exit 1; }
done
cat >"$run/CTestTestfile.cmake" <<EOF
# Written by scripts/test.sh: both builds' tests, run by one ctest.
subdirs("$src/build")
subdirs("$src/build-asan")
EOF

hogs=()
stop_hogs() { for p in "${hogs[@]}"; do kill "$p" 2>/dev/null; done; }
trap stop_hogs EXIT
for _ in $(seq 1 "${KCSI_TEST_STRESS:-0}"); do
	yes >/dev/null &
	hogs+=($!)
done
[ ${#hogs[@]} -eq 0 ] || echo "test: ${#hogs[@]} CPU hogs (yes) run beside the tests"

fuzz_pid=
if [ $# -eq 0 ]; then
	# Each harness alone for 20 s at nice 10, so the tests keep the cores they need; a -timeout of
	# 60 s (wall) so a harness starved by them is not taken for a hang.
	FUZZ_SECONDS=20 FUZZ_TIMEOUT=60 nice -n 10 bash "$src/scripts/fuzz.sh" "$src/build-fuzz" \
		>"$run/fuzz.log" 2>&1 &
	fuzz_pid=$!
fi

t0=$(date +%s)
ctest --test-dir "$run" -j"$jobs" -LE faults-real --output-on-failure "$@"
tested=$?
echo "test: ctest -j$jobs ended after $(( $(date +%s) - t0 )) s"
fuzzed=0
if [ -n "$fuzz_pid" ]; then
	wait "$fuzz_pid"
	fuzzed=$?
	cat "$run/fuzz.log"
fi
exit $(( tested || fuzzed ))
