/*
 * pool_snapshots: a snapshot's image (a copy of its volume's) and metadata, in the pattern of
 * volumes: the image first, the metadata last, removal in the other order.
 */
#include "loopplugin/pool_int.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/xalloc.h"

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
