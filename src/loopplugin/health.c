/*
 * health: the rules of health.h as two pure functions, facts in, conditions out. Nothing here
 * reads the system, so tests/unit/test_lp_health.c states every rule as a row of a table.
 *
 * The order of the entries is the order of the rules in health.h: from the image, which every
 * view of the volume shares, to the node's device, its paths and its file system.
 */
#include "loopplugin/health.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "csi/client.h"

static void add(struct lp_health_entry *out, size_t *n, int status, const char *reason,
		const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void add(struct lp_health_entry *out, size_t *n, int status, const char *reason,
		const char *fmt, ...)
{
	if (*n >= LP_HEALTH_MAX)
		return;
	struct lp_health_entry *e = &out[(*n)++];
	e->status = status;
	e->reason = reason;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof(e->message), fmt, ap);
	va_end(ap);
}

#define DEGRADED CSI__V1__VOLUME_HEALTH_ERROR_TYPE__DEGRADED
#define INACCESSIBLE CSI__V1__VOLUME_HEALTH_ERROR_TYPE__INACCESSIBLE
#define DATA_LOSS CSI__V1__VOLUME_HEALTH_ERROR_TYPE__DATA_LOSS

static void image_rules(const struct lp_volume_facts *f, struct lp_health_entry *out, size_t *n)
{
	if (f->image == LP_IMAGE_MISSING)
		add(out, n, DATA_LOSS, "ImageMissing",
		    "the volume's image file is gone from the pool; its data is lost unless a "
		    "loop device still holds the deleted file");
	else if (f->image == LP_IMAGE_UNREADABLE)
		add(out, n, INACCESSIBLE, "ImageUnreadable", "the volume's image file cannot be "
		    "looked at: %s", strerror(f->image_errno));
	else if (f->image_size < f->volume_size)
		add(out, n, DATA_LOSS, "ImageTruncated",
		    "the volume's image file holds %lld bytes, the volume %lld: the end is lost",
		    (long long)f->image_size, (long long)f->volume_size);
}

static void node_rules(const struct lp_volume_facts *f, struct lp_health_entry *out, size_t *n)
{
	const char *dev = f->device ? f->device : "";
	if (f->staged_here) {
		if (f->loop == LP_LOOP_NONE)
			add(out, n, INACCESSIBLE, "LoopDeviceDetached",
			    "the volume is staged on this node, but no loop device backs its image");
		else if (f->loop == LP_LOOP_STALE)
			add(out, n, DATA_LOSS, "LoopDeviceNotBackedByImage",
			    "loop device %s backs a file that is no longer the volume's image "
			    "(deleted or replaced): what is written to it never reaches the image", dev);
		else if (f->loop == LP_LOOP_DETACHING)
			add(out, n, DEGRADED, "LoopDeviceDetaching",
			    "loop device %s was told to detach and goes when the volume is unmounted",
			    dev);
	}
	if (f->staging == LP_PLACE_MISSING)
		add(out, n, INACCESSIBLE, "NotMountedAtStagingPath",
		    "the volume's file system is not mounted at its staging path");
	if (f->publish == LP_PLACE_MISSING)
		add(out, n, INACCESSIBLE, "NotPublishedAtPath",
		    "the volume is not published at the path given");
}

size_t lp_volume_health(const struct lp_volume_facts *f, struct lp_health_entry *out)
{
	size_t n = 0;
	image_rules(f, out, &n);
	node_rules(f, out, &n);
	if (f->fs == LP_FS_DAMAGED)
		add(out, &n, DATA_LOSS, "FilesystemNeedsRepair",
		    "the volume's file system needs repair (fsck while it is unmounted): %s",
		    f->fs_detail ? f->fs_detail : "");
	else if (f->fs == LP_FS_IO_ERROR)
		add(out, &n, INACCESSIBLE, "FilesystemIOError",
		    "the volume's mounted file system answers with errors: %s",
		    f->fs_detail ? f->fs_detail : "");
	return n;
}

size_t lp_pool_health(const char *dir, const struct lp_pool_facts *f,
		      struct lp_health_entry *out)
{
	size_t n = 0;
	if (f->dir_errno) {
		add(out, &n, CSI__V1__STORAGE_HEALTH_ERROR_TYPE__STORAGE_UNREACHABLE,
		    f->dir_errno == ENOENT ? "PoolMissing" : "PoolUnreachable",
		    "the pool folder %s: %s; no volume of it can be used", dir,
		    strerror(f->dir_errno));
		return n;
	}
	if (f->write_errno)
		add(out, &n, CSI__V1__STORAGE_HEALTH_ERROR_TYPE__STORAGE_DEGRADED, "PoolNotWritable",
		    "the pool folder %s takes no writes (%s): no volume or snapshot can be created",
		    dir, strerror(f->write_errno));
	if ((f->free_bytes >= 0 && f->free_bytes < LP_POOL_FULL_BYTES) || f->free_inodes == 0)
		add(out, &n, CSI__V1__STORAGE_HEALTH_ERROR_TYPE__STORAGE_DEGRADED, "PoolFull",
		    "the pool %s is full (%lld bytes, %lld inodes free): thin volumes fail to write "
		    "where their images are not yet allocated",
		    dir, (long long)f->free_bytes, (long long)f->free_inodes);
	return n;
}
