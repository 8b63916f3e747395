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
 *   vs_reasons_*()    the FailedScheduling message: each reason with its count of nodes
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

/* ---- FailedScheduling's message ---- */

/* A reason about the pod rather than a node: printed without a count, as upstream's PreFilter. */
#define VS_REASON_UNBOUND_IMMEDIATE "pod has unbound immediate PersistentVolumeClaims"
#define VS_MAX_REASONS 8

/* Why the nodes did not fit, each distinct reason with how many nodes gave it. */
struct vs_reasons {
	size_t n;
	struct {
		char text[320];
		size_t count;
	} r[VS_MAX_REASONS];
};

void vs_reasons_add(struct vs_reasons *r, const char *text);
/* kube-scheduler's "0/3 nodes are available: 1 node(s) had untolerated taint {k: v}, 2 node(s)
 * were unschedulable." ("<count> <reason>" sorted, joined by ", "). */
void vs_reasons_format(const struct vs_reasons *r, size_t nnodes, char *buf, size_t len);

#endif
