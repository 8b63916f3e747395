/*
 * kcsi-node: the kubelet's CSI duties on one node, for emulated clusters (kube-emulator, tests,
 * `kcsi up`). It runs no containers: a pod "runs" once its CSI volumes are mounted.
 *
 * What it does, as the kubelet does it:
 *   - keeps its Node (controller-managed attach/detach annotation, or none and attaching its
 *     own volumes with --enable-controller-attach-detach=false; labels; status: capacity,
 *     allocatable, nodeInfo, addresses, the kubelet's conditions, see status.h) and a Lease
 *     heartbeat in kube-node-lease; it never touches the Node's taints;
 *   - watches <root-dir>/plugins_registry for registration sockets (csi-node-driver-registrar),
 *     registers each CSI driver: GetInfo, NodeGetInfo, CSINode entry, nodeid annotation,
 *     topology labels, NotifyRegistrationStatus;
 *   - reports a pod Running and Ready, with a running status per container, once its volumes
 *     are mounted;
 *   - mounts and unmounts the CSI volumes of the pods bound to the node (volume manager), at
 *     the kubelet's paths, reporting Node.status.volumesInUse, and rebuilds its state from the
 *     root dir and the mount table after a restart;
 *   - expands volumes on the node (NodeExpandVolume) when their claim asks for it, online for a
 *     published volume and offline at the next stage, and records the claim's new capacity;
 *   - polls NodeGetVolumeStats of published volumes and serves the kubelet_volume_stats_* gauges
 *     on /metrics.
 *
 * The config's strings point into the flagset's memory.
 */
#ifndef KCSI_NODE_NODE_H
#define KCSI_NODE_NODE_H

#include <stdint.h>

#include "base/flags.h"
#include "kube/options.h"

struct nd_config {
	struct kube_options kube;
	const char *node_name;
	const char *root_dir;
	struct flag_map node_labels;
	const char *http_endpoint;
	int64_t timeout_ns;         /* deadline of each CSI call */
	int64_t status_update_ns;   /* --node-status-update-frequency */
	int lease_duration_s;       /* --node-lease-duration-seconds */
	int64_t stats_period_ns;    /* --volume-stats-agg-period; <= 0 disables volume stats */
	const char *node_ip;        /* --node-ip; "" = the default route's address */
	int max_pods;               /* --max-pods */
	struct flag_map capacity;   /* --capacity: the emulated machine's resources */
	struct flag_map system_reserved, kube_reserved; /* subtracted for allocatable */
	bool controller_attach_detach; /* --enable-controller-attach-detach: false = attach.c attaches */
};

void nd_register_flags(struct flagset *fs, struct nd_config *c);
/* Runs until SIGTERM/SIGINT (0) or a start-up failure (1). */
int nd_run(struct nd_config *c);

#endif
