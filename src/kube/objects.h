/*
 * kube objects: compact, typed, immutable, reference-counted records of Kubernetes objects.
 *
 * An informer decodes each object once into a record that holds only the fields kcsi reads; the
 * JSON is dropped. A record is one allocation: the typed struct followed by a blob holding its
 * strings and arrays. Strings repeated across objects (namespaces, node, driver, class and
 * finalizer names, map keys such as "devicePath") are interned process-wide and never freed.
 *
 * Life cycle: a record is created with one reference; kube_obj_ref()/kube_obj_unref() are atomic
 * and the record is freed at zero. Once a record is published (put in a store) it is never
 * modified, so a worker may keep a reference while the informer replaces it.
 *
 * Every typed record starts with struct kube_obj, so a struct kube_va * converts to a
 * struct kube_obj * and back (kube_va_of() checks the kind).
 */
#ifndef KCSI_KUBE_OBJECTS_H
#define KCSI_KUBE_OBJECTS_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kube/client.h"
#include "kube/jv.h"

/* Returns the canonical copy of s (NULL stays NULL). Thread-safe; the result lives forever. */
const char *kube_intern(const char *s);

enum kube_kind_id { KUBE_KIND_VA = 1, KUBE_KIND_PV, KUBE_KIND_CSINODE, KUBE_KIND_NODE, KUBE_KIND_LEASE,
		   KUBE_KIND_PVC, KUBE_KIND_SC, KUBE_KIND_POD, KUBE_KIND_CSIDRIVER,
		   KUBE_KIND_CSISC, KUBE_KIND_VAC, KUBE_KIND_VS, KUBE_KIND_VSC, KUBE_KIND_VSCLASS,
		   KUBE_KIND_VGS, KUBE_KIND_VGSC, KUBE_KIND_VGSCLASS };

#define KUBE_OBJ_UID_BINARY 1 /* uid stored as 16 bytes; the other flag bits are internal */

struct kube_obj {
	_Atomic uint32_t refs;
	uint16_t nfinalizers;
	uint8_t flags;
	uint8_t kind; /* enum kube_kind_id */
	const char *name;
	const char *ns; /* interned; NULL for cluster-scoped objects */
	const char *rv; /* resourceVersion */
	union {
		uint8_t bin[16];
		const char *str;
	} uid;
	int64_t generation;
	int64_t deletion_ts;            /* seconds since the epoch; 0 when not being deleted */
	const char *const *finalizers;  /* interned names */
};

struct kube_kv {
	const char *key;
	const char *value;
};

/* Public fields below are read-only. Absent strings are NULL. */

struct kube_va { /* storage.k8s.io/v1 VolumeAttachment */
	struct kube_obj meta;
	const char *attacher;  /* spec.attacher (interned) */
	const char *node_name; /* spec.nodeName (interned) */
	const char *pv_name;   /* spec.source.persistentVolumeName */
	const char *node_id;   /* annotation csi.alpha.kubernetes.io/node-id */
	const struct kube_kv *metadata; /* status.attachmentMetadata */
	const char *attach_error; /* status.attachError.message */
	const char *detach_error; /* status.detachError.message */
	uint16_t nmetadata;
	bool attached;    /* status.attached */
	bool inline_spec; /* spec.source.inlineVolumeSpec present */
};

enum kube_access_mode {
	KUBE_RWO = 1, KUBE_ROX = 2, KUBE_RWX = 4, KUBE_RWOP = 8,
};
/* The API name of one mode bit ("ReadWriteOncePod"); NULL for 0 or anything not one bit. */
const char *kube_access_mode_name(uint8_t mode);

/*
 * A node selector term: its requirements are ANDed; a list of terms is ORed (an empty list
 * matches every node). Used for PV nodeAffinity (all operators) and StorageClass
 * allowedTopologies (matchLabelExpressions: operator In).
 */
enum kube_selector_op { KUBE_OP_IN, KUBE_OP_NOT_IN, KUBE_OP_EXISTS, KUBE_OP_DOES_NOT_EXIST,
			KUBE_OP_GT, KUBE_OP_LT };

struct kube_node_selector_req {
	const char *key;                /* interned */
	const char *const *values;      /* interned */
	uint16_t nvalues;
	uint8_t op;                     /* enum kube_selector_op */
};

struct kube_node_selector_term {
	const struct kube_node_selector_req *reqs;
	uint16_t nreqs;
};

/* True when the labels satisfy at least one term (or nterms is 0). */
bool kube_node_selector_match(const struct kube_node_selector_term *terms, uint16_t nterms,
			      const struct kube_kv *labels, uint16_t nlabels);

struct kube_pv { /* core/v1 PersistentVolume */
	struct kube_obj meta;
	const char *driver;        /* spec.csi.driver (interned); NULL when not a CSI volume */
	const char *volume_handle; /* spec.csi.volumeHandle */
	const char *fs_type;       /* spec.csi.fsType (interned) */
	const struct kube_kv *volume_attributes;
	const char *secret_name;   /* spec.csi.controllerPublishSecretRef (interned) */
	const char *secret_ns;
	const char *const *mount_options;
	const char *storage_class; /* spec.storageClassName (interned) */
	const char *claim_ns;      /* spec.claimRef (namespace interned) */
	const char *claim_name;
	int64_t capacity;          /* spec.capacity.storage in bytes; -1 when absent or invalid */
	uint16_t nvolume_attributes;
	uint16_t nmount_options;
	uint8_t access_modes;      /* enum kube_access_mode bits */
	uint8_t first_access_mode; /* spec.accessModes[0] (one bit; 0 when absent or unknown): the
				    * one the kubelet turns into the CSI access mode */
	bool block;                /* spec.volumeMode == Block */
	bool read_only;            /* spec.csi.readOnly */
	uint8_t reclaim;           /* 0 Delete, 1 Retain, 2 Recycle */
	uint8_t phase;             /* enum kube_pv_phase */
	bool bound_by_controller;  /* annotation pv.kubernetes.io/bound-by-controller == "yes" */
	const char *claim_uid;     /* spec.claimRef.uid */
	const char *provisioned_by; /* annotation pv.kubernetes.io/provisioned-by (interned) */
	const char *delete_secret_name; /* annotations volume.kubernetes.io/provisioner-deletion-secret-name */
	const char *delete_secret_ns;   /* ... -namespace (both interned) */
	const struct kube_kv *labels;   /* metadata.labels (for claim selectors) */
	const struct kube_node_selector_term *node_affinity; /* spec.nodeAffinity.required terms (ORed) */
	uint16_t nlabels;
	uint16_t nnode_affinity;	/* kcsi-node: */
	const char *node_stage_secret_name;   /* spec.csi.nodeStageSecretRef (interned) */
	const char *node_stage_secret_ns;
	const char *node_publish_secret_name; /* spec.csi.nodePublishSecretRef (interned) */
	const char *node_publish_secret_ns;
	/* csi-resizer: */
	const char *expand_secret_name; /* spec.csi.controllerExpandSecretRef (interned) */
	const char *expand_secret_ns;
	const char *vac_name;           /* spec.volumeAttributesClassName (interned); NULL when absent */
	const char *modify_secret_name; /* annotations volume.kubernetes.io/controller-modify-secret-name */
	const char *modify_secret_ns;   /* ... -namespace (both interned; the provisioner writes them) */
	/* csi-resizer (AnnotateFsResize) and the PV binder: annotation
	 * volume.alpha.kubernetes.io/pre-resize-capacity as written; NULL when absent */
	const char *pre_resize_capacity;
};

enum kube_pv_phase { KUBE_PV_PENDING, KUBE_PV_AVAILABLE, KUBE_PV_BOUND, KUBE_PV_RELEASED, KUBE_PV_FAILED };

struct kube_csinode_driver {
	const char *name;    /* interned; never NULL nor "" (a CSINode without one is not decoded) */
	const char *node_id; /* never NULL */
	const char *const *topology_keys; /* interned */
	uint16_t ntopology_keys;
	int32_t allocatable; /* allocatable.count; -1 when not set */
};

struct kube_csinode { /* storage.k8s.io/v1 CSINode */
	struct kube_obj meta;
	const struct kube_csinode_driver *drivers;
	uint16_t ndrivers;
};

enum kube_cond { KUBE_COND_UNKNOWN, KUBE_COND_TRUE, KUBE_COND_FALSE }; /* absent is UNKNOWN */

struct kube_attached_volume { /* an entry of Node.status.volumesAttached */
	const char *name;        /* "kubernetes.io/csi/<driver>^<volumeHandle>" */
	const char *device_path;
};

/* A taint of Node.spec.taints. */
struct kube_taint {
	const char *key;        /* interned */
	const char *value;      /* interned; "" when absent */
	const char *effect;     /* interned: NoSchedule, PreferNoSchedule, NoExecute */
	const char *time_added; /* timeAdded as written (RFC 3339); NULL when absent */
};

/* An entry of Node.status.conditions, every field as written (absent strings are NULL). */
struct kube_node_condition {
	const char *type;       /* interned */
	const char *status;     /* interned: True, False, Unknown */
	const char *reason;
	const char *message;
	const char *heartbeat;  /* lastHeartbeatTime */
	const char *transition; /* lastTransitionTime */
};

struct kube_node { /* core/v1 Node */
	struct kube_obj meta;
	const char *csi_node_ids; /* annotation csi.volume.kubernetes.io/nodeid (a JSON map) */
	const struct kube_kv *labels; /* metadata.labels (keys and values interned: topology labels
				       * repeat across nodes) */
	uint16_t nlabels;
	/* For the attach/detach controller and the node agent: */
	bool controller_managed;  /* annotation volumes.kubernetes.io/controller-managed-attach-detach == "true" */
	bool out_of_service;      /* taint node.kubernetes.io/out-of-service (any effect) */
	bool unschedulable;       /* spec.unschedulable */
	int64_t allocatable_pods; /* status.allocatable.pods; -1 when absent (volume-scheduler) */
	uint8_t ready;            /* enum kube_cond: status.conditions[type=Ready].status */
	uint16_t nvolumes_attached;
	uint16_t nvolumes_in_use;
	const struct kube_attached_volume *volumes_attached; /* status.volumesAttached */
	const char *const *volumes_in_use;                   /* status.volumesInUse */
	/* For nodelifecycle and the volume-scheduler (kcsi-controller-manager): */
	const char *created;                          /* metadata.creationTimestamp; NULL if absent */
	const struct kube_taint *taints;              /* spec.taints, in order */
	const struct kube_node_condition *conditions; /* status.conditions, in order */
	uint16_t ntaints;
	uint16_t nconditions;
};

enum kube_pvc_phase { KUBE_PVC_PENDING, KUBE_PVC_BOUND, KUBE_PVC_LOST };

/* status.allocatedResourceStatuses["storage"] (csi-resizer). */
enum kube_resize_status {
	KUBE_RESIZE_NONE, KUBE_RESIZE_CONTROLLER_IN_PROGRESS, KUBE_RESIZE_CONTROLLER_INFEASIBLE,
	KUBE_RESIZE_NODE_PENDING, KUBE_RESIZE_NODE_IN_PROGRESS, KUBE_RESIZE_NODE_INFEASIBLE,
};
/* Bits of the resize and modify condition types a claim has with status True (csi-resizer). */
enum kube_pvc_cond_bit {
	KUBE_PVC_RESIZING = 1, KUBE_PVC_FS_RESIZE_PENDING = 2, KUBE_PVC_CONTROLLER_RESIZE_ERROR = 4,
	KUBE_PVC_NODE_RESIZE_ERROR = 8, KUBE_PVC_MODIFYING_VOLUME = 16, KUBE_PVC_MODIFY_VOLUME_ERROR = 32,
};
/* status.modifyVolumeStatus.status (csi-resizer); NONE when modifyVolumeStatus is absent. */
enum kube_modify_status { KUBE_MODIFY_NONE, KUBE_MODIFY_PENDING, KUBE_MODIFY_IN_PROGRESS,
			  KUBE_MODIFY_INFEASIBLE, KUBE_MODIFY_OTHER };

struct kube_pvc { /* core/v1 PersistentVolumeClaim */
	struct kube_obj meta;
	const char *storage_class; /* spec.storageClassName (interned); NULL when absent */
	const char *volume_name;   /* spec.volumeName */
	const char *provisioner;   /* annotation volume.kubernetes.io/storage-provisioner, else the
				    * volume.beta.kubernetes.io one (interned) */
	const char *selected_node; /* annotation volume.kubernetes.io/selected-node (interned) */
	const char *data_source_kind;  /* spec.dataSource (kind and apiGroup interned) */
	const char *data_source_group;
	const char *data_source_name;
	int64_t request;  /* spec.resources.requests.storage in bytes; -1 when absent or invalid */
	int64_t limit;    /* spec.resources.limits.storage; -1 when absent */
	int64_t capacity; /* status.capacity.storage; -1 when absent */
	uint8_t access_modes; /* enum kube_access_mode bits */
	bool block;           /* spec.volumeMode == Block */
	bool has_selector;    /* spec.selector present */
	uint8_t phase;        /* enum kube_pvc_phase */
	/* kcsi-controller-manager (persistentvolume-binder): */
	bool bind_completed;      /* annotation pv.kubernetes.io/bind-completed present */
	bool bound_by_controller; /* annotation pv.kubernetes.io/bound-by-controller present */
	const char *selector;     /* spec.selector as label-selector text (kube/selector.h);
				   * NULL when absent; "!" when it cannot be expressed */
	/* csi-resizer: */
	int64_t allocated;        /* status.allocatedResources.storage; -1 when absent */
	uint8_t resize_status;    /* enum kube_resize_status */
	uint8_t conds;            /* enum kube_pvc_cond_bit */
	bool other_conds;         /* a condition of another type than ModifyingVolume and
				   * ModifyVolumeError (any status) */
	uint8_t modify_status;    /* enum kube_modify_status */
	const char *resizer;      /* annotation volume.kubernetes.io/storage-resizer (interned) */
	const char *vac_name;     /* spec.volumeAttributesClassName (interned); NULL when absent */
	const char *current_vac;  /* status.currentVolumeAttributesClassName (interned) */
	const char *modify_target; /* status.modifyVolumeStatus.targetVolumeAttributesClassName */
	const struct kube_kv *labels; /* metadata.labels (group snapshot selectors) */
	uint16_t nlabels;
};

struct kube_storageclass { /* storage.k8s.io/v1 StorageClass */
	struct kube_obj meta;
	const char *provisioner; /* interned */
	const struct kube_kv *parameters;
	const char *const *mount_options;
	uint16_t nparameters;
	uint16_t nmount_options;
	uint8_t reclaim;               /* 0 Delete, 1 Retain */
	bool wait_for_first_consumer;  /* volumeBindingMode == WaitForFirstConsumer */
	bool allow_expansion;
	bool is_default;               /* annotation storageclass.kubernetes.io/is-default-class == "true" */
	uint16_t nallowed_topologies;
	const struct kube_node_selector_term *allowed_topologies; /* allowedTopologies (op In) */
};

enum kube_pod_phase { KUBE_POD_PENDING, KUBE_POD_RUNNING, KUBE_POD_SUCCEEDED, KUBE_POD_FAILED,
		      KUBE_POD_UNKNOWN };

/*
 * One entry of Pod.spec.volumes that kcsi cares about: a claim (persistentVolumeClaim, or the
 * claim "<pod>-<volume>" of a generic ephemeral volume), or an inline CSI volume. Other volume
 * types (emptyDir, configMap, ...) are not kept.
 */
struct kube_pod_volume {
	const char *name;        /* spec.volumes[].name */
	const char *claim_name;  /* the claim; NULL for inline CSI volumes */
	const char *csi_driver;  /* inline csi.driver (interned); NULL for claims */
	const char *csi_fs_type; /* inline csi.fsType (interned) */
	const char *csi_secret_name; /* inline csi.nodePublishSecretRef.name */
	const struct kube_kv *csi_attributes; /* inline csi.volumeAttributes */
	uint16_t ncsi_attributes;
	bool read_only;          /* persistentVolumeClaim.readOnly or csi.readOnly */
	bool ephemeral;          /* a generic ephemeral volume (claim created from a template) */
	bool block;              /* used as a raw device: named in a container's volumeDevices */
};

/* An entry of Pod.spec.tolerations (absent strings are NULL; all interned). */
struct kube_toleration {
	const char *key;
	const char *op;     /* operator: Equal (or NULL, which means Equal) or Exists */
	const char *value;
	const char *effect; /* NULL or "": every effect */
	bool has_seconds;   /* tolerationSeconds is set (absent: tolerate for ever) */
	int64_t seconds;    /* tolerationSeconds */
};

struct kube_pod { /* core/v1 Pod */
	struct kube_obj meta;
	const char *node_name;        /* spec.nodeName (interned) */
	const char *scheduler_name;   /* spec.schedulerName (interned) */
	const char *service_account;  /* spec.serviceAccountName (interned) */
	const struct kube_pod_volume *volumes;
	const struct kube_kv *labels;
	const struct kube_kv *node_selector; /* spec.nodeSelector (interned) */
	uint16_t nvolumes;
	uint16_t nlabels;
	uint16_t nnode_selector;
	uint8_t phase;                /* enum kube_pod_phase */
	bool ready;                   /* status.conditions[type=Ready].status == True */
	bool running;                 /* a container (init, regular or ephemeral) whose status has
				       * a state neither terminated nor waiting (upstream's
				       * IsPodTerminated reads a deleted pod with none as gone) */
	uint16_t ntolerations;
	const struct kube_toleration *tolerations; /* spec.tolerations (volume-scheduler) */
	/* For volume-scheduler: the PodScheduled condition as it stands, so that a verdict the pod
	 * already carries is not written again (kube-scheduler's UpdatePodCondition). */
	uint8_t scheduled;            /* enum kube_pod_scheduled */
	bool preempt_never;           /* spec.preemptionPolicy == Never */
	uint32_t scheduled_hash;      /* kube_pod_cond_hash(reason, message) of that condition */
};

enum kube_pod_scheduled { KUBE_POD_SCHED_ABSENT, KUBE_POD_SCHED_TRUE, KUBE_POD_SCHED_FALSE,
			  KUBE_POD_SCHED_OTHER };

/* A condition's reason and message as one hash (NULL reads as ""). */
uint32_t kube_pod_cond_hash(const char *reason, const char *message);

/* A pod that no longer needs its volumes: Succeeded or Failed (a deleted pod has no record). */
static inline bool kube_pod_terminated(const struct kube_pod *p)
{
	return p->phase == KUBE_POD_SUCCEEDED || p->phase == KUBE_POD_FAILED;
}

struct kube_csidriver { /* storage.k8s.io/v1 CSIDriver */
	struct kube_obj meta;
	const char *fs_group_policy; /* spec.fsGroupPolicy (interned); NULL when absent */
	bool attach_required;        /* spec.attachRequired; true when absent */
	bool pod_info_on_mount;      /* spec.podInfoOnMount */
	bool storage_capacity;       /* spec.storageCapacity */
	bool requires_republish;     /* spec.requiresRepublish */
	bool persistent;             /* spec.volumeLifecycleModes has Persistent (or is absent) */
	bool ephemeral;              /* spec.volumeLifecycleModes has Ephemeral */
};

struct kube_csisc { /* storage.k8s.io/v1 CSIStorageCapacity (csi-provisioner --enable-capacity) */
	struct kube_obj meta;
	const char *storage_class;   /* storageClassName (interned) */
	const char *driver_label;    /* label csi.storage.k8s.io/drivername (interned); NULL if absent */
	const char *managed_by;      /* label csi.storage.k8s.io/managed-by (interned); NULL if absent */
	const char *controller_uid;  /* uid of the ownerReference with controller: true; NULL if none */
	const struct kube_kv *topology; /* nodeTopology.matchLabels (keys interned) */
	int64_t capacity;            /* bytes; -1 when absent or malformed */
	int64_t max_volume_size;     /* bytes; -1 when absent or malformed */
	uint16_t ntopology;
	bool topology_expressions;   /* nodeTopology.matchExpressions is not empty */
};

struct kube_lease { /* coordination.k8s.io/v1 Lease (nodelifecycle: kube-node-lease/<node>) */
	struct kube_obj meta;
	const char *holder;     /* spec.holderIdentity; NULL when absent */
	const char *renew_time; /* spec.renewTime as written (RFC 3339, microseconds); NULL if absent */
};

struct kube_vac { /* storage.k8s.io/v1 VolumeAttributesClass (csi-resizer) */
	struct kube_obj meta;
	const char *driver_name;        /* driverName (interned) */
	const struct kube_kv *parameters;
	uint16_t nparameters;
};

/*
 * snapshot.storage.k8s.io/v1 (snapshot-controller, csi-snapshotter). Optional strings are NULL
 * when absent and "" when present but empty: the CRD's "exactly one source" rule needs both.
 */
enum kube_snap_policy { KUBE_SNAP_DELETE, KUBE_SNAP_RETAIN, KUBE_SNAP_POLICY_INVALID };

struct kube_vs { /* VolumeSnapshot */
	struct kube_obj meta;
	const char *source_pvc;     /* spec.source.persistentVolumeClaimName */
	const char *source_content; /* spec.source.volumeSnapshotContentName */
	const char *class_name;     /* spec.volumeSnapshotClassName (interned) */
	const char *bound_content;  /* status.boundVolumeSnapshotContentName */
	const char *creation_time;  /* status.creationTime (RFC 3339 text) */
	const char *error_message;  /* status.error.message */
	const char *error_time;     /* status.error.time */
	int64_t restore_size;       /* status.restoreSize in bytes; -1 when absent */
	/* a group member's group: the name in its ownerReference of kind VolumeGroupSnapshot
	 * (groupsnapshot.storage.k8s.io/v1, as upstream finds members), and status.volumeGroupSnapshotName */
	const char *owner_group;
	const char *group_name;
	bool has_status;
	uint8_t ready;              /* enum kube_cond: status.readyToUse (absent: UNKNOWN) */
};

struct kube_vsc { /* VolumeSnapshotContent (cluster-scoped) */
	struct kube_obj meta;
	const char *driver;          /* spec.driver (interned) */
	const char *volume_handle;   /* spec.source.volumeHandle */
	const char *snapshot_handle; /* spec.source.snapshotHandle */
	const char *class_name;      /* spec.volumeSnapshotClassName (interned) */
	const char *source_volume_mode; /* spec.sourceVolumeMode (interned) */
	const char *ref_name;        /* spec.volumeSnapshotRef */
	const char *ref_ns;          /* (interned) */
	const char *ref_uid;         /* "" when not set */
	const char *deletion_secret_name; /* annotations snapshot.storage.kubernetes.io/deletion-secret-* */
	const char *deletion_secret_ns;
	const char *managed_by;      /* label snapshot.storage.kubernetes.io/managed-by (interned) */
	const char *status_handle;   /* status.snapshotHandle */
	const char *error_message;   /* status.error.message */
	const char *error_time;      /* status.error.time */
	int64_t creation_time;       /* status.creationTime, ns since the epoch; -1 when absent */
	int64_t restore_size;        /* status.restoreSize bytes; -1 when absent */
	uint8_t policy;              /* enum kube_snap_policy: spec.deletionPolicy */
	uint8_t ready;               /* enum kube_cond: status.readyToUse */
	bool has_status;
	bool being_created;          /* annotation snapshot.storage.kubernetes.io/volumesnapshot-being-created */
	bool being_deleted;          /* annotation snapshot.storage.kubernetes.io/volumesnapshot-being-deleted */
	bool in_group;               /* annotation groupsnapshot.storage.k8s.io/volumeGroupSnapshotHandle:
				      * a member of a group snapshot, cut by the group's call */
};

struct kube_vsclass { /* VolumeSnapshotClass (cluster-scoped) */
	struct kube_obj meta;
	const char *driver;          /* interned */
	const struct kube_kv *parameters;
	uint16_t nparameters;
	uint8_t policy;              /* enum kube_snap_policy: deletionPolicy */
	bool is_default;             /* annotation snapshot.storage.kubernetes.io/is-default-class == "true" */
};
/* A VolumeGroupSnapshotClass decodes into the same record (kind KUBE_KIND_VGSCLASS), its
 * default annotation being groupsnapshot.storage.kubernetes.io/is-default-class. */

struct kube_vgs { /* groupsnapshot.storage.k8s.io VolumeGroupSnapshot */
	struct kube_obj meta;
	/* spec.source.selector as label selector text (kube/selector.h; "" selects every claim),
	 * NULL when absent; "!" (refused by the parser) when it cannot be expressed */
	const char *selector;
	const char *source_content; /* spec.source.volumeGroupSnapshotContentName */
	const char *class_name;     /* spec.volumeGroupSnapshotClassName (interned) */
	const char *bound_content;  /* status.boundVolumeGroupSnapshotContentName */
	const char *creation_time;  /* status.creationTime (RFC 3339 text) */
	const char *error_message;  /* status.error.message */
	const char *error_time;     /* status.error.time */
	bool has_status;
	uint8_t ready;              /* enum kube_cond: status.readyToUse */
};

/* One entry of a group content's status.volumeSnapshotInfoList (v1beta2 and v1). */
struct kube_vgs_member {
	const char *volume_handle;
	const char *snapshot_handle;
	int64_t creation_time;      /* ns since the epoch; -1 when absent */
	int64_t restore_size;       /* bytes; -1 when absent */
	uint8_t ready;              /* enum kube_cond */
};

struct kube_vgsc { /* VolumeGroupSnapshotContent (cluster-scoped) */
	struct kube_obj meta;
	const char *driver;          /* spec.driver (interned) */
	const char *class_name;      /* spec.volumeGroupSnapshotClassName (interned) */
	const char *ref_name;        /* spec.volumeGroupSnapshotRef */
	const char *ref_ns;          /* (interned) */
	const char *ref_uid;         /* "" when not set */
	const char *const *volume_handles;  /* spec.source.volumeHandles */
	const char *group_handle;    /* spec.source.groupSnapshotHandles.volumeGroupSnapshotHandle */
	const char *const *snapshot_handles; /* spec.source.groupSnapshotHandles.volumeSnapshotHandles */
	const char *deletion_secret_name; /* annotations groupsnapshot.storage.kubernetes.io/deletion-secret-* */
	const char *deletion_secret_ns;
	const char *status_handle;   /* status.volumeGroupSnapshotHandle */
	const char *creation_time;   /* status.creationTime (RFC 3339 text) */
	const char *error_message;   /* status.error.message */
	const struct kube_vgs_member *members; /* status.volumeSnapshotInfoList */
	uint16_t nvolume_handles;
	uint16_t nsnapshot_handles;
	uint16_t nmembers;
	uint8_t policy;              /* enum kube_snap_policy: spec.deletionPolicy */
	uint8_t ready;               /* enum kube_cond: status.readyToUse */
	bool has_status;
	bool being_deleted;          /* annotation groupsnapshot.storage.kubernetes.io/volumegroupsnapshot-being-deleted */
	bool being_created;          /* annotation groupsnapshot.storage.kubernetes.io/volumegroupsnapshot-being-created */
};

/* How an informer handles one kind. */
struct kube_kind {
	const char *name; /* "VolumeAttachment" */
	const struct kube_resource *res;
	/* Decodes one object; returns a record with one reference, or NULL with a reason. */
	struct kube_obj *(*decode)(const jv_t *obj, char *err, size_t errlen);
};

/* The same from JSON text, or from a jansson value (dumped and parsed again: for the callers
 * off the hot path that hold one, such as an answer kube_create() decoded). */
struct kube_obj *kube_decode_text(const struct kube_kind *k, const char *text, size_t len,
				  char *err, size_t errlen);
struct kube_obj *kube_decode_json(const struct kube_kind *k, json_t *obj, char *err, size_t errlen);

extern const struct kube_kind KUBE_KIND_VOLUMEATTACHMENT;
extern const struct kube_kind KUBE_KIND_PERSISTENTVOLUME;
extern const struct kube_kind KUBE_KIND_CSINODE_T;
extern const struct kube_kind KUBE_KIND_NODE_T;
extern const struct kube_kind KUBE_KIND_PERSISTENTVOLUMECLAIM;
extern const struct kube_kind KUBE_KIND_STORAGECLASS;
extern const struct kube_kind KUBE_KIND_POD_T;
extern const struct kube_kind KUBE_KIND_CSIDRIVER_T;
extern const struct kube_kind KUBE_KIND_CSISTORAGECAPACITY;
extern const struct kube_kind KUBE_KIND_LEASE_T;
extern const struct kube_kind KUBE_KIND_VOLUMEATTRIBUTESCLASS;
extern const struct kube_kind KUBE_KIND_VOLUMESNAPSHOT;
extern const struct kube_kind KUBE_KIND_VOLUMESNAPSHOTCONTENT;
extern const struct kube_kind KUBE_KIND_VOLUMESNAPSHOTCLASS;
extern const struct kube_kind KUBE_KIND_VOLUMEGROUPSNAPSHOT;
extern const struct kube_kind KUBE_KIND_VOLUMEGROUPSNAPSHOTCONTENT;
extern const struct kube_kind KUBE_KIND_VOLUMEGROUPSNAPSHOTCLASS;

static inline struct kube_obj *kube_obj_ref(struct kube_obj *o)
{
	if (o)
		atomic_fetch_add_explicit(&o->refs, 1, memory_order_relaxed);
	return o;
}
void kube_obj_unref(struct kube_obj *o);

/* Bytes of memory the record occupies (for benchmarks and metrics). */
size_t kube_obj_mem_size(const struct kube_obj *o);
/* Bytes the record slab has mapped now (0 under AddressSanitizer, which bypasses it): chunks
 * whose records are all freed are given back, so this falls after a burst. */
size_t kube_record_bytes_mapped(void);
/* Writes the uid as text into buf (at least 64 bytes); returns buf. */
const char *kube_obj_uid(const struct kube_obj *o, char *buf, size_t len);
bool kube_obj_has_finalizer(const struct kube_obj *o, const char *finalizer);
/* "ns/name" or "name": the key stores and workqueues use. */
void kube_obj_key(const struct kube_obj *o, char *buf, size_t len);

static inline const struct kube_va *kube_va_of(const struct kube_obj *o)
{
	return o && o->kind == KUBE_KIND_VA ? (const struct kube_va *)o : NULL;
}
static inline const struct kube_pv *kube_pv_of(const struct kube_obj *o)
{
	return o && o->kind == KUBE_KIND_PV ? (const struct kube_pv *)o : NULL;
}
static inline const struct kube_csinode *kube_csinode_of(const struct kube_obj *o)
{
	return o && o->kind == KUBE_KIND_CSINODE ? (const struct kube_csinode *)o : NULL;
}
static inline const struct kube_node *kube_node_of(const struct kube_obj *o)
{
	return o && o->kind == KUBE_KIND_NODE ? (const struct kube_node *)o : NULL;
}
static inline const struct kube_pvc *kube_pvc_of(const struct kube_obj *o)
{
	return o && o->kind == KUBE_KIND_PVC ? (const struct kube_pvc *)o : NULL;
}
static inline const struct kube_storageclass *kube_storageclass_of(const struct kube_obj *o)
{
	return o && o->kind == KUBE_KIND_SC ? (const struct kube_storageclass *)o : NULL;
}

static inline const struct kube_pod *kube_pod_of(const struct kube_obj *o)
{
	return o && o->kind == KUBE_KIND_POD ? (const struct kube_pod *)o : NULL;
}
static inline const struct kube_csidriver *kube_csidriver_of(const struct kube_obj *o)
{
	return o && o->kind == KUBE_KIND_CSIDRIVER ? (const struct kube_csidriver *)o : NULL;
}
static inline const struct kube_lease *kube_lease_of(const struct kube_obj *o)
{
	return o && o->kind == KUBE_KIND_LEASE ? (const struct kube_lease *)o : NULL;
}
static inline const struct kube_vac *kube_vac_of(const struct kube_obj *o)
{
	return o && o->kind == KUBE_KIND_VAC ? (const struct kube_vac *)o : NULL;
}
static inline const struct kube_csisc *kube_csisc_of(const struct kube_obj *o)
{
	return o && o->kind == KUBE_KIND_CSISC ? (const struct kube_csisc *)o : NULL;
}
static inline const struct kube_vs *kube_vs_of(const struct kube_obj *o)
{
	return o && o->kind == KUBE_KIND_VS ? (const struct kube_vs *)o : NULL;
}
static inline const struct kube_vsc *kube_vsc_of(const struct kube_obj *o)
{
	return o && o->kind == KUBE_KIND_VSC ? (const struct kube_vsc *)o : NULL;
}
static inline const struct kube_vsclass *kube_vsclass_of(const struct kube_obj *o)
{
	return o && o->kind == KUBE_KIND_VSCLASS ? (const struct kube_vsclass *)o : NULL;
}
static inline const struct kube_vgs *kube_vgs_of(const struct kube_obj *o)
{
	return o && o->kind == KUBE_KIND_VGS ? (const struct kube_vgs *)o : NULL;
}
static inline const struct kube_vgsc *kube_vgsc_of(const struct kube_obj *o)
{
	return o && o->kind == KUBE_KIND_VGSC ? (const struct kube_vgsc *)o : NULL;
}
static inline const struct kube_vsclass *kube_vgsclass_of(const struct kube_obj *o)
{
	return o && o->kind == KUBE_KIND_VGSCLASS ? (const struct kube_vsclass *)o : NULL;
}

#endif
