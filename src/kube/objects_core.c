/*
 * Record decoders of the core/v1 and storage.k8s.io/v1 kinds kcsi reads (VolumeAttachment,
 * PersistentVolume, CSINode, Node, PersistentVolumeClaim, StorageClass, Pod, CSIDriver,
 * CSIStorageCapacity, Lease, VolumeAttributesClass), each a fields function run twice by
 * pk_decode() (objects_pack.h), and their struct kube_kind. Each decodes only the fields some
 * component reads.
 */
#include "kube/objects_pack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "kube/hmap.h"
#include "kube/quantity.h"

/* ---- VolumeAttachment ---- */

static int va_fields(struct packer *pk, const jv_t *obj, void *rec, char *err, size_t errlen)
{
	struct kube_va *va = rec;
	if (pk_meta(pk, obj, &va->meta, err, errlen))
		return -1;
	const jv_t *spec = jv_get(obj, "spec"), *st = jv_get(obj, "status");
	const jv_t *src = jv_get(spec, "source");
	va->attacher = kube_intern(pk_jstr(spec, "attacher"));
	va->node_name = kube_intern(pk_jstr(spec, "nodeName"));
	va->pv_name = pk_str(pk, pk_jstr(src, "persistentVolumeName"));
	va->inline_spec = jv_is_object(jv_get(src, "inlineVolumeSpec"));
	const jv_t *ann = jv_get(jv_get(obj, "metadata"), "annotations");
	va->node_id = pk_str(pk, pk_jstr(ann, "csi.alpha.kubernetes.io/node-id"));
	va->attached = jv_is_true(jv_get(st, "attached"));
	va->metadata = pk_map(pk, jv_get(st, "attachmentMetadata"), &va->nmetadata);
	va->attach_error = pk_str(pk, pk_jstr(jv_get(st, "attachError"), "message"));
	va->detach_error = pk_str(pk, pk_jstr(jv_get(st, "detachError"), "message"));
	return 0;
}

static struct kube_obj *va_decode(const jv_t *obj, char *err, size_t errlen)
{
	return pk_decode(obj, sizeof(struct kube_va), KUBE_KIND_VA, va_fields, err, errlen);
}

/* ---- PersistentVolume ---- */

const char *kube_access_mode_name(uint8_t mode)
{
	switch (mode) {
	case KUBE_RWO: return "ReadWriteOnce";
	case KUBE_ROX: return "ReadOnlyMany";
	case KUBE_RWX: return "ReadWriteMany";
	case KUBE_RWOP: return "ReadWriteOncePod";
	}
	return NULL;
}

static uint8_t access_mode(const char *s)
{
	if (!s) return 0;
	if (!strcmp(s, "ReadWriteOnce")) return KUBE_RWO;
	if (!strcmp(s, "ReadOnlyMany")) return KUBE_ROX;
	if (!strcmp(s, "ReadWriteMany")) return KUBE_RWX;
	if (!strcmp(s, "ReadWriteOncePod")) return KUBE_RWOP;
	return 0;
}

static uint8_t access_modes(const jv_t *arr)
{
	uint8_t m = 0;
	size_t i;
	const jv_t *v;
	jv_array_foreach(arr, i, v)
		m |= access_mode(jv_str(v));
	return m;
}

static uint8_t pv_phase(const char *s)
{
	if (!s) return KUBE_PV_PENDING;
	if (!strcmp(s, "Available")) return KUBE_PV_AVAILABLE;
	if (!strcmp(s, "Bound")) return KUBE_PV_BOUND;
	if (!strcmp(s, "Released")) return KUBE_PV_RELEASED;
	if (!strcmp(s, "Failed")) return KUBE_PV_FAILED;
	return KUBE_PV_PENDING;
}

static int pv_fields(struct packer *pk, const jv_t *obj, void *rec, char *err, size_t errlen)
{
	struct kube_pv *pv = rec;
	if (pk_meta(pk, obj, &pv->meta, err, errlen))
		return -1;
	const jv_t *spec = jv_get(obj, "spec");
	const jv_t *csi = jv_get(spec, "csi");
	pv->driver = kube_intern(pk_jstr(csi, "driver"));
	pv->volume_handle = pk_str(pk, pk_jstr(csi, "volumeHandle"));
	pv->fs_type = kube_intern(pk_jstr(csi, "fsType"));
	pv->read_only = jv_is_true(jv_get(csi, "readOnly"));
	pv->volume_attributes = pk_map(pk, jv_get(csi, "volumeAttributes"),
				       &pv->nvolume_attributes);
	const jv_t *sec = jv_get(csi, "controllerPublishSecretRef");
	pv->secret_name = kube_intern(pk_jstr(sec, "name"));
	pv->secret_ns = kube_intern(pk_jstr(sec, "namespace"));
	pv->mount_options = pk_strv(pk, jv_get(spec, "mountOptions"), false, &pv->nmount_options);
	pv->storage_class = kube_intern(pk_jstr(spec, "storageClassName"));
	const jv_t *claim = jv_get(spec, "claimRef");
	pv->claim_ns = kube_intern(pk_jstr(claim, "namespace"));
	pv->claim_name = pk_str(pk, pk_jstr(claim, "name"));
	const char *cap = pk_jstr(jv_get(spec, "capacity"), "storage");
	char qerr[128];
	int64_t bytes;
	pv->capacity = (cap && kube_quantity_parse(cap, &bytes, qerr, sizeof(qerr)) == 0) ? bytes : -1;
	pv->access_modes = access_modes(jv_get(spec, "accessModes"));
	pv->first_access_mode = access_mode(jv_str(jv_first(jv_get(spec, "accessModes"))));
	const char *mode = pk_jstr(spec, "volumeMode");
	pv->block = mode && !strcmp(mode, "Block");
	const char *rp = pk_jstr(spec, "persistentVolumeReclaimPolicy");
	pv->reclaim = !rp || !strcmp(rp, "Delete") ? 0 : !strcmp(rp, "Retain") ? 1 : 2;
	pv->phase = pv_phase(pk_jstr(jv_get(obj, "status"), "phase"));
	pv->claim_uid = pk_str(pk, pk_jstr(claim, "uid"));
	const jv_t *md = jv_get(obj, "metadata"), *ann = jv_get(md, "annotations");
	const char *bbc = pk_jstr(ann, "pv.kubernetes.io/bound-by-controller");
	pv->bound_by_controller = bbc && !strcmp(bbc, "yes");
	pv->provisioned_by = kube_intern(pk_jstr(ann, "pv.kubernetes.io/provisioned-by"));
	pv->delete_secret_name = kube_intern(pk_jstr(ann, "volume.kubernetes.io/provisioner-deletion-secret-name"));
	pv->delete_secret_ns = kube_intern(pk_jstr(ann, "volume.kubernetes.io/provisioner-deletion-secret-namespace"));
	pv->labels = pk_map(pk, jv_get(md, "labels"), &pv->nlabels);
	const jv_t *req = jv_get(jv_get(spec, "nodeAffinity"), "required");
	pv->node_affinity = pk_terms(pk, jv_get(req, "nodeSelectorTerms"), "matchExpressions",
				     &pv->nnode_affinity);
	/* kcsi-node */
	const jv_t *nss = jv_get(csi, "nodeStageSecretRef");
	pv->node_stage_secret_name = kube_intern(pk_jstr(nss, "name"));
	pv->node_stage_secret_ns = kube_intern(pk_jstr(nss, "namespace"));
	const jv_t *nps = jv_get(csi, "nodePublishSecretRef");
	pv->node_publish_secret_name = kube_intern(pk_jstr(nps, "name"));
	/* csi-resizer */
	const jv_t *ces = jv_get(csi, "controllerExpandSecretRef");
	pv->expand_secret_name = kube_intern(pk_jstr(ces, "name"));
	pv->expand_secret_ns = kube_intern(pk_jstr(ces, "namespace"));
	pv->vac_name = kube_intern(pk_jstr(spec, "volumeAttributesClassName"));
	pv->modify_secret_name = kube_intern(pk_jstr(ann, "volume.kubernetes.io/controller-modify-secret-name"));
	pv->modify_secret_ns = kube_intern(pk_jstr(ann, "volume.kubernetes.io/controller-modify-secret-namespace"));
	pv->node_publish_secret_ns = kube_intern(pk_jstr(nps, "namespace"));
	pv->pre_resize_capacity = pk_str(pk, pk_jstr(ann, "volume.alpha.kubernetes.io/pre-resize-capacity"));
	return 0;
}

static struct kube_obj *pv_decode(const jv_t *obj, char *err, size_t errlen)
{
	return pk_decode(obj, sizeof(struct kube_pv), KUBE_KIND_PV, pv_fields, err, errlen);
}

/* ---- CSINode and Node ---- */

static int csinode_fields(struct packer *pk, const jv_t *obj, void *rec, char *err, size_t errlen)
{
	struct kube_csinode *cn = rec;
	if (pk_meta(pk, obj, &cn->meta, err, errlen))
		return -1;
	const jv_t *drv = jv_get(jv_get(obj, "spec"), "drivers");
	size_t n = jv_is_array(drv) ? jv_size(drv) : 0;
	if (n > UINT16_MAX)
		n = UINT16_MAX;
	struct kube_csinode_driver *d = pk_alloc(pk, n * sizeof(*d), sizeof(char *));
	const jv_t *e = jv_first(drv);
	for (size_t i = 0; i < n; i++, e = jv_next(e)) {
		/* The API server requires both; an object that lacks one is refused whole (the
		 * informer logs and skips it) rather than cached with a NULL its readers trip on. */
		if (!pk_jstr(e, "name") || !*pk_jstr(e, "name") || !pk_jstr(e, "nodeID")) {
			snprintf(err, errlen, "CSINode %s: spec.drivers[%zu] has no %s",
				 cn->meta.name, i, pk_jstr(e, "name") && *pk_jstr(e, "name") ? "nodeID" : "name");
			return -1;
		}
		const char *name = kube_intern(pk_jstr(e, "name"));
		const char *id = pk_str(pk, pk_jstr(e, "nodeID"));
		const jv_t *tk = jv_get(e, "topologyKeys");
		size_t nk = jv_is_array(tk) ? jv_size(tk) : 0;
		if (nk > UINT16_MAX)
			nk = UINT16_MAX;
		const char **keys = pk_alloc(pk, nk * sizeof(char *), sizeof(char *));
		const jv_t *ke = jv_first(tk);
		for (size_t k = 0; k < nk; k++, ke = jv_next(ke)) {
			const char *key = kube_intern(jv_str(ke));
			if (keys)
				keys[k] = key ? key : kube_intern("");
		}
		const jv_t *cnt = jv_get(jv_get(e, "allocatable"), "count");
		if (d) {
			d[i].name = name;
			d[i].node_id = id;
			d[i].topology_keys = keys;
			d[i].ntopology_keys = (uint16_t)nk;
			d[i].allocatable = jv_is_integer(cnt) ? (int32_t)jv_int(cnt) : -1;
		}
	}
	cn->drivers = d;
	cn->ndrivers = (uint16_t)n;
	return 0;
}

static struct kube_obj *csinode_decode(const jv_t *obj, char *err, size_t errlen)
{
	return pk_decode(obj, sizeof(struct kube_csinode), KUBE_KIND_CSINODE, csinode_fields, err, errlen);
}

/* An entry of Node.spec.taints, every field kept (nodelifecycle writes the list back whole). */
static void pk_taint(struct packer *pk, const jv_t *e, void *out)
{
	*(struct kube_taint *)out = (struct kube_taint){
		kube_intern(pk_jstr(e, "key") ? pk_jstr(e, "key") : ""),
		kube_intern(pk_jstr(e, "value") ? pk_jstr(e, "value") : ""),
		kube_intern(pk_jstr(e, "effect") ? pk_jstr(e, "effect") : ""),
		pk_str(pk, pk_jstr(e, "timeAdded")),
	};
}

/* An entry of Node.status.conditions, every field kept (nodelifecycle writes the list back). */
static void pk_condition(struct packer *pk, const jv_t *e, void *out)
{
	*(struct kube_node_condition *)out = (struct kube_node_condition){
		.type = kube_intern(pk_jstr(e, "type") ? pk_jstr(e, "type") : ""),
		.status = kube_intern(pk_jstr(e, "status") ? pk_jstr(e, "status") : ""),
		.reason = pk_str(pk, pk_jstr(e, "reason")),
		.message = pk_str(pk, pk_jstr(e, "message")),
		.heartbeat = pk_str(pk, pk_jstr(e, "lastHeartbeatTime")),
		.transition = pk_str(pk, pk_jstr(e, "lastTransitionTime")),
	};
}

/* An entry of Pod.spec.tolerations (volume-scheduler's TaintToleration rule, taint eviction). */
static void pk_toleration(struct packer *pk, const jv_t *e, void *out)
{
	const jv_t *secs = jv_get(e, "tolerationSeconds");
	(void)pk;
	*(struct kube_toleration *)out = (struct kube_toleration){
		kube_intern(pk_jstr(e, "key")), kube_intern(pk_jstr(e, "operator")),
		kube_intern(pk_jstr(e, "value")), kube_intern(pk_jstr(e, "effect")),
		jv_is_integer(secs), jv_is_integer(secs) ? jv_int(secs) : 0,
	};
}

/* Whether a status list has a container neither terminated nor waiting (upstream's notRunning). */
static bool any_running(const jv_t *statuses)
{
	size_t i;
	const jv_t *e;
	jv_array_foreach(statuses, i, e) {
		const jv_t *state = jv_get(e, "state");
		if (!jv_get(state, "terminated") && !jv_get(state, "waiting"))
			return true;
	}
	return false;
}

static int node_fields(struct packer *pk, const jv_t *obj, void *rec, char *err, size_t errlen)
{
	struct kube_node *n = rec;
	if (pk_meta(pk, obj, &n->meta, err, errlen))
		return -1;
	const jv_t *ann = jv_get(jv_get(obj, "metadata"), "annotations");
	n->csi_node_ids = pk_str(pk, pk_jstr(ann, "csi.volume.kubernetes.io/nodeid"));
	const jv_t *labels = jv_get(jv_get(obj, "metadata"), "labels");
	size_t cnt = jv_is_object(labels) ? jv_size(labels) : 0;
	if (cnt > UINT16_MAX)
		cnt = UINT16_MAX;
	struct kube_kv *kv = pk_alloc(pk, cnt * sizeof(*kv), sizeof(char *));
	size_t i = 0;
	const char *k;
	const jv_t *v;
	jv_object_foreach(labels, k, v) {
		if (i >= cnt)
			break;
		const char *ks = kube_intern(k);
		const char *vs = kube_intern(jv_is_string(v) ? jv_str(v) : "");
		if (kv) {
			kv[i].key = ks;
			kv[i].value = vs;
		}
		i++;
	}
	n->labels = kv;
	n->nlabels = (uint16_t)cnt;
	const char *cm = pk_jstr(ann, "volumes.kubernetes.io/controller-managed-attach-detach");
	n->controller_managed = cm && !strcmp(cm, "true");
	const jv_t *spec = jv_get(obj, "spec"), *st = jv_get(obj, "status");
	n->unschedulable = jv_is_true(jv_get(spec, "unschedulable"));
	n->allocatable_pods = pk_quantity(jv_get(st, "allocatable"), "pods");
	size_t i2;
	const jv_t *e;
	jv_array_foreach(jv_get(spec, "taints"), i2, e) {
		const char *key = pk_jstr(e, "key");
		if (key && !strcmp(key, "node.kubernetes.io/out-of-service"))
			n->out_of_service = true;
	}
	n->ready = KUBE_COND_UNKNOWN;
	jv_array_foreach(jv_get(st, "conditions"), i2, e) {
		const char *type = pk_jstr(e, "type"), *cs = pk_jstr(e, "status");
		if (type && cs && !strcmp(type, "Ready"))
			n->ready = !strcmp(cs, "True") ? KUBE_COND_TRUE
				   : !strcmp(cs, "False") ? KUBE_COND_FALSE : KUBE_COND_UNKNOWN;
	}
	const jv_t *va = jv_get(st, "volumesAttached");
	size_t nva = jv_is_array(va) ? jv_size(va) : 0;
	if (nva > UINT16_MAX)
		nva = UINT16_MAX;
	struct kube_attached_volume *av = pk_alloc(pk, nva * sizeof(*av), sizeof(char *));
	const jv_t *ent = jv_first(va);
	for (size_t k = 0; k < nva; k++, ent = jv_next(ent)) {
		const char *vn = pk_str(pk, pk_jstr(ent, "name") ? pk_jstr(ent, "name") : "");
		const char *dp = pk_str(pk, pk_jstr(ent, "devicePath") ? pk_jstr(ent, "devicePath") : "");
		if (av) {
			av[k].name = vn;
			av[k].device_path = dp;
		}
	}
	n->volumes_attached = av;
	n->nvolumes_attached = (uint16_t)nva;
	n->volumes_in_use = pk_strv(pk, jv_get(st, "volumesInUse"), false, &n->nvolumes_in_use);
	n->created = pk_str(pk, pk_jstr(jv_get(obj, "metadata"), "creationTimestamp"));
	n->taints = pk_array(pk, jv_get(spec, "taints"), sizeof(struct kube_taint), pk_taint,
			     &n->ntaints);
	n->conditions = pk_array(pk, jv_get(st, "conditions"), sizeof(struct kube_node_condition),
				 pk_condition, &n->nconditions);
	return 0;
}

static struct kube_obj *node_decode(const jv_t *obj, char *err, size_t errlen)
{
	return pk_decode(obj, sizeof(struct kube_node), KUBE_KIND_NODE, node_fields, err, errlen);
}

/* ---- PersistentVolumeClaim and StorageClass ---- */

/* What csi-resizer reads: allocated size and its status, resize and modify conditions, classes. */
static void pvc_resize_fields(struct kube_pvc *pvc, const jv_t *spec, const jv_t *st,
			      const jv_t *ann)
{
	static const char *const resize[] = { "", "ControllerResizeInProgress",
		"ControllerResizeInfeasible", "NodeResizePending", "NodeResizeInProgress",
		"NodeResizeInfeasible" };
	static const char *const conds[] = { "Resizing", "FileSystemResizePending",
		"ControllerResizeError", "NodeResizeError", "ModifyingVolume", "ModifyVolumeError" };
	static const char *const modify[] = { "", "Pending", "InProgress", "Infeasible" };
	pvc->allocated = pk_quantity(jv_get(st, "allocatedResources"), "storage");
	pvc->resize_status = pk_word(pk_jstr(jv_get(st, "allocatedResourceStatuses"), "storage"),
					resize, 6, KUBE_RESIZE_NONE);
	size_t i;
	const jv_t *c;
	pvc->conds = 0; /* the record's second pass writes into memory that is not zeroed */
	pvc->other_conds = false;
	jv_array_foreach(jv_get(st, "conditions"), i, c) {
		const char *type = pk_jstr(c, "type"), *cs = pk_jstr(c, "status");
		if (!type || (strcmp(type, conds[4]) && strcmp(type, conds[5])))
			pvc->other_conds = true;
		for (size_t k = 0; type && cs && !strcmp(cs, "True") && k < 6; k++)
			if (!strcmp(type, conds[k]))
				pvc->conds |= (uint8_t)(1u << k);
	}
	pvc->resizer = kube_intern(pk_jstr(ann, "volume.kubernetes.io/storage-resizer"));
	pvc->vac_name = kube_intern(pk_jstr(spec, "volumeAttributesClassName"));
	pvc->current_vac = kube_intern(pk_jstr(st, "currentVolumeAttributesClassName"));
	const jv_t *mvs = jv_get(st, "modifyVolumeStatus");
	const char *ms = pk_jstr(mvs, "status");
	pvc->modify_status = !jv_is_object(mvs) ? KUBE_MODIFY_NONE
			     : ms ? pk_word(ms, modify, 4, KUBE_MODIFY_OTHER) : KUBE_MODIFY_OTHER;
	pvc->modify_target = kube_intern(pk_jstr(mvs, "targetVolumeAttributesClassName"));
}

static int pvc_fields(struct packer *pk, const jv_t *obj, void *rec, char *err, size_t errlen)
{
	struct kube_pvc *pvc = rec;
	if (pk_meta(pk, obj, &pvc->meta, err, errlen))
		return -1;
	const jv_t *spec = jv_get(obj, "spec");
	const jv_t *ann = jv_get(jv_get(obj, "metadata"), "annotations");
	pvc->storage_class = kube_intern(pk_jstr(spec, "storageClassName"));
	pvc->volume_name = pk_str(pk, pk_jstr(spec, "volumeName"));
	const char *prov = pk_jstr(ann, "volume.kubernetes.io/storage-provisioner");
	pvc->provisioner = kube_intern(prov ? prov : pk_jstr(ann, "volume.beta.kubernetes.io/storage-provisioner"));
	pvc->selected_node = kube_intern(pk_jstr(ann, "volume.kubernetes.io/selected-node"));
	const jv_t *ds = jv_get(spec, "dataSource");
	pvc->data_source_kind = kube_intern(pk_jstr(ds, "kind"));
	pvc->data_source_group = kube_intern(pk_jstr(ds, "apiGroup"));
	pvc->data_source_name = pk_str(pk, pk_jstr(ds, "name"));
	const jv_t *res = jv_get(spec, "resources");
	pvc->request = pk_quantity(jv_get(res, "requests"), "storage");
	pvc->limit = pk_quantity(jv_get(res, "limits"), "storage");
	const jv_t *st = jv_get(obj, "status");
	pvc->capacity = pk_quantity(jv_get(st, "capacity"), "storage");
	pvc->access_modes = access_modes(jv_get(spec, "accessModes"));
	const char *mode = pk_jstr(spec, "volumeMode");
	pvc->block = mode && !strcmp(mode, "Block");
	pvc->has_selector = jv_is_object(jv_get(spec, "selector"));
	const char *ph = pk_jstr(st, "phase");
	pvc->phase = ph && !strcmp(ph, "Bound") ? KUBE_PVC_BOUND
		     : ph && !strcmp(ph, "Lost") ? KUBE_PVC_LOST : KUBE_PVC_PENDING;
	/* kcsi-controller-manager */
	pvc->bind_completed = jv_get(ann, "pv.kubernetes.io/bind-completed") != NULL;
	pvc->bound_by_controller = jv_get(ann, "pv.kubernetes.io/bound-by-controller") != NULL;
	if (pvc->has_selector) {
		char sel[1024];
		pk_selector_text(jv_get(spec, "selector"), sel, sizeof(sel));
		pvc->selector = pk_str(pk, sel);
	}
	pvc->labels = pk_map(pk, jv_get(jv_get(obj, "metadata"), "labels"), &pvc->nlabels);
	pvc_resize_fields(pvc, spec, st, ann);
	return 0;
}

static struct kube_obj *pvc_decode(const jv_t *obj, char *err, size_t errlen)
{
	return pk_decode(obj, sizeof(struct kube_pvc), KUBE_KIND_PVC, pvc_fields, err, errlen);
}

static int sc_fields(struct packer *pk, const jv_t *obj, void *rec, char *err, size_t errlen)
{
	struct kube_storageclass *sc = rec;
	if (pk_meta(pk, obj, &sc->meta, err, errlen))
		return -1;
	sc->provisioner = kube_intern(pk_jstr(obj, "provisioner"));
	sc->parameters = pk_map(pk, jv_get(obj, "parameters"), &sc->nparameters);
	sc->mount_options = pk_strv(pk, jv_get(obj, "mountOptions"), false, &sc->nmount_options);
	const char *rp = pk_jstr(obj, "reclaimPolicy");
	sc->reclaim = rp && !strcmp(rp, "Retain") ? 1 : 0;
	const char *bm = pk_jstr(obj, "volumeBindingMode");
	sc->wait_for_first_consumer = bm && !strcmp(bm, "WaitForFirstConsumer");
	sc->allow_expansion = jv_is_true(jv_get(obj, "allowVolumeExpansion"));
	const jv_t *ann = jv_get(jv_get(obj, "metadata"), "annotations");
	const char *def = pk_jstr(ann, "storageclass.kubernetes.io/is-default-class");
	sc->is_default = def && !strcmp(def, "true");
	sc->allowed_topologies = pk_terms(pk, jv_get(obj, "allowedTopologies"),
					  "matchLabelExpressions", &sc->nallowed_topologies);
	return 0;
}

static struct kube_obj *sc_decode(const jv_t *obj, char *err, size_t errlen)
{
	return pk_decode(obj, sizeof(struct kube_storageclass), KUBE_KIND_SC, sc_fields, err, errlen);
}

/* ---- Pod and CSIDriver ---- */

uint32_t kube_pod_cond_hash(const char *reason, const char *message)
{
	return kube_hash_str(reason ? reason : "") * 31u + kube_hash_str(message ? message : "");
}

static uint8_t pod_phase(const char *s)
{
	if (!s || !strcmp(s, "Pending")) return KUBE_POD_PENDING;
	if (!strcmp(s, "Running")) return KUBE_POD_RUNNING;
	if (!strcmp(s, "Succeeded")) return KUBE_POD_SUCCEEDED;
	if (!strcmp(s, "Failed")) return KUBE_POD_FAILED;
	return KUBE_POD_UNKNOWN;
}

/* True when a container or init container of the pod names volume `name` in volumeDevices. */
static bool pod_uses_as_device(const jv_t *spec, const char *name)
{
	static const char *lists[] = { "containers", "initContainers" };
	for (size_t l = 0; l < 2; l++) {
		size_t i, k;
		const jv_t *c, *d;
		jv_array_foreach(jv_get(spec, lists[l]), i, c) {
			jv_array_foreach(jv_get(c, "volumeDevices"), k, d) {
				const char *dn = pk_jstr(d, "name");
				if (dn && !strcmp(dn, name))
					return true;
			}
		}
	}
	return false;
}

static int pod_fields(struct packer *pk, const jv_t *obj, void *rec, char *err, size_t errlen)
{
	struct kube_pod *p = rec;
	if (pk_meta(pk, obj, &p->meta, err, errlen))
		return -1;
	const jv_t *spec = jv_get(obj, "spec"), *st = jv_get(obj, "status");
	const jv_t *md = jv_get(obj, "metadata");
	p->node_name = kube_intern(pk_jstr(spec, "nodeName"));
	p->scheduler_name = kube_intern(pk_jstr(spec, "schedulerName"));
	p->service_account = kube_intern(pk_jstr(spec, "serviceAccountName"));
	p->labels = pk_map(pk, jv_get(md, "labels"), &p->nlabels);
	p->node_selector = pk_map(pk, jv_get(spec, "nodeSelector"), &p->nnode_selector);
	p->phase = pod_phase(pk_jstr(st, "phase"));
	size_t i;
	const jv_t *e;
	jv_array_foreach(jv_get(st, "conditions"), i, e) {
		const char *type = pk_jstr(e, "type"), *cs = pk_jstr(e, "status");
		if (type && cs && !strcmp(type, "Ready"))
			p->ready = !strcmp(cs, "True");
		if (type && !strcmp(type, "PodScheduled")) {
			p->scheduled = !cs ? KUBE_POD_SCHED_OTHER
				       : !strcmp(cs, "True") ? KUBE_POD_SCHED_TRUE
				       : !strcmp(cs, "False") ? KUBE_POD_SCHED_FALSE : KUBE_POD_SCHED_OTHER;
			p->scheduled_hash = kube_pod_cond_hash(pk_jstr(e, "reason"), pk_jstr(e, "message"));
		}
	}
	const char *pp = pk_jstr(spec, "preemptionPolicy");
	p->preempt_never = pp && !strcmp(pp, "Never");
	p->running = any_running(jv_get(st, "initContainerStatuses")) ||
		     any_running(jv_get(st, "containerStatuses")) ||
		     any_running(jv_get(st, "ephemeralContainerStatuses"));
	/* Two passes over spec.volumes: count the kept ones, then pack them. */
	const jv_t *vols = jv_get(spec, "volumes");
	size_t n = 0;
	jv_array_foreach(vols, i, e) {
		if (!pk_jstr(e, "name"))
			continue;
		if (jv_is_object(jv_get(e, "persistentVolumeClaim")) ||
		    jv_is_object(jv_get(e, "ephemeral")) ||
		    jv_is_object(jv_get(e, "csi")))
			n++;
	}
	if (n > UINT16_MAX)
		n = UINT16_MAX;
	struct kube_pod_volume *pv = pk_alloc(pk, n * sizeof(*pv), sizeof(char *));
	size_t k = 0;
	jv_array_foreach(vols, i, e) {
		const char *vname = pk_jstr(e, "name");
		const jv_t *claim = jv_get(e, "persistentVolumeClaim");
		const jv_t *eph = jv_get(e, "ephemeral"), *csi = jv_get(e, "csi");
		if (k >= n || !vname || (!jv_is_object(claim) && !jv_is_object(eph) && !jv_is_object(csi)))
			continue;
		struct kube_pod_volume v = { 0 };
		v.name = pk_str(pk, vname);
		if (jv_is_object(claim)) {
			const char *cn = pk_jstr(claim, "claimName");
			v.claim_name = pk_str(pk, cn ? cn : "");
			v.read_only = jv_is_true(jv_get(claim, "readOnly"));
		} else if (jv_is_object(eph)) {
			/* The ephemeral volume controller names the claim "<pod>-<volume>". */
			char cn[512];
			snprintf(cn, sizeof(cn), "%s-%s", pk_jstr(md, "name"), vname);
			v.claim_name = pk_str(pk, cn);
			v.ephemeral = true;
		} else {
			v.csi_driver = kube_intern(pk_jstr(csi, "driver") ? pk_jstr(csi, "driver") : "");
			v.csi_fs_type = kube_intern(pk_jstr(csi, "fsType"));
			v.read_only = jv_is_true(jv_get(csi, "readOnly"));
			v.csi_attributes = pk_map(pk, jv_get(csi, "volumeAttributes"), &v.ncsi_attributes);
			v.csi_secret_name = pk_str(pk, pk_jstr(jv_get(csi, "nodePublishSecretRef"), "name"));
		}
		v.block = pod_uses_as_device(spec, vname);
		if (pv)
			pv[k] = v;
		k++;
	}
	p->volumes = pv;
	p->nvolumes = (uint16_t)n;
	p->tolerations = pk_array(pk, jv_get(spec, "tolerations"), sizeof(struct kube_toleration),
				  pk_toleration, &p->ntolerations);
	return 0;
}

static struct kube_obj *pod_decode(const jv_t *obj, char *err, size_t errlen)
{
	return pk_decode(obj, sizeof(struct kube_pod), KUBE_KIND_POD, pod_fields, err, errlen);
}

static int csidriver_fields(struct packer *pk, const jv_t *obj, void *rec, char *err, size_t errlen)
{
	struct kube_csidriver *d = rec;
	if (pk_meta(pk, obj, &d->meta, err, errlen))
		return -1;
	const jv_t *spec = jv_get(obj, "spec");
	const jv_t *ar = jv_get(spec, "attachRequired");
	d->attach_required = !jv_is_boolean(ar) || jv_is_true(ar);
	d->pod_info_on_mount = jv_is_true(jv_get(spec, "podInfoOnMount"));
	d->storage_capacity = jv_is_true(jv_get(spec, "storageCapacity"));
	d->requires_republish = jv_is_true(jv_get(spec, "requiresRepublish"));
	d->fs_group_policy = kube_intern(pk_jstr(spec, "fsGroupPolicy"));
	const jv_t *modes = jv_get(spec, "volumeLifecycleModes");
	d->persistent = !jv_is_array(modes) || jv_size(modes) == 0;
	size_t i;
	const jv_t *m;
	jv_array_foreach(modes, i, m) {
		const char *s = jv_str(m);
		if (s && !strcmp(s, "Persistent"))
			d->persistent = true;
		if (s && !strcmp(s, "Ephemeral"))
			d->ephemeral = true;
	}
	return 0;
}

static struct kube_obj *csidriver_decode(const jv_t *obj, char *err, size_t errlen)
{
	return pk_decode(obj, sizeof(struct kube_csidriver), KUBE_KIND_CSIDRIVER, csidriver_fields, err,
		       errlen);
}

/* ---- CSIStorageCapacity ---- */

static int csisc_fields(struct packer *pk, const jv_t *obj, void *rec, char *err, size_t errlen)
{
	struct kube_csisc *c = rec;
	if (pk_meta(pk, obj, &c->meta, err, errlen))
		return -1;
	const jv_t *md = jv_get(obj, "metadata");
	const jv_t *labels = jv_get(md, "labels");
	c->storage_class = kube_intern(pk_jstr(obj, "storageClassName"));
	c->driver_label = kube_intern(pk_jstr(labels, "csi.storage.k8s.io/drivername"));
	c->managed_by = kube_intern(pk_jstr(labels, "csi.storage.k8s.io/managed-by"));
	size_t i;
	const jv_t *ref;
	c->controller_uid = NULL;
	jv_array_foreach(jv_get(md, "ownerReferences"), i, ref)
		if (jv_is_true(jv_get(ref, "controller")) && pk_jstr(ref, "uid")) {
			c->controller_uid = pk_str(pk, pk_jstr(ref, "uid"));
			break;
		}
	const jv_t *topo = jv_get(obj, "nodeTopology");
	c->topology = pk_map(pk, jv_get(topo, "matchLabels"), &c->ntopology);
	const jv_t *exprs = jv_get(topo, "matchExpressions");
	c->topology_expressions = jv_is_array(exprs) && jv_size(exprs) > 0;
	c->capacity = pk_quantity(obj, "capacity");
	c->max_volume_size = pk_quantity(obj, "maximumVolumeSize");
	return 0;
}

static struct kube_obj *csisc_decode(const jv_t *obj, char *err, size_t errlen)
{
	return pk_decode(obj, sizeof(struct kube_csisc), KUBE_KIND_CSISC, csisc_fields, err, errlen);
}

/* ---- Lease ---- */

static int lease_fields(struct packer *pk, const jv_t *obj, void *rec, char *err, size_t errlen)
{
	struct kube_lease *l = rec;
	if (pk_meta(pk, obj, &l->meta, err, errlen))
		return -1;
	const jv_t *spec = jv_get(obj, "spec");
	l->holder = pk_str(pk, pk_jstr(spec, "holderIdentity"));
	l->renew_time = pk_str(pk, pk_jstr(spec, "renewTime"));
	return 0;
}

static struct kube_obj *lease_decode(const jv_t *obj, char *err, size_t errlen)
{
	return pk_decode(obj, sizeof(struct kube_lease), KUBE_KIND_LEASE, lease_fields, err, errlen);
}

/* ---- VolumeAttributesClass ---- */

static int vac_fields(struct packer *pk, const jv_t *obj, void *rec, char *err, size_t errlen)
{
	struct kube_vac *v = rec;
	if (pk_meta(pk, obj, &v->meta, err, errlen))
		return -1;
	v->driver_name = kube_intern(pk_jstr(obj, "driverName"));
	v->parameters = pk_map(pk, jv_get(obj, "parameters"), &v->nparameters);
	return 0;
}

static struct kube_obj *vac_decode(const jv_t *obj, char *err, size_t errlen)
{
	return pk_decode(obj, sizeof(struct kube_vac), KUBE_KIND_VAC, vac_fields, err, errlen);
}

const struct kube_kind KUBE_KIND_VOLUMEATTACHMENT = { "VolumeAttachment", &KUBE_RES_VOLUMEATTACHMENTS, va_decode };
const struct kube_kind KUBE_KIND_PERSISTENTVOLUME = { "PersistentVolume", &KUBE_RES_PERSISTENTVOLUMES, pv_decode };
const struct kube_kind KUBE_KIND_CSINODE_T = { "CSINode", &KUBE_RES_CSINODES, csinode_decode };
const struct kube_kind KUBE_KIND_NODE_T = { "Node", &KUBE_RES_NODES, node_decode };
const struct kube_kind KUBE_KIND_PERSISTENTVOLUMECLAIM = { "PersistentVolumeClaim", &KUBE_RES_PERSISTENTVOLUMECLAIMS, pvc_decode };
const struct kube_kind KUBE_KIND_STORAGECLASS = { "StorageClass", &KUBE_RES_STORAGECLASSES, sc_decode };
const struct kube_kind KUBE_KIND_POD_T = { "Pod", &KUBE_RES_PODS, pod_decode };
const struct kube_kind KUBE_KIND_CSIDRIVER_T = { "CSIDriver", &KUBE_RES_CSIDRIVERS, csidriver_decode };
const struct kube_kind KUBE_KIND_CSISTORAGECAPACITY = { "CSIStorageCapacity", &KUBE_RES_CSISTORAGECAPACITIES, csisc_decode };
const struct kube_kind KUBE_KIND_LEASE_T = { "Lease", &KUBE_RES_LEASES, lease_decode };
const struct kube_kind KUBE_KIND_VOLUMEATTRIBUTESCLASS = { "VolumeAttributesClass", &KUBE_RES_VOLUMEATTRIBUTESCLASSES, vac_decode };
