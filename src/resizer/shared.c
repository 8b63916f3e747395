/*
 * What the resize controller (controller.c) and the modify controller (modify.c) both use: cache
 * reads, queue keys, the in-memory sets (final errors, slow, in use), the claim's status patch
 * and events. It calls neither controller.
 */
#include "resizer/resizer.h"

#include "base/log.h"
#include "base/timeutil.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* ---- caches and sets ---- */

struct kube_obj *rsz_get(struct kube_informer *inf, const char *ns, const char *name)
{
	return inf ? kube_store_get(kube_informer_store(inf), ns, name) : NULL;
}

bool rsz_pv_here(struct rsz_ctrl *c, const struct kube_pv *pv)
{
	if (!c->o.node)
		return true;
	if (!pv->nnode_affinity)
		return false;
	struct kube_obj *no = rsz_get(c->node_inf, NULL, c->o.node);
	const struct kube_node *nd = kube_node_of(no);
	bool here = nd && kube_node_selector_match(pv->node_affinity, pv->nnode_affinity,
						   nd->labels, nd->nlabels);
	kube_obj_unref(no);
	return here;
}

void rsz_split_key(const char *key, char *ns, size_t nslen, const char **name)
{
	const char *slash = strchr(key, '/');
	size_t n = slash ? (size_t)(slash - key) : 0;

	snprintf(ns, nslen, "%.*s", (int)n, key);
	*name = slash ? slash + 1 : key;
}

/* Slow-set entries hold the mono time of the mark in milliseconds (+1, never NULL). */
bool rsz_slow_has(struct rsz_ctrl *c, struct kube_hmap *set, const char *key, int64_t *left_ns)
{
	pthread_mutex_lock(&c->mu);
	uintptr_t at = (uintptr_t)kube_hmap_get(set, key);
	int64_t left = at ? (int64_t)(at - 1) * NSEC_PER_MSEC + c->o.retry_max_ns - mono_now_ns() : 0;
	if (at && left <= 0)
		kube_hmap_del(set, key);
	pthread_mutex_unlock(&c->mu);
	if (left_ns)
		*left_ns = left;
	return left > 0;
}

void rsz_slow_add(struct rsz_ctrl *c, struct kube_hmap *set, const char *key)
{
	pthread_mutex_lock(&c->mu);
	if (!kube_hmap_has(set, key))
		kube_hmap_put(set, key, (void *)(uintptr_t)(mono_now_ns() / NSEC_PER_MSEC + 1));
	pthread_mutex_unlock(&c->mu);
}

void rsz_set_add(struct rsz_ctrl *c, struct kube_hmap *set, const char *key)
{
	pthread_mutex_lock(&c->mu);
	kube_hmap_put(set, key, NULL);
	pthread_mutex_unlock(&c->mu);
}

void rsz_set_del(struct rsz_ctrl *c, struct kube_hmap *set, const char *key)
{
	pthread_mutex_lock(&c->mu);
	kube_hmap_del(set, key);
	pthread_mutex_unlock(&c->mu);
}

bool rsz_set_has(struct rsz_ctrl *c, struct kube_hmap *set, const char *key)
{
	pthread_mutex_lock(&c->mu);
	bool has = kube_hmap_has(set, key);
	pthread_mutex_unlock(&c->mu);
	return has;
}

/* ---- writes ---- */

int rsz_patch_claim(struct rsz_ctrl *c, const struct kube_pvc *pvc, const struct rsz_patch *p,
		    struct kube_err *e)
{
	struct strbuf body = STRBUF_INIT;
	char now[40];

	rfc3339_format(time(NULL), now, sizeof(now));
	rsz_patch_json(p, now, &body);
	KLOG_V(5, "Patching PVC %s/%s status: %s", pvc->meta.ns, pvc->meta.name, body.buf);
	int rc = kube_patch_discard(c->kc, &KUBE_RES_PERSISTENTVOLUMECLAIMS, pvc->meta.ns,
				    pvc->meta.name, true, KUBE_PATCH_STRATEGIC, body.buf, e);
	strbuf_release(&body);
	return rc;
}

