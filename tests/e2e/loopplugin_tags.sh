#!/bin/bash
# kcsi-loopplugin --extra-volume-tags (seed 003, the EBS driver's flag) through the kcsi CLI:
#   - a volume created by a plugin started with tags carries them: CreateVolume, ControllerGetVolume
#     and ListVolumes show them in volume_context as tag.loop.kcsi.io/<key>, and its metadata
#     file in the pool records them;
#   - restarted without the flag, the plugin still shows the first volume's tags and creates the
#     next volume without any (tags are set at creation, as the EBS driver's);
#   - bad tags stop the plugin at start, exit 2, with the reason on stderr.
set -euo pipefail

BIN=${KCSI_BIN:?KCSI_BIN must point at the built binaries}
D=$(mktemp -d /tmp/kcsi-lp-tags-XXXXXX)
SOCK="$D/csi.sock"
PID=

fail() { echo "FAIL: $*" >&2; echo "--- plugin log (tail)" >&2; tail -20 "$D/plugin.log" >&2 || true; exit 1; }
cleanup() {
	set +e
	[ -n "$PID" ] && kill -9 "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
	rm -rf "$D"
}
trap cleanup EXIT

start_plugin() {
	"$BIN/kcsi-loopplugin" --mode controller --endpoint "unix://$SOCK" --pool-dir "$D/pool" \
		--nodeid node-1 "$@" >>"$D/plugin.log" 2>&1 &
	PID=$!
	for _ in $(seq 1 200); do
		[ -S "$SOCK" ] && k identity probe >/dev/null 2>&1 && return 0
		sleep 0.05
	done
	fail "plugin did not become ready"
}
stop_plugin() {
	kill -TERM "$PID"
	wait "$PID" || fail "plugin exited $? on SIGTERM"
	PID=
}
k() { "$BIN/kcsi" --endpoint "unix://$SOCK" --timeout 30s "$@"; }
# ctx JSON_FILE_OR_STDIN PATH: the volume_context of the volume at PATH (python dict syntax)
ctx() { python3 -c 'import json,sys
v=json.load(sys.stdin)
for p in sys.argv[1].split("."): v=v[int(p)] if isinstance(v,list) else v[p]
print(json.dumps(v.get("volume_context", {}), sort_keys=True))' "$1"; }
MNT="SINGLE_NODE_WRITER,mount,ext4"

echo "== created with tags: shown by CreateVolume, ControllerGetVolume, ListVolumes"
start_plugin --extra-volume-tags "team=storage,cost-center=42, env=e2e"
want='{"tag.loop.kcsi.io/cost-center": "42", "tag.loop.kcsi.io/env": "e2e", "tag.loop.kcsi.io/team": "storage", "type": "thin"}'
got=$(k -o json controller create-volume pvc-tagged --cap-bytes 4Mi --cap "$MNT" | ctx volume)
[ "$got" = "$want" ] || fail "CreateVolume volume_context: $got"
ID=$(k -o json controller create-volume pvc-tagged --cap-bytes 4Mi --cap "$MNT" |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["volume"]["volume_id"])')
got=$(k -o json controller get-volume "$ID" | ctx volume)
[ "$got" = "$want" ] || fail "ControllerGetVolume volume_context: $got"
got=$(k -o json controller list-volumes | ctx entries.0.volume)
[ "$got" = "$want" ] || fail "ListVolumes volume_context: $got"
python3 -c 'import json,sys
t=json.load(open(sys.argv[1]))["tags"]
sys.exit(0 if t=={"team":"storage","cost-center":"42","env":"e2e"} else 1)' "$D/pool/volumes/$ID.json" ||
	fail "metadata tags: $(cat "$D/pool/volumes/$ID.json")"
stop_plugin

echo "== restarted without the flag: the old volume keeps its tags, a new one has none"
start_plugin
got=$(k -o json controller get-volume "$ID" | ctx volume)
[ "$got" = "$want" ] || fail "tags lost across a restart: $got"
got=$(k -o json controller create-volume pvc-plain --cap-bytes 4Mi --cap "$MNT" | ctx volume)
[ "$got" = '{"type": "thin"}' ] || fail "a volume created without the flag has: $got"
stop_plugin

echo "== bad tags: exit 2 at start, with the reason"
bad() {
	local want=$1 rc=0
	shift
	out=$("$BIN/kcsi-loopplugin" --mode controller --endpoint "unix://$D/bad.sock" \
		--pool-dir "$D/pool" --nodeid node-1 --extra-volume-tags "$@" 2>&1) || rc=$?
	[ "$rc" -eq 2 ] || fail "--extra-volume-tags $* exited $rc, want 2: $out"
	grep -qF -- "$want" <<<"$out" || fail "--extra-volume-tags $*: no \"$want\" in: $out"
	[ ! -e "$D/bad.sock" ] || fail "a plugin with bad tags served"
}
bad 'missing key=value in "team"' "team"
bad 'missing key=value in "=x"' "=x"
bad "is 129 bytes long; a key has 1 to 128" "$(printf 'k%.0s' $(seq 129))=v"
bad "is 257 bytes long, more than 256" "k=$(printf 'v%.0s' $(seq 257))"
bad "holds a control character" "$(printf 'k=a\033[31m')"
bad "51 tags, more than 50" "$(seq -s, -f 'k%g=v' 51)"
echo PASS
