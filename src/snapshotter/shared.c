/*
 * csi-snapshotter's content path (controller.c) and group path (group.c) are one shape around
 * different CSI calls: watch the contents of our driver, build a create request from a class,
 * write the driver's answer as status, delete with the deletion secret and clear the handle,
 * patch finalizers. The shape lives here once; each path supplies its kind and its CSI call.
 */
#include "snapshotter/internal.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "csi/msg.h"
#include "snapshots/snapshots.h"

static void changed(struct snapper_watch *w, const struct kube_obj *o)
{
	const char *driver = w->driver_of(o);

	if (driver && !strcmp(driver, w->s->o.driver))
		kube_workqueue_add(w->q, o->name);
}

static void on_add(const struct kube_obj *o, void *ud)
{
	changed(ud, o);
}

static void on_update(const struct kube_obj *old, const struct kube_obj *o, void *ud)
{
	struct snapper_watch *w = ud;

	if (w->wanted(old, o))
		changed(w, o);
}

void snapper_watch(struct snapper_watch *w, struct kube_informer *inf)
{
	struct kube_handlers h = { on_add, on_update, NULL, w };

	kube_informer_add_handlers(inf, &h);
}

struct kube_obj *snapper_fresh(struct snapper *s, struct kube_obj *o,
			       const struct kube_resource *res, const struct kube_kind *kind)
{
	struct kube_err e;
	char err[256];
	json_t *j = kube_get(s->kc, res, NULL, o->name, &e);
	struct kube_obj *f = j ? kube_decode_json(kind, j, err, sizeof(err)) : NULL;

	json_decref(j);
	if (!f)
		return o;
	kube_obj_unref(o);
	return f;
}

enum kube_work_result snapper_patch_result(const struct kube_err *ke)
{
	if (kube_err_is_conflict(ke))
		return AGAIN;
	return kube_err_is_not_found(ke) ? DONE : RETRY;
}

int snapper_patch_status(struct snapper *s, const struct kube_obj *meta, json_t *status,
			 const char *what)
{
	struct kube_err ke;

	if (!json_object_size(status)) {
		json_decref(status);
		return 0;
	}
	json_t *patch = json_pack("{s:o}", "status", status);
	char *body = json_dumps(patch, JSON_COMPACT);
	int rc = snap_patch(s->kc, meta, true, body, &ke);
	free(body);
	json_decref(patch);
	if (rc)
		KLOG_ERR(ke.message, "error updating status for %s %s", what, meta->name);
	return rc;
}

int snapper_add_params(struct snapper *s, struct csi_arena *a, ProtobufCMessage *req,
		       const struct kube_vsclass *cls, const char *const extra[6], char *err,
		       size_t errlen)
{
	struct kube_kv params[cls->nparameters + 1];
	int n = snap_csi_params(cls->parameters, cls->nparameters, params, err, errlen);

	if (n < 0)
		return -1;
	for (int i = 0; i < n; i++)
		csi_map_add(a, req, "parameters", params[i].key, params[i].value);
	if (s->o.extra_create_metadata)
		for (int i = 0; i < 6; i += 2)
			csi_map_add(a, req, "parameters", extra[i], extra[i + 1] ? extra[i + 1] : "");
	return 0;
}

int snapper_delete(struct snapper *s, const struct snapper_delete *d)
{
	char err[600];
	struct csi_arena *a = csi_arena_new();
	ProtobufCMessage *req = csi_msg_new(a, d->request);
	struct csi_status st = { 0 };
	struct kube_err ke;
	int rc = RETRY;

	d->fill(req, a, d->ud);
	if (d->secret_name && d->secret_ns &&
	    sidecar_add_secrets(s->kc, a, req, "secrets", d->secret_ns, d->secret_name, err,
				sizeof(err))) {
		KLOG_ERR(err, "failed to get input parameters to delete %s for content %s",
			 d->what, d->meta->name);
		snap_event(s->o.recorder, d->meta, true, d->reason, "Failed to get %s credentials",
			   d->what);
		goto out;
	}
	if (d->call(s, req, d->ud, &st) != 0) {
		KLOG_ERR(st.message, "failed to delete %s %s", d->what, d->meta->name);
		snap_event(s->o.recorder, d->meta, true, d->reason, "Failed to delete %s", d->what);
		goto out;
	}
	/* Gone from the storage: the handle goes too, then the finalizer (the next step). */
	if (snap_patch(s->kc, d->meta, true, d->clear_status, &ke)) {
		snap_event(s->o.recorder, d->meta, true, d->reason, "Failed to clear %scontent status",
			   d->clear_what);
		goto out;
	}
	rc = DONE;
out:
	csi_arena_free(a);
	return rc;
}
