/*
 * driver: kcsi-loopplugin's CSI services (Identity, Controller, GroupController,
 * SnapshotMetadata, Node) over the storage backend.
 *
 * Each handler checks its request, takes the volume's in-flight key (ABORTED when another
 * operation on the volume is running), looks at what already exists (pool metadata, loop
 * devices, mountinfo) and does only what is missing: every call is idempotent, and a call
 * repeated after a crash or a timeout finds the work done and answers as the first would have.
 * Controller and node operations use separate keys ("c/" and "n/"), so that a node staging a
 * volume does not make the controller refuse to list or publish it.
 *
 * Mode: "controller" registers Identity + Controller + GroupController + SnapshotMetadata and
 * never touches loop
 * devices or mounts; "node" registers Identity + Node, creates and deletes nothing in the pool
 * (it only records itself under nodes/), and does not advertise CONTROLLER_SERVICE; "all" does
 * both.
 *
 * Where each RPC lives (src/loopplugin/; driver_int.h is what these files share):
 *
 *     driver.c              lp_driver_new/free/register: the wiring, by mode
 *     identity.c            GetPluginInfo, GetPluginCapabilities, Probe
 *     controller_volumes.c  CreateVolume, DeleteVolume, ControllerExpandVolume,
 *                           ValidateVolumeCapabilities
 *     controller_publish.c  ControllerPublishVolume, ControllerUnpublishVolume, ListVolumes,
 *                           ControllerGetVolume, GetCapacity, ControllerGetCapabilities
 *     controller_modify.c   ControllerModifyVolume; the mutable parameters (type=thin|thick)
 *     snapshots.c           CreateSnapshot, DeleteSnapshot, ListSnapshots, GetSnapshot;
 *                           freeze/thaw around the copy, lp_driver_thaw_all, a node
 *                           service's recovery at start
 *     groups.c              GroupControllerGetCapabilities, CreateVolumeGroupSnapshot,
 *                           DeleteVolumeGroupSnapshot, GetVolumeGroupSnapshot
 *     snapshot_metadata.c   GetMetadataAllocated, GetMetadataDelta (SnapshotMetadata service,
 *                           streamed; extents.h walks the images)
 *     node_stage.c          NodeStageVolume, NodeUnstageVolume
 *     node_publish.c        NodePublishVolume, NodeUnpublishVolume
 *     node.c                NodeGetVolumeStats, NodeExpandVolume, NodeGetInfo,
 *                           NodeGetCapabilities
 *     health_rpc.c          ControllerGetVolumeHealth, ControllerListVolumeHealth,
 *                           NodeGetVolumeHealth, NodeGetStorageHealth (CSI v1.13, alpha);
 *                           health.h has the rules (health.c, pure), health_probe.c the facts
 *     checks.c              what several share: name, capability and access-mode checks,
 *                           parameters, topology requirements, sizes (lp_parse_size),
 *                           pagination tokens, in-flight keys, "still staged", node path
 *                           checks, volume and topology messages
 *
 * Below them: pool.h (images and metadata), loopdev.h, mount.h, fs.h, inflight.h.
 */
#ifndef KCSI_LOOPPLUGIN_DRIVER_H
#define KCSI_LOOPPLUGIN_DRIVER_H

#include <stdbool.h>
#include <stdint.h>

#include "loopplugin/pool.h"
#include "loopplugin/status.h"

struct csi_server;

#define LP_TOPOLOGY_KEY "topology.loop.kcsi.io/zone"

struct lp_config {
	const char *drivername;     /* "loop.kcsi.io" */
	const char *version;        /* vendor_version */
	const char *nodeid;
	const char *mode;           /* "all", "controller" or "node" */
	const char *pool_dir;
	const char *zone;           /* "local" */
	int attach_limit;           /* per node; 0: only the device-name range limits */
	int64_t max_volume_size;    /* bytes */
	const char *default_fstype; /* "ext4" */
	bool detach_staged;         /* ControllerUnpublish of a volume still staged: detach (fence) */
	const struct lp_tag *extra_tags; /* --extra-volume-tags, checked by lp_tags_check() */
	size_t nextra_tags;
	bool get_snapshot_cap;      /* announce GET_SNAPSHOT (GetSnapshot is served either way) */
};

/*
 * --extra-volume-tags: the tags every volume CreateVolume makes carries, recorded in its
 * metadata and shown in the volume_context of the Volume the driver returns (CreateVolume,
 * ListVolumes, ControllerGetVolume) as LP_TAG_CONTEXT_PREFIX<key> = <value>.
 * lp_tags_check() is the flag's validation: at most LP_MAX_TAGS tags, keys of 1 to
 * LP_TAG_KEY_MAX printable ASCII characters (no space at either end), values of at most
 * LP_TAG_VALUE_MAX bytes of UTF-8 without control characters. 0, or -1 with the reason in err.
 */
#define LP_TAG_CONTEXT_PREFIX "tag.loop.kcsi.io/"
#define LP_MAX_TAGS 50
#define LP_TAG_KEY_MAX 128
#define LP_TAG_VALUE_MAX 256
int lp_tags_check(const struct lp_tag *t, size_t n, char *err, size_t errlen);

struct lp_driver;

/*
 * Opens the pool, recovers it (controller side: leftovers of a crash are removed) and registers
 * the node (node side). The config strings must outlive the driver.
 */
struct lp_driver *lp_driver_new(const struct lp_config *cfg, struct lp_status *st);
void lp_driver_free(struct lp_driver *d);
/* Registers the handlers the mode calls for on s. */
void lp_driver_register(struct lp_driver *d, struct csi_server *s);

/*
 * Thaws every filesystem this node froze for a snapshot that is still running, and drops the
 * records: for a process about to exit with such a call in flight.
 */
void lp_driver_thaw_all(struct lp_driver *d);

/* Parses a size with an optional binary or decimal suffix ("1Ti", "512Mi", "10G", "4096"). */
int lp_parse_size(const char *s, int64_t *out);

#endif
