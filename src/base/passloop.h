/*
 * passloop: a controller's pass thread. pass(ud) runs at once, then again when the loop is
 * kicked (pass_loop_kick, usable as an informer's "something changed" callback) or when the wait
 * the pass returned has run out: 0 (or less) means at once, PASS_LOOP_NEVER no further pass,
 * kicked or not, until pass_loop_stop (a controller that found it cannot work).
 * pass_loop_stop wakes the thread and joins it; a pass in progress finishes first, so a pass
 * that may run long asks pass_loop_stopping() between its steps.
 *
 * Users: kcsi-controller-manager's taint eviction, podgc and nodelifecycle; the provisioner's
 * SnapshotFinalizerProtection sweep.
 *
 * Ownership: the struct is its user's (usually embedded); init before start, stop before
 * destroy. kick, stopping and stop may be called from any thread.
 */
#ifndef KCSI_BASE_PASSLOOP_H
#define KCSI_BASE_PASSLOOP_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define PASS_LOOP_NEVER INT64_MAX

struct pass_loop {
	pthread_mutex_t mu; /* kicked, stopping */
	pthread_cond_t wake;
	pthread_t thread;
	bool kicked, stopping, started;
	int64_t (*pass)(void *ud); /* returns the wait (ns) before the next pass */
	void *ud;
};

void pass_loop_init(struct pass_loop *l, int64_t (*pass)(void *ud), void *ud);
int pass_loop_start(struct pass_loop *l); /* 0, or -1 when the thread cannot start */
void pass_loop_kick(void *loop);          /* void *: an informer callback's signature */
bool pass_loop_stopping(struct pass_loop *l);
void pass_loop_stop(struct pass_loop *l);
void pass_loop_destroy(struct pass_loop *l); /* after pass_loop_stop */

#endif
