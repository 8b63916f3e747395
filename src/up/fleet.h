/*
 * up fleet: the node side of `kcsi up --nodes N` for N above UP_FLEET_ABOVE, as three processes
 * for all nodes (fleet.c's top comment says which and what each keeps per node). Central
 * provisioning with the loop driver on kube-emulator only: cmd/kcsi/up.c refuses the rest.
 */
#ifndef KCSI_UP_FLEET_H
#define KCSI_UP_FLEET_H

#include <stdbool.h>

#include "kube/client.h"
#include "up/proc.h"

#define UP_FLEET_ABOVE 16 /* up to this many nodes, each node is its own processes */
#define UP_FLEET_MAX 5000
#define UP_FLEET_PROBES 2

/* What up.c knows that the fleet's processes need; strings borrowed. */
struct up_fleet {
	const char *dir, *bin, *kubeconfig, *driver_name;
	const char *qps, *burst; /* "--kube-api-qps=..", "--kube-api-burst=.." */
	int nodes, verbosity;
	struct up_procs *procs;
};

/* An HTTP endpoint that answers 200 once a fleet process is ready (up.c's readiness probes). */
struct up_fleet_probe {
	const struct up_proc *proc;
	int port;
	const char *path;
};

bool up_fleet_wanted(int nodes);
/* Makes the nodes' folders and starts the three processes: 0, or -1 (reported on stderr). */
int up_fleet_start(const struct up_fleet *f, struct up_fleet_probe probes[UP_FLEET_PROBES]);
/* Every node-1..n Ready, with `driver` in its CSINode. */
bool up_fleet_nodes_ready(struct kube_client *kc, const char *driver, int n);

#endif
