#!/bin/bash
# Kubernetes' own storage e2e suite (e2e.test of k8s.io/kubernetes at the pinned version, its
# "External Storage" specs driven by tests/k8s-e2e/loop.yaml) against kcsi deployed as a user
# deploys it, on a real control plane and a real kubelet on this machine.
#
#   tests/k8s-e2e/run.sh [--focus RE] [--skip RE] [--sidecars kcsi|upstream] [--out DIR]
#                        [--procs N] [--timeout DUR] [--nodes 1|2] [--subset] [--peers-built]
#                        [--keep]
#
# What it does, each step with the project's own scripts:
#   1. the peers (scripts/peers.sh, e2e.test, agnhost and the ginkgo CLI included) and the images
#      (scripts/images.sh: kcsi's components, pause, busybox, agnhost, gnu-dd; nothing is pulled);
#   2. the control plane (scripts/realcp.sh) and two nodes (scripts/realnode.sh, --nodes 1 for
#      one): each its own kubelet v1.37.2, containerd, pod network, cgroup root and kubelet root
#      (the second in a mount namespace of its own); the API server reaches each kubelet, so exec
#      and logs work; the nodes share /dev and the loop driver's pool, as nodes share storage;
#   3. the images under the names the suite asks for: KUBE_TEST_REPO_LIST moves every e2e registry
#      to e2e.kcsi.local, and the node's runtime tags kcsi's busybox as e2e.kcsi.local/busybox,
#      /nginx and /jessie-dnsutils (the specs only run shell commands in them), its gnu-dd
#      image (busybox with GNU dd, which knows oflag=nocache) as /glibc-dns-testing, agnhost as
#      /agnhost and pause as /pause;
#   4. the snapshot and group snapshot CRDs, and `kubectl apply -k deploy/kubernetes` with this
#      build's tags, group snapshots on and a volume attach limit of 32 on the node plugin;
#      --sidecars upstream swaps the sidecar images for ones made here from upstream's binaries
#      (the peers), keeping kcsi's loop driver;
#   5. e2e.test under the ginkgo CLI, N specs at a time (--procs, default 4: most of a spec's time
#      is waiting for pods and volumes), [Serial] ones alone at the end, with the focus (default:
#      every External Storage spec of loop.kcsi.io) and the skip (default: the specs this machine
#      cannot serve: [Disruptive] ones and one that enters PID 1's namespaces; see SKIP), its
#      JUnit report and log in DIR (default: build/k8s-e2e/<sidecars>), then a summary line
#         k8s-e2e: ran 123, passed 120, failed 0, skipped 456 in 30.5 min
#      and everything is stopped and undone (--keep leaves the cluster up and prints its dirs).
#   --peers-built: step 1 checks the peers are there instead of running scripts/peers.sh (make
#   test, where setup.peers built them and other tests are using them).
#   --subset: only the specs tests/k8s-e2e/subset.txt names (one per family of test patterns;
#   make test's e2e.k8s_storage), each of which must run and pass.
# Exit status: 0 when no spec failed (and, with --subset, every named spec passed).
set -uo pipefail
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
. "$SRC/tests/e2e/lib_deploy.sh"
BIN=${KCSI_BIN:-$SRC/build/bin}
PEERS=${KCSI_PEERS:-$SRC/build-peers/bin}
FOCUS='External.Storage.*loop\.kcsi\.io'
# Not here: [Disruptive] specs stop the kubelet over SSH, which this node does not serve; "should
# not mount / map unused volumes" lists the node's volume folders through a hostexec pod that
# enters PID 1's mount namespace, and this machine's PID 1 (the sandbox's init, not systemd)
# refuses even root opening /proc/1/ns/mnt (EACCES; `nsenter --mount=/proc/1/ns/mnt` on the host)
SKIP='\[Disruptive\]|should not mount / map unused volumes in a pod'
PROCS=4
NODES=2
SUBSET=0
BUILD_PEERS=1
SIDECARS=kcsi
OUT=""
TIMEOUT=2h
KEEP=0
while [ $# -gt 0 ]; do
	case $1 in
	--focus) FOCUS=$2; shift 2 ;;
	--skip) SKIP=$2; shift 2 ;;
	--sidecars) SIDECARS=$2; shift 2 ;;
	--out) OUT=$2; shift 2 ;;
	--procs) PROCS=$2; shift 2 ;;
	--timeout) TIMEOUT=$2; shift 2 ;;
	--nodes) NODES=$2; shift 2 ;;
	--subset) SUBSET=1; shift ;;
	--peers-built) BUILD_PEERS=0; shift ;;
	--keep) KEEP=1; shift ;;
	*) echo "usage: $0 [--focus RE] [--skip RE] [--sidecars kcsi|upstream] [--out DIR] [--procs N] [--timeout DUR] [--nodes 1|2] [--subset] [--peers-built] [--keep]" >&2
	   exit 2 ;;
	esac
done
case $SIDECARS in kcsi|upstream) ;; *) echo "k8s-e2e: --sidecars is kcsi or upstream" >&2; exit 2 ;; esac
case $NODES in 1|2) ;; *) echo "k8s-e2e: --nodes is 1 or 2" >&2; exit 2 ;; esac
OUT=$(realpath -m "${OUT:-$SRC/build/k8s-e2e/$SIDECARS}")
SUMMARY_ARGS=()
if [ $SUBSET = 1 ]; then
	# each named spec's text as a literal (a space as one or more: the report shows two where the
	# suite joins an empty text), all of them one alternation
	FOCUS=$(grep -v '^#' "$SRC/tests/k8s-e2e/subset.txt" | sed '/^ *$/d; s/[][\.*^$()+?{}|]/\\&/g; s/  */ +/g' |
		paste -sd'|')
	[ -n "$FOCUS" ] || { echo "k8s-e2e: tests/k8s-e2e/subset.txt names no spec" >&2; exit 2; }
	# a spec's text ends there, or its tags follow: "... pvc data source" is not "... pvc data
	# source (ROX mode)"
	FOCUS="loop\.kcsi\.io.*($FOCUS)( \[|\$)"
	SUMMARY_ARGS=(--expect "$SRC/tests/k8s-e2e/subset.txt")
fi
T=$(mktemp -d /tmp/kcsi-k8se2e.XXXXXX)
CP="" NODE_DIR="" NODE2_DIR=""
T0=$SECONDS
step() { echo "== $* ($((SECONDS - T0)) s)"; }
die() { echo "k8s-e2e: $*" >&2; exit 1; }
cleanup() {
	if [ $KEEP = 1 ]; then
		echo "k8s-e2e: left running: control plane $CP, nodes $NODE_DIR $NODE2_DIR (scripts/realnode.sh" \
			"stop, the second first; scripts/realcp.sh stop)"
		return
	fi
	[ -z "$NODE2_DIR" ] || bash "$SRC/scripts/realnode.sh" stop "$NODE2_DIR" >/dev/null 2>&1 ||
		echo "k8s-e2e: realnode stop (the second node) left something behind" >&2
	[ -z "$NODE_DIR" ] || bash "$SRC/scripts/realnode.sh" stop "$NODE_DIR" >/dev/null 2>&1 ||
		echo "k8s-e2e: realnode stop left something behind" >&2
	[ -z "$CP" ] || bash "$SRC/scripts/realcp.sh" stop "$CP" >/dev/null 2>&1 ||
		echo "k8s-e2e: realcp stop left something behind" >&2
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
K() { "$PEERS/kubectl" --kubeconfig "$CP/kubeconfig" --request-timeout=20s "$@"; }

step "peers (scripts/peers.sh, e2e.test, agnhost and ginkgo included)"
if [ $BUILD_PEERS = 1 ]; then
	bash "$SRC/scripts/peers.sh" all e2e.test agnhost ginkgo >"$T/peers.out" 2>&1 ||
		{ tail -20 "$T/peers.out"; die "scripts/peers.sh failed"; }
fi
for b in e2e.test agnhost ginkgo kubelet kube-apiserver etcd kubectl; do
	[ -x "$PEERS/$b" ] || die "$PEERS/$b is missing (scripts/peers.sh $b)"
done
[ -x "$BIN/kcsi-loopplugin" ] || die "$BIN/kcsi-loopplugin is not built (make build)"

step "images (scripts/images.sh)"
bash "$SRC/scripts/images.sh" "$BIN" "$T/images" kcsi-loopplugin csi-provisioner csi-attacher \
	csi-resizer csi-snapshotter livenessprobe csi-node-driver-registrar snapshot-controller \
	pause busybox agnhost gnu-dd >"$T/images.out" 2>&1 || { cat "$T/images.out"; die "scripts/images.sh failed"; }
V=$("$BIN/csi-attacher" --version | awk '{print $2}')
UPSTREAM=(csi-provisioner csi-attacher csi-resizer csi-snapshotter snapshot-controller)
if [ "$SIDECARS" = upstream ]; then
	# node-driver-registrar and livenessprobe stay kcsi's: the module proxy refuses their v2 modules
	KCSI_IMAGE_PREFIX=upstream bash "$SRC/scripts/images.sh" "$PEERS" "$T/images-upstream" \
		"${UPSTREAM[@]}" >"$T/images-upstream.out" 2>&1 ||
		{ cat "$T/images-upstream.out"; die "scripts/images.sh of upstream's sidecars failed"; }
	for c in "${UPSTREAM[@]}"; do
		mv "$T/images-upstream/$c.oci.tar" "$T/images/upstream-$c.oci.tar" || die "no upstream $c image"
	done
fi

step "control plane (scripts/realcp.sh)"
out=$(bash "$SRC/scripts/realcp.sh" start --peers "$PEERS" 2>"$T/realcp.err") ||
	{ cat "$T/realcp.err"; die "the control plane did not start"; }
CP=$(dirname "$(echo "$out" | sed -n 's/^KUBECONFIG=//p')")
echo "$out" | grep '^realcp:'

step "node (scripts/realnode.sh)"
out=$(bash "$SRC/scripts/realnode.sh" start --cp "$CP" --dir "$T/node" --images "$T/images" \
	--peers "$PEERS" 2>"$T/realnode.err") || { cat "$T/realnode.err"; die "the node did not start"; }
NODE_DIR=$T/node
NODES_UP=$(echo "$out" | sed -n 's/^NODE=//p')
echo "$out" | grep '^realnode:'
if [ "$NODES" = 2 ]; then
	step "a second node (scripts/realnode.sh --slot 1)"
	out=$(bash "$SRC/scripts/realnode.sh" start --cp "$CP" --dir "$T/node2" --images "$T/images" \
		--peers "$PEERS" --slot 1 2>"$T/realnode2.err") ||
		{ cat "$T/realnode2.err"; die "the second node did not start"; }
	NODE2_DIR=$T/node2
	NODES_UP="$NODES_UP $(echo "$out" | sed -n 's/^NODE=//p')"
	echo "$out" | grep '^realnode:'
fi

step "the suite's images under its names (registry e2e.kcsi.local)"
REG=e2e.kcsi.local
cat >"$T/repo-list.yaml" <<EOF
gcEtcdRegistry: $REG
gcRegistry: $REG
promoterE2eRegistry: $REG
sigStorageRegistry: $REG
invalidRegistry: invalid.$REG
EOF
export KUBE_TEST_REPO_LIST=$T/repo-list.yaml
ctr_() { ctr --address "$ndir/containerd.sock" --namespace k8s.io "$@"; }
local_ref() { # the first docker.io/kcsi/NAME:* (awk reads all: grep -m1 would SIGPIPE ctr)
	ctr_ images ls -q | awk -v p="docker.io/kcsi/$1:" 'index($0, p) == 1 && !f {print; f = 1}
		END {exit !f}'
}
"$PEERS/e2e.test" --list-images >"$T/images.list" 2>/dev/null || die "e2e.test --list-images failed"
for ndir in $NODE_DIR $NODE2_DIR; do
	for want in $(grep "^$REG/" "$T/images.list"); do
		base=${want#"$REG"/}; base=${base%%:*}
		case $base in
		busybox|nginx|jessie-dnsutils) from=busybox ;;
		glibc-dns-testing) from=gnu-dd ;; # a glibc image: block specs write with dd oflag=nocache
		agnhost|pause) from=$base ;;
		*) continue ;;
		esac
		ref=$(local_ref "$from") || die "no kcsi/$from image in the runtime of $ndir"
		ctr_ images tag --force "$ref" "$want" >/dev/null || die "ctr images tag $ref $want"
		[ "$ndir" != "$NODE_DIR" ] || echo "  $want <- $ref"
	done
done

step "snapshot and group snapshot CRDs (external-snapshotter client/v8, Go module cache)"
crd=$(snapshot_crds) || die "no snapshot CRDs in the Go module cache: make peers"
for f in "$crd"/snapshot.storage.k8s.io_*.yaml "$crd"/groupsnapshot.storage.k8s.io_*.yaml; do
	K apply -f "$f" >/dev/null || die "kubectl apply -f $f"
done
K wait --for=condition=Established crd --all --timeout=60s >/dev/null || die "CRDs not established"

step "kubectl apply -k deploy/kubernetes (images kcsi/*:$V, sidecars: $SIDECARS)"
swaps=()
if [ "$SIDECARS" = upstream ]; then
	for c in "${UPSTREAM[@]}"; do
		swaps+=("$c=upstream/$c:$("$PEERS/$c" --version | awk '{print $2}')")
	done
fi
deploy_kustomization "$T/kz" "$V" "${swaps[@]}"
K kustomize "$T/kz" >"$T/deploy.yaml" || die "kubectl kustomize"
# what a user changes for this suite: group snapshots on (their CRDs are installed above), a
# per-node volume limit the node plugin reports (the volumeLimits specs read it from CSINode), and
# capacity published for the suite's classes, which bind at once (see deploy_patch.py)
python3 "$SRC/tests/k8s-e2e/deploy_patch.py" "$T/deploy.yaml" ||
	die "tests/k8s-e2e/deploy_patch.py failed"
K apply -f "$T/deploy.yaml" >"$T/apply.out" 2>&1 || { cat "$T/apply.out"; die "kubectl apply"; }
K -n kcsi rollout status deploy/kcsi-loop-controller --timeout=180s >/dev/null ||
	die "kcsi-loop-controller not Ready: $(K -n kcsi get pods -o wide 2>&1)"
K -n kcsi rollout status ds/kcsi-loop-node --timeout=120s >/dev/null || die "kcsi-loop-node not Ready"
K -n kcsi rollout status deploy/snapshot-controller --timeout=120s >/dev/null ||
	die "snapshot-controller not Ready"
for NODE in $NODES_UP; do
	for i in $(seq 1 60); do
		[ "$(K get csinode "$NODE" -o jsonpath='{.spec.drivers[*].name}')" = loop.kcsi.io ] && break
		sleep 1
	done
	[ "$(K get csinode "$NODE" -o jsonpath='{.spec.drivers[*].name}')" = loop.kcsi.io ] ||
		die "CSINode $NODE does not list loop.kcsi.io"
done

if [ $SUBSET = 1 ]; then
	step "e2e.test, $PROCS at a time: the $(grep -cv '^#\|^ *$' "$SRC/tests/k8s-e2e/subset.txt") specs of tests/k8s-e2e/subset.txt"
else
	step "e2e.test, $PROCS at a time (focus '$FOCUS', skip '$SKIP')"
fi
mkdir -p "$OUT"
rm -f "$OUT"/junit*.xml
t=$SECONDS
(cd "$T" && "$PEERS/ginkgo" --procs "$PROCS" --focus "$FOCUS" --skip "$SKIP" --timeout "$TIMEOUT" \
	--junit-report junit.xml --output-dir "$OUT" --no-color -v "$PEERS/e2e.test" -- \
	--kubeconfig "$CP/kubeconfig" --provider local \
	--storage.testdriver "$SRC/tests/k8s-e2e/loop.yaml" --report-dir "$OUT" >"$OUT/e2e.log" 2>&1)
rc=$?
python3 "$SRC/tests/k8s-e2e/junit_summary.py" "$OUT/junit.xml" "$((SECONDS - t))" "${SUMMARY_ARGS[@]}" ||
	rc=1
exit $rc
