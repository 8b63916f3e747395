#!/bin/bash
# e2e (issues 29 and 31): an upstream manifest starts on kcsi's binaries unchanged.
#  1. Every flag of upstream's seven sidecars and its default, read from upstream's --help (the
#     peers built from their modules) or, for the two that cannot be built here, from
#     tests/peers/flags/<component>.txt, against kcsi's --help: each difference is a row of
#     docs/compatibility.md and each row is still a difference (tests/e2e/flags_compare.py).
#  2. Feature gates: every gate upstream's --help lists is accepted by kcsi's binary, at its
#     default and switched; an unknown gate is refused by both, and so are HonorPVReclaimPolicy by
#     both provisioners (removed upstream in v6.2) and RecoverVolumeExpansionFailure by both
#     resizers (removed upstream in v2.3).
#  3. The same command lines end the same way in upstream's binary and kcsi's: Go's flag syntax
#     (--f=v, -f v, --f v, --b=false, 1m30s), labels in k:v form, bad values (exit 2), a bad
#     logging configuration or gate, or the missing kubeconfig (a start-up failure: upstream
#     exits 1 or, where its main calls klog.Fatal, 255; kcsi's exits the same).
#  4. --logging-format=json: kcsi's lines have the keys of upstream's, in upstream's order
#     (ts, caller, msg, v; errors without v, their error in err), and --log-json-split-stream
#     splits the streams.
set -u
. "$(dirname "$0")/lib_proc.sh" flags
: "${KCSI_PEERS:?}" "${KCSI_SRC:?}"
COMPAT="$KCSI_SRC/docs/compatibility.md"
TABLES="$KCSI_SRC/tests/peers/flags"
PEERED=(csi-attacher csi-provisioner csi-resizer csi-snapshotter snapshot-controller)
TABLED=(csi-node-driver-registrar livenessprobe)
for b in "${PEERED[@]}"; do
	[ -x "$KCSI_PEERS/$b" ] || { echo "FAIL: no upstream $b in $KCSI_PEERS (make peers, or scripts/peers.sh)" >&2; exit 1; }
done

# ---- 1. flags and defaults ----
args=()
for b in "${PEERED[@]}"; do
	"$KCSI_PEERS/$b" --help >"$T/$b.up" 2>&1
	"$KCSI_BIN/$b" --help >"$T/$b.kc" 2>&1 || fail "$b --help exit $?"
	args+=("$b=help:$T/$b.up:$T/$b.kc")
done
for b in "${TABLED[@]}"; do
	"$KCSI_BIN/$b" --help >"$T/$b.kc" 2>&1 || fail "$b --help exit $?"
	args+=("$b=table:$TABLES/$b.txt:$T/$b.kc")
done
python3 "$KCSI_SRC/tests/e2e/flags_compare.py" "$COMPAT" "${args[@]}" >"$T/compare.out" 2>&1 || fail "flags differ from docs/compatibility.md"
cat "$T/compare.out"

# ---- 2. feature gates ----
# gates_of HELPFILE: "Name default" for each gate upstream's --help lists (Go and pflag layout).
gates_of() { sed -nE 's/^[[:space:]]+([A-Za-z0-9]+)=true\|false \([A-Z]+ - default=(true|false)\)$/\1 \2/p' "$1"; }
# run_rc BINARY ARGS...: exit code, output in $T/run.out; a kubeconfig that does not exist stops
# both sides right after their start-up checks.
run_rc() { local rc=0; timeout 10 "$@" >"$T/run.out" 2>&1 || rc=$?; echo $rc; }
gate_refusal() { grep -E -o 'unrecognized feature gate: [A-Za-z0-9]+|cannot set feature gate [^,]*|invalid value of [^ ]*' "$T/run.out" | head -1; }
for b in "${PEERED[@]}"; do
	gates_of "$T/$b.up" >"$T/$b.gates"
	n=$(wc -l <"$T/$b.gates")
	[ "$n" -ge 30 ] || fail "$b: only $n gates read from upstream's --help"
	at_default=$(awk '{ printf "%s%s=%s", (NR > 1 ? "," : ""), $1, $2 }' "$T/$b.gates")
	switched=$(awk '{ printf "%s%s=%s", (NR > 1 ? "," : ""), $1, ($2 == "true" ? "false" : "true") }' "$T/$b.gates")
	[ -n "$at_default" ] && [ -n "$switched" ] || fail "$b: no gate list to pass"
	rc=$(run_rc "$KCSI_BIN/$b" --kubeconfig "$T/none" --feature-gates "$at_default")
	[ -z "$(gate_refusal)" ] || fail "$b refuses upstream's gate list at the defaults: $(gate_refusal)"
	# Switching every gate: the generic GA gates locked to their default are not listed by
	# upstream's --help, so no listed gate may be refused either.
	rc=$(run_rc "$KCSI_BIN/$b" --kubeconfig "$T/none" --feature-gates "$switched")
	[ -z "$(gate_refusal)" ] || fail "$b refuses upstream's gates switched: $(gate_refusal)"
	rc=$(run_rc "$KCSI_BIN/$b" --kubeconfig "$T/none" --feature-gates NoSuchGate=true)
	case $b in # klog.Fatal in upstream's provisioner and snapshotter mains, FlushAndExit(1) elsewhere
	csi-provisioner | csi-snapshotter | snapshot-controller) want=255 ;;
	*) want=1 ;;
	esac
	[ "$rc" = "$want" ] && grep -q "unrecognized feature gate: NoSuchGate" "$T/run.out" ||
		fail "$b: an unknown gate: exit $rc, $(head -c 200 "$T/run.out")"
	echo "  $b: $n upstream gates accepted at their defaults and switched; NoSuchGate refused"
done
for side in "$KCSI_PEERS" "$KCSI_BIN"; do
	rc=$(run_rc "$side/csi-provisioner" --kubeconfig "$T/none" --feature-gates HonorPVReclaimPolicy=true)
	[ "$rc" = 1 ] || [ "$rc" = 255 ] && grep -q "unrecognized feature gate: HonorPVReclaimPolicy" "$T/run.out" ||
		fail "$side/csi-provisioner HonorPVReclaimPolicy=true: exit $rc, $(head -c 200 "$T/run.out")"
done
# external-resizer v2.3 removed RecoverVolumeExpansionFailure (GA in Kubernetes 1.34): both
# resizers refuse it as an unknown gate (FlushAndExit(1)).
for side in "$KCSI_PEERS" "$KCSI_BIN"; do
	rc=$(run_rc "$side/csi-resizer" --kubeconfig "$T/none" --feature-gates=RecoverVolumeExpansionFailure=true)
	[ "$rc" = 1 ] && grep -q "unrecognized feature gate: RecoverVolumeExpansionFailure" "$T/run.out" ||
		fail "$side/csi-resizer RecoverVolumeExpansionFailure=true: exit $rc, $(head -c 200 "$T/run.out")"
done
# A generic gate locked to its default (component-base v0.37: GA and locked to true).
rc=$(run_rc "$KCSI_BIN/csi-provisioner" --kubeconfig "$T/none" --feature-gates WatchCacheInitializationPostStartHook=false)
grep -q "cannot set feature gate WatchCacheInitializationPostStartHook to false, feature is locked to true" "$T/run.out" ||
	fail "a locked gate set against its lock is accepted"
for b in csi-node-driver-registrar livenessprobe; do
	rc=$(run_rc "$KCSI_BIN/$b" --feature-gates Topology=true)
	[ "$rc" = 2 ] || fail "$b has --feature-gates, which upstream's has not (exit $rc)"
done

# ---- 3. the same command line, the same exit code ----
same_rc() {
	local b=$1; shift
	local up kc
	up=$(run_rc "$KCSI_PEERS/$b" --kubeconfig "$T/none" "$@"); cp "$T/run.out" "$T/up.out"
	kc=$(run_rc "$KCSI_BIN/$b" --kubeconfig "$T/none" "$@")
	[ "$up" = "$kc" ] || { fail "$b $*: upstream exits $up, kcsi $kc: $(head -c 200 "$T/run.out")"; return; }
	echo "  $b $*: exit $kc on both"
}
for b in csi-attacher csi-resizer csi-snapshotter snapshot-controller; do # Go's flag package
	same_rc $b --timeout=1m30s
	same_rc $b -timeout 1m30s
	same_rc $b --timeout 90s
	same_rc $b --leader-election=false -v=3
	same_rc $b -v 4 --automaxprocs --automaxprocs=false
	same_rc $b --timeout=abc
	same_rc $b --leader-election=maybe
	same_rc $b -v=-1
done 2>/dev/null
for b in csi-attacher csi-provisioner csi-resizer csi-snapshotter; do
	same_rc $b --leader-election-labels=team:storage,tier:controller
	same_rc $b --leader-election-labels team:storage --leader-election-labels tier:controller
	same_rc $b --leader-election-labels=bad
	same_rc $b --leader-election-labels=a:b:c
done
for b in "${PEERED[@]}"; do
	same_rc $b --logging-format=json --log-flush-frequency=10s
	same_rc $b --logging-format=xml
	same_rc $b --log-flush-frequency=1m --log-text-info-buffer-size=0 --log-json-info-buffer-size=0
	same_rc $b --feature-gates=NoSuchGate=true
	same_rc $b --no-such-flag
done
# GA gates, which upstream's --help does not list; a gate locked to its default; a bad value
same_rc csi-provisioner --feature-gates=Topology=true,VolumeAttributesClass=false
same_rc csi-provisioner --feature-gates=WatchCacheInitializationPostStartHook=false
same_rc csi-attacher --feature-gates=MutableCSINodeAllocatableCount=true,AllBeta=true
same_rc csi-attacher --feature-gates=WatchList=maybe
same_rc csi-snapshotter --feature-gates=CSIVolumeGroupSnapshot=1,AllAlpha=t
# pflag (csi-provisioner): --f=v, --f v, --b=false, -v N
same_rc csi-provisioner --timeout=1m30s --prevent-volume-mode-conversion=false
same_rc csi-provisioner --timeout 90s -v 5
same_rc csi-provisioner --kube-api-capacity-qps=2 --kube-api-capacity-burst 10 --enable-pprof --snapshot-orphan-sweep-interval=0
same_rc csi-provisioner --timeout=abc
# flag.Uint worker counts: 0 is taken (no workers; the start-up then stops at the kubeconfig),
# a sign is a parse error; -v is component-base's unsigned verbosity
same_rc csi-provisioner --worker-threads=0 --cloning-protection-threads=0 --capacity-threads=0
same_rc csi-provisioner --worker-threads=-1
same_rc csi-provisioner -v=-1
# flag.Int: the resizer takes 0 and a negative count (no workers); --resync-period only
same_rc csi-resizer --workers=0
same_rc csi-resizer --workers=-1
same_rc csi-resizer --resync=1m
# flag.Uint: the attacher refuses 0 after parsing (exit 1), a sign is a parse error (exit 2)
same_rc csi-attacher --worker-threads=0
same_rc csi-attacher --worker-threads=-1

# ---- 4. JSON lines ----
keys() { grep -m1 "$1" "$2" | jq -c 'keys_unsorted'; }
run_rc "$KCSI_PEERS/csi-attacher" --logging-format=json --kubeconfig "$T/none" >/dev/null; cp "$T/run.out" "$T/up.json"
run_rc "$KCSI_BIN/csi-attacher" --logging-format=json --kubeconfig "$T/none" >/dev/null; cp "$T/run.out" "$T/kc.json"
jq -e . "$T/kc.json" >/dev/null || fail "kcsi's JSON log is not JSON lines: $(head -c 300 "$T/kc.json")"
up_info=$(keys '"msg":"Version"' "$T/up.json" | jq -c '.[0:4]')
kc_info=$(keys '"msg":"Version' "$T/kc.json" | jq -c '.[0:4]')
[ "$up_info" = '["ts","caller","msg","v"]' ] || fail "upstream's JSON info line has keys $up_info"
[ "$kc_info" = "$up_info" ] || fail "kcsi's JSON info line has keys $kc_info, upstream's $up_info"
up_err=$(grep -m1 '"err"' "$T/up.json" | jq -c 'keys_unsorted')
kc_err=$(grep -v '"v":' "$T/kc.json" | head -1 | jq -c 'keys_unsorted')
[ "$kc_err" = "$up_err" ] || fail "kcsi's JSON error line has keys $kc_err, upstream's $up_err"
up_line=$(grep -m1 '"err"' "$T/up.json" | jq -c '{msg, err}')
kc_line=$(grep -v '"v":' "$T/kc.json" | head -1 | jq -c '{msg, err}')
[ "$(echo "$kc_line" | jq -r .msg)" = "$(echo "$up_line" | jq -r .msg)" ] && echo "$kc_line" | jq -e '.err | test("/none")' >/dev/null ||
	fail "kcsi's JSON error line $kc_line, upstream's $up_line (the same msg, the error in err)"
grep -m1 '"msg":"Version' "$T/kc.json" | jq -e '(.ts | type) == "number" and (.ts > 1.7e12) and (.caller | test("^[a-z]+/[a-z_]+\\.c:[0-9]+$")) and .v == 0' >/dev/null ||
	fail "kcsi's JSON info line: $(head -1 "$T/kc.json")"
timeout 10 "$KCSI_BIN/csi-attacher" --logging-format=json --log-json-split-stream --kubeconfig "$T/none" >"$T/so" 2>"$T/se"
grep -q '"msg":"Version' "$T/so" && ! grep -q '"msg":"Version' "$T/se" || fail "split stream: the info line is not on stdout only"
[ -s "$T/se" ] && ! grep -q '"v":' "$T/se" || fail "split stream: the error line is not on stderr"
echo "  JSON lines: info keys $kc_info, error keys $kc_err, as upstream's; split streams"

[ "$FAILS" -eq 0 ] || { echo "$FAILS failure(s)"; exit 1; }
echo "ok"
