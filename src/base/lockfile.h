/*
 * lockfile: one process at a time owns a folder, or a part of one (kcsi up's --dir, a node's
 * records in the loop driver's pool, kcsi-node's --root-dir, kube-emulator's --state-file).
 *
 * lockfile_take() takes an exclusive flock() on a file inside what it guards and writes the
 * taker's PID into it. The lock lasts as long as the descriptor stays open, which is the
 * process's life: the kernel drops it when the process ends, also at kill -9, so a crash never
 * leaves a folder locked. A second taker is refused at once (no waiting) and learns the holder's
 * PID from the file, so its message can name it.
 *
 * Invariants: the file is never removed, by the holder or anyone else. Removing it would let a
 * third process create and lock a new file while a second still holds the old one, and two
 * owners would run at once. The descriptor is close-on-exec: children never hold the lock, so
 * it ends with its owner even when a child outlives it.
 */
#ifndef KCSI_BASE_LOCKFILE_H
#define KCSI_BASE_LOCKFILE_H

#include <sys/types.h>

#define LOCKFILE_BUSY (-2)

/*
 * Creates path (mode 0644) when missing and takes its lock. Returns the descriptor that holds
 * the lock (the caller keeps it open while it owns the folder); LOCKFILE_BUSY when another
 * process holds it, with *holder its PID (0 when it has not written it yet); -1 with errno for
 * any other failure (a missing folder, no permission).
 */
int lockfile_take(const char *path, pid_t *holder);

#endif
