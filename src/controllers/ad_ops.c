/*
 * ad_ops: the attach/detach controller's operations (seed 002's Act): a bounded pool of workers
 * makes each operation's API call (create or delete the VolumeAttachment), then the loop
 * (finish_ops) folds what finished into the actual state, with events and backoff.
 */
#include "controllers/ad_ctrl.h"

/* ---- Act: operations ---- */

void adc_enqueue_op(struct ad_ctrl *c, struct ad_op *op)
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

void adc_do_attach(struct ad_ctrl *c, struct ad_op *op)
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

void adc_do_detach(struct ad_ctrl *c, struct ad_op *op)
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

void *adc_worker_main(void *arg)
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
			adc_do_attach(c, op);
		else
			adc_do_detach(c, op);
		pthread_mutex_lock(&c->mu);
		op->worked = true;
		c->dirty = true;
		pthread_cond_signal(&c->wake);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

void adc_backoff_fail(struct ad_ctrl *c, const char *uniq)
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

void adc_backoff_forget(struct ad_ctrl *c, const char *uniq)
{
	free(kube_hmap_del(&c->backoff, uniq));
}

void adc_attach_done(struct ad_ctrl *c, struct ad_op *op, const char *err)
{
	char msg[1024];
	struct ad_entry *e = adc_entry_put(c, op->uniq, op->node, op->driver, op->handle, op->pv);

	if (!err) {
		e->state = AD_ATTACHED;
		e->mounted = true; /* assumed until the node says otherwise, as upstream */
		e->reported = true;
		e->detach_requested_ns = 0;
		adc_mark_node(c, op->node);
		adc_backoff_forget(c, op->uniq);
		atomic_fetch_add(&c->attach_ok, 1);
		KLOG_I("AttachVolume.Attach succeeded for volume \"%s\" (UniqueName: \"%s\") from node \"%s\"",
		       op->pv, op->uniq, op->node);
		snprintf(msg, sizeof(msg), "AttachVolume.Attach succeeded for volume \"%s\" ", op->pv);
		for (size_t i = 0; i < op->npods; i++)
			adc_pod_event(c, op->pods[i], KUBE_EVENT_NORMAL, "SuccessfulAttachVolume", msg);
		return;
	}
	/* The VolumeAttachment may exist: the pair stays in the actual state, uncertain (as
	 * adc_entry_put made it) unless it was attached before, so that it is detached if nobody
	 * wants it any more, and attached again (after the backoff) if someone does. */
	adc_backoff_fail(c, op->uniq);
	atomic_fetch_add(&c->attach_failed, 1);
	KLOG_ERR(err, "AttachVolume.Attach failed for volume \"%s\" (UniqueName: \"%s\") from node \"%s\"",
		 op->pv, op->uniq, op->node);
	snprintf(msg, sizeof(msg), "AttachVolume.Attach failed for volume \"%s\" : %s", op->pv, err);
	for (size_t i = 0; i < op->npods; i++)
		adc_pod_event(c, op->pods[i], KUBE_EVENT_WARNING, "FailedAttachVolume", msg);
}

void adc_detach_done(struct ad_ctrl *c, struct ad_op *op, const char *err)
{
	char key[1024];
	struct ad_entry *e;

	if (!err) {
		adc_entry_del(c, op->uniq, op->node);
		adc_mark_node(c, op->node);
		adc_backoff_forget(c, op->uniq);
		atomic_fetch_add(&c->detach_ok, 1);
		KLOG_I("DetachVolume.Detach succeeded for volume \"%s\" (UniqueName: \"%s\") on node \"%s\"",
		       op->pv ? op->pv : "", op->uniq, op->node);
		return;
	}
	adc_pair_key(op->uniq, op->node, key, sizeof(key));
	e = kube_hmap_get(&c->actual, key);
	if (e && e->state == AD_ATTACHED) {
		e->reported = true; /* still attached: the node must know */
		adc_mark_node(c, op->node);
	}
	adc_backoff_fail(c, op->uniq);
	atomic_fetch_add(&c->detach_failed, 1);
	KLOG_ERR(err, "DetachVolume.Detach failed for volume \"%s\" (UniqueName: \"%s\") on node \"%s\"",
		 op->pv ? op->pv : "", op->uniq, op->node);
}

/* Reconcile, first step: finish the operations whose outcome is known (mu held). */
void adc_finish_ops(struct ad_ctrl *c, int64_t now)
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
			adc_attach_done(c, op, err);
		else
			adc_detach_done(c, op, err);
		done = xrealloc(done, (ndone + 1) * sizeof(*done));
		done[ndone++] = op;
	}
	for (size_t i = 0; i < ndone; i++) {
		kube_hmap_del(&c->ops, done[i]->uniq);
		adc_op_free(done[i]);
	}
	free(done);
}

struct ad_op *adc_op_new(enum op_kind kind, const char *uniq, const char *node,
			    const char *driver, const char *handle, const char *pv)
{
	struct ad_op *op = xcalloc(1, sizeof(*op));

	op->kind = (uint8_t)kind;
	op->phase = OP_QUEUED;
	op->uniq = xstrdup(uniq);
	op->node = xstrdup(node);
	op->driver = xstrdup(driver);
	op->handle = xstrdup(handle);
	op->pv = adc_dup_or_null(pv);
	return op;
}
