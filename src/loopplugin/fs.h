/*
 * fs: filesystems on volume devices, through the standard tools (blkid, mkfs.*, e2fsck,
 * xfs_repair, resize2fs, xfs_growfs) run by exec.h.
 *
 * The seed's node-stage rule is encoded here: a device is formatted only when blkid finds no
 * filesystem on it (so a retried stage never wipes data), and an existing filesystem is checked
 * before it is mounted; a damaged one is refused with the checker's words in the message.
 */
#ifndef KCSI_LOOPPLUGIN_FS_H
#define KCSI_LOOPPLUGIN_FS_H

#include <stdbool.h>
#include <stddef.h>

#include "loopplugin/status.h"

/* True when the driver can create filesystems of this type (ext4 always, xfs if mkfs.xfs). */
bool lp_fs_supported(const char *fstype);
/*
 * The smallest device mkfs makes this filesystem on: 300 MiB for xfs (xfsprogs refuses less:
 * "Filesystem must be larger than 300MB"), 0 for ext4 and anything else. CreateVolume rounds a
 * smaller request up to it (the spec lets a driver give more than required_bytes), so a claim
 * never gets a volume that every NodeStageVolume would fail to format.
 */
#define LP_XFS_MIN_BYTES (300LL * 1024 * 1024)
long long lp_fs_min_bytes(const char *fstype);

/*
 * Probes dev: returns 1 and writes the filesystem (or other signature) type into type, 0 when
 * the device holds no known signature, or fails.
 */
int lp_fs_probe(const char *volume, const char *dev, char *type, size_t len,
		struct lp_status *st);
int lp_fs_format(const char *volume, const char *dev, const char *fstype, struct lp_status *st);
/* Checks (ext4: e2fsck -p, repairing what is safe; xfs: xfs_repair -n). FAILED_PRECONDITION
 * when the filesystem is damaged beyond what is safe to fix automatically. */
int lp_fs_check(const char *volume, const char *dev, const char *fstype, struct lp_status *st);
/*
 * Checks the file system of type fstype on path (a device or an image file, not mounted) without
 * changing a byte: e2fsck -f -n, xfs_repair -n. 0 clean, 1 damaged with the checker's words in
 * detail, -1 when it cannot tell (a type it has no checker for, the checker failed to run, an
 * xfs log still to replay, which only a mount resolves).
 */
int lp_fs_check_readonly(const char *path, const char *fstype, char *detail, size_t len);
/*
 * Before mounting: grows an ext4 filesystem that is smaller than its device (the volume was
 * expanded while not staged, or online growth was refused). No-op for other types and when the
 * sizes already match.
 */
int lp_fs_grow_offline(const char *volume, const char *dev, const char *fstype,
		       struct lp_status *st);
/* Size in bytes an ext2/3/4 superblock on dev claims, or -1 when there is none. */
long long lp_ext4_size(const char *dev);
/* Grows the mounted filesystem of dev (mounted at mountpoint) to the device size. */
int lp_fs_grow(const char *volume, const char *dev, const char *mountpoint, const char *fstype,
	       struct lp_status *st);

/*
 * Freezes a mounted filesystem (all dirty data and metadata on disk, writes blocked) so that a
 * copy of its device is clean, not just crash-consistent; lp_fs_thaw() resumes it.
 */
int lp_fs_freeze(const char *mountpoint);
void lp_fs_thaw(const char *mountpoint);

#endif
