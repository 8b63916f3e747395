#!/bin/bash
# kube-emulator restarts: --state-file keeps objects and the resourceVersion counter across a
# SIGTERM (which closes open watches and exits 0); old resourceVersions are expired after the
# restart, as after a kube-apiserver restart; a corrupt state file is a clear startup error.
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
