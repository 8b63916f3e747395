/*
 * The CSI server's HTTP/2 side: a connection's nghttp2 session and its callbacks, which collect
 * each stream's request (checking method, content-type, header and message bounds on the way)
 * and queue it for a worker, and the answers written back (a response with the message, or a
 * trailers-only status). Everything here runs with s->lock held.
 */
#include "csi/server_int.h"

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

/* ---- streams and connections (s->lock held) ---- */

void srv_wake_io(struct csi_server *s)
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

void srv_flush(struct sconn *cn)
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
void srv_answer(struct sstream *st, int code, const char *message, uint8_t *body, size_t len)
{
	struct sconn *cn = st->conn;
	/* A worker's stream stays ST_RUNNING until srv_job_done(): on_close must not free it. */
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

void srv_answer_error(struct sstream *st, int code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	srv_answer(st, code, msg, NULL, 0);
}

void srv_queue_unlink(struct csi_server *s, struct sstream *st)
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
	srv_queue_unlink(s, st);
	st->closed = true;
	st->conn->jobs--;
	s->jobs--;
	pthread_cond_broadcast(&s->idle);
	stream_free(st);
}

/* A job left a worker: the stream or connection may now be freed. */
void srv_job_done(struct csi_server *s, struct sstream *st)
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
			srv_answer_error(st, CSI_CODE_RESOURCE_EXHAUSTED,
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
		srv_answer_error(st, CSI_CODE_RESOURCE_EXHAUSTED,
			     "grpc: received message larger than max (%u vs. %d)", st->req.len,
			     s->opts.max_recv_bytes);
		break;
	case CSI_WIRE_MSG_COMPRESSED:
		srv_answer_error(st, CSI_CODE_UNIMPLEMENTED,
			     "grpc: compressed message, but this server offers no decompressor");
		break;
	case CSI_WIRE_MSG_TOO_MANY:
		srv_answer_error(st, CSI_CODE_UNIMPLEMENTED,
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
	if (!st->method || !srv_find_handler(s, st->method))
		return srv_answer_error(st, CSI_CODE_UNIMPLEMENTED, "unknown method %s",
				    st->method ? st->method : "(none)");
	if (!csi_wire_msg_complete(&st->req))
		return srv_answer_error(st, CSI_CODE_INVALID_ARGUMENT, csi_wire_msg_empty(&st->req) ?
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

/* ---- the I/O thread ---- */

struct sconn *srv_conn_new(struct csi_server *s, int fd)
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
	srv_flush(cn);
	return cn;
}

/* Closes a connection: its streams end, workers drop their answers (s->lock held). */
void srv_conn_close(struct csi_server *s, struct sconn *cn)
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
