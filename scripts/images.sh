#!/usr/bin/env bash
# Builds one OCI image per component FROM scratch with Debian's buildah (chroot isolation, vfs
# storage of its own: no daemon, nothing left in /var/lib/containers) and saves each as
# OUT/<component>.oci.tar, tagged kcsi/<component>:<version>. An image holds the stripped binary,
# exactly the shared libraries ldd says it loads, the CA bundle for the components that talk to
# an API server, and for kcsi-loopplugin the tools it runs with their libraries. The version is
# the one the binary prints with --version (git describe at configure time).
#
# Two images are not components but what a real node needs besides them, built the same way so
# that nothing is pulled: `pause` (images/pause/pause.c, static: the CRI sandbox's process) and
# `busybox` (Debian's busybox-static with a link per applet in /bin: a small workload image,
# tagged with BusyBox's own version).
#
# `agnhost` is built only when named: Kubernetes' e2e workload program from the peers
# (scripts/peers.sh agnhost; $KCSI_PEERS or build-peers/bin) with the busybox applets beside it,
# tagged with the Kubernetes version it was built from (make test-k8s-e2e). `gnu-dd`, also only
# when named: the busybox image with GNU coreutils' dd as /bin/dd and dash as /bin/sh (and the
# libraries they load), for the storage specs that write with `dd oflag=nocache`; tagged with the
# coreutils version.
#
# KCSI_IMAGE_PREFIX (default kcsi) names the images PREFIX/<component>:<version>: with BINDIR the
# peers' and the prefix "upstream", the same images hold upstream's sidecars instead (the storage
# e2e suite's side-by-side run; the version is what the binary prints).
#
#   scripts/images.sh BINDIR OUTDIR [COMPONENT...]     (default: all but agnhost and gnu-dd)
set -euo pipefail

src="$(cd "$(dirname "$0")/.." && pwd)"
bin=${1:?usage: images.sh BINDIR OUTDIR [COMPONENT...]}
out=${2:?usage: images.sh BINDIR OUTDIR [COMPONENT...]}
shift 2
all=(csi-attacher csi-provisioner csi-resizer csi-snapshotter snapshot-controller livenessprobe
     csi-node-driver-registrar kcsi-controller-manager kcsi-loopplugin kcsi pause busybox)
components=("$@")
[ ${#components[@]} -gt 0 ] || components=("${all[@]}")

# The components that talk to a Kubernetes API server get the CA bundle.
needs_ca() {
	case $1 in
	csi-attacher|csi-provisioner|csi-resizer|csi-snapshotter|snapshot-controller|kcsi-controller-manager) return 0 ;;
	*) return 1 ;;
	esac
}
# What kcsi-loopplugin runs (src/loopplugin/fs.c): found in /usr/sbin or /sbin inside the image.
lp_tools=(blkid mke2fs mkfs.ext4 mkfs.xfs e2fsck resize2fs xfs_growfs xfs_repair)

for tool in buildah strip ldd; do
	command -v "$tool" >/dev/null || { echo "images: $tool not found (run scripts/deps.sh)" >&2; exit 1; }
done
mkdir -p "$out"
out="$(cd "$out" && pwd)"
store="$out/storage"
bh=(buildah --root "$store/root" --runroot "$store/run" --storage-driver vfs)
revision=$(git -C "$src" rev-parse HEAD 2>/dev/null || echo unknown)
source_url=$(git -C "$src" config --get remote.origin.url 2>/dev/null || echo kcsi)

# Copies a file into the root at the same path, following links for the content.
put() { # ROOT PATH [MODE]
	mkdir -p "$1$(dirname "$2")"
	cp -L "$2" "$1$2"
	[ -z "${3:-}" ] || chmod "$3" "$1$2"
}

# Copies every shared library an ELF file loads, and the loader, into the root.
put_libs() { # ROOT ELF
	local lib
	if ! ldd "$2" >/dev/null 2>&1; then
		return 0 # a static binary
	fi
	if ldd "$2" | grep -q "not found"; then
		echo "images: $2 needs a library this machine does not have:" >&2
		ldd "$2" | grep "not found" >&2
		exit 1
	fi
	for lib in $(ldd "$2" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'); do
		[ -e "$1$lib" ] || put "$1" "$lib"
	done
}

# Debian's busybox-static: one static file that is every applet.
busybox=/bin/busybox
peers=${KCSI_PEERS:-$src/build-peers/bin}

# version_of COMPONENT: the version its image is tagged with.
version_of() {
	if [ "$1" = agnhost ]; then
		awk '$1 == "agnhost" {print $3}' "$(dirname "$(readlink -f "$peers/agnhost")")/agnhost.version"
	elif [ "$1" = gnu-dd ]; then
		dd --version | sed -n '1s/.* \([0-9][0-9.]*\)$/v\1/p'
	elif [ "$1" = busybox ]; then
		# sed reads it all: head would end busybox with SIGPIPE, a failure under pipefail
		"$busybox" 2>&1 | sed -n '1s/^BusyBox \(v[^ ]*\).*/\1/p'
	else
		"$bin/$1" --version | awk '{print $2}'
	fi
}

stage_busybox() { # ROOT
	local a
	[ -x "$busybox" ] && ! ldd "$busybox" >/dev/null 2>&1 ||
		{ echo "images: $busybox is not a static busybox (install busybox-static)" >&2; exit 1; }
	mkdir -p "$1/bin" "$1/tmp" && chmod 1777 "$1/tmp"
	cp "$busybox" "$1/bin/busybox"
	for a in $("$busybox" --list); do
		[ "$a" = busybox ] || ln -s busybox "$1/bin/$a"
	done
}

stage() { # COMPONENT ROOT
	local c=$1 root=$2 t p
	if [ "$c" = busybox ]; then
		stage_busybox "$root"
		return
	fi
	if [ "$c" = gnu-dd ]; then
		# and Debian's dash as /bin/sh: Debian's busybox sh runs its own applet for every name
		# it has (standalone shell), whatever PATH says, so GNU dd would never run from it
		stage_busybox "$root"
		for t in dd:dd dash:sh; do
			p=$(PATH=/usr/bin:/bin command -v "${t%%:*}") ||
				{ echo "images: ${t%%:*} not found (coreutils, dash)" >&2; exit 1; }
			rm "$root/bin/${t#*:}"
			cp -L "$p" "$root/bin/${t#*:}"
			put_libs "$root" "$p"
		done
		return
	fi
	if [ "$c" = agnhost ]; then
		[ -x "$peers/agnhost" ] || { echo "images: $peers/agnhost not built (scripts/peers.sh agnhost)" >&2; exit 1; }
		stage_busybox "$root"
		cp "$peers/agnhost" "$root/agnhost"
		return
	fi
	[ -x "$bin/$c" ] || { echo "images: $bin/$c not built" >&2; exit 1; }
	mkdir -p "$root/tmp" && chmod 1777 "$root/tmp"
	strip --strip-unneeded -o "$root/$c" "$bin/$c"
	put_libs "$root" "$root/$c"
	if needs_ca "$c"; then
		put "$root" /etc/ssl/certs/ca-certificates.crt 0644
	fi
	if [ "$c" = kcsi-loopplugin ]; then
		for t in "${lp_tools[@]}"; do
			p=$(PATH=/usr/sbin:/sbin:/usr/bin:/bin command -v "$t") ||
				{ echo "images: $t not found (e2fsprogs, xfsprogs, util-linux)" >&2; exit 1; }
			put "$root" "$p"
			put_libs "$root" "$p"
		done
		put "$root" /etc/mke2fs.conf 0644
	fi
}

printf '%-28s %10s %10s  %s\n' component archive unpacked tag
for c in "${components[@]}"; do
	ctx="$out/ctx/$c"
	rm -rf "$ctx"
	mkdir -p "$ctx/rootfs"
	stage "$c" "$ctx/rootfs"
	version=$(version_of "$c")
	tag="${KCSI_IMAGE_PREFIX:-kcsi}/$c:$version"
	"${bh[@]}" bud --quiet --isolation chroot --layers=false --timestamp 0 \
		--build-arg "VERSION=$version" --build-arg "REVISION=$revision" \
		--build-arg "SOURCE=$source_url" \
		-f "$src/images/$c/Containerfile" -t "$tag" "$ctx" >/dev/null
	rm -f "$out/$c.oci.tar"
	"${bh[@]}" push --quiet "$tag" "oci-archive:$out/$c.oci.tar:$tag" >/dev/null
	"${bh[@]}" rmi --force "$tag" >/dev/null
	printf '%-28s %10s %10s  %s\n' "$c" "$(du -h "$out/$c.oci.tar" | cut -f1)" \
		"$(du -sh "$ctx/rootfs" | cut -f1)" "$tag"
done
rm -rf "$store" "$out/ctx"
