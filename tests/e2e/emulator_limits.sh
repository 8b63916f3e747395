#!/bin/bash
# kube-emulator hardening (issue 16): what a small request may make the server build (patch
# results bounded in bytes and depth, JSON patch copy loops, operation count), watch history
# bounded in bytes, strategic merge of a large list in linear time, bad URL escapes, idle
# connections against the connection limit, SIGTERM within a second whatever is running, and
# the default watch history's memory bound.
. "$(dirname "$0")/lib_emulator.sh"
emu_start --watch-history-mib=1 --idle-timeout=2s --max-connections=24
CM=/api/v1/namespaces/default/configmaps

# --- patch results ---
req POST $CM '{"metadata":{"name":"c"},"data":{"a":"x"}}'
expect_code 201 "create"
OPS=$(python3 -c 'import json; print(json.dumps([{"op":"add","path":"/data/a","value":"y"*1000}]+[{"op":"copy","from":"/data","path":"/data/k%d"%i} for i in range(40)]))')
req PATCH $CM/c "$OPS" application/json-patch+json
expect_code 413 "a JSON patch copy loop (doubling the object 40 times)"
check "413 says the copy limit" bash -c "jq -r .message '$T/out' | grep -q 'copy operations of this patch duplicate more than'"
req GET $CM/c
check "the object is unchanged" eq "$(jqo .data.a)" "x"
python3 -c 'import json; print(json.dumps([{"op":"test","path":"/data/a","value":"x"}]*10001))' >"$T/ops.json"
CODE=$(curl -s -o "$T/out" -w '%{http_code}' -X PATCH -H 'Content-Type: application/json-patch+json' --data-binary @"$T/ops.json" "$S$CM/c")
expect_code 413 "a JSON patch of 10001 operations"
DEEP=$(python3 -c 'print("{\"a\":"*200 + "1" + "}"*200)')
req PATCH $CM/c "[{\"op\":\"add\",\"path\":\"/metadata/annotations\",\"value\":{}},{\"op\":\"add\",\"path\":\"/x\",\"value\":$DEEP},{\"op\":\"copy\",\"from\":\"/x\",\"path\":\"/x/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a\"}]" application/json-patch+json
expect_code 422 "a JSON patch nesting 200 levels into 100"
check "422 says the depth limit" bash -c "jq -r .message '$T/out' | grep -q 'nest deeper than 256'"
req POST $CM "$(python3 -c 'print("{\"metadata\":{\"name\":\"d\"},\"data\":{},\"x\":" + "["*300 + "]"*300 + "}")')"
expect_code 400 "a body nesting 300 levels"
python3 -c 'import json; print(json.dumps({"metadata":{"name":"big"},"data":{"a":"x"*2500000}}))' >"$T/big.json"
CODE=$(curl -s -o "$T/out" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @"$T/big.json" "$S$CM")
expect_code 201 "a 2.5 MB ConfigMap"
python3 -c 'import json; print(json.dumps({"data":{"b":"y"*2500000}}))' >"$T/bigp.json"
CODE=$(curl -s -o "$T/out" -w '%{http_code}' -X PATCH -H 'Content-Type: application/merge-patch+json' --data-binary @"$T/bigp.json" "$S$CM/big")
expect_code 413 "a merge patch that would make a 5 MB object"
check "413 names the limit" bash -c "jq -r .message '$T/out' | grep -q 'the limit is 3145728'"
CODE=$(curl -s -o "$T/out" -w '%{http_code}' -X PATCH -H 'Content-Type: application/strategic-merge-patch+json' --data-binary @"$T/bigp.json" "$S$CM/big")
expect_code 413 "a strategic merge patch that would make a 5 MB object"

# --- strategic merge of a large list: linear, and the store stays available meanwhile ---
python3 -c 'import json; print(json.dumps({"metadata":{"name":"many"},"spec":{"containers":[{"name":"c%d"%i,"image":"a"} for i in range(20000)]}}))' >"$T/pod.json"
CODE=$(curl -s -o "$T/out" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @"$T/pod.json" "$S/api/v1/namespaces/default/pods")
expect_code 201 "a pod of 20000 containers"
python3 -c 'import json; print(json.dumps({"spec":{"containers":[{"name":"c%d"%i,"image":"b"} for i in range(19999,-1,-1)]}}))' >"$T/podp.json"
START=$(date +%s%N)
CODE=$(curl -s -o "$T/out" -w '%{http_code}' -X PATCH -H 'Content-Type: application/strategic-merge-patch+json' --data-binary @"$T/podp.json" "$S/api/v1/namespaces/default/pods/many")
MS=$(( ($(date +%s%N) - START) / 1000000 ))
expect_code 200 "strategic merge of 20000 containers by name"
check "it took under 3 s (took ${MS} ms; the quadratic merge took 5 s, this one 0.2 s)" test "$MS" -lt 3000
check "every container merged" eq "$(jq '[.spec.containers[]|select(.image=="b")]|length' "$T/out")" "20000"

# --- watch history bounded by bytes (1 MiB here), not only by count ---
req GET $CM/c
RV0=$(jqo .metadata.resourceVersion)
for i in 1 2 3 4 5 6; do
	python3 -c "import json; print(json.dumps({'data':{'a':'$i'*300000}}))" >"$T/p$i.json"
	curl -s -o /dev/null -X PATCH -H 'Content-Type: application/merge-patch+json' --data-binary @"$T/p$i.json" "$S$CM/c"
done
curl -s -m 5 "$S$CM?watch=1&resourceVersion=$RV0" >"$T/w.out"
check "a watch from before 1.8 MB of events is 410 Expired" eq "$(head -1 "$T/w.out" | jq -r '.type + " " + (.object.code|tostring)')" "ERROR 410"

# --- bad escapes in the URL ---
req GET "$CM/a%FFb"
expect_code 400 "%FF (not UTF-8) in a name"
req GET "$CM/a%00b"
expect_code 400 "%00 in a path"
check "400 says why" bash -c "jq -r .message '$T/out' | grep -q 'escaped NUL'"
req GET "$CM/a%zzb"
expect_code 400 "a bad %-escape"
check "a log line for the bad URL" grep -q "Refused a request with a bad URL" "$T/emulator.log"
req GET "$CM/c"
expect_code 200 "the server still answers"

# --- idle connections: the limit is 24, idle ones are closed after 2 s; watches stay open ---
# from the rv before the last change, so the first frame shows the watch is open
curl -s -N "$S$CM?watch=1&resourceVersion=$(( $(jqo .metadata.resourceVersion) - 1 ))" >"$T/quiet.out" &
WATCH=$!
for _ in $(seq 1 100); do [ -s "$T/quiet.out" ] && break; sleep 0.1; done
python3 - "$S" "$T/idle.ready" >"$T/idle.out" 2>&1 <<'PY' &
import socket, sys, time
host, port = sys.argv[1].split("//")[1].split(":")
socks = []
for _ in range(40):
    try:
        socks.append(socket.create_connection((host, int(port)), timeout=1))
    except OSError:
        pass
open(sys.argv[2], "w").close()
time.sleep(6)
PY
IDLE=$!
for _ in $(seq 1 100); do [ -e "$T/idle.ready" ] && break; sleep 0.1; done
sleep 0.2
C1=$(curl -s -o /dev/null -w '%{http_code}' -m 1 "$S$CM/c")
sleep 3
C2=$(curl -s -o /dev/null -w '%{http_code}' -m 2 "$S$CM/c")
check "with 24 idle connections held, a new client is refused (got $C1)" test "$C1" != 200
check "once they have been idle 2 s, clients are served again (got $C2)" test "$C2" = 200
curl -s -o /dev/null -X PATCH -H 'Content-Type: application/merge-patch+json' -d '{"data":{"q":"1"}}' "$S$CM/c"
sleep 0.5
check "a watch quiet for 4 s (longer than the idle timeout) still gets the next event" grep -q '"q":"1"' "$T/quiet.out"
kill $WATCH $IDLE 2>/dev/null
wait $WATCH $IDLE 2>/dev/null

# --- SIGTERM within a second, even during a 20 s injected delay ---
req POST /emulator/faults '{"rules":[{"verb":"get","resource":"*","latencyMs":20000}]}'
curl -s -o /dev/null -m 30 "$S$CM/c" &
SLOW=$!
sleep 0.5
START=$(date +%s%N)
RC=0
emu_stop || RC=$?
MS=$(( ($(date +%s%N) - START) / 1000000 ))
check "SIGTERM exit status 0 (got $RC)" test "$RC" = 0
# The 1 s claim is the normal build's. Under ASan, exit adds LeakSanitizer's scan of the heap and
# every free goes through the quarantine: 62 ms on a quiet machine, but CI's timing phase saw
# 1,957 ms once beside two other tests; the sanitizer build is there for memory errors and allows 3 s.
TERM_MS=1000
ldd "$KCSI_BIN/kube-emulator" | grep -q libasan && TERM_MS=3000
check "SIGTERM exits within $TERM_MS ms during a delayed request (took ${MS} ms)" test "$MS" -lt $TERM_MS
wait $SLOW 2>/dev/null

# --- --max-watch-timeout=0 (no limit) still ends a watch at the client's timeoutSeconds ---
emu_start --max-watch-timeout=0
START=$(date +%s)
curl -sN --max-time 10 "$S/api/v1/configmaps?watch=1&timeoutSeconds=1" >/dev/null
check "without a server limit, timeoutSeconds=1 still ends the watch" test $(( $(date +%s) - START )) -le 4

# --- the default watch history keeps the emulator under 128 MB (issue 26: 519 MB before) ---
# 40 patches of a 2.9 MB ConfigMap are 116 MB of event text, and as much again decoded.
emu_stop
emu_start
python3 -c 'import json; print(json.dumps({"metadata":{"name":"huge"},"data":{"d":"a"*2900000}}))' >"$T/huge.json"
CODE=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @"$T/huge.json" "$S$CM")
expect_code 201 "a 2.9 MB ConfigMap"
for c in b c; do
	python3 -c "import json; print(json.dumps({'data':{'d':'$c'*2900000}}))" >"$T/huge-$c.json"
done
for i in $(seq 1 20); do
	for c in b c; do
		curl -s -o /dev/null -X PATCH -H 'Content-Type: application/merge-patch+json' \
			--data-binary @"$T/huge-$c.json" "$S$CM/huge"
	done
done
RSS=$(awk '/^VmRSS/{print int($2 / 1024)}' "/proc/$EMU_PID/status")
req GET $CM/huge
check "the 40th patch was stored" eq "$(jqo '.data.d[0:3]')" "ccc"
if ldd "$KCSI_BIN/kube-emulator" | grep -q libasan; then
	echo "ok: RSS after 40 patches of 2.9 MB: $RSS MB (not checked under the sanitizers)"
else
	check "RSS after 40 patches of 2.9 MB is under 128 MB (got $RSS MB)" test "$RSS" -lt 128
fi
finish
