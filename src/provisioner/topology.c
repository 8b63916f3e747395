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
 *
 * Aggregation (external-provisioner v6.4): a node counts under a set of topology keys only when
 * the driver registered all of those keys in the node's CSINode and the Node carries all of them
 * as labels; a labelled node whose driver reported no such keys is never offered. With delayed
 * binding the set is the selected node's keys. With immediate binding every distinct key set the
 * driver registered across the CSINodes is aggregated on its own and the terms are combined, so
 * a cluster where some nodes report a finer granularity (zone and rack) than others (zone) offers
 * both; when no CSINode has keys for the driver there is no topology to offer and the claim waits
 * ("no available topology found"). Requisite terms are sorted (fewer segments first, then by key
 * and value) and deduplicated.
 *
 * Error messages print values the way upstream's Go formats them (a key list "[a b]", a term
 * "[{key value}]", labels "map[k:v]"), so a user compares the two provisioners' events as text.
 */
#include "provisioner/prov.h"

#include "base/strbuf.h"
#include "base/xalloc.h"

#include <assert.h>
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
					struct kube_kv tmp[PROV_MAX_TOPOLOGY_KEYS];
					size_t k = cur.t[c].n;
					if (k > PROV_MAX_TOPOLOGY_KEYS - 1)
						k = PROV_MAX_TOPOLOGY_KEYS - 1;
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

/* Whether the driver registered every one of keys on this node (its CSINode). */
static bool registered_all(const struct prov_topo_node *nd, const char *const *keys, size_t nkeys)
{
	for (size_t k = 0; k < nkeys; k++) {
		bool found = false;
		for (size_t r = 0; r < nd->nkeys && !found; r++)
			found = !strcmp(nd->keys[r], keys[k]);
		if (!found)
			return false;
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

/* ---- key sets: what the driver registered across the cluster ---- */

struct keyset {
	const char **k; /* sorted; the strings are the input's */
	size_t n;
};

static int str_qcmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Go's slices.Compare of two sorted key lists: element by element, then the shorter first. */
static int keyset_cmp(const struct keyset *a, const struct keyset *b)
{
	for (size_t i = 0; i < a->n && i < b->n; i++) {
		int r = strcmp(a->k[i], b->k[i]);
		if (r)
			return r;
	}
	return a->n < b->n ? -1 : a->n > b->n;
}

static int keyset_qcmp(const void *a, const void *b)
{
	return keyset_cmp(a, b);
}

/* Every distinct (sorted) key set of the nodes that registered keys, in keyset_cmp order. */
static size_t distinct_keysets(const struct prov_topo_input *in, struct keyset **out)
{
	struct keyset *v = xcalloc(in->nnodes + 1, sizeof(*v));
	size_t n = 0;

	for (size_t i = 0; i < in->nnodes; i++) {
		const struct prov_topo_node *nd = &in->nodes[i];
		if (nd->nkeys == 0)
			continue;
		struct keyset ks = { xmalloc(nd->nkeys * sizeof(*ks.k)), nd->nkeys };
		memcpy(ks.k, nd->keys, nd->nkeys * sizeof(*ks.k));
		qsort(ks.k, ks.n, sizeof(*ks.k), str_qcmp);
		bool seen = false;
		for (size_t j = 0; j < n && !seen; j++)
			seen = keyset_cmp(&v[j], &ks) == 0;
		if (seen)
			free(ks.k);
		else
			v[n++] = ks;
	}
	qsort(v, n, sizeof(*v), keyset_qcmp);
	*out = v;
	return n;
}

static void keysets_free(struct keyset *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].k);
	free(v);
}

/* One term per node that carries the labels of keys and registered all of them. */
static void aggregate(const struct prov_topo_input *in, const char *const *keys, size_t nkeys,
		      struct prov_terms *out)
{
	struct kube_kv segs[PROV_MAX_TOPOLOGY_KEYS];

	assert(nkeys <= PROV_MAX_TOPOLOGY_KEYS);
	for (size_t i = 0; i < in->nnodes; i++) {
		const struct prov_topo_node *nd = &in->nodes[i];
		if (registered_all(nd, keys, nkeys) && node_term(nd, keys, nkeys, segs))
			push(out, segs, nkeys);
	}
}

/* ---- values as Go's fmt prints them, for the error messages ---- */

static void go_keys(struct strbuf *sb, const char *const *keys, size_t n)
{
	strbuf_addch(sb, '[');
	for (size_t i = 0; i < n; i++)
		strbuf_addf(sb, "%s%s", i ? " " : "", keys[i]);
	strbuf_addch(sb, ']');
}

static void go_term(struct strbuf *sb, const struct prov_term *t)
{
	strbuf_addch(sb, '[');
	for (size_t i = 0; i < t->n; i++)
		strbuf_addf(sb, "%s{%s %s}", i ? " " : "", t->segs[i].key, t->segs[i].value);
	strbuf_addch(sb, ']');
}

static void go_terms(struct strbuf *sb, const struct prov_terms *ts)
{
	strbuf_addch(sb, '[');
	for (size_t i = 0; i < ts->n; i++) {
		if (i)
			strbuf_addch(sb, ' ');
		go_term(sb, &ts->t[i]);
	}
	strbuf_addch(sb, ']');
}

/* A node's labels as a Go map prints: "map[k:v k2:v2]", keys sorted; "map[]" without a Node. */
static void go_labels(struct strbuf *sb, const struct prov_topo_node *nd)
{
	size_t n = nd && nd->has_node ? nd->nlabels : 0;
	struct kube_kv *l = xcalloc(n + 1, sizeof(*l));

	if (n)
		memcpy(l, nd->labels, n * sizeof(*l));
	qsort(l, n, sizeof(*l), kv_cmp);
	strbuf_addstr(sb, "map[");
	for (size_t i = 0; i < n; i++)
		strbuf_addf(sb, "%s%s:%s", i ? " " : "", l[i].key, l[i].value);
	strbuf_addch(sb, ']');
	free(l);
}

static int fail_sb(char *err, size_t errlen, struct strbuf *sb)
{
	snprintf(err, errlen, "%s", sb->buf);
	strbuf_release(sb);
	return -1;
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

/*
 * Step 1, a selected node: its registered keys and its topology term (into sel, sorted; segs
 * room for PROV_MAX_TOPOLOGY_KEYS). 0, or -1 with upstream's reason.
 */
static int selected_topology(const struct prov_topo_input *in, const struct prov_topo_node **nd,
			     struct prov_term *sel, char *err, size_t errlen)
{
	struct strbuf sb = STRBUF_INIT;

	*nd = find_node(in, in->selected_node);
	if (!*nd || (*nd)->nkeys == 0)
		return fail(err, errlen, "no topology key found for node %s", in->selected_node);
	if ((*nd)->nkeys > PROV_MAX_TOPOLOGY_KEYS)
		return fail(err, errlen, "too many topology keys on node %s", in->selected_node);
	if (!node_term(*nd, (*nd)->keys, (*nd)->nkeys, sel->segs)) {
		strbuf_addstr(&sb, "topology labels from selected node ");
		go_labels(&sb, *nd);
		strbuf_addstr(&sb, " does not match topology keys from CSINode ");
		go_keys(&sb, (*nd)->keys, (*nd)->nkeys);
		return fail_sb(err, errlen, &sb);
	}
	sel->n = (*nd)->nkeys;
	qsort(sel->segs, sel->n, sizeof(*sel->segs), kv_cmp);
	return 0;
}

/* --strict-topology: the selected node's term must lie in one of the allowed terms. */
static int check_allowed(const struct prov_topo_input *in, const struct prov_term *sel, char *err,
			 size_t errlen)
{
	struct prov_terms flat = { 0 };
	struct strbuf sb = STRBUF_INIT;
	bool found = false;

	flatten(in->allowed, in->nallowed, &flat);
	for (size_t i = 0; i < flat.n && !found; i++)
		found = subset(&flat.t[i], sel);
	if (!found) {
		strbuf_addf(&sb, "selected node '\"%s\"' topology '", in->selected_node);
		go_term(&sb, sel);
		strbuf_addstr(&sb, "' is not in allowed topologies: ");
		go_terms(&sb, &flat);
	}
	prov_terms_free(&flat);
	return found ? 0 : fail_sb(err, errlen, &sb);
}

/*
 * Step 2 without allowed topologies: the cluster's topology. Delayed binding aggregates the
 * selected node's keys (nd); immediate binding every key set registered. An empty result with
 * 0 means no node has registered keys (the caller's "no available topology found").
 */
static int cluster_requisite(const struct prov_topo_input *in, const struct prov_topo_node *nd,
			     struct prov_terms *req, char *err, size_t errlen)
{
	struct strbuf sb = STRBUF_INIT;

	if (nd) {
		aggregate(in, nd->keys, nd->nkeys, req);
		if (req->n)
			return 0;
		strbuf_addstr(&sb, "topologyKeys ");
		go_keys(&sb, nd->keys, nd->nkeys);
		strbuf_addstr(&sb, " were not found on any nodes");
		return fail_sb(err, errlen, &sb);
	}
	struct keyset *sets;
	size_t nsets = distinct_keysets(in, &sets);
	for (size_t i = 0; i < nsets; i++) {
		if (sets[i].n > PROV_MAX_TOPOLOGY_KEYS) {
			keysets_free(sets, nsets);
			prov_terms_free(req);
			return fail(err, errlen, "too many topology keys");
		}
		aggregate(in, sets[i].k, sets[i].n, req);
	}
	if (nsets && req->n == 0) {
		strbuf_addstr(&sb, "topologyKeys [");
		for (size_t i = 0; i < nsets; i++) {
			if (i)
				strbuf_addch(&sb, ' ');
			go_keys(&sb, sets[i].k, sets[i].n);
		}
		strbuf_addstr(&sb, "] were not found on any nodes");
		keysets_free(sets, nsets);
		return fail_sb(err, errlen, &sb);
	}
	keysets_free(sets, nsets);
	return 0;
}

/* Step 3: preferred, a rotation of the requisite list. */
static int preferred(const struct prov_topo_input *in, bool delayed, const struct prov_term *sel,
		     struct prov_terms *req, struct prov_terms *pref, char *err, size_t errlen)
{
	struct strbuf sb = STRBUF_INIT;

	if (!delayed) {
		uint32_t h, idx;
		prov_pvc_name_hash(in->pvc_name ? in->pvc_name : "", &h, &idx);
		rotated(req, (size_t)((h + idx) % (uint32_t)req->n), pref);
		return 0;
	}
	if (in->strict) {
		rotated(req, 0, pref);
		return 0;
	}
	for (size_t i = 0; i < req->n; i++)
		if (subset(&req->t[i], sel)) {
			rotated(req, i, pref);
			return 0;
		}
	strbuf_addstr(&sb, "topology ");
	go_term(&sb, sel);
	strbuf_addf(&sb, " from selected node \"%s\" is not in requisite: ", in->selected_node);
	go_terms(&sb, req);
	prov_terms_free(req);
	return fail_sb(err, errlen, &sb);
}

int prov_accessibility(const struct prov_topo_input *in, struct prov_terms *req,
		       struct prov_terms *pref, char *err, size_t errlen)
{
	const struct prov_topo_node *nd = NULL;
	struct kube_kv selsegs[PROV_MAX_TOPOLOGY_KEYS];
	struct prov_term selected = { selsegs, 0 };
	bool delayed = in->selected_node && *in->selected_node;

	req->t = pref->t = NULL;
	req->n = pref->n = 0;
	/* 1. The selected node's topology; with --strict-topology the only requisite term. */
	if (delayed) {
		if (selected_topology(in, &nd, &selected, err, errlen))
			return -1;
		if (in->strict) {
			if (in->nallowed && check_allowed(in, &selected, err, errlen))
				return -1;
			push(req, selected.segs, selected.n);
		}
	}
	/* 2. Requisite: the allowed topologies, or the cluster's. */
	if (req->n == 0) {
		if (in->nallowed) {
			flatten(in->allowed, in->nallowed, req);
		} else {
			if (!delayed && !in->immediate)
				return 0; /* no requirements at all */
			if (cluster_requisite(in, nd, req, err, errlen))
				return -1;
			if (req->n == 0)
				return fail(err, errlen, "no available topology found");
		}
	}
	if (req->n == 0)
		return 0; /* allowed topologies with empty terms: as without topology */
	dedup_sorted(req);
	/* 3. Preferred. */
	return preferred(in, delayed, &selected, req, pref, err, errlen);
}
