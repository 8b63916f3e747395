/*
 * AccessibilityRequirements for CreateVolume, seed 004's table:
 *
 *   delayed  strict  allowed   immediate | requisite              preferred
 *   yes      yes     any       any       | selected node          = requisite
 *   yes      no      no        any       | aggregated cluster     requisite, selected node's first
 *   yes      no      yes       any       | allowed topologies     requisite, selected node's first
 *   no       any     yes       any       | allowed topologies     requisite shifted by the claim
 *   no       any     no        yes       | aggregated cluster     requisite shifted by the claim
 *   no       any     no        no        | none                   none
 *
 * "Shifted by the claim" is upstream's StatefulSet spreading: the sorted requisite list is rotated
 * by hash(set name) + replica index, so the replicas of a set start in different segments.
 * Aggregation takes the topology keys of the selected node's CSINode entry (or, for immediate
 * binding, of some node whose CSINode has keys) and collects the values of those keys from every
 * Node labelled with all of them.
 */
#include "provisioner/prov.h"

#include "base/xalloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

void prov_terms_free(struct prov_terms *ts)
{
	for (size_t i = 0; i < ts->n; i++)
		free(ts->t[i].segs);
	free(ts->t);
	ts->t = NULL;
	ts->n = 0;
}

static int kv_cmp(const void *a, const void *b)
{
	const struct kube_kv *x = a, *y = b;
	int r = strcmp(x->key, y->key);
	return r ? r : strcmp(x->value, y->value);
}

static int term_cmp(const struct prov_term *a, const struct prov_term *b)
{
	if (a->n != b->n)
		return a->n < b->n ? -1 : 1;
	for (size_t i = 0; i < a->n; i++) {
		int r = kv_cmp(&a->segs[i], &b->segs[i]);
		if (r)
			return r;
	}
	return 0;
}

static int term_qcmp(const void *a, const void *b)
{
	return term_cmp(a, b);
}

static void push(struct prov_terms *ts, const struct kube_kv *segs, size_t n)
{
	ts->t = xrealloc(ts->t, (ts->n + 1) * sizeof(*ts->t));
	struct prov_term *t = &ts->t[ts->n++];
	t->segs = xmalloc((n ? n : 1) * sizeof(*segs));
	memcpy(t->segs, segs, n * sizeof(*segs));
	t->n = n;
	qsort(t->segs, n, sizeof(*segs), kv_cmp);
}

/* t is a subset of other: every segment of t is in other (both sorted by key). */
static bool subset(const struct prov_term *t, const struct prov_term *other)
{
	size_t j = 0;
	if (t->n == 0)
		return true;
	for (size_t i = 0; i < other->n; i++) {
		if (strcmp(t->segs[j].key, other->segs[i].key) != 0)
			continue;
		if (strcmp(t->segs[j].value, other->segs[i].value) != 0)
			return false;
		if (++j == t->n)
			return true;
	}
	return false;
}

/* Distributes each allowed term's value ORs over its key ANDs (upstream's flatten). */
static void flatten(const struct kube_node_selector_term *allowed, size_t n, struct prov_terms *out)
{
	for (size_t i = 0; i < n; i++) {
		struct prov_terms cur = { 0 };
		for (size_t r = 0; r < allowed[i].nreqs; r++) {
			const struct kube_node_selector_req *req = &allowed[i].reqs[r];
			struct prov_terms next = { 0 };
			for (size_t v = 0; v < req->nvalues; v++) {
				struct kube_kv seg = { req->key, req->values[v] };
				if (cur.n == 0) {
					push(&next, &seg, 1);
					continue;
				}
				for (size_t c = 0; c < cur.n; c++) {
					struct kube_kv tmp[32];
					size_t k = cur.t[c].n < 31 ? cur.t[c].n : 31;
					memcpy(tmp, cur.t[c].segs, k * sizeof(*tmp));
					tmp[k] = seg;
					push(&next, tmp, k + 1);
				}
			}
			prov_terms_free(&cur);
			cur = next;
		}
		for (size_t c = 0; c < cur.n; c++)
			push(out, cur.t[c].segs, cur.t[c].n);
		prov_terms_free(&cur);
	}
}

/* The node's values for keys; false when a key is missing. */
static bool node_term(const struct prov_topo_node *nd, const char *const *keys, size_t nkeys,
		      struct kube_kv *segs)
{
	if (!nd->has_node)
		return false;
	for (size_t k = 0; k < nkeys; k++) {
		const char *v = NULL;
		for (size_t l = 0; l < nd->nlabels; l++)
			if (!strcmp(nd->labels[l].key, keys[k]))
				v = nd->labels[l].value;
		if (!v)
			return false;
		segs[k] = (struct kube_kv){ keys[k], v };
	}
	return true;
}

static const struct prov_topo_node *find_node(const struct prov_topo_input *in, const char *name)
{
	for (size_t i = 0; i < in->nnodes; i++)
		if (!strcmp(in->nodes[i].name, name))
			return &in->nodes[i];
	return NULL;
}

void prov_pvc_name_hash(const char *name, uint32_t *hash, uint32_t *index)
{
	const char *h = name;
	size_t hl = strlen(name);

	*index = 0;
	const char *dash = strrchr(name, '-');
	if (dash && dash[1]) {
		char *end;
		unsigned long id = strtoul(dash + 1, &end, 10);
		if (!*end && dash[1] >= '0' && dash[1] <= '9' && id <= 0xffffffffUL) {
			*index = (uint32_t)id;
			hl = (size_t)(dash - name);
			/* ClaimName-SetName-Id: hash only the part after the last dash of the prefix. */
			for (size_t i = hl; i > 0; i--)
				if (name[i - 1] == '-') {
					h = name + i;
					hl = hl - i;
					break;
				}
		}
	}
	uint32_t x = 2166136261u; /* FNV-1 32, as Go's hash/fnv New32 */
	for (size_t i = 0; i < hl; i++) {
		x *= 16777619u;
		x ^= (uint8_t)h[i];
	}
	*hash = x;
}

static void dedup_sorted(struct prov_terms *ts)
{
	qsort(ts->t, ts->n, sizeof(*ts->t), term_qcmp);
	size_t w = 0;
	for (size_t i = 0; i < ts->n; i++) {
		if (w > 0 && term_cmp(&ts->t[w - 1], &ts->t[i]) == 0) {
			free(ts->t[i].segs);
			continue;
		}
		ts->t[w++] = ts->t[i];
	}
	ts->n = w;
}

/* out = in rotated left by k (copies). */
static void rotated(const struct prov_terms *in, size_t k, struct prov_terms *out)
{
	for (size_t i = 0; i < in->n; i++) {
		const struct prov_term *t = &in->t[(i + k) % in->n];
		push(out, t->segs, t->n);
	}
}

int prov_accessibility(const struct prov_topo_input *in, struct prov_terms *req,
		       struct prov_terms *pref, char *err, size_t errlen)
{
	const char *const *keys = NULL;
	size_t nkeys = 0;
	struct kube_kv selsegs[32];
	struct prov_term selected = { selsegs, 0 };
	bool delayed = in->selected_node && *in->selected_node;

	req->t = pref->t = NULL;
	req->n = pref->n = 0;
	/* 1. The selected node's topology. */
	if (delayed) {
		const struct prov_topo_node *nd = find_node(in, in->selected_node);
		if (nd && nd->has_csinode) {
			keys = nd->keys;
			nkeys = nd->nkeys;
		}
		if (nkeys == 0)
			return fail(err, errlen, "no topology key found for node %s", in->selected_node);
		if (nkeys > 32 || !node_term(nd, keys, nkeys, selsegs))
			return fail(err, errlen, "topology labels from selected node %s do not match topology keys from CSINode",
				    in->selected_node);
		selected.n = nkeys;
		qsort(selsegs, nkeys, sizeof(*selsegs), kv_cmp);
		if (in->strict) {
			if (in->nallowed) {
				struct prov_terms flat = { 0 };
				bool found = false;
				flatten(in->allowed, in->nallowed, &flat);
				for (size_t i = 0; i < flat.n && !found; i++)
					found = subset(&flat.t[i], &selected);
				prov_terms_free(&flat);
				if (!found)
					return fail(err, errlen, "selected node '\"%s\"' topology is not in allowed topologies",
						    in->selected_node);
			}
			push(req, selected.segs, selected.n);
		}
	}
	/* 2. Requisite. */
	if (req->n == 0) {
		if (in->nallowed) {
			flatten(in->allowed, in->nallowed, req);
		} else {
			if (!delayed && !in->immediate)
				return 0; /* no requirements at all */
			if (!delayed) {
				/* Immediate: the keys of some node that has registered the driver. */
				size_t cand = 0;
				for (size_t i = 0; i < in->nnodes; i++)
					if (in->nodes[i].has_csinode && in->nodes[i].nkeys)
						cand++;
				if (cand == 0)
					return 0; /* no node has topology keys: upstream warns, no requirement */
				size_t pick = in->random % cand;
				for (size_t i = 0; i < in->nnodes; i++)
					if (in->nodes[i].has_csinode && in->nodes[i].nkeys && pick-- == 0) {
						keys = in->nodes[i].keys;
						nkeys = in->nodes[i].nkeys;
						break;
					}
			}
			if (nkeys > 32)
				return fail(err, errlen, "too many topology keys");
			/*
			 * Seed 001: only nodes that have a node ID from the driver count; a node
			 * with the labels but without the driver would send volumes where it
			 * cannot be used.
			 */
			for (size_t i = 0; i < in->nnodes; i++) {
				struct kube_kv segs[32];
				if (in->nodes[i].has_driver && node_term(&in->nodes[i], keys, nkeys, segs))
					push(req, segs, nkeys);
			}
			if (req->n == 0)
				return fail(err, errlen, "topologyKeys were not found on any nodes");
		}
	}
	if (req->n == 0)
		return 0;
	dedup_sorted(req);
	/* 3. Preferred. */
	if (!delayed) {
		uint32_t h, idx;
		prov_pvc_name_hash(in->pvc_name ? in->pvc_name : "", &h, &idx);
		rotated(req, (size_t)((h + idx) % (uint32_t)req->n), pref);
	} else if (in->strict) {
		rotated(req, 0, pref);
	} else {
		for (size_t i = 0; i < req->n; i++)
			if (subset(&req->t[i], &selected)) {
				rotated(req, i, pref);
				break;
			}
		if (pref->n == 0) {
			prov_terms_free(req);
			return fail(err, errlen, "topology from selected node \"%s\" is not in requisite",
				    in->selected_node);
		}
	}
	return 0;
}
