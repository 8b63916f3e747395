#!/usr/bin/env bash
# Installs every Debian package that kcsi's build, tests and demo need. Idempotent: it asks dpkg
# what is missing and runs apt-get (update + install) only when something is. Needs root.
# Go (for the peers that scripts/peers.sh builds from their modules) is the machine's own, at
# /usr/local/go; Debian's golang is too old for them, so this script only checks that it is there.
# kubectl: any >= 1.30 on PATH; otherwise the demo and the tests take v1.37.2 from the peers
# (scripts/peers.sh kubectl). Debian's kubernetes-client (1.20) lacks `kubectl wait --for=jsonpath`.
# busybox-static is the busybox image's content (scripts/images.sh); containerd (with its CRI
# plugin), runc and containernetworking-plugins are the real node's runtime (scripts/realnode.sh).
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libgnutls28-dev libjansson-dev libyaml-dev libcurl4-openssl-dev
  libnghttp2-dev libgrpc-dev libprotobuf-c-dev protobuf-c-compiler libprotobuf-dev
  libmicrohttpd-dev
  openssl e2fsprogs xfsprogs util-linux mount
  curl jq procps python3 python3-yaml iproute2 iptables
  clang libclang-rt-14-dev
  buildah umoci
  busybox-static
  containerd runc containernetworking-plugins
  ccache
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#packages[@]} packages present"
else
  if [ "$(id -u)" -ne 0 ]; then
    echo "deps: missing packages: ${missing[*]}" >&2
    echo "deps: run this script as root (or install them with apt-get) and try again" >&2
    exit 1
  fi
  echo "deps: installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
  echo "deps: installed: ${missing[*]}"
fi

if [ -x /usr/local/go/bin/go ] || command -v go >/dev/null 2>&1; then
  echo "deps: $(PATH=/usr/local/go/bin:$PATH go version)"
else
  echo "deps: Go is missing (expected at /usr/local/go): scripts/peers.sh cannot build the test peers" >&2
  exit 1
fi
