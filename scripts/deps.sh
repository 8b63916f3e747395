#!/usr/bin/env bash
# Installs every Debian package that kcsi's build, tests and demo need. Idempotent: it asks dpkg
# what is missing and runs apt-get (update + install) only when something is. Needs root.
# Then the Node.js packages of tests/interop (@grpc/grpc-js, pinned by its package-lock.json),
# with `npm ci` only when node_modules is missing or older than the lock file.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libgnutls28-dev libjansson-dev libyaml-dev libcurl4-openssl-dev
  libnghttp2-dev libgrpc-dev libprotobuf-c-dev protobuf-c-compiler libprotobuf-dev
  libmicrohttpd-dev
  openssl e2fsprogs xfsprogs util-linux mount
  curl jq procps python3
  clang libclang-rt-14-dev
  buildah umoci
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ! command -v kubectl >/dev/null 2>&1; then
  missing+=(kubernetes-client)
fi
# Node.js for tests/interop: Debian's, unless a node and npm are on PATH already.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)

if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#packages[@]} packages present$(command -v kubectl >/dev/null && echo ', kubectl on PATH')," \
    "node $(node --version) and npm $(npm --version) on PATH"
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

interop="$(cd "$(dirname "$0")/.." && pwd)/tests/interop"
if [ ! -d "$interop/node_modules" ] || [ "$interop/package-lock.json" -nt "$interop/node_modules" ]; then
  wanted=$(node -p "Object.entries(require('$interop/package.json').dependencies)
    .map(e => e.join('@')).join(' ')")
  echo "deps: installing tests/interop's Node.js packages: $wanted (npm ci)"
  (cd "$interop" && npm ci --no-audit --no-fund)
  touch "$interop/node_modules"
  echo "deps: installed tests/interop/node_modules"
else
  echo "deps: tests/interop/node_modules up to date with its package-lock.json"
fi
