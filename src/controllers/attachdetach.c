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
#include "controllers/ad_ctrl.h"

static void kick(void *ud)
{
	struct ad_ctrl *c = ud;

	pthread_mutex_lock(&c->mu);
	c->dirty = true;
	pthread_cond_signal(&c->wake);
	pthread_mutex_unlock(&c->mu);
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
		adc_pod_event(c, pod, KUBE_EVENT_WARNING, "FailedAttachVolume", msg);
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
			KLOG_ERR(e.message, "Could not update node status for \"%s\"", sw[i].node);
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
	struct ad_want *w = adc_build_desired(c, &nw);
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
	adc_finish_ops(c, now);
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
				 c->max_wait_ns, c->cm->cfg->ad_no_force_detach };
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
			struct ad_op *op = adc_op_new(OP_DETACH, e->uniq, e->node, e->driver, e->handle, e->pv);

			op->forced = a->forced;
			if (a->forced == AD_FORCE_TIMEOUT) {
				atomic_fetch_add(&c->forced_timeout, 1);
				KLOG_I("attacherDetacher.DetachVolume started: this volume is not safe to detach, but maxWaitForUnmountDuration expired, force detaching duration=\"%llds\" node=\"%s\" volumeName=\"%s\"",
				       (long long)(c->max_wait_ns / NSEC_PER_SEC), e->node, e->uniq);
			} else if (a->forced == AD_FORCE_OUT_OF_SERVICE) {
				atomic_fetch_add(&c->forced_oos, 1);
				KLOG_I("attacherDetacher.DetachVolume started: node has out-of-service taint, force detaching node=\"%s\" volumeName=\"%s\"",
				       e->node, e->uniq);
			} else {
				KLOG_V(2, "attacherDetacher.DetachVolume started for volume \"%s\" on node \"%s\"",
				       e->uniq, e->node);
			}
			if (e->reported) { /* the node hears first, then the detach starts */
				e->reported = false;
				adc_mark_node(c, e->node);
			}
			detaches[ndetach++] = op;
		} else { /* AD_ACT_ATTACH */
			struct ad_want *x = &w[a->index];
			struct ad_op *op = adc_op_new(OP_ATTACH, x->uniq, x->node, x->driver, x->handle, x->pv);

			ad_va_name(c->naming, x->driver, x->handle, x->pv, x->node, op->va, sizeof(op->va));
			op->pods = x->pods;
			op->npods = x->npods;
			x->pods = NULL;
			x->npods = 0;
			KLOG_V(2, "attacherDetacher.AttachVolume started for volume \"%s\" (UniqueName: \"%s\") to node \"%s\"",
			       x->pv, x->uniq, x->node);
			adc_enqueue_op(c, op);
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
			adc_mark_node(c, op->node);
			adc_op_free(op);
			continue;
		}
		ad_va_name(c->naming, op->driver, op->handle, op->pv, op->node, op->va, sizeof(op->va));
		adc_enqueue_op(c, op);
	}
	for (size_t i = 0; i < nsw; i++)
		if (!sw[i].ok)
			adc_mark_node(c, sw[i].node);
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
	adc_want_free(w, nw);
}

static void *loop_main(void *arg)
{
	struct ad_ctrl *c = arg;
	int64_t last_sync = mono_now_ns(), last_pass = 0;

	adc_populate_actual(c);
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
			adc_sync_states(c);
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
			e->mounted = adc_node_uses(n, e->uniq);
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
	c->rec = cm_recorder(cm, "attachdetach-controller");
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
		if (pthread_create(&c->workers[i], NULL, adc_worker_main, c))
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
			adc_entry_free(c->actual.slots[i].value);
	for (size_t i = 0; i < c->ops.cap; i++)
		if (c->ops.slots[i].key)
			adc_op_free(c->ops.slots[i].value);
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
		    "# HELP attachdetach_controller_forced_detaches [ALPHA] Number of times the A/D Controller performed a forced detach\n"
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
