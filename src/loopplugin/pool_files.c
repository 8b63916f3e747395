/*
 * pool_files: how the pool reads and writes its files: atomic writes (a temporary file held
 * under flock(), fsync, rename, fsync of the folder), JSON metadata, images built from a source
 * with holes kept, removal, and listing a folder in creation order.
 */
#include "loopplugin/pool_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/strbuf.h"
#include "base/xalloc.h"

int lp_fsync_dir(const char *file)
{
	char *dir = xstrdup(file);
	char *slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(dir);
	if (fd < 0)
		return -1;
	int r = fsync(fd);
	close(fd);
	return r;
}

/*
 * Opens a temporary file for writing, holding an exclusive flock() on it for as long as the fd
 * is open. That lock is how lp_pool_recover() in another process (a controller starting while
 * a node registers, or a standby controller) tells a file being written from a crash's
 * leftover: the kernel drops the lock when its holder dies, even by kill -9.
 * Returns the fd (truncated to 0) or -1 with errno.
 */
static int open_locked(const char *path)
{
	for (int attempt = 0; attempt < 3; attempt++) {
		int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0)
			return -1;
		struct stat a, b;
		/* the sweeper may have removed the file between our open and our lock */
		if (flock(fd, LOCK_EX) == 0 && fstat(fd, &a) == 0 && stat(path, &b) == 0 &&
		    a.st_ino == b.st_ino && a.st_dev == b.st_dev) {
			if (ftruncate(fd, 0) == 0)
				return fd;
			int e = errno;
			close(fd);
			errno = e;
			return -1;
		}
		close(fd);
	}
	errno = EAGAIN;
	return -1;
}

/* Writes data to path atomically; returns 0 or an errno. */
static int write_atomic(const char *path, const char *data, size_t len)
{
	struct strbuf tmp = STRBUF_INIT;
	strbuf_addf(&tmp, "%s.tmp", path);
	int fd = open_locked(tmp.buf);
	int err = 0;
	if (fd < 0) {
		err = errno;
		goto out;
	}
	for (size_t off = 0; off < len; ) {
		ssize_t n = write(fd, data + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = errno;
			break;
		}
		off += (size_t)n;
	}
	if (!err && fsync(fd) < 0)
		err = errno;
	if (!err && rename(tmp.buf, path) < 0)
		err = errno;
	if (err)
		unlink(tmp.buf);
	else
		lp_fsync_dir(path);
	close(fd); /* drops the lock only once the file has its final name */
out:
	strbuf_release(&tmp);
	return err;
}

int lp_save_json(const char *path, json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	if (!s)
		return ENOMEM;
	int err = write_atomic(path, s, strlen(s));
	free(s);
	return err;
}

json_t *lp_load_json(const char *path, bool *enoent, char *why, size_t whylen)
{
	*enoent = false;
	json_error_t je;
	json_t *j = json_load_file(path, 0, &je);
	if (!j) {
		if (access(path, F_OK) < 0 && errno == ENOENT)
			*enoent = true;
		snprintf(why, whylen, "%.96s (line %d)", je.text, je.line); /* json_error_t.text is 160 */
	}
	return j;
}

char *lp_jstr(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return xstrdup(s ? s : "");
}

int64_t lp_jint(json_t *o, const char *key)
{
	return (int64_t)json_integer_value(json_object_get(o, key));
}

int lp_mkdir_p(const char *dir)
{
	char *d = xstrdup(dir);
	for (char *s = d + 1; *s; s++) {
		if (*s == '/') {
			*s = '\0';
			mkdir(d, 0755);
			*s = '/';
		}
	}
	int r = mkdir(d, 0755);
	int e = errno;
	free(d);
	return (r < 0 && e != EEXIST) ? e : 0;
}

bool lp_has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && strcmp(s + n - m, suffix) == 0;
}

enum lp_code lp_code_for_errno(int err)
{
	if (err == ENOSPC || err == EDQUOT || err == EFBIG)
		return LP_RESOURCE_EXHAUSTED;
	if (err == ENOENT)
		return LP_NOT_FOUND;
	return LP_INTERNAL;
}

/* Copies the data extents of src into dst (same offsets); holes stay holes. */
static int copy_extents(int src, int dst, int64_t size)
{
	off_t pos = 0;
	while (pos < size) {
		off_t data = lseek(src, pos, SEEK_DATA);
		if (data < 0)
			return errno == ENXIO ? 0 : errno;
		off_t hole = lseek(src, data, SEEK_HOLE);
		if (hole < 0)
			return errno;
		loff_t in = data, out = data;
		while (in < hole) {
			ssize_t n = copy_file_range(src, &in, dst, &out, (size_t)(hole - in), 0);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				return errno;
			if (n == 0)
				break;
		}
		pos = hole;
	}
	return 0;
}

int lp_build_image(const char *path, const char *src, int64_t size, bool thick,
		   int *locked_fd)
{
	struct strbuf tmp = STRBUF_INIT;
	strbuf_addf(&tmp, "%s.tmp", path);
	int err = 0, sfd = -1;
	int fd = open_locked(tmp.buf);
	if (fd < 0) {
		err = errno;
		goto out;
	}
	if (src) {
		sfd = open(src, O_RDONLY | O_CLOEXEC);
		struct stat sb;
		if (sfd < 0 || fstat(sfd, &sb) < 0) {
			err = errno;
			goto out;
		}
		if (ioctl(fd, FICLONE, sfd) < 0) {
			/* no reflink here: copy what holds data */
			if (ftruncate(fd, sb.st_size) < 0)
				err = errno;
			if (!err)
				err = copy_extents(sfd, fd, sb.st_size);
		}
		if (err)
			goto out;
	}
	if (ftruncate(fd, size) < 0) {
		err = errno;
		goto out;
	}
	if (thick) {
		int r = posix_fallocate(fd, 0, size);
		if (r) {
			err = r;
			goto out;
		}
	}
	if (fsync(fd) < 0)
		err = errno;
	if (!err && rename(tmp.buf, path) < 0)
		err = errno;
	if (!err)
		lp_fsync_dir(path);
out:
	if (sfd >= 0)
		close(sfd);
	if (err)
		unlink(tmp.buf);
	if (fd >= 0 && (err || !locked_fd))
		close(fd);
	else if (fd >= 0)
		*locked_fd = fd; /* still locked: the image is not committed until its metadata is */
	strbuf_release(&tmp);
	return err;
}

int lp_pool_remove_files(struct lp_pool *p, const char *sub, const char *id, const char *what,
			 struct lp_status *st)
{
	char *meta = lp_pool_path(p, sub, id, ".json");
	char *img = lp_pool_path(p, sub, id, ".img");
	int ret = 0;
	if (unlink(meta) < 0 && errno != ENOENT)
		ret = lp_fail(st, LP_INTERNAL, "%s %s: remove metadata: %s", what, id,
			      strerror(errno));
	else if (unlink(img) < 0 && errno != ENOENT)
		ret = lp_fail(st, LP_INTERNAL, "%s %s: remove image: %s", what, id,
			      strerror(errno));
	else
		lp_fsync_dir(meta);
	free(meta);
	free(img);
	return ret;
}

struct entry {
	char *id;
	int64_t created;
};

static int entry_cmp(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	if (x->created != y->created)
		return x->created < y->created ? -1 : 1;
	return strcmp(x->id, y->id);
}

int lp_pool_list_dir(struct lp_pool *p, const char *sub, char ***ids, int64_t **created,
		     size_t *n, struct lp_status *st)
{
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s/%s", p->dir, sub);
	*ids = NULL;
	*n = 0;
	if (created)
		*created = NULL;
	DIR *d = opendir(dir);
	if (!d)
		return lp_fail(st, LP_UNAVAILABLE, "pool %s: cannot list %s: %s", p->dir, sub,
			       strerror(errno));
	struct entry *e = NULL;
	size_t len = 0, alloc = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!lp_has_suffix(de->d_name, ".json"))
			continue;
		char path[4400];
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		bool enoent;
		char why[128];
		json_t *j = lp_load_json(path, &enoent, why, sizeof(why));
		if (!j)
			continue; /* deleted meanwhile, or damaged: not listed */
		if (len == alloc) {
			alloc = alloc ? 2 * alloc : 32;
			e = xrealloc(e, alloc * sizeof(*e));
		}
		e[len].id = xstrndup(de->d_name, strlen(de->d_name) - 5);
		e[len].created = lp_jint(j, "created_ns");
		len++;
		json_decref(j);
	}
	closedir(d);
	if (len)
		qsort(e, len, sizeof(*e), entry_cmp);
	*ids = xcalloc(len + 1, sizeof(char *));
	if (created)
		*created = xcalloc(len + 1, sizeof(int64_t));
	for (size_t i = 0; i < len; i++) {
		(*ids)[i] = e[i].id;
		if (created)
			(*created)[i] = e[i].created;
	}
	free(e);
	*n = len;
	return 0;
}

void lp_free_strings(char **v, size_t n)
{
	if (!v)
		return;
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}
