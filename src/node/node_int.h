/*
 * node_int: what the parts of kcsi-node share (run.c, plugins.c, volumes.c). Not a public API.
 *
 * Ownership: struct nd owns the client, recorder, informers and the driver table. A driver
 * entry is reference-counted: nd_driver_get() returns a counted reference (or NULL) that the
 * caller drops with nd_driver_put(), so a volume operation can keep using a connection while
 * the plugin watcher deregisters the driver.
 */
#ifndef KCSI_NODE_INT_H
#define KCSI_NODE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "csi/client.h"
#include "kube/client.h"
#include "kube/events.h"
#include "kube/informer.h"
#include "node/node.h"

struct nd_driver {
	int refs;          /* guarded by nd.lock */
	char *name;
	char *endpoint;
	char *reg_socket;  /* the registration socket it came from */
	char *node_id;
	struct csi_conn *conn;
	bool stage_unstage;
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
};

/* plugins.c */
int nd_plugins_start(struct nd *nd);
/* Stops the watcher; -1 when it is stuck in a call to a driver (the caller then exits at once). */
int nd_plugins_stop(struct nd *nd);
struct nd_driver *nd_driver_get(struct nd *nd, const char *name);
void nd_driver_put(struct nd *nd, struct nd_driver *d);
/* Creates the node's CSINode (no drivers) if missing, owned by the Node. */
void nd_csinode_ensure(struct nd *nd);

/* volumes.c */
int nd_volumes_start(struct nd *nd);
/* Stops the thread; -1 when it is stuck in a CSI call (the caller then exits at once). */
int nd_volumes_stop(struct nd *nd);


#endif
