/*
 * volumes_int.h: what the volume manager's files share (volumes.c: desired state, mounting, the
 * pass; volumes_state.c: the actual state's records, the kubelet's paths and the reconstruction
 * after a restart; volumes_unmount.c: unpublishing and unstaging what no pod wants; attach.c: the
 * node's own attach and detach when no attach/detach controller manages it). Not for
 * the rest of kcsi-node, whose entry points are node_int.h's nd_volumes_*.
 */
#ifndef KCSI_NODE_VOLUMES_INT_H
#define KCSI_NODE_VOLUMES_INT_H

#include "node/node_int.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* What a volume's node expansion remembers across passes (expand.c's nd_expand fields). */
struct vm_resize {
	int64_t done, failed, next_try, delay;
};

struct vm_mount {
	struct vm_mount *next;
	char *pod_uid, *spec, *driver, *handle, *unique, *target;
	bool block;
	bool published; /* NodePublishVolume succeeded (or the mount table shows it) */
	bool maybe;     /* a NodePublishVolume was tried: unpublish before forgetting it */
	bool waiting_reported;
	int64_t first_seen, next_try, delay;
	struct vm_resize rs; /* online expansion of a driver that does not stage */
};

struct vm_device {
	struct vm_device *next;
	char *unique, *driver, *handle, *spec, *staging;
	bool block, staged, maybe;
	int64_t next_try, delay;
	struct vm_resize rs; /* node expansion, shared by the pods of the volume */
};

/* One CSI volume a pod wants, for one pass. Strings are borrowed from records or `buf`. */
struct desired {
	const struct kube_pod *pod;
	const struct kube_pv *pv; /* NULL for inline volumes */
	const struct kube_pod_volume *vol;
	char uid[40];
	const char *spec, *driver, *handle;
	char unique[600];
	char inline_handle[80];
	bool resolved, block, readonly, inline_vol;
};

/* The actual state: every pod volume published (or maybe), every volume staged (or maybe), per
 * volume manager thread (one per node; fleet.c runs many in one process). */
extern _Thread_local struct vm_mount *vm_mounts;
extern _Thread_local struct vm_device *vm_devices;

#define pod_event(nd, pod, reason, ...) \
	nd_event((nd), (pod) ? &(pod)->meta : NULL, true, (reason), __VA_ARGS__)

/* ---- small helpers, paths, actual state, reconstruction (volumes_state.c) ---- */
char *vm_path_join(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void vm_mkdir_p(const char *path, mode_t mode);
char *vm_parent_of(const char *path);
bool vm_is_mountpoint(const char *path);
int vm_write_json(const char *path, json_t *obj);
json_t *vm_read_json(const char *path);
const char *vm_jget(json_t *o, const char *k);
void vm_backoff_fail(int64_t *next_try, int64_t *delay);
char *vm_fs_staging_path(struct nd *nd, const char *driver, const char *handle);
char *vm_block_staging_path(struct nd *nd, const char *pv);
char *vm_target_path(struct nd *nd, const char *uid, const char *spec, bool block);
char *vm_block_data_dir(struct nd *nd, const char *pv);
char *vm_block_pod_link(struct nd *nd, const char *uid, const char *pv);
void vm_va_name(struct nd *nd, const char *driver, const char *handle, char out[80]);
void vm_prune_pod_dirs(struct nd *nd, const char *uid);
struct vm_mount *vm_mount_find(const char *uid, const char *spec);
struct vm_mount *vm_mount_add(const char *uid, const char *spec, const char *driver,
				  const char *handle, const char *unique, const char *target,
				  bool block);
void vm_mount_free(struct vm_mount *m);
struct vm_device *vm_device_find(const char *unique);
struct vm_device *vm_device_add(const char *unique, const char *driver, const char *handle,
				    const char *spec, const char *staging, bool block);
void vm_device_free(struct vm_device *d);
void vm_unique_name(const char *driver, const char *handle, char *out, size_t len);
void vm_reconstruct(struct nd *nd);

/* ---- the node's own attach and detach (attach.c), with --enable-controller-attach-detach=false ---- */
/* One step of attaching d's volume: 1 attached (mount it), 0 not yet (checked again next pass),
 * -1 failed (a FailedAttachVolume event sent, retried after the backoff). */
int vm_attach(struct nd *nd, const struct desired *d);
/* One step of detaching each volume this node attached that no wanted pod volume names and no
 * staged device or pod mount holds: delete its VolumeAttachment, then forget it once gone. */
void vm_detach_unused(struct nd *nd, struct desired *want, size_t nwant);
/* This node's VolumeAttachments from before the start, taken as attached (once synced). */
void vm_attach_adopt(struct nd *nd);
/* Frees the thread's attach records (the end of the volume manager). */
void vm_attach_forget(void);

/* ---- unmounting (volumes_unmount.c) ---- */
/* NodeUnpublishVolume of every mount no wanted pod volume names, and its directories. */
void vm_unpublish_unwanted(struct nd *nd, struct desired *want, size_t nwant);
/* NodeUnstageVolume of every staged volume no wanted pod uses and no mount holds. */
void vm_unstage_unused(struct nd *nd, struct desired *want, size_t nwant);

#endif
