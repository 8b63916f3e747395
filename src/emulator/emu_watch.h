/*
 * emu_watch: the collection verbs of kube-emulator: list (selectors, pagination, exact
 * resourceVersion), watch (chunked streams from the event history) and deletecollection.
 */
#ifndef KCSI_EMULATOR_WATCH_H
#define KCSI_EMULATOR_WATCH_H

#include <microhttpd.h>

struct emu_call;

enum MHD_Result emu_do_list(struct emu_call *k);
enum MHD_Result emu_do_watch(struct emu_call *k);
enum MHD_Result emu_do_delete_collection(struct emu_call *k);

#endif
