/*
 * csi-resizer: the external-resizer (v2.3), in C.
 *
 * Component map:
 *   decide.c      pure decisions, no I/O: which claims need an expansion and to what size
 *                 (upstream's expandAndRecover), which conditions,
 *                 allocatedResources and allocatedResourceStatuses a step writes (as strategic
 *                 merge patches of the claim's status), final vs infeasible vs retryable CSI
 *                 errors, the same for VolumeAttributesClass modifications, feature gates, the
 *                 per-call timeouts and the controller-expand secret templates.
 *                 tests/unit/test_resizer.c is their table.
 *   controller.c  the I/O: informers (claims, volumes, classes, VolumeAttributesClasses, pods for
 *                 --handle-volume-inuse-error), the claim queue, the slow set and the final-error
 *                 set, ControllerExpandVolume, the PV and claim patches, events.
 *   modify.c      the modify controller's I/O: its queue, ControllerModifyVolume, its patches.
 *   shared.c      what both controllers use: cache reads, keys, the sets, status patch, events.
 *   run.c         flags, the VolumeAttributesClass discovery check and the struct sidecar_ops
 *                 (src/sidecar does every start-up step).
 *
 * Ownership: struct rsz_ctrl owns its informers, queues, threads and sets; it borrows the kube
 * client, the CSI connection and the recorder, which the caller keeps alive until
 * rsz_ctrl_free(). Records handed to decide.c are borrowed for the call.
 */
#ifndef KCSI_RESIZER_RESIZER_H
#define KCSI_RESIZER_RESIZER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/featuregate.h"
#include "base/flags.h"
#include "base/strbuf.h"
#include "csi/client.h"
#include "kube/client.h"
#include "kube/events.h"
#include "kube/hmap.h"
#include "kube/informer.h"
#include "kube/objects.h"
#include "kube/workqueue.h"
#include "sidecar/sidecar.h"

/* ---- names (upstream's, facts of the interface) ---- */
#define RSZ_ANN_RESIZER "volume.kubernetes.io/storage-resizer"
#define RSZ_ANN_NODE_EXPANSION_NOT_REQUIRED "volume.kubernetes.io/node-expansion-not-required"
#define RSZ_ANN_PRE_RESIZE_CAPACITY "volume.alpha.kubernetes.io/pre-resize-capacity"
#define RSZ_PARAM_SECRET_NAME "csi.storage.k8s.io/controller-expand-secret-name"
#define RSZ_PARAM_SECRET_NS "csi.storage.k8s.io/controller-expand-secret-namespace"
#define RSZ_META_PVC_NAME "csi.storage.k8s.io/pvc/name"
#define RSZ_META_PVC_NAMESPACE "csi.storage.k8s.io/pvc/namespace"
#define RSZ_META_PV_NAME "csi.storage.k8s.io/pv/name"
/* Event reasons. */
#define RSZ_EV_RESIZING "Resizing"
#define RSZ_EV_FAILED "VolumeResizeFailed"
#define RSZ_EV_SUCCESS "VolumeResizeSuccessful"
#define RSZ_EV_FS_REQUIRED "FileSystemResizeRequired"
#define RSZ_EV_MODIFY "VolumeModify"
#define RSZ_EV_MODIFY_SUCCESS "VolumeModifySuccessful"
#define RSZ_EV_MODIFY_FAILED "VolumeModifyFailed"
#define RSZ_EV_MODIFY_CANCELLED "VolumeModifyCanceled"
#define RSZ_FS_PENDING_MESSAGE \
	"Waiting for user to (re-)start a pod to finish file system resize of volume on node."

/* ---- flags (run.c) ---- */
struct rsz_config {
	struct sidecar_config sc; /* kube flags, --csi-address, --timeout, diagnostics, gates */
	int64_t resize_timeout_ns; /* --resize-timeout 10s: each ControllerExpandVolume */
	int64_t modify_timeout_ns; /* --modify-timeout 10s: each ControllerModifyVolume */
	bool timeout_given;        /* --timeout was on the command line (rsz_config_resolve) */
	int workers;
	bool handle_inuse_error;
	bool extra_modify_metadata;
	bool node_deployment; /* kcsi only: act on $NODE_NAME's volumes (rsz_ctrl_opts.node) */
};
void rsz_register_flags(struct flagset *fs, struct rsz_config *c);
/* After parsing: records which of the flags rsz_resolve_timeouts() weighs were given. */
void rsz_config_resolve(struct rsz_config *c, const struct flagset *fs);
/* Runs until SIGTERM/SIGINT; returns the process exit code. */
int rsz_run(const struct rsz_config *c);

/* ---- feature gates (decide.c) ---- */
struct rsz_gates {
	bool vac;                /* VolumeAttributesClass, GA, default true */
	bool vac_explicit;       /* named in --feature-gates: discovery does not override it */
	bool annotate_fs_resize; /* AnnotateFsResize, beta, default true (v2.3) */
};
/*
 * Fills g from --feature-gates, checked against rsz_feature_gates and the generic gates
 * (base/featuregate.h, upstream's rules: unknown, not a bool, or against a lock is an error).
 */
extern const struct feature_gate rsz_feature_gates[];
extern const size_t rsz_feature_gates_len;
int rsz_parse_gates(const struct flag_map *m, struct rsz_gates *g, char *err, size_t errlen);

/*
 * The per-call deadlines of ControllerExpandVolume and ControllerModifyVolume, as v2.3's
 * resolveOperationTimeouts: --timeout given on the command line wins over both
 * --resize-timeout and --modify-timeout; otherwise each is its own flag (default 10s). The
 * driver's start-up calls (Probe, GetPluginInfo, capabilities) always use --timeout.
 */
void rsz_resolve_timeouts(int64_t timeout, bool timeout_given, int64_t resize, int64_t modify,
			  int64_t *resize_out, int64_t *modify_out);

/* ---- which claims (decide.c) ---- */
/* Upstream's pvcNeedResize: Bound, a volume name, and request > status.capacity. */
bool rsz_claim_needs_resize(const struct kube_pvc *pvc);
enum rsz_skip {
	RSZ_OK,
	RSZ_NOT_OURS,      /* not a CSI volume of this driver */
	RSZ_NOT_BOUND_TO,  /* the PV's claimRef names another claim */
	RSZ_NO_CLASS,      /* the claim's StorageClass does not exist (or it names none) */
	RSZ_NOT_ALLOWED,   /* the class does not set allowVolumeExpansion */
};
/* Upstream's pvCanBeExpanded plus the class check kube-apiserver's admission does. */
enum rsz_skip rsz_can_expand(const struct kube_pvc *pvc, const struct kube_pv *pv,
			     const struct kube_storageclass *sc, const char *driver);
const char *rsz_skip_reason(enum rsz_skip s);

/* What the controller knows about a claim beyond its objects. */
struct rsz_memory {
	bool final_error; /* the last ControllerExpandVolume ended with a final error */
	bool slow;        /* an infeasible answer less than --retry-interval-max ago */
};

enum rsz_action {
	RSZ_NOTHING, /* nothing to do (node expansion pending, or a spurious event) */
	RSZ_DELAY,   /* infeasible recently: retry when the slow set lets it */
	RSZ_EXPAND,  /* mark in progress (when update_status), then expand to new_size */
};
struct rsz_plan {
	enum rsz_action action;
	int64_t new_size;
	bool update_status; /* write allocatedResourceStatuses and drop old resize conditions */
};
/*
 * Upstream's expandAndRecover (the RecoverVolumeExpansionFailure behaviour, the only one since
 * v2.3): the size to expand to, from the PV's size, the claim's request, allocatedResources and
 * allocatedResourceStatuses. controller_expand: the driver has EXPAND_VOLUME.
 */
struct rsz_plan rsz_plan_recover(const struct kube_pvc *pvc, const struct kube_pv *pv,
				 const struct rsz_memory *mem, bool controller_expand);
/*
 * AnnotateFsResize: the PV's volume.alpha.kubernetes.io/pre-resize-capacity (written with the
 * new capacity when the node must finish an expansion, so that kube-controller-manager can give
 * a claim that binds the volume anew the old size and the node expands it again) has served
 * once the node is done: the claim's status.capacity reached the PV's spec.capacity. True when
 * the annotation is there and should go (upstream's isNodeExpandComplete).
 */
bool rsz_pre_resize_ann_done(const struct kube_pvc *pvc, const struct kube_pv *pv);

/* ---- CSI errors (decide.c) ---- */
/* gRPC code of a failure before any answer of the driver (secrets, capability). */
#define RSZ_NOT_GRPC (-1)
/* Upstream's IsFinalError: the operation is surely not in progress in the driver. */
bool rsz_is_final(int code);
/* Upstream's IsResizeInfeasibleError: InvalidArgument, OutOfRange, NotFound. */
bool rsz_is_infeasible(int code);
/* Upstream's in-use error: FailedPrecondition (the driver cannot expand online). */
bool rsz_is_inuse(int code);
enum rsz_failure {
	RSZ_FAIL_RETRY,      /* not final: forget the final-error mark, leave the slow set */
	RSZ_FAIL_INFEASIBLE, /* ControllerResizeInfeasible + ControllerResizeError, slow set */
	RSZ_FAIL_FINAL,      /* ControllerResizeError only, leave the slow set */
};
enum rsz_failure rsz_classify_failure(int code);

/* ---- status patches (decide.c) ---- */
/*
 * One write of a claim's status, as upstream's mark* functions make it. cond_set: the
 * condition bits (enum kube_pvc_cond_bit) written with status True; cond_drop: the ones deleted.
 * Written as a strategic merge patch: conditions merge by type, so the claim's other conditions
 * stay, and a dropped type is a "$patch": "delete" element (a no-op when absent).
 */
struct rsz_patch {
	unsigned cond_set, cond_drop;
	const char *messages[6];   /* per condition bit index; NULL: no message */
	const char *reasons[6];    /* per condition bit index; NULL: no reason */
	bool probe_time;           /* the conditions set carry lastProbeTime (modify's do) */
	bool conds_null;           /* status.conditions: null (nothing else is left in it) */
	int64_t allocated;         /* status.allocatedResources.storage; -1: unchanged */
	int resize_status;         /* enum kube_resize_status; -1 unchanged; NONE removes it */
	int64_t capacity;          /* status.capacity.storage; -1: unchanged */
	const char *rv;            /* metadata.resourceVersion precondition; NULL: none */
	bool not_required_ann;     /* set the node-expansion-not-required annotation */
	/* modify controller */
	int modify_status;         /* enum kube_modify_status; -1 unchanged; NONE removes it */
	const char *modify_target; /* targetVolumeAttributesClassName with modify_status */
	const char *current_vac;   /* status.currentVolumeAttributesClassName; NULL: unchanged */
};
#define RSZ_PATCH_INIT { .allocated = -1, .resize_status = -1, .capacity = -1, .modify_status = -1 }
/* The patch as JSON text; now is the lastTransitionTime of the conditions it sets. */
void rsz_patch_json(const struct rsz_patch *p, const char *now, struct strbuf *out);

/* Upstream's markControllerResizeInProgress. */
struct rsz_patch rsz_mark_in_progress(const struct kube_pvc *pvc, const struct rsz_plan *plan);
/* markForPendingNodeExpansion. */
struct rsz_patch rsz_mark_node_pending(const struct kube_pvc *pvc);
/* markControllerExpansionInfeasible (infeasible) or markControllerExpansionFailedCondition;
 * message is "failed to expand pvc with <error>" (in buf, which the patch points to). */
struct rsz_patch rsz_mark_failed(const struct kube_pvc *pvc, bool infeasible, const char *error,
				 char *buf, size_t buflen);
/* markOverallExpansionAsFinished. */
struct rsz_patch rsz_mark_finished(const struct kube_pvc *pvc, int64_t new_size);

/* ---- secrets (decide.c) ---- */
struct rsz_secret_ref {
	bool set;
	char name[254];
	char ns[64];
};
/*
 * The controller-expand secret: the PV's spec.csi.controllerExpandSecretRef (what upstream v2
 * reads), else the class's csi.storage.k8s.io/controller-expand-secret-name/-namespace with
 * ${pv.name}, ${pvc.name}, ${pvc.namespace} expanded (the namespace template may not use
 * ${pvc.name}, as upstream). Only one of the two keys, an unknown token, or a result that is
 * not a DNS-1123 name is an error.
 */
int rsz_secret_ref(const struct kube_pv *pv, const struct kube_pvc *pvc,
		   const struct kube_storageclass *sc, struct rsz_secret_ref *ref, char *err,
		   size_t errlen);

/* ---- VolumeAttributesClass modification (decide.c) ---- */
/* Upstream v2.x's modify(): what a claim's spec and modifyVolumeStatus ask for. */
enum rsz_modify_action {
	RSZ_MODIFY_NOTHING,     /* no status and the spec's class is the current one */
	RSZ_MODIFY_ROLLED_BACK, /* the spec names no class and nothing is in progress */
	RSZ_MODIFY_DELAY,       /* the same target was infeasible lately: wait out the slow set */
	RSZ_MODIFY_CONTINUE,    /* an uncertain call (or no class in the spec): call again for
				 * status.modifyVolumeStatus.targetVolumeAttributesClassName, no mark */
	RSZ_MODIFY_START,       /* the spec's class: Pending when it does not exist, else mark
				 * InProgress, event VolumeModify, ControllerModifyVolume */
};
struct rsz_modify_memory {
	bool uncertain; /* the last call for the claim ended with a non-final error */
	bool slow;      /* the status's target is the spec's and was infeasible lately */
};
enum rsz_modify_action rsz_plan_modify(const struct kube_pvc *pvc,
				       const struct rsz_modify_memory *mem);
/* True when status.modifyVolumeStatus targets the spec's class (upstream's slow set applies). */
bool rsz_modify_targets_spec(const struct kube_pvc *pvc);
/*
 * markControllerModifyVolumeStatus: status (Pending, InProgress or Infeasible) with, unless
 * Pending, the ModifyingVolume condition; code/message: the driver's gRPC error (code < 0: none),
 * which adds ModifyVolumeError (reason the code's name, message the driver's) and keeps target
 * (the class the call was for); without an error the target is the spec's class; final: the error is final ("failed") rather than uncertain ("still in progress").
 * buf holds the condition's message.
 */
struct rsz_patch rsz_mark_modify(const struct kube_pvc *pvc, int status, const char *target,
				 int code, const char *message, bool final, char *buf, size_t buflen);
/* markControllerModifyVolumeCompleted: current class = target, status and conditions cleared. */
struct rsz_patch rsz_mark_modify_done(const struct kube_pvc *pvc, const char *target);
/* markRolledBack: ModifyingVolume goes. */
struct rsz_patch rsz_mark_rolled_back(const struct kube_pvc *pvc);

/* ---- controller (controller.c, modify.c) ---- */
struct rsz_ctrl_opts {
	const char *driver;
	struct csi_conn *csi;
	struct kube_recorder *recorder;
	struct rsz_gates gates;
	int workers;
	int64_t resize_timeout_ns, modify_timeout_ns; /* rsz_resolve_timeouts()' answers */
	int64_t retry_start_ns, retry_max_ns, resync_ns;
	bool resize;             /* expansion: EXPAND_VOLUME, or the node's (trivial resizer) */
	bool controller_expand;  /* EXPAND_VOLUME controller capability */
	bool modify;             /* MODIFY_VOLUME and the VolumeAttributesClass gate */
	bool snmw;               /* SINGLE_NODE_MULTI_WRITER, for the volume capability */
	bool handle_inuse_error;
	bool extra_modify_metadata;
	/* --node-deployment (kcsi only): this node's name; only volumes whose PV node affinity
	 * admits the node are expanded or modified here. NULL: every volume of the driver. */
	const char *node;
};

struct rsz_ctrl {
	struct rsz_ctrl_opts o;
	struct kube_client *kc;
	struct kube_informer *pvc_inf, *pv_inf, *sc_inf, *vac_inf, *pod_inf;
	struct kube_informer *node_inf; /* --node-deployment: this node only */
	struct kube_workqueue *q, *mq;
	pthread_mutex_t mu;        /* guards the sets below and stop */
	struct kube_hmap final;    /* claim keys whose last expansion ended with a final error */
	struct kube_hmap slow;     /* claim key -> infeasible time (int64 ns, boxed) */
	struct kube_hmap inuse;    /* claim keys whose last expansion answered FailedPrecondition */
	struct kube_hmap uncertain; /* modify: claim keys with a non-final ControllerModifyVolume */
	struct kube_hmap mslow;    /* modify: claim key -> infeasible time */
	bool stop;
};

struct rsz_ctrl *rsz_ctrl_new(struct kube_client *kc, const struct rsz_ctrl_opts *o);
/* Starts informers, waits for their caches, then starts workers. */
int rsz_ctrl_start(struct rsz_ctrl *c, char *err, size_t errlen);
void rsz_ctrl_stop(struct rsz_ctrl *c);
void rsz_ctrl_free(struct rsz_ctrl *c);

/* Shared by controller.c and modify.c (shared.c), and the modify worker (modify.c). */
/* "ns/name" -> ns (copied into ns) and name (pointing into key). */
void rsz_split_key(const char *key, char *ns, size_t nslen, const char **name);
struct kube_obj *rsz_get(struct kube_informer *inf, const char *ns, const char *name);
/* Whether this resizer acts on pv: always, or with --node-deployment when the PV's node affinity
 * admits this node (a PV without one belongs to no node). */
bool rsz_pv_here(struct rsz_ctrl *c, const struct kube_pv *pv);
/* PATCH of the claim's /status (strategic merge); 0, or -1 with *e filled. */
int rsz_patch_claim(struct rsz_ctrl *c, const struct kube_pvc *pvc, const struct rsz_patch *p,
		    struct kube_err *e);
/* An event about the claim (no recorder: none). */
#define rsz_event(c, pvc, warning, reason, ...)                                                  \
	kube_event_about((c)->o.recorder, &(pvc)->meta,                                          \
			 (warning) ? KUBE_EVENT_WARNING : KUBE_EVENT_NORMAL, (reason), __VA_ARGS__)
/* The slow sets: true while key was marked less than --retry-interval-max ago; *left_ns. */
bool rsz_slow_has(struct rsz_ctrl *c, struct kube_hmap *set, const char *key, int64_t *left_ns);
void rsz_slow_add(struct rsz_ctrl *c, struct kube_hmap *set, const char *key);
/* The plain sets (final errors, in use): membership only. */
void rsz_set_add(struct rsz_ctrl *c, struct kube_hmap *set, const char *key);
void rsz_set_del(struct rsz_ctrl *c, struct kube_hmap *set, const char *key);
bool rsz_set_has(struct rsz_ctrl *c, struct kube_hmap *set, const char *key);
enum kube_work_result rsz_modify_work(void *arg, const char *key);
/* Marks the claims InProgress in the synced cache as uncertain (before the workers start). */
void rsz_modify_init(struct rsz_ctrl *c);

#endif
