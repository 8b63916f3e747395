/*
 * csi/server: a gRPC server over HTTP/2 (nghttp2) on a unix socket, dispatching CSI methods to
 * registered handlers.
 *
 * Design:
 *   - One I/O thread polls the listening socket and every connection, feeds what it reads to the
 *     connection's nghttp2 session and collects each stream's request message. When a request is
 *     complete it is queued for the N worker threads (opts.threads), so at most N handlers run
 *     at once and a slow handler occupies only its own worker; errors that need no handler (an
 *     unknown method, a message over the limit) are answered by the I/O thread at once.
 *   - A worker answers on the session itself (one server-wide mutex guards every session and
 *     stream), so a call costs one wake-up of a worker and none of the I/O thread unless the
 *     socket is full.
 *   - A stream's record is freed by whoever is last: the I/O thread when nghttp2 closes a stream
 *     no worker holds, or the worker when the stream closed (client cancel, deadline, lost
 *     connection) while its handler ran; a connection is freed when it is closed and no worker
 *     holds one of its streams.
 *   - Bounds on what clients can make the server hold: CSI_SERVER_MAX_CONNS connections,
 *     CSI_SERVER_MAX_STREAMS concurrent streams per connection (SETTINGS), opts.max_recv_bytes
 *     per request, CSI_SERVER_MAX_BUFFERED request bytes across all streams, header blocks of
 *     CSI_WIRE_MAX_HEADER_LIST bytes, CSI_SERVER_MAX_OUTBOUND frames queued for a peer that
 *     does not read them (then it is not read either: nghttp2 would queue an RST_STREAM for
 *     every stream it opens past the limit, without bound).
 *   - Stop: new streams are refused (GOAWAY), calls in flight get opts.grace_ns to finish, then
 *     every connection is closed; workers finish the handler they run and leave.
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
#include <time.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>

#include "base/log.h"
#include "base/strbuf.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "csi/endpoint.h"
#include "csi/wire.h"

#define CSI_SERVER_MAX_CONNS 256
#define CSI_SERVER_MAX_STREAMS 128
#define CSI_SERVER_MAX_BUFFERED (64u << 20)
#define CSI_SERVER_MAX_PATH 512
/* Frames queued for one peer above which its connection is not read until it reads some. */
#define CSI_SERVER_MAX_OUTBOUND 4096
/* How long a stopping server keeps writing answers already queued after the grace period. */
#define CSI_SERVER_DRAIN_NS (200 * NSEC_PER_MSEC)

struct handler {
	struct handler *next;
	char *method;
	const ProtobufCMethodDescriptor *md;
	csi_handler_fn fn;
	void *arg;
};

enum stream_state { ST_READING, ST_QUEUED, ST_RUNNING, ST_ANSWERED };

struct sconn;

struct sstream {
	struct sstream *prev, *next; /* the connection's streams */
	struct sstream *qprev, *qnext; /* the work queue, while ST_QUEUED */
	struct sconn *conn;
	int32_t id;
	enum stream_state state;
	bool closed;                 /* nghttp2 closed the stream (or the connection died) */
	char *method;
	int64_t deadline;            /* monotonic ns; 0: none */
	bool not_post, bad_type;
	size_t hdr_bytes;            /* header list received so far */
	struct csi_wire_msg req;
	size_t budget;               /* bytes counted in s->buffered for this stream */
	uint8_t *resp;               /* prefix + packed response */
	size_t resp_len, resp_sent;
};

struct sconn {
	struct sconn *next;
	struct csi_server *s;
	int fd;
	nghttp2_session *sess;
	struct sstream *streams;
	int jobs;                    /* streams queued or running */
	bool dead;                   /* failed or ended: the I/O thread closes it */
	bool closed;                 /* closed and unlisted: freed when jobs reach 0 */
};

struct csi_server {
	struct csi_server_opts opts;
	struct handler *handlers;
	char *path;
	int wake[2]; /* csi_server_stop() and signals write here; csi_server_run() reads */
	bool started, stopped;
	pthread_mutex_t stop_lock;

	pthread_mutex_t lock;        /* everything below */
	pthread_cond_t work;         /* queue grew, or workers must leave */
	pthread_cond_t idle;         /* a job ended */
	struct sstream *qhead, *qtail;
	int jobs;                    /* queued + running, all connections */
	int lfd;
	struct sconn *conns;
	int nconns;
	size_t buffered;
	bool stopping;               /* no new streams */
	bool io_exit, workers_exit;
	int io_wake[2];
	pthread_t io;
	bool io_running;
	pthread_t *workers;
	int nworkers;
};

struct csi_call_ctx {
	const char *method;
	struct csi_arena *arena;
	int64_t deadline; /* monotonic ns; 0: none */
	char *message;
};

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
	s->io_wake[0] = s->io_wake[1] = -1;
	s->lfd = -1;
	pthread_mutex_init(&s->stop_lock, NULL);
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->work, NULL);
	pthread_cond_init(&s->idle, NULL);
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
		return csi_ctx_error(ctx, CSI_CODE_UNIMPLEMENTED, "unknown method %s",
				     ctx->method);
	const ProtobufCMethodDescriptor *md = h->md;
	ProtobufCMessage *req = protobuf_c_message_unpack(md->input, NULL, len, data);
	if (!req)
		return csi_ctx_error(ctx, CSI_CODE_INVALID_ARGUMENT,
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
	if (!ctx->deadline)
		return INT64_MAX;
	return ctx->deadline - mono_now_ns();
}

/* ---- streams and connections (s->lock held) ---- */

static void wake_io(struct csi_server *s)
{
	if (s->io_wake[1] >= 0) {
		ssize_t w = write(s->io_wake[1], "w", 1);
		(void)w; /* a full pipe already holds a wake-up */
	}
}

static void stream_free(struct sstream *st)
{
	struct csi_server *s = st->conn->s;
	s->buffered -= st->budget;
	csi_wire_msg_release(&st->req);
	free(st->method);
	free(st->resp);
	free(st);
}

static void conn_free(struct sconn *cn)
{
	nghttp2_session_del(cn->sess); /* NULL once closed */
	free(cn);
}

static void flush(struct sconn *cn)
{
	if (cn->dead)
		return;
	int rv = nghttp2_session_send(cn->sess);
	if (rv != 0) {
		KLOG_V(4, "CSI connection: HTTP/2 send failed: %s", nghttp2_strerror(rv));
		cn->dead = true; /* the I/O thread closes it */
	}
}

static ssize_t read_response(nghttp2_session *sess, int32_t id, uint8_t *buf, size_t len,
			     uint32_t *flags, nghttp2_data_source *src, void *ud)
{
	(void)ud;
	struct sstream *st = src->ptr;
	size_t n = st->resp_len - st->resp_sent;
	if (n > len)
		n = len;
	memcpy(buf, st->resp + st->resp_sent, n);
	st->resp_sent += n;
	if (st->resp_sent == st->resp_len) {
		nghttp2_nv tr[] = { { (uint8_t *)"grpc-status", (uint8_t *)"0", 11, 1,
				      NGHTTP2_NV_FLAG_NONE } };
		*flags |= NGHTTP2_DATA_FLAG_EOF;
		if (nghttp2_submit_trailer(sess, id, tr, 1) == 0)
			*flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
	}
	return (ssize_t)n;
}

#define NV(n, v) { (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), \
		   NGHTTP2_NV_FLAG_NO_COPY_NAME }

/* Answers OK with body (prefix included, taken) or an error status (trailers-only). */
static void answer(struct sstream *st, int code, const char *message, uint8_t *body, size_t len)
{
	struct sconn *cn = st->conn;
	/* A worker's stream stays ST_RUNNING until job_done(): on_close must not free it. */
	if (st->state == ST_READING)
		st->state = ST_ANSWERED;
	if (st->closed || cn->dead) {
		free(body);
		return;
	}
	if (code == CSI_CODE_OK) {
		st->resp = body;
		st->resp_len = len;
		nghttp2_nv h[] = { NV(":status", "200"), NV("content-type", "application/grpc") };
		nghttp2_data_provider prd = { .source.ptr = st, .read_callback = read_response };
		nghttp2_submit_response(cn->sess, st->id, h, 2, &prd);
	} else {
		char num[16];
		struct strbuf msg = STRBUF_INIT;
		snprintf(num, sizeof(num), "%d", code);
		csi_wire_message_encode(message ? message : "", &msg);
		nghttp2_nv h[] = { NV(":status", "200"), NV("content-type", "application/grpc"),
				   NV("grpc-status", num), NV("grpc-message", msg.buf) };
		nghttp2_submit_response(cn->sess, st->id, h, msg.len ? 4 : 3, NULL);
		strbuf_release(&msg);
		free(body);
	}
}

static void answer_http(struct sstream *st, const char *status)
{
	st->state = ST_ANSWERED;
	nghttp2_nv h[] = { NV(":status", status) };
	nghttp2_submit_response(st->conn->sess, st->id, h, 1, NULL);
}

#undef NV

static void answer_error(struct sstream *st, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void answer_error(struct sstream *st, int code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	answer(st, code, msg, NULL, 0);
}

static void queue_unlink(struct csi_server *s, struct sstream *st)
{
	if (st->qprev)
		st->qprev->qnext = st->qnext;
	else
		s->qhead = st->qnext;
	if (st->qnext)
		st->qnext->qprev = st->qprev;
	else
		s->qtail = st->qprev;
	st->qprev = st->qnext = NULL;
}

/*
 * A stream that ends before a worker took it (client cancel, closed connection) leaves the queue
 * at once, so a slow handler never lets cancelled calls pile up.
 */
static void drop_queued(struct csi_server *s, struct sstream *st)
{
	queue_unlink(s, st);
	st->closed = true;
	st->conn->jobs--;
	s->jobs--;
	pthread_cond_broadcast(&s->idle);
	stream_free(st);
}

/* A job left a worker: the stream or connection may now be freed. */
static void job_done(struct csi_server *s, struct sstream *st)
{
	struct sconn *cn = st->conn;
	st->state = ST_ANSWERED;
	cn->jobs--;
	s->jobs--;
	pthread_cond_broadcast(&s->idle);
	if (st->closed) {
		stream_free(st);
		if (cn->closed && cn->jobs == 0)
			conn_free(cn);
	}
}

/* ---- nghttp2 callbacks (I/O thread or a worker, s->lock held) ---- */

static ssize_t on_send(nghttp2_session *sess, const uint8_t *data, size_t len, int flags,
		       void *ud)
{
	(void)sess, (void)flags;
	return csi_wire_send(((struct sconn *)ud)->fd, data, len);
}

static int on_begin_headers(nghttp2_session *sess, const nghttp2_frame *f, void *ud)
{
	struct sconn *cn = ud;
	if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	if (cn->s->stopping) {
		nghttp2_submit_rst_stream(sess, NGHTTP2_FLAG_NONE, f->hd.stream_id,
					  NGHTTP2_REFUSED_STREAM);
		return 0;
	}
	struct sstream *st = xcalloc(1, sizeof(*st));
	st->conn = cn;
	st->id = f->hd.stream_id;
	csi_wire_msg_init(&st->req, (size_t)cn->s->opts.max_recv_bytes);
	st->next = cn->streams;
	if (cn->streams)
		cn->streams->prev = st;
	cn->streams = st;
	nghttp2_session_set_stream_user_data(sess, st->id, st);
	return 0;
}

static int on_header(nghttp2_session *sess, const nghttp2_frame *f, const uint8_t *name,
		     size_t nlen, const uint8_t *value, size_t vlen, uint8_t flags, void *ud)
{
	(void)flags, (void)ud;
	struct sstream *st = nghttp2_session_get_stream_user_data(sess, f->hd.stream_id);
	if (!st || st->state != ST_READING || f->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	/* HTTP/2 counts 32 bytes of overhead per field; nghttp2 does not enforce our SETTINGS. */
	st->hdr_bytes += nlen + vlen + 32;
	if (st->hdr_bytes > CSI_WIRE_MAX_HEADER_LIST)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* resets the stream */
	if (nlen == 5 && memcmp(name, ":path", 5) == 0) {
		free(st->method);
		st->method = vlen <= CSI_SERVER_MAX_PATH ? xstrndup((const char *)value, vlen) :
							   xstrdup("(path too long)");
	} else if (nlen == 7 && memcmp(name, ":method", 7) == 0) {
		st->not_post = !(vlen == 4 && memcmp(value, "POST", 4) == 0);
	} else if (nlen == 12 && memcmp(name, "content-type", 12) == 0) {
		st->bad_type = vlen < 16 || memcmp(value, "application/grpc", 16) != 0 ||
			       (vlen > 16 && value[16] != '+' && value[16] != ';');
	} else if (nlen == 12 && memcmp(name, "grpc-timeout", 12) == 0) {
		int64_t ns = csi_wire_timeout_parse((const char *)value, vlen);
		if (ns > 0 && ns < INT64_MAX / 2)
			st->deadline = mono_now_ns() + ns;
	}
	return 0;
}

static int on_data(nghttp2_session *sess, uint8_t flags, int32_t id, const uint8_t *data,
		   size_t len, void *ud)
{
	(void)flags;
	struct sconn *cn = ud;
	struct csi_server *s = cn->s;
	struct sstream *st = nghttp2_session_get_stream_user_data(sess, id);
	if (!st || st->state != ST_READING)
		return 0;
	bool had_prefix = st->req.hdr_got == 5;
	enum csi_wire_msg_err e = csi_wire_msg_feed(&st->req, data, len);
	if (!had_prefix && st->req.hdr_got == 5 && !e) {
		/* The whole message is allocated now: count it against the server's budget. */
		if (s->buffered + st->req.len > CSI_SERVER_MAX_BUFFERED) {
			answer_error(st, CSI_CODE_RESOURCE_EXHAUSTED,
				     "server busy: %zu request bytes already buffered", s->buffered);
			csi_wire_msg_release(&st->req);
			return 0;
		}
		st->budget = st->req.len;
		s->buffered += st->budget;
	}
	switch (e) {
	case CSI_WIRE_MSG_OK:
		break;
	case CSI_WIRE_MSG_TOO_LARGE:
		answer_error(st, CSI_CODE_RESOURCE_EXHAUSTED,
			     "grpc: received message larger than max (%u vs. %d)", st->req.len,
			     s->opts.max_recv_bytes);
		break;
	case CSI_WIRE_MSG_COMPRESSED:
		answer_error(st, CSI_CODE_UNIMPLEMENTED,
			     "grpc: compressed message, but this server offers no decompressor");
		break;
	case CSI_WIRE_MSG_TOO_MANY:
		answer_error(st, CSI_CODE_UNIMPLEMENTED,
			     "grpc: more than one request message for a unary method");
		break;
	}
	return 0;
}

/* The client finished sending: answer at once, or queue the call for a worker. */
static void request_complete(struct csi_server *s, struct sstream *st)
{
	if (st->state != ST_READING)
		return;
	if (st->bad_type)
		return answer_http(st, "415");
	if (st->not_post)
		return answer_http(st, "405");
	if (!st->method || !find_handler(s, st->method))
		return answer_error(st, CSI_CODE_UNIMPLEMENTED, "unknown method %s",
				    st->method ? st->method : "(none)");
	if (!csi_wire_msg_complete(&st->req))
		return answer_error(st, CSI_CODE_INVALID_ARGUMENT, csi_wire_msg_empty(&st->req) ?
				    "no request message" : "truncated request message");
	st->state = ST_QUEUED;
	st->conn->jobs++;
	s->jobs++;
	st->qprev = s->qtail;
	st->qnext = NULL;
	if (s->qtail)
		s->qtail->qnext = st;
	else
		s->qhead = st;
	s->qtail = st;
	pthread_cond_signal(&s->work);
}

static int on_frame(nghttp2_session *sess, const nghttp2_frame *f, void *ud)
{
	struct sconn *cn = ud;
	if ((f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA) ||
	    !(f->hd.flags & NGHTTP2_FLAG_END_STREAM))
		return 0;
	struct sstream *st = nghttp2_session_get_stream_user_data(sess, f->hd.stream_id);
	if (st)
		request_complete(cn->s, st);
	return 0;
}

static void stream_unlink(struct sconn *cn, struct sstream *st)
{
	if (st->prev)
		st->prev->next = st->next;
	else if (cn->streams == st)
		cn->streams = st->next;
	if (st->next)
		st->next->prev = st->prev;
	st->prev = st->next = NULL;
}

static int on_close(nghttp2_session *sess, int32_t id, uint32_t error, void *ud)
{
	(void)error;
	struct sconn *cn = ud;
	struct sstream *st = nghttp2_session_get_stream_user_data(sess, id);
	if (!st)
		return 0;
	nghttp2_session_set_stream_user_data(sess, id, NULL);
	stream_unlink(cn, st);
	if (st->state == ST_QUEUED)
		drop_queued(cn->s, st);
	else if (st->state == ST_RUNNING)
		st->closed = true; /* the worker frees it */
	else
		stream_free(st);
	return 0;
}

/* ---- workers ---- */

static void *worker_main(void *arg)
{
	struct csi_server *s = arg;
	pthread_mutex_lock(&s->lock);
	for (;;) {
		while (!s->qhead && !s->workers_exit)
			pthread_cond_wait(&s->work, &s->lock);
		struct sstream *st = s->qhead;
		if (!st)
			break;
		queue_unlink(s, st);
		/* The worker owns it from here: on_close() must only mark it closed. */
		st->state = ST_RUNNING;
		if (st->deadline && mono_now_ns() >= st->deadline) {
			answer_error(st, CSI_CODE_DEADLINE_EXCEEDED, "context deadline exceeded");
			flush(st->conn);
			wake_io(s);
			job_done(s, st);
			continue;
		}
		size_t len;
		uint8_t *req = csi_wire_msg_take(&st->req, &len);
		struct csi_call_ctx ctx = { 0 };
		ctx.arena = csi_arena_new();
		ctx.method = st->method;
		ctx.deadline = st->deadline;
		pthread_mutex_unlock(&s->lock);

		uint8_t *out = NULL;
		size_t outlen = 0;
		int code = dispatch(s, &ctx, req ? req : (const uint8_t *)"", len, &out, &outlen);
		free(req);
		uint8_t *framed = NULL;
		if (code == 0) {
			if (outlen > UINT32_MAX) {
				code = csi_ctx_error(&ctx, CSI_CODE_INTERNAL, "response too large");
			} else {
				framed = xmalloc(outlen + 5);
				csi_wire_msg_prefix(framed, (uint32_t)outlen);
				if (outlen)
					memcpy(framed + 5, out, outlen);
			}
		}
		free(out);

		pthread_mutex_lock(&s->lock);
		answer(st, code, ctx.message, framed, outlen + 5);
		csi_arena_free(ctx.arena);
		struct sconn *cn = st->conn;
		flush(cn);
		if (!cn->dead && nghttp2_session_want_write(cn->sess))
			wake_io(s);
		if (cn->dead)
			wake_io(s);
		job_done(s, st);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/* ---- the I/O thread ---- */

static struct sconn *conn_new(struct csi_server *s, int fd)
{
	nghttp2_session_callbacks *cb;
	if (nghttp2_session_callbacks_new(&cb) != 0)
		return NULL;
	nghttp2_session_callbacks_set_send_callback(cb, on_send);
	nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
	nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
	nghttp2_option *opt;
	if (nghttp2_option_new(&opt) != 0) {
		nghttp2_session_callbacks_del(cb);
		return NULL;
	}
	struct sconn *cn = xcalloc(1, sizeof(*cn));
	cn->s = s;
	cn->fd = fd;
	nghttp2_option_set_max_send_header_block_length(opt, CSI_WIRE_MAX_HEADER_LIST);
	int rv = nghttp2_session_server_new2(&cn->sess, cb, cn, opt);
	nghttp2_option_del(opt);
	nghttp2_session_callbacks_del(cb);
	if (rv != 0) {
		free(cn);
		return NULL;
	}
	nghttp2_settings_entry iv[] = {
		{ NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, CSI_SERVER_MAX_STREAMS },
		{ NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20 },
		{ NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, CSI_WIRE_MAX_HEADER_LIST },
	};
	nghttp2_submit_settings(cn->sess, NGHTTP2_FLAG_NONE, iv, sizeof(iv) / sizeof(iv[0]));
	nghttp2_session_set_local_window_size(cn->sess, NGHTTP2_FLAG_NONE, 0, 8 << 20);
	flush(cn);
	return cn;
}

/* Closes a connection: its streams end, workers drop their answers (s->lock held). */
static void conn_close(struct csi_server *s, struct sconn *cn)
{
	for (struct sconn **pp = &s->conns; *pp; pp = &(*pp)->next) {
		if (*pp == cn) {
			*pp = cn->next;
			break;
		}
	}
	s->nconns--;
	while (cn->streams) {
		struct sstream *st = cn->streams;
		stream_unlink(cn, st);
		if (st->state == ST_QUEUED)
			drop_queued(s, st);
		else if (st->state == ST_RUNNING)
			st->closed = true; /* the worker frees it */
		else
			stream_free(st);
	}
	/* Only running handlers may hold the record now, and they touch neither socket nor session. */
	nghttp2_session_del(cn->sess);
	cn->sess = NULL;
	close(cn->fd);
	cn->fd = -1;
	cn->dead = true;
	cn->closed = true;
	if (cn->jobs == 0)
		conn_free(cn);
}

static void accept_all(struct csi_server *s)
{
	for (;;) {
		int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				KLOG_W("CSI server: accept on %s failed: %s", s->path,
				       strerror(errno));
			return;
		}
		if (s->nconns >= CSI_SERVER_MAX_CONNS) {
			KLOG_W("CSI server: refusing a connection on %s: %d connections open",
			       s->path, s->nconns);
			close(fd);
			continue;
		}
		struct sconn *cn = conn_new(s, fd);
		if (!cn) {
			KLOG_W("CSI server: cannot start an HTTP/2 session: out of memory");
			close(fd);
			continue;
		}
		cn->next = s->conns;
		s->conns = cn;
		s->nconns++;
	}
}

/* Reads what one connection has, feeds nghttp2, writes answers (s->lock held). */
static void serve_conn(struct sconn *cn, short revents, uint8_t *buf, size_t buflen)
{
	if (revents & (POLLIN | POLLHUP | POLLERR)) {
		ssize_t n = recv(cn->fd, buf, buflen, 0);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
			cn->dead = true;
			return;
		}
		if (n > 0) {
			ssize_t rv = nghttp2_session_mem_recv(cn->sess, buf, (size_t)n);
			if (rv < 0) {
				KLOG_V(2, "CSI server: closing a connection: %s",
				       nghttp2_strerror((int)rv));
				cn->dead = true;
				return;
			}
		}
	}
	flush(cn);
	if (!cn->dead && !nghttp2_session_want_read(cn->sess) &&
	    !nghttp2_session_want_write(cn->sess))
		cn->dead = true;
}

static void *io_main(void *arg)
{
	struct csi_server *s = arg;
	enum { BUFLEN = 64 * 1024 };
	uint8_t *buf = xmalloc(BUFLEN);
	struct pollfd *p = xcalloc(CSI_SERVER_MAX_CONNS + 2, sizeof(*p));
	struct sconn **pc = xcalloc(CSI_SERVER_MAX_CONNS + 2, sizeof(*pc));
	bool goaway_sent = false;
	int64_t exit_at = 0;
	pthread_mutex_lock(&s->lock);
	for (;;) {
		if (s->stopping && !goaway_sent) {
			goaway_sent = true;
			if (s->lfd >= 0) {
				close(s->lfd);
				s->lfd = -1;
			}
			for (struct sconn *cn = s->conns; cn; cn = cn->next) {
				nghttp2_submit_goaway(cn->sess, NGHTTP2_FLAG_NONE,
						      nghttp2_session_get_last_proc_stream_id(cn->sess),
						      NGHTTP2_NO_ERROR, NULL, 0);
				flush(cn);
			}
		}
		bool pending = false;
		for (struct sconn *cn = s->conns, *next; cn; cn = next) {
			next = cn->next;
			if (cn->dead)
				conn_close(s, cn);
			else if (nghttp2_session_want_write(cn->sess))
				pending = true;
		}
		if (s->io_exit) {
			if (!exit_at)
				exit_at = mono_now_ns() + CSI_SERVER_DRAIN_NS;
			if (!pending || mono_now_ns() >= exit_at)
				break;
		}
		int n = 0;
		p[n++] = (struct pollfd){ .fd = s->io_wake[0], .events = POLLIN };
		if (s->lfd >= 0)
			p[n++] = (struct pollfd){ .fd = s->lfd, .events = POLLIN };
		int first_conn = n;
		for (struct sconn *cn = s->conns; cn; cn = cn->next) {
			pc[n] = cn;
			bool backed_up = nghttp2_session_get_outbound_queue_size(cn->sess) >=
					 CSI_SERVER_MAX_OUTBOUND;
			p[n++] = (struct pollfd){
				.fd = cn->fd,
				.events = (short)((backed_up ? 0 : POLLIN) |
						  (nghttp2_session_want_write(cn->sess) ? POLLOUT : 0)) };
		}
		pthread_mutex_unlock(&s->lock);
		int r = poll(p, (nfds_t)n, s->io_exit ? 20 : -1);
		pthread_mutex_lock(&s->lock);
		if (r <= 0)
			continue;
		if (p[0].revents & POLLIN) {
			char drain[64];
			while (read(s->io_wake[0], drain, sizeof(drain)) > 0)
				;
		}
		if (first_conn == 2 && (p[1].revents & POLLIN) && s->lfd >= 0)
			accept_all(s);
		/* Connections polled are still listed: only this thread closes them. */
		for (int i = first_conn; i < n; i++)
			if (p[i].revents && !pc[i]->dead)
				serve_conn(pc[i], p[i].revents, buf, BUFLEN);
	}
	while (s->conns)
		conn_close(s, s->conns);
	pthread_mutex_unlock(&s->lock);
	free(p);
	free(pc);
	free(buf);
	return NULL;
}

int csi_server_call(struct csi_server *s, const char *method, const uint8_t *req, size_t len,
		    uint8_t **resp, size_t *resp_len, char *message, size_t msglen)
{
	struct csi_call_ctx ctx = { 0 };
	ctx.arena = csi_arena_new();
	ctx.method = method;
	ctx.deadline = 0;
	*resp = NULL;
	*resp_len = 0;
	int code = dispatch(s, &ctx, req, len, resp, resp_len);
	if (message && msglen)
		snprintf(message, msglen, "%s", ctx.message ? ctx.message : "");
	csi_arena_free(ctx.arena);
	return code;
}


/* Removes a stale socket; refuses a live one or a non-socket. */
static int claim_socket_path(const char *path, char *err, size_t errlen)
{
	struct stat st;
	if (lstat(path, &st) != 0)
		return errno == ENOENT ? 0 : (errbuf_printf(err, errlen, "cannot stat %s: %s", path,
						      strerror(errno)), -1);
	if (!S_ISSOCK(st.st_mode)) {
		errbuf_printf(err, errlen, "%s exists and is not a socket; refusing to replace it", path);
		return -1;
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		errbuf_printf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	int rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	int saved = errno;
	close(fd);
	if (rc == 0) {
		errbuf_printf(err, errlen, "another server is listening on %s; refusing to start", path);
		return -1;
	}
	if (saved != ECONNREFUSED) {
		errbuf_printf(err, errlen, "cannot check socket %s: %s", path, strerror(saved));
		return -1;
	}
	KLOG_I("Removing stale socket %s", path);
	if (unlink(path) != 0 && errno != ENOENT) {
		errbuf_printf(err, errlen, "cannot remove stale socket %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

/* ---- start / stop ---- */

static int listen_unix(struct csi_server *s, char *err, size_t errlen)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		errbuf_printf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", s->path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 128) != 0) {
		errbuf_printf(err, errlen, "cannot listen on %s: %s", s->path, strerror(errno));
		close(fd);
		return -1;
	}
	s->lfd = fd;
	return 0;
}

static void stop_threads(struct csi_server *s)
{
	pthread_mutex_lock(&s->lock);
	s->io_exit = true;
	wake_io(s);
	pthread_mutex_unlock(&s->lock);
	if (s->io_running)
		pthread_join(s->io, NULL);
	s->io_running = false;
	pthread_mutex_lock(&s->lock);
	s->workers_exit = true;
	pthread_cond_broadcast(&s->work);
	pthread_mutex_unlock(&s->lock);
	for (int i = 0; i < s->nworkers; i++)
		pthread_join(s->workers[i], NULL);
	s->nworkers = 0;
}

int csi_server_start(struct csi_server *s, const char *endpoint, char *err, size_t errlen)
{
	if (s->started) {
		errbuf_printf(err, errlen, "server already started");
		return -1;
	}
	if (csi_endpoint_path(endpoint, &s->path, err, errlen))
		return -1;
	if (claim_socket_path(s->path, err, errlen) || listen_unix(s, err, errlen))
		goto fail;
	if (chmod(s->path, s->opts.socket_mode) != 0)
		KLOG_W("Cannot set mode %o on %s: %s", (unsigned)s->opts.socket_mode, s->path,
		       strerror(errno));
	if (pipe2(s->io_wake, O_CLOEXEC | O_NONBLOCK) != 0) {
		errbuf_printf(err, errlen, "cannot create a pipe: %s", strerror(errno));
		s->io_wake[0] = s->io_wake[1] = -1;
		goto fail_unlink;
	}
	s->workers = xcalloc((size_t)s->opts.threads, sizeof(*s->workers));
	int rc = pthread_create(&s->io, NULL, io_main, s);
	if (rc != 0) {
		errbuf_printf(err, errlen, "cannot start the server's I/O thread: %s", strerror(rc));
		goto fail_unlink;
	}
	s->io_running = true;
	for (int i = 0; i < s->opts.threads; i++) {
		rc = pthread_create(&s->workers[i], NULL, worker_main, s);
		if (rc != 0) {
			errbuf_printf(err, errlen, "cannot start worker thread %d of %d: %s", i + 1,
				s->opts.threads, strerror(rc));
			stop_threads(s);
			goto fail_unlink;
		}
		s->nworkers++;
	}
	s->started = true;
	KLOG_I("Listening for CSI connections on %s", s->path);
	return 0;
fail_unlink:
	if (s->lfd >= 0) {
		close(s->lfd);
		s->lfd = -1;
	}
	unlink(s->path);
fail:
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
	pthread_mutex_lock(&s->lock);
	s->stopping = true;
	wake_io(s);
	struct timespec grace = wall_deadline(s->opts.grace_ns);
	while (s->jobs > 0) {
		if (pthread_cond_timedwait(&s->idle, &s->lock, &grace) == ETIMEDOUT) {
			KLOG_W("%d calls still running after the grace period; closing their "
			       "connections", s->jobs);
			break;
		}
	}
	pthread_mutex_unlock(&s->lock);
	stop_threads(s);
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
	for (int i = 0; i < 2; i++) {
		if (s->wake[i] >= 0)
			close(s->wake[i]);
		if (s->io_wake[i] >= 0)
			close(s->io_wake[i]);
	}
	pthread_cond_destroy(&s->work);
	pthread_cond_destroy(&s->idle);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->stop_lock);
	free(s);
}
