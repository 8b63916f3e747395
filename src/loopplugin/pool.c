/*
 * pool: files and JSON (jansson). Every write goes through write_atomic(): a temporary file,
 * fsync, rename, fsync of the folder. Listing reads every metadata file: pools hold hundreds of
 * volumes, not millions, and reading is what keeps a shared pool consistent between processes.
 */
#include "loopplugin/pool.h"
#include "loopplugin/pool_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "base/strbuf.h"
#include "base/xalloc.h"

char *lp_pool_path(const struct lp_pool *p, const char *sub, const char *id, const char *ext)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "%s/%s/%s%s", p->dir, sub, id, ext);
	return strbuf_detach(&sb, NULL);
}

char *lp_volume_image(const struct lp_pool *p, const char *id)
{
	return lp_pool_path(p, "volumes", id, ".img");
}

char *lp_snapshot_image(const struct lp_pool *p, const char *id)
{
	return lp_pool_path(p, "snapshots", id, ".img");
}

static char *id_for(const char *prefix, const char *name)
{
	/* FNV-1a, 64 bits: stable across versions and hosts, which the ID must be */
	uint64_t h = 0xcbf29ce484222325ULL;
	for (const unsigned char *c = (const unsigned char *)name; *c; c++) {
		h ^= *c;
		h *= 0x100000001b3ULL;
	}
	char buf[40];
	snprintf(buf, sizeof(buf), "%s%016llx", prefix, (unsigned long long)h);
	return xstrdup(buf);
}

char *lp_volume_id_for_name(const char *name) { return id_for("lv-", name); }
char *lp_snapshot_id_for_name(const char *name) { return id_for("ls-", name); }

bool lp_id_valid(const char *id)
{
	size_t n = strlen(id);
	if (n == 0 || n > 128 || id[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = id[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_' || c == '.'))
			return false;
	}
	return true;
}

struct lp_pool *lp_pool_open(const char *dir, struct lp_status *st)
{
	char sub[4096];
	int err = lp_mkdir_p(dir);
	if (!err) {
		snprintf(sub, sizeof(sub), "%s/volumes", dir);
		err = lp_mkdir_p(sub);
	}
	if (!err) {
		snprintf(sub, sizeof(sub), "%s/snapshots", dir);
		err = lp_mkdir_p(sub);
	}
	if (!err) {
		snprintf(sub, sizeof(sub), "%s/nodes", dir);
		err = lp_mkdir_p(sub);
	}
	char *real = err ? NULL : realpath(dir, NULL);
	if (!real) {
		lp_fail(st, LP_UNAVAILABLE, "pool %s: cannot create or open: %s", dir,
			strerror(err ? err : errno));
		return NULL;
	}
	snprintf(sub, sizeof(sub), "%s/.lock", real);
	int fd = open(sub, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		lp_fail(st, LP_UNAVAILABLE, "pool %s: open %s: %s", dir, sub, strerror(errno));
		free(real);
		return NULL;
	}
	struct lp_pool *p = xcalloc(1, sizeof(*p));
	p->dir = real;
	p->lockfd = fd;
	pthread_mutex_init(&p->mu, NULL);
	return p;
}

void lp_pool_free(struct lp_pool *p)
{
	if (!p)
		return;
	close(p->lockfd);
	pthread_mutex_destroy(&p->mu);
	free(p->dir);
	free(p);
}

const char *lp_pool_dir(const struct lp_pool *p) { return p->dir; }

void lp_pool_lock(struct lp_pool *p)
{
	pthread_mutex_lock(&p->mu);
	while (flock(p->lockfd, LOCK_EX) < 0 && errno == EINTR)
		;
}

void lp_pool_unlock(struct lp_pool *p)
{
	flock(p->lockfd, LOCK_UN);
	pthread_mutex_unlock(&p->mu);
}

/* Removes *.tmp and images without metadata from one folder; returns how many. */
static int sweep(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	int removed = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		char path[4400];
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		bool tmp = lp_has_suffix(de->d_name, ".tmp");
		bool img = lp_has_suffix(de->d_name, ".img");
		if (!tmp && !img)
			continue;
		char meta[4400];
		snprintf(meta, sizeof(meta), "%.*s.json", (int)(strlen(path) - 4), path);
		if (img && !(access(meta, F_OK) < 0 && errno == ENOENT))
			continue;
		/* a writer holds its file locked: only a dead writer's file can be taken */
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (flock(fd, LOCK_EX | LOCK_NB) == 0 &&
		    (tmp || (access(meta, F_OK) < 0 && errno == ENOENT)) && unlink(path) == 0)
			removed++;
		close(fd);
	}
	closedir(d);
	return removed;
}

int lp_pool_recover(struct lp_pool *p, struct lp_status *st)
{
	char dir[4096];
	lp_pool_lock(p);
	snprintf(dir, sizeof(dir), "%s/volumes", p->dir);
	int n = sweep(dir);
	snprintf(dir, sizeof(dir), "%s/snapshots", p->dir);
	n += sweep(dir);
	snprintf(dir, sizeof(dir), "%s/nodes", p->dir);
	n += sweep(dir);
	n += lp_pool_reconcile_names(p);
	lp_pool_unlock(p);
	lp_status_ok(st);
	return n;
}

int lp_pool_probe(struct lp_pool *p, struct lp_status *st)
{
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s/volumes", p->dir);
	if (access(dir, W_OK) < 0)
		return lp_fail(st, LP_UNAVAILABLE, "pool %s is not usable: %s", p->dir,
			       strerror(errno));
	return 0;
}

int64_t lp_pool_free_bytes(struct lp_pool *p)
{
	struct statvfs sv;
	if (statvfs(p->dir, &sv) < 0)
		return 0;
	return (int64_t)sv.f_bavail * (int64_t)sv.f_frsize;
}

int lp_pool_node_register(struct lp_pool *p, const char *node, const char *zone,
			  struct lp_status *st)
{
	if (!lp_node_id_safe(node))
		return lp_fail(st, LP_INVALID_ARGUMENT,
			       "node id %s: only letters, digits, '-', '_' and '.' are allowed",
			       node);
	char *path = lp_pool_path(p, "nodes", node, ".json");
	json_t *j = json_pack("{s:s, s:s}", "node", node, "zone", zone);
	int err = lp_save_json(path, j);
	json_decref(j);
	free(path);
	if (err)
		return lp_fail(st, LP_UNAVAILABLE, "node %s: cannot register in pool %s: %s", node,
			       p->dir, strerror(err));
	return 0;
}

bool lp_pool_node_exists(struct lp_pool *p, const char *node)
{
	if (!lp_node_id_safe(node))
		return false;
	char *path = lp_pool_path(p, "nodes", node, ".json");
	bool ok = access(path, F_OK) == 0;
	free(path);
	return ok;
}

static json_t *volume_to_json(const struct lp_volume *v)
{
	json_t *att = json_array();
	for (size_t i = 0; i < v->natt; i++)
		json_array_append_new(att, json_pack("{s:s, s:s, s:b}", "node", v->att[i].node,
						     "device", v->att[i].device, "readonly",
						     v->att[i].readonly));
	return json_pack("{s:s, s:s, s:I, s:b, s:b, s:s, s:s, s:s, s:s, s:I, s:o}", "id", v->id,
			 "name", v->name, "size", (json_int_t)v->size, "thick", v->thick,
			 "block", v->block, "fstype", v->fstype ? v->fstype : "", "source_kind",
			 v->source_kind ? v->source_kind : "", "source_id",
			 v->source_id ? v->source_id : "", "zone", v->zone ? v->zone : "",
			 "created_ns", (json_int_t)v->created_ns, "attachments", att);
}

static struct lp_volume *volume_from_json(json_t *j)
{
	struct lp_volume *v = xcalloc(1, sizeof(*v));
	v->id = lp_jstr(j, "id");
	v->name = lp_jstr(j, "name");
	v->size = lp_jint(j, "size");
	v->thick = json_is_true(json_object_get(j, "thick"));
	v->block = json_is_true(json_object_get(j, "block"));
	v->fstype = lp_jstr(j, "fstype");
	v->source_kind = lp_jstr(j, "source_kind");
	v->source_id = lp_jstr(j, "source_id");
	v->zone = lp_jstr(j, "zone");
	v->created_ns = lp_jint(j, "created_ns");
	json_t *att = json_object_get(j, "attachments");
	size_t n = json_array_size(att);
	v->att = n ? xcalloc(n, sizeof(*v->att)) : NULL;
	for (size_t i = 0; i < n; i++) {
		json_t *a = json_array_get(att, i);
		v->att[i].node = lp_jstr(a, "node");
		v->att[i].device = lp_jstr(a, "device");
		v->att[i].readonly = json_is_true(json_object_get(a, "readonly"));
	}
	v->natt = n;
	return v;
}

void lp_volume_free(struct lp_volume *v)
{
	if (!v)
		return;
	for (size_t i = 0; i < v->natt; i++) {
		free(v->att[i].node);
		free(v->att[i].device);
	}
	free(v->att);
	free(v->id);
	free(v->name);
	free(v->fstype);
	free(v->source_kind);
	free(v->source_id);
	free(v->zone);
	free(v);
}

int lp_volume_load(struct lp_pool *p, const char *id, struct lp_volume **out,
		   struct lp_status *st)
{
	*out = NULL;
	if (!lp_id_valid(id))
		return lp_fail(st, LP_NOT_FOUND, "volume %s does not exist", id);
	char *path = lp_pool_path(p, "volumes", id, ".json");
	bool enoent;
	char why[256];
	json_t *j = lp_load_json(path, &enoent, why, sizeof(why));
	free(path);
	if (!j)
		return enoent ? lp_fail(st, LP_NOT_FOUND, "volume %s does not exist", id)
			      : lp_fail(st, LP_INTERNAL, "volume %s: metadata unreadable: %s", id,
					why);
	*out = volume_from_json(j);
	json_decref(j);
	return 0;
}

int lp_volume_save(struct lp_pool *p, const struct lp_volume *v, struct lp_status *st)
{
	char *path = lp_pool_path(p, "volumes", v->id, ".json");
	json_t *j = volume_to_json(v);
	int err = lp_save_json(path, j);
	json_decref(j);
	free(path);
	if (err)
		return lp_fail(st, lp_code_for_errno(err), "volume %s: write metadata: %s", v->id,
			       strerror(err));
	return 0;
}

int lp_volume_create(struct lp_pool *p, const struct lp_volume *v, const char *src_image,
		     struct lp_status *st)
{
	/*
	 * Thin images take no room at first, but a volume larger than what the pool has left
	 * could never be filled; refusing it here is the "pool full" answer. Thick images are
	 * checked before fallocate so a failed attempt never fills the pool's filesystem.
	 */
	if (v->size > lp_pool_free_bytes(p))
		return lp_fail(st, LP_RESOURCE_EXHAUSTED,
			       "volume %s (%s): %lld bytes requested, pool has %lld free", v->id,
			       v->name, (long long)v->size, (long long)lp_pool_free_bytes(p));
	char *img = lp_volume_image(p, v->id);
	int lock = -1;
	int err = lp_build_image(img, src_image, v->size, v->thick, &lock);
	free(img);
	if (err)
		return lp_fail(st, lp_code_for_errno(err), "volume %s (%s): create image: %s", v->id,
			       v->name, strerror(err));
	int r = lp_volume_save(p, v, st);
	close(lock);
	return r;
}

int lp_volume_delete(struct lp_pool *p, const char *id, struct lp_status *st)
{
	if (!lp_id_valid(id))
		return 0;
	int r = lp_pool_remove_files(p, "volumes", id, "volume", st);
	if (r == 0) {
		char *mark = lp_pool_path(p, "volumes", id, ".formatting");
		unlink(mark);
		free(mark);
	}
	return r;
}

int lp_volume_mark_formatting(struct lp_pool *p, const char *id, bool on, struct lp_status *st)
{
	char *mark = lp_pool_path(p, "volumes", id, ".formatting");
	int err = 0;
	if (on) {
		int fd = open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0 || fsync(fd) < 0)
			err = errno;
		if (fd >= 0)
			close(fd);
	} else if (unlink(mark) < 0 && errno != ENOENT) {
		err = errno;
	}
	if (!err)
		lp_fsync_dir(mark);
	free(mark);
	if (err)
		return lp_fail(st, LP_INTERNAL, "volume %s: %s the formatting mark: %s", id,
			       on ? "set" : "clear", strerror(err));
	return 0;
}

bool lp_volume_formatting(struct lp_pool *p, const char *id)
{
	char *mark = lp_pool_path(p, "volumes", id, ".formatting");
	bool on = access(mark, F_OK) == 0;
	free(mark);
	return on;
}

int lp_volume_grow(struct lp_pool *p, struct lp_volume *v, int64_t new_size,
		   struct lp_status *st)
{
	if (new_size <= v->size)
		return 0;
	char *img = lp_volume_image(p, v->id);
	int fd = open(img, O_RDWR | O_CLOEXEC);
	int err = 0;
	if (fd < 0)
		err = errno;
	else if (new_size - v->size > lp_pool_free_bytes(p))
		err = ENOSPC;
	else if (v->thick)
		err = posix_fallocate(fd, 0, new_size);
	else if (ftruncate(fd, new_size) < 0)
		err = errno;
	if (!err && fsync(fd) < 0)
		err = errno;
	if (fd >= 0)
		close(fd);
	free(img);
	if (err)
		return lp_fail(st, lp_code_for_errno(err), "volume %s: grow image to %lld bytes: %s",
			       v->id, (long long)new_size, strerror(err));
	int64_t old = v->size;
	v->size = new_size;
	int r = lp_volume_save(p, v, st);
	if (r)
		v->size = old;
	return r;
}

int lp_volume_list(struct lp_pool *p, char ***ids, int64_t **created, size_t *n,
		   struct lp_status *st)
{
	return lp_pool_list_dir(p, "volumes", ids, created, n, st);
}

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

void lp_snapshot_free(struct lp_snapshot *s)
{
	if (!s)
		return;
	free(s->id);
	free(s->name);
	free(s->source_volume);
	free(s);
}

int lp_snapshot_load(struct lp_pool *p, const char *id, struct lp_snapshot **out,
		     struct lp_status *st)
{
	*out = NULL;
	if (!lp_id_valid(id))
		return lp_fail(st, LP_NOT_FOUND, "snapshot %s does not exist", id);
	char *path = lp_pool_path(p, "snapshots", id, ".json");
	bool enoent;
	char why[256];
	json_t *j = lp_load_json(path, &enoent, why, sizeof(why));
	free(path);
	if (!j)
		return enoent ? lp_fail(st, LP_NOT_FOUND, "snapshot %s does not exist", id)
			      : lp_fail(st, LP_INTERNAL, "snapshot %s: metadata unreadable: %s",
					id, why);
	struct lp_snapshot *s = xcalloc(1, sizeof(*s));
	s->id = lp_jstr(j, "id");
	s->name = lp_jstr(j, "name");
	s->source_volume = lp_jstr(j, "source_volume");
	s->size = lp_jint(j, "size");
	s->created_ns = lp_jint(j, "created_ns");
	json_decref(j);
	*out = s;
	return 0;
}

int lp_snapshot_create(struct lp_pool *p, const struct lp_snapshot *s, const char *src_image,
		       struct lp_status *st)
{
	char *img = lp_snapshot_image(p, s->id);
	int lock = -1;
	int err = lp_build_image(img, src_image, s->size, false, &lock);
	free(img);
	if (err)
		return lp_fail(st, lp_code_for_errno(err), "snapshot %s (%s) of volume %s: %s", s->id,
			       s->name, s->source_volume, strerror(err));
	char *path = lp_pool_path(p, "snapshots", s->id, ".json");
	json_t *j = json_pack("{s:s, s:s, s:s, s:I, s:I}", "id", s->id, "name", s->name,
			      "source_volume", s->source_volume, "size", (json_int_t)s->size,
			      "created_ns", (json_int_t)s->created_ns);
	err = lp_save_json(path, j);
	json_decref(j);
	free(path);
	close(lock);
	if (err)
		return lp_fail(st, lp_code_for_errno(err), "snapshot %s: write metadata: %s", s->id,
			       strerror(err));
	return 0;
}

int lp_snapshot_delete(struct lp_pool *p, const char *id, struct lp_status *st)
{
	if (!lp_id_valid(id))
		return 0;
	return lp_pool_remove_files(p, "snapshots", id, "snapshot", st);
}

int lp_snapshot_list(struct lp_pool *p, char ***ids, int64_t **created, size_t *n,
		     struct lp_status *st)
{
	return lp_pool_list_dir(p, "snapshots", ids, created, n, st);
}

static char *record_dir(const struct lp_pool *p, const char *kind, const char *node)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "%s/%s/%s", p->dir, kind, node);
	return strbuf_detach(&sb, NULL);
}

static char *record_path(const struct lp_pool *p, const char *kind, const char *node,
			 const char *key)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "%s/%s/%s/%s.json", p->dir, kind, node, key);
	return strbuf_detach(&sb, NULL);
}

static int record_save(struct lp_pool *p, const char *kind, const char *node, const char *key,
		       json_t *j, struct lp_status *st)
{
	if (!lp_node_id_safe(node) || !lp_id_valid(key)) {
		json_decref(j);
		return lp_fail(st, LP_INVALID_ARGUMENT, "%s record %s/%s: not a valid name", kind,
			       node, key);
	}
	char *dir = record_dir(p, kind, node), *path = record_path(p, kind, node, key);
	int err = lp_mkdir_p(dir);
	if (!err)
		err = lp_save_json(path, j);
	json_decref(j);
	free(dir);
	free(path);
	if (err)
		return lp_fail(st, lp_code_for_errno(err), "pool %s: write %s record of %s on node %s: %s",
			       p->dir, kind, key, node, strerror(err));
	return 0;
}

static json_t *record_load(struct lp_pool *p, const char *kind, const char *node, const char *key)
{
	if (!lp_node_id_safe(node) || !lp_id_valid(key))
		return NULL;
	char *path = record_path(p, kind, node, key);
	bool enoent;
	char why[128];
	json_t *j = lp_load_json(path, &enoent, why, sizeof(why));
	free(path);
	return j;
}

static int record_clear(struct lp_pool *p, const char *kind, const char *node, const char *key,
			struct lp_status *st)
{
	if (!lp_node_id_safe(node) || !lp_id_valid(key))
		return 0;
	char *path = record_path(p, kind, node, key);
	int r = 0;
	if (unlink(path) < 0 && errno != ENOENT)
		r = lp_fail(st, lp_code_for_errno(errno), "pool %s: remove %s: %s", p->dir, path,
			    strerror(errno));
	else
		lp_fsync_dir(path);
	free(path);
	return r;
}

/* The keys of the records in one folder (a missing folder has none); leftover .tmp removed. */
static void record_keys(const char *dir, char ***keys, size_t *n)
{
	*keys = NULL;
	*n = 0;
	DIR *d = opendir(dir);
	if (!d)
		return;
	size_t alloc = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (lp_has_suffix(de->d_name, ".json.tmp")) {
			char path[4400];
			snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
			int fd = open(path, O_RDONLY | O_CLOEXEC);
			if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0)
				unlink(path);
			if (fd >= 0)
				close(fd);
			continue;
		}
		if (!lp_has_suffix(de->d_name, ".json"))
			continue;
		if (*n + 1 >= alloc) {
			alloc = alloc ? 2 * alloc : 16;
			*keys = xrealloc(*keys, alloc * sizeof(char *));
		}
		(*keys)[(*n)++] = xstrndup(de->d_name, strlen(de->d_name) - 5);
	}
	closedir(d);
}

int lp_stage_save(struct lp_pool *p, const char *node, const char *id, const struct lp_stage *s,
		  struct lp_status *st)
{
	json_t *j = json_pack("{s:s, s:b, s:s, s:s, s:i}", "path", s->path, "block", s->block,
			      "fstype", s->fstype, "flags", s->flags, "mode", s->mode);
	return record_save(p, "staged", node, id, j, st);
}

int lp_stage_load(struct lp_pool *p, const char *node, const char *id, struct lp_stage **out)
{
	*out = NULL;
	json_t *j = record_load(p, "staged", node, id);
	if (!j)
		return 0;
	struct lp_stage *s = xcalloc(1, sizeof(*s));
	s->path = lp_jstr(j, "path");
	s->block = json_is_true(json_object_get(j, "block"));
	s->fstype = lp_jstr(j, "fstype");
	s->flags = lp_jstr(j, "flags");
	s->mode = (int)lp_jint(j, "mode");
	json_decref(j);
	*out = s;
	return 1;
}

void lp_stage_free(struct lp_stage *s)
{
	if (!s)
		return;
	free(s->path);
	free(s->fstype);
	free(s->flags);
	free(s);
}

int lp_stage_clear(struct lp_pool *p, const char *node, const char *id, struct lp_status *st)
{
	return record_clear(p, "staged", node, id, st);
}

int lp_stage_list(struct lp_pool *p, const char *node, char ***ids, size_t *n)
{
	if (!lp_node_id_safe(node)) {
		*ids = NULL;
		*n = 0;
		return 0;
	}
	char *dir = record_dir(p, "staged", node);
	record_keys(dir, ids, n);
	free(dir);
	return 0;
}

int lp_stage_nodes(struct lp_pool *p, const char *id, char ***nodes, size_t *n)
{
	*nodes = NULL;
	*n = 0;
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s/staged", p->dir);
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	size_t alloc = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!lp_node_id_safe(de->d_name))
			continue;
		char *path = record_path(p, "staged", de->d_name, id);
		bool there = access(path, F_OK) == 0;
		free(path);
		if (!there)
			continue;
		if (*n + 1 >= alloc) {
			alloc = alloc ? 2 * alloc : 4;
			*nodes = xrealloc(*nodes, alloc * sizeof(char *));
		}
		(*nodes)[(*n)++] = xstrdup(de->d_name);
	}
	closedir(d);
	return 0;
}

int lp_freeze_save(struct lp_pool *p, const char *node, const char *key, const char *path,
		   uint64_t dev, struct lp_status *st)
{
	json_t *j = json_pack("{s:s, s:I}", "path", path, "dev", (json_int_t)dev);
	return record_save(p, "frozen", node, key, j, st);
}

int lp_freeze_load(struct lp_pool *p, const char *node, const char *key, char **path,
		   uint64_t *dev)
{
	*path = NULL;
	json_t *j = record_load(p, "frozen", node, key);
	if (!j)
		return 0;
	*path = lp_jstr(j, "path");
	*dev = (uint64_t)lp_jint(j, "dev");
	json_decref(j);
	return 1;
}

int lp_freeze_clear(struct lp_pool *p, const char *node, const char *key, struct lp_status *st)
{
	return record_clear(p, "frozen", node, key, st);
}

int lp_freeze_list(struct lp_pool *p, const char *node, char ***keys, size_t *n)
{
	if (!lp_node_id_safe(node)) {
		*keys = NULL;
		*n = 0;
		return 0;
	}
	char *dir = record_dir(p, "frozen", node);
	record_keys(dir, keys, n);
	free(dir);
	return 0;
}
