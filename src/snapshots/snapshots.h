/*
 * snapshots: what the two snapshot components decide, as plain functions of records and flags.
 *
 * Component map (external-snapshotter v8's split, names upstream's):
 *
 *   snapshot-controller (src/snapshotctrl, cmd/snapshot-controller): no CSI driver. Watches
 *     VolumeSnapshots, VolumeSnapshotContents, VolumeSnapshotClasses, claims and volumes; for a
 *     snapshot of a claim it creates the content "snapcontent-<snapshot uid>", binds a
 *     pre-provisioned content, copies the content's status into the snapshot, and owns the
 *     finalizers of snapshots, contents and source claims. Lease "snapshot-controller-leader".
 *   csi-snapshotter (src/snapshotter, cmd/csi-snapshotter): beside a driver. Watches the
 *     contents of its driver; calls CreateSnapshot (or ListSnapshots for a pre-provisioned
 *     handle) until ready, writes the content's status, DeleteSnapshot when a content with policy
 *     Delete goes. Lease "external-snapshotter-leader-<driver>".
 *   this library (src/snapshots): names, parameters, secrets, the default class, and every
 *     "which step now" rule of both, with no I/O, so tests/unit/test_snapshots.c is tables.
 *     Records of the three kinds live in kube/objects.h (struct kube_vs, kube_vsc, kube_vsclass).
 *
 * Each controller does one step per sync and lets the informer's echo of its write drive the
 * next (csi-snapshotter follows only the echoes that change its next step: updates.c), so a
 * crash between two steps leaves a state these rules continue from: the content's name is
 * fixed by the snapshot's uid, the driver's snapshot name by the same uid, and CreateSnapshot
 * is idempotent by name.
 *
 * Group snapshots (groupsnapshot.storage.k8s.io v1, as external-snapshotter v8.6 and v8.7 read
 * and write them): group.c holds their rules. A VolumeGroupSnapshot selecting claims gets the
 * content "groupsnapcontent-<uid>" with the claims' volume handles; csi-snapshotter calls
 * CreateVolumeGroupSnapshot and writes the members into the content's
 * status.volumeSnapshotInfoList; snapshot-controller then creates one VolumeSnapshot
 * "snapshot-<sha256(group uid + volume handle)>" and its pre-bound content
 * "snapcontent-<same digest>" per member, owned by the group.
 *
 * Ownership: every function borrows its records; outputs go to caller buffers.
 */
#ifndef KCSI_SNAPSHOTS_SNAPSHOTS_H
#define KCSI_SNAPSHOTS_SNAPSHOTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/featuregate.h"
#include "csi/msg.h"
#include "kube/events.h"
#include "kube/objects.h"

/* ---- feature gates (names.c): external-snapshotter v8.7's own, for both binaries ---- */
extern const struct feature_gate snap_feature_gates[];
extern const size_t snap_feature_gates_len;
#define SNAP_GATE_GROUPS "CSIVolumeGroupSnapshot" /* GA in v8.7, default true */

/* ---- names (upstream's, facts of the interface) ---- */
#define SNAP_GROUP "snapshot.storage.k8s.io"
#define SNAP_API_VERSION "snapshot.storage.k8s.io/v1"
#define SNAP_FIN_SOURCE "snapshot.storage.kubernetes.io/volumesnapshot-as-source-protection"
#define SNAP_FIN_BOUND "snapshot.storage.kubernetes.io/volumesnapshot-bound-protection"
#define SNAP_FIN_CONTENT "snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection"
#define SNAP_FIN_PVC "snapshot.storage.kubernetes.io/pvc-as-source-protection"
#define SNAP_ANN_BEING_CREATED "snapshot.storage.kubernetes.io/volumesnapshot-being-created"
#define SNAP_ANN_BEING_DELETED "snapshot.storage.kubernetes.io/volumesnapshot-being-deleted"
#define SNAP_ANN_SECRET_NAME "snapshot.storage.kubernetes.io/deletion-secret-name"
#define SNAP_ANN_SECRET_NS "snapshot.storage.kubernetes.io/deletion-secret-namespace"
#define SNAP_ANN_ALLOW_MODE_CHANGE "snapshot.storage.kubernetes.io/allow-volume-mode-change"
#define SNAP_LABEL_MANAGED_BY "snapshot.storage.kubernetes.io/managed-by"
#define SNAP_CONTENT_PREFIX "snapcontent-"
#define SNAP_PARAM_PREFIX "csi.storage.k8s.io/"
#define SNAP_META_VS_NAME "csi.storage.k8s.io/volumesnapshot/name"
#define SNAP_META_VS_NS "csi.storage.k8s.io/volumesnapshot/namespace"
#define SNAP_META_VSC_NAME "csi.storage.k8s.io/volumesnapshotcontent/name"

/* ---- names, parameters, secrets, classes (names.c) ---- */

/* "snapcontent-<uid>": the content a dynamic snapshot gets. */
void snap_content_name(const struct kube_vs *vs, char *buf, size_t len);
/*
 * The driver's snapshot name: "<prefix>-<uid>", or with uuid_len >= 0 the uid without dashes
 * cut to uuid_len characters. -1 with err for an empty uid or a length beyond the uid.
 */
int snap_csi_name(const char *prefix, const char *uid, int uuid_len, char *buf, size_t len,
		  char *err, size_t errlen);
/*
 * The class parameters sent to CreateSnapshot: every csi.storage.k8s.io/ key dropped (the
 * secret keys are known; any other such key is an error, as upstream). out holds n entries.
 * Returns the count, or -1 with err.
 */
int snap_csi_params(const struct kube_kv *p, size_t n, struct kube_kv *out, char *err,
		    size_t errlen);

enum snap_secret_kind { SNAP_SECRET_CREATE, SNAP_SECRET_LIST, SNAP_SECRET_GROUP,
			SNAP_SECRET_GROUP_GET };
/*
 * The class's snapshotter (or snapshotter-list) secret, templates expanded:
 * ${volumesnapshotcontent.name} in both, ${volumesnapshot.namespace} in both,
 * ${volumesnapshot.name} in the name only; vs_name/vs_ns NULL when there is no snapshot.
 * SNAP_SECRET_GROUP: the group-snapshotter secret, its tokens ${volumegroupsnapshotcontent.name}
 * and ${volumegroupsnapshot.namespace|name}, content and vs_* being the group's;
 * SNAP_SECRET_GROUP_GET the same for group-snapshotter-get (GetVolumeGroupSnapshot).
 * Returns 1 with name/ns filled, 0 when the class names none, -1 with err (one of the pair
 * missing, an unknown or unresolvable template, an invalid result).
 */
int snap_secret_ref(enum snap_secret_kind kind, const struct kube_kv *p, size_t n,
		    const char *content, const char *vs_name, const char *vs_ns, char *name,
		    size_t namelen, char *ns, size_t nslen, char *err, size_t errlen);
/*
 * The one class of `driver` annotated as the default; NULL with err when there is none or
 * more than one (upstream's messages).
 */
const struct kube_vsclass *snap_default_class(const struct kube_vsclass *const *classes, size_t n,
					      const char *driver, char *err, size_t errlen);
/* True when the content's volumeSnapshotRef names the snapshot (namespace, name and uid). */
bool snap_ref_is(const struct kube_vsc *c, const struct kube_vs *vs);
/* True when a gRPC code means the driver has answered for good (not a timeout, abort, ...). */
bool snap_csi_final(int code);

/* ---- snapshot-controller: a VolumeSnapshot (vs_plan.c) ---- */

/* A status error to write (readyToUse false unless keep_ready) with a Warning event. */
struct snap_error {
	const char *reason; /* NULL: none */
	char message[1024];
	bool keep_ready;    /* upstream's setReadyToFalse == false */
};

/* Exactly one of the two sources: NULL when valid, else the message. */
const char *snap_validate_vs(const struct kube_vs *vs);
/* Same for a content's volumeHandle / snapshotHandle. */
const char *snap_validate_vsc(const struct kube_vsc *c);

/* Which finalizers a live snapshot lacks (bound only once bound to a content with Delete). */
void snap_finalizers_needed(const struct kube_vs *vs, const struct kube_vsc *content,
			    bool *source, bool *bound);

/* What to do for a snapshot with a deletionTimestamp. */
struct snap_deletion {
	bool pending;          /* a claim is being restored from it: event SnapshotDeletePending */
	bool annotate_content; /* set volumesnapshot-being-deleted on the content */
	bool delete_content;   /* policy Delete: DELETE the content */
	bool remove_source;    /* drop volumesnapshot-as-source-protection */
	bool remove_bound;     /* drop volumesnapshot-bound-protection */
};
/* content: the bound (or dynamic) content from the cache, NULL when absent. */
void snap_plan_deletion(const struct kube_vs *vs, const struct kube_vsc *content, bool restoring,
			struct snap_deletion *d);

/* The content a pre-provisioned snapshot names, checked. */
enum snap_bind {
	SNAP_BIND_MISSING,   /* not in the cache: SnapshotContentMissing */
	SNAP_BIND_DYNAMIC,   /* has no snapshotHandle: SnapshotContentMismatch */
	SNAP_BIND_MISBOUND,  /* points at another snapshot: SnapshotContentMisbound */
	SNAP_BIND_NEEDED,    /* points back without a uid: set it */
	SNAP_BIND_OK,
};
enum snap_bind snap_check_preprovisioned(const struct kube_vs *vs, const struct kube_vsc *c,
					 struct snap_error *e);
/* The dynamic content "snapcontent-<uid>" when it exists: 0 usable, -1 (with e) not. */
int snap_check_dynamic(const struct kube_vs *vs, const struct kube_vsc *c, struct snap_error *e);
/* A ready, bound snapshot: its content must still exist and point back (else e is set). */
bool snap_check_ready(const struct kube_vs *vs, const struct kube_vsc *c, struct snap_error *e);

/* The snapshot status the content's status asks for, merged as upstream's updateSnapshotStatus. */
struct snap_vs_status {
	const char *bound;          /* boundVolumeSnapshotContentName */
	int64_t creation_ns;        /* -1: keep the snapshot's (or none) */
	int64_t restore_size;       /* -1: none */
	bool ready;
	const char *error_message;  /* NULL: none; copied with error_time */
	const char *error_time;
	bool changed;               /* anything differs from the snapshot's status */
	bool created_event;         /* SnapshotCreated: creationTime appears */
	bool ready_event;           /* SnapshotReady: readyToUse becomes true */
};
void snap_status_from_content(const struct kube_vs *vs, const struct kube_vsc *c,
			      struct snap_vs_status *st);

/* ---- snapshot-controller: the claim and the content to create (vs_plan.c) ---- */

/*
 * Checks the source claim and volume of a dynamic snapshot: the claim exists, is Bound, its
 * volume exists, points back and is a CSI volume. 0, or -1 with err (upstream's messages).
 */
int snap_check_source(const struct kube_vs *vs, const struct kube_pvc *pvc,
		      const struct kube_pv *pv, char *err, size_t errlen);
/* True when a claim of the snapshot's namespace restores from it and is still Pending. */
bool snap_restoring(const struct kube_vs *vs, const struct kube_pvc *const *claims, size_t n);
/* True when some live snapshot of the claim has no creationTime yet (its finalizer stays). */
bool snap_claim_in_use(const struct kube_pvc *pvc, const struct kube_vs *const *snaps, size_t n,
		       const struct kube_vs *skip);

/* ---- snapshot-controller: a VolumeSnapshotContent ---- */
enum snap_vsc_step {
	SNAP_VSC_NOTHING,
	SNAP_VSC_INVALID,      /* ContentValidationError */
	SNAP_VSC_ADD_FINALIZER,
	SNAP_VSC_ANNOTATE_DELETE, /* its snapshot is being deleted */
};
/* vs: the snapshot the content's ref names (NULL when absent). The controller queues that
 * snapshot on every content event, so its status follows the content's. */
enum snap_vsc_step snap_plan_content(const struct kube_vsc *c, const struct kube_vs *vs);

/* ---- csi-snapshotter: one content of our driver (vsc_plan.c) ---- */
enum snap_sidecar_step {
	SNAP_SC_NOTHING,
	SNAP_SC_CREATE,           /* CreateSnapshot (again: same name) */
	SNAP_SC_LIST,             /* pre-provisioned: ListSnapshots by handle */
	SNAP_SC_DELETE,           /* DeleteSnapshot, then clear the status handle */
	SNAP_SC_REMOVE_FINALIZER, /* deleted (or Retain): let the content go */
	SNAP_SC_CLEAR_CREATING,   /* ready: drop a left-over being-created annotation */
};
enum snap_sidecar_step snap_plan_sidecar(const struct kube_vsc *c);

/* ---- group snapshots: names (upstream's) and rules (group.c) ---- */
#define SNAP_GROUP_GROUP "groupsnapshot.storage.k8s.io"
#define SNAP_GROUP_API_VERSION "groupsnapshot.storage.k8s.io/v1"
#define SNAP_GROUP_CONTENT_PREFIX "groupsnapcontent-"
#define SNAP_GFIN_BOUND "groupsnapshot.storage.kubernetes.io/volumegroupsnapshot-bound-protection"
#define SNAP_GFIN_CONTENT "groupsnapshot.storage.kubernetes.io/volumegroupsnapshotcontent-bound-protection"
#define SNAP_FIN_IN_GROUP "snapshot.storage.kubernetes.io/volumesnapshot-in-group-protection"
#define SNAP_GANN_BEING_CREATED "groupsnapshot.storage.kubernetes.io/volumegroupsnapshot-being-created"
#define SNAP_GANN_BEING_DELETED "groupsnapshot.storage.kubernetes.io/volumegroupsnapshot-being-deleted"
#define SNAP_GANN_SECRET_NAME "groupsnapshot.storage.kubernetes.io/deletion-secret-name"
#define SNAP_GANN_SECRET_NS "groupsnapshot.storage.kubernetes.io/deletion-secret-namespace"
#define SNAP_ANN_GROUP_HANDLE "groupsnapshot.storage.k8s.io/volumeGroupSnapshotHandle"
#define SNAP_META_VGS_NAME "csi.storage.k8s.io/volumegroupsnapshot/name"
#define SNAP_META_VGS_NS "csi.storage.k8s.io/volumegroupsnapshot/namespace"
#define SNAP_META_VGSC_NAME "csi.storage.k8s.io/volumegroupsnapshotcontent/name"

/* "groupsnapcontent-<uid>": the content a dynamic group snapshot gets. */
void snap_group_content_name(const struct kube_vgs *g, char *buf, size_t len);
/*
 * The member VolumeSnapshot "snapshot-<hex sha256(group uid + volume handle)>" and its content
 * "snapcontent-<the same>": fixed by the group and the volume, so a retry finds them again.
 * Either buffer may be NULL; 76 bytes hold each.
 */
void snap_group_member_names(const char *group_uid, const char *volume_handle, char *vs,
			     size_t vslen, char *vsc, size_t vsclen);
/* The one default group class of `driver` (annotation groupsnapshot.storage.kubernetes.io/
 * is-default-class); NULL with err as snap_default_class. */
const struct kube_vsclass *snap_default_group_class(const struct kube_vsclass *const *classes,
						    size_t n, const char *driver, char *err,
						    size_t errlen);

/*
 * The claims a group snapshot takes: those of its namespace its selector matches, each Bound to
 * a CSI volume of one driver. claims/pvs are parallel (pvs[i] the volume of claims[i], NULL when
 * not in the cache). Fills handles (room for n) and *driver; returns the count, or -1 with err
 * (no claim matches, one is unbound, not CSI, or the drivers differ).
 */
int snap_group_volumes(const struct kube_vgs *g, const struct kube_pvc *const *claims,
		       const struct kube_pv *const *pvs, size_t n, const char **handles,
		       const char **driver, char *err, size_t errlen);
/* True when the group content's volumeGroupSnapshotRef names g (namespace, name and uid). */
bool snap_group_ref_is(const struct kube_vgsc *c, const struct kube_vgs *g);

/*
 * What snapshot-controller does next for a live group snapshot (one step per sync). A dynamic
 * group (spec.source.selector) gets groupsnapcontent-<uid>; a pre-provisioned one
 * (spec.source.volumeGroupSnapshotContentName) binds the content an admin made with
 * spec.source.groupSnapshotHandles, in upstream's order: checked, finalizer, the content's ref
 * uid (and class), the content's finalizer, then the status.
 */
enum snap_group_step {
	SNAP_G_NOTHING,
	SNAP_G_INVALID,        /* not exactly one of selector and content name: GroupSnapshotValidationError */
	SNAP_G_CREATE_CONTENT, /* create groupsnapcontent-<uid> */
	SNAP_G_ADD_FINALIZER,  /* volumegroupsnapshot-bound-protection */
	SNAP_G_CREATE_MEMBERS, /* the content is ready: VolumeSnapshots and contents per member */
	SNAP_G_STATUS,         /* copy the content's status */
	SNAP_G_CONTENT_MISSING, /* pre-provisioned: the named content is not there */
	SNAP_G_MISMATCH,       /* pre-provisioned names a content without groupSnapshotHandles */
	SNAP_G_MISBOUND,       /* pre-provisioned: the content's ref names another group */
	SNAP_G_BIND,           /* pre-provisioned: set the content's ref uid (and the group's class) */
	SNAP_G_ADD_CONTENT_FINALIZER, /* pre-provisioned: volumegroupsnapshotcontent-bound-protection */
};
/* content: groupsnapcontent-<uid>, or the content a pre-provisioned group names, from the cache
 * (NULL when absent); members_done: every member its status lists is a bound VolumeSnapshot
 * (true when it lists none, as a pre-provisioned content's). */
enum snap_group_step snap_plan_group(const struct kube_vgs *g, const struct kube_vgsc *content,
				     bool members_done);

/* What csi-snapshotter does next for a group content of its driver. */
enum snap_group_sidecar_step {
	SNAP_GSC_NOTHING,
	SNAP_GSC_ADD_FINALIZER,    /* volumegroupsnapshotcontent-bound-protection before the call */
	SNAP_GSC_CREATE,           /* CreateVolumeGroupSnapshot (again: same name) */
	SNAP_GSC_DELETE,           /* DeleteVolumeGroupSnapshot, then drop the finalizer */
	SNAP_GSC_REMOVE_FINALIZER, /* Retain, or nothing was created */
	SNAP_GSC_GET,              /* pre-provisioned, not ready: GetVolumeGroupSnapshot */
	SNAP_GSC_CLEAR_CREATING,   /* ready: drop a left-over volumegroupsnapshot-being-created */
};
enum snap_group_sidecar_step snap_plan_group_sidecar(const struct kube_vgsc *c);

/*
 * ---- csi-snapshotter: which informer updates of a content it syncs (updates.c) ----
 * upstream's ShouldEnqueueContentChange and (v8.7) ShouldEnqueueGroupContentChange: a resync,
 * a content turning ready, or a change of what someone else writes (spec, deletion, the
 * controller's annotations, the node label); not the sidecar's own status, finalizer or
 * being-created writes, so a content that is not ready keeps the queue's back-off. An update
 * that changes the next step is synced too (kcsi makes one step per sync).
 */
bool snap_sidecar_update_wanted(const struct kube_vsc *old, const struct kube_vsc *new);
bool snap_group_sidecar_update_wanted(const struct kube_vgsc *old, const struct kube_vgsc *new);

/* ---- the writes both controllers make (io.c; the only file here that talks to the API) ---- */
struct kube_client;
struct kube_recorder;
struct kube_err;
struct strbuf;

/*
 * Merge-patches o's finalizers to its list without drop1 and drop2 and with `add` (any NULL),
 * carrying o's resourceVersion so that a concurrent change is a 409, not a lost finalizer.
 * 0, or -1 with *e.
 */
int snap_patch_finalizers(struct kube_client *kc, const struct kube_obj *o, const char *drop1,
			  const char *drop2, const char *add, struct kube_err *e);
/* Merge-patches one annotation of o (value NULL removes it). 0, or -1 with *e. */
int snap_patch_annotation(struct kube_client *kc, const struct kube_obj *o, const char *key,
			  const char *value, struct kube_err *e);
/* A merge patch (JSON text) of o or its /status. 0, or -1 with *e. */
int snap_patch(struct kube_client *kc, const struct kube_obj *o, bool status, const char *body,
	       struct kube_err *e);
/* Records an event about o (rec NULL: none). */
#define snap_event(rec, o, warning, reason, ...)                                              \
	kube_event_about((rec), (o), (warning) ? KUBE_EVENT_WARNING : KUBE_EVENT_NORMAL, (reason), \
			 __VA_ARGS__)
/*
 * upstream's update*ErrorStatusWithEvent for contents and groups: status readyToUse false and
 * error {time, message}, and a Warning event, once per new message (old_message: the object's).
 */
void snap_error_status(struct kube_client *kc, struct kube_recorder *rec, const struct kube_obj *o,
		       const char *old_message, const char *reason, const char *msg);
/* A CSI creation_time in ns since the epoch; now when the driver left it unset. */
int64_t snap_csi_time_ns(const Google__Protobuf__Timestamp *t);
/* "rpc error: code = NotFound desc = ..." as the Go sidecars word a gRPC error. */
void snap_grpc_error(int code, const char *message, char *out, size_t outlen);
/* RFC 3339 in seconds, as metav1.Time is written. */
void snap_time_text(int64_t ns, char *buf, size_t len);

#endif
