/*
 * csi-attacher: the external-attacher, in C. cmd/csi-attacher parses the flags into a struct
 * att_config and calls att_run(), which hands the shared start-up (connect, discover, serve
 * diagnostics, elect a leader, signals: src/sidecar) the attacher's part: pick the CSI or the
 * trivial handler from the capabilities, and run the controller until SIGTERM.
 */
#ifndef KCSI_ATTACHER_ATTACHER_H
#define KCSI_ATTACHER_ATTACHER_H

#include <stdbool.h>
#include <stdint.h>

#include "base/flags.h"
#include "sidecar/sidecar.h"

struct att_config {
	struct sidecar_config sc; /* kube flags, --csi-address, --timeout, diagnostics, gates */
	unsigned worker_threads;
	int max_entries;
	int64_t reconcile_sync_ns;
	const char *default_fstype;
	bool dummy;
};

/* Registers every csi-attacher flag (names and defaults as upstream) on fs, writing into cfg. */
void att_register_flags(struct flagset *fs, struct att_config *cfg);
/* Runs until SIGTERM/SIGINT; returns the process exit code. */
int att_run(const struct att_config *cfg);

#endif
