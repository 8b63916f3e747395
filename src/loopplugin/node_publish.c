/*
 * node_publish: NodePublishVolume (a bind mount of the staging path, or of the loop device onto
 * a file for block volumes) and NodeUnpublishVolume. A volume published in
 * SINGLE_NODE_SINGLE_WRITER mode (a ReadWriteOncePod claim, from a kubelet that read the
 * SINGLE_NODE_MULTI_WRITER node capability) is published at one target path at a time.
 */
#include "loopplugin/driver_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "base/log.h"
#include "base/xalloc.h"
#include "loopplugin/loopdev.h"
#include "loopplugin/mount.h"

static int mkdir_parents(const char *path)
{
	char *d = xstrdup(path);
	for (char *s = d + 1; *s; s++) {
		if (*s == '/') {
			*s = '\0';
			mkdir(d, 0750);
			*s = '/';
		}
	}
	free(d);
	return 0;
}

/*
 * SINGLE_NODE_SINGLE_WRITER: one target path on the node (the CSI spec's second NodePublishVolume
 * table for a plugin with the SINGLE_NODE_MULTI_WRITER capability: a second target is
 * FAILED_PRECONDITION, the same target with the same arguments is idempotent and checked before
 * this). The other targets are read from mountinfo: mounts of the volume's filesystem (or, for a
 * block volume, bind mounts of its loop device node) at any path but the staging path and this
 * target. Only the request's mode is known: a publish in another mode left no record.
 */
static int single_writer_check(struct csi_call_ctx *ctx, const char *id, int mode, unsigned ma,
			       unsigned mi, const char *root, const char *staging,
			       const char *target)
{
	if (mode != CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_SINGLE_WRITER)
		return 0;
	const char *skip[2] = { target, staging };
	char other[4096];
	int found = lp_mount_find_other(ma, mi, root, skip, staging ? 2 : 1, other, sizeof(other));
	if (found < 0)
		return csi_ctx_error(ctx, LP_INTERNAL,
				     "volume %s: cannot read /proc/self/mountinfo to find its other "
				     "targets", id);
	if (found == 0)
		return 0;
	return csi_ctx_error(ctx, LP_FAILED_PRECONDITION,
			     "volume %s is already published at %s; its access mode "
			     "SINGLE_NODE_SINGLE_WRITER allows one target path on the node "
			     "(NodeUnpublishVolume it there first)", id, other);
}

/* Is target already what this publish asks for? 1 yes, 0 nothing there, <0 conflict. */
static int published_check(const char *target, const char *want_root, unsigned ma, unsigned mi,
			   bool ro)
{
	struct lp_mount m;
	int found = lp_mount_find(target, &m);
	if (found <= 0)
		return 0;
	bool same = m.major == ma && m.minor == mi && m.readonly == ro &&
		    (!want_root || strcmp(m.root, want_root) == 0);
	lp_mount_release(&m);
	return same ? 1 : -1;
}

static int node_publish(struct csi_call_ctx *ctx, const ProtobufCMessage *reqm,
			ProtobufCMessage *resp, void *arg)
{
	(void)resp;
	struct lp_driver *d = arg;
	const Csi__V1__NodePublishVolumeRequest *req =
		(const Csi__V1__NodePublishVolumeRequest *)reqm;
	if (lp_empty(req->volume_id))
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT,
				     "NodePublishVolume: volume_id is missing");
	if (lp_empty(req->target_path))
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT, "volume %s: target_path is missing",
				     req->volume_id);
	struct lp_status st;
	struct capset cs;
	char what[300];
	snprintf(what, sizeof(what), "volume %.200s", req->volume_id);
	if (lp_check_cap(d, what, req->volume_capability, &cs, &st))
		return lp_fail_call(ctx, &st);
	if (lp_empty(req->staging_target_path))
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT,
				     "volume %s: staging_target_path is missing (this driver "
				     "stages volumes)",
				     req->volume_id);
	char key[200];
	if (!lp_op_begin(d, 'n', req->volume_id, key, sizeof(key)))
		return lp_op_busy(ctx, req->volume_id);
	int ret = 0;
	struct lp_volume *v = NULL;
	char *img = NULL, *dev = NULL;
	char *target = lp_canon_path(req->target_path), *staging = lp_canon_path(req->staging_target_path);
	bool ro = req->readonly || lp_mode_readonly(cs.mode);
	if (lp_volume_load(d->pool, req->volume_id, &v, &st) || lp_caps_fit_volume(v, &cs, &st)) {
		ret = lp_fail_call(ctx, &st);
		goto out;
	}
	img = lp_volume_image(d->pool, v->id);
	if (lp_loop_find(img, &dev) != 1) {
		ret = csi_ctx_error(ctx, LP_FAILED_PRECONDITION,
				    "volume %s is not staged on node %s (NodeStageVolume first)",
				    v->id, d->cfg.nodeid);
		goto out;
	}
	if (cs.block) {
		struct stat sb;
		char root[80];
		const char *base = strrchr(dev, '/');
		snprintf(root, sizeof(root), "/%s", base ? base + 1 : dev);
		if (stat("/dev", &sb) < 0) {
			ret = csi_ctx_error(ctx, LP_INTERNAL, "volume %s: stat /dev: %s", v->id,
					    strerror(errno));
			goto out;
		}
		int c = published_check(target, root, major(sb.st_dev), minor(sb.st_dev), ro);
		if (c < 0) {
			ret = csi_ctx_error(ctx, LP_ALREADY_EXISTS,
					    "volume %s: target %s already has another device or "
					    "access mounted",
					    v->id, target);
			goto out;
		}
		if (c == 1)
			goto out;
		if ((ret = single_writer_check(ctx, v->id, cs.mode, major(sb.st_dev), minor(sb.st_dev),
					       root, NULL, target)))
			goto out;
		mkdir_parents(target);
		int fd = open(target, O_WRONLY | O_CREAT | O_CLOEXEC, 0640);
		if (fd < 0) {
			ret = csi_ctx_error(ctx, LP_INTERNAL, "volume %s: create target %s: %s",
					    v->id, target, strerror(errno));
			goto out;
		}
		close(fd);
		if (lp_mount_bind(v->id, dev, target, ro, &st)) {
			ret = lp_fail_call(ctx, &st);
			goto out;
		}
	} else {
		struct lp_mount sm;
		if (lp_mount_find(staging, &sm) != 1) {
			ret = csi_ctx_error(ctx, LP_FAILED_PRECONDITION,
					    "volume %s is not staged at %s (NodeStageVolume first)",
					    v->id, staging);
			goto out;
		}
		unsigned ma = sm.major, mi = sm.minor;
		lp_mount_release(&sm);
		int c = published_check(target, NULL, ma, mi, ro);
		if (c < 0) {
			ret = csi_ctx_error(ctx, LP_ALREADY_EXISTS,
					    "volume %s: target %s already has another volume or "
					    "access mode mounted",
					    v->id, target);
			goto out;
		}
		if (c == 1)
			goto out;
		if ((ret = single_writer_check(ctx, v->id, cs.mode, ma, mi, NULL, staging, target)))
			goto out;
		mkdir_parents(target);
		if (mkdir(target, 0750) < 0 && errno != EEXIST) {
			ret = csi_ctx_error(ctx, LP_INTERNAL, "volume %s: create target %s: %s",
					    v->id, target, strerror(errno));
			goto out;
		}
		if (lp_mount_bind(v->id, staging, target, ro, &st)) {
			ret = lp_fail_call(ctx, &st);
			goto out;
		}
	}
	KLOG_I("Published volume volume=%s target=%s node=%s mode=%d readonly=%d", LOGQ(v->id),
	       LOGQ(target), LOGQ(d->cfg.nodeid), cs.mode, ro);
out:
	free(target);
	free(staging);
	free(img);
	free(dev);
	lp_volume_free(v);
	lp_inflight_end(d->inflight, key);
	return ret;
}

static int node_unpublish(struct csi_call_ctx *ctx, const ProtobufCMessage *reqm,
			  ProtobufCMessage *resp, void *arg)
{
	(void)resp;
	struct lp_driver *d = arg;
	const Csi__V1__NodeUnpublishVolumeRequest *req =
		(const Csi__V1__NodeUnpublishVolumeRequest *)reqm;
	if (lp_empty(req->volume_id))
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT,
				     "NodeUnpublishVolume: volume_id is missing");
	if (lp_empty(req->target_path))
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT, "volume %s: target_path is missing",
				     req->volume_id);
	int bad = lp_check_node_target(ctx, d, req->volume_id, req->target_path, "target_path");
	if (bad)
		return bad;
	char key[200];
	if (!lp_op_begin(d, 'n', req->volume_id, key, sizeof(key)))
		return lp_op_busy(ctx, req->volume_id);
	struct lp_status st;
	int ret = 0;
	char *target = lp_canon_path(req->target_path);
	char *img = lp_volume_image(d->pool, req->volume_id), *dev = NULL;
	lp_loop_find(img, &dev);
	int here = lp_target_is_volumes(target, dev);
	struct stat ts;
	if (here < 0) {
		ret = csi_ctx_error(ctx, LP_FAILED_PRECONDITION,
				    "volume %s: %s holds a mount this driver did not make for the "
				    "volume; left as it is", req->volume_id, target);
	} else if (here > 0 && lp_umount(req->volume_id, target, &st)) {
		ret = lp_fail_call(ctx, &st);
	} else if (lstat(target, &ts) == 0 && (S_ISDIR(ts.st_mode) ? rmdir(target)
				: S_ISREG(ts.st_mode) && ts.st_size == 0 ? unlink(target) : 0) < 0 &&
		   errno != ENOENT && errno != ENOTEMPTY) {
		/* only what NodePublish makes is removed: an empty directory or an empty file
		 * (a block volume's bind target); anything holding data stays */
		ret = csi_ctx_error(ctx, LP_INTERNAL, "volume %s: remove target %s: %s",
				    req->volume_id, target, strerror(errno));
	}
	free(dev);
	free(img);
	if (!ret)
		KLOG_I("Unpublished volume volume=%s target=%s node=%s", LOGQ(req->volume_id),
		       LOGQ(target), LOGQ(d->cfg.nodeid));
	free(target);
	lp_inflight_end(d->inflight, key);
	return ret;
}

void lp_register_node_publish(struct lp_driver *d, struct csi_server *s)
{
	csi_server_handle(s, CSI_METHOD(Node, NodePublishVolume), node_publish, d);
	csi_server_handle(s, CSI_METHOD(Node, NodeUnpublishVolume), node_unpublish, d);
}
