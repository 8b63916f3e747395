/*
 * taint eviction: kube-controller-manager's taint-eviction-controller. A pod on a node with a
 * NoExecute taint it does not tolerate is deleted at once; one whose tolerations of those taints
 * all carry tolerationSeconds is deleted when the smallest runs out; one that tolerates them for
 * ever stays. Before the delete the pod gets the DisruptionTarget condition (reason
 * DeletionByTaintManager), and event TaintManagerEviction "Marking for deletion Pod ns/name";
 * an eviction given up because the taint went (or the pod did) is told with "Cancelling
 * deletion of Pod ns/name".
 *
 * The pure part (te_plan.c), so that its tests are tables:
 *
 *   te_decide()   from the node's taints and the pod's tolerations: keep (no NoExecute taint,
 *                 or every one tolerated for ever), evict now, or evict after N seconds. As
 *                 upstream: each NoExecute taint takes the first toleration that tolerates it;
 *                 the wait is the smallest tolerationSeconds among those (0 or less: now), none
 *                 with tolerationSeconds: for ever.
 *   te_schedule() what to do with a pod's scheduled eviction given that verdict: upstream's
 *                 timed queue keeps an eviction already scheduled (its clock started when the
 *                 controller first saw the taint), replaces it by "now" when a taint is no
 *                 longer tolerated, and cancels it when nothing asks for it any more.
 *
 * The clock starts when the controller sees the taint (upstream's rule; timeAdded is written by
 * nodelifecycle a moment before, so the two agree unless this process restarts, after which
 * upstream, too, starts the toleration again).
 *
 * The controller (tainteviction.c) owns the informer handlers, the schedule and the API calls.
 */
#ifndef KCSI_CONTROLLERS_TE_H
#define KCSI_CONTROLLERS_TE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kube/objects.h"

enum te_verdict { TE_KEEP, TE_NOW, TE_AFTER };

/* The verdict; for TE_AFTER the wait in *seconds (> 0). */
enum te_verdict te_decide(const struct kube_taint *taints, size_t ntaints,
			  const struct kube_toleration *tols, size_t ntols, int64_t *seconds);

/* One pod's scheduled eviction (zeroed: none). */
struct te_sched {
	bool set;
	int64_t created_ns; /* when it was scheduled */
	int64_t fire_ns;    /* when the pod is to be deleted */
};

enum te_change { TE_UNCHANGED, TE_SCHEDULED, TE_CANCELLED, TE_RESCHEDULED };

/*
 * Applies a verdict (with its seconds) seen at now to s; returns what changed (TE_CANCELLED and
 * TE_RESCHEDULED are told with the cancel event, as upstream's cancelWorkWithEvent does).
 */
enum te_change te_schedule(struct te_sched *s, enum te_verdict v, int64_t seconds, int64_t now_ns);

#endif
