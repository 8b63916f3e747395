/*
 * node: the Node RPCs about a volume in use and about the node itself: NodeGetVolumeStats,
 * NodeExpandVolume, NodeGetInfo, NodeGetCapabilities. A volume's health is NodeGetVolumeHealth's
 * (health_rpc.c) since CSI v1.13 took the condition out of the stats.
 */
#include "loopplugin/driver_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "base/log.h"
#include "loopplugin/fs.h"
#include "loopplugin/loopdev.h"
#include "loopplugin/mount.h"

static void add_usage(struct csi_arena *a, ProtobufCMessage *resp, int unit, int64_t total,
		      int64_t used, int64_t avail)
{
	Csi__V1__VolumeUsage *u = csi_msg_new(a, &csi__v1__volume_usage__descriptor);
	u->unit = unit;
	u->total = total;
	u->used = used;
	u->available = avail;
	csi_repeated_add(a, resp, "usage", u);
}

static int node_get_volume_stats(struct csi_call_ctx *ctx, const ProtobufCMessage *reqm,
				 ProtobufCMessage *resp, void *arg)
{
	struct lp_driver *d = arg;
	const Csi__V1__NodeGetVolumeStatsRequest *req =
		(const Csi__V1__NodeGetVolumeStatsRequest *)reqm;
	if (lp_empty(req->volume_id))
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT,
				     "NodeGetVolumeStats: volume_id is missing");
	if (lp_empty(req->volume_path))
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT, "volume %s: volume_path is missing",
				     req->volume_id);
	struct lp_status st;
	struct lp_volume *v;
	if (lp_volume_load(d->pool, req->volume_id, &v, &st))
		return lp_fail_call(ctx, &st);
	int ret = 0;
	struct csi_arena *a = csi_ctx_arena(ctx);
	char *path = lp_canon_path(req->volume_path);
	struct stat sb;
	struct statvfs sv;
	if (stat(path, &sb) < 0) {
		ret = csi_ctx_error(ctx, LP_NOT_FOUND, "volume %s: path %s: %s", v->id, path,
				    strerror(errno));
	} else if (v->block) {
		char *img = lp_volume_image(d->pool, v->id), *dev = NULL;
		int64_t size = lp_loop_find(img, &dev) == 1 ? lp_blockdev_size(dev) : -1;
		add_usage(a, resp, CSI__V1__VOLUME_USAGE__UNIT__BYTES, size < 0 ? v->size : size,
			  0, 0);
		free(img);
		free(dev);
	} else if (statvfs(path, &sv) < 0) {
		ret = csi_ctx_error(ctx, LP_INTERNAL, "volume %s: statvfs %s: %s", v->id, path,
				    strerror(errno));
	} else {
		int64_t bs = (int64_t)sv.f_frsize;
		add_usage(a, resp, CSI__V1__VOLUME_USAGE__UNIT__BYTES, (int64_t)sv.f_blocks * bs,
			  (int64_t)(sv.f_blocks - sv.f_bfree) * bs, (int64_t)sv.f_bavail * bs);
		add_usage(a, resp, CSI__V1__VOLUME_USAGE__UNIT__INODES, (int64_t)sv.f_files,
			  (int64_t)(sv.f_files - sv.f_ffree), (int64_t)sv.f_favail);
	}
	free(path);
	lp_volume_free(v);
	return ret;
}

static int node_expand(struct csi_call_ctx *ctx, const ProtobufCMessage *reqm,
		       ProtobufCMessage *resp, void *arg)
{
	struct lp_driver *d = arg;
	const Csi__V1__NodeExpandVolumeRequest *req = (const Csi__V1__NodeExpandVolumeRequest *)reqm;
	if (lp_empty(req->volume_id))
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT,
				     "NodeExpandVolume: volume_id is missing");
	if (lp_empty(req->volume_path))
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT, "volume %s: volume_path is missing",
				     req->volume_id);
	struct lp_status st;
	struct lp_volume *v;
	if (lp_volume_load(d->pool, req->volume_id, &v, &st))
		return lp_fail_call(ctx, &st);
	char key[200];
	if (!lp_op_begin(d, 'n', req->volume_id, key, sizeof(key))) {
		lp_volume_free(v);
		return lp_op_busy(ctx, req->volume_id);
	}
	int ret = 0;
	char *path = lp_canon_path(req->volume_path);
	char *img = lp_volume_image(d->pool, v->id), *dev = NULL;
	struct stat sb;
	if (stat(path, &sb) < 0) {
		ret = csi_ctx_error(ctx, LP_NOT_FOUND, "volume %s: path %s: %s", v->id, path,
				    strerror(errno));
		goto out;
	}
	if (lp_loop_find(img, &dev) != 1) {
		ret = csi_ctx_error(ctx, LP_FAILED_PRECONDITION,
				    "volume %s is not staged on node %s", v->id, d->cfg.nodeid);
		goto out;
	}
	if (lp_loop_refresh_size(v->id, dev, &st)) {
		ret = lp_fail_call(ctx, &st);
		goto out;
	}
	int64_t size = lp_blockdev_size(dev);
	if (!v->block) {
		struct lp_mount m;
		if (lp_mount_find(path, &m) != 1) {
			ret = csi_ctx_error(ctx, LP_FAILED_PRECONDITION,
					    "volume %s is not mounted at %s", v->id, path);
			goto out;
		}
		long long fs = strcmp(m.fstype, "xfs") == 0 ? -1 : lp_ext4_size(dev);
		/* ext4 already as large as the device: nothing to do (a repeated call) */
		if ((fs < 0 || size - fs >= MiB) &&
		    lp_fs_grow(v->id, dev, path, m.fstype, &st))
			ret = lp_fail_call(ctx, &st);
		lp_mount_release(&m);
		if (ret)
			goto out;
	}
	((Csi__V1__NodeExpandVolumeResponse *)resp)->capacity_bytes = size;
	KLOG_I("Expanded volume on node volume=%s device=%s size=%lld", LOGQ(v->id), LOGQ(dev),
	       (long long)size);
out:
	free(path);
	free(img);
	free(dev);
	lp_volume_free(v);
	lp_inflight_end(d->inflight, key);
	return ret;
}

static int node_get_info(struct csi_call_ctx *ctx, const ProtobufCMessage *req,
			 ProtobufCMessage *resp, void *arg)
{
	(void)req;
	struct lp_driver *d = arg;
	Csi__V1__NodeGetInfoResponse *r = (Csi__V1__NodeGetInfoResponse *)resp;
	r->node_id = (char *)d->cfg.nodeid;
	r->max_volumes_per_node = d->cfg.attach_limit > 0 ? d->cfg.attach_limit : 0;
	r->accessible_topology = lp_csi_topology(csi_ctx_arena(ctx), d);
	return 0;
}

static int node_get_capabilities(struct csi_call_ctx *ctx, const ProtobufCMessage *req,
				 ProtobufCMessage *resp, void *arg)
{
	(void)req;
	(void)arg;
	static const int types[] = {
		CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__STAGE_UNSTAGE_VOLUME,
		CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__GET_VOLUME_STATS,
		CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__EXPAND_VOLUME,
		CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__SINGLE_NODE_MULTI_WRITER,
		CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__GET_VOLUME_HEALTH,
		CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__GET_STORAGE_HEALTH,
	};
	struct csi_arena *a = csi_ctx_arena(ctx);
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		Csi__V1__NodeServiceCapability *c =
			csi_msg_new(a, &csi__v1__node_service_capability__descriptor);
		c->type_case = CSI__V1__NODE_SERVICE_CAPABILITY__TYPE_RPC;
		c->rpc = csi_msg_new(a, &csi__v1__node_service_capability__rpc__descriptor);
		c->rpc->type = types[i];
		csi_repeated_add(a, resp, "capabilities", c);
	}
	return 0;
}

void lp_register_node(struct lp_driver *d, struct csi_server *s)
{
	csi_server_handle(s, CSI_METHOD(Node, NodeGetVolumeStats), node_get_volume_stats, d);
	csi_server_handle(s, CSI_METHOD(Node, NodeExpandVolume), node_expand, d);
	csi_server_handle(s, CSI_METHOD(Node, NodeGetInfo), node_get_info, d);
	csi_server_handle(s, CSI_METHOD(Node, NodeGetCapabilities), node_get_capabilities, d);
}
