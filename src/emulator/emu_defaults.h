/*
 * emu_defaults: what kube-apiserver's defaulting and update validation do to the objects
 * kube-emulator serves, where a client sees it: the fields the real server fills in when a
 * client leaves them out, and the updates its validation refuses. Only the storage kinds the
 * CSI components write are covered, each rule taken from kube-apiserver v1.37.2's behaviour as
 * e2e.emulator_differential observes it; docs/kube-emulator.md lists what is not.
 *
 * Pure functions on JSON, no server state. Defaults are applied on every create and every
 * write of the main endpoint (as the real server defaults every object it decodes), so a patch
 * that removes a defaulted field gets it back.
 */
#ifndef KCSI_EMULATOR_DEFAULTS_H
#define KCSI_EMULATOR_DEFAULTS_H

#include <jansson.h>
#include <stddef.h>

/* Fills the missing defaulted fields of obj, an object of group/plural ("" for core). */
void emu_apply_defaults(const char *group, const char *plural, json_t *obj);

/*
 * NULL when the validation of an update from old to proposed (both defaulted) lets it through;
 * else the field path the refusal names, with the detail ("Forbidden: ...") in detail.
 *   persistentvolumeclaims  the spec is immutable but for volumeName (set once), a
 *                           storageClassName set where none was, and, on a claim that is
 *                           Bound, resources.requests.storage and volumeAttributesClassName
 */
const char *emu_update_refused(const char *group, const char *plural, const json_t *old,
			       const json_t *proposed, char *detail, size_t len);

#endif
