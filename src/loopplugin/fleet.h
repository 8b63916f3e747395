/*
 * kcsi-loopplugin's many-nodes mode (fleet.c): the node service of N emulated nodes from one
 * process, each on its own socket with its own node ID.
 */
#ifndef KCSI_LOOPPLUGIN_FLEET_H
#define KCSI_LOOPPLUGIN_FLEET_H

#include <signal.h>

#include "loopplugin/driver.h"

/*
 * Serves nodes <base->nodeid>-1..size, node i on `endpoint` with {node} replaced by its ID,
 * until SIGTERM/SIGINT (set is blocked in every thread). Returns the exit code: 0 after a clean
 * stop, 1 when a node cannot start, 2 for a bad combination of flags.
 */
int lp_fleet_serve(const struct lp_config *base, const char *endpoint, int size,
		   const sigset_t *set);

#endif
