/*
 * pool_groups: a group snapshot's metadata (groups/<id>.json), which binds member snapshots
 * taken together. It has no image of its own: the members are ordinary snapshots whose
 * metadata names the group, so restoring one is restoring a snapshot.
 */
#include "loopplugin/pool_int.h"

#include <stdlib.h>
#include <string.h>

#include "base/xalloc.h"

void lp_group_free(struct lp_group *g)
{
	if (!g)
		return;
	free(g->id);
	free(g->name);
	lp_free_strings(g->snaps, g->n);
	lp_free_strings(g->vols, g->n);
	free(g);
}

/* Reads the members array; false when it is not an array of {snapshot, volume} objects. */
static bool load_members(json_t *j, struct lp_group *g)
{
	json_t *arr = json_object_get(j, "members");
	if (!json_is_array(arr))
		return false;
	size_t n = json_array_size(arr);
	g->snaps = xcalloc(n + 1, sizeof(char *));
	g->vols = xcalloc(n + 1, sizeof(char *));
	for (size_t i = 0; i < n; i++) {
		json_t *m = json_array_get(arr, i);
		if (!json_is_object(m))
			return false;
		g->snaps[i] = lp_jstr(m, "snapshot");
		g->vols[i] = lp_jstr(m, "volume");
		g->n++;
	}
	return true;
}

int lp_group_load(struct lp_pool *p, const char *id, struct lp_group **out, struct lp_status *st)
{
	*out = NULL;
	if (!lp_id_valid(id))
		return lp_fail(st, LP_NOT_FOUND, "group snapshot %s does not exist", id);
	char *path = lp_pool_path(p, "groups", id, ".json");
	bool enoent;
	char why[256];
	json_t *j = lp_load_json(path, &enoent, why, sizeof(why));
	free(path);
	if (!j)
		return enoent ? lp_fail(st, LP_NOT_FOUND, "group snapshot %s does not exist", id)
			      : lp_fail(st, LP_INTERNAL,
					"group snapshot %s: metadata unreadable: %s", id, why);
	struct lp_group *g = xcalloc(1, sizeof(*g));
	g->id = lp_jstr(j, "id");
	g->name = lp_jstr(j, "name");
	g->created_ns = lp_jint(j, "created_ns");
	bool ok = load_members(j, g);
	json_decref(j);
	if (!ok) {
		lp_group_free(g);
		return lp_fail(st, LP_INTERNAL, "group snapshot %s: metadata has no member list", id);
	}
	*out = g;
	return 0;
}

int lp_group_save(struct lp_pool *p, const struct lp_group *g, struct lp_status *st)
{
	json_t *members = json_array();
	for (size_t i = 0; i < g->n; i++)
		json_array_append_new(members, json_pack("{s:s, s:s}", "snapshot", g->snaps[i],
							 "volume", g->vols[i]));
	json_t *j = json_pack("{s:s, s:s, s:I, s:o}", "id", g->id, "name", g->name, "created_ns",
			      (json_int_t)g->created_ns, "members", members);
	char *path = lp_pool_path(p, "groups", g->id, ".json");
	int err = lp_save_json(path, j);
	json_decref(j);
	free(path);
	if (err)
		return lp_fail(st, lp_code_for_errno(err), "group snapshot %s: write metadata: %s",
			       g->id, strerror(err));
	return 0;
}

int lp_group_delete(struct lp_pool *p, const char *id, struct lp_status *st)
{
	if (!lp_id_valid(id))
		return 0;
	return lp_pool_remove_files(p, "groups", id, "group snapshot", st);
}
