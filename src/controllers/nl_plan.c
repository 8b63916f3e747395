/*
 * nl_plan: nodelifecycle's decisions as pure functions (see nl.h for the rules). No I/O, no
 * clock: the caller passes now, so the tests are tables of node states.
 */
#include "controllers/nl.h"

#include "base/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void copy_text(char *dst, size_t len, const char *s)
{
	snprintf(dst, len, "%s", s ? s : "");
}

void nl_observe(struct nl_health *h, bool has_ready, const char *heartbeat, const char *renew,
		int64_t created_ns, int64_t now_ns)
{
	bool moved = !h->seen || h->has_ready != has_ready ||
		     strcmp(h->heartbeat, heartbeat ? heartbeat : "") ||
		     strcmp(h->renew, renew ? renew : "");

	if (moved)
		/* First sight without a Ready condition counts from the node's creation, so a node
		 * whose kubelet never came up is noticed after the startup grace period. */
		h->probe_ns = !h->seen && !has_ready ? created_ns : now_ns;
	h->seen = true;
	h->has_ready = has_ready;
	copy_text(h->heartbeat, sizeof(h->heartbeat), heartbeat);
	copy_text(h->renew, sizeof(h->renew), renew);
}

const struct kube_node_condition *nl_condition(const struct kube_node_condition *c, size_t n,
					       const char *type)
{
	for (size_t i = 0; i < n; i++)
		if (c[i].type && !strcmp(c[i].type, type))
			return &c[i];
	return NULL;
}

static bool is(const char *a, const char *b)
{
	return a && !strcmp(a, b);
}

/* Ready, MemoryPressure, DiskPressure and PIDPressure become Unknown (upstream leaves
 * NetworkUnavailable alone: the network plugin owns it). */
static void mark_unknown(const struct nl_plan_in *in, struct nl_plan_out *out)
{
	static const char *const types[] = { "Ready", "MemoryPressure", "DiskPressure", "PIDPressure" };

	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
		struct kube_node_condition *c = NULL;
		for (size_t i = 0; i < out->nconds && !c; i++)
			if (is(out->conds[i].type, types[t]))
				c = &out->conds[i];
		if (!c) {
			out->conds[out->nconds++] = (struct kube_node_condition){
				types[t], "Unknown", "NodeStatusNeverUpdated",
				"Kubelet never posted node status.", in->created, out->now };
			out->conds_changed = true;
		} else if (!is(c->status, "Unknown")) {
			c->status = "Unknown";
			c->reason = "NodeStatusUnknown";
			c->message = "Kubelet stopped posting node status.";
			c->transition = out->now; /* the heartbeat stays: the last time we heard */
			out->conds_changed = true;
		}
	}
}

/* The NoSchedule taint a condition asks for, or NULL. */
static const char *noschedule_key(const struct kube_node_condition *c)
{
	if (is(c->type, "Ready"))
		return is(c->status, "False") ? NL_TAINT_NOT_READY
		       : is(c->status, "Unknown") ? NL_TAINT_UNREACHABLE : NULL;
	if (!is(c->status, "True"))
		return NULL;
	if (is(c->type, "MemoryPressure"))
		return "node.kubernetes.io/memory-pressure";
	if (is(c->type, "DiskPressure"))
		return "node.kubernetes.io/disk-pressure";
	if (is(c->type, "PIDPressure"))
		return "node.kubernetes.io/pid-pressure";
	if (is(c->type, "NetworkUnavailable"))
		return "node.kubernetes.io/network-unavailable";
	return NULL;
}

/* The NoSchedule keys this controller owns: the condition ones and unschedulable. */
static bool managed_noschedule(const char *key)
{
	static const char *const keys[] = {
		NL_TAINT_NOT_READY, NL_TAINT_UNREACHABLE, "node.kubernetes.io/memory-pressure",
		"node.kubernetes.io/disk-pressure", "node.kubernetes.io/pid-pressure",
		"node.kubernetes.io/network-unavailable", NL_TAINT_UNSCHEDULABLE,
	};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (is(key, keys[i]))
			return true;
	return false;
}

#define MAX_WANT 10 /* NoSchedule: one per condition type and unschedulable; NoExecute: one */

struct want {
	const char *key[MAX_WANT];
	const char *effect[MAX_WANT];
	size_t n;
};

static void want_add(struct want *w, const char *key, const char *effect)
{
	for (size_t i = 0; i < w->n; i++)
		if (!strcmp(w->key[i], key) && !strcmp(w->effect[i], effect))
			return;
	if (w->n < MAX_WANT) {
		w->key[w->n] = key;
		w->effect[w->n++] = effect;
	}
}

static bool wanted(const struct want *w, const struct kube_taint *t)
{
	for (size_t i = 0; i < w->n; i++)
		if (is(t->key, w->key[i]) && is(t->effect, w->effect[i]))
			return true;
	return false;
}

/* Whether this controller decides about taint t (key and effect it manages). */
static bool owned(const struct kube_taint *t, const char *ready)
{
	if (is(t->effect, "NoSchedule"))
		return managed_noschedule(t->key);
	if (is(t->effect, "NoExecute"))
		return ready && (is(t->key, NL_TAINT_NOT_READY) || is(t->key, NL_TAINT_UNREACHABLE));
	return false;
}

static bool has_taint(const struct nl_plan_in *in, const char *key, const char *effect)
{
	for (size_t i = 0; i < in->ntaints; i++)
		if (is(in->taints[i].key, key) && is(in->taints[i].effect, effect))
			return true;
	return false;
}

static void plan_taints(const struct nl_plan_in *in, struct nl_plan_out *out)
{
	const struct kube_node_condition *rc = nl_condition(out->conds, out->nconds, "Ready");
	const char *ready = rc ? rc->status : NULL;
	struct want w = { .n = 0 };

	for (size_t i = 0; i < out->nconds; i++) {
		const char *k = noschedule_key(&out->conds[i]);
		if (k)
			want_add(&w, k, "NoSchedule");
	}
	if (in->unschedulable)
		want_add(&w, NL_TAINT_UNSCHEDULABLE, "NoSchedule");
	const char *nx = is(ready, "False") ? NL_TAINT_NOT_READY
			 : is(ready, "Unknown") ? NL_TAINT_UNREACHABLE : NULL;
	const char *opp = is(ready, "False") ? NL_TAINT_UNREACHABLE : NL_TAINT_NOT_READY;
	if (nx && in->noexec == NL_NOEXEC_REMOVE)
		nx = NULL; /* every zone fully disrupted: no NoExecute taint at all */
	else if (nx && in->noexec == NL_NOEXEC_HOLD && !has_taint(in, nx, "NoExecute") &&
		 !has_taint(in, opp, "NoExecute")) {
		out->noexec_pending = true; /* waits for its zone's rate limiter */
		nx = NULL;
	}
	if (nx)
		want_add(&w, nx, "NoExecute");

	out->taints = xcalloc(in->ntaints + MAX_WANT + 1, sizeof(*out->taints));
	for (size_t i = 0; i < in->ntaints; i++) {
		const struct kube_taint *t = &in->taints[i];
		if (owned(t, ready) && !wanted(&w, t)) {
			out->taints_changed = true;
			continue;
		}
		out->taints[out->ntaints++] = *t;
	}
	for (size_t k = 0; k < w.n; k++) {
		bool have = false;
		for (size_t i = 0; i < out->ntaints && !have; i++)
			have = is(out->taints[i].key, w.key[k]) && is(out->taints[i].effect, w.effect[k]);
		if (have)
			continue;
		out->taints[out->ntaints++] = (struct kube_taint){ w.key[k], "", w.effect[k], out->now };
		out->taints_changed = true;
	}
}

void nl_plan(const struct nl_plan_in *in, struct nl_plan_out *out)
{
	memset(out, 0, sizeof(*out));
	rfc3339_format((time_t)(in->now_ns / NSEC_PER_SEC), out->now, sizeof(out->now));
	out->conds = xcalloc(in->nconds + 4, sizeof(*out->conds));
	if (in->nconds)
		memcpy(out->conds, in->conds, in->nconds * sizeof(*out->conds));
	out->nconds = in->nconds;
	if (in->now_ns > in->probe_ns + in->grace_ns)
		mark_unknown(in, out);
	plan_taints(in, out);
}

void nl_plan_out_release(struct nl_plan_out *out)
{
	free(out->conds);
	free(out->taints);
	out->conds = NULL;
	out->taints = NULL;
}
