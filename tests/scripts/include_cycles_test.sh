#!/usr/bin/env bash
# unit.include_cycles_detects: scripts/include_cycles.sh must fail on a circle of three files,
# in each of its views, and pass once the circle is broken. The trees are made here, in a temp
# dir: three modules a, b, c whose headers include the next one's (the include view), and
# three objects in a kcsi static library whose functions call the next one's (the call view,
# which one internal header for all three hides from the include view).
set -u
script="$(cd "$(dirname "$0")/../.." && pwd)/scripts/include_cycles.sh"
T=$(mktemp -d /tmp/include_cycles_test.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
check() { # check NAME WANT_RC OUTPUT_PATTERN -- ARGS...
	local name=$1 want=$2 pat=$3 out rc
	shift 4
	out=$(bash "$script" "$@" 2>&1)
	rc=$?
	if [ $rc -eq "$want" ] && grep -q -- "$pat" <<<"$out"; then
		echo "ok: $name"
	else
		echo "FAIL: $name: exit $rc (want $want), output: $out"
		fails=$((fails + 1))
	fi
}

# Include view: a.h -> b.h -> c.h -> a.h, no two of which include each other.
mkdir -p "$T/inc/m"
for x in a b c; do echo "int $x(void);" >"$T/inc/m/$x.c"; done
echo '#include "m/b.h"' >"$T/inc/m/a.h"
echo '#include "m/c.h"' >"$T/inc/m/b.h"
echo '#include "m/a.h"' >"$T/inc/m/c.h"
check "three headers in a circle" 1 "include circle: m/a -> m/b -> m/c -> m/a" -- "$T/inc"
: >"$T/inc/m/c.h"
check "the same headers, circle broken" 0 "no circles" -- "$T/inc"

# Call view: a.c calls b, b.c calls c, c.c calls a, all through one header m/int.h.
mkdir -p "$T/call/src/m" "$T/call/lib"
echo 'int a(void); int b(void); int c(void);' >"$T/call/src/m/int.h"
printf '#include "m/int.h"\nint a(void) { return b(); }\n' >"$T/call/src/m/a.c"
printf '#include "m/int.h"\nint b(void) { return c(); }\n' >"$T/call/src/m/b.c"
printf '#include "m/int.h"\nint c(void) { return a(); }\n' >"$T/call/src/m/c.c"
build_lib() {
	local x
	rm -f "$T/call/lib/libkcsi_m.a"
	for x in a b c; do cc -c -I"$T/call/src" -o "$T/call/lib/$x.c.o" "$T/call/src/m/$x.c" || exit 1; done
	ar rcs "$T/call/lib/libkcsi_m.a" "$T"/call/lib/*.c.o
}
build_lib
check "three objects calling in a circle" 1 "call circle: libkcsi_m:a.c.o -> libkcsi_m:b.c.o -> libkcsi_m:c.c.o -> libkcsi_m:a.c.o" -- "$T/call/src" "$T/call/lib"
printf '#include "m/int.h"\nint c(void) { return 3; }\n' >"$T/call/src/m/c.c"
build_lib
check "the same objects, circle broken" 0 "no circles" -- "$T/call/src" "$T/call/lib"

echo "$(( 4 - fails )) passed, $fails failed"
[ $fails -eq 0 ]
