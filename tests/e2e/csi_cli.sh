#!/bin/bash
# e2e: the kcsi CLI against csi-testdriver over a real unix socket: every verb, what the driver
# received (via --record), exit codes, JSON output parsing, secrets never printed, help.
set -u
BIN=${KCSI_BIN:?}
TESTS=${KCSI_TESTS:?}
TMP=$(mktemp -d /tmp/csi_cli.XXXXXX)
DRV_PID=
cleanup() {
	[ -n "$DRV_PID" ] && kill "$DRV_PID" 2>/dev/null && wait "$DRV_PID" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT

FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
ok() { echo "ok: $*"; }

SOCK=$TMP/csi.sock
REC=$TMP/record
"$TESTS/${KCSI_TESTDRIVER:-csi-testdriver}" --endpoint "unix://$SOCK" --record "$REC" \
	--slow NodeGetInfo=3s --fail DeleteSnapshot=ABORTED --max-volume-size 20Gi \
	2>"$TMP/driver.log" &
DRV_PID=$!
for _ in $(seq 1 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
[ -S "$SOCK" ] || { echo "driver did not start"; cat "$TMP/driver.log"; exit 1; }

K() { "$BIN/kcsi" --endpoint "unix://$SOCK" "$@"; }
# expect_rc WANT DESC -- command...
expect_rc() {
	local want=$1 desc=$2; shift 3
	"$@" >"$TMP/out" 2>"$TMP/err"
	local rc=$?
	if [ "$rc" -eq "$want" ]; then ok "$desc (exit $rc)"; else
		fail "$desc: exit $rc, want $want"; cat "$TMP/out" "$TMP/err"; fi
}
# last_request METHOD: the JSON of the last recorded request of that method.
last_request() { grep "^$1 " "$REC" | tail -1 | cut -d' ' -f2-; }
jq_ok() { python3 -c "import json,sys; d=json.load(open('$1')); sys.exit(0 if ($2) else 1)"; }

# identity
expect_rc 0 "identity info" -- K identity info
grep -q "testdriver.kcsi.dev" "$TMP/out" || fail "identity info table lacks the name"
expect_rc 0 "identity info json" -- K -o json identity info
jq_ok "$TMP/out" "d['name']=='testdriver.kcsi.dev' and d['manifest']['kind']=='test'" ||
	fail "identity info json"
expect_rc 0 "identity capabilities" -- K identity capabilities
grep -q "CONTROLLER_SERVICE" "$TMP/out" || fail "capabilities table"
expect_rc 0 "identity probe" -- K identity probe
grep -q "READY *true" "$TMP/out" || fail "probe output"

# controller
expect_rc 0 "controller capabilities json" -- K controller capabilities -o json
jq_ok "$TMP/out" "len(d['capabilities'])==10 and d['capabilities'][0]['rpc']['type']=='CREATE_DELETE_VOLUME'" ||
	fail "controller capabilities json"
expect_rc 0 "create-volume with every option" -- K controller create-volume pvc-1 \
	--cap-bytes 10Gi --limit-bytes 20Gi --param type=fast --param fs=ext4 \
	--cap SINGLE_NODE_WRITER,mount,xfs,noatime,nodev --cap MULTI_NODE_READER_ONLY,block \
	--secret password=planted-cli-s3cret --requisite zone=a,rack=r1 --preferred zone=a \
	--from-volume vol-src -o json -v 5
jq_ok "$TMP/out" "d['volume']['volume_id']=='vol-pvc-1' and d['volume']['capacity_bytes']==10737418240 and d['volume']['volume_context']['type']=='fast'" ||
	fail "create-volume json output"
last_request CreateVolume >"$TMP/req"
jq_ok "$TMP/req" "d['name']=='pvc-1' and d['capacity_range']=={'required_bytes':10737418240,'limit_bytes':21474836480} and d['parameters']=={'type':'fast','fs':'ext4'} and d['secrets']=={'password':'planted-cli-s3cret'} and d['volume_content_source']=={'volume':{'volume_id':'vol-src'}}" ||
	fail "create-volume request fields"
jq_ok "$TMP/req" "d['volume_capabilities'][0]=={'mount':{'fs_type':'xfs','mount_flags':['noatime','nodev']},'access_mode':{'mode':'SINGLE_NODE_WRITER'}} and d['volume_capabilities'][1]=={'block':{},'access_mode':{'mode':'MULTI_NODE_READER_ONLY'}}" ||
	fail "create-volume capabilities"
jq_ok "$TMP/req" "d['accessibility_requirements']=={'requisite':[{'segments':{'zone':'a','rack':'r1'}}],'preferred':[{'segments':{'zone':'a'}}]}" ||
	fail "create-volume topology"
if grep -q "planted-cli-s3cret" "$TMP/out" "$TMP/err"; then fail "secret printed by kcsi -v 5"; else ok "secret not in kcsi output at -v 5"; fi
grep -q '"secrets":"\*\*\*stripped\*\*\*"' "$TMP/err" || fail "-v 5 log lacks the stripped request"
expect_rc 0 "create-volume from snapshot" -- K controller create-volume pvc-2 --from-snapshot snap-9
jq_ok <(last_request CreateVolume) "d['volume_content_source']=={'snapshot':{'snapshot_id':'snap-9'}} and d['volume_capabilities'][0]['access_mode']['mode']=='SINGLE_NODE_WRITER'" ||
	fail "create-volume from snapshot request"
expect_rc 2 "from-snapshot with from-volume" -- K controller create-volume x --from-snapshot a --from-volume b
expect_rc 2 "bad quantity" -- K controller create-volume x --cap-bytes 10Q
expect_rc 2 "bad access mode" -- K controller create-volume x --cap NOPE,mount
expect_rc 2 "unknown option" -- K controller create-volume x --bogus 1
expect_rc 2 "missing argument" -- K controller create-volume

expect_rc 0 "publish" -- K controller publish vol-pvc-1 node-1 --readonly --cap MULTI_NODE_READER_ONLY,mount --vol-ctx a=b --secret s=planted-cli-s3cret
grep -q "devicePath *\/dev\/test\/vol-pvc-1" "$TMP/out" || fail "publish context table"
jq_ok <(last_request ControllerPublishVolume) "d['volume_id']=='vol-pvc-1' and d['node_id']=='node-1' and d['readonly'] and d['volume_context']=={'a':'b'} and d['volume_capability']['access_mode']['mode']=='MULTI_NODE_READER_ONLY'" ||
	fail "publish request"
expect_rc 15 "publish unknown volume -> NOT_FOUND" -- K controller publish nope node-1
grep -q "^NOT_FOUND: volume nope not found" "$TMP/err" || fail "NOT_FOUND message on stderr"
expect_rc 0 "list-volumes json" -- K -o json controller list-volumes
jq_ok "$TMP/out" "sorted(e['volume']['volume_id'] for e in d['entries'])==['vol-pvc-1','vol-pvc-2'] and any(e.get('status',{}).get('published_node_ids')==['node-1'] for e in d['entries'])" ||
	fail "list-volumes json"
expect_rc 0 "list-volumes paged" -- K -o json controller list-volumes --max 1
jq_ok "$TMP/out" "len(d['entries'])==1 and d['next_token']=='1'" || fail "list-volumes paging"
# Issue 16: numbers and durations are checked, never read as "no limit" or a negative deadline.
for bad in "--max abc" "--max -1" "--max 1x" "--max 99999999999" "--timeout -1s" "--timeout 0s" "-v x"; do
	expect_rc 2 "list-volumes $bad refused" -- K controller list-volumes $bad
	grep -q "kcsi: .*\(invalid count\|must be a positive duration\)" "$TMP/err" || fail "$bad: no clear error: $(cat "$TMP/err")"
done
expect_rc 2 "global --timeout -1s refused" -- K --timeout -1s identity info
expect_rc 0 "get-capacity" -- K controller get-capacity --param type=fast --topology zone=a
jq_ok <(last_request GetCapacity) "d['parameters']=={'type':'fast'} and d['accessible_topology']=={'segments':{'zone':'a'}}" ||
	fail "get-capacity request"
expect_rc 0 "validate" -- K controller validate vol-pvc-1 --cap SINGLE_NODE_WRITER,mount,ext4
grep -q "CONFIRMED *true" "$TMP/out" || fail "validate output"
expect_rc 0 "controller expand" -- K -o json controller expand vol-pvc-1 15Gi
jq_ok "$TMP/out" "d['capacity_bytes']==16106127360 and d['node_expansion_required']" || fail "expand json"
expect_rc 0 "create-snapshot" -- K -o json controller create-snapshot s1 vol-pvc-1 --param p=q
jq_ok "$TMP/out" "d['snapshot']['snapshot_id']=='snap-s1' and d['snapshot']['ready_to_use'] and d['snapshot']['creation_time']['seconds']>0" ||
	fail "create-snapshot json"
expect_rc 0 "list-snapshots" -- K controller list-snapshots
grep -q "snap-s1" "$TMP/out" || fail "list-snapshots table"
expect_rc 20 "delete-snapshot -> ABORTED" -- K controller delete-snapshot snap-s1
grep -q "^ABORTED: injected failure" "$TMP/err" || fail "ABORTED message"
expect_rc 0 "get-volume" -- K controller get-volume vol-pvc-1
grep -q "PUBLISHED_NODES *node-1" "$TMP/out" || fail "get-volume published nodes"
expect_rc 15 "get-volume unknown" -- K controller get-volume nope
expect_rc 0 "modify-volume" -- K controller modify-volume vol-pvc-1 --mutable-param iops=3000 --secret k=v
jq_ok <(last_request ControllerModifyVolume) "d['volume_id']=='vol-pvc-1' and d['mutable_parameters']=={'iops':'3000'} and d['secrets']=={'k':'v'}" ||
	fail "modify-volume request"
# a streamed answer (the driver's "ranges-N": N ranges of 4 KiB every 8 KiB), --max per response
expect_rc 0 "metadata allocated" -- K metadata allocated ranges-5 --max 2 --secret k=planted-cli-s3cret
[ "$(grep -cE '^[0-9]+ +4096$' "$TMP/out")" = 5 ] && grep -qE '^32768 +4096$' "$TMP/out" &&
	grep -q "^BLOCK_METADATA_TYPE *FIXED_LENGTH" "$TMP/out" || fail "metadata allocated table"
expect_rc 0 "metadata allocated json" -- K -o json metadata allocated ranges-5 --max 2 --starting-offset 8Ki
jq_ok "$TMP/out" "[len(m['block_metadata']) for m in d]==[2,2] and d[0]['block_metadata'][0]['byte_offset']==8192" ||
	fail "metadata allocated json: 4 ranges from 8 KiB in responses of 2"
expect_rc 0 "metadata allocated, no ranges" -- K metadata allocated ranges-0
grep -q "^No ranges" "$TMP/out" || fail "empty stream"
expect_rc 15 "metadata allocated unknown" -- K metadata allocated snap-s1
# RPCs of CSI v1.10 to v1.12 a driver does not serve (this one): UNIMPLEMENTED, exit 22
expect_rc 22 "get-snapshot unimplemented" -- K controller get-snapshot snap-s1
expect_rc 22 "metadata delta unimplemented" -- K metadata delta snap-s1 snap-s2 --max 5
grep -q "^UNIMPLEMENTED" "$TMP/err" || fail "metadata delta: $(cat "$TMP/err")"
expect_rc 2 "metadata bad --starting-offset" -- K metadata allocated snap-s1 --starting-offset lots
expect_rc 0 "unpublish" -- K controller unpublish vol-pvc-1 node-1
expect_rc 0 "delete-volume" -- K controller delete-volume vol-pvc-2 --secret k=v
grep -q "Deleted volume vol-pvc-2" "$TMP/out" || fail "delete output"

# group controller
expect_rc 0 "group capabilities" -- K group capabilities
grep -q "CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT" "$TMP/out" || fail "group capabilities table"
grep -q "GROUP_CONTROLLER_SERVICE" <(K identity capabilities) || fail "identity lacks GROUP_CONTROLLER_SERVICE"
expect_rc 0 "group create-snapshot" -- K -o json group create-snapshot g1 vol-a vol-b --param p=q --secret k=planted-cli-s3cret
jq_ok <(last_request CreateVolumeGroupSnapshot) "d['name']=='g1' and d['source_volume_ids']==['vol-a','vol-b'] and d['parameters']=={'p':'q'}" ||
	fail "group create-snapshot request"
jq_ok "$TMP/out" "d['group_snapshot']['group_snapshot_id']=='group-g1' and d['group_snapshot']['ready_to_use'] and sorted(s['source_volume_id'] for s in d['group_snapshot']['snapshots'])==['vol-a','vol-b'] and all(s['group_snapshot_id']=='group-g1' for s in d['group_snapshot']['snapshots'])" ||
	fail "group create-snapshot json"
expect_rc 0 "group get-snapshot" -- K group get-snapshot group-g1 group-g1-vol-a group-g1-vol-b
grep -q "GROUP_SNAPSHOT_ID *group-g1" "$TMP/out" && grep -q "group-g1-vol-b" "$TMP/out" || fail "group get-snapshot table"
jq_ok <(last_request GetVolumeGroupSnapshot) "d['snapshot_ids']==['group-g1-vol-a','group-g1-vol-b']" ||
	fail "group get-snapshot request"
expect_rc 0 "group delete-snapshot" -- K -v 5 group delete-snapshot group-g1 group-g1-vol-a group-g1-vol-b --secret k=planted-cli-s3cret
grep -q "Deleted group snapshot group-g1" "$TMP/out" || fail "group delete-snapshot output"
grep -q "DeleteVolumeGroupSnapshot" "$TMP/err" || fail "kcsi -v 5 did not log the group call"
if grep -q "planted-cli-s3cret" "$TMP/err"; then fail "group secret logged by kcsi -v 5"; fi
expect_rc 15 "group get-snapshot after delete -> NOT_FOUND" -- K group get-snapshot group-g1
expect_rc 2 "group create-snapshot without volumes" -- K group create-snapshot g2

# node
expect_rc 14 "node info past --timeout -> DEADLINE_EXCEEDED" -- K --timeout 300ms node info
grep -q "^DEADLINE_EXCEEDED" "$TMP/err" || fail "deadline message"
expect_rc 0 "node info" -- K node info -o json
jq_ok "$TMP/out" "d['node_id']=='test-node' and d['max_volumes_per_node']==16" || fail "node info json"
expect_rc 0 "node capabilities" -- K node capabilities
grep -q "STAGE_UNSTAGE_VOLUME" "$TMP/out" || fail "node capabilities table"
expect_rc 0 "stage" -- K node stage vol-pvc-1 /staging --pub-ctx devicePath=/dev/x --cap SINGLE_NODE_WRITER,mount,ext4 --secret a=b
jq_ok <(last_request NodeStageVolume) "d['staging_target_path']=='/staging' and d['publish_context']=={'devicePath':'/dev/x'} and d['volume_capability']['mount']['fs_type']=='ext4'" ||
	fail "stage request"
expect_rc 0 "node publish" -- K node publish vol-pvc-1 /target --staging /staging --readonly
jq_ok <(last_request NodePublishVolume) "d['target_path']=='/target' and d['staging_target_path']=='/staging' and d['readonly']" ||
	fail "node publish request"
expect_rc 0 "stats" -- K -o json node stats vol-pvc-1 /target
jq_ok "$TMP/out" "d['usage'][0]['unit']=='BYTES' and d['usage'][1]['unit']=='INODES'" || fail "stats json"
expect_rc 0 "node expand" -- K node expand vol-pvc-1 /target 2Gi
grep -q "2147483648" "$TMP/out" || fail "node expand output"
expect_rc 0 "node unpublish" -- K node unpublish vol-pvc-1 /target
expect_rc 0 "unstage" -- K node unstage vol-pvc-1 /staging

# usage, help, connection
expect_rc 0 "kcsi --help" -- "$BIN/kcsi" --help
for v in "identity info" "controller create-volume" "controller list-snapshots" "controller get-snapshot" \
	"group create-snapshot" "metadata allocated" "metadata delta" "node expand"; do
	grep -q "kcsi $v" "$TMP/out" || fail "--help lacks $v"
done
expect_rc 0 "kcsi controller --help" -- "$BIN/kcsi" controller --help
grep -q -- "--from-snapshot" "$TMP/out" || fail "controller --help lacks options"
expect_rc 0 "kcsi metadata --help" -- "$BIN/kcsi" metadata --help
grep -q -- "--starting-offset SIZE" "$TMP/out" || fail "metadata --help lacks --starting-offset"
expect_rc 2 "unknown service" -- K volume list
expect_rc 2 "unknown verb" -- K node fly
grep -q "^Verbs of node: info capabilities stage" "$TMP/err" || fail "unknown verb: no verb list: $(cat "$TMP/err")"
[ "$(wc -l <"$TMP/err")" -le 4 ] || fail "unknown verb: more than a short usage ($(wc -l <"$TMP/err") lines)"
expect_rc 2 "no service" -- "$BIN/kcsi"
[ "$(wc -l <"$TMP/err")" -le 3 ] || fail "no service: more than a short usage ($(wc -l <"$TMP/err") lines)"
expect_rc 2 "unknown flag" -- "$BIN/kcsi" --bogus identity info
[ "$(wc -l <"$TMP/err")" -le 3 ] || fail "unknown flag: more than a short usage ($(wc -l <"$TMP/err") lines)"
# --help says it once, and shows -v but not klog's file flags (still accepted)
expect_rc 0 "kcsi --help" -- "$BIN/kcsi" --help
[ "$(grep -c '^Usage:' "$TMP/out")" = 1 ] || fail "--help prints its usage line $(grep -c '^Usage:' "$TMP/out") times"
grep -q -- "^  -v value" "$TMP/out" || fail "--help lacks -v"
! grep -q -- "log_file\|logtostderr\|automaxprocs" "$TMP/out" || fail "--help lists klog's flags"
expect_rc 0 "klog flag still accepted" -- K --logtostderr=true identity info
expect_rc 2 "size too large" -- K controller create-volume x --cap-bytes 8Ei
grep -q "too large" "$TMP/err" || fail "8Ei: not called too large: $(cat "$TMP/err")"
expect_rc 0 "the largest int64 is a size" -- K controller create-volume x --cap-bytes 9223372036854775807
grep -q "9223372036854775807" "$TMP/out" || fail "the largest size did not reach the driver: $(cat "$TMP/out")"
expect_rc 2 "bad -o" -- K -o yaml identity info
expect_rc 3 "no driver" -- "$BIN/kcsi" --endpoint "unix://$TMP/none.sock" --connect-timeout 200ms identity info
# Without --connect-timeout nothing is waited for: each mistake fails at once, with its reason.
# expect_fast WHAT PATTERN PATH: exit 3 well within the 10 s a silent peer is given, the reason
# on stderr
expect_fast() {
	local t0=$SECONDS
	expect_rc 3 "$1" -- "$BIN/kcsi" --endpoint "unix://$3" identity info
	[ $((SECONDS - t0)) -le 5 ] || fail "$1: took $((SECONDS - t0)) s"
	grep -q "$2" "$TMP/err" || fail "$1: stderr lacks \"$2\": $(cat "$TMP/err")"
}
expect_fast "missing socket" "$TMP/none.sock does not exist" "$TMP/none.sock"
touch "$TMP/plain"
expect_fast "not a socket" "$TMP/plain is not a socket" "$TMP/plain"
python3 -c "import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])" "$TMP/stale.sock"
expect_fast "nobody listens" "nobody listens on $TMP/stale.sock" "$TMP/stale.sock"
# an HTTP/1.1 server on a unix socket answers the HTTP/2 preface with 400 and closes
python3 -c '
import os, socket, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1] + ".tmp"); s.listen(4)
os.rename(sys.argv[1] + ".tmp", sys.argv[1])  # in place only once it listens
while True:
    c, _ = s.accept()
    try:
        c.recv(4096)
        c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    except OSError:
        pass
    c.close()
' "$TMP/http1.sock" &
HTTP1_PID=$!
for _ in $(seq 1 50); do [ -S "$TMP/http1.sock" ] && break; sleep 0.1; done
expect_fast "not gRPC" "$TMP/http1.sock does not speak gRPC" "$TMP/http1.sock"
kill "$HTTP1_PID" 2>/dev/null
expect_rc 2 "tcp endpoint refused" -- "$BIN/kcsi" --endpoint tcp://127.0.0.1:1 identity info
if grep -rq "planted-cli-s3cret" "$TMP/out" "$TMP/err"; then fail "secret leaked"; fi

echo "$FAILS failures"
[ "$FAILS" -eq 0 ]
