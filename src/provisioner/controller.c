/*
 * The provisioning controller: upstream's ProvisionController (sig-storage-lib-external-provisioner)
 * and csiProvisioner on compact records.
 *
 * Queues (names as upstream, for the workqueue metrics): "claims" (ns/name of PVCs), "volumes"
 * (PV names), "unsavedpvs" (PVs whose volume exists but whose object could not be saved yet) and
 * "cloning-protection" (source PVCs that carry the cloning finalizer while being deleted).
 *
 * Crash safety: the volume name is a function of the claim's UID, so a retry, a restart or a
 * kill -9 at any point calls CreateVolume again with the same name, and an idempotent driver
 * answers with the same volume; a PV that exists ends the claim's work. A claim whose
 * CreateVolume may still be running (timeout, UNAVAILABLE, ABORTED) is kept in `in_progress`
 * even after the claim is deleted, so the call is repeated until it ends and the volume is then
 * recorded in a PV (which the PV binder releases and this controller deletes).
 */
#include "provisioner/prov.h"

#include "base/log.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "kube/config.h"
#include "kube/quantity.h"
#include "kube/store.h"

#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* LATER: the key was put back with a delay of its own (node deployment); leave its backoff. */
enum result { DONE = KUBE_WORK_DONE, RETRY = KUBE_WORK_RETRY, AGAIN = KUBE_WORK_AGAIN,
	      LATER = KUBE_WORK_LATER };

/* Node deployment: distinct selected nodes remembered to estimate the competitors (a bound). */
#define PROV_MAX_SEEN_NODES 100000

struct unsaved {
	char *pv; /* the PersistentVolume as JSON text */
	char *claim_key;           /* ns/name */
	struct kube_obj *claim;    /* the claim it was made for (events) */
	char *volume_id;
	char *cls;
	struct prov_secret_ref secret; /* provisioner secret, for the clean-up DeleteVolume */
	int permanent_failures;
};

struct prov_ctrl;
struct worker {
	struct prov_ctrl *c;
	struct kube_workqueue *q;
	enum result (*sync)(struct prov_ctrl *c, const char *key);
	int max; /* threads */
};

struct prov_ctrl {
	struct prov_ctrl_opts o;
	struct kube_informer *infs[6]; /* the ones below that exist, for start/stop/free */
	size_t ninfs;
	struct worker ws[4];
	struct kube_client *kc;
	struct kube_informer *pvc_inf, *pv_inf, *sc_inf, *csinode_inf, *node_inf, *va_inf;
	struct kube_workqueue *claimq, *volq, *saveq, *cloneq;
	struct prov_metrics *metrics;
	pthread_mutex_t mu;          /* guards in_progress, unsaved, stop */
	struct kube_hmap in_progress; /* claim key -> struct kube_obj * (a reference) */
	struct kube_hmap unsaved;     /* PV name -> struct unsaved * */
	bool stop;
	struct prov_cap *cap; /* --enable-capacity, else NULL */
	/* --node-deployment */
	const struct prov_node_deployment *nd; /* NULL: a central provisioner */
	bool topo;                 /* CSI topology in use (driver capability, gate or node mode) */
	struct kube_hmap owners;   /* claim key -> struct owner_try * (guarded by mu) */
	struct kube_hmap seen_nodes; /* selected-node values seen on claims: the competitors */
};

/* An immediate-binding claim this node may try to own (node deployment). */
struct owner_try {
	unsigned attempts; /* failed tries: conflicts, no room */
	int64_t due;       /* monotonic time of the next try */
	bool armed;        /* a delayed add for `due` is pending */
	char stale_rv[64]; /* the resourceVersion a try got 409 for ("": none); until the cache
			      shows another, trying again would only conflict again */
};


static void owner_backoff(struct prov_ctrl *c, const char *key);

/* A PV that cannot be saved after this many permanent (4xx) answers is given up: its volume is
 * deleted so that it does not leak, and the claim is provisioned again later. */
#define PROV_SAVE_PERMANENT_ATTEMPTS 3
#define PROV_CLEANUP_ATTEMPTS 5


/* ---- small helpers ---- */

static bool streq(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

static void event(struct prov_ctrl *c, const struct kube_obj *o, enum kube_event_type t,
		  const char *reason, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void event(struct prov_ctrl *c, const struct kube_obj *o, enum kube_event_type t,
		  const char *reason, const char *fmt, ...)
{
	struct kube_objref ref;
	char uid[64], msg[1536];
	va_list ap;

	if (!c->o.recorder || !o)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	kube_objref_of(o, &ref, uid, sizeof(uid));
	kube_event(c->o.recorder, &ref, t, reason, "%s", msg);
}

static void grpc_error(const struct csi_status *st, char *out, size_t outlen)
{
	snprintf(out, outlen, "rpc error: code = %s desc = %.900s", csi_code_go_name(st->code),
		 st->message);
}

static struct kube_obj *store_get(struct kube_informer *inf, const char *ns, const char *name)
{
	return inf ? kube_store_get(kube_informer_store(inf), ns, name) : NULL;
}

static bool ours_pvc(const struct prov_ctrl *c, const struct kube_pvc *pvc)
{
	return pvc && pvc->provisioner && !strcmp(pvc->provisioner, c->o.driver);
}

/*
 * Node deployment: claims bound already or selected for another node are not this instance's
 * work and stay out of its cache (clones stay: their sources' protection counts them). The
 * selected nodes seen are counted here, where every claim of the driver passes, as competitors.
 */
static bool node_pvc_wanted(struct prov_ctrl *c, const struct kube_pvc *pvc)
{
	const struct prov_node_deployment *nd = c->o.node_deployment;
	bool selected = pvc->selected_node && *pvc->selected_node;

	if (selected) {
		pthread_mutex_lock(&c->mu);
		if (c->seen_nodes.len < PROV_MAX_SEEN_NODES)
			kube_hmap_put(&c->seen_nodes, pvc->selected_node, NULL);
		pthread_mutex_unlock(&c->mu);
	}
	if (pvc->data_source_kind && !strcmp(pvc->data_source_kind, "PersistentVolumeClaim"))
		return true;
	if (pvc->volume_name && *pvc->volume_name)
		return false;
	return !selected || !strcmp(pvc->selected_node, nd->node);
}

static bool pvc_filter(const struct kube_obj *o, void *ud)
{
	struct prov_ctrl *c = ud;
	const struct kube_pvc *pvc = kube_pvc_of(o);
	if (pvc && kube_obj_has_finalizer(o, PROV_CLONE_FINALIZER))
		return true;
	if (!ours_pvc(c, pvc))
		return false;
	return !c->o.node_deployment || node_pvc_wanted(c, pvc);
}

/* Upstream's isProvisionerForVolume: provisioned by us, or a static PV of our driver. */
static bool pv_filter(const struct kube_obj *o, void *ud)
{
	const struct prov_ctrl *c = ud;
	const struct kube_pv *pv = kube_pv_of(o);

	if (!pv)
		return false;
	/* Node deployment: only this node's volumes (the others are other instances' to delete). */
	if (c->o.node_deployment && !prov_pv_on_node(pv, c->o.node_deployment->topology,
						     c->o.node_deployment->ntopology))
		return false;
	if (pv->provisioned_by)
		return !strcmp(pv->provisioned_by, c->o.driver);
	return pv->driver && !strcmp(pv->driver, c->o.driver);
}

static bool va_filter(const struct kube_obj *o, void *ud)
{
	const struct prov_ctrl *c = ud;
	const struct kube_va *va = kube_va_of(o);
	return va && va->attacher && !strcmp(va->attacher, c->o.driver);
}

/* Finalizers of o without `drop`, plus `add` (either NULL). */
static json_t *finalizers_json(const struct kube_obj *o, const char *drop, const char *add)
{
	json_t *a = json_array();
	for (size_t i = 0; i < o->nfinalizers; i++)
		if (!drop || strcmp(o->finalizers[i], drop) != 0)
			json_array_append_new(a, json_string(o->finalizers[i]));
	if (add)
		json_array_append_new(a, json_string(add));
	return a;
}

/* Merge patch of metadata.finalizers guarded by the record's resourceVersion. */
static int patch_finalizers(struct prov_ctrl *c, const struct kube_resource *r,
			    const struct kube_obj *o, const char *drop, const char *add, bool with_rv,
			    struct kube_err *e)
{
	json_t *md = json_pack("{s:o}", "finalizers", finalizers_json(o, drop, add));
	if (with_rv)
		json_object_set_new(md, "resourceVersion", json_string(o->rv));
	json_t *p = json_pack("{s:o}", "metadata", md);
	char *body = json_dumps(p, JSON_COMPACT);
	int rc = kube_patch_discard(c->kc, r, o->ns, o->name, false, KUBE_PATCH_MERGE, body, e);
	free(body);
	json_decref(p);
	return rc;
}

/* Reads Secret ns/name into the map `field` of msg; values live in the arena only. */
static int add_secrets(struct prov_ctrl *c, struct csi_arena *a, ProtobufCMessage *msg,
		       const char *field, const struct prov_secret_ref *ref, char *err, size_t errlen)
{
	struct kube_err e;
	json_t *secret = kube_get(c->kc, &KUBE_RES_SECRETS, ref->ns, ref->name, &e), *v;
	const char *key;
	int rc = 0;

	if (!secret) {
		snprintf(err, errlen, "error getting secret %s in namespace %s: %s", ref->name, ref->ns,
			 e.message);
		return -1;
	}
	json_object_foreach(json_object_get(secret, "data"), key, v) {
		size_t len;
		char *val = json_is_string(v) ? kube_base64_decode(json_string_value(v), &len) : NULL;
		if (!val) {
			snprintf(err, errlen, "secret %s in namespace %s has a malformed value for key %s",
				 ref->name, ref->ns, key);
			rc = -1;
			break;
		}
		csi_map_add(a, msg, field, key, val);
		memset(val, 0, len);
		free(val);
	}
	json_decref(secret);
	return rc;
}

/* ---- informer handlers: enqueue only ---- */

static void claim_key(const struct kube_obj *o, char *buf, size_t len)
{
	kube_obj_key(o, buf, len);
}

static void pvc_changed(struct prov_ctrl *c, const struct kube_obj *o)
{
	const struct kube_pvc *pvc = kube_pvc_of(o);
	char key[512];

	claim_key(o, key, sizeof(key));
	if (ours_pvc(c, pvc) && !(pvc->volume_name && *pvc->volume_name))
		kube_workqueue_add(c->claimq, key);
	if (o->deletion_ts && kube_obj_has_finalizer(o, PROV_CLONE_FINALIZER))
		kube_workqueue_add(c->cloneq, key);
	/* A clone that left Pending may free its source. */
	if (pvc && pvc->data_source_kind && !strcmp(pvc->data_source_kind, "PersistentVolumeClaim") &&
	    pvc->data_source_name && pvc->phase != KUBE_PVC_PENDING) {
		snprintf(key, sizeof(key), "%s/%s", o->ns ? o->ns : "", pvc->data_source_name);
		kube_workqueue_add(c->cloneq, key);
	}
}

static void pvc_added(const struct kube_obj *o, void *ud)
{
	pvc_changed(ud, o);
}

static void pvc_updated(const struct kube_obj *old, const struct kube_obj *o, void *ud)
{
	(void)old;
	pvc_changed(ud, o);
}

static bool should_delete(const struct prov_ctrl *c, const struct kube_obj *o)
{
	const struct kube_pv *pv = kube_pv_of(o);
	bool gate = c->o.gates.honor_pv_reclaim_policy, has = kube_obj_has_finalizer(o, PROV_PV_FINALIZER);
	return pv && pv->phase == KUBE_PV_RELEASED && pv->reclaim == 0 &&
	       (gate ? !(o->deletion_ts && !has) : !o->deletion_ts);
}

enum volume_work { VOLUME_NOTHING, VOLUME_ADD_FINALIZER, VOLUME_REMOVE_FINALIZER, VOLUME_DELETE };

/* What sync_volume has to do for this state of a PV (handleProtectionFinalizer, shouldDelete). */
static enum volume_work volume_work(const struct prov_ctrl *c, const struct kube_obj *o)
{
	const struct kube_pv *pv = kube_pv_of(o);
	if (!pv)
		return VOLUME_NOTHING;
	bool gate = c->o.gates.honor_pv_reclaim_policy, has = kube_obj_has_finalizer(o, PROV_PV_FINALIZER);
	if (gate && pv->reclaim == 0 && !o->deletion_ts && pv->phase == KUBE_PV_BOUND && !has)
		return VOLUME_ADD_FINALIZER;
	if (has && (!gate || pv->reclaim != 0) && !o->deletion_ts)
		return VOLUME_REMOVE_FINALIZER;
	return should_delete(c, o) ? VOLUME_DELETE : VOLUME_NOTHING;
}

/*
 * Only a PV that needs work is queued: a provisioned PV's creation and binding would otherwise
 * wake a volume worker twice per provision to find nothing to do. The worker reads the state
 * again from the cache; a later change comes back here.
 */
static void pv_added(const struct kube_obj *o, void *ud)
{
	struct prov_ctrl *c = ud;
	if (volume_work(c, o) != VOLUME_NOTHING)
		kube_workqueue_add(c->volq, o->name);
}

static void pv_updated(const struct kube_obj *old, const struct kube_obj *o, void *ud)
{
	(void)old;
	pv_added(o, ud);
}

/* A new or changed class: its waiting claims try again now instead of after their backoff. */
static void sc_changed(const struct kube_obj *o, void *ud)
{
	struct prov_ctrl *c = ud;
	size_t n = 0;
	struct kube_obj **all = kube_store_list(kube_informer_store(c->pvc_inf), &n);
	char key[512];

	for (size_t i = 0; i < n; i++) {
		const struct kube_pvc *pvc = kube_pvc_of(all[i]);
		if (ours_pvc(c, pvc) && streq(pvc->storage_class, o->name) &&
		    !(pvc->volume_name && *pvc->volume_name)) {
			claim_key(all[i], key, sizeof(key));
			kube_workqueue_add(c->claimq, key);
		}
	}
	kube_objs_free(all, n);
}

static void sc_updated(const struct kube_obj *old, const struct kube_obj *o, void *ud)
{
	if (!streq(old->rv, o->rv))
		sc_changed(o, ud);
}

/* ---- provisioning ---- */

struct prep {
	struct csi_arena *a;
	Csi__V1__CreateVolumeRequest *req;
	char name[320];
	const char *fstype;
	char cls[256];
	const char *source;    /* dataSource kind for metrics */
	bool clone, snapshot;
	struct prov_secret_ref secrets[PROV_SECRET_KINDS];
	int64_t requested;
};

static Csi__V1__Topology *csi_topology(struct csi_arena *a, const struct prov_term *t)
{
	Csi__V1__Topology *tp = csi_msg_new(a, &csi__v1__topology__descriptor);
	for (size_t i = 0; i < t->n; i++)
		csi_map_add(a, &tp->base, "segments", t->segs[i].key, t->segs[i].value);
	return tp;
}

/* Collects every node the caches know, for the topology decision. */
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
	for (size_t i = 0; i < ncn; i++) {
		const struct kube_csinode *cn = kube_csinode_of(csinodes[i]);
		struct prov_topo_node *t = NULL;
		for (size_t j = 0; j < nn; j++)
			if (!strcmp(v[j].name, csinodes[i]->name))
				t = &v[j];
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

/* Node deployment: requisite and preferred are this node's own topology, nothing else. */
static void node_accessibility(struct prov_ctrl *c, Csi__V1__CreateVolumeRequest *req,
			       struct csi_arena *a)
{
	if (!c->nd->ntopology)
		return;
	struct prov_term t = { (struct kube_kv *)c->nd->topology, c->nd->ntopology };
	Csi__V1__TopologyRequirement *tr = csi_msg_new(a, &csi__v1__topology_requirement__descriptor);
	csi_repeated_add(a, &tr->base, "requisite", csi_topology(a, &t));
	csi_repeated_add(a, &tr->base, "preferred", csi_topology(a, &t));
	req->accessibility_requirements = tr;
}

static int accessibility(struct prov_ctrl *c, const struct kube_pvc *pvc,
			 const struct kube_storageclass *sc, Csi__V1__CreateVolumeRequest *req,
			 struct csi_arena *a, char *err, size_t errlen)
{
	if (c->nd) {
		node_accessibility(c, req, a);
		return 0;
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
		.nodes = nodes, .nnodes = n, .random = (unsigned)random(),
	};
	char e2[512];
	int rc = prov_accessibility(&in, &rq, &pf, e2, sizeof(e2));

	if (rc)
		snprintf(err, errlen, "error generating accessibility requirements: %s", e2);
	else if (rq.n) {
		Csi__V1__TopologyRequirement *tr = csi_msg_new(a, &csi__v1__topology_requirement__descriptor);
		for (size_t i = 0; i < rq.n; i++)
			csi_repeated_add(a, &tr->base, "requisite", csi_topology(a, &rq.t[i]));
		for (size_t i = 0; i < pf.n; i++)
			csi_repeated_add(a, &tr->base, "preferred", csi_topology(a, &pf.t[i]));
		req->accessibility_requirements = tr;
	}
	prov_terms_free(&rq);
	prov_terms_free(&pf);
	kube_objs_free(refs, nrefs);
	free(nodes);
	return rc;
}

/* The source claim of a clone, from the cache or the API. Reference or NULL with err. */
static struct kube_obj *get_pvc(struct prov_ctrl *c, const char *ns, const char *name, char *err,
				size_t errlen)
{
	struct kube_obj *o = store_get(c->pvc_inf, ns, name);
	struct kube_err e;
	char e2[256];

	if (o)
		return o;
	json_t *j = kube_get(c->kc, &KUBE_RES_PERSISTENTVOLUMECLAIMS, ns, name, &e);
	if (!j) {
		snprintf(err, errlen, "error getting PVC %s (namespace \"%s\") from api server: %s", name,
			 ns, e.message);
		return NULL;
	}
	o = kube_decode_json(&KUBE_KIND_PERSISTENTVOLUMECLAIM, j, e2, sizeof(e2));
	json_decref(j);
	if (!o)
		snprintf(err, errlen, "error decoding PVC %s/%s: %s", ns, name, e2);
	return o;
}

static const char *jstr(json_t *o, const char *path)
{
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", path);
	json_t *cur = o;
	for (char *tok = strtok(buf, "."); tok && cur; tok = strtok(NULL, "."))
		cur = json_object_get(cur, tok);
	return json_string_value(cur);
}

/* getPVCSource: checks and the source volume's handle. */
static int clone_source(struct prov_ctrl *c, const struct kube_pvc *pvc,
			const struct kube_storageclass *sc, struct prep *p, char *err, size_t errlen)
{
	struct kube_obj *so = get_pvc(c, pvc->meta.ns, pvc->data_source_name, err, errlen);
	const struct kube_pvc *src = kube_pvc_of(so);
	struct kube_err e;
	int rc = -1;
	char uid[64];

	if (!src)
		return -1;
	if (src->phase != KUBE_PVC_BOUND)
		snprintf(err, errlen, "the PVC DataSource %s must have a status of Bound", src->meta.name);
	else if (so->deletion_ts)
		snprintf(err, errlen, "the PVC DataSource %s is currently being deleted", src->meta.name);
	else if (!src->storage_class)
		snprintf(err, errlen, "the source PVC (%s) storageclass cannot be empty", src->meta.name);
	else if (!pvc->storage_class)
		snprintf(err, errlen, "the requested PVC (%s) storageclass cannot be empty", pvc->meta.name);
	else if ((pvc->request > 0 ? pvc->request : 0) < (src->request > 0 ? src->request : 0))
		snprintf(err, errlen, "error, new PVC request must be greater than or equal in size to the specified PVC data source, requested %lld but source is %lld",
			 (long long)pvc->request, (long long)src->request);
	else if (!src->volume_name || !*src->volume_name)
		snprintf(err, errlen, "volume name is empty in source PVC %s", src->meta.name);
	else
		rc = 0;
	if (rc) {
		kube_obj_unref(so);
		return -1;
	}
	rc = -1;
	json_t *pv = kube_get(c->kc, &KUBE_RES_PERSISTENTVOLUMES, NULL, src->volume_name, &e);
	const char *driver = jstr(pv, "spec.csi.driver"), *handle = jstr(pv, "spec.csi.volumeHandle");
	const char *mode = jstr(pv, "spec.volumeMode");
	bool src_block = mode && !strcmp(mode, "Block");
	kube_obj_uid(so, uid, sizeof(uid));
	if (!pv || !driver || !handle || strcmp(driver, sc->provisioner) != 0 ||
	    !jstr(pv, "spec.claimRef.uid") || strcmp(jstr(pv, "spec.claimRef.uid"), uid) != 0 ||
	    !streq(jstr(pv, "spec.claimRef.name"), src->meta.name) ||
	    !streq(jstr(pv, "spec.claimRef.namespace"), src->meta.ns) ||
	    !streq(jstr(pv, "status.phase"), "Bound")) {
		KLOG_W("the source volume %s for PVC %s/%s is missing, not bound to it, or of another driver",
		       src->volume_name, src->meta.ns, src->meta.name);
		snprintf(err, errlen, "claim in dataSource not bound or invalid");
	} else if (!pvc->block && src_block) {
		snprintf(err, errlen, "the source PVC and destination PVCs must have the same volume mode for cloning.  Source is Block, but new PVC requested Filesystem");
	} else if (pvc->block && !src_block) {
		snprintf(err, errlen, "the source PVC and destination PVCs must have the same volume mode for cloning.  Source is Filesystem, but new PVC requested Block");
	} else {
		Csi__V1__VolumeContentSource *cs = csi_msg_new(p->a, &csi__v1__volume_content_source__descriptor);
		cs->type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_VOLUME;
		cs->volume = csi_msg_new(p->a, &csi__v1__volume_content_source__volume_source__descriptor);
		cs->volume->volume_id = csi_arena_strdup(p->a, handle);
		p->req->volume_content_source = cs;
		rc = 0;
	}
	json_decref(pv);
	/* setCloneFinalizer: protect the source until the clone leaves Pending. */
	if (rc == 0 && !kube_obj_has_finalizer(so, PROV_CLONE_FINALIZER)) {
		if (patch_finalizers(c, &KUBE_RES_PERSISTENTVOLUMECLAIMS, so, NULL,
				     PROV_CLONE_FINALIZER, true, &e)) {
			snprintf(err, errlen, "cannot add finalizer %s to PVC %s/%s: %s",
				 PROV_CLONE_FINALIZER, so->ns, so->name, e.message);
			rc = -1;
		}
	}
	kube_obj_unref(so);
	return rc;
}

/* getSnapshotSource. */
static int snapshot_source(struct prov_ctrl *c, const struct kube_pvc *pvc,
			   const struct kube_storageclass *sc, struct prep *p, char *err,
			   size_t errlen)
{
	struct kube_err e;
	const char *name = pvc->data_source_name;
	json_t *snap = kube_get(c->kc, &KUBE_RES_VOLUMESNAPSHOTS, pvc->meta.ns, name, &e);
	json_t *content = NULL;
	int rc = -1;

	if (!snap) {
		snprintf(err, errlen, "error getting snapshot %s from api server: %s", name, e.message);
		return -1;
	}
	const char *bound = jstr(snap, "status.boundVolumeSnapshotContentName");
	json_t *ready = json_object_get(json_object_get(snap, "status"), "readyToUse");
	if (jstr(snap, "metadata.deletionTimestamp")) {
		snprintf(err, errlen, "snapshot %s is currently being deleted", name);
	} else if (!bound) {
		snprintf(err, errlen, "snapshot %s not bound", name);
	} else if (!(content = kube_get(c->kc, &KUBE_RES_VOLUMESNAPSHOTCONTENTS, NULL, bound, &e))) {
		KLOG_W("error getting snapshotcontent %s for snapshot %s/%s from api server: %s", bound,
		       pvc->meta.ns, name, e.message);
		snprintf(err, errlen, "snapshot %s not bound", name);
	} else if (!streq(jstr(content, "spec.volumeSnapshotRef.uid"), jstr(snap, "metadata.uid")) ||
		   !streq(jstr(content, "spec.volumeSnapshotRef.name"), name) ||
		   !streq(jstr(content, "spec.volumeSnapshotRef.namespace"), pvc->meta.ns)) {
		KLOG_W("snapshotcontent %s for snapshot %s/%s is bound to a different snapshot", bound,
		       pvc->meta.ns, name);
		snprintf(err, errlen, "snapshot %s not bound", name);
	} else if (!streq(jstr(content, "spec.driver"), sc->provisioner)) {
		KLOG_W("snapshotcontent %s for snapshot %s/%s is handled by a different CSI driver than requested by StorageClass %s",
		       bound, pvc->meta.ns, name, sc->meta.name);
		snprintf(err, errlen, "snapshot %s not bound", name);
	} else if (!json_is_true(ready)) {
		snprintf(err, errlen, "snapshot %s is not Ready", name);
	} else if (!jstr(content, "status.snapshotHandle")) {
		snprintf(err, errlen, "snapshot handle %s is not available", name);
	} else {
		const char *rs = jstr(snap, "status.restoreSize");
		json_t *rsj = json_object_get(json_object_get(snap, "status"), "restoreSize");
		int64_t restore = -1;
		char qerr[128];
		if (rs)
			kube_quantity_parse(rs, &restore, qerr, sizeof(qerr));
		else if (json_is_integer(rsj))
			restore = json_integer_value(rsj);
		const char *svm = jstr(content, "spec.sourceVolumeMode");
		json_t *anns = json_object_get(json_object_get(content, "metadata"), "annotations");
		const char *allow = json_string_value(json_object_get(anns, "snapshot.storage.kubernetes.io/allow-volume-mode-change"));
		if (restore >= 0 && pvc->request < restore) {
			snprintf(err, errlen, "requested volume size %lld is less than the size %lld for the source snapshot %s",
				 (long long)pvc->request, (long long)restore, name);
		} else if (c->o.prevent_volume_mode_conversion && svm &&
			   strcmp(svm, pvc->block ? "Block" : "Filesystem") != 0 &&
			   !(allow && !strcasecmp(allow, "true"))) {
			snprintf(err, errlen, "requested volume %s/%s modifies the mode of the source volume but does not have permission to do so. snapshot.storage.kubernetes.io/allow-volume-mode-change is not set to true on snapshotcontent %s",
				 pvc->meta.ns, pvc->meta.name, bound);
		} else {
			if (restore >= 0 && pvc->request > restore)
				KLOG_W("requested volume size %lld is greater than the size %lld for the source snapshot %s. Volume plugin needs to handle volume expansion.",
				       (long long)pvc->request, (long long)restore, name);
			Csi__V1__VolumeContentSource *cs = csi_msg_new(p->a, &csi__v1__volume_content_source__descriptor);
			cs->type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT;
			cs->snapshot = csi_msg_new(p->a, &csi__v1__volume_content_source__snapshot_source__descriptor);
			cs->snapshot->snapshot_id = csi_arena_strdup(p->a, jstr(content, "status.snapshotHandle"));
			p->req->volume_content_source = cs;
			rc = 0;
		}
	}
	json_decref(content);
	json_decref(snap);
	return rc;
}

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

/*
 * prepareProvision: everything before CreateVolume, without side effects on the driver.
 * Returns the state for a failure (-1 with err) or 0.
 */
static int prepare(struct prov_ctrl *c, const struct kube_pvc *pvc,
		   const struct kube_storageclass *sc, struct prep *p, enum prov_state *state,
		   char *err, size_t errlen)
{
	char uid[64];
	struct kube_kv *stripped;
	int n;

	*state = PROV_FINISHED;
	p->source = pvc->data_source_kind ? pvc->data_source_kind : "";
	if (pvc->data_source_kind) {
		if (!pvc->data_source_name || !*pvc->data_source_name) {
			snprintf(err, errlen, "the PVC source not found for PVC %s", pvc->meta.name);
			return -1;
		}
		if (!strcmp(pvc->data_source_kind, "VolumeSnapshot")) {
			if (!streq(pvc->data_source_group, PROV_SNAPSHOT_GROUP)) {
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
	if (prov_volume_name(c->o.prefix, kube_obj_uid(&pvc->meta, uid, sizeof(uid)), c->o.uuid_length,
			     p->name, sizeof(p->name), err, errlen))
		return -1;
	if (prov_fstype(sc->parameters, sc->nparameters, c->o.default_fstype, &p->fstype, err, errlen))
		return -1;
	p->requested = pvc->request > 0 ? pvc->request : 0;

	Csi__V1__CreateVolumeRequest *req = csi_msg_new(p->a, &csi__v1__create_volume_request__descriptor);
	p->req = req;
	req->name = csi_arena_strdup(p->a, p->name);
	req->capacity_range = csi_msg_new(p->a, &csi__v1__capacity_range__descriptor);
	req->capacity_range->required_bytes = p->requested;
	for (unsigned b = 0; b < 4; b++) {
		unsigned bit = 1u << b;
		if (!(pvc->access_modes & bit))
			continue;
		Csi__V1__VolumeCapability *cap = csi_msg_new(p->a, &csi__v1__volume_capability__descriptor);
		cap->access_mode = csi_msg_new(p->a, &csi__v1__volume_capability__access_mode__descriptor);
		cap->access_mode->mode = (Csi__V1__VolumeCapability__AccessMode__Mode)prov_access_mode(bit, c->o.cap_snmw);
		if (pvc->block) {
			cap->access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;
			cap->block = csi_msg_new(p->a, &csi__v1__volume_capability__block_volume__descriptor);
		} else {
			Csi__V1__VolumeCapability__MountVolume *m =
				csi_msg_new(p->a, &csi__v1__volume_capability__mount_volume__descriptor);
			m->fs_type = csi_arena_strdup(p->a, p->fstype);
			for (size_t i = 0; i < sc->nmount_options; i++)
				csi_repeated_add(p->a, &m->base, "mount_flags",
						 csi_arena_strdup(p->a, sc->mount_options[i]));
			cap->access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
			cap->mount = m;
		}
		csi_repeated_add(p->a, &req->base, "volume_capabilities", cap);
	}
	/* Failures from here on may be temporary: the claim stays queued with backoff. */
	*state = PROV_NO_CHANGE;
	if (p->clone && clone_source(c, pvc, sc, p, err, errlen))
		return -1;
	if (p->snapshot && snapshot_source(c, pvc, sc, p, err, errlen))
		return -1;
	if (c->topo && accessibility(c, pvc, sc, req, p->a, err, errlen))
		return -1;

	/* Secrets: the provisioner's own with the claim's name and namespace only. */
	struct prov_template_ctx tc = { p->name, pvc->meta.name, pvc->meta.ns, NULL, 0 };
	if (prov_secret_ref(PROV_SECRET_PROVISIONER, sc->parameters, sc->nparameters, &tc,
			    &p->secrets[PROV_SECRET_PROVISIONER], err, errlen))
		return -1;
	if (p->secrets[PROV_SECRET_PROVISIONER].set &&
	    add_secrets(c, p->a, &req->base, "secrets", &p->secrets[PROV_SECRET_PROVISIONER], err,
			errlen))
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
	if (rc)
		return -1;

	stripped = xcalloc(sc->nparameters + 1, sizeof(*stripped));
	n = prov_strip_params(sc->parameters, sc->nparameters, stripped, err, errlen);
	if (n < 0) {
		free(stripped);
		*state = PROV_FINISHED;
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

/* DeleteVolume of a volume whose PV could not be recorded (upstream's cleanupVolume). */
static int cleanup_volume(struct prov_ctrl *c, const char *volume_id,
			  const struct prov_secret_ref *secret, char *err, size_t errlen)
{
	struct csi_status st = { 0 };
	int rc = -1;

	for (int i = 0; i < PROV_CLEANUP_ATTEMPTS && rc; i++) {
		struct csi_arena *a = csi_arena_new();
		Csi__V1__DeleteVolumeRequest *dr = csi_msg_new(a, &csi__v1__delete_volume_request__descriptor);
		Csi__V1__DeleteVolumeResponse *resp = NULL;
		dr->volume_id = csi_arena_strdup(a, volume_id);
		if (secret && secret->set && add_secrets(c, a, &dr->base, "secrets", secret, err, errlen))
			KLOG_E("%s", err);
		rc = csi_delete_volume(c->o.csi, dr, &resp, c->o.timeout_ns, &st) ? -1 : 0;
		csi_msg_free(resp);
		csi_arena_free(a);
	}
	if (rc)
		grpc_error(&st, err, errlen);
	return rc;
}

static void claim_done(struct prov_ctrl *c, const char *key)
{
	pthread_mutex_lock(&c->mu);
	struct kube_obj *o = kube_hmap_del(&c->in_progress, key);
	pthread_mutex_unlock(&c->mu);
	kube_obj_unref(o);
}

static void claim_in_progress(struct prov_ctrl *c, const char *key, const struct kube_obj *o)
{
	pthread_mutex_lock(&c->mu);
	struct kube_obj *old = kube_hmap_put(&c->in_progress, key, kube_obj_ref((struct kube_obj *)o));
	pthread_mutex_unlock(&c->mu);
	kube_obj_unref(old);
}

/* rescheduleProvisioning: drop the selected-node annotation so the scheduler picks again. */
static int reschedule(struct prov_ctrl *c, const struct kube_pvc *pvc)
{
	struct kube_err e;
	char body[512];

	snprintf(body, sizeof(body), "{\"metadata\":{\"annotations\":{\"%s\":null},\"resourceVersion\":\"%s\"}}",
		 PROV_ANN_SELECTED_NODE, pvc->meta.rv ? pvc->meta.rv : "");
	if (kube_patch_discard(c->kc, &KUBE_RES_PERSISTENTVOLUMECLAIMS, pvc->meta.ns, pvc->meta.name,
			       false, KUBE_PATCH_MERGE, body, &e) != 0) {
		KLOG_I("Volume rescheduling failed for claim %s/%s: %s", pvc->meta.ns, pvc->meta.name,
		       e.message);
		return -1;
	}
	KLOG_V(2, "Volume of claim %s/%s rescheduled: selected-node annotation removed",
	       pvc->meta.ns, pvc->meta.name);
	return 0;
}

/* The created PV is not decoded: the PV informer delivers it. */
static int save_pv(struct prov_ctrl *c, const char *pv, struct kube_err *e)
{
	if (kube_create_discard(c->kc, &KUBE_RES_PERSISTENTVOLUMES, NULL, pv, e) == 0)
		return 0;
	return kube_err_is_already_exists(e) ? 0 : -1;
}

/* provisionClaimOperation + csiProvisioner.Provision. */
static enum result provision(struct prov_ctrl *c, const char *key, const struct kube_obj *o,
			     const struct kube_pvc *pvc, const struct kube_storageclass *sc)
{
	struct prep p = { 0 };
	char err[1536], uid[64];
	enum prov_state state;
	int64_t start = mono_now_ns();
	enum result res = RETRY;

	snprintf(p.cls, sizeof(p.cls), "%s", pvc->storage_class ? pvc->storage_class : "");
	if (prov_volume_name(c->o.prefix, kube_obj_uid(o, uid, sizeof(uid)), c->o.uuid_length,
			     p.name, sizeof(p.name), err, sizeof(err)) == 0) {
		struct kube_obj *pv = store_get(c->pv_inf, NULL, p.name);
		pthread_mutex_lock(&c->mu);
		bool saving = kube_hmap_has(&c->unsaved, p.name);
		pthread_mutex_unlock(&c->mu);
		if (pv || saving) {
			KLOG_V(4, "PersistentVolume %s of claim %s already exists, skipping", p.name, key);
			kube_obj_unref(pv);
			claim_done(c, key);
			return DONE;
		}
	}
	if (!streq(sc->provisioner, c->o.driver)) {
		KLOG_E("Unknown provisioner \"%s\" requested in claim %s's StorageClass",
		       sc->provisioner ? sc->provisioner : "", key);
		claim_done(c, key);
		return DONE;
	}
	bool selected = pvc->selected_node && *pvc->selected_node;
	if (selected && c->node_inf) {
		struct kube_obj *node = store_get(c->node_inf, NULL, pvc->selected_node);
		if (!node) {
			event(c, o, KUBE_EVENT_WARNING, "ProvisioningFailed",
			      "failed to get target node: node \"%s\" not found", pvc->selected_node);
			if (reschedule(c, pvc))
				return RETRY;
			claim_done(c, key);
			return DONE;
		}
		kube_obj_unref(node);
	}
	event(c, o, KUBE_EVENT_NORMAL, "Provisioning",
	      "External provisioner is provisioning volume for claim \"%s\"", key);

	if (pvc->data_source_kind && strcmp(pvc->data_source_kind, "PersistentVolumeClaim") != 0 &&
	    strcmp(pvc->data_source_kind, "VolumeSnapshot") != 0) {
		event(c, o, KUBE_EVENT_NORMAL, "Provisioning",
		      "Assuming an external populator will provision the volume");
		KLOG_V(4, "data source (%s) of claim %s is not handled by the provisioner",
		       pvc->data_source_kind, key);
		claim_done(c, key);
		return DONE;
	}
	p.a = csi_arena_new();
	if (prepare(c, pvc, sc, &p, &state, err, sizeof(err))) {
		event(c, o, KUBE_EVENT_WARNING, "ProvisioningFailed",
		      "failed to provision volume with StorageClass \"%s\": %s", p.cls, err);
		KLOG_E("Failed to provision volume for claim %s: %s", key, err);
		prov_metrics_provision(c->metrics, p.cls, p.source, false, 0);
		goto out;
	}
	Csi__V1__CreateVolumeResponse *resp = NULL;
	struct csi_status st = { 0 };
	KLOG_V(2, "CreateVolume %s for claim %s", p.name, key);
	if (csi_create_volume(c->o.csi, p.req, &resp, c->o.timeout_ns, &st) != 0) {
		bool may_reschedule = (c->topo || c->nd) && selected;
		state = prov_check_error(st.code, may_reschedule);
		grpc_error(&st, err, sizeof(err));
		event(c, o, KUBE_EVENT_WARNING, "ProvisioningFailed",
		      "failed to provision volume with StorageClass \"%s\": %s", p.cls, err);
		KLOG_E("CreateVolume %s for claim %s failed (%s): %s", p.name, key,
		       state == PROV_IN_BACKGROUND ? "may be in progress, will retry with the same name" : "final",
		       err);
		prov_metrics_provision(c->metrics, p.cls, p.source, false, 0);
		if (state == PROV_IN_BACKGROUND) {
			claim_in_progress(c, key, o);
		} else {
			claim_done(c, key);
			if (state == PROV_RESCHEDULE && selected && reschedule(c, pvc) == 0) {
				res = DONE;
				/* Node deployment: let the other nodes try first. */
				if (c->nd && c->nd->immediate_binding)
					owner_backoff(c, key);
			}
		}
		goto out;
	}
	const Csi__V1__Volume *vol = resp->volume;
	int64_t cap = vol ? vol->capacity_bytes : 0;
	if (!vol || !vol->volume_id || !*vol->volume_id) {
		snprintf(err, sizeof(err), "CreateVolume returned no volume ID");
		event(c, o, KUBE_EVENT_WARNING, "ProvisioningFailed",
		      "failed to provision volume with StorageClass \"%s\": %s", p.cls, err);
		csi_msg_free(resp);
		claim_in_progress(c, key, o);
		goto out;
	}
	if (cap == 0) {
		cap = p.requested;
	} else if (cap < p.requested || (pvc->data_source_kind && !vol->content_source)) {
		char e2[1024];
		if (cap < p.requested)
			snprintf(err, sizeof(err), "created volume capacity %lld less than requested capacity %lld",
				 (long long)cap, (long long)p.requested);
		else
			snprintf(err, sizeof(err), "volume content source missing");
		if (cleanup_volume(c, vol->volume_id, &p.secrets[PROV_SECRET_PROVISIONER], e2, sizeof(e2)))
			snprintf(err + strlen(err), sizeof(err) - strlen(err),
				 ". Cleanup of volume %s failed, volume is orphaned: %s", p.name, e2);
		event(c, o, KUBE_EVENT_WARNING, "ProvisioningFailed",
		      "failed to provision volume with StorageClass \"%s\": %s", p.cls, err);
		prov_metrics_provision(c->metrics, p.cls, p.source, false, 0);
		csi_msg_free(resp);
		claim_in_progress(c, key, o);
		goto out;
	}

	/* The PV. */
	struct kube_kv *attrs = xcalloc(vol->n_volume_context + 1, sizeof(*attrs));
	size_t na = 0;
	attrs[na++] = (struct kube_kv){ PROV_IDENTITY_KEY, c->o.identity };
	for (size_t i = 0; i < vol->n_volume_context; i++) {
		if (!strcmp(vol->volume_context[i]->key, PROV_IDENTITY_KEY))
			attrs[0].value = vol->volume_context[i]->value;
		else
			attrs[na++] = (struct kube_kv){ vol->volume_context[i]->key,
							vol->volume_context[i]->value };
	}
	struct prov_terms aff = { 0 };
	if (c->topo) {
		aff.t = xcalloc(vol->n_accessible_topology + 1, sizeof(*aff.t));
		for (size_t i = 0; i < vol->n_accessible_topology; i++) {
			const Csi__V1__Topology *t = vol->accessible_topology[i];
			struct prov_term *pt = &aff.t[aff.n++];
			pt->segs = xcalloc(t->n_segments + 1, sizeof(*pt->segs));
			for (size_t j = 0; j < t->n_segments; j++)
				pt->segs[pt->n++] = (struct kube_kv){ t->segments[j]->key, t->segments[j]->value };
		}
	}
	bool ro = false;
	if (p.req->n_volume_capabilities == 1 &&
	    p.req->volume_capabilities[0]->access_mode->mode ==
		    CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_READER_ONLY &&
	    c->o.controller_publish_readonly)
		ro = true;
	struct prov_pv_spec ps = {
		.name = p.name, .driver = c->o.driver, .volume_handle = vol->volume_id,
		.fs_type = p.fstype, .storage_class = p.cls, .attributes = attrs, .nattributes = na,
		.capacity = cap, .access_modes = pvc->access_modes, .block = pvc->block, .read_only = ro,
		.reclaim = sc->reclaim, .mount_options = sc->mount_options,
		.nmount_options = sc->nmount_options, .secrets = p.secrets, .claim_ns = pvc->meta.ns,
		.claim_name = pvc->meta.name, .claim_uid = uid, .claim_rv = pvc->meta.rv,
		.finalizer = c->o.gates.honor_pv_reclaim_policy, .affinity = &aff,
	};
	char *pvj = prov_pv_json(&ps);
	prov_terms_free(&aff);
	free(attrs);
	KLOG_V(2, "successfully created PV %s for PVC %s and csi volume name %s", p.name,
	       pvc->meta.name, vol->volume_id);

	struct kube_err e;
	if (save_pv(c, pvj, &e) == 0) {
		event(c, o, KUBE_EVENT_NORMAL, "ProvisioningSucceeded", "Successfully provisioned volume %s",
		      p.name);
		free(pvj);
	} else {
		/* The volume exists: keep the PV and retry saving it in the background. */
		KLOG_E("Failed to save volume %s of claim %s: %s", p.name, key, e.message);
		struct unsaved *u = xcalloc(1, sizeof(*u));
		u->pv = pvj;
		u->claim_key = xstrdup(key);
		u->claim = kube_obj_ref((struct kube_obj *)o);
		u->volume_id = xstrdup(vol->volume_id);
		u->cls = xstrdup(p.cls);
		u->secret = p.secrets[PROV_SECRET_PROVISIONER];
		if (kube_err_is_not_found(&e) || e.code == 400 || e.code == 403 || e.code == 422)
			u->permanent_failures = 1;
		pthread_mutex_lock(&c->mu);
		struct unsaved *old = kube_hmap_put(&c->unsaved, p.name, u);
		pthread_mutex_unlock(&c->mu);
		if (old) { /* cannot happen: checked above; keep the newest */
			free(old->pv);
			kube_obj_unref(old->claim);
			free(old->claim_key);
			free(old->volume_id);
			free(old->cls);
			free(old);
		}
		kube_workqueue_add_rate_limited(c->saveq, p.name);
	}
	csi_msg_free(resp);
	prov_metrics_provision(c->metrics, p.cls, p.source, true, mono_now_ns() - start);
	prov_cap_refresh_class(c->cap, p.cls);
	claim_done(c, key);
	res = DONE;
out:
	csi_arena_free(p.a);
	return res;
}

/* ---- node deployment: which claims this node takes ---- */

static void owner_forget(struct prov_ctrl *c, const char *key)
{
	pthread_mutex_lock(&c->mu);
	free(kube_hmap_del(&c->owners, key));
	pthread_mutex_unlock(&c->mu);
}

/* Whether name ranks before self in the claim's order (ties, if ever, by name). */
static bool ranks_before(uint64_t score, const char *name, uint64_t self, const char *node)
{
	return score < self || (score == self && strcmp(name, node) < 0);
}

static bool runs_driver(const struct prov_ctrl *c, const struct kube_obj *o)
{
	const struct kube_csinode *cn = kube_csinode_of(o);
	for (size_t j = 0; cn && j < cn->ndrivers; j++)
		if (cn->drivers[j].name && !strcmp(cn->drivers[j].name, c->o.driver))
			return true;
	return false;
}

/*
 * This node's place in the claim's order among the instances competing for immediate claims:
 * the nodes whose CSINode lists the driver and the selected nodes seen on claims, this node
 * always among them. *n is their number (1: nobody else is known). Called with c->mu held.
 */
static unsigned owner_rank(struct prov_ctrl *c, const char *uid, unsigned *n)
{
	const char *node = c->nd->node;
	uint64_t self = prov_owner_score(uid, node);
	unsigned rank = 0, k = 1;
	size_t ncn = 0;
	struct kube_obj **cns = c->csinode_inf ? kube_store_list(kube_informer_store(c->csinode_inf), &ncn) : NULL;

	for (size_t i = 0; i < ncn; i++) {
		const char *name = cns[i]->name;
		if (!name || !strcmp(name, node) || !runs_driver(c, cns[i]))
			continue;
		k++;
		rank += ranks_before(prov_owner_score(uid, name), name, self, node);
	}
	kube_objs_free(cns, ncn);
	for (size_t i = 0; i < c->seen_nodes.cap; i++) {
		const char *name = c->seen_nodes.slots[i].key;
		if (!name || !strcmp(name, node))
			continue;
		struct kube_obj *cn = store_get(c->csinode_inf, NULL, name);
		bool counted = cn && runs_driver(c, cn);
		kube_obj_unref(cn);
		if (counted)
			continue;
		k++;
		rank += ranks_before(prov_owner_score(uid, name), name, self, node);
	}
	*n = k;
	return rank;
}

static double rnd01(void)
{
	return (double)random() / ((double)RAND_MAX + 1.0);
}

/* Schedules the next try after a failed one (conflict, no room, rescheduled). */
static void owner_backoff(struct prov_ctrl *c, const char *key)
{
	pthread_mutex_lock(&c->mu);
	struct owner_try *t = kube_hmap_get(&c->owners, key);
	if (!t) {
		t = xcalloc(1, sizeof(*t));
		kube_hmap_put(&c->owners, key, t);
	}
	t->attempts++;
	int64_t d = prov_owner_delay(c->nd->base_delay_ns, c->nd->max_delay_ns, t->attempts, rnd01(),
				     0, 1);
	t->due = mono_now_ns() + d;
	t->armed = true;
	pthread_mutex_unlock(&c->mu);
	kube_workqueue_add_after(c->claimq, key, d);
}

/* upstream's checkCapacity: is there room for the claim on this node now? Errors say yes. */
static bool node_has_room(struct prov_ctrl *c, const struct kube_pvc *pvc,
			  const struct kube_storageclass *sc)
{
	if (pvc->request <= 0)
		return true;
	struct csi_arena *a = csi_arena_new();
	Csi__V1__GetCapacityRequest *req = csi_msg_new(a, &csi__v1__get_capacity_request__descriptor);
	Csi__V1__GetCapacityResponse *resp = NULL;
	struct csi_status st = { 0 };
	struct kube_kv *kv = xcalloc(sc->nparameters + 1, sizeof(*kv));
	char err[256];
	int n = prov_strip_params(sc->parameters, sc->nparameters, kv, err, sizeof(err));
	for (int i = 0; i < n; i++)
		csi_map_add(a, &req->base, "parameters", kv[i].key, kv[i].value ? kv[i].value : "");
	free(kv);
	for (unsigned b = 0; b < 4; b++) {
		if (!(pvc->access_modes & (1u << b)))
			continue;
		Csi__V1__VolumeCapability *cap = csi_msg_new(a, &csi__v1__volume_capability__descriptor);
		cap->access_mode = csi_msg_new(a, &csi__v1__volume_capability__access_mode__descriptor);
		cap->access_mode->mode = (Csi__V1__VolumeCapability__AccessMode__Mode)prov_access_mode(1u << b, c->o.cap_snmw);
		if (pvc->block) {
			cap->access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;
			cap->block = csi_msg_new(a, &csi__v1__volume_capability__block_volume__descriptor);
		} else {
			cap->access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
			cap->mount = csi_msg_new(a, &csi__v1__volume_capability__mount_volume__descriptor);
		}
		csi_repeated_add(a, &req->base, "volume_capabilities", cap);
	}
	if (c->nd->ntopology) {
		struct prov_term t = { (struct kube_kv *)c->nd->topology, c->nd->ntopology };
		req->accessible_topology = csi_topology(a, &t);
	}
	bool room = true;
	if (csi_get_capacity(c->o.csi, req, &resp, c->o.timeout_ns, &st) == 0)
		room = pvc->request <= resp->available_capacity;
	else
		KLOG_V(3, "proceeding with becoming owner of PVC %s/%s although the capacity check failed: rpc error: code = %s desc = %.300s",
		       pvc->meta.ns, pvc->meta.name, csi_code_go_name(st.code), st.message);
	csi_msg_free(resp);
	csi_arena_free(a);
	return room;
}

/*
 * upstream's becomeOwner without a sleeping worker: wait (a delayed add) until the claim's due
 * time, check room, then set the selected-node annotation to this node with the claim's
 * resourceVersion. A 409 means another instance was faster (or the claim changed): back off.
 * Success shows up as an update of the claim, which then provisions here.
 */
static enum result become_owner(struct prov_ctrl *c, const char *key, const struct kube_obj *o,
				const struct kube_pvc *pvc, const struct kube_storageclass *sc)
{
	int64_t now = mono_now_ns();
	char uid[64];

	kube_obj_uid(o, uid, sizeof(uid));
	pthread_mutex_lock(&c->mu);
	struct owner_try *t = kube_hmap_get(&c->owners, key);
	if (!t) {
		unsigned n, rank = owner_rank(c, *uid ? uid : key, &n);
		t = xcalloc(1, sizeof(*t));
		t->due = now + prov_owner_delay(c->nd->base_delay_ns, c->nd->max_delay_ns, 0, rnd01(),
						rank, n);
		kube_hmap_put(&c->owners, key, t);
	}
	int64_t wait = t->due - now;
	bool arm = wait > 0 && !t->armed;
	if (wait > 0)
		t->armed = true;
	else
		t->armed = false;
	unsigned attempts = t->attempts;
	bool stale = *t->stale_rv && pvc->meta.rv && !strcmp(t->stale_rv, pvc->meta.rv);
	pthread_mutex_unlock(&c->mu);
	if (wait > 0) {
		if (arm)
			kube_workqueue_add_after(c->claimq, key, wait);
		return LATER;
	}
	if (stale) {
		/* The last try's 409 said the claim changed (most likely: another node owns it
		 * now); the cache has not shown the change yet. Its update brings the claim back. */
		KLOG_V(5, "PVC %s: waiting for the version after %s", key, pvc->meta.rv);
		owner_backoff(c, key);
		return LATER;
	}
	KLOG_V(5, "will try to become owner of PVC %s (attempt #%u)", key, attempts);
	if (!node_has_room(c, pvc, sc)) {
		KLOG_V(5, "not enough capacity for PVC %s with resource version %s", key, pvc->meta.rv);
		owner_backoff(c, key);
		return LATER;
	}
	char body[1024];
	struct kube_err e;
	snprintf(body, sizeof(body),
		 "{\"metadata\":{\"annotations\":{\"%s\":\"%s\"},\"resourceVersion\":\"%s\"}}",
		 PROV_ANN_SELECTED_NODE, c->nd->node, pvc->meta.rv ? pvc->meta.rv : "");
	if (kube_patch_discard(c->kc, &KUBE_RES_PERSISTENTVOLUMECLAIMS, pvc->meta.ns, pvc->meta.name,
			       false, KUBE_PATCH_MERGE, body, &e) == 0) {
		KLOG_V(3, "became owner of PVC %s", key);
		/* Keep the entry (not armed, due later) so that a stale cache does not try again. */
		pthread_mutex_lock(&c->mu);
		t = kube_hmap_get(&c->owners, key);
		if (t)
			t->due = mono_now_ns() + c->nd->max_delay_ns;
		pthread_mutex_unlock(&c->mu);
		return LATER;
	}
	if (kube_err_is_conflict(&e)) {
		KLOG_V(3, "conflict during PVC %s update, will try again", key);
		pthread_mutex_lock(&c->mu);
		t = kube_hmap_get(&c->owners, key);
		if (t && pvc->meta.rv && strlen(pvc->meta.rv) < sizeof(t->stale_rv))
			strcpy(t->stale_rv, pvc->meta.rv);
		pthread_mutex_unlock(&c->mu);
	} else if (!kube_err_is_not_found(&e)) {
		KLOG_E("selecting node \"%s\" for PVC %s failed: %s", c->nd->node, key, e.message);
	}
	owner_backoff(c, key);
	return LATER;
}

/* upstream's checkNode: this node's claims provision here; others are left alone. */
static enum result node_claim(struct prov_ctrl *c, const char *key, const struct kube_obj *o,
			      const struct kube_pvc *pvc, const struct kube_storageclass *sc)
{
	const char *sel = pvc->selected_node;
	if (sel && *sel) {
		owner_forget(c, key);
		if (strcmp(sel, c->nd->node) != 0) {
			claim_done(c, key);
			return DONE; /* another node's claim */
		}
		return provision(c, key, o, pvc, sc);
	}
	if (sc->wait_for_first_consumer || !c->nd->immediate_binding) {
		claim_done(c, key);
		return DONE;
	}
	if (sc->nallowed_topologies &&
	    !kube_node_selector_match(sc->allowed_topologies, sc->nallowed_topologies, c->nd->topology,
				      (uint16_t)c->nd->ntopology)) {
		KLOG_V(5, "ignoring PVC %s, allowed topologies is not compatible with this node", key);
		claim_done(c, key);
		return DONE;
	}
	return become_owner(c, key, o, pvc, sc);
}

static enum result sync_claim(struct prov_ctrl *c, const char *key)
{
	char ns[256], name[256];
	const char *slash = strchr(key, '/');

	if (!slash)
		return DONE;
	snprintf(ns, sizeof(ns), "%.*s", (int)(slash - key), key);
	snprintf(name, sizeof(name), "%s", slash + 1);
	struct kube_obj *o = store_get(c->pvc_inf, ns, name);
	if (!o) {
		/* Deleted: only a claim whose CreateVolume may still run is worked on. */
		pthread_mutex_lock(&c->mu);
		o = kube_obj_ref(kube_hmap_get(&c->in_progress, key));
		pthread_mutex_unlock(&c->mu);
		if (!o) {
			if (c->nd)
				owner_forget(c, key);
			return DONE;
		}
		KLOG_V(2, "Claim %s was deleted while its volume may be in progress, finishing it", key);
	}
	const struct kube_pvc *pvc = kube_pvc_of(o);
	struct kube_obj *so = pvc && pvc->storage_class ? store_get(c->sc_inf, NULL, pvc->storage_class) : NULL;
	const struct kube_storageclass *sc = kube_storageclass_of(so);
	enum result r = DONE;

	switch (prov_should_provision(pvc, c->o.driver, sc)) {
	case PROV_IGNORE:
	case PROV_WAIT_FOR_NODE:
		claim_done(c, key);
		if (c->nd)
			owner_forget(c, key);
		break;
	case PROV_NO_CLASS:
		KLOG_E("Error getting claim %s's StorageClass: storageClass \"%s\" not found", key,
		       pvc->storage_class ? pvc->storage_class : "");
		event(c, o, KUBE_EVENT_WARNING, "ProvisioningFailed",
		      "storageclass.storage.k8s.io \"%s\" not found",
		      pvc->storage_class ? pvc->storage_class : "");
		prov_metrics_provision(c->metrics, pvc->storage_class ? pvc->storage_class : "",
				       pvc->data_source_kind, false, 0);
		r = RETRY;
		break;
	case PROV_PROVISION:
		r = c->nd ? node_claim(c, key, o, pvc, sc) : provision(c, key, o, pvc, sc);
		break;
	}
	kube_obj_unref(so);
	kube_obj_unref(o);
	return r;
}

/* ---- saving PVs whose volume exists ---- */

static void unsaved_free(struct unsaved *u)
{
	free(u->pv);
	kube_obj_unref(u->claim);
	free(u->claim_key);
	free(u->volume_id);
	free(u->cls);
	free(u);
}

static enum result sync_unsaved(struct prov_ctrl *c, const char *name)
{
	pthread_mutex_lock(&c->mu);
	struct unsaved *u = kube_hmap_get(&c->unsaved, name);
	pthread_mutex_unlock(&c->mu);
	struct kube_err e;
	char err[1024];

	if (!u)
		return DONE;
	if (save_pv(c, u->pv, &e) == 0) {
		event(c, u->claim, KUBE_EVENT_NORMAL, "ProvisioningSucceeded",
		      "Successfully provisioned volume %s", name);
		KLOG_I("Saved volume %s of claim %s", name, u->claim_key);
	} else {
		bool permanent = kube_err_is_not_found(&e) || e.code == 400 || e.code == 403 || e.code == 422;
		if (permanent)
			u->permanent_failures++;
		KLOG_E("Failed to save volume %s of claim %s: %s", name, u->claim_key, e.message);
		if (!permanent || u->permanent_failures < PROV_SAVE_PERMANENT_ATTEMPTS)
			return RETRY;
		/* It can never be saved: do not leak the volume. */
		event(c, u->claim, KUBE_EVENT_WARNING, "ProvisioningFailed",
		      "Error creating provisioned PV object for claim %s: %s. Deleting the volume.",
		      u->claim_key, e.message);
		if (cleanup_volume(c, u->volume_id, &u->secret, err, sizeof(err))) {
			KLOG_E("Error cleaning provisioned volume for claim %s: %s. Please delete manually.",
			       u->claim_key, err);
			event(c, u->claim, KUBE_EVENT_WARNING, "ProvisioningCleanupFailed",
			      "Error cleaning provisioned volume for claim %s: %s. Please delete manually.",
			      u->claim_key, err);
		}
		kube_workqueue_add_rate_limited(c->claimq, u->claim_key);
	}
	pthread_mutex_lock(&c->mu);
	kube_hmap_del(&c->unsaved, name);
	pthread_mutex_unlock(&c->mu);
	unsaved_free(u);
	return DONE;
}

/* ---- deleting ---- */

static int delete_secrets(struct prov_ctrl *c, const struct kube_pv *pv, struct csi_arena *a,
			  ProtobufCMessage *req)
{
	struct prov_secret_ref ref = { 0 };
	char err[1024];

	if (pv->delete_secret_name && pv->delete_secret_ns) {
		if (!*pv->delete_secret_name && !*pv->delete_secret_ns) {
			KLOG_V(2, "volume %s does not need any deletion secrets", pv->meta.name);
			return 0;
		}
		snprintf(ref.name, sizeof(ref.name), "%s", pv->delete_secret_name);
		snprintf(ref.ns, sizeof(ref.ns), "%s", pv->delete_secret_ns);
		ref.set = *ref.name && *ref.ns;
	} else if (pv->storage_class && *pv->storage_class) {
		struct kube_obj *so = store_get(c->sc_inf, NULL, pv->storage_class);
		const struct kube_storageclass *sc = kube_storageclass_of(so);
		if (!sc) {
			KLOG_W("failed to get storageclass: %s, proceeding to delete without secrets",
			       pv->storage_class);
			kube_obj_unref(so);
			return 0;
		}
		struct prov_template_ctx tc = { pv->meta.name, pv->claim_name, pv->claim_ns, NULL, 0 };
		int rc = prov_secret_ref(PROV_SECRET_PROVISIONER, sc->parameters, sc->nparameters, &tc,
					 &ref, err, sizeof(err));
		kube_obj_unref(so);
		if (rc) {
			KLOG_E("failed to get secretreference for volume %s: %s", pv->meta.name, err);
			return -1;
		}
	}
	/* A missing Secret does not block deletion (it may be gone already). */
	if (ref.set && add_secrets(c, a, req, "secrets", &ref, err, sizeof(err)))
		KLOG_E("Failed to get credentials for volume %s: %s", pv->meta.name, err);
	return 0;
}

/* shouldDelete: a Released PV with reclaim policy Delete that is ours to delete now. */
/*
 * The PV as the API server has it now, when it still needs deletion: the cache may be behind
 * (a PV this worker deleted a moment ago comes back with its last update), and deleting twice
 * would call DeleteVolume and count a deletion twice. NULL with *r set otherwise.
 */
static struct kube_obj *fresh_to_delete(struct prov_ctrl *c, const char *name, enum result *r)
{
	struct kube_err e;
	char err[256];
	json_t *j = kube_get(c->kc, &KUBE_RES_PERSISTENTVOLUMES, NULL, name, &e);
	if (!j) {
		if (kube_err_is_not_found(&e)) {
			KLOG_V(4, "persistentvolume %s no longer needs deletion, skipping", LOGQ(name));
			*r = DONE;
		} else {
			KLOG_E("error reading persistentvolume %s: %s", LOGQ(name), e.message);
			*r = RETRY;
		}
		return NULL;
	}
	struct kube_obj *o = kube_decode_json(&KUBE_KIND_PERSISTENTVOLUME, j, err, sizeof(err));
	json_decref(j);
	*r = DONE;
	if (!o) {
		KLOG_E("error decoding persistentvolume %s: %s", LOGQ(name), err);
	} else if (!should_delete(c, o)) {
		KLOG_V(4, "persistentvolume %s no longer needs deletion, skipping", LOGQ(name));
		kube_obj_unref(o);
		o = NULL;
	}
	return o;
}

static enum result sync_volume(struct prov_ctrl *c, const char *name)
{
	struct kube_obj *o = store_get(c->pv_inf, NULL, name);
	const struct kube_pv *pv = kube_pv_of(o);
	struct kube_err e;
	char err[1200];
	enum result r = DONE;

	if (!pv || (c->nd && !prov_pv_on_node(pv, c->nd->topology, c->nd->ntopology))) {
		/* Node deployment: volumes of other nodes are theirs to delete. */
		kube_obj_unref(o);
		return DONE;
	}
	/* handleProtectionFinalizer */
	enum volume_work work = volume_work(c, o);
	if (work == VOLUME_ADD_FINALIZER) {
		if (patch_finalizers(c, &KUBE_RES_PERSISTENTVOLUMES, o, NULL, PROV_PV_FINALIZER, true, &e)) {
			KLOG_E("failed to add finalizer to volume %s: %s", name, e.message);
			r = kube_err_is_conflict(&e) ? AGAIN : RETRY;
		}
		kube_obj_unref(o);
		return r; /* the update comes back through the informer */
	}
	if (work == VOLUME_REMOVE_FINALIZER) {
		if (patch_finalizers(c, &KUBE_RES_PERSISTENTVOLUMES, o, PROV_PV_FINALIZER, NULL, true, &e)) {
			KLOG_E("failed to remove finalizer from volume %s: %s", name, e.message);
			r = kube_err_is_conflict(&e) ? AGAIN : RETRY;
		}
		kube_obj_unref(o);
		return r;
	}
	if (work != VOLUME_DELETE) {
		kube_obj_unref(o);
		return DONE;
	}
	kube_obj_unref(o);
	if (!(o = fresh_to_delete(c, name, &r)))
		return r;
	pv = kube_pv_of(o);
	bool has = kube_obj_has_finalizer(o, PROV_PV_FINALIZER);
	int64_t start = mono_now_ns();
	const char *cls = pv->storage_class ? pv->storage_class : "";
	int rc = -1;
	if (!pv->driver) {
		snprintf(err, sizeof(err), "invalid CSI PV");
	} else if (!c->o.cap_controller_service || !c->o.cap_create_delete) {
		snprintf(err, sizeof(err), "CSI driver does not support dynamic provisioning: controller CREATE_DELETE_VOLUME capability is not reported");
	} else {
		struct csi_arena *a = csi_arena_new();
		Csi__V1__DeleteVolumeRequest *dr = csi_msg_new(a, &csi__v1__delete_volume_request__descriptor);
		dr->volume_id = csi_arena_strdup(a, pv->volume_handle ? pv->volume_handle : "");
		size_t nva = 0;
		struct kube_obj **vas = c->va_inf ? kube_store_by_index(kube_informer_store(c->va_inf), "pv",
									 name, &nva) : NULL;
		if (delete_secrets(c, pv, a, &dr->base)) {
			snprintf(err, sizeof(err), "failed to get secretreference for volume %s", name);
		} else if (nva) {
			snprintf(err, sizeof(err), "persistentvolume %s is still attached to node %s", name,
				 kube_va_of(vas[0])->node_name ? kube_va_of(vas[0])->node_name : "");
		} else {
			Csi__V1__DeleteVolumeResponse *resp = NULL;
			struct csi_status st = { 0 };
			KLOG_V(2, "DeleteVolume %s of PV %s", dr->volume_id, name);
			if (csi_delete_volume(c->o.csi, dr, &resp, c->o.timeout_ns, &st) == 0)
				rc = 0;
			else
				grpc_error(&st, err, sizeof(err));
			csi_msg_free(resp);
		}
		kube_objs_free(vas, nva);
		csi_arena_free(a);
	}
	if (rc) {
		KLOG_E("Volume deletion failed for PV %s: %s", name, err);
		event(c, o, KUBE_EVENT_WARNING, "VolumeFailedDelete", "%s", err);
		prov_metrics_delete(c->metrics, cls, false, 0);
		kube_obj_unref(o);
		return RETRY;
	}
	KLOG_V(4, "Volume of PV %s deleted", name);
	char uid[64];
	if (kube_delete(c->kc, &KUBE_RES_PERSISTENTVOLUMES, NULL, name, kube_obj_uid(o, uid, sizeof(uid)),
			NULL, &e) && !kube_err_is_not_found(&e)) {
		KLOG_I("Failed to delete persistentvolume %s: %s", name, e.message);
		kube_obj_unref(o);
		return RETRY;
	}
	if (c->o.gates.honor_pv_reclaim_policy && has &&
	    patch_finalizers(c, &KUBE_RES_PERSISTENTVOLUMES, o, PROV_PV_FINALIZER, NULL, false, &e) &&
	    !kube_err_is_not_found(&e)) {
		KLOG_I("Failed to remove finalizer for persistentvolume %s: %s", name, e.message);
		kube_obj_unref(o);
		return RETRY;
	}
	KLOG_V(2, "PersistentVolume %s deleted", name);
	prov_metrics_delete(c->metrics, cls, true, mono_now_ns() - start);
	prov_cap_refresh_class(c->cap, cls);
	kube_obj_unref(o);
	return DONE;
}

/* ---- cloning protection ---- */

static enum result sync_clone_source(struct prov_ctrl *c, const char *key)
{
	char ns[256], name[256];
	const char *slash = strchr(key, '/');
	struct kube_err e;

	if (!slash)
		return DONE;
	snprintf(ns, sizeof(ns), "%.*s", (int)(slash - key), key);
	snprintf(name, sizeof(name), "%s", slash + 1);
	struct kube_obj *o = store_get(c->pvc_inf, ns, name);
	if (!o || !o->deletion_ts || !kube_obj_has_finalizer(o, PROV_CLONE_FINALIZER)) {
		kube_obj_unref(o);
		return DONE;
	}
	size_t n = 0;
	struct kube_obj **all = kube_store_list(kube_informer_store(c->pvc_inf), &n);
	const char *pending = NULL;
	for (size_t i = 0; i < n && !pending; i++) {
		const struct kube_pvc *p = kube_pvc_of(all[i]);
		if (p && streq(all[i]->ns, ns) && streq(p->data_source_kind, "PersistentVolumeClaim") &&
		    streq(p->data_source_name, name) && p->phase == KUBE_PVC_PENDING)
			pending = all[i]->name;
	}
	enum result r = DONE;
	if (pending) {
		KLOG_V(3, "PVC '%s' is in 'Pending' state, cloning from %s in progress", pending, key);
		r = RETRY;
	} else if (patch_finalizers(c, &KUBE_RES_PERSISTENTVOLUMECLAIMS, o, PROV_CLONE_FINALIZER,
				    NULL, true, &e) && !kube_err_is_not_found(&e)) {
		KLOG_I("failed to remove clone finalizer from PVC %s: %s", key, e.message);
		r = kube_err_is_conflict(&e) ? AGAIN : RETRY;
	} else {
		KLOG_V(2, "Removed the cloning-protection finalizer from PVC %s", key);
	}
	kube_objs_free(all, n);
	kube_obj_unref(o);
	return r;
}

/* ---- workers ---- */

/* The queues are served (kube_workqueue_serve): threads come and go with the keys. */
static enum kube_work_result work(void *arg, const char *key)
{
	struct worker *w = arg;
	return (enum kube_work_result)w->sync(w->c, key);
}

static struct worker workers_of(struct prov_ctrl *c, int which)
{
	switch (which) {
	case 0:
		return (struct worker){ c, c->claimq, sync_claim, c->o.workers };
	case 1:
		return (struct worker){ c, c->volq, sync_volume, c->o.workers };
	case 2:
		return (struct worker){ c, c->saveq, sync_unsaved, 1 };
	default:
		return (struct worker){ c, c->cloneq, sync_clone_source,
					c->o.clone_workers > 0 ? c->o.clone_workers : 1 };
	}
}

static size_t index_va_by_pv(const struct kube_obj *o, const char **vals, size_t max)
{
	const struct kube_va *va = kube_va_of(o);
	if (!va || !va->pv_name || max < 1)
		return 0;
	vals[0] = va->pv_name;
	return 1;
}

struct prov_ctrl *prov_ctrl_new(struct kube_client *kc, const struct prov_ctrl_opts *o)
{
	struct prov_ctrl *c = xcalloc(1, sizeof(*c));
	struct kube_informer_opts io = { 0 };
	struct kube_handlers ch = { pvc_added, pvc_updated, NULL, c };
	struct kube_handlers vh = { pv_added, pv_updated, NULL, c };
	struct kube_handlers sh = { sc_changed, sc_updated, NULL, c };
	struct kube_hmap empty = KUBE_HMAP_INIT;

	c->o = *o;
	c->kc = kc;
	c->in_progress = empty;
	c->unsaved = empty;
	pthread_mutex_init(&c->mu, NULL);
	c->metrics = prov_metrics_new();

	io.resync_ns = o->resync_ns;
	io.kind = &KUBE_KIND_PERSISTENTVOLUMECLAIM;
	io.filter = pvc_filter;
	io.filter_ud = c;
	c->pvc_inf = kube_informer_new(kc, &io);
	kube_informer_add_handlers(c->pvc_inf, &ch);
	io.kind = &KUBE_KIND_PERSISTENTVOLUME;
	io.filter = pv_filter;
	c->pv_inf = kube_informer_new(kc, &io);
	kube_informer_add_handlers(c->pv_inf, &vh);
	io.filter = NULL;
	io.filter_ud = NULL;
	io.kind = &KUBE_KIND_STORAGECLASS;
	c->sc_inf = kube_informer_new(kc, &io);
	kube_informer_add_handlers(c->sc_inf, &sh);
	if (o->capacity)
		c->cap = prov_cap_new(kc, c->sc_inf, o->capacity);
	io.resync_ns = 0;
	c->nd = o->node_deployment;
	c->topo = o->cap_topology && (o->gates.topology || c->nd);
	c->owners = empty;
	c->seen_nodes = empty;
	if (c->nd && c->nd->immediate_binding) {
		/* Not for topology (a node deployment knows its own only): to count competitors. */
		io.kind = &KUBE_KIND_CSINODE_T;
		c->csinode_inf = kube_informer_new(kc, &io);
	} else if (c->topo && !c->nd) {
		io.kind = &KUBE_KIND_CSINODE_T;
		c->csinode_inf = kube_informer_new(kc, &io);
		io.kind = &KUBE_KIND_NODE_T;
		c->node_inf = kube_informer_new(kc, &io);
	}
	if (o->cap_publish) {
		/* Volumes still attached are not deleted (upstream's canDeleteVolume). */
		io.kind = &KUBE_KIND_VOLUMEATTACHMENT;
		io.filter = va_filter;
		io.filter_ud = c;
		c->va_inf = kube_informer_new(kc, &io);
		kube_informer_add_index(c->va_inf, "pv", index_va_by_pv);
	}
	struct kube_informer *all[] = { c->pvc_inf, c->pv_inf, c->sc_inf, c->csinode_inf,
					c->node_inf, c->va_inf };
	for (size_t i = 0; i < 6; i++)
		if (all[i])
			c->infs[c->ninfs++] = all[i];
	c->claimq = kube_workqueue_new("claims", o->retry_start_ns, o->retry_max_ns);
	c->volq = kube_workqueue_new("volumes", o->retry_start_ns, o->retry_max_ns);
	c->saveq = kube_workqueue_new("unsavedpvs", o->retry_start_ns, o->retry_max_ns);
	c->cloneq = kube_workqueue_new("cloning-protection", o->retry_start_ns, o->retry_max_ns);
	return c;
}

int prov_ctrl_start(struct prov_ctrl *c, char *err, size_t errlen)
{
	size_t n = c->ninfs;
	struct kube_informer **inf = c->infs;

	for (size_t i = 0; i < n; i++)
		if (kube_informer_start(inf[i])) {
			snprintf(err, errlen, "cannot start informers");
			return -1;
		}
	if (c->cap && prov_cap_start_informers(c->cap)) {
		snprintf(err, errlen, "cannot start the capacity informers");
		return -1;
	}
	KLOG_I("Starting provisioner controller %s", c->o.driver);
	for (size_t i = 0; i < n; i++)
		while (!kube_informer_wait_synced(inf[i], 10 * NSEC_PER_SEC)) {
			pthread_mutex_lock(&c->mu);
			bool stop = c->stop;
			pthread_mutex_unlock(&c->mu);
			if (stop) {
				snprintf(err, errlen, "stopped before the caches synced");
				return -1;
			}
			KLOG_I("Waiting for the informer caches to sync");
		}
	if (c->cap && prov_cap_start(c->cap, &c->stop, &c->mu, err, errlen))
		return -1;
	malloc_trim(0);
	struct kube_serve serve[4];
	for (int w = 0; w < 4; w++) {
		c->ws[w] = workers_of(c, w);
		serve[w] = (struct kube_serve){ c->ws[w].q, c->ws[w].max, work, &c->ws[w] };
	}
	if (kube_workqueue_serve(serve, 4, KUBE_WORKER_IDLE_NS, err, errlen))
		return -1;
	KLOG_I("Started provisioner controller %s", c->o.driver);
	return 0;
}

static void *stop_informer(void *arg)
{
	kube_informer_stop(arg);
	return NULL;
}

/* Workers finish their current key; informers keep running until prov_ctrl_free(). */
void prov_ctrl_stop(struct prov_ctrl *c)
{
	pthread_mutex_lock(&c->mu);
	c->stop = true;
	pthread_mutex_unlock(&c->mu);
	kube_workqueue_shutdown(c->claimq);
	kube_workqueue_shutdown(c->volq);
	kube_workqueue_shutdown(c->saveq);
	kube_workqueue_shutdown(c->cloneq);
	prov_cap_stop(c->cap);
	kube_workqueue_wait_workers(c->claimq);
	kube_workqueue_wait_workers(c->volq);
	kube_workqueue_wait_workers(c->saveq);
	kube_workqueue_wait_workers(c->cloneq);
	KLOG_I("Shutting down provisioner controller");
}

void prov_ctrl_free(struct prov_ctrl *c)
{
	if (!c)
		return;
	struct kube_informer *inf[9];
	size_t n = c->ninfs;
	memcpy(inf, c->infs, n * sizeof(*inf));
	if (c->cap)
		n += prov_cap_informers(c->cap, inf + n);
	/* Each watch notices a stop about once a second: stop them in parallel. */
	pthread_t stoppers[9];
	bool started[9] = { false };
	for (size_t i = 0; i < n; i++)
		started[i] = pthread_create(&stoppers[i], NULL, stop_informer, inf[i]) == 0;
	for (size_t i = 0; i < n; i++) {
		if (started[i])
			pthread_join(stoppers[i], NULL);
		else
			kube_informer_stop(inf[i]);
	}
	prov_cap_free(c->cap); /* after the class informer that calls it has stopped */
	for (size_t i = 0; i < c->ninfs; i++)
		kube_informer_free(c->infs[i]);
	kube_workqueue_free(c->claimq);
	kube_workqueue_free(c->volq);
	kube_workqueue_free(c->saveq);
	kube_workqueue_free(c->cloneq);
	for (size_t i = 0; i < c->in_progress.cap; i++)
		if (c->in_progress.slots[i].key)
			kube_obj_unref(c->in_progress.slots[i].value);
	kube_hmap_clear(&c->in_progress);
	for (size_t i = 0; i < c->unsaved.cap; i++)
		if (c->unsaved.slots[i].key)
			unsaved_free(c->unsaved.slots[i].value);
	kube_hmap_clear(&c->unsaved);
	for (size_t i = 0; i < c->owners.cap; i++)
		if (c->owners.slots[i].key)
			free(c->owners.slots[i].value);
	kube_hmap_clear(&c->owners);
	kube_hmap_clear(&c->seen_nodes);
	prov_metrics_free(c->metrics);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

void prov_ctrl_render_metrics(struct prov_ctrl *c, struct strbuf *out)
{
	struct kube_workqueue *qs[5] = { c->claimq, c->volq, c->saveq, c->cloneq,
					 c->cap ? prov_cap_queue(c->cap) : NULL };
	prov_metrics_render(c->metrics, out);
	if (c->cap)
		prov_cap_render_metrics(c->cap, out);
	kube_workqueue_render_metrics(qs, c->cap ? 5 : 4, out);
}
