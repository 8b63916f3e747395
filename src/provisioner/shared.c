/*
 * What the provisioner's worker files (claims.c, volumes.c, sources.c, nodedeploy.c) all use:
 * cache reads, events, queue keys, gRPC error text, finalizer patches and secrets. It sits below
 * them and below controller.c, and calls none of them.
 */
#include "provisioner/prov.h"

#include "base/log.h"
#include "base/xalloc.h"
#include "kube/secret.h"
#include "kube/store.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void prov_grpc_error(const struct csi_status *st, char *out, size_t outlen)
{
	snprintf(out, outlen, "rpc error: code = %s desc = %.900s", csi_code_go_name(st->code),
		 st->message);
}

struct kube_obj *prov_store_get(struct kube_informer *inf, const char *ns, const char *name)
{
	return inf ? kube_store_get(kube_informer_store(inf), ns, name) : NULL;
}

bool prov_ours_pvc(const struct prov_ctrl *c, const struct kube_pvc *pvc)
{
	return pvc && pvc->provisioner && !strcmp(pvc->provisioner, c->o.driver);
}

int prov_split_key(const char *key, char *ns, size_t nslen, char *name, size_t namelen)
{
	const char *slash = strchr(key, '/');

	if (!slash)
		return -1;
	snprintf(ns, nslen, "%.*s", (int)(slash - key), key);
	snprintf(name, namelen, "%s", slash + 1);
	return 0;
}

/* Finalizers of o without `drop`, plus `add` (either NULL). */
static json_t *finalizers_json(const struct kube_obj *o, const char *drop, const char *add)
{
	json_t *a = json_array();
	for (size_t i = 0; i < o->nfinalizers; i++)
		if (!drop || strcmp(o->finalizers[i], drop) != 0)
			json_array_append_new(a, json_string(o->finalizers[i]));
	if (add)
		json_array_append_new(a, json_string(add));
	return a;
}

/* Merge patch of metadata.finalizers guarded by the record's resourceVersion. */
int prov_patch_finalizers(struct prov_ctrl *c, const struct kube_resource *r,
			  const struct kube_obj *o, const char *drop, const char *add, bool with_rv,
			  struct kube_err *e)
{
	json_t *md = json_pack("{s:o}", "finalizers", finalizers_json(o, drop, add));
	if (with_rv)
		json_object_set_new(md, "resourceVersion", json_string(o->rv));
	json_t *p = json_pack("{s:o}", "metadata", md);
	char *body = json_dumps(p, JSON_COMPACT);
	int rc = kube_patch_discard(c->kc, r, o->ns, o->name, false, KUBE_PATCH_MERGE, body, e);
	free(body);
	json_decref(p);
	return rc;
}

/* Reads Secret ns/name into the map `field` of msg; values live in the arena only. */
int prov_add_secrets(struct prov_ctrl *c, struct csi_arena *a, ProtobufCMessage *msg,
		     const char *field, const struct prov_secret_ref *ref, char *err, size_t errlen)
{
	struct kube_secret s;
	char why[512];

	if (kube_secret_read(c->kc, ref->ns, ref->name, &s, why, sizeof(why))) {
		snprintf(err, errlen, "error getting secret %s in namespace %s: %s", ref->name, ref->ns,
			 why);
		return -1;
	}
	csi_arena_wipe_on_free(a);
	for (size_t i = 0; i < s.n; i++)
		csi_map_add(a, msg, field, s.entries[i].key, s.entries[i].value);
	kube_secret_free(&s);
	return 0;
}
