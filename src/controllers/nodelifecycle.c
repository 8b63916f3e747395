/*
 * nodelifecycle: the I/O of kube-controller-manager's node lifecycle controller (the rules are
 * nl_plan.c's; nl.h says them). On in "*", as upstream.
 *
 * One thread makes a pass over every cached Node each --node-monitor-period, and at once when a
 * Node or a Lease in kube-node-lease changes (upstream reacts to node events with its NoSchedule
 * pass and monitors health on the period; one pass doing both is the same result sooner). Per
 * node: nl_observe() with the Ready heartbeat and the Lease's renewTime, nl_plan(), then at most
 * two merge patches carrying the resourceVersion they were computed from: /status with the whole
 * condition list, then spec.taints with the whole taint list. A 409 is left to the next pass,
 * which the changed node's event starts anyway.
 *
 * Not done (upstream does): pod eviction by the NoExecute taints (upstream's separate
 * taint-eviction-controller), the per-zone rate limit of NoExecute tainting
 * (--node-eviction-rate) and its "all zones disrupted" mode, and marking pods not Ready.
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
	pthread_mutex_t mu;
	pthread_cond_t wake;
	pthread_t loop;
	bool kicked, stopping, started;
	struct kube_hmap health; /* node name -> struct nl_health * (the loop thread's own) */
};

static void kick(void *ud)
{
	struct nlc *c = ud;

	pthread_mutex_lock(&c->mu);
	c->kicked = true;
	pthread_cond_signal(&c->wake);
	pthread_mutex_unlock(&c->mu);
}

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
			KLOG_E("updating %s of node %s: %s", field, name, e.message);
		return NULL;
	}
	const char *r = json_string_value(json_object_get(json_object_get(res, "metadata"),
							  "resourceVersion"));
	nrv = xstrdup(r ? r : "");
	json_decref(res);
	return nrv;
}

static void ready_event(struct nlc *c, const struct kube_node *n, const struct nl_plan_out *o)
{
	const struct kube_node_condition *was = nl_condition(n->conditions, n->nconditions, "Ready");
	const struct kube_node_condition *now = nl_condition(o->conds, o->nconds, "Ready");

	if (!now || (was && was->status && !strcmp(was->status, now->status)))
		return;
	KLOG_I("node %s: %s (Ready %s -> %s)", n->meta.name, now->message ? now->message : "",
	       was && was->status ? was->status : "absent", now->status);
	kube_event_about(c->cm->rec, &n->meta, KUBE_EVENT_NORMAL, "NodeNotReady",
			 "Node %s status is now: NodeNotReady", n->meta.name);
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

static void sync_node(struct nlc *c, const struct kube_node *n, int64_t now)
{
	const struct cm_config *cfg = c->cm->cfg;
	struct nl_health *h = kube_hmap_get(&c->health, n->meta.name);
	const struct kube_node_condition *ready = nl_condition(n->conditions, n->nconditions, "Ready");
	struct kube_obj *lo = kube_store_get(cm_store(c->cm, CM_LEASES), "kube-node-lease", n->meta.name);
	const struct kube_lease *l = kube_lease_of(lo);
	time_t created = 0;
	struct nl_plan_out out;
	char *rv;

	if (!h) {
		h = xcalloc(1, sizeof(*h));
		kube_hmap_put(&c->health, n->meta.name, h);
	}
	if (n->created)
		rfc3339_parse(n->created, &created);
	nl_observe(h, ready != NULL, ready ? ready->heartbeat : NULL, l ? l->renew_time : NULL,
		   (int64_t)created * NSEC_PER_SEC, now);
	kube_obj_unref(lo);
	struct nl_plan_in in = {
		n->conditions, n->nconditions, n->taints, n->ntaints, n->unschedulable, n->created,
		h->probe_ns, ready ? cfg->node_monitor_grace_ns : cfg->node_startup_grace_ns, now,
	};
	nl_plan(&in, &out);
	rv = xstrdup(n->meta.rv);
	if (out.conds_changed) {
		char *nrv = patch_node(c, n->meta.name, rv, true, "conditions", conditions_json(&out));
		free(rv);
		rv = nrv;
		if (rv)
			ready_event(c, n, &out);
	}
	if (rv && out.taints_changed) {
		char *nrv = patch_node(c, n->meta.name, rv, false, "taints", taints_json(&out));
		if (nrv)
			log_taints(n, &out);
		free(nrv);
	}
	free(rv);
	nl_plan_out_release(&out);
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

static void pass(struct nlc *c)
{
	size_t n;
	struct kube_obj **nodes = kube_store_list(cm_store(c->cm, CM_NODES), &n);
	int64_t now = wall_now_ns();

	for (size_t i = 0; i < n; i++) {
		const struct kube_node *node = kube_node_of(nodes[i]);
		if (node)
			sync_node(c, node, now);
	}
	kube_objs_free(nodes, n);
	prune(c);
}

static void *loop_main(void *arg)
{
	struct nlc *c = arg;

	pthread_mutex_lock(&c->mu);
	while (!c->stopping) {
		c->kicked = false;
		pthread_mutex_unlock(&c->mu);
		pass(c);
		pthread_mutex_lock(&c->mu);
		struct timespec ts = wall_deadline(c->cm->cfg->node_monitor_period_ns);
		while (!c->stopping && !c->kicked)
			if (pthread_cond_timedwait(&c->wake, &c->mu, &ts))
				break;
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

static void *nl_init(struct cm_ctx *cm)
{
	struct nlc *c = xcalloc(1, sizeof(*c));

	c->cm = cm;
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->wake, NULL);
	cm_on_any_change(cm, CM_NODES, kick, c);
	cm_on_any_change(cm, CM_LEASES, kick, c);
	return c;
}

static int nl_start(void *self)
{
	struct nlc *c = self;

	if (pthread_create(&c->loop, NULL, loop_main, c))
		return -1;
	c->started = true;
	return 0;
}

static void nl_stop(void *self)
{
	struct nlc *c = self;

	pthread_mutex_lock(&c->mu);
	c->stopping = true;
	pthread_cond_signal(&c->wake);
	pthread_mutex_unlock(&c->mu);
	if (c->started)
		pthread_join(c->loop, NULL);
	c->started = false;
}

static void nl_free(void *self)
{
	struct nlc *c = self;

	for (size_t i = 0; i < c->health.cap; i++)
		if (c->health.slots[i].key)
			free(c->health.slots[i].value);
	kube_hmap_clear(&c->health);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->wake);
	free(c);
}

const struct cm_controller cm_nodelifecycle = {
	.name = "nodelifecycle", .default_on = true,
	.init = nl_init, .start = nl_start, .stop = nl_stop, .free = nl_free,
};
