/* util: the worker pool and the small API helpers the queue-driven controllers share. */
#include "controllers/cm.h"

#include "base/log.h"
#include "base/timeutil.h"
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

static enum kube_work_result pool_work(void *arg, const char *key)
{
	struct cm_pool *p = arg;
	return (enum kube_work_result)p->sync(p->self, key);
}

int cm_pool_start(struct cm_pool *p, int workers)
{
	struct kube_serve sv = { p->q, workers, pool_work, p };
	char err[200];

	if (kube_workqueue_serve(&sv, 1, KUBE_WORKER_IDLE_NS, err, sizeof(err))) {
		KLOG_E("%s", err);
		return -1;
	}
	return 0;
}

void cm_pool_stop(struct cm_pool *p)
{
	kube_workqueue_shutdown(p->q);
	kube_workqueue_wait_workers(p->q);
}

void cm_pool_free(struct cm_pool *p)
{
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
