#!/bin/bash
# e2e (issue 16): a bad flag exits 2 in every kcsi binary, as upstream's flag package does, also
# under LeakSanitizer (which turns the exit code into 1 when the flag set leaks on the way out);
# --help exits 0 and shows the defaults the binary really uses (kcsi-node: the kubelet's
# --kube-api-qps 50 / --kube-api-burst 100, not the sidecars' 5 / 10); every binary with a
# deprecated flag marks it the one shared way and warns when it is set.
set -u
: "${KCSI_BIN:?KCSI_BIN must point at the built binaries}"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1"
T=$(mktemp -d /tmp/kcsi-flags-e2e.XXXXXX)
trap 'rm -rf "$T"' EXIT
FAILS=0
fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }

# expect CODE WORDS BINARY ARGS...: exit code, and a phrase of the output ("" for any)
expect() {
	local want=$1 words=$2 bin=$3 rc=0
	shift 3
	timeout 10 "$KCSI_BIN/$bin" "$@" >"$T/out" 2>&1 || rc=$?
	[ "$rc" -eq "$want" ] || { fail "$bin $*: exit $rc, want $want"; tail -5 "$T/out" >&2; return; }
	[ -z "$words" ] || grep -qF -- "$words" "$T/out" || fail "$bin $*: no '$words' in: $(head -c 300 "$T/out")"
	echo "  $bin $*: exit $rc"
}

for b in csi-attacher csi-provisioner csi-resizer kcsi-controller-manager kcsi-node csi-node-driver-registrar \
	livenessprobe kcsi-loopplugin kube-emulator kcsi csi-snapshotter snapshot-controller; do
	expect 2 "not defined" "$b" --no-such-flag
	expect 2 "" "$b" -v=lots
	expect 2 "" "$b" -v=-1 # unsigned, as component-base's verbosity
	expect 0 "" "$b" --help
done
# values each main checks itself, after parsing
expect 2 "--nodeid is required" kcsi-loopplugin --endpoint "unix://$T/lp.sock"
expect 2 "--nodeid=a/b" kcsi-loopplugin --nodeid a/b
expect 2 "--max-volume-size" kcsi-loopplugin --nodeid n1 --max-volume-size 1
expect 2 "--volume-attach-limit" kcsi-loopplugin --nodeid n1 --volume-attach-limit -1
expect 2 "--mode=both" kcsi-loopplugin --nodeid n1 --mode both
expect 2 "unexpected argument" kcsi-loopplugin --nodeid n1 extra
expect 2 "given twice" kcsi-loopplugin --mode all node --nodeid n1
expect 2 "--watch-history must be" kube-emulator --watch-history 0
expect 2 "at least 1s" kube-emulator --idle-timeout 10ms
expect 2 "" kcsi --max abc controller list-volumes
# -v as component-base parses it: the reason is strconv.ParseUint's, as upstream prints it
expect 2 'invalid value "-1" for flag -v: strconv.ParseUint: parsing "-1": invalid syntax' csi-attacher -v=-1
# csi-provisioner's worker counts are unsigned (upstream's flag.Uint): a sign does not parse
expect 2 'invalid value "-1" for flag -worker-threads: parse error' csi-provisioner --worker-threads=-1
expect 2 'invalid value "-3" for flag -capacity-threads: parse error' csi-provisioner --capacity-threads -3
expect 2 'invalid value "-1" for flag -cloning-protection-threads: parse error' csi-provisioner --cloning-protection-threads=-1
# csi-snapshotter's own checks exit 1, as upstream's main does
expect 1 "Snapshot name prefix cannot be of length 0" csi-snapshotter --snapshot-name-prefix ""
expect 1 "Leader election cannot happen when node-deployment is set to true" csi-snapshotter --node-deployment --leader-election
# --worker-threads 0 is accepted as upstream accepts it (a warning, no worker): the start-up goes
# on and stops at the missing in-cluster configuration
expect 1 "--worker-threads=0: no worker is started" snapshot-controller --worker-threads 0
expect 1 "in-cluster config" snapshot-controller --worker-threads 0

# --help says the defaults in use
expect 0 "" kcsi-node --help
grep -A1 -- "-kube-api-qps" "$T/out" | grep -q "default 50" || fail "kcsi-node --help does not show --kube-api-qps 50"
grep -A1 -- "-kube-api-burst" "$T/out" | grep -q "default 100" || fail "kcsi-node --help does not show --kube-api-burst 100"
expect 0 "" kcsi-controller-manager --help # kube-controller-manager v1.37's 20 / 30
grep -A1 -- "-kube-api-qps" "$T/out" | grep -q "default 20)" || fail "kcsi-controller-manager --help does not show --kube-api-qps 20"
grep -A1 -- "-kube-api-burst" "$T/out" | grep -q "default 30)" || fail "kcsi-controller-manager --help does not show --kube-api-burst 30"
expect 0 "" csi-attacher --help
grep -A1 -- "-kube-api-qps" "$T/out" | grep -q "default 5)" || fail "csi-attacher --help does not show --kube-api-qps 5"

# help texts say what the binary does (issue 40): kcsi-controller-manager's Lease lives in
# kube-system, not "the pod's own namespace"; a deprecated flag is marked one way only, by the
# "(DEPRECATED: ...)" suffix, never also by its own text ("deprecated ...", "(deprecated) ...")
expect 0 "" kcsi-controller-manager --help
grep -A1 -- "-leader-election-namespace" "$T/out" | grep -q "empty means kube-system" ||
	fail "kcsi-controller-manager --leader-election-namespace help: $(grep -A1 -- -leader-election-namespace "$T/out")"
own_words="^[[:space:]]*(\?\(deprecated\|ignored\)\|older name"
for b in csi-attacher csi-provisioner csi-resizer csi-snapshotter snapshot-controller csi-node-driver-registrar \
	livenessprobe; do
	timeout 10 "$KCSI_BIN/$b" --help >"$T/out" 2>&1
	grep -qi "$own_words" "$T/out" &&
		fail "$b --help words a deprecated flag its own way: $(grep -i "$own_words" "$T/out" | head -2)"
	[ "$b" = snapshot-controller ] || grep -q "(DEPRECATED: " "$T/out" || # it has no deprecated flag (no --resync, as upstream)
		fail "$b --help marks no deprecated flag"
done
# livenessprobe's --health-port and --metrics-address as the sidecars' deprecated flags: the help
# says "(DEPRECATED: use --http-endpoint)", and setting one logs the same warning
expect 0 "" livenessprobe --help
for f in health-port metrics-address; do
	grep -A1 -- "^  -$f " "$T/out" | grep -q "(DEPRECATED: use --http-endpoint)" ||
		fail "livenessprobe --help does not mark --$f deprecated: $(grep -A1 -- "^  -$f " "$T/out")"
done
expect 0 "Flag -metrics-address is deprecated: use --http-endpoint" csi-attacher --metrics-address :8080 --help
expect 0 "Flag -health-port is deprecated: use --http-endpoint" csi-node-driver-registrar --health-port 9809 --help
expect 0 "Flag -health-port is deprecated: use --http-endpoint" livenessprobe --health-port 9809 --help
expect 0 "Flag -metrics-address is deprecated: use --http-endpoint" livenessprobe --metrics-address :8080 --help
[ "$FAILS" -eq 0 ] || { echo "$FAILS failure(s)" >&2; exit 1; }
echo PASS
