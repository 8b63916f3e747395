/*
 * pvc-protection and pv-protection: the finalizers that keep a claim while a pod uses it and a
 * volume while it is bound, as Kubernetes' storage-object-in-use-protection does.
 *
 * pvc-protection: every claim not being deleted gets kubernetes.io/pvc-protection. A claim being
 * deleted loses it once no pod uses it: a pod uses a claim when one of its volumes names it
 * (persistentVolumeClaim, or the "<pod>-<volume>" claim of a generic ephemeral volume) and the
 * pod is not Succeeded or Failed. The pod cache may lag, so before removing the finalizer the pods
 * of the namespace are listed from the API server (upstream's "ask the API server" step).
 *
 * pv-protection: every volume not being deleted gets kubernetes.io/pv-protection; a volume being
 * deleted loses it once its phase is not Bound.
 *
 * Finalizer writes are merge patches of the whole list carrying the resourceVersion they were
 * computed from, so a concurrent change of the list gives a 409 and the key is retried.
 */
#include "controllers/cm.h"

#include "base/log.h"
#include "base/xalloc.h"
#include "kube/objects.h"
#include "kube/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PVC_FINALIZER "kubernetes.io/pvc-protection"
#define PV_FINALIZER "kubernetes.io/pv-protection"

struct prot {
	struct cm_ctx *cm;
	struct cm_pool pool;
	bool pvc; /* pvc-protection; else pv-protection */
	bool started;
};

static enum cm_result set_finalizers(struct prot *p, const struct kube_resource *r,
				     const struct kube_obj *o, const char *drop, const char *add)
{
	struct kube_err e;
	json_t *patch = json_pack("{s:{s:o, s:s}}", "metadata", "finalizers",
				  cm_finalizers_json(o, drop, add), "resourceVersion", o->rv);
	int rc = cm_patch(p->cm, r, o->ns, o->name, false, patch, &e);

	json_decref(patch);
	if (rc)
		return cm_result_of(&e);
	KLOG_V(2, "%s finalizer %s %s", add ? "added" : "removed", add ? add : drop, o->name);
	return CM_DONE;
}

/* ---- pvc-protection ---- */

static bool pod_record_uses(const struct kube_pod *pod, const char *claim)
{
	if (kube_pod_terminated(pod))
		return false;
	for (uint16_t i = 0; i < pod->nvolumes; i++)
		if (pod->volumes[i].claim_name && !strcmp(pod->volumes[i].claim_name, claim))
			return true;
	return false;
}

/* The same question, asked of the API server (the cache may not have seen a new pod yet). */
static int pods_use_live(struct prot *p, const char *ns, const char *claim, bool *used)
{
	struct kube_err e;
	json_t *list = kube_list(p->cm->kc, &KUBE_RES_PODS, ns, NULL, &e), *pod;
	size_t i;

	if (!list) {
		KLOG_ERR(e.message, "listing pods in %s", ns);
		return -1;
	}
	*used = false;
	json_array_foreach(json_object_get(list, "items"), i, pod) {
		const char *phase = json_string_value(json_object_get(json_object_get(pod, "status"), "phase"));
		const char *name = json_string_value(json_object_get(json_object_get(pod, "metadata"), "name"));
		json_t *vols = json_object_get(json_object_get(pod, "spec"), "volumes"), *v;
		size_t j;

		if (phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed")))
			continue;
		json_array_foreach(vols, j, v) {
			const char *cn = json_string_value(json_object_get(
				json_object_get(v, "persistentVolumeClaim"), "claimName"));
			const char *vn = json_string_value(json_object_get(v, "name"));
			char eph[512];

			if (cn && !strcmp(cn, claim))
				*used = true;
			if (json_object_get(v, "ephemeral") && name && vn) {
				snprintf(eph, sizeof(eph), "%s-%s", name, vn);
				if (!strcmp(eph, claim))
					*used = true;
			}
		}
	}
	json_decref(list);
	return 0;
}

static enum cm_result sync_pvc(struct prot *p, const char *key)
{
	char ns[256];
	const char *slash = strchr(key, '/');
	struct kube_obj *o;
	enum cm_result r = CM_DONE;

	if (!slash || (size_t)(slash - key) >= sizeof(ns))
		return CM_DONE;
	memcpy(ns, key, (size_t)(slash - key));
	ns[slash - key] = 0;
	o = kube_store_get(cm_store(p->cm, CM_PVCS), ns, slash + 1);
	if (!o)
		return CM_DONE;
	bool has = kube_obj_has_finalizer(o, PVC_FINALIZER);
	if (!o->deletion_ts && !has) {
		r = set_finalizers(p, &KUBE_RES_PERSISTENTVOLUMECLAIMS, o, NULL, PVC_FINALIZER);
	} else if (o->deletion_ts && has) {
		size_t n;
		struct kube_obj **pods = kube_store_list(cm_store(p->cm, CM_PODS), &n);
		bool used = false;

		for (size_t i = 0; i < n && !used; i++) {
			const struct kube_pod *pod = kube_pod_of(pods[i]);
			used = pod && pod->meta.ns && !strcmp(pod->meta.ns, ns) &&
			       pod_record_uses(pod, o->name);
		}
		kube_objs_free(pods, n);
		if (!used && pods_use_live(p, ns, o->name, &used))
			r = CM_RETRY;
		else if (used)
			KLOG_V(3, "claim %s is in use by a pod: keeping %s", key, PVC_FINALIZER);
		else
			r = set_finalizers(p, &KUBE_RES_PERSISTENTVOLUMECLAIMS, o, PVC_FINALIZER, NULL);
	}
	kube_obj_unref(o);
	return r;
}

/* ---- pv-protection ---- */

static enum cm_result sync_pv(struct prot *p, const char *key)
{
	struct kube_obj *o = kube_store_get(cm_store(p->cm, CM_PVS), NULL, key);
	const struct kube_pv *pv = kube_pv_of(o);
	enum cm_result r = CM_DONE;

	if (!pv) {
		kube_obj_unref(o);
		return CM_DONE;
	}
	bool has = kube_obj_has_finalizer(o, PV_FINALIZER);
	if (!o->deletion_ts && !has)
		r = set_finalizers(p, &KUBE_RES_PERSISTENTVOLUMES, o, NULL, PV_FINALIZER);
	else if (o->deletion_ts && has && pv->phase != KUBE_PV_BOUND)
		r = set_finalizers(p, &KUBE_RES_PERSISTENTVOLUMES, o, PV_FINALIZER, NULL);
	kube_obj_unref(o);
	return r;
}

static enum cm_result sync_key(void *self, const char *key)
{
	struct prot *p = self;
	return p->pvc ? sync_pvc(p, key) : sync_pv(p, key);
}

/* ---- handlers ---- */

static void enqueue(const struct kube_obj *o, void *ud)
{
	struct prot *p = ud;
	char key[512];

	kube_obj_key(o, key, sizeof(key));
	kube_workqueue_add(p->pool.q, key);
}
static void enqueue_update(const struct kube_obj *old, const struct kube_obj *o, void *ud)
{
	(void)old;
	enqueue(o, ud);
}

/* A pod that stops using its claims (deleted or terminated) may free a claim being deleted. */
static void pod_claims(const struct kube_obj *o, void *ud)
{
	struct prot *p = ud;
	const struct kube_pod *pod = kube_pod_of(o);
	char key[512];

	for (uint16_t i = 0; pod && i < pod->nvolumes; i++)
		if (pod->volumes[i].claim_name) {
			snprintf(key, sizeof(key), "%s/%s", pod->meta.ns, pod->volumes[i].claim_name);
			kube_workqueue_add(p->pool.q, key);
		}
}
static void pod_update(const struct kube_obj *old, const struct kube_obj *o, void *ud)
{
	(void)old;
	const struct kube_pod *pod = kube_pod_of(o);
	if (pod && (kube_pod_terminated(pod) || pod->meta.deletion_ts))
		pod_claims(o, ud);
}
static void pod_add(const struct kube_obj *o, void *ud)
{
	(void)o, (void)ud;
}

static void *prot_init(struct cm_ctx *cm, bool pvc)
{
	struct prot *p = xcalloc(1, sizeof(*p));
	struct kube_handlers h = { enqueue, enqueue_update, NULL, p };

	p->cm = cm;
	p->pvc = pvc;
	cm_pool_init(&p->pool, pvc ? "pvcprotection" : "pvprotection", cm->cfg, sync_key, p);
	kube_informer_add_handlers(cm_informer(cm, pvc ? CM_PVCS : CM_PVS), &h);
	if (pvc) {
		struct kube_handlers ph = { pod_add, pod_update, pod_claims, p };
		kube_informer_add_handlers(cm_informer(cm, CM_PODS), &ph);
	}
	return p;
}

static void *pvc_init(struct cm_ctx *cm) { return prot_init(cm, true); }
static void *pv_init(struct cm_ctx *cm) { return prot_init(cm, false); }

static int prot_start(void *self)
{
	struct prot *p = self;

	if (cm_pool_start(&p->pool, 1))
		return -1;
	p->started = true;
	return 0;
}

static void prot_stop(void *self)
{
	struct prot *p = self;

	if (p->started)
		cm_pool_stop(&p->pool);
	p->started = false;
}

static void prot_free(void *self)
{
	struct prot *p = self;

	cm_pool_free(&p->pool);
	free(p);
}

static size_t prot_queues(void *self, struct kube_workqueue **out, size_t max)
{
	struct prot *p = self;

	if (!max)
		return 0;
	out[0] = p->pool.q;
	return 1;
}

const struct cm_controller cm_pvc_protection = {
	.name = "pvc-protection", .default_on = true,
	.init = pvc_init, .start = prot_start, .stop = prot_stop, .free = prot_free,
	.queues = prot_queues,
};

const struct cm_controller cm_pv_protection = {
	.name = "pv-protection", .default_on = true,
	.init = pv_init, .start = prot_start, .stop = prot_stop, .free = prot_free,
	.queues = prot_queues,
};
