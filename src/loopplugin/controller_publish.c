/*
 * controller_publish: which node a volume is published to, and what the controller reports:
 * ControllerPublishVolume / ControllerUnpublishVolume (device names, attach limit, read-only),
 * ListVolumes and ControllerGetVolume (published nodes, condition), GetCapacity,
 * ControllerGetCapabilities.
 */
#include "loopplugin/driver_int.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/xalloc.h"

static void add_publish_context(struct csi_arena *a, ProtobufCMessage *resp,
				const struct lp_attachment *att)
{
	csi_map_add(a, resp, "publish_context", "device", att->device);
	csi_map_add(a, resp, "publish_context", "readonly", att->readonly ? "true" : "false");
}

static int controller_publish(struct csi_call_ctx *ctx, const ProtobufCMessage *reqm,
			      ProtobufCMessage *resp, void *arg)
{
	struct lp_driver *d = arg;
	const Csi__V1__ControllerPublishVolumeRequest *req =
		(const Csi__V1__ControllerPublishVolumeRequest *)reqm;
	struct lp_status st;
	if (lp_empty(req->volume_id))
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT,
				     "ControllerPublishVolume: volume_id is missing");
	if (lp_empty(req->node_id))
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT,
				     "volume %s: ControllerPublishVolume: node_id is missing",
				     req->volume_id);
	char what[300];
	snprintf(what, sizeof(what), "volume %.200s", req->volume_id);
	struct capset cs;
	if (lp_check_cap(d, what, req->volume_capability, &cs, &st))
		return lp_fail_call(ctx, &st);
	char key[200];
	if (!lp_op_begin(d, 'c', req->volume_id, key, sizeof(key)))
		return lp_op_busy(ctx, req->volume_id);
	int ret = 0;
	struct lp_volume *v = NULL;
	lp_pool_lock(d->pool);
	if (lp_volume_load(d->pool, req->volume_id, &v, &st)) {
		ret = lp_fail_call(ctx, &st);
		goto out;
	}
	if (!lp_pool_node_exists(d->pool, req->node_id)) {
		ret = csi_ctx_error(ctx, LP_NOT_FOUND,
				    "volume %s: node %s is not known to pool %s (no node service "
				    "has started with that --nodeid)",
				    v->id, req->node_id, lp_pool_dir(d->pool));
		goto out;
	}
	if (lp_caps_fit_volume(v, &cs, &st)) {
		ret = lp_fail_call(ctx, &st);
		goto out;
	}
	bool ro = req->readonly || lp_mode_readonly(cs.mode);
	struct lp_attachment *a = lp_volume_attachment(v, req->node_id);
	if (a) {
		if (a->readonly != ro)
			ret = csi_ctx_error(ctx, LP_ALREADY_EXISTS,
					    "volume %s is already published to node %s %s",
					    v->id, req->node_id,
					    a->readonly ? "read-only" : "read-write");
		else
			add_publish_context(csi_ctx_arena(ctx), resp, a);
		goto out;
	}
	bool multi = cs.mode == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_READER_ONLY;
	for (size_t i = 0; i < v->natt; i++) {
		if (!multi || !v->att[i].readonly) {
			ret = csi_ctx_error(ctx, LP_FAILED_PRECONDITION,
					    "volume %s is already published to node %s; access "
					    "mode %s allows one node at a time",
					    v->id, v->att[i].node, lp_mode_name(cs.mode));
			goto out;
		}
	}
	if (lp_volume_attach(d->pool, v, req->node_id, ro, d->cfg.attach_limit, &st)) {
		ret = lp_fail_call(ctx, &st);
		goto out;
	}
	a = lp_volume_attachment(v, req->node_id);
	KLOG_I("Published volume volume=%s node=%s device=%s readonly=%d", LOGQ(v->id),
	       LOGQ(req->node_id), LOGQ(a->device), a->readonly);
	add_publish_context(csi_ctx_arena(ctx), resp, a);
out:
	lp_pool_unlock(d->pool);
	lp_volume_free(v);
	lp_inflight_end(d->inflight, key);
	return ret;
}

static int controller_unpublish(struct csi_call_ctx *ctx, const ProtobufCMessage *reqm,
				ProtobufCMessage *resp, void *arg)
{
	(void)resp;
	struct lp_driver *d = arg;
	const Csi__V1__ControllerUnpublishVolumeRequest *req =
		(const Csi__V1__ControllerUnpublishVolumeRequest *)reqm;
	if (lp_empty(req->volume_id))
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT,
				     "ControllerUnpublishVolume: volume_id is missing");
	char key[200];
	if (!lp_op_begin(d, 'c', req->volume_id, key, sizeof(key)))
		return lp_op_busy(ctx, req->volume_id);
	struct lp_status st;
	struct lp_volume *v = NULL;
	int ret = 0;
	lp_pool_lock(d->pool);
	if (lp_volume_load(d->pool, req->volume_id, &v, &st) == 0) {
		/* an empty node ID means every node */
		while (v->natt) {
			const char *node = lp_empty(req->node_id) ? v->att[0].node : req->node_id;
			struct lp_attachment *a = lp_volume_attachment(v, node);
			if (!a)
				break;
			struct lp_stage *sr = NULL;
			if (d->cfg.detach_staged) {
				if (lp_stage_load(d->pool, node, v->id, &sr) == 1)
					KLOG_W("Detaching a volume its node still has staged "
					       "(--detach-staged: the node is fenced off it) volume=%s "
					       "node=%s", LOGQ(v->id), LOGQ(node));
				lp_stage_free(sr);
			} else if (lp_in_use_on_nodes(ctx, d, v->id, node, &ret)) {
				break;
			}
			char *n = xstrdup(node), *dev = xstrdup(a->device);
			if (lp_volume_detach(d->pool, v, n, &st))
				ret = lp_fail_call(ctx, &st);
			else
				KLOG_I("Unpublished volume volume=%s node=%s device=%s",
				       LOGQ(v->id), LOGQ(n), LOGQ(dev));
			free(n);
			free(dev);
			if (ret || !lp_empty(req->node_id))
				break;
		}
	} else if (st.code != LP_NOT_FOUND) {
		ret = lp_fail_call(ctx, &st);
	}
	lp_pool_unlock(d->pool);
	lp_volume_free(v);
	lp_inflight_end(d->inflight, key);
	return ret;
}

static int list_volumes(struct csi_call_ctx *ctx, const ProtobufCMessage *reqm,
			ProtobufCMessage *resp, void *arg)
{
	struct lp_driver *d = arg;
	const Csi__V1__ListVolumesRequest *req = (const Csi__V1__ListVolumesRequest *)reqm;
	Csi__V1__ListVolumesResponse *r = (Csi__V1__ListVolumesResponse *)resp;
	struct csi_arena *a = csi_ctx_arena(ctx);
	if (req->max_entries < 0)
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT, "ListVolumes: negative max_entries");
	int64_t tc = INT64_MIN;
	const char *tid = "";
	if (!lp_empty(req->starting_token) && lp_parse_token(req->starting_token, &tc, &tid))
		return csi_ctx_error(ctx, LP_ABORTED, "ListVolumes: invalid starting_token %s",
				     req->starting_token);
	struct lp_status st;
	char **ids;
	int64_t *created;
	size_t n;
	if (lp_volume_list(d->pool, &ids, &created, &n, &st))
		return lp_fail_call(ctx, &st);
	size_t count = 0, last = 0;
	for (size_t i = 0; i < n; i++) {
		if (!lp_after_token(created[i], ids[i], tc, tid))
			continue;
		struct lp_volume *v;
		if (lp_volume_load(d->pool, ids[i], &v, NULL))
			continue; /* deleted meanwhile */
		if (req->max_entries && count == (size_t)req->max_entries) {
			r->next_token = csi_arena_printf(a, "%lld:%s", (long long)created[last],
							 ids[last]);
			lp_volume_free(v);
			break;
		}
		last = i;
		Csi__V1__ListVolumesResponse__Entry *e =
			csi_msg_new(a, &csi__v1__list_volumes_response__entry__descriptor);
		e->volume = lp_csi_volume(a, d, v);
		e->status = csi_msg_new(a, &csi__v1__list_volumes_response__volume_status__descriptor);
		for (size_t k = 0; k < v->natt; k++)
			csi_repeated_add(a, &e->status->base, "published_node_ids",
					 csi_arena_strdup(a, v->att[k].node));
		csi_repeated_add(a, resp, "entries", e);
		count++;
		lp_volume_free(v);
	}
	lp_free_strings(ids, n);
	free(created);
	return 0;
}

static int controller_get_volume(struct csi_call_ctx *ctx, const ProtobufCMessage *reqm,
				 ProtobufCMessage *resp, void *arg)
{
	struct lp_driver *d = arg;
	const Csi__V1__ControllerGetVolumeRequest *req =
		(const Csi__V1__ControllerGetVolumeRequest *)reqm;
	if (lp_empty(req->volume_id))
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT,
				     "ControllerGetVolume: volume_id is missing");
	struct lp_status st;
	struct lp_volume *v;
	if (lp_volume_load(d->pool, req->volume_id, &v, &st))
		return lp_fail_call(ctx, &st);
	struct csi_arena *a = csi_ctx_arena(ctx);
	Csi__V1__ControllerGetVolumeResponse *r = (Csi__V1__ControllerGetVolumeResponse *)resp;
	r->volume = lp_csi_volume(a, d, v);
	r->status = csi_msg_new(a, &csi__v1__controller_get_volume_response__volume_status__descriptor);
	for (size_t k = 0; k < v->natt; k++)
		csi_repeated_add(a, &r->status->base, "published_node_ids",
				 csi_arena_strdup(a, v->att[k].node));
	lp_volume_free(v);
	return 0;
}

static int get_capacity(struct csi_call_ctx *ctx, const ProtobufCMessage *reqm,
			ProtobufCMessage *resp, void *arg)
{
	struct lp_driver *d = arg;
	const Csi__V1__GetCapacityRequest *req = (const Csi__V1__GetCapacityRequest *)reqm;
	Csi__V1__GetCapacityResponse *r = (Csi__V1__GetCapacityResponse *)resp;
	struct lp_status st;
	struct capset cs;
	bool thick;
	if (lp_parse_params("GetCapacity", req->n_parameters,
			    (Csi__V1__CreateVolumeRequest__ParametersEntry **)req->parameters, &thick,
			    &st))
		return lp_fail_call(ctx, &st);
	if (req->n_volume_capabilities &&
	    lp_check_caps_mode(d, "GetCapacity", req->volume_capabilities, req->n_volume_capabilities,
			       &cs, &st, false))
		return lp_fail_call(ctx, &st);
	const Csi__V1__Topology *t = req->accessible_topology;
	const char *z = t ? csi_map_get(t->n_segments, t->segments, LP_TOPOLOGY_KEY) : NULL;
	int64_t free_bytes = lp_pool_free_bytes(d->pool);
	if (t && t->n_segments && (!z || strcmp(z, d->cfg.zone) != 0))
		free_bytes = 0; /* not our zone: nothing available there */
	/* volumes are whole MiB */
	free_bytes = free_bytes / MiB * MiB;
	r->available_capacity = free_bytes;
	struct csi_arena *a = csi_ctx_arena(ctx);
	r->maximum_volume_size = csi_msg_new(a, &google__protobuf__int64_value__descriptor);
	r->maximum_volume_size->value =
		free_bytes < d->cfg.max_volume_size ? free_bytes : d->cfg.max_volume_size;
	r->minimum_volume_size = csi_msg_new(a, &google__protobuf__int64_value__descriptor);
	r->minimum_volume_size->value = MiB;
	return 0;
}

static int controller_get_capabilities(struct csi_call_ctx *ctx, const ProtobufCMessage *req,
				       ProtobufCMessage *resp, void *arg)
{
	(void)req;
	const struct lp_driver *d = arg;
	static const int types[] = {
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_VOLUME,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__PUBLISH_UNPUBLISH_VOLUME,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__LIST_VOLUMES,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__LIST_VOLUMES_PUBLISHED_NODES,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__GET_CAPACITY,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_SNAPSHOT,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__LIST_SNAPSHOTS,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CLONE_VOLUME,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__EXPAND_VOLUME,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__PUBLISH_READONLY,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__SINGLE_NODE_MULTI_WRITER,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__GET_VOLUME,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__MODIFY_VOLUME,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__GET_SNAPSHOT,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__GET_VOLUME_HEALTH,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__LIST_VOLUME_HEALTH,
	};
	struct csi_arena *a = csi_ctx_arena(ctx);
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		if (types[i] == CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__GET_SNAPSHOT &&
		    !d->cfg.get_snapshot_cap)
			continue;
		Csi__V1__ControllerServiceCapability *c =
			csi_msg_new(a, &csi__v1__controller_service_capability__descriptor);
		c->type_case = CSI__V1__CONTROLLER_SERVICE_CAPABILITY__TYPE_RPC;
		c->rpc = csi_msg_new(a, &csi__v1__controller_service_capability__rpc__descriptor);
		c->rpc->type = types[i];
		csi_repeated_add(a, resp, "capabilities", c);
	}
	return 0;
}

void lp_register_controller_publish(struct lp_driver *d, struct csi_server *s)
{
	csi_server_handle(s, CSI_METHOD(Controller, ControllerPublishVolume), controller_publish, d);
	csi_server_handle(s, CSI_METHOD(Controller, ControllerUnpublishVolume), controller_unpublish, d);
	csi_server_handle(s, CSI_METHOD(Controller, ListVolumes), list_volumes, d);
	csi_server_handle(s, CSI_METHOD(Controller, ControllerGetVolume), controller_get_volume, d);
	csi_server_handle(s, CSI_METHOD(Controller, GetCapacity), get_capacity, d);
	csi_server_handle(s, CSI_METHOD(Controller, ControllerGetCapabilities),
			  controller_get_capabilities, d);
}
