/*
 * ad_ctrl: the attach/detach controller's own state and the functions its files share
 * (attachdetach.c: the loop, planning, node status writes, life cycle; ad_state.c: the desired
 * state from the caches and the actual state's entries, start-up and periodic sync; ad_ops.c:
 * the attach and detach operations and their workers). Not for other controllers: ad.h is the
 * controller's interface, this is its inside.
 */
#ifndef KCSI_CONTROLLERS_AD_CTRL_H
#define KCSI_CONTROLLERS_AD_CTRL_H

#include "controllers/ad.h"
#include "controllers/cm.h"

#include "base/log.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "kube/hmap.h"
#include "kube/objects.h"
#include "kube/store.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#define AD_LOOP_PERIOD_NS (100 * NSEC_PER_MSEC)
#define AD_OP_TIMEOUT_NS (2 * NSEC_PER_MIN) /* the CSI plugin's wait for a VolumeAttachment */
#define AD_BACKOFF_START_NS (500 * NSEC_PER_MSEC)
#define AD_BACKOFF_MAX_NS (122 * NSEC_PER_SEC)

/* One (volume, node) pair of the actual state. Key: "<uniq>\n<node>". */
struct ad_entry {
	char *uniq, *node, *driver, *handle, *pv;
	uint8_t state; /* enum ad_attach_state */
	bool mounted;
	bool reported; /* listed in the node's status.volumesAttached (or about to be) */
	int64_t detach_requested_ns;
};

enum op_kind { OP_ATTACH, OP_DETACH };
enum op_phase { OP_QUEUED, OP_WAITING, OP_GONE, OP_FAILED };

/* An operation on one volume (key: uniq), from dispatch until the loop sees it finish. */
struct ad_op {
	struct ad_op *next; /* worker queue */
	uint8_t kind, phase, forced;
	bool worked; /* the worker made its API call: the loop may look at phase */
	char *uniq, *node, *driver, *handle, *pv;
	char va[80];
	char err[512];
	int64_t started_ns;
	struct kube_obj **pods; /* attach: the pods to tell (references) */
	size_t npods;
};

struct ad_backoff {
	int64_t until_ns, delay_ns;
};

/* A desired pair built by one pass, with the pods that want it. */
struct ad_want {
	struct ad_desired d;
	char *uniq, *node, *driver, *handle, *pv;
	struct kube_obj **pods;
	size_t npods, cap;
};

struct ad_ctrl {
	struct cm_ctx *cm;
	struct kube_recorder *rec; /* as "attachdetach-controller", upstream's source */
	enum ad_va_naming naming;
	int64_t sync_ns, max_wait_ns;
	bool sync_enabled;
	int nworkers;

	pthread_mutex_t mu;
	pthread_cond_t wake, work;
	bool dirty, stop, started;
	struct kube_hmap actual;  /* pair key -> struct ad_entry */
	struct kube_hmap ops;     /* uniq -> struct ad_op */
	struct kube_hmap backoff; /* uniq -> struct ad_backoff */
	struct kube_hmap nodes_dirty;  /* node -> (void *)1: volumesAttached must be written */
	struct kube_hmap multi_told;   /* "<pod uid>\n<uniq>" -> pass number last told */
	uint64_t pass;
	struct ad_op *qhead, *qtail;
	pthread_t loop;
	pthread_t *workers;

	/* Counters for /metrics. */
	atomic_ullong attach_ok, attach_failed, detach_ok, detach_failed, forced_timeout,
		forced_oos, multi_attach, status_writes;
	atomic_ulong ndesired, nactual;
};

void adc_pair_key(const char *uniq, const char *node, char *buf, size_t len);
char *adc_dup_or_null(const char *s);
void adc_entry_free(struct ad_entry *e);
void adc_op_free(struct ad_op *op);
void adc_want_free(struct ad_want *w, size_t n);
bool adc_node_uses(const struct kube_node *n, const char *uniq);
struct ad_entry *adc_entry_put(struct ad_ctrl *c, const char *uniq, const char *node,
				  const char *driver, const char *handle, const char *pv);
void adc_entry_del(struct ad_ctrl *c, const char *uniq, const char *node);
void adc_mark_node(struct ad_ctrl *c, const char *node);
void adc_pod_event(struct ad_ctrl *c, const struct kube_obj *pod, enum kube_event_type type,
		      const char *reason, const char *msg);
struct ad_want *adc_want_find(struct ad_want *w, size_t n, struct kube_hmap *idx,
				 const char *key);
struct ad_want *adc_build_desired(struct ad_ctrl *c, size_t *nout);
void adc_enqueue_op(struct ad_ctrl *c, struct ad_op *op);
void adc_do_attach(struct ad_ctrl *c, struct ad_op *op);
void adc_do_detach(struct ad_ctrl *c, struct ad_op *op);
void *adc_worker_main(void *arg);
void adc_backoff_fail(struct ad_ctrl *c, const char *uniq);
void adc_backoff_forget(struct ad_ctrl *c, const char *uniq);
void adc_attach_done(struct ad_ctrl *c, struct ad_op *op, const char *err);
void adc_detach_done(struct ad_ctrl *c, struct ad_op *op, const char *err);
void adc_finish_ops(struct ad_ctrl *c, int64_t now);
struct ad_op *adc_op_new(enum op_kind kind, const char *uniq, const char *node,
			    const char *driver, const char *handle, const char *pv);
void adc_sync_states(struct ad_ctrl *c);
void adc_populate_actual(struct ad_ctrl *c);

#endif
