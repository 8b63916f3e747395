/*
 * nodelifecycle: kube-controller-manager's node lifecycle controller, the part that keeps a
 * Node's conditions and its node.kubernetes.io/ taints in step with whether its kubelet (here
 * kcsi-node) still reports.
 *
 * The pure part (nl_plan.c), so that its tests are tables:
 *
 *   nl_observe()  when did this node last show a sign of life: the moment the controller saw the
 *                 Ready condition's lastHeartbeatTime or the Lease kube-node-lease/<node>'s
 *                 spec.renewTime change (upstream's probe timestamp: the controller's own clock,
 *                 so a node's clock skew does not matter). A node first seen with a Ready
 *                 condition starts at "now"; one without starts at its creationTimestamp and is
 *                 given --node-startup-grace-period instead of --node-monitor-grace-period.
 *   nl_plan()     from the node's conditions, taints, unschedulable flag, that probe time and
 *                 now: the conditions and taints to write.
 *                 - no sign of life for the grace period: Ready, MemoryPressure, DiskPressure and
 *                   PIDPressure become Unknown ("NodeStatusUnknown", "Kubelet stopped posting
 *                   node status."; a condition never posted is added as "NodeStatusNeverUpdated")
 *                 - NoSchedule taints mirror the conditions: Ready False -> not-ready, Ready
 *                   Unknown -> unreachable, MemoryPressure/DiskPressure/PIDPressure/
 *                   NetworkUnavailable True -> memory-pressure/disk-pressure/pid-pressure/
 *                   network-unavailable, spec.unschedulable -> unschedulable; the same keys with
 *                   NoSchedule that no condition asks for are removed
 *                 - NoExecute taints (TaintBasedEvictions): Ready False -> not-ready, Unknown ->
 *                   unreachable, True -> neither; no Ready condition -> untouched; a new one
 *                   only as enum nl_noexec allows (the zone's rate limiter, master disruption)
 *   nl_zone_state(), nl_zones_update(), nl_zone_take()  (nl_zone.c) the zones: upstream's
 *                 ComputeZoneState, handleDisruption and the per-zone token bucket
 *                 Every taint added carries timeAdded = now, as upstream's taint swap writes it.
 *
 * The controller (nodelifecycle.c) owns the informers (nodes, kube-node-lease Leases), the
 * observation table and the writes; see the file comment there.
 */
#ifndef KCSI_CONTROLLERS_NL_H
#define KCSI_CONTROLLERS_NL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/timeutil.h"
#include "kube/objects.h"

#define NL_TAINT_NOT_READY "node.kubernetes.io/not-ready"
#define NL_TAINT_UNREACHABLE "node.kubernetes.io/unreachable"
#define NL_TAINT_UNSCHEDULABLE "node.kubernetes.io/unschedulable"

/* What the controller last saw of one node (zeroed: never seen). */
struct nl_health {
	char heartbeat[48]; /* the Ready condition's lastHeartbeatTime ("" none) */
	char renew[48];     /* the Lease's spec.renewTime ("" none) */
	bool seen;
	bool has_ready;     /* the node had a Ready condition */
	bool mark_pods;     /* its pods still to be marked not Ready (upstream's nodesToRetry) */
	int64_t probe_ns;   /* wall clock (ns) of the last sign of life seen */
};

/*
 * Records one look at a node: heartbeat is the Ready condition's lastHeartbeatTime (NULL when it
 * has none), has_ready whether it has a Ready condition, renew the Lease's renewTime (NULL when
 * there is no Lease), created_ns the node's creationTimestamp. Moves h->probe_ns to now when
 * the heartbeat or the renewal changed, or when the Ready condition appeared or vanished.
 */
void nl_observe(struct nl_health *h, bool has_ready, const char *heartbeat, const char *renew,
		int64_t created_ns, int64_t now_ns);

/*
 * What nl_plan may do with the NoExecute taint a node's Ready condition asks for (upstream adds
 * it through a per-zone rate-limited queue, swaps not-ready/unreachable at once, and removes
 * both from every node when every zone is fully disrupted).
 */
enum nl_noexec {
	NL_NOEXEC_ADD,    /* add it (the zone's limiter let this node through) */
	NL_NOEXEC_HOLD,   /* keep or swap an existing one; a missing one is left pending */
	NL_NOEXEC_REMOVE, /* remove both: every zone is fully disrupted */
};

struct nl_plan_in {
	const struct kube_node_condition *conds;
	size_t nconds;
	const struct kube_taint *taints;
	size_t ntaints;
	bool unschedulable;
	const char *created; /* creationTimestamp: the heartbeat of a condition never posted */
	int64_t probe_ns;    /* nl_health.probe_ns */
	int64_t grace_ns;    /* --node-monitor-grace-period, or the startup one without Ready */
	int64_t now_ns;      /* wall clock */
	enum nl_noexec noexec;
};

/*
 * The node as it should be written: the whole condition and taint lists (JSON merge patches
 * replace lists whole). Strings are borrowed from the input, from string literals, or point
 * into `now`; the arrays are the plan's own (nl_plan_out_release).
 */
struct nl_plan_out {
	struct kube_node_condition *conds;
	size_t nconds;
	struct kube_taint *taints;
	size_t ntaints;
	bool conds_changed;
	bool taints_changed;
	bool noexec_pending; /* NL_NOEXEC_HOLD left a wanted NoExecute taint out */
	char now[RFC3339_BUFLEN]; /* now_ns as metav1.Time text */
};

void nl_plan(const struct nl_plan_in *in, struct nl_plan_out *out);
void nl_plan_out_release(struct nl_plan_out *out);

/* ---- zones (upstream's handleDisruption) ---- */

enum nl_zone_state { NL_ZONE_INITIAL, NL_ZONE_NORMAL, NL_ZONE_PARTIAL, NL_ZONE_FULL };

struct nl_rates {
	double primary;   /* --node-eviction-rate */
	double secondary; /* --secondary-node-eviction-rate */
	double threshold; /* --unhealthy-zone-threshold */
	int large;        /* --large-cluster-size-threshold */
};

/* One zone: key "region:\0:zone" as upstream's GetZoneKey ("" without either label). */
struct nl_zone {
	char key[256];
	size_t keylen;          /* the key holds a NUL byte */
	uint8_t state;          /* enum nl_zone_state */
	int ready, not_ready;   /* this pass's Ready conditions (missing counts as not ready) */
	double rate;            /* NoExecute taints per second; 0: none */
	double tokens;          /* token bucket, burst 1 */
	int64_t refilled_ns;
	unsigned long long evictions; /* node_collector_evictions_total */
};

/* upstream's ComputeZoneState. */
enum nl_zone_state nl_zone_state(int ready, int not_ready, double threshold);

enum nl_disruption {
	NL_DISRUPTION_NONE,  /* at least one zone is not fully disrupted, as before */
	NL_DISRUPTION_ENTER, /* every zone just became fully disrupted: remove NoExecute taints */
	NL_DISRUPTION_IN,    /* every zone still fully disrupted */
	NL_DISRUPTION_EXIT,  /* some node is Ready again: reset every node's probe time */
};

/*
 * handleDisruption for zones whose ready/not_ready this pass counted (zones without nodes are
 * the caller's to drop first): new states and limiter rates. n == 0 is NL_DISRUPTION_NONE.
 */
enum nl_disruption nl_zones_update(struct nl_zone *z, size_t n, const struct nl_rates *r,
				   int64_t now_ns);

/* The zone's limiter: true (a token taken) when one more node may get its NoExecute taint. */
bool nl_zone_take(struct nl_zone *z, int64_t now_ns);

/* The Ready condition of a list, or NULL. */
const struct kube_node_condition *nl_condition(const struct kube_node_condition *c, size_t n,
					       const char *type);

#endif
