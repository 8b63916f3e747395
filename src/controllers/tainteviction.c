/*
 * tainteviction: the I/O of kube-controller-manager's taint-eviction-controller (rules: te.h,
 * te_plan.c). On in "*", as upstream (its name there: taint-eviction-controller).
 *
 * One thread makes a pass over every cached pod with spec.nodeName and not being deleted,
 * at once when a pod or a node changes and otherwise when the next scheduled eviction is due (at
 * the latest every 5 s). Per pod: te_decide() with the node's taints, te_schedule() on the pod's
 * entry. A due eviction: event TaintManagerEviction "Marking for deletion Pod ns/name" on the
 * pod, then GET the pod, add the DisruptionTarget condition (strategic merge patch of /status,
 * only when the pod does not have it yet) and DELETE it with its default grace period (the
 * kubelet, or kcsi-node, finishes it; a node that is gone never does: podgc's out-of-service
 * rule or a force delete does), up to 5 tries 10 ms apart as upstream. A pod that vanishes with
 * an eviction scheduled, or whose taint goes first, gets "Cancelling deletion of Pod ns/name".
 * A pod just deleted is remembered by its uid until the cache shows it deleted, gone or replaced
 * (another uid), so a pass that runs before the watch event arrives (the DisruptionTarget patch
 * may arrive first) does not delete it, count it and announce it a second time.
 *
 * Metric: taint_eviction_controller_pod_deletions_total (upstream's name).
 */
#include "controllers/cm.h"
#include "controllers/te.h"

#include "base/log.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "kube/hmap.h"
#include "kube/store.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TE_IDLE_NS (5 * NSEC_PER_SEC)
#define TE_RETRIES 5

struct tec {
	struct cm_ctx *cm;
	struct kube_recorder *rec; /* as "taint-eviction-controller", upstream's source */
	struct pass_loop loop;
	struct kube_hmap sched; /* "ns/name" -> struct te_sched * (the loop thread's own) */
	struct kube_hmap evicted; /* "ns/name" -> uid (xstrdup) of the pod we deleted */
	atomic_ullong deletions;
};

static void pod_event(struct tec *c, const char *ns, const char *name, const char *verb)
{
	struct kube_objref ref = { "Pod", "v1", ns, name, NULL, NULL };

	kube_event(c->rec, &ref, KUBE_EVENT_NORMAL, "TaintManagerEviction", "%s Pod %s/%s", verb,
		   ns, name);
}

/* The pod's DisruptionTarget condition is already True with our reason. */
static bool has_condition(const json_t *pod)
{
	size_t i;
	json_t *e;

	json_array_foreach(json_object_get(json_object_get(pod, "status"), "conditions"), i, e) {
		const char *t = json_string_value(json_object_get(e, "type"));
		const char *s = json_string_value(json_object_get(e, "status"));
		const char *r = json_string_value(json_object_get(e, "reason"));
		if (t && !strcmp(t, "DisruptionTarget"))
			return s && !strcmp(s, "True") && r && !strcmp(r, "DeletionByTaintManager");
	}
	return false;
}

/* upstream's addConditionAndDeletePod: 0, or -1 with e. */
static int condition_and_delete(struct tec *c, const char *ns, const char *name, struct kube_err *e)
{
	json_t *pod = kube_get(c->cm->kc, &KUBE_RES_PODS, ns, name, e);
	char now[RFC3339_BUFLEN];

	if (!pod)
		return -1;
	if (!has_condition(pod)) {
		rfc3339_format(time(NULL), now, sizeof(now));
		json_t *p = json_pack("{s:{s:[{s:s, s:s, s:s, s:s, s:s}]}}", "status", "conditions",
				      "type", "DisruptionTarget", "status", "True", "reason",
				      "DeletionByTaintManager", "message",
				      "Taint manager: deleting due to NoExecute taint",
				      "lastTransitionTime", now);
		char *body = json_dumps(p, JSON_COMPACT);
		int rc = kube_patch_discard(c->cm->kc, &KUBE_RES_PODS, ns, name, true,
					    KUBE_PATCH_STRATEGIC, body, e);
		free(body);
		json_decref(p);
		if (rc) {
			json_decref(pod);
			return -1;
		}
	}
	json_decref(pod);
	return kube_delete(c->cm->kc, &KUBE_RES_PODS, ns, name, NULL, NULL, e);
}

/* Deletes the pod; true when this call deleted it. */
static bool evict(struct tec *c, const char *key)
{
	char ns[256], name[512];
	const char *slash = strchr(key, '/');
	struct kube_err e = { 0 };

	if (!slash || (size_t)(slash - key) >= sizeof(ns))
		return false;
	snprintf(ns, sizeof(ns), "%.*s", (int)(slash - key), key);
	snprintf(name, sizeof(name), "%s", slash + 1);
	KLOG_I("Deleting pod %s (taint-eviction-controller)", key);
	pod_event(c, ns, name, "Marking for deletion");
	for (int i = 0; i < TE_RETRIES; i++) {
		if (!condition_and_delete(c, ns, name, &e)) {
			atomic_fetch_add(&c->deletions, 1);
			return true;
		}
		if (kube_err_is_not_found(&e))
			return false;
		struct timespec ts = { 0, 10 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	KLOG_ERR(e.message, "evicting pod %s", key);
	return false;
}

/* Whether this cached pod was deleted by us and the cache has not caught up yet. */
static bool just_evicted(struct tec *c, const char *key, const struct kube_obj *pod)
{
	const char *had = kube_hmap_get(&c->evicted, key);
	char uid[64];

	return had && !strcmp(had, kube_obj_uid(pod, uid, sizeof(uid)));
}

/* Forgets the pods deleted by us that the cache now shows deleted, gone or changed. */
static void sweep_evicted(struct tec *c)
{
	char **old = NULL;
	size_t nold = 0;

	for (size_t i = 0; i < c->evicted.cap; i++) {
		const char *k = c->evicted.slots[i].key, *slash = k ? strchr(k, '/') : NULL;
		if (!slash)
			continue;
		char ns[256];
		snprintf(ns, sizeof(ns), "%.*s", (int)(slash - k), k);
		struct kube_obj *o = kube_store_get(cm_store(c->cm, CM_PODS), ns, slash + 1);
		const struct kube_pod *p = kube_pod_of(o);
		char uid[64];
		if (!p || p->meta.deletion_ts ||
		    strcmp(kube_obj_uid(&p->meta, uid, sizeof(uid)), c->evicted.slots[i].value)) {
			old = xrealloc(old, (nold + 1) * sizeof(*old));
			old[nold++] = xstrdup(k);
		}
		kube_obj_unref(o);
	}
	for (size_t i = 0; i < nold; i++) {
		free(kube_hmap_del(&c->evicted, old[i]));
		free(old[i]);
	}
	free(old);
}

/* One pass; returns when the next eviction is due (wall ns). */
static int64_t pass(struct tec *c)
{
	size_t npods;
	struct kube_obj **pods = kube_store_list(cm_store(c->cm, CM_PODS), &npods);
	struct kube_store *nodes = cm_store(c->cm, CM_NODES);
	struct kube_hmap seen = KUBE_HMAP_INIT;
	sweep_evicted(c);
	char **due = NULL, **due_uid = NULL;
	size_t ndue = 0;
	int64_t now = wall_now_ns(), next = now + TE_IDLE_NS;
	char key[800];

	for (size_t i = 0; i < npods; i++) {
		const struct kube_pod *p = kube_pod_of(pods[i]);
		if (!p || !p->node_name || p->meta.deletion_ts)
			continue;
		snprintf(key, sizeof(key), "%s/%s", p->meta.ns, p->meta.name);
		if (just_evicted(c, key, &p->meta))
			continue;
		struct kube_obj *no = kube_store_get(nodes, NULL, p->node_name);
		const struct kube_node *n = kube_node_of(no);
		int64_t secs;
		/* A node not in the cache has no taints (upstream forgets a deleted node's). */
		enum te_verdict v = te_decide(n ? n->taints : NULL, n ? n->ntaints : 0, p->tolerations,
					      p->ntolerations, &secs);
		kube_obj_unref(no);
		kube_hmap_put(&seen, key, (void *)1);
		struct te_sched *s = kube_hmap_get(&c->sched, key);
		struct te_sched none = { 0 };
		enum te_change ch = te_schedule(s ? s : &none, v, secs, now);
		if (ch == TE_CANCELLED || ch == TE_RESCHEDULED)
			pod_event(c, p->meta.ns, p->meta.name, "Cancelling deletion of");
		if (ch == TE_SCHEDULED && v == TE_AFTER)
			KLOG_I("pod %s tolerates the NoExecute taints of node %s for %llds", key,
			       p->node_name, (long long)secs);
		if (!s && none.set) {
			s = xmalloc(sizeof(*s));
			*s = none;
			kube_hmap_put(&c->sched, key, s);
		} else if (s && !s->set) {
			free(kube_hmap_del(&c->sched, key));
			s = NULL;
		}
		if (s && s->fire_ns <= now) {
			due = xrealloc(due, (ndue + 1) * sizeof(*due));
			due_uid = xrealloc(due_uid, (ndue + 1) * sizeof(*due_uid));
			char uid[64];
			due_uid[ndue] = xstrdup(kube_obj_uid(&p->meta, uid, sizeof(uid)));
			due[ndue++] = xstrdup(key);
		} else if (s && s->fire_ns < next) {
			next = s->fire_ns;
		}
	}
	kube_objs_free(pods, npods);
	/* Entries of pods gone (cancelled, told) or being deleted (someone else's delete: forgotten). */
	char **gone = NULL;
	size_t ngone = 0;
	for (size_t i = 0; i < c->sched.cap; i++) {
		const char *k = c->sched.slots[i].key;
		if (k && !kube_hmap_get(&seen, k)) {
			gone = xrealloc(gone, (ngone + 1) * sizeof(*gone));
			gone[ngone++] = xstrdup(k);
		}
	}
	for (size_t i = 0; i < ngone; i++) {
		const char *slash = strchr(gone[i], '/');
		struct kube_obj *o = NULL;
		if (slash) {
			char ns[256];
			snprintf(ns, sizeof(ns), "%.*s", (int)(slash - gone[i]), gone[i]);
			o = kube_store_get(cm_store(c->cm, CM_PODS), ns, slash + 1);
			if (!o) {
				pod_event(c, ns, slash + 1, "Cancelling deletion of");
			}
		}
		kube_obj_unref(o);
		free(kube_hmap_del(&c->sched, gone[i]));
		free(gone[i]);
	}
	free(gone);
	kube_hmap_clear(&seen);
	for (size_t i = 0; i < ndue; i++) {
		free(kube_hmap_del(&c->sched, due[i]));
		if (evict(c, due[i]))
			free(kube_hmap_put(&c->evicted, due[i], due_uid[i]));
		else
			free(due_uid[i]);
		free(due[i]);
	}
	free(due);
	free(due_uid);
	return next;
}

/* The loop's pass: the wait until the next eviction is due. */
static int64_t pass_ud(void *ud)
{
	return pass(ud) - wall_now_ns();
}

static void *te_init(struct cm_ctx *cm)
{
	struct tec *c = xcalloc(1, sizeof(*c));

	c->cm = cm;
	c->rec = cm_recorder(cm, "taint-eviction-controller");
	pass_loop_init(&c->loop, pass_ud, c);
	cm_on_any_change(cm, CM_NODES, pass_loop_kick, &c->loop);
	cm_on_any_change(cm, CM_PODS, pass_loop_kick, &c->loop);
	return c;
}

static int te_start(void *self)
{
	struct tec *c = self;

	return pass_loop_start(&c->loop);
}

static void te_stop(void *self)
{
	struct tec *c = self;

	pass_loop_stop(&c->loop);
}

static void te_free(void *self)
{
	struct tec *c = self;

	for (size_t i = 0; i < c->sched.cap; i++)
		if (c->sched.slots[i].key)
			free(c->sched.slots[i].value);
	kube_hmap_clear(&c->sched);
	for (size_t i = 0; i < c->evicted.cap; i++)
		if (c->evicted.slots[i].key)
			free(c->evicted.slots[i].value);
	kube_hmap_clear(&c->evicted);
	pass_loop_destroy(&c->loop);
	free(c);
}

static void te_metrics(void *self, struct strbuf *out)
{
	struct tec *c = self;

	strbuf_addf(out, "# HELP taint_eviction_controller_pod_deletions_total [ALPHA] Total number of Pods deleted by TaintEvictionController since its start.\n"
			 "# TYPE taint_eviction_controller_pod_deletions_total counter\n"
			 "taint_eviction_controller_pod_deletions_total %llu\n",
		    (unsigned long long)atomic_load(&c->deletions));
}

const struct cm_controller cm_taint_eviction = {
	.name = "taint-eviction-controller", .default_on = true,
	.init = te_init, .start = te_start, .stop = te_stop, .free = te_free,
	.metrics = te_metrics,
};
