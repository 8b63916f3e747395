/*
 * The capacity controller (--enable-capacity): upstream's pkg/capacity on compact records.
 *
 * Desired state: one CSIStorageCapacity per (topology segment, StorageClass of this driver), for
 * WaitForFirstConsumer classes only unless --capacity-for-immediate-binding. Segments come from
 * the CSINodes that list this driver (their topology keys) and the labels of the same-named Nodes;
 * a node whose Node lacks one of the keys is skipped until its labels arrive. With
 * --node-deployment the one segment is fixed: this node's NodeGetInfo topology.
 *
 * `items` maps "<class>|<k=v,k=v>" (keys sorted) to the name of the object that holds it (or
 * none yet). Objects come from an informer limited to our namespace and labels
 * (csi.storage.k8s.io/drivername, csi.storage.k8s.io/managed-by) and filtered by owner: an object
 * controlled by another owner never enters the cache, so it is never updated nor deleted. An
 * object of ours whose pair is no longer desired, or a second object for one pair, is deleted.
 *
 * Work keys on one queue ("csistoragecapacity", --capacity-threads workers):
 *   "s"          recompute the desired pairs (a Node, CSINode or class changed)
 *   "c:<class>"  the same, then refresh that class's pairs
 *   "i:<item>"   GetCapacity for a pair, then create or update its object (an error keeps the
 *                old value and retries with backoff)
 *   "d:<name>"   delete an obsolete object of ours
 *   "p"          the poll: refresh every pair, then again after --capacity-poll-interval
 *
 * Lock order: c->mu may be taken before an informer store's lock, never the reverse (handlers
 * run without store locks held).
 */
#include "provisioner/prov.h"

#include "base/log.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "kube/quantity.h"
#include "kube/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cap_item {
	const char *cls;        /* interned */
	struct kube_kv *seg;    /* sorted by key; strings interned */
	size_t nseg;
	char *obj;              /* name of the object holding this pair, or NULL */
};

struct prov_cap {
	struct prov_cap_opts o;
	char *driver, *ns, *managed_by, *owner_uid;
	json_t *owner; /* ownerReference or NULL */
	struct kube_kv *fixed;
	struct kube_client *kc;
	struct kube_informer *sc_inf; /* borrowed */
	struct kube_informer *csisc_inf, *node_inf, *csinode_inf; /* owned; node ones NULL if fixed */
	struct kube_workqueue *q;
	pthread_mutex_t mu; /* guards items, ready */
	struct kube_hmap items;
	bool ready;
};

enum cres { C_DONE = KUBE_WORK_DONE, C_RETRY = KUBE_WORK_RETRY, C_AGAIN = KUBE_WORK_AGAIN };

static bool streq(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

static int kv_cmp(const void *a, const void *b)
{
	return strcmp(((const struct kube_kv *)a)->key, ((const struct kube_kv *)b)->key);
}

/* "<class>|k=v,k=v" with seg sorted by key. */
static void item_key(const char *cls, const struct kube_kv *seg, size_t n, struct strbuf *sb)
{
	strbuf_reset(sb);
	strbuf_addf(sb, "%s|", cls);
	for (size_t i = 0; i < n; i++)
		strbuf_addf(sb, "%s%s=%s", i ? "," : "", seg[i].key, seg[i].value);
}

/* The item key an object stands for; false when it cannot stand for any (matchExpressions). */
static bool object_key(const struct kube_csisc *cs, struct strbuf *sb)
{
	if (cs->topology_expressions || !cs->storage_class)
		return false;
	struct kube_kv *kv = xcalloc(cs->ntopology + 1, sizeof(*kv));
	memcpy(kv, cs->topology, cs->ntopology * sizeof(*kv));
	qsort(kv, cs->ntopology, sizeof(*kv), kv_cmp);
	item_key(cs->storage_class, kv, cs->ntopology, sb);
	free(kv);
	return true;
}

/* Ours: our labels, and not controlled by another owner (uncontrolled ones are adopted). */
static bool managed(const struct prov_cap *c, const struct kube_csisc *cs)
{
	return cs && streq(cs->driver_label, c->driver) && streq(cs->managed_by, c->managed_by) &&
	       (!c->owner_uid || !cs->controller_uid || !strcmp(cs->controller_uid, c->owner_uid));
}

static bool csisc_filter(const struct kube_obj *o, void *ud)
{
	return managed(ud, kube_csisc_of(o));
}

static void enqueue(struct prov_cap *c, char kind, const char *rest)
{
	struct strbuf sb = STRBUF_INIT;
	if (rest)
		strbuf_addf(&sb, "%c:%s", kind, rest);
	else
		strbuf_addch(&sb, kind);
	kube_workqueue_add(c->q, sb.buf);
	strbuf_release(&sb);
}

static void item_free(struct cap_item *it)
{
	if (!it)
		return;
	free(it->seg);
	free(it->obj);
	free(it);
}

static struct cap_item *item_by_obj(struct prov_cap *c, const char *name, const char **key)
{
	for (size_t i = 0; i < c->items.cap; i++) {
		struct cap_item *it = c->items.slots[i].value;
		if (c->items.slots[i].key && it->obj && !strcmp(it->obj, name)) {
			if (key)
				*key = c->items.slots[i].key;
			return it;
		}
	}
	return NULL;
}

/*
 * Links an object of ours to its pair, or queues it for deletion when it is obsolete or a
 * duplicate. Called with c->mu held.
 */
static void match_object(struct prov_cap *c, const struct kube_obj *o)
{
	const struct kube_csisc *cs = kube_csisc_of(o);
	struct strbuf key = STRBUF_INIT;
	struct cap_item *it = NULL;

	if (!managed(c, cs))
		goto out;
	if (object_key(cs, &key))
		it = kube_hmap_get(&c->items, key.buf);
	if (it && it->obj && strcmp(it->obj, o->name) != 0) {
		/* The pair has another object: keep that one unless it is gone. */
		struct kube_obj *other = kube_store_get(kube_informer_store(c->csisc_inf), c->ns, it->obj);
		if (other) {
			kube_obj_unref(other);
			it = NULL;
		} else {
			free(it->obj);
			it->obj = NULL;
		}
	}
	if (it) {
		if (!it->obj) {
			it->obj = xstrdup(o->name);
			KLOG_V(5, "Capacity Controller: CSIStorageCapacity %s matches %s", o->name, key.buf);
		}
	} else {
		KLOG_V(5, "Capacity Controller: CSIStorageCapacity %s is obsolete, enqueue for removal",
		       o->name);
		enqueue(c, 'd', o->name);
	}
out:
	strbuf_release(&key);
}

/* ---- informer handlers ---- */

static void csisc_added(const struct kube_obj *o, void *ud)
{
	struct prov_cap *c = ud;
	pthread_mutex_lock(&c->mu);
	if (c->ready)
		match_object(c, o);
	pthread_mutex_unlock(&c->mu);
}

static void csisc_updated(const struct kube_obj *old, const struct kube_obj *o, void *ud)
{
	(void)old;
	csisc_added(o, ud);
}

/* Someone removed an object we still need (or it left our cache): make it again. */
static void csisc_deleted(const struct kube_obj *o, void *ud)
{
	struct prov_cap *c = ud;
	const char *key = NULL;
	pthread_mutex_lock(&c->mu);
	struct cap_item *it = c->ready ? item_by_obj(c, o->name, &key) : NULL;
	if (it) {
		KLOG_V(5, "Capacity Controller: CSIStorageCapacity %s was removed, enqueue %s for re-creation",
		       o->name, key);
		free(it->obj);
		it->obj = NULL;
		enqueue(c, 'i', key);
	}
	pthread_mutex_unlock(&c->mu);
}

static void sc_event(const struct kube_obj *o, void *ud)
{
	enqueue(ud, 'c', o->name);
}

static void sc_updated(const struct kube_obj *old, const struct kube_obj *o, void *ud)
{
	if (!streq(old->rv, o->rv))
		sc_event(o, ud);
}

static void topo_event(const struct kube_obj *o, void *ud)
{
	(void)o;
	enqueue(ud, 's', NULL);
}

static void node_updated(const struct kube_obj *old, const struct kube_obj *o, void *ud)
{
	const struct kube_node *a = kube_node_of(old), *b = kube_node_of(o);
	bool same = a && b && a->nlabels == b->nlabels;
	for (size_t i = 0; same && i < a->nlabels; i++)
		same = streq(a->labels[i].key, b->labels[i].key) &&
		       streq(a->labels[i].value, b->labels[i].value);
	if (!same)
		topo_event(o, ud);
}

static void csinode_updated(const struct kube_obj *old, const struct kube_obj *o, void *ud)
{
	if (!streq(old->rv, o->rv))
		topo_event(o, ud);
}

/* ---- desired state ---- */

struct segs {
	struct kube_kv **v;
	size_t *n;
	size_t len;
};

static void segs_free(struct segs *s)
{
	for (size_t i = 0; i < s->len; i++)
		free(s->v[i]);
	free(s->v);
	free(s->n);
}

static void segs_add(struct segs *s, struct kube_kv *kv, size_t n)
{
	struct strbuf a = STRBUF_INIT, b = STRBUF_INIT;
	item_key("", kv, n, &a);
	for (size_t i = 0; i < s->len; i++) {
		item_key("", s->v[i], s->n[i], &b);
		if (!strcmp(a.buf, b.buf)) {
			free(kv);
			goto out;
		}
	}
	s->v = xrealloc(s->v, (s->len + 1) * sizeof(*s->v));
	s->n = xrealloc(s->n, (s->len + 1) * sizeof(*s->n));
	s->v[s->len] = kv;
	s->n[s->len] = n;
	s->len++;
out:
	strbuf_release(&a);
	strbuf_release(&b);
}

/* Upstream's nodeTopology.sync: one segment per distinct set of the driver's key values. */
static void compute_segments(struct prov_cap *c, struct segs *s)
{
	memset(s, 0, sizeof(*s));
	if (!c->csinode_inf) {
		struct kube_kv *kv = xcalloc(c->o.nfixed + 1, sizeof(*kv));
		memcpy(kv, c->fixed, c->o.nfixed * sizeof(*kv));
		segs_add(s, kv, c->o.nfixed);
		return;
	}
	size_t n = 0;
	struct kube_obj **cns = kube_store_list(kube_informer_store(c->csinode_inf), &n);
	for (size_t i = 0; i < n; i++) {
		const struct kube_csinode *cn = kube_csinode_of(cns[i]);
		const struct kube_csinode_driver *d = NULL;
		for (size_t j = 0; cn && j < cn->ndrivers; j++)
			if (!strcmp(cn->drivers[j].name, c->driver))
				d = &cn->drivers[j];
		if (!d)
			continue; /* the driver does not run there */
		struct kube_obj *no = kube_store_get(kube_informer_store(c->node_inf), NULL, cns[i]->name);
		const struct kube_node *node = kube_node_of(no);
		struct kube_kv *kv = xcalloc(d->ntopology_keys + 1, sizeof(*kv));
		size_t k = 0;
		for (; node && k < d->ntopology_keys; k++) {
			const char *v = NULL;
			for (size_t l = 0; l < node->nlabels && !v; l++)
				if (!strcmp(node->labels[l].key, d->topology_keys[k]))
					v = node->labels[l].value;
			if (!v)
				break;
			kv[k] = (struct kube_kv){ kube_intern(d->topology_keys[k]), kube_intern(v) };
		}
		if (node && k == d->ntopology_keys) {
			qsort(kv, k, sizeof(*kv), kv_cmp);
			segs_add(s, kv, k);
		} else {
			free(kv); /* no Node yet, or a label not set yet: its update brings us back */
		}
		kube_obj_unref(no);
	}
	kube_objs_free(cns, n);
}

static bool class_wanted(const struct prov_cap *c, const struct kube_storageclass *sc)
{
	return sc && streq(sc->provisioner, c->driver) &&
	       (sc->wait_for_first_consumer || c->o.immediate_binding);
}

/* Brings `items` in line with segments x classes; queues new pairs and obsolete objects. */
static void sync_desired(struct prov_cap *c)
{
	struct segs s;
	size_t nsc = 0, nobj = 0;
	struct kube_hmap want = KUBE_HMAP_INIT;
	struct strbuf key = STRBUF_INIT;

	compute_segments(c, &s);
	struct kube_obj **scs = kube_store_list(kube_informer_store(c->sc_inf), &nsc);
	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; i < nsc; i++) {
		if (!class_wanted(c, kube_storageclass_of(scs[i])))
			continue;
		for (size_t j = 0; j < s.len; j++) {
			item_key(scs[i]->name, s.v[j], s.n[j], &key);
			kube_hmap_put(&want, key.buf, NULL);
			if (kube_hmap_has(&c->items, key.buf))
				continue;
			struct cap_item *it = xcalloc(1, sizeof(*it));
			it->cls = kube_intern(scs[i]->name);
			it->seg = xcalloc(s.n[j] + 1, sizeof(*it->seg));
			memcpy(it->seg, s.v[j], s.n[j] * sizeof(*it->seg));
			it->nseg = s.n[j];
			kube_hmap_put(&c->items, key.buf, it);
			KLOG_V(5, "Capacity Controller: enqueuing %s", key.buf);
			enqueue(c, 'i', key.buf);
		}
	}
	/* Pairs no longer wanted: forget them, delete their objects. */
	char **gone = xcalloc(c->items.len + 1, sizeof(*gone));
	size_t ngone = 0;
	for (size_t i = 0; i < c->items.cap; i++)
		if (c->items.slots[i].key && !kube_hmap_has(&want, c->items.slots[i].key))
			gone[ngone++] = xstrdup(c->items.slots[i].key);
	for (size_t i = 0; i < ngone; i++) {
		struct cap_item *it = kube_hmap_del(&c->items, gone[i]);
		KLOG_V(3, "Capacity Controller: %s is no longer needed", gone[i]);
		if (it && it->obj)
			enqueue(c, 'd', it->obj);
		item_free(it);
		free(gone[i]);
	}
	free(gone);
	/* Objects nobody links to (left from an earlier run, or a pair just dropped). */
	struct kube_obj **objs = kube_store_list(kube_informer_store(c->csisc_inf), &nobj);
	for (size_t i = 0; i < nobj; i++)
		match_object(c, objs[i]);
	pthread_mutex_unlock(&c->mu);
	kube_objs_free(objs, nobj);
	kube_objs_free(scs, nsc);
	kube_hmap_clear(&want);
	segs_free(&s);
	strbuf_release(&key);
}

static void refresh_class(struct prov_cap *c, const char *cls)
{
	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; i < c->items.cap; i++) {
		struct cap_item *it = c->items.slots[i].value;
		if (c->items.slots[i].key && (!cls || !strcmp(it->cls, cls)))
			enqueue(c, 'i', c->items.slots[i].key);
	}
	pthread_mutex_unlock(&c->mu);
}

/* ---- writing objects ---- */

static json_t *quantity_json(int64_t bytes)
{
	char q[KUBE_QUANTITY_BUFLEN];
	kube_quantity_format(bytes, true, q, sizeof(q));
	return json_string(q);
}

static char *create_object(struct prov_cap *c, const struct cap_item *it, int64_t avail,
			   int64_t maxsize, struct kube_err *e)
{
	json_t *labels = json_pack("{s:s,s:s}", "csi.storage.k8s.io/drivername", c->driver,
				   "csi.storage.k8s.io/managed-by", c->managed_by);
	json_t *md = json_pack("{s:s,s:s,s:o}", "generateName", "csisc-", "namespace", c->ns,
			       "labels", labels);
	if (c->owner)
		json_object_set_new(md, "ownerReferences", json_pack("[O]", c->owner));
	json_t *ml = json_object();
	for (size_t i = 0; i < it->nseg; i++)
		json_object_set_new(ml, it->seg[i].key, json_string(it->seg[i].value));
	json_t *obj = json_pack("{s:s,s:s,s:o,s:s,s:{s:o},s:o}", "apiVersion", "storage.k8s.io/v1",
				"kind", "CSIStorageCapacity", "metadata", md, "storageClassName",
				it->cls, "nodeTopology", "matchLabels", ml, "capacity",
				quantity_json(avail));
	if (maxsize >= 0)
		json_object_set_new(obj, "maximumVolumeSize", quantity_json(maxsize));
	json_t *res = kube_create(c->kc, &KUBE_RES_CSISTORAGECAPACITIES, c->ns, obj, e);
	json_decref(obj);
	const char *name = json_string_value(json_object_get(json_object_get(res, "metadata"), "name"));
	char *out = name ? xstrdup(name) : NULL;
	if (res && !out)
		snprintf(e->message, sizeof(e->message), "the API server returned no name");
	json_decref(res);
	return out;
}

/* The object record from the cache, or from the API when the cache has not seen it yet. */
static struct kube_obj *get_object(struct prov_cap *c, const char *name, bool *gone)
{
	struct kube_obj *o = kube_store_get(kube_informer_store(c->csisc_inf), c->ns, name);
	struct kube_err e;
	char err[256];

	*gone = false;
	if (o)
		return o;
	json_t *j = kube_get(c->kc, &KUBE_RES_CSISTORAGECAPACITIES, c->ns, name, &e);
	if (!j) {
		*gone = kube_err_is_not_found(&e);
		return NULL;
	}
	o = kube_decode_json(&KUBE_KIND_CSISTORAGECAPACITY, j, err, sizeof(err));
	json_decref(j);
	if (o && !managed(c, kube_csisc_of(o))) {
		kube_obj_unref(o);
		o = NULL;
		*gone = true; /* no longer ours: make our own */
	}
	return o;
}

/*
 * The segment's capacity went to zero: its object goes (the scheduler reads a missing object as
 * no capacity, as a zero one), and comes back with a new name once there is capacity again.
 */
static enum cres drop_zero(struct prov_cap *c, const char *key, const struct kube_obj *o)
{
	struct kube_err e;
	char uid[64];

	if (kube_delete(c->kc, &KUBE_RES_CSISTORAGECAPACITIES, c->ns, o->name,
			kube_obj_uid(o, uid, sizeof(uid)), NULL, &e) && !kube_err_is_not_found(&e)) {
		KLOG_ERR(e.message, "Capacity Controller: delete CSIStorageCapacity %s with zero capacity",
			 o->name);
		return C_RETRY;
	}
	KLOG_V(3, "Capacity Controller: removed %s for %s: zero capacity", o->name, key);
	pthread_mutex_lock(&c->mu);
	struct cap_item *cur = kube_hmap_get(&c->items, key);
	if (cur && cur->obj && !strcmp(cur->obj, o->name)) {
		free(cur->obj);
		cur->obj = NULL;
	}
	pthread_mutex_unlock(&c->mu);
	return C_DONE;
}

static enum cres sync_item(struct prov_cap *c, const char *key)
{
	struct cap_item it = { 0 };
	char *obj = NULL;

	pthread_mutex_lock(&c->mu);
	struct cap_item *cur = kube_hmap_get(&c->items, key);
	if (cur) {
		it = *cur;
		it.seg = xcalloc(cur->nseg + 1, sizeof(*it.seg));
		memcpy(it.seg, cur->seg, cur->nseg * sizeof(*it.seg));
		obj = cur->obj ? xstrdup(cur->obj) : NULL;
		it.obj = NULL;
	}
	pthread_mutex_unlock(&c->mu);
	if (!cur) {
		KLOG_V(5, "Capacity Controller: %s became obsolete", key);
		return C_DONE;
	}
	enum cres r = C_DONE;
	struct kube_obj *so = kube_store_get(kube_informer_store(c->sc_inf), NULL, it.cls);
	const struct kube_storageclass *sc = kube_storageclass_of(so);
	struct csi_arena *a = csi_arena_new();
	Csi__V1__GetCapacityResponse *resp = NULL;
	struct csi_status st = { 0 };
	struct kube_obj *o = NULL;
	struct kube_err e = { 0 };

	if (!sc)
		goto out; /* the class is gone: sync_desired drops the pair */
	Csi__V1__GetCapacityRequest *req = csi_msg_new(a, &csi__v1__get_capacity_request__descriptor);
	for (size_t i = 0; i < sc->nparameters; i++)
		csi_map_add(a, &req->base, "parameters", sc->parameters[i].key,
			    sc->parameters[i].value ? sc->parameters[i].value : "");
	if (it.nseg) {
		req->accessible_topology = csi_msg_new(a, &csi__v1__topology__descriptor);
		for (size_t i = 0; i < it.nseg; i++)
			csi_map_add(a, &req->accessible_topology->base, "segments", it.seg[i].key,
				    it.seg[i].value);
	}
	if (csi_get_capacity(c->o.csi, req, &resp, c->o.timeout_ns, &st)) {
		KLOG_E("Capacity Controller: CSI GetCapacity for %s: rpc error: code = %s desc = %.400s",
		       key, csi_code_go_name(st.code), st.message);
		r = C_RETRY; /* the object keeps its last value */
		goto out;
	}
	int64_t avail = resp->available_capacity;
	int64_t maxsize = resp->maximum_volume_size ? resp->maximum_volume_size->value : -1;
	bool gone = false;
	if (obj && !(o = get_object(c, obj, &gone)) && !gone) {
		r = C_RETRY; /* cannot tell whether it exists */
		goto out;
	}
	const struct kube_csisc *cs = kube_csisc_of(o);
	if (avail <= 0) {
		/* seed 004: an object is published only for a non-zero capacity */
		r = cs ? drop_zero(c, key, o) : C_DONE;
		goto out;
	}
	if (!cs) {
		char *name = create_object(c, &it, avail, maxsize, &e);
		if (!name) {
			KLOG_ERR(e.message, "Capacity Controller: create CSIStorageCapacity for %s",
				 key);
			r = C_RETRY;
			goto out;
		}
		KLOG_V(3, "Capacity Controller: created %s for %s with capacity %lld", name, key,
		       (long long)avail);
		pthread_mutex_lock(&c->mu);
		cur = kube_hmap_get(&c->items, key);
		if (cur && (!cur->obj || !strcmp(cur->obj, name) || (obj && !strcmp(cur->obj, obj)))) {
			free(cur->obj);
			cur->obj = name;
			name = NULL;
		} else {
			enqueue(c, 'd', name); /* the pair went away or got another object meanwhile */
		}
		pthread_mutex_unlock(&c->mu);
		free(name);
		goto out;
	}
	bool owned = !c->owner_uid || streq(cs->controller_uid, c->owner_uid);
	if (cs->capacity == avail && cs->max_volume_size == maxsize && owned) {
		KLOG_V(5, "Capacity Controller: no need to update %s for %s, same capacity %lld", o->name,
		       key, (long long)avail);
		goto out;
	}
	json_t *p = json_pack("{s:{s:s},s:o,s:o}", "metadata", "resourceVersion", o->rv,
			      "capacity", quantity_json(avail), "maximumVolumeSize",
			      maxsize >= 0 ? quantity_json(maxsize) : json_null());
	if (!owned)
		json_object_set_new(json_object_get(p, "metadata"), "ownerReferences",
				    json_pack("[O]", c->owner));
	char *body = json_dumps(p, JSON_COMPACT);
	json_t *res = kube_patch(c->kc, &KUBE_RES_CSISTORAGECAPACITIES, c->ns, o->name, false,
				 KUBE_PATCH_MERGE, body, &e);
	free(body);
	json_decref(p);
	if (res) {
		KLOG_V(3, "Capacity Controller: updated %s for %s, new capacity %lld", o->name, key,
		       (long long)avail);
		json_decref(res);
	} else if (kube_err_is_conflict(&e)) {
		r = C_AGAIN; /* the informer brings the new version */
	} else {
		KLOG_ERR(e.message, "Capacity Controller: update CSIStorageCapacity %s for %s",
			 o->name, key);
		r = C_RETRY;
	}
out:
	kube_obj_unref(o);
	csi_msg_free(resp);
	csi_arena_free(a);
	kube_obj_unref(so);
	free(it.seg);
	free(obj);
	return r;
}

static enum cres delete_object(struct prov_cap *c, const char *name)
{
	struct kube_obj *o = kube_store_get(kube_informer_store(c->csisc_inf), c->ns, name);
	struct strbuf key = STRBUF_INIT;
	struct kube_err e;
	char uid[64];
	enum cres r = C_DONE;

	if (!o)
		return C_DONE;
	pthread_mutex_lock(&c->mu);
	struct cap_item *it = object_key(kube_csisc_of(o), &key) ? kube_hmap_get(&c->items, key.buf) : NULL;
	bool needed = it && (!it->obj || !strcmp(it->obj, name));
	if (needed && !it->obj)
		it->obj = xstrdup(name);
	pthread_mutex_unlock(&c->mu);
	if (!needed) {
		KLOG_V(3, "Capacity Controller: removing CSIStorageCapacity %s", name);
		if (kube_delete(c->kc, &KUBE_RES_CSISTORAGECAPACITIES, c->ns, name,
				kube_obj_uid(o, uid, sizeof(uid)), NULL, &e) && !kube_err_is_not_found(&e)) {
			KLOG_ERR(e.message, "Capacity Controller: delete CSIStorageCapacity %s",
				 name);
			r = C_RETRY;
		}
	}
	strbuf_release(&key);
	kube_obj_unref(o);
	return r;
}

static enum cres sync_key(struct prov_cap *c, const char *key)
{
	switch (key[0]) {
	case 's':
		sync_desired(c);
		return C_DONE;
	case 'c':
		sync_desired(c);
		refresh_class(c, key + 2);
		return C_DONE;
	case 'p':
		KLOG_V(5, "Capacity Controller: periodic refresh");
		refresh_class(c, NULL);
		kube_workqueue_add_after(c->q, "p", c->o.poll_ns);
		return C_DONE;
	case 'i':
		return sync_item(c, key + 2);
	case 'd':
		return delete_object(c, key + 2);
	default:
		return C_DONE;
	}
}

static enum kube_work_result work(void *arg, const char *key)
{
	return (enum kube_work_result)sync_key(arg, key);
}

/* ---- life cycle ---- */

struct prov_cap *prov_cap_new(struct kube_client *kc, struct kube_informer *sc_inf,
			      const struct prov_cap_opts *o)
{
	struct prov_cap *c = xcalloc(1, sizeof(*c));
	struct kube_hmap empty = KUBE_HMAP_INIT;
	struct kube_informer_opts io = { 0 };
	char selector[600];

	c->o = *o;
	c->kc = kc;
	c->sc_inf = sc_inf;
	c->items = empty;
	c->driver = xstrdup(o->driver);
	c->ns = xstrdup(o->ns);
	c->managed_by = xstrdup(o->managed_by);
	c->owner = o->owner ? json_incref(o->owner) : NULL;
	const char *uid = json_string_value(json_object_get(o->owner, "uid"));
	c->owner_uid = uid ? xstrdup(uid) : NULL;
	pthread_mutex_init(&c->mu, NULL);
	c->q = kube_workqueue_new("csistoragecapacity", o->retry_start_ns, o->retry_max_ns);

	snprintf(selector, sizeof(selector),
		 "csi.storage.k8s.io/drivername=%s,csi.storage.k8s.io/managed-by=%s", c->driver,
		 c->managed_by);
	io.kind = &KUBE_KIND_CSISTORAGECAPACITY;
	io.ns = c->ns;
	io.label_selector = selector;
	io.filter = csisc_filter;
	io.filter_ud = c;
	c->csisc_inf = kube_informer_new(kc, &io);
	struct kube_handlers ch = { csisc_added, csisc_updated, csisc_deleted, c };
	kube_informer_add_handlers(c->csisc_inf, &ch);
	struct kube_handlers sh = { sc_event, sc_updated, sc_event, c };
	kube_informer_add_handlers(sc_inf, &sh);
	if (o->fixed) {
		c->fixed = xcalloc(o->nfixed + 1, sizeof(*c->fixed));
		for (size_t i = 0; i < o->nfixed; i++)
			c->fixed[i] = (struct kube_kv){ kube_intern(o->fixed_segment[i].key),
							kube_intern(o->fixed_segment[i].value) };
		qsort(c->fixed, o->nfixed, sizeof(*c->fixed), kv_cmp);
	} else {
		memset(&io, 0, sizeof(io));
		io.kind = &KUBE_KIND_NODE_T;
		c->node_inf = kube_informer_new(kc, &io);
		struct kube_handlers nh = { topo_event, node_updated, topo_event, c };
		kube_informer_add_handlers(c->node_inf, &nh);
		io.kind = &KUBE_KIND_CSINODE_T;
		c->csinode_inf = kube_informer_new(kc, &io);
		struct kube_handlers cnh = { topo_event, csinode_updated, topo_event, c };
		kube_informer_add_handlers(c->csinode_inf, &cnh);
	}
	c->o.driver = c->driver;
	c->o.ns = c->ns;
	c->o.managed_by = c->managed_by;
	c->o.owner = c->owner;
	c->o.fixed_segment = c->fixed;
	return c;
}

/* Starts the informers; call before the shared StorageClass informer has synced. */
int prov_cap_start_informers(struct prov_cap *c)
{
	struct kube_informer *infs[3] = { c->csisc_inf, c->node_inf, c->csinode_inf };
	char err[200];

	return kube_informers_start(infs, 3, err, sizeof(err));
}

int prov_cap_start(struct prov_cap *c, const bool *stop, pthread_mutex_t *stop_mu, char *err,
		   size_t errlen)
{
	struct kube_informer *infs[3] = { c->csisc_inf, c->node_inf, c->csinode_inf };
	struct kube_stop st = { .mu = stop_mu, .flag = stop };

	if (kube_informers_wait_synced(infs, 3, NULL, &st, 0, err, errlen))
		return -1;
	KLOG_I("Starting Capacity Controller");
	pthread_mutex_lock(&c->mu);
	c->ready = true;
	pthread_mutex_unlock(&c->mu);
	/* What we need, then what we have (the objects left by an earlier run are adopted). */
	sync_desired(c);
	KLOG_V(3, "Capacity Controller: initial number of potential CSIStorageCapacity objects %zu",
	       c->items.len);
	kube_workqueue_add_after(c->q, "p", c->o.poll_ns);
	/* --capacity-threads=0: no worker, as upstream; the objects are never written. */
	struct kube_serve sv = { c->q, c->o.workers, work, c };
	if (c->o.workers > 0 && kube_workqueue_serve(&sv, 1, KUBE_WORKER_IDLE_NS, err, errlen))
		return -1;
	KLOG_I("Started Capacity Controller");
	return 0;
}

void prov_cap_refresh_class(struct prov_cap *c, const char *cls)
{
	if (c && cls)
		refresh_class(c, cls);
}

void prov_cap_stop(struct prov_cap *c)
{
	if (!c)
		return;
	kube_workqueue_shutdown(c->q);
	kube_workqueue_wait_workers(c->q);
	KLOG_I("Shutting down Capacity Controller");
}

/* The informers this controller owns, for parallel stopping by the caller. */
size_t prov_cap_informers(struct prov_cap *c, struct kube_informer **out)
{
	size_t n = 0;
	struct kube_informer *infs[3] = { c->csisc_inf, c->node_inf, c->csinode_inf };
	for (int i = 0; i < 3; i++)
		if (infs[i])
			out[n++] = infs[i];
	return n;
}

void prov_cap_free(struct prov_cap *c)
{
	if (!c)
		return;
	struct kube_informer *infs[3] = { c->csisc_inf, c->node_inf, c->csinode_inf };
	for (int i = 0; i < 3; i++)
		if (infs[i]) {
			kube_informer_stop(infs[i]);
			kube_informer_free(infs[i]);
		}
	kube_workqueue_free(c->q);
	for (size_t i = 0; i < c->items.cap; i++)
		if (c->items.slots[i].key)
			item_free(c->items.slots[i].value);
	kube_hmap_clear(&c->items);
	json_decref(c->owner);
	free(c->fixed);
	free(c->driver);
	free(c->ns);
	free(c->managed_by);
	free(c->owner_uid);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

/* Upstream's three gauges (no labels), then the queue's metrics. */
void prov_cap_render_metrics(struct prov_cap *c, struct strbuf *out)
{
	size_t goal, current = 0, obsolete = 0, n = 0;
	struct strbuf key = STRBUF_INIT;
	struct kube_obj **objs = kube_store_list(kube_informer_store(c->csisc_inf), &n);

	pthread_mutex_lock(&c->mu);
	goal = c->items.len;
	for (size_t i = 0; i < c->items.cap; i++)
		if (c->items.slots[i].key && ((struct cap_item *)c->items.slots[i].value)->obj)
			current++;
	for (size_t i = 0; i < n; i++) {
		const struct kube_csisc *cs = kube_csisc_of(objs[i]);
		if (managed(c, cs) && !(object_key(cs, &key) && kube_hmap_has(&c->items, key.buf)))
			obsolete++;
	}
	pthread_mutex_unlock(&c->mu);
	kube_objs_free(objs, n);
	strbuf_release(&key);
	strbuf_addf(out, "# HELP csistoragecapacities_desired_goal [ALPHA] Number of CSIStorageCapacity objects that are supposed to be managed automatically.\n"
		    "# TYPE csistoragecapacities_desired_goal gauge\ncsistoragecapacities_desired_goal %zu\n",
		    goal);
	strbuf_addf(out, "# HELP csistoragecapacities_desired_current [ALPHA] Number of CSIStorageCapacity objects that exist and are supposed to be managed automatically.\n"
		    "# TYPE csistoragecapacities_desired_current gauge\ncsistoragecapacities_desired_current %zu\n",
		    current);
	strbuf_addf(out, "# HELP csistoragecapacities_obsolete [ALPHA] Number of CSIStorageCapacity objects that exist and will be deleted automatically. Objects that exist and may need an update are not considered obsolete and therefore not included in this value.\n"
		    "# TYPE csistoragecapacities_obsolete gauge\ncsistoragecapacities_obsolete %zu\n",
		    obsolete);
}

struct kube_workqueue *prov_cap_queue(struct prov_cap *c)
{
	return c->q;
}

/* FNV-1a, 32 bits, as eight hex digits (Go's hash/fnv New32a). */
static void fnv32a_hex(const char *s, char out[9])
{
	uint32_t h = 2166136261u;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		h = (h ^ *p) * 16777619u;
	snprintf(out, 9, "%08x", h);
}

/*
 * upstream's getNameWithMaxLength("external-provisioner", node, 63): "<base>-<node>" when it
 * fits a label value; otherwise the base is cut to make room for "-<hash of base>-<node>", and
 * when even the node name alone is too long, "<base>-<hash of base-node>". The same rule as
 * upstream, so a kcsi provisioner recognises the objects an upstream one left, and back.
 */
void prov_capacity_managed_by(const char *node, char *buf, size_t len)
{
	const char *base = "external-provisioner";
	const int max = 63; /* DNS-1035 label */
	char full[512], hash[9];

	if (!node || !*node) {
		snprintf(buf, len, "%s", base);
		return;
	}
	snprintf(full, sizeof(full), "%s-%s", base, node);
	if ((int)strlen(full) <= max) {
		snprintf(buf, len, "%s", full);
		return;
	}
	int base_len = max - 10 - (int)strlen(node);
	if (base_len <= 0) {
		fnv32a_hex(full, hash);
		int plen = (int)strlen(base) < max - 9 ? (int)strlen(base) : max - 9;
		snprintf(buf, len, "%.*s-%s", plen, base, hash);
		if ((int)strlen(buf) > max)
			buf[max] = '\0';
		return;
	}
	fnv32a_hex(base, hash);
	snprintf(buf, len, "%.*s-%s-%s", base_len, base, hash, node);
}
