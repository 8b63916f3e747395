/*
 * nodelifecycle: the I/O of kube-controller-manager's node lifecycle controller (the rules are
 * nl_plan.c's; nl.h says them). On in "*", as upstream.
 *
 * One thread makes a pass over every cached Node each --node-monitor-period, and at once when a
 * Node or a Lease in kube-node-lease changes (upstream reacts to node events with its NoSchedule
 * pass and monitors health on the period; one pass doing both is the same result sooner). A pass
 * has two halves, as upstream's monitorNodeHealth then handleDisruption:
 *   1. per node: nl_observe() with the Ready heartbeat and the Lease's renewTime, nl_plan() for
 *      the conditions, one merge patch of /status with the whole list (carrying the
 *      resourceVersion it was computed from); the node's new Ready counted in its zone;
 *   2. nl_zones_update() over the zones, then per node nl_plan() again for the taints, with
 *      what the zones allow: NL_NOEXEC_REMOVE in master disruption mode, else a new NoExecute
 *      taint only with a token of the zone's bucket (nl_zone_take); one merge patch of
 *      spec.taints. A node still waiting for a token makes the next pass come when one is due.
 * A 409 is left to the next pass, which the changed node's event starts anyway.
 *
 * MarkPodsNotReady, as upstream: when this controller turns a node's Ready from True to Unknown,
 * every pod on it whose Ready is True gets Ready False (pods/status, strategic merge by type:
 * the condition's reason and message kept, lastTransitionTime now, with the resourceVersion
 * the cache saw) and a Warning NodeNotReady event; a pod that failed is tried again each pass
 * while the node stays not Ready. A pod that lands on a node whose Ready is not True (the pod
 * informer's add, or a new spec.nodeName) is queued for the same on the next pass.
 * Pod eviction is the taint-eviction-controller's (tainteviction.c).
 */
#include "controllers/cm.h"
#include "controllers/nl.h"

#include "base/log.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "kube/hmap.h"
#include "kube/store.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct nlc {
	struct cm_ctx *cm;
	struct kube_recorder *rec; /* as "node-controller", upstream's source */
	struct pass_loop loop;
	struct kube_hmap health; /* node name -> struct nl_health * (the loop thread's own) */
	pthread_mutex_t pmu;     /* pods_new: the pod informer adds, the loop takes */
	struct kube_hmap pods_new; /* "ns/name" of pods that landed on a node not Ready */
	pthread_mutex_t zmu;     /* zones: the loop writes, /metrics reads */
	struct nl_zone *zones;
	size_t nzones;
};

static json_t *conditions_json(const struct nl_plan_out *o)
{
	json_t *a = json_array();

	for (size_t i = 0; i < o->nconds; i++) {
		const struct kube_node_condition *c = &o->conds[i];
		json_t *e = json_pack("{s:s, s:s}", "type", c->type, "status", c->status);
		const char *const opt[][2] = { { "reason", c->reason }, { "message", c->message },
					      { "lastHeartbeatTime", c->heartbeat },
					      { "lastTransitionTime", c->transition } };
		for (size_t k = 0; k < 4; k++)
			if (opt[k][1])
				json_object_set_new(e, opt[k][0], json_string(opt[k][1]));
		json_array_append_new(a, e);
	}
	return a;
}

static json_t *taints_json(const struct nl_plan_out *o)
{
	json_t *a = json_array();

	for (size_t i = 0; i < o->ntaints; i++) {
		const struct kube_taint *t = &o->taints[i];
		json_t *e = json_pack("{s:s, s:s}", "key", t->key, "effect", t->effect);
		if (t->value && *t->value)
			json_object_set_new(e, "value", json_string(t->value));
		if (t->time_added)
			json_object_set_new(e, "timeAdded", json_string(t->time_added));
		json_array_append_new(a, e);
	}
	return a;
}

/* One merge patch carrying rv; returns the object's new resourceVersion (malloc'd) or NULL. */
static char *patch_node(struct nlc *c, const char *name, const char *rv, bool status,
			const char *field, json_t *list)
{
	struct kube_err e;
	json_t *p = json_pack("{s:{s:s}, s:{s:o}}", "metadata", "resourceVersion", rv,
			      status ? "status" : "spec", field, list);
	char *body = json_dumps(p, JSON_COMPACT);
	json_t *res = kube_patch(c->cm->kc, &KUBE_RES_NODES, NULL, name, status, KUBE_PATCH_MERGE,
				 body, &e);
	char *nrv = NULL;

	free(body);
	json_decref(p);
	if (!res) {
		if (kube_err_is_conflict(&e))
			KLOG_V(2, "node %s changed meanwhile (409); the next pass retries", name);
		else
			KLOG_ERR(e.message, "updating %s of node %s", field, name);
		return NULL;
	}
	const char *r = json_string_value(json_object_get(json_object_get(res, "metadata"),
							  "resourceVersion"));
	nrv = xstrdup(r ? r : "");
	json_decref(res);
	return nrv;
}

static bool is_true(const struct kube_node_condition *c)
{
	return c && c->status && !strcmp(c->status, "True");
}

/* The write turned Ready from True to not True: upstream's RecordNodeStatusChange. */
static bool ready_lost(struct nlc *c, const struct kube_node *n, const struct nl_plan_out *o)
{
	const struct kube_node_condition *was = nl_condition(n->conditions, n->nconditions, "Ready");
	const struct kube_node_condition *now = nl_condition(o->conds, o->nconds, "Ready");

	if (!now || (was && was->status && !strcmp(was->status, now->status)))
		return false;
	KLOG_I("node %s: %s (Ready %s -> %s)", n->meta.name, now->message ? now->message : "",
	       was && was->status ? was->status : "absent", now->status);
	if (!is_true(was) || is_true(now))
		return false;
	kube_event_about(c->rec, &n->meta, KUBE_EVENT_NORMAL, "NodeNotReady",
			 "Node %s status is now: NodeNotReady", n->meta.name);
	return true;
}

/*
 * upstream's MarkPodsNotReady for one pod: 0 when done (nothing to change, or the pod is gone),
 * -1 when the write failed and is to be tried again. A pod whose Ready is not True is left:
 * False already, or no Ready condition (upstream skips those too).
 */
static int mark_pod_not_ready(struct nlc *c, const struct kube_obj *o, const char *now)
{
	const struct kube_pod *p = kube_pod_of(o);
	struct kube_err e;

	if (!p || !p->ready)
		return 0;
	json_t *patch = json_pack("{s:{s:s}, s:{s:[{s:s, s:s, s:s}]}}", "metadata",
				  "resourceVersion", o->rv ? o->rv : "", "status", "conditions",
				  "type", "Ready", "status", "False", "lastTransitionTime", now);
	char *body = json_dumps(patch, JSON_COMPACT);
	int rc = kube_patch_discard(c->cm->kc, &KUBE_RES_PODS, o->ns, o->name, true,
				    KUBE_PATCH_STRATEGIC, body, &e);

	free(body);
	json_decref(patch);
	if (rc && kube_err_is_not_found(&e))
		return 0;
	if (rc)
		KLOG_I("Failed to update status for pod pod=\"%s/%s\" err=%s", o->ns, o->name,
		       LOGQ(e.message));
	else
		KLOG_V(2, "Updating ready status of pod to false pod=\"%s/%s\"", o->ns, o->name);
	/* after the write, as upstream, so that the pod still exists; also when it failed */
	kube_event_about(c->rec, o, KUBE_EVENT_WARNING, "NodeNotReady", "Node is not ready");
	return rc ? -1 : 0;
}

/* Every pod of the node: 0 when all are done, -1 when one is to be tried again. */
static int mark_pods_not_ready(struct nlc *c, const char *node, const char *now)
{
	size_t n;
	struct kube_obj **pods = kube_store_by_index(cm_store(c->cm, CM_PODS), CM_PODS_BY_NODE,
						     node, &n);
	int rc = 0;

	KLOG_V(2, "Update ready status of pods on node node=\"%s\"", node);
	for (size_t i = 0; i < n; i++)
		if (mark_pod_not_ready(c, pods[i], now))
			rc = -1;
	kube_objs_free(pods, n);
	return rc;
}

/* The node's Ready condition is there and not True (upstream's processPod test). */
static bool node_not_ready(struct nlc *c, const char *name)
{
	struct kube_obj *o = kube_store_get(cm_store(c->cm, CM_NODES), NULL, name);
	const struct kube_node *n = kube_node_of(o);
	const struct kube_node_condition *r = n ? nl_condition(n->conditions, n->nconditions, "Ready")
						: NULL;
	bool not_ready = r && !is_true(r);

	kube_obj_unref(o);
	return not_ready;
}

/* Pod informer: a pod that lands on a node not Ready is marked on the next pass. */
static void pod_landed(struct nlc *c, const struct kube_obj *old, const struct kube_obj *o)
{
	const struct kube_pod *p = kube_pod_of(o), *was = old ? kube_pod_of(old) : NULL;
	char key[800];

	if (!p || !p->node_name || !*p->node_name || !p->ready)
		return;
	if (was && was->node_name && !strcmp(was->node_name, p->node_name))
		return;
	if (!node_not_ready(c, p->node_name))
		return;
	snprintf(key, sizeof(key), "%s/%s", o->ns ? o->ns : "", o->name);
	pthread_mutex_lock(&c->pmu);
	kube_hmap_put(&c->pods_new, key, NULL);
	pthread_mutex_unlock(&c->pmu);
	pass_loop_kick(&c->loop);
}

static void pod_added(const struct kube_obj *o, void *ud)
{
	pod_landed(ud, NULL, o);
}

static void pod_updated(const struct kube_obj *old, const struct kube_obj *o, void *ud)
{
	pod_landed(ud, old, o);
}

/* The queued pods: those still on a node not Ready are marked; a failed write stays queued. */
static void mark_new_pods(struct nlc *c, const char *now)
{
	struct kube_hmap todo;

	pthread_mutex_lock(&c->pmu);
	todo = c->pods_new;
	c->pods_new = (struct kube_hmap)KUBE_HMAP_INIT;
	pthread_mutex_unlock(&c->pmu);
	for (size_t i = 0; i < todo.cap; i++) {
		const char *k = todo.slots[i].key, *slash = k ? strchr(k, '/') : NULL;
		if (!slash)
			continue;
		char ns[256];
		snprintf(ns, sizeof(ns), "%.*s", (int)(slash - k), k);
		struct kube_obj *o = kube_store_get(cm_store(c->cm, CM_PODS), ns, slash + 1);
		const struct kube_pod *p = kube_pod_of(o);
		if (p && p->node_name && kube_hmap_get(&c->health, p->node_name) &&
		    node_not_ready(c, p->node_name) && mark_pod_not_ready(c, o, now)) {
			pthread_mutex_lock(&c->pmu);
			kube_hmap_put(&c->pods_new, k, NULL);
			pthread_mutex_unlock(&c->pmu);
		}
		kube_obj_unref(o);
	}
	kube_hmap_clear(&todo);
}

static void log_taints(const struct kube_node *n, const struct nl_plan_out *o)
{
	struct strbuf sb;

	strbuf_init(&sb, 128);
	for (size_t i = 0; i < o->ntaints; i++)
		strbuf_addf(&sb, "%s%s:%s", i ? " " : "", o->taints[i].key, o->taints[i].effect);
	KLOG_I("node %s: taints now [%s]", n->meta.name, sb.buf ? sb.buf : "");
	strbuf_release(&sb);
}

/* upstream's GetZoneKey: "region:\0:zone", "" when a node has neither label. */
static size_t zone_key(const struct kube_node *n, char *buf, size_t len)
{
	const char *zone = NULL, *region = NULL, *bzone = NULL, *bregion = NULL;

	for (uint16_t i = 0; i < n->nlabels; i++) {
		const char *k = n->labels[i].key;
		if (!strcmp(k, "topology.kubernetes.io/zone"))
			zone = n->labels[i].value;
		else if (!strcmp(k, "topology.kubernetes.io/region"))
			region = n->labels[i].value;
		else if (!strcmp(k, "failure-domain.beta.kubernetes.io/zone"))
			bzone = n->labels[i].value;
		else if (!strcmp(k, "failure-domain.beta.kubernetes.io/region"))
			bregion = n->labels[i].value;
	}
	zone = zone ? zone : bzone ? bzone : "";
	region = region ? region : bregion ? bregion : "";
	if (!*zone && !*region)
		return 0;
	int w = snprintf(buf, len, "%s:%c:%s", region, '\0', zone);
	return w < 0 ? 0 : (size_t)w < len ? (size_t)w : len - 1;
}

static bool excluded(const struct kube_node *n)
{
	for (uint16_t i = 0; i < n->nlabels; i++)
		if (!strcmp(n->labels[i].key, "node.kubernetes.io/exclude-disruption"))
			return true;
	return false;
}

/* The zone of a node (added in state Initial with the primary rate; c->zmu held). */
static struct nl_zone *zone_of(struct nlc *c, const struct kube_node *n, int64_t now)
{
	char key[sizeof(c->zones[0].key)];
	size_t len = zone_key(n, key, sizeof(key));

	for (size_t i = 0; i < c->nzones; i++)
		if (c->zones[i].keylen == len && !memcmp(c->zones[i].key, key, len))
			return &c->zones[i];
	c->zones = xrealloc(c->zones, (c->nzones + 1) * sizeof(*c->zones));
	struct nl_zone *z = &c->zones[c->nzones++];
	memset(z, 0, sizeof(*z));
	memcpy(z->key, key, len);
	z->keylen = len;
	z->rate = c->cm->cfg->node_eviction_rate > 0 ? c->cm->cfg->node_eviction_rate : 0;
	z->tokens = 1;
	z->refilled_ns = now;
	KLOG_I("Initializing eviction metric for zone \"%.*s\"", (int)len, key);
	return z;
}

/* One node of a pass: its plan input, its zone and the resourceVersion to write taints with. */
struct nl_item {
	struct kube_obj *obj;
	struct nl_plan_in in;
	size_t zone; /* index into c->zones */
	char *rv;    /* NULL: the conditions write failed, no taints this pass */
	bool mark_pods; /* its pods to be marked not Ready after the pass (c->zmu not held) */
	char now[RFC3339_BUFLEN];
};

/* Conditions: observe, plan, write; the item keeps what the taint step needs. */
static void sync_conditions(struct nlc *c, struct nl_item *it, int64_t now)
{
	const struct cm_config *cfg = c->cm->cfg;
	const struct kube_node *n = kube_node_of(it->obj);
	struct nl_health *h = kube_hmap_get(&c->health, n->meta.name);
	const struct kube_node_condition *ready = nl_condition(n->conditions, n->nconditions, "Ready");
	struct kube_obj *lo = kube_store_get(cm_store(c->cm, CM_LEASES), "kube-node-lease", n->meta.name);
	const struct kube_lease *l = kube_lease_of(lo);
	time_t created = 0;
	struct nl_plan_out out;

	if (!h) {
		h = xcalloc(1, sizeof(*h));
		kube_hmap_put(&c->health, n->meta.name, h);
	}
	if (n->created)
		rfc3339_parse(n->created, &created);
	nl_observe(h, ready != NULL, ready ? ready->heartbeat : NULL, l ? l->renew_time : NULL,
		   (int64_t)created * NSEC_PER_SEC, now);
	kube_obj_unref(lo);
	it->in = (struct nl_plan_in){
		n->conditions, n->nconditions, n->taints, n->ntaints, n->unschedulable, n->created,
		h->probe_ns, ready ? cfg->node_monitor_grace_ns : cfg->node_startup_grace_ns, now,
		NL_NOEXEC_HOLD,
	};
	nl_plan(&it->in, &out);
	it->rv = xstrdup(n->meta.rv);
	if (out.conds_changed) {
		char *nrv = patch_node(c, n->meta.name, it->rv, true, "conditions", conditions_json(&out));
		free(it->rv);
		it->rv = nrv;
		if (it->rv && ready_lost(c, n, &out))
			h->mark_pods = true;
	}
	const struct kube_node_condition *rc = nl_condition(out.conds, out.nconds, "Ready");
	if (h->mark_pods && is_true(rc))
		h->mark_pods = false; /* Ready again: nothing left to mark */
	it->mark_pods = h->mark_pods;
	memcpy(it->now, out.now, sizeof(it->now));
	struct nl_zone *z = zone_of(c, n, now);
	it->zone = (size_t)(z - c->zones);
	if (!excluded(n)) {
		if (rc && rc->status && !strcmp(rc->status, "True"))
			z->ready++;
		else
			z->not_ready++;
	}
	nl_plan_out_release(&out);
}

/* Taints, with what the zones allow; returns true when a NoExecute taint still waits. */
static bool sync_taints(struct nlc *c, struct nl_item *it, enum nl_disruption d, int64_t now)
{
	const struct kube_node *n = kube_node_of(it->obj);
	struct nl_zone *z = &c->zones[it->zone];
	struct nl_plan_out out;
	bool evicting = false;

	it->in.noexec = d == NL_DISRUPTION_ENTER || d == NL_DISRUPTION_IN ? NL_NOEXEC_REMOVE
									   : NL_NOEXEC_HOLD;
	nl_plan(&it->in, &out);
	if (out.noexec_pending && nl_zone_take(z, now)) {
		nl_plan_out_release(&out);
		it->in.noexec = NL_NOEXEC_ADD;
		nl_plan(&it->in, &out);
		evicting = true;
	}
	bool pending = out.noexec_pending;
	if (it->rv && out.taints_changed) {
		char *nrv = patch_node(c, n->meta.name, it->rv, false, "taints", taints_json(&out));
		if (nrv) {
			log_taints(n, &out);
			if (evicting)
				z->evictions++;
		}
		free(nrv);
	}
	nl_plan_out_release(&out);
	return pending;
}

/* Forgets the nodes that are gone (their observation would greet a new node of that name). */
static void prune(struct nlc *c)
{
	struct kube_store *s = cm_store(c->cm, CM_NODES);
	char **gone = NULL;
	size_t ngone = 0;

	for (size_t i = 0; i < c->health.cap; i++) {
		const char *k = c->health.slots[i].key;
		struct kube_obj *o = k ? kube_store_get(s, NULL, k) : NULL;
		if (k && !o) {
			gone = xrealloc(gone, (ngone + 1) * sizeof(*gone));
			gone[ngone++] = xstrdup(k);
		}
		kube_obj_unref(o);
	}
	for (size_t i = 0; i < ngone; i++) {
		free(kube_hmap_del(&c->health, gone[i]));
		free(gone[i]);
	}
	free(gone);
}

/* Zones no node of this pass is in are dropped (upstream deletes their state). */
static void drop_empty_zones(struct nlc *c, struct nl_item *items, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < c->nzones; i++) {
		bool used = false;
		for (size_t j = 0; j < n && !used; j++)
			used = items[j].zone == i;
		if (!used)
			continue;
		for (size_t j = 0; j < n; j++)
			if (items[j].zone == i)
				items[j].zone = k;
		c->zones[k++] = c->zones[i];
	}
	c->nzones = k;
}

/* One pass; returns how long until the next one is needed (a NoExecute taint waits for a token). */
static int64_t pass(struct nlc *c)
{
	size_t n;
	struct kube_obj **nodes = kube_store_list(cm_store(c->cm, CM_NODES), &n);
	struct nl_item *items = xcalloc(n + 1, sizeof(*items));
	size_t ni = 0;
	int64_t now = wall_now_ns(), wait = c->cm->cfg->node_monitor_period_ns;
	struct nl_rates rates = { c->cm->cfg->node_eviction_rate, c->cm->cfg->secondary_eviction_rate,
				  c->cm->cfg->unhealthy_zone_threshold,
				  c->cm->cfg->large_cluster_threshold };

	pthread_mutex_lock(&c->zmu);
	for (size_t i = 0; i < c->nzones; i++)
		c->zones[i].ready = c->zones[i].not_ready = 0;
	for (size_t i = 0; i < n; i++) {
		if (!kube_node_of(nodes[i]))
			continue;
		items[ni].obj = nodes[i];
		sync_conditions(c, &items[ni++], now);
	}
	drop_empty_zones(c, items, ni);
	enum nl_disruption d = nl_zones_update(c->zones, c->nzones, &rates, now);
	if (d == NL_DISRUPTION_ENTER)
		KLOG_I("Controller detected that all Nodes are not-Ready. Entering master disruption mode");
	if (d == NL_DISRUPTION_EXIT) {
		KLOG_I("Controller detected that some Nodes are Ready. Exiting master disruption mode");
		for (size_t i = 0; i < c->health.cap; i++)
			if (c->health.slots[i].key)
				((struct nl_health *)c->health.slots[i].value)->probe_ns = now;
	}
	for (size_t i = 0; i < ni; i++) {
		struct nl_zone *z = &c->zones[items[i].zone];
		if (sync_taints(c, &items[i], d, now) && z->rate > 0) {
			/* the next token of its zone */
			int64_t t = (int64_t)((1 - z->tokens) / z->rate * (double)NSEC_PER_SEC);
			if (t < 100 * NSEC_PER_MSEC)
				t = 100 * NSEC_PER_MSEC;
			if (t < wait)
				wait = t;
		}
		free(items[i].rv);
	}
	pthread_mutex_unlock(&c->zmu);
	for (size_t i = 0; i < ni; i++) {
		const char *name = items[i].obj->name;
		struct nl_health *h = kube_hmap_get(&c->health, name);
		if (items[i].mark_pods && h && !mark_pods_not_ready(c, name, items[i].now))
			h->mark_pods = false;
	}
	char ts[RFC3339_BUFLEN];
	rfc3339_format(time(NULL), ts, sizeof(ts));
	mark_new_pods(c, ts);
	free(items);
	kube_objs_free(nodes, n);
	prune(c);
	return wait;
}

static int64_t pass_ud(void *ud)
{
	return pass(ud);
}

static void *nl_init(struct cm_ctx *cm)
{
	struct nlc *c = xcalloc(1, sizeof(*c));

	c->cm = cm;
	c->rec = cm_recorder(cm, "node-controller");
	pass_loop_init(&c->loop, pass_ud, c);
	pthread_mutex_init(&c->zmu, NULL);
	pthread_mutex_init(&c->pmu, NULL);
	cm_on_any_change(cm, CM_NODES, pass_loop_kick, &c->loop);
	cm_on_any_change(cm, CM_LEASES, pass_loop_kick, &c->loop);
	/* no on_delete: a queued pod that is gone is dropped when the pass looks it up */
	struct kube_handlers ph = { pod_added, pod_updated, NULL, c };
	kube_informer_add_handlers(cm_informer(cm, CM_PODS), &ph);
	return c;
}

static int nl_start(void *self)
{
	struct nlc *c = self;

	return pass_loop_start(&c->loop);
}

static void nl_stop(void *self)
{
	struct nlc *c = self;

	pass_loop_stop(&c->loop);
}

static void nl_free(void *self)
{
	struct nlc *c = self;

	for (size_t i = 0; i < c->health.cap; i++)
		if (c->health.slots[i].key)
			free(c->health.slots[i].value);
	kube_hmap_clear(&c->health);
	kube_hmap_clear(&c->pods_new);
	free(c->zones);
	pthread_mutex_destroy(&c->zmu);
	pthread_mutex_destroy(&c->pmu);
	pass_loop_destroy(&c->loop);
	free(c);
}

static void metric_head(struct strbuf *out, const char *name, const char *type, const char *help)
{
	strbuf_addf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void metric_zone(struct strbuf *out, const char *name, const struct nl_zone *z, double v)
{
	strbuf_addf(out, "%s{zone=\"", name);
	strbuf_add(out, z->key, z->keylen); /* upstream's key holds a NUL byte; printed as is */
	strbuf_addf(out, "\"} %g\n", v);
}

static void nl_metrics(void *self, struct strbuf *out)
{
	struct nlc *c = self;
	static const struct {
		const char *name, *type, *help;
	} m[] = {
		{ "node_collector_evictions_total", "counter", "[STABLE] Number of Node evictions that happened since current instance of NodeController started." },
		{ "node_collector_unhealthy_nodes_in_zone", "gauge", "[ALPHA] Gauge measuring number of not Ready Nodes per zones." },
		{ "node_collector_zone_health", "gauge", "[ALPHA] Gauge measuring percentage of healthy nodes per zone." },
		{ "node_collector_zone_size", "gauge", "[ALPHA] Gauge measuring number of registered Nodes per zones." },
	};

	pthread_mutex_lock(&c->zmu);
	for (size_t k = 0; k < sizeof(m) / sizeof(m[0]); k++) {
		metric_head(out, m[k].name, m[k].type, m[k].help);
		for (size_t i = 0; i < c->nzones; i++) {
			const struct nl_zone *z = &c->zones[i];
			int size = z->ready + z->not_ready;
			double v = k == 0 ? (double)z->evictions
				   : k == 1 ? z->not_ready
				   : k == 2 ? (size ? 100.0 * z->ready / size : 100) : size;
			metric_zone(out, m[k].name, z, v);
		}
	}
	pthread_mutex_unlock(&c->zmu);
}

const struct cm_controller cm_nodelifecycle = {
	.name = "nodelifecycle", .default_on = true,
	.init = nl_init, .start = nl_start, .stop = nl_stop, .free = nl_free,
	.metrics = nl_metrics,
};
