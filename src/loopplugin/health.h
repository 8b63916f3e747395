/*
 * health: what kcsi-loopplugin reports through the CSI v1.13 health RPCs, as pure decisions
 * from facts the driver has observed to the conditions it answers (health.c, table-tested in
 * tests/unit/test_lp_health.c). Gathering the facts is health_probe.c's; the four RPCs are
 * health_rpc.c's.
 *
 * A volume is its image file, and on a node the loop device that backs the image and the mounts
 * of that device. It is abnormal when
 *
 *     the image is missing                          DATA_LOSS     ImageMissing
 *     the image cannot be looked at                 INACCESSIBLE  ImageUnreadable
 *     the image is smaller than the volume          DATA_LOSS     ImageTruncated
 *     staged here, no loop device backs the image   INACCESSIBLE  LoopDeviceDetached
 *     staged here, the device backs a deleted or    DATA_LOSS     LoopDeviceNotBackedByImage
 *       replaced file (writes no longer reach the image)
 *     the device was told to detach (losetup -d     DEGRADED      LoopDeviceDetaching
 *       while mounted: it goes at the unmount)
 *     not mounted at the staging path it was        INACCESSIBLE  NotMountedAtStagingPath
 *       staged at (mount volumes)
 *     not at the publish path the CO names          INACCESSIBLE  NotPublishedAtPath
 *     its file system needs repair (the read-only   DATA_LOSS     FilesystemNeedsRepair
 *       check found damage, or the kernel counted errors on the mounted one)
 *     its mounted file system answers I/O errors    INACCESSIBLE  FilesystemIOError
 *
 * and the pool, the storage NodeGetStorageHealth reports, when its folder is missing or cannot
 * be reached (STORAGE_UNREACHABLE PoolMissing / PoolUnreachable), is read-only or refuses
 * writes (STORAGE_DEGRADED PoolNotWritable), or is full (STORAGE_DEGRADED PoolFull: less than
 * LP_POOL_FULL_BYTES or no inode left, so thin volumes cannot grow into their images).
 *
 * Each condition is one entry (status, reason, message); no two share a status and a reason,
 * as the spec asks. An empty list means nothing wrong is known.
 */
#ifndef KCSI_LOOPPLUGIN_HEALTH_H
#define KCSI_LOOPPLUGIN_HEALTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loopplugin/loopdev.h"

enum lp_image_state { LP_IMAGE_OK, LP_IMAGE_MISSING, LP_IMAGE_UNREADABLE };
/* Whether the volume is where a path says it is; UNASKED when no path applies. */
enum lp_place { LP_PLACE_UNASKED, LP_PLACE_OK, LP_PLACE_MISSING };
enum lp_fs_state { LP_FS_UNCHECKED, LP_FS_CLEAN, LP_FS_DAMAGED, LP_FS_IO_ERROR };

/* What was observed of one volume. Strings are borrowed. */
struct lp_volume_facts {
	int image;            /* enum lp_image_state */
	int image_errno;      /* LP_IMAGE_UNREADABLE: why */
	int64_t image_size;   /* LP_IMAGE_OK: bytes */
	int64_t volume_size;  /* bytes, as recorded in the volume's metadata */
	bool staged_here;     /* node side: this node staged it (a stage record or a device) */
	int loop;             /* enum lp_loop_state; looked at only when staged_here */
	const char *device;   /* the loop device, when there is one */
	int staging;          /* enum lp_place */
	int publish;          /* enum lp_place */
	int fs;               /* enum lp_fs_state */
	const char *fs_detail; /* LP_FS_DAMAGED, LP_FS_IO_ERROR: what the check or kernel said */
};

/* What was observed of the pool. */
struct lp_pool_facts {
	int dir_errno;       /* 0 when the folder is there */
	int write_errno;     /* 0 when it takes writes */
	int64_t free_bytes;  /* -1: unknown */
	int64_t free_inodes; /* -1: unknown, or a filesystem without an inode count */
};

/* Less free space than one MiB (the unit volumes grow by) is a full pool. */
#define LP_POOL_FULL_BYTES (1024LL * 1024)

#define LP_HEALTH_MAX 10
struct lp_health_entry {
	int status;         /* a VolumeHealthErrorType or StorageHealthErrorType value */
	const char *reason; /* a static CamelCase word */
	char message[512];
};

/* The conditions of one volume into out (LP_HEALTH_MAX at most); returns how many. */
size_t lp_volume_health(const struct lp_volume_facts *f, struct lp_health_entry *out);
/* The conditions of the pool in folder dir; returns how many. */
size_t lp_pool_health(const char *dir, const struct lp_pool_facts *f,
		      struct lp_health_entry *out);

#endif
