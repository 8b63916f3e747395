/*
 * csi-snapshotter: external-snapshotter v8's sidecar (see src/snapshots/snapshots.h for the map
 * of both snapshot components).
 *
 * Files: run.c (flags, the shared sidecar start-up with the CREATE_DELETE_SNAPSHOT check,
 * lease "external-snapshotter-leader-<driver>"), controller.c (informers on the driver's
 * VolumeSnapshotContents and on VolumeSnapshotClasses, one served queue of content names, and
 * the CSI calls and content writes of one sync; the step is snap_plan_sidecar()'s), group.c
 * (gate CSIVolumeGroupSnapshot, on by default, and the group kinds served:
 * VolumeGroupSnapshotContents, CreateVolumeGroupSnapshot and DeleteVolumeGroupSnapshot; the
 * step is snap_plan_group_sidecar()'s), shared.c (the shape
 * both paths have, once: the watch of our driver's contents, the create parameters, the status
 * write, the deletion with its secret and the status cleared, a patch's result).
 *
 * Idempotence: the driver's snapshot name comes from the snapshot's uid, and the content carries
 * snapshot.storage.kubernetes.io/volumesnapshot-being-created from before CreateSnapshot until
 * a final answer, so a timeout or kill -9 repeats CreateSnapshot with the same name and a
 * deletion waits for that answer: one driver snapshot per content, whatever fails.
 *
 * Ownership: struct snapper owns its informers and queue; it borrows the kube client, the CSI
 * connection and the recorder, which the sidecar (src/sidecar) keeps alive until after
 * snapper_free().
 */
#ifndef KCSI_SNAPSHOTTER_SNAPSHOTTER_H
#define KCSI_SNAPSHOTTER_SNAPSHOTTER_H

#include <stdbool.h>
#include <stdint.h>

#include "base/flags.h"
#include "csi/client.h"
#include "kube/client.h"
#include "kube/events.h"
#include "sidecar/sidecar.h"

struct snapper_config {
	struct sidecar_config sc;   /* shared sidecar flags (--timeout defaults to 1m here) */
	int64_t resync_period_ns;   /* --resync-period 15m */
	int worker_threads;         /* --worker-threads 10 */
	const char *name_prefix;    /* --snapshot-name-prefix snapshot */
	int uuid_length;            /* --snapshot-name-uuid-length -1 */
	const char *group_prefix;   /* --groupsnapshot-name-prefix groupsnapshot */
	int group_uuid_length;      /* --groupsnapshot-name-uuid-length -1 */
	bool extra_create_metadata; /* --extra-create-metadata */
	bool node_deployment;       /* --node-deployment: only contents labelled with $NODE_NAME */
};

void snapper_register_flags(struct flagset *fs, struct snapper_config *c);
int snapper_run(const struct snapper_config *c);

struct snapper_opts {
	const char *driver;
	struct csi_conn *csi;
	int workers;
	int64_t timeout_ns, resync_ns, retry_start_ns, retry_max_ns;
	const char *name_prefix;
	int uuid_length;
	bool extra_create_metadata;
	const char *node;           /* --node-deployment: this node's name, else NULL */
	bool groups;                /* gate CSIVolumeGroupSnapshot (on by default) and the group
				     * kinds served */
	const char *group_prefix;
	int group_uuid_length;
	struct kube_recorder *recorder;
};

struct snapper;
struct snapper *snapper_new(struct kube_client *kc, const struct snapper_opts *o);
int snapper_start(struct snapper *s, char *err, size_t errlen);
void snapper_stop(struct snapper *s);
void snapper_free(struct snapper *s);
void snapper_render_metrics(struct snapper *s, struct strbuf *out);

#endif
