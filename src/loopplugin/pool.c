/*
 * pool: the pool's life cycle and lock, its free space, and the node registrations: the
 * bottom of the pool files, which calls none of them. pool.h has the map of the other pool
 * files; pool_int.h what they share.
 */
#include "loopplugin/pool_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "base/lockfile.h"
#include "base/xalloc.h"

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
	if (!err) {
		snprintf(sub, sizeof(sub), "%s/groups", dir);
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
	p->node_lockfd = -1;
	pthread_mutex_init(&p->mu, NULL);
	return p;
}

void lp_pool_free(struct lp_pool *p)
{
	if (!p)
		return;
	close(p->lockfd);
	if (p->node_lockfd >= 0)
		close(p->node_lockfd);
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

int lp_pool_node_lock(struct lp_pool *p, const char *node, struct lp_status *st)
{
	if (!lp_node_id_safe(node))
		return lp_fail(st, LP_INVALID_ARGUMENT,
			       "node id %s: only letters, digits, '-', '_' and '.' are allowed",
			       node);
	char *path = lp_pool_path(p, "nodes", node, ".lock");
	pid_t holder;
	int fd = lockfile_take(path, &holder);
	int err = errno;
	free(path);
	if (fd == LOCKFILE_BUSY && holder > 0)
		return lp_fail(st, LP_FAILED_PRECONDITION,
			       "pool %s: node %s is in use by another kcsi-loopplugin (pid %d)",
			       p->dir, node, (int)holder);
	if (fd == LOCKFILE_BUSY)
		return lp_fail(st, LP_FAILED_PRECONDITION,
			       "pool %s: node %s is in use by another kcsi-loopplugin", p->dir, node);
	if (fd < 0)
		return lp_fail(st, LP_UNAVAILABLE, "pool %s: node %s: cannot lock: %s", p->dir, node,
			       strerror(err));
	if (p->node_lockfd >= 0)
		close(p->node_lockfd);
	p->node_lockfd = fd;
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
