/*
 * kcsi up: the whole CSI storage stack of a Kubernetes cluster on one machine, as real processes
 * under one work directory:
 *
 *   kube-emulator                           the API server
 *   <driver> in controller mode             + csi-provisioner, csi-attacher, csi-resizer (loop
 *                                             driver only), livenessprobe
 *   kcsi-controller-manager                 attach/detach, PV binder, protection, volume-scheduler
 *   per node N: <driver> in node mode       + csi-node-driver-registrar, livenessprobe, kcsi-node
 *   (above 16 nodes: one node-mode driver, one registrar and one kcsi-node for all; up/fleet.h)
 *
 * Layout of the work directory D:
 *   D/kubeconfig            for kubectl (KUBECONFIG=D/kubeconfig)
 *   D/logs/<name>.log       every process's output
 *   D/pool/                 the loop driver's volume images (shared by every node)
 *   D/controller/csi.sock   the controller-mode driver socket
 *   D/nodes/N/plugins/<driver>/csi.sock, D/nodes/N/kubelet/   a node's driver socket and root dir
 *   D/ready                 written once the stack is ready (for scripts)
 *   D/kube-emulator.state   kube-emulator's --state-file (and .log, .lock): a killed emulator
 *                           is restarted on the same address with every object and the
 *                           resourceVersion counter it had; removed at the next run's start
 *   D/kcsi-up.lock          flock()ed for the run's whole life, with its PID: a second kcsi up
 *                           on D is refused before it touches anything (base/lockfile.h)
 *
 * --provisioning=distributed: no controller-mode driver; each node's driver runs all services at
 * D/nodes/N/csi.sock with its own csi-provisioner --node-deployment (and csi-attacher).
 * --kubeconfig: no kube-emulator; the objects kcsi up makes on that API server (CSIDriver, each
 * node's Node, CSINode, Lease) are listed and deleted, newest first, after the processes stop.
 * With --install-snapshot-crds the snapshot CRDs it creates there (up/crds.h) are deleted last.
 *
 * A component that exits is restarted with a back-off; after restart_limit failures in a row it is
 * given up and the rest keeps running. kube-emulator comes back whole: same address, same objects
 * (its state file), and what kcsi up made there (CSIDriver; Nodes and CSINodes through kcsi-node)
 * made again if missing; when its port was taken meanwhile, the stack stops (exit 1). Only the core components end the stack when given up:
 * the API server (kube-emulator), which everything talks to, and kcsi-controller-manager, without
 * which no claim is bound, no volume attached and no pod scheduled on any node. Every other
 * component serves one driver instance or one node, and the others still work without it.
 *
 * up_run() blocks until SIGINT or SIGTERM, then stops every process, unmounts whatever is still
 * mounted under D, detaches loop devices whose image lives under D, and (for a temporary D that
 * the caller did not name) removes D.
 */
#ifndef KCSI_UP_UP_H
#define KCSI_UP_UP_H

#include <stdbool.h>
#include <stdint.h>

struct up_config {
	const char *dir;        /* work directory; NULL or "" makes a temporary one */
	bool keep;              /* keep a temporary dir at exit */
	int nodes;              /* 1..UP_FLEET_MAX; above UP_FLEET_ABOVE: fleet mode (up/fleet.h) */
	const char *driver;     /* "loop" */
	const char *driver_cmd; /* overrides driver: "CMD {endpoint} {nodeid} {mode}" */
	const char *bin_dir;    /* where the kcsi binaries are; NULL: next to this executable */
	const char *listen;     /* the emulator's address */
	int verbosity;          /* -v given to every component */
	int64_t ready_timeout_ns;
	const char *kubeconfig; /* an existing API server instead of kube-emulator; NULL: none */
	bool no_controllers;    /* with kubeconfig: the cluster's own controllers and scheduler */
	bool distributed;       /* --provisioning=distributed: no controller-mode driver */
	bool install_snapshot_crds; /* with kubeconfig: create the missing snapshot CRDs */
	int restart_limit;      /* failures in a row before a component is given up; 0: never */
};

/* Returns the process exit code: 0 after a clean stop, 1 when the stack could not start or a core
 * component was given up. */
int up_run(const struct up_config *cfg);

/*
 * Unmounts every mount below dir (deepest first) and detaches every loop device whose backing
 * file is below dir. Returns how many it could not undo (reported on stderr). Exposed for tests.
 */
int up_cleanup_dir(const char *dir);

#endif
