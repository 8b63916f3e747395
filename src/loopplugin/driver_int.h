/*
 * driver_int: what the files of kcsi-loopplugin's CSI services share (driver.h has the map of
 * which file owns which RPC). Not for use outside src/loopplugin.
 *
 * Every handler checks its request in the order the CSI spec lists its errors: missing fields
 * (INVALID_ARGUMENT) first, then existence (NOT_FOUND), then state (ALREADY_EXISTS,
 * FAILED_PRECONDITION, RESOURCE_EXHAUSTED). Response pieces come from the call's arena; a
 * handler's arg is the struct lp_driver, which outlives every call.
 *
 * The checks and message pieces below live in checks.c; each service file registers its own
 * handlers through its lp_register_*() function, which driver.c calls as the mode asks.
 */
#ifndef KCSI_LOOPPLUGIN_DRIVER_INT_H
#define KCSI_LOOPPLUGIN_DRIVER_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "csi/client.h"
#include "csi/server.h"
#include "loopplugin/driver.h"
#include "loopplugin/health.h"
#include "loopplugin/inflight.h"
#include "loopplugin/pool.h"

#define MiB (1024LL * 1024)
#define GiB (1024LL * MiB)

/* The driver: its config (strings borrowed), the services its mode runs, the pool it owns. */
struct lp_driver {
	struct lp_config cfg;
	bool controller, node;
	struct lp_pool *pool;
	struct lp_inflight *inflight;
	struct lp_health_cache *health; /* the read-only file system checks (health_probe.c) */
};

typedef Csi__V1__VolumeCapability VolCap;

/* What a set of capabilities asks for, once checked. */
struct capset {
	bool block;
	const char *fstype; /* for mount: requested or default */
	int mode;           /* the first capability's access mode */
};

/* ---- registration: each service file registers its own handlers on s ---- */

void lp_register_identity(struct lp_driver *d, struct csi_server *s);
void lp_register_controller_volumes(struct lp_driver *d, struct csi_server *s);
void lp_register_controller_publish(struct lp_driver *d, struct csi_server *s);
void lp_register_controller_modify(struct lp_driver *d, struct csi_server *s);
void lp_register_snapshots(struct lp_driver *d, struct csi_server *s);
void lp_register_groups(struct lp_driver *d, struct csi_server *s);
void lp_register_snapshot_metadata(struct lp_driver *d, struct csi_server *s);
void lp_register_node_stage(struct lp_driver *d, struct csi_server *s);
void lp_register_node_publish(struct lp_driver *d, struct csi_server *s);
void lp_register_node(struct lp_driver *d, struct csi_server *s);
void lp_register_controller_health(struct lp_driver *d, struct csi_server *s);
void lp_register_node_health(struct lp_driver *d, struct csi_server *s);

/*
 * What a node service killed at any point left set on its system, undone at its start
 * (snapshots.c): filesystems frozen for a snapshot are thawed, and stage records whose volume
 * has no loop device on this host (a reboot, a stage that died before it set one up) are
 * dropped.
 */
void lp_node_recover(struct lp_driver *d);

/* ---- request checks (checks.c) ---- */

static inline bool lp_empty(const char *s) { return !s || !*s; }

/* Fails the call with the backend's status. */
int lp_fail_call(struct csi_call_ctx *ctx, const struct lp_status *st);

/*
 * Checks a name from a request before anything is created for it: valid UTF-8, at most
 * LP_NAME_MAX bytes, no control characters. 0, or INVALID_ARGUMENT in st.
 */
int lp_check_name(const char *what, const char *field, const char *s, struct lp_status *st);

const char *lp_mode_name(int mode);
bool lp_mode_readonly(int mode);

/*
 * Checks capabilities; st gets INVALID_ARGUMENT naming the volume and the offending piece.
 * All capabilities must agree on the access type (one volume is either a block device or a
 * filesystem). need_mode false (GetCapacity): a capability without an access mode constrains
 * nothing about the mode (upstream's capacity controller sends such capabilities).
 */
int lp_check_caps_mode(struct lp_driver *d, const char *what, VolCap *const *caps, size_t n,
		       struct capset *cs, struct lp_status *st, bool need_mode);
int lp_check_caps(struct lp_driver *d, const char *what, VolCap *const *caps, size_t n,
		  struct capset *cs, struct lp_status *st);
int lp_check_cap(struct lp_driver *d, const char *what, VolCap *cap, struct capset *cs,
		 struct lp_status *st);
/*
 * Checks accessibility requirements (CreateVolume, CreateSnapshot) against the one zone this
 * driver serves: INVALID_ARGUMENT for a topology key it does not know, RESOURCE_EXHAUSTED when
 * the requisite topologies leave out its zone.
 */
int lp_check_topology(struct lp_driver *d, const char *what,
		      const Csi__V1__TopologyRequirement *tr, struct lp_status *st);
/* Whether a volume as created can serve the capability set. */
int lp_caps_fit_volume(const struct lp_volume *v, const struct capset *cs, struct lp_status *st);

/* Parameters: type=thin|thick; keys the provisioner adds (csi.storage.k8s.io/) are ignored. */
int lp_parse_params(const char *what, size_t n,
		    Csi__V1__CreateVolumeRequest__ParametersEntry **p, bool *thick,
		    struct lp_status *st);

/*
 * Mutable parameters (controller_modify.c), given to CreateVolume or ControllerModifyVolume as a
 * map<string,string> (n, entries): type=thin|thick, nothing else. *thick is 1 or 0, or -1 when
 * the map does not name the type. INVALID_ARGUMENT for any other key or value.
 */
int lp_parse_mutable(const char *what, size_t n, void *entries, int *thick,
		     struct lp_status *st);

/*
 * Pagination tokens name the last entry returned ("<created_ns>:<id>"), not an index, so a
 * page boundary survives volumes (snapshots) being created or deleted between calls.
 */
int lp_parse_token(const char *tok, int64_t *created, const char **id);
bool lp_after_token(int64_t created, const char *id, int64_t tc, const char *tid);

/* ---- busy and in flight (checks.c) ---- */

/* Takes the in-flight key "c/<id>" or "n/<id>" into key; false when another call holds it. */
bool lp_op_begin(struct lp_driver *d, char kind, const char *id, char *key, size_t len);
/* ABORTED: another operation on the volume is running. */
int lp_op_busy(struct csi_call_ctx *ctx, const char *id);

/*
 * Whether volume id is in use on node (NULL: on any node) as the node records show it (a stage
 * record), or, when this process is that node's service too, as its own system shows it (a loop
 * device of the image: covers stages made before records existed). True with *ret set to a
 * FAILED_PRECONDITION answer naming where.
 */
bool lp_in_use_on_nodes(struct csi_call_ctx *ctx, struct lp_driver *d, const char *id,
			const char *node, int *ret);

/* ---- node paths (checks.c) ---- */

/*
 * The path as mountinfo shows it: symlinks resolved. A path that does not exist yet keeps its
 * last component under its resolved parent. Returns a malloc'd string.
 */
char *lp_canon_path(const char *path);

/*
 * What is mounted at path, judged against this volume's loop device dev (NULL when the volume
 * has none on this node): 1 this volume's (its device mounted there, or a bind mount of its
 * device node, how block volumes are published), 0 nothing, -1 something this driver did not
 * make for the volume (or mountinfo unreadable). Node calls act on a path only when it is 1.
 */
int lp_target_is_volumes(const char *path, const char *dev);

/* NOT_FOUND unless the pool knows the volume; a symlinked path is refused, never followed. */
int lp_check_node_target(struct csi_call_ctx *ctx, struct lp_driver *d, const char *id,
			 const char *path, const char *field);

/* ---- snapshots (snapshots.c) ---- */

/*
 * When this process serves the node too and the volume's image is mounted here, freezes that
 * filesystem (recorded under key first, see pool.h) and returns the mount point (malloc'd),
 * else NULL. lp_thaw_volume() undoes it and frees mp; both accept what the other was given.
 */
char *lp_freeze_volume(struct lp_driver *d, const char *img, const char *key);
void lp_thaw_volume(struct lp_driver *d, char *mp, const char *key);
/*
 * A snapshot as CreateSnapshot, ListSnapshots, GetSnapshot and the group RPCs answer it: usable
 * from the pool's zone, the segment its volumes report (SNAPSHOT_ACCESSIBILITY_CONSTRAINTS).
 */
Csi__V1__Snapshot *lp_csi_snapshot(struct csi_arena *a, struct lp_driver *d,
				   const struct lp_snapshot *s);

/* ---- health facts (health_probe.c; health.h has the rules) ---- */

struct lp_health_cache *lp_health_cache_new(void);
void lp_health_cache_free(struct lp_health_cache *c);
/*
 * The controller's facts of v: its image and, when nothing uses the volume, its file system
 * (the read-only check, its words in detail, which f->fs_detail points to).
 */
void lp_probe_volume(struct lp_driver *d, const struct lp_volume *v, struct lp_volume_facts *f,
		     char *detail, size_t len);
/*
 * The node's facts of v: as lp_probe_volume() when v is not on this node; else its image, the
 * loop device (*dev, malloc'd or NULL), its mounts at the staging path (staging, or the stage
 * record's) and at publish, and its mounted file system as the kernel sees it. Empty or NULL
 * paths are not asked about.
 */
void lp_probe_volume_node(struct lp_driver *d, const struct lp_volume *v, const char *staging,
			  const char *publish, struct lp_volume_facts *f, char **dev,
			  char *detail, size_t len);
/* The pool's facts: its folder, writability, free bytes and inodes. */
void lp_probe_pool(struct lp_driver *d, struct lp_pool_facts *f);

/* ---- message pieces (checks.c) ---- */

/* This driver's one topology segment: LP_TOPOLOGY_KEY = the configured zone. */
Csi__V1__Topology *lp_csi_topology(struct csi_arena *a, struct lp_driver *d);
/* A volume as CreateVolume, ListVolumes and ControllerGetVolume answer it. */
Csi__V1__Volume *lp_csi_volume(struct csi_arena *a, struct lp_driver *d,
			       const struct lp_volume *v);

#endif
