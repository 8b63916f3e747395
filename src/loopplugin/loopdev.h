/*
 * loopdev: loop block devices backed by volume image files.
 *
 * A device is set up with LOOP_CTL_GET_FREE + LOOP_CONFIGURE (falling back to LOOP_SET_FD +
 * LOOP_SET_STATUS64 on kernels before 5.8), without LO_FLAGS_AUTOCLEAR: the device must outlive
 * the driver process, so that a restarted driver finds its volumes still staged. That is also how
 * it finds them: the kernel records each device's backing file in
 * /sys/block/loopN/loop/backing_file. lp_loop_attach() names the device in an extended attribute
 * of the image (user.kcsi.loop-device) and lp_loop_find() checks that one device's backing_file,
 * so a lookup costs two reads however many devices the machine has; the kernel's answer decides,
 * the attribute only says where to ask (loopdev.c: stale hints, filesystems without xattrs).
 *
 * Devices are named by path ("/dev/loop7"); strings returned are owned by the caller.
 */
#ifndef KCSI_LOOPPLUGIN_LOOPDEV_H
#define KCSI_LOOPPLUGIN_LOOPDEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loopplugin/status.h"

/*
 * Finds the loop device backed by image (an absolute, canonical path). Returns 1 and sets *dev
 * (malloc'd "/dev/loopN"), 0 when there is none.
 */
int lp_loop_find(const char *image, char **dev);
/*
 * What backs image on this host, for the health RPCs (health.h). BACKED: a device backs the
 * image (*dev set); DETACHING: it does, but was told to detach and goes when its last user closes
 * it (autoclear, which this driver never sets: losetup -d while mounted); STALE: no device backs
 * the image, but one (*dev) backs a file that had its path and was since deleted or replaced, so
 * writes to it no longer reach the image; NONE: no device at all. Costs a scan of every loop
 * device only when no device backs the image.
 */
enum lp_loop_state { LP_LOOP_NONE, LP_LOOP_BACKED, LP_LOOP_DETACHING, LP_LOOP_STALE };
int lp_loop_state(const char *image, char **dev);
/*
 * Scans every loop device once and writes the device hint on each backing file under dir (the
 * pool's images), so lp_loop_find() sees devices set up before hints existed or by another
 * program. Returns how many it found.
 */
size_t lp_loop_hint_all(const char *dir);
/*
 * Returns the device for image, setting one up when there is none (idempotent). readonly makes
 * a new device read-only. volume names the volume in errors.
 */
int lp_loop_attach(const char *volume, const char *image, bool readonly, char **dev,
		   struct lp_status *st);
/* Detaches dev; OK when it is already free. Retries briefly while the device is busy. */
int lp_loop_detach(const char *volume, const char *dev, struct lp_status *st);
/* Re-reads the backing file's size (after the image grew). */
int lp_loop_refresh_size(const char *volume, const char *dev, struct lp_status *st);
/* Size of a block device in bytes, or -1. */
int64_t lp_blockdev_size(const char *dev);
/* major:minor of dev; returns -1 when it is not a block device. */
int lp_blockdev_numbers(const char *dev, unsigned *major, unsigned *minor);
/* True when dev is a loop device that is read-only. */
bool lp_loop_readonly(const char *dev);

#endif
