/*
 * identity: the Identity service (GetPluginInfo, GetPluginCapabilities, Probe), which every
 * mode serves.
 */
#include "loopplugin/driver_int.h"

static int get_plugin_info(struct csi_call_ctx *ctx, const ProtobufCMessage *req,
			   ProtobufCMessage *resp, void *arg)
{
	(void)req;
	struct lp_driver *d = arg;
	Csi__V1__GetPluginInfoResponse *r = (Csi__V1__GetPluginInfoResponse *)resp;
	r->name = (char *)d->cfg.drivername;
	r->vendor_version = (char *)d->cfg.version;
	(void)ctx;
	return 0;
}

static void add_plugin_service(struct csi_arena *a, ProtobufCMessage *resp, int type)
{
	Csi__V1__PluginCapability *c = csi_msg_new(a, &csi__v1__plugin_capability__descriptor);
	c->type_case = CSI__V1__PLUGIN_CAPABILITY__TYPE_SERVICE;
	c->service = csi_msg_new(a, &csi__v1__plugin_capability__service__descriptor);
	c->service->type = type;
	csi_repeated_add(a, resp, "capabilities", c);
}

static int get_plugin_capabilities(struct csi_call_ctx *ctx, const ProtobufCMessage *req,
				   ProtobufCMessage *resp, void *arg)
{
	(void)req;
	struct lp_driver *d = arg;
	struct csi_arena *a = csi_ctx_arena(ctx);
	if (d->controller) {
		add_plugin_service(a, resp,
				   CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__CONTROLLER_SERVICE);
		add_plugin_service(a, resp,
				   CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__GROUP_CONTROLLER_SERVICE);
		add_plugin_service(a, resp,
				   CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__SNAPSHOT_METADATA_SERVICE);
		/* snapshots live in the pool, reachable from its zone only, as its volumes */
		add_plugin_service(
			a, resp,
			CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__SNAPSHOT_ACCESSIBILITY_CONSTRAINTS);
	}
	add_plugin_service(a, resp,
			   CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__VOLUME_ACCESSIBILITY_CONSTRAINTS);
	Csi__V1__PluginCapability *c = csi_msg_new(a, &csi__v1__plugin_capability__descriptor);
	c->type_case = CSI__V1__PLUGIN_CAPABILITY__TYPE_VOLUME_EXPANSION;
	c->volume_expansion =
		csi_msg_new(a, &csi__v1__plugin_capability__volume_expansion__descriptor);
	c->volume_expansion->type = CSI__V1__PLUGIN_CAPABILITY__VOLUME_EXPANSION__TYPE__ONLINE;
	csi_repeated_add(a, resp, "capabilities", c);
	return 0;
}

static int probe(struct csi_call_ctx *ctx, const ProtobufCMessage *req, ProtobufCMessage *resp,
		 void *arg)
{
	(void)req;
	struct lp_driver *d = arg;
	struct lp_status st;
	if (lp_pool_probe(d->pool, &st))
		return lp_fail_call(ctx, &st);
	Csi__V1__ProbeResponse *r = (Csi__V1__ProbeResponse *)resp;
	r->ready = csi_msg_new(csi_ctx_arena(ctx), &google__protobuf__bool_value__descriptor);
	r->ready->value = 1;
	return 0;
}

void lp_register_identity(struct lp_driver *d, struct csi_server *s)
{
	csi_server_handle(s, CSI_METHOD(Identity, GetPluginInfo), get_plugin_info, d);
	csi_server_handle(s, CSI_METHOD(Identity, GetPluginCapabilities), get_plugin_capabilities, d);
	csi_server_handle(s, CSI_METHOD(Identity, Probe), probe, d);
}
