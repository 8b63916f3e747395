/*
 * pool_records: the node records, what a node service did to its own system (stages, freezes),
 * as small JSON files under <kind>/<node>/ that the controller can read.
 */
#include "loopplugin/pool_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "base/strbuf.h"
#include "base/xalloc.h"

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
