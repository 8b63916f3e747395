/*
 * volume-scheduler's node filters that are pure rules, kept apart from scheduler.c's I/O so that
 * their tests are tables (the rest of the filter, claims and capacity, reads the caches):
 *
 *   vs_untolerated()  kube-scheduler's TaintToleration filter: a node whose NoSchedule or
 *                     NoExecute taint no toleration of the pod tolerates does not fit
 *                     (PreferNoSchedule only scores upstream, and is ignored here)
 *   vs_over_limit()   kube-scheduler's NodeVolumeLimits (CSI): per driver, the unique volumes
 *                     the node's pods already use plus the pod's volumes not among them must not
 *                     pass the driver's CSINode allocatable.count
 *   vs_rwop_user()    kube-scheduler's VolumeRestrictions for ReadWriteOncePod: a claim with that
 *                     access mode is used by one scheduled pod at most, on whichever node
 *   vs_prefilter()    the checks of the pod's claims before any node (missing, lost, being
 *                     deleted, unbound Immediate), in kube-scheduler's PreFilter order and words
 *   vs_fit_message()  the FailedScheduling message and PodScheduled condition message:
 *                     kube-scheduler's FitError, each node reason with its count, and
 *                     DefaultPreemption's verdict; vs_event_note() cuts it for an event
 *   vs_backoff_ns()   how long an unschedulable pod waits before the next attempt
 */
#ifndef KCSI_CONTROLLERS_VS_H
#define KCSI_CONTROLLERS_VS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kube/objects.h"

/* Whether one toleration tolerates one taint (key, operator Equal/Exists, value, effect). */
bool vs_tolerates(const struct kube_toleration *tol, const struct kube_taint *t);
/* The first NoSchedule or NoExecute taint that no toleration tolerates, or NULL. */
const struct kube_taint *vs_untolerated(const struct kube_taint *taints, size_t ntaints,
					const struct kube_toleration *tols, size_t ntols);

/* A CSI volume as NodeVolumeLimits counts it: the driver and an ID unique within it (a bound
 * volume's handle, an unbound claim's "<namespace>/<name>", ...). */
struct vs_volume {
	const char *driver;
	const char *id;
};

/*
 * The driver whose attach limit the node would pass if the pod's volumes (add) joined those its
 * pods use (used), or NULL when none would. limit(driver, ud) is the CSINode's allocatable.count
 * for that driver, or a negative number when it sets none (no limit).
 */
const char *vs_over_limit(const struct vs_volume *used, size_t nused, const struct vs_volume *add,
			  size_t nadd, int32_t (*limit)(const char *driver, void *ud), void *ud);

/*
 * The pod that already uses the ReadWriteOncePod claim `claim` of pod p, or NULL: a pod of
 * pods[0..n) other than p, in p's namespace, naming the claim in its volumes, scheduled
 * (spec.nodeName, or placed(pod, ud): this scheduler bound it a moment ago and the cache does not
 * show it yet; placed may be NULL) and not terminated. A terminating pod (deletionTimestamp)
 * still counts: the kubelet has not unmounted its volumes yet. The node does not matter, so the
 * answer holds for every node: kube-scheduler's VolumeRestrictions, whose reason is
 * VS_REASON_RWOP_CONFLICT. The caller checks the claim's access modes.
 */
#define VS_REASON_RWOP_CONFLICT "node(s) unavailable due to PersistentVolumeClaim with " \
	"ReadWriteOncePod access mode already in-use by another pod"
const struct kube_pod *vs_rwop_user(const struct kube_pod *p, const char *claim,
				    struct kube_obj *const *pods, size_t n,
				    bool (*placed)(const struct kube_pod *pod, void *ud), void *ud);

/* ---- FailedScheduling's message: kube-scheduler's FitError (v1.36) ---- */

/* kube-scheduler's reasons, word for word (pkg/scheduler/framework/plugins). */
#define VS_REASON_UNBOUND_IMMEDIATE "pod has unbound immediate PersistentVolumeClaims"
#define VS_REASON_UNSCHEDULABLE "node(s) were unschedulable"
#define VS_REASON_NOT_READY "node(s) were not ready" /* kcsi's own: no upstream filter */
#define VS_REASON_TAINT "node(s) had untolerated taint(s)"
#define VS_REASON_SELECTOR "node(s) didn't match Pod's node affinity/selector"
#define VS_REASON_TOO_MANY_PODS "Too many pods"
#define VS_REASON_MAX_VOLUMES "node(s) exceed max volume count"
#define VS_REASON_NODE_CONFLICT "node(s) didn't match PersistentVolume's node affinity"
#define VS_REASON_BIND_CONFLICT "node(s) didn't find available persistent volumes to bind"
#define VS_REASON_NO_SPACE "node(s) did not have enough free storage"
#define VS_REASON_PV_NOT_EXIST "node(s) unavailable due to one or more pvc(s) bound to " \
	"non-existent pv(s)"
#define VS_NO_NODES "no nodes available to schedule pods"
/* The most kube-scheduler writes in an event's note (validation.NoteLengthLimit). */
#define VS_NOTE_MAX 1024

/*
 * Why one node does not fit: the reasons of the first filter that refused it (VolumeBinding can
 * give several) and whether that filter says UnschedulableAndUnresolvable (taints, selector,
 * unschedulable, volume binding: evicting pods would not help) or Unschedulable (pod count,
 * ReadWriteOncePod, attach limit). The reasons are borrowed (the constants above).
 */
#define VS_NODE_REASONS_MAX 4
struct vs_verdict {
	const char *reason[VS_NODE_REASONS_MAX];
	size_t n;
	bool unresolvable;
};

/* The verdicts of every node, as FitError's histogram: each distinct reason with how many nodes
 * gave it, and how many nodes were refused each way. Zero it to start. */
#define VS_MAX_REASONS 12
struct vs_reasons {
	size_t n;
	struct {
		char text[160];
		size_t count;
	} r[VS_MAX_REASONS];
	size_t unresolvable, resolvable; /* nodes */
};

void vs_reasons_node(struct vs_reasons *r, const struct vs_verdict *v);

/*
 * The message kube-scheduler v1.37's FitError prints, into buf (cut to len), with what its
 * PostFilter plugins (DynamicResources, then DefaultPreemption) add:
 *   nnodes 0:   "no nodes available to schedule pods"
 *   prefilter:  "0/N nodes are available: <prefilter>. not found" (the pod itself cannot be
 *               placed; DynamicResources' PostFilter then fails to find the state its PreFilter
 *               never wrote, and kube-scheduler prints that error: VS_POSTFILTER_NO_STATE)
 *   else:       "0/N nodes are available: <count> <reason>, ...." (sorted as Go sorts strings)
 *               then DefaultPreemption's verdict (DynamicResources adds nothing for a pod
 *               without resource claims since v1.37; v1.36 wrote "no new claims to
 *               deallocate, " first), since kcsi evicts nothing:
 *               "preemption: not eligible due to preemptionPolicy=Never." for such a pod, else
 *               "preemption: 0/N nodes are available: <k> No preemption victims found for
 *               incoming pod, <m> Preemption is not helpful for scheduling." (m: the nodes refused
 *               for good; k: the others, where upstream would search for lower-priority pods to
 *               evict: its words when every pod has the same priority).
 */
#define VS_POSTFILTER_NO_STATE "not found"
void vs_fit_message(const struct vs_reasons *r, size_t nnodes, const char *prefilter,
		    bool preempt_never, char *buf, size_t len);

/* kube-scheduler's truncateMessage: a message over VS_NOTE_MAX bytes ends with " ...". */
void vs_event_note(const char *msg, char *buf, size_t len);

/* The retry delay after the pod's attempts-th refusal: 1 s doubling to 10 s, kube-scheduler's
 * podInitialBackoffSeconds and podMaxBackoffSeconds. */
int64_t vs_backoff_ns(unsigned attempts);

/* ---- the pod's claims (PreFilter: VolumeRestrictions, then VolumeBinding) ---- */

struct vs_claim {
	const char *name;           /* the claim the pod names */
	bool ephemeral;             /* a generic ephemeral volume's claim */
	const struct kube_pvc *pvc; /* the claim in the cache, or NULL */
	bool delay_binding;         /* its class exists and is WaitForFirstConsumer */
};

/* Bound as kube-scheduler counts it: spec.volumeName and pv.kubernetes.io/bind-completed. */
bool vs_claim_fully_bound(const struct kube_pvc *c);

/*
 * Whether the pod's claims keep it off every node, with kube-scheduler's words in buf: a claim
 * that does not exist ("persistentvolumeclaim \"x\" not found", or for a generic ephemeral
 * volume "waiting for ephemeral volume controller to create the persistentvolumeclaim \"x\""),
 * one Lost ("... bound to non-existent persistentvolume \"v\""), one being deleted
 * ("persistentvolumeclaim \"x\" is being deleted"), then an unbound claim that is not
 * WaitForFirstConsumer (VS_REASON_UNBOUND_IMMEDIATE). The first in that order wins.
 */
bool vs_prefilter(const struct vs_claim *c, size_t n, char *buf, size_t len);

/* Label and topology helpers of the node filters (pure). */
bool vs_labels_have(const struct kube_kv *l, uint16_t n, const char *k, const char *v);
/* -1: the class (cls) has no CSIStorageCapacity objects in caps (a list's JSON); else 1 when one
 * covering the node has room for want bytes, 0 when none has. */
int vs_capacity_fits(json_t *caps, const char *cls, const struct kube_node *n, int64_t want);
/* A PV's node affinity as a label selector reads: "zone in (b), disk exists or host in (h)". */
void vs_affinity_text(const struct kube_pv *pv, char *buf, size_t len);

#endif
