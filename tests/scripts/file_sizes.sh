#!/usr/bin/env bash
# The house rule of docs/development.md: no .c file of src/ over 900 lines (split by concern
# instead). Prints each file over the limit and fails; tests and generated files are outside src/.
set -u
src=${1:?usage: file_sizes.sh SRC_DIR [LIMIT]}
limit=${2:-900}
over=0
while read -r n f; do
	[ "$f" = total ] && continue
	if [ "$n" -gt "$limit" ]; then
		echo "file_sizes: $f has $n lines (limit $limit): split it by concern"
		over=1
	fi
done < <(find "$src" -name '*.c' -print0 | xargs -0 wc -l)
[ $over -eq 0 ] && echo "file_sizes: every .c file under $src has at most $limit lines"
exit $over
