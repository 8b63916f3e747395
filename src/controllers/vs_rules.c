/* vs_rules: volume-scheduler's TaintToleration, NodeVolumeLimits and VolumeRestrictions
 * (ReadWriteOncePod) rules (see vs.h). */
#include "controllers/vs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

void vs_reasons_add(struct vs_reasons *r, const char *text)
{
	for (size_t i = 0; i < r->n; i++)
		if (!strcmp(r->r[i].text, text)) {
			r->r[i].count++;
			return;
		}
	if (r->n == VS_MAX_REASONS)
		return; /* more kinds than any message should list */
	snprintf(r->r[r->n].text, sizeof(r->r[r->n].text), "%s", text);
	r->r[r->n++].count = 1;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void vs_reasons_format(const struct vs_reasons *r, size_t nnodes, char *buf, size_t len)
{
	char items[VS_MAX_REASONS][340];
	const char *sorted[VS_MAX_REASONS];
	size_t off;

	for (size_t i = 0; i < r->n; i++) {
		if (!strcmp(r->r[i].text, VS_REASON_UNBOUND_IMMEDIATE))
			snprintf(items[i], sizeof(items[i]), "%s", r->r[i].text);
		else
			snprintf(items[i], sizeof(items[i]), "%zu %s", r->r[i].count, r->r[i].text);
		sorted[i] = items[i];
	}
	qsort(sorted, r->n, sizeof(sorted[0]), cmp_str);
	off = (size_t)snprintf(buf, len, "0/%zu nodes are available: %s", nnodes, r->n ? "" : "no nodes");
	for (size_t i = 0; i < r->n && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? ", " : "", sorted[i]);
	if (off < len)
		snprintf(buf + off, len - off, ".");
}
