/*
 * loopdev: the ioctls, the device hint on each image, and a scan of /sys/block for backing files.
 *
 * Finding an image's device by reading every loop device's backing_file costs one sysfs open per
 * device on the machine, so with a thousand volumes staged each lookup cost a thousand opens. So
 * lp_loop_attach() writes the device's name into the image's HINT_XATTR before it configures the
 * device, and lp_loop_find() reads that and checks it against the one device's backing_file: a
 * stale hint (the device detached, or since backing another file; a clone carrying its source's
 * attribute) reads as "not attached". An image without a hint is not attached, as long as every
 * device set up for a pool image went through lp_loop_attach(): lp_loop_hint_all() (at a node
 * plugin's start) gives a hint to images attached before hints existed. Where the filesystem
 * keeps no user xattrs (or setting one failed once), lookups scan /sys/block as before.
 *
 * Attaching races with any other program on the host that grabs loop devices (the free device
 * reported by LOOP_CTL_GET_FREE may be taken before our LOOP_CONFIGURE), so a busy device means
 * "ask for another one", a few times over.
 */
#include "loopplugin/loopdev.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "base/timeutil.h"
#include "base/xalloc.h"

static bool read_backing(const char *name, char *buf, size_t len)
{
	char path[300];
	snprintf(path, sizeof(path), "/sys/block/%s/loop/backing_file", name);
	FILE *fp = fopen(path, "re");
	if (!fp)
		return false;
	bool ok = fgets(buf, (int)len, fp) != NULL;
	fclose(fp);
	if (ok)
		buf[strcspn(buf, "\n")] = '\0';
	return ok;
}

#define HINT_XATTR "user.kcsi.loop-device"

/* Set once a hint could not be written: from then on every lookup scans. */
static atomic_bool hints_broken;

/* Calls fn(name, backing) for each attached loop device until it returns true. */
static void each_loop(bool (*fn)(const char *name, const char *backing, void *arg), void *arg)
{
	DIR *d = opendir("/sys/block");
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, "loop", 4) != 0)
			continue;
		char backing[4096];
		if (read_backing(de->d_name, backing, sizeof(backing)) && fn(de->d_name, backing, arg))
			break;
	}
	closedir(d);
}

struct scan_arg {
	const char *image;
	char name[64];
};

static bool scan_cb(const char *name, const char *backing, void *arg)
{
	struct scan_arg *a = arg;
	size_t n = strlen(name);
	if (strcmp(backing, a->image) != 0 || n >= sizeof(a->name))
		return false;
	memcpy(a->name, name, n + 1);
	return true;
}

static bool valid_name(const char *name)
{
	if (strncmp(name, "loop", 4) != 0 || !name[4])
		return false;
	for (const char *c = name + 4; *c; c++)
		if (*c < '0' || *c > '9')
			return false;
	return true;
}

/* The image's hint: 1 with the device name, 0 without one, -1 when hints cannot be used. */
static int read_hint(const char *image, char *name, size_t len)
{
	if (atomic_load(&hints_broken))
		return -1;
	ssize_t n = getxattr(image, HINT_XATTR, name, len - 1);
	if (n < 0)
		return errno == ENODATA ? 0 : errno == ENOENT ? 0 : -1;
	name[n] = '\0';
	return valid_name(name) ? 1 : 0;
}

static void write_hint(const char *image, const char *name)
{
	if (setxattr(image, HINT_XATTR, name, strlen(name), 0) < 0)
		atomic_store(&hints_broken, true);
}

int lp_loop_find(const char *image, char **dev)
{
	*dev = NULL;
	struct scan_arg a = { image, "" };
	char backing[4096];
	int h = read_hint(image, a.name, sizeof(a.name));
	if (h == 0)
		return 0;
	if (h == 1 && !(read_backing(a.name, backing, sizeof(backing)) &&
			strcmp(backing, image) == 0))
		return 0; /* stale: the hinted device no longer backs the image */
	if (h < 0)
		each_loop(scan_cb, &a);
	if (!a.name[0])
		return 0;
	char path[300];
	snprintf(path, sizeof(path), "/dev/%s", a.name);
	*dev = xstrdup(path);
	return 1;
}

/* Whether the device was set to detach at its last close: sysfs loop/autoclear. */
static bool autoclear(const char *dev)
{
	char path[300], buf[8] = "";
	const char *name = strrchr(dev, '/') ? strrchr(dev, '/') + 1 : dev;
	snprintf(path, sizeof(path), "/sys/block/%s/loop/autoclear", name);
	FILE *fp = fopen(path, "re");
	if (!fp)
		return false;
	bool on = fgets(buf, sizeof(buf), fp) && buf[0] == '1';
	fclose(fp);
	return on;
}

int lp_loop_state(const char *image, char **dev)
{
	if (lp_loop_find(image, dev) == 1)
		return autoclear(*dev) ? LP_LOOP_DETACHING : LP_LOOP_BACKED;
	/* the kernel names an unlinked backing file "<path> (deleted)" */
	char gone[4200];
	snprintf(gone, sizeof(gone), "%s (deleted)", image);
	struct scan_arg a = { gone, "" };
	each_loop(scan_cb, &a);
	if (!a.name[0])
		return LP_LOOP_NONE;
	char path[300];
	snprintf(path, sizeof(path), "/dev/%s", a.name);
	*dev = xstrdup(path);
	return LP_LOOP_STALE;
}

struct hint_arg {
	const char *prefix;
	size_t n;
};

static bool hint_cb(const char *name, const char *backing, void *arg)
{
	struct hint_arg *a = arg;
	size_t len = strlen(a->prefix);
	if (strncmp(backing, a->prefix, len) == 0 && backing[len] == '/') {
		write_hint(backing, name);
		a->n++;
	}
	return false;
}

size_t lp_loop_hint_all(const char *dir)
{
	struct hint_arg a = { dir, 0 };
	each_loop(hint_cb, &a);
	return a.n;
}

/* Binds fd to the loop device loopfd; returns 0 or an errno. */
static int loop_bind(int loopfd, int fd, const char *image, bool readonly)
{
	struct loop_config cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.fd = (unsigned)fd;
	cfg.info.lo_flags = readonly ? LO_FLAGS_READ_ONLY : 0;
	snprintf((char *)cfg.info.lo_file_name, LO_NAME_SIZE, "%s", image);
	if (ioctl(loopfd, LOOP_CONFIGURE, &cfg) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOTTY)
		return errno;
	/* before Linux 5.8 */
	if (ioctl(loopfd, LOOP_SET_FD, fd) < 0)
		return errno;
	if (ioctl(loopfd, LOOP_SET_STATUS64, &cfg.info) < 0) {
		int e = errno;
		ioctl(loopfd, LOOP_CLR_FD, 0);
		return e;
	}
	return 0;
}

int lp_loop_attach(const char *volume, const char *image, bool readonly, char **dev,
		   struct lp_status *st)
{
	if (lp_loop_find(image, dev))
		return 0;
	int fd = open(image, (readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (fd < 0)
		return lp_fail(st, errno == ENOENT ? LP_NOT_FOUND : LP_INTERNAL,
			       "volume %s: open image %s: %s", volume, image, strerror(errno));
	int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0) {
		close(fd);
		return lp_fail(st, LP_UNAVAILABLE, "volume %s: open /dev/loop-control: %s", volume,
			       strerror(errno));
	}
	int err = EBUSY;
	for (int attempt = 0; attempt < 20 && err == EBUSY; attempt++) {
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);
		if (n < 0) {
			err = errno;
			break;
		}
		char path[64];
		snprintf(path, sizeof(path), "/dev/loop%d", n);
		int lfd = -1;
		for (int w = 0; w < 50 && lfd < 0; w++) {
			/* udev may not have created the node yet */
			lfd = open(path, O_RDWR | O_CLOEXEC);
			if (lfd < 0 && errno == ENOENT) {
				mknod(path, S_IFBLK | 0660, makedev(7, (unsigned)n));
				continue;
			}
			if (lfd < 0)
				break;
		}
		if (lfd < 0) {
			err = errno;
			break;
		}
		/* the hint first: a crash after LOOP_CONFIGURE still leaves the device findable */
		write_hint(image, path + 5);
		err = loop_bind(lfd, fd, image, readonly);
		close(lfd);
		if (err == 0)
			*dev = xstrdup(path);
	}
	close(ctl);
	close(fd);
	if (err != 0)
		return lp_fail(st, err == EBUSY ? LP_RESOURCE_EXHAUSTED : LP_INTERNAL,
			       "volume %s: set up a loop device for %s: %s", volume, image,
			       strerror(err));
	return 0;
}

int lp_loop_detach(const char *volume, const char *dev, struct lp_status *st)
{
	int fd = open(dev, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT || errno == ENXIO)
			return 0;
		return lp_fail(st, LP_INTERNAL, "volume %s: open %s: %s", volume, dev,
			       strerror(errno));
	}
	int err = 0;
	for (int i = 0; i < 50; i++) {
		if (ioctl(fd, LOOP_CLR_FD, 0) == 0 || errno == ENXIO) {
			err = 0;
			break;
		}
		err = errno;
		if (err != EBUSY)
			break;
		/* a just-unmounted filesystem can hold the device for a moment */
		sleep_ns(20 * NSEC_PER_MSEC);
	}
	close(fd);
	if (err)
		return lp_fail(st, err == EBUSY ? LP_FAILED_PRECONDITION : LP_INTERNAL,
			       "volume %s: detach %s: %s", volume, dev, strerror(err));
	return 0;
}

int lp_loop_refresh_size(const char *volume, const char *dev, struct lp_status *st)
{
	int fd = open(dev, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return lp_fail(st, LP_INTERNAL, "volume %s: open %s: %s", volume, dev,
			       strerror(errno));
	int r = ioctl(fd, LOOP_SET_CAPACITY, 0);
	int e = errno;
	close(fd);
	if (r < 0)
		return lp_fail(st, LP_INTERNAL, "volume %s: resize %s: %s", volume, dev,
			       strerror(e));
	return 0;
}

int64_t lp_blockdev_size(const char *dev)
{
	int fd = open(dev, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	uint64_t size = 0;
	int r = ioctl(fd, BLKGETSIZE64, &size);
	close(fd);
	return r < 0 ? -1 : (int64_t)size;
}

int lp_blockdev_numbers(const char *dev, unsigned *major_out, unsigned *minor_out)
{
	struct stat sb;
	if (stat(dev, &sb) < 0 || !S_ISBLK(sb.st_mode))
		return -1;
	*major_out = major(sb.st_rdev);
	*minor_out = minor(sb.st_rdev);
	return 0;
}

bool lp_loop_readonly(const char *dev)
{
	const char *name = strrchr(dev, '/');
	char path[300];
	snprintf(path, sizeof(path), "/sys/block/%s/ro", name ? name + 1 : dev);
	FILE *fp = fopen(path, "re");
	if (!fp)
		return false;
	int v = 0;
	if (fscanf(fp, "%d", &v) != 1)
		v = 0;
	fclose(fp);
	return v == 1;
}
