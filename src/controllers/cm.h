/*
 * kcsi-controller-manager: the controllers of kube-controller-manager that kcsi's storage stack
 * needs (attachdetach, persistentvolume-binder, pvc-protection, pv-protection, nodelifecycle)
 * and, for emulated clusters, a volume-aware scheduler (volume-scheduler).
 *
 * Shape: one struct cm_ctx per process holds the kube client, the event recorder and one shared
 * informer per kind (created on first use, started once after every controller registered its
 * handlers), as kube-controller-manager's shared informer factory does. Each controller is a
 * struct cm_controller (a table of functions) in its own file; cm_run() picks them with
 * --controllers, starts them when this process leads, and stops them on SIGTERM.
 *
 * Ownership: cm_ctx owns the informers; controllers borrow the context and their stores.
 */
#ifndef KCSI_CONTROLLERS_CM_H
#define KCSI_CONTROLLERS_CM_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/flags.h"
#include "base/passloop.h" /* the pass thread of taint eviction, podgc, nodelifecycle */
#include "base/strbuf.h"
#include "kube/client.h"
#include "kube/events.h"
#include "kube/informer.h"
#include "kube/options.h"
#include "kube/workqueue.h"

struct cm_config {
	struct kube_options kube; /* --kubeconfig, --kube-api-qps, ..., --leader-election* */
	const char *controllers;  /* --controllers */
	const char *http_endpoint;
	bool leader_elect;        /* --leader-elect, kube-controller-manager's spelling */
	/* attachdetach */
	int64_t ad_sync_ns;       /* --attach-detach-reconcile-sync-period */
	bool ad_disable_sync;     /* --disable-attach-detach-reconcile-sync */
	int64_t ad_max_wait_ns;   /* --max-wait-for-unmount */
	bool ad_no_force_detach;  /* --disable-force-detach-on-timeout */
	const char *va_naming;    /* --va-naming kubernetes|seed */
	int ad_workers;           /* --attach-detach-workers */
	/* persistentvolume-binder */
	int64_t pv_sync_ns;       /* --pvclaimbinder-sync-period */
	/* volume-scheduler */
	const char *scheduler_name; /* --scheduler-name */
	/* nodelifecycle */
	int64_t node_monitor_period_ns;  /* --node-monitor-period */
	int64_t node_monitor_grace_ns;   /* --node-monitor-grace-period */
	int64_t node_startup_grace_ns;   /* --node-startup-grace-period */
	double node_eviction_rate;       /* --node-eviction-rate (nodes/s, a healthy zone) */
	double secondary_eviction_rate;  /* --secondary-node-eviction-rate (a disrupted zone) */
	double unhealthy_zone_threshold; /* --unhealthy-zone-threshold */
	int large_cluster_threshold;     /* --large-cluster-size-threshold */
};

enum cm_kind { CM_PODS, CM_NODES, CM_PVS, CM_PVCS, CM_SCS, CM_VAS, CM_CSIDRIVERS, CM_CSINODES,
	       CM_LEASES, /* kube-node-lease only: the nodes' heartbeats */
	       CM_NKINDS };

#define CM_MAX_RECORDERS 8

struct cm_ctx {
	const struct cm_config *cfg;
	struct kube_client *kc;
	struct kube_recorder *rec; /* the one queue and thread; controllers record through views */
	struct kube_recorder *views[CM_MAX_RECORDERS]; /* cm_recorder()'s, freed before rec */
	const char *view_names[CM_MAX_RECORDERS];
	size_t nviews;
	struct kube_informer *inf[CM_NKINDS];
};

/* The shared informer of a kind (created on first call; handlers only before cm_start_informers).
 * Indexes: the pods' by spec.nodeName (CM_PODS_BY_NODE), the claims' by spec.volumeName. */
#define CM_PODS_BY_NODE "node"
struct kube_informer *cm_informer(struct cm_ctx *c, enum cm_kind k);
struct kube_store *cm_store(struct cm_ctx *c, enum cm_kind k);
/*
 * Starts every informer created so far and waits for their caches, asking interrupted(ud) every
 * 100 ms (a SIGTERM must not wait for an API server that never answers): 0, 1 when interrupted,
 * or -1 with err.
 */
int cm_start_informers(struct cm_ctx *c, bool (*interrupted)(void *ud), void *ud, char *err,
		       size_t errlen);
void cm_stop_informers(struct cm_ctx *c);
/*
 * The recorder a controller records its events with: source.component `component`, the name
 * its kube-controller-manager counterpart records as (a view of c->rec, created on first call
 * per name, so two controllers of one upstream name share it; call from init). NULL when the
 * context has no recorder (unit tests): kube_event_about() then records nothing.
 */
struct kube_recorder *cm_recorder(struct cm_ctx *c, const char *component);
void cm_recorders_free(struct cm_ctx *c); /* the views, then c->rec */
/* Registers on_add/on_update/on_delete that all call fn(ud) (a "something changed" kick). */
void cm_on_any_change(struct cm_ctx *c, enum cm_kind k, void (*fn)(void *ud), void *ud);

struct cm_controller {
	const char *name;
	bool default_on; /* enabled by "*" */
	/* Creates the controller and registers its informer handlers; NULL on error. */
	void *(*init)(struct cm_ctx *c);
	/* Starts its threads (caches are synced). */
	int (*start)(void *self);
	/* Stops its threads within a second; then free releases everything. */
	void (*stop)(void *self);
	void (*free)(void *self);
	void (*metrics)(void *self, struct strbuf *out); /* may be NULL */
	/* Its workqueues, for the workqueue_* metrics rendered once for all (may be NULL). */
	size_t (*queues)(void *self, struct kube_workqueue **out, size_t max);
};

extern const struct cm_controller cm_attachdetach;
extern const struct cm_controller cm_pv_binder;
extern const struct cm_controller cm_pvc_protection;
extern const struct cm_controller cm_pv_protection;
extern const struct cm_controller cm_volume_scheduler;
extern const struct cm_controller cm_nodelifecycle;
extern const struct cm_controller cm_taint_eviction;
extern const struct cm_controller cm_podgc;

/*
 * Whether --controllers enables `name`: kube-controller-manager's rules ("*" enables the default
 * ones, "name" enables one, "-name" disables one; the last word about a name wins, "-name" beats
 * "*"). Unknown names are reported by cm_check_controllers().
 */
bool cm_controller_enabled(const char *spec, const char *name, bool default_on);
/* 0, or -1 with the unknown name in err. */
int cm_check_controllers(const char *spec, const struct cm_controller *const *all, size_t n,
			 char *err, size_t errlen);

/* Registers every flag (kube-controller-manager's names where it has them). */
void cm_register_flags(struct flagset *fs, struct cm_config *cfg);
/* Runs until SIGTERM/SIGINT; returns the exit code. */
int cm_run(const struct cm_config *cfg);

/* ---- shared by the queue-driven controllers (util.c) ---- */

enum cm_result {
	CM_DONE = KUBE_WORK_DONE,         /* forget the key's backoff */
	CM_RETRY = KUBE_WORK_RETRY,       /* requeue with the key's exponential backoff */
	CM_CONFLICT = KUBE_WORK_AGAIN,    /* lost an optimistic-concurrency race: requeue at once */
	CM_LATER = KUBE_WORK_LATER,       /* the sync queued the key with a delay of its own */
};

/* A workqueue served by up to n threads (kube_workqueue_serve) calling sync(self, key). */
struct cm_pool {
	struct kube_workqueue *q;
	enum cm_result (*sync)(void *self, const char *key);
	void *self;
};

void cm_pool_init(struct cm_pool *p, const char *name, const struct cm_config *cfg,
		  enum cm_result (*sync)(void *self, const char *key), void *self);
int cm_pool_start(struct cm_pool *p, int workers);
/* Shuts the queue down and joins the threads (each finishes its current key). */
void cm_pool_stop(struct cm_pool *p);
void cm_pool_free(struct cm_pool *p);

/* JSON array of o's finalizers without `drop` and with `add` appended (either may be NULL). */
json_t *cm_finalizers_json(const struct kube_obj *o, const char *drop, const char *add);
/* Merge-patches an object (status: the /status subresource). Returns 0, or -1 with *e. */
int cm_patch(struct cm_ctx *c, const struct kube_resource *r, const char *ns, const char *name,
	     bool status, json_t *patch, struct kube_err *e);
/* CM_CONFLICT for a 409, CM_DONE for a 404 (the object is gone), else CM_RETRY. */
enum cm_result cm_result_of(const struct kube_err *e);

#endif
