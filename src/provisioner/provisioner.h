/*
 * csi-provisioner: the external-provisioner, in C. cmd/csi-provisioner parses the flags into a
 * struct prov_config and calls prov_run(), which hands the shared start-up (src/sidecar) the
 * provisioner's part: the claim, volume, unsaved-PV and cloning-protection controllers.
 */
#ifndef KCSI_PROVISIONER_PROVISIONER_H
#define KCSI_PROVISIONER_PROVISIONER_H

#include <stdbool.h>
#include <stdint.h>

#include "base/flags.h"
#include "sidecar/sidecar.h"

struct prov_config {
	struct sidecar_config sc; /* kube flags, --csi-address, --timeout, diagnostics, gates */
	unsigned worker_threads;  /* --worker-threads 100; 0: no claim or volume worker */
	unsigned cloning_protection_threads; /* --cloning-protection-threads 1; 0: no worker */
	const char *volume_name_prefix; /* --volume-name-prefix pvc */
	int volume_name_uuid_length;    /* --volume-name-uuid-length -1 (whole UID) */
	bool strict_topology;
	bool immediate_topology;        /* default true */
	bool extra_create_metadata;
	const char *default_fstype;
	bool controller_publish_readonly;
	bool prevent_volume_mode_conversion;
	/* Storage capacity and distributed provisioning (capacity.c, node deployment). */
	bool enable_capacity;
	int capacity_ownerref_level;
	unsigned capacity_threads;      /* --capacity-threads 1; 0: no worker */
	int64_t capacity_poll_interval_ns;
	bool capacity_for_immediate_binding;
	bool node_deployment;
	bool node_deployment_immediate_binding;
	int64_t node_deployment_base_delay_ns;
	int64_t node_deployment_max_delay_ns;
	const char *provisioner_deprecated; /* --provisioner: ignored */
	double capacity_qps;            /* --kube-api-capacity-qps 1: the capacity client's rate */
	int capacity_burst;             /* --kube-api-capacity-burst 5 */
	bool enable_pprof;              /* --enable-pprof: accepted, no Go profiler to serve */
	int64_t orphan_sweep_ns;        /* --snapshot-orphan-sweep-interval 5m */
};

/* Registers every csi-provisioner flag (names and defaults as upstream) on fs. */
void prov_register_flags(struct flagset *fs, struct prov_config *cfg);
/* Runs until SIGTERM/SIGINT; returns the process exit code. */
int prov_run(const struct prov_config *cfg);

#endif
