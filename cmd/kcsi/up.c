/*
 * `kcsi up`: flags -> struct up_config -> up_run(). See src/up/up.h for what it starts.
 */
#include <stdio.h>
#include <string.h>

#include "base/flags.h"
#include "base/log.h"
#include "base/timeutil.h"
#include "cli.h"
#include "up/fleet.h"
#include "up/up.h"

int cli_up_main(int argc, char **argv)
{
	struct up_config c = { 0 };
	struct flagset *fs = flags_new("kcsi up", "kcsi up [flags]");
	flags_string(fs, "dir", &c.dir, "",
		     "Work directory (kubeconfig, logs, sockets, volume images); default a new temporary "
		     "directory, removed at exit");
	flags_bool(fs, "keep", &c.keep, false, "Keep the temporary work directory (and its logs) at exit");
	flags_int(fs, "nodes", &c.nodes, 2,
		  "Number of emulated nodes (1 to 5000): up to 16, each with its own driver, "
		  "registrar, livenessprobe and kcsi-node; above 16, one driver, one registrar and "
		  "one kcsi-node process serve all nodes, each node on its own sockets (central "
		  "provisioning, loop driver, kube-emulator only)");
	flags_string(fs, "driver", &c.driver, "loop", "Driver to run: loop (kcsi-loopplugin)");
	flags_string(fs, "driver-cmd", &c.driver_cmd, "",
		     "Run this CSI driver instead, through /bin/sh; {endpoint}, {nodeid} and {mode} "
		     "(controller, node, or all with --provisioning=distributed) are replaced, e.g. 'mydriver --endpoint {endpoint} --nodeid {nodeid}'");
	flags_string(fs, "bin-dir", &c.bin_dir, "", "Folder of the kcsi binaries; default the folder of this kcsi");
	flags_string(fs, "listen", &c.listen, "127.0.0.1:0",
		     "Address of the API server (kube-emulator); a restart of it reuses the port its first start bound");
	flags_string(fs, "kubeconfig", &c.kubeconfig, "",
		     "Run against this existing API server instead of starting kube-emulator; the Nodes, "
		     "CSINodes, node Leases and CSIDriver kcsi up creates there are deleted at exit; without "
		     "the snapshot CRDs there, the snapshot components are not started");
	flags_bool(fs, "install-snapshot-crds", &c.install_snapshot_crds, false,
		   "With --kubeconfig: create the snapshot CRDs (deploy/kubernetes/snapshot-crds) that "
		   "the cluster lacks, so snapshot-controller and csi-snapshotter run; the ones created "
		   "are deleted at exit");
	flags_int(fs, "restart-limit", &c.restart_limit, 5,
		  "Give up a component after this many failures in a row (restarted with a back-off "
		  "from 1 s to 30 s before that); the rest keeps running unless it is the API server or "
		  "kcsi-controller-manager, then kcsi up stops with status 1. 0: never give up");
	flags_bool(fs, "no-controllers", &c.no_controllers, false,
		   "With --kubeconfig: do not start kcsi-controller-manager; the cluster's own "
		   "kube-controller-manager and kube-scheduler attach, bind and schedule");
	const char *provisioning = NULL;
	flags_string(fs, "provisioning", &provisioning, "central",
		     "central: one controller-mode driver with csi-provisioner and csi-attacher; "
		     "distributed: every node's driver runs all services with its own csi-provisioner "
		     "--node-deployment (and csi-attacher), for drivers whose volumes live on one node");
	flags_int(fs, "component-v", &c.verbosity, 2, "Log verbosity (-v) of every component");
	flags_duration(fs, "ready-timeout", &c.ready_timeout_ns, 30 * NSEC_PER_SEC,
		       "How long to wait for the stack to be ready before giving up");
	int rest;
	char err[512];
	int code = 0;
	switch (flags_parse(fs, argc, argv, &rest, err, sizeof(err))) {
	case FLAGS_HELP:
		printf("kcsi up: run kube-emulator (or use --kubeconfig's API server) and the whole CSI\n"
		       "stack (provisioner, attacher, controller-manager, and per node a driver, registrar\n"
		       "and kcsi-node; above 16 nodes one of each serves all nodes) until Ctrl-C.\n\n");
		flags_print_usage(fs, stdout);
		goto out;
	case FLAGS_VERSION:
		goto out;
	case FLAGS_ERROR:
		fprintf(stderr, "kcsi up: %s\nRun 'kcsi up --help' for the flags.\n", err);
		code = EXIT_USAGE;
		goto out;
	case FLAGS_OK:
		break;
	}
	if (rest < argc) {
		fprintf(stderr, "kcsi up: unexpected argument %s\n", argv[rest]);
		code = EXIT_USAGE;
		goto out;
	}
	if (c.nodes < 1 || c.nodes > UP_FLEET_MAX) {
		fprintf(stderr, "kcsi up: --nodes %d: want 1 to %d\n", c.nodes, UP_FLEET_MAX);
		code = EXIT_USAGE;
		goto out;
	}
	if (strcmp(c.driver, "loop")) {
		fprintf(stderr, "kcsi up: --driver %s: the only built-in driver is loop; use --driver-cmd "
				"for another\n", c.driver);
		code = EXIT_USAGE;
		goto out;
	}
	if (c.ready_timeout_ns <= 0) {
		fprintf(stderr, "kcsi up: --ready-timeout must be positive\n");
		code = EXIT_USAGE;
		goto out;
	}
	if (!*c.driver_cmd)
		c.driver_cmd = NULL;
	if (!*c.kubeconfig)
		c.kubeconfig = NULL;
	if (c.no_controllers && !c.kubeconfig) {
		fprintf(stderr, "kcsi up: --no-controllers needs --kubeconfig (kube-emulator has no "
				"controllers of its own)\n");
		code = EXIT_USAGE;
		goto out;
	}
	if (c.install_snapshot_crds && !c.kubeconfig) {
		fprintf(stderr, "kcsi up: --install-snapshot-crds needs --kubeconfig (kube-emulator serves "
				"the snapshot kinds itself)\n");
		code = EXIT_USAGE;
		goto out;
	}
	if (c.restart_limit < 0) {
		fprintf(stderr, "kcsi up: --restart-limit %d: want 0 (never give up) or more\n",
			c.restart_limit);
		code = EXIT_USAGE;
		goto out;
	}
	if (strcmp(provisioning, "central") && strcmp(provisioning, "distributed")) {
		fprintf(stderr, "kcsi up: --provisioning %s: want central or distributed\n", provisioning);
		code = EXIT_USAGE;
		goto out;
	}
	c.distributed = !strcmp(provisioning, "distributed");
	if (up_fleet_wanted(c.nodes) && (c.distributed || c.driver_cmd || c.kubeconfig)) {
		fprintf(stderr, "kcsi up: --nodes above %d runs the loop driver with central "
				"provisioning on kube-emulator (no --provisioning=distributed, "
				"--driver-cmd or --kubeconfig)\n", UP_FLEET_ABOVE);
		code = EXIT_USAGE;
		goto out;
	}
	code = up_run(&c);
out:
	flags_free(fs);
	return code;
}
