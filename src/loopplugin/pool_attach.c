/*
 * pool_attach: which node a volume is published to and under which device name: names taken
 * per node with O_EXCL files, recorded in the volume's metadata, and reconciled after a crash.
 */
#include "loopplugin/pool_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/strbuf.h"
#include "base/xalloc.h"

struct lp_attachment *lp_volume_attachment(const struct lp_volume *v, const char *node)
{
	for (size_t i = 0; i < v->natt; i++)
		if (strcmp(v->att[i].node, node) == 0)
			return &v->att[i];
	return NULL;
}

/* Device names as on the seed's cloud: xvd + [b-z][a-z], 650 per node. */
#define DEV_FIRST 'b'
#define DEV_SPAN ('z' - DEV_FIRST + 1)

int lp_device_range_size(void) { return DEV_SPAN * 26; }

static void device_name(int i, char *buf, size_t len)
{
	snprintf(buf, len, "xvd%c%c", DEV_FIRST + i / 26, 'a' + i % 26);
}

static int device_index(const char *name)
{
	if (strlen(name) != 5 || strncmp(name, "xvd", 3) != 0)
		return -1;
	int a = name[3] - DEV_FIRST, b = name[4] - 'a';
	if (a < 0 || a >= DEV_SPAN || b < 0 || b >= 26)
		return -1;
	return a * 26 + b;
}

/* attachments/<node>: one file per device name in use on that node, holding the volume ID */
static char *att_dir(const struct lp_pool *p, const char *node)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "%s/attachments/%s", p->dir, node);
	return strbuf_detach(&sb, NULL);
}

/* Marks the device names in use on a node; returns how many, or -1 with errno. */
static int names_in_use(const char *dir, unsigned char *used)
{
	DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -1;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		int k = device_index(de->d_name);
		if (k >= 0) {
			used[k] = 1;
			n++;
		}
	}
	closedir(d);
	return n;
}

/* Takes a free device name by creating its file with O_EXCL: never two holders of one name. */
static int take_name(const char *dir, const unsigned char *used, const char *volume, char *dev,
		     size_t len)
{
	int range = lp_device_range_size();
	for (int k = 0; k < range; k++) {
		if (used[k])
			continue;
		char path[4400];
		device_name(k, dev, len);
		snprintf(path, sizeof(path), "%s/%s", dir, dev);
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0 && errno == EEXIST)
			continue;
		if (fd < 0)
			return errno;
		ssize_t w = write(fd, volume, strlen(volume));
		int err = (w == (ssize_t)strlen(volume) && fsync(fd) == 0) ? 0 : (errno ? errno : EIO);
		close(fd);
		if (err) {
			unlink(path);
			return err;
		}
		lp_fsync_dir(path);
		return 0;
	}
	return ENOSPC;
}

static void drop_name(const char *dir, const char *dev)
{
	char path[4400];
	snprintf(path, sizeof(path), "%s/%s", dir, dev);
	if (unlink(path) == 0)
		lp_fsync_dir(path);
}

int lp_volume_attach(struct lp_pool *p, struct lp_volume *v, const char *node, bool readonly,
		     int limit, struct lp_status *st)
{
	int range = lp_device_range_size();
	unsigned char *used = xcalloc((size_t)range, 1);
	char *dir = att_dir(p, node);
	char dev[16];
	int ret = 0, err = lp_mkdir_p(dir);
	int count = err ? -1 : names_in_use(dir, used);
	if (count < 0)
		ret = lp_fail(st, LP_INTERNAL, "volume %s: read device names of node %s: %s", v->id,
			      node, strerror(err ? err : errno));
	else if (limit > 0 && count >= limit)
		ret = lp_fail(st, LP_RESOURCE_EXHAUSTED,
			      "volume %s: node %s already has %d volumes published, the limit",
			      v->id, node, count);
	else if ((err = take_name(dir, used, v->id, dev, sizeof(dev))) != 0)
		ret = err == ENOSPC
			      ? lp_fail(st, LP_RESOURCE_EXHAUSTED,
					"volume %s: node %s has no free device name (%d in use)",
					v->id, node, range)
			      : lp_fail(st, LP_INTERNAL, "volume %s: record device name on node %s: %s",
					v->id, node, strerror(err));
	free(used);
	if (ret) {
		free(dir);
		return ret;
	}
	v->att = xrealloc(v->att, (v->natt + 1) * sizeof(*v->att));
	v->att[v->natt].node = xstrdup(node);
	v->att[v->natt].device = xstrdup(dev);
	v->att[v->natt].readonly = readonly;
	v->natt++;
	ret = lp_volume_save(p, v, st);
	if (ret) {
		v->natt--;
		free(v->att[v->natt].node);
		free(v->att[v->natt].device);
		drop_name(dir, dev);
	}
	free(dir);
	return ret;
}

int lp_volume_detach(struct lp_pool *p, struct lp_volume *v, const char *node,
		     struct lp_status *st)
{
	struct lp_attachment *a = lp_volume_attachment(v, node);
	if (!a)
		return 0;
	struct lp_attachment gone = *a;
	size_t i = (size_t)(a - v->att);
	memmove(&v->att[i], &v->att[i + 1], (v->natt - i - 1) * sizeof(*v->att));
	v->natt--;
	int ret = lp_volume_save(p, v, st);
	if (ret) {
		memmove(&v->att[i + 1], &v->att[i], (v->natt - i) * sizeof(*v->att));
		v->att[i] = gone;
		v->natt++;
		return ret;
	}
	/* the metadata no longer names it: now the name is free */
	char *dir = att_dir(p, gone.node);
	drop_name(dir, gone.device);
	free(dir);
	free(gone.node);
	free(gone.device);
	return 0;
}

int lp_pool_reconcile_names(struct lp_pool *p)
{
	char top[4200];
	snprintf(top, sizeof(top), "%s/attachments", p->dir);
	DIR *d = opendir(top);
	if (!d)
		return 0;
	int removed = 0;
	struct dirent *nd;
	while ((nd = readdir(d))) {
		if (!lp_id_valid(nd->d_name))
			continue;
		char *dir = att_dir(p, nd->d_name);
		DIR *dd = opendir(dir);
		struct dirent *de;
		while (dd && (de = readdir(dd))) {
			if (device_index(de->d_name) < 0)
				continue;
			char path[4400], id[256] = { 0 };
			snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
			int fd = open(path, O_RDONLY | O_CLOEXEC);
			ssize_t n = fd >= 0 ? read(fd, id, sizeof(id) - 1) : -1;
			if (fd >= 0)
				close(fd);
			struct lp_volume *v = NULL;
			bool backed = n > 0 && lp_volume_load(p, id, &v, NULL) == 0;
			struct lp_attachment *a = backed ? lp_volume_attachment(v, nd->d_name) : NULL;
			if (!a || strcmp(a->device, de->d_name) != 0) {
				if (unlink(path) == 0)
					removed++;
			}
			lp_volume_free(v);
		}
		if (dd)
			closedir(dd);
		free(dir);
	}
	closedir(d);
	return removed;
}
