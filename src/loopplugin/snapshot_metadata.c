/*
 * snapshot_metadata: the SnapshotMetadata service (CSI v1.12, alpha): GetMetadataAllocated and
 * GetMetadataDelta over the snapshots' sparse images (extents.h does the walking).
 *
 * Both answer VARIABLE_LENGTH ranges: an allocated range is a file-system extent of the image,
 * a changed range a run of differing 4 KiB blocks. The ranges go out in responses of at most
 * max_results (0 or more than LP_META_MAX_RESULTS: LP_META_MAX_RESULTS) ranges each; the server
 * sends the stream when the walk is done (csi_ctx_send), so an error ends the call with that
 * status and no ranges. A resumed call (starting_offset) gets no range that ends at or before
 * its offset. A snapshot is read through its image file, opened once: a DeleteSnapshot meanwhile
 * does not disturb a walk in progress.
 */
#include "loopplugin/driver_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/timeutil.h"
#include "loopplugin/extents.h"

#define LP_META_MAX_RESULTS 1024

/* Collects ranges into the scratch response and sends it whenever it is full. */
struct batch {
	struct csi_call_ctx *ctx;
	ProtobufCMessage *resp;     /* GetMetadataAllocatedResponse or GetMetadataDeltaResponse */
	size_t *n;                  /* its n_block_metadata */
	Csi__V1__BlockMetadata **items;
	Csi__V1__BlockMetadata *blocks;
	size_t max;
	int64_t ranges;
};

static int batch_flush(struct batch *b)
{
	if (!*b->n)
		return 0;
	int rc = csi_ctx_send(b->ctx, b->resp);
	*b->n = 0;
	return rc;
}

static int batch_add(void *arg, int64_t off, int64_t len)
{
	struct batch *b = arg;
	Csi__V1__BlockMetadata *m = &b->blocks[*b->n];
	csi__v1__block_metadata__init(m);
	m->byte_offset = off;
	m->size_bytes = len;
	b->items[(*b->n)++] = m;
	b->ranges++;
	return *b->n == b->max ? batch_flush(b) : 0;
}

/* Sets up b for resp, whose repeated block_metadata is at *n / *items. */
static void batch_init(struct batch *b, struct csi_call_ctx *ctx, ProtobufCMessage *resp,
		       size_t *n, Csi__V1__BlockMetadata ***items, int32_t max_results)
{
	struct csi_arena *a = csi_ctx_arena(ctx);
	b->ctx = ctx;
	b->resp = resp;
	b->n = n;
	b->max = max_results > 0 && max_results < LP_META_MAX_RESULTS ? (size_t)max_results :
		LP_META_MAX_RESULTS;
	b->items = csi_arena_alloc(a, b->max * sizeof(*b->items));
	b->blocks = csi_arena_alloc(a, b->max * sizeof(*b->blocks));
	b->ranges = 0;
	*items = b->items;
	*n = 0;
}

/* Loads snapshot id and opens its image; 0, or the call's error status. */
static int open_snapshot(struct csi_call_ctx *ctx, struct lp_driver *d, const char *what,
			 const char *field, const char *id, struct lp_snapshot **s, int *fd)
{
	struct lp_status st;
	*fd = -1;
	if (lp_empty(id))
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT, "%s: %s is missing", what, field);
	if (lp_snapshot_load(d->pool, id, s, &st))
		return csi_ctx_error(ctx, st.code, "%s: %s", what, st.msg);
	char *img = lp_snapshot_image(d->pool, id);
	*fd = open(img, O_RDONLY | O_CLOEXEC);
	int ret = 0;
	if (*fd < 0)
		ret = csi_ctx_error(ctx, errno == ENOENT ? LP_NOT_FOUND : LP_INTERNAL,
				    "%s: snapshot %s: image %s: %s", what, id, img, strerror(errno));
	free(img);
	return ret;
}

/* starting_offset and max_results, checked against the snapshot's size. */
static int check_window(struct csi_call_ctx *ctx, const char *what, int64_t start,
			int32_t max_results, int64_t size)
{
	if (max_results < 0)
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT, "%s: negative max_results %d", what,
				     max_results);
	if (start < 0 || start > size)
		return csi_ctx_error(ctx, LP_OUT_OF_RANGE,
				     "%s: starting_offset %lld is outside the volume's %lld bytes",
				     what, (long long)start, (long long)size);
	return 0;
}

/* The walk's outcome: flushes the last batch or turns a failure into the call's status. */
static int finish(struct csi_call_ctx *ctx, struct batch *b, int rc, const struct lp_status *st)
{
	if (rc < 0)
		return lp_fail_call(ctx, st);
	if (rc > 0) /* csi_ctx_send refused: its status is set */
		return rc;
	return batch_flush(b);
}

static int get_metadata_allocated(struct csi_call_ctx *ctx, const ProtobufCMessage *reqm,
				  ProtobufCMessage *resp, void *arg)
{
	struct lp_driver *d = arg;
	const Csi__V1__GetMetadataAllocatedRequest *req =
		(const Csi__V1__GetMetadataAllocatedRequest *)reqm;
	Csi__V1__GetMetadataAllocatedResponse *r = (Csi__V1__GetMetadataAllocatedResponse *)resp;
	const char *what = "GetMetadataAllocated";
	struct lp_snapshot *s = NULL;
	int fd;
	int ret = open_snapshot(ctx, d, what, "snapshot_id", req->snapshot_id, &s, &fd);
	if (!ret)
		ret = check_window(ctx, what, req->starting_offset, req->max_results, s->size);
	if (!ret) {
		struct batch b;
		struct lp_status st;
		r->block_metadata_type = CSI__V1__BLOCK_METADATA_TYPE__VARIABLE_LENGTH;
		r->volume_capacity_bytes = s->size;
		batch_init(&b, ctx, resp, &r->n_block_metadata, &r->block_metadata,
			   req->max_results);
		int rc = lp_extents_allocated(fd, s->size, req->starting_offset, batch_add, &b, &st);
		ret = finish(ctx, &b, rc, &st);
		if (!ret)
			KLOG_V(4, "Listed allocated ranges snapshot=%s from=%lld ranges=%lld",
			       LOGQ(s->id), (long long)req->starting_offset, (long long)b.ranges);
	}
	if (fd >= 0)
		close(fd);
	lp_snapshot_free(s);
	return ret;
}

static int get_metadata_delta(struct csi_call_ctx *ctx, const ProtobufCMessage *reqm,
			      ProtobufCMessage *resp, void *arg)
{
	struct lp_driver *d = arg;
	const Csi__V1__GetMetadataDeltaRequest *req =
		(const Csi__V1__GetMetadataDeltaRequest *)reqm;
	Csi__V1__GetMetadataDeltaResponse *r = (Csi__V1__GetMetadataDeltaResponse *)resp;
	const char *what = "GetMetadataDelta";
	struct lp_snapshot *base = NULL, *target = NULL;
	int bfd = -1, tfd = -1;
	/* both IDs are checked for presence before either is looked up (errors in spec order) */
	int ret = 0;
	if (lp_empty(req->base_snapshot_id))
		ret = csi_ctx_error(ctx, LP_INVALID_ARGUMENT, "%s: base_snapshot_id is missing",
				    what);
	else if (lp_empty(req->target_snapshot_id))
		ret = csi_ctx_error(ctx, LP_INVALID_ARGUMENT, "%s: target_snapshot_id is missing",
				    what);
	if (!ret)
		ret = open_snapshot(ctx, d, what, "base_snapshot_id", req->base_snapshot_id, &base,
				    &bfd);
	if (!ret)
		ret = open_snapshot(ctx, d, what, "target_snapshot_id", req->target_snapshot_id,
				    &target, &tfd);
	if (!ret && strcmp(base->source_volume, target->source_volume) != 0)
		ret = csi_ctx_error(ctx, LP_INVALID_ARGUMENT,
				    "%s: snapshots %s and %s are of different volumes (%s, %s)", what,
				    base->id, target->id, base->source_volume,
				    target->source_volume);
	if (!ret && target->created_ns < base->created_ns)
		ret = csi_ctx_error(ctx, LP_INVALID_ARGUMENT,
				    "%s: target snapshot %s was taken before base snapshot %s", what,
				    target->id, base->id);
	if (!ret)
		ret = check_window(ctx, what, req->starting_offset, req->max_results,
				   target->size);
	if (!ret) {
		struct batch b;
		struct lp_status st;
		r->block_metadata_type = CSI__V1__BLOCK_METADATA_TYPE__VARIABLE_LENGTH;
		r->volume_capacity_bytes = target->size;
		batch_init(&b, ctx, resp, &r->n_block_metadata, &r->block_metadata,
			   req->max_results);
		int64_t left = csi_ctx_remaining_ns(ctx);
		int64_t deadline = left == INT64_MAX ? 0 : mono_now_ns() + left;
		int rc = lp_extents_changed(bfd, tfd, target->size, req->starting_offset, deadline,
					    batch_add, &b, &st);
		ret = finish(ctx, &b, rc, &st);
		if (!ret)
			KLOG_V(4, "Listed changed ranges base=%s target=%s from=%lld ranges=%lld",
			       LOGQ(base->id), LOGQ(target->id), (long long)req->starting_offset,
			       (long long)b.ranges);
	}
	if (bfd >= 0)
		close(bfd);
	if (tfd >= 0)
		close(tfd);
	lp_snapshot_free(base);
	lp_snapshot_free(target);
	return ret;
}

void lp_register_snapshot_metadata(struct lp_driver *d, struct csi_server *s)
{
	csi_server_handle(s, CSI_METHOD(SnapshotMetadata, GetMetadataAllocated),
			  get_metadata_allocated, d);
	csi_server_handle(s, CSI_METHOD(SnapshotMetadata, GetMetadataDelta), get_metadata_delta,
			  d);
}
