/*
 * --node-deployment: one provisioner per node. Which claims this node caches and takes
 * (checkNode), and for an immediate-binding claim without a node the wait (node deployment's
 * delay: an order per claim, then backoff), the room check and the race for the selected-node
 * annotation (becomeOwner). The delays themselves are decide.c's pure functions.
 */
#include "provisioner/prov.h"

#include "base/log.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "kube/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Node deployment: distinct selected nodes remembered to estimate the competitors (a bound). */
#define PROV_MAX_SEEN_NODES 100000

/* An immediate-binding claim this node may try to own (node deployment). */
struct owner_try {
	unsigned attempts; /* failed tries: conflicts, no room */
	int64_t due;       /* monotonic time of the next try */
	bool armed;        /* a delayed add for `due` is pending */
	char stale_rv[64]; /* the resourceVersion a try got 409 for ("": none); until the cache
			      shows another, trying again would only conflict again */
};

/* ---- the cache, the topology ---- */

/*
 * Node deployment: claims bound already or selected for another node are not this instance's
 * work and stay out of its cache (clones stay: their sources' protection counts them). The
 * selected nodes seen are counted here, where every claim of the driver passes, as competitors.
 */
bool prov_node_pvc_wanted(struct prov_ctrl *c, const struct kube_pvc *pvc)
{
	const struct prov_node_deployment *nd = c->o.node_deployment;
	bool selected = pvc->selected_node && *pvc->selected_node;

	if (selected) {
		pthread_mutex_lock(&c->mu);
		if (c->seen_nodes.len < PROV_MAX_SEEN_NODES)
			kube_hmap_put(&c->seen_nodes, pvc->selected_node, NULL);
		pthread_mutex_unlock(&c->mu);
	}
	if (pvc->data_source_kind && !strcmp(pvc->data_source_kind, "PersistentVolumeClaim"))
		return true;
	if (pvc->volume_name && *pvc->volume_name)
		return false;
	return !selected || !strcmp(pvc->selected_node, nd->node);
}

/* ---- which claims this node takes ---- */

void prov_owner_forget(struct prov_ctrl *c, const char *key)
{
	pthread_mutex_lock(&c->mu);
	free(kube_hmap_del(&c->owners, key));
	pthread_mutex_unlock(&c->mu);
}

/* Whether name ranks before self in the claim's order (ties, if ever, by name). */
static bool ranks_before(uint64_t score, const char *name, uint64_t self, const char *node)
{
	return score < self || (score == self && strcmp(name, node) < 0);
}

static bool runs_driver(const struct prov_ctrl *c, const struct kube_obj *o)
{
	const struct kube_csinode *cn = kube_csinode_of(o);
	for (size_t j = 0; cn && j < cn->ndrivers; j++)
		if (cn->drivers[j].name && !strcmp(cn->drivers[j].name, c->o.driver))
			return true;
	return false;
}

/*
 * This node's place in the claim's order among the instances competing for immediate claims:
 * the nodes whose CSINode lists the driver and the selected nodes seen on claims, this node
 * always among them. *n is their number (1: nobody else is known). Called with c->mu held.
 */
static unsigned owner_rank(struct prov_ctrl *c, const char *uid, unsigned *n)
{
	const char *node = c->nd->node;
	uint64_t self = prov_owner_score(uid, node);
	unsigned rank = 0, k = 1;
	size_t ncn = 0;
	struct kube_obj **cns = c->csinode_inf ? kube_store_list(kube_informer_store(c->csinode_inf), &ncn) : NULL;

	for (size_t i = 0; i < ncn; i++) {
		const char *name = cns[i]->name;
		if (!name || !strcmp(name, node) || !runs_driver(c, cns[i]))
			continue;
		k++;
		rank += ranks_before(prov_owner_score(uid, name), name, self, node);
	}
	kube_objs_free(cns, ncn);
	for (size_t i = 0; i < c->seen_nodes.cap; i++) {
		const char *name = c->seen_nodes.slots[i].key;
		if (!name || !strcmp(name, node))
			continue;
		struct kube_obj *cn = prov_store_get(c->csinode_inf, NULL, name);
		bool counted = cn && runs_driver(c, cn);
		kube_obj_unref(cn);
		if (counted)
			continue;
		k++;
		rank += ranks_before(prov_owner_score(uid, name), name, self, node);
	}
	*n = k;
	return rank;
}

static double rnd01(void)
{
	return (double)random() / ((double)RAND_MAX + 1.0);
}

void prov_owner_backoff(struct prov_ctrl *c, const char *key)
{
	pthread_mutex_lock(&c->mu);
	struct owner_try *t = kube_hmap_get(&c->owners, key);
	if (!t) {
		t = xcalloc(1, sizeof(*t));
		kube_hmap_put(&c->owners, key, t);
	}
	t->attempts++;
	int64_t d = prov_owner_delay(c->nd->base_delay_ns, c->nd->max_delay_ns, t->attempts, rnd01(),
				     0, 1);
	t->due = mono_now_ns() + d;
	t->armed = true;
	pthread_mutex_unlock(&c->mu);
	kube_workqueue_add_after(c->claimq, key, d);
}

/* upstream's checkCapacity: is there room for the claim on this node now? Errors say yes. */
static bool node_has_room(struct prov_ctrl *c, const struct kube_pvc *pvc,
			  const struct kube_storageclass *sc)
{
	if (pvc->request <= 0)
		return true;
	struct csi_arena *a = csi_arena_new();
	Csi__V1__GetCapacityRequest *req = csi_msg_new(a, &csi__v1__get_capacity_request__descriptor);
	Csi__V1__GetCapacityResponse *resp = NULL;
	struct csi_status st = { 0 };
	struct kube_kv *kv = xcalloc(sc->nparameters + 1, sizeof(*kv));
	char err[256];
	int n = prov_strip_params(sc->parameters, sc->nparameters, kv, err, sizeof(err));
	for (int i = 0; i < n; i++)
		csi_map_add(a, &req->base, "parameters", kv[i].key, kv[i].value ? kv[i].value : "");
	free(kv);
	for (unsigned b = 0; b < 4; b++) {
		if (!(pvc->access_modes & (1u << b)))
			continue;
		csi_repeated_add(a, &req->base, "volume_capabilities",
				 prov_volume_capability(a, 1u << b, pvc->block, c->o.cap_snmw));
	}
	if (c->nd->ntopology) {
		struct prov_term t = { (struct kube_kv *)c->nd->topology, c->nd->ntopology };
		req->accessible_topology = prov_csi_topology(a, &t);
	}
	bool room = true;
	if (csi_get_capacity(c->o.csi, req, &resp, c->o.timeout_ns, &st) == 0)
		room = pvc->request <= resp->available_capacity;
	else
		KLOG_V(3, "proceeding with becoming owner of PVC %s/%s although the capacity check failed: rpc error: code = %s desc = %.300s",
		       pvc->meta.ns, pvc->meta.name, csi_code_go_name(st.code), st.message);
	csi_msg_free(resp);
	csi_arena_free(a);
	return room;
}

/*
 * Node deployment's delay: how long before this node may try to own the claim. The first time
 * its place in the claim's order decides (prov_owner_score, prov_owner_delay); after a failed try
 * prov_owner_backoff() has set it. Returns the time left (> 0: wait; the delayed add is armed
 * once), with the failed tries and whether the cached claim is the version a try got 409 for.
 */
static int64_t owner_wait(struct prov_ctrl *c, const char *key, const struct kube_obj *o,
			  const struct kube_pvc *pvc, unsigned *attempts, bool *stale)
{
	int64_t now = mono_now_ns();
	char uid[64];

	kube_obj_uid(o, uid, sizeof(uid));
	pthread_mutex_lock(&c->mu);
	struct owner_try *t = kube_hmap_get(&c->owners, key);
	if (!t) {
		unsigned n, rank = owner_rank(c, *uid ? uid : key, &n);
		t = xcalloc(1, sizeof(*t));
		t->due = now + prov_owner_delay(c->nd->base_delay_ns, c->nd->max_delay_ns, 0, rnd01(),
						rank, n);
		kube_hmap_put(&c->owners, key, t);
	}
	int64_t wait = t->due - now;
	bool arm = wait > 0 && !t->armed;
	t->armed = wait > 0;
	*attempts = t->attempts;
	*stale = *t->stale_rv && pvc->meta.rv && !strcmp(t->stale_rv, pvc->meta.rv);
	pthread_mutex_unlock(&c->mu);
	if (arm)
		kube_workqueue_add_after(c->claimq, key, wait);
	return wait;
}

/*
 * The selected-node PATCH race: set the annotation to this node with the claim's
 * resourceVersion. The first writer wins; a 409 means another instance was faster (or the claim
 * changed), and this node waits for the cache's newer claim before it tries again.
 */
static void select_this_node(struct prov_ctrl *c, const char *key, const struct kube_pvc *pvc)
{
	char body[1024];
	struct kube_err e;
	struct owner_try *t;

	snprintf(body, sizeof(body),
		 "{\"metadata\":{\"annotations\":{\"%s\":\"%s\"},\"resourceVersion\":\"%s\"}}",
		 PROV_ANN_SELECTED_NODE, c->nd->node, pvc->meta.rv ? pvc->meta.rv : "");
	if (kube_patch_discard(c->kc, &KUBE_RES_PERSISTENTVOLUMECLAIMS, pvc->meta.ns, pvc->meta.name,
			       false, KUBE_PATCH_MERGE, body, &e) == 0) {
		KLOG_V(3, "became owner of PVC %s", key);
		/* Keep the entry (not armed, due later) so that a stale cache does not try again. */
		pthread_mutex_lock(&c->mu);
		t = kube_hmap_get(&c->owners, key);
		if (t)
			t->due = mono_now_ns() + c->nd->max_delay_ns;
		pthread_mutex_unlock(&c->mu);
		return;
	}
	if (kube_err_is_conflict(&e)) {
		KLOG_V(3, "conflict during PVC %s update, will try again", key);
		pthread_mutex_lock(&c->mu);
		t = kube_hmap_get(&c->owners, key);
		if (t && pvc->meta.rv && strlen(pvc->meta.rv) < sizeof(t->stale_rv))
			strcpy(t->stale_rv, pvc->meta.rv);
		pthread_mutex_unlock(&c->mu);
	} else if (!kube_err_is_not_found(&e)) {
		KLOG_ERR(e.message, "selecting node \"%s\" for PVC %s failed", c->nd->node, key);
	}
	prov_owner_backoff(c, key);
}

/*
 * upstream's becomeOwner without a sleeping worker: wait (a delayed add) until the claim's due
 * time, check room, then race for the selected-node annotation. Success shows up as an update
 * of the claim, which then provisions here.
 */
static void become_owner(struct prov_ctrl *c, const char *key, const struct kube_obj *o,
			 const struct kube_pvc *pvc, const struct kube_storageclass *sc)
{
	unsigned attempts;
	bool stale;

	if (owner_wait(c, key, o, pvc, &attempts, &stale) > 0)
		return;
	if (stale) {
		/* The last try's 409 said the claim changed (most likely: another node owns it
		 * now); the cache has not shown the change yet. Its update brings the claim back. */
		KLOG_V(5, "PVC %s: waiting for the version after %s", key, pvc->meta.rv);
		prov_owner_backoff(c, key);
		return;
	}
	KLOG_V(5, "will try to become owner of PVC %s (attempt #%u)", key, attempts);
	if (!node_has_room(c, pvc, sc)) {
		KLOG_V(5, "not enough capacity for PVC %s with resource version %s", key, pvc->meta.rv);
		prov_owner_backoff(c, key);
		return;
	}
	select_this_node(c, key, pvc);
}

/* upstream's checkNode: this node's claims provision here; others are left alone. */
enum prov_node_step prov_node_claim(struct prov_ctrl *c, const char *key,
				    const struct kube_obj *o, const struct kube_pvc *pvc,
				    const struct kube_storageclass *sc)
{
	const char *sel = pvc->selected_node;
	if (sel && *sel) {
		prov_owner_forget(c, key);
		return strcmp(sel, c->nd->node) ? PROV_NODE_SKIP : PROV_NODE_PROVISION;
	}
	if (sc->wait_for_first_consumer || !c->nd->immediate_binding)
		return PROV_NODE_SKIP;
	if (sc->nallowed_topologies &&
	    !kube_node_selector_match(sc->allowed_topologies, sc->nallowed_topologies, c->nd->topology,
				      (uint16_t)c->nd->ntopology)) {
		KLOG_V(5, "ignoring PVC %s, allowed topologies is not compatible with this node", key);
		return PROV_NODE_SKIP;
	}
	become_owner(c, key, o, pvc, sc);
	return PROV_NODE_LATER;
}

void prov_owners_clear(struct prov_ctrl *c)
{
	for (size_t i = 0; i < c->owners.cap; i++)
		if (c->owners.slots[i].key)
			free(c->owners.slots[i].value);
	kube_hmap_clear(&c->owners);
	kube_hmap_clear(&c->seen_nodes);
}
