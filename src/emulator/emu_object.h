/*
 * emu_object: small readers and writers of a stored object's JSON that the verbs (emu_verbs.c),
 * deletion (emu_delete.c) and pods/binding (emu_binding.c) share. None takes the store lock or
 * owns what it returns: strings point into the object.
 */
#ifndef KCSI_EMULATOR_OBJECT_H
#define KCSI_EMULATOR_OBJECT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct emu_resource;

/* The object's metadata, added as {} when missing or not an object. */
json_t *emu_meta_of(json_t *obj);
/* metadata.<field> as a string, or NULL. */
const char *emu_meta_str(const json_t *obj, const char *field);
/* Now in RFC 3339 (seconds), as kube-apiserver writes timestamps. */
void emu_now_rfc3339(char *buf, size_t len);
/* v is a map (map true) or a list of strings only. */
bool emu_all_strings(const json_t *v, bool map);
/* The resource is core/v1 pods. */
bool emu_is_pod(const struct emu_resource *r);
/* spec.nodeName, "" when unset. */
const char *emu_pod_node(const json_t *pod);

#endif
