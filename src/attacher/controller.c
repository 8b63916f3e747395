/*
 * The attach controller: informers feed names into two workqueues, workers call the handler.
 *
 * Informer handlers run on informer threads and only enqueue. A VA update that changes nothing
 * but attachError/detachError is ignored: those are our own writes, and reacting to them would
 * call the driver again at once and defeat the backoff. VA deletion pokes the PV queue so the PV
 * finalizer can go once the last VA is gone (found through the "pv" index, never a scan).
 */
#include "attacher/att.h"
#include "base/log.h"
#include "base/timeutil.h"
#include "base/xalloc.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool ours(struct att_ctrl *c, const struct kube_va *va)
{
	return va && va->attacher && strcmp(va->attacher, c->o.driver) == 0;
}

/*
 * The VA informer keeps only this driver's VolumeAttachments: spec.attacher is immutable, so a
 * foreign one never becomes ours, and the handlers ignored them anyway. Upstream caches every
 * VA of the cluster (the API server cannot select on spec.attacher); here 10,000 VAs of other
 * drivers cost 2.8 MB of RSS (docs/performance.md, round 3).
 */
static bool va_filter(const struct kube_obj *o, void *ud)
{
	return ours(ud, kube_va_of(o));
}

static bool same_kv(const struct kube_kv *a, size_t na, const struct kube_kv *b, size_t nb)
{
	if (na != nb)
		return false;
	for (size_t i = 0; i < na; i++)
		if (strcmp(a[i].key, b[i].key) || strcmp(a[i].value, b[i].value))
			return false;
	return true;
}

static bool streq(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

/* Upstream's shouldEnqueueVAChange on compact records. */
static bool should_enqueue(const struct kube_va *old, const struct kube_va *va)
{
	if (streq(old->meta.rv, va->meta.rv))
		return true; /* periodic resync */
	if (!old->attach_error && !old->detach_error && !va->attach_error && !va->detach_error)
		return true;
	if (old->attached != va->attached || old->meta.deletion_ts != va->meta.deletion_ts ||
	    old->meta.nfinalizers != va->meta.nfinalizers || !streq(old->node_id, va->node_id) ||
	    !streq(old->node_name, va->node_name) || !streq(old->pv_name, va->pv_name) ||
	    !streq(old->attacher, va->attacher) || old->inline_spec != va->inline_spec ||
	    !same_kv(old->metadata, old->nmetadata, va->metadata, va->nmetadata))
		return true;
	for (size_t i = 0; i < va->meta.nfinalizers; i++)
		if (!streq(old->meta.finalizers[i], va->meta.finalizers[i]))
			return true;
	return false;
}

static void va_added(const struct kube_obj *o, void *ud)
{
	struct att_ctrl *c = ud;

	if (ours(c, kube_va_of(o)))
		kube_workqueue_add(c->vaq, o->name);
}

static void va_updated(const struct kube_obj *old, const struct kube_obj *o, void *ud)
{
	struct att_ctrl *c = ud;
	const struct kube_va *va = kube_va_of(o);

	if (!ours(c, va))
		return;
	if (should_enqueue(kube_va_of(old), va))
		kube_workqueue_add(c->vaq, o->name);
	else
		KLOG_V(3, "Ignoring VolumeAttachment %s change", LOGQ(o->name));
}

static void va_deleted(const struct kube_obj *o, void *ud)
{
	struct att_ctrl *c = ud;
	const struct kube_va *va = kube_va_of(o);

	if (va && va->pv_name)
		kube_workqueue_add(c->pvq, va->pv_name);
}

static void pv_added(const struct kube_obj *o, void *ud)
{
	struct att_ctrl *c = ud;

	kube_workqueue_add(c->pvq, o->name);
}

static void pv_updated(const struct kube_obj *old, const struct kube_obj *o, void *ud)
{
	(void)old;
	pv_added(o, ud);
}

struct att_ctrl *att_ctrl_new(struct kube_client *kc, const struct att_ctrl_opts *o)
{
	struct att_ctrl *c = xcalloc(1, sizeof(*c));
	struct kube_informer_opts io = { 0 };
	struct kube_handlers vh = { va_added, va_updated, va_deleted, c };
	struct kube_handlers ph = { pv_added, pv_updated, NULL, c };
	struct kube_hmap empty = KUBE_HMAP_INIT;

	c->o = *o;
	c->kc = kc;
	c->force_sync = empty;
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cond, NULL);
	att_finalizer_name(o->driver, c->finalizer, sizeof(c->finalizer));

	io.resync_ns = o->resync_ns;
	io.kind = &KUBE_KIND_VOLUMEATTACHMENT;
	io.filter = va_filter;
	io.filter_ud = c;
	c->va_inf = kube_informer_new(kc, &io);
	io.filter = NULL;
	io.filter_ud = NULL;
	kube_informer_add_index(c->va_inf, "pv", kube_index_va_by_pv);
	kube_informer_add_handlers(c->va_inf, &vh);
	io.kind = &KUBE_KIND_PERSISTENTVOLUME;
	c->pv_inf = kube_informer_new(kc, &io);
	kube_informer_add_handlers(c->pv_inf, &ph);
	io.kind = &KUBE_KIND_CSINODE_T;
	io.resync_ns = 0;
	c->csinode_inf = kube_informer_new(kc, &io);
	/* Queue names as upstream, so workqueue metrics carry the same name labels. */
	c->vaq = kube_workqueue_new("csi-attacher-va", o->retry_start_ns, o->retry_max_ns);
	c->pvq = kube_workqueue_new("csi-attacher-pv", o->retry_start_ns, o->retry_max_ns);
	return c;
}

/* The queues are served (kube_workqueue_serve): threads come and go with the keys. */
static enum kube_work_result va_work(void *arg, const char *key)
{
	struct att_ctrl *c = arg;
	struct kube_obj *o = kube_store_get(kube_informer_store(c->va_inf), NULL, key);
	const struct kube_va *va = kube_va_of(o);
	enum att_result r = ATT_DONE;

	if (!va)
		KLOG_V(3, "VA %s deleted, ignoring", LOGQ(key));
	else if (!ours(c, va))
		KLOG_V(4, "Skipping VolumeAttachment %s for attacher %s", LOGQ(key),
		       LOGQ(va->attacher));
	else
		r = c->o.handler->sync_va(c, va);
	kube_obj_unref(o);
	return (enum kube_work_result)r;
}

static enum kube_work_result pv_work(void *arg, const char *key)
{
	struct att_ctrl *c = arg;
	struct kube_obj *o = kube_store_get(kube_informer_store(c->pv_inf), NULL, key);
	const struct kube_pv *pv = kube_pv_of(o);
	enum att_result r = pv ? c->o.handler->sync_pv(c, pv) : ATT_DONE;

	kube_obj_unref(o);
	return (enum kube_work_result)r;
}

int att_ctrl_start(struct att_ctrl *c, char *err, size_t errlen)
{
	struct kube_informer *infs[] = { c->va_inf, c->pv_inf, c->csinode_inf };
	struct kube_stop stop = { .mu = &c->mu, .flag = &c->stop };

	if (kube_informers_start(infs, 3, err, errlen))
		return -1;
	KLOG_I("Starting CSI attacher");
	/* Wait for the caches before the first decision, as upstream's WaitForCacheSync. */
	if (kube_informers_wait_synced(infs, 3, "the VolumeAttachment, PersistentVolume and CSINode caches",
				       &stop, 0, err, errlen))
		return -1;
	/* The initial LISTs parsed whole pages of JSON; give those freed pages back to the kernel
	 * so the steady-state footprint is the compact records, not the sync's high-water mark. */
	malloc_trim(0);
	int rc = 0;
	char why[200];
	/* The reconciler first: a burst of keys may take every thread the system allows. */
	if (c->o.reconcile_ns > 0 && c->o.csi) {
		rc = pthread_create(&c->reconciler, NULL, att_reconciler_main, c);
		if (rc)
			snprintf(err, errlen, "cannot start the reconciler thread: %s", strerror(rc));
		c->reconciler_running = rc == 0;
	}
	struct kube_serve serve[] = { { c->vaq, c->o.workers, va_work, c },
				      { c->pvq, c->o.workers, pv_work, c } };
	if (!rc && kube_workqueue_serve(serve, 2, KUBE_WORKER_IDLE_NS, why, sizeof(why))) {
		snprintf(err, errlen, "%s (-worker-threads=%d)", why, c->o.workers);
		rc = -1;
	}
	if (rc) {
		/* Join what did start, so the caller can free the controller. */
		att_ctrl_stop(c);
		return -1;
	}
	return 0;
}

void att_ctrl_stop(struct att_ctrl *c)
{
	struct kube_informer *infs[] = { c->va_inf, c->pv_inf, c->csinode_inf };

	pthread_mutex_lock(&c->mu);
	c->stop = true;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->mu);
	kube_informers_stop(infs, 3);
	kube_workqueue_shutdown(c->vaq);
	kube_workqueue_shutdown(c->pvq);
	kube_workqueue_wait_workers(c->vaq);
	kube_workqueue_wait_workers(c->pvq);
	if (c->reconciler_running)
		pthread_join(c->reconciler, NULL);
	c->reconciler_running = false;
	KLOG_I("Shutting CSI attacher");
}

void att_ctrl_free(struct att_ctrl *c)
{
	if (!c)
		return;
	kube_informer_free(c->va_inf);
	kube_informer_free(c->pv_inf);
	kube_informer_free(c->csinode_inf);
	kube_workqueue_free(c->vaq);
	kube_workqueue_free(c->pvq);
	kube_hmap_clear(&c->force_sync);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->cond);
	free(c);
}
