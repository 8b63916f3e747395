/*
 * pool: the loop plugin's storage, a folder of image files and their metadata.
 *
 * Layout (every path below the pool folder):
 *
 *     volumes/<id>.img      the volume's image (sparse for thin volumes, allocated for thick)
 *     volumes/<id>.json     its metadata: name, size, access type, source, tags, attachments
 *     volumes/<id>.formatting  present while a node formats the volume (see below)
 *     snapshots/<id>.img    a snapshot: a copy of a volume's image at one moment
 *     snapshots/<id>.json   its metadata: name, source volume, size, creation time, group
 *     groups/<id>.json      a group snapshot: name, creation time, member snapshots and volumes
 *     nodes/<node>.json     a node service that has started on this pool (its zone)
 *     nodes/<node>.lock     flock()ed by that node service for its whole life (holds its PID)
 *     attachments/<node>/<device>  a device name in use on a node; holds the volume ID
 *     .lock                 flock()ed around changes that must see every volume at once
 *     staged/<node>/<id>.json  the volume is staged on node (see "Node records" below)
 *     frozen/<node>/<key>.json  a filesystem the node froze for a snapshot and has not thawed
 *
 * The metadata file is the commit point of every change. Images are built under a ".tmp" name and
 * renamed into place before the metadata is written; metadata is written to "<id>.json.tmp",
 * fsync'ed and renamed, and the folder fsync'ed. So after a crash at any point the pool holds a
 * volume either fully or not at all, plus leftovers lp_pool_recover() removes: ".tmp" files and
 * images without metadata. Deleting removes the metadata first for the same reason.
 *
 * IDs derive from names (lv-/ls- and a 64-bit hash of the name), so a CreateVolume retried after
 * a crash lands on the same files: the seed's "look for the volume by name first" needs no index.
 *
 * Attachments (which node a volume is published to, under which device name) live in the
 * volume's metadata, so the pool, possibly on a shared filesystem, is the one source of truth
 * for controller and node services alike. Device names are allocated per node from a fixed
 * range (the seed's device-name problem): a name is taken by creating attachments/<node>/<name>
 * with O_EXCL, so it is never handed out twice, and only then recorded in the metadata (the
 * commit point); unpublishing removes it from the metadata first and frees the file after. A
 * crash in between leaves a name file no metadata backs, which lp_pool_recover() removes, so
 * no name is lost. Publishing costs a readdir of one node's names, not a scan of every volume.
 *
 * Thread safety: lp_pool functions may be called from many threads. Operations on one volume
 * must be serialized by the caller (see inflight.h); lp_pool_lock() serializes the pool-wide
 * ones between threads and between processes sharing the pool.
 *
 * Files (src/loopplugin/; pool_int.h is what they share):
 *
 *     pool.c            life cycle, lock, free space, nodes/ (calls no other pool file
 *                       but pool_paths.c and pool_files.c)
 *     pool_recover.c    lp_pool_recover's sweep at start (the top: calls pool_attach.c)
 *     pool_files.c      atomic writes, JSON metadata, image building, removal, listing
 *     pool_paths.c      paths and IDs (below every other pool file; calls none of them)
 *     pool_volumes.c    volumes: metadata, create, delete, grow, formatting mark, list
 *     pool_attach.c     attachments: per-node device names, attach, detach, reconciliation
 *     pool_snapshots.c  snapshots: image copy and metadata
 *     pool_groups.c     group snapshots: the metadata that binds member snapshots together
 *     pool_records.c    node records: staged/ and frozen/
 */
#ifndef KCSI_LOOPPLUGIN_POOL_H
#define KCSI_LOOPPLUGIN_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loopplugin/status.h"

struct lp_pool;

/* A tag a volume carries (--extra-volume-tags). Strings owned by whoever holds the array. */
struct lp_tag {
	char *key;
	char *value;
};

/* One publication of a volume to a node. Strings owned by the volume. */
struct lp_attachment {
	char *node;
	char *device;  /* the per-node device name, "xvdba" .. */
	bool readonly;
};

/* A volume's metadata. Every string is owned by the struct; lp_volume_free() frees all. */
struct lp_volume {
	char *id;
	char *name;
	int64_t size;         /* bytes, a multiple of 1 MiB */
	bool thick;           /* fully allocated image */
	bool block;           /* created for block access (else mount) */
	char *fstype;         /* for mount volumes: "ext4" or "xfs" */
	char *source_kind;    /* "", "snapshot" or "volume" */
	char *source_id;      /* "" when none */
	char *zone;
	int64_t created_ns;   /* wall clock */
	struct lp_tag *tags;  /* the driver's --extra-volume-tags when it was created */
	size_t ntags;
	struct lp_attachment *att;
	size_t natt;
};

struct lp_snapshot {
	char *id;
	char *name;
	char *source_volume;
	int64_t size;
	int64_t created_ns;
	char *group;          /* the group snapshot it is a member of; "" when none */
};

/*
 * A group snapshot: member snapshot snaps[i] is the copy of volume vols[i], all taken while
 * every member's filesystem was frozen. Strings owned by the struct (lp_group_free).
 */
struct lp_group {
	char *id;
	char *name;
	int64_t created_ns;
	char **snaps;
	char **vols;
	size_t n;
};

/* Life cycle. lp_pool_open() creates the folder layout if needed. */
struct lp_pool *lp_pool_open(const char *dir, struct lp_status *st);
void lp_pool_free(struct lp_pool *p);
const char *lp_pool_dir(const struct lp_pool *p);
/* Removes what a crash left behind (see above). Call once at start, before serving. */
int lp_pool_recover(struct lp_pool *p, struct lp_status *st);
/* OK when the pool folder is there and writable. */
int lp_pool_probe(struct lp_pool *p, struct lp_status *st);
/* Bytes still free on the pool's filesystem. */
int64_t lp_pool_free_bytes(struct lp_pool *p);

/* Pool-wide critical section: a mutex between threads plus flock() between processes. */
void lp_pool_lock(struct lp_pool *p);
void lp_pool_unlock(struct lp_pool *p);

/*
 * Nodes. A node service records itself in nodes/<id>.json when it starts, so that the
 * controller, possibly on another machine, can tell a real node from a typo (NOT_FOUND).
 */
int lp_pool_node_register(struct lp_pool *p, const char *node, const char *zone,
			  struct lp_status *st);
/*
 * Makes this process the one node service of node on this pool until lp_pool_free(): an
 * flock() on nodes/<node>.lock (base/lockfile.h), taken before the service writes or removes
 * anything of the node's. A second node service of the same node would drop the first's stage
 * records and hand out its device names; it is refused (FAILED_PRECONDITION, the holder's PID
 * in the message). The controller service takes no lock: deploy/kubernetes runs two replicas
 * on one pool, and its writes hold flock()s on their own files (pool_recover.c).
 */
int lp_pool_node_lock(struct lp_pool *p, const char *node, struct lp_status *st);
bool lp_pool_node_exists(struct lp_pool *p, const char *node);

/* IDs. The results are malloc'd. */
char *lp_volume_id_for_name(const char *name);
char *lp_snapshot_id_for_name(const char *name);
char *lp_group_id_for_name(const char *name);
/*
 * The ID of group gid's member snapshot of volume vid. Derived from a string with a control
 * character in it, which no CO-given snapshot name may hold, so it never collides with one.
 */
char *lp_group_member_id(const char *gid, const char *vid);
/* True when id has the shape of an ID this driver hands out (no '/', not "..", short). */
bool lp_id_valid(const char *id);
/* The absolute path of a volume's image (malloc'd). */
char *lp_volume_image(const struct lp_pool *p, const char *id);
char *lp_snapshot_image(const struct lp_pool *p, const char *id);

/* Volumes. */
/* Loads a volume's metadata: 0, or NOT_FOUND / INTERNAL. *out is the caller's. */
int lp_volume_load(struct lp_pool *p, const char *id, struct lp_volume **out,
		   struct lp_status *st);
/* Writes the metadata atomically (the commit point). */
int lp_volume_save(struct lp_pool *p, const struct lp_volume *v, struct lp_status *st);
void lp_volume_free(struct lp_volume *v);
/* A copy of n tags (NULL when n is 0), and its release. */
struct lp_tag *lp_tags_dup(const struct lp_tag *t, size_t n);
void lp_tags_free(struct lp_tag *t, size_t n);
/*
 * Creates the image for v (v->id, size, thick set by the caller) and then its metadata. When
 * src_image is not NULL the image starts as a copy of it (reflink when the filesystem can, else
 * a copy of the data extents only, so sparse stays sparse). RESOURCE_EXHAUSTED when the pool
 * has no room.
 */
int lp_volume_create(struct lp_pool *p, const struct lp_volume *v, const char *src_image,
		     struct lp_status *st);
/* Removes the metadata, then the image. NOT_FOUND never: a missing volume is deleted. */
int lp_volume_delete(struct lp_pool *p, const char *id, struct lp_status *st);
/* Grows the image to new_size (never shrinks) and records it. */
int lp_volume_grow(struct lp_pool *p, struct lp_volume *v, int64_t new_size,
		   struct lp_status *st);
/*
 * Changes the volume's type and records it. Thin to thick allocates the whole image now
 * (RESOURCE_EXHAUSTED when the pool has no room); thick to thin frees nothing (punching holes
 * under a filesystem in use could race a write) and only makes later growth sparse.
 */
int lp_volume_set_thick(struct lp_pool *p, struct lp_volume *v, bool thick,
			struct lp_status *st);
/*
 * All volume IDs in creation order (then by ID); *ids is a malloc'd array of malloc'd strings,
 * and *created (if not NULL) the matching creation times.
 */
int lp_volume_list(struct lp_pool *p, char ***ids, int64_t **created, size_t *n,
		   struct lp_status *st);
void lp_free_strings(char **v, size_t n);

/*
 * The "formatting" mark (volumes/<id>.formatting): set, durably, before mkfs starts and cleared
 * after it succeeds. A stage that finds it knows an earlier mkfs was interrupted (kill -9,
 * reboot) and formats again instead of trusting a half-written filesystem.
 */
int lp_volume_mark_formatting(struct lp_pool *p, const char *id, bool on, struct lp_status *st);
bool lp_volume_formatting(struct lp_pool *p, const char *id);

/* Attachments. */
struct lp_attachment *lp_volume_attachment(const struct lp_volume *v, const char *node);
/*
 * Records v as published to node under a free device name (the pool lock must be held, v
 * freshly loaded under it). RESOURCE_EXHAUSTED when node already has `limit` volumes (limit
 * <= 0: only the device-name range limits). Saves v.
 */
int lp_volume_attach(struct lp_pool *p, struct lp_volume *v, const char *node, bool readonly,
		     int limit, struct lp_status *st);
/* Drops node's attachment, freeing its device name. Saves v. OK when there is none. */
int lp_volume_detach(struct lp_pool *p, struct lp_volume *v, const char *node,
		     struct lp_status *st);
/* The number of device names in the per-node range. */
int lp_device_range_size(void);

/* Snapshots. Same pattern: the image copy first, the metadata last. */
int lp_snapshot_load(struct lp_pool *p, const char *id, struct lp_snapshot **out,
		     struct lp_status *st);
int lp_snapshot_create(struct lp_pool *p, const struct lp_snapshot *s, const char *src_image,
		       struct lp_status *st);
int lp_snapshot_delete(struct lp_pool *p, const char *id, struct lp_status *st);
void lp_snapshot_free(struct lp_snapshot *s);
int lp_snapshot_list(struct lp_pool *p, char ***ids, int64_t **created, size_t *n,
		     struct lp_status *st);

/*
 * Group snapshots. The member snapshots are made first (their metadata names the group) and
 * the group's metadata last: it is the commit point. Member snapshots whose group has no
 * metadata are leftovers of a creation that did not finish; a retry removes and retakes them.
 * Deleting removes the members first and the group's metadata last, so a deletion cut short
 * is finished by the next.
 */
int lp_group_load(struct lp_pool *p, const char *id, struct lp_group **out, struct lp_status *st);
int lp_group_save(struct lp_pool *p, const struct lp_group *g, struct lp_status *st);
/* Removes the group's metadata only; OK when there is none. */
int lp_group_delete(struct lp_pool *p, const char *id, struct lp_status *st);
void lp_group_free(struct lp_group *g);

/*
 * Node records. What a node service has done to its own system, written where the controller
 * service (possibly another process, on another machine sharing the pool) can read it.
 *
 * A stage record (staged/<node>/<volume>.json) is written before NodeStageVolume touches the
 * system (under the pool lock, with the attachment checked) and removed after
 * NodeUnstageVolume has released everything; a failed first stage removes it again. While it
 * exists, ControllerUnpublishVolume for that node and DeleteVolume refuse (FAILED_PRECONDITION):
 * the controller never drops an attachment or an image under a mounted loop device. A record
 * left by a crash names a stage the CO will retry or unstage; at start a node service drops its
 * records whose volume has no loop device on the host (a reboot, or a stage that died early).
 *
 * A freeze record (frozen/<node>/<snapshot>.json: the mount point and its st_dev) is written,
 * durably, before FIFREEZE and removed after FITHAW, so that a node service killed in between
 * thaws the filesystem at its next start (only when the path still holds the same filesystem).
 */
struct lp_stage {
	char *path;   /* the canonical staging path */
	bool block;   /* access type block (else mount) */
	char *fstype; /* mount: the filesystem type asked for (or defaulted); "" for block */
	char *flags;  /* mount: the mount flags, sorted, joined by ',' */
	int mode;     /* the CSI access mode */
};
int lp_stage_save(struct lp_pool *p, const char *node, const char *id, const struct lp_stage *s,
		  struct lp_status *st);
/* 1 and *out (the caller's, lp_stage_free) when there is a record, else 0. */
int lp_stage_load(struct lp_pool *p, const char *node, const char *id, struct lp_stage **out);
void lp_stage_free(struct lp_stage *s);
/* OK when there is none. */
int lp_stage_clear(struct lp_pool *p, const char *node, const char *id, struct lp_status *st);
/* The volume IDs recorded as staged on node (lp_free_strings). */
int lp_stage_list(struct lp_pool *p, const char *node, char ***ids, size_t *n);
/* The nodes on which volume id is recorded as staged (lp_free_strings). */
int lp_stage_nodes(struct lp_pool *p, const char *id, char ***nodes, size_t *n);

int lp_freeze_save(struct lp_pool *p, const char *node, const char *key, const char *path,
		   uint64_t dev, struct lp_status *st);
/* 1 with *path (malloc'd) and *dev when there is a record, else 0. */
int lp_freeze_load(struct lp_pool *p, const char *node, const char *key, char **path,
		   uint64_t *dev);
int lp_freeze_clear(struct lp_pool *p, const char *node, const char *key, struct lp_status *st);
int lp_freeze_list(struct lp_pool *p, const char *node, char ***keys, size_t *n);

#endif
