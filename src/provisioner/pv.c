/*
 * The PersistentVolume, field for field as external-provisioner (v3.x to v6.3, with
 * sig-storage-lib-external-provisioner) writes it:
 *
 *   metadata: name, annotations {pv.kubernetes.io/provisioned-by,
 *             volume.kubernetes.io/provisioner-deletion-secret-name/-namespace ("" without a
 *             provisioner secret), volume.kubernetes.io/controller-modify-secret-name/-namespace
 *             (only with a controller-modify secret)}, finalizers [external-provisioner.volume.kubernetes.io/finalizer]
 *             (always: upstream v6.2 removed the HonorPVReclaimPolicy gate)
 *   spec: accessModes (the claim's), capacity.storage (the driver's answer, binary SI),
 *         csi {driver, volumeHandle, volumeAttributes (volume_context + the provisioner identity),
 *              fsType (not for Block, omitted when empty), the five secret references, readOnly (only when true)},
 *         mountOptions (the class's), persistentVolumeReclaimPolicy (the class's), storageClassName,
 *         volumeMode, nodeAffinity (accessible_topology, one term per topology, op In),
 *         volumeAttributesClassName (the claim's, when set),
 *         claimRef {kind, namespace, name, uid, apiVersion, resourceVersion}
 */
#include "provisioner/prov.h"

#include "kube/jw.h"
#include "kube/quantity.h"

static const char *const access_mode_names[] = { "ReadWriteOnce", "ReadOnlyMany",
						 "ReadWriteMany", "ReadWriteOncePod" };

static void secret_ref(struct jw *w, const char *field, const struct prov_secret_ref *r)
{
	jw_key(w, field);
	jw_begin_object(w);
	jw_kv_str(w, "name", r->name);
	jw_kv_str(w, "namespace", r->ns);
	jw_end_object(w);
}

static void node_affinity(struct jw *w, const struct prov_terms *aff)
{
	size_t nterms = 0;
	for (size_t i = 0; i < aff->n; i++)
		nterms += aff->t[i].n != 0;
	if (!nterms)
		return;
	jw_key(w, "nodeAffinity");
	jw_begin_object(w);
	jw_key(w, "required");
	jw_begin_object(w);
	jw_key(w, "nodeSelectorTerms");
	jw_begin_array(w);
	for (size_t i = 0; i < aff->n; i++) {
		const struct prov_term *t = &aff->t[i];
		if (t->n == 0)
			continue;
		jw_begin_object(w);
		jw_key(w, "matchExpressions");
		jw_begin_array(w);
		for (size_t j = 0; j < t->n; j++) {
			jw_begin_object(w);
			jw_kv_str(w, "key", t->segs[j].key);
			jw_kv_str(w, "operator", "In");
			jw_key(w, "values");
			jw_begin_array(w);
			jw_str(w, t->segs[j].value);
			jw_end_array(w);
			jw_end_object(w);
		}
		jw_end_array(w);
		jw_end_object(w);
	}
	jw_end_array(w);
	jw_end_object(w);
	jw_end_object(w);
}

char *prov_pv_json(const struct prov_pv_spec *s)
{
	char qty[KUBE_QUANTITY_BUFLEN];
	const struct prov_secret_ref *prov = &s->secrets[PROV_SECRET_PROVISIONER];
	struct strbuf sb = STRBUF_INIT;
	struct jw w = JW_INIT(&sb);

	strbuf_grow(&sb, 1024);
	jw_begin_object(&w);
	jw_kv_str(&w, "apiVersion", "v1");
	jw_kv_str(&w, "kind", "PersistentVolume");

	jw_key(&w, "metadata");
	jw_begin_object(&w);
	jw_kv_str(&w, "name", s->name);
	jw_key(&w, "annotations");
	jw_begin_object(&w);
	jw_kv_str(&w, PROV_ANN_DELETE_SECRET_NAME, prov->set ? prov->name : "");
	jw_kv_str(&w, PROV_ANN_DELETE_SECRET_NS, prov->set ? prov->ns : "");
	jw_kv_str(&w, PROV_ANN_PROVISIONED_BY, s->driver);
	const struct prov_secret_ref *mod = &s->secrets[PROV_SECRET_CONTROLLER_MODIFY];
	if (mod->set) { /* only when the class names one, unlike the deletion pair */
		jw_kv_str(&w, PROV_ANN_MODIFY_SECRET_NAME, mod->name);
		jw_kv_str(&w, PROV_ANN_MODIFY_SECRET_NS, mod->ns);
	}
	jw_end_object(&w);
	if (s->finalizer) {
		jw_key(&w, "finalizers");
		jw_begin_array(&w);
		jw_str(&w, PROV_PV_FINALIZER);
		jw_end_array(&w);
	}
	jw_end_object(&w);

	jw_key(&w, "spec");
	jw_begin_object(&w);
	jw_key(&w, "accessModes");
	jw_begin_array(&w);
	for (unsigned b = 0; b < 4; b++)
		if (s->access_modes & (1u << b))
			jw_str(&w, access_mode_names[b]);
	jw_end_array(&w);
	kube_quantity_format(s->capacity, true, qty, sizeof(qty));
	jw_key(&w, "capacity");
	jw_begin_object(&w);
	jw_kv_str(&w, "storage", qty);
	jw_end_object(&w);

	jw_key(&w, "csi");
	jw_begin_object(&w);
	jw_kv_str(&w, "driver", s->driver);
	jw_kv_str(&w, "volumeHandle", s->volume_handle);
	jw_key(&w, "volumeAttributes");
	jw_begin_object(&w);
	for (size_t i = 0; i < s->nattributes; i++)
		jw_kv_str(&w, s->attributes[i].key, s->attributes[i].value);
	jw_end_object(&w);
	if (!s->block && s->fs_type && *s->fs_type) /* upstream's omitempty */
		jw_kv_str(&w, "fsType", s->fs_type);
	if (s->read_only) {
		jw_key(&w, "readOnly");
		jw_bool(&w, true);
	}
	static const char *const ref_fields[PROV_SECRET_KINDS] = {
		[PROV_SECRET_CONTROLLER_PUBLISH] = "controllerPublishSecretRef",
		[PROV_SECRET_NODE_STAGE] = "nodeStageSecretRef",
		[PROV_SECRET_NODE_PUBLISH] = "nodePublishSecretRef",
		[PROV_SECRET_CONTROLLER_EXPAND] = "controllerExpandSecretRef",
		[PROV_SECRET_NODE_EXPAND] = "nodeExpandSecretRef",
	};
	for (int k = 0; k < PROV_SECRET_KINDS; k++)
		if (ref_fields[k] && s->secrets[k].set)
			secret_ref(&w, ref_fields[k], &s->secrets[k]);
	jw_end_object(&w);

	jw_kv_str(&w, "persistentVolumeReclaimPolicy", s->reclaim == 1 ? "Retain" : "Delete");
	jw_kv_str(&w, "storageClassName", s->storage_class);
	jw_kv_str(&w, "volumeMode", s->block ? "Block" : "Filesystem");
	if (s->nmount_options) {
		jw_key(&w, "mountOptions");
		jw_begin_array(&w);
		for (size_t i = 0; i < s->nmount_options; i++)
			jw_str(&w, s->mount_options[i]);
		jw_end_array(&w);
	}
	if (s->affinity)
		node_affinity(&w, s->affinity);
	if (s->vac_name && *s->vac_name)
		jw_kv_str(&w, "volumeAttributesClassName", s->vac_name);
	jw_key(&w, "claimRef");
	jw_begin_object(&w);
	jw_kv_str(&w, "kind", "PersistentVolumeClaim");
	jw_kv_str(&w, "namespace", s->claim_ns);
	jw_kv_str(&w, "name", s->claim_name);
	jw_kv_str(&w, "uid", s->claim_uid);
	jw_kv_str(&w, "apiVersion", "v1");
	jw_kv_str(&w, "resourceVersion", s->claim_rv);
	jw_end_object(&w);
	jw_end_object(&w);

	jw_end_object(&w);
	return strbuf_detach(&sb, NULL);
}
