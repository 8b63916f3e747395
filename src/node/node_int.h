/*
 * node_int: what the parts of kcsi-node share (run.c, plugins.c, volumes.c, expand.c, stats.c,
 * shared.c below the last three; resize.h holds expand.c's pure rules). Not a public API.
 *
 * Ownership: struct nd owns the client, recorder, informers and the driver table. A driver
 * entry is reference-counted: nd_driver_get() returns a counted reference (or NULL) that the
 * caller drops with nd_driver_put(), so a volume operation can keep using a connection while
 * the plugin watcher deregisters the driver.
 */
#ifndef KCSI_NODE_INT_H
#define KCSI_NODE_INT_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/strbuf.h"
#include "csi/client.h"
#include "csi/msg.h"
#include "kube/client.h"
#include "kube/events.h"
#include "kube/informer.h"
#include "kube/objects.h"
#include "node/node.h"
#include "node/status.h"

struct nd_driver {
	int refs;          /* guarded by nd.lock */
	char *name;
	char *endpoint;
	char *reg_socket;  /* the registration socket it came from */
	char *node_id;
	struct csi_conn *conn;
	bool stage_unstage;    /* node capabilities (NodeGetCapabilities at registration) */
	bool expand;           /* EXPAND_VOLUME */
	bool volume_stats;     /* GET_VOLUME_STATS */
	bool snmw;             /* SINGLE_NODE_MULTI_WRITER: gets SINGLE_NODE_SINGLE/MULTI_WRITER */
};

#define ND_MAX_DRIVERS 64

struct nd {
	struct nd_config *cfg;
	struct kube_client *kc;
	struct kube_recorder *rec;
	struct kube_informer *pods, *nodes, *pvs, *pvcs, *csidrivers;
	pthread_mutex_t lock; /* drivers[] */
	struct nd_driver *drivers[ND_MAX_DRIVERS];
	int ndrivers;
	atomic_int stop;
	char *registry_dir; /* <root>/plugins_registry */
	struct nd_stats *stats; /* the last volume stats, for /metrics (stats.c) */
	struct nd_machine machine;          /* read once at start (status.c) */
	struct nd_resources capacity, allocatable;
	char since[32];                     /* RFC 3339: when this process found the node Ready */
	pthread_t vm_thread, watcher;       /* volumes.c's and plugins.c's threads */
	bool vm_started, watcher_started;
};

/*
 * run.c: the node's own objects, for run.c's heartbeat loop and fleet.c's. Register creates the
 * Node or merges our labels and annotation (0, or -1 logged); status is the whole Node status as
 * a merge patch; renew creates or renews the node's Lease in kube-node-lease.
 */
int nd_node_register(struct nd *nd);
void nd_node_set_status(struct nd *nd);
void nd_lease_renew(struct nd *nd);
/*
 * The node's root dir (nd->cfg->root_dir, made when missing), owned by this process until it
 * exits: an flock() on <root>/kcsi-node.lock (base/lockfile.h) taken before anything under it
 * is written or removed, since a second kcsi-node there would take the first's pods' volumes
 * for orphans and unmount them. Then plugins_registry (nd->registry_dir). 0, or -1 logged (a
 * second one is told the holder's PID).
 */
int nd_root_open(struct nd *nd);
/*
 * The heartbeats' life (run.c's and fleet.c's): beat(arg) runs on its own thread, polling *stop,
 * while the calling thread only waits for SIGTERM or SIGINT in set, so a Lease or status write
 * that hangs (an API server that accepts and never answers) cannot hold the signal up. Then
 * *stop is set and the thread gets 300 ms to return; else the process exits at once with rc.
 */
void nd_beat_until_signal(void *(*beat)(void *), void *arg, atomic_int *stop, const sigset_t *set,
			  int rc);

/* The pod informer's index by spec.nodeName (kube_index_pod_by_node), registered by run.c and
 * fleet.c: a volume manager pass reads its node's pods only, not every pod of the cluster. */
#define ND_PODS_BY_NODE "nodeName"

/* plugins.c */
int nd_plugins_start(struct nd *nd);
/* Stops the watcher; -1 when it is stuck in a call to a driver (the caller then exits at once). */
int nd_plugins_stop(struct nd *nd);
struct nd_driver *nd_driver_get(struct nd *nd, const char *name);
void nd_driver_put(struct nd *nd, struct nd_driver *d);
/* Creates the node's CSINode (no drivers) if missing, owned by the Node. */
void nd_csinode_ensure(struct nd *nd);

/* shared.c: below volumes.c, expand.c and stats.c, which all use it; calls none of them. */
/*
 * The CSI access mode the kubelet sends for a Kubernetes one (one enum kube_access_mode bit; 0
 * is taken as ReadWriteOnce) to a driver with (snmw) or without the SINGLE_NODE_MULTI_WRITER
 * node capability: the rule csi/msg.h holds for every component.
 */
#define nd_csi_access_mode(mode, snmw) csi_access_mode_of_k8s(kube_access_mode_name(mode), (snmw))
/* The volume capability the kubelet sends for a PV: its first access mode, block or mount +
 * fsType and mount options. */
Csi__V1__VolumeCapability *nd_pv_capability(struct csi_arena *a, const struct kube_pv *pv,
					     bool snmw);
/* The same from its parts (an inline volume has no PV: RWO, mount, its fsType). */
Csi__V1__VolumeCapability *nd_capability_of(struct csi_arena *a, uint8_t mode, bool snmw,
					     bool block, const char *fs, const char *const *opts,
					     uint16_t nopts);
/* A Warning (or Normal) Event on the pod (or any record), reason and message as given. */
#define nd_event(nd, about, warning, reason, ...)                                              \
	kube_event_about((nd)->rec, (about), (warning) ? KUBE_EVENT_WARNING : KUBE_EVENT_NORMAL, \
			 (reason), __VA_ARGS__)

/* volumes.c */
int nd_volumes_start(struct nd *nd);
/* Stops the thread; -1 when it is stuck in a CSI call (the caller then exits at once). */
int nd_volumes_stop(struct nd *nd);

/*
 * expand.c: node expansion of one volume of one pod (resize.h decides). `done_size`,
 * `failed_size`, `next_try` and `delay` are the caller's memory of this volume across passes.
 * at_mount: just staged (offline expansion, volume_path = the staging path); otherwise the
 * volume is published and volume_path is the pod's publish path.
 * Returns 0 when the mount may go on (nothing to do, done, or a final answer), -1 when a
 * retryable failure must hold it back (events and backoff done here).
 */
struct nd_expand {
	const struct kube_pod *pod;
	const struct kube_pv *pv;
	const char *spec;                       /* the PV's name, in messages */
	const char *volume_path, *staging_path; /* staging_path NULL when the driver does not stage */
	bool readonly, at_mount;
	int64_t *done_size, *failed_size, *next_try, *delay;
};
int nd_expand_volume(struct nd *nd, struct nd_driver *drv, struct nd_expand *x);

/*
 * stats.c: NodeGetVolumeStats for the published volumes of the pods, every
 * --volume-stats-agg-period, kept for /metrics as the kubelet_volume_stats_* gauges.
 */
struct nd_stats_volume {
	const struct kube_pod *pod;
	const char *claim;       /* the pod's claim name (metrics label) */
	const char *pod_volume;  /* the pod's volume name (event message) */
	const char *driver, *handle, *target, *staging;
};
struct nd_stats *nd_stats_new(void);
void nd_stats_free(struct nd_stats *s);
void nd_stats_collect(struct nd *nd, const struct nd_stats_volume *v, size_t n);
void nd_stats_render(struct nd_stats *s, struct strbuf *out);


#endif
