#!/usr/bin/env bash
# Builds the peers kcsi is tested against and nobody here wrote: upstream's sidecars, csi-sanity,
# and Kubernetes' own binaries, from their Go modules at the versions tests/peers/go.mod pins (the
# repository holds only go.mod and go.sum, never their source), plus kcsi's own Go test programs
# in tests/peers (the grpc-go interoperability peer).
#
#   scripts/peers.sh [OUT]     build what is missing; OUT (default build-peers) gets bin/ with
#                              every binary, linked from the cache
#
# Third-party binaries go to a cache outside the work tree, keyed by the hash of go.mod and go.sum:
# ${KCSI_PEERS_CACHE:-$HOME/.cache/kcsi-peers}/<key>/bin. A key that is complete (its .done
# exists) is not rebuilt, so a second `make test` costs nothing here; a changed pin builds anew.
# Go's module and build caches ($GOMODCACHE, $GOCACHE) are Go's own, also outside the tree.
# kcsi's own Go programs are rebuilt every time into OUT/bin (go build's cache makes that cheap).
set -euo pipefail

src="$(cd "$(dirname "$0")/.." && pwd)"
mod="$src/tests/peers"
out="$(realpath -m "${1:-$src/build-peers}")"
export PATH="/usr/local/go/bin:$PATH"
command -v go >/dev/null || { echo "peers: go is not installed (expected at /usr/local/go)" >&2; exit 1; }

key=$(cat "$mod/go.mod" "$mod/go.sum" | sha256sum | cut -c1-16)
cache="${KCSI_PEERS_CACHE:-$HOME/.cache/kcsi-peers}/$key"

# The versions the binaries report. Each is the version go.mod resolves for the module, so a
# change of pin changes the version string with it.
modver() { (cd "$mod" && go list -m -f '{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}' "$1"); }

build_third_party() {
	local tmp k8s ldk8s v
	tmp="$cache.tmp.$$"
	rm -rf "$tmp"
	mkdir -p "$tmp/bin"
	cd "$mod"
	# -mod=readonly: a go.sum that does not match fails here, never silently re-resolves.
	local flags=(-mod=readonly -trimpath)
	k8s=$(modver k8s.io/kubernetes)
	ldk8s="-s -w -X k8s.io/component-base/version.gitVersion=$k8s"
	ldk8s+=" -X k8s.io/component-base/version.gitMajor=$(echo "$k8s" | cut -d. -f1 | tr -d v)"
	ldk8s+=" -X k8s.io/component-base/version.gitMinor=$(echo "$k8s" | cut -d. -f2)"
	ldk8s+=" -X k8s.io/component-base/version.gitTreeState=clean"
	ldk8s+=" -X k8s.io/client-go/pkg/version.gitVersion=$k8s"
	for c in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl; do
		echo "peers: building $c $k8s"
		go build "${flags[@]}" -ldflags "$ldk8s" -o "$tmp/bin/$c" "k8s.io/kubernetes/cmd/$c"
	done
	v=$(modver go.etcd.io/etcd/server/v3)
	echo "peers: building etcd $v"
	go build "${flags[@]}" -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$v" \
		-o "$tmp/bin/etcd" go.etcd.io/etcd/server/v3
	local sidecars=(
		"csi-attacher github.com/kubernetes-csi/external-attacher/v4 cmd/csi-attacher"
		"csi-provisioner github.com/kubernetes-csi/external-provisioner/v6 cmd/csi-provisioner"
		"csi-snapshotter github.com/kubernetes-csi/external-snapshotter/v8 cmd/csi-snapshotter"
		"snapshot-controller github.com/kubernetes-csi/external-snapshotter/v8 cmd/snapshot-controller"
		"csi-sanity github.com/kubernetes-csi/csi-test/v5 cmd/csi-sanity"
	)
	local line name m pkg
	for line in "${sidecars[@]}"; do
		read -r name m pkg <<<"$line"
		v=$(modver "$m")
		echo "peers: building $name $v"
		go build "${flags[@]}" -ldflags "-s -w -X main.version=$v" -o "$tmp/bin/$name" "$m/$pkg"
	done
	(cd "$mod" && go list -m -f '{{.Path}} {{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}' \
		k8s.io/kubernetes go.etcd.io/etcd/server/v3 github.com/kubernetes-csi/external-attacher/v4 \
		github.com/kubernetes-csi/external-provisioner/v6 github.com/kubernetes-csi/external-snapshotter/v8 \
		github.com/kubernetes-csi/csi-test/v5 google.golang.org/grpc) >"$tmp/VERSIONS"
	touch "$tmp/.done"
	rm -rf "$cache"
	mv "$tmp" "$cache"
}

start=$(date +%s)
if [ -f "$cache/.done" ]; then
	echo "peers: cached in $cache"
else
	echo "peers: building into $cache (cold: about 25 min on 2 cores; see README)"
	build_third_party
	echo "peers: third-party peers built in $(( $(date +%s) - start )) s"
fi

mkdir -p "$out/bin"
for f in "$cache"/bin/*; do
	ln -sfn "$f" "$out/bin/$(basename "$f")"
done
cp "$cache/VERSIONS" "$out/VERSIONS"

# kcsi's own Go test programs: every main package under tests/peers.
cd "$mod"
for d in $(go list -mod=readonly -f '{{if eq .Name "main"}}{{.Dir}}{{end}}' ./...); do
	echo "peers: building $(basename "$d") (tests/peers)"
	go build -mod=readonly -trimpath -o "$out/bin/$(basename "$d")" "$d"
done
echo "peers: ready in $out/bin ($(( $(date +%s) - start )) s)"
