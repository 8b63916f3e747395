/*
 * node status: what kcsi-node reports on its Node and on the pods it "runs", as the kubelet's
 * node status setters and status manager do, so that a real kube-scheduler places pods on the
 * node (capacity, allocatable, Ready) and `kubectl get pods` shows READY 1/1 Running.
 *
 * Split: nd_machine_read() does the I/O (sysconf, /proc/meminfo, statvfs of the root dir,
 * uname, /etc/os-release, /etc/machine-id, the default route); everything else is pure, from a
 * struct nd_machine and the flags to JSON, so the unit tests are tables.
 *
 * Ownership: builders return new jansson references the caller drops; names in struct
 * nd_resource point into static memory, the machine or the flags' memory.
 */
#ifndef KCSI_NODE_STATUS_H
#define KCSI_NODE_STATUS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/flags.h"

#define ND_MAX_RESOURCES 24
#define ND_MAX_HUGEPAGES 4

/* What the machine has and is, as the kubelet learns it from cAdvisor and the OS. */
struct nd_machine {
	int64_t cpus;             /* online CPUs */
	int64_t memory;           /* bytes, MemTotal */
	int64_t ephemeral;        /* bytes, the root dir's filesystem */
	char hugepage_names[ND_MAX_HUGEPAGES][48]; /* "hugepages-2Mi", ... as kubelet names them */
	int64_t hugepage_bytes[ND_MAX_HUGEPAGES];
	int nhugepages;
	char kernel[128], os_image[256], machine_id[64], system_uuid[64], boot_id[64];
	char hostname[256];
	char node_ip[64];         /* --node-ip, else the default route's address, else 127.0.0.1 */
};

/* One resource quantity; cpu is in millicores, everything else in whole units (bytes, pods). */
struct nd_resource {
	const char *name;
	int64_t value;
};
struct nd_resources {
	struct nd_resource r[ND_MAX_RESOURCES];
	int n;
};

/* The flags that shape capacity and allocatable. */
struct nd_resource_flags {
	int max_pods;                    /* --max-pods */
	const struct flag_map *capacity; /* --capacity: replaces or adds resources */
	const struct flag_map *system_reserved, *kube_reserved;
};

/* Fills m from the machine; node_ip is --node-ip ("" for the default). Never fails: what cannot
 * be read stays 0 or empty, as cAdvisor leaves it. */
void nd_machine_read(struct nd_machine *m, const char *root_dir, const char *node_ip);

/* Capacity from the machine and the flags, and allocatable = capacity - system-reserved -
 * kube-reserved (never below 0). -1 with a message for a malformed flag. */
int nd_resources_build(const struct nd_machine *m, const struct nd_resource_flags *f,
		       struct nd_resources *capacity, struct nd_resources *allocatable, char *err,
		       size_t errlen);

/* The Node's status: capacity, allocatable, nodeInfo, addresses, and the four conditions with
 * lastHeartbeatTime = now and lastTransitionTime = since (RFC 3339). */
json_t *nd_node_status(const struct nd_machine *m, const struct nd_resources *capacity,
		       const struct nd_resources *allocatable, const char *now, const char *since);

/* The status of a running pod (the pod's JSON as read from the API): phase Running, the five
 * conditions True (PodScheduled keeps its time), a running status per container, hostIP and
 * podIP = ip, startTime. */
json_t *nd_pod_status(const json_t *pod, const char *uid, const char *ip, const char *now);
/*
 * The status the kubelet reports for a pod placed on this node whose volumes are not all mounted
 * yet: Pending, Ready and ContainersReady False (ContainersNotReady), every container waiting
 * with ContainerCreating (PodInitializing, and Initialized False, when it has init containers),
 * so that kubectl shows ContainerCreating (Init:0/N) rather than a bare Pending.
 */
json_t *nd_pod_status_waiting(const json_t *pod, const char *ip, const char *now);

/* Parsers of the machine's files, pure for the tests. */
/* The interface of the default route in /proc/net/route's text; false when there is none. */
bool nd_route_default_iface(const char *route, char *iface, size_t len);
/* PRETTY_NAME of an os-release text, unquoted; "Linux" when absent (as cAdvisor). */
void nd_os_release_pretty(const char *text, char *out, size_t len);
/* Go's GOARCH spelling of the architecture this binary was built for. */
const char *nd_goarch(void);

#endif
