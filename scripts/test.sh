#!/usr/bin/env bash
# make test's runner: the tests of the normal build (build/) and of the ASan+UBSan build
# (build-asan/, names asan.*) in one ctest, so that one scheduler shares the cores and a
# RESOURCE_LOCK of tests/resources.cmake holds against the other build's tests too. The last line
# counts every test and the fuzz run: "test: N passed, M failed".
#
#   scripts/test.sh             the whole run (make test builds build/ and build-asan/ first):
#     1. the peers the timing tests use (kcsi's Go programs, kubectl, upstream's sidecars);
#     2. at once, three streams:
#        - the tests that time a reaction of a second (label timing, tests/resources.cmake) but
#          make no load themselves, KCSI_TEST_TIMING_JOBS at a time (default 2), at nice 0;
#        - at nice 19: every other test, KCSI_TEST_JOBS at a time (default 4: on 2 cores the
#          suite is CPU-bound from about 4 on; figures in docs/development.md). The rest of the
#          peers (Kubernetes' control plane, etcd, csi-sanity) is one of them, setup.peers: the
#          tests that run those peers wait for it, the others do not;
#        - at nice 19: the Release, clang and fuzz trees, then the 20 s fuzz smoke run of every
#          harness.
#        The timing tests sleep most of their time, and a nice-19 process gives a core back at
#        once when a nice-0 one wants it, so the others use what the timing tests leave idle and
#        the timing tests' figures stay a quiet machine's;
#     3. once the other tests are done, the hostile timing tests (label hostile), which keep both
#        cores busy and would starve a nice-19 test for a minute, one at a time.
#   scripts/test.sh ARGS...     e.g. -R 'e2e\.up': every build and peer first, then the same
#                               phases one after the other with ARGS (no fuzz run)
#   KCSI_TEST_STRESS=N          N CPU hogs (`yes`, nice 0) beside the whole run (make test-stress):
#                               the phases one after the other, since the hogs would starve a
#                               nice-19 phase, then the fuzz run
#
# Each phase has its own ctest folder under build-tests/ (timing, rest, hostile), whose
# CTestTestfile.cmake names both builds: ctest keeps each test's last time there
# (Testing/Temporary/CTestCostData.txt) and starts the longest first in the next run. A
# RESOURCE_LOCK holds within a phase; the phases share none (tests/resources.cmake). Exits
# non-zero when a test, a build or a harness failed.
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
jobs=${KCSI_TEST_JOBS:-4}
run=$src/build-tests
for b in build build-asan; do
	[ -f "$src/$b/CTestTestfile.cmake" ] || { echo "test: $b is not configured (make $b)" >&2; exit 1; }
done
for phase in timing rest hostile; do
	mkdir -p "$run/$phase"
	cat >"$run/$phase/CTestTestfile.cmake" <<EOF
# Written by scripts/test.sh: both builds' tests, run by one ctest.
subdirs("$src/build")
subdirs("$src/build-asan")
EOF
done

# before any test mounts anything: a mount namespace a test makes must not keep another test's
# volumes (tests/e2e/lib_mountns.sh)
. "$src/tests/e2e/lib_mountns.sh"
root_shared | sed 's/^/test: /' || { echo "test: cannot make / a shared mount" >&2; exit 1; }

hogs=()
stop_hogs() { for p in "${hogs[@]}"; do kill "$p" 2>/dev/null; done; }
trap stop_hogs EXIT
for _ in $(seq 1 "${KCSI_TEST_STRESS:-0}"); do
	yes >/dev/null &
	hogs+=($!)
done
[ ${#hogs[@]} -eq 0 ] || echo "test: ${#hogs[@]} CPU hogs (yes) run beside the tests"

# phase WHAT ARGS...: one ctest run in build-tests/WHAT, its output in build-tests/WHAT.log (and
# on stdout, but for the rest, which runs beside the timing tests and is shown when done) and its
# counts in build-tests/WHAT.count ("passed failed"); returns ctest's exit status
phase() {
	local what=$1 t rc line f=0 n=0
	t=$(date +%s)
	shift
	if [ "$what" = rest ]; then
		ctest --test-dir "$run/$what" --output-on-failure "$@" >"$run/$what.log" 2>&1
		rc=$?
	else
		ctest --test-dir "$run/$what" --output-on-failure "$@" 2>&1 | tee "$run/$what.log"
		rc=${PIPESTATUS[0]}
	fi
	line=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$run/$what.log" | tail -1)
	if [ -n "$line" ]; then
		f=$(echo "$line" | sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/')
		n=$(echo "$line" | sed -E 's/.* failed out of ([0-9]+).*/\1/')
	elif [ $rc -ne 0 ]; then
		f=1 n=1
	fi
	echo "$((n - f)) $f" >"$run/$what.count"
	echo "test: $what: ctest ended after $(( $(date +%s) - t )) s (exit $rc)" >>"$run/$what.log"
	return $rc
}
# show WHAT: a finished quiet phase's output
show() { echo "=== test: the $1 ==="; cat "$run/$1.log"; }
peers_rest() {
	bash "$src/scripts/peers.sh" >"$run/peers.log" 2>&1 && return 0
	tail -n 30 "$run/peers.log"
	echo "test: the peers did not build (build-tests/peers.log)"
	return 1
}
trees() {
	make -C "$src" --no-print-directory build-release build-clang build-fuzz >"$run/builds.log" 2>&1 && return 0
	tail -n 30 "$run/builds.log"
	echo "test: a build failed (build-tests/builds.log)"
	return 1
}

# The peers of the timing tests in the foreground.
early=(own kubectl csi-attacher csi-provisioner csi-resizer csi-snapshotter snapshot-controller)
bash "$src/scripts/peers.sh" "${early[@]}" || { echo "test: the peers did not build" >&2; exit 1; }

rm -f "$run"/*.count "$run"/*.log
t0=$(date +%s)
status=0
fuzzed=0
timing=(-j"${KCSI_TEST_TIMING_JOBS:-2}" -L timing -LE 'faults-real|hostile')
rest=(-j"$jobs" -LE 'faults-real|timing')
hostile=(-j"${KCSI_TEST_TIMING_JOBS:-2}" -L hostile -LE faults-real)
if [ $# -eq 0 ] && [ ${#hogs[@]} -eq 0 ]; then
	export -f phase trees
	export src run
	( nice -n 19 bash -c 'phase rest "$@"' rest "${rest[@]}" ) &
	rest_pid=$!
	# Each fuzz harness alone for 20 s, with a -timeout of 60 s (wall) so that a harness starved by
	# the tests is not taken for a hang.
	( nice -n 19 bash -c trees &&
		FUZZ_SECONDS=20 FUZZ_TIMEOUT=60 nice -n 19 bash "$src/scripts/fuzz.sh" "$src/build-fuzz" \
			>"$run/fuzz.log" 2>&1 ) &
	fuzz_pid=$!
	phase timing "${timing[@]}" || status=1
	wait "$rest_pid" || status=1
	[ ! -f "$run/rest.log" ] || show rest
	phase hostile "${hostile[@]}" || status=1
	wait "$fuzz_pid"
	fuzzed=$?
	[ ! -f "$run/fuzz.log" ] || cat "$run/fuzz.log"
	[ $fuzzed = 0 ] || status=1
else
	# One phase after the other: with ARGS, and under stress, where the hogs (nice 0) would starve
	# a nice-19 phase for as long as they run.
	{ peers_rest && trees; } || exit 1
	phase timing "${timing[@]}" "$@" || status=1
	phase rest "${rest[@]}" "$@" || status=1
	show rest
	phase hostile "${hostile[@]}" "$@" || status=1
	if [ $# -eq 0 ]; then
		FUZZ_SECONDS=20 FUZZ_TIMEOUT=60 bash "$src/scripts/fuzz.sh" "$src/build-fuzz"
		fuzzed=$?
		[ $fuzzed = 0 ] || status=1
	fi
fi

passed=0
failed=0
for what in timing rest hostile; do
	if [ -f "$run/$what.count" ]; then
		read -r p f <"$run/$what.count"
	else
		p=0 f=1 # it did not run: its peers did not build
	fi
	passed=$((passed + p))
	failed=$((failed + f))
done
if [ $# -eq 0 ]; then
	if [ $fuzzed = 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
	echo "test: $(( $(date +%s) - t0 )) s in all (tests and the fuzz run, which counts as one)"
else
	echo "test: $(( $(date +%s) - t0 )) s in all"
fi
echo "test: $passed passed, $failed failed"
exit $status
