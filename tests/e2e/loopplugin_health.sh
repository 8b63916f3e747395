#!/bin/bash
# kcsi-loopplugin's health RPCs (CSI v1.13) end to end through the kcsi CLI, each abnormal
# condition made for real: real loop devices, mkfs and mounts, images deleted and truncated, a
# device detached with losetup -d, a superblock overwritten, the pool filled, made read-only and
# moved away. Every step reads the driver's answer (ControllerGetVolumeHealth,
# ControllerListVolumeHealth, NodeGetVolumeHealth, NodeGetStorageHealth) as "STATUS/Reason"
# pairs and compares them with what docs/kcsi-loopplugin.md ("Volume health") promises, and the
# read-only file system check is shown to leave the image byte for byte as it was.
set -euo pipefail

BIN=${KCSI_BIN:?KCSI_BIN must point at the built binaries}
source "${KCSI_SRC:?}/tests/e2e/lib_lp.sh"
D=$(mktemp -d /tmp/kcsi-lp-health-XXXXXX)
SOCK="$D/csi.sock"
PID=
NPID=

fail() { echo "FAIL: $*" >&2; echo "--- plugin log (tail)" >&2; tail -30 "$D/plugin.log" >&2 || true; exit 1; }

cleanup() {
	set +e
	[ -n "$PID" ] && kill -9 "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
	[ -n "$NPID" ] && kill -9 "$NPID" 2>/dev/null && wait "$NPID" 2>/dev/null
	lp_host_cleanup "$D"
	rm -rf "$D"
}
trap cleanup EXIT

k() { "$BIN/kcsi" --endpoint "unix://$SOCK" --timeout 60s "$@"; }
# The conditions of an answer as sorted "STATUS/Reason" words, "" when there is none.
conditions() {
	jq -r '[(.volume_health.health_statuses // .backend_health // [])[] |
		"\(.status)/\(.reason)"] | sort | join(" ")'
}
chealth() { k -o json controller volume-health "$1" | conditions; }
nhealth() { k -o json node volume-health "$@" | conditions; }
expect() { # expect WHAT GOT WANT
	[ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"
	echo "ok: $1: ${3:-healthy}"
}
image() { echo "$D/pool/volumes/$1.img"; }
device_of() { losetup -j "$(image "$1")" | cut -d: -f1; }

"$BIN/kcsi-loopplugin" --endpoint "unix://$SOCK" --pool-dir "$D/pool" --nodeid node-1 \
	>>"$D/plugin.log" 2>&1 &
PID=$!
lp_wait_ready "$SOCK"
MNT="SINGLE_NODE_WRITER,mount,ext4"
BLK="SINGLE_NODE_WRITER,block"
mkdir -p "$D/staging" "$D/pods"

# A volume of name, capability, published to node-1 and staged at $D/staging/name. Prints its ID.
make_staged() {
	local id
	id=$(k -o json controller create-volume "$1" --cap-bytes 64Mi --cap "$2" | jq -r .volume.volume_id)
	k controller publish "$id" node-1 --cap "$2" >/dev/null
	mkdir -p "$D/staging/$1"
	k node stage "$id" "$D/staging/$1" --cap "$2" >/dev/null
	echo "$id"
}
# ... and published at $D/pods/name (mount) or $D/pods/name.dev (block).
make_in_use() {
	local id target="$D/pods/$1"
	id=$(make_staged "$1" "$2")
	[ "$2" = "$BLK" ] && target="$D/pods/$1.dev"
	k node publish "$id" "$target" --staging "$D/staging/$1" --cap "$2" >/dev/null
	echo "$id"
}
# A mount volume staged once (so that it holds an ext4) and left unused.
make_formatted() {
	local id
	id=$(make_staged "$1" "$MNT")
	k node unstage "$id" "$D/staging/$1" >/dev/null
	k controller unpublish "$id" node-1 >/dev/null
	echo "$id"
}

echo "== healthy volumes, a healthy pool"
A=$(make_in_use a "$MNT")
expect "mount volume in use, controller" "$(chealth "$A")" ""
expect "mount volume in use, node" "$(nhealth "$A" --staging "$D/staging/a" --publish "$D/pods/a")" ""
expect "mount volume in use, node, no paths" "$(nhealth "$A")" ""
k controller volume-health "$A" | grep -q "no abnormal condition" || fail "table of a healthy volume"
expect "pool on the disk" "$(k -o json node storage-health | conditions)" ""
E=$(make_formatted e)
expect "unused ext4 volume (e2fsck -f -n ran: clean)" "$(chealth "$E")" ""
[ "$(k controller list-volume-health)" = "No abnormal volumes" ] || fail "list of a healthy pool: $(k controller list-volume-health)"

echo "== a block volume's loop device detached (losetup -d)"
B=$(make_in_use b "$BLK")
DEV=$(device_of "$B")
[ -n "$DEV" ] || fail "no loop device for $B"
expect "block volume staged" "$(nhealth "$B" --publish "$D/pods/b.dev")" ""
losetup -d "$DEV"
for _ in $(seq 1 50); do [ -z "$(device_of "$B")" ] && break; sleep 0.1; done
[ -z "$(device_of "$B")" ] || fail "losetup -d left $DEV attached"
expect "block volume detached" "$(nhealth "$B")" "INACCESSIBLE/LoopDeviceDetached"
expect "block volume detached, at its publish path" "$(nhealth "$B" --publish "$D/pods/b.dev")" \
	"INACCESSIBLE/LoopDeviceDetached INACCESSIBLE/NotPublishedAtPath"
expect "block volume detached, controller (its image is fine)" "$(chealth "$B")" ""

echo "== a mounted volume's loop device told to detach"
DEV=$(device_of "$A")
losetup -d "$DEV" # busy: the kernel sets autoclear, the device goes at the last unmount
expect "mount volume, detach pending" "$(nhealth "$A")" "DEGRADED/LoopDeviceDetaching"
k node unpublish "$A" "$D/pods/a" >/dev/null
k node unstage "$A" "$D/staging/a" >/dev/null
k controller unpublish "$A" node-1 >/dev/null
for _ in $(seq 1 50); do [ -z "$(device_of "$A")" ] && break; sleep 0.1; done
expect "mount volume after unstage" "$(nhealth "$A")" ""

echo "== an image deleted under a staged volume"
C=$(make_in_use c "$MNT")
DEV=$(device_of "$C")
rm "$(image "$C")"
expect "deleted image, controller" "$(chealth "$C")" "DATA_LOSS/ImageMissing"
expect "deleted image, node" "$(nhealth "$C")" "DATA_LOSS/ImageMissing DATA_LOSS/LoopDeviceNotBackedByImage"
# the data still lives in the deleted file the device holds; take it down by hand
umount "$D/pods/c" "$D/staging/c"
losetup -d "$DEV"
expect "deleted image, nothing on the node" "$(nhealth "$C" --staging "$D/staging/c")" \
	"DATA_LOSS/ImageMissing INACCESSIBLE/LoopDeviceDetached INACCESSIBLE/NotMountedAtStagingPath"

echo "== an image truncated"
T=$(k -o json controller create-volume t --cap-bytes 64Mi | jq -r .volume.volume_id)
truncate -s 1M "$(image "$T")"
expect "truncated image" "$(chealth "$T")" "DATA_LOSS/ImageTruncated"
expect "truncated image, node" "$(nhealth "$T")" "DATA_LOSS/ImageTruncated"

echo "== a superblock overwritten on an unused volume"
sum0=$(sha256sum <"$(image "$E")")
dd if=/dev/zero of="$(image "$E")" bs=1024 seek=1 count=1 conv=notrunc status=none
sum1=$(sha256sum <"$(image "$E")")
expect "zeroed superblock" "$(chealth "$E")" "DATA_LOSS/FilesystemNeedsRepair"
k -o json controller volume-health "$E" | jq -r '.volume_health.health_statuses[0].message' |
	grep -q "no file system signature" || fail "message of a zeroed superblock"
[ "$(sha256sum <"$(image "$E")")" = "$sum1" ] || fail "the health check changed the image"
[ "$sum0" != "$sum1" ] || fail "dd changed nothing"
F=$(make_formatted f)
expect "second ext4 volume" "$(chealth "$F")" ""
# the inode count in the superblock (s_inodes_count, offset 0), made wrong: the magic stays
printf '\x01\x00\x00\x00' | dd of="$(image "$F")" bs=1 seek=1024 conv=notrunc status=none
sumf=$(sha256sum <"$(image "$F")")
expect "damaged superblock field" "$(chealth "$F")" "DATA_LOSS/FilesystemNeedsRepair"
[ "$(sha256sum <"$(image "$F")")" = "$sumf" ] || fail "the health check changed the image"
expect "damaged superblock, node view (not on this node)" "$(nhealth "$F")" "DATA_LOSS/FilesystemNeedsRepair"

echo "== every abnormal volume, paged"
LIST=$(k -o json controller list-volume-health | jq -r '[.entries[].volume_id] | sort | join(" ")')
WANT=$(printf '%s\n' "$C" "$T" "$E" "$F" | sort | paste -sd' ')
expect "abnormal volumes listed" "$LIST" "$WANT"
page=$(k -o json controller list-volume-health --max 1)
[ "$(jq '.entries | length' <<<"$page")" = 1 ] || fail "page of 1: $page"
tok=$(jq -r .next_token <<<"$page")
[ -n "$tok" ] && [ "$tok" != null ] || fail "no next_token with more abnormal volumes: $page"
n=1
while [ -n "$tok" ] && [ "$tok" != null ]; do
	page=$(k -o json controller list-volume-health --max 1 --starting-token "$tok")
	n=$((n + $(jq '.entries // [] | length' <<<"$page")))
	tok=$(jq -r '.next_token // ""' <<<"$page")
done
[ "$n" = 4 ] || fail "pages listed $n abnormal volumes, want 4"

echo "== the pool: full, read-only, gone (a node service on a small tmpfs)"
mkdir -p "$D/tmp"
mount -t tmpfs -o size=16m tmpfs "$D/tmp"
NSOCK="$D/node.sock"
"$BIN/kcsi-loopplugin" --mode node --endpoint "unix://$NSOCK" --pool-dir "$D/tmp/pool" \
	--nodeid node-2 >>"$D/plugin.log" 2>&1 &
NPID=$!
lp_wait_ready "$NSOCK"
nstorage() { "$BIN/kcsi" --endpoint "unix://$NSOCK" -o json node storage-health | conditions; }
expect "small pool, empty" "$(nstorage)" ""
dd if=/dev/zero of="$D/tmp/fill" bs=1M status=none 2>/dev/null || true
expect "pool full" "$(nstorage)" "STORAGE_DEGRADED/PoolFull"
rm "$D/tmp/fill"
# read-only where the service sees it: a read-only bind mount over the pool folder (the tmpfs
# itself cannot be remounted while the service holds its lock file open for writing)
mount --bind "$D/tmp/pool" "$D/tmp/pool"
mount -o remount,bind,ro "$D/tmp/pool"
expect "pool read-only" "$(nstorage)" "STORAGE_DEGRADED/PoolNotWritable"
umount "$D/tmp/pool"
expect "pool writable again" "$(nstorage)" ""
mv "$D/tmp/pool" "$D/tmp/pool.gone"
expect "pool moved away" "$(nstorage)" "STORAGE_UNREACHABLE/PoolMissing"
"$BIN/kcsi" --endpoint "unix://$NSOCK" node storage-health | grep -q "PoolMissing" ||
	fail "table of a missing pool"
mv "$D/tmp/pool.gone" "$D/tmp/pool"
expect "pool back" "$(nstorage)" ""
kill -TERM "$NPID"
wait "$NPID" || fail "node service exited $? on SIGTERM"
NPID=
umount "$D/tmp"

echo "== error answers"
set +e
out=$(k node volume-health "" 2>&1); rc=$?
[ "$rc" = 13 ] || fail "NodeGetVolumeHealth without an ID: exit $rc ($out)"
out=$(k controller volume-health lv-none 2>&1); rc=$?
[ "$rc" = 15 ] || fail "ControllerGetVolumeHealth of an unknown volume: exit $rc ($out)"
out=$(k node volume-health "$T" --publish relative/path 2>&1); rc=$?
[ "$rc" = 13 ] || fail "a relative publish path: exit $rc ($out)"
set -e

echo "== tear down"
# the bind mount of b's detached device is no longer the volume's: the driver leaves it alone
umount "$D/pods/b.dev"
k node unpublish "$B" "$D/pods/b.dev" >/dev/null
k node unstage "$B" "$D/staging/b" >/dev/null
k controller unpublish "$B" node-1 >/dev/null
k node unstage "$C" "$D/staging/c" >/dev/null
k controller unpublish "$C" node-1 >/dev/null
for id in "$A" "$B" "$C" "$T" "$E" "$F"; do k controller delete-volume "$id" >/dev/null; done
! losetup -a | grep -qF "$D" || fail "loop device left: $(losetup -a | grep -F "$D")"
! grep -qF "$D" /proc/self/mountinfo || fail "mount left: $(grep -F "$D" /proc/self/mountinfo)"
kill -TERM "$PID"
wait "$PID" || fail "plugin exited $? on SIGTERM"
PID=
echo PASS
