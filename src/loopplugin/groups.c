/*
 * groups: the GroupController service (GroupControllerGetCapabilities,
 * CreateVolumeGroupSnapshot, DeleteVolumeGroupSnapshot, GetVolumeGroupSnapshot).
 *
 * A group snapshot is one snapshot of each source volume, all taken at one moment: every
 * member's mounted filesystem is frozen first (when this process serves the node too, as for
 * CreateSnapshot), then each image is copied, then all are thawed. The members are ordinary
 * snapshots whose metadata names the group (restoring one is CreateVolume from a snapshot);
 * the group's own metadata, written last, is the commit point (pool.h). The group's ID derives
 * from its name and each member's from the group and its volume, so a retry finds the group,
 * or finds the leftovers of an unfinished attempt and takes them again at one new moment.
 * Group calls hold the in-flight key "g/<group id>".
 */
#include "loopplugin/driver_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/timeutil.h"
#include "base/xalloc.h"

static int get_capabilities(struct csi_call_ctx *ctx, const ProtobufCMessage *req,
			    ProtobufCMessage *resp, void *arg)
{
	(void)req;
	(void)arg;
	struct csi_arena *a = csi_ctx_arena(ctx);
	Csi__V1__GroupControllerServiceCapability *c =
		csi_msg_new(a, &csi__v1__group_controller_service_capability__descriptor);
	c->type_case = CSI__V1__GROUP_CONTROLLER_SERVICE_CAPABILITY__TYPE_RPC;
	c->rpc = csi_msg_new(a, &csi__v1__group_controller_service_capability__rpc__descriptor);
	c->rpc->type =
		CSI__V1__GROUP_CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT;
	csi_repeated_add(a, resp, "capabilities", c);
	return 0;
}

static bool has_string(char *const *v, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i], s) == 0)
			return true;
	return false;
}

/* Whether two lists hold the same strings, in any order (neither repeats one). */
static bool same_set(char *const *a, size_t na, char *const *b, size_t nb)
{
	if (na != nb)
		return false;
	for (size_t i = 0; i < na; i++)
		if (!has_string(b, nb, a[i]))
			return false;
	return true;
}

/* The group as the RPCs answer it: its members as they are in the pool now. */
static Csi__V1__VolumeGroupSnapshot *group_msg(struct csi_arena *a, struct lp_driver *d,
					       const struct lp_group *g)
{
	Csi__V1__VolumeGroupSnapshot *m =
		csi_msg_new(a, &csi__v1__volume_group_snapshot__descriptor);
	m->group_snapshot_id = csi_arena_strdup(a, g->id);
	m->creation_time = csi_msg_new(a, &google__protobuf__timestamp__descriptor);
	m->creation_time->seconds = g->created_ns / NSEC_PER_SEC;
	m->creation_time->nanos = (int32_t)(g->created_ns % NSEC_PER_SEC);
	m->ready_to_use = 1;
	for (size_t i = 0; i < g->n; i++) {
		struct lp_snapshot *s;
		if (lp_snapshot_load(d->pool, g->snaps[i], &s, NULL)) {
			m->ready_to_use = 0; /* a deletion cut short: the group is going */
			continue;
		}
		csi_repeated_add(a, &m->base, "snapshots", lp_csi_snapshot(a, d, s));
		lp_snapshot_free(s);
	}
	return m;
}

/* Checks the request; INVALID_ARGUMENT in st naming what is wrong. */
static int check_create(const Csi__V1__CreateVolumeGroupSnapshotRequest *req,
			struct lp_status *st)
{
	if (lp_empty(req->name))
		return lp_fail(st, LP_INVALID_ARGUMENT, "CreateVolumeGroupSnapshot: name is missing");
	if (lp_check_name("CreateVolumeGroupSnapshot", "name", req->name, st))
		return -1;
	if (!req->n_source_volume_ids)
		return lp_fail(st, LP_INVALID_ARGUMENT,
			       "group snapshot %s: source_volume_ids is missing", req->name);
	for (size_t i = 0; i < req->n_source_volume_ids; i++) {
		if (lp_empty(req->source_volume_ids[i]))
			return lp_fail(st, LP_INVALID_ARGUMENT,
				       "group snapshot %s: source_volume_ids[%zu] is empty",
				       req->name, i);
		if (has_string(req->source_volume_ids, i, req->source_volume_ids[i]))
			return lp_fail(st, LP_INVALID_ARGUMENT,
				       "group snapshot %s: volume %s is listed twice", req->name,
				       req->source_volume_ids[i]);
	}
	for (size_t i = 0; i < req->n_parameters; i++)
		if (strncmp(req->parameters[i]->key, "csi.storage.k8s.io/", 19) != 0)
			return lp_fail(st, LP_INVALID_ARGUMENT,
				       "group snapshot %s: unknown parameter %s (none are known)",
				       req->name, req->parameters[i]->key);
	return 0;
}

/* A new group for the request's volumes; every source must exist (else NOT_FOUND). */
static struct lp_group *new_group(struct lp_driver *d, const char *id,
				  const Csi__V1__CreateVolumeGroupSnapshotRequest *req,
				  struct lp_volume **vols, struct lp_status *st)
{
	size_t n = req->n_source_volume_ids;
	for (size_t i = 0; i < n; i++)
		if (lp_volume_load(d->pool, req->source_volume_ids[i], &vols[i], st)) {
			char why[sizeof(st->msg)];
			snprintf(why, sizeof(why), "%s", st->msg);
			lp_fail(st, st->code, "group snapshot %.200s: source %s", req->name, why);
			return NULL;
		}
	struct lp_group *g = xcalloc(1, sizeof(*g));
	g->id = xstrdup(id);
	g->name = xstrdup(req->name);
	g->snaps = xcalloc(n + 1, sizeof(char *));
	g->vols = xcalloc(n + 1, sizeof(char *));
	for (size_t i = 0; i < n; i++) {
		g->vols[i] = xstrdup(vols[i]->id);
		g->snaps[i] = lp_group_member_id(id, vols[i]->id);
	}
	g->n = n;
	return g;
}

static void delete_members(struct lp_driver *d, const struct lp_group *g, size_t n)
{
	for (size_t i = 0; i < n; i++)
		lp_snapshot_delete(d->pool, g->snaps[i], NULL);
}

/*
 * Freezes every member's filesystem, copies every image, thaws all; then commits the group.
 * On failure nothing of the group is left.
 */
static int take_group(struct lp_driver *d, struct lp_group *g, struct lp_volume **vols,
		      struct lp_status *st)
{
	char **imgs = xcalloc(g->n, sizeof(char *)), **frozen = xcalloc(g->n, sizeof(char *));
	delete_members(d, g, g->n); /* leftovers of an attempt that did not commit */
	for (size_t i = 0; i < g->n; i++) {
		imgs[i] = lp_volume_image(d->pool, vols[i]->id);
		frozen[i] = lp_freeze_volume(d, imgs[i], g->snaps[i]);
	}
	g->created_ns = wall_now_ns();
	int r = 0;
	size_t made = 0;
	for (; made < g->n && !r; made++) {
		struct lp_snapshot s = {
			.id = g->snaps[made], .name = g->snaps[made], .source_volume = vols[made]->id,
			.group = g->id, .size = vols[made]->size, .created_ns = g->created_ns,
		};
		r = lp_snapshot_create(d->pool, &s, imgs[made], st);
	}
	for (size_t i = 0; i < g->n; i++) {
		lp_thaw_volume(d, frozen[i], g->snaps[i]);
		free(imgs[i]);
	}
	free(imgs);
	free(frozen);
	if (!r)
		r = lp_group_save(d->pool, g, st);
	if (r)
		delete_members(d, g, made);
	return r;
}

static int create_group(struct csi_call_ctx *ctx, const ProtobufCMessage *reqm,
			ProtobufCMessage *resp, void *arg)
{
	struct lp_driver *d = arg;
	const Csi__V1__CreateVolumeGroupSnapshotRequest *req =
		(const Csi__V1__CreateVolumeGroupSnapshotRequest *)reqm;
	struct lp_status st;
	if (check_create(req, &st))
		return lp_fail_call(ctx, &st);
	char *id = lp_group_id_for_name(req->name);
	char key[200];
	snprintf(key, sizeof(key), "g/%s", id);
	if (!lp_inflight_begin(d->inflight, key)) {
		int r = csi_ctx_error(ctx, LP_ABORTED,
				      "group snapshot %s (%s): an operation on it is already in "
				      "progress",
				      req->name, id);
		free(id);
		return r;
	}
	size_t n = req->n_source_volume_ids;
	struct lp_volume **vols = xcalloc(n, sizeof(*vols));
	struct lp_group *g = NULL;
	int ret = 0;
	if (lp_group_load(d->pool, id, &g, &st) == 0) {
		if (strcmp(g->name, req->name) != 0 ||
		    !same_set(g->vols, g->n, req->source_volume_ids, n))
			ret = csi_ctx_error(ctx, LP_ALREADY_EXISTS,
					    "group snapshot %s already exists as %s of other "
					    "volumes",
					    req->name, id);
	} else if (st.code != LP_NOT_FOUND) {
		ret = lp_fail_call(ctx, &st);
	} else if (!(g = new_group(d, id, req, vols, &st)) || take_group(d, g, vols, &st)) {
		ret = lp_fail_call(ctx, &st);
	} else {
		KLOG_I("Created group snapshot group=%s name=%s volumes=%zu", LOGQ(id),
		       LOGQ(req->name), g->n);
	}
	if (!ret)
		((Csi__V1__CreateVolumeGroupSnapshotResponse *)resp)->group_snapshot =
			group_msg(csi_ctx_arena(ctx), d, g);
	for (size_t i = 0; i < n; i++)
		lp_volume_free(vols[i]);
	free(vols);
	lp_group_free(g);
	lp_inflight_end(d->inflight, key);
	free(id);
	return ret;
}

/*
 * The group a Delete or Get names, checked against the snapshot IDs the CO gave (none: no
 * check): FAILED_PRECONDITION when they are not the group's members.
 */
static int load_checked(struct lp_driver *d, const char *id, char *const *snaps, size_t n,
			struct lp_group **g, struct lp_status *st)
{
	if (lp_group_load(d->pool, id, g, st))
		return -1;
	if (n && !same_set((*g)->snaps, (*g)->n, snaps, n)) {
		lp_group_free(*g);
		*g = NULL;
		return lp_fail(st, LP_FAILED_PRECONDITION,
			       "group snapshot %s: snapshot_ids do not match its %zu member "
			       "snapshots",
			       id, n);
	}
	return 0;
}

static int delete_group(struct csi_call_ctx *ctx, const ProtobufCMessage *reqm,
			ProtobufCMessage *resp, void *arg)
{
	(void)resp;
	struct lp_driver *d = arg;
	const Csi__V1__DeleteVolumeGroupSnapshotRequest *req =
		(const Csi__V1__DeleteVolumeGroupSnapshotRequest *)reqm;
	if (lp_empty(req->group_snapshot_id))
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT,
				     "DeleteVolumeGroupSnapshot: group_snapshot_id is missing");
	char key[200];
	snprintf(key, sizeof(key), "g/%.150s", req->group_snapshot_id);
	if (!lp_inflight_begin(d->inflight, key))
		return csi_ctx_error(ctx, LP_ABORTED,
				     "group snapshot %s: an operation on it is already in progress",
				     req->group_snapshot_id);
	struct lp_status st;
	struct lp_group *g = NULL;
	int ret = 0;
	if (load_checked(d, req->group_snapshot_id, req->snapshot_ids, req->n_snapshot_ids, &g,
			 &st)) {
		if (st.code != LP_NOT_FOUND) /* gone already: deleted */
			ret = lp_fail_call(ctx, &st);
	} else {
		for (size_t i = 0; i < g->n && !ret; i++)
			if (lp_snapshot_delete(d->pool, g->snaps[i], &st))
				ret = lp_fail_call(ctx, &st);
		if (!ret && lp_group_delete(d->pool, g->id, &st))
			ret = lp_fail_call(ctx, &st);
		if (!ret)
			KLOG_I("Deleted group snapshot group=%s snapshots=%zu", LOGQ(g->id), g->n);
	}
	lp_group_free(g);
	lp_inflight_end(d->inflight, key);
	return ret;
}

static int get_group(struct csi_call_ctx *ctx, const ProtobufCMessage *reqm,
		     ProtobufCMessage *resp, void *arg)
{
	struct lp_driver *d = arg;
	const Csi__V1__GetVolumeGroupSnapshotRequest *req =
		(const Csi__V1__GetVolumeGroupSnapshotRequest *)reqm;
	if (lp_empty(req->group_snapshot_id))
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT,
				     "GetVolumeGroupSnapshot: group_snapshot_id is missing");
	struct lp_status st;
	struct lp_group *g;
	if (load_checked(d, req->group_snapshot_id, req->snapshot_ids, req->n_snapshot_ids, &g,
			 &st))
		return lp_fail_call(ctx, &st);
	((Csi__V1__GetVolumeGroupSnapshotResponse *)resp)->group_snapshot =
		group_msg(csi_ctx_arena(ctx), d, g);
	lp_group_free(g);
	return 0;
}

void lp_register_groups(struct lp_driver *d, struct csi_server *s)
{
	csi_server_handle(s, CSI_METHOD(GroupController, GroupControllerGetCapabilities),
			  get_capabilities, d);
	csi_server_handle(s, CSI_METHOD(GroupController, CreateVolumeGroupSnapshot), create_group,
			  d);
	csi_server_handle(s, CSI_METHOD(GroupController, DeleteVolumeGroupSnapshot), delete_group,
			  d);
	csi_server_handle(s, CSI_METHOD(GroupController, GetVolumeGroupSnapshot), get_group, d);
}
