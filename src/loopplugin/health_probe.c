/*
 * health_probe: the facts health.c decides on, observed on the system (health.h has the rules).
 *
 * The image is a stat() of its file. On a node the loop device comes from the kernel's own
 * record (loopdev.h: lp_loop_state), the mounts from mountinfo, and a mounted file system's
 * health from the kernel: ext4 counts the errors it met (/sys/fs/ext4/<dev>/errors_count), and
 * any file system that has given up answers statvfs() with EIO.
 *
 * The file system of a mount volume is checked only where nothing uses it: not published, no
 * stage record on any node, no loop device here. Then the read-only checker runs on the image
 * file itself (fs.h: lp_fs_check_readonly; never a byte written), and its answer is kept per
 * version of the image (device, inode, size, change and modification times): an image nobody
 * uses does not change, so ControllerListVolumeHealth over a pool of idle volumes runs each
 * check once, and a changed image is checked again. An image whose file system signature is
 * gone while its first MiB still holds data (a superblock overwritten) needs repair too: the
 * next stage would take it for blank and format it.
 */
#include "loopplugin/driver_int.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "base/xalloc.h"
#include "loopplugin/fs.h"
#include "loopplugin/health.h"
#include "loopplugin/loopdev.h"

#define CACHE_SIZE 128

struct cached_check {
	char id[64];
	struct stat sb; /* the version of the image checked */
	int state;      /* enum lp_fs_state */
	char detail[300];
};

struct lp_health_cache {
	pthread_mutex_t lock; /* every field */
	struct cached_check e[CACHE_SIZE];
	size_t next; /* the slot the next new image takes */
};

struct lp_health_cache *lp_health_cache_new(void)
{
	struct lp_health_cache *c = xcalloc(1, sizeof(*c));
	pthread_mutex_init(&c->lock, NULL);
	return c;
}

void lp_health_cache_free(struct lp_health_cache *c)
{
	if (!c)
		return;
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* Whether two stat()s saw the same version of a file. */
static bool same_version(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* The cached state of this version of the image, or -1. */
static int cache_get(struct lp_health_cache *c, const char *id, const struct stat *sb,
		     char *detail, size_t len)
{
	int state = -1;
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < CACHE_SIZE && state < 0; i++)
		if (strcmp(c->e[i].id, id) == 0 && same_version(&c->e[i].sb, sb)) {
			state = c->e[i].state;
			snprintf(detail, len, "%s", c->e[i].detail);
		}
	pthread_mutex_unlock(&c->lock);
	return state;
}

static void cache_put(struct lp_health_cache *c, const char *id, const struct stat *sb,
		      int state, const char *detail)
{
	pthread_mutex_lock(&c->lock);
	size_t slot = c->next;
	for (size_t i = 0; i < CACHE_SIZE; i++)
		if (strcmp(c->e[i].id, id) == 0)
			slot = i; /* the older version's place */
	if (slot == c->next)
		c->next = (c->next + 1) % CACHE_SIZE;
	struct cached_check *e = &c->e[slot];
	snprintf(e->id, sizeof(e->id), "%s", id);
	e->sb = *sb;
	e->state = state;
	snprintf(e->detail, sizeof(e->detail), "%s", detail);
	pthread_mutex_unlock(&c->lock);
}

/* Whether the first MiB of the image holds a byte that is not zero. */
static bool holds_data(const char *img)
{
	int fd = open(img, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	bool found = false;
	off_t at = lseek(fd, 0, SEEK_DATA);
	if (at >= 0 && at < MiB) {
		char *buf = xmalloc(MiB);
		ssize_t n = pread(fd, buf, MiB, 0);
		for (ssize_t i = 0; i < n && !found; i++)
			found = buf[i] != 0;
		free(buf);
	}
	close(fd);
	return found;
}

/* The read-only check of an image nothing uses (see the top of the file). */
static int fs_offline(struct lp_driver *d, const struct lp_volume *v, const char *img,
		      const struct stat *sb, char *detail, size_t len)
{
	int state = cache_get(d->health, v->id, sb, detail, len);
	if (state >= 0)
		return state;
	char type[64];
	struct lp_status st;
	int found = lp_fs_probe(v->id, img, type, sizeof(type), &st);
	state = LP_FS_UNCHECKED;
	detail[0] = '\0';
	if (found == 1) {
		int r = lp_fs_check_readonly(img, type, detail, len);
		state = r == 0 ? LP_FS_CLEAN : r == 1 ? LP_FS_DAMAGED : LP_FS_UNCHECKED;
	} else if (found == 0 && holds_data(img)) {
		state = LP_FS_DAMAGED;
		snprintf(detail, len, "no file system signature is left on the image, yet it holds "
			 "data (%s was made on it); the next stage would format it",
			 lp_empty(v->fstype) ? "a file system" : v->fstype);
	}
	/* a stage that began meanwhile changes the image: this answer was about another one */
	struct stat after;
	if (stat(img, &after) < 0 || !same_version(&after, sb))
		return LP_FS_UNCHECKED;
	cache_put(d->health, v->id, sb, state, detail);
	return state;
}

/* Whether anything may be using the volume: published, staged on any node, a device here. */
static bool in_use(struct lp_driver *d, const struct lp_volume *v, const char *img)
{
	if (v->natt)
		return true;
	char **nodes = NULL, *dev = NULL;
	size_t n = 0;
	lp_stage_nodes(d->pool, v->id, &nodes, &n);
	lp_free_strings(nodes, n);
	bool here = n == 0 && lp_loop_find(img, &dev) == 1;
	free(dev);
	return n > 0 || here;
}

/* The image's facts; true when it is there, whole, and sb describes it. */
static bool probe_image(const char *img, const struct lp_volume *v, struct lp_volume_facts *f,
			struct stat *sb)
{
	f->volume_size = v->size;
	if (stat(img, sb) < 0) {
		f->image = errno == ENOENT ? LP_IMAGE_MISSING : LP_IMAGE_UNREADABLE;
		f->image_errno = errno;
		return false;
	}
	f->image = LP_IMAGE_OK;
	f->image_size = sb->st_size;
	return sb->st_size >= v->size;
}

void lp_probe_volume(struct lp_driver *d, const struct lp_volume *v, struct lp_volume_facts *f,
		     char *detail, size_t len)
{
	memset(f, 0, sizeof(*f));
	char *img = lp_volume_image(d->pool, v->id);
	struct stat sb;
	if (probe_image(img, v, f, &sb) && !v->block && !lp_volume_formatting(d->pool, v->id) &&
	    !in_use(d, v, img)) {
		f->fs = fs_offline(d, v, img, &sb, detail, len);
		f->fs_detail = detail;
	}
	free(img);
}

/* ext4's count of the errors it met since the file system was made, or 0. */
static long ext4_errors(const char *dev)
{
	char path[300];
	const char *name = strrchr(dev, '/') ? strrchr(dev, '/') + 1 : dev;
	snprintf(path, sizeof(path), "/sys/fs/ext4/%s/errors_count", name);
	FILE *fp = fopen(path, "re");
	long n = 0;
	if (fp) {
		if (fscanf(fp, "%ld", &n) != 1)
			n = 0;
		fclose(fp);
	}
	return n;
}

/* The mounted file system's health, as the kernel sees it. */
static int fs_mounted(const char *dev, const char *mountpoint, char *detail, size_t len)
{
	struct statvfs sv;
	if (statvfs(mountpoint, &sv) < 0 && errno == EIO) {
		snprintf(detail, len, "statvfs %s: %s", mountpoint, strerror(EIO));
		return LP_FS_IO_ERROR;
	}
	long errs = ext4_errors(dev);
	if (errs > 0) {
		snprintf(detail, len, "the kernel counted %ld error(s) on ext4 of %s since it was "
			 "made", errs, dev);
		return LP_FS_DAMAGED;
	}
	return LP_FS_CLEAN;
}

void lp_probe_volume_node(struct lp_driver *d, const struct lp_volume *v, const char *staging,
			  const char *publish, struct lp_volume_facts *f, char **dev,
			  char *detail, size_t len)
{
	*dev = NULL;
	struct lp_stage *rec = NULL;
	lp_stage_load(d->pool, d->cfg.nodeid, v->id, &rec);
	char *img = lp_volume_image(d->pool, v->id);
	int loop = lp_loop_state(img, dev);
	bool asked = !lp_empty(staging) || !lp_empty(publish);
	if (!rec && loop == LP_LOOP_NONE && !asked) {
		/* not on this node: what the controller sees, and the offline check */
		lp_probe_volume(d, v, f, detail, len);
		free(img);
		return;
	}
	memset(f, 0, sizeof(*f));
	struct stat sb;
	probe_image(img, v, f, &sb);
	f->staged_here = true;
	f->loop = loop;
	f->device = *dev;
	char *stage_path = !lp_empty(staging) ? lp_canon_path(staging)
			 : rec ? xstrdup(rec->path) : NULL;
	if (stage_path && !v->block) {
		bool there = *dev && lp_target_is_volumes(stage_path, *dev) == 1;
		f->staging = there ? LP_PLACE_OK : LP_PLACE_MISSING;
		if (there) {
			f->fs = fs_mounted(*dev, stage_path, detail, len);
			f->fs_detail = detail;
		}
	}
	if (!lp_empty(publish)) {
		char *p = lp_canon_path(publish);
		f->publish = *dev && lp_target_is_volumes(p, *dev) == 1 ? LP_PLACE_OK
									: LP_PLACE_MISSING;
		free(p);
	}
	free(stage_path);
	lp_stage_free(rec);
	free(img);
}

void lp_probe_pool(struct lp_driver *d, struct lp_pool_facts *f)
{
	const char *dir = lp_pool_dir(d->pool);
	memset(f, 0, sizeof(*f));
	f->free_bytes = f->free_inodes = -1;
	struct stat sb;
	int r = stat(dir, &sb);
	if (r < 0 || !S_ISDIR(sb.st_mode)) {
		f->dir_errno = r < 0 ? errno : ENOTDIR;
		return;
	}
	char vols[4200];
	snprintf(vols, sizeof(vols), "%s/volumes", dir);
	struct statvfs sv;
	if (statvfs(dir, &sv) == 0) {
		f->free_bytes = (int64_t)sv.f_bavail * (int64_t)sv.f_frsize;
		f->free_inodes = sv.f_files ? (int64_t)sv.f_favail : -1;
		if (sv.f_flag & ST_RDONLY)
			f->write_errno = EROFS;
	}
	if (!f->write_errno && access(vols, W_OK) < 0)
		f->write_errno = errno;
}
