/*
 * emu_validate: kube-apiserver's validation of a written object beyond the storage kinds'
 * defaults and rules (emu_defaults.c): the pod spec update rule, the apps/v1 selectors that
 * cannot change, and the snapshot CRDs' schema rules (the deletionPolicy enums and the
 * VolumeSnapshot source rules of deploy/kubernetes/snapshot-crds), each answered as kube-apiserver answers it (422 Invalid with
 * one field cause; e2e.emulator_differential compares them).
 */
#ifndef KCSI_EMULATOR_VALIDATE_H
#define KCSI_EMULATOR_VALIDATE_H

#include <jansson.h>
#include <stdbool.h>

#include "emulator/emu_reply.h"

struct emu_resource;

/*
 * Checks nobj, a new object of r (old NULL) or the update of old; false with the 422 in rp. The
 * pod rule lets spec.nodeName be set once, as kube-emulator's update does (emu_verbs.c).
 */
bool emu_validate(const struct emu_resource *r, const json_t *old, const json_t *nobj,
		  struct reply *rp);

#endif
