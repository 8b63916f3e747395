/*
 * Group snapshots: the names, the claims a group takes, and the "which step now" rules of
 * snapshot-controller and csi-snapshotter for VolumeGroupSnapshots and their contents. Pure, as
 * the rest of this library: the controllers read the cache, call these, then do the one write.
 */
#include "snapshots/snapshots.h"

#include <stdio.h>
#include <string.h>

#include "base/sha256.h"
#include "kube/selector.h"

void snap_group_content_name(const struct kube_vgs *g, char *buf, size_t len)
{
	char uid[64];

	snprintf(buf, len, SNAP_GROUP_CONTENT_PREFIX "%s", kube_obj_uid(&g->meta, uid, sizeof(uid)));
}

void snap_group_member_names(const char *group_uid, const char *volume_handle, char *vs,
			     size_t vslen, char *vsc, size_t vsclen)
{
	char key[512], hex[65];
	int n = snprintf(key, sizeof(key), "%s%s", group_uid, volume_handle);

	/* uids are 36 bytes and the CSI spec caps a volume id at 128, so the pair always fits */
	sha256_hex(key, n < (int)sizeof(key) ? (size_t)n : sizeof(key) - 1, hex);
	if (vs)
		snprintf(vs, vslen, "snapshot-%s", hex);
	if (vsc)
		snprintf(vsc, vsclen, SNAP_CONTENT_PREFIX "%s", hex);
}

static bool same(const char *a, const char *b)
{
	return a && b && !strcmp(a, b);
}

bool snap_group_ref_is(const struct kube_vgsc *c, const struct kube_vgs *g)
{
	char uid[64];

	return c && g && same(c->ref_name, g->meta.name) && same(c->ref_ns, g->meta.ns) &&
	       !strcmp(c->ref_uid, kube_obj_uid(&g->meta, uid, sizeof(uid)));
}

/* The volume of one selected claim, checked as upstream words it; NULL with err. */
static const struct kube_pv *member_volume(const struct kube_pvc *pvc, const struct kube_pv *pv,
					   char *err, size_t errlen)
{
	if (pvc->phase != KUBE_PVC_BOUND || !pvc->volume_name) {
		snprintf(err, errlen, "the PVC %s is not yet bound to a PV, will not attempt to take "
			 "a group snapshot", pvc->meta.name);
		return NULL;
	}
	if (!pv) {
		snprintf(err, errlen, "failed to retrieve PV %s from the API server: \"persistentvolumes "
			 "\\\"%s\\\" not found\"", pvc->volume_name, pvc->volume_name);
		return NULL;
	}
	if (!pv->driver || !pv->volume_handle) {
		snprintf(err, errlen, "cannot find CSI PersistentVolumeSource for volume %s",
			 pv->meta.name);
		return NULL;
	}
	return pv;
}

int snap_group_volumes(const struct kube_vgs *g, const struct kube_pvc *const *claims,
		       const struct kube_pv *const *pvs, size_t n, const char **handles,
		       const char **driver, char *err, size_t errlen)
{
	char perr[256];
	struct kube_selector *sel = kube_selector_parse(g->selector, perr, sizeof(perr));
	int m = 0;

	*driver = NULL;
	if (!g->selector || !sel) {
		snprintf(err, errlen, "invalid selector of group snapshot %s/%s: %s", g->meta.ns,
			 g->meta.name, g->selector ? perr : "none given");
		kube_selector_free(sel);
		return -1;
	}
	for (size_t i = 0; i < n && m >= 0; i++) {
		const struct kube_pvc *pvc = claims[i];
		if (!same(pvc->meta.ns, g->meta.ns) ||
		    !kube_selector_matches(sel, pvc->labels, pvc->nlabels))
			continue;
		const struct kube_pv *pv = member_volume(pvc, pvs[i], err, errlen);
		if (pv && *driver && strcmp(*driver, pv->driver)) {
			snprintf(err, errlen, "the volumes of group snapshot %s/%s belong to more than "
				 "one CSI driver (%s, %s)", g->meta.ns, g->meta.name, *driver,
				 pv->driver);
			pv = NULL;
		}
		if (!pv) {
			m = -1;
			break;
		}
		*driver = pv->driver;
		handles[m++] = pv->volume_handle;
	}
	kube_selector_free(sel);
	if (m == 0)
		snprintf(err, errlen, "label selector %s for group snapshot not applied to any PVC",
			 g->selector);
	return m > 0 ? m : -1;
}

/* The status copy a bound group still needs (the same rule for both kinds of group). */
static enum snap_group_step plan_status(const struct kube_vgs *g, const struct kube_vgsc *content,
					bool members_done)
{
	bool ready = content->ready == KUBE_COND_TRUE && members_done;

	if (!same(g->bound_content, content->meta.name) ||
	    (g->ready == KUBE_COND_TRUE) != ready ||
	    (!g->creation_time) != (!content->creation_time) ||
	    (!g->error_message) != (!content->error_message))
		return SNAP_G_STATUS;
	return SNAP_G_NOTHING;
}

static enum snap_group_step plan_preprovisioned(const struct kube_vgs *g,
						const struct kube_vgsc *content, bool members_done)
{
	char uid[64];

	if (!content)
		return SNAP_G_CONTENT_MISSING;
	if (!content->group_handle)
		return SNAP_G_MISMATCH;
	kube_obj_uid(&g->meta, uid, sizeof(uid));
	if (!same(content->ref_name, g->meta.name) || !same(content->ref_ns, g->meta.ns) ||
	    (*content->ref_uid && strcmp(content->ref_uid, uid)))
		return SNAP_G_MISBOUND;
	if (!kube_obj_has_finalizer(&g->meta, SNAP_GFIN_BOUND))
		return SNAP_G_ADD_FINALIZER;
	if (!*content->ref_uid || (!content->class_name && g->class_name))
		return SNAP_G_BIND;
	if (!content->meta.deletion_ts && !kube_obj_has_finalizer(&content->meta, SNAP_GFIN_CONTENT))
		return SNAP_G_ADD_CONTENT_FINALIZER;
	return plan_status(g, content, members_done);
}

enum snap_group_step snap_plan_group(const struct kube_vgs *g, const struct kube_vgsc *content,
				     bool members_done)
{
	if (!g->source_content == !g->selector)
		return SNAP_G_INVALID;
	if (g->source_content)
		return plan_preprovisioned(g, content, members_done);
	if (!content)
		return g->bound_content ? SNAP_G_NOTHING : SNAP_G_CREATE_CONTENT;
	if (!snap_group_ref_is(content, g))
		return SNAP_G_NOTHING; /* a stranger holds the name: upstream waits too */
	if (!kube_obj_has_finalizer(&g->meta, SNAP_GFIN_BOUND))
		return SNAP_G_ADD_FINALIZER;
	if (content->ready == KUBE_COND_TRUE && content->status_handle && !members_done)
		return SNAP_G_CREATE_MEMBERS;
	return plan_status(g, content, members_done);
}

enum snap_group_sidecar_step snap_plan_group_sidecar(const struct kube_vgsc *c)
{
	bool fin = kube_obj_has_finalizer(&c->meta, SNAP_GFIN_CONTENT);

	/* a bound content goes once snapshot-controller has seen its group go (its annotation),
	 * as for single snapshots, and never while a CreateVolumeGroupSnapshot has no final answer
	 * (being-created: the driver may still cut the group); an unbound one as soon as it is
	 * deleted */
	bool unbound_pre = c->group_handle && !*c->ref_uid;
	if (c->meta.deletion_ts && (unbound_pre || (!c->being_created &&
						    (c->being_deleted || !*c->ref_uid)))) {
		if (!fin)
			return SNAP_GSC_NOTHING;
		if (c->policy == KUBE_SNAP_DELETE && c->status_handle)
			return SNAP_GSC_DELETE;
		return SNAP_GSC_REMOVE_FINALIZER;
	}
	/* a pre-provisioned content is asked about whether bound or not, as upstream; its
	 * finalizer is snapshot-controller's, once bound */
	if (c->group_handle)
		return c->ready == KUBE_COND_TRUE ? SNAP_GSC_NOTHING : SNAP_GSC_GET;
	if (!fin)
		return SNAP_GSC_ADD_FINALIZER;
	if (c->ready == KUBE_COND_TRUE)
		return c->being_created ? SNAP_GSC_CLEAR_CREATING : SNAP_GSC_NOTHING;
	return SNAP_GSC_CREATE;
}
