/*
 * kcsi-node's many-nodes mode (fleet.c): N emulated nodes in one process, for `kcsi up --nodes`
 * above 16. What each node keeps of its own and what the nodes share is in fleet.c's top comment.
 */
#ifndef KCSI_NODE_FLEET_H
#define KCSI_NODE_FLEET_H

#include "base/flags.h"
#include "node/node.h"

/* --fleet-size: 0 (the default) is one node, the normal kcsi-node. */
void nd_fleet_register_flags(struct flagset *fs, int *size);
/* Runs `size` nodes named <cfg->node_name>-<i> until SIGTERM/SIGINT (0) or a failure (1). */
int nd_fleet_run(struct nd_config *cfg, int size);

#endif
