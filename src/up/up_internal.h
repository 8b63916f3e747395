/*
 * up internal: the state of one `kcsi up` run, shared by its files (not a public header).
 *
 *   up.c       start order, readiness, the supervision loop and the whole life (up_run)
 *   objects.c  what the run writes to and reads from the API server: the CSIDriver, the node
 *              names it claims on an external cluster and their deletion at exit, node
 *              readiness, the snapshot API check (and CRDs, crds.c), and what is made again
 *              after kube-emulator restarted
 *   cleanup.c  mounts, loop devices and the temporary work dir left under D
 *   proc.c     the child processes and what starting them needs (directories, free ports;
 *              proc.h); crds.c the snapshot CRDs (crds.h)
 *
 * struct up is owned by up_run(); everything here runs on its one thread.
 */
#ifndef KCSI_UP_UP_INTERNAL_H
#define KCSI_UP_UP_INTERNAL_H

#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "kube/client.h"
#include "kube/config.h"
#include "up/crds.h"
#include "up/proc.h"
#include "up/up.h"

/* An HTTP endpoint that answers 200 once a component is past its start-up. */
struct up_probe {
	const struct up_proc *proc;
	int port;
	const char *path;
};

struct up {
	const struct up_config *cfg;
	char dir[PATH_MAX];
	char bin[PATH_MAX];
	char kubeconfig[PATH_MAX + 16];
	char driver_name[256];
	bool attach_required;
	bool snapshots; /* the driver has CREATE_DELETE_SNAPSHOT: csi-snapshotter runs beside it */
	int lock_fd;   /* holds D/kcsi-up.lock (base/lockfile.h) for the whole run */
	bool temp_dir;
	bool external; /* --kubeconfig: someone else's API server, which outlives us */
	bool no_snapshot_api; /* the API server serves no snapshot.storage.k8s.io/v1 (no CRDs) */
	bool no_group_api;    /* ... nor groupsnapshot.storage.k8s.io/v1: no group gate */
	struct up_crds crds;  /* the snapshot CRDs this run installed (--install-snapshot-crds) */
	const struct up_proc *first_driver; /* the one learn_driver() asks */
	struct kube_config *kcfg;
	struct kube_client *kc;
	/* Objects this run made on an external API server, deleted in reverse order at exit. */
	struct up_created {
		const struct kube_resource *res;
		const char *ns;
		char name[256];
	} created[2 + 3 * 16]; /* CSIDriver, attacher Lease, 3 per node */
	int ncreated;
	struct up_procs procs;
	struct up_probe probes[UP_MAX_PROCS];
	int nprobes;
	sigset_t sigs;
	int64_t t0;
	char node_env[32]; /* while set, start_kcsi() gives the child NODE_NAME=<it> */
	/*
	 * KUBE_QPS and KUBE_BURST (up.c): 200 and 400; with a fleet of nodes (up/fleet.h) 2000 and
	 * 4000, since a thousand pods' claims, attachments and bindings are ten times the requests.
	 */
	char kube_qps[32], kube_burst[32];
	/*
	 * kube-emulator (NULL with --kubeconfig): restarted on the address of its first start, with
	 * its state file (D/kube-emulator.state); api_checked is the start (start_ns) after which
	 * up_restore_objects() last succeeded, api_next_check when it may try again.
	 */
	struct up_proc *apiserver;
	int64_t api_checked, api_next_check;
	/* up_restore_objects()'s client: 1 s per request, one retry, so that an API server that
	 * takes connections and never answers (its port taken by another process) holds the
	 * supervision loop for 2 s at most, not the minute of u->kc's retries */
	struct kube_client *kc_quick;
};

/* ---- objects.c ---- */

/* Notes an object this run created on an external API server, for up_delete_created(). */
void up_remember(struct up *u, const struct kube_resource *res, const char *ns, const char *name);
/* Deletes them, newest first (404 is fine); returns how many could not be deleted (reported). */
int up_delete_created(struct up *u);
/* The driver's CSIDriver object (an existing one is left as it is); 0 or -1 (reported). */
int up_create_csidriver(struct up *u, struct kube_client *kc);
/* External cluster: node-1..N must not exist yet; they become ours to delete. 0 or -1. */
int up_claim_node_names(struct up *u);
/* Whether a process of driver instance `instance` ("node-1", "controller") was given up. */
bool up_instance_given_up(const struct up *u, const char *instance);
/* Every node Ready with the driver in its CSINode (nodes with a component given up aside). */
bool up_nodes_ready(struct up *u, struct kube_client *kc);
/*
 * After kube-emulator restarted: once it answers, the CSIDriver is created again if missing, and
 * each node whose Node or CSINode is missing gets its kcsi-node restarted (which registers both;
 * with a fleet, the one kcsi-node of all nodes). 0 when all is in place (said on stdout), 1 when
 * the API server does not answer yet, -1 when something failed (reported): try again later.
 */
int up_restore_objects(struct up *u, bool fleet);
/* External cluster: decides whether the snapshot components run (and installs the CRDs with
 * --install-snapshot-crds); -1 when installing failed. */
int up_check_snapshot_api(struct up *u, int64_t deadline);

/* ---- cleanup.c ---- */

/* Removes a tree without crossing into another filesystem (a mount left behind stays intact). */
int up_remove_tree(const char *path, dev_t dev);

#endif
