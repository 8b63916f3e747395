/*
 * resize: kcsi-node's node-expansion rules as pure functions (no I/O), so that the tests are
 * tables that read like the kubelet's operation generator and node expander; expand.c does the
 * calls and the writes.
 *
 *   nd_resize_decide()   which claim needs NodeExpandVolume, to which size, with which
 *                        bookkeeping (RecoverVolumeExpansionFailure's allocatedResourceStatuses
 *                        or the older conditions-only form);
 *   nd_resize_classify() what a failed NodeExpandVolume means (retry, final, infeasible, in use);
 *   nd_resize_patch()    the JSON merge patch of the claim's status for each outcome, built from
 *                        the claim as last read (the caller owns both).
 *
 * Sizes are bytes; -1 means absent. Nothing here allocates except nd_resize_patch()'s result.
 */
#ifndef KCSI_NODE_RESIZE_H
#define KCSI_NODE_RESIZE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

enum nd_resize_verdict {
	ND_RESIZE_NONE,     /* nothing to do for this volume now */
	ND_RESIZE_EXPAND,   /* call NodeExpandVolume, then record the new size */
	ND_RESIZE_FINISH,   /* the driver cannot expand on the node: only record the new size */
	ND_RESIZE_READONLY, /* a read-only volume: report FileSystemResizeFailed once, no call */
};

struct nd_resize_in {
	int64_t pv_capacity;       /* PV spec.capacity.storage */
	int64_t pvc_capacity;      /* claim status.capacity.storage */
	int64_t pvc_request;       /* claim spec.resources.requests.storage */
	bool fs_resize_pending;    /* claim condition FileSystemResizePending True */
	uint8_t resize_status;     /* enum kube_resize_status: allocatedResourceStatuses.storage */
	int64_t allocated;         /* claim status.allocatedResources.storage */
	bool at_mount;             /* just staged: the PV's size alone decides (offline expansion) */
	bool driver_expands;       /* the driver has the EXPAND_VOLUME node capability */
	bool readonly;
	int64_t done_size;         /* the size this node last expanded the volume to (0: none) */
	int64_t failed_final_size; /* the size NodeExpandVolume last failed finally for (0: none) */
};

struct nd_resize_plan {
	enum nd_resize_verdict verdict;
	bool recovery;         /* RecoverVolumeExpansionFailure semantics (the resizer records
				* allocatedResourceStatuses): mark NodeResizeInProgress first */
	bool mark_infeasible;  /* a final error now is NodeResizeInfeasible whatever its code (the
				* user changed the request after an earlier final failure) */
	int64_t new_size;      /* the PV's capacity: capacity_range.required_bytes */
};

void nd_resize_decide(const struct nd_resize_in *in, struct nd_resize_plan *out);

enum nd_resize_error {
	ND_RESIZE_ERR_RETRY,        /* transient (Unavailable, DeadlineExceeded, ...): back off, retry */
	ND_RESIZE_ERR_FINAL,        /* the driver's final word: NodeResizeError, no retry for the size */
	ND_RESIZE_ERR_INFEASIBLE,   /* InvalidArgument, OutOfRange, NotFound: also NodeResizeInfeasible */
	ND_RESIZE_ERR_PRECONDITION, /* FailedPrecondition: no online expansion here; never blocks a mount */
};

/* The class of a NodeExpandVolume failure from its gRPC status code (csi/status codes). */
enum nd_resize_error nd_resize_classify(int grpc_code);

enum nd_resize_mark {
	ND_MARK_IN_PROGRESS, /* allocatedResourceStatuses.storage = NodeResizeInProgress */
	ND_MARK_FINISHED,    /* capacity = new size, resize conditions and the storage status gone */
	ND_MARK_FAILED,      /* condition NodeResizeError "failed to expand pvc with <msg>" */
	ND_MARK_INFEASIBLE,  /* NodeResizeError + allocatedResourceStatuses.storage = NodeResizeInfeasible */
};

/*
 * The merge patch (new reference) that moves `pvc` (the claim's JSON as read) to `mark`, or
 * NULL when the claim already shows it. IN_PROGRESS and FINISHED carry the claim's
 * resourceVersion (a stale claim gets 409 and is read again), the failure marks do not, as the
 * kubelet's patches. `now` is RFC 3339, `msg` the error (FAILED, INFEASIBLE).
 */
json_t *nd_resize_patch(const json_t *pvc, enum nd_resize_mark mark, int64_t new_size,
			const char *msg, const char *now);

#endif
