/*
 * The PersistentVolume, field for field as external-provisioner v3.x (with
 * sig-storage-lib-external-provisioner) writes it:
 *
 *   metadata: name, annotations {pv.kubernetes.io/provisioned-by,
 *             volume.kubernetes.io/provisioner-deletion-secret-name/-namespace ("" without a
 *             provisioner secret)}, finalizers [external-provisioner.volume.kubernetes.io/finalizer]
 *             only with HonorPVReclaimPolicy
 *   spec: accessModes (the claim's), capacity.storage (the driver's answer, binary SI),
 *         csi {driver, volumeHandle, volumeAttributes (volume_context + the provisioner identity),
 *              fsType (not for Block), the five secret references, readOnly (only when true)},
 *         mountOptions (the class's), persistentVolumeReclaimPolicy (the class's), storageClassName,
 *         volumeMode, nodeAffinity (accessible_topology, one term per topology, op In),
 *         claimRef {kind, namespace, name, uid, apiVersion, resourceVersion}
 */
#include "provisioner/prov.h"

#include "kube/quantity.h"

static const char *const access_mode_names[] = { "ReadWriteOnce", "ReadOnlyMany",
						 "ReadWriteMany", "ReadWriteOncePod" };

static json_t *secret_ref(const struct prov_secret_ref *r)
{
	return json_pack("{s:s, s:s}", "name", r->name, "namespace", r->ns);
}

json_t *prov_pv_json(const struct prov_pv_spec *s)
{
	char qty[KUBE_QUANTITY_BUFLEN];
	json_t *ann = json_object(), *attrs = json_object(), *modes = json_array();
	const struct prov_secret_ref *prov = &s->secrets[PROV_SECRET_PROVISIONER];

	json_object_set_new(ann, PROV_ANN_DELETE_SECRET_NAME, json_string(prov->set ? prov->name : ""));
	json_object_set_new(ann, PROV_ANN_DELETE_SECRET_NS, json_string(prov->set ? prov->ns : ""));
	json_object_set_new(ann, PROV_ANN_PROVISIONED_BY, json_string(s->driver));
	for (size_t i = 0; i < s->nattributes; i++)
		json_object_set_new(attrs, s->attributes[i].key,
				    json_string(s->attributes[i].value ? s->attributes[i].value : ""));
	for (unsigned b = 0; b < 4; b++)
		if (s->access_modes & (1u << b))
			json_array_append_new(modes, json_string(access_mode_names[b]));
	kube_quantity_format(s->capacity, true, qty, sizeof(qty));

	json_t *csi = json_pack("{s:s, s:s, s:o}", "driver", s->driver, "volumeHandle",
				s->volume_handle, "volumeAttributes", attrs);
	if (!s->block)
		json_object_set_new(csi, "fsType", json_string(s->fs_type ? s->fs_type : ""));
	if (s->read_only)
		json_object_set_new(csi, "readOnly", json_true());
	static const char *const ref_fields[PROV_SECRET_KINDS] = {
		[PROV_SECRET_CONTROLLER_PUBLISH] = "controllerPublishSecretRef",
		[PROV_SECRET_NODE_STAGE] = "nodeStageSecretRef",
		[PROV_SECRET_NODE_PUBLISH] = "nodePublishSecretRef",
		[PROV_SECRET_CONTROLLER_EXPAND] = "controllerExpandSecretRef",
		[PROV_SECRET_NODE_EXPAND] = "nodeExpandSecretRef",
	};
	for (int k = 0; k < PROV_SECRET_KINDS; k++)
		if (ref_fields[k] && s->secrets[k].set)
			json_object_set_new(csi, ref_fields[k], secret_ref(&s->secrets[k]));

	json_t *spec = json_pack("{s:o, s:{s:s}, s:o, s:s, s:s, s:s}", "accessModes", modes,
				 "capacity", "storage", qty, "csi", csi,
				 "persistentVolumeReclaimPolicy", s->reclaim == 1 ? "Retain" : "Delete",
				 "storageClassName", s->storage_class ? s->storage_class : "",
				 "volumeMode", s->block ? "Block" : "Filesystem");
	if (s->nmount_options) {
		json_t *mo = json_array();
		for (size_t i = 0; i < s->nmount_options; i++)
			json_array_append_new(mo, json_string(s->mount_options[i]));
		json_object_set_new(spec, "mountOptions", mo);
	}
	if (s->affinity && s->affinity->n) {
		json_t *terms = json_array();
		for (size_t i = 0; i < s->affinity->n; i++) {
			const struct prov_term *t = &s->affinity->t[i];
			if (t->n == 0)
				continue;
			json_t *exprs = json_array();
			for (size_t j = 0; j < t->n; j++)
				json_array_append_new(exprs, json_pack("{s:s, s:s, s:[s]}", "key",
								       t->segs[j].key, "operator", "In",
								       "values", t->segs[j].value));
			json_array_append_new(terms, json_pack("{s:o}", "matchExpressions", exprs));
		}
		if (json_array_size(terms))
			json_object_set_new(spec, "nodeAffinity",
					    json_pack("{s:{s:o}}", "required", "nodeSelectorTerms", terms));
		else
			json_decref(terms);
	}
	json_object_set_new(spec, "claimRef",
			    json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "kind", "PersistentVolumeClaim",
				      "namespace", s->claim_ns, "name", s->claim_name, "uid",
				      s->claim_uid, "apiVersion", "v1", "resourceVersion",
				      s->claim_rv ? s->claim_rv : ""));
	json_t *meta = json_pack("{s:s, s:o}", "name", s->name, "annotations", ann);
	if (s->finalizer)
		json_object_set_new(meta, "finalizers", json_pack("[s]", PROV_PV_FINALIZER));
	return json_pack("{s:s, s:s, s:o, s:o}", "apiVersion", "v1", "kind", "PersistentVolume",
			 "metadata", meta, "spec", spec);
}
