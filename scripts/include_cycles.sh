#!/usr/bin/env bash
# Fails when files of src/ depend on each other in a circle of any length (A uses B, B uses C,
# C uses A): the rule is that a file only uses what is below it. Two views of "uses", both needed:
#   includes  module A (A.c and A.h) includes B.h, both modules with a .c file;
#   symbols   (with a build's lib dir) A.c calls or reads something B.c defines, which a header
#             shared by several files (one API over many .c files, an internal header) hides
#             from the include view.
# scripts/cycles.py finds the circles (strongly connected components) and prints the shortest
# one through each.
# And one unit must stay replaceable: kube/http.h (the HTTP/1.1 transport) is included by
# kube/client.c alone, so informers, watches and the rest see only the client's API.
#   scripts/include_cycles.sh SRC_DIR [LIB_DIR]      e.g. scripts/include_cycles.sh src build/lib
set -euo pipefail
src=${1:?usage: include_cycles.sh SRC_DIR [LIB_DIR]}
lib=${2:-}
fail=0

# Module of a file: its path below src without the extension ("emulator/emu_reply"). Only
# modules with code count: a header of types alone (emulator/emu_internal.h) uses nothing, and
# what a shared header hides is the symbol view's to find.
modules=$(cd "$src" && find . -name '*.c' | sed 's|^\./||; s|\.c$||' | sort)
all_edges=$(cd "$src" && find . -name '*.[ch]' | sed 's|^\./||' | sort | while read -r f; do
	sed -n 's/^#include "\([a-z_0-9]*\/[a-z_0-9]*\)\.h".*/\1/p' "$f" |
		while read -r to; do [ "$to" != "${f%.*}" ] && echo "${f%.*} $to"; done
done | sort -u)
edges=$(awk 'NR == FNR { m[$1] = 1; next } ($1 in m) && ($2 in m)' <(echo "$modules") - <<<"$all_edges")

# Prints one line per circle in the edge list $1 ("a -> b -> a").
circles() { python3 "$(dirname "$0")/cycles.py" <<<"$1" || true; }
while read -r c; do
	[ -n "$c" ] && { echo "include circle: $c" >&2; fail=1; }
done <<<"$(circles "$edges")"

while read -r a b; do
	if [ "$b" = kube/http ] && [ "$a" != kube/client ] && [[ "$a" != kube/http_* ]]; then
		echo "layering: $a includes kube/http.h; only kube/client.c may (docs/kube-client.md)" >&2
		fail=1
	fi
done <<<"$all_edges"

# Uses between objects: "<library>:<member> <library>:<member>" when the first object uses a
# symbol the second defines, for every kcsi static library.
NM_AWK='NF >= 3 && $(NF-1) ~ /^[TDBR]$/ { split($1, p, ":"); print "D", L ":" p[2], $NF }
	$(NF-1) == "U" { split($1, p, ":"); print "U", L ":" p[2], $NF }'
USE_AWK='$1 == "D" { def[$3] = $2 } $1 == "U" { n++; user[n] = $2; sym[n] = $3 }
	END { for (i = 1; i <= n; i++) { d = def[sym[i]]; if (d != "" && d != user[i]) print user[i], d } }'
object_uses() {
	local a
	for a in "$1"/libkcsi_*.a; do
		nm -A "$a" 2>/dev/null | awk -v L="$(basename "$a" .a)" "$NM_AWK"
	done | awk "$USE_AWK" | sort -u
}
if [ -n "$lib" ]; then
	while read -r c; do
		[ -n "$c" ] && { echo "call circle: $c (each uses a function or variable of the next)" >&2; fail=1; }
	done <<<"$(circles "$(object_uses "$lib")")"
fi
[ $fail -eq 0 ] && echo "no circles among $(wc -l <<<"$edges") include edges${lib:+ and the calls in $lib}"
exit $fail
