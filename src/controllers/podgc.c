/*
 * podgc: the part of kube-controller-manager's pod garbage collector that non-graceful node
 * shutdown depends on (upstream's gcTerminating): a pod being deleted (deletionTimestamp) on a
 * node that is not Ready and carries the node.kubernetes.io/out-of-service taint (any effect) is
 * marked Failed (when it is neither Succeeded nor Failed; no condition, as upstream) and deleted
 * with grace period 0, so that its volumes are released without its kubelet. On in "*" (its name
 * upstream: pod-garbage-collector-controller, alias podgc).
 *
 * Upstream looks every 20 s; this looks then and at once when a pod or a node changes, so the
 * out-of-service taint takes effect as soon as it is written. Not done (upstream does): terminated
 * pods beyond --terminated-pod-gc-threshold, orphaned pods of deleted nodes, unscheduled
 * terminating pods.
 *
 * Metric: pod_gc_collector_force_delete_pods_total{namespace,reason="out-of-service"} and
 * pod_gc_collector_force_delete_pod_errors_total (upstream's names).
 */
#include "controllers/cm.h"

#include "base/log.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "kube/hmap.h"
#include "kube/store.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PODGC_PERIOD_NS (20 * NSEC_PER_SEC)
#define PODGC_MAX_NS 64 /* namespaces counted in the metrics; more are summed under "" */

struct ns_count {
	char ns[64];
	unsigned long long deleted, errors;
};

struct pgc {
	struct cm_ctx *cm;
	struct pass_loop loop;
	pthread_mutex_t mu; /* counts */
	struct ns_count counts[PODGC_MAX_NS];
	size_t ncounts;
	/* uids of the pods this process force-deleted that the cache may still show (a pod change
	 * kicks a pass before the deletion's watch event arrives): not deleted or counted twice.
	 * The loop thread's own; an entry goes when no cached pod has that uid any more. */
	struct kube_hmap done;
};

static void count(struct pgc *c, const char *ns, bool error)
{
	size_t i;

	pthread_mutex_lock(&c->mu);
	for (i = 0; i < c->ncounts && strcmp(c->counts[i].ns, ns); i++)
		;
	if (i == c->ncounts && c->ncounts < PODGC_MAX_NS)
		snprintf(c->counts[c->ncounts++].ns, sizeof(c->counts[0].ns), "%s", ns);
	else if (i == c->ncounts)
		i = PODGC_MAX_NS - 1;
	if (error)
		c->counts[i].errors++;
	else
		c->counts[i].deleted++;
	pthread_mutex_unlock(&c->mu);
}

/* upstream's markFailedAndDeletePod: 0, or -1 with e. */
static int fail_and_delete(struct pgc *c, const struct kube_pod *p, struct kube_err *e)
{
	if (!kube_pod_terminated(p)) {
		const char *body = "{\"status\":{\"phase\":\"Failed\"}}";
		if (kube_patch_discard(c->cm->kc, &KUBE_RES_PODS, p->meta.ns, p->meta.name, true,
				       KUBE_PATCH_STRATEGIC, body, e))
			return -1;
	}
	return kube_delete_grace(c->cm->kc, &KUBE_RES_PODS, p->meta.ns, p->meta.name, NULL, NULL, 0,
				 e);
}

/* Drops the entries of done whose uid no cached pod has any more. */
static void forget_gone(struct kube_hmap *done, const struct kube_hmap *cached)
{
	char **gone = NULL;
	size_t ngone = 0;

	for (size_t i = 0; i < done->cap; i++) {
		const char *k = done->slots[i].key;
		if (k && !kube_hmap_has(cached, k)) {
			gone = xrealloc(gone, (ngone + 1) * sizeof(*gone));
			gone[ngone++] = xstrdup(k);
		}
	}
	for (size_t i = 0; i < ngone; i++) {
		kube_hmap_del(done, gone[i]);
		free(gone[i]);
	}
	free(gone);
}

static void pass(struct pgc *c)
{
	size_t npods;
	struct kube_obj **pods = kube_store_list(cm_store(c->cm, CM_PODS), &npods);
	struct kube_store *nodes = cm_store(c->cm, CM_NODES);
	struct kube_hmap cached = KUBE_HMAP_INIT;
	char uid[64];

	for (size_t i = 0; i < npods; i++)
		kube_hmap_put(&cached, kube_obj_uid(pods[i], uid, sizeof(uid)), (void *)1);
	forget_gone(&c->done, &cached);
	kube_hmap_clear(&cached);
	for (size_t i = 0; i < npods; i++) {
		const struct kube_pod *p = kube_pod_of(pods[i]);
		if (!p || !p->meta.deletion_ts || !p->node_name)
			continue;
		if (kube_hmap_has(&c->done, kube_obj_uid(pods[i], uid, sizeof(uid))))
			continue;
		struct kube_obj *no = kube_store_get(nodes, NULL, p->node_name);
		const struct kube_node *n = kube_node_of(no);
		bool gc = n && n->ready != KUBE_COND_TRUE && n->out_of_service;
		kube_obj_unref(no);
		if (!gc)
			continue;
		struct kube_err e = { 0 };
		KLOG_I("PodGC is force deleting Pod %s/%s (terminating on out-of-service node %s)",
		       p->meta.ns, p->meta.name, p->node_name);
		count(c, p->meta.ns, false);
		if (fail_and_delete(c, p, &e) && !kube_err_is_not_found(&e)) {
			KLOG_ERR(e.message, "force deleting pod %s/%s", p->meta.ns, p->meta.name);
			count(c, p->meta.ns, true);
		} else {
			kube_hmap_put(&c->done, uid, (void *)1);
		}
	}
	kube_objs_free(pods, npods);
}

/* The loop's pass: every PODGC_PERIOD_NS, and at once on a pod or node change. */
static int64_t pass_ud(void *ud)
{
	pass(ud);
	return PODGC_PERIOD_NS;
}

static void *pgc_init(struct cm_ctx *cm)
{
	struct pgc *c = xcalloc(1, sizeof(*c));

	c->cm = cm;
	pass_loop_init(&c->loop, pass_ud, c);
	pthread_mutex_init(&c->mu, NULL);
	cm_on_any_change(cm, CM_NODES, pass_loop_kick, &c->loop);
	cm_on_any_change(cm, CM_PODS, pass_loop_kick, &c->loop);
	return c;
}

static int pgc_start(void *self)
{
	struct pgc *c = self;

	return pass_loop_start(&c->loop);
}

static void pgc_stop(void *self)
{
	struct pgc *c = self;

	pass_loop_stop(&c->loop);
}

static void pgc_free(void *self)
{
	struct pgc *c = self;

	kube_hmap_clear(&c->done);
	pass_loop_destroy(&c->loop);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

static void pgc_metrics(void *self, struct strbuf *out)
{
	struct pgc *c = self;

	pthread_mutex_lock(&c->mu);
	strbuf_addstr(out, "# HELP pod_gc_collector_force_delete_pods_total [ALPHA] Number of pods that are being forcefully deleted since the Pod GC Controller started.\n"
			   "# TYPE pod_gc_collector_force_delete_pods_total counter\n");
	for (size_t i = 0; i < c->ncounts; i++)
		strbuf_addf(out, "pod_gc_collector_force_delete_pods_total{namespace=\"%s\",reason=\"out-of-service\"} %llu\n",
			    c->counts[i].ns, c->counts[i].deleted);
	strbuf_addstr(out, "# HELP pod_gc_collector_force_delete_pod_errors_total [ALPHA] Number of errors encountered when forcefully deleting the pods since the Pod GC Controller started.\n"
			   "# TYPE pod_gc_collector_force_delete_pod_errors_total counter\n");
	for (size_t i = 0; i < c->ncounts; i++)
		if (c->counts[i].errors)
			strbuf_addf(out, "pod_gc_collector_force_delete_pod_errors_total{namespace=\"%s\",reason=\"out-of-service\"} %llu\n",
				    c->counts[i].ns, c->counts[i].errors);
	pthread_mutex_unlock(&c->mu);
}

const struct cm_controller cm_podgc = {
	.name = "podgc", .default_on = true,
	.init = pgc_init, .start = pgc_start, .stop = pgc_stop, .free = pgc_free,
	.metrics = pgc_metrics,
};
