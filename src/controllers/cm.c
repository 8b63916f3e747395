/*
 * cm: the controller-manager's shared informers and its --controllers rules.
 *
 * One informer per kind for the whole process, whichever controllers use it, so that a pod
 * is decoded and cached once. The pod informer keeps only pods that kcsi reads (the record
 * drops other fields); nothing is filtered by selector because every controller sees every pod.
 */
#include "controllers/cm.h"

#include "base/log.h"
#include "base/timeutil.h"
#include "base/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct kube_kind *const kinds[CM_NKINDS] = {
	[CM_PODS] = &KUBE_KIND_POD_T,
	[CM_NODES] = &KUBE_KIND_NODE_T,
	[CM_PVS] = &KUBE_KIND_PERSISTENTVOLUME,
	[CM_PVCS] = &KUBE_KIND_PERSISTENTVOLUMECLAIM,
	[CM_SCS] = &KUBE_KIND_STORAGECLASS,
	[CM_VAS] = &KUBE_KIND_VOLUMEATTACHMENT,
	[CM_CSIDRIVERS] = &KUBE_KIND_CSIDRIVER_T,
	[CM_CSINODES] = &KUBE_KIND_CSINODE_T,
	[CM_LEASES] = &KUBE_KIND_LEASE_T,
};

struct kube_informer *cm_informer(struct cm_ctx *c, enum cm_kind k)
{
	if (!c->inf[k]) {
		struct kube_informer_opts o = { .kind = kinds[k], .resync_ns = c->cfg->kube.resync_ns,
						.ns = k == CM_LEASES ? "kube-node-lease" : NULL };
		c->inf[k] = kube_informer_new(c->kc, &o);
		if (k == CM_PVCS)
			kube_informer_add_index(c->inf[k], "volume", kube_index_pvc_by_volume);
		if (k == CM_PODS)
			kube_informer_add_index(c->inf[k], CM_PODS_BY_NODE, kube_index_pod_by_node);
	}
	return c->inf[k];
}

struct kube_store *cm_store(struct cm_ctx *c, enum cm_kind k)
{
	return kube_informer_store(cm_informer(c, k));
}

int cm_start_informers(struct cm_ctx *c, bool (*interrupted)(void *ud), void *ud, char *err,
		       size_t errlen)
{
	struct kube_stop stop = { .fn = interrupted, .ud = ud };

	if (kube_informers_start(c->inf, CM_NKINDS, err, errlen))
		return -1;
	return kube_informers_wait_synced(c->inf, CM_NKINDS, NULL, &stop, 5 * NSEC_PER_MIN, err,
					  errlen);
}

void cm_stop_informers(struct cm_ctx *c)
{
	kube_informers_stop(c->inf, CM_NKINDS);
}

struct kube_recorder *cm_recorder(struct cm_ctx *c, const char *component)
{
	if (!c->rec)
		return NULL;
	for (size_t i = 0; i < c->nviews; i++)
		if (!strcmp(c->view_names[i], component))
			return c->views[i];
	/* one per controller file: more is a programming error, not input */
	if (c->nviews == CM_MAX_RECORDERS)
		KLOG_F("too many event recorders");
	c->view_names[c->nviews] = component;
	c->views[c->nviews] = kube_recorder_as(c->rec, component);
	return c->views[c->nviews++];
}

void cm_recorders_free(struct cm_ctx *c)
{
	for (size_t i = 0; i < c->nviews; i++)
		kube_recorder_free(c->views[i]);
	c->nviews = 0;
	if (c->rec)
		kube_recorder_free(c->rec);
	c->rec = NULL;
}

/* Up to 16 "something changed" callbacks: the informer handlers get a pointer to one slot. */
struct kick_slot {
	void (*fn)(void *ud);
	void *ud;
};
static struct kick_slot kick_slots[16];
static size_t nkick_slots;

static void kick_add(const struct kube_obj *o, void *ud)
{
	struct kick_slot *s = ud;
	(void)o;
	s->fn(s->ud);
}
static void kick_update(const struct kube_obj *old, const struct kube_obj *o, void *ud)
{
	struct kick_slot *s = ud;
	(void)old, (void)o;
	s->fn(s->ud);
}

void cm_on_any_change(struct cm_ctx *c, enum cm_kind k, void (*fn)(void *ud), void *ud)
{
	struct kick_slot *s;

	if (nkick_slots == sizeof(kick_slots) / sizeof(kick_slots[0]))
		KLOG_F("too many change callbacks");
	s = &kick_slots[nkick_slots++];
	s->fn = fn;
	s->ud = ud;
	struct kube_handlers h = { kick_add, kick_update, kick_add, s };
	kube_informer_add_handlers(cm_informer(c, k), &h);
}

/* kube-controller-manager's rule: the first word naming the controller decides; else "*"
 * enables the controllers that are on by default. */
bool cm_controller_enabled(const char *spec, const char *name, bool default_on)
{
	char *copy = xstrdup(spec ? spec : "*"), *save = NULL;
	bool star = false, decided = false, on = false;

	for (char *w = strtok_r(copy, ",", &save); w && !decided; w = strtok_r(NULL, ",", &save)) {
		while (*w == ' ')
			w++;
		if (!strcmp(w, name))
			on = true, decided = true;
		else if (w[0] == '-' && !strcmp(w + 1, name))
			on = false, decided = true;
		else if (!strcmp(w, "*"))
			star = true;
	}
	free(copy);
	return decided ? on : star && default_on;
}

int cm_check_controllers(const char *spec, const struct cm_controller *const *all, size_t n,
			 char *err, size_t errlen)
{
	char *copy = xstrdup(spec ? spec : "*"), *save = NULL;
	int rc = 0;

	for (char *w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
		const char *name = w[0] == '-' ? w + 1 : w;
		bool known = !strcmp(w, "*");

		for (size_t i = 0; i < n && !known; i++)
			known = !strcmp(all[i]->name, name);
		if (!known) {
			snprintf(err, errlen, "\"%s\" is not in the list of known controllers", w);
			rc = -1;
			break;
		}
	}
	free(copy);
	return rc;
}
