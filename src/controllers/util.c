/* util: the worker pool and the small API helpers the queue-driven controllers share. */
#include "controllers/cm.h"

#include "base/log.h"
#include "base/xalloc.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

void cm_pool_init(struct cm_pool *p, const char *name, const struct cm_config *cfg,
		  enum cm_result (*sync)(void *self, const char *key), void *self)
{
	memset(p, 0, sizeof(*p));
	p->q = kube_workqueue_new(name, cfg->kube.retry_start_ns, cfg->kube.retry_max_ns);
	p->sync = sync;
	p->self = self;
}

static void *pool_main(void *arg)
{
	struct cm_pool *p = arg;
	char *key;

	while ((key = kube_workqueue_get(p->q))) {
		enum cm_result r = p->sync(p->self, key);

		if (r == CM_DONE)
			kube_workqueue_forget(p->q, key);
		else if (r == CM_CONFLICT)
			kube_workqueue_add(p->q, key);
		else
			kube_workqueue_add_rate_limited(p->q, key);
		kube_workqueue_done(p->q, key);
		free(key);
	}
	return NULL;
}

int cm_pool_start(struct cm_pool *p, int workers)
{
	p->threads = xcalloc((size_t)workers, sizeof(*p->threads));
	for (int i = 0; i < workers; i++) {
		if (pthread_create(&p->threads[i], NULL, pool_main, p))
			return -1;
		p->n++;
	}
	return 0;
}

void cm_pool_stop(struct cm_pool *p)
{
	kube_workqueue_shutdown(p->q);
	for (int i = 0; i < p->n; i++)
		pthread_join(p->threads[i], NULL);
	p->n = 0;
}

void cm_pool_free(struct cm_pool *p)
{
	free(p->threads);
	kube_workqueue_free(p->q);
}

json_t *cm_finalizers_json(const struct kube_obj *o, const char *drop, const char *add)
{
	json_t *a = json_array();

	for (uint16_t i = 0; i < o->nfinalizers; i++)
		if (!drop || strcmp(o->finalizers[i], drop))
			json_array_append_new(a, json_string(o->finalizers[i]));
	if (add)
		json_array_append_new(a, json_string(add));
	return a;
}

int cm_patch(struct cm_ctx *c, const struct kube_resource *r, const char *ns, const char *name,
	     bool status, json_t *patch, struct kube_err *e)
{
	char *body = json_dumps(patch, JSON_COMPACT);
	json_t *res = kube_patch(c->kc, r, ns, name, status, KUBE_PATCH_MERGE, body, e);

	free(body);
	if (!res)
		return -1;
	json_decref(res);
	return 0;
}

enum cm_result cm_result_of(const struct kube_err *e)
{
	if (kube_err_is_conflict(e))
		return CM_CONFLICT;
	if (kube_err_is_not_found(e))
		return CM_DONE;
	return CM_RETRY;
}
