/*
 * The modify controller's I/O (upstream's pkg/modifycontroller): a claim whose
 * spec.volumeAttributesClassName differs from status.currentVolumeAttributesClassName gets
 * ControllerModifyVolume with the class's parameters as mutable_parameters; the claim's
 * modifyVolumeStatus, its ModifyingVolume / ModifyVolumeError conditions and, on success, the
 * PV's spec.volumeAttributesClassName and the claim's current class are written.
 *
 * Two sets remember what upstream does in memory: claims whose last call ended with a non-final
 * error (uncertain: called again without a new InProgress mark) and the slow set of infeasible
 * modifications. It shares the resize controller's informers and sets' lock.
 */
#include "resizer/resizer.h"

#include "base/log.h"

#include <stdio.h>
#include <string.h>

/* ControllerModifyVolume; 0 or a gRPC code (RSZ_NOT_GRPC before the call) with error. */
static int call_modify(struct rsz_ctrl *c, const struct kube_pvc *pvc, const struct kube_pv *pv,
		       const struct kube_vac *vac, char *error, size_t errlen)
{
	struct csi_arena *a = csi_arena_new();
	struct csi_status st = { 0 };
	Csi__V1__ControllerModifyVolumeResponse *resp = NULL;
	int code = RSZ_NOT_GRPC;
	Csi__V1__ControllerModifyVolumeRequest *req =
		csi_msg_new(a, &csi__v1__controller_modify_volume_request__descriptor);

	req->volume_id = (char *)(pv->volume_handle ? pv->volume_handle : "");
	for (uint16_t i = 0; i < vac->nparameters; i++)
		csi_map_add(a, &req->base, "mutable_parameters", vac->parameters[i].key,
			    vac->parameters[i].value);
	if (c->o.extra_modify_metadata) {
		csi_map_add(a, &req->base, "mutable_parameters", RSZ_META_PVC_NAME, pvc->meta.name);
		csi_map_add(a, &req->base, "mutable_parameters", RSZ_META_PVC_NAMESPACE, pvc->meta.ns);
		csi_map_add(a, &req->base, "mutable_parameters", RSZ_META_PV_NAME, pv->meta.name);
	}
	if (pv->expand_secret_name && *pv->expand_secret_name &&
	    sidecar_add_secrets(c->kc, a, &req->base, "secrets",
				pv->expand_secret_ns ? pv->expand_secret_ns : "",
				pv->expand_secret_name, error, errlen))
		goto out;
	if (csi_controller_modify_volume(c->o.csi, req, &resp, c->o.timeout_ns, &st)) {
		code = st.code;
		snprintf(error, errlen, "rpc error: code = %s desc = %s", csi_code_go_name(st.code),
			 st.message);
	} else {
		code = 0;
		csi_msg_free(resp);
	}
out:
	csi_arena_free(a);
	return code;
}

/* markControllerModifyVolumeCompleted: the PV first, so a failure leaves the claim to retry. */
static enum kube_work_result completed(struct rsz_ctrl *c, const char *key,
				       const struct kube_pvc *pvc, const struct kube_pv *pv,
				       const struct kube_vac *vac)
{
	struct kube_err e;
	char body[600];

	snprintf(body, sizeof(body), "{\"spec\":{\"volumeAttributesClassName\":\"%s\"}}",
		 vac->meta.name);
	if (kube_patch_discard(c->kc, &KUBE_RES_PERSISTENTVOLUMES, NULL, pv->meta.name, false,
			       KUBE_PATCH_STRATEGIC, body, &e)) {
		KLOG_E("update pv.Spec.VolumeAttributesClassName for PVC %s failed, errored with: %s",
		       key, e.message);
		return KUBE_WORK_RETRY;
	}
	struct rsz_patch p = rsz_mark_modify_done(pvc, vac->meta.name);
	if (rsz_patch_claim(c, pvc, &p, &e)) {
		KLOG_E("mark PVC %s as ModifyVolumeCompleted failed, errored with: %s", key, e.message);
		return KUBE_WORK_RETRY;
	}
	rsz_set_del(c, &c->uncertain, key);
	rsz_set_del(c, &c->mslow, key);
	rsz_event(c, pvc, false, RSZ_EV_MODIFY_SUCCESS,
		  "external resizer modified volume %s with vac %s successfully ", pvc->meta.name,
		  vac->meta.name);
	return KUBE_WORK_DONE;
}

static enum kube_work_result modify_failed(struct rsz_ctrl *c, const char *key,
					   const struct kube_pvc *pvc, int code, const char *error)
{
	struct kube_err e;
	char msg[1300];

	struct rsz_patch p = rsz_mark_modify_error(pvc, error, msg, sizeof(msg));
	if (rsz_patch_claim(c, pvc, &p, &e))
		KLOG_E("mark PVC %s as modify volume failed: %s", key, e.message);
	if (!rsz_is_final(code)) {
		pthread_mutex_lock(&c->mu);
		kube_hmap_put(&c->uncertain, key, NULL);
		pthread_mutex_unlock(&c->mu);
	} else {
		if (code == 3 /* InvalidArgument: the only infeasible modification */) {
			char cmsg[1300], detail[1200];
			snprintf(detail, sizeof(detail), "%s", error);
			p = rsz_mark_modify(pvc, KUBE_MODIFY_INFEASIBLE, detail, cmsg, sizeof(cmsg));
			p.rv = NULL;
			if (rsz_patch_claim(c, pvc, &p, &e))
				KLOG_E("mark PVC %s as modify volume infeasible: %s", key, e.message);
			rsz_slow_add(c, &c->mslow, key);
		}
		rsz_set_del(c, &c->uncertain, key);
	}
	rsz_event(c, pvc, true, RSZ_EV_MODIFY_FAILED, "%s", error);
	KLOG_E("Error syncing PVC %s (modify): %s", key, error);
	return KUBE_WORK_RETRY;
}

static enum kube_work_result modify(struct rsz_ctrl *c, const char *key, const struct kube_pvc *pvc,
				    const struct kube_pv *pv, const struct kube_vac *vac)
{
	struct rsz_modify_memory mem = { .uncertain = false };
	struct kube_err e;
	char msg[300], error[1100];
	int64_t left = 0;

	if (pvc->modify_status == KUBE_MODIFY_INFEASIBLE)
		rsz_slow_add(c, &c->mslow, key); /* upstream's markForSlowRetry */
	pthread_mutex_lock(&c->mu);
	mem.uncertain = kube_hmap_has(&c->uncertain, key);
	pthread_mutex_unlock(&c->mu);
	mem.slow = rsz_slow_has(c, &c->mslow, key, &left);
	switch (rsz_plan_modify(pvc, vac != NULL, &mem)) {
	case RSZ_MODIFY_NOTHING:
		return KUBE_WORK_DONE;
	case RSZ_MODIFY_DELAY:
		KLOG_V(4, "skipping volume modification for pvc %s, because modification previously failed with infeasible error",
		       key);
		kube_workqueue_add_after(c->mq, key, left);
		return KUBE_WORK_DONE;
	case RSZ_MODIFY_PENDING: {
		KLOG_E("Get VAC with vac name %s in VACInformer cache failed: not found", pvc->vac_name);
		struct rsz_patch p = rsz_mark_modify(pvc, KUBE_MODIFY_PENDING, NULL, msg, sizeof(msg));
		bool written = pvc->modify_status == KUBE_MODIFY_PENDING &&
			       pvc->modify_target && !strcmp(pvc->modify_target, pvc->vac_name);
		if (!written && rsz_patch_claim(c, pvc, &p, &e))
			return KUBE_WORK_RETRY;
		return KUBE_WORK_DONE; /* the class's arrival requeues the claim */
	}
	case RSZ_MODIFY_START: {
		struct rsz_patch p = rsz_mark_modify(pvc, KUBE_MODIFY_IN_PROGRESS, NULL, msg, sizeof(msg));
		if (rsz_patch_claim(c, pvc, &p, &e)) {
			KLOG_E("mark PVC %s as modify volume in progress: %s", key, e.message);
			return kube_err_is_conflict(&e) ? KUBE_WORK_AGAIN : KUBE_WORK_RETRY;
		}
		rsz_event(c, pvc, false, RSZ_EV_MODIFY,
			  "external resizer is modifying volume %s with vac %s", pvc->meta.name,
			  pvc->vac_name);
		break;
	}
	case RSZ_MODIFY_CONTINUE:
		break;
	}
	int code = call_modify(c, pvc, pv, vac, error, sizeof(error));
	return code ? modify_failed(c, key, pvc, code, error) : completed(c, key, pvc, pv, vac);
}

enum kube_work_result rsz_modify_work(void *arg, const char *key)
{
	struct rsz_ctrl *c = arg;
	char ns[256];
	const char *name;
	enum kube_work_result res = KUBE_WORK_DONE;

	rsz_split_key(key, ns, sizeof(ns), &name);
	struct kube_obj *co = rsz_get(c->pvc_inf, ns, name), *vo = NULL, *ko = NULL;
	const struct kube_pvc *pvc = kube_pvc_of(co);
	if (!pvc || pvc->phase != KUBE_PVC_BOUND || !pvc->volume_name || !pvc->vac_name)
		goto out;
	vo = rsz_get(c->pv_inf, NULL, pvc->volume_name);
	const struct kube_pv *pv = kube_pv_of(vo);
	if (!pv || !pv->driver || strcmp(pv->driver, c->o.driver))
		goto out;
	ko = rsz_get(c->vac_inf, NULL, pvc->vac_name);
	res = modify(c, key, pvc, pv, kube_vac_of(ko));
out:
	kube_obj_unref(ko);
	kube_obj_unref(vo);
	kube_obj_unref(co);
	return res;
}
