/*
 * volume-scheduler: places pending pods on nodes in emulated clusters, where no kube-scheduler
 * runs, with the volume rules of kube-scheduler's VolumeBinding plugin. Off in "*"; enable it with
 * --controllers='*,volume-scheduler'.
 *
 * A pod is ours when it has no spec.nodeName, its schedulerName is --scheduler-name (or empty),
 * and it is neither terminated nor being deleted. First the pod itself (kube-scheduler's
 * PreFilter, vs_prefilter()): every claim it names exists, is not Lost nor being deleted, and is
 * bound unless its class is WaitForFirstConsumer. Then a node fits when it is Ready, schedulable,
 * tolerated, matches the pod's nodeSelector, has room for one more pod and the pod's volumes
 * (attach limits), no other scheduled pod uses a ReadWriteOncePod claim of the pod
 * (VolumeRestrictions: on any node, so no node fits while one does; a pod placed by hand with
 * spec.nodeName is kcsi-node's and the driver's to refuse), and for the claims:
 *   - a bound claim: the PV exists and its nodeAffinity admits the node;
 *   - an unbound claim of a WaitForFirstConsumer class: the node is the one already chosen
 *     (volume.kubernetes.io/selected-node), or, when none is, it is in the class's
 *     allowedTopologies and, if CSIStorageCapacity objects exist for the class, one of those that
 *     covers the node has room for the request.
 * Among fitting nodes the one running the fewest pods wins (ties: name order), which spreads
 * pods. The chosen node goes into selected-node of the WaitForFirstConsumer claims that have none;
 * the pod is bound (POST pods/<name>/binding, or a spec.nodeName patch where the API server has no
 * binding subresource; the binding turns PodScheduled True) only once every claim is bound. Until
 * then the pod is retried with a short backoff, and every claim change wakes the pods that use it.
 *
 * A pod that fits nowhere gets what kube-scheduler gives it (unschedulable()): a Warning
 * FailedScheduling event with FitError's message (vs_fit_message()), PodScheduled False with
 * reason Unschedulable and that message, and its next attempt after 1 s doubling to 10 s; a
 * change of one of its claims wakes it at once.
 */
#include "controllers/cm.h"

#include "base/log.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "controllers/vs.h"
#include "kube/hmap.h"
#include "kube/objects.h"
#include "kube/store.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ANN_SELECTED_NODE "volume.kubernetes.io/selected-node"

/*
 * Pods this scheduler bound whose binding the pod informer may not show yet. Counted in a node's
 * load until the cache catches up (or ASSUMED_TTL passes), as kube-scheduler "assumes" a pod, so
 * two pods scheduled a moment apart do not both land on the node that looked emptiest. Only the
 * single scheduling worker touches it.
 */
#define ASSUMED_MAX 256
#define ASSUMED_TTL (30 * NSEC_PER_SEC)
struct assumed_pod {
	char ns[128], name[256], uid[64];
	const char *node; /* interned; NULL for a free slot */
	int64_t at;
};

struct vsched {
	struct assumed_pod assumed[ASSUMED_MAX];
	unsigned next_assumed;
	struct cm_ctx *cm;
	struct kube_recorder *rec; /* as --scheduler-name, kube-scheduler's reportingController */
	struct cm_pool pool;
	const char *scheduler_name;
	bool started;
	bool no_binding; /* pods/binding answered 404 once (for the log) */
	struct kube_hmap attempts; /* unschedulable pods' attempts (attempt()) */
};

static bool ours(struct vsched *s, const struct kube_pod *p)
{
	return p && !p->node_name && !kube_pod_terminated(p) && !p->meta.deletion_ts &&
	       (!p->scheduler_name || !*p->scheduler_name || !strcmp(p->scheduler_name, s->scheduler_name));
}

struct claim_info {
	struct kube_obj *claim; /* reference */
	struct kube_obj *pv;    /* bound volume, or NULL */
	struct kube_obj *sc;    /* class, or NULL */
};

static void infos_free(struct claim_info *ci, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		kube_obj_unref(ci[i].claim);
		kube_obj_unref(ci[i].pv);
		kube_obj_unref(ci[i].sc);
	}
	free(ci);
}

/* A claim's volume as NodeVolumeLimits counts it: a bound volume by its handle, an unbound
 * claim by its name under its class's provisioner. Returns false for a volume that is not CSI. */
static bool claim_volume(const struct kube_pvc *c, const struct kube_pv *pv,
			 const struct kube_storageclass *sc, struct vs_volume *v, char *idbuf,
			 size_t idlen)
{
	if (pv) {
		v->driver = pv->driver;
		v->id = pv->volume_handle;
		return pv->driver && pv->volume_handle;
	}
	if (!sc || !sc->provisioner)
		return false;
	snprintf(idbuf, idlen, "%s/%s", c->meta.ns ? c->meta.ns : "", c->meta.name);
	v->driver = sc->provisioner;
	v->id = idbuf;
	return true;
}

/* The pod's CSI volumes, appended to *v (grown as needed); each id is the list's own copy
 * (vols_free), drivers are interned. */
static void pod_volumes(struct vsched *s, const struct kube_pod *p, struct vs_volume **v, size_t *n,
			size_t *cap)
{
	for (uint16_t i = 0; i < p->nvolumes; i++) {
		const struct kube_pod_volume *pv = &p->volumes[i];
		struct vs_volume x = { NULL, NULL };
		char id[600];
		bool ok = false;

		if (pv->csi_driver) {
			snprintf(id, sizeof(id), "%s/%s/%s", p->meta.ns ? p->meta.ns : "", p->meta.name, pv->name);
			x = (struct vs_volume){ pv->csi_driver, xstrdup(id) };
			ok = true;
		} else if (pv->claim_name) {
			struct kube_obj *co = kube_store_get(cm_store(s->cm, CM_PVCS), p->meta.ns, pv->claim_name);
			const struct kube_pvc *c = kube_pvc_of(co);
			struct kube_obj *vo = c && c->volume_name
				? kube_store_get(cm_store(s->cm, CM_PVS), NULL, c->volume_name) : NULL;
			struct kube_obj *so = c && !vo && c->storage_class
				? kube_store_get(cm_store(s->cm, CM_SCS), NULL, c->storage_class) : NULL;
			ok = c && claim_volume(c, kube_pv_of(vo), kube_storageclass_of(so), &x, id, sizeof(id));
			if (ok)
				x.id = xstrdup(x.id); /* the records are released below */
			kube_obj_unref(vo);
			kube_obj_unref(so);
			kube_obj_unref(co);
		}
		if (!ok)
			continue;
		if (*n == *cap) {
			*cap = *cap ? 2 * *cap : 8;
			*v = xrealloc(*v, *cap * sizeof(**v));
		}
		(*v)[(*n)++] = x;
	}
}

static void vols_free(struct vs_volume *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free((char *)v[i].id);
	free(v);
}

/* CSINode allocatable.count of a driver on the node in ud (-1: none). */
struct limit_ctx {
	const struct kube_csinode *cn;
};
static int32_t csinode_limit(const char *driver, void *ud)
{
	const struct kube_csinode *cn = ((struct limit_ctx *)ud)->cn;

	for (uint16_t i = 0; cn && i < cn->ndrivers; i++)
		if (!strcmp(cn->drivers[i].name, driver))
			return cn->drivers[i].allocatable;
	return -1;
}

/* Whether this scheduler bound p a moment ago, to any node (vs_rwop_user's placed()). */
static bool assumed_anywhere(const struct kube_pod *p, void *ud)
{
	struct vsched *s = ud;
	int64_t now = mono_now_ns();
	char uid[64];

	kube_obj_uid(&p->meta, uid, sizeof(uid));
	for (size_t i = 0; i < ASSUMED_MAX; i++) {
		const struct assumed_pod *a = &s->assumed[i];
		/* the uid too: a pod deleted and made again under its name is not the one bound */
		if (a->node && now - a->at <= ASSUMED_TTL && !strcmp(a->name, p->meta.name) &&
		    !strcmp(a->ns, p->meta.ns ? p->meta.ns : "") && !strcmp(a->uid, uid))
			return true;
	}
	return false;
}

/* VolumeRestrictions: whether another scheduled pod uses one of the pod's ReadWriteOncePod
 * claims (ci: its claims, looked up). */
static bool rwop_in_use(struct vsched *s, const struct kube_pod *p, const struct claim_info *ci,
			size_t nci, struct kube_obj *const *pods, size_t npods)
{
	for (size_t i = 0; i < nci; i++) {
		const struct kube_pvc *c = kube_pvc_of(ci[i].claim);
		const struct kube_pod *other;

		if (!c || !(c->access_modes & KUBE_RWOP))
			continue;
		other = vs_rwop_user(p, c->meta.name, pods, npods, assumed_anywhere, s);
		if (other) {
			KLOG_V(3, "pod %s/%s: claim \"%s\" (ReadWriteOncePod) is used by pod %s/%s",
			       p->meta.ns, p->meta.name, c->meta.name, other->meta.ns, other->meta.name);
			return true;
		}
	}
	return false;
}

/* What node_unfit() reads besides the node. */
struct fit {
	const struct kube_pod *p;
	const struct claim_info *ci;
	size_t nci;
	const struct vs_volume *vols; /* the pod's CSI volumes */
	size_t nvols;
	struct kube_obj **pods;
	size_t npods;
	/* the pods this scheduler bound that the cache still shows unbound (collect_assumed), each
	 * once, and their nodes (interned) */
	struct kube_obj *assumed[ASSUMED_MAX];
	const char *assumed_node[ASSUMED_MAX];
	size_t nassumed;
	json_t *caps;                 /* CSIStorageCapacity list, fetched on first need */
	bool rwop_in_use;             /* a ReadWriteOncePod claim of the pod has another user */
};

/* NodeVolumeLimits: whether the pod's volumes (add) would pass an attach limit of the node. */
static bool over_limit(struct vsched *s, const struct kube_node *n, const struct vs_volume *add,
		       size_t nadd, const struct fit *f)
{
	struct kube_obj *co = kube_store_get(cm_store(s->cm, CM_CSINODES), NULL, n->meta.name);
	struct limit_ctx lc = { kube_csinode_of(co) };
	struct vs_volume *used = NULL;
	size_t nused = 0, cap = 0, npods;
	struct kube_obj **pods;
	const char *node = kube_intern(n->meta.name);
	bool limited = false, over;

	for (size_t i = 0; i < nadd && !limited; i++)
		limited = csinode_limit(add[i].driver, &lc) >= 0;
	if (!limited) {
		kube_obj_unref(co);
		return false;
	}
	pods = kube_store_by_index(cm_store(s->cm, CM_PODS), CM_PODS_BY_NODE, node, &npods);
	for (size_t i = 0; i < npods; i++) {
		const struct kube_pod *p = kube_pod_of(pods[i]);
		if (p && !kube_pod_terminated(p))
			pod_volumes(s, p, &used, &nused, &cap);
	}
	kube_objs_free(pods, npods);
	for (size_t i = 0; i < f->nassumed; i++)
		if (f->assumed_node[i] == node)
			pod_volumes(s, kube_pod_of(f->assumed[i]), &used, &nused, &cap);
	over = vs_over_limit(used, nused, add, nadd, csinode_limit, &lc) != NULL;
	vols_free(used, nused);
	kube_obj_unref(co);
	return over;
}

/* Whether the class's driver asked the scheduler to track its capacity (CSIDriver
 * spec.storageCapacity); without that CSIStorageCapacity objects are ignored, as upstream. */
static bool tracks_capacity(struct vsched *s, const struct kube_storageclass *sc)
{
	struct kube_obj *o = sc->provisioner
		? kube_store_get(cm_store(s->cm, CM_CSIDRIVERS), NULL, sc->provisioner) : NULL;
	const struct kube_csidriver *d = kube_csidriver_of(o);
	bool on = d && d->storage_capacity;

	kube_obj_unref(o);
	return on;
}

/* Whether the class lets CSIStorageCapacity say no to node n for claim c (0: no room). */
static int storage_room(struct vsched *s, struct fit *f, const struct kube_pvc *c,
			const struct kube_storageclass *sc, const struct kube_node *n)
{
	if (!tracks_capacity(s, sc))
		return 1;
	if (!f->caps) {
		struct kube_err e;
		f->caps = kube_list(s->cm->kc, &KUBE_RES_CSISTORAGECAPACITIES, NULL, NULL, &e);
		if (!f->caps)
			f->caps = json_object(); /* not served: no capacity tracking */
	}
	return vs_capacity_fits(f->caps, sc->meta.name, n, c->request > 0 ? c->request : 0) != 0;
}

/*
 * VolumeBinding's Filter (FindPodVolumes): the bound claims' volumes first (the first one that
 * does not exist or whose node affinity refuses the node decides), then the unbound
 * WaitForFirstConsumer claims (one chosen for another node, or a class whose allowedTopologies or
 * capacity refuse it); the reasons in upstream's order. A claim bound a moment ago by this
 * scheduler's own provisioning (selected-node set) whose volume the cache does not show yet is
 * still judged by its selected node, not reported as bound to a missing volume.
 */
/* A claim VolumeBinding treats as unbound: not fully bound, or bound so recently (by this
 * scheduler's selected-node) that the cache does not show its volume yet. */
static bool pending_claim(const struct claim_info *ci)
{
	const struct kube_pvc *c = kube_pvc_of(ci->claim);

	return !vs_claim_fully_bound(c) || (!ci->pv && c->selected_node);
}

static void claims_unfit(struct fit *f, struct vsched *s, const struct kube_node *n,
			 struct vs_verdict *v)
{
	bool bound_ok = true, pv_found = true, unbound_ok = true, room = true;

	for (size_t i = 0; i < f->nci; i++) {
		const struct kube_pv *pv = kube_pv_of(f->ci[i].pv);

		if (pending_claim(&f->ci[i]))
			continue;
		if (!pv) {
			pv_found = false;
			break;
		}
		if (!kube_node_selector_match(pv->node_affinity, pv->nnode_affinity, n->labels, n->nlabels)) {
			bound_ok = false;
			break;
		}
	}
	/* A claim already given to another node refuses this one before anything else is asked. */
	for (size_t i = 0; i < f->nci && unbound_ok; i++) {
		const struct kube_pvc *c = kube_pvc_of(f->ci[i].claim);
		if (pending_claim(&f->ci[i]) && c->selected_node)
			unbound_ok = !strcmp(c->selected_node, n->meta.name);
	}
	for (size_t i = 0; i < f->nci && unbound_ok && room; i++) {
		const struct kube_pvc *c = kube_pvc_of(f->ci[i].claim);
		const struct kube_storageclass *sc = kube_storageclass_of(f->ci[i].sc);

		if (!pending_claim(&f->ci[i]) || c->selected_node)
			continue;
		/* the prefilter let only WaitForFirstConsumer claims of an existing class through */
		if (!sc->provisioner || !*sc->provisioner ||
		    !strcmp(sc->provisioner, "kubernetes.io/no-provisioner") ||
		    !kube_node_selector_match(sc->allowed_topologies, sc->nallowed_topologies, n->labels,
					      n->nlabels))
			unbound_ok = false;
		else
			room = storage_room(s, f, c, sc, n);
	}
	if (!bound_ok)
		v->reason[v->n++] = VS_REASON_NODE_CONFLICT;
	if (!unbound_ok)
		v->reason[v->n++] = VS_REASON_BIND_CONFLICT;
	if (!room)
		v->reason[v->n++] = VS_REASON_NO_SPACE;
	if (!pv_found)
		v->reason[v->n++] = VS_REASON_PV_NOT_EXIST;
	v->unresolvable = true;
}

/* The pods on a node: those the cache shows bound to it (through the pod informer's
 * spec.nodeName index, so a count costs the node's pods, not the cluster's) and those this
 * scheduler bound to it a moment ago. */
static size_t pods_on(struct vsched *s, const struct fit *f, const char *node)
{
	size_t k = 0, n;
	struct kube_obj **pods = kube_store_by_index(cm_store(s->cm, CM_PODS), CM_PODS_BY_NODE, node, &n);

	for (size_t i = 0; i < n; i++) {
		const struct kube_pod *p = kube_pod_of(pods[i]);
		if (p && !kube_pod_terminated(p))
			k++;
	}
	kube_objs_free(pods, n);
	node = kube_intern(node);
	for (size_t i = 0; i < f->nassumed; i++)
		if (f->assumed_node[i] == node)
			k++;
	return k;
}

/*
 * Why node n cannot run the pod (the verdict v), or false when it can; kube-scheduler's filter
 * order, the first filter that refuses deciding: unschedulable, taints, node selector,
 * allocatable pods, volume restrictions, volume limits, volume binding. A NotReady node is
 * kcsi's own refusal (upstream relies on the not-ready taint).
 */
static bool node_unfit(struct vsched *s, struct fit *f, const struct kube_node *n,
		       struct vs_verdict *v)
{
	const struct kube_pod *p = f->p;
	const char *r = NULL;
	bool unresolvable = true;

	memset(v, 0, sizeof(*v));
	if (n->ready != KUBE_COND_TRUE)
		r = VS_REASON_NOT_READY;
	else if (n->unschedulable)
		r = VS_REASON_UNSCHEDULABLE;
	else if (vs_untolerated(n->taints, n->ntaints, p->tolerations, p->ntolerations))
		r = VS_REASON_TAINT;
	for (uint16_t i = 0; !r && i < p->nnode_selector; i++)
		if (!vs_labels_have(n->labels, n->nlabels, p->node_selector[i].key, p->node_selector[i].value))
			r = VS_REASON_SELECTOR;
	/* the filters below say Unschedulable: evicting pods could make room */
	if (!r) {
		unresolvable = false;
		/* NodeResourcesFit's pod count: the node's allocatable pods, as kube-scheduler checks */
		if (n->allocatable_pods >= 0 &&
		    pods_on(s, f, n->meta.name) >= (size_t)n->allocatable_pods)
			r = VS_REASON_TOO_MANY_PODS;
		else if (f->rwop_in_use)
			r = VS_REASON_RWOP_CONFLICT;
		else if (f->nvols && over_limit(s, n, f->vols, f->nvols, f))
			r = VS_REASON_MAX_VOLUMES;
	}
	if (r) {
		v->reason[v->n++] = r;
		v->unresolvable = unresolvable;
		return true;
	}
	claims_unfit(f, s, n, v);
	return v->n > 0;
}

/* Fills f->assumed once per sync: the live entries of s->assumed whose pod the cache still shows
 * unbound and running; entries whose pod is gone, bound in the cache, or older than ASSUMED_TTL
 * are freed. */
static void collect_assumed(struct vsched *s, struct fit *f)
{
	int64_t now = mono_now_ns();

	f->nassumed = 0;
	for (size_t i = 0; i < ASSUMED_MAX; i++) {
		struct assumed_pod *a = &s->assumed[i];
		struct kube_obj *o;
		const struct kube_pod *p;
		bool seen = false;

		if (!a->node || now - a->at > ASSUMED_TTL) {
			a->node = NULL;
			continue;
		}
		o = kube_store_get(cm_store(s->cm, CM_PODS), a->ns, a->name);
		p = kube_pod_of(o);
		if (!p || p->node_name)
			a->node = NULL; /* gone, or the cache shows the binding: counted through the index */
		for (size_t j = 0; p && !p->node_name && j < f->nassumed && !seen; j++)
			seen = f->assumed[j] == o;
		if (!p || p->node_name || seen || kube_pod_terminated(p)) {
			kube_obj_unref(o);
			continue;
		}
		f->assumed[f->nassumed] = o;
		f->assumed_node[f->nassumed++] = a->node;
	}
}

static void assume(struct vsched *s, const struct kube_pod *p, const char *node)
{
	struct assumed_pod *a = &s->assumed[s->next_assumed++ % ASSUMED_MAX];
	snprintf(a->ns, sizeof(a->ns), "%s", p->meta.ns ? p->meta.ns : "");
	snprintf(a->name, sizeof(a->name), "%s", p->meta.name);
	kube_obj_uid(&p->meta, a->uid, sizeof(a->uid));
	a->node = kube_intern(node);
	a->at = mono_now_ns();
}

static enum cm_result bind_pod(struct vsched *s, const struct kube_pod *p, const char *node)
{
	struct kube_err e;
	struct strbuf path, out;
	char *body;
	int rc = -1;

	json_t *b = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:s, s:s}}", "apiVersion", "v1",
			      "kind", "Binding", "metadata", "name", p->meta.name, "namespace", p->meta.ns,
			      "target", "apiVersion", "v1", "kind", "Node", "name", node);
	body = json_dumps(b, JSON_COMPACT);
	json_decref(b);
	strbuf_init(&path, 128);
	strbuf_init(&out, 256);
	kube_path(&path, &KUBE_RES_PODS, p->meta.ns, p->meta.name, "binding");
	struct kube_request rq = { "POST", path.buf, NULL, "application/json", body, strlen(body) };
	rc = kube_do(s->cm->kc, &rq, &out, &e);
	free(body);
	strbuf_release(&path);
	strbuf_release(&out);
	if (rc < 0 && e.code == 404) {
		/* No binding subresource on this API server (or the pod is gone: the patch says). */
		if (!s->no_binding)
			KLOG_I("pods/binding is not served (404): binding pods with a spec.nodeName patch");
		s->no_binding = true;
		json_t *pt = json_pack("{s:{s:s}}", "spec", "nodeName", node);
		rc = cm_patch(s->cm, &KUBE_RES_PODS, p->meta.ns, p->meta.name, false, pt, &e);
		json_decref(pt);
	}
	if (rc < 0) {
		KLOG_ERR(e.message, "binding pod %s/%s to node \"%s\"",
			 p->meta.ns, p->meta.name, node);
		return e.code == 409 ? CM_DONE : CM_RETRY; /* 409: someone else bound it */
	}
	kube_event_about(s->rec, &p->meta, KUBE_EVENT_NORMAL, "Scheduled",
			 "Successfully assigned %s/%s to %s", p->meta.ns, p->meta.name, node);
	KLOG_I("Successfully bound pod to node pod=\"%s/%s\" node=\"%s\"", p->meta.ns, p->meta.name, node);
	assume(s, p, node);
	return CM_DONE;
}

/*
 * The claims of the pod, looked up: ci[0..*nci) the claims the cache has (with their volume and
 * class), vc[0..*nvc) every claim the pod names, found or not, for vs_prefilter().
 */
static void claim_infos(struct vsched *s, const struct kube_pod *p, struct claim_info *ci,
			size_t *nci, struct vs_claim *vc, size_t *nvc)
{
	for (uint16_t i = 0; i < p->nvolumes; i++) {
		const struct kube_pod_volume *v = &p->volumes[i];
		const struct kube_pvc *c;
		const struct kube_storageclass *sc;

		if (!v->claim_name)
			continue;
		ci[*nci].claim = kube_store_get(cm_store(s->cm, CM_PVCS), p->meta.ns, v->claim_name);
		c = kube_pvc_of(ci[*nci].claim);
		vc[*nvc] = (struct vs_claim){ v->claim_name, v->ephemeral, c, false };
		if (!c) {
			(*nvc)++;
			continue;
		}
		if (c->volume_name)
			ci[*nci].pv = kube_store_get(cm_store(s->cm, CM_PVS), NULL, c->volume_name);
		if (c->storage_class && *c->storage_class)
			ci[*nci].sc = kube_store_get(cm_store(s->cm, CM_SCS), NULL, c->storage_class);
		sc = kube_storageclass_of(ci[*nci].sc);
		vc[(*nvc)++].delay_binding = sc && sc->wait_for_first_consumer;
		(*nci)++;
	}
}

/* ---- a pod that fits no node ---- */

/* How many times in a row each pod was found unschedulable (pod key -> count), for its backoff.
 * Only the one scheduling worker touches it; an entry goes when its pod is placed or gone. */
static unsigned attempt(struct vsched *s, const char *key)
{
	uintptr_t n = (uintptr_t)kube_hmap_get(&s->attempts, key) + 1;

	kube_hmap_put(&s->attempts, key, (void *)n);
	return (unsigned)n;
}
static void attempts_reset(struct vsched *s, const char *key)
{
	kube_hmap_del(&s->attempts, key);
}

/*
 * kube-scheduler's updatePod after a failed attempt: PodScheduled False, reason Unschedulable,
 * the message, through the status subresource (a strategic merge patch, so the pod's other
 * conditions stay), and only when the pod does not carry that verdict already. The transition
 * time changes only when the status does, as UpdatePodCondition keeps it.
 */
static void set_unschedulable(struct vsched *s, const struct kube_pod *p, const char *msg)
{
	char ts[RFC3339_BUFLEN];
	struct kube_err e;
	json_t *cond, *patch, *res;
	char *body;

	if (p->scheduled == KUBE_POD_SCHED_FALSE &&
	    p->scheduled_hash == kube_pod_cond_hash("Unschedulable", msg))
		return;
	cond = json_pack("{s:s, s:s, s:s, s:s}", "type", "PodScheduled", "status", "False",
			 "reason", "Unschedulable", "message", msg);
	if (p->scheduled != KUBE_POD_SCHED_FALSE) {
		rfc3339_format(time(NULL), ts, sizeof(ts));
		json_object_set_new(cond, "lastTransitionTime", json_string(ts));
		json_object_set_new(cond, "lastProbeTime", json_null());
	}
	if (p->meta.generation > 0)
		json_object_set_new(cond, "observedGeneration", json_integer(p->meta.generation));
	/* conditions merge by type: the pod's others stay where they are */
	patch = json_pack("{s:{s:[o]}}", "status", "conditions", cond);
	body = json_dumps(patch, JSON_COMPACT);
	json_decref(patch);
	res = kube_patch(s->cm->kc, &KUBE_RES_PODS, p->meta.ns, p->meta.name, true,
			 KUBE_PATCH_STRATEGIC, body, &e);
	if (!res)
		KLOG_ERR(e.message, "Error updating pod pod=\"%s/%s\"", p->meta.ns, p->meta.name);
	json_decref(res);
	free(body);
}

/*
 * kube-scheduler's handleSchedulingFailure: a Warning FailedScheduling event on the pod (each
 * attempt records it again; the recorder counts repeats of one message on one Event), the
 * PodScheduled condition, and the next attempt after the pod's backoff.
 */
static enum cm_result unschedulable(struct vsched *s, const char *key, const struct kube_pod *p,
				    const char *msg)
{
	char note[VS_NOTE_MAX + 1];
	unsigned n = attempt(s, key);

	vs_event_note(msg, note, sizeof(note));
	kube_event_about(s->rec, &p->meta, KUBE_EVENT_WARNING, "FailedScheduling", "%s", note);
	KLOG_V(2, "Unable to schedule pod; no fit; waiting pod=\"%s/%s\" err=\"%s\"", p->meta.ns,
	       p->meta.name, msg);
	set_unschedulable(s, p, msg);
	kube_workqueue_add_after(s->pool.q, key, vs_backoff_ns(n));
	return CM_LATER;
}

/*
 * A pod that fits no node, whose bound volume's node affinity matches no Node at all, can never
 * run until such a node appears (a node-local volume whose node is gone, or a topology no node
 * advertises). The pod's FailedScheduling only counts nodes; this Warning on the claim names the
 * PV and its affinity, which a user can compare with `kubectl get nodes --show-labels`.
 */
static void warn_unreachable_volumes(struct vsched *s, const struct fit *f,
				     struct kube_obj *const *nodes, size_t nnodes)
{
	for (size_t i = 0; i < f->nci; i++) {
		const struct kube_pv *pv = kube_pv_of(f->ci[i].pv);
		bool any = false;

		if (!pv || !pv->nnode_affinity)
			continue;
		for (size_t k = 0; k < nnodes && !any; k++) {
			const struct kube_node *n = kube_node_of(nodes[k]);
			any = n && kube_node_selector_match(pv->node_affinity, pv->nnode_affinity, n->labels,
							    n->nlabels);
		}
		if (any)
			continue;
		char aff[512];
		vs_affinity_text(pv, aff, sizeof(aff));
		kube_event_about(s->rec, f->ci[i].claim, KUBE_EVENT_WARNING,
				 "VolumeNodeAffinityConflict",
				 "PersistentVolume %s can be used only on nodes with %s, and no Node matches",
				 pv->meta.name, aff);
	}
}

static enum cm_result sync_pod(void *self, const char *key)
{
	struct vsched *s = self;
	char ns[256], pre[1024] = "", msg[2048];
	const char *slash = strchr(key, '/');
	struct kube_obj *po;
	const struct kube_pod *p;
	struct claim_info *ci = NULL;
	struct vs_claim *vc = NULL;
	size_t nci = 0, nvc = 0, nnodes = 0, cap = 0;
	struct kube_obj **nodes = NULL;
	struct fit f = { 0 };
	struct vs_volume *vols = NULL;
	enum cm_result r = CM_DONE;
	const struct kube_node *best = NULL;
	size_t best_load = 0;
	struct vs_reasons why = { 0 };

	if (!slash || (size_t)(slash - key) >= sizeof(ns))
		return CM_DONE;
	memcpy(ns, key, (size_t)(slash - key));
	ns[slash - key] = 0;
	po = kube_store_get(cm_store(s->cm, CM_PODS), ns, slash + 1);
	p = kube_pod_of(po);
	if (!ours(s, p)) {
		attempts_reset(s, key);
		kube_obj_unref(po);
		return CM_DONE;
	}
	ci = xcalloc(p->nvolumes + 1u, sizeof(*ci));
	vc = xcalloc(p->nvolumes + 1u, sizeof(*vc));
	nodes = kube_store_list(cm_store(s->cm, CM_NODES), &nnodes);
	claim_infos(s, p, ci, &nci, vc, &nvc);
	/* kube-scheduler's order: no nodes at all, then the pod's own claims, then each node */
	if (!nnodes || vs_prefilter(vc, nvc, pre, sizeof(pre))) {
		vs_fit_message(&why, nnodes, pre, p->preempt_never, msg, sizeof(msg));
		r = unschedulable(s, key, p, msg);
		goto out;
	}
	pod_volumes(s, p, &vols, &f.nvols, &cap);
	f.p = p, f.ci = ci, f.nci = nci, f.vols = vols;
	f.pods = kube_store_list(cm_store(s->cm, CM_PODS), &f.npods);
	f.rwop_in_use = rwop_in_use(s, p, ci, nci, f.pods, f.npods);
	collect_assumed(s, &f);
	for (size_t i = 0; i < nnodes; i++) {
		const struct kube_node *n = kube_node_of(nodes[i]);
		struct vs_verdict v;
		size_t load;

		if (!n)
			continue;
		if (node_unfit(s, &f, n, &v)) {
			vs_reasons_node(&why, &v);
			continue;
		}
		load = pods_on(s, &f, n->meta.name);
		if (!best || load < best_load || (load == best_load && strcmp(n->meta.name, best->meta.name) < 0))
			best = n, best_load = load;
	}
	if (!best) {
		vs_fit_message(&why, nnodes, NULL, p->preempt_never, msg, sizeof(msg));
		r = unschedulable(s, key, p, msg);
		warn_unreachable_volumes(s, &f, nodes, nnodes);
		goto out;
	}
	attempts_reset(s, key);
	/* Tell the provisioner where: selected-node on the delayed claims that have none. */
	bool all_bound = true;
	for (size_t i = 0; i < nci; i++) {
		const struct kube_pvc *c = kube_pvc_of(ci[i].claim);
		if (ci[i].pv && c->phase == KUBE_PVC_BOUND)
			continue;
		all_bound = false;
		if (c->selected_node || ci[i].pv)
			continue;
		struct kube_err e;
		json_t *pt = json_pack("{s:{s:s, s:{s:s}}}", "metadata", "resourceVersion", c->meta.rv,
				       "annotations", ANN_SELECTED_NODE, best->meta.name);
		if (cm_patch(s->cm, &KUBE_RES_PERSISTENTVOLUMECLAIMS, c->meta.ns, c->meta.name, false, pt, &e))
			KLOG_ERR(e.message, "setting selected-node on claim %s/%s",
				 c->meta.ns, c->meta.name);
		else
			KLOG_I("claim %s/%s: selected node \"%s\" for pod %s", c->meta.ns, c->meta.name,
			       best->meta.name, key);
		json_decref(pt);
	}
	r = all_bound ? bind_pod(s, p, best->meta.name) : CM_RETRY;
out:
	json_decref(f.caps);
	vols_free(vols, f.nvols);
	kube_objs_free(nodes, nnodes);
	kube_objs_free(f.pods, f.npods);
	for (size_t i = 0; i < f.nassumed; i++)
		kube_obj_unref(f.assumed[i]);
	infos_free(ci, p->nvolumes); /* unused slots are zero */
	free(vc);
	kube_obj_unref(po);
	return r;
}

/* ---- handlers ---- */

static void pod_add(const struct kube_obj *o, void *ud)
{
	struct vsched *s = ud;
	char key[512];

	if (!ours(s, kube_pod_of(o)))
		return;
	kube_obj_key(o, key, sizeof(key));
	kube_workqueue_add(s->pool.q, key);
}
/*
 * A pod that leaves (deleted, or terminated) may free a ReadWriteOncePod claim: wake the pending
 * pods of its namespace that name one of its claims, as kube-scheduler requeues on a pod's
 * deletion, rather than let them wait out their backoff.
 */
static void pod_left(struct vsched *s, const struct kube_pod *gone)
{
	size_t n;
	struct kube_obj **pods;
	char key[512];

	if (!gone || !gone->nvolumes || !gone->node_name || !*gone->node_name)
		return; /* a pod never placed held no claim */
	pods = kube_store_list(cm_store(s->cm, CM_PODS), &n);
	for (size_t i = 0; i < n; i++) {
		const struct kube_pod *p = kube_pod_of(pods[i]);
		bool shares = false;

		if (!ours(s, p) || p == gone || !p->meta.ns || !gone->meta.ns ||
		    strcmp(p->meta.ns, gone->meta.ns))
			continue;
		for (uint16_t v = 0; v < p->nvolumes && !shares; v++)
			for (uint16_t w = 0; w < gone->nvolumes && !shares; w++)
				shares = p->volumes[v].claim_name && gone->volumes[w].claim_name &&
					 !strcmp(p->volumes[v].claim_name, gone->volumes[w].claim_name);
		if (shares) {
			kube_obj_key(pods[i], key, sizeof(key));
			kube_workqueue_add(s->pool.q, key);
		}
	}
	kube_objs_free(pods, n);
}

static void pod_update(const struct kube_obj *old, const struct kube_obj *o, void *ud)
{
	const struct kube_pod *was = kube_pod_of(old), *now = kube_pod_of(o);

	/* This scheduler's own PodScheduled write comes back as an update: nothing to decide
	 * changed, and a requeue would skip the pod's backoff (kube-scheduler's queue ignores a
	 * pending pod's status updates too). */
	if (!was || !now || (was->scheduled == now->scheduled &&
			     was->scheduled_hash == now->scheduled_hash))
		pod_add(o, ud);
	if (was && now && !kube_pod_terminated(was) && kube_pod_terminated(now))
		pod_left(ud, now);
}
static void pod_delete(const struct kube_obj *last, void *ud)
{
	pod_left(ud, kube_pod_of(last));
}

/* A claim changed (bound, annotated): wake the pending pods of its namespace that use it. */
static void claim_changed(const struct kube_obj *o, void *ud)
{
	struct vsched *s = ud;
	size_t n;
	struct kube_obj **pods = kube_store_list(cm_store(s->cm, CM_PODS), &n);
	char key[512];

	for (size_t i = 0; i < n; i++) {
		const struct kube_pod *p = kube_pod_of(pods[i]);
		if (!ours(s, p) || !p->meta.ns || !o->ns || strcmp(p->meta.ns, o->ns))
			continue;
		for (uint16_t v = 0; v < p->nvolumes; v++)
			if (p->volumes[v].claim_name && !strcmp(p->volumes[v].claim_name, o->name)) {
				kube_obj_key(pods[i], key, sizeof(key));
				kube_workqueue_add(s->pool.q, key);
				break;
			}
	}
	kube_objs_free(pods, n);
}
static void claim_update(const struct kube_obj *old, const struct kube_obj *o, void *ud)
{
	(void)old;
	claim_changed(o, ud);
}

static void *vs_init(struct cm_ctx *cm)
{
	struct vsched *s = xcalloc(1, sizeof(*s));
	struct kube_handlers ph = { pod_add, pod_update, pod_delete, s };
	struct kube_handlers ch = { claim_changed, claim_update, NULL, s };

	s->cm = cm;
	s->rec = cm_recorder(cm, cm->cfg->scheduler_name);
	s->scheduler_name = cm->cfg->scheduler_name;
	cm_pool_init(&s->pool, "volume-scheduler", cm->cfg, sync_pod, s);
	/* Pods wait for provisioning in short steps, not the API-error backoff. */
	kube_workqueue_free(s->pool.q);
	s->pool.q = kube_workqueue_new("volume-scheduler", 200 * NSEC_PER_MSEC, 5 * NSEC_PER_SEC);
	kube_informer_add_handlers(cm_informer(cm, CM_PODS), &ph);
	kube_informer_add_handlers(cm_informer(cm, CM_PVCS), &ch);
	cm_informer(cm, CM_NODES);
	cm_informer(cm, CM_PVS);
	cm_informer(cm, CM_SCS);
	cm_informer(cm, CM_CSINODES);
	cm_informer(cm, CM_CSIDRIVERS);
	return s;
}

static int vs_start(void *self)
{
	struct vsched *s = self;

	if (cm_pool_start(&s->pool, 1))
		return -1;
	s->started = true;
	return 0;
}

static void vs_stop(void *self)
{
	struct vsched *s = self;

	if (s->started)
		cm_pool_stop(&s->pool);
	s->started = false;
}

static void vs_free(void *self)
{
	struct vsched *s = self;

	cm_pool_free(&s->pool);
	kube_hmap_clear(&s->attempts);
	free(s);
}

static size_t vs_queues(void *self, struct kube_workqueue **out, size_t max)
{
	struct vsched *s = self;

	if (!max)
		return 0;
	out[0] = s->pool.q;
	return 1;
}

const struct cm_controller cm_volume_scheduler = {
	.name = "volume-scheduler", .default_on = false,
	.init = vs_init, .start = vs_start, .stop = vs_stop, .free = vs_free, .queues = vs_queues,
};
