#!/bin/bash
# kube-emulator restarts: --state-file keeps objects and the resourceVersion counter across a
# SIGTERM (which closes open watches and exits 0) and across kill -9 (its log); old
# resourceVersions are expired after the restart, as after a kube-apiserver restart; a second
# emulator on the same state file is refused, naming the first's PID; a --listen address in use
# exits 3; a corrupt state file is a clear startup error.
. "$(dirname "$0")/lib_emulator.sh"
STATE="$T/state.json"
emu_start --state-file "$STATE"
req POST /api/v1/persistentvolumes '{"metadata":{"name":"pv-keep","finalizers":["f"]},"spec":{"capacity":{"storage":"1Gi"}}}'
expect_code 201 "create pv"
UID_KEEP=$(jqo .metadata.uid)
req POST /api/v1/namespaces "{\"metadata\":{\"name\":\"team\"}}"
req POST /api/v1/namespaces/team/configmaps '{"metadata":{"name":"c"},"data":{"k":"v"}}'
expect_code 201 "create configmap"
LAST_RV=$(jqo .metadata.resourceVersion)

curl -sN "$S/api/v1/persistentvolumes?watch=1&resourceVersion=$LAST_RV" >"$T/watch" &
WATCH=$!
sleep 0.3
START=$(date +%s)
emu_stop
RC=$?
check "SIGTERM exits 0" eq "$RC" "0"
for _ in $(seq 1 50); do kill -0 $WATCH 2>/dev/null || break; sleep 0.1; done
check "SIGTERM closed the open watch" bash -c "! kill -0 $WATCH 2>/dev/null"
check "shutdown is prompt" test $(( $(date +%s) - START )) -le 5
check "state file saved" test -s "$STATE"
check "no temporary file left" bash -c "! ls '$T' | grep -q 'state.json.tmp'"

emu_start --state-file "$STATE"
req GET /api/v1/persistentvolumes/pv-keep
expect_code 200 "pv survives restart"
check "uid survives restart" eq "$(jqo .metadata.uid)" "$UID_KEEP"
check "finalizers survive restart" eq "$(jqo '.metadata.finalizers[0]')" "f"
req GET /api/v1/namespaces/team/configmaps/c
expect_code 200 "configmap survives restart"
check "namespace survives restart" bash -c "curl -s '$S/api/v1/namespaces/team' | jq -e '.metadata.name==\"team\"' >/dev/null"
req GET /api/v1/persistentvolumes
check "list resourceVersion continues from before" eq "$(jqo .metadata.resourceVersion)" "$LAST_RV"
req POST /api/v1/persistentvolumes '{"metadata":{"name":"pv-new"},"spec":{}}'
check "new writes get higher resourceVersions" test "$(jqo .metadata.resourceVersion)" -gt "$LAST_RV"
curl -sN "$S/api/v1/persistentvolumes?watch=1&resourceVersion=1" >"$T/old"
check "pre-restart resourceVersion is expired" eq "$(jq -r '.object.code' "$T/old")" "410"
curl -sN "$S/api/v1/persistentvolumes?watch=1&resourceVersion=$LAST_RV&timeoutSeconds=1" >"$T/cur"
check "watch from the restart resourceVersion works" eq "$(jq -r '"\(.type) \(.object.metadata.name)"' "$T/cur")" "ADDED pv-new"
emu_stop
check "second SIGTERM exits 0" eq "$?" "0"

# kill -9 loses no answered write (issue 40): each one is in STATE.log before its answer, and the
# next start folds the log into the state file and resumes the resourceVersion counter.
emu_start --state-file "$STATE"
req POST /api/v1/persistentvolumes '{"metadata":{"name":"pv-killed"},"spec":{}}'
expect_code 201 "create pv before kill -9"
req DELETE /api/v1/persistentvolumes/pv-new
expect_code 200 "delete pv before kill -9"
req PATCH /api/v1/namespaces/team/configmaps/c '{"data":{"k":"v2"}}' application/merge-patch+json
expect_code 200 "patch configmap before kill -9"
KILL_RV=$(jqo .metadata.resourceVersion)
kill -KILL "$EMU_PID"
wait "$EMU_PID" 2>/dev/null
EMU_PID=""
check "the log holds the writes after kill -9" test -s "$STATE.log"
emu_start --state-file "$STATE"
req GET /api/v1/persistentvolumes/pv-killed
expect_code 200 "pv created before kill -9 survives"
req GET /api/v1/persistentvolumes/pv-new
expect_code 404 "pv deleted before kill -9 stays deleted"
req GET /api/v1/namespaces/team/configmaps/c
check "patch before kill -9 survives" eq "$(jqo .data.k)" "v2"
req GET /api/v1/persistentvolumes
check "list resourceVersion resumes at the last one handed out" eq "$(jqo .metadata.resourceVersion)" "$KILL_RV"
req POST /api/v1/persistentvolumes '{"metadata":{"name":"pv-after-kill"},"spec":{}}'
check "a write after kill -9 and restart gets a higher resourceVersion" test "$(jqo .metadata.resourceVersion)" -gt "$KILL_RV"
check "the log was folded into the state file at start" test "$(stat -c %s "$STATE.log")" -lt 1000

# Two emulators never share one state file: the second refuses at once, naming the first's PID.
PORT=${S##*:}
if timeout 10 "$KCSI_BIN/kube-emulator" --listen 127.0.0.1:0 --state-file "$STATE" >"$T/second.log" 2>&1; then
	fail "a second kube-emulator on the same --state-file must not start"
fi
check "second emulator names the state file and the holder's pid" \
	grep -q "state file $STATE is in use by another kube-emulator (pid $EMU_PID" "$T/second.log"
req GET /api/v1/persistentvolumes/pv-after-kill
expect_code 200 "the first emulator is untouched"
# A --listen address in use exits 3 (kcsi up tells it from other failures).
timeout 10 "$KCSI_BIN/kube-emulator" --listen "127.0.0.1:$PORT" >"$T/port.log" 2>&1
check "a --listen address in use exits 3" eq "$?" "3"
check "a --listen address in use is reported" grep -q "cannot listen on 127.0.0.1:$PORT: Address already in use" "$T/port.log"
emu_stop
check "SIGTERM after a kill -9 restart exits 0" eq "$?" "0"

echo '{"resourceVersion": 5, "objects": [' >"$T/bad.json"
if timeout 10 "$KCSI_BIN/kube-emulator" --listen 127.0.0.1:0 --state-file "$T/bad.json" >"$T/bad.log" 2>&1; then
	fail "a corrupt state file must stop the start"
fi
check "corrupt state file error names the file" grep -q "bad.json" "$T/bad.log"
echo '{"resourceVersion": 5, "objects": [{"apiVersion":"v9","kind":"Nope","metadata":{"name":"x"}}]}' >"$T/bad.json"
if timeout 10 "$KCSI_BIN/kube-emulator" --listen 127.0.0.1:0 --state-file "$T/bad.json" >"$T/bad.log" 2>&1; then
	fail "an unknown kind in the state file must stop the start"
fi
check "unknown kind is reported" grep -q "Nope" "$T/bad.log"
if timeout 10 "$KCSI_BIN/kube-emulator" --listen 127.0.0.1:99999 >"$T/bad.log" 2>&1; then
	fail "a bad --listen must stop the start"
fi
check "bad --listen is reported" grep -q "listen" "$T/bad.log"

finish
