#!/usr/bin/env bash
# Builds the peers kcsi is tested against and nobody here wrote: upstream's sidecars, csi-sanity,
# and Kubernetes' own binaries, from their Go modules at the versions tests/peers/go.mod pins (the
# repository holds only go.mod and go.sum, never their source), plus kcsi's own Go test programs
# in tests/peers (the grpc-go interoperability peer).
#
#   scripts/peers.sh [--out DIR] [NAME...]
#       builds what is missing of NAME... (default: all) and links them into DIR/bin (default
#       build-peers/bin); DIR/kubectl/ holds only kubectl, for a PATH that should take no other
#       peer. NAME is one of the names below or "own" (kcsi's Go programs in tests/peers).
#
# Third-party binaries go to a cache outside the work tree, one file each, keyed by the module
# graph tests/peers resolves (`go list -m all`, so only a changed version changes the key; a
# changed line of the table below rebuilds that binary alone):
# ${KCSI_PEERS_CACHE:-$HOME/.cache/kcsi-peers}/<key>/. A binary already there is not rebuilt, so a
# warm run costs seconds; an interrupted build resumes with what is missing. Go's module and
# build caches ($GOMODCACHE, $GOCACHE) are Go's own, also outside the tree. kcsi's own Go programs
# are rebuilt every time into DIR/bin (go build's cache makes that cheap).
set -euo pipefail

src="$(cd "$(dirname "$0")/.." && pwd)"
mod="$src/tests/peers"
out="$src/build-peers"
if [ "${1:-}" = "--out" ]; then out="$(realpath -m "$2")"; shift 2; fi
export PATH="/usr/local/go/bin:$PATH"
command -v go >/dev/null || { echo "peers: go is not installed (expected at /usr/local/go)" >&2; exit 1; }
cd "$mod"
export GOFLAGS=-mod=readonly # a go.sum that does not match fails, never silently re-resolves

# name  module  package-in-module  version-ldflags
k8s_ld='-X k8s.io/component-base/version.gitVersion=$V -X k8s.io/component-base/version.gitMajor=$MAJ -X k8s.io/component-base/version.gitMinor=$MIN -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitVersion=$V'
peers=(
	"kubectl k8s.io/kubernetes cmd/kubectl $k8s_ld"
	"kube-apiserver k8s.io/kubernetes cmd/kube-apiserver $k8s_ld"
	"kube-controller-manager k8s.io/kubernetes cmd/kube-controller-manager $k8s_ld"
	"kube-scheduler k8s.io/kubernetes cmd/kube-scheduler $k8s_ld"
	"kubelet k8s.io/kubernetes cmd/kubelet $k8s_ld"
	"etcd go.etcd.io/etcd/server/v3 . "
	"csi-sanity github.com/kubernetes-csi/csi-test/v5 cmd/csi-sanity -X main.VERSION=\$V"
	"csi-attacher github.com/kubernetes-csi/external-attacher/v4 cmd/csi-attacher -X main.version=\$V"
	"csi-provisioner github.com/kubernetes-csi/external-provisioner/v6 cmd/csi-provisioner -X main.version=\$V"
	"csi-snapshotter github.com/kubernetes-csi/external-snapshotter/v8 cmd/csi-snapshotter -X main.version=\$V"
	"snapshot-controller github.com/kubernetes-csi/external-snapshotter/v8 cmd/snapshot-controller -X main.version=\$V"
	"csi-resizer github.com/kubernetes-csi/external-resizer/v2 cmd/csi-resizer -X main.version=\$V"
	"agnhost k8s.io/kubernetes test/images/agnhost "
	"e2e.test k8s.io/kubernetes test/e2e $k8s_ld"
	"ginkgo github.com/onsi/ginkgo/v2 ginkgo "
)
# Built only when named (make test-k8s-e2e names them): Kubernetes' storage e2e suite, agnhost,
# the suite's workload image program, and the ginkgo CLI, which runs the suite's specs in parallel.
optional=" agnhost e2e.test ginkgo "

graph=$(go list -m all)
key=$( { go version; echo "$graph"; } | sha256sum | cut -c1-16)
cache="${KCSI_PEERS_CACHE:-$HOME/.cache/kcsi-peers}/$key"
mkdir -p "$cache" "$out/bin" "$out/kubectl"

# The version a module resolves to in tests/peers (its replacement's, where go.mod replaces it).
modver() { go list -m -f '{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}' "$1"; }

build_one() {
	local name=$1 m=$2 pkg=$3 ld=$4 V MAJ MIN t0
	V=$(modver "$m")
	MAJ=$(echo "$V" | cut -d. -f1 | tr -d v)
	MIN=$(echo "$V" | cut -d. -f2)
	ld=${ld//\$MAJ/$MAJ}
	ld=${ld//\$MIN/$MIN}
	ld=${ld//\$V/$V}
	t0=$(date +%s)
	echo "peers: building $name $V"
	[ "$pkg" = . ] && pkg=$m || pkg=$m/$pkg
	if [ "$name" = e2e.test ]; then
		# a test binary: the suite and ginkgo in one program. -vet=off: go test -c runs go vet
		# over all 2,845 packages first, 7 CPU-minutes here, which find nothing kcsi can act on
		go test -c -vet=off -trimpath -ldflags "-s -w $ld" -o "$cache/.$name.tmp" "$pkg"
	else
		# agnhost goes into an image FROM scratch: static
		CGO_ENABLED=$([ "$name" = agnhost ] && echo 0 || go env CGO_ENABLED) go build -trimpath -ldflags "-s -w $ld" -o "$cache/.$name.tmp" "$pkg"
	fi
	mv "$cache/.$name.tmp" "$cache/$name"
	echo "$name $m $V" >"$cache/$name.version"
	echo "peers: built $name in $(( $(date +%s) - t0 )) s"
}

want=("$@")
[ ${#want[@]} -gt 0 ] || want=(all)
selected() {
	local w
	for w in "${want[@]}"; do
		[ "$w" = "$1" ] && return 0
		[ "$w" = all ] && [[ $optional != *" $1 "* ]] && return 0
	done
	return 1
}

start=$(date +%s)
built=0
for line in "${peers[@]}"; do
	read -r name m pkg ld <<<"$line"
	selected "$name" || continue
	# built before with this very line (package, version stamps)? then it is current
	if [ ! -x "$cache/$name" ] || [ "$(cat "$cache/$name.line" 2>/dev/null)" != "$line" ]; then
		build_one "$name" "$m" "$pkg" "$ld"
		echo "$line" >"$cache/$name.line"
		built=$((built + 1))
	fi
	ln -sfn "$cache/$name" "$out/bin/$name"
done
[ -e "$out/bin/kubectl" ] && ln -sfn "$cache/kubectl" "$out/kubectl/kubectl"
cat "$cache"/*.version >"$out/VERSIONS" 2>/dev/null || true
[ $built -eq 0 ] || echo "peers: $built built into $cache in $(( $(date +%s) - start )) s"

# kcsi's own Go test programs: every main package under tests/peers.
if selected own; then
	for d in $(go list -f '{{if eq .Name "main"}}{{.Dir}}{{end}}' ./... 2>/dev/null); do
		echo "peers: building $(basename "$d") (kcsi's, tests/peers)"
		go build -trimpath -o "$out/bin/$(basename "$d")" "$d"
	done
fi
echo "peers: ready in $out/bin ($(( $(date +%s) - start )) s; cache $cache)"
