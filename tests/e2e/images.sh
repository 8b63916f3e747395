#!/bin/bash
# The container images without a container engine: scripts/images.sh builds every image from
# this build's binaries; each OCI archive is unpacked with umoci and its entrypoint runs from the
# unpacked root filesystem (chroot) with --version, which must print the image's version label.
# The API components find their CA bundle; the driver image serves Probe and GetPluginInfo from
# its own root, and stages ext4 and xfs volumes and grows them with the tools it carries (a
# missing library or tool fails here). Nothing of the host's /usr is reachable inside.
set -euo pipefail

BIN=${KCSI_BIN:?KCSI_BIN must point at the built binaries}
SRC=${KCSI_SRC:?}
D=$(mktemp -d /tmp/kcsi-images-XXXXXX)
PID=
EPID=
FAILS=0

fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
ok() { echo "ok: $*"; }

cleanup() {
	set +e
	[ -n "$PID" ] && kill -9 "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
	[ -n "$EPID" ] && kill "$EPID" 2>/dev/null && wait "$EPID" 2>/dev/null
	grep -F "$D" /proc/self/mountinfo | awk '{print $5}' | sort -r | while read -r m; do
		umount -l "$m" 2>/dev/null || true
	done
	losetup -a | grep -F "$D" | cut -d: -f1 | while read -r l; do losetup -d "$l" || true; done
	rm -rf "$D"
}
trap cleanup EXIT

for t in buildah umoci jq openssl; do
	command -v "$t" >/dev/null || { echo "FAIL: $t is not installed (scripts/deps.sh)"; exit 1; }
done

echo "== build every image from $BIN"
bash "$SRC/scripts/images.sh" "$BIN" "$D/images" | tee "$D/sizes"
mapfile -t COMPONENTS < <(awk 'NR > 1 {print $1}' "$D/sizes")
# agnhost and gnu-dd are built only when named (tests/k8s-e2e builds them); every other folder of
# images/ is a default image.
DEFAULTS=$(ls -d "$SRC"/images/*/ | grep -Evc '/(agnhost|gnu-dd)/$')
[ "${#COMPONENTS[@]}" -eq "$DEFAULTS" ] ||
	fail "images.sh built ${#COMPONENTS[@]} images, images/ has $DEFAULTS default Containerfiles"

# unpack COMPONENT: the bundle dir (config.json + rootfs) of the component's archive
unpack() {
	local c=$1 tag
	mkdir -p "$D/layout/$c"
	tar -xf "$D/images/$c.oci.tar" -C "$D/layout/$c"
	tag=$(umoci ls --layout "$D/layout/$c")
	umoci unpack --image "$D/layout/$c:$tag" "$D/bundle/$c" >/dev/null
	echo "$tag"
}

for c in "${COMPONENTS[@]}"; do
	tag=$(unpack "$c")
	b="$D/bundle/$c"
	[ "$c" != busybox ] || continue # a workload image, checked below
	version=$("$BIN/$c" --version | awk '{print $2}')
	[ "$tag" = "kcsi/$c:$version" ] || fail "$c: tag $tag, want kcsi/$c:$version"
	label=$(jq -r '.annotations["org.opencontainers.image.version"]' "$b/config.json")
	[ "$label" = "$version" ] || fail "$c: version label $label, want $version"
	[ "$(jq -r '.process.args[0]' "$b/config.json")" = "/$c" ] || fail "$c: entrypoint"
	out=$(chroot "$b/rootfs" "/$c" --version 2>&1) || fail "$c: --version in its image: $out"
	[ "$out" = "$c $version" ] || fail "$c: --version in its image printed '$out'"
	[ ! -e "$b/rootfs/bin/sh" ] || fail "$c: the image carries a shell"
	ok "$c $version: $(du -sh "$b/rootfs" | cut -f1) unpacked, runs from its own root"
done

echo "== the workload and sandbox images a real node runs"
b="$D/bundle/busybox/rootfs"
bbv=$(/bin/busybox 2>&1 | sed -n '1s/^BusyBox \(v[^ ]*\).*/\1/p')
[ "$(jq -r '.annotations["org.opencontainers.image.version"]' "$D/bundle/busybox/config.json")" = "$bbv" ] ||
	fail "busybox: version label is not BusyBox's $bbv"
[ "$(find "$b" -type f | wc -l)" = 1 ] || fail "busybox: the image holds more than /bin/busybox"
out=$(chroot "$b" /bin/sh -c 'echo hi >/tmp/f && cat /tmp/f && ls /bin/mount /bin/df >/tmp/l && echo ok' 2>&1) || true
[ "$out" = "$(printf 'hi\nok')" ] || fail "busybox: sh, cat, mount, df in the image: $out"
ok "busybox $bbv: sh and its applets run from the image's own root"
b="$D/bundle/pause/rootfs"
[ "$(find "$b" -type f)" = "$b/pause" ] || fail "pause: the image holds more than /pause: $(find "$b" -type f)"
file "$b/pause" | grep -q "statically linked" || fail "pause: not static: $(file "$b/pause")"
[ "$(jq -r '.process.user.uid' "$D/bundle/pause/config.json")" = 65535 ] || fail "pause runs as root"
# PID 1 of its own PID namespace: a child re-parented to it is reaped, SIGTERM ends it with 0.
# Its mount namespace (--mount-proc) is a slave of a shared /: it does not keep other tests' volumes
. "$SRC/tests/e2e/lib_mountns.sh"
root_shared || fail "cannot make / a shared mount"
unshare --pid --fork --mount-proc=/proc --propagation slave chroot "$b" /pause >"$D/pause.log" 2>&1 &
PPID1=$!
sleep 0.3
pp=$(pgrep -P "$PPID1" -x pause || true)
[ -n "$pp" ] || fail "pause did not start: $(cat "$D/pause.log")"
if [ -n "$pp" ]; then
	nsenter -t "$pp" -p sh -c 'sleep 0.1 & exit 0' # the orphan goes to pause
	sleep 0.5
	zombies=$(ps -e -o stat=,ppid= | awk -v p="$pp" '$2 == p && $1 ~ /^Z/' | wc -l)
	[ "$zombies" = 0 ] || fail "pause left $zombies zombie(s)"
	kill -TERM "$pp"
fi
rc=0
timeout 2 tail --pid="$PPID1" -f /dev/null || fail "pause ignored SIGTERM"
wait "$PPID1" || rc=$?
[ "$rc" = 0 ] || fail "pause exited $rc on SIGTERM"
grep -q . "$D/pause.log" && fail "pause printed as PID 1: $(cat "$D/pause.log")"
ok "pause: one static file, reaps an orphan, exits 0 on SIGTERM"

uid_of() { jq -r '.process.user.uid' "$D/bundle/$1/config.json"; }
[ "$(uid_of snapshot-controller)" = 65532 ] || fail "snapshot-controller runs as root"
[ "$(uid_of kcsi-controller-manager)" = 65532 ] || fail "kcsi-controller-manager runs as root"
[ "$(uid_of kcsi-loopplugin)" = 0 ] || fail "the driver must run as root (loop devices, mounts)"

echo "== an API component finds the CA bundle in its image"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=kube-emulator" \
	-addext "subjectAltName=IP:127.0.0.1" -keyout "$D/key.pem" -out "$D/cert.pem" >/dev/null 2>&1
"$BIN/kube-emulator" --listen 127.0.0.1:0 --tls-cert "$D/cert.pem" --tls-key "$D/key.pem" \
	--write-kubeconfig "$D/kc" >"$D/emu.log" 2>&1 &
EPID=$!
for _ in $(seq 1 100); do [ -s "$D/kc" ] && break; sleep 0.05; done
root="$D/bundle/kcsi-controller-manager/rootfs"
# the kubeconfig without the emulator's CA: the system trust store is all there is
grep -v "certificate-authority" "$D/kc" >"$root/tmp/kc"
timeout 5 chroot --userspec=65532:65532 "$root" /kcsi-controller-manager --kubeconfig /tmp/kc \
	-v 4 >"$D/cm.log" 2>&1 || true
n=$(sed -n 's/.*] \([0-9]*\) CA certificates from the system trust store.*/\1/p' "$D/cm.log" | head -1)
[ "${n:-0}" -gt 10 ] || fail "kcsi-controller-manager loaded ${n:-no} CA certificates in its image: $(tail -5 "$D/cm.log")"
grep -q "certificate" "$D/cm.log" || fail "the emulator's self-signed certificate was not refused"
ok "kcsi-controller-manager: $n CA certificates from its image's bundle, unknown CA refused"
kill "$EPID"; wait "$EPID" 2>/dev/null || true; EPID=

echo "== the driver image serves CSI from its own root"
root="$D/bundle/kcsi-loopplugin/rootfs"
for t in blkid mkfs.ext4 mkfs.xfs e2fsck resize2fs xfs_growfs xfs_repair; do
	rc=0
	chroot "$root" "/usr/sbin/$t" -V >"$D/tool.out" 2>&1 || rc=$? # resize2fs has no -V: usage, 1
	if [ "$rc" -ge 126 ] || grep -q "error while loading shared libraries" "$D/tool.out"; then
		fail "$t does not run in the driver image (exit $rc): $(head -3 "$D/tool.out")"
	fi
done
for m in dev proc sys; do
	mkdir -p "$root/$m"
	mount --bind "/$m" "$root/$m"
done
chroot "$root" /kcsi-loopplugin --endpoint unix:///tmp/csi.sock --nodeid img-node \
	--pool-dir /tmp/pool >"$D/lp.log" 2>&1 &
PID=$!
k() { "$BIN/kcsi" --endpoint "unix://$root/tmp/csi.sock" --timeout 60s "$@"; }
for _ in $(seq 1 100); do k identity probe >/dev/null 2>&1 && break; sleep 0.05; done
k identity probe | grep -q "READY *true" || fail "Probe from the image: $(tail -5 "$D/lp.log")"
[ "$(k -o json identity info | jq -r .name)" = loop.kcsi.io ] || fail "GetPluginInfo from the image"
[ "$(k -o json identity info | jq -r .vendor_version)" = "$("$BIN/kcsi-loopplugin" --version | awk '{print $2}')" ] ||
	fail "GetPluginInfo's version is not the image's"
for fs in ext4 xfs; do
	cap="SINGLE_NODE_WRITER,mount,$fs"
	id=$(k -o json controller create-volume "img-$fs" --cap-bytes 320Mi --cap "$cap" | jq -r .volume.volume_id)
	k controller publish "$id" img-node --cap "$cap" >/dev/null
	k node stage "$id" "/tmp/stage-$fs" --cap "$cap" >/dev/null || fail "$fs: NodeStage in the image: $(tail -5 "$D/lp.log")"
	[ "$(findmnt -n -o FSTYPE "$root/tmp/stage-$fs")" = "$fs" ] || fail "$fs: not mounted by the image's mkfs"
	k controller expand "$id" 640Mi >/dev/null
	if [ "$fs" = xfs ]; then
		k node expand "$id" "/tmp/stage-$fs" 640Mi --staging "/tmp/stage-$fs" --cap "$cap" >/dev/null ||
			fail "$fs: NodeExpand with the image's tools: $(tail -5 "$D/lp.log")"
	else
		# resize2fs finds an online filesystem by the mount table's path, which a chroot
		# does not share (a container's mount namespace does): grow it offline, at stage
		k node unstage "$id" "/tmp/stage-$fs" >/dev/null
		k node stage "$id" "/tmp/stage-$fs" --cap "$cap" >/dev/null ||
			fail "$fs: NodeStage growing the filesystem: $(tail -5 "$D/lp.log")"
	fi
	size=$(df -B1M --output=size "$root/tmp/stage-$fs" | tail -1 | tr -d ' ')
	[ "$size" -gt 500 ] || fail "$fs: filesystem is ${size} MiB after growing to 640Mi"
	k node unstage "$id" "/tmp/stage-$fs" >/dev/null
	k controller unpublish "$id" img-node >/dev/null
	k controller delete-volume "$id" >/dev/null
	ok "$fs: staged, grown to ${size} MiB and unstaged by the driver image's own tools"
done
kill "$PID"; wait "$PID" 2>/dev/null || true; PID=

echo "== sizes"
cat "$D/sizes"
[ "$FAILS" -eq 0 ] || { echo "$FAILS check(s) failed"; exit 1; }
echo "images: all checks passed"
