#!/bin/bash
# kube-emulator fault injection: 500 / 429 + Retry-After / 409 / 404 / 410 / 504 rules by verb and
# resource (a watch's as an ERROR event when asked) with
# counts, added latency, closing all watches now, ending watches after N seconds, and reset.
. "$(dirname "$0")/lib_emulator.sh"
emu_start
faults() { curl -s -X POST -H 'Content-Type: application/json' --data-binary "$1" "$S/emulator/faults" >"$T/faults"; }
counter() { curl -s "$S/emulator/faults" | jq -r ".counters.$1"; }
mkpv() { req POST /api/v1/persistentvolumes "{\"metadata\":{\"name\":\"$1\"},\"spec\":{}}"; }

faults '{"rules":[{"verb":"create","resource":"persistentvolumes","code":500,"times":2}]}'
check "rule accepted" eq "$(jq -r '.rules|length' "$T/faults")" "1"
mkpv pv-1
expect_code 500 "first create fails"
check "500 is an InternalError Status" eq "$(jqo .reason)" "InternalError"
mkpv pv-1
expect_code 500 "second create fails"
mkpv pv-1
expect_code 201 "third create passes (times: 2)"
req POST /api/v1/namespaces/default/configmaps '{"metadata":{"name":"c"}}'
expect_code 201 "other resources are not affected"
check "500s are counted" eq "$(counter errors500)" "2"
check "the rule counts its injections" eq "$(curl -s "$S/emulator/faults" | jq -r '.rules[0].injected')" "2"

faults '{"reset":true,"rules":[{"verb":"list","resource":"*","code":429,"retryAfterSeconds":3}]}'
check "reset clears counters" eq "$(counter errors500)" "0"
curl -s -D "$T/headers" -o "$T/out" "$S/api/v1/persistentvolumes"
check "429 sends Retry-After" grep -qi '^Retry-After: 3' "$T/headers"
check "429 is TooManyRequests" eq "$(jqo '.reason+" "+(.details.retryAfterSeconds|tostring)')" "TooManyRequests 3"
req GET /api/v1/persistentvolumes/pv-1
expect_code 200 "get is not a list"
check "429s are counted" eq "$(counter errors429)" "1"

faults '{"reset":true,"rules":[{"verb":"write","resource":"persistentvolumes","code":409,"fraction":1.0}]}'
req PATCH /api/v1/persistentvolumes/pv-1 '{"metadata":{"labels":{"a":"b"}}}' application/merge-patch+json
expect_code 409 "injected conflict on patch"
check "injected conflict is a Conflict Status" eq "$(jqo .reason)" "Conflict"
req GET /api/v1/persistentvolumes/pv-1
check "the conflicted patch did not apply" eq "$(jqo '.metadata.labels.a // "none"')" "none"
check "409s are counted" eq "$(counter conflicts409)" "1"

# 404 plays a kind the server does not serve (a CRD not installed): kube-apiserver's Status.
faults '{"reset":true,"rules":[{"verb":"list","resource":"volumegroupsnapshotclasses","code":404}]}'
req GET /apis/groupsnapshot.storage.k8s.io/v1/volumegroupsnapshotclasses?limit=1
expect_code 404 "injected 404 on a list"
check "404 is kube-apiserver's NotFound for a resource it does not serve" eq \
	"$(jqo '"\(.reason) \(.message)"')" "NotFound the server could not find the requested resource"
req GET /apis/groupsnapshot.storage.k8s.io/v1/volumegroupsnapshotcontents?limit=1
expect_code 200 "another resource is served"
check "404s are counted" eq "$(counter notFound404)" "1"

faults '{"reset":true,"rules":[{"verb":"get","resource":"persistentvolumes","latencyMs":400}]}'
START=$(date +%s%N)
req GET /api/v1/persistentvolumes/pv-1
ELAPSED_MS=$(( ($(date +%s%N) - START) / 1000000 ))
expect_code 200 "delayed get still answers"
check "latency was added (${ELAPSED_MS} ms)" test "$ELAPSED_MS" -ge 400
check "delays are counted" eq "$(counter delayed)" "1"

faults '{"reset":true}'
curl -sN "$S/api/v1/persistentvolumes?watch=1&resourceVersion=0" >"$T/w1" &
W1=$!
curl -sN "$S/api/v1/persistentvolumes?watch=1&resourceVersion=0" >"$T/w2" &
W2=$!
for _ in $(seq 1 100); do [ -s "$T/w1" ] && [ -s "$T/w2" ] && break; sleep 0.05; done
faults '{"closeWatches":true}'
for _ in $(seq 1 100); do kill -0 $W1 2>/dev/null || kill -0 $W2 2>/dev/null || break; sleep 0.1; done
check "closeWatches ended both watches" bash -c "! kill -0 $W1 2>/dev/null && ! kill -0 $W2 2>/dev/null"
check "closed watches are counted" eq "$(counter watchesClosed)" "2"

req POST /emulator/faults '{"watchMaxSeconds":99999999999999}'
expect_code 400 "watchMaxSeconds past what int64 nanoseconds hold (found by fuzz_emu_request)"
req POST /emulator/faults '{"rules":[{"verb":"get","latencyMs":60001}]}'
expect_code 400 "a fault rule's latencyMs over 60 s"
check "and says the bound" grep -q "at most 60000" "$T/out"
faults '{"watchMaxSeconds":1}'
START=$(date +%s)
curl -sN --max-time 20 "$S/api/v1/persistentvolumes?watch=1&resourceVersion=0" >"$T/w3"
check "watchMaxSeconds ends watches" test $(( $(date +%s) - START )) -le 5
check "ended watches are counted" eq "$(counter watchesEnded)" "1"

# 410 and 504 "Too large resource version", as an answer or (watches, asEvent) an ERROR event
# (one rule per resource: every rule a request matches counts it, the first code answers)
faults '{"reset":true,"rules":[{"verb":"watch","resource":"persistentvolumes","code":410,"times":1},
  {"verb":"watch","resource":"persistentvolumeclaims","code":504,"retryAfterSeconds":0,"asEvent":true,"times":1},
  {"verb":"list","resource":"storageclasses","code":504,"times":1}]}'
req GET "/api/v1/persistentvolumes?watch=1&resourceVersion=5"
expect_code 410 "injected 410 on a watch"
check "410 is Expired" eq "$(jqo '.reason+" "+.message')" "Expired The resourceVersion for the provided watch is too old."
curl -s -o "$T/ev" -w '%{http_code}' "$S/api/v1/persistentvolumeclaims?watch=1&resourceVersion=7" >"$T/code"
check "asEvent: a 200 answer" eq "$(cat "$T/code")" "200"
check "asEvent: one ERROR event with the too-large Status" eq \
	"$(jq -r '"\(.type) \(.object.code) \(.object.reason) \(.object.details.causes[0].reason) \(.object.details.retryAfterSeconds)"' "$T/ev")" \
	"ERROR 504 Timeout ResourceVersionTooLarge null"
check "the too-large message names the asked and the current resourceVersion" \
	bash -c "jq -r .object.message '$T/ev' | grep -Eq '^Timeout: Too large resource version: 7, current: [0-9]+\$'"
curl -s -D "$T/headers" -o "$T/out" "$S/apis/storage.k8s.io/v1/storageclasses"
check "504 on a list says Retry-After: 1" grep -qi '^Retry-After: 1' "$T/headers"
check "504 on a list is the too-large Status" eq "$(jqo '.code')" "504"
check "410s and 504s are counted" eq "$(counter expired410) $(counter tooLarge504)" "1 2"

faults '{"reset":true}'
check "reset leaves no rules" eq "$(jq -r '.rules|length' "$T/faults")" "0"
mkpv pv-2
expect_code 201 "requests pass after reset"
CODE=$(curl -s -o "$T/out" -w '%{http_code}' -X POST -H 'Content-Type: application/json' --data-binary '{"rules":[{"code":418}]}' "$S/emulator/faults")
expect_code 400 "invalid fault rule"
CODE=$(curl -s -o "$T/out" -w '%{http_code}' -X POST --data-binary 'nope' "$S/emulator/faults")
expect_code 400 "fault request that is not JSON"

finish
