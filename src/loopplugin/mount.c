/*
 * mount: the kernel formats the whole of /proc/self/mountinfo on every read, which with a
 * thousand volumes mounted costs more than the rest of a CSI call (58 % of the node driver's CPU
 * under `kcsi up --nodes 1000` with 1,000 pods, docs/performance.md). Two things keep it down:
 * - questions about one path ask statx first: a path that is not the root of a mount
 *   (STATX_ATTR_MOUNT_ROOT, Linux 5.8) is not a mount target and needs no table;
 * - the text of the table is kept, shared by every thread, and read again only when the kernel
 *   says the namespace's table changed since: poll() on an open mountinfo reports POLLPRI after
 *   any mount or unmount in the namespace (anyone's, propagated ones too). The poll comes before
 *   the read, so a change during the read is reported to the next caller: a lookup never sees a
 *   table older than the last mount or unmount that finished before it started.
 * Each lookup parses the kept text line by line.
 */
#include "loopplugin/mount.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "base/xalloc.h"

/* Undoes mountinfo's octal escapes in place. */
static void unescape(char *s)
{
	char *w = s;
	for (char *r = s; *r; ) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '7' && r[2] >= '0' && r[2] <= '7' &&
		    r[3] >= '0' && r[3] <= '7') {
			*w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
			r += 4;
		} else {
			*w++ = *r++;
		}
	}
	*w = '\0';
}

static bool opt_has(const char *opts, const char *opt)
{
	size_t n = strlen(opt);
	for (const char *p = opts; p && *p; ) {
		const char *c = strchr(p, ',');
		size_t len = c ? (size_t)(c - p) : strlen(p);
		if (len == n && memcmp(p, opt, n) == 0)
			return true;
		p = c ? c + 1 : NULL;
	}
	return false;
}

/* Parses one mountinfo line; returns false for a line it cannot read. */
static bool parse_line(char *line, struct lp_mount *m)
{
	char *save = NULL, *f[32];
	int n = 0;
	for (char *t = strtok_r(line, " \n", &save); t && n < 32; t = strtok_r(NULL, " \n", &save))
		f[n++] = t;
	int dash = -1;
	for (int i = 6; i < n; i++) {
		if (strcmp(f[i], "-") == 0) {
			dash = i;
			break;
		}
	}
	if (n < 10 || dash < 0 || dash + 2 >= n)
		return false;
	if (sscanf(f[2], "%u:%u", &m->major, &m->minor) != 2)
		return false;
	unescape(f[3]);
	unescape(f[4]);
	unescape(f[dash + 2]);
	m->root = xstrdup(f[3]);
	m->target = xstrdup(f[4]);
	m->options = xstrdup(f[5]);
	m->fstype = xstrdup(f[dash + 1]);
	m->source = xstrdup(f[dash + 2]);
	m->readonly = opt_has(f[5], "ro");
	return true;
}

void lp_mount_release(struct lp_mount *m)
{
	free(m->root);
	free(m->target);
	free(m->options);
	free(m->fstype);
	free(m->source);
	memset(m, 0, sizeof(*m));
}

/* One read of the table: immutable, shared by the lookups that took it. */
struct table {
	int refs; /* under table_mu */
	size_t len;
	char text[];
};

static pthread_mutex_t table_mu = PTHREAD_MUTEX_INITIALIZER;
static int table_fd = -1;     /* kept open for poll() alone */
static struct table *table_cur;

static void table_put(struct table *t)
{
	pthread_mutex_lock(&table_mu);
	bool last = --t->refs == 0;
	pthread_mutex_unlock(&table_mu);
	if (last)
		free(t);
}

/* The whole of mountinfo read now, or NULL. */
static struct table *table_read(void)
{
	int fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	size_t cap = 64 * 1024, len = 0;
	struct table *t = xmalloc(sizeof(*t) + cap);
	for (;;) {
		if (cap - len < 4096) {
			cap *= 2;
			t = xrealloc(t, sizeof(*t) + cap);
		}
		ssize_t n = read(fd, t->text + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			close(fd);
			free(t);
			return NULL;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	t->text[len] = '\0';
	t->len = len;
	t->refs = 1;
	return t;
}

/* The current table (a reference the caller puts back), or NULL when mountinfo is unreadable. */
static struct table *table_get(void)
{
	struct table *t = NULL;

	pthread_mutex_lock(&table_mu);
	if (table_fd < 0)
		table_fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	struct pollfd p = { .fd = table_fd, .events = POLLPRI };
	bool changed = table_fd < 0 || poll(&p, 1, 0) != 0; /* an error: read, to be safe */
	if (changed || !table_cur) {
		struct table *fresh = table_read();
		if (table_cur && --table_cur->refs == 0)
			free(table_cur);
		table_cur = fresh; /* NULL when unreadable: this lookup fails, the next tries again */
	}
	if (table_cur) {
		t = table_cur;
		t->refs++;
	}
	pthread_mutex_unlock(&table_mu);
	return t;
}

/* Calls fn for each entry; stops when fn returns true. Returns -1 if unreadable. */
static int each_mount(bool (*fn)(struct lp_mount *, void *), void *arg)
{
	struct table *t = table_get();
	if (!t)
		return -1;
	char *line = NULL;
	size_t cap = 0;
	for (const char *p = t->text, *end = t->text + t->len; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		if (n + 1 > cap) {
			cap = n + 1;
			line = xrealloc(line, cap);
		}
		memcpy(line, p, n);
		line[n] = '\0';
		p += n + 1;
		struct lp_mount m = { 0 };
		if (!parse_line(line, &m))
			continue;
		bool stop = fn(&m, arg);
		lp_mount_release(&m);
		if (stop)
			break;
	}
	free(line);
	table_put(t);
	return 0;
}

struct find_arg {
	const char *target;
	struct lp_mount *out;
	int found;
};

static bool find_cb(struct lp_mount *m, void *arg)
{
	struct find_arg *a = arg;
	if (strcmp(m->target, a->target) == 0) {
		/* keep the last one: later lines are mounted on top */
		if (a->found)
			lp_mount_release(a->out);
		*a->out = *m;
		memset(m, 0, sizeof(*m));
		a->found = 1;
	}
	return false;
}

/*
 * 0 when target is certainly not the root of a mount (so no mountinfo line has it as target),
 * 1 when it is or statx cannot tell. A symlink is not followed: mountinfo names no symlink.
 */
static int maybe_mount_root(const char *target)
{
	struct statx sx;
	if (statx(AT_FDCWD, target, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, 0, &sx) < 0)
		return 1; /* gone, stale, not ours to see: let the table decide */
	if (!(sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT))
		return 1; /* before Linux 5.8 */
	return (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
}

int lp_mount_find(const char *target, struct lp_mount *m)
{
	memset(m, 0, sizeof(*m));
	if (!maybe_mount_root(target))
		return 0;
	struct find_arg a = { target, m, 0 };
	if (each_mount(find_cb, &a) < 0)
		return -1;
	return a.found;
}

struct count_arg {
	unsigned major, minor;
	int n;
};

static bool count_cb(struct lp_mount *m, void *arg)
{
	struct count_arg *a = arg;
	if (m->major == a->major && m->minor == a->minor)
		a->n++;
	return false;
}

int lp_mount_count_dev(unsigned major, unsigned minor)
{
	struct count_arg a = { major, minor, 0 };
	if (each_mount(count_cb, &a) < 0)
		return -1;
	return a.n;
}

static const struct {
	const char *name;
	unsigned long set;
	unsigned long clear;
} known_flags[] = {
	{ "ro", MS_RDONLY, 0 },        { "rw", 0, MS_RDONLY },
	{ "noatime", MS_NOATIME, 0 },  { "atime", 0, MS_NOATIME },
	{ "nodiratime", MS_NODIRATIME, 0 }, { "relatime", MS_RELATIME, 0 },
	{ "strictatime", MS_STRICTATIME, 0 }, { "nodev", MS_NODEV, 0 },
	{ "dev", 0, MS_NODEV },        { "nosuid", MS_NOSUID, 0 },
	{ "suid", 0, MS_NOSUID },      { "noexec", MS_NOEXEC, 0 },
	{ "exec", 0, MS_NOEXEC },      { "sync", MS_SYNCHRONOUS, 0 },
	{ "async", 0, MS_SYNCHRONOUS }, { "dirsync", MS_DIRSYNC, 0 },
	{ "lazytime", MS_LAZYTIME, 0 }, { "defaults", 0, 0 },
};

static const char *const refused_flags[] = {
	"bind", "rbind", "move", "remount", "shared", "private", "slave", "unbindable",
	"rshared", "rprivate", "rslave", "runbindable",
};

int lp_mount_parse_flags(const char *const *flags, size_t n, unsigned long *msflags,
			 char *data, size_t datalen, char *bad, size_t badlen)
{
	*msflags = 0;
	if (datalen)
		data[0] = '\0';
	size_t dlen = 0;
	for (size_t i = 0; i < n; i++) {
		const char *f = flags[i];
		bool done = false;
		for (size_t k = 0; k < sizeof(refused_flags) / sizeof(refused_flags[0]); k++) {
			if (strcmp(f, refused_flags[k]) == 0) {
				snprintf(bad, badlen, "%s", f);
				return -1;
			}
		}
		for (size_t k = 0; k < sizeof(known_flags) / sizeof(known_flags[0]); k++) {
			if (strcmp(f, known_flags[k].name) == 0) {
				*msflags |= known_flags[k].set;
				*msflags &= ~known_flags[k].clear;
				done = true;
				break;
			}
		}
		if (done)
			continue;
		if (!*f || strchr(f, ' ') || dlen + strlen(f) + 2 > datalen) {
			snprintf(bad, badlen, "%s", f);
			return -1;
		}
		dlen += (size_t)snprintf(data + dlen, datalen - dlen, "%s%s", dlen ? "," : "", f);
	}
	return 0;
}

int lp_mount_fs(const char *volume, const char *dev, const char *target, const char *fstype,
		unsigned long flags, const char *data, struct lp_status *st)
{
	/* A clone or a restored snapshot is a copy of its source's blocks, UUID included, and xfs
	 * refuses a second mount of a UUID on one node (EINVAL): xfs volumes mount with nouuid,
	 * as ext4 needs nothing of the kind. Found by Kubernetes' storage e2e suite ("should
	 * concurrently access the volume and its clone from pods on the same node", xfs). */
	char xfsdata[600];
	if (strcmp(fstype, "xfs") == 0 && !(data && strstr(data, "nouuid"))) {
		snprintf(xfsdata, sizeof(xfsdata), "nouuid%s%s", data && *data ? "," : "",
			 data ? data : "");
		data = xfsdata;
	}
	if (mount(dev, target, fstype, flags, data && *data ? data : NULL) < 0)
		return lp_fail(st, LP_INTERNAL, "volume %s: mount %s (%s) at %s: %s", volume, dev,
			       fstype, target, strerror(errno));
	return 0;
}

int lp_mount_bind(const char *volume, const char *src, const char *target, bool readonly,
		  struct lp_status *st)
{
	if (mount(src, target, NULL, MS_BIND, NULL) < 0)
		return lp_fail(st, LP_INTERNAL, "volume %s: bind mount %s at %s: %s", volume, src,
			       target, strerror(errno));
	if (readonly &&
	    mount(NULL, target, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) < 0) {
		int e = errno;
		umount2(target, MNT_DETACH);
		return lp_fail(st, LP_INTERNAL, "volume %s: make %s read-only: %s", volume, target,
			       strerror(e));
	}
	return 0;
}

int lp_umount(const char *volume, const char *target, struct lp_status *st)
{
	for (int i = 0; i < 16; i++) {
		struct lp_mount m;
		int r = lp_mount_find(target, &m);
		if (r < 0)
			return lp_fail(st, LP_INTERNAL, "volume %s: cannot read mountinfo",
				       volume);
		if (r == 0)
			return 0;
		lp_mount_release(&m);
		if (umount2(target, UMOUNT_NOFOLLOW) < 0 && errno != EINVAL && errno != ENOENT)
			return lp_fail(st, errno == EBUSY ? LP_FAILED_PRECONDITION : LP_INTERNAL,
				       "volume %s: unmount %s: %s", volume, target,
				       strerror(errno));
	}
	return lp_fail(st, LP_INTERNAL, "volume %s: %s is still mounted after 16 unmounts",
		       volume, target);
}

struct dev_arg {
	unsigned major, minor;
	struct lp_mount *out;
	int found;
};

static bool dev_cb(struct lp_mount *m, void *arg)
{
	struct dev_arg *a = arg;
	if (m->major != a->major || m->minor != a->minor || strcmp(m->root, "/") != 0)
		return false;
	*a->out = *m;
	memset(m, 0, sizeof(*m));
	a->found = 1;
	return true;
}

int lp_mount_find_dev(unsigned major, unsigned minor, struct lp_mount *m)
{
	memset(m, 0, sizeof(*m));
	struct dev_arg a = { major, minor, m, 0 };
	if (each_mount(dev_cb, &a) < 0)
		return -1;
	return a.found;
}

struct root_arg {
	const char *root;
	unsigned major, minor;
	int n;
};

static bool root_cb(struct lp_mount *m, void *arg)
{
	struct root_arg *a = arg;
	if (strcmp(m->root, a->root) == 0 && m->major == a->major && m->minor == a->minor)
		a->n++;
	return false;
}

int lp_mount_count_root(const char *root, unsigned major, unsigned minor)
{
	struct root_arg a = { root, major, minor, 0 };
	if (each_mount(root_cb, &a) < 0)
		return -1;
	return a.n;
}

struct other_arg {
	unsigned major, minor;
	const char *root;
	const char *const *skip;
	size_t nskip;
	char *out;
	size_t outlen;
	int found;
};

static bool other_cb(struct lp_mount *m, void *arg)
{
	struct other_arg *a = arg;
	if (m->major != a->major || m->minor != a->minor || (a->root && strcmp(m->root, a->root)))
		return false;
	for (size_t i = 0; i < a->nskip; i++)
		if (a->skip[i] && strcmp(m->target, a->skip[i]) == 0)
			return false;
	snprintf(a->out, a->outlen, "%s", m->target);
	a->found = 1;
	return true;
}

int lp_mount_find_other(unsigned major, unsigned minor, const char *root, const char *const *skip,
			size_t nskip, char *out, size_t outlen)
{
	struct other_arg a = { major, minor, root, skip, nskip, out, outlen, 0 };
	if (outlen)
		out[0] = '\0';
	if (each_mount(other_cb, &a) < 0)
		return -1;
	return a.found;
}
