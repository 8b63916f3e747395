/*
 * snapshot_controller_operation_total_seconds and snapshot_controller_operations_in_flight, as
 * external-snapshotter v8.6's metrics package keeps them: an operation (CreateSnapshot,
 * CreateSnapshotAndReady, DeleteSnapshot, and for group snapshots CreateGroupSnapshot,
 * CreateGroupSnapshotAndReady, DeleteGroupSnapshot) starts once per object UID (a second start
 * is a no-op) and is observed once when it ends, with the labels driver_name, operation_name,
 * snapshot_type (dynamic, pre-provisioned) and operation_status (success; cancel for a create
 * still pending when its snapshot's deletion ends). Buckets are upstream's.
 *
 * Bounds: one pending entry per (operation, snapshot) the controller is working on (removed
 * when it ends or its snapshot is gone), and one series per label set, capped at OPM_MAX_SERIES
 * (a cluster has few drivers; label values come from objects, so the cap keeps a hostile
 * stream of driver names from growing memory).
 *
 * A worker can still hold an object the informer has just reported gone; its sync must not
 * start an operation for that UID again, or the entry would stay pending for ever (the gauge
 * stuck above 0, one leaked entry per race). The last OPM_GONE UIDs forgotten are kept in a
 * ring, and a start for one of them is a no-op. UIDs are never reused, so this loses nothing.
 */
#include "snapshotctrl/internal.h"

#include "base/strbuf.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "kube/hmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OPM_MAX_SERIES 256
#define OPM_GONE 4096 /* far more deletions than fit in one sync's window */
static const double buckets[] = { 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 60, 120, 300, 600 };
#define NBUCKETS (sizeof(buckets) / sizeof(buckets[0]))

struct pending {
	int64_t start_ns;
	char driver[256];
	char type[16];
};

struct series {
	char driver[256], op[32], type[16], status[16];
	uint64_t counts[NBUCKETS]; /* cumulative when rendered, per bucket here */
	uint64_t count;
	double sum;
};

struct sctrl_opm {
	pthread_mutex_t mu;
	struct kube_hmap pending; /* "<op>/<uid>" -> struct pending * */
	/* "<op>/<uid>" of the creates that succeeded, until the snapshot is forgotten: a sync from a
	 * cache that does not show the success yet must not start (and observe) the same op again */
	struct kube_hmap done;
	struct series *series;
	size_t nseries;
	struct kube_hmap gone; /* the UIDs forgotten lately, as keys (values unused) */
	/* the same UIDs in the order forgotten: the oldest is dropped from gone when the ring wraps */
	char (*gone_ring)[64];
	size_t gone_next;
};

struct sctrl_opm *sctrl_opm_new(void)
{
	struct sctrl_opm *m = xcalloc(1, sizeof(*m));
	struct kube_hmap empty = KUBE_HMAP_INIT;

	pthread_mutex_init(&m->mu, NULL);
	m->pending = empty;
	m->done = empty;
	m->gone = empty;
	m->series = xcalloc(OPM_MAX_SERIES, sizeof(*m->series));
	m->gone_ring = xcalloc(OPM_GONE, sizeof(*m->gone_ring));
	return m;
}

void sctrl_opm_free(struct sctrl_opm *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->pending.cap; i++)
		if (m->pending.slots[i].key)
			free(m->pending.slots[i].value);
	kube_hmap_clear(&m->pending);
	kube_hmap_clear(&m->done);
	kube_hmap_clear(&m->gone);
	free(m->gone_ring);
	free(m->series);
	pthread_mutex_destroy(&m->mu);
	free(m);
}

static void op_key(const char *op, const char *uid, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", op, uid ? uid : "");
}

void sctrl_opm_start(struct sctrl_opm *m, const char *op, const char *uid, const char *driver,
		     bool preprovisioned)
{
	char key[160];

	if (!m || !uid || !*uid)
		return;
	op_key(op, uid, key, sizeof(key));
	pthread_mutex_lock(&m->mu);
	if (!kube_hmap_has(&m->gone, uid) && !kube_hmap_get(&m->pending, key) &&
	    !kube_hmap_has(&m->done, key)) {
		struct pending *p = xcalloc(1, sizeof(*p));
		p->start_ns = mono_now_ns();
		snprintf(p->driver, sizeof(p->driver), "%s", driver && *driver ? driver : "unknown");
		snprintf(p->type, sizeof(p->type), "%s", preprovisioned ? "pre-provisioned" : "dynamic");
		kube_hmap_put(&m->pending, key, p);
	}
	pthread_mutex_unlock(&m->mu);
}

/* One observation; the caller holds m->mu. */
static void observe_locked(struct sctrl_opm *m, const char *driver, const char *op,
			   const char *type, const char *status, double secs)
{
	struct series *s = NULL;

	for (size_t i = 0; i < m->nseries && !s; i++)
		if (!strcmp(m->series[i].driver, driver) && !strcmp(m->series[i].op, op) &&
		    !strcmp(m->series[i].type, type) && !strcmp(m->series[i].status, status))
			s = &m->series[i];
	if (!s) {
		if (m->nseries == OPM_MAX_SERIES)
			return;
		s = &m->series[m->nseries++];
		snprintf(s->driver, sizeof(s->driver), "%s", driver);
		snprintf(s->op, sizeof(s->op), "%s", op);
		snprintf(s->type, sizeof(s->type), "%s", type);
		snprintf(s->status, sizeof(s->status), "%s", status);
	}
	for (size_t b = 0; b < NBUCKETS; b++)
		if (secs <= buckets[b]) {
			s->counts[b]++;
			break;
		}
	s->count++;
	s->sum += secs;
}

/* Ends pending op (if started) as status; the caller holds m->mu. Returns its duration or -1. */
static double end_locked(struct sctrl_opm *m, const char *op, const char *uid, const char *status,
			 const char *driver, double secs)
{
	char key[160];

	op_key(op, uid, key, sizeof(key));
	struct pending *p = kube_hmap_del(&m->pending, key);
	if (!p)
		return -1;
	if (secs < 0)
		secs = (double)(mono_now_ns() - p->start_ns) / 1e9;
	/* an unknown driver at the end: the one known at the start, as upstream */
	observe_locked(m, driver && *driver && strcmp(driver, "unknown") ? driver : p->driver, op,
		       p->type, status, secs);
	free(p);
	return secs;
}

void sctrl_opm_success(struct sctrl_opm *m, const char *op, const char *uid, const char *driver)
{
	if (!m || !uid)
		return;
	pthread_mutex_lock(&m->mu);
	double secs = end_locked(m, op, uid, "success", driver, -1);
	if (secs >= 0 && strcmp(op, SCTRL_OP_DELETE) && strcmp(op, SCTRL_OP_GROUP_DELETE)) {
		char key[160];
		op_key(op, uid, key, sizeof(key));
		kube_hmap_put(&m->done, key, (void *)1);
	}
	/* a deletion that ends while a create is pending cancels it, with the deletion's time */
	if (secs >= 0 && !strcmp(op, SCTRL_OP_DELETE)) {
		end_locked(m, SCTRL_OP_CREATE, uid, "cancel", NULL, secs);
		end_locked(m, SCTRL_OP_CREATE_READY, uid, "cancel", NULL, secs);
	}
	pthread_mutex_unlock(&m->mu);
}

void sctrl_opm_forget(struct sctrl_opm *m, const char *uid)
{
	static const char *const ops[] = { SCTRL_OP_CREATE, SCTRL_OP_CREATE_READY, SCTRL_OP_DELETE,
					   SCTRL_OP_GROUP_CREATE, SCTRL_OP_GROUP_CREATE_READY,
					   SCTRL_OP_GROUP_DELETE };
	char key[160];

	if (!m || !uid)
		return;
	pthread_mutex_lock(&m->mu);
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		op_key(ops[i], uid, key, sizeof(key));
		free(kube_hmap_del(&m->pending, key));
		kube_hmap_del(&m->done, key);
	}
	if (!kube_hmap_has(&m->gone, uid)) {
		char *slot = m->gone_ring[m->gone_next];
		if (*slot)
			kube_hmap_del(&m->gone, slot);
		snprintf(slot, sizeof(m->gone_ring[0]), "%s", uid);
		kube_hmap_put(&m->gone, slot, (void *)1);
		m->gone_next = (m->gone_next + 1) % OPM_GONE;
	}
	pthread_mutex_unlock(&m->mu);
}

static void label_value(struct strbuf *out, const char *v)
{
	for (const char *p = v; *p; p++) {
		if (*p == '\\' || *p == '"')
			strbuf_addch(out, '\\');
		if (*p == '\n')
			strbuf_addstr(out, "\\n");
		else
			strbuf_addch(out, *p);
	}
}

void sctrl_opm_render(struct sctrl_opm *m, struct strbuf *out)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->mu);
	strbuf_addstr(out, "# HELP snapshot_controller_operation_total_seconds [ALPHA] Total number of seconds spent by the controller on an operation\n"
			   "# TYPE snapshot_controller_operation_total_seconds histogram\n");
	for (size_t i = 0; i < m->nseries; i++) {
		const struct series *s = &m->series[i];
		struct strbuf labels = STRBUF_INIT;
		strbuf_addstr(&labels, "driver_name=\"");
		label_value(&labels, s->driver);
		strbuf_addf(&labels, "\",operation_name=\"%s\",operation_status=\"%s\",snapshot_type=\"%s\"",
			    s->op, s->status, s->type);
		uint64_t cum = 0;
		for (size_t b = 0; b < NBUCKETS; b++) {
			cum += s->counts[b];
			strbuf_addf(out, "snapshot_controller_operation_total_seconds_bucket{%s,le=\"%g\"} %llu\n",
				    labels.buf, buckets[b], (unsigned long long)cum);
		}
		strbuf_addf(out, "snapshot_controller_operation_total_seconds_bucket{%s,le=\"+Inf\"} %llu\n",
			    labels.buf, (unsigned long long)s->count);
		strbuf_addf(out, "snapshot_controller_operation_total_seconds_sum{%s} %.9g\n", labels.buf,
			    s->sum);
		strbuf_addf(out, "snapshot_controller_operation_total_seconds_count{%s} %llu\n",
			    labels.buf, (unsigned long long)s->count);
		strbuf_release(&labels);
	}
	strbuf_addf(out, "# HELP snapshot_controller_operations_in_flight [ALPHA] Total number of operations in flight\n"
			 "# TYPE snapshot_controller_operations_in_flight gauge\n"
			 "snapshot_controller_operations_in_flight %zu\n", m->pending.len);
	pthread_mutex_unlock(&m->mu);
}
