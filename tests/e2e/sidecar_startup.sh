#!/bin/bash
# e2e: the shared sidecar start-up (src/sidecar) of every sidecar binary: each waits where upstream
# waits, says so, and SIGTERM ends it with exit 0 within 1 s in every wait:
#   driver socket absent (a log line every 10 s), Probe retried (not ready, timeouts), API server
#   unreachable, API certificate unverifiable (cache sync), leader-election standby, running
#   leader (Lease released). --connection-timeout is accepted and ignored (deprecated), and a
#   failing GetPluginInfo / GetPluginCapabilities / ControllerGetCapabilities ends the start.
#   Against upstream's binaries: csi-resizer's exit code for a driver that can neither resize nor
#   modify, and csi-attacher's JSON line for a refused list (the keys, the cause in err).
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
SIDECARS=(csi-attacher)
[ -x "$KCSI_BIN/csi-provisioner" ] && SIDECARS+=(csi-provisioner)

declare -A SC_PIDS=()
sc_cleanup() {
	for n in "${!SC_PIDS[@]}"; do
		kill -KILL "${SC_PIDS[$n]}" 2>/dev/null
		wait "${SC_PIDS[$n]}" 2>/dev/null
	done
	att_cleanup
}
trap sc_cleanup EXIT

# sc_start NAME BINARY SOCK KUBECONFIG [flags]
sc_start() {
	local name=$1 bin=$2 sock=$3 kc=$4
	shift 4
	"$KCSI_BIN/$bin" --csi-address "unix://$sock" --kubeconfig "$kc" "$@" >>"$T/$name.log" 2>&1 &
	SC_PIDS[$name]=$!
}

# term_within_1s NAME "what": SIGTERM, then the process must be gone within 1 s with exit 0.
term_within_1s() {
	local name=$1 what=$2 pid=${SC_PIDS[$1]} rc=0
	if ! kill -0 "$pid" 2>/dev/null; then
		fail "$what: $name is not running before SIGTERM"
		tail -5 "$T/$name.log" >&2
		unset "SC_PIDS[$name]"
		return
	fi
	local t0
	t0=$(date +%s%N)
	kill -TERM "$pid"
	for _ in $(seq 1 150); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.01
	done
	local ms=$((($(date +%s%N) - t0) / 1000000))
	if kill -0 "$pid" 2>/dev/null; then
		fail "$what: $name still running 1.5 s after SIGTERM"
		kill -KILL "$pid"
	fi
	wait "$pid" || rc=$?
	unset "SC_PIDS[$name]"
	[ "$ms" -le 1000 ] || fail "$what: $name took ${ms} ms to exit after SIGTERM"
	[ "$rc" -eq 0 ] || fail "$what: $name exited $rc after SIGTERM (want 0)"
	echo "  $what: $name exited $rc in ${ms} ms"
}

# log_has NAME REGEX
log_has() { grep -qE "$2" "$T/$1.log"; }

emu_start
td_start

# A kubeconfig whose server refuses connections.
sed -E "s#server: .*#server: http://127.0.0.1:1#" "$KC" >"$T/dead.kubeconfig"
# A kubeconfig for an HTTPS emulator whose certificate is signed by nobody we trust.
HAVE_TLS=0
if command -v openssl >/dev/null; then
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=kube-emulator" \
		-addext "subjectAltName=IP:127.0.0.1" -keyout "$T/key.pem" -out "$T/cert.pem" >/dev/null 2>&1
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=other-ca" \
		-keyout "$T/okey.pem" -out "$T/other.pem" >/dev/null 2>&1
	"$KCSI_BIN/kube-emulator" --listen 127.0.0.1:0 --write-kubeconfig "$T/tls.kubeconfig" \
		--tls-cert "$T/cert.pem" --tls-key "$T/key.pem" >>"$T/emu-tls.log" 2>&1 &
	TLS_EMU=$!
	for _ in $(seq 1 200); do [ -s "$T/tls.kubeconfig" ] && break; sleep 0.05; done
	if [ -s "$T/tls.kubeconfig" ]; then
		sed -E "s#certificate-authority-data: .*#certificate-authority-data: $(base64 -w0 "$T/other.pem")#" \
			"$T/tls.kubeconfig" >"$T/badca.kubeconfig"
		HAVE_TLS=1
	fi
fi

for bin in "${SIDECARS[@]}"; do
	echo "== $bin"
	# 1. Driver socket absent: waits, says so every 10 s, SIGTERM exits 0 at once.
	sc_start nosock "$bin" "$T/absent.sock" "$KC" --connection-timeout 5s
	sleep 10.6
	check "$bin: says the socket is absent within 10 s" log_has nosock "does not exist"
	check "$bin: --connection-timeout is accepted as deprecated" log_has nosock "connection-timeout.*(deprecated|no effect)"
	term_within_1s nosock "$bin: waiting for the driver socket"

	# 2. Probe answers DEADLINE_EXCEEDED, then not-ready timeouts: retried, never fatal.
	"$KCSI_TESTS/csi-testdriver" --endpoint "unix://$T/probe.sock" --fail Probe=DEADLINE_EXCEEDED \
		>>"$T/probe-td.log" 2>&1 &
	PTD=$!
	wait_sock "$T/probe.sock"
	sc_start probe "$bin" "$T/probe.sock" "$KC" --timeout 1s
	sleep 2.5
	check "$bin: Probe timeouts are retried (still running)" kill -0 "${SC_PIDS[probe]}"
	check "$bin: Probe timeouts are logged" log_has probe "probe timed out"
	term_within_1s probe "$bin: retrying Probe"
	kill -TERM $PTD; wait $PTD 2>/dev/null

	# 3. Probe slower than --timeout: each attempt times out; SIGTERM while a call is in flight.
	"$KCSI_TESTS/csi-testdriver" --endpoint "unix://$T/slow.sock" --slow Probe=20s \
		>>"$T/slow-td.log" 2>&1 &
	STD=$!
	wait_sock "$T/slow.sock"
	sc_start slow "$bin" "$T/slow.sock" "$KC" --timeout 500ms
	sleep 1.3
	term_within_1s slow "$bin: Probe call in flight"
	kill -KILL $STD; wait $STD 2>/dev/null

	# 4. Discovery failures are fatal (non-zero exit, no retry).
	for m in GetPluginInfo GetPluginCapabilities ControllerGetCapabilities; do
		"$KCSI_TESTS/csi-testdriver" --endpoint "unix://$T/f-$m.sock" --fail $m=INTERNAL \
			>>"$T/f-td.log" 2>&1 &
		FTD=$!
		wait_sock "$T/f-$m.sock"
		rc=0
		timeout 10 "$KCSI_BIN/$bin" --csi-address "unix://$T/f-$m.sock" --kubeconfig "$KC" \
			>"$T/f-$m.log" 2>&1 || rc=$?
		check "$bin: a failing $m ends the start-up with an error" bash -c "[ $rc -ne 0 ] && [ $rc -ne 124 ]"
		kill -TERM $FTD; wait $FTD 2>/dev/null
	done

	# 5. API server unreachable: SIGTERM during the cache sync.
	sc_start noapi "$bin" "$T/td.sock" "$T/dead.kubeconfig"
	sleep 1.5
	term_within_1s noapi "$bin: API server unreachable"

	# 6. API server certificate unverifiable.
	if [ "$HAVE_TLS" = 1 ]; then
		sc_start badca "$bin" "$T/td.sock" "$T/badca.kubeconfig"
		sleep 1.5
		term_within_1s badca "$bin: API certificate unverifiable"
	fi

	# 7. Leader election: the standby and the leader both exit at once; the leader releases.
	sc_start lead "$bin" "$T/td.sock" "$KC" --leader-election --leader-election-namespace default
	wait_for "$bin: a Lease is held" 20 bash -c "kubectl --kubeconfig '$KC' get lease -n default -o json | jq -e '[.items[] | select(.spec.holderIdentity != \"\" and .spec.holderIdentity != null)] | length > 0'"
	sc_start standby "$bin" "$T/td.sock" "$KC" --leader-election --leader-election-namespace default
	sleep 1.5
	term_within_1s standby "$bin: leader-election standby"
	term_within_1s lead "$bin: leading"
	check "$bin: the leader released its Lease" bash -c "kubectl --kubeconfig '$KC' get lease -n default -o json | jq -e '[.items[] | select(.spec.holderIdentity != \"\" and .spec.holderIdentity != null)] | length == 0'"
	check "$bin: no crash report in the logs" bash -c "! grep -hE 'ERROR: (Address|Leak)Sanitizer|runtime error:' $T/*.log"
	kubectl --kubeconfig "$KC" delete lease -n default --all >/dev/null 2>&1
	for f in nosock probe slow noapi badca lead standby; do
		[ -f "$T/$f.log" ] && mv "$T/$f.log" "$T/$bin-$f.log"
	done
done
[ -n "${TLS_EMU:-}" ] && { kill -TERM "$TLS_EMU"; wait "$TLS_EMU" 2>/dev/null; }

# 8. Against upstream's binaries (the peers, make peers): the same start-up failure ends with the
#    same exit code, and a run-time error line has the same JSON keys.
: "${KCSI_PEERS:?}"
for b in csi-resizer csi-attacher; do
	[ -x "$KCSI_PEERS/$b" ] || fail "no upstream $b in $KCSI_PEERS (make peers, or scripts/peers.sh)"
done
echo "== upstream's exit codes and JSON error lines"
# A driver that can neither resize nor modify: upstream's csi-resizer calls klog.Fatalf (255).
"$KCSI_TESTS/csi-testdriver" --endpoint "unix://$T/neither.sock" --controller-caps CREATE_DELETE_VOLUME \
	--no-node-expand >>"$T/neither-td.log" 2>&1 &
NTD=$!
wait_sock "$T/neither.sock"
for side in "$KCSI_PEERS" "$KCSI_BIN"; do
	rc=0
	timeout 20 "$side/csi-resizer" --csi-address "unix://$T/neither.sock" --kubeconfig "$KC" \
		>"$T/neither.log" 2>&1 || rc=$?
	check "$side/csi-resizer: a driver that can neither resize nor modify exits 255" eq "$rc" 255
	check "$side/csi-resizer: says why" log_has neither "CSI driver does not support resize nor modify"
done
kill -TERM $NTD; wait $NTD 2>/dev/null
# Every list and watch of VolumeAttachments refused (500; upstream lists with a watch): both attachers log the informer's failure as
# client-go's reflector does, {ts, caller, msg: "Failed to watch", reflector, type, err}.
req POST /emulator/faults '{"reset":true,"rules":[{"verb":"list","resource":"volumeattachments","code":500,"fraction":1},{"verb":"watch","resource":"volumeattachments","code":500,"fraction":1}]}'
expect_code 200 "refuse every list of VolumeAttachments"
for side in up kc; do
	dir=$KCSI_BIN
	[ $side = up ] && dir=$KCSI_PEERS
	"$dir/csi-attacher" --csi-address "unix://$T/td.sock" --kubeconfig "$KC" --logging-format=json \
		>"$T/json-$side.log" 2>&1 &
	JP=$!
	wait_for "$side csi-attacher: the refused list is logged" 20 grep -q '"msg":"Failed to watch"' "$T/json-$side.log"
	kill -TERM $JP; wait $JP 2>/dev/null
done
req POST /emulator/faults '{"reset":true}'
up_keys=$(grep -m1 '"msg":"Failed to watch"' "$T/json-up.log" | jq -c 'keys_unsorted')
kc_keys=$(grep -m1 '"msg":"Failed to watch"' "$T/json-kc.log" | jq -c 'keys_unsorted')
check "the refused list's JSON line has upstream's keys ($up_keys)" eq "$kc_keys" "$up_keys"
check "the refused list's cause is in err" bash -c "grep -m1 '\"msg\":\"Failed to watch\"' '$T/json-kc.log' | jq -e '.err | test(\"500|[Ii]nternal\")' >/dev/null"
echo "  upstream $(grep -m1 '"msg":"Failed to watch"' "$T/json-up.log" | head -c 400)"
echo "  kcsi     $(grep -m1 '"msg":"Failed to watch"' "$T/json-kc.log" | head -c 400)"
att_finish
