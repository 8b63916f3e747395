/*
 * csi-attacher internals: the controller, its handlers and the pieces they share.
 *
 * Shape (as upstream external-attacher): informers on VolumeAttachments, PersistentVolumes and
 * CSINodes keep compact records in stores; informer handlers only enqueue names; worker threads
 * take a name from the VA queue or the PV queue and call the handler, which decides and writes.
 * Two handlers exist behind struct att_handler: the CSI handler (finalizers, ControllerPublish /
 * ControllerUnpublish, status) and the trivial handler (marks VAs attached, nothing else).
 *
 * Every write is a small JSON merge patch built from the cached record. Patches that replace a
 * list (finalizers) carry metadata.resourceVersion so that a concurrent change gives a 409 and the
 * key is retried at once with fresh data instead of overwriting someone else's finalizer.
 *
 * Ownership: struct att_ctrl owns its informers, queues and threads; it borrows the kube client
 * and the CSI connection, which the caller keeps alive until att_ctrl_free().
 */
#ifndef KCSI_ATTACHER_ATT_H
#define KCSI_ATTACHER_ATT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "csi/client.h"
#include "csi/msg.h"
#include "kube/client.h"
#include "kube/events.h"
#include "kube/hmap.h"
#include "kube/informer.h"
#include "kube/objects.h"
#include "kube/workqueue.h"

#define ATT_NODE_ID_ANNOTATION "csi.alpha.kubernetes.io/node-id"
#define ATT_NODE_IDS_ANNOTATION "csi.volume.kubernetes.io/nodeid"
#define ATT_DUMMY_ATTACHER "csi/dummy"

/* ---- names (names.c) ---- */

/* Replaces every byte outside [a-zA-Z0-9-] with '-' and appends 'X' after a trailing '-'. */
void att_sanitize_name(const char *in, char *out, size_t outlen);
/* "external-attacher/<sanitized driver>" */
void att_finalizer_name(const char *driver, char *out, size_t outlen);

/* ---- capability (capability.c) ---- */

/*
 * Maps a PV's access modes (enum kube_access_mode bits) to a CSI access mode with the rules of
 * the upstream sidecars. snmw: the driver has SINGLE_NODE_MULTI_WRITER. Returns the CSI mode, or
 * -1 with a reason in err for combinations CSI cannot express.
 */
int att_access_mode(unsigned modes, bool snmw, char *err, size_t errlen);
/*
 * Builds the VolumeCapability for a PV record in arena a: block for volumeMode Block, else mount
 * with spec.csi.fsType (or default_fstype when empty) and spec.mountOptions.
 * Returns NULL with a reason in err.
 */
Csi__V1__VolumeCapability *att_capability(struct csi_arena *a, const struct kube_pv *pv, bool snmw,
					  const char *default_fstype, char *err, size_t errlen);

/* ---- controller (controller.c) ---- */

enum att_result {
	ATT_DONE = KUBE_WORK_DONE,       /* finished: forget the key's backoff */
	ATT_RETRY = KUBE_WORK_RETRY,     /* failed: requeue with the key's exponential backoff */
	ATT_CONFLICT = KUBE_WORK_AGAIN,  /* lost an optimistic-concurrency race: requeue at once */
};

struct att_ctrl;

struct att_handler {
	const char *name;
	enum att_result (*sync_va)(struct att_ctrl *c, const struct kube_va *va);
	enum att_result (*sync_pv)(struct att_ctrl *c, const struct kube_pv *pv);
};

extern const struct att_handler att_csi_handler;
extern const struct att_handler att_trivial_handler;

struct att_ctrl_opts {
	const char *driver;          /* VolumeAttachment spec.attacher to handle */
	const struct att_handler *handler;
	struct csi_conn *csi;        /* NULL for the trivial handler */
	int workers;                 /* --worker-threads */
	int64_t timeout_ns;          /* --timeout, for CSI calls */
	int64_t retry_start_ns, retry_max_ns;
	int64_t resync_ns;           /* --resync */
	int64_t reconcile_ns;        /* --reconcile-sync; 0: no reconciler */
	int max_entries;             /* --max-entries for ListVolumes */
	bool publish_readonly;       /* driver has PUBLISH_READONLY */
	bool single_node_multi_writer;
	const char *default_fstype;
	struct kube_recorder *recorder; /* events; NULL: none */
};

struct att_ctrl {
	struct att_ctrl_opts o;
	struct kube_client *kc;
	char finalizer[320];
	struct kube_informer *va_inf, *pv_inf, *csinode_inf;
	struct kube_workqueue *vaq, *pvq;
	pthread_t reconciler;
	bool reconciler_running;
	pthread_mutex_t mu; /* guards force_sync and stop */
	pthread_cond_t cond;
	struct kube_hmap force_sync;
	bool stop;
};

struct att_ctrl *att_ctrl_new(struct kube_client *kc, const struct att_ctrl_opts *o);
/* Starts informers, waits for their caches, then starts workers and the reconciler. */
int att_ctrl_start(struct att_ctrl *c, char *err, size_t errlen);
/* Stops informers, drains queues, joins threads. Safe to call once after start. */
void att_ctrl_stop(struct att_ctrl *c);
void att_ctrl_free(struct att_ctrl *c);

/* ---- shared state (state.c) ---- */

/* Marks a VA to be attached/detached again even if its status says it already is. */
void att_set_force_sync(struct att_ctrl *c, const char *va);
bool att_consume_force_sync(struct att_ctrl *c, const char *va);

/* Records from the caches (references; release with kube_obj_unref). */
const struct kube_pv *att_get_pv(struct att_ctrl *c, const char *name);
/* True when some VolumeAttachment in the cache names PV `pv`. */
bool att_pv_in_use(struct att_ctrl *c, const char *pv);

/* ---- helpers shared by the handlers (sync.c) ---- */

/*
 * Finds the driver's node ID for node_name: the CSINode's entry for the driver, else (when va
 * is given) the VA's csi.alpha.kubernetes.io/node-id annotation (detach works when the Node and
 * its CSINode are gone), else the Node's csi.volume.kubernetes.io/nodeid annotation. Returns a
 * malloc'd ID or NULL with a reason in err.
 */
char *att_node_id(struct att_ctrl *c, const char *node_name, const struct kube_va *va, char *err,
		  size_t errlen);
/*
 * Reads the Secret ns/name and adds each data entry to map `field` of msg. The values live only
 * in the arena (freed with the request) and are never logged. Returns 0 or -1 with err.
 */
int att_add_secrets(struct att_ctrl *c, struct csi_arena *a, ProtobufCMessage *msg,
		    const char *field, const char *ns, const char *name, char *err, size_t errlen);

/*
 * Applies a merge patch to a VolumeAttachment or PersistentVolume (status: the /status
 * subresource). Returns the decoded new record (a reference) or NULL with *e filled.
 */
struct kube_obj *att_patch(struct att_ctrl *c, const struct kube_resource *r, const char *name,
			   bool status, json_t *patch, struct kube_err *e);
/* The same patch when the caller does not need the new record (the informer delivers it): the
 * answer is not decoded. 0, or -1 with *e filled. */
int att_patch_only(struct att_ctrl *c, const struct kube_resource *r, const char *name,
		   bool status, json_t *patch, struct kube_err *e);
/* JSON array of o's finalizers without `drop` and with `add` appended (either may be NULL). */
json_t *att_finalizers_json(const struct kube_obj *o, const char *drop, const char *add);
/* Writes a Warning event about VA va (reason, message). Errors are logged, not returned. */
#define att_event(c, va, type, reason, ...)                                                      \
	kube_event_about((c)->o.recorder, &(va)->meta,                                           \
			 strcmp((type), "Warning") == 0 ? KUBE_EVENT_WARNING : KUBE_EVENT_NORMAL,  \
			 (reason), __VA_ARGS__)
/* "rpc error: code = NotFound desc = ..." as the Go sidecars word gRPC errors. */
void att_grpc_error(const struct csi_status *st, char *out, size_t outlen);

/* ---- reconciler (reconciler.c) ---- */
void *att_reconciler_main(void *arg);
/* One pass: ListVolumes and requeue VAs whose status disagrees with the driver. */
int att_reconcile_once(struct att_ctrl *c, char *err, size_t errlen);

#endif
