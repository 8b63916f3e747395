/* vs_rules: volume-scheduler's TaintToleration, NodeVolumeLimits and VolumeRestrictions
 * (ReadWriteOncePod) rules, its claim checks before any node, and the FailedScheduling message
 * as kube-scheduler's FitError composes it (see vs.h). */
#include "controllers/vs.h"

#include "kube/quantity.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/timeutil.h"

static bool empty(const char *s)
{
	return !s || !*s;
}

static bool same(const char *a, const char *b)
{
	return !strcmp(a ? a : "", b ? b : "");
}

bool vs_tolerates(const struct kube_toleration *tol, const struct kube_taint *t)
{
	if (!empty(tol->effect) && !same(tol->effect, t->effect))
		return false;
	/* An empty key with Exists tolerates every taint; an empty key otherwise matches none. */
	if (!empty(tol->key) && !same(tol->key, t->key))
		return false;
	if (tol->op && !strcmp(tol->op, "Exists"))
		return true;
	if (empty(tol->key) || (tol->op && *tol->op && strcmp(tol->op, "Equal")))
		return false; /* Equal (the default) needs a key; an unknown operator matches nothing */
	return same(tol->value, t->value);
}

const struct kube_taint *vs_untolerated(const struct kube_taint *taints, size_t ntaints,
					const struct kube_toleration *tols, size_t ntols)
{
	for (size_t i = 0; i < ntaints; i++) {
		const struct kube_taint *t = &taints[i];
		bool ok = false;

		if (!same(t->effect, "NoSchedule") && !same(t->effect, "NoExecute"))
			continue;
		for (size_t k = 0; k < ntols && !ok; k++)
			ok = vs_tolerates(&tols[k], t);
		if (!ok)
			return t;
	}
	return NULL;
}

static bool vol_eq(const struct vs_volume *a, const struct vs_volume *b)
{
	return same(a->driver, b->driver) && same(a->id, b->id);
}

static bool listed(const struct vs_volume *v, size_t n, const struct vs_volume *x)
{
	for (size_t i = 0; i < n; i++)
		if (vol_eq(&v[i], x))
			return true;
	return false;
}

/* Unique volumes of driver in v[0..n). */
static size_t count_unique(const struct vs_volume *v, size_t n, const char *driver)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		if (same(v[i].driver, driver) && !listed(v, i, &v[i]))
			k++;
	return k;
}

/* Whether driver d is named by one of v[0..n). */
static bool driver_seen(const struct vs_volume *v, size_t n, const char *d)
{
	for (size_t i = 0; i < n; i++)
		if (same(v[i].driver, d))
			return true;
	return false;
}

const char *vs_over_limit(const struct vs_volume *used, size_t nused, const struct vs_volume *add,
			  size_t nadd, int32_t (*limit)(const char *driver, void *ud), void *ud)
{
	for (size_t i = 0; i < nadd; i++) {
		const char *d = add[i].driver;
		size_t fresh = 0;
		int32_t max;

		if (driver_seen(add, i, d))
			continue; /* this driver was counted already */
		max = limit(d, ud);
		if (max < 0)
			continue;
		/* The pod's volumes of d that are new to the node, each once. */
		for (size_t k = i; k < nadd; k++)
			if (same(add[k].driver, d) && !listed(add, k, &add[k]) &&
			    !listed(used, nused, &add[k]))
				fresh++;
		if (fresh && count_unique(used, nused, d) + fresh > (size_t)max)
			return d;
	}
	return NULL;
}

static bool names_claim(const struct kube_pod *p, const char *claim)
{
	for (uint16_t i = 0; i < p->nvolumes; i++)
		if (p->volumes[i].claim_name && !strcmp(p->volumes[i].claim_name, claim))
			return true;
	return false;
}

const struct kube_pod *vs_rwop_user(const struct kube_pod *p, const char *claim,
				    struct kube_obj *const *pods, size_t n,
				    bool (*placed)(const struct kube_pod *pod, void *ud), void *ud)
{
	for (size_t i = 0; i < n; i++) {
		const struct kube_pod *o = kube_pod_of(pods[i]);

		if (!o || o == p || !same(o->meta.ns, p->meta.ns) || kube_pod_terminated(o))
			continue;
		if (same(o->meta.name, p->meta.name))
			continue; /* p itself, as another record of the cache */
		if (empty(o->node_name) && !(placed && placed(o, ud)))
			continue;
		if (names_claim(o, claim))
			return o;
	}
	return NULL;
}

static void reasons_add(struct vs_reasons *r, const char *text)
{
	for (size_t i = 0; i < r->n; i++)
		if (!strcmp(r->r[i].text, text)) {
			r->r[i].count++;
			return;
		}
	if (r->n == VS_MAX_REASONS)
		return; /* more kinds than any filter has */
	snprintf(r->r[r->n].text, sizeof(r->r[r->n].text), "%s", text);
	r->r[r->n++].count = 1;
}

void vs_reasons_node(struct vs_reasons *r, const struct vs_verdict *v)
{
	for (size_t i = 0; i < v->n && i < VS_NODE_REASONS_MAX; i++)
		reasons_add(r, v->reason[i]);
	if (v->unresolvable)
		r->unresolvable++;
	else
		r->resolvable++;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Appends to buf at *off, never past len (an overlong message is cut, as snprintf cuts). */
static void put(char *buf, size_t len, size_t *off, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t len, size_t *off, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*off >= len)
		return;
	va_start(ap, fmt);
	n = vsnprintf(buf + *off, len - *off, fmt, ap);
	va_end(ap);
	*off = n < 0 ? len : *off + (size_t)n;
}

/* " a, b, c." over the strings, sorted as Go's sort.Strings (bytewise). */
static void put_sorted(char *buf, size_t len, size_t *off, const char **items, size_t n)
{
	qsort(items, n, sizeof(items[0]), cmp_str);
	for (size_t i = 0; i < n; i++)
		put(buf, len, off, "%s%s", i ? ", " : " ", items[i]);
	put(buf, len, off, ".");
}

void vs_fit_message(const struct vs_reasons *r, size_t nnodes, const char *prefilter,
		    bool preempt_never, char *buf, size_t len)
{
	char items[VS_MAX_REASONS][200], pre[2][80];
	const char *sorted[VS_MAX_REASONS];
	size_t off = 0, n = 0, resolvable = r->resolvable, unresolvable;

	if (!len)
		return;
	buf[0] = '\0';
	if (!nnodes) {
		put(buf, len, &off, "%s", VS_NO_NODES);
		return;
	}
	put(buf, len, &off, "0/%zu nodes are available:", nnodes);
	if (prefilter) {
		/* DynamicResources' PostFilter runs first and fails: its PreFilter never ran */
		put(buf, len, &off, " %s. %s", prefilter, VS_POSTFILTER_NO_STATE);
		return;
	}
	if (r->n) {
		for (size_t i = 0; i < r->n; i++) {
			snprintf(items[i], sizeof(items[i]), "%zu %s", r->r[i].count, r->r[i].text);
			sorted[i] = items[i];
		}
		put_sorted(buf, len, &off, sorted, r->n);
	}
	put(buf, len, &off, " ");
	if (preempt_never) {
		put(buf, len, &off, "preemption: not eligible due to preemptionPolicy=Never.");
		return;
	}
	/* Every node not refused as Unschedulable is one where preemption cannot help, as upstream
	 * counts its nodes without a status. */
	unresolvable = nnodes > resolvable ? nnodes - resolvable : 0;
	if (resolvable)
		snprintf(pre[n], sizeof(pre[n]), "%zu No preemption victims found for incoming pod",
			 resolvable), sorted[n] = pre[n], n++;
	if (unresolvable)
		snprintf(pre[n], sizeof(pre[n]), "%zu Preemption is not helpful for scheduling",
			 unresolvable), sorted[n] = pre[n], n++;
	put(buf, len, &off, "preemption: 0/%zu nodes are available:", nnodes);
	put_sorted(buf, len, &off, sorted, n);
}

void vs_event_note(const char *msg, char *buf, size_t len)
{
	size_t n = strlen(msg);

	if (n <= VS_NOTE_MAX) {
		snprintf(buf, len, "%s", msg);
		return;
	}
	snprintf(buf, len, "%.*s ...", VS_NOTE_MAX - 4, msg);
}

int64_t vs_backoff_ns(unsigned attempts)
{
	int64_t d = NSEC_PER_SEC;

	for (unsigned i = 1; i < attempts && d < 10 * NSEC_PER_SEC; i++)
		d *= 2;
	return d < 10 * NSEC_PER_SEC ? d : 10 * NSEC_PER_SEC;
}

bool vs_claim_fully_bound(const struct kube_pvc *c)
{
	return c && !empty(c->volume_name) && c->bind_completed;
}

bool vs_prefilter(const struct vs_claim *c, size_t n, char *buf, size_t len)
{
	/* VolumeRestrictions reads every persistentVolumeClaim volume's claim first. */
	for (size_t i = 0; i < n; i++)
		if (!c[i].ephemeral && !c[i].pvc) {
			snprintf(buf, len, "persistentvolumeclaim \"%s\" not found", c[i].name);
			return true;
		}
	/* VolumeBinding: each claim in the pod's order, then the unbound immediate ones. */
	for (size_t i = 0; i < n; i++) {
		const struct kube_pvc *p = c[i].pvc;

		if (!p) {
			snprintf(buf, len, "waiting for ephemeral volume controller to create the "
				 "persistentvolumeclaim \"%s\"", c[i].name);
			return true;
		}
		if (p->phase == KUBE_PVC_LOST) {
			snprintf(buf, len, "persistentvolumeclaim \"%s\" bound to non-existent "
				 "persistentvolume \"%s\"", c[i].name, p->volume_name ? p->volume_name : "");
			return true;
		}
		if (p->meta.deletion_ts) {
			snprintf(buf, len, "persistentvolumeclaim \"%s\" is being deleted", c[i].name);
			return true;
		}
	}
	for (size_t i = 0; i < n; i++)
		if (!vs_claim_fully_bound(c[i].pvc) && !(c[i].delay_binding && empty(c[i].pvc->volume_name))) {
			snprintf(buf, len, "%s", VS_REASON_UNBOUND_IMMEDIATE);
			return true;
		}
	return false;
}

bool vs_labels_have(const struct kube_kv *l, uint16_t n, const char *k, const char *v)
{
	for (uint16_t i = 0; i < n; i++)
		if (!strcmp(l[i].key, k))
			return !v || !strcmp(l[i].value, v);
	return false;
}

/* A CSIStorageCapacity nodeTopology (matchLabels, matchExpressions In/Exists) against labels. */
static bool topology_covers(json_t *sel, const struct kube_node *n)
{
	const char *k;
	json_t *v, *e;
	size_t i;

	if (!json_is_object(sel))
		return false; /* no topology: covers no node */
	json_object_foreach(json_object_get(sel, "matchLabels"), k, v)
		if (!vs_labels_have(n->labels, n->nlabels, k, json_string_value(v)))
			return false;
	json_array_foreach(json_object_get(sel, "matchExpressions"), i, e) {
		const char *key = json_string_value(json_object_get(e, "key"));
		const char *op = json_string_value(json_object_get(e, "operator"));
		json_t *vals = json_object_get(e, "values"), *x;
		size_t j;
		bool any = false;

		if (!key || !op)
			return false;
		if (!strcmp(op, "Exists")) {
			if (!vs_labels_have(n->labels, n->nlabels, key, NULL))
				return false;
			continue;
		}
		if (strcmp(op, "In"))
			return false;
		json_array_foreach(vals, j, x)
			any = any || vs_labels_have(n->labels, n->nlabels, key, json_string_value(x));
		if (!any)
			return false;
	}
	return true;
}

/* -1: the class has no CSIStorageCapacity objects; else 1 when one covering the node has room. */
int vs_capacity_fits(json_t *caps, const char *cls, const struct kube_node *n, int64_t want)
{
	json_t *c;
	size_t i;
	int seen = -1;

	json_array_foreach(json_object_get(caps, "items"), i, c) {
		const char *sc = json_string_value(json_object_get(c, "storageClassName"));
		const char *cap = json_string_value(json_object_get(c, "capacity"));
		const char *max = json_string_value(json_object_get(c, "maximumVolumeSize"));
		int64_t cb = -1, mb = -1;
		char err[64];

		if (!sc || strcmp(sc, cls))
			continue;
		if (seen < 0)
			seen = 0;
		if (!topology_covers(json_object_get(c, "nodeTopology"), n))
			continue;
		if (cap)
			kube_quantity_parse(cap, &cb, err, sizeof(err));
		if (max)
			kube_quantity_parse(max, &mb, err, sizeof(err));
		if ((mb >= 0 ? mb : cb) >= want)
			return 1;
	}
	return seen;
}

/* A PV's node affinity as a label selector reads: "zone in (b), disk exists or host in (h)". */
void vs_affinity_text(const struct kube_pv *pv, char *buf, size_t len)
{
	static const char *const ops[] = { "in", "notin", "exists", "!exists", "gt", "lt" };
	size_t at = 0;

	buf[0] = '\0';
	for (uint16_t t = 0; t < pv->nnode_affinity && at < len; t++) {
		const struct kube_node_selector_term *term = &pv->node_affinity[t];
		for (uint16_t r = 0; r < term->nreqs && at < len; r++) {
			const struct kube_node_selector_req *q = &term->reqs[r];
			at += (size_t)snprintf(buf + at, len - at, "%s%s %s", r ? ", " : t ? " or " : "",
					       q->key, q->op < 6 ? ops[q->op] : "?");
			for (uint16_t v = 0; v < q->nvalues && at < len; v++)
				at += (size_t)snprintf(buf + at, len - at, "%s%s%s", v ? "," : " (",
						       q->values[v], v + 1 == q->nvalues ? ")" : "");
		}
	}
}
