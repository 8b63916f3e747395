/*
 * state: what the workers, the CSI handler and the reconciler read from the controller's shared
 * state (the force-sync set, the PV and VA caches). Apart from controller.c, which starts the
 * reconciler, so that the reconciler depends on this file and not back on the controller.
 */
#include "attacher/att.h"

#include <pthread.h>

void att_set_force_sync(struct att_ctrl *c, const char *va)
{
	pthread_mutex_lock(&c->mu);
	kube_hmap_put(&c->force_sync, va, NULL);
	pthread_mutex_unlock(&c->mu);
}

bool att_consume_force_sync(struct att_ctrl *c, const char *va)
{
	bool had;

	pthread_mutex_lock(&c->mu);
	had = kube_hmap_has(&c->force_sync, va);
	if (had)
		kube_hmap_del(&c->force_sync, va);
	pthread_mutex_unlock(&c->mu);
	return had;
}

const struct kube_pv *att_get_pv(struct att_ctrl *c, const char *name)
{
	struct kube_obj *o = kube_store_get(kube_informer_store(c->pv_inf), NULL, name);
	const struct kube_pv *pv = kube_pv_of(o);

	if (!pv)
		kube_obj_unref(o);
	return pv;
}

bool att_pv_in_use(struct att_ctrl *c, const char *pv)
{
	size_t n = 0;
	struct kube_obj **v = kube_store_by_index(kube_informer_store(c->va_inf), "pv", pv, &n);

	kube_objs_free(v, n);
	return n > 0;
}
