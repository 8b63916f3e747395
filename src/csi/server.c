/*
 * csi/server: a gRPC C core server dispatching CSI methods to registered handlers.
 *
 * Design: N worker threads, each with its own completion queue registered with the server.
 * A worker asks for one call at a time (grpc_server_request_call), handles it synchronously
 * (receive, decode, run handler, send response and status), then asks for the next; so at most
 * N calls run at once and a slow handler blocks only its own worker. gRPC queues further calls.
 *
 * Stop: grpc_server_shutdown_and_notify() makes pending request_call fail, so idle workers
 * exit; busy workers finish their call. If that takes longer than the grace period, all calls
 * are cancelled, which unblocks their sends. Signals reach csi_server_run() through a pipe, so
 * any thread may receive them.
 */
#include "csi/server.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include "base/log.h"
#include "base/strbuf.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "csi/client.h"

struct handler {
	struct handler *next;
	char *method;
	const ProtobufCMethodDescriptor *md;
	csi_handler_fn fn;
	void *arg;
};

struct worker {
	struct csi_server *s;
	grpc_completion_queue *cq;
	pthread_t thread;
};

struct csi_server {
	struct csi_server_opts opts;
	struct handler *handlers;
	grpc_server *srv;
	struct worker *workers;
	int nworkers;
	char *path;
	int wake[2]; /* csi_server_stop() and signals write here; csi_server_run() reads */
	bool started, stopped;
	pthread_mutex_t stop_lock;
};

struct csi_call_ctx {
	const char *method;
	struct csi_arena *arena;
	gpr_timespec deadline;
	char *message;
};

static void set_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

struct csi_server *csi_server_new(const struct csi_server_opts *opts)
{
	static const struct csi_server_opts defaults = CSI_SERVER_OPTS_INIT;
	struct csi_server *s = xcalloc(1, sizeof(*s));
	s->opts = opts ? *opts : defaults;
	if (s->opts.threads <= 0)
		s->opts.threads = defaults.threads;
	if (s->opts.socket_mode == 0)
		s->opts.socket_mode = defaults.socket_mode;
	if (s->opts.grace_ns <= 0)
		s->opts.grace_ns = defaults.grace_ns;
	if (s->opts.max_recv_bytes <= 0)
		s->opts.max_recv_bytes = defaults.max_recv_bytes;
	s->wake[0] = s->wake[1] = -1;
	if (pipe2(s->wake, O_CLOEXEC | O_NONBLOCK))
		s->wake[0] = s->wake[1] = -1;
	pthread_mutex_init(&s->stop_lock, NULL);
	grpc_init();
	return s;
}

static int add_handler(struct csi_server *s, const char *method,
		       const ProtobufCMethodDescriptor *md, csi_handler_fn fn, void *arg);

int csi_server_handle(struct csi_server *s, const char *method, csi_handler_fn fn, void *arg)
{
	const ProtobufCMethodDescriptor *md = csi_method_lookup(method);
	if (!md)
		return -1;
	return add_handler(s, method, md, fn, arg);
}

int csi_server_handle_service(struct csi_server *s, const ProtobufCServiceDescriptor *svc,
			      const char *name, csi_handler_fn fn, void *arg)
{
	for (unsigned i = 0; i < svc->n_methods; i++) {
		if (strcmp(svc->methods[i].name, name) != 0)
			continue;
		struct strbuf path = STRBUF_INIT;
		strbuf_addf(&path, "/%s/%s", svc->name, name);
		int rc = add_handler(s, path.buf, &svc->methods[i], fn, arg);
		strbuf_release(&path);
		return rc;
	}
	return -1;
}

static int add_handler(struct csi_server *s, const char *method,
		       const ProtobufCMethodDescriptor *md, csi_handler_fn fn, void *arg)
{
	for (struct handler *h = s->handlers; h; h = h->next) {
		if (strcmp(h->method, method) == 0) {
			h->fn = fn;
			h->arg = arg;
			return 0;
		}
	}
	struct handler *h = xcalloc(1, sizeof(*h));
	h->method = xstrdup(method);
	h->md = md;
	h->fn = fn;
	h->arg = arg;
	h->next = s->handlers;
	s->handlers = h;
	return 0;
}

static const struct handler *find_handler(struct csi_server *s, const char *method)
{
	for (const struct handler *h = s->handlers; h; h = h->next)
		if (strcmp(h->method, method) == 0)
			return h;
	return NULL;
}

/* ---- inside a handler ---- */

struct csi_arena *csi_ctx_arena(struct csi_call_ctx *ctx)
{
	return ctx->arena;
}

const char *csi_ctx_method(const struct csi_call_ctx *ctx)
{
	return ctx->method;
}

int csi_ctx_error(struct csi_call_ctx *ctx, int code, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	ctx->message = csi_arena_strdup(ctx->arena, sb.buf);
	strbuf_release(&sb);
	return code;
}

int64_t csi_ctx_remaining_ns(const struct csi_call_ctx *ctx)
{
	if (gpr_time_cmp(ctx->deadline, gpr_inf_future(ctx->deadline.clock_type)) == 0)
		return INT64_MAX;
	gpr_timespec left = gpr_time_sub(ctx->deadline, gpr_now(ctx->deadline.clock_type));
	return (int64_t)left.tv_sec * NSEC_PER_SEC + left.tv_nsec;
}

/* ---- one call ---- */

static void log_msg(const char *what, const ProtobufCMessage *m)
{
	struct strbuf sb = STRBUF_INIT;
	csi_msg_to_json(m, CSI_JSON_STRIP_SECRETS, &sb);
	KLOG_I("GRPC %s: %s", what, sb.buf);
	strbuf_release(&sb);
}

/*
 * Runs the handler on the request bytes; returns the status code, and for OK the packed
 * response in *out (malloc'd, *outlen bytes).
 */
static int dispatch(struct csi_server *s, struct csi_call_ctx *ctx, const uint8_t *data,
		    size_t len, uint8_t **out, size_t *outlen)
{
	const struct handler *h = find_handler(s, ctx->method);
	if (!h)
		return csi_ctx_error(ctx, GRPC_STATUS_UNIMPLEMENTED, "unknown method %s",
				     ctx->method);
	const ProtobufCMethodDescriptor *md = h->md;
	ProtobufCMessage *req = protobuf_c_message_unpack(md->input, NULL, len, data);
	if (!req)
		return csi_ctx_error(ctx, GRPC_STATUS_INVALID_ARGUMENT,
				     "malformed request: cannot decode %s", md->input->name);
	bool verbose = log_v(5);
	if (verbose) {
		KLOG_I("GRPC call: %s", ctx->method);
		log_msg("request", req);
	}
	ProtobufCMessage *resp = csi_msg_new(ctx->arena, md->output);
	int code = h->fn(ctx, req, resp, h->arg);
	/* Pack before freeing the request: a response may borrow strings from it. */
	if (code == 0) {
		size_t n = protobuf_c_message_get_packed_size(resp);
		uint8_t *buf = xmalloc(n ? n : 1);
		protobuf_c_message_pack(resp, buf);
		*out = buf;
		*outlen = n;
		if (verbose)
			log_msg("response", resp);
	} else if (verbose) {
		KLOG_I("GRPC error: rpc error: code = %s desc = %s", csi_code_go_name(code),
		       ctx->message ? ctx->message : "");
	}
	protobuf_c_message_free_unpacked(req, NULL);
	return code;
}

/* Waits on the worker's queue for the completion of `tag`. */
static bool wait_tag(struct worker *w, void *tag)
{
	for (;;) {
		grpc_event ev = grpc_completion_queue_next(w->cq, gpr_inf_future(GPR_CLOCK_REALTIME),
							   NULL);
		if (ev.type == GRPC_QUEUE_SHUTDOWN)
			return false;
		if (ev.type == GRPC_OP_COMPLETE && ev.tag == tag)
			return ev.success != 0;
	}
}

static void handle_call(struct worker *w, grpc_call *call, grpc_call_details *det)
{
	struct csi_call_ctx ctx = { 0 };
	ctx.arena = csi_arena_new();
	ctx.method = csi_arena_alloc(ctx.arena, GRPC_SLICE_LENGTH(det->method) + 1);
	memcpy((char *)ctx.method, GRPC_SLICE_START_PTR(det->method), GRPC_SLICE_LENGTH(det->method));
	ctx.deadline = det->deadline;

	grpc_byte_buffer *req_bb = NULL;
	grpc_op recv;
	memset(&recv, 0, sizeof(recv));
	recv.op = GRPC_OP_RECV_MESSAGE;
	recv.data.recv_message.recv_message = &req_bb;
	int code;
	grpc_slice resp = grpc_empty_slice();
	bool have_resp = false;
	if (grpc_call_start_batch(call, &recv, 1, (void *)2, NULL) != GRPC_CALL_OK ||
	    !wait_tag(w, (void *)2) || !req_bb) {
		code = csi_ctx_error(&ctx, GRPC_STATUS_INVALID_ARGUMENT, "no request message");
	} else {
		grpc_byte_buffer_reader r;
		grpc_byte_buffer_reader_init(&r, req_bb);
		grpc_slice all = grpc_byte_buffer_reader_readall(&r);
		grpc_byte_buffer_reader_destroy(&r);
		uint8_t *buf = NULL;
		size_t n = 0;
		code = dispatch(w->s, &ctx, GRPC_SLICE_START_PTR(all), GRPC_SLICE_LENGTH(all),
				&buf, &n);
		have_resp = code == 0;
		if (have_resp)
			resp = grpc_slice_new(buf, n, free);
		grpc_slice_unref(all);
	}
	if (req_bb)
		grpc_byte_buffer_destroy(req_bb);

	grpc_byte_buffer *resp_bb = NULL;
	if (have_resp) {
		resp_bb = grpc_raw_byte_buffer_create(&resp, 1);
		grpc_slice_unref(resp);
	}
	grpc_slice details = grpc_slice_from_copied_string(ctx.message ? ctx.message : "");
	int cancelled = 0;
	grpc_op ops[4];
	memset(ops, 0, sizeof(ops));
	size_t n = 0;
	ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
	if (resp_bb) {
		ops[n].op = GRPC_OP_SEND_MESSAGE;
		ops[n++].data.send_message.send_message = resp_bb;
	}
	ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
	ops[n].data.send_status_from_server.status = (grpc_status_code)code;
	ops[n++].data.send_status_from_server.status_details = &details;
	ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
	ops[n++].data.recv_close_on_server.cancelled = &cancelled;
	if (grpc_call_start_batch(call, ops, n, (void *)3, NULL) == GRPC_CALL_OK)
		wait_tag(w, (void *)3);
	grpc_slice_unref(details);
	if (resp_bb)
		grpc_byte_buffer_destroy(resp_bb);
	csi_arena_free(ctx.arena);
}

int csi_server_call(struct csi_server *s, const char *method, const uint8_t *req, size_t len,
		    uint8_t **resp, size_t *resp_len, char *message, size_t msglen)
{
	struct csi_call_ctx ctx = { 0 };
	ctx.arena = csi_arena_new();
	ctx.method = method;
	ctx.deadline = gpr_inf_future(GPR_CLOCK_MONOTONIC);
	*resp = NULL;
	*resp_len = 0;
	int code = dispatch(s, &ctx, req, len, resp, resp_len);
	if (message && msglen)
		snprintf(message, msglen, "%s", ctx.message ? ctx.message : "");
	csi_arena_free(ctx.arena);
	return code;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	for (;;) {
		grpc_call *call = NULL;
		grpc_call_details det;
		grpc_metadata_array md;
		grpc_call_details_init(&det);
		grpc_metadata_array_init(&md);
		bool ok = grpc_server_request_call(w->s->srv, &call, &det, &md, w->cq, w->cq,
						   (void *)1) == GRPC_CALL_OK &&
			  wait_tag(w, (void *)1);
		if (ok)
			handle_call(w, call, &det);
		if (call)
			grpc_call_unref(call);
		grpc_call_details_destroy(&det);
		grpc_metadata_array_destroy(&md);
		if (!ok)
			break;
	}
	return NULL;
}

/* ---- start / stop ---- */

/* Removes a stale socket; refuses a live one or a non-socket. */
static int claim_socket_path(const char *path, char *err, size_t errlen)
{
	struct stat st;
	if (lstat(path, &st) != 0)
		return errno == ENOENT ? 0 : (set_err(err, errlen, "cannot stat %s: %s", path,
						      strerror(errno)), -1);
	if (!S_ISSOCK(st.st_mode)) {
		set_err(err, errlen, "%s exists and is not a socket; refusing to replace it", path);
		return -1;
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		set_err(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	int rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	int saved = errno;
	close(fd);
	if (rc == 0) {
		set_err(err, errlen, "another server is listening on %s; refusing to start", path);
		return -1;
	}
	if (saved != ECONNREFUSED) {
		set_err(err, errlen, "cannot check socket %s: %s", path, strerror(saved));
		return -1;
	}
	KLOG_I("Removing stale socket %s", path);
	if (unlink(path) != 0 && errno != ENOENT) {
		set_err(err, errlen, "cannot remove stale socket %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

int csi_server_start(struct csi_server *s, const char *endpoint, char *err, size_t errlen)
{
	if (s->started) {
		set_err(err, errlen, "server already started");
		return -1;
	}
	if (csi_endpoint_path(endpoint, &s->path, err, errlen))
		return -1;
	if (claim_socket_path(s->path, err, errlen)) {
		free(s->path);
		s->path = NULL;
		return -1;
	}
	grpc_arg args[] = {
		{ .type = GRPC_ARG_INTEGER, .key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
		  .value.integer = s->opts.max_recv_bytes },
	};
	grpc_channel_args cargs = { .num_args = 1, .args = args };
	s->srv = grpc_server_create(&cargs, NULL);
	s->nworkers = s->opts.threads;
	s->workers = xcalloc((size_t)s->nworkers, sizeof(*s->workers));
	for (int i = 0; i < s->nworkers; i++) {
		s->workers[i].s = s;
		s->workers[i].cq = grpc_completion_queue_create_for_next(NULL);
		grpc_server_register_completion_queue(s->srv, s->workers[i].cq, NULL);
	}
	struct strbuf target = STRBUF_INIT;
	strbuf_addf(&target, "unix:%s", s->path);
	grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
	int port = grpc_server_add_http2_port(s->srv, target.buf, creds);
	grpc_server_credentials_release(creds);
	strbuf_release(&target);
	if (port == 0) {
		set_err(err, errlen, "cannot listen on %s", s->path);
		goto fail;
	}
	grpc_server_start(s->srv);
	if (chmod(s->path, s->opts.socket_mode) != 0)
		KLOG_W("Cannot set mode %o on %s: %s", (unsigned)s->opts.socket_mode, s->path,
		       strerror(errno));
	for (int i = 0; i < s->nworkers; i++)
		pthread_create(&s->workers[i].thread, NULL, worker_main, &s->workers[i]);
	s->started = true;
	KLOG_I("Listening for CSI connections on %s", s->path);
	return 0;
fail:
	grpc_server_destroy(s->srv);
	s->srv = NULL;
	for (int i = 0; i < s->nworkers; i++) {
		grpc_completion_queue_shutdown(s->workers[i].cq);
		while (grpc_completion_queue_next(s->workers[i].cq,
						  gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
		       GRPC_QUEUE_SHUTDOWN)
			;
		grpc_completion_queue_destroy(s->workers[i].cq);
	}
	free(s->workers);
	s->workers = NULL;
	s->nworkers = 0;
	free(s->path);
	s->path = NULL;
	return -1;
}

void csi_server_stop(struct csi_server *s)
{
	pthread_mutex_lock(&s->stop_lock);
	if (!s->started || s->stopped) {
		pthread_mutex_unlock(&s->stop_lock);
		return;
	}
	s->stopped = true;
	grpc_completion_queue *scq = grpc_completion_queue_create_for_pluck(NULL);
	grpc_server_shutdown_and_notify(s->srv, scq, (void *)9);
	gpr_timespec grace = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
					  gpr_time_from_nanos(s->opts.grace_ns, GPR_TIMESPAN));
	grpc_event ev = grpc_completion_queue_pluck(scq, (void *)9, grace, NULL);
	if (ev.type == GRPC_QUEUE_TIMEOUT) {
		KLOG_W("Calls still running after the grace period; cancelling them");
		grpc_server_cancel_all_calls(s->srv);
		grpc_completion_queue_pluck(scq, (void *)9, gpr_inf_future(GPR_CLOCK_REALTIME),
					    NULL);
	}
	grpc_completion_queue_shutdown(scq);
	grpc_completion_queue_destroy(scq);
	/* Workers leave once their request_call fails; only then may their queues shut down. */
	for (int i = 0; i < s->nworkers; i++) {
		pthread_join(s->workers[i].thread, NULL);
		grpc_completion_queue_shutdown(s->workers[i].cq);
		while (grpc_completion_queue_next(s->workers[i].cq,
						  gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
		       GRPC_QUEUE_SHUTDOWN)
			;
	}
	grpc_server_destroy(s->srv);
	s->srv = NULL;
	for (int i = 0; i < s->nworkers; i++)
		grpc_completion_queue_destroy(s->workers[i].cq);
	if (s->path)
		unlink(s->path);
	KLOG_I("CSI server stopped");
	pthread_mutex_unlock(&s->stop_lock);
	if (s->wake[1] >= 0) {
		ssize_t w = write(s->wake[1], "x", 1);
		(void)w;
	}
}

static volatile sig_atomic_t signal_fd = -1;

static void on_signal(int sig)
{
	(void)sig;
	int fd = signal_fd;
	if (fd >= 0) {
		ssize_t w = write(fd, "s", 1);
		(void)w;
	}
}

void csi_server_run(struct csi_server *s)
{
	if (!s->started || s->wake[0] < 0)
		return;
	signal_fd = s->wake[1];
	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	struct sigaction old_term, old_int;
	sigaction(SIGTERM, &sa, &old_term);
	sigaction(SIGINT, &sa, &old_int);
	for (;;) {
		struct pollfd p = { .fd = s->wake[0], .events = POLLIN };
		if (poll(&p, 1, -1) > 0)
			break;
	}
	KLOG_I("Stopping CSI server");
	csi_server_stop(s);
	sigaction(SIGTERM, &old_term, NULL);
	sigaction(SIGINT, &old_int, NULL);
	signal_fd = -1;
}

void csi_server_free(struct csi_server *s)
{
	if (!s)
		return;
	csi_server_stop(s);
	struct handler *h = s->handlers;
	while (h) {
		struct handler *next = h->next;
		free(h->method);
		free(h);
		h = next;
	}
	free(s->workers);
	free(s->path);
	if (s->wake[0] >= 0)
		close(s->wake[0]);
	if (s->wake[1] >= 0)
		close(s->wake[1]);
	pthread_mutex_destroy(&s->stop_lock);
	free(s);
	grpc_shutdown();
}
