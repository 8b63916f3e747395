#!/bin/bash
# kube-emulator watches over raw HTTP: resume from a resourceVersion, synthetic ADDED for "0",
# selectors (leaving the selection is DELETED), namespaces, bookmarks, sendInitialEvents,
# timeoutSeconds, and 410 Expired for history that is gone (watch and list continue).
. "$(dirname "$0")/lib_emulator.sh"
emu_start --watch-history 20 --bookmark-interval 1s

# watch_bg NAME QUERY: a watch in the background, its stream in $T/NAME
watch_bg() {
	curl -sN "$S/api/v1/namespaces/default/configmaps?watch=1&$2" >"$T/$1" &
}
# wait_lines FILE N: polls until FILE has at least N lines (up to 20 s)
wait_lines() {
	for _ in $(seq 1 400); do
		[ "$(wc -l <"$1" 2>/dev/null || echo 0)" -ge "$2" ] && return 0
		sleep 0.05
	done
	echo "  $1 has $(wc -l <"$1") lines, wanted $2" >&2
	return 1
}
events() { jq -r '"\(.type) \(.object.metadata.name // "-")"' "$T/$1" | paste -sd, -; }
mk() { req POST /api/v1/namespaces/default/configmaps "{\"metadata\":{\"name\":\"$1\",\"labels\":{\"app\":\"$2\"}}}"; }
patch_label() { req PATCH /api/v1/namespaces/default/configmaps/$1 "{\"metadata\":{\"labels\":{\"app\":\"$2\"}}}" application/merge-patch+json; }

mk cm-a web
expect_code 201 "create cm-a"
RV_A=$(jqo .metadata.resourceVersion)

watch_bg all "resourceVersion=$RV_A"
watch_bg initial "resourceVersion=0"
watch_bg web "resourceVersion=$RV_A&labelSelector=app%3Dweb"
watch_bg named "resourceVersion=$RV_A&fieldSelector=metadata.name%3Dcm-b"
curl -sN "$S/api/v1/namespaces/kube-system/configmaps?watch=1&resourceVersion=$RV_A" >"$T/other-ns" &
check "rv=0 starts with synthetic ADDED" wait_lines "$T/initial" 1
check "synthetic ADDED names cm-a" eq "$(events initial)" "ADDED cm-a"

mk cm-b web
patch_label cm-b db
patch_label cm-b web
req DELETE /api/v1/namespaces/default/configmaps/cm-b
expect_code 200 "delete cm-b"
DEL_RV=$(curl -s "$S/api/v1/namespaces/default/configmaps" | jq -r .metadata.resourceVersion)

check "all events arrive" wait_lines "$T/all" 4
check "events in order" eq "$(events all)" "ADDED cm-b,MODIFIED cm-b,MODIFIED cm-b,DELETED cm-b"
check "event resourceVersions strictly increase" bash -c \
	"jq -s '[.[].object.metadata.resourceVersion|tonumber] | . == (sort|unique)' '$T/all' | grep -q true"
check "DELETED carries the deletion resourceVersion" eq \
	"$(jq -rs '.[3].object.metadata.resourceVersion' "$T/all")" "$DEL_RV"
check "label-selected watch events" wait_lines "$T/web" 4
check "leaving the selection is DELETED, entering is ADDED" eq "$(events web)" \
	"ADDED cm-b,DELETED cm-b,ADDED cm-b,DELETED cm-b"
check "field-selected watch" wait_lines "$T/named" 4
check "field selector filters by name" eq "$(jq -r .object.metadata.name "$T/named" | sort -u)" "cm-b"
check "rv=0 watch goes live after the initial state" wait_lines "$T/initial" 5
check "other namespace sees nothing" eq "$(wc -c <"$T/other-ns")" "0"

# resume: a watch from the rv of the first event sees only the later ones
FIRST_RV=$(jq -rs '.[0].object.metadata.resourceVersion' "$T/all")
curl -sN "$S/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=$FIRST_RV&timeoutSeconds=1" >"$T/resume"
check "resume from a resourceVersion" eq "$(events resume)" "MODIFIED cm-b,MODIFIED cm-b,DELETED cm-b"

# timeoutSeconds ends the stream; bookmarks carry the latest resourceVersion
START=$(date +%s)
curl -sN "$S/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=$DEL_RV&timeoutSeconds=3&allowWatchBookmarks=true" >"$T/bm"
check "timeoutSeconds ends the watch" test $(( $(date +%s) - START )) -le 6
# a timeoutSeconds past what int64 nanoseconds hold is only long (found by fuzz_emu_request: the
# multiplication overflowed, which UBSan aborts on); the client ends this one
curl -sN --max-time 1 "$S/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=99999999999999" >/dev/null
req GET /api/v1/namespaces/default/configmaps
expect_code 200 "a request after a watch with timeoutSeconds=99999999999999"
check "bookmarks were sent" bash -c "jq -r .type '$T/bm' | grep -q BOOKMARK"
check "bookmark carries the latest resourceVersion" eq \
	"$(jq -r 'select(.type=="BOOKMARK")|.object.metadata.resourceVersion' "$T/bm" | tail -1)" "$DEL_RV"
check "bookmark has the kind" eq "$(jq -r 'select(.type=="BOOKMARK")|.object.kind' "$T/bm" | head -1)" "ConfigMap"

# sendInitialEvents: the initial state ends with an annotated bookmark
curl -sN "$S/api/v1/namespaces/default/configmaps?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1" >"$T/wl"
check "sendInitialEvents: ADDED then the initial-events-end bookmark" eq \
	"$(jq -r '"\(.type) \(.object.metadata.annotations["k8s.io/initial-events-end"] // .object.metadata.name)"' "$T/wl" | head -2 | paste -sd, -)" \
	"ADDED cm-a,BOOKMARK true"

# a resourceVersion from the future (the store went back in time): a list is 504 Timeout with
# the ResourceVersionTooLarge cause at once; a watch waits 3 s for the store, then one ERROR
# event with that Status (kube-apiserver's watch-list answer; docs/kube-emulator.md)
CUR=$(curl -s "$S/api/v1/namespaces/default/configmaps" | jq -r .metadata.resourceVersion)
req GET "/api/v1/namespaces/default/configmaps?resourceVersion=$((CUR + 1000))"
expect_code 504 "list at a future resourceVersion"
check "future resourceVersion cause" eq "$(jqo '.details.causes[0].reason')" "ResourceVersionTooLarge"
check "future resourceVersion message" eq "$(jqo .message)" "Timeout: Too large resource version: $((CUR + 1000)), current: $CUR"
START=$(date +%s.%N)
curl -sN "$S/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=$((CUR + 1000))&allowWatchBookmarks=true" >"$T/future"
WAITED=$(awk -v a="$START" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
check "future watch: one ERROR event, no bookmark" eq "$(jq -r .type "$T/future" | paste -sd, -)" "ERROR"
check "future watch: the too-large Status" eq \
	"$(jq -r '"\(.object.code) \(.object.reason) \(.object.details.causes[0].reason)"' "$T/future")" "504 Timeout ResourceVersionTooLarge"
check "future watch: after about 3 s ($WAITED)" awk -v w="$WAITED" 'BEGIN {exit !(w >= 2.9 && w < 10)}'
# the store reaches it within the wait: the watch goes on from there
watch_bg catchup "resourceVersion=$((CUR + 1))&timeoutSeconds=5"
watch_bg catchup_wl "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion=$((CUR + 1))&timeoutSeconds=5"
sleep 0.5
mk cm-f1 web
mk cm-f2 web
check "future watch caught up: the events after its resourceVersion" wait_lines "$T/catchup" 1
check "future watch caught up: only cm-f2" eq "$(jq -r 'select(.type != "BOOKMARK") | "\(.type) \(.object.metadata.name)"' "$T/catchup" | paste -sd, -)" "ADDED cm-f2"
end_bookmark() { # FILE: has the initial-events-end bookmark, within 5 s
	for _ in $(seq 1 100); do
		jq -r 'select(.type == "BOOKMARK") | .object.metadata.annotations["k8s.io/initial-events-end"]' "$1" 2>/dev/null |
			grep -q true && return 0
		sleep 0.05
	done
	return 1
}
check "future watch-list caught up: its initial events end with the bookmark" end_bookmark "$T/catchup_wl"
check "future watch-list caught up: cm-f1 among its initial events" \
	bash -c "jq -r 'select(.type == \"ADDED\") | .object.metadata.name' '$T/catchup_wl' | grep -qx cm-f1"
req DELETE /api/v1/namespaces/default/configmaps/cm-f1
req DELETE /api/v1/namespaces/default/configmaps/cm-f2
req GET "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=18446744073709551615"
expect_code 400 "resourceVersion out of range"

# 410: push the first events out of the 20-event history
mk cm-c web
req GET "/api/v1/namespaces/default/configmaps?limit=1"
OLD_TOKEN=$(jqo .metadata.continue)
check "a continue token was issued" test "$OLD_TOKEN" != null
for i in $(seq 1 25); do patch_label cm-c "v$i"; done
curl -sN "$S/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=$RV_A" >"$T/expired"
check "expired watch gets one ERROR event" eq "$(jq -r .type "$T/expired" | paste -sd, -)" "ERROR"
check "ERROR is a 410 Expired Status" eq "$(jq -r '"\(.object.kind) \(.object.code) \(.object.reason)"' "$T/expired")" "Status 410 Expired"
check "ERROR message" bash -c "jq -r .object.message '$T/expired' | grep -q '^too old resource version: $RV_A '"
req GET "/api/v1/namespaces/default/configmaps?limit=1&continue=$OLD_TOKEN"
expect_code 410 "expired continue token"
check "expired continue is Expired" eq "$(jqo .reason)" "Expired"
check "a watch that kept up is still live" bash -c "jq -r .type '$T/all' | tail -1 | grep -q MODIFIED"
check "a kept-up watch has every event" wait_lines "$T/all" 30

finish
