/*
 * snapshot-controller's group snapshots: the I/O of one VolumeGroupSnapshot's sync. The step is
 * snap_plan_group()'s; each sync makes that step's writes and returns, and the informers' echoes
 * (of the group, its content, its members) queue the next one.
 */
#include "snapshotctrl/internal.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/timeutil.h"
#include "snapshots/snapshots.h"

/* ---- handlers: queue the group a change concerns ---- */

static void queue_key(struct sctrl *c, const char *ns, const char *name)
{
	char key[512];

	if (!ns || !name)
		return;
	snprintf(key, sizeof(key), "%s/%s", ns, name);
	kube_workqueue_add(c->vgsq, key);
}

static void vgs_changed(struct sctrl *c, const struct kube_obj *o)
{
	queue_key(c, o->ns, o->name);
}

static void vgsc_changed(struct sctrl *c, const struct kube_obj *o)
{
	const struct kube_vgsc *g = kube_vgsc_of(o);

	if (g)
		queue_key(c, g->ref_ns, g->ref_name);
}

static void on_vgs_add(const struct kube_obj *o, void *ud) { vgs_changed(ud, o); }
/* A group gone: its DeleteGroupSnapshot ends, as upstream's deleteGroupSnapshot records it. */
static void on_vgs_delete(const struct kube_obj *o, void *ud)
{
	struct sctrl *c = ud;
	char uid[64];

	kube_obj_uid(o, uid, sizeof(uid));
	sctrl_opm_success(c->opm, SCTRL_OP_GROUP_DELETE, uid, NULL);
	sctrl_opm_forget(c->opm, uid);
}
static void on_vgs_update(const struct kube_obj *old, const struct kube_obj *o, void *ud)
{
	(void)old;
	vgs_changed(ud, o);
}
static void on_vgsc_add(const struct kube_obj *o, void *ud) { vgsc_changed(ud, o); }
static void on_vgsc_update(const struct kube_obj *old, const struct kube_obj *o, void *ud)
{
	(void)old;
	vgsc_changed(ud, o);
}

void sctrl_group_handlers(struct sctrl *c)
{
	struct kube_handlers gh = { on_vgs_add, on_vgs_update, on_vgs_delete, c };
	struct kube_handlers ch = { on_vgsc_add, on_vgsc_update, on_vgsc_add, c };

	kube_informer_add_handlers(c->inf[INF_VGS], &gh);
	kube_informer_add_handlers(c->inf[INF_VGSC], &ch);
}

/* ---- writes ---- */

/* upstream's updateGroupSnapshotErrorStatusWithEvent: once per new message. */
static void group_error(struct sctrl *c, const struct kube_vgs *g, const char *reason,
			const char *msg)
{
	snap_error_status(c->kc, c->o.recorder, &g->meta, g->error_message, reason, msg);
}

static int post(struct sctrl *c, const struct kube_resource *r, const char *ns, json_t *obj,
		struct kube_err *ke)
{
	char *body = json_dumps(obj, JSON_COMPACT);
	int rc = kube_create_discard(c->kc, r, ns, body, ke);

	free(body);
	json_decref(obj);
	return rc && !kube_err_is_already_exists(ke) ? -1 : 0;
}

static int patch_json(struct sctrl *c, const struct kube_obj *o, bool status, json_t *patch,
		      struct kube_err *ke)
{
	char *body = json_dumps(patch, JSON_COMPACT);
	int rc = snap_patch(c->kc, o, status, body, ke);

	free(body);
	json_decref(patch);
	return rc;
}

/* ---- creating the group's content ---- */

/* The claims of the group's namespace and their volumes: what snap_group_volumes() reads. */
static int group_volumes(struct sctrl *c, const struct kube_vgs *g, const char ***handles,
			 const char **driver, struct kube_obj ***claims, struct kube_obj ***pvs,
			 size_t *n, char *err, size_t errlen)
{
	*claims = kube_store_by_index(kube_informer_store(c->inf[INF_PVC]), "ns", g->meta.ns, n);
	*pvs = calloc(*n + 1, sizeof(**pvs));
	*handles = calloc(*n + 1, sizeof(**handles));
	for (size_t i = 0; i < *n; i++)
		(*pvs)[i] = sctrl_get(c, INF_PV, NULL, kube_pvc_of((*claims)[i])->volume_name);
	return snap_group_volumes(g, (const struct kube_pvc *const *)*claims,
				  (const struct kube_pv *const *)*pvs, *n, *handles, driver, err,
				  errlen);
}

static void free_volumes(const char **handles, struct kube_obj **claims, struct kube_obj **pvs,
			 size_t n)
{
	for (size_t i = 0; i < n; i++)
		kube_obj_unref(pvs[i]);
	free(pvs);
	free(handles);
	kube_objs_free(claims, n);
}

static json_t *content_json(const struct kube_vgs *g, const struct kube_vsclass *cls,
			    const char *name, const char **handles, int n, const char *sname,
			    const char *sns)
{
	char uid[64];
	json_t *vh = json_array();

	for (int i = 0; i < n; i++)
		json_array_append_new(vh, json_string(handles[i]));
	json_t *md = json_pack("{s:s}", "name", name);
	if (sname)
		json_object_set_new(md, "annotations", json_pack("{s:s,s:s}", SNAP_GANN_SECRET_NAME,
								  sname, SNAP_GANN_SECRET_NS, sns));
	json_t *spec = json_pack("{s:{s:s,s:s,s:s,s:s,s:s,s:s},s:{s:o},s:s,s:s,s:s}",
				 "volumeGroupSnapshotRef", "kind", "VolumeGroupSnapshot",
				 "apiVersion", SNAP_GROUP_API_VERSION, "namespace", g->meta.ns,
				 "name", g->meta.name, "uid",
				 kube_obj_uid(&g->meta, uid, sizeof(uid)), "resourceVersion",
				 g->meta.rv, "source", "volumeHandles", vh,
				 "volumeGroupSnapshotClassName", cls->meta.name, "deletionPolicy",
				 cls->policy == KUBE_SNAP_RETAIN ? "Retain" : "Delete", "driver",
				 cls->driver);
	return json_pack("{s:s,s:s,s:o,s:o}", "apiVersion", SNAP_GROUP_API_VERSION, "kind",
			 "VolumeGroupSnapshotContent", "metadata", md, "spec", spec);
}

/* The group's class, or its driver's default named into its spec (then 1: the echo goes on). */
static const struct kube_vsclass *group_class(struct sctrl *c, const struct kube_vgs *g,
					      const char *driver, struct kube_obj **clo, int *rc,
					      char *err, size_t errlen)
{
	struct kube_err ke;
	size_t n = 0;

	*rc = 0;
	if (g->class_name) {
		*clo = sctrl_get(c, INF_VGSCLASS, NULL, g->class_name);
		if (!*clo)
			snprintf(err, errlen, "failed to retrieve group snapshot class %s from the "
				 "informer: \"volumegroupsnapshotclass.groupsnapshot.storage.k8s.io "
				 "\\\"%s\\\" not found\"", g->class_name, g->class_name);
		return kube_vgsclass_of(*clo);
	}
	struct kube_obj **all = kube_store_list(kube_informer_store(c->inf[INF_VGSCLASS]), &n);
	const struct kube_vsclass *def = snap_default_group_class(
		(const struct kube_vsclass *const *)all, n, driver, err, errlen);
	if (def) {
		json_t *p = json_pack("{s:{s:s}}", "spec", "volumeGroupSnapshotClassName",
				      def->meta.name);
		if (patch_json(c, &g->meta, false, p, &ke))
			snprintf(err, errlen, "%s", ke.message);
		else
			*rc = 1;
	}
	kube_objs_free(all, n);
	return NULL;
}

static int create_content(struct sctrl *c, const struct kube_vgs *g)
{
	char name[128], err[700], msg[800], sname[256], sns[128], key[512];
	const char **handles, *driver;
	struct kube_obj **claims, **pvs, *clo = NULL;
	struct kube_err ke;
	size_t n;
	int rc = RETRY, step = 0;

	kube_obj_key(&g->meta, key, sizeof(key));
	snap_group_content_name(g, name, sizeof(name));
	int nh = group_volumes(c, g, &handles, &driver, &claims, &pvs, &n, err, sizeof(err));
	const struct kube_vsclass *cls = NULL;
	if (nh > 0)
		cls = group_class(c, g, driver, &clo, &step, err, sizeof(err));
	if (nh > 0 && !cls && step == 1) {
		rc = DONE;
		goto out;
	}
	bool same_driver = cls && cls->driver && !strcmp(cls->driver, driver);
	if (cls && !same_driver)
		snprintf(err, sizeof(err), "the group snapshot class %s is of driver %s, its volumes "
			 "of %s", cls->meta.name, cls->driver ? cls->driver : "", driver);
	int ref = same_driver
			  ? snap_secret_ref(SNAP_SECRET_GROUP, cls->parameters, cls->nparameters,
					    name, g->meta.name, g->meta.ns, sname, sizeof(sname),
					    sns, sizeof(sns), err, sizeof(err))
			  : -1;
	if (ref < 0) {
		snprintf(msg, sizeof(msg), "failed to create group snapshot content with error %s",
			 err);
		group_error(c, g, "GroupSnapshotContentCreationFailed", msg);
		goto out;
	}
	KLOG_I("createGroupSnapshotContent: creating content %s for group snapshot %s", name, key);
	if (post(c, &KUBE_RES_VOLUMEGROUPSNAPSHOTCONTENTS, NULL,
		 content_json(g, cls, name, handles, nh, ref ? sname : NULL, sns), &ke)) {
		snprintf(msg, sizeof(msg), "failed to create group snapshot content with error %s",
			 ke.message);
		group_error(c, g, "GroupSnapshotContentCreationFailed", msg);
		goto out;
	}
	snap_event(c->o.recorder, &g->meta, false, "CreatingGroupSnapshot",
		   "Waiting for a group snapshot %s to be created by the CSI driver.", key);
	json_t *p = json_pack("{s:{s:s,s:b}}", "status", "boundVolumeGroupSnapshotContentName",
			      name, "readyToUse", 0);
	rc = patch_json(c, &g->meta, true, p, &ke) ? RETRY : DONE;
out:
	kube_obj_unref(clo);
	free_volumes(handles, claims, pvs, n);
	return rc;
}

/* ---- the members: one VolumeSnapshot and its pre-bound content per volume ---- */

/* The volume of driver with handle: its claim and mode (upstream's index by CSI handle). */
static struct kube_obj *volume_by_handle(struct sctrl *c, const char *driver, const char *handle)
{
	size_t n = 0;
	struct kube_obj *found = NULL;
	struct kube_obj **all = kube_store_list(kube_informer_store(c->inf[INF_PV]), &n);

	for (size_t i = 0; i < n && !found; i++) {
		const struct kube_pv *pv = kube_pv_of(all[i]);
		if (pv && pv->driver && !strcmp(pv->driver, driver) && pv->volume_handle &&
		    !strcmp(pv->volume_handle, handle)) {
			found = all[i];
			all[i] = NULL;
		}
	}
	kube_objs_free(all, n);
	return found;
}

static json_t *member_content_json(const struct kube_vgsc *gc, const struct kube_pv *pv,
				   const char *handle, const char *vs, const char *vsc)
{
	json_t *ann = json_pack("{s:s}", SNAP_ANN_GROUP_HANDLE, gc->status_handle);
	if (gc->deletion_secret_name && gc->deletion_secret_ns) {
		json_object_set_new(ann, SNAP_ANN_SECRET_NAME, json_string(gc->deletion_secret_name));
		json_object_set_new(ann, SNAP_ANN_SECRET_NS, json_string(gc->deletion_secret_ns));
	}
	json_t *spec = json_pack("{s:{s:s,s:s,s:s},s:s,s:s,s:{s:s}}", "volumeSnapshotRef", "kind",
				 "VolumeSnapshot", "name", vs, "namespace", gc->ref_ns ? gc->ref_ns : "",
				 "deletionPolicy",
				 gc->policy == KUBE_SNAP_RETAIN ? "Retain" : "Delete", "driver",
				 gc->driver, "source", "volumeHandle", handle);
	if (pv)
		json_object_set_new(spec, "sourceVolumeMode",
				    json_string(pv->block ? "Block" : "Filesystem"));
	return json_pack("{s:s,s:s,s:{s:s,s:o},s:o}", "apiVersion", SNAP_API_VERSION, "kind",
			 "VolumeSnapshotContent", "metadata", "name", vsc, "annotations", ann,
			 "spec", spec);
}

static json_t *member_json(const struct kube_vgs *g, const struct kube_pv *pv, const char *vs)
{
	char uid[64];

	/* the owner reference as upstream's: no controller or blockOwnerDeletion */
	return json_pack("{s:s,s:s,s:{s:s,s:s,s:[{s:s,s:s,s:s,s:s}],s:[s]},"
			 "s:{s:{s:s}}}",
			 "apiVersion", SNAP_API_VERSION, "kind", "VolumeSnapshot", "metadata",
			 "name", vs, "namespace", g->meta.ns, "ownerReferences", "apiVersion",
			 SNAP_GROUP_API_VERSION, "kind", "VolumeGroupSnapshot", "name", g->meta.name,
			 "uid", kube_obj_uid(&g->meta, uid, sizeof(uid)),
			 "finalizers", SNAP_FIN_IN_GROUP, "spec", "source",
			 "persistentVolumeClaimName", pv && pv->claim_name ? pv->claim_name : "");
}

/* Binds one member both ways and gives its content the driver's answer (upstream's order). */
static int bind_member(struct sctrl *c, const struct kube_vgs *g, const struct kube_vgsc *gc,
		       const struct kube_vgs_member *m, const char *vs, const char *vsc)
{
	struct kube_obj *so = sctrl_get(c, INF_VS, g->meta.ns, vs);
	struct kube_obj *co = sctrl_get(c, INF_VSC, NULL, vsc);
	struct kube_err ke;
	char uid[64];
	int rc = -1;

	if (!so || !co)
		goto out; /* not in the cache yet: the retry finds them */
	json_t *ref = json_pack("{s:{s:{s:s}}}", "spec", "volumeSnapshotRef", "uid",
				kube_obj_uid(so, uid, sizeof(uid)));
	json_t *vst = json_pack("{s:{s:s,s:s}}", "status", "boundVolumeSnapshotContentName", vsc,
				"volumeGroupSnapshotName", g->meta.name);
	json_t *cst = json_pack("{s:{s:s,s:s,s:b}}", "status", "snapshotHandle",
				m->snapshot_handle ? m->snapshot_handle : "",
				"volumeGroupSnapshotHandle", gc->status_handle, "readyToUse",
				m->ready == KUBE_COND_TRUE);
	json_t *cs = json_object_get(cst, "status");
	if (m->creation_time >= 0)
		json_object_set_new(cs, "creationTime", json_integer(m->creation_time));
	if (m->restore_size >= 0)
		json_object_set_new(cs, "restoreSize", json_integer(m->restore_size));
	if (!patch_json(c, co, false, ref, &ke) && !patch_json(c, so, true, vst, &ke) &&
	    !patch_json(c, co, true, cst, &ke))
		rc = 0;
	else
		KLOG_ERR(ke.message, "binding member %s/%s of group snapshot %s",
			 g->meta.ns, vs, g->meta.name);
out:
	kube_obj_unref(so);
	kube_obj_unref(co);
	return rc;
}

/* True when every member's VolumeSnapshot exists and is bound (its status names its content);
 * a content that lists no member (a pre-provisioned one, as upstream writes it) has none to wait
 * for. */
static bool members_done(struct sctrl *c, const struct kube_vgs *g, const struct kube_vgsc *gc)
{
	char uid[64], vs[80], vsc[80];
	bool done = true;

	kube_obj_uid(&g->meta, uid, sizeof(uid));
	for (size_t i = 0; i < gc->nmembers && done; i++) {
		snap_group_member_names(uid, gc->members[i].volume_handle ? gc->members[i].volume_handle : "",
					vs, sizeof(vs), vsc, sizeof(vsc));
		struct kube_obj *so = sctrl_get(c, INF_VS, g->meta.ns, vs);
		const struct kube_vs *v = kube_vs_of(so);
		done = v && v->bound_content && !strcmp(v->bound_content, vsc);
		kube_obj_unref(so);
	}
	return done;
}

static int create_members(struct sctrl *c, const struct kube_vgs *g, const struct kube_vgsc *gc)
{
	char uid[64], vs[80], vsc[80], msg[900];
	struct kube_err ke;

	kube_obj_uid(&g->meta, uid, sizeof(uid));
	for (size_t i = 0; i < gc->nmembers; i++) {
		const struct kube_vgs_member *m = &gc->members[i];
		const char *handle = m->volume_handle ? m->volume_handle : "";
		snap_group_member_names(uid, handle, vs, sizeof(vs), vsc, sizeof(vsc));
		struct kube_obj *pvo = volume_by_handle(c, gc->driver, handle);
		const struct kube_pv *pv = kube_pv_of(pvo);
		int bad = post(c, &KUBE_RES_VOLUMESNAPSHOTCONTENTS, NULL,
			       member_content_json(gc, pv, handle, vs, vsc), &ke) ||
			  post(c, &KUBE_RES_VOLUMESNAPSHOTS, g->meta.ns, member_json(g, pv, vs), &ke);
		kube_obj_unref(pvo);
		if (bad) {
			snprintf(msg, sizeof(msg), "failed to create snapshots for group snapshot "
				 "content %s: %s", gc->meta.name, ke.message);
			group_error(c, g, "CreateGroupSnapshotMembersFailed", msg);
			return RETRY;
		}
		if (bind_member(c, g, gc, m, vs, vsc))
			return RETRY;
	}
	return DONE;
}

/* ---- a pre-provisioned group: bind the content an admin made ---- */

/* upstream's checkAndBindGroupSnapshotContent: the ref's uid, and the group's class if any. */
static int bind_content(struct sctrl *c, const struct kube_vgs *g, const struct kube_vgsc *gc)
{
	char uid[64], msg[900];
	struct kube_err ke;
	json_t *spec = json_pack("{s:{s:s}}", "volumeGroupSnapshotRef", "uid",
				 kube_obj_uid(&g->meta, uid, sizeof(uid)));

	if (g->class_name)
		json_object_set_new(spec, "volumeGroupSnapshotClassName", json_string(g->class_name));
	if (!patch_json(c, &gc->meta, false, json_pack("{s:o}", "spec", spec), &ke))
		return DONE;
	if (kube_err_is_conflict(&ke))
		return AGAIN;
	snprintf(msg, sizeof(msg), "GroupSnapshot failed to bind VolumeGroupSnapshotContent, %s",
		 ke.message);
	group_error(c, g, "GroupSnapshotBindFailed", msg);
	return RETRY;
}

/* The pre-provisioned checks that fail: upstream's reasons and words. */
static int preprovisioned_error(struct sctrl *c, const struct kube_vgs *g,
				enum snap_group_step step)
{
	char msg[512];

	switch (step) {
	case SNAP_G_CONTENT_MISSING:
		group_error(c, g, "GroupSnapshotContentMissing", "VolumeGroupSnapshotContent is missing");
		break;
	case SNAP_G_MISMATCH:
		group_error(c, g, "GroupSnapshotContentMismatch", "VolumeGroupSnapshotContent is "
			    "dynamically provisioned while expecting a pre-provisioned one");
		break;
	default:
		snprintf(msg, sizeof(msg), "VolumeGroupSnapshotContent [%s] is bound to a different "
			 "group snapshot", g->source_content);
		group_error(c, g, "GroupSnapshotContentMisbound", msg);
		break;
	}
	return RETRY;
}

/* ---- status, finalizer, deletion ---- */

static int copy_status(struct sctrl *c, const struct kube_vgs *g, const struct kube_vgsc *gc,
		       bool done)
{
	char key[512];
	struct kube_err ke;
	bool ready = gc->ready == KUBE_COND_TRUE && done;
	json_t *st = json_pack("{s:s,s:b}", "boundVolumeGroupSnapshotContentName", gc->meta.name,
			       "readyToUse", ready);

	if (gc->creation_time)
		json_object_set_new(st, "creationTime", json_string(gc->creation_time));
	if (gc->error_message)
		json_object_set_new(st, "error", json_pack("{s:s}", "message", gc->error_message));
	else
		json_object_set_new(st, "error", json_null());
	if (patch_json(c, &g->meta, true, json_pack("{s:o}", "status", st), &ke))
		return RETRY;
	kube_obj_key(&g->meta, key, sizeof(key));
	char uid[64];
	kube_obj_uid(&g->meta, uid, sizeof(uid));
	if (gc->creation_time && !g->creation_time) {
		snap_event(c->o.recorder, &g->meta, false, "GroupSnapshotCreated",
			   "GroupSnapshot %s was successfully created by the CSI driver.", key);
		sctrl_opm_success(c->opm, SCTRL_OP_GROUP_CREATE, uid, gc->driver);
	}
	if (ready && g->ready != KUBE_COND_TRUE) {
		snap_event(c->o.recorder, &g->meta, false, "GroupSnapshotReady",
			   "GroupSnapshot %s is ready to use.", key);
		sctrl_opm_success(c->opm, SCTRL_OP_GROUP_CREATE_READY, uid, gc->driver);
	}
	return DONE;
}

/*
 * A deleted group: its members go first (their in-group finalizer dropped, then deleted, so
 * their contents follow their own policy), then its content is annotated being-deleted (any
 * policy, as upstream) and, with Delete, deleted; the group's finalizer goes when its content is
 * gone (Delete) or at once (Retain, or no content).
 */
static int delete_group(struct sctrl *c, const struct kube_vgs *g, const struct kube_vgsc *gc)
{
	char uid[64], vs[80];
	struct kube_err ke;

	kube_obj_uid(&g->meta, uid, sizeof(uid));
	for (size_t i = 0; gc && i < gc->nmembers; i++) {
		snap_group_member_names(uid, gc->members[i].volume_handle ? gc->members[i].volume_handle : "",
					vs, sizeof(vs), NULL, 0);
		struct kube_obj *so = sctrl_get(c, INF_VS, g->meta.ns, vs);
		int bad = so && ((kube_obj_has_finalizer(so, SNAP_FIN_IN_GROUP) &&
				  snap_patch_finalizers(c->kc, so, SNAP_FIN_IN_GROUP, NULL, NULL, &ke)) ||
				 (!so->deletion_ts &&
				  kube_delete(c->kc, &KUBE_RES_VOLUMESNAPSHOTS, g->meta.ns, vs, NULL, NULL,
					      &ke) && !kube_err_is_not_found(&ke)));
		kube_obj_unref(so);
		if (bad)
			return RETRY;
	}
	if (gc && snap_group_ref_is(gc, g)) {
		if (!gc->being_deleted &&
		    snap_patch_annotation(c->kc, &gc->meta, SNAP_GANN_BEING_DELETED, "yes", &ke))
			return RETRY;
	}
	if (gc && snap_group_ref_is(gc, g) && gc->policy == KUBE_SNAP_DELETE) {
		if (!gc->meta.deletion_ts &&
		    kube_delete(c->kc, &KUBE_RES_VOLUMEGROUPSNAPSHOTCONTENTS, NULL, gc->meta.name,
				NULL, NULL, &ke) && !kube_err_is_not_found(&ke)) {
			snap_event(c->o.recorder, &g->meta, true, "GroupSnapshotContentObjectDeleteError",
				   "Failed to delete group snapshot content API object");
			return RETRY;
		}
		return DONE; /* the finalizer goes once the content is gone (its delete queues us) */
	}
	if (kube_obj_has_finalizer(&g->meta, SNAP_GFIN_BOUND) &&
	    snap_patch_finalizers(c->kc, &g->meta, SNAP_GFIN_BOUND, NULL, NULL, &ke))
		return kube_err_is_conflict(&ke) ? AGAIN : RETRY;
	return DONE;
}

/*
 * upstream's operation starts: DeleteGroupSnapshot from the first sync of a deleted group;
 * CreateGroupSnapshot (until a creationTime) and CreateGroupSnapshotAndReady while a valid group
 * is not ready or not bound. The driver is the class's, or a pre-provisioned content's.
 */
static void group_ops_start(struct sctrl *c, const struct kube_vgs *g, const struct kube_vgsc *gc)
{
	char uid[64], drv[256] = "";
	struct kube_obj *clo = g->class_name ? sctrl_get(c, INF_VGSCLASS, NULL, g->class_name) : NULL;
	const struct kube_vsclass *cls = kube_vgsclass_of(clo);
	bool pre = g->source_content != NULL;

	if (pre && gc && gc->driver)
		snprintf(drv, sizeof(drv), "%s", gc->driver);
	else if (cls && cls->driver)
		snprintf(drv, sizeof(drv), "%s", cls->driver);
	kube_obj_unref(clo);
	kube_obj_uid(&g->meta, uid, sizeof(uid));
	if (g->meta.deletion_ts) {
		sctrl_opm_start(c->opm, SCTRL_OP_GROUP_DELETE, uid, drv, pre);
		return;
	}
	if (!g->source_content == !g->selector)
		return; /* invalid: upstream returns before starting anything */
	if (g->ready == KUBE_COND_TRUE && g->bound_content)
		return;
	if (!g->creation_time)
		sctrl_opm_start(c->opm, SCTRL_OP_GROUP_CREATE, uid, drv, pre);
	sctrl_opm_start(c->opm, SCTRL_OP_GROUP_CREATE_READY, uid, drv, pre);
}

static int sync_group(struct sctrl *c, const struct kube_vgs *g)
{
	char name[320];
	struct kube_err ke;

	if (g->source_content)
		snprintf(name, sizeof(name), "%s", g->source_content);
	else
		snap_group_content_name(g, name, sizeof(name));
	struct kube_obj *co = sctrl_get(c, INF_VGSC, NULL, name);
	const struct kube_vgsc *gc = kube_vgsc_of(co);
	bool done = gc && members_done(c, g, gc);
	int rc = DONE;

	group_ops_start(c, g, gc);
	if (g->meta.deletion_ts) {
		rc = delete_group(c, g, gc);
		goto out;
	}
	enum snap_group_step step = snap_plan_group(g, gc, done);
	switch (step) {
	case SNAP_G_INVALID:
		group_error(c, g, "GroupSnapshotValidationError",
			    "Exactly one of Selector and VolumeGroupSnapshotContentName should be "
			    "specified");
		break;
	case SNAP_G_CONTENT_MISSING:
	case SNAP_G_MISMATCH:
	case SNAP_G_MISBOUND:
		rc = preprovisioned_error(c, g, step);
		break;
	case SNAP_G_BIND:
		rc = bind_content(c, g, gc);
		break;
	case SNAP_G_ADD_CONTENT_FINALIZER:
		if (snap_patch_finalizers(c->kc, co, NULL, NULL, SNAP_GFIN_CONTENT, &ke))
			rc = kube_err_is_conflict(&ke) ? AGAIN : RETRY;
		break;
	case SNAP_G_CREATE_CONTENT:
		rc = create_content(c, g);
		break;
	case SNAP_G_ADD_FINALIZER:
		if (snap_patch_finalizers(c->kc, &g->meta, NULL, NULL, SNAP_GFIN_BOUND, &ke))
			rc = kube_err_is_conflict(&ke) ? AGAIN : RETRY;
		break;
	case SNAP_G_CREATE_MEMBERS:
		rc = create_members(c, g, gc);
		/* the members' echoes do not queue the group: look again */
		if (rc == DONE)
			rc = RETRY;
		break;
	case SNAP_G_STATUS:
		rc = copy_status(c, g, gc, done);
		break;
	case SNAP_G_NOTHING:
		break;
	}
out:
	kube_obj_unref(co);
	return rc;
}

enum kube_work_result sctrl_group_work(void *arg, const char *key)
{
	struct sctrl *c = arg;
	struct kube_obj *o = sctrl_get_key(c, INF_VGS, key);
	const struct kube_vgs *g = kube_vgs_of(o);
	int rc = g ? sync_group(c, g) : DONE;
	kube_obj_unref(o);
	return (enum kube_work_result)rc;
}
