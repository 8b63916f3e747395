/*
 * controller_modify: ControllerModifyVolume and the mutable parameters CreateVolume takes too.
 *
 * One parameter is mutable: type=thin|thick, the volume's allocation. thin -> thick allocates
 * the whole image at once (posix_fallocate keeps the data), so that later writes can no longer
 * fail for want of room in the pool; thick -> thin only records the volume as thin: the blocks
 * stay allocated, and growth (ControllerExpandVolume) is sparse from then on. Punching holes
 * into an image whose filesystem may be mounted could lose a write that races the scan, so the
 * driver never does. The type is kept in the volume's metadata, which ControllerModifyVolume
 * changes under the volume's in-flight key; asking for the type a volume has is a no-op.
 *
 * An empty mutable_parameters map asks for no change: the volume is looked up (NOT_FOUND when
 * unknown) and the call succeeds. The spec marks the field REQUIRED, but a VolumeAttributesClass
 * with no parameters is valid in Kubernetes and csi-sanity's default run (no
 * --csi.testvolumemutableparameters) modifies volumes with an empty map and expects success.
 */
#include "loopplugin/driver_int.h"

#include <stdio.h>
#include <string.h>

#include "base/log.h"

int lp_parse_mutable(const char *what, size_t n, void *entries, int *thick,
		     struct lp_status *st)
{
	struct csi_map_entry **e = entries;
	*thick = -1;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(e[i]->key, "type") != 0)
			return lp_fail(st, LP_INVALID_ARGUMENT,
				       "%s: unknown mutable parameter %s (known: type=thin|thick)",
				       what, e[i]->key);
		if (strcmp(e[i]->value, "thick") == 0)
			*thick = 1;
		else if (strcmp(e[i]->value, "thin") == 0)
			*thick = 0;
		else
			return lp_fail(st, LP_INVALID_ARGUMENT,
				       "%s: mutable parameter type=%s, expected thin or thick", what,
				       e[i]->value);
	}
	return 0;
}

static int modify_volume(struct csi_call_ctx *ctx, const ProtobufCMessage *reqm,
			 ProtobufCMessage *resp, void *arg)
{
	(void)resp;
	struct lp_driver *d = arg;
	const Csi__V1__ControllerModifyVolumeRequest *req =
		(const Csi__V1__ControllerModifyVolumeRequest *)reqm;
	if (lp_empty(req->volume_id))
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT,
				     "ControllerModifyVolume: volume_id is missing");
	char what[300];
	snprintf(what, sizeof(what), "volume %.200s", req->volume_id);
	struct lp_status st;
	int thick;
	if (lp_parse_mutable(what, req->n_mutable_parameters, req->mutable_parameters, &thick,
			     &st))
		return lp_fail_call(ctx, &st);
	char key[200];
	if (!lp_op_begin(d, 'c', req->volume_id, key, sizeof(key)))
		return lp_op_busy(ctx, req->volume_id);
	struct lp_volume *v = NULL;
	int ret = 0;
	if (lp_volume_load(d->pool, req->volume_id, &v, &st))
		ret = lp_fail_call(ctx, &st);
	else if (thick >= 0 && v->thick != (thick == 1)) {
		if (lp_volume_set_thick(d->pool, v, thick == 1, &st))
			ret = lp_fail_call(ctx, &st);
		else
			KLOG_I("Modified volume volume=%s type=%s", LOGQ(v->id),
			       thick == 1 ? "thick" : "thin");
	}
	lp_volume_free(v);
	lp_inflight_end(d->inflight, key);
	return ret;
}

void lp_register_controller_modify(struct lp_driver *d, struct csi_server *s)
{
	csi_server_handle(s, CSI_METHOD(Controller, ControllerModifyVolume), modify_volume, d);
}
