/*
 * The provisioning controller's wiring and life cycle (upstream's ProvisionController in
 * sig-storage-lib-external-provisioner): informers and their filters, the handlers that only
 * enqueue, the four queues and their workers, new/start/stop/free. What a worker does with a key
 * is in claims.c, volumes.c and sources.c; the helpers they all use are in shared.c.
 *
 * Queues (names as upstream, for the workqueue metrics): "claims" (ns/name of PVCs), "volumes"
 * (PV names), "unsavedpvs" (PVs whose volume exists but whose object could not be saved yet) and
 * "cloning-protection" (source PVCs that carry the cloning finalizer while being deleted).
 */
#include "provisioner/prov.h"

#include "base/log.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "kube/config.h"
#include "kube/store.h"

#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- informer filters: only what this driver owns is cached ---- */

static bool pvc_filter(const struct kube_obj *o, void *ud)
{
	struct prov_ctrl *c = ud;
	const struct kube_pvc *pvc = kube_pvc_of(o);
	char key[512];
	if (pvc && kube_obj_has_finalizer(o, PROV_CLONE_FINALIZER))
		return true;
	/* Every Pending restore holds its snapshot's finalizer against the sweep. */
	if (c->sweep && prov_snapshot_restore_pending(pvc, key, sizeof(key)))
		return true;
	if (!prov_ours_pvc(c, pvc))
		return false;
	return !c->o.node_deployment || prov_node_pvc_wanted(c, pvc);
}

/* Upstream's isProvisionerForVolume: provisioned by us, or a static PV of our driver. */
static bool pv_filter(const struct kube_obj *o, void *ud)
{
	const struct prov_ctrl *c = ud;
	const struct kube_pv *pv = kube_pv_of(o);

	if (!pv)
		return false;
	/* Node deployment: only this node's volumes (the others are other instances' to delete). */
	if (c->o.node_deployment && !prov_pv_on_node(pv, c->o.node_deployment->topology,
						     c->o.node_deployment->ntopology))
		return false;
	if (pv->provisioned_by)
		return !strcmp(pv->provisioned_by, c->o.driver);
	return pv->driver && !strcmp(pv->driver, c->o.driver);
}

static bool va_filter(const struct kube_obj *o, void *ud)
{
	const struct prov_ctrl *c = ud;
	const struct kube_va *va = kube_va_of(o);
	return va && va->attacher && !strcmp(va->attacher, c->o.driver);
}

/* ---- informer handlers: enqueue only ---- */

static void claim_key(const struct kube_obj *o, char *buf, size_t len)
{
	kube_obj_key(o, buf, len);
}

static void pvc_changed(struct prov_ctrl *c, const struct kube_obj *o)
{
	const struct kube_pvc *pvc = kube_pvc_of(o);
	char key[512];

	claim_key(o, key, sizeof(key));
	if (prov_ours_pvc(c, pvc) && !(pvc->volume_name && *pvc->volume_name))
		kube_workqueue_add(c->claimq, key);
	if (o->deletion_ts && kube_obj_has_finalizer(o, PROV_CLONE_FINALIZER))
		kube_workqueue_add(c->cloneq, key);
	/* A clone that left Pending may free its source. */
	if (pvc && pvc->data_source_kind && !strcmp(pvc->data_source_kind, "PersistentVolumeClaim") &&
	    pvc->data_source_name && pvc->phase != KUBE_PVC_PENDING) {
		snprintf(key, sizeof(key), "%s/%s", o->ns ? o->ns : "", pvc->data_source_name);
		kube_workqueue_add(c->cloneq, key);
	}
}

static void pvc_added(const struct kube_obj *o, void *ud)
{
	pvc_changed(ud, o);
}

static void pvc_updated(const struct kube_obj *old, const struct kube_obj *o, void *ud)
{
	(void)old;
	pvc_changed(ud, o);
}

/*
 * Only a PV that needs work is queued: a provisioned PV's creation and binding would otherwise
 * wake a volume worker twice per provision to find nothing to do. The worker reads the state
 * again from the cache; a later change comes back here.
 */
static void pv_added(const struct kube_obj *o, void *ud)
{
	struct prov_ctrl *c = ud;
	if (prov_volume_needs_work(c, o))
		kube_workqueue_add(c->volq, o->name);
}

static void pv_updated(const struct kube_obj *old, const struct kube_obj *o, void *ud)
{
	(void)old;
	pv_added(o, ud);
}

static void pv_deleted(const struct kube_obj *last, void *ud)
{
	prov_volume_gone(ud, last->name);
}

/* A new or changed class: its waiting claims try again now instead of after their backoff. */
static void sc_changed(const struct kube_obj *o, void *ud)
{
	struct prov_ctrl *c = ud;
	size_t n = 0;
	struct kube_obj **all = kube_store_list(kube_informer_store(c->pvc_inf), &n);
	char key[512];

	for (size_t i = 0; i < n; i++) {
		const struct kube_pvc *pvc = kube_pvc_of(all[i]);
		if (prov_ours_pvc(c, pvc) && prov_streq(pvc->storage_class, o->name) &&
		    !(pvc->volume_name && *pvc->volume_name)) {
			claim_key(all[i], key, sizeof(key));
			kube_workqueue_add(c->claimq, key);
		}
	}
	kube_objs_free(all, n);
}

static void sc_updated(const struct kube_obj *old, const struct kube_obj *o, void *ud)
{
	if (!prov_streq(old->rv, o->rv))
		sc_changed(o, ud);
}

/* ---- workers ---- */

/* The queues are served (kube_workqueue_serve): threads come and go with the keys. */
static enum kube_work_result work(void *arg, const char *key)
{
	struct prov_worker *w = arg;
	return (enum kube_work_result)w->sync(w->c, key);
}

static struct prov_worker workers_of(struct prov_ctrl *c, int which)
{
	switch (which) {
	case 0:
		return (struct prov_worker){ c, c->claimq, prov_sync_claim, c->o.workers };
	case 1:
		return (struct prov_worker){ c, c->volq, prov_sync_volume, c->o.workers };
	case 2:
		return (struct prov_worker){ c, c->saveq, prov_sync_unsaved, 1 };
	default:
		return (struct prov_worker){ c, c->cloneq, prov_sync_clone_source, c->o.clone_workers };
	}
}

struct prov_ctrl *prov_ctrl_new(struct kube_client *kc, const struct prov_ctrl_opts *o)
{
	struct prov_ctrl *c = xcalloc(1, sizeof(*c));
	struct kube_informer_opts io = { 0 };
	struct kube_handlers ch = { pvc_added, pvc_updated, NULL, c };
	struct kube_handlers vh = { pv_added, pv_updated, pv_deleted, c };
	struct kube_handlers sh = { sc_changed, sc_updated, NULL, c };
	struct kube_hmap empty = KUBE_HMAP_INIT;

	c->o = *o;
	c->kc = kc;
	c->in_progress = empty;
	c->topo_cache = empty;
	c->slow = empty;
	c->unsaved = empty;
	c->deleted = empty;
	pthread_mutex_init(&c->mu, NULL);
	c->metrics = prov_metrics_new();
	c->sweep = prov_sweep_new(c); /* before the claim informer: its filter asks */

	io.resync_ns = o->resync_ns;
	io.kind = &KUBE_KIND_PERSISTENTVOLUMECLAIM;
	io.filter = pvc_filter;
	io.filter_ud = c;
	c->pvc_inf = kube_informer_new(kc, &io);
	kube_informer_add_handlers(c->pvc_inf, &ch);
	io.kind = &KUBE_KIND_PERSISTENTVOLUME;
	io.filter = pv_filter;
	c->pv_inf = kube_informer_new(kc, &io);
	kube_informer_add_handlers(c->pv_inf, &vh);
	io.filter = NULL;
	io.filter_ud = NULL;
	io.kind = &KUBE_KIND_STORAGECLASS;
	c->sc_inf = kube_informer_new(kc, &io);
	kube_informer_add_handlers(c->sc_inf, &sh);
	if (o->capacity)
		c->cap = prov_cap_new(o->capacity->kc ? o->capacity->kc : kc, c->sc_inf, o->capacity);
	io.resync_ns = 0;
	c->nd = o->node_deployment;
	c->topo = o->cap_topology && (o->gates.topology || c->nd);
	c->owners = empty;
	c->seen_nodes = empty;
	if (c->nd && c->nd->immediate_binding) {
		/* Not for topology (a node deployment knows its own only): to count competitors. */
		io.kind = &KUBE_KIND_CSINODE_T;
		c->csinode_inf = kube_informer_new(kc, &io);
	} else if (c->topo && !c->nd) {
		io.kind = &KUBE_KIND_CSINODE_T;
		c->csinode_inf = kube_informer_new(kc, &io);
		io.kind = &KUBE_KIND_NODE_T;
		c->node_inf = kube_informer_new(kc, &io);
	}
	if (o->cap_publish) {
		/* Volumes still attached are not deleted (upstream's canDeleteVolume). */
		io.kind = &KUBE_KIND_VOLUMEATTACHMENT;
		io.filter = va_filter;
		io.filter_ud = c;
		c->va_inf = kube_informer_new(kc, &io);
		kube_informer_add_index(c->va_inf, "pv", kube_index_va_by_pv);
	}
	struct kube_informer *all[] = { c->pvc_inf, c->pv_inf, c->sc_inf, c->csinode_inf,
					c->node_inf, c->va_inf };
	for (size_t i = 0; i < 6; i++)
		if (all[i])
			c->infs[c->ninfs++] = all[i];
	c->claimq = kube_workqueue_new("claims", o->retry_start_ns, o->retry_max_ns);
	c->volq = kube_workqueue_new("volumes", o->retry_start_ns, o->retry_max_ns);
	c->saveq = kube_workqueue_new("unsavedpvs", o->retry_start_ns, o->retry_max_ns);
	c->cloneq = kube_workqueue_new("cloning-protection", o->retry_start_ns, o->retry_max_ns);
	return c;
}

int prov_ctrl_start(struct prov_ctrl *c, char *err, size_t errlen)
{
	struct kube_stop stop = { .mu = &c->mu, .flag = &c->stop };

	if (kube_informers_start(c->infs, c->ninfs, err, errlen))
		return -1;
	if (c->cap && prov_cap_start_informers(c->cap)) {
		snprintf(err, errlen, "cannot start the capacity informers");
		return -1;
	}
	KLOG_I("Starting provisioner controller %s", c->o.driver);
	if (kube_informers_wait_synced(c->infs, c->ninfs, "the informer caches", &stop, 0, err, errlen))
		return -1;
	if (c->cap && prov_cap_start(c->cap, &c->stop, &c->mu, err, errlen))
		return -1;
	malloc_trim(0);
	/* A queue with 0 workers (--worker-threads=0, --cloning-protection-threads=0) is not
	 * served: its keys wait, as upstream's do with no goroutine to take them. */
	struct kube_serve serve[4];
	size_t nserve = 0;
	for (int w = 0; w < 4; w++) {
		c->ws[w] = workers_of(c, w);
		if (c->ws[w].max > 0)
			serve[nserve++] = (struct kube_serve){ c->ws[w].q, c->ws[w].max, work, &c->ws[w] };
	}
	if (kube_workqueue_serve(serve, nserve, KUBE_WORKER_IDLE_NS, err, errlen))
		return -1;
	if (prov_sweep_start(c->sweep)) {
		snprintf(err, errlen, "cannot start the snapshot finalizer sweep");
		return -1;
	}
	KLOG_I("Started provisioner controller %s", c->o.driver);
	return 0;
}

/* Workers finish their current key; informers keep running until prov_ctrl_free(). */
void prov_ctrl_stop(struct prov_ctrl *c)
{
	pthread_mutex_lock(&c->mu);
	c->stop = true;
	pthread_mutex_unlock(&c->mu);
	kube_workqueue_shutdown(c->claimq);
	kube_workqueue_shutdown(c->volq);
	kube_workqueue_shutdown(c->saveq);
	kube_workqueue_shutdown(c->cloneq);
	prov_cap_stop(c->cap);
	prov_sweep_stop(c->sweep);
	kube_workqueue_wait_workers(c->claimq);
	kube_workqueue_wait_workers(c->volq);
	kube_workqueue_wait_workers(c->saveq);
	kube_workqueue_wait_workers(c->cloneq);
	KLOG_I("Shutting down provisioner controller");
}

void prov_ctrl_free(struct prov_ctrl *c)
{
	if (!c)
		return;
	struct kube_informer *inf[10];
	size_t n = c->ninfs;
	memcpy(inf, c->infs, n * sizeof(*inf));
	if (c->cap)
		n += prov_cap_informers(c->cap, inf + n);
	prov_sweep_stop(c->sweep); /* its thread starts the informer: ended before it stops */
	if (prov_sweep_informer(c->sweep))
		inf[n++] = prov_sweep_informer(c->sweep);
	kube_informers_stop(inf, n); /* in parallel: each watch notices a stop within 100 ms */
	prov_sweep_free(c->sweep);
	prov_cap_free(c->cap); /* after the class informer that calls it has stopped */
	for (size_t i = 0; i < c->ninfs; i++)
		kube_informer_free(c->infs[i]);
	kube_workqueue_free(c->claimq);
	kube_workqueue_free(c->volq);
	kube_workqueue_free(c->saveq);
	kube_workqueue_free(c->cloneq);
	prov_claims_clear(c);
	prov_topo_clear(c);
	prov_unsaved_clear(c);
	prov_volumes_clear(c);
	prov_owners_clear(c);
	prov_metrics_free(c->metrics);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

void prov_ctrl_render_metrics(struct prov_ctrl *c, struct strbuf *out)
{
	struct kube_workqueue *qs[5] = { c->claimq, c->volq, c->saveq, c->cloneq,
					 c->cap ? prov_cap_queue(c->cap) : NULL };
	prov_metrics_render(c->metrics, out);
	if (c->cap)
		prov_cap_render_metrics(c->cap, out);
	kube_workqueue_render_metrics(qs, c->cap ? 5 : 4, out);
}
