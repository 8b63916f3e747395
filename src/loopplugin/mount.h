/*
 * mount: what is mounted where (/proc/self/mountinfo), and mount(2)/umount2(2) for the node
 * service: filesystem mounts at the staging path, bind mounts onto targets.
 *
 * The node service learns what it had done by reading mountinfo, which the kernel keeps for it;
 * the only records it writes (pool.h, "Node records") tell the controller what is staged. Entries are parsed with the octal escapes
 * (\040 for a space, ...) undone, so paths compare equal to the ones in CSI requests.
 */
#ifndef KCSI_LOOPPLUGIN_MOUNT_H
#define KCSI_LOOPPLUGIN_MOUNT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "loopplugin/status.h"

/* One line of mountinfo. All strings are owned by the entry. */
struct lp_mount {
	unsigned major, minor; /* st_dev of the mounted filesystem */
	char *root;            /* the subtree of the filesystem mounted here ("/" usually) */
	char *target;          /* the mount point */
	char *options;         /* per-mount options ("rw,relatime") */
	char *fstype;
	char *source;          /* "/dev/loop3", or "none" */
	bool readonly;         /* "ro" in the per-mount options */
};

/*
 * Finds the last (topmost) mount at target. Returns 1 and fills *m (release with
 * lp_mount_release), 0 when nothing is mounted there, -1 when mountinfo cannot be read.
 */
int lp_mount_find(const char *target, struct lp_mount *m);
void lp_mount_release(struct lp_mount *m);
/* Finds a mount of device major:minor (the first in mountinfo): 1 and *m, 0, or -1. */
int lp_mount_find_dev(unsigned major, unsigned minor, struct lp_mount *m);
/* Counts the mounts whose device is major:minor (e.g. every mount of one loop device). */
int lp_mount_count_dev(unsigned major, unsigned minor);
/* Counts the mounts of path root within the filesystem major:minor ("/loop3" in /dev's
 * filesystem: bind mounts of the device node /dev/loop3, how block volumes are published). */
int lp_mount_count_root(const char *root, unsigned major, unsigned minor);

/*
 * Finds a mount of the filesystem major:minor (with root given: only mounts of that subtree, as
 * lp_mount_count_root) whose mount point is none of skip[0..nskip): 1 with its mount point in
 * out (truncated to outlen), 0 when there is none, -1 when mountinfo cannot be read. How the
 * node service finds the other targets a volume is published at.
 */
int lp_mount_find_other(unsigned major, unsigned minor, const char *root, const char *const *skip,
			size_t nskip, char *out, size_t outlen);

/*
 * Mount flags from CSI mount_flags ("noatime", "ro", "nodev", ...). Known flags become
 * MS_* bits; unknown ones are passed to the filesystem as data ("discard", "nobarrier").
 * Returns 0, or -1 when a flag is not allowed for a CSI volume (bind, move, remount, ...).
 */
int lp_mount_parse_flags(const char *const *flags, size_t n, unsigned long *msflags,
			 char *data, size_t datalen, char *bad, size_t badlen);

/* Mounts dev (fstype) at target with flags; st names volume and what failed. */
int lp_mount_fs(const char *volume, const char *dev, const char *target, const char *fstype,
		unsigned long flags, const char *data, struct lp_status *st);
/* Bind-mounts src onto target, then makes it read-only when asked. */
int lp_mount_bind(const char *volume, const char *src, const char *target, bool readonly,
		  struct lp_status *st);
/* Unmounts target if it is a mount point (repeating for stacked mounts); OK when it is not. */
int lp_umount(const char *volume, const char *target, struct lp_status *st);

#endif
