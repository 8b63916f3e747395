/*
 * emu_patch: the three patch formats kube-apiserver accepts for JSON objects.
 *
 *   merge      RFC 7386 JSON merge patch: objects merge key by key, null deletes, anything
 *              else (arrays included) replaces.
 *   json       RFC 6902 JSON patch: add, remove, replace, move, copy, test over RFC 6901
 *              pointers ("~0" is '~', "~1" is '/', "-" appends to an array).
 *   strategic  Kubernetes strategic merge patch, reduced to what the CSI components and kubectl
 *              send for the objects this emulator serves. Maps merge as in a merge patch;
 *              metadata.finalizers merges as a set; lists that upstream merges by a key
 *              (containers/volumes/env/drivers by name, conditions/addresses by type,
 *              volumeMounts by mountPath, ownerReferences by uid, ...) merge element by
 *              element; other lists replace. Directives applied: `$patch: replace|delete` on
 *              maps and on merge-key list elements, `{"$patch": "replace"}` in a merge-key list,
 *              `$setElementOrder/<list>`, `$deleteFromPrimitiveList/<list>`. Any other
 *              directive (`$retainKeys`, `$patch` in other lists, ...) is refused with an error
 *              rather than silently misapplied. The merge-key table is by field name, not by
 *              schema: a field of that name with another meaning would merge by key too.
 *
 * Ownership: inputs are only read; the result is a new reference owned by the caller.
 * Errors: NULL is returned with a message in err; *status says whether the patch document itself
 * is malformed (400), could not be applied to this object (422), or would build more than the
 * bounds below allow (413 for size and operation count, 422 for depth).
 */
#ifndef KCSI_EMULATOR_PATCH_H
#define KCSI_EMULATOR_PATCH_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/*
 * Bounds on what a small request may make the emulator build (413 or 422 past them):
 * EMU_MAX_JSON_DEPTH     nesting of any JSON the emulator parses or a patch produces; kept far
 *                        below what recursion over a JSON value can afford on a thread stack
 * EMU_MAX_OBJECT_BYTES   serialized size of an object a patch produces (the request limit)
 * EMU_MAX_JSON_PATCH_OPS operations in one JSON patch (kube-apiserver's limit)
 * EMU_MAX_PATCH_COPY     bytes all `copy` operations of one JSON patch may duplicate
 */
#define EMU_MAX_JSON_DEPTH 256
#define EMU_MAX_OBJECT_BYTES (3 * 1024 * 1024)
#define EMU_MAX_JSON_PATCH_OPS 10000
#define EMU_MAX_PATCH_COPY (3 * 1024 * 1024)

/* Whether v nests deeper than max levels (a scalar is 0, [] or {} is 1); stops looking at max. */
bool emu_json_too_deep(const json_t *v, int max);

/* Never fails. */
json_t *emu_merge_patch(const json_t *target, const json_t *patch);
json_t *emu_json_patch(const json_t *target, const json_t *ops, int *status, char *err,
		       size_t errlen);
json_t *emu_strategic_patch(const json_t *target, const json_t *patch, int *status, char *err,
			    size_t errlen);

#endif
