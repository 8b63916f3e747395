/*
 * csi/client: gRPC C core channel to a unix socket, unary calls, readiness, loss detection.
 *
 * Design:
 *   - One grpc_channel per connection. Each call creates its own pluck completion queue: a
 *     shared queue allows only a handful of concurrent pluckers, and a per-call queue costs a
 *     few microseconds, well below a round trip.
 *   - Connecting first waits for the socket file (so gRPC's reconnect backoff never grows while
 *     the driver is still starting), then drives the channel to READY. Reconnect backoff is
 *     capped at 1 s for the same reason.
 *   - A watcher thread observes connectivity changes after READY; leaving READY means the driver
 *     went away and on_lost fires once. The client idle timeout is disabled so an idle but
 *     healthy connection never looks lost.
 *   - Calls are fail-fast (no wait-for-ready): a dead driver answers UNAVAILABLE at once rather
 *     than hanging until the deadline, as upstream's default.
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

static void set_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	if (!err || !errlen)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

int csi_endpoint_path(const char *endpoint, char **path, char *err, size_t errlen)
{
	const char *p = NULL;
	if (!endpoint || !*endpoint) {
		set_err(err, errlen, "empty CSI endpoint");
		return -1;
	}
	if (strncmp(endpoint, "unix://", 7) == 0)
		p = endpoint + 7;
	else if (strncmp(endpoint, "unix:", 5) == 0)
		p = endpoint + 5;
	else if (endpoint[0] == '/')
		p = endpoint;
	if (!p || p[0] != '/' || strlen(p) >= 108) {
		set_err(err, errlen,
			"unsupported CSI endpoint %s: want unix:///path/to/socket, unix:/path or /path "
			"(at most 107 bytes)", endpoint);
		return -1;
	}
	*path = xstrdup(p);
	return 0;
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
			set_err(err, errlen, "timed out waiting for CSI socket %s to appear", c->path);
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
			set_err(err, errlen, "timed out connecting to CSI driver at %s", c->endpoint);
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
	};
	grpc_channel_args cargs = { .num_args = sizeof(args) / sizeof(args[0]), .args = args };
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

/* Logs one message as stripped JSON, truncated to max_log_len when that is >= 0. */
static void log_msg(const char *what, const ProtobufCMessage *m, int max_len)
{
	struct strbuf sb = STRBUF_INIT;
	csi_msg_to_json(m, CSI_JSON_STRIP_SECRETS, &sb);
	if (max_len >= 0 && sb.len > (size_t)max_len) {
		strbuf_setlen(&sb, (size_t)max_len);
		strbuf_addstr(&sb, "...");
	}
	KLOG_I("GRPC %s: %s", what, sb.buf);
	strbuf_release(&sb);
}

int csi_call(struct csi_conn *c, const char *method, const ProtobufCMessage *req,
	     const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
	     int64_t timeout_ns, struct csi_status *st)
{
	struct csi_status local;
	if (!st)
		st = &local;
	*resp = NULL;
	bool verbose = log_v(5);
	if (verbose) {
		KLOG_I("GRPC call: %s", method);
		log_msg("request", req, c->opts.max_log_len);
	}
	int64_t start = mono_now_ns();
	size_t len = protobuf_c_message_get_packed_size(req);
	uint8_t *buf = xmalloc(len ? len : 1);
	protobuf_c_message_pack(req, buf);
	void *out;
	size_t outlen;
	csi_call_bytes(c, method, buf, len, &out, &outlen, timeout_ns, st);
	free(buf);
	if (st->code == 0) {
		*resp = protobuf_c_message_unpack(resp_desc, NULL, outlen, out);
		if (!*resp) {
			st->code = GRPC_STATUS_INTERNAL;
			snprintf(st->message, sizeof(st->message),
				 "cannot decode the driver's response as %s", resp_desc->name);
		}
	}
	free(out);
	int64_t took = mono_now_ns() - start;
	if (c->opts.observer)
		c->opts.observer(c->opts.observer_arg, method, st->code, took);
	if (verbose) {
		if (st->code == 0)
			log_msg("response", *resp, c->opts.max_log_len);
		else
			KLOG_I("GRPC error: rpc error: code = %s desc = %s",
			       csi_code_go_name(st->code), st->message);
	}
	return st->code;
}

int csi_wait_ready(struct csi_conn *c, int64_t call_timeout_ns, char *err, size_t errlen)
{
	Csi__V1__ProbeRequest req = CSI__V1__PROBE_REQUEST__INIT;
	int64_t last_log = mono_now_ns();
	for (;;) {
		Csi__V1__ProbeResponse *resp;
		struct csi_status st;
		if (csi_probe(c, &req, &resp, call_timeout_ns, &st) != 0) {
			set_err(err, errlen, "Probe failed: %s: %s", csi_code_name(st.code),
				st.message);
			return -1;
		}
		bool ready = !resp->ready || resp->ready->value;
		csi_msg_free(resp);
		if (ready)
			return 0;
		if (mono_now_ns() - last_log >= c->opts.log_interval_ns) {
			KLOG_I("CSI driver at %s is not ready yet", c->endpoint);
			last_log = mono_now_ns();
		}
		sleep_ns(NSEC_PER_SEC);
	}
}
