/*
 * The registrar's many-nodes mode (fleet.c): one process registers a driver for N emulated
 * nodes, each over its own registration socket; the trade-off against N registrars is in
 * fleet.c's top comment.
 */
#ifndef KCSI_REGISTRAR_FLEET_H
#define KCSI_REGISTRAR_FLEET_H

#include "base/flags.h"
#include "registrar/registrar.h"

/* --fleet-size (0: the normal registrar) and --fleet-node-prefix. */
void reg_fleet_register_flags(struct flagset *fs, int *size, const char **prefix);
/* Runs until SIGTERM/SIGINT (0) or a failed registration or socket (1). */
int reg_fleet_run(const struct reg_config *cfg, int size, const char *prefix);

#endif
