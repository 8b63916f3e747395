#!/usr/bin/env bash
# make test's runner: the tests of the normal build (build/) and of the ASan+UBSan build
# (build-asan/, names asan.*) in one ctest run, KCSI_TEST_JOBS at a time (default 4: on 2 cores
# the suite is CPU-bound from about 4 on, and more only makes each test slower; the figures are
# in docs/development.md), with the 20 s fuzz smoke run of every harness beside them at a lower
# priority; then the tests that time a reaction of a second (label timing, tests/resources.cmake)
# KCSI_TEST_TIMING_JOBS at a time (default 2) with nothing CPU-bound beside them. One ctest for
# both builds so that one scheduler shares the cores and a RESOURCE_LOCK of
# tests/resources.cmake holds against the other build's tests too. The last line counts every
# test of both phases and the fuzz run: "test: N passed, M failed".
#
#   scripts/test.sh [ctest args...]   e.g. scripts/test.sh -R 'e2e\.up' (no fuzz run then)
#
# The run's folder is build-tests/: its CTestTestfile.cmake names both builds; ctest keeps each
# test's last time there (Testing/Temporary/CTestCostData.txt) and starts the longest first in
# the next run. Exits non-zero when a test or a harness failed. KCSI_TEST_STRESS=N runs N CPU hogs
# (`yes`) beside it all (make test-stress).
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
jobs=${KCSI_TEST_JOBS:-4}
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

# ctest_phase WHAT ARGS...: one ctest run; adds its counts to passed/failed
passed=0
failed=0
ctest_phase() {
	local what=$1 t=$(date +%s) rc line
	shift
	ctest --test-dir "$run" --output-on-failure "$@" | tee "$run/$what.log"
	rc=${PIPESTATUS[0]}
	line=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$run/$what.log" | tail -1)
	if [ -n "$line" ]; then
		local f n
		f=$(echo "$line" | sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/')
		n=$(echo "$line" | sed -E 's/.* failed out of ([0-9]+).*/\1/')
		passed=$((passed + n - f))
		failed=$((failed + f))
	elif [ $rc -ne 0 ]; then
		failed=$((failed + 1))
	fi
	echo "test: $what: ctest ended after $(( $(date +%s) - t )) s (exit $rc)"
	return $rc
}

t0=$(date +%s)
# Everything but the timed reactions, $jobs at a time; then those (label timing) with nothing
# CPU-bound beside them.
ctest_phase all -j"$jobs" -LE 'faults-real|timing' "$@"
tested=$?
ctest_phase timing -j"${KCSI_TEST_TIMING_JOBS:-2}" -L timing -LE faults-real "$@"
timed=$?
fuzzed=0
if [ -n "$fuzz_pid" ]; then
	wait "$fuzz_pid"
	fuzzed=$?
	cat "$run/fuzz.log"
	if [ $fuzzed = 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
fi
echo "test: $(( $(date +%s) - t0 )) s in all (tests and the fuzz run, which counts as one)"
echo "test: $passed passed, $failed failed"
exit $(( tested || timed || fuzzed ))
