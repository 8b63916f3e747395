/*
 * ad_state: the attach/detach controller's two states of the world (see attachdetach.c for the
 * loop): the desired state built from the informer caches each pass (seed 002's Fetch), and
 * the actual state's entries, read back at start-up from Node.status.volumesAttached and the
 * VolumeAttachments, and checked against them by the periodic sync.
 */
#include "controllers/ad_ctrl.h"

/* ---- small helpers ---- */

void adc_pair_key(const char *uniq, const char *node, char *buf, size_t len)
{
	snprintf(buf, len, "%s\n%s", uniq, node);
}

char *adc_dup_or_null(const char *s) { return s ? xstrdup(s) : NULL; }

void adc_entry_free(struct ad_entry *e)
{
	if (!e)
		return;
	free(e->uniq);
	free(e->node);
	free(e->driver);
	free(e->handle);
	free(e->pv);
	free(e);
}

void adc_op_free(struct ad_op *op)
{
	if (!op)
		return;
	for (size_t i = 0; i < op->npods; i++)
		kube_obj_unref(op->pods[i]);
	free(op->pods);
	free(op->uniq);
	free(op->node);
	free(op->driver);
	free(op->handle);
	free(op->pv);
	free(op);
}

void adc_want_free(struct ad_want *w, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; j < w[i].npods; j++)
			kube_obj_unref(w[i].pods[j]);
		free(w[i].pods);
		free(w[i].uniq);
		free(w[i].node);
		free(w[i].driver);
		free(w[i].handle);
		free(w[i].pv);
	}
	free(w);
}

bool adc_node_uses(const struct kube_node *n, const char *uniq)
{
	for (uint16_t i = 0; n && i < n->nvolumes_in_use; i++)
		if (!strcmp(n->volumes_in_use[i], uniq))
			return true;
	return false;
}

/* Adds or updates a pair of the actual state (mu held). */
struct ad_entry *adc_entry_put(struct ad_ctrl *c, const char *uniq, const char *node,
				  const char *driver, const char *handle, const char *pv)
{
	char key[1024];
	struct ad_entry *e;

	adc_pair_key(uniq, node, key, sizeof(key));
	e = kube_hmap_get(&c->actual, key);
	if (!e) {
		e = xcalloc(1, sizeof(*e));
		e->uniq = xstrdup(uniq);
		e->node = xstrdup(node);
		e->driver = xstrdup(driver);
		e->handle = xstrdup(handle);
		e->state = AD_UNCERTAIN; /* until a VolumeAttachment or the node says attached */
		kube_hmap_put(&c->actual, key, e);
	}
	if (pv && (!e->pv || strcmp(e->pv, pv))) {
		free(e->pv);
		e->pv = xstrdup(pv);
	}
	return e;
}

void adc_entry_del(struct ad_ctrl *c, const char *uniq, const char *node)
{
	char key[1024];

	adc_pair_key(uniq, node, key, sizeof(key));
	adc_entry_free(kube_hmap_del(&c->actual, key));
}

void adc_mark_node(struct ad_ctrl *c, const char *node)
{
	kube_hmap_put(&c->nodes_dirty, node, (void *)1);
}

void adc_pod_event(struct ad_ctrl *c, const struct kube_obj *pod, enum kube_event_type type,
		      const char *reason, const char *msg)
{
	struct kube_objref ref;
	char uid[64];

	kube_objref_of(pod, &ref, uid, sizeof(uid));
	kube_event(c->rec, &ref, type, reason, "%s", msg);
}

/* ---- Fetch: the desired state from the caches ---- */

struct ad_want *adc_want_find(struct ad_want *w, size_t n, struct kube_hmap *idx,
				 const char *key)
{
	void *v = kube_hmap_get(idx, key);

	(void)n;
	return v ? &w[(size_t)v - 1] : NULL;
}

/*
 * Pods with spec.nodeName on a controller-managed node, not terminated and not being deleted
 * (a deleted pod's volumes stay attached while the node lists them in volumesInUse: safe detach
 * waits for that), each claim bound to a CSI PV whose driver needs attaching.
 */
struct ad_want *adc_build_desired(struct ad_ctrl *c, size_t *nout)
{
	struct kube_store *pods = cm_store(c->cm, CM_PODS), *nodes = cm_store(c->cm, CM_NODES);
	struct kube_store *pvcs = cm_store(c->cm, CM_PVCS), *pvs = cm_store(c->cm, CM_PVS);
	struct kube_store *drivers = cm_store(c->cm, CM_CSIDRIVERS);
	struct kube_hmap idx = KUBE_HMAP_INIT;
	struct ad_want *w = NULL;
	size_t n = 0, cap = 0, npods;
	struct kube_obj **all = kube_store_list(pods, &npods);
	char uniq[1024], key[1100];

	for (size_t i = 0; i < npods; i++) {
		const struct kube_pod *p = kube_pod_of(all[i]);
		struct kube_obj *nobj;
		const struct kube_node *node;

		if (!p || !p->node_name || !p->nvolumes || kube_pod_terminated(p) ||
		    (p->meta.deletion_ts && !p->running))
			continue;
		nobj = kube_store_get(nodes, NULL, p->node_name);
		node = kube_node_of(nobj);
		if (!node || !node->controller_managed) {
			kube_obj_unref(nobj);
			continue;
		}
		kube_obj_unref(nobj);
		for (uint16_t v = 0; v < p->nvolumes; v++) {
			const struct kube_pod_volume *pv = &p->volumes[v];
			struct kube_obj *cobj, *vobj, *dobj;
			const struct kube_pvc *claim;
			const struct kube_pv *vol;
			const struct kube_csidriver *drv;
			struct ad_want *x;

			/* Inline CSI volumes are ephemeral: the CSI plugin never attaches them. */
			if (!pv->claim_name)
				continue;
			cobj = kube_store_get(pvcs, p->meta.ns, pv->claim_name);
			claim = kube_pvc_of(cobj);
			if (!claim || !claim->volume_name || claim->phase != KUBE_PVC_BOUND) {
				kube_obj_unref(cobj);
				continue;
			}
			vobj = kube_store_get(pvs, NULL, claim->volume_name);
			kube_obj_unref(cobj);
			vol = kube_pv_of(vobj);
			if (!vol || !vol->driver || !vol->volume_handle) {
				kube_obj_unref(vobj);
				continue;
			}
			dobj = kube_store_get(drivers, NULL, vol->driver);
			drv = kube_csidriver_of(dobj);
			if (drv && !drv->attach_required) {
				kube_obj_unref(dobj);
				kube_obj_unref(vobj);
				continue;
			}
			kube_obj_unref(dobj);
			ad_unique_name(vol->driver, vol->volume_handle, uniq, sizeof(uniq));
			adc_pair_key(uniq, p->node_name, key, sizeof(key));
			x = adc_want_find(w, n, &idx, key);
			if (!x) {
				if (n == cap) {
					cap = cap ? 2 * cap : 64;
					w = xrealloc(w, cap * sizeof(*w));
				}
				x = &w[n++];
				memset(x, 0, sizeof(*x));
				x->uniq = xstrdup(uniq);
				x->node = xstrdup(p->node_name);
				x->driver = xstrdup(vol->driver);
				x->handle = xstrdup(vol->volume_handle);
				x->pv = xstrdup(vol->meta.name);
				x->d.uniq = x->uniq;
				x->d.node = x->node;
				x->d.multi_attach_ok = vol->access_modes == 0 ||
						       (vol->access_modes & (KUBE_RWX | KUBE_ROX));
				kube_hmap_put(&idx, key, (void *)n);
			}
			if (x->npods == x->cap) {
				x->cap = x->cap ? 2 * x->cap : 2;
				x->pods = xrealloc(x->pods, x->cap * sizeof(*x->pods));
			}
			x->pods[x->npods++] = kube_obj_ref(all[i]);
			kube_obj_unref(vobj);
		}
	}
	kube_objs_free(all, npods);
	kube_hmap_clear(&idx);
	*nout = n;
	return w;
}

/*
 * Periodic sync: an attached pair whose VolumeAttachment vanished or stopped reporting attached
 * is forgotten, so that it is attached again if a pod wants it (upstream's syncStates).
 */
void adc_sync_states(struct ad_ctrl *c)
{
	struct kube_store *vas = cm_store(c->cm, CM_VAS);
	char **gone = NULL, va[80];
	size_t n = 0;

	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; i < c->actual.cap; i++) {
		struct ad_entry *e = c->actual.slots[i].value;
		struct kube_obj *o;
		const struct kube_va *v;

		if (!c->actual.slots[i].key || e->state != AD_ATTACHED || kube_hmap_has(&c->ops, e->uniq))
			continue;
		ad_va_name(c->naming, e->driver, e->handle, e->pv, e->node, va, sizeof(va));
		o = kube_store_get(vas, NULL, va);
		v = kube_va_of(o);
		if (!v || !v->attached) {
			KLOG_I("Volume \"%s\" is no longer attached to node \"%s\" (VolumeAttachment %s %s): marking it detached",
			       e->uniq, e->node, va, v ? "not attached" : "not found");
			gone = xrealloc(gone, (n + 1) * sizeof(*gone));
			gone[n++] = xstrdup(c->actual.slots[i].key);
			adc_mark_node(c, e->node);
		}
		kube_obj_unref(o);
	}
	for (size_t i = 0; i < n; i++) {
		adc_entry_free(kube_hmap_del(&c->actual, gone[i]));
		free(gone[i]);
	}
	free(gone);
	c->dirty = true;
	pthread_mutex_unlock(&c->mu);
}

/* Start-up: the actual state from Node.status.volumesAttached and the VolumeAttachments, of
 * controller-managed nodes and of nodes that are gone. */
void adc_populate_actual(struct ad_ctrl *c)
{
	struct kube_store *pvs = cm_store(c->cm, CM_PVS), *nodes = cm_store(c->cm, CM_NODES);
	size_t npv, nnode, nva;
	struct kube_obj **pvl = kube_store_list(pvs, &npv);
	struct kube_obj **nl = kube_store_list(nodes, &nnode);
	struct kube_obj **val = kube_store_list(cm_store(c->cm, CM_VAS), &nva);
	struct kube_hmap pv_by_uniq = KUBE_HMAP_INIT;
	char uniq[1024], drv[512], handle[1024];
	size_t from_nodes = 0, from_vas = 0;

	for (size_t i = 0; i < npv; i++) {
		const struct kube_pv *pv = kube_pv_of(pvl[i]);
		if (pv && pv->driver && pv->volume_handle)
			kube_hmap_put(&pv_by_uniq,
				      ad_unique_name(pv->driver, pv->volume_handle, uniq, sizeof(uniq)),
				      (void *)pv->meta.name);
	}
	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; i < nnode; i++) {
		const struct kube_node *n = kube_node_of(nl[i]);

		if (n && !n->controller_managed)
			continue; /* its kubelet attaches and detaches: not ours to undo */
		for (uint16_t j = 0; n && j < n->nvolumes_attached; j++) {
			const char *u = n->volumes_attached[j].name;
			struct ad_entry *e;

			if (!u || ad_parse_unique_name(u, drv, sizeof(drv), handle, sizeof(handle)))
				continue;
			e = adc_entry_put(c, u, n->meta.name, drv, handle, kube_hmap_get(&pv_by_uniq, u));
			e->state = AD_ATTACHED;
			e->reported = true;
			e->mounted = adc_node_uses(n, u);
			from_nodes++;
		}
	}
	for (size_t i = 0; i < nva; i++) {
		const struct kube_va *va = kube_va_of(val[i]);
		struct kube_obj *po, *no;
		const struct kube_pv *pv;
		struct ad_entry *e;
		char key[1100];

		if (!va || !va->pv_name || !va->node_name)
			continue;
		/* A node that exists without the annotation attaches its own volumes (a kubelet with
		 * enableControllerAttachDetach=false): its VolumeAttachments are not adopted, or the
		 * first pass would detach what that kubelet mounted. A node that is gone is still
		 * cleaned up. */
		no = kube_store_get(nodes, NULL, va->node_name);
		if (kube_node_of(no) && !kube_node_of(no)->controller_managed) {
			kube_obj_unref(no);
			continue;
		}
		kube_obj_unref(no);
		po = kube_store_get(pvs, NULL, va->pv_name);
		pv = kube_pv_of(po);
		if (!pv || !pv->driver || !pv->volume_handle || strcmp(pv->driver, va->attacher)) {
			kube_obj_unref(po);
			continue;
		}
		ad_unique_name(pv->driver, pv->volume_handle, uniq, sizeof(uniq));
		adc_pair_key(uniq, va->node_name, key, sizeof(key));
		if (kube_hmap_has(&c->actual, key)) {
			kube_obj_unref(po);
			continue;
		}
		no = kube_store_get(nodes, NULL, va->node_name);
		e = adc_entry_put(c, uniq, va->node_name, pv->driver, pv->volume_handle, pv->meta.name);
		e->state = va->attached ? AD_ATTACHED : AD_UNCERTAIN;
		e->reported = va->attached;
		e->mounted = adc_node_uses(kube_node_of(no), uniq);
		if (va->attached)
			adc_mark_node(c, va->node_name);
		from_vas++;
		kube_obj_unref(no);
		kube_obj_unref(po);
	}
	c->dirty = true;
	pthread_mutex_unlock(&c->mu);
	KLOG_I("attachdetach: actual state read back: %zu pair(s) from Node.status.volumesAttached, %zu more from VolumeAttachments",
	       from_nodes, from_vas);
	kube_hmap_clear(&pv_by_uniq);
	kube_objs_free(pvl, npv);
	kube_objs_free(nl, nnode);
	kube_objs_free(val, nva);
}
