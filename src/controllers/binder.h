/*
 * persistentvolume-binder's matching rules (binder.c), exported for the unit tests.
 * All functions are pure: they read records and return a borrowed pointer or a reason.
 */
#ifndef KCSI_CONTROLLERS_BINDER_H
#define KCSI_CONTROLLERS_BINDER_H

#include <stdbool.h>
#include <stddef.h>

#include "kube/objects.h"

/* True when the volume's claimRef names this claim (and its uid, when the ref has one). */
bool pvb_prebound_to(const struct kube_pv *pv, const struct kube_pvc *claim);
/* Why the volume cannot satisfy the claim (size, class, volumeMode, access modes), or NULL. */
const char *pvb_mismatch(const struct kube_pv *pv, const struct kube_pvc *claim);
/*
 * The volume to bind the claim to: one pre-bound to it if any fits, else the smallest Available
 * unclaimed one that fits and matches the claim's selector; with delay_binding (WaitForFirstConsumer
 * and no node chosen yet) only pre-bound ones; with node, only volumes whose nodeAffinity allows
 * it. NULL when none.
 */
const struct kube_pv *pvb_best_match(const struct kube_pvc *claim, struct kube_obj *const *pvs,
				     size_t n, bool delay_binding, const struct kube_node *node);

#endif
