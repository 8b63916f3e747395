/*
 * The modify controller's I/O (upstream v2.x's pkg/modifycontroller): a claim whose
 * spec.volumeAttributesClassName differs from status.currentVolumeAttributesClassName, or whose
 * modifyVolumeStatus is set, gets ControllerModifyVolume with the class's parameters as
 * mutable_parameters; the claim's modifyVolumeStatus, its ModifyingVolume / ModifyVolumeError
 * conditions and, on success, the PV's spec.volumeAttributesClassName and the claim's current
 * class are written. decide.c's rsz_plan_modify says which step a claim is at.
 *
 * Two sets remember what upstream keeps in memory: claims whose last call ended with a non-final
 * error (uncertain: called again for the same target, without a new InProgress mark, whatever
 * the spec says now) and the slow set of infeasible modifications (a claim whose status still
 * targets the spec's class waits --retry-interval-max; a new class in the spec goes at once).
 * Claims InProgress when the controller starts are uncertain (rsz_modify_init). It shares the
 * resize controller's informers and the sets' lock.
 */
#include "resizer/resizer.h"

#include "base/log.h"

#include <stdio.h>
#include <string.h>

/* ControllerModifyVolume; 0 or a gRPC code (RSZ_NOT_GRPC before the call) with error (as Go
 * prints a status error) and desc (the driver's message alone). */
static int call_modify(struct rsz_ctrl *c, const struct kube_pvc *pvc, const struct kube_pv *pv,
		       const struct kube_vac *vac, char *error, size_t errlen, char *desc,
		       size_t desclen)
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
	/* The modify secret the provisioner recorded in the PV's annotations, else the expand
	 * secret (upstream's getModifyCredentials). */
	const char *sname = pv->modify_secret_name, *sns = pv->modify_secret_ns;
	if (!sname || !*sname || !sns || !*sns) {
		sname = pv->expand_secret_name;
		sns = pv->expand_secret_ns ? pv->expand_secret_ns : "";
	}
	if (sname && *sname &&
	    sidecar_add_secrets(c->kc, a, &req->base, "secrets", sns, sname, error, errlen))
		goto out;
	if (csi_controller_modify_volume(c->o.csi, req, &resp, c->o.modify_timeout_ns, &st)) {
		code = st.code;
		snprintf(desc, desclen, "%s", st.message);
		snprintf(error, errlen, "rpc error: code = %s desc = %s", csi_code_go_name(st.code),
			 desc);
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
		KLOG_ERR(e.message, "update pv.Spec.VolumeAttributesClassName for PVC %s failed",
			 key);
		return KUBE_WORK_RETRY;
	}
	struct rsz_patch p = rsz_mark_modify_done(pvc, vac->meta.name);
	if (rsz_patch_claim(c, pvc, &p, &e)) {
		KLOG_ERR(e.message, "mark PVC %s as ModifyVolumeCompleted failed",
			 key);
		return KUBE_WORK_RETRY;
	}
	rsz_set_del(c, &c->uncertain, key);
	KLOG_V(4, "Update volumeAttributesClass of PV %s to %s succeeded", pv->meta.name,
	       vac->meta.name);
	rsz_event(c, pvc, false, RSZ_EV_MODIFY_SUCCESS,
		  "external resizer modified volume %s with vac %s successfully", pvc->meta.name,
		  vac->meta.name);
	return KUBE_WORK_DONE;
}

/* The driver answered with an error: uncertain or final, Infeasible for InvalidArgument. */
static enum kube_work_result modify_failed(struct rsz_ctrl *c, const char *key,
					   const struct kube_pvc *pvc, const struct kube_vac *vac,
					   int code, const char *error, const char *desc)
{
	struct kube_err e;
	char msg[600], event[1400];
	bool final = rsz_is_final(code);
	int status = KUBE_MODIFY_IN_PROGRESS;

	snprintf(event, sizeof(event), "%s", error);
	if (!final) {
		rsz_set_add(c, &c->uncertain, key);
		snprintf(event + strlen(event), sizeof(event) - strlen(event),
			 ". Still modifying to VAC %s", vac->meta.name);
	} else {
		/* Only InvalidArgument is infeasible; other final errors stay InProgress. */
		if (code == 3 /* InvalidArgument */)
			status = KUBE_MODIFY_INFEASIBLE;
		rsz_set_del(c, &c->uncertain, key);
	}
	struct rsz_patch p = rsz_mark_modify(pvc, status, vac->meta.name, code, desc, final, msg,
					     sizeof(msg));
	if (rsz_patch_claim(c, pvc, &p, &e)) {
		KLOG_ERR(e.message, "Error syncing PVC %s: mark PVC %s as modify volume failed",
			 key, pvc->meta.name);
		return KUBE_WORK_RETRY;
	}
	if (status == KUBE_MODIFY_INFEASIBLE)
		rsz_slow_add(c, &c->mslow, key); /* markForSlowRetry */
	rsz_event(c, pvc, true, RSZ_EV_MODIFY_FAILED, "%s", event);
	KLOG_ERR(error, "Error syncing PVC %s (modify)", key);
	return KUBE_WORK_RETRY;
}

/* controllerModifyVolumeWithTarget */
static enum kube_work_result call(struct rsz_ctrl *c, const char *key, const struct kube_pvc *pvc,
				  const struct kube_pv *pv, const struct kube_vac *vac)
{
	char error[1100], desc[1024];
	int code = call_modify(c, pvc, pv, vac, error, sizeof(error), desc, sizeof(desc));

	if (code == 0)
		return completed(c, key, pvc, pv, vac);
	if (code == RSZ_NOT_GRPC) {
		/* Failed before the driver was asked (its secret): nothing is written, retried. */
		KLOG_ERR(error, "Error syncing PVC %s (modify): cannot get error status from modify volume",
			 key);
		return KUBE_WORK_RETRY;
	}
	return modify_failed(c, key, pvc, vac, code, error, desc);
}

static const char *or_empty_str(const char *s)
{
	return s ? s : "";
}

/* getTargetVAC: a class that does not exist is told to the user. */
static struct kube_obj *target_vac(struct rsz_ctrl *c, const struct kube_pvc *pvc, const char *name)
{
	struct kube_obj *o = rsz_get(c->vac_inf, NULL, name);

	if (!kube_vac_of(o)) {
		kube_obj_unref(o);
		rsz_event(c, pvc, true, RSZ_EV_MODIFY_FAILED, "VAC \"%s\" does not exist.", name);
		KLOG_E("get VAC with vac name %s in VACInformer cache failed: not found", name);
		return NULL;
	}
	return o;
}

static enum kube_work_result modify(struct rsz_ctrl *c, const char *key, const struct kube_pvc *pvc,
				    const struct kube_pv *pv)
{
	struct rsz_modify_memory mem = { .uncertain = rsz_set_has(c, &c->uncertain, key) };
	struct kube_err e;
	struct kube_obj *vo = NULL;
	enum kube_work_result res = KUBE_WORK_DONE;
	char msg[600];
	int64_t left = 0;

	/* delayModificationIfRecentlyInfeasible: a new target leaves the slow set at once. */
	if (!rsz_modify_targets_spec(pvc)) {
		rsz_set_del(c, &c->mslow, key);
	} else {
		mem.slow = rsz_slow_has(c, &c->mslow, key, &left);
		if (pvc->modify_status == KUBE_MODIFY_INFEASIBLE)
			rsz_slow_add(c, &c->mslow, key);
	}
	switch (rsz_plan_modify(pvc, &mem)) {
	case RSZ_MODIFY_NOTHING:
		return KUBE_WORK_DONE;
	case RSZ_MODIFY_DELAY:
		KLOG_V(4, "skipping volume modification for pvc %s, because modification previously failed with infeasible error",
		       key);
		kube_workqueue_add_after(c->mq, key, left);
		return KUBE_WORK_DONE;
	case RSZ_MODIFY_ROLLED_BACK: {
		KLOG_V(4, "stop reconcile for rolled back PVC %s", key);
		if (!(pvc->conds & KUBE_PVC_MODIFYING_VOLUME))
			return KUBE_WORK_DONE;
		rsz_event(c, pvc, false, RSZ_EV_MODIFY_CANCELLED, "Cancelled modify.");
		struct rsz_patch p = rsz_mark_rolled_back(pvc);
		if (rsz_patch_claim(c, pvc, &p, &e)) {
			KLOG_ERR(e.message, "mark PVC %s as rolled back failed", key);
			return KUBE_WORK_RETRY;
		}
		return KUBE_WORK_DONE;
	}
	case RSZ_MODIFY_CONTINUE:
		vo = target_vac(c, pvc, or_empty_str(pvc->modify_target));
		if (!vo)
			return KUBE_WORK_RETRY;
		break;
	case RSZ_MODIFY_START: {
		vo = target_vac(c, pvc, pvc->vac_name);
		struct rsz_patch p = rsz_mark_modify(pvc, vo ? KUBE_MODIFY_IN_PROGRESS : KUBE_MODIFY_PENDING,
						     NULL, -1, NULL, false, msg, sizeof(msg));
		if (rsz_patch_claim(c, pvc, &p, &e)) {
			KLOG_ERR(e.message, "Error syncing PVC %s: mark PVC %s as modify volume failed",
				 key, pvc->meta.name);
			kube_obj_unref(vo);
			return kube_err_is_conflict(&e) ? KUBE_WORK_AGAIN : KUBE_WORK_RETRY;
		}
		if (!vo)
			return KUBE_WORK_DONE; /* Pending: the class's arrival requeues the claim */
		rsz_event(c, pvc, false, RSZ_EV_MODIFY,
			  "external resizer is modifying volume %s with vac %s", pvc->meta.name,
			  pvc->vac_name);
		break;
	}
	}
	res = call(c, key, pvc, pv, kube_vac_of(vo));
	kube_obj_unref(vo);
	return res;
}

/* initUncertainPVCs: a claim InProgress at start-up may have a call running in the driver. */
void rsz_modify_init(struct rsz_ctrl *c)
{
	size_t n = 0;
	struct kube_obj **v = kube_store_list(kube_informer_store(c->pvc_inf), &n);
	char key[600];

	for (size_t i = 0; i < n; i++) {
		const struct kube_pvc *pvc = kube_pvc_of(v[i]);
		if (pvc && pvc->modify_status == KUBE_MODIFY_IN_PROGRESS) {
			kube_obj_key(v[i], key, sizeof(key));
			rsz_set_add(c, &c->uncertain, key);
		}
	}
	kube_objs_free(v, n);
}

enum kube_work_result rsz_modify_work(void *arg, const char *key)
{
	struct rsz_ctrl *c = arg;
	char ns[256];
	const char *name;
	enum kube_work_result res = KUBE_WORK_DONE;

	rsz_split_key(key, ns, sizeof(ns), &name);
	KLOG_V(4, "Started PVC processing for modify controller key=%s", key);
	struct kube_obj *co = rsz_get(c->pvc_inf, ns, name), *vo = NULL;
	const struct kube_pvc *pvc = kube_pvc_of(co);
	if (!pvc || !pvc->volume_name || !*pvc->volume_name)
		goto out;
	vo = rsz_get(c->pv_inf, NULL, pvc->volume_name);
	const struct kube_pv *pv = kube_pv_of(vo);
	if (!pv) {
		/* The claim's update can come before the PV's: retried until the PV is cached. */
		KLOG_E("Error syncing PVC %s: Get PV %s of pvc %s in PVInformer cache failed: not found",
		       key, pvc->volume_name, key);
		res = KUBE_WORK_RETRY;
		goto out;
	}
	if (!pv->driver || strcmp(pv->driver, c->o.driver) || pvc->phase != KUBE_PVC_BOUND ||
	    !rsz_pv_here(c, pv))
		goto out;
	res = modify(c, key, pvc, pv);
out:
	kube_obj_unref(vo);
	kube_obj_unref(co);
	return res;
}
