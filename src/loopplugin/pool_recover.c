/*
 * pool_recover: the sweep at start. It is the top of the pool files: it cleans what a writer
 * killed mid-way left (*.tmp, images without metadata) and the device names no attachment
 * record backs (pool_attach.c), so pool.c, below everything, never calls up into them.
 */
#include "loopplugin/pool_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

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
	snprintf(dir, sizeof(dir), "%s/groups", p->dir);
	n += sweep(dir);
	n += lp_pool_reconcile_names(p);
	lp_pool_unlock(p);
	lp_status_ok(st);
	return n;
}
