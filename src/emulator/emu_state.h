/*
 * emu_state: kube-emulator's --state-file, so that a restarted emulator, also one killed with
 * SIGKILL, serves the objects and the resourceVersion counter it had.
 *
 * Three files: the state file P itself, a snapshot ({"kind": "KubeEmulatorState",
 * "resourceVersion": N, "objects": [...]}) only ever replaced whole (temporary file, fsync,
 * rename); P.log, every commit after the snapshot as one line each; and P.lock, flock()ed for
 * the emulator's life (base/lockfile.h) so that two emulators never share P.
 *
 * A log line, appended under the store lock before the request is answered:
 *   {"rv":N,"type":"ADDED|MODIFIED|DELETED","resource":"<apiVersion>/<plural>","key":"ns/name",
 *    "object":<the object as committed>}
 * Opening P replays the lines with rv above the snapshot's over it. A last line cut short (no
 * newline, or not JSON: the process died inside its write(), so that request was never
 * answered) is dropped; a bad line before the last is an error naming the file and the line.
 * The log is folded into P at start (when it holds anything), at exit, and while running when it
 * grows past 64 MiB and four times the last snapshot: the whole store is written once per that
 * many bytes of writes, never per write.
 *
 * Why no fsync per line: what the log defends against is the emulator process dying (kill -9,
 * a crash): a write() that returned is in the kernel's page cache and reaches the file whatever
 * happens to the process, so no answered write is lost, as with an etcd-backed kube-apiserver.
 * Only a machine that stops loses the lines not yet written back; kcsi up's stack (processes,
 * mounts, loop devices) does not survive that either, and an fsync per write costs a disk flush
 * per API write (milliseconds each on a disk). A write() per commit costs a few microseconds
 * beside the JSON work the commit already does (its text is the event's, serialized anyway):
 * docs/kube-emulator.md, "State file".
 *
 * The store keeps what this module opens (emu_store.h: the descriptors, on_commit) and
 * emu_store_free() closes it, the lock with it. All functions but emu_state_append() are called
 * without the store lock held, before the server's threads start or after they ended.
 */
#ifndef KCSI_EMULATOR_STATE_H
#define KCSI_EMULATOR_STATE_H

#include <stddef.h>

#include "emulator/emu_store.h"

/* The log is folded into the state file past max(this, 4 x the last snapshot's size). */
#define EMU_STATE_COMPACT_MIN ((uint64_t)64 * 1024 * 1024)

/*
 * Takes P's lock, loads P (a missing P is an empty start), replays P.log over it, folds the log
 * into P when it held anything, and opens the log for the commits to come. -1 with err (naming
 * the file; for a lock held by another emulator, its PID) when any step fails.
 */
int emu_state_open(struct emu_store *st, const char *path, char *err, size_t errlen);
/* Appends one committed event (its object stored at key) to the log: the store's on_commit,
 * called with st->mu held. A failed write is logged, and the log is turned off (the state is then
 * saved only at exit). */
void emu_state_append(struct emu_store *st, const struct emu_event *ev, const char *key);
/* Writes the snapshot of the whole store to P and empties the log. Takes st->mu. */
int emu_state_save(struct emu_store *st, char *err, size_t errlen);

#endif
