/*
 * Helpers the handlers share: finding a node's ID for the driver, reading Secrets into a CSI
 * request, merge patches that return the decoded new record, events, and gRPC error wording.
 *
 * Secrets are read from the API at each call and copied only into the request's arena, which is
 * freed (and its secret bytes with it) as soon as the call returns; they are never cached and no
 * log line carries them (the CSI layer strips csi_secret fields when it logs requests).
 */
#include "attacher/att.h"
#include "sidecar/sidecar.h"
#include "base/log.h"
#include "base/timeutil.h"
#include "base/xalloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *node_id_from_csinode(struct att_ctrl *c, const char *node, char *err, size_t errlen)
{
	struct kube_obj *o = kube_store_get(kube_informer_store(c->csinode_inf), NULL, node);
	const struct kube_csinode *cn = kube_csinode_of(o);
	char *id = NULL;

	if (!cn) {
		snprintf(err, errlen, "CSINode %s not found", node);
	} else {
		for (size_t i = 0; i < cn->ndrivers; i++) {
			if (strcmp(cn->drivers[i].name, c->o.driver) == 0 && cn->drivers[i].node_id) {
				id = xstrdup(cn->drivers[i].node_id);
				break;
			}
		}
		if (!id)
			snprintf(err, errlen, "CSINode %s does not contain driver %s", node,
				 c->o.driver);
	}
	kube_obj_unref(o);
	return id;
}

/* The Node's csi.volume.kubernetes.io/nodeid annotation: a JSON object driver -> node ID. */
static char *node_id_from_node(struct att_ctrl *c, const char *node, char *err, size_t errlen)
{
	struct kube_err e;
	json_t *obj = kube_get(c->kc, &KUBE_RES_NODES, NULL, node, &e);
	json_t *ann, *map = NULL;
	json_error_t je;
	char *id = NULL;

	if (!obj) {
		snprintf(err, errlen, "cannot read Node %s: %s", node, e.message);
		return NULL;
	}
	ann = json_object_get(json_object_get(json_object_get(obj, "metadata"), "annotations"),
			      ATT_NODE_IDS_ANNOTATION);
	if (!json_is_string(ann)) {
		snprintf(err, errlen, "node %s has no node ID for driver %s: no CSINode entry "
				      "and no %s annotation", node, c->o.driver, ATT_NODE_IDS_ANNOTATION);
	} else if (!(map = json_loads(json_string_value(ann), 0, &je)) || !json_is_object(map)) {
		snprintf(err, errlen, "malformed %s annotation on Node %s: %s",
			 ATT_NODE_IDS_ANNOTATION, node, map ? "not a JSON object" : je.text);
	} else if (!json_is_string(json_object_get(map, c->o.driver))) {
		snprintf(err, errlen, "node %s has no node ID for driver %s in its %s annotation",
			 node, c->o.driver, ATT_NODE_IDS_ANNOTATION);
	} else {
		id = xstrdup(json_string_value(json_object_get(map, c->o.driver)));
	}
	json_decref(map);
	json_decref(obj);
	return id;
}

char *att_node_id(struct att_ctrl *c, const char *node_name, const struct kube_va *va, char *err,
		  size_t errlen)
{
	char why[700], why2[700];
	char *id;

	if (!node_name || !*node_name) {
		snprintf(err, errlen, "VolumeAttachment has no spec.nodeName");
		return NULL;
	}
	id = node_id_from_csinode(c, node_name, why, sizeof(why));
	if (id)
		return id;
	/* Detach must work when the node and its CSINode are gone: the VA remembers the ID. */
	if (va && va->node_id && *va->node_id)
		return xstrdup(va->node_id);
	id = node_id_from_node(c, node_name, why2, sizeof(why2));
	if (!id)
		snprintf(err, errlen, "%s; %s", why, why2);
	return id;
}

int att_add_secrets(struct att_ctrl *c, struct csi_arena *a, ProtobufCMessage *msg,
		    const char *field, const char *ns, const char *name, char *err, size_t errlen)
{
	return sidecar_add_secrets(c->kc, a, msg, field, ns, name, err, errlen);
}

static const struct kube_kind *patched_kind(const struct kube_resource *r)
{
	return r == &KUBE_RES_PERSISTENTVOLUMES ? &KUBE_KIND_PERSISTENTVOLUME
						 : &KUBE_KIND_VOLUMEATTACHMENT;
}

struct kube_obj *att_patch(struct att_ctrl *c, const struct kube_resource *r, const char *name,
			   bool status, json_t *patch, struct kube_err *e)
{
	const struct kube_kind *kind = patched_kind(r);
	char *body = json_dumps(patch, JSON_COMPACT);
	json_t *res;
	struct kube_obj *o;
	char err[256];

	KLOG_V(5, "Patching %s %s%s: %s", kind->name, LOGQ(name), status ? "/status" : "", body);
	res = kube_patch(c->kc, r, NULL, name, status, KUBE_PATCH_MERGE, body, e);
	free(body);
	if (!res)
		return NULL;
	o = kube_decode_json(kind, res, err, sizeof(err));
	json_decref(res);
	if (!o) {
		e->code = 0;
		snprintf(e->reason, sizeof(e->reason), "Decode");
		snprintf(e->message, sizeof(e->message), "cannot decode the patched %s: %s",
			 kind->name, err);
	}
	return o;
}

int att_patch_only(struct att_ctrl *c, const struct kube_resource *r, const char *name,
		   bool status, json_t *patch, struct kube_err *e)
{
	char *body = json_dumps(patch, JSON_COMPACT);
	int rc;

	KLOG_V(5, "Patching %s %s%s: %s", patched_kind(r)->name, LOGQ(name), status ? "/status" : "",
	       body);
	rc = kube_patch_discard(c->kc, r, NULL, name, status, KUBE_PATCH_MERGE, body, e);
	free(body);
	return rc;
}

json_t *att_finalizers_json(const struct kube_obj *o, const char *drop, const char *add)
{
	json_t *arr = json_array();

	for (size_t i = 0; i < o->nfinalizers; i++) {
		if (drop && strcmp(o->finalizers[i], drop) == 0)
			continue;
		json_array_append_new(arr, json_string(o->finalizers[i]));
	}
	if (add)
		json_array_append_new(arr, json_string(add));
	if (json_array_size(arr) == 0) {
		json_decref(arr);
		return json_null(); /* merge patch: remove the field */
	}
	return arr;
}

void att_grpc_error(const struct csi_status *st, char *out, size_t outlen)
{
	snprintf(out, outlen, "rpc error: code = %s desc = %s", csi_code_go_name(st->code),
		 st->message);
}

