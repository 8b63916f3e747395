/*
 * extents: which byte ranges of a sparse image file hold data, and which differ between two
 * images of one volume: what the SnapshotMetadata service (snapshot_metadata.c) reports for a
 * snapshot's image (pool.h: snapshots/<id>.img).
 *
 * Allocated ranges are the file system's own (lseek SEEK_DATA / SEEK_HOLE), so they are as
 * fine as its block size and cost no reading. Changed ranges come from reading both images in
 * LP_EXTENT_BLOCK blocks where either holds data and comparing them; a hole reads as zeros, and
 * so do bytes past the end of the shorter image. Both skip the holes they share without reading.
 *
 * Ranges are handed to a callback in ascending order, adjacent ones merged, none empty, each
 * ending after `start` (the caller's resume point). A callback's non-zero return (make it
 * positive) stops the walk and is returned. The walks take no locks and keep no state: the
 * caller owns the file descriptors.
 */
#ifndef KCSI_LOOPPLUGIN_EXTENTS_H
#define KCSI_LOOPPLUGIN_EXTENTS_H

#include <stdint.h>

#include "loopplugin/status.h"

/* The unit of comparison, and the alignment of a changed range (but at the image's end). */
#define LP_EXTENT_BLOCK 4096

/* Receives one range; non-zero stops the walk. */
typedef int (*lp_range_fn)(void *arg, int64_t off, int64_t len);

/*
 * The data ranges of fd in [start, size). A range that starts before `start` is cut to begin
 * there. Returns 0, the callback's value, or a negative value with st set (INTERNAL) when lseek
 * fails other than at the end of the data.
 */
int lp_extents_allocated(int fd, int64_t size, int64_t start, lp_range_fn fn, void *arg,
			 struct lp_status *st);

/*
 * The ranges of [start, size) where target differs from base, in whole blocks (start is
 * rounded down to a block). size is the target's size; base may be shorter or longer. Returns
 * 0, the callback's value, or a negative value with st set (INTERNAL) on a read or lseek
 * failure.
 * deadline_ns (monotonic, 0: none): past it the walk stops with DEADLINE_EXCEEDED in st.
 */
int lp_extents_changed(int base, int target, int64_t size, int64_t start, int64_t deadline_ns,
		       lp_range_fn fn, void *arg, struct lp_status *st);

#endif
