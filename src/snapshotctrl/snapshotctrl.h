/*
 * snapshot-controller: external-snapshotter v8's common controller (see src/snapshots/snapshots.h
 * for the map of both snapshot components).
 *
 * Files: run.c (flags, start-up on the shared sidecar runtime with no CSI driver: the sidecar's
 * dummy_driver, lease "snapshot-controller-leader"), controller.c (informers, queues, and the
 * I/O of each sync; every rule it follows is a function of src/snapshots), group.c (with the
 * gate CSIVolumeGroupSnapshot, on by default, and the group kinds served: VolumeGroupSnapshots,
 * their content and member snapshots; internal.h is what the two sync files share, cache.c
 * their cache reads).
 *
 * Informers on VolumeSnapshots, VolumeSnapshotContents, VolumeSnapshotClasses, claims and
 * volumes keep compact records; handlers only queue keys: snapshots ("ns/name"), contents
 * ("name") and claims whose pvc-as-source-protection finalizer may be released ("ns/name").
 * A content event also queues the snapshot its ref names, so the snapshot's status follows.
 *
 * Ownership: struct sctrl owns its informers and queues; it borrows the kube client and the
 * recorder, which the sidecar (src/sidecar) keeps alive until after sctrl_free().
 */
#ifndef KCSI_SNAPSHOTCTRL_SNAPSHOTCTRL_H
#define KCSI_SNAPSHOTCTRL_SNAPSHOTCTRL_H

#include <stdbool.h>
#include <stdint.h>

#include "base/flags.h"
#include "kube/client.h"
#include "kube/events.h"
#include "sidecar/sidecar.h"

struct sctrl_config {
	struct sidecar_config sc;   /* kube flags, --http-endpoint, --metrics-path */
	int64_t resync_period_ns;   /* --resync-period 15m */
	int worker_threads;         /* --worker-threads 10 */
	int64_t retry_crd_max_ns;   /* --retry-crd-interval-max 30s */
	bool distributed;           /* --enable-distributed-snapshotting */
	bool prevent_mode_conversion; /* --prevent-volume-mode-conversion true */
};

void sctrl_register_flags(struct flagset *fs, struct sctrl_config *c);
/* Runs until SIGTERM; returns the exit code. */
int sctrl_run(const struct sctrl_config *c);

struct sctrl_opts {
	int workers;
	int64_t resync_ns, retry_start_ns, retry_max_ns;
	bool prevent_mode_conversion;
	bool distributed;
	bool groups;     /* gate CSIVolumeGroupSnapshot and the group kinds served: serve group snapshots */
	struct kube_recorder *recorder;
};

struct sctrl;
struct sctrl *sctrl_new(struct kube_client *kc, const struct sctrl_opts *o);
/* Informers, cache sync, workers. 0 or -1 with err. */
int sctrl_start(struct sctrl *c, char *err, size_t errlen);
void sctrl_stop(struct sctrl *c);
void sctrl_free(struct sctrl *c);
void sctrl_render_metrics(struct sctrl *c, struct strbuf *out);

#endif
