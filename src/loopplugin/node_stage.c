/*
 * node_stage: NodeStageVolume (loop device, format, check, grow, mount at the staging path,
 * the stage record and idempotent repeats) and NodeUnstageVolume.
 */
#include "loopplugin/driver_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "base/log.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "loopplugin/fs.h"
#include "loopplugin/loopdev.h"
#include "loopplugin/mount.h"

/* Sets up the filesystem side of a stage: probe, format if blank, check, grow, mount. */
static int stage_mount(struct lp_driver *d, const struct lp_volume *v, const char *dev,
		       const char *staging, const char *fstype, const VolCap *cap, bool ro,
		       struct lp_status *st)
{
	struct lp_mount m;
	int found = lp_mount_find(staging, &m);
	if (found > 0) {
		unsigned ma, mi;
		bool same = lp_blockdev_numbers(dev, &ma, &mi) == 0 && ma == m.major &&
			    mi == m.minor;
		lp_mount_release(&m);
		if (same)
			return 0; /* staged before: done */
		return lp_fail(st, LP_ALREADY_EXISTS,
			       "volume %s: staging path %s has another filesystem mounted", v->id,
			       staging);
	}
	/* mounted elsewhere (staged at another path): a check of a mounted device would call a
	 * healthy filesystem damaged, and a second mount of it is not what a stage means */
	unsigned dma, dmi;
	if (found == 0 && lp_blockdev_numbers(dev, &dma, &dmi) == 0 &&
	    lp_mount_find_dev(dma, dmi, &m) == 1) {
		int r = lp_fail(st, LP_FAILED_PRECONDITION,
				"volume %s is already mounted at %s; NodeUnstageVolume it there "
				"before staging it at %s",
				v->id, m.target, staging);
		lp_mount_release(&m);
		return r;
	}
	char have[64];
	int r = lp_fs_probe(v->id, dev, have, sizeof(have), st);
	if (r < 0)
		return r;
	/* an mkfs that was interrupted leaves a filesystem nobody should trust: redo it */
	bool interrupted = lp_volume_formatting(d->pool, v->id);
	if (r == 0 || interrupted) {
		if (ro)
			return lp_fail(st, LP_FAILED_PRECONDITION,
				       "volume %s is %s and published read-only: nothing to mount",
				       v->id, interrupted ? "half-formatted" : "blank");
		KLOG_I("Formatting volume volume=%s device=%s fstype=%s redo=%d", LOGQ(v->id),
		       LOGQ(dev), LOGQ(fstype), interrupted);
		if (lp_volume_mark_formatting(d->pool, v->id, true, st) ||
		    lp_fs_format(v->id, dev, fstype, st) ||
		    lp_volume_mark_formatting(d->pool, v->id, false, st))
			return -1;
		snprintf(have, sizeof(have), "%s", fstype);
	} else if (strcmp(have, "ext4") != 0 && strcmp(have, "xfs") != 0 &&
		   strcmp(have, "ext3") != 0 && strcmp(have, "ext2") != 0) {
		return lp_fail(st, LP_FAILED_PRECONDITION,
			       "volume %s holds a %s signature, not a filesystem this driver mounts",
			       v->id, have);
	} else if (strcmp(have, fstype) != 0) {
		KLOG_W("Volume already has another filesystem; mounting it as it is volume=%s "
		       "has=%s requested=%s",
		       LOGQ(v->id), LOGQ(have), LOGQ(fstype));
	}
	if (lp_fs_check(v->id, dev, have, st))
		return -1;
	if (!ro && lp_fs_grow_offline(v->id, dev, have, st))
		return -1;
	unsigned long flags = 0;
	char data[512], bad[128];
	if (cap->mount &&
	    lp_mount_parse_flags((const char *const *)cap->mount->mount_flags,
				 cap->mount->n_mount_flags, &flags, data, sizeof(data), bad,
				 sizeof(bad)))
		return lp_fail(st, LP_INVALID_ARGUMENT, "volume %s: mount flag %s is not allowed",
			       v->id, bad);
	if (!cap->mount)
		data[0] = '\0';
	if (ro)
		flags |= MS_RDONLY;
	if (mkdir(staging, 0750) < 0 && errno != EEXIST)
		return lp_fail(st, LP_INTERNAL, "volume %s: create staging path %s: %s", v->id,
			       staging, strerror(errno));
	return lp_mount_fs(v->id, dev, staging, have, flags, data, st);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The stage record a request asks for: its mount flags sorted, so order does not matter. */
static void stage_wanted(const VolCap *cap, const struct capset *cs, const char *fstype,
			 const char *staging, struct lp_stage *want)
{
	struct strbuf flags = STRBUF_INIT;
	if (!cs->block && cap->mount && cap->mount->n_mount_flags) {
		size_t n = cap->mount->n_mount_flags;
		char **sorted = xcalloc(n, sizeof(char *));
		memcpy(sorted, cap->mount->mount_flags, n * sizeof(char *));
		qsort(sorted, n, sizeof(char *), cmp_str);
		for (size_t i = 0; i < n; i++)
			strbuf_addf(&flags, "%s%s", i ? "," : "", sorted[i] ? sorted[i] : "");
		free(sorted);
	}
	want->path = xstrdup(staging);
	want->block = cs->block;
	want->fstype = xstrdup(cs->block ? "" : fstype);
	want->flags = strbuf_detach(&flags, NULL);
	want->mode = cs->mode;
}

/*
 * A stage repeated while the first one holds (its loop device is there): the same path with
 * the same capability is the idempotent repeat (0); another path is FAILED_PRECONDITION (one
 * staging path per volume and node); the same path with another capability ALREADY_EXISTS.
 */
static int stage_repeat_check(const struct lp_volume *v, const struct lp_stage *old,
			      const struct lp_stage *want, struct lp_status *st)
{
	if (strcmp(old->path, want->path) != 0)
		return lp_fail(st, LP_FAILED_PRECONDITION,
			       "volume %s is already staged on this node at %s; NodeUnstageVolume "
			       "it there before staging it at %s",
			       v->id, old->path, want->path);
	if (old->block != want->block)
		return lp_fail(st, LP_ALREADY_EXISTS,
			       "volume %s is already staged at %s for %s access, not %s", v->id,
			       old->path, old->block ? "block" : "mount",
			       want->block ? "block" : "mount");
	if (strcmp(old->fstype, want->fstype) != 0)
		return lp_fail(st, LP_ALREADY_EXISTS,
			       "volume %s is already staged at %s with fs type %s, not %s", v->id,
			       old->path, old->fstype, want->fstype);
	if (strcmp(old->flags, want->flags) != 0)
		return lp_fail(st, LP_ALREADY_EXISTS,
			       "volume %s is already staged at %s with mount flags [%s], not [%s]",
			       v->id, old->path, old->flags, want->flags);
	if (old->mode != want->mode)
		return lp_fail(st, LP_ALREADY_EXISTS,
			       "volume %s is already staged at %s with access mode %s, not %s",
			       v->id, old->path, lp_mode_name(old->mode), lp_mode_name(want->mode));
	return 0;
}

static int node_stage(struct csi_call_ctx *ctx, const ProtobufCMessage *reqm,
		      ProtobufCMessage *resp, void *arg)
{
	(void)resp;
	struct lp_driver *d = arg;
	const Csi__V1__NodeStageVolumeRequest *req = (const Csi__V1__NodeStageVolumeRequest *)reqm;
	if (lp_empty(req->volume_id))
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT, "NodeStageVolume: volume_id is missing");
	if (lp_empty(req->staging_target_path))
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT,
				     "volume %s: staging_target_path is missing", req->volume_id);
	struct lp_status st;
	struct capset cs;
	char what[300];
	snprintf(what, sizeof(what), "volume %.200s", req->volume_id);
	if (lp_check_cap(d, what, req->volume_capability, &cs, &st))
		return lp_fail_call(ctx, &st);
	char key[200];
	if (!lp_op_begin(d, 'n', req->volume_id, key, sizeof(key)))
		return lp_op_busy(ctx, req->volume_id);
	int ret = 0;
	struct lp_volume *v = NULL;
	struct lp_stage *old = NULL, want = { 0 };
	bool recorded = false;
	char *img = NULL, *dev = NULL, *staging = lp_canon_path(req->staging_target_path);
	/* the pool lock orders this against ControllerUnpublishVolume: the attachment is checked
	 * and the stage recorded at once, so an unpublish sees either no attachment or the record */
	lp_pool_lock(d->pool);
	if (lp_volume_load(d->pool, req->volume_id, &v, &st) || lp_caps_fit_volume(v, &cs, &st)) {
		lp_pool_unlock(d->pool);
		ret = lp_fail_call(ctx, &st);
		goto out;
	}
	struct lp_attachment *att = lp_volume_attachment(v, d->cfg.nodeid);
	if (!att) {
		lp_pool_unlock(d->pool);
		ret = csi_ctx_error(ctx, LP_FAILED_PRECONDITION,
				    "volume %s is not published to node %s (ControllerPublishVolume "
				    "first)",
				    v->id, d->cfg.nodeid);
		goto out;
	}
	bool readonly = att->readonly;
	const VolCap *cap = req->volume_capability;
	/* mount and block share a oneof: cap->mount means something only for mount access */
	const char *fstype = cs.block					  ? ""
			     : cap->mount && !lp_empty(cap->mount->fs_type) ? cs.fstype
			     : !lp_empty(v->fstype)			  ? v->fstype
									  : cs.fstype;
	stage_wanted(cap, &cs, fstype, staging, &want);
	img = lp_volume_image(d->pool, v->id);
	char *existing = NULL;
	bool had = lp_loop_find(img, &existing) == 1;
	free(existing);
	/* a record without a loop device is a stage that did not survive (reboot, crash): stale */
	if (lp_stage_load(d->pool, d->cfg.nodeid, v->id, &old) && had &&
	    stage_repeat_check(v, old, &want, &st)) {
		lp_pool_unlock(d->pool);
		ret = lp_fail_call(ctx, &st);
		goto out;
	}
	bool fresh = !old || !had;
	if (fresh && lp_stage_save(d->pool, d->cfg.nodeid, v->id, &want, &st)) {
		lp_pool_unlock(d->pool);
		ret = lp_fail_call(ctx, &st);
		goto out;
	}
	recorded = fresh;
	lp_pool_unlock(d->pool);
	if (lp_loop_attach(v->id, img, readonly, &dev, &st)) {
		ret = lp_fail_call(ctx, &st);
		goto out;
	}
	if (!cs.block && stage_mount(d, v, dev, staging, fstype, cap, readonly, &st)) {
		ret = lp_fail_call(ctx, &st);
		/* leave nothing behind that the CO does not know about */
		if (!had)
			lp_loop_detach(v->id, dev, NULL);
		goto out;
	}
	KLOG_I("Staged volume volume=%s device=%s staging=%s", LOGQ(v->id), LOGQ(dev), LOGQ(staging));
out:
	/* a first stage that failed leaves no record: nothing of it is on the system */
	if (ret && recorded && !had)
		lp_stage_clear(d->pool, d->cfg.nodeid, v->id, NULL);
	lp_stage_free(old);
	free(want.path);
	free(want.fstype);
	free(want.flags);
	free(staging);
	free(img);
	free(dev);
	lp_volume_free(v);
	lp_inflight_end(d->inflight, key);
	return ret;
}

static int node_unstage(struct csi_call_ctx *ctx, const ProtobufCMessage *reqm,
			ProtobufCMessage *resp, void *arg)
{
	(void)resp;
	struct lp_driver *d = arg;
	const Csi__V1__NodeUnstageVolumeRequest *req =
		(const Csi__V1__NodeUnstageVolumeRequest *)reqm;
	if (lp_empty(req->volume_id))
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT,
				     "NodeUnstageVolume: volume_id is missing");
	if (lp_empty(req->staging_target_path))
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT,
				     "volume %s: staging_target_path is missing", req->volume_id);
	int bad = lp_check_node_target(ctx, d, req->volume_id, req->staging_target_path,
				       "staging_target_path");
	if (bad)
		return bad;
	char key[200];
	if (!lp_op_begin(d, 'n', req->volume_id, key, sizeof(key)))
		return lp_op_busy(ctx, req->volume_id);
	struct lp_status st;
	int ret = 0;
	char *staging = lp_canon_path(req->staging_target_path);
	char *img = lp_volume_image(d->pool, req->volume_id), *dev = NULL;
	int users = 0;
	if (lp_loop_find(img, &dev) == 1) {
		/* every mount of the device but the staging one, plus bind mounts of the device
		 * node (how block volumes are published): all must be gone first */
		unsigned ma, mi;
		struct lp_mount m;
		if (lp_blockdev_numbers(dev, &ma, &mi) == 0) {
			users = lp_mount_count_dev(ma, mi);
			if (lp_mount_find(staging, &m) == 1) {
				if (m.major == ma && m.minor == mi)
					users--;
				lp_mount_release(&m);
			}
		}
		char root[80];
		snprintf(root, sizeof(root), "/%s", strrchr(dev, '/') ? strrchr(dev, '/') + 1 : dev);
		struct stat devfs;
		if (stat("/dev", &devfs) == 0) {
			int binds = lp_mount_count_root(root, major(devfs.st_dev), minor(devfs.st_dev));
			users += binds > 0 ? binds : 0;
		}
	}
	int here = lp_target_is_volumes(staging, dev);
	struct lp_stage *rec = NULL;
	lp_stage_load(d->pool, d->cfg.nodeid, req->volume_id, &rec);
	if (rec && dev && strcmp(rec->path, staging) != 0)
		ret = csi_ctx_error(ctx, LP_FAILED_PRECONDITION,
				    "volume %s is staged at %s, not at %s; left as it is",
				    req->volume_id, rec->path, staging);
	else if (users > 0)
		ret = csi_ctx_error(ctx, LP_FAILED_PRECONDITION,
				    "volume %s: %s is still mounted in %d other place(s); unpublish "
				    "it first",
				    req->volume_id, dev, users);
	else if (here < 0)
		ret = csi_ctx_error(ctx, LP_FAILED_PRECONDITION,
				    "volume %s: %s holds a mount this driver did not make for the "
				    "volume; left as it is", req->volume_id, staging);
	else if (here > 0 && lp_umount(req->volume_id, staging, &st))
		ret = lp_fail_call(ctx, &st);
	else if (dev && lp_loop_detach(req->volume_id, dev, &st))
		ret = lp_fail_call(ctx, &st);
	else if (dev)
		KLOG_I("Unstaged volume volume=%s device=%s", LOGQ(req->volume_id), LOGQ(dev));
	/* only once nothing of the stage is left may the controller detach and delete */
	if (!ret && lp_stage_clear(d->pool, d->cfg.nodeid, req->volume_id, &st))
		ret = lp_fail_call(ctx, &st);
	lp_stage_free(rec);
	free(dev);
	free(img);
	free(staging);
	lp_inflight_end(d->inflight, key);
	return ret;
}

void lp_register_node_stage(struct lp_driver *d, struct csi_server *s)
{
	csi_server_handle(s, CSI_METHOD(Node, NodeStageVolume), node_stage, d);
	csi_server_handle(s, CSI_METHOD(Node, NodeUnstageVolume), node_unstage, d);
}
