/*
 * emu_verbs: the object verbs of kube-emulator with kube-apiserver's semantics: get, create,
 * update and patch (emu_verbs.c), delete and namespace termination (emu_delete.c), pods/binding
 * (emu_binding.c); emu_watch.c builds list, watch and deletecollection on the deletion helpers
 * below.
 */
#ifndef KCSI_EMULATOR_VERBS_H
#define KCSI_EMULATOR_VERBS_H

#include <jansson.h>
#include <microhttpd.h>
#include <stdbool.h>

#include "emulator/emu_reply.h"

struct emu_server;

enum MHD_Result emu_do_get(struct emu_call *k);
enum MHD_Result emu_do_create(struct emu_call *k);
enum MHD_Result emu_do_update(struct emu_call *k);
enum MHD_Result emu_do_patch(struct emu_call *k);
enum MHD_Result emu_do_delete(struct emu_call *k);
/* POST pods/{name}/binding: sets spec.nodeName once, as the scheduler's bind does. */
enum MHD_Result emu_do_binding(struct emu_call *k);
/*
 * Reads DeleteOptions from the query and from opts (the parsed body, may be NULL) into k:
 * gracePeriodSeconds, propagationPolicy (checked, then ignored: no garbage collector).
 * False with a 400/422 reply when they are malformed.
 */
bool emu_delete_options(struct emu_call *k, const json_t *opts, struct reply *rp);
/* Deletes (or marks for deletion, when finalizers remain) the stored object old at key. */
void emu_delete_locked(struct emu_call *k, const char *key, json_t *old, struct reply *rp);
/* Namespace ns is being deleted: nothing new may be created in it (store lock held). */
bool emu_ns_terminating(struct emu_server *srv, const char *ns);
/* Removes namespace ns when it is terminating and its last object is gone (store lock held). */
void emu_ns_maybe_finish(struct emu_server *srv, const char *ns);

#endif
