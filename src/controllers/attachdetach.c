/*
 * attachdetach: seed 002's controller for CSI volumes, with Kubernetes' behaviour (see ad.h).
 *
 * One loop thread runs seed 002's loop at most every 100 ms (upstream's reconciler period) and
 * whenever an informer reports a change:
 *   Fetch      the desired state is rebuilt from the informer caches each pass (pods -> claims ->
 *              PVs -> CSIDriver), so nothing drifts from what the API says;
 *   Reconcile  operations that finished since the last pass update the actual state; ad_plan()
 *              decides detaches, then attaches;
 *   Act        attaches and detaches go to a bounded pool of workers that make the API call
 *              (create or delete the VolumeAttachment); the operation then waits, without holding
 *              a worker, for the VolumeAttachment to report attached / attachError, or to vanish /
 *              report detachError; one operation per volume at a time, exponential backoff
 *              (500 ms .. 2m2s) after a failure;
 *   Persist    Node.status.volumesAttached is written for every node whose attached set changed;
 *              a volume leaves that list (and the write must succeed) before its detach starts,
 *              so the node agent never uses a volume it was not told about.
 * At start-up the actual state is read back from Node.status.volumesAttached and from the
 * VolumeAttachments (attached ones are attached; others are "uncertain": detached if no pod
 * wants them, attached again if one does), so a restart resumes where it stopped.
 *
 * Every periodic sync (--attach-detach-reconcile-sync-period) checks each attached pair against
 * its VolumeAttachment and forgets pairs whose attachment vanished, so they are attached again.
 *
 * Locking: `mu` guards the actual state, the operations and the node-status set; the informer
 * handlers take it only to flip flags. API calls are made without it.
 */
#include "controllers/ad.h"
#include "controllers/cm.h"

#include "base/log.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "kube/hmap.h"
#include "kube/objects.h"
#include "kube/store.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AD_LOOP_PERIOD_NS (100 * NSEC_PER_MSEC)
#define AD_OP_TIMEOUT_NS (2 * NSEC_PER_MIN) /* the CSI plugin's wait for a VolumeAttachment */
#define AD_BACKOFF_START_NS (500 * NSEC_PER_MSEC)
#define AD_BACKOFF_MAX_NS (122 * NSEC_PER_SEC)

/* One (volume, node) pair of the actual state. Key: "<uniq>\n<node>". */
struct ad_entry {
	char *uniq, *node, *driver, *handle, *pv;
	uint8_t state; /* enum ad_attach_state */
	bool mounted;
	bool reported; /* listed in the node's status.volumesAttached (or about to be) */
	int64_t detach_requested_ns;
};

enum op_kind { OP_ATTACH, OP_DETACH };
enum op_phase { OP_QUEUED, OP_WAITING, OP_GONE, OP_FAILED };

/* An operation on one volume (key: uniq), from dispatch until the loop sees it finish. */
struct ad_op {
	struct ad_op *next; /* worker queue */
	uint8_t kind, phase, forced;
	bool worked; /* the worker made its API call: the loop may look at phase */
	char *uniq, *node, *driver, *handle, *pv;
	char va[80];
	char err[512];
	int64_t started_ns;
	struct kube_obj **pods; /* attach: the pods to tell (references) */
	size_t npods;
};

struct ad_backoff {
	int64_t until_ns, delay_ns;
};

/* A desired pair built by one pass, with the pods that want it. */
struct ad_want {
	struct ad_desired d;
	char *uniq, *node, *driver, *handle, *pv;
	struct kube_obj **pods;
	size_t npods, cap;
};

struct ad_ctrl {
	struct cm_ctx *cm;
	enum ad_va_naming naming;
	int64_t sync_ns, max_wait_ns;
	bool sync_enabled;
	int nworkers;

	pthread_mutex_t mu;
	pthread_cond_t wake, work;
	bool dirty, stop, started;
	struct kube_hmap actual;  /* pair key -> struct ad_entry */
	struct kube_hmap ops;     /* uniq -> struct ad_op */
	struct kube_hmap backoff; /* uniq -> struct ad_backoff */
	struct kube_hmap nodes_dirty;  /* node -> (void *)1: volumesAttached must be written */
	struct kube_hmap multi_told;   /* "<pod uid>\n<uniq>" -> pass number last told */
	uint64_t pass;
	struct ad_op *qhead, *qtail;
	pthread_t loop;
	pthread_t *workers;

	/* Counters for /metrics. */
	atomic_ullong attach_ok, attach_failed, detach_ok, detach_failed, forced_timeout,
		forced_oos, multi_attach, status_writes;
	atomic_ulong ndesired, nactual;
};

/* ---- small helpers ---- */

static void pair_key(const char *uniq, const char *node, char *buf, size_t len)
{
	snprintf(buf, len, "%s\n%s", uniq, node);
}

static void kick(void *ud)
{
	struct ad_ctrl *c = ud;

	pthread_mutex_lock(&c->mu);
	c->dirty = true;
	pthread_cond_signal(&c->wake);
	pthread_mutex_unlock(&c->mu);
}

static char *dup_or_null(const char *s) { return s ? xstrdup(s) : NULL; }

static void entry_free(struct ad_entry *e)
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

static void op_free(struct ad_op *op)
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

static void want_free(struct ad_want *w, size_t n)
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

static bool node_uses(const struct kube_node *n, const char *uniq)
{
	for (uint16_t i = 0; n && i < n->nvolumes_in_use; i++)
		if (!strcmp(n->volumes_in_use[i], uniq))
			return true;
	return false;
}

/* Adds or updates a pair of the actual state (mu held). */
static struct ad_entry *entry_put(struct ad_ctrl *c, const char *uniq, const char *node,
				  const char *driver, const char *handle, const char *pv)
{
	char key[1024];
	struct ad_entry *e;

	pair_key(uniq, node, key, sizeof(key));
	e = kube_hmap_get(&c->actual, key);
	if (!e) {
		e = xcalloc(1, sizeof(*e));
		e->uniq = xstrdup(uniq);
		e->node = xstrdup(node);
		e->driver = xstrdup(driver);
		e->handle = xstrdup(handle);
		kube_hmap_put(&c->actual, key, e);
	}
	if (pv && (!e->pv || strcmp(e->pv, pv))) {
		free(e->pv);
		e->pv = xstrdup(pv);
	}
	return e;
}

static void entry_del(struct ad_ctrl *c, const char *uniq, const char *node)
{
	char key[1024];

	pair_key(uniq, node, key, sizeof(key));
	entry_free(kube_hmap_del(&c->actual, key));
}

static void mark_node(struct ad_ctrl *c, const char *node)
{
	kube_hmap_put(&c->nodes_dirty, node, (void *)1);
}

static void pod_event(struct ad_ctrl *c, const struct kube_obj *pod, enum kube_event_type type,
		      const char *reason, const char *msg)
{
	struct kube_objref ref;
	char uid[64];

	kube_objref_of(pod, &ref, uid, sizeof(uid));
	kube_event(c->cm->rec, &ref, type, reason, "%s", msg);
}

/* ---- Fetch: the desired state from the caches ---- */

static struct ad_want *want_find(struct ad_want *w, size_t n, struct kube_hmap *idx,
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
static struct ad_want *build_desired(struct ad_ctrl *c, size_t *nout)
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

		if (!p || !p->node_name || !p->nvolumes || kube_pod_terminated(p) || p->meta.deletion_ts)
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
			pair_key(uniq, p->node_name, key, sizeof(key));
			x = want_find(w, n, &idx, key);
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

/* ---- Act: operations ---- */

static void enqueue_op(struct ad_ctrl *c, struct ad_op *op)
{
	op->started_ns = mono_now_ns();
	kube_hmap_put(&c->ops, op->uniq, op);
	op->next = NULL;
	if (c->qtail)
		c->qtail->next = op;
	else
		c->qhead = op;
	c->qtail = op;
	pthread_cond_signal(&c->work);
}

static void do_attach(struct ad_ctrl *c, struct ad_op *op)
{
	struct kube_err e;
	json_t *va = json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:s, s:{s:s}}}",
			       "apiVersion", "storage.k8s.io/v1", "kind", "VolumeAttachment",
			       "metadata", "name", op->va,
			       "spec", "attacher", op->driver, "nodeName", op->node,
			       "source", "persistentVolumeName", op->pv);
	json_t *r = kube_create(c->cm->kc, &KUBE_RES_VOLUMEATTACHMENTS, NULL, va, &e);

	json_decref(va);
	if (r || kube_err_is_already_exists(&e)) {
		KLOG_V(4, "VolumeAttachment %s for volume \"%s\" on node \"%s\" %s", op->va, op->uniq,
		       op->node, r ? "created" : "already exists");
		json_decref(r);
		op->phase = OP_WAITING;
		return;
	}
	snprintf(op->err, sizeof(op->err), "%s", e.message);
	op->phase = OP_FAILED;
}

static void do_detach(struct ad_ctrl *c, struct ad_op *op)
{
	struct kube_err e;

	if (kube_delete(c->cm->kc, &KUBE_RES_VOLUMEATTACHMENTS, NULL, op->va, NULL, NULL, &e) == 0) {
		op->phase = OP_WAITING;
		return;
	}
	if (kube_err_is_not_found(&e)) {
		op->phase = OP_GONE;
		return;
	}
	snprintf(op->err, sizeof(op->err), "%s", e.message);
	op->phase = OP_FAILED;
}

static void *worker_main(void *arg)
{
	struct ad_ctrl *c = arg;

	pthread_mutex_lock(&c->mu);
	for (;;) {
		while (!c->qhead && !c->stop)
			pthread_cond_wait(&c->work, &c->mu);
		if (c->stop)
			break;
		struct ad_op *op = c->qhead;
		c->qhead = op->next;
		if (!c->qhead)
			c->qtail = NULL;
		pthread_mutex_unlock(&c->mu);
		/* The op stays in c->ops while we work: only this thread touches its fields. */
		if (op->kind == OP_ATTACH)
			do_attach(c, op);
		else
			do_detach(c, op);
		pthread_mutex_lock(&c->mu);
		op->worked = true;
		c->dirty = true;
		pthread_cond_signal(&c->wake);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

static void backoff_fail(struct ad_ctrl *c, const char *uniq)
{
	struct ad_backoff *b = kube_hmap_get(&c->backoff, uniq);

	if (!b) {
		b = xcalloc(1, sizeof(*b));
		b->delay_ns = AD_BACKOFF_START_NS;
		kube_hmap_put(&c->backoff, uniq, b);
	} else {
		b->delay_ns = b->delay_ns * 2 > AD_BACKOFF_MAX_NS ? AD_BACKOFF_MAX_NS : b->delay_ns * 2;
	}
	b->until_ns = mono_now_ns() + b->delay_ns;
}

static void backoff_forget(struct ad_ctrl *c, const char *uniq)
{
	free(kube_hmap_del(&c->backoff, uniq));
}

static void attach_done(struct ad_ctrl *c, struct ad_op *op, const char *err)
{
	char msg[1024];
	struct ad_entry *e = entry_put(c, op->uniq, op->node, op->driver, op->handle, op->pv);

	if (!err) {
		e->state = AD_ATTACHED;
		e->mounted = true; /* assumed until the node says otherwise, as upstream */
		e->reported = true;
		e->detach_requested_ns = 0;
		mark_node(c, op->node);
		backoff_forget(c, op->uniq);
		atomic_fetch_add(&c->attach_ok, 1);
		KLOG_I("AttachVolume.Attach succeeded for volume \"%s\" (UniqueName: \"%s\") from node \"%s\"",
		       op->pv, op->uniq, op->node);
		snprintf(msg, sizeof(msg), "AttachVolume.Attach succeeded for volume \"%s\" ", op->pv);
		for (size_t i = 0; i < op->npods; i++)
			pod_event(c, op->pods[i], KUBE_EVENT_NORMAL, "SuccessfulAttachVolume", msg);
		return;
	}
	/* The VolumeAttachment may exist: remember the pair as uncertain so that it is detached if
	 * nobody wants it any more, and attached again (after the backoff) if someone does. */
	if (e->state != AD_ATTACHED)
		e->state = AD_UNCERTAIN;
	backoff_fail(c, op->uniq);
	atomic_fetch_add(&c->attach_failed, 1);
	KLOG_E("AttachVolume.Attach failed for volume \"%s\" (UniqueName: \"%s\") from node \"%s\": %s",
	       op->pv, op->uniq, op->node, err);
	snprintf(msg, sizeof(msg), "AttachVolume.Attach failed for volume \"%s\" : %s", op->pv, err);
	for (size_t i = 0; i < op->npods; i++)
		pod_event(c, op->pods[i], KUBE_EVENT_WARNING, "FailedAttachVolume", msg);
}

static void detach_done(struct ad_ctrl *c, struct ad_op *op, const char *err)
{
	char key[1024];
	struct ad_entry *e;

	if (!err) {
		entry_del(c, op->uniq, op->node);
		mark_node(c, op->node);
		backoff_forget(c, op->uniq);
		atomic_fetch_add(&c->detach_ok, 1);
		KLOG_I("DetachVolume.Detach succeeded for volume \"%s\" (UniqueName: \"%s\") on node \"%s\"",
		       op->pv ? op->pv : "", op->uniq, op->node);
		return;
	}
	pair_key(op->uniq, op->node, key, sizeof(key));
	e = kube_hmap_get(&c->actual, key);
	if (e && e->state == AD_ATTACHED) {
		e->reported = true; /* still attached: the node must know */
		mark_node(c, op->node);
	}
	backoff_fail(c, op->uniq);
	atomic_fetch_add(&c->detach_failed, 1);
	KLOG_E("DetachVolume.Detach failed for volume \"%s\" (UniqueName: \"%s\") on node \"%s\": %s",
	       op->pv ? op->pv : "", op->uniq, op->node, err);
}

/* Reconcile, first step: finish the operations whose outcome is known (mu held). */
static void finish_ops(struct ad_ctrl *c, int64_t now)
{
	struct kube_store *vas = cm_store(c->cm, CM_VAS);
	struct ad_op **done = NULL;
	size_t ndone = 0;

	for (size_t i = 0; i < c->ops.cap; i++) {
		struct ad_op *op = c->ops.slots[i].value;
		const char *err = NULL;
		bool finished = false;

		if (!c->ops.slots[i].key || !op->worked)
			continue; /* queued or being worked on */
		if (op->phase == OP_FAILED) {
			err = op->err;
			finished = true;
		} else if (op->phase == OP_GONE) {
			finished = true;
		} else {
			struct kube_obj *o = kube_store_get(vas, NULL, op->va);
			const struct kube_va *va = kube_va_of(o);

			if (op->kind == OP_ATTACH) {
				if (va && va->meta.deletion_ts)
					err = "volume attachment is being deleted", finished = true;
				else if (va && va->attached)
					finished = true;
				else if (va && va->attach_error)
					snprintf(op->err, sizeof(op->err), "rpc error: %s", va->attach_error),
						err = op->err, finished = true;
			} else {
				if (!va)
					finished = true;
				else if (va->detach_error)
					snprintf(op->err, sizeof(op->err), "rpc error: %s", va->detach_error),
						err = op->err, finished = true;
			}
			kube_obj_unref(o);
			if (!finished && now - op->started_ns > AD_OP_TIMEOUT_NS) {
				snprintf(op->err, sizeof(op->err), "timed out waiting for VolumeAttachment %s",
					 op->va);
				err = op->err;
				finished = true;
			}
		}
		if (!finished)
			continue;
		if (op->kind == OP_ATTACH)
			attach_done(c, op, err);
		else
			detach_done(c, op, err);
		done = xrealloc(done, (ndone + 1) * sizeof(*done));
		done[ndone++] = op;
	}
	for (size_t i = 0; i < ndone; i++) {
		kube_hmap_del(&c->ops, done[i]->uniq);
		op_free(done[i]);
	}
	free(done);
}

struct plan_ud {
	struct ad_ctrl *c;
	int64_t now;
};

static bool plan_busy(const char *uniq, void *ud)
{
	struct plan_ud *p = ud;
	struct ad_backoff *b;

	if (kube_hmap_has(&p->c->ops, uniq))
		return true;
	b = kube_hmap_get(&p->c->backoff, uniq);
	return b && b->until_ns > p->now;
}

static void plan_health(const char *node, struct ad_node_health *h, void *ud)
{
	struct plan_ud *p = ud;
	struct kube_obj *o = kube_store_get(cm_store(p->c->cm, CM_NODES), NULL, node);
	const struct kube_node *n = kube_node_of(o);

	h->ready = n && n->ready == KUBE_COND_TRUE;
	h->out_of_service = n && n->out_of_service;
	kube_obj_unref(o);
}

/* The Multi-Attach event, worded as the upstream reconciler words it. */
static void multi_attach_event(struct ad_ctrl *c, struct ad_want *w, size_t nw, size_t i)
{
	const struct ad_want *x = &w[i];
	char key[1100], uid[64];

	for (size_t p = 0; p < x->npods; p++) {
		const struct kube_obj *pod = x->pods[p];
		struct strbuf others;
		bool told;

		kube_obj_uid(pod, uid, sizeof(uid));
		snprintf(key, sizeof(key), "%s\n%s", uid, x->uniq);
		told = kube_hmap_has(&c->multi_told, key);
		kube_hmap_put(&c->multi_told, key, (void *)(uintptr_t)c->pass);
		if (told)
			continue;
		strbuf_init(&others, 64);
		for (size_t j = 0; j < nw; j++) {
			if (j == i || strcmp(w[j].uniq, x->uniq) || !strcmp(w[j].node, x->node))
				continue;
			for (size_t q = 0; q < w[j].npods; q++) {
				if (!w[j].pods[q]->ns || strcmp(w[j].pods[q]->ns, pod->ns))
					continue;
				if (others.len)
					strbuf_addstr(&others, ", ");
				strbuf_addstr(&others, w[j].pods[q]->name);
			}
		}
		char msg[2048];
		if (others.len)
			snprintf(msg, sizeof(msg),
				 "Multi-Attach error for volume \"%s\" Volume is already used by pod(s) %s",
				 x->pv, others.buf);
		else
			snprintf(msg, sizeof(msg),
				 "Multi-Attach error for volume \"%s\" Volume is already exclusively attached to one node and can't be attached to another",
				 x->pv);
		strbuf_release(&others);
		atomic_fetch_add(&c->multi_attach, 1);
		KLOG_W("%s (pod %s/%s, node \"%s\")", msg, pod->ns, pod->name, x->node);
		pod_event(c, pod, KUBE_EVENT_WARNING, "FailedAttachVolume", msg);
	}
}

/* Forgets Multi-Attach reports that did not repeat in this pass (mu held). */
static void prune_multi_told(struct ad_ctrl *c)
{
	char **stale = NULL;
	size_t n = 0;

	for (size_t i = 0; i < c->multi_told.cap; i++)
		if (c->multi_told.slots[i].key &&
		    (uint64_t)(uintptr_t)c->multi_told.slots[i].value != c->pass) {
			stale = xrealloc(stale, (n + 1) * sizeof(*stale));
			stale[n++] = xstrdup(c->multi_told.slots[i].key);
		}
	for (size_t i = 0; i < n; i++) {
		kube_hmap_del(&c->multi_told, stale[i]);
		free(stale[i]);
	}
	free(stale);
}

static struct ad_op *op_new(enum op_kind kind, const char *uniq, const char *node,
			    const char *driver, const char *handle, const char *pv)
{
	struct ad_op *op = xcalloc(1, sizeof(*op));

	op->kind = (uint8_t)kind;
	op->phase = OP_QUEUED;
	op->uniq = xstrdup(uniq);
	op->node = xstrdup(node);
	op->driver = xstrdup(driver);
	op->handle = xstrdup(handle);
	op->pv = dup_or_null(pv);
	return op;
}

/* ---- Persist: Node.status.volumesAttached ---- */

struct status_write {
	char *node;
	char *body;
	bool ok;
};

/* Snapshot of the node-status writes to make (mu held); clears the dirty set. */
static struct status_write *collect_status(struct ad_ctrl *c, size_t *nout)
{
	struct status_write *sw = NULL;
	size_t n = 0;

	for (size_t i = 0; i < c->nodes_dirty.cap; i++) {
		const char *node = c->nodes_dirty.slots[i].key;
		json_t *list, *patch;

		if (!node)
			continue;
		list = json_array();
		for (size_t j = 0; j < c->actual.cap; j++) {
			struct ad_entry *e = c->actual.slots[j].value;
			if (c->actual.slots[j].key && e->reported && e->state == AD_ATTACHED &&
			    !strcmp(e->node, node))
				json_array_append_new(list, json_pack("{s:s, s:s}", "name", e->uniq,
								      "devicePath", ""));
		}
		patch = json_pack("{s:{s:o}}", "status", "volumesAttached", list);
		sw = xrealloc(sw, (n + 1) * sizeof(*sw));
		sw[n].node = xstrdup(node);
		sw[n].body = json_dumps(patch, JSON_COMPACT | JSON_SORT_KEYS);
		sw[n].ok = false;
		n++;
		json_decref(patch);
	}
	kube_hmap_clear(&c->nodes_dirty);
	*nout = n;
	return sw;
}

static void write_status(struct ad_ctrl *c, struct status_write *sw, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct kube_err e;
		json_t *r = kube_patch(c->cm->kc, &KUBE_RES_NODES, NULL, sw[i].node, true,
				       KUBE_PATCH_MERGE, sw[i].body, &e);

		if (r || kube_err_is_not_found(&e)) {
			sw[i].ok = true; /* a deleted node has no status to keep */
			atomic_fetch_add(&c->status_writes, 1);
			KLOG_V(4, "Updating status for node \"%s\" succeeded: %s", sw[i].node, sw[i].body);
		} else {
			KLOG_E("Could not update node status for \"%s\": %s", sw[i].node, e.message);
		}
		json_decref(r);
	}
}

static bool status_ok(const struct status_write *sw, size_t n, const char *node)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(sw[i].node, node))
			return sw[i].ok;
	return true; /* nothing to write for this node */
}

/* ---- the loop ---- */

static void pass(struct ad_ctrl *c)
{
	size_t nw = 0, na = 0, nact, nsw = 0;
	struct ad_want *w = build_desired(c, &nw);
	struct ad_desired *desired = xcalloc(nw ? nw : 1, sizeof(*desired));
	struct ad_actual *actual;
	struct ad_entry **ents;
	struct ad_action *acts;
	struct ad_op **detaches;
	size_t ndetach = 0;
	struct status_write *sw;
	int64_t now = mono_now_ns();

	for (size_t i = 0; i < nw; i++)
		desired[i] = w[i].d;

	pthread_mutex_lock(&c->mu);
	c->pass++;
	finish_ops(c, now);
	actual = xcalloc(c->actual.len ? c->actual.len : 1, sizeof(*actual));
	ents = xcalloc(c->actual.len ? c->actual.len : 1, sizeof(*ents));
	for (size_t i = 0; i < c->actual.cap; i++) {
		struct ad_entry *e = c->actual.slots[i].value;
		if (!c->actual.slots[i].key)
			continue;
		ents[na] = e;
		actual[na++] = (struct ad_actual){ e->uniq, e->node, e->state, e->mounted,
						   e->detach_requested_ns };
	}
	struct plan_ud pu = { c, now };
	struct ad_plan_in in = { desired, nw, actual, na, plan_busy, plan_health, &pu, now,
				 c->max_wait_ns };
	acts = xcalloc(nw + na + 1, sizeof(*acts));
	detaches = xcalloc(na + 1, sizeof(*detaches));
	nact = ad_plan(&in, acts, nw + na + 1);
	for (size_t i = 0; i < na; i++)
		ents[i]->detach_requested_ns = actual[i].detach_requested_ns;
	atomic_store(&c->ndesired, nw);
	atomic_store(&c->nactual, na);

	for (size_t k = 0; k < nact; k++) {
		const struct ad_action *a = &acts[k];

		if (a->kind == AD_ACT_WAIT_UNMOUNT) {
			KLOG_V(5, "Cannot detach volume \"%s\" from node \"%s\" yet: still mounted",
			       ents[a->index]->uniq, ents[a->index]->node);
		} else if (a->kind == AD_ACT_MULTI_ATTACH) {
			multi_attach_event(c, w, nw, a->index);
		} else if (a->kind == AD_ACT_DETACH) {
			struct ad_entry *e = ents[a->index];
			struct ad_op *op = op_new(OP_DETACH, e->uniq, e->node, e->driver, e->handle, e->pv);

			op->forced = a->forced;
			if (a->forced == AD_FORCE_TIMEOUT) {
				atomic_fetch_add(&c->forced_timeout, 1);
				KLOG_W("attacherDetacher.DetachVolume started: node \"%s\" is not Ready and volume \"%s\" was not unmounted within %llds: force detaching",
				       e->node, e->uniq, (long long)(c->max_wait_ns / NSEC_PER_SEC));
			} else if (a->forced == AD_FORCE_OUT_OF_SERVICE) {
				atomic_fetch_add(&c->forced_oos, 1);
				KLOG_W("attacherDetacher.DetachVolume started: node \"%s\" has the out-of-service taint: force detaching volume \"%s\"",
				       e->node, e->uniq);
			} else {
				KLOG_V(2, "attacherDetacher.DetachVolume started for volume \"%s\" on node \"%s\"",
				       e->uniq, e->node);
			}
			if (e->reported) { /* the node hears first, then the detach starts */
				e->reported = false;
				mark_node(c, e->node);
			}
			detaches[ndetach++] = op;
		} else { /* AD_ACT_ATTACH */
			struct ad_want *x = &w[a->index];
			struct ad_op *op = op_new(OP_ATTACH, x->uniq, x->node, x->driver, x->handle, x->pv);

			ad_va_name(c->naming, x->driver, x->handle, x->pv, x->node, op->va, sizeof(op->va));
			op->pods = x->pods;
			op->npods = x->npods;
			x->pods = NULL;
			x->npods = 0;
			KLOG_V(2, "attacherDetacher.AttachVolume started for volume \"%s\" (UniqueName: \"%s\") to node \"%s\"",
			       x->pv, x->uniq, x->node);
			enqueue_op(c, op);
		}
	}
	prune_multi_told(c);
	sw = collect_status(c, &nsw);
	pthread_mutex_unlock(&c->mu);

	write_status(c, sw, nsw);

	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; i < ndetach; i++) {
		struct ad_op *op = detaches[i];

		if (!status_ok(sw, nsw, op->node)) {
			/* Retry next pass; the pair stays out of volumesAttached meanwhile. */
			mark_node(c, op->node);
			op_free(op);
			continue;
		}
		ad_va_name(c->naming, op->driver, op->handle, op->pv, op->node, op->va, sizeof(op->va));
		enqueue_op(c, op);
	}
	for (size_t i = 0; i < nsw; i++)
		if (!sw[i].ok)
			mark_node(c, sw[i].node);
	pthread_mutex_unlock(&c->mu);

	for (size_t i = 0; i < nsw; i++) {
		free(sw[i].node);
		free(sw[i].body);
	}
	free(sw);
	free(detaches);
	free(acts);
	free(ents);
	free(actual);
	free(desired);
	want_free(w, nw);
}

/*
 * Periodic sync: an attached pair whose VolumeAttachment vanished or stopped reporting attached
 * is forgotten, so that it is attached again if a pod wants it (upstream's syncStates).
 */
static void sync_states(struct ad_ctrl *c)
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
			mark_node(c, e->node);
		}
		kube_obj_unref(o);
	}
	for (size_t i = 0; i < n; i++) {
		entry_free(kube_hmap_del(&c->actual, gone[i]));
		free(gone[i]);
	}
	free(gone);
	c->dirty = true;
	pthread_mutex_unlock(&c->mu);
}

/* Start-up: the actual state from Node.status.volumesAttached and the VolumeAttachments. */
static void populate_actual(struct ad_ctrl *c)
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

		for (uint16_t j = 0; n && j < n->nvolumes_attached; j++) {
			const char *u = n->volumes_attached[j].name;
			struct ad_entry *e;

			if (!u || ad_parse_unique_name(u, drv, sizeof(drv), handle, sizeof(handle)))
				continue;
			e = entry_put(c, u, n->meta.name, drv, handle, kube_hmap_get(&pv_by_uniq, u));
			e->state = AD_ATTACHED;
			e->reported = true;
			e->mounted = node_uses(n, u);
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
		po = kube_store_get(pvs, NULL, va->pv_name);
		pv = kube_pv_of(po);
		if (!pv || !pv->driver || !pv->volume_handle || strcmp(pv->driver, va->attacher)) {
			kube_obj_unref(po);
			continue;
		}
		ad_unique_name(pv->driver, pv->volume_handle, uniq, sizeof(uniq));
		pair_key(uniq, va->node_name, key, sizeof(key));
		if (kube_hmap_has(&c->actual, key)) {
			kube_obj_unref(po);
			continue;
		}
		no = kube_store_get(nodes, NULL, va->node_name);
		e = entry_put(c, uniq, va->node_name, pv->driver, pv->volume_handle, pv->meta.name);
		e->state = va->attached ? AD_ATTACHED : AD_UNCERTAIN;
		e->reported = va->attached;
		e->mounted = node_uses(kube_node_of(no), uniq);
		if (va->attached)
			mark_node(c, va->node_name);
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

static void *loop_main(void *arg)
{
	struct ad_ctrl *c = arg;
	int64_t last_sync = mono_now_ns(), last_pass = 0;

	populate_actual(c);
	for (;;) {
		pthread_mutex_lock(&c->mu);
		/* At most one pass per loop period; without news, one a second (timers). */
		struct timespec ts = wall_deadline(NSEC_PER_SEC);
		while (!c->stop && !c->dirty) {
			if (pthread_cond_timedwait(&c->wake, &c->mu, &ts))
				break;
		}
		bool stop = c->stop;
		c->dirty = false;
		pthread_mutex_unlock(&c->mu);
		if (stop)
			break;
		int64_t since = mono_now_ns() - last_pass;
		if (since < AD_LOOP_PERIOD_NS)
			sleep_ns(AD_LOOP_PERIOD_NS - since);
		last_pass = mono_now_ns();
		pass(c);
		if (c->sync_enabled && mono_now_ns() - last_sync >= c->sync_ns) {
			sync_states(c);
			last_sync = mono_now_ns();
		}
	}
	return NULL;
}

/* ---- informer handlers ---- */

/* A node changed: its volumesInUse says which attached volumes are mounted (upstream's
 * processVolumesInUse). */
static void node_changed(const struct kube_obj *obj, struct ad_ctrl *c)
{
	const struct kube_node *n = kube_node_of(obj);

	if (!n)
		return;
	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; i < c->actual.cap; i++) {
		struct ad_entry *e = c->actual.slots[i].value;
		if (c->actual.slots[i].key && !strcmp(e->node, n->meta.name))
			e->mounted = node_uses(n, e->uniq);
	}
	c->dirty = true;
	pthread_cond_signal(&c->wake);
	pthread_mutex_unlock(&c->mu);
}

static void node_add(const struct kube_obj *obj, void *ud) { node_changed(obj, ud); }
static void node_update(const struct kube_obj *old, const struct kube_obj *obj, void *ud)
{
	(void)old;
	node_changed(obj, ud);
}
static void node_delete(const struct kube_obj *last, void *ud)
{
	(void)last;
	kick(ud);
}

/* ---- life cycle ---- */

static void *ad_init(struct cm_ctx *cm)
{
	struct ad_ctrl *c = xcalloc(1, sizeof(*c));
	const struct cm_config *cfg = cm->cfg;
	struct kube_handlers nh = { node_add, node_update, node_delete, c };

	c->cm = cm;
	if (!strcmp(cfg->va_naming, "seed"))
		c->naming = AD_NAMING_SEED;
	else if (!strcmp(cfg->va_naming, "kubernetes"))
		c->naming = AD_NAMING_KUBERNETES;
	else {
		KLOG_E("--va-naming must be \"kubernetes\" or \"seed\", not \"%s\"", cfg->va_naming);
		free(c);
		return NULL;
	}
	c->sync_ns = cfg->ad_sync_ns;
	c->sync_enabled = !cfg->ad_disable_sync;
	if (c->sync_enabled && c->sync_ns <= 0) {
		KLOG_E("--attach-detach-reconcile-sync-period must be positive");
		free(c);
		return NULL;
	}
	c->max_wait_ns = cfg->ad_max_wait_ns;
	c->nworkers = cfg->ad_workers > 0 ? cfg->ad_workers : 10;
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->wake, NULL);
	pthread_cond_init(&c->work, NULL);
	kube_informer_add_handlers(cm_informer(cm, CM_NODES), &nh);
	cm_on_any_change(cm, CM_PODS, kick, c);
	cm_on_any_change(cm, CM_PVCS, kick, c);
	cm_on_any_change(cm, CM_PVS, kick, c);
	cm_on_any_change(cm, CM_VAS, kick, c);
	cm_on_any_change(cm, CM_CSIDRIVERS, kick, c);
	return c;
}

static int ad_start(void *self)
{
	struct ad_ctrl *c = self;

	c->workers = xcalloc((size_t)c->nworkers, sizeof(*c->workers));
	for (int i = 0; i < c->nworkers; i++)
		if (pthread_create(&c->workers[i], NULL, worker_main, c))
			return -1;
	if (pthread_create(&c->loop, NULL, loop_main, c))
		return -1;
	c->started = true;
	KLOG_I("Started attachdetach controller: %d workers, sync every %llds%s, max wait for unmount %llds",
	       c->nworkers, (long long)(c->sync_ns / NSEC_PER_SEC),
	       c->sync_enabled ? "" : " (disabled)", (long long)(c->max_wait_ns / NSEC_PER_SEC));
	return 0;
}

static void ad_stop(void *self)
{
	struct ad_ctrl *c = self;

	if (!c->started)
		return;
	pthread_mutex_lock(&c->mu);
	c->stop = true;
	pthread_cond_broadcast(&c->wake);
	pthread_cond_broadcast(&c->work);
	pthread_mutex_unlock(&c->mu);
	pthread_join(c->loop, NULL);
	for (int i = 0; i < c->nworkers; i++)
		pthread_join(c->workers[i], NULL);
	c->started = false;
}

static void ad_free(void *self)
{
	struct ad_ctrl *c = self;

	for (size_t i = 0; i < c->actual.cap; i++)
		if (c->actual.slots[i].key)
			entry_free(c->actual.slots[i].value);
	for (size_t i = 0; i < c->ops.cap; i++)
		if (c->ops.slots[i].key)
			op_free(c->ops.slots[i].value);
	for (size_t i = 0; i < c->backoff.cap; i++)
		if (c->backoff.slots[i].key)
			free(c->backoff.slots[i].value);
	kube_hmap_clear(&c->actual);
	kube_hmap_clear(&c->ops);
	kube_hmap_clear(&c->backoff);
	kube_hmap_clear(&c->nodes_dirty);
	kube_hmap_clear(&c->multi_told);
	free(c->workers);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->wake);
	pthread_cond_destroy(&c->work);
	free(c);
}

static void ad_metrics(void *self, struct strbuf *out)
{
	struct ad_ctrl *c = self;

	strbuf_addf(out,
		    "# HELP attachdetach_controller_total_volumes Number of volumes in A/D Controller\n"
		    "# TYPE attachdetach_controller_total_volumes gauge\n"
		    "attachdetach_controller_total_volumes{plugin_name=\"kubernetes.io/csi\",state=\"actual_state_of_world\"} %lu\n"
		    "attachdetach_controller_total_volumes{plugin_name=\"kubernetes.io/csi\",state=\"desired_state_of_world\"} %lu\n",
		    (unsigned long)atomic_load(&c->nactual), (unsigned long)atomic_load(&c->ndesired));
	strbuf_addf(out,
		    "# HELP attachdetach_controller_forced_detaches Number of times the A/D Controller performed a forced detach\n"
		    "# TYPE attachdetach_controller_forced_detaches counter\n"
		    "attachdetach_controller_forced_detaches{reason=\"timeout\"} %llu\n"
		    "attachdetach_controller_forced_detaches{reason=\"out-of-service\"} %llu\n",
		    atomic_load(&c->forced_timeout), atomic_load(&c->forced_oos));
	strbuf_addf(out,
		    "# HELP kcsi_attachdetach_operations_total Attach and detach operations finished, by result\n"
		    "# TYPE kcsi_attachdetach_operations_total counter\n"
		    "kcsi_attachdetach_operations_total{operation=\"attach\",result=\"success\"} %llu\n"
		    "kcsi_attachdetach_operations_total{operation=\"attach\",result=\"failure\"} %llu\n"
		    "kcsi_attachdetach_operations_total{operation=\"detach\",result=\"success\"} %llu\n"
		    "kcsi_attachdetach_operations_total{operation=\"detach\",result=\"failure\"} %llu\n"
		    "# HELP kcsi_attachdetach_multi_attach_errors_total Multi-Attach errors reported on pods\n"
		    "# TYPE kcsi_attachdetach_multi_attach_errors_total counter\n"
		    "kcsi_attachdetach_multi_attach_errors_total %llu\n"
		    "# HELP kcsi_attachdetach_node_status_writes_total Node.status.volumesAttached writes\n"
		    "# TYPE kcsi_attachdetach_node_status_writes_total counter\n"
		    "kcsi_attachdetach_node_status_writes_total %llu\n",
		    atomic_load(&c->attach_ok), atomic_load(&c->attach_failed), atomic_load(&c->detach_ok),
		    atomic_load(&c->detach_failed), atomic_load(&c->multi_attach),
		    atomic_load(&c->status_writes));
}

const struct cm_controller cm_attachdetach = {
	.name = "attachdetach", .default_on = true,
	.init = ad_init, .start = ad_start, .stop = ad_stop, .free = ad_free, .metrics = ad_metrics,
};
