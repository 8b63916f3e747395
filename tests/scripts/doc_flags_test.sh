#!/usr/bin/env bash
# unit.doc_flags: every flag each binary's --help lists stands in a table of its documentation
# (tests/scripts/doc_flags.py), and the check is seen to fail: with the rows naming csi-attacher's
# --reconcile-sync taken out of a copy of the docs, it must name exactly that flag.
#   doc_flags_test.sh SRC_DIR BIN_DIR
set -u
src=${1:?usage: doc_flags_test.sh SRC_DIR BIN_DIR} bin=${2:?usage: doc_flags_test.sh SRC_DIR BIN_DIR}
py="$src/tests/scripts/doc_flags.py"
T=$(mktemp -d /tmp/doc_flags_test.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0

if out=$(python3 "$py" "$src" "$bin" 2>&1); then
	echo "ok: every --help flag is documented"
else
	echo "FAIL: the tree's docs miss flags:"; echo "$out"; fails=$((fails + 1))
fi

mkdir -p "$T/docs"
cp "$src/README.md" "$T/"
cp "$src"/docs/*.md "$T/docs/"
sed -i '/^|.*`--reconcile-sync`/d' "$T/README.md" "$T"/docs/*.md
out=$(python3 "$py" "$T" "$bin" 2>&1)
rc=$?
if [ $rc -ne 0 ] && grep -q '^csi-attacher: --reconcile-sync is in --help' <<<"$out" &&
	[ "$(grep -c 'is in --help but' <<<"$out")" -eq 1 ]; then
	echo "ok: a flag without a row fails the check, named"
else
	echo "FAIL: without its rows --reconcile-sync was not reported alone (exit $rc): $out"
	fails=$((fails + 1))
fi
[ $fails -eq 0 ] && echo PASS
exit $fails
