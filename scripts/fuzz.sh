#!/usr/bin/env bash
# Runs every libFuzzer harness of a fuzz build (tests/fuzz) for FUZZ_SECONDS each, one at a time,
# from its seed corpus (tests/fuzz/corpus/<harness>, read-only) plus a working corpus in
# FUZZ_WORK (default build-fuzz/corpus-work, kept between runs so coverage accumulates).
# Fails on the first crash, leak, timeout or sanitizer report; the reproducer is written to
# FUZZ_WORK/<harness>/crash-* and its path printed. Prints per harness: seconds, execs, coverage.
#   scripts/fuzz.sh [BUILD_DIR] [HARNESS...]   (BUILD_DIR default build-fuzz)
# FUZZ_TIMEOUT (default 10) is libFuzzer's -timeout: seconds of wall time one input may take.
set -uo pipefail
build=${1:-build-fuzz}
shift || true
secs=${FUZZ_SECONDS:-60}
timeout=${FUZZ_TIMEOUT:-10}
work=${FUZZ_WORK:-$build/corpus-work}
src=$(cd "$(dirname "$0")/.." && pwd)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

harnesses=("$@")
if [ ${#harnesses[@]} -eq 0 ]; then
	for f in "$build"/fuzz/fuzz_*; do [ -x "$f" ] && harnesses+=("$(basename "$f")"); done
fi
if [ ${#harnesses[@]} -eq 0 ]; then
	echo "fuzz: no harness in $build/fuzz (configure with CC=clang -DKCSI_FUZZ=ON)" >&2
	exit 1
fi
rc=0
for h in "${harnesses[@]}"; do
	mkdir -p "$work/$h"
	log="$work/$h.log"
	"$build/fuzz/$h" -max_total_time="$secs" -timeout="$timeout" -rss_limit_mb=2048 -max_len=65536 \
		-print_final_stats=1 -artifact_prefix="$work/$h/" "$work/$h" "$src/tests/fuzz/corpus/$h" \
		>"$log" 2>&1
	r=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
	cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
	if [ $r -ne 0 ]; then
		echo "fuzz: $h FAILED after ${execs:-?} execs (exit $r); reproducer and report:" >&2
		ls "$work/$h"/crash-* "$work/$h"/leak-* "$work/$h"/timeout-* "$work/$h"/oom-* 2>/dev/null >&2
		grep -m1 -A25 -E "ERROR: |runtime error|deadly signal" "$log" >&2
		rc=1
	else
		echo "fuzz: $h ok: ${secs}s, ${execs:-?} execs, $cov"
	fi
done
exit $rc
