#!/bin/bash
# kube-emulator under concurrent writers: optimistic concurrency loses no update (8 clients x 8
# read-modify-write increments of one counter, retrying on 409), and a watch sees every one of
# the resulting events in resourceVersion order.
. "$(dirname "$0")/lib_emulator.sh"
emu_start
req POST /api/v1/namespaces/default/configmaps '{"metadata":{"name":"counter"},"data":{"n":"0"}}'
expect_code 201 "create counter"
START_RV=$(jqo .metadata.resourceVersion)
curl -sN "$S/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=$START_RV&fieldSelector=metadata.name%3Dcounter" >"$T/watch" &

increment() {
	local out="$T/w$1" conflicts=0
	for _ in $(seq 1 8); do
		while :; do
			obj=$(curl -s "$S/api/v1/namespaces/default/configmaps/counter")
			next=$(echo "$obj" | jq -c '.data.n = ((.data.n|tonumber) + 1 | tostring)')
			code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT -H 'Content-Type: application/json' \
				--data-binary "$next" "$S/api/v1/namespaces/default/configmaps/counter")
			[ "$code" = 200 ] && break
			[ "$code" = 409 ] || { echo "unexpected $code" >"$out"; return 1; }
			conflicts=$((conflicts + 1))
		done
	done
	echo "conflicts $conflicts" >"$out"
}
PIDS=()
for w in $(seq 1 8); do increment "$w" & PIDS+=($!); done
for p in "${PIDS[@]}"; do wait "$p" || fail "a writer failed: $(cat "$T"/w*)"; done

req GET /api/v1/namespaces/default/configmaps/counter
check "no lost update: 64 increments" eq "$(jqo .data.n)" "64"
check "conflicts happened and were retried" test "$(cat "$T"/w* | awk '{s+=$2} END {print s+0}')" -gt 0
for _ in $(seq 1 200); do [ "$(wc -l <"$T/watch")" -ge 64 ] && break; sleep 0.05; done
check "the watch saw 64 events" eq "$(wc -l <"$T/watch" | tr -d ' ')" "64"
check "events carry n = 1..64 in order" eq "$(jq -r .object.data.n "$T/watch" | paste -sd, -)" "$(seq -s, 1 64)"

finish
