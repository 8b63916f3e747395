/*
 * grpc-peer/libgrpc_client: the CSI client API's transport (csi_connect, csi_call_bytes,
 * csi_call_stream_bytes, csi_conn_lost, csi_conn_free) on Debian's libgrpc, the gRPC C core.
 * It is a test peer, never linked into a kcsi binary: a test linked with it (before kcsi_csi)
 * talks to kcsi's own server through an HTTP/2 and gRPC implementation nobody here wrote, so the
 * two are checked against each other (docs/development.md, "Interoperability").
 *
 * Design, as libgrpc wants it: one channel per connection; each call has its own pluck
 * completion queue; connecting waits for the socket file, then drives the channel to READY; a
 * watcher thread reports the channel leaving READY once through on_lost.
 */
#include "csi/client.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include "base/log.h"
#include "base/strbuf.h"
#include "base/timeutil.h"
#include "base/xalloc.h"

struct csi_conn {
	char *endpoint;
	char *path;
	grpc_channel *ch;
	struct csi_conn_opts opts;
	pthread_t watcher;
	bool watcher_running;
	atomic_bool stopping;
	atomic_bool lost;
	pthread_mutex_t lock; /* orders the watcher's channel use against csi_conn_free() */
};

const struct csi_conn_opts *csi_conn_opts(const struct csi_conn *c)
{
	return &c->opts;
}

const char *csi_conn_endpoint(const struct csi_conn *c)
{
	return c->endpoint;
}

static gpr_timespec deadline_after(int64_t ns)
{
	if (ns <= 0)
		return gpr_inf_future(GPR_CLOCK_MONOTONIC);
	return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_nanos(ns, GPR_TIMESPAN));
}

static void drain_and_destroy(grpc_completion_queue *cq, bool pluck)
{
	grpc_completion_queue_shutdown(cq);
	if (!pluck) {
		while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
		       GRPC_QUEUE_SHUTDOWN)
			;
	}
	grpc_completion_queue_destroy(cq);
}

/* Waits for the socket file; 0 when present, -1 on timeout. */
static int wait_for_socket(struct csi_conn *c, int64_t start, char *err, size_t errlen)
{
	int64_t last_log = start;
	for (;;) {
		struct stat st;
		if (stat(c->path, &st) == 0 && S_ISSOCK(st.st_mode))
			return 0;
		int64_t now = mono_now_ns();
		if (c->opts.connect_timeout_ns > 0 && now - start >= c->opts.connect_timeout_ns) {
			errbuf_printf(err, errlen, "timed out waiting for CSI socket %s to appear", c->path);
			return -1;
		}
		if (now - last_log >= c->opts.log_interval_ns) {
			KLOG_W("Still connecting to %s: socket does not exist yet", c->endpoint);
			last_log = now;
		}
		sleep_ns(50 * NSEC_PER_MSEC);
	}
}

/* Drives the channel to READY; 0 on success, -1 on timeout. */
static int wait_for_ready_channel(struct csi_conn *c, int64_t start, char *err, size_t errlen)
{
	grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
	int64_t last_log = start;
	int rc = -1;
	for (;;) {
		grpc_connectivity_state s = grpc_channel_check_connectivity_state(c->ch, 1);
		if (s == GRPC_CHANNEL_READY) {
			rc = 0;
			break;
		}
		int64_t now = mono_now_ns();
		if (c->opts.connect_timeout_ns > 0 && now - start >= c->opts.connect_timeout_ns) {
			errbuf_printf(err, errlen, "timed out connecting to CSI driver at %s", c->endpoint);
			break;
		}
		if (now - last_log >= c->opts.log_interval_ns) {
			KLOG_W("Still connecting to %s", c->endpoint);
			last_log = now;
		}
		grpc_channel_watch_connectivity_state(c->ch, s, deadline_after(200 * NSEC_PER_MSEC),
						      cq, NULL);
		grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
	}
	drain_and_destroy(cq, false);
	return rc;
}

/*
 * The watcher touches the channel only under c->lock, and csi_conn_free() destroys the channel
 * under the same lock after setting `stopping`; destroying the channel completes the pending
 * watch at once, so closing a connection never waits for the watch deadline.
 */
static void *watch_loss(void *arg)
{
	struct csi_conn *c = arg;
	grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
	bool lost = false;
	for (;;) {
		pthread_mutex_lock(&c->lock);
		if (atomic_load(&c->stopping)) {
			pthread_mutex_unlock(&c->lock);
			break;
		}
		grpc_connectivity_state s = grpc_channel_check_connectivity_state(c->ch, 0);
		if (s != GRPC_CHANNEL_READY) {
			lost = true;
			atomic_store(&c->lost, true);
			pthread_mutex_unlock(&c->lock);
			break;
		}
		grpc_channel_watch_connectivity_state(c->ch, s, deadline_after(NSEC_PER_SEC), cq,
						      NULL);
		pthread_mutex_unlock(&c->lock);
		grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
	}
	if (lost) {
		KLOG_E("Lost connection to CSI driver at %s", c->endpoint);
		if (c->opts.on_lost)
			c->opts.on_lost(c->opts.on_lost_arg);
	}
	drain_and_destroy(cq, false);
	return NULL;
}

struct csi_conn *csi_connect(const char *endpoint, const struct csi_conn_opts *opts, char *err,
			     size_t errlen)
{
	static const struct csi_conn_opts defaults = CSI_CONN_OPTS_INIT;
	char *path;
	if (csi_endpoint_path(endpoint, &path, err, errlen))
		return NULL;
	grpc_init();
	struct csi_conn *c = xcalloc(1, sizeof(*c));
	c->endpoint = xstrdup(endpoint);
	c->path = path;
	c->opts = opts ? *opts : defaults;
	if (c->opts.log_interval_ns <= 0)
		c->opts.log_interval_ns = 10 * NSEC_PER_SEC;
	if (c->opts.max_recv_bytes <= 0)
		c->opts.max_recv_bytes = 4 * 1024 * 1024;
	atomic_init(&c->stopping, false);
	atomic_init(&c->lost, false);
	pthread_mutex_init(&c->lock, NULL);

	int64_t start = mono_now_ns();
	KLOG_V(2, "Connecting to %s", endpoint);
	if (wait_for_socket(c, start, err, errlen))
		goto fail;

	grpc_arg args[] = {
		{ .type = GRPC_ARG_INTEGER, .key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
		  .value.integer = c->opts.max_recv_bytes },
		{ .type = GRPC_ARG_INTEGER, .key = GRPC_ARG_CLIENT_IDLE_TIMEOUT_MS,
		  .value.integer = INT_MAX },
		{ .type = GRPC_ARG_INTEGER, .key = GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
		  .value.integer = 100 },
		{ .type = GRPC_ARG_INTEGER, .key = GRPC_ARG_MIN_RECONNECT_BACKOFF_MS,
		  .value.integer = 100 },
		{ .type = GRPC_ARG_INTEGER, .key = GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
		  .value.integer = 1000 },
		{ .type = GRPC_ARG_INTEGER, .key = GRPC_ARG_ENABLE_RETRIES, .value.integer = 0 },
		/* keepalive_ns: libgrpc's own keepalive pings, used only when set */
		{ .type = GRPC_ARG_INTEGER, .key = GRPC_ARG_KEEPALIVE_TIME_MS,
		  .value.integer = (int)(c->opts.keepalive_ns / NSEC_PER_MSEC) },
		{ .type = GRPC_ARG_INTEGER, .key = GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
		  .value.integer = (int)(c->opts.keepalive_ns / NSEC_PER_MSEC) },
		{ .type = GRPC_ARG_INTEGER, .key = GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS,
		  .value.integer = 1 },
		{ .type = GRPC_ARG_INTEGER, .key = GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA,
		  .value.integer = 0 },
	};
	size_t nargs = sizeof(args) / sizeof(args[0]);
	if (c->opts.keepalive_ns <= 0)
		nargs -= 4;
	grpc_channel_args cargs = { .num_args = nargs, .args = args };
	struct strbuf target = STRBUF_INIT;
	strbuf_addf(&target, "unix:%s", c->path);
	grpc_channel_credentials *creds = grpc_insecure_credentials_create();
	c->ch = grpc_channel_create(target.buf, creds, &cargs);
	grpc_channel_credentials_release(creds);
	strbuf_release(&target);

	if (wait_for_ready_channel(c, start, err, errlen))
		goto fail;
	KLOG_V(2, "Connected to %s", endpoint);
	if (pthread_create(&c->watcher, NULL, watch_loss, c) == 0)
		c->watcher_running = true;
	return c;
fail:
	csi_conn_free(c);
	return NULL;
}

bool csi_conn_lost(struct csi_conn *c)
{
	return atomic_load(&c->lost);
}

void csi_conn_free(struct csi_conn *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	atomic_store(&c->stopping, true);
	if (c->ch)
		grpc_channel_destroy(c->ch);
	pthread_mutex_unlock(&c->lock);
	if (c->watcher_running)
		pthread_join(c->watcher, NULL);
	pthread_mutex_destroy(&c->lock);
	free(c->endpoint);
	free(c->path);
	free(c);
	grpc_shutdown();
}

int csi_call_bytes(struct csi_conn *c, const char *method, const void *data, size_t len,
		   void **out, size_t *outlen, int64_t timeout_ns, struct csi_status *st)
{
	struct csi_status local;
	if (!st)
		st = &local;
	st->code = 0;
	st->message[0] = '\0';
	*out = NULL;
	*outlen = 0;

	grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
	grpc_slice mslice = grpc_slice_from_copied_string(method);
	grpc_call *call = grpc_channel_create_call(c->ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, mslice,
						   NULL, deadline_after(timeout_ns), NULL);
	grpc_slice_unref(mslice);

	grpc_slice req_slice = grpc_slice_from_copied_buffer(data, len);
	grpc_byte_buffer *req_bb = grpc_raw_byte_buffer_create(&req_slice, 1);
	grpc_slice_unref(req_slice);
	grpc_byte_buffer *resp_bb = NULL;
	grpc_metadata_array initial_md, trailing_md;
	grpc_metadata_array_init(&initial_md);
	grpc_metadata_array_init(&trailing_md);
	grpc_status_code status = GRPC_STATUS_UNKNOWN;
	grpc_slice details = grpc_empty_slice();

	grpc_op ops[6];
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = req_bb;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &initial_md;
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = &resp_bb;
	ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[5].data.recv_status_on_client.trailing_metadata = &trailing_md;
	ops[5].data.recv_status_on_client.status = &status;
	ops[5].data.recv_status_on_client.status_details = &details;

	grpc_call_error e = grpc_call_start_batch(call, ops, 6, (void *)1, NULL);
	if (e != GRPC_CALL_OK) {
		st->code = GRPC_STATUS_INTERNAL;
		snprintf(st->message, sizeof(st->message), "grpc_call_start_batch failed: %d", e);
	} else {
		grpc_completion_queue_pluck(cq, (void *)1, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
		st->code = (int)status;
		size_t dl = GRPC_SLICE_LENGTH(details);
		if (dl >= sizeof(st->message))
			dl = sizeof(st->message) - 1;
		memcpy(st->message, GRPC_SLICE_START_PTR(details), dl);
		st->message[dl] = '\0';
		if (status == GRPC_STATUS_OK) {
			if (!resp_bb) {
				st->code = GRPC_STATUS_INTERNAL;
				snprintf(st->message, sizeof(st->message),
					 "driver sent no response message");
			} else {
				grpc_byte_buffer_reader r;
				grpc_byte_buffer_reader_init(&r, resp_bb);
				grpc_slice all = grpc_byte_buffer_reader_readall(&r);
				grpc_byte_buffer_reader_destroy(&r);
				*outlen = GRPC_SLICE_LENGTH(all);
				*out = xmalloc(*outlen ? *outlen : 1);
				memcpy(*out, GRPC_SLICE_START_PTR(all), *outlen);
				grpc_slice_unref(all);
			}
		}
	}
	grpc_slice_unref(details);
	grpc_metadata_array_destroy(&initial_md);
	grpc_metadata_array_destroy(&trailing_md);
	grpc_byte_buffer_destroy(req_bb);
	if (resp_bb)
		grpc_byte_buffer_destroy(resp_bb);
	grpc_call_unref(call);
	drain_and_destroy(cq, true);
	return st->code;
}

/* Runs one batch of ops on call and waits for it; false when libgrpc refused the batch. */
static bool run_batch(grpc_call *call, grpc_completion_queue *cq, grpc_op *ops, size_t n,
		      void *tag)
{
	if (grpc_call_start_batch(call, ops, n, tag, NULL) != GRPC_CALL_OK)
		return false;
	grpc_completion_queue_pluck(cq, tag, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
	return true;
}

/*
 * Server streaming the way a libgrpc client reads it: one message per RECV_MESSAGE until libgrpc
 * says there are no more, then the status. The messages are handed back length-prefixed, as
 * kcsi's transport hands back the body.
 */
int csi_call_stream_bytes(struct csi_conn *c, const char *method, const void *data, size_t len,
			  void **out, size_t *outlen, int64_t timeout_ns, struct csi_status *st)
{
	struct csi_status local;
	if (!st)
		st = &local;
	st->code = 0;
	st->message[0] = '\0';
	struct strbuf body = STRBUF_INIT;

	grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
	grpc_slice mslice = grpc_slice_from_copied_string(method);
	grpc_call *call = grpc_channel_create_call(c->ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, mslice,
						   NULL, deadline_after(timeout_ns), NULL);
	grpc_slice_unref(mslice);
	grpc_slice req_slice = grpc_slice_from_copied_buffer(data, len);
	grpc_byte_buffer *req_bb = grpc_raw_byte_buffer_create(&req_slice, 1);
	grpc_slice_unref(req_slice);
	grpc_metadata_array initial_md, trailing_md;
	grpc_metadata_array_init(&initial_md);
	grpc_metadata_array_init(&trailing_md);
	grpc_status_code status = GRPC_STATUS_UNKNOWN;
	grpc_slice details = grpc_empty_slice();

	grpc_op ops[4];
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = req_bb;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &initial_md;
	bool ok = run_batch(call, cq, ops, 4, (void *)1);
	while (ok) {
		grpc_byte_buffer *bb = NULL;
		memset(ops, 0, sizeof(ops));
		ops[0].op = GRPC_OP_RECV_MESSAGE;
		ops[0].data.recv_message.recv_message = &bb;
		ok = run_batch(call, cq, ops, 1, (void *)2);
		if (!bb)
			break;
		grpc_byte_buffer_reader r;
		grpc_byte_buffer_reader_init(&r, bb);
		grpc_slice all = grpc_byte_buffer_reader_readall(&r);
		grpc_byte_buffer_reader_destroy(&r);
		uint8_t prefix[5];
		size_t n = GRPC_SLICE_LENGTH(all);
		prefix[0] = 0;
		prefix[1] = (uint8_t)(n >> 24);
		prefix[2] = (uint8_t)(n >> 16);
		prefix[3] = (uint8_t)(n >> 8);
		prefix[4] = (uint8_t)n;
		strbuf_add(&body, prefix, 5);
		strbuf_add(&body, GRPC_SLICE_START_PTR(all), n);
		grpc_slice_unref(all);
		grpc_byte_buffer_destroy(bb);
	}
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[0].data.recv_status_on_client.trailing_metadata = &trailing_md;
	ops[0].data.recv_status_on_client.status = &status;
	ops[0].data.recv_status_on_client.status_details = &details;
	if (run_batch(call, cq, ops, 1, (void *)3)) {
		st->code = (int)status;
		size_t dl = GRPC_SLICE_LENGTH(details);
		if (dl >= sizeof(st->message))
			dl = sizeof(st->message) - 1;
		memcpy(st->message, GRPC_SLICE_START_PTR(details), dl);
		st->message[dl] = '\0';
	} else {
		st->code = GRPC_STATUS_INTERNAL;
		snprintf(st->message, sizeof(st->message), "grpc_call_start_batch failed");
	}
	grpc_slice_unref(details);
	grpc_metadata_array_destroy(&initial_md);
	grpc_metadata_array_destroy(&trailing_md);
	grpc_byte_buffer_destroy(req_bb);
	grpc_call_unref(call);
	drain_and_destroy(cq, true);
	*outlen = body.len;
	*out = strbuf_detach(&body, NULL);
	return st->code;
}
