#!/usr/bin/env bash
# make test's runner: the tests of the normal build (build/) and of the ASan+UBSan build
# (build-asan/, names asan.*) in one ctest, so that one scheduler shares the cores and a
# RESOURCE_LOCK of tests/resources.cmake holds against the other build's tests too. The last line
# counts every test and the fuzz run: "test: N passed, M failed".
#
#   scripts/test.sh             the whole run (make test builds build/ and build-asan/ first):
#     1. the peers the timing tests use (kcsi's Go programs, kubectl, upstream's sidecars);
#     2. the tests that time a reaction of a second (label timing, tests/resources.cmake),
#        KCSI_TEST_TIMING_JOBS at a time (default 2), with only work at nice 19 beside them:
#        the rest of the peers (Kubernetes' control plane, etcd, csi-sanity), the Release, clang
#        and fuzz trees, then the 20 s fuzz smoke run of every harness. Those tests sleep much of
#        their time, and a nice-19 process gives a core back at once, so a cold machine's builds
#        use what the timing tests leave idle and their figures stay a quiet machine's;
#     3. everything else, KCSI_TEST_JOBS at a time (default 4: on 2 cores the suite is CPU-bound
#        from about 4 on, and more only makes each test slower; figures in docs/development.md).
#   scripts/test.sh ARGS...     e.g. -R 'e2e\.up': every build and peer first, then both phases
#                               with ARGS (no fuzz run)
#
# The run's folder is build-tests/: its CTestTestfile.cmake names both builds; ctest keeps each
# test's last time there (Testing/Temporary/CTestCostData.txt) and starts the longest first in
# the next run. Exits non-zero when a test, a build or a harness failed. KCSI_TEST_STRESS=N runs N
# CPU hogs (`yes`) beside it all (make test-stress).
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

# The peers of the timing tests in the foreground; the other builds at nice 19 (beside the timing
# tests in a whole run, first when ARGS select tests).
early=(own kubectl csi-attacher csi-provisioner csi-resizer csi-snapshotter snapshot-controller)
bash "$src/scripts/peers.sh" "${early[@]}" || { echo "test: the peers did not build" >&2; exit 1; }
background_builds() {
	nice -n 19 bash "$src/scripts/peers.sh" &&
		nice -n 19 make -C "$src" --no-print-directory build-release build-clang build-fuzz
}
bg_pid= fuzz_pid=
if [ $# -eq 0 ]; then
	background_builds >"$run/builds.log" 2>&1 &
	bg_pid=$!
	# Then each harness alone for 20 s, nice 19 too; a -timeout of 60 s (wall) so a harness starved
	# by the tests is not taken for a hang.
	( while kill -0 "$bg_pid" 2>/dev/null; do sleep 1; done
	  FUZZ_SECONDS=20 FUZZ_TIMEOUT=60 nice -n 19 bash "$src/scripts/fuzz.sh" "$src/build-fuzz" ) \
		>"$run/fuzz.log" 2>&1 &
	fuzz_pid=$!
else
	background_builds || { echo "test: a build failed" >&2; exit 1; }
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
ctest_phase timing -j"${KCSI_TEST_TIMING_JOBS:-2}" -L timing -LE faults-real "$@"
timed=$?
built=0
if [ -n "$bg_pid" ]; then
	wait "$bg_pid"
	built=$?
	if [ $built != 0 ]; then
		tail -n 30 "$run/builds.log"
		echo "test: the background builds failed (build-tests/builds.log); the other tests cannot run"
		failed=$((failed + 1))
	fi
	echo "test: background builds done $(( $(date +%s) - t0 )) s after the timing tests began"
fi
tested=1
[ $built != 0 ] || { ctest_phase all -j"$jobs" -LE 'faults-real|timing' "$@"; tested=$?; }
fuzzed=0
if [ -n "$fuzz_pid" ]; then
	wait "$fuzz_pid"
	fuzzed=$?
	cat "$run/fuzz.log"
	if [ $fuzzed = 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
fi
echo "test: $(( $(date +%s) - t0 )) s in all (tests and the fuzz run, which counts as one)"
echo "test: $passed passed, $failed failed"
exit $(( tested || timed || built || fuzzed ))
