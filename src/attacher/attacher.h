/*
 * csi-attacher: the external-attacher, in C. cmd/csi-attacher parses the flags into a struct
 * att_config and calls att_run(), which does what the upstream binary's main does: connect to
 * the driver, discover its name and capabilities, pick the CSI or the trivial handler, serve
 * diagnostics, elect a leader when asked, and run the controller until SIGTERM.
 */
#ifndef KCSI_ATTACHER_ATTACHER_H
#define KCSI_ATTACHER_ATTACHER_H

#include <stdbool.h>
#include <stdint.h>

#include "base/flags.h"
#include "kube/options.h"

struct att_config {
	struct kube_options kube; /* --kubeconfig, --master, QPS, resync, retries, leader election */
	const char *csi_address;
	int64_t timeout_ns;
	int worker_threads;
	int max_entries;
	int64_t reconcile_sync_ns;
	const char *default_fstype;
	int max_grpc_log_length;
	const char *http_endpoint;
	const char *metrics_address;
	const char *metrics_path;
	struct flag_map feature_gates;
	bool dummy;
};

/* Registers every csi-attacher flag (names and defaults as upstream) on fs, writing into cfg. */
void att_register_flags(struct flagset *fs, struct att_config *cfg);
/* Runs until SIGTERM/SIGINT; returns the process exit code. */
int att_run(const struct att_config *cfg);

#endif
