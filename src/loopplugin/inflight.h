/*
 * inflight: the set of volumes (and snapshots) that have an operation running.
 *
 * The seed's rule: never two operations on one volume at once. A call takes its volume's key
 * with lp_inflight_begin(); when the key is taken the call fails at once with ABORTED (the CO
 * retries later) instead of waiting, so a slow format never piles up blocked threads.
 * Keys are copied; the set is thread-safe and owned by its creator.
 */
#ifndef KCSI_LOOPPLUGIN_INFLIGHT_H
#define KCSI_LOOPPLUGIN_INFLIGHT_H

#include <stdbool.h>

struct lp_inflight;

struct lp_inflight *lp_inflight_new(void);
void lp_inflight_free(struct lp_inflight *f);
/* Marks key busy; false when it already is. */
bool lp_inflight_begin(struct lp_inflight *f, const char *key);
/* Releases a key taken by lp_inflight_begin(). */
void lp_inflight_end(struct lp_inflight *f, const char *key);

#endif
