/*
 * csi-provisioner internals, and the map of the component (provisioner.h is its public face).
 *
 * Decisions are plain functions of records and flags, with no I/O (decide.c, topology.c, pv.c),
 * so that table-driven unit tests read like seed 004's tables. The controller does the I/O, one
 * concern a file:
 *   controller.c  informers (compact records of this driver's claims and volumes, filtered before
 *                 caching; StorageClasses; CSINodes and Nodes for topology; VolumeAttachments),
 *                 their handlers (enqueue only), the four queues and their workers, the life
 *                 cycle (prov_ctrl_new/start/stop/free); it calls the workers below
 *   shared.c      what the workers all use (cache reads, events, keys, finalizer patches,
 *                 secrets); it calls none of them, so no two files use each other
 *   claims.c      the "claims" worker (prov_sync_claim) and prov_provision(): preflight, prepare,
 *                 call (CreateVolume, final or in-background errors, reschedule), save; for a
 *                 node deployment it acts on nodedeploy.c's prov_node_claim() answer
 *   prepare.c     prov_prepare(): claim and class -> CreateVolumeRequest (checks, name,
 *                 capabilities, data source, topology, secrets, parameters)
 *   sources.c     data sources: a clone's source claim and volume, a VolumeSnapshot and its
 *                 content; the cloning-protection finalizer and its worker
 *   snapfinalizer.c  the VolumeSnapshot source-protection finalizer: added before a restore's
 *                 CreateVolume, removed after its success, and the orphan sweep (its own
 *                 VolumeSnapshot informer and thread, --snapshot-orphan-sweep-interval)
 *   volumes.c     the "volumes" worker (PV finalizer, deletion of Released PVs) and the
 *                 "unsavedpvs" worker (PVs whose volume exists but whose object is not saved yet)
 *   nodedeploy.c  --node-deployment: which claims this node caches and takes, the wait and the
 *                 race for immediate-binding claims (the request's topology: prepare.c) (its volumes: the PV filter in controller.c
 *                 and prov_sync_volume() keep those whose affinity admits this node)
 *   capacity.c    --enable-capacity: one CSIStorageCapacity per topology segment and class (its
 *                 own informers and queue); metrics.c the counters; run.c flags -> options
 *
 * Upstream's names and behaviours, one hop away:
 *   shouldProvision                      decide.c prov_should_provision()
 *   provisionClaimOperation, Provision   claims.c prov_provision()
 *   prepareProvision                     prepare.c prov_prepare()
 *   checkError: final or in progress     decide.c prov_check_error(), from claims.c create_failed()
 *   claim rescheduled after a final      claims.c create_failed() -> reschedule(), which drops
 *     error (rescheduleProvisioning)       the selected-node annotation
 *   getPVCSource, setCloneFinalizer      sources.c prov_clone_source()
 *   getSnapshotSource                    sources.c prov_snapshot_source()
 *   setSnapshotFinalizer                 snapfinalizer.c prov_snapshot_protect()
 *   removeSnapshotFinalizer              snapfinalizer.c prov_snapshot_release()
 *   SnapshotFinalizerController          snapfinalizer.c prov_sweep_*(); its pending index is
 *                                          decide.c prov_snapshot_restore_pending()
 *   the cloning-protection controller    sources.c prov_sync_clone_source()
 *   handleProtectionFinalizer            volumes.c volume_work(), volume_finalizer()
 *   shouldDelete, deleteVolumeOperation  volumes.c should_delete(), delete_volume()
 *   cleanupVolume, unsaved PVs           volumes.c prov_cleanup_volume(), prov_sync_unsaved()
 *   node deployment: checkNode           nodedeploy.c prov_node_claim()
 *   node deployment's delay              nodedeploy.c owner_wait() (first try: the claim's order,
 *                                          decide.c prov_owner_score() and prov_owner_delay();
 *                                          after a failed try: prov_owner_backoff())
 *   node deployment: becomeOwner         nodedeploy.c become_owner(); checkCapacity is
 *                                          node_has_room(); the selected-node PATCH race is
 *                                          select_this_node()
 *
 * Ownership: struct prov_ctrl owns its informers, queues, threads and maps (and the capacity
 * controller); it borrows the kube client, the CSI connection, the recorder and the option
 * structs they point to (capacity, node deployment), which the caller keeps alive until
 * prov_ctrl_free(). Each map belongs to one file (see struct prov_ctrl), which frees its values.
 */
#ifndef KCSI_PROVISIONER_PROV_H
#define KCSI_PROVISIONER_PROV_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
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
#include "base/featuregate.h"
#include "base/flags.h"
#include "base/strbuf.h"

/* ---- names and keys (upstream's, facts of the interface) ---- */
#define PROV_ANN_STORAGE_PROVISIONER "volume.kubernetes.io/storage-provisioner"
#define PROV_ANN_SELECTED_NODE "volume.kubernetes.io/selected-node"
#define PROV_ANN_PROVISIONED_BY "pv.kubernetes.io/provisioned-by"
#define PROV_ANN_DELETE_SECRET_NAME "volume.kubernetes.io/provisioner-deletion-secret-name"
#define PROV_ANN_DELETE_SECRET_NS "volume.kubernetes.io/provisioner-deletion-secret-namespace"
#define PROV_ANN_MODIFY_SECRET_NAME "volume.kubernetes.io/controller-modify-secret-name"
#define PROV_ANN_MODIFY_SECRET_NS "volume.kubernetes.io/controller-modify-secret-namespace"
#define PROV_PV_FINALIZER "external-provisioner.volume.kubernetes.io/finalizer"
#define PROV_CLONE_FINALIZER "provisioner.storage.kubernetes.io/cloning-protection"
/* On a VolumeSnapshot while a claim is restored from it (not the snapshot-controller's
 * snapshot.storage.kubernetes.io/volumesnapshot-as-source-protection). */
#define PROV_SNAPSHOT_FINALIZER "provisioner.storage.kubernetes.io/volumesnapshot-as-source-protection"
#define PROV_IDENTITY_KEY "storage.kubernetes.io/csiProvisionerIdentity"
#define PROV_PARAM_PREFIX "csi.storage.k8s.io/"
#define PROV_PARAM_FSTYPE "csi.storage.k8s.io/fstype"
#define PROV_META_PVC_NAME "csi.storage.k8s.io/pvc/name"
#define PROV_META_PVC_NAMESPACE "csi.storage.k8s.io/pvc/namespace"
#define PROV_META_PV_NAME "csi.storage.k8s.io/pv/name"
#define PROV_SNAPSHOT_GROUP "snapshot.storage.k8s.io"

/* ---- feature gates (decide.c) ---- */
struct prov_gates {
	bool topology;                 /* Topology, GA, default true (since v5.0) */
	bool honor_pv_reclaim_policy;  /* the PV deletion-protection finalizer: always on since
					  v6.2 removed the HonorPVReclaimPolicy gate */
	bool cross_namespace_source;   /* CrossNamespaceVolumeDataSource, default false; accepted */
	bool vac;                      /* VolumeAttributesClass, GA, default true: a claim's class
					  goes to CreateVolume and onto the PV */
	bool vac_explicit;             /* named in --feature-gates: discovery does not turn it off */
};
/*
 * Fills g from --feature-gates, checked against prov_feature_gates and the generic gates
 * (base/featuregate.h): an unknown gate, a value that is not a Go bool, or a locked gate set
 * against its lock is an error.
 */
extern const struct feature_gate prov_feature_gates[];
extern const size_t prov_feature_gates_len;
int prov_parse_gates(const struct flag_map *m, struct prov_gates *g, char *err, size_t errlen);

/* ---- claim selection (decide.c) ---- */
enum prov_claim_decision {
	PROV_IGNORE,        /* not ours, already bound, or nothing to do: forget the key */
	PROV_WAIT_FOR_NODE, /* WaitForFirstConsumer without a selected node: wait for the scheduler */
	PROV_NO_CLASS,      /* ours, but the StorageClass does not exist: retry with backoff */
	PROV_PROVISION,     /* provision it */
};
/*
 * Upstream's shouldProvision: unbound (no spec.volumeName), the storage-provisioner annotation
 * (or its beta name) equal to driver, a StorageClass, and for WaitForFirstConsumer classes a
 * selected node. sc is the claim's class from the cache (NULL when absent).
 */
enum prov_claim_decision prov_should_provision(const struct kube_pvc *pvc, const char *driver,
					       const struct kube_storageclass *sc);

/* ---- the snapshot source-protection sweep (decide.c) ---- */
/*
 * Upstream's pending index: whether a claim may still be provisioning from a VolumeSnapshot
 * (phase Pending or unset, spec.dataSource of kind VolumeSnapshot with no API group or
 * snapshot.storage.k8s.io). When it is, key gets "<claim namespace>/<snapshot name>".
 */
bool prov_snapshot_restore_pending(const struct kube_pvc *pvc, char *key, size_t keylen);

/* ---- volume name (decide.c) ---- */
/*
 * "<prefix>-<uid>"; with uuid_len >= 0 the UID's dashes are removed and it is cut to uuid_len
 * characters. Errors: empty prefix, empty UID, uuid_len longer than the UID.
 */
int prov_volume_name(const char *prefix, const char *uid, int uuid_len, char *out, size_t outlen,
		     char *err, size_t errlen);

/* ---- StorageClass parameters (decide.c) ---- */
/* fsType from "fstype" (any case, deprecated) or csi.storage.k8s.io/fstype; both is an error;
 * neither gives def ("" when def is NULL). *out points into params or def. */
int prov_fstype(const struct kube_kv *params, size_t n, const char *def, const char **out,
		char *err, size_t errlen);
/* Copies the parameters without the csi.storage.k8s.io/ keys into out (room for n entries);
 * an unknown csi.storage.k8s.io/ key is an error, as upstream. Returns the count or -1. */
int prov_strip_params(const struct kube_kv *params, size_t n, struct kube_kv *out, char *err,
		      size_t errlen);

/* ---- secrets (decide.c) ---- */
enum prov_secret_kind {
	PROV_SECRET_PROVISIONER, PROV_SECRET_CONTROLLER_PUBLISH, PROV_SECRET_NODE_STAGE,
	PROV_SECRET_NODE_PUBLISH, PROV_SECRET_CONTROLLER_EXPAND, PROV_SECRET_NODE_EXPAND,
	PROV_SECRET_CONTROLLER_MODIFY, /* no PV field: the PV's controller-modify-secret
					  annotations, which csi-resizer reads */
	PROV_SECRET_KINDS
};
struct prov_secret_ref {
	bool set;
	char name[254];
	char ns[64];
};
/* What templates may use. annotations may be NULL (then ${pvc.annotations['k']} is invalid). */
struct prov_template_ctx {
	const char *pv_name;
	const char *pvc_name; /* NULL: not available */
	const char *pvc_ns;
	const struct kube_kv *annotations;
	size_t nannotations;
};
/*
 * Resolves the secret reference of one kind from StorageClass parameters (current keys,
 * deprecated csiXxxSecretName keys, then the csi.storage.k8s.io/secret-name defaults), expanding
 * ${pv.name}, ${pvc.namespace}, ${pvc.name}, ${pvc.annotations['KEY']} (the name only). The
 * result must be a valid namespace / Secret name. No reference is not an error (ref->set false).
 */
int prov_secret_ref(enum prov_secret_kind kind, const struct kube_kv *params, size_t n,
		    const struct prov_template_ctx *ctx, struct prov_secret_ref *ref, char *err,
		    size_t errlen);
/* True when a name template of any kind uses ${pvc.annotations[...]}. */
bool prov_params_use_annotations(const struct kube_kv *params, size_t n);
/* os.Expand semantics: $name and ${name}; an unknown name is an error listing them. */
int prov_expand(const char *tmpl, const struct kube_kv *vars, size_t nvars, char *out,
		size_t outlen, char *err, size_t errlen);

/* ---- capabilities (decide.c) ---- */
/* CSI access mode for one Kubernetes access mode bit (enum kube_access_mode): the shared rule. */
#define prov_access_mode(mode_bit, snmw) csi_access_mode_of_k8s(kube_access_mode_name(mode_bit), (snmw))

/* ---- CSI errors (decide.c) ---- */
enum prov_state {
	PROV_FINISHED,      /* final: no operation in progress; report and retry later */
	PROV_IN_BACKGROUND, /* may still be in progress: retry with the same name, never give up */
	PROV_NO_CHANGE,     /* failed before the driver was called */
	PROV_RESCHEDULE,    /* final, and the scheduler may pick another node */
};
/* Upstream's checkError: gRPC code -> state. may_reschedule: topology and a selected node. */
enum prov_state prov_check_error(int grpc_code, bool may_reschedule);

/* ---- topology (topology.c) ---- */
struct prov_term {       /* one topology segment map, keys sorted */
	struct kube_kv *segs;
	size_t n;
};
struct prov_terms {
	struct prov_term *t;
	size_t n;
};
void prov_terms_free(struct prov_terms *ts);
/* One node as the topology code sees it: the keys the driver registered in its CSINode (NULL, 0
 * when the CSINode, the driver entry or its keys are absent) and the Node's labels (has_node
 * false when the Node is absent). */
struct prov_topo_node {
	const char *name;
	bool has_csinode;
	const char *const *keys;
	size_t nkeys;
	bool has_node;
	const struct kube_kv *labels;
	size_t nlabels;
};
struct prov_topo_input {
	const char *pvc_name;
	const struct kube_node_selector_term *allowed; /* StorageClass allowedTopologies */
	size_t nallowed;
	const char *selected_node; /* NULL: immediate binding */
	bool strict, immediate;
	const struct prov_topo_node *nodes; /* every node known (CSINode and/or Node) */
	size_t nnodes;
};
/* More keys than this in one registration is refused (an error, not a crash). */
#define PROV_MAX_TOPOLOGY_KEYS 32
/*
 * Seed 004's table with external-provisioner v6.4's aggregation (topology.c's file comment):
 * fills requisite and preferred (both empty = no AccessibilityRequirements). Returns 0, or -1
 * with upstream's reason and both lists empty: no topology key on the selected node, its labels
 * missing, selected node outside allowed topologies with --strict-topology, the keys on no
 * node, or with immediate binding no node with registered keys ("no available topology found").
 */
int prov_accessibility(const struct prov_topo_input *in, struct prov_terms *requisite,
		       struct prov_terms *preferred, char *err, size_t errlen);
/* Upstream's StatefulSet spreading: hash of the set name and the replica index of a claim name. */
void prov_pvc_name_hash(const char *pvc_name, uint32_t *hash, uint32_t *index);

/* ---- the PersistentVolume (pv.c) ---- */
struct prov_pv_spec {
	const char *name, *driver, *volume_handle, *fs_type, *storage_class;
	const struct kube_kv *attributes; /* volume_context plus the provisioner identity */
	size_t nattributes;
	int64_t capacity;
	uint8_t access_modes; /* enum kube_access_mode bits */
	bool block, read_only;
	uint8_t reclaim;      /* 0 Delete, 1 Retain */
	const char *const *mount_options;
	size_t nmount_options;
	const struct prov_secret_ref *secrets; /* [PROV_SECRET_KINDS]; [PROVISIONER] -> annotations */
	const char *claim_ns, *claim_name, *claim_uid, *claim_rv;
	bool finalizer;                      /* the deletion-protection finalizer */
	const struct prov_terms *affinity;   /* accessible_topology; NULL or empty: none */
	const char *vac_name;                /* spec.volumeAttributesClassName; NULL or "": none */
};
/* The PV exactly as upstream writes it (see pv.c), as JSON text; the caller frees it. */
char *prov_pv_json(const struct prov_pv_spec *s);

/* ---- metrics (metrics.c) ---- */
struct prov_metrics;
struct prov_metrics *prov_metrics_new(void);
void prov_metrics_free(struct prov_metrics *m);
/* Provision (class, source) or delete (class, NULL source) outcome; duration of successes. */
void prov_metrics_provision(struct prov_metrics *m, const char *cls, const char *source, bool ok,
			    int64_t duration_ns);
void prov_metrics_delete(struct prov_metrics *m, const char *cls, bool ok, int64_t duration_ns);
void prov_metrics_render(struct prov_metrics *m, struct strbuf *out);

/* ---- storage capacity (capacity.c) ---- */
struct prov_cap_opts {
	const char *driver;
	struct csi_conn *csi;
	int64_t timeout_ns, poll_ns, retry_start_ns, retry_max_ns;
	int workers;                  /* --capacity-threads */
	bool immediate_binding;       /* --capacity-for-immediate-binding */
	const char *ns;               /* namespace of the objects */
	const char *managed_by;       /* csi.storage.k8s.io/managed-by value */
	json_t *owner;                /* ownerReference of our objects, or NULL (no owner) */
	/* --node-deployment: the one segment is this node's (NodeGetInfo); otherwise segments come
	 * from CSINodes and Nodes. */
	bool fixed;
	const struct kube_kv *fixed_segment;
	size_t nfixed;
	/* The client the objects are read and written with (--kube-api-capacity-qps/-burst),
	 * borrowed; NULL: the controller's. */
	struct kube_client *kc;
};
struct prov_cap;
/* Copies what it needs from o; borrows kc, o->csi and sc_inf (whose handlers it adds: call
 * before sc_inf starts). */
struct prov_cap *prov_cap_new(struct kube_client *kc, struct kube_informer *sc_inf,
			      const struct prov_cap_opts *o);
int prov_cap_start_informers(struct prov_cap *c);
/* Waits for its caches (giving up once *stop is set), computes the desired objects, adopts the
 * existing ones and starts the workers and the poll. */
int prov_cap_start(struct prov_cap *c, const bool *stop, pthread_mutex_t *stop_mu, char *err,
		   size_t errlen);
/* Refreshes the capacity of a class's objects (after a volume was created or deleted). */
void prov_cap_refresh_class(struct prov_cap *c, const char *cls);
void prov_cap_stop(struct prov_cap *c);
void prov_cap_free(struct prov_cap *c);
void prov_cap_render_metrics(struct prov_cap *c, struct strbuf *out);
struct kube_workqueue *prov_cap_queue(struct prov_cap *c);
/* Its informers (at most 3) into out, for stopping them in parallel with others. */
size_t prov_cap_informers(struct prov_cap *c, struct kube_informer **out);
/* "external-provisioner", or with a node "external-provisioner-<node>" (a hash of the node name
 * when that would exceed 63 characters, the limit of a label value). */
void prov_capacity_managed_by(const char *node, char *buf, size_t len);

/* ---- distributed provisioning (decide.c; the I/O in nodedeploy.c) ---- */
struct prov_node_deployment {
	const char *node;                /* NODE_NAME */
	const struct kube_kv *topology;  /* this node's NodeGetInfo accessible_topology */
	size_t ntopology;
	bool immediate_binding;          /* --node-deployment-immediate-binding */
	int64_t base_delay_ns, max_delay_ns;
};
/*
 * How long an instance waits before trying to own an immediate-binding claim; rnd is a uniform
 * random number in [0, 1).
 * - After a failed try (attempts > 0: a conflict, no room): a random delay in
 *   [0, min(base << attempts, max)], as upstream.
 * - The first try, when the instance knows its `rank` among the `n` > 1 competing instances in
 *   the claim's own order (prov_owner_score): rank 0 tries at once, rank r >= 1 waits a random
 *   time in [r * base/2, (r + 1) * base/2), at most max. The instances agree on who goes first;
 *   the next in line waits half the base delay, time for the winner's update to reach its cache,
 *   and each one after it half a base delay more: a claim costs one annotation update instead of
 *   one per instance that fires before the update arrives. A node that cannot take the claim (no
 *   room, not running) costs it half a base delay.
 * - The first try with n <= 1 (competitors unknown): uniform in [0, base], as upstream.
 */
int64_t prov_owner_delay(int64_t base_ns, int64_t max_ns, unsigned attempts, double rnd,
			 unsigned rank, unsigned n);
/*
 * A node's place in a claim's order (rendezvous hashing): a 64-bit hash of the claim's UID and
 * the node name; the lowest score goes first. Every instance computes the same order, and over
 * many claims each node is first for an even share.
 */
uint64_t prov_owner_score(const char *claim_uid, const char *node);
/* Whether a PV's node affinity (required terms) admits this node's topology; a PV without
 * affinity belongs to no node in particular, so no node deletes it. */
bool prov_pv_on_node(const struct kube_pv *pv, const struct kube_kv *topology, size_t n);

/* ---- controller (controller.c; see the map above) ---- */
struct prov_ctrl_opts {
	const char *driver;
	struct csi_conn *csi;
	struct kube_recorder *recorder;
	struct prov_gates gates;
	int workers, clone_workers;
	int64_t timeout_ns, retry_start_ns, retry_max_ns, resync_ns;
	const char *prefix;
	int uuid_length;
	bool strict_topology, immediate_topology, extra_create_metadata;
	bool controller_publish_readonly, prevent_volume_mode_conversion;
	const char *default_fstype;
	/* Driver capabilities */
	bool cap_controller_service, cap_create_delete, cap_clone, cap_snapshot, cap_snmw,
	     cap_publish, cap_topology, cap_modify;
	const char *identity; /* storage.kubernetes.io/csiProvisionerIdentity value */
	int64_t orphan_sweep_ns; /* --snapshot-orphan-sweep-interval; 0: no sweep */
	/* --enable-capacity: NULL or the capacity controller's options */
	const struct prov_cap_opts *capacity;
	/* --node-deployment: NULL or this node's part */
	const struct prov_node_deployment *node_deployment;
};

struct prov_ctrl;
struct prov_ctrl *prov_ctrl_new(struct kube_client *kc, const struct prov_ctrl_opts *o);
int prov_ctrl_start(struct prov_ctrl *c, char *err, size_t errlen);
void prov_ctrl_stop(struct prov_ctrl *c);
void prov_ctrl_free(struct prov_ctrl *c);
void prov_ctrl_render_metrics(struct prov_ctrl *c, struct strbuf *out);

/* ---- inside the controller (controller.c, claims.c, prepare.c, sources.c, volumes.c,
 *      nodedeploy.c); nothing outside src/provisioner uses these ---- */

/* What a worker's sync says about its key (see kube_workqueue_serve). */
enum prov_work {
	PROV_WORK_DONE = KUBE_WORK_DONE,   /* finished: forget the key's backoff */
	PROV_WORK_RETRY = KUBE_WORK_RETRY, /* failed: again with the key's backoff */
	PROV_WORK_AGAIN = KUBE_WORK_AGAIN, /* lost a race (409): again at once */
	PROV_WORK_LATER = KUBE_WORK_LATER, /* put back with a delay of its own (node deployment):
					      leave its backoff */
};

struct prov_worker {
	struct prov_ctrl *c;
	struct kube_workqueue *q;
	enum prov_work (*sync)(struct prov_ctrl *c, const char *key);
	int max; /* threads */
};

struct prov_ctrl {
	struct prov_ctrl_opts o;
	struct kube_informer *infs[6]; /* the ones below that exist, for start/stop/free */
	size_t ninfs;
	struct prov_worker ws[4];
	struct kube_client *kc;
	struct kube_informer *pvc_inf, *pv_inf, *sc_inf, *csinode_inf, *node_inf, *va_inf;
	struct kube_workqueue *claimq, *volq, *saveq, *cloneq;
	struct prov_metrics *metrics;
	pthread_mutex_t mu;          /* guards in_progress, unsaved, deleted, owners, seen_nodes,
					topo_cache, slow, stop */
	struct kube_hmap in_progress; /* claims.c: claim key -> struct kube_obj * (a reference) */
	struct kube_hmap topo_cache;  /* prepare.c: claim key -> the topology its first CreateVolume
					 was given (upstream's per-claim topology cache) */
	struct kube_hmap slow;        /* claims.c: claim key -> struct prov_slow * (its CreateVolume
					 was infeasible: InvalidArgument) */
	struct kube_hmap unsaved;     /* volumes.c: PV name -> its unsaved PV */
	struct kube_hmap deleted;     /* volumes.c: PV name -> the UID (char *) of a PV whose
					 DeleteVolume succeeded while its DELETE or finalizer
					 removal is still to do: a retry does not call it again */
	bool stop;
	struct prov_cap *cap; /* --enable-capacity, else NULL */
	struct prov_sweep *sweep; /* snapfinalizer.c: the orphan sweep, or NULL (interval 0, or
				     the driver cannot restore snapshots) */
	/* --node-deployment (nodedeploy.c) */
	const struct prov_node_deployment *nd; /* NULL: a central provisioner */
	bool topo;                 /* CSI topology in use (driver capability, gate or node mode) */
	struct kube_hmap owners;   /* claim key -> the tries to own an immediate claim */
	struct kube_hmap seen_nodes; /* selected-node values seen on claims: the competitors */
};

/* Helpers the controller's files share (controller.c). */
static inline bool prov_streq(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}
/* An Event on o (none without a recorder or an object). */
#define prov_event(c, obj, t, reason, ...) \
	kube_event_about((c)->o.recorder, (obj), (t), (reason), __VA_ARGS__)
/* A failed call's status as upstream prints a gRPC error. */
void prov_grpc_error(const struct csi_status *st, char *out, size_t outlen);
/* A reference from inf's cache, or NULL (also when inf is NULL). */
struct kube_obj *prov_store_get(struct kube_informer *inf, const char *ns, const char *name);
/* Whether the claim's storage-provisioner annotation names this driver. */
bool prov_ours_pvc(const struct prov_ctrl *c, const struct kube_pvc *pvc);
/* Splits a queue key "ns/name"; -1 for a key without '/'. */
int prov_split_key(const char *key, char *ns, size_t nslen, char *name, size_t namelen);
/* Merge patch of o's finalizers without drop, plus add (either NULL), with_rv: guarded by the
 * record's resourceVersion. */
int prov_patch_finalizers(struct prov_ctrl *c, const struct kube_resource *r,
			  const struct kube_obj *o, const char *drop, const char *add, bool with_rv,
			  struct kube_err *e);
/* Reads Secret ref into the map `field` of msg; the values live in the arena only. */
int prov_add_secrets(struct prov_ctrl *c, struct csi_arena *a, ProtobufCMessage *msg,
		     const char *field, const struct prov_secret_ref *ref, char *err,
		     size_t errlen);

/* Claims (claims.c). */
enum prov_work prov_sync_claim(struct prov_ctrl *c, const char *key);
/* Provisions a claim prov_should_provision() chose (central, or this node's). */
enum prov_work prov_provision(struct prov_ctrl *c, const char *key, const struct kube_obj *o,
			      const struct kube_pvc *pvc, const struct kube_storageclass *sc);
/* The claim needs no more work: forget whether its CreateVolume may be in progress. */
void prov_claim_done(struct prov_ctrl *c, const char *key);
void prov_claims_clear(struct prov_ctrl *c);

/* What prov_prepare() resolves for one claim; the request lives in arena a. */
struct prov_prep {
	struct csi_arena *a;
	Csi__V1__CreateVolumeRequest *req;
	char name[320];
	const char *fstype;
	char cls[256];
	const char *source;    /* dataSource kind for metrics */
	bool clone, snapshot;
	const char *vac;       /* the claim's VolumeAttributesClass (gate on), or NULL */
	struct prov_secret_ref secrets[PROV_SECRET_KINDS];
	int64_t requested;
};
/*
 * prepareProvision (prepare.c): everything before CreateVolume, without side effects on the
 * driver. 0, or -1 with err and in *state what the failure is (PROV_FINISHED: the claim or class
 * is wrong; PROV_NO_CHANGE: the sources, topology or secrets may come right later).
 */
int prov_prepare(struct prov_ctrl *c, const struct kube_pvc *pvc,
		 const struct kube_storageclass *sc, struct prov_prep *p, enum prov_state *state,
		 char *err, size_t errlen);
/*
 * The per-claim topology cache (prepare.c): the requisite and preferred topology a claim's
 * request got first are kept until its provisioning ends (success, a final error, the claim
 * forgotten), so a retried CreateVolume asks for the same place even when the selected node or
 * its CSINode is gone meanwhile, instead of the claim being rescheduled while a volume may be
 * in the making (the leak upstream's cache closes). forget: drop key's entry; clear: all.
 */
void prov_topo_forget(struct prov_ctrl *c, const char *key);
void prov_topo_clear(struct prov_ctrl *c);
Csi__V1__Topology *prov_csi_topology(struct csi_arena *a, const struct prov_term *t);
/* One VolumeCapability for an access mode bit (enum kube_access_mode): block, or mount without
 * fsType and flags (the caller adds them). */
Csi__V1__VolumeCapability *prov_volume_capability(struct csi_arena *a, unsigned mode_bit,
						  bool block, bool snmw);

/* Data sources (sources.c): check the source and set p->req's volume_content_source. */
int prov_clone_source(struct prov_ctrl *c, const struct kube_pvc *pvc,
		      const struct kube_storageclass *sc, struct prov_prep *p, char *err,
		      size_t errlen);
int prov_snapshot_source(struct prov_ctrl *c, const struct kube_pvc *pvc,
			 const struct kube_storageclass *sc, struct prov_prep *p, char *err,
			 size_t errlen);
enum prov_work prov_sync_clone_source(struct prov_ctrl *c, const char *key);

/* The snapshot source-protection finalizer (snapfinalizer.c). */
/* Whether a VolumeSnapshot (JSON) carries it. */
bool prov_snapshot_protected(json_t *snap);
/* setSnapshotFinalizer: adds the finalizer to snap (the VolumeSnapshot as just read, changed in
 * place) with an update unless it has it. A 403 (RBAC without "update" on volumesnapshots) is
 * logged and provisioning goes on unprotected, as upstream; another failure: -1 with err. */
int prov_snapshot_protect(struct prov_ctrl *c, json_t *snap, char *err, size_t errlen);
/* removeSnapshotFinalizer after a successful restore: a failure is only logged (the sweep
 * removes the finalizer later). */
void prov_snapshot_release(struct prov_ctrl *c, const char *ns, const char *name);
/* The sweep: new (NULL when disabled; call before the claim informer starts, whose filter then
 * also keeps the claims the sweep counts), start (its thread: a permission check, its informer,
 * then a sweep every interval), stop (joins the thread), free; its informer for the parallel
 * stop of prov_ctrl_free() (NULL when none). */
struct prov_sweep *prov_sweep_new(struct prov_ctrl *c);
int prov_sweep_start(struct prov_sweep *s);
void prov_sweep_stop(struct prov_sweep *s);
void prov_sweep_free(struct prov_sweep *s);
struct kube_informer *prov_sweep_informer(struct prov_sweep *s);

/* Volumes (volumes.c). */
/* Whether a PV's state asks the "volumes" worker for something (finalizer or deletion). */
bool prov_volume_needs_work(const struct prov_ctrl *c, const struct kube_obj *o);
enum prov_work prov_sync_volume(struct prov_ctrl *c, const char *name);
/* The PV is gone: forgets that its volume was deleted (the PV informer's delete handler). */
void prov_volume_gone(struct prov_ctrl *c, const char *name);
void prov_volumes_clear(struct prov_ctrl *c);
/* POSTs the PV (JSON text); one that exists already counts as saved. */
int prov_save_pv(struct prov_ctrl *c, const char *pv, struct kube_err *e);
/* Keeps a PV that prov_save_pv() could not save (e: why) for the "unsavedpvs" worker; takes pv. */
void prov_unsaved_add(struct prov_ctrl *c, const char *name, char *pv, const char *claim_key,
		      const struct kube_obj *claim, const char *volume_id, const char *cls,
		      const struct prov_secret_ref *secret, const struct kube_err *e);
bool prov_unsaved_has(struct prov_ctrl *c, const char *name);
enum prov_work prov_sync_unsaved(struct prov_ctrl *c, const char *name);
void prov_unsaved_clear(struct prov_ctrl *c);
/* DeleteVolume of a volume whose PV could not be recorded (upstream's cleanupVolume). */
int prov_cleanup_volume(struct prov_ctrl *c, const char *volume_id,
			const struct prov_secret_ref *secret, char *err, size_t errlen);

/* Node deployment (nodedeploy.c). */
/* The claim filter's part: only this node's claims (and clones) are cached. */
bool prov_node_pvc_wanted(struct prov_ctrl *c, const struct kube_pvc *pvc);
/* What checkNode says of a claim; claims.c acts on it (provision, or forget it). */
enum prov_node_step {
	PROV_NODE_PROVISION, /* selected for this node: provision it here */
	PROV_NODE_SKIP,      /* another node's, or not for node deployment: nothing to do */
	PROV_NODE_LATER,     /* an immediate claim this node tries to own: comes back later */
};
/* checkNode: this node's claim, another's, or an immediate one this node tries to own. */
enum prov_node_step prov_node_claim(struct prov_ctrl *c, const char *key,
				    const struct kube_obj *o, const struct kube_pvc *pvc,
				    const struct kube_storageclass *sc);
void prov_owner_forget(struct prov_ctrl *c, const char *key);
/* Schedules the next try after a failed one (conflict, no room, rescheduled). */
void prov_owner_backoff(struct prov_ctrl *c, const char *key);
void prov_owners_clear(struct prov_ctrl *c);

#endif
