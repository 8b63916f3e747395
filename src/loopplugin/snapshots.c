/*
 * snapshots: CreateSnapshot, DeleteSnapshot, ListSnapshots, GetSnapshot; the freeze of a mounted
 * filesystem around the copy and its records, and what a node service undoes at start.
 */
#include "loopplugin/driver_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "loopplugin/fs.h"
#include "loopplugin/loopdev.h"
#include "loopplugin/mount.h"

Csi__V1__Snapshot *lp_csi_snapshot(struct csi_arena *a, struct lp_driver *d,
				   const struct lp_snapshot *s)
{
	Csi__V1__Snapshot *m = csi_msg_new(a, &csi__v1__snapshot__descriptor);
	m->snapshot_id = csi_arena_strdup(a, s->id);
	m->source_volume_id = csi_arena_strdup(a, s->source_volume);
	m->size_bytes = s->size;
	m->ready_to_use = 1;
	m->creation_time = csi_msg_new(a, &google__protobuf__timestamp__descriptor);
	m->creation_time->seconds = s->created_ns / NSEC_PER_SEC;
	m->creation_time->nanos = (int32_t)(s->created_ns % NSEC_PER_SEC);
	m->group_snapshot_id = csi_arena_strdup(a, s->group ? s->group : "");
	csi_repeated_add(a, &m->base, "accessible_topology", lp_csi_topology(a, d));
	return m;
}

/*
 * When the volume is mounted on this host (mode all), freezes its filesystem so the snapshot is
 * a clean copy rather than a crash-consistent one. Returns the frozen mount point (malloc'd) or
 * NULL. A controller-only driver never touches mounts and takes crash-consistent copies.
 * The freeze is recorded (durably) before FIFREEZE and the record dropped by lp_thaw_volume()
 * after FITHAW, so that a plugin killed in between thaws it at its next start (recover_node).
 * (driver_int.h: the group snapshots of groups.c freeze every member this way.)
 */
char *lp_freeze_volume(struct lp_driver *d, const char *img, const char *snap)
{
	char *dev = NULL, *mp = NULL;
	unsigned ma, mi;
	struct lp_mount m;
	struct stat sb;
	struct lp_status st;
	if (!d->node)
		return NULL;
	if (lp_loop_find(img, &dev) == 1 && lp_blockdev_numbers(dev, &ma, &mi) == 0 &&
	    lp_mount_find_dev(ma, mi, &m) == 1) {
		if (stat(m.target, &sb) < 0) {
			KLOG_W("Snapshot without freezing: stat %s: %s", LOGQ(m.target),
			       strerror(errno));
		} else if (lp_freeze_save(d->pool, d->cfg.nodeid, snap, m.target,
					  (uint64_t)sb.st_dev, &st)) {
			KLOG_W("Snapshot without freezing: %s", st.msg);
		} else if (lp_fs_freeze(m.target) == 0) {
			mp = xstrdup(m.target);
			KLOG_V(2, "Froze filesystem snapshot=%s mount=%s", LOGQ(snap), LOGQ(mp));
		} else {
			lp_freeze_clear(d->pool, d->cfg.nodeid, snap, NULL);
		}
		lp_mount_release(&m);
	}
	free(dev);
	/* test hook (docs/development.md): hold the freeze so a test can kill -9 the plugin */
	const char *hold = getenv("KCSI_LOOPPLUGIN_TEST_FREEZE_HOLD_MS");
	if (mp && hold && atoi(hold) > 0)
		usleep((useconds_t)atoi(hold) * 1000);
	return mp;
}

void lp_thaw_volume(struct lp_driver *d, char *mp, const char *snap)
{
	if (!mp)
		return;
	lp_fs_thaw(mp);
	lp_freeze_clear(d->pool, d->cfg.nodeid, snap, NULL);
	free(mp);
}

/* Thaws what the freeze records name, only when the path still holds the same filesystem. */
void lp_driver_thaw_all(struct lp_driver *d)
{
	char **keys = NULL;
	size_t n = 0;
	if (!d->node)
		return;
	lp_freeze_list(d->pool, d->cfg.nodeid, &keys, &n);
	for (size_t i = 0; i < n; i++) {
		char *path = NULL;
		uint64_t dev = 0;
		struct stat sb;
		if (lp_freeze_load(d->pool, d->cfg.nodeid, keys[i], &path, &dev) &&
		    stat(path, &sb) == 0 && (uint64_t)sb.st_dev == dev) {
			lp_fs_thaw(path);
			KLOG_I("Thawed a filesystem frozen for an unfinished snapshot snapshot=%s "
			       "mount=%s",
			       LOGQ(keys[i]), LOGQ(path));
		}
		lp_freeze_clear(d->pool, d->cfg.nodeid, keys[i], NULL);
		free(path);
	}
	lp_free_strings(keys, n);
}

/*
 * The hint pass once per pool directory and process: a fleet's nodes (kcsi up --nodes 1000)
 * share one pool, and each pass tries every loop device's backing_file in sysfs, detached ones
 * too (the kernel keeps /dev/loopN after a detach): at 1,000 nodes and 1,000 devices, a million
 * sysfs lookups at start for what one pass does. The lock makes the nodes starting together
 * wait for the one pass.
 */
static size_t hint_pool_once(const char *dir)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	static char *done[8]; /* a process serves one pool; more than 8: each start scans */
	static size_t ndone;
	size_t hinted = 0;
	bool seen = false;

	pthread_mutex_lock(&mu);
	for (size_t i = 0; i < ndone && !seen; i++)
		seen = !strcmp(done[i], dir);
	if (!seen) {
		hinted = lp_loop_hint_all(dir);
		if (ndone < sizeof(done) / sizeof(done[0]))
			done[ndone++] = xstrdup(dir);
	}
	pthread_mutex_unlock(&mu);
	return hinted;
}

void lp_node_recover(struct lp_driver *d)
{
	char **keys = NULL;
	size_t n = 0;
	lp_driver_thaw_all(d);
	/* devices set up before device hints existed (loopdev.h) become findable */
	size_t hinted = hint_pool_once(lp_pool_dir(d->pool));
	if (hinted)
		KLOG_V(2, "Found loop devices of the pool's images devices=%zu", hinted);
	lp_stage_list(d->pool, d->cfg.nodeid, &keys, &n);
	for (size_t i = 0; i < n; i++) {
		char *img = lp_volume_image(d->pool, keys[i]), *dev = NULL;
		if (lp_loop_find(img, &dev) != 1) {
			lp_stage_clear(d->pool, d->cfg.nodeid, keys[i], NULL);
			KLOG_V(2, "Dropped the stage record of a volume not staged here volume=%s",
			       LOGQ(keys[i]));
		}
		free(dev);
		free(img);
	}
	lp_free_strings(keys, n);
}

static int create_snapshot(struct csi_call_ctx *ctx, const ProtobufCMessage *reqm,
			   ProtobufCMessage *resp, void *arg)
{
	struct lp_driver *d = arg;
	const Csi__V1__CreateSnapshotRequest *req = (const Csi__V1__CreateSnapshotRequest *)reqm;
	if (lp_empty(req->name))
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT, "CreateSnapshot: name is missing");
	struct lp_status nst;
	if (lp_check_name("CreateSnapshot", "name", req->name, &nst))
		return lp_fail_call(ctx, &nst);
	if (lp_empty(req->source_volume_id))
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT,
				     "snapshot %s: source_volume_id is missing", req->name);
	for (size_t i = 0; i < req->n_parameters; i++)
		if (strncmp(req->parameters[i]->key, "csi.storage.k8s.io/", 19) != 0)
			return csi_ctx_error(ctx, LP_INVALID_ARGUMENT,
					     "snapshot %s: unknown parameter %s (none are known)",
					     req->name, req->parameters[i]->key);
	char what[300];
	snprintf(what, sizeof(what), "snapshot %.200s", req->name);
	if (lp_check_topology(d, what, req->accessibility_requirements, &nst))
		return lp_fail_call(ctx, &nst);
	char *id = lp_snapshot_id_for_name(req->name);
	char key[200];
	snprintf(key, sizeof(key), "s/%s", id);
	if (!lp_inflight_begin(d->inflight, key)) {
		int r = csi_ctx_error(ctx, LP_ABORTED,
				      "snapshot %s (%s): an operation on it is already in progress",
				      req->name, id);
		free(id);
		return r;
	}
	struct lp_status st;
	struct lp_snapshot *s = NULL;
	struct lp_volume *v = NULL;
	int ret = 0;
	if (lp_snapshot_load(d->pool, id, &s, &st) == 0) {
		if (strcmp(s->name, req->name) != 0 ||
		    strcmp(s->source_volume, req->source_volume_id) != 0)
			ret = csi_ctx_error(ctx, LP_ALREADY_EXISTS,
					    "snapshot %s already exists as %s of volume %s, not of "
					    "volume %s",
					    req->name, id, s->source_volume, req->source_volume_id);
	} else if (st.code != LP_NOT_FOUND) {
		ret = lp_fail_call(ctx, &st);
	} else if (lp_volume_load(d->pool, req->source_volume_id, &v, &st)) {
		ret = csi_ctx_error(ctx, st.code, "snapshot %s: source %s", req->name, st.msg);
	} else {
		s = xcalloc(1, sizeof(*s));
		s->id = xstrdup(id);
		s->name = xstrdup(req->name);
		s->source_volume = xstrdup(v->id);
		s->group = xstrdup("");
		s->size = v->size;
		s->created_ns = wall_now_ns();
		char *img = lp_volume_image(d->pool, v->id);
		char *frozen = lp_freeze_volume(d, img, id);
		int r = lp_snapshot_create(d->pool, s, img, &st);
		lp_thaw_volume(d, frozen, id);
		if (r)
			ret = lp_fail_call(ctx, &st);
		else
			KLOG_I("Created snapshot snapshot=%s name=%s volume=%s", LOGQ(id),
			       LOGQ(req->name), LOGQ(v->id));
		free(img);
	}
	if (!ret)
		((Csi__V1__CreateSnapshotResponse *)resp)->snapshot =
			lp_csi_snapshot(csi_ctx_arena(ctx), d, s);
	lp_snapshot_free(s);
	lp_volume_free(v);
	lp_inflight_end(d->inflight, key);
	free(id);
	return ret;
}

static int delete_snapshot(struct csi_call_ctx *ctx, const ProtobufCMessage *reqm,
			   ProtobufCMessage *resp, void *arg)
{
	(void)resp;
	struct lp_driver *d = arg;
	const Csi__V1__DeleteSnapshotRequest *req = (const Csi__V1__DeleteSnapshotRequest *)reqm;
	if (lp_empty(req->snapshot_id))
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT,
				     "DeleteSnapshot: snapshot_id is missing");
	char key[200];
	snprintf(key, sizeof(key), "s/%s", req->snapshot_id);
	if (!lp_inflight_begin(d->inflight, key))
		return csi_ctx_error(ctx, LP_ABORTED,
				     "snapshot %s: an operation on it is already in progress",
				     req->snapshot_id);
	struct lp_status st;
	int ret = 0;
	struct lp_snapshot *s = NULL;
	struct lp_group *g = NULL;
	/* a member goes with its group (DeleteVolumeGroupSnapshot); a leftover of an unfinished
	 * group creation, whose group has no metadata, may go alone */
	if (lp_snapshot_load(d->pool, req->snapshot_id, &s, NULL) == 0 && !lp_empty(s->group) &&
	    lp_group_load(d->pool, s->group, &g, NULL) == 0)
		ret = csi_ctx_error(ctx, LP_FAILED_PRECONDITION,
				    "snapshot %s is a member of group snapshot %s (%s): delete the "
				    "group snapshot instead",
				    req->snapshot_id, g->id, g->name);
	else if (lp_snapshot_delete(d->pool, req->snapshot_id, &st))
		ret = lp_fail_call(ctx, &st);
	lp_group_free(g);
	lp_snapshot_free(s);
	lp_inflight_end(d->inflight, key);
	return ret;
}

static int list_snapshots(struct csi_call_ctx *ctx, const ProtobufCMessage *reqm,
			  ProtobufCMessage *resp, void *arg)
{
	struct lp_driver *d = arg;
	const Csi__V1__ListSnapshotsRequest *req = (const Csi__V1__ListSnapshotsRequest *)reqm;
	Csi__V1__ListSnapshotsResponse *r = (Csi__V1__ListSnapshotsResponse *)resp;
	struct csi_arena *a = csi_ctx_arena(ctx);
	if (req->max_entries < 0)
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT,
				     "ListSnapshots: negative max_entries");
	int64_t tc = INT64_MIN;
	const char *tid = "";
	if (!lp_empty(req->starting_token) && lp_parse_token(req->starting_token, &tc, &tid))
		return csi_ctx_error(ctx, LP_ABORTED, "ListSnapshots: invalid starting_token %s",
				     req->starting_token);
	struct lp_status st;
	char **ids;
	int64_t *created;
	size_t n;
	if (lp_snapshot_list(d->pool, &ids, &created, &n, &st))
		return lp_fail_call(ctx, &st);
	size_t count = 0, last = 0;
	for (size_t i = 0; i < n; i++) {
		if (!lp_after_token(created[i], ids[i], tc, tid))
			continue;
		if (!lp_empty(req->snapshot_id) && strcmp(ids[i], req->snapshot_id) != 0)
			continue;
		struct lp_snapshot *s;
		if (lp_snapshot_load(d->pool, ids[i], &s, NULL))
			continue;
		if (!lp_empty(req->source_volume_id) &&
		    strcmp(s->source_volume, req->source_volume_id) != 0) {
			lp_snapshot_free(s);
			continue;
		}
		if (req->max_entries && count == (size_t)req->max_entries) {
			r->next_token = csi_arena_printf(a, "%lld:%s", (long long)created[last],
							 ids[last]);
			lp_snapshot_free(s);
			break;
		}
		last = i;
		Csi__V1__ListSnapshotsResponse__Entry *e =
			csi_msg_new(a, &csi__v1__list_snapshots_response__entry__descriptor);
		e->snapshot = lp_csi_snapshot(a, d, s);
		csi_repeated_add(a, resp, "entries", e);
		count++;
		lp_snapshot_free(s);
	}
	lp_free_strings(ids, n);
	free(created);
	return 0;
}

/* GetSnapshot (capability GET_SNAPSHOT): what ListSnapshots would list for the one ID. */
static int get_snapshot(struct csi_call_ctx *ctx, const ProtobufCMessage *reqm,
			ProtobufCMessage *resp, void *arg)
{
	struct lp_driver *d = arg;
	const Csi__V1__GetSnapshotRequest *req = (const Csi__V1__GetSnapshotRequest *)reqm;
	if (lp_empty(req->snapshot_id))
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT, "GetSnapshot: snapshot_id is missing");
	struct lp_snapshot *s;
	struct lp_status st;
	if (lp_snapshot_load(d->pool, req->snapshot_id, &s, &st))
		return lp_fail_call(ctx, &st);
	((Csi__V1__GetSnapshotResponse *)resp)->snapshot =
		lp_csi_snapshot(csi_ctx_arena(ctx), d, s);
	lp_snapshot_free(s);
	return 0;
}

void lp_register_snapshots(struct lp_driver *d, struct csi_server *s)
{
	csi_server_handle(s, CSI_METHOD(Controller, GetSnapshot), get_snapshot, d);
	csi_server_handle(s, CSI_METHOD(Controller, CreateSnapshot), create_snapshot, d);
	csi_server_handle(s, CSI_METHOD(Controller, DeleteSnapshot), delete_snapshot, d);
	csi_server_handle(s, CSI_METHOD(Controller, ListSnapshots), list_snapshots, d);
}
