/*
 * prepare: from a claim and its class to the CreateVolumeRequest (upstream's prepareProvision):
 * the checks that refuse a claim, the volume name, capabilities, data source (sources.c),
 * AccessibilityRequirements, secrets and parameters. Nothing here calls the driver.
 */
#include "provisioner/prov.h"

#include "base/log.h"
#include "base/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- topology ---- */

Csi__V1__Topology *prov_csi_topology(struct csi_arena *a, const struct prov_term *t)
{
	Csi__V1__Topology *tp = csi_msg_new(a, &csi__v1__topology__descriptor);
	for (size_t i = 0; i < t->n; i++)
		csi_map_add(a, &tp->base, "segments", t->segs[i].key, t->segs[i].value);
	return tp;
}

static int topo_node_cmp(const void *a, const void *b)
{
	return strcmp(((const struct prov_topo_node *)a)->name, ((const struct prov_topo_node *)b)->name);
}

/*
 * Collects every node the caches know, for the topology decision. Nodes are sorted by name and
 * each CSINode found by binary search: matching them pairwise cost 1,000,000 strcmp calls per
 * claim on a 1,000-node cluster (bench/cluster_scale: 2.6 s of CPU for 1,000 provisions).
 */
static size_t topo_nodes(struct prov_ctrl *c, struct prov_topo_node **out, struct kube_obj ***refs,
			 size_t *nrefs)
{
	size_t nn = 0, ncn = 0, n = 0;
	struct kube_obj **nodes = kube_store_list(kube_informer_store(c->node_inf), &nn);
	struct kube_obj **csinodes = kube_store_list(kube_informer_store(c->csinode_inf), &ncn);
	struct prov_topo_node *v = xcalloc(nn + ncn + 1, sizeof(*v));

	for (size_t i = 0; i < nn; i++) {
		const struct kube_node *nd = kube_node_of(nodes[i]);
		v[n].name = nodes[i]->name;
		v[n].has_node = true;
		v[n].labels = nd->labels;
		v[n].nlabels = nd->nlabels;
		n++;
	}
	qsort(v, nn, sizeof(*v), topo_node_cmp);
	for (size_t i = 0; i < ncn; i++) {
		const struct kube_csinode *cn = kube_csinode_of(csinodes[i]);
		struct prov_topo_node key = { .name = csinodes[i]->name };
		struct prov_topo_node *t = nn ? bsearch(&key, v, nn, sizeof(*v), topo_node_cmp) : NULL;
		if (!t) {
			t = &v[n++];
			t->name = csinodes[i]->name;
		}
		t->has_csinode = true;
		for (size_t d = 0; d < cn->ndrivers; d++)
			if (cn->drivers[d].name && !strcmp(cn->drivers[d].name, c->o.driver)) {
				t->keys = cn->drivers[d].topology_keys;
				t->nkeys = cn->drivers[d].ntopology_keys;
			}
	}
	*refs = xcalloc(nn + ncn + 1, sizeof(**refs));
	memcpy(*refs, nodes, nn * sizeof(**refs));
	memcpy(*refs + nn, csinodes, ncn * sizeof(**refs));
	*nrefs = nn + ncn;
	free(nodes);
	free(csinodes);
	*out = v;
	return n;
}

/* AccessibilityRequirements: seed 004's table over the cached nodes (topology.c), or with
 * --node-deployment this node's topology. */
/* Not the cluster's topology: a node deployment knows only its own (NodeGetInfo). */
static void node_accessibility(struct prov_ctrl *c, Csi__V1__CreateVolumeRequest *req,
			       struct csi_arena *a)
{
	if (!c->nd->ntopology)
		return;
	struct prov_term t = { (struct kube_kv *)c->nd->topology, c->nd->ntopology };
	Csi__V1__TopologyRequirement *tr = csi_msg_new(a, &csi__v1__topology_requirement__descriptor);
	csi_repeated_add(a, &tr->base, "requisite", prov_csi_topology(a, &t));
	csi_repeated_add(a, &tr->base, "preferred", prov_csi_topology(a, &t));
	req->accessibility_requirements = tr;
}

/* ---- the per-claim topology cache ---- */

struct topo_saved {
	char uid[64];                /* the claim's: a new claim of the same name starts afresh */
	struct prov_terms rq, pf;    /* keys and values owned (strdup) */
};

static void terms_copy(struct prov_terms *dst, const struct prov_terms *src)
{
	dst->n = src->n;
	dst->t = xcalloc(src->n + 1, sizeof(*dst->t));
	for (size_t i = 0; i < src->n; i++) {
		dst->t[i].n = src->t[i].n;
		dst->t[i].segs = xcalloc(src->t[i].n + 1, sizeof(*dst->t[i].segs));
		for (size_t j = 0; j < src->t[i].n; j++)
			dst->t[i].segs[j] = (struct kube_kv){ xstrdup(src->t[i].segs[j].key),
							      xstrdup(src->t[i].segs[j].value) };
	}
}

static void terms_free_owned(struct prov_terms *ts)
{
	for (size_t i = 0; i < ts->n; i++)
		for (size_t j = 0; j < ts->t[i].n; j++) {
			free((char *)ts->t[i].segs[j].key);
			free((char *)ts->t[i].segs[j].value);
		}
	prov_terms_free(ts);
}

static void saved_free(struct topo_saved *s)
{
	if (!s)
		return;
	terms_free_owned(&s->rq);
	terms_free_owned(&s->pf);
	free(s);
}

void prov_topo_forget(struct prov_ctrl *c, const char *key)
{
	pthread_mutex_lock(&c->mu);
	struct topo_saved *s = kube_hmap_del(&c->topo_cache, key);
	pthread_mutex_unlock(&c->mu);
	saved_free(s);
}

void prov_topo_clear(struct prov_ctrl *c)
{
	for (size_t i = 0; i < c->topo_cache.cap; i++)
		if (c->topo_cache.slots[i].key)
			saved_free(c->topo_cache.slots[i].value);
	kube_hmap_clear(&c->topo_cache);
}

/* The cached requirement of claim key (the UID must match) into req; false when none. */
static bool topo_cached(struct prov_ctrl *c, const char *key, const char *uid,
			Csi__V1__CreateVolumeRequest *req, struct csi_arena *a)
{
	bool found = false;
	pthread_mutex_lock(&c->mu);
	const struct topo_saved *s = kube_hmap_get(&c->topo_cache, key);
	if (s && !strcmp(s->uid, uid)) {
		found = true;
		if (s->rq.n) {
			Csi__V1__TopologyRequirement *tr = csi_msg_new(a, &csi__v1__topology_requirement__descriptor);
			for (size_t i = 0; i < s->rq.n; i++)
				csi_repeated_add(a, &tr->base, "requisite", prov_csi_topology(a, &s->rq.t[i]));
			for (size_t i = 0; i < s->pf.n; i++)
				csi_repeated_add(a, &tr->base, "preferred", prov_csi_topology(a, &s->pf.t[i]));
			req->accessibility_requirements = tr;
		}
	}
	pthread_mutex_unlock(&c->mu);
	return found;
}

static void topo_save(struct prov_ctrl *c, const char *key, const char *uid,
		      const struct prov_terms *rq, const struct prov_terms *pf)
{
	struct topo_saved *s = xcalloc(1, sizeof(*s));
	snprintf(s->uid, sizeof(s->uid), "%s", uid);
	terms_copy(&s->rq, rq);
	terms_copy(&s->pf, pf);
	pthread_mutex_lock(&c->mu);
	struct topo_saved *old = kube_hmap_put(&c->topo_cache, key, s);
	pthread_mutex_unlock(&c->mu);
	saved_free(old);
}

/* Whether the cached CSINodes have one named name. */
static bool has_csinode(struct prov_ctrl *c, const char *name)
{
	struct kube_obj *o = prov_store_get(c->csinode_inf, NULL, name);
	kube_obj_unref(o);
	return o != NULL;
}

/*
 * The request's AccessibilityRequirements: the claim's cached ones, else computed (seed 004's
 * table, topology.c) and cached. A selected node without a CSINode (and nothing cached) is
 * upstream's NotFound: *state PROV_RESCHEDULE, the claim goes back to the scheduler.
 */
static int accessibility(struct prov_ctrl *c, const struct kube_pvc *pvc,
			 const struct kube_storageclass *sc, Csi__V1__CreateVolumeRequest *req,
			 struct csi_arena *a, enum prov_state *state, char *err, size_t errlen)
{
	if (c->nd) {
		node_accessibility(c, req, a);
		return 0;
	}
	char key[600], uid[64];
	snprintf(key, sizeof(key), "%s/%s", pvc->meta.ns, pvc->meta.name);
	kube_obj_uid(&pvc->meta, uid, sizeof(uid));
	if (topo_cached(c, key, uid, req, a)) {
		KLOG_V(4, "Claim %s: the topology of its first CreateVolume, from the cache", key);
		return 0;
	}
	if (pvc->selected_node && *pvc->selected_node && !has_csinode(c, pvc->selected_node)) {
		snprintf(err, errlen, "failed to get selected CSINode %s: csinode.storage.k8s.io \"%s\" not found",
			 pvc->selected_node, pvc->selected_node);
		*state = PROV_RESCHEDULE;
		return -1;
	}
	struct prov_topo_node *nodes;
	struct kube_obj **refs;
	size_t nrefs;
	struct prov_terms rq = { 0 }, pf = { 0 };
	size_t n = topo_nodes(c, &nodes, &refs, &nrefs);
	struct prov_topo_input in = {
		.pvc_name = pvc->meta.name, .allowed = sc->allowed_topologies,
		.nallowed = sc->nallowed_topologies, .selected_node = pvc->selected_node,
		.strict = c->o.strict_topology, .immediate = c->o.immediate_topology,
		.nodes = nodes, .nnodes = n,
	};
	char e2[512];
	int rc = prov_accessibility(&in, &rq, &pf, e2, sizeof(e2));

	if (rc)
		snprintf(err, errlen, "error generating accessibility requirements: %s", e2);
	else
		topo_save(c, key, uid, &rq, &pf);
	if (!rc && rq.n) {
		Csi__V1__TopologyRequirement *tr = csi_msg_new(a, &csi__v1__topology_requirement__descriptor);
		for (size_t i = 0; i < rq.n; i++)
			csi_repeated_add(a, &tr->base, "requisite", prov_csi_topology(a, &rq.t[i]));
		for (size_t i = 0; i < pf.n; i++)
			csi_repeated_add(a, &tr->base, "preferred", prov_csi_topology(a, &pf.t[i]));
		req->accessibility_requirements = tr;
	}
	prov_terms_free(&rq);
	prov_terms_free(&pf);
	kube_objs_free(refs, nrefs);
	free(nodes);
	return rc;
}

/* ---- secrets ---- */

/* The claim's annotations, for ${pvc.annotations['...']} (a GET: records do not keep them). */
static json_t *claim_annotations(struct prov_ctrl *c, const struct kube_pvc *pvc,
				 struct kube_kv **kv, size_t *n)
{
	struct kube_err e;
	json_t *j = kube_get(c->kc, &KUBE_RES_PERSISTENTVOLUMECLAIMS, pvc->meta.ns, pvc->meta.name, &e);
	json_t *ann = json_object_get(json_object_get(j, "metadata"), "annotations"), *v;
	const char *k;

	*n = 0;
	*kv = xcalloc(json_object_size(ann) + 1, sizeof(**kv));
	json_object_foreach(ann, k, v)
		if (json_is_string(v))
			(*kv)[(*n)++] = (struct kube_kv){ k, json_string_value(v) };
	return j;
}

/* ---- the request ---- */

/* The data source's kind (p->clone, p->snapshot) and the checks that refuse a claim for good. */
static int check_claim(struct prov_ctrl *c, const struct kube_pvc *pvc, struct prov_prep *p,
		       char *err, size_t errlen)
{
	p->source = pvc->data_source_kind ? pvc->data_source_kind : "";
	if (pvc->data_source_kind) {
		if (!pvc->data_source_name || !*pvc->data_source_name) {
			snprintf(err, errlen, "the PVC source not found for PVC %s", pvc->meta.name);
			return -1;
		}
		if (!strcmp(pvc->data_source_kind, "VolumeSnapshot")) {
			if (!prov_streq(pvc->data_source_group, PROV_SNAPSHOT_GROUP)) {
				snprintf(err, errlen, "the PVC source does not belong to the right APIGroup. Expected %s, Got %s",
					 PROV_SNAPSHOT_GROUP, pvc->data_source_group ? pvc->data_source_group : "");
				return -1;
			}
			p->snapshot = true;
		} else if (!strcmp(pvc->data_source_kind, "PersistentVolumeClaim") &&
			   (!pvc->data_source_group || !*pvc->data_source_group)) {
			p->clone = true;
		}
	}
	if (!c->o.cap_controller_service) {
		snprintf(err, errlen, "CSI driver does not support dynamic provisioning: plugin CONTROLLER_SERVICE capability is not reported");
		return -1;
	}
	if (!c->o.cap_create_delete) {
		snprintf(err, errlen, "CSI driver does not support dynamic provisioning: controller CREATE_DELETE_VOLUME capability is not reported");
		return -1;
	}
	if (p->snapshot && !c->o.cap_snapshot) {
		snprintf(err, errlen, "CSI driver does not support snapshot restore: controller CREATE_DELETE_SNAPSHOT capability is not reported");
		return -1;
	}
	if (p->clone && !c->o.cap_clone) {
		snprintf(err, errlen, "CSI driver does not support clone operations: controller CLONE_VOLUME capability is not reported");
		return -1;
	}
	if (c->o.gates.vac && pvc->vac_name && *pvc->vac_name)
		p->vac = pvc->vac_name;
	if (p->vac && !c->o.cap_modify) {
		snprintf(err, errlen, "CSI driver does not support VolumeAttributesClass: controller MODIFY_VOLUME capability is not reported");
		return -1;
	}
	if (pvc->request < 0) {
		/* The API server requires it; a claim decoded without one is malformed. */
		snprintf(err, errlen, "claim %s/%s has no valid spec.resources.requests.storage",
			 pvc->meta.ns, pvc->meta.name);
		return -1;
	}
	if (pvc->has_selector) {
		snprintf(err, errlen, "claim Selector is not supported");
		return -1;
	}
	return 0;
}

Csi__V1__VolumeCapability *prov_volume_capability(struct csi_arena *a, unsigned mode_bit,
						  bool block, bool snmw)
{
	Csi__V1__VolumeCapability *cap = csi_msg_new(a, &csi__v1__volume_capability__descriptor);
	cap->access_mode = csi_msg_new(a, &csi__v1__volume_capability__access_mode__descriptor);
	cap->access_mode->mode = (Csi__V1__VolumeCapability__AccessMode__Mode)prov_access_mode(mode_bit, snmw);
	if (block) {
		cap->access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;
		cap->block = csi_msg_new(a, &csi__v1__volume_capability__block_volume__descriptor);
	} else {
		cap->access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
		cap->mount = csi_msg_new(a, &csi__v1__volume_capability__mount_volume__descriptor);
	}
	return cap;
}

/* The request's name, capacity range and one capability per access mode (a mount one with the
 * fsType and the class's mountOptions). */
static void new_request(struct prov_ctrl *c, const struct kube_pvc *pvc,
			const struct kube_storageclass *sc, struct prov_prep *p)
{
	Csi__V1__CreateVolumeRequest *req = csi_msg_new(p->a, &csi__v1__create_volume_request__descriptor);
	p->req = req;
	req->name = csi_arena_strdup(p->a, p->name);
	req->capacity_range = csi_msg_new(p->a, &csi__v1__capacity_range__descriptor);
	req->capacity_range->required_bytes = p->requested;
	for (unsigned b = 0; b < 4; b++) {
		unsigned bit = 1u << b;
		if (!(pvc->access_modes & bit))
			continue;
		Csi__V1__VolumeCapability *cap = prov_volume_capability(p->a, bit, pvc->block, c->o.cap_snmw);
		if (!pvc->block) { /* not cap->mount: the oneof puts it in a union with block */
			cap->mount->fs_type = csi_arena_strdup(p->a, p->fstype);
			for (size_t i = 0; i < sc->nmount_options; i++)
				csi_repeated_add(p->a, &cap->mount->base, "mount_flags",
						 csi_arena_strdup(p->a, sc->mount_options[i]));
		}
		csi_repeated_add(p->a, &req->base, "volume_capabilities", cap);
	}
}

/*
 * The provisioner secret (read into the request; its templates see the claim's name and
 * namespace only) and the references of the other kinds (for the PV; their names may use the
 * claim's annotations).
 */
static int request_secrets(struct prov_ctrl *c, const struct kube_pvc *pvc,
			   const struct kube_storageclass *sc, struct prov_prep *p, char *err,
			   size_t errlen)
{
	struct prov_template_ctx tc = { p->name, pvc->meta.name, pvc->meta.ns, NULL, 0 };
	if (prov_secret_ref(PROV_SECRET_PROVISIONER, sc->parameters, sc->nparameters, &tc,
			    &p->secrets[PROV_SECRET_PROVISIONER], err, errlen))
		return -1;
	if (p->secrets[PROV_SECRET_PROVISIONER].set &&
	    prov_add_secrets(c, p->a, &p->req->base, "secrets", &p->secrets[PROV_SECRET_PROVISIONER],
			     err, errlen))
		return -1;
	json_t *ann_doc = NULL;
	struct kube_kv *ann = NULL;
	if (prov_params_use_annotations(sc->parameters, sc->nparameters)) {
		ann_doc = claim_annotations(c, pvc, &ann, &tc.nannotations);
		tc.annotations = ann;
	}
	int rc = 0;
	for (int k = PROV_SECRET_CONTROLLER_PUBLISH; k < PROV_SECRET_KINDS && !rc; k++)
		rc = prov_secret_ref(k, sc->parameters, sc->nparameters, &tc, &p->secrets[k], err, errlen);
	free(ann);
	json_decref(ann_doc);
	return rc ? -1 : 0;
}

/* The class's parameters without csi.storage.k8s.io/ keys, plus --extra-create-metadata's. */
static int request_parameters(struct prov_ctrl *c, const struct kube_pvc *pvc,
			      const struct kube_storageclass *sc, struct prov_prep *p, char *err,
			      size_t errlen)
{
	Csi__V1__CreateVolumeRequest *req = p->req;
	struct kube_kv *stripped = xcalloc(sc->nparameters + 1, sizeof(*stripped));
	int n = prov_strip_params(sc->parameters, sc->nparameters, stripped, err, errlen);

	if (n < 0) {
		free(stripped);
		return -1;
	}
	for (int i = 0; i < n; i++)
		csi_map_add(p->a, &req->base, "parameters", stripped[i].key,
			    stripped[i].value ? stripped[i].value : "");
	free(stripped);
	if (c->o.extra_create_metadata) {
		csi_map_add(p->a, &req->base, "parameters", PROV_META_PVC_NAME, pvc->meta.name);
		csi_map_add(p->a, &req->base, "parameters", PROV_META_PVC_NAMESPACE, pvc->meta.ns);
		csi_map_add(p->a, &req->base, "parameters", PROV_META_PV_NAME, p->name);
	}
	return 0;
}

/*
 * The claim's VolumeAttributesClass: its parameters become the request's mutable_parameters.
 * Read with a GET, as upstream (no informer for a field few claims set). A class that does not
 * exist (yet) keeps the claim waiting (*state stays PROV_NO_CHANGE, retried with backoff); one
 * of another driver is final.
 */
static int request_vac(struct prov_ctrl *c, struct prov_prep *p, enum prov_state *state,
		       char *err, size_t errlen)
{
	struct kube_err e;
	json_t *vac = kube_get(c->kc, &KUBE_RES_VOLUMEATTRIBUTESCLASSES, NULL, p->vac, &e);

	if (!vac) {
		snprintf(err, errlen, "%s", e.message);
		return -1;
	}
	const char *drv = json_string_value(json_object_get(vac, "driverName"));
	if (!prov_streq(drv, c->o.driver)) {
		snprintf(err, errlen, "VAC %s referenced in PVC is for driver %s which does not match driver name %s",
			 p->vac, drv ? drv : "", c->o.driver);
		*state = PROV_FINISHED;
		json_decref(vac);
		return -1;
	}
	const char *k;
	json_t *v;
	json_object_foreach(json_object_get(vac, "parameters"), k, v)
		if (json_is_string(v))
			csi_map_add(p->a, &p->req->base, "mutable_parameters", k, json_string_value(v));
	json_decref(vac);
	return 0;
}

int prov_prepare(struct prov_ctrl *c, const struct kube_pvc *pvc,
		 const struct kube_storageclass *sc, struct prov_prep *p, enum prov_state *state,
		 char *err, size_t errlen)
{
	char uid[64];

	*state = PROV_FINISHED;
	if (check_claim(c, pvc, p, err, errlen))
		return -1;
	if (prov_volume_name(c->o.prefix, kube_obj_uid(&pvc->meta, uid, sizeof(uid)), c->o.uuid_length,
			     p->name, sizeof(p->name), err, errlen))
		return -1;
	if (prov_fstype(sc->parameters, sc->nparameters, c->o.default_fstype, &p->fstype, err, errlen))
		return -1;
	p->requested = pvc->request > 0 ? pvc->request : 0;
	new_request(c, pvc, sc, p);
	/* Failures from here on may be temporary: the claim stays queued with backoff. */
	*state = PROV_NO_CHANGE;
	if (p->clone && prov_clone_source(c, pvc, sc, p, err, errlen))
		return -1;
	if (p->snapshot && prov_snapshot_source(c, pvc, sc, p, err, errlen))
		return -1;
	if (c->topo && accessibility(c, pvc, sc, p->req, p->a, state, err, errlen))
		return -1;
	if (request_secrets(c, pvc, sc, p, err, errlen))
		return -1;
	if (request_parameters(c, pvc, sc, p, err, errlen)) {
		*state = PROV_FINISHED; /* an unknown csi.storage.k8s.io/ key: the class is wrong */
		return -1;
	}
	if (p->vac && request_vac(c, p, state, err, errlen))
		return -1;
	return 0;
}
