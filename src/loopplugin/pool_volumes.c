/*
 * pool_volumes: a volume's metadata (JSON) and its image: load, save, create (a copy of a
 * source when cloning), delete, grow, the formatting mark, and listing.
 */
#include "loopplugin/pool_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/xalloc.h"

static json_t *volume_to_json(const struct lp_volume *v)
{
	json_t *att = json_array();
	for (size_t i = 0; i < v->natt; i++)
		json_array_append_new(att, json_pack("{s:s, s:s, s:b}", "node", v->att[i].node,
						     "device", v->att[i].device, "readonly",
						     v->att[i].readonly));
	json_t *tags = json_object();
	for (size_t i = 0; i < v->ntags; i++)
		json_object_set_new(tags, v->tags[i].key, json_string(v->tags[i].value));
	return json_pack("{s:s, s:s, s:I, s:b, s:b, s:s, s:s, s:s, s:s, s:I, s:o, s:o}", "id", v->id,
			 "name", v->name, "size", (json_int_t)v->size, "thick", v->thick,
			 "block", v->block, "fstype", v->fstype ? v->fstype : "", "source_kind",
			 v->source_kind ? v->source_kind : "", "source_id",
			 v->source_id ? v->source_id : "", "zone", v->zone ? v->zone : "",
			 "created_ns", (json_int_t)v->created_ns, "tags", tags, "attachments", att);
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
	/* A volume made before tags existed has none. */
	json_t *tags = json_object_get(j, "tags");
	size_t nt = json_is_object(tags) ? json_object_size(tags) : 0;
	v->tags = nt ? xcalloc(nt, sizeof(*v->tags)) : NULL;
	const char *tk;
	json_t *tv;
	json_object_foreach(tags, tk, tv) {
		if (v->ntags < nt && json_is_string(tv)) {
			v->tags[v->ntags].key = xstrdup(tk);
			v->tags[v->ntags++].value = xstrdup(json_string_value(tv));
		}
	}
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

struct lp_tag *lp_tags_dup(const struct lp_tag *t, size_t n)
{
	struct lp_tag *c = n ? xcalloc(n, sizeof(*c)) : NULL;
	for (size_t i = 0; i < n; i++) {
		c[i].key = xstrdup(t[i].key);
		c[i].value = xstrdup(t[i].value);
	}
	return c;
}

void lp_tags_free(struct lp_tag *t, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(t[i].key);
		free(t[i].value);
	}
	free(t);
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
	lp_tags_free(v->tags, v->ntags);
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

/* Allocates the whole image: 0 or an errno (ENOSPC before trying when the pool lacks room). */
static int allocate_image(struct lp_pool *p, const struct lp_volume *v)
{
	char *img = lp_volume_image(p, v->id);
	int fd = open(img, O_RDWR | O_CLOEXEC);
	free(img);
	if (fd < 0)
		return errno;
	struct stat sb;
	int err = 0;
	if (fstat(fd, &sb) < 0)
		err = errno;
	else if (v->size - (int64_t)sb.st_blocks * 512 > lp_pool_free_bytes(p))
		err = ENOSPC;
	else
		err = posix_fallocate(fd, 0, v->size);
	if (!err && fsync(fd) < 0)
		err = errno;
	close(fd);
	return err;
}

int lp_volume_set_thick(struct lp_pool *p, struct lp_volume *v, bool thick,
			struct lp_status *st)
{
	if (thick == v->thick)
		return 0;
	int err = thick ? allocate_image(p, v) : 0;
	if (err)
		return lp_fail(st, lp_code_for_errno(err), "volume %s: allocate %lld bytes: %s",
			       v->id, (long long)v->size, strerror(err));
	v->thick = thick;
	int r = lp_volume_save(p, v, st);
	if (r)
		v->thick = !thick;
	return r;
}

int lp_volume_list(struct lp_pool *p, char ***ids, int64_t **created, size_t *n,
		   struct lp_status *st)
{
	return lp_pool_list_dir(p, "volumes", ids, created, n, st);
}
