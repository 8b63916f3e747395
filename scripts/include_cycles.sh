#!/usr/bin/env bash
# Fails when two files of src/ depend on each other: the rule is that a file only uses what is
# below it. Two views of "uses", both needed:
#   includes  module A (A.c and A.h) includes B.h while module B (B.c or B.h) includes A.h,
#             both modules with a .c file;
#   symbols   (with a build's lib dir) A.c calls or reads something B.c defines and B.c
#             something A.c defines, which a header shared by both (one API over two .c files,
#             an internal header) hides from the include view.
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

# Prints "A B" once for every pair of lines "A B" and "B A" in the edge list $1.
both_ways() {
	awk '{ e[$1 " " $2] = 1 } END { for (k in e) { split(k, p, " ");
		if (p[1] < p[2] && ((p[2] " " p[1]) in e)) print k } }' <<<"$1" | sort
}
while read -r a b; do
	[ -n "$a" ] && { echo "include circle: $a and $b include each other's header" >&2; fail=1; }
done <<<"$(both_ways "$edges")"

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
	while read -r a b; do
		[ -n "$a" ] && { echo "call circle: $a and $b each use a function of the other" >&2; fail=1; }
	done <<<"$(both_ways "$(object_uses "$lib")")"
fi
[ $fail -eq 0 ] && echo "no circles among $(wc -l <<<"$edges") include edges${lib:+ and the calls in $lib}"
exit $fail
