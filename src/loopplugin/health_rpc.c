/*
 * health_rpc: the CSI v1.13 health RPCs (alpha): ControllerGetVolumeHealth and
 * ControllerListVolumeHealth (the controller's view: the image and, where nothing uses the
 * volume, its file system), NodeGetVolumeHealth (the node's view: the image, the loop device,
 * the mounts) and NodeGetStorageHealth (the pool). health.h has the rules, health_probe.c the
 * observing; a volume with nothing wrong answers an empty list of conditions.
 *
 * The calls only look: they take no in-flight key (a health probe never makes a stage or a
 * snapshot wait) and change nothing on the system or in the pool.
 */
#include "loopplugin/driver_int.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "loopplugin/health.h"

static Csi__V1__VolumeHealth *health_msg(struct csi_arena *a, const char *id,
					 const struct lp_volume_facts *f)
{
	struct lp_health_entry e[LP_HEALTH_MAX];
	size_t n = lp_volume_health(f, e);
	Csi__V1__VolumeHealth *h = csi_msg_new(a, &csi__v1__volume_health__descriptor);
	h->volume_id = csi_arena_strdup(a, id);
	for (size_t i = 0; i < n; i++) {
		Csi__V1__VolumeHealth__VolumeHealthEntry *m =
			csi_msg_new(a, &csi__v1__volume_health__volume_health_entry__descriptor);
		m->status = e[i].status;
		m->reason = csi_arena_strdup(a, e[i].reason);
		m->message = csi_arena_strdup(a, e[i].message);
		csi_repeated_add(a, &h->base, "health_statuses", m);
	}
	if (n)
		KLOG_V(2, "Volume is abnormal volume=%s reason=%s conditions=%zu", LOGQ(id),
		       LOGQ(e[0].reason), n);
	return h;
}

static int controller_get_volume_health(struct csi_call_ctx *ctx, const ProtobufCMessage *reqm,
					ProtobufCMessage *resp, void *arg)
{
	struct lp_driver *d = arg;
	const Csi__V1__ControllerGetVolumeHealthRequest *req =
		(const Csi__V1__ControllerGetVolumeHealthRequest *)reqm;
	if (lp_empty(req->volume_id))
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT,
				     "ControllerGetVolumeHealth: volume_id is missing");
	struct lp_status st;
	struct lp_volume *v;
	if (lp_volume_load(d->pool, req->volume_id, &v, &st))
		return lp_fail_call(ctx, &st);
	struct lp_volume_facts f;
	char detail[300];
	lp_probe_volume(d, v, &f, detail, sizeof(detail));
	((Csi__V1__ControllerGetVolumeHealthResponse *)resp)->volume_health =
		health_msg(csi_ctx_arena(ctx), v->id, &f);
	lp_volume_free(v);
	return 0;
}

/*
 * Only abnormal volumes are listed. A page ends after max_entries of them; its token names the
 * last volume listed (checks.c: lp_parse_token), so the next page goes on after it whatever was
 * created or deleted in between, and volumes found healthy are not looked at twice.
 */
static int controller_list_volume_health(struct csi_call_ctx *ctx,
					 const ProtobufCMessage *reqm, ProtobufCMessage *resp,
					 void *arg)
{
	struct lp_driver *d = arg;
	const Csi__V1__ControllerListVolumeHealthRequest *req =
		(const Csi__V1__ControllerListVolumeHealthRequest *)reqm;
	Csi__V1__ControllerListVolumeHealthResponse *r =
		(Csi__V1__ControllerListVolumeHealthResponse *)resp;
	struct csi_arena *a = csi_ctx_arena(ctx);
	if (req->max_entries < 0)
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT,
				     "ControllerListVolumeHealth: negative max_entries");
	int64_t tc = INT64_MIN;
	const char *tid = "";
	if (!lp_empty(req->starting_token) && lp_parse_token(req->starting_token, &tc, &tid))
		return csi_ctx_error(ctx, LP_ABORTED,
				     "ControllerListVolumeHealth: invalid starting_token %s",
				     req->starting_token);
	struct lp_status st;
	char **ids;
	int64_t *created;
	size_t n, count = 0, last = 0;
	if (lp_volume_list(d->pool, &ids, &created, &n, &st))
		return lp_fail_call(ctx, &st);
	for (size_t i = 0; i < n; i++) {
		struct lp_volume *v;
		if (!lp_after_token(created[i], ids[i], tc, tid) ||
		    lp_volume_load(d->pool, ids[i], &v, NULL))
			continue; /* before the page, or deleted meanwhile */
		struct lp_volume_facts f;
		char detail[300];
		lp_probe_volume(d, v, &f, detail, sizeof(detail));
		Csi__V1__VolumeHealth *h = health_msg(a, v->id, &f);
		lp_volume_free(v);
		if (!h->n_health_statuses)
			continue;
		if (req->max_entries && count == (size_t)req->max_entries) {
			r->next_token = csi_arena_printf(a, "%lld:%s", (long long)created[last],
							 ids[last]);
			break;
		}
		csi_repeated_add(a, resp, "entries", h);
		last = i;
		count++;
	}
	lp_free_strings(ids, n);
	free(created);
	return 0;
}

static int node_get_volume_health(struct csi_call_ctx *ctx, const ProtobufCMessage *reqm,
				  ProtobufCMessage *resp, void *arg)
{
	struct lp_driver *d = arg;
	const Csi__V1__NodeGetVolumeHealthRequest *req =
		(const Csi__V1__NodeGetVolumeHealthRequest *)reqm;
	if (lp_empty(req->volume_id))
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT,
				     "NodeGetVolumeHealth: volume_id is missing");
	const char *paths[2] = { req->volume_publish_path, req->staging_target_path };
	const char *names[2] = { "volume_publish_path", "staging_target_path" };
	for (int i = 0; i < 2; i++)
		if (!lp_empty(paths[i]) && paths[i][0] != '/')
			return csi_ctx_error(ctx, LP_INVALID_ARGUMENT,
					     "volume %s: %s %s is not an absolute path",
					     req->volume_id, names[i], paths[i]);
	struct lp_status st;
	struct lp_volume *v;
	if (lp_volume_load(d->pool, req->volume_id, &v, &st))
		return lp_fail_call(ctx, &st);
	struct lp_volume_facts f;
	char detail[300], *dev = NULL;
	lp_probe_volume_node(d, v, req->staging_target_path, req->volume_publish_path, &f, &dev,
			     detail, sizeof(detail));
	((Csi__V1__NodeGetVolumeHealthResponse *)resp)->volume_health =
		health_msg(csi_ctx_arena(ctx), v->id, &f);
	free(dev);
	lp_volume_free(v);
	return 0;
}

static int node_get_storage_health(struct csi_call_ctx *ctx, const ProtobufCMessage *reqm,
				   ProtobufCMessage *resp, void *arg)
{
	(void)reqm;
	struct lp_driver *d = arg;
	struct csi_arena *a = csi_ctx_arena(ctx);
	struct lp_pool_facts f;
	struct lp_health_entry e[LP_HEALTH_MAX];
	lp_probe_pool(d, &f);
	size_t n = lp_pool_health(lp_pool_dir(d->pool), &f, e);
	for (size_t i = 0; i < n; i++) {
		Csi__V1__NodeGetStorageHealthResponse__StorageBackendHealth *b = csi_msg_new(
			a, &csi__v1__node_get_storage_health_response__storage_backend_health__descriptor);
		b->status = e[i].status;
		b->reason = csi_arena_strdup(a, e[i].reason);
		b->message = csi_arena_strdup(a, e[i].message);
		csi_repeated_add(a, resp, "backend_health", b);
	}
	if (n)
		KLOG_V(2, "Pool is abnormal pool=%s reason=%s", LOGQ(lp_pool_dir(d->pool)),
		       LOGQ(e[0].reason));
	return 0;
}

void lp_register_controller_health(struct lp_driver *d, struct csi_server *s)
{
	csi_server_handle(s, CSI_METHOD(Controller, ControllerGetVolumeHealth),
			  controller_get_volume_health, d);
	csi_server_handle(s, CSI_METHOD(Controller, ControllerListVolumeHealth),
			  controller_list_volume_health, d);
}

void lp_register_node_health(struct lp_driver *d, struct csi_server *s)
{
	csi_server_handle(s, CSI_METHOD(Node, NodeGetVolumeHealth), node_get_volume_health, d);
	csi_server_handle(s, CSI_METHOD(Node, NodeGetStorageHealth), node_get_storage_health, d);
}
