/*
 * csi/client: unary gRPC calls over HTTP/2 (nghttp2) on a unix socket, readiness, loss.
 *
 * Design:
 *   - One socket and one nghttp2 client session per connection, guarded by one mutex. A call
 *     is one HTTP/2 stream: the calling thread submits it and writes it out itself, then sleeps
 *     on its own semaphore; one I/O thread per connection reads, feeds nghttp2 and wakes the
 *     caller whose stream closed. So a call costs two wake-ups and no thread of its own, and any
 *     number of threads may call at once (streams are multiplexed; beyond the driver's
 *     SETTINGS_MAX_CONCURRENT_STREAMS nghttp2 queues them).
 *   - A finished call is off the session before its caller wakes: the semaphore is posted
 *     after the mutex is released, and the caller reads its outcome without taking the mutex
 *     again. (With a condition variable, a hundred callers woke into the mutex the I/O thread
 *     held: that contention was the provisioner's largest futex cost.)
 *   - Only the I/O thread closes the socket and frees the session ("teardown"), after it or a
 *     writer found the connection broken; every call in flight then ends with UNAVAILABLE, and
 *     on_lost fires once per connection object. A call on a connection that is down connects
 *     again first (fail-fast: a driver that is not listening answers UNAVAILABLE at once), as
 *     a gRPC channel reconnects by itself.
 *   - A call whose deadline passes is answered DEADLINE_EXCEEDED at once and its stream reset
 *     (CANCEL); the call record then belongs to the session until nghttp2 closes the stream, so
 *     nghttp2 never reads a request or writes a response into freed memory. A driver that stopped
 *     reading never lets the reset out: past CLIENT_MAX_ABANDONED such records the connection
 *     is broken, so they cannot pile up. A driver that resets the stream (CANCEL) once the
 *     deadline has passed (grpc-go's server when the grpc-timeout runs out) ends it too.
 *   - "Connected" means the HTTP/2 handshake finished: the driver's SETTINGS frame arrived, as a
 *     gRPC channel is READY only then. A socket that accepts but never speaks HTTP/2 is not.
 *   - Optional keepalive (opts.keepalive_ns): a PING after that long without a frame from the
 *     driver; no answer within the same time breaks the connection.
 */
#include "csi/client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>

#include "base/log.h"
#include "base/strbuf.h"
#include "base/timeutil.h"
#include "base/version.h"
#include "base/xalloc.h"
#include "csi/wire.h"

/* Receive windows: large enough that a 4 MiB message needs few WINDOW_UPDATE round trips. */
#define CLIENT_STREAM_WINDOW (1 << 20)
#define CLIENT_CONN_WINDOW (8 << 20)
/*
 * Calls past their deadline whose records the session still holds. A reset stream closes at
 * once on a connection that writes; these pile up only when the driver stopped reading (the
 * reset, even the call's HEADERS, cannot leave), one record and request per call for as long as
 * callers keep calling. Past this many the connection is broken: its calls end UNAVAILABLE,
 * on_lost fires, and the next call connects again.
 */
#define CLIENT_MAX_ABANDONED 256
/* Most bytes one server-streaming answer may bring (its messages are kept until it ends). */
#define CLIENT_MAX_STREAM_BYTES (64u << 20)

struct call {
	struct call *prev, *next; /* the connection's calls in flight */
	int32_t stream_id;
	uint8_t *req;             /* prefix + request bytes, owned */
	size_t req_len, req_sent;
	size_t max_recv;
	struct csi_wire_msg resp;
	bool stream;              /* server streaming: the body's bytes collect in sbuf instead */
	uint8_t *sbuf;
	size_t slen, scap;
	int http_status;
	size_t hdr_bytes;         /* headers and trailers received */
	bool have_status;         /* grpc-status seen */
	bool local_error;         /* code/message decided here (e.g. response too large) */
	int code;
	char message[1024];
	bool done;                /* the outcome is final; the caller may read and free */
	bool abandoned;           /* the caller left (deadline); the session frees it */
	int64_t deadline;         /* monotonic ns; 0: none */
	sem_t finished;           /* posted once, after done, with the mutex released */
};

struct csi_conn {
	char *endpoint;
	char *path;
	struct csi_conn_opts opts;
	pthread_mutex_t lock;     /* everything below */
	pthread_cond_t changed;   /* handshake done, or the connection broke */
	int fd;                   /* -1 while not connected */
	nghttp2_session *sess;
	bool settings_seen;       /* the driver's SETTINGS arrived: connected */
	bool broken;              /* failed; the I/O thread tears it down */
	bool goaway;              /* the driver sent GOAWAY: no new streams on this session */
	char broken_why[256];
	bool ever_connected;
	bool lost_reported;
	bool stopping;
	struct call *calls;
	struct call *finished;    /* done calls whose callers are woken by unlock_conn() */
	int abandoned;            /* calls in c->calls whose callers left (CLIENT_MAX_ABANDONED) */
	int64_t last_recv_ns, ping_sent_ns;
	int wake[2];              /* writers ask the I/O thread to poll for POLLOUT */
	pthread_t io;
	bool io_running;
	atomic_bool lost;
};

/* ---- connection state, all with c->lock held ---- */

static void mark_broken(struct csi_conn *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void mark_broken(struct csi_conn *c, const char *fmt, ...)
{
	if (c->broken)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->broken_why, sizeof(c->broken_why), fmt, ap);
	va_end(ap);
	c->broken = true;
	pthread_cond_broadcast(&c->changed);
}

static void wake_io(struct csi_conn *c)
{
	ssize_t w = write(c->wake[1], "w", 1);
	(void)w; /* a full pipe already holds a wake-up */
}

static void call_unlink(struct csi_conn *c, struct call *k)
{
	if (k->prev)
		k->prev->next = k->next;
	else if (c->calls == k)
		c->calls = k->next;
	if (k->next)
		k->next->prev = k->prev;
	k->prev = k->next = NULL;
}

static void call_free(struct call *k)
{
	if (k->req) /* the framed request: it may carry secrets */
		explicit_bzero(k->req, k->req_len);
	free(k->req);
	free(k->sbuf);
	csi_wire_msg_release(&k->resp);
	sem_destroy(&k->finished);
	free(k);
}

/* The call's outcome is final: queue its caller's wake-up, or free it when the caller left. */
static void call_finish(struct csi_conn *c, struct call *k)
{
	call_unlink(c, k);
	if (k->abandoned) {
		c->abandoned--;
		call_free(k);
		return;
	}
	k->done = true;
	k->next = c->finished;
	c->finished = k;
}

/* Releases c->lock, then wakes the callers whose calls finished meanwhile. */
static void unlock_conn(struct csi_conn *c)
{
	struct call *k = c->finished;
	c->finished = NULL;
	pthread_mutex_unlock(&c->lock);
	while (k) {
		struct call *next = k->next; /* k may be freed once posted */
		sem_post(&k->finished);
		k = next;
	}
}

static void call_fail(struct call *k, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void call_fail(struct call *k, int code, const char *fmt, ...)
{
	if (k->local_error)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(k->message, sizeof(k->message), fmt, ap);
	va_end(ap);
	k->code = code;
	k->local_error = true;
}

/* Writes what nghttp2 has queued, as far as the socket takes it. */
static void flush(struct csi_conn *c)
{
	if (!c->sess || c->broken)
		return;
	int rv = nghttp2_session_send(c->sess);
	if (rv != 0)
		mark_broken(c, "HTTP/2 send failed: %s", nghttp2_strerror(rv));
}

/* ---- nghttp2 callbacks (run under c->lock, from whichever thread drives the session) ---- */

static ssize_t on_send(nghttp2_session *s, const uint8_t *data, size_t len, int flags, void *ud)
{
	(void)s, (void)flags;
	struct csi_conn *c = ud;
	ssize_t n = csi_wire_send(c->fd, data, len);
	if (n == NGHTTP2_ERR_CALLBACK_FAILURE)
		mark_broken(c, "write to the driver failed: %s", strerror(errno));
	return n;
}

static ssize_t read_request(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len,
			    uint32_t *flags, nghttp2_data_source *src, void *ud)
{
	(void)s, (void)id, (void)ud;
	struct call *k = src->ptr;
	size_t n = k->req_len - k->req_sent;
	if (n > len)
		n = len;
	memcpy(buf, k->req + k->req_sent, n);
	k->req_sent += n;
	if (k->req_sent == k->req_len)
		*flags |= NGHTTP2_DATA_FLAG_EOF;
	return (ssize_t)n;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nlen,
		     const uint8_t *value, size_t vlen, uint8_t flags, void *ud)
{
	(void)flags, (void)ud;
	if (f->hd.type != NGHTTP2_HEADERS)
		return 0;
	struct call *k = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
	if (!k)
		return 0;
	/* HTTP/2 counts 32 bytes of overhead per field; nghttp2 does not enforce our SETTINGS. */
	k->hdr_bytes += nlen + vlen + 32;
	if (k->hdr_bytes > CSI_WIRE_MAX_HEADER_LIST) {
		call_fail(k, CSI_CODE_INTERNAL, "the driver sent more than %d bytes of headers",
			  CSI_WIRE_MAX_HEADER_LIST);
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* resets the stream */
	}
	if (nlen == 7 && memcmp(name, ":status", 7) == 0) {
		int st = 0;
		for (size_t i = 0; i < vlen && i < 3; i++)
			st = st * 10 + (value[i] >= '0' && value[i] <= '9' ? value[i] - '0' : 0);
		k->http_status = st;
	} else if (nlen == 11 && memcmp(name, "grpc-status", 11) == 0) {
		int code = 0;
		bool ok = vlen > 0 && vlen <= 3;
		for (size_t i = 0; ok && i < vlen; i++) {
			ok = value[i] >= '0' && value[i] <= '9';
			code = code * 10 + value[i] - '0';
		}
		k->have_status = true;
		/* Codes outside gRPC's 0..16 mean nothing to a caller (or to kcsi's exit codes). */
		k->code = ok && code <= CSI_CODE_UNAUTHENTICATED ? code : CSI_CODE_UNKNOWN;
	} else if (nlen == 12 && memcmp(name, "grpc-message", 12) == 0) {
		csi_wire_message_decode(value, vlen, k->message, sizeof(k->message));
	} else if (nlen == 12 && memcmp(name, "content-type", 12) == 0 &&
		   f->headers.cat == NGHTTP2_HCAT_RESPONSE) {
		if (vlen < 16 || memcmp(value, "application/grpc", 16) != 0)
			call_fail(k, CSI_CODE_UNKNOWN, "the driver answered with content-type %.*s, "
				  "not application/grpc", (int)(vlen > 64 ? 64 : vlen), value);
	}
	return 0;
}

static int on_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
		   void *ud)
{
	(void)flags, (void)ud;
	struct call *k = nghttp2_session_get_stream_user_data(s, id);
	if (!k || k->local_error)
		return 0;
	if (k->stream) {
		if (len <= CLIENT_MAX_STREAM_BYTES - k->slen) {
			if (k->slen + len > k->scap) {
				k->scap = k->scap ? k->scap : 4096;
				while (k->scap < k->slen + len)
					k->scap *= 2;
				k->sbuf = xrealloc(k->sbuf, k->scap);
			}
			memcpy(k->sbuf + k->slen, data, len);
			k->slen += len;
			return 0;
		}
		call_fail(k, CSI_CODE_RESOURCE_EXHAUSTED, "the driver's stream of responses passed "
			  "%u MiB", CLIENT_MAX_STREAM_BYTES >> 20);
		nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
		return 0;
	}
	switch (csi_wire_msg_feed(&k->resp, data, len)) {
	case CSI_WIRE_MSG_OK:
		return 0;
	case CSI_WIRE_MSG_TOO_LARGE:
		call_fail(k, CSI_CODE_RESOURCE_EXHAUSTED,
			  "grpc: received message larger than max (%u vs. %zu)", k->resp.len,
			  k->max_recv);
		break;
	case CSI_WIRE_MSG_COMPRESSED:
		call_fail(k, CSI_CODE_INTERNAL,
			  "the driver sent a compressed message; no compression was offered");
		break;
	case CSI_WIRE_MSG_TOO_MANY:
		call_fail(k, CSI_CODE_INTERNAL, "the driver sent more than one response message");
		break;
	}
	nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
	return 0;
}

static int on_frame(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
	(void)s;
	struct csi_conn *c = ud;
	c->last_recv_ns = mono_now_ns();
	if (f->hd.type == NGHTTP2_SETTINGS && !(f->hd.flags & NGHTTP2_FLAG_ACK) &&
	    !c->settings_seen) {
		c->settings_seen = true;
		pthread_cond_broadcast(&c->changed);
	} else if (f->hd.type == NGHTTP2_PING && (f->hd.flags & NGHTTP2_FLAG_ACK)) {
		c->ping_sent_ns = 0;
	} else if (f->hd.type == NGHTTP2_GOAWAY) {
		/*
		 * Calls up to last_stream_id go on; nghttp2 closes the others with REFUSED_STREAM
		 * (UNAVAILABLE). No new call may start; the session ends with the last call.
		 */
		c->goaway = true;
		snprintf(c->broken_why, sizeof(c->broken_why),
			 "the driver is going away (GOAWAY, error code %u)", f->goaway.error_code);
	}
	return 0;
}

static int on_close(nghttp2_session *s, int32_t id, uint32_t error, void *ud)
{
	struct csi_conn *c = ud;
	struct call *k = nghttp2_session_get_stream_user_data(s, id);
	if (!k)
		return 0;
	if (k->local_error) {
		/* keep the error decided here */
	} else if (error == NGHTTP2_CANCEL && k->deadline && mono_now_ns() >= k->deadline) {
		/*
		 * A grpc-go server resets the stream with CANCEL when the grpc-timeout it was sent
		 * runs out; that reset can arrive before this side's wait for the same deadline ends.
		 * The deadline ended the call, so it is DEADLINE_EXCEEDED, as grpc-go's client says.
		 */
		k->code = CSI_CODE_DEADLINE_EXCEEDED;
		snprintf(k->message, sizeof(k->message), "context deadline exceeded");
	} else if (error != NGHTTP2_NO_ERROR) {
		k->code = csi_wire_code_from_rst(error);
		snprintf(k->message, sizeof(k->message), "stream reset by the driver: %s",
			 nghttp2_http2_strerror(error));
	} else if (!k->have_status) {
		if (k->http_status && k->http_status != 200) {
			k->code = csi_wire_code_from_http(k->http_status);
			snprintf(k->message, sizeof(k->message),
				 "unexpected HTTP status code from the driver: %d", k->http_status);
		} else {
			k->code = CSI_CODE_INTERNAL;
			snprintf(k->message, sizeof(k->message),
				 "the driver closed the stream without a gRPC status");
		}
	} else if (k->code == CSI_CODE_OK && !k->stream && !csi_wire_msg_complete(&k->resp)) {
		k->code = CSI_CODE_INTERNAL;
		snprintf(k->message, sizeof(k->message), csi_wire_msg_empty(&k->resp) ?
			 "driver sent no response message" :
			 "driver sent a truncated response message");
	}
	call_finish(c, k);
	return 0;
}

/* ---- socket and session ---- */

static int open_socket(const char *path, int *fd_out, int *err_out)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		*err_out = errno;
		return -1;
	}
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	int rc;
	do
		rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	while (rc != 0 && errno == EINTR);
	if (rc != 0) {
		*err_out = errno;
		close(fd);
		return -1;
	}
	/* Connected before going non-blocking: a unix connect either succeeds or fails now. */
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	*fd_out = fd;
	return 0;
}

/* Starts a session on a connected socket and queues the preface and SETTINGS (lock held). */
static int start_session(struct csi_conn *c, int fd, char *err, size_t errlen)
{
	nghttp2_session_callbacks *cb;
	if (nghttp2_session_callbacks_new(&cb) != 0) {
		errbuf_printf(err, errlen, "out of memory for an HTTP/2 session");
		return -1;
	}
	nghttp2_session_callbacks_set_send_callback(cb, on_send);
	nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
	nghttp2_option *opt;
	if (nghttp2_option_new(&opt) != 0) {
		nghttp2_session_callbacks_del(cb);
		errbuf_printf(err, errlen, "out of memory for an HTTP/2 session");
		return -1;
	}
	nghttp2_option_set_max_send_header_block_length(opt, CSI_WIRE_MAX_HEADER_LIST);
	/*
	 * grpc-go sends grpc-message with a status message's leading and trailing spaces as they
	 * are; nghttp2 would reset such a stream (RFC 9113 8.2.1) and the call would end INTERNAL
	 * instead of with the driver's code (e2e.grpc_interop_go, status).
	 */
	nghttp2_option_set_no_rfc9113_leading_and_trailing_ws_validation(opt, 1);
	int rv = nghttp2_session_client_new2(&c->sess, cb, c, opt);
	nghttp2_option_del(opt);
	nghttp2_session_callbacks_del(cb);
	if (rv != 0) {
		errbuf_printf(err, errlen, "cannot start an HTTP/2 session: %s", nghttp2_strerror(rv));
		c->sess = NULL;
		return -1;
	}
	nghttp2_settings_entry iv[] = {
		{ NGHTTP2_SETTINGS_ENABLE_PUSH, 0 },
		{ NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, CLIENT_STREAM_WINDOW },
		{ NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, CSI_WIRE_MAX_HEADER_LIST },
	};
	nghttp2_submit_settings(c->sess, NGHTTP2_FLAG_NONE, iv, sizeof(iv) / sizeof(iv[0]));
	nghttp2_session_set_local_window_size(c->sess, NGHTTP2_FLAG_NONE, 0, CLIENT_CONN_WINDOW);
	c->fd = fd;
	c->settings_seen = false;
	c->broken = false;
	c->goaway = false;
	c->last_recv_ns = mono_now_ns();
	c->ping_sent_ns = 0;
	flush(c);
	wake_io(c);
	return 0;
}

/* Closes a broken connection and ends every call in flight (I/O thread, lock held). */
static void teardown(struct csi_conn *c)
{
	while (c->calls) {
		struct call *k = c->calls;
		call_fail(k, CSI_CODE_UNAVAILABLE, "connection to the CSI driver at %s lost: %s",
			  c->endpoint, c->broken_why);
		call_finish(c, k);
	}
	nghttp2_session_del(c->sess);
	c->sess = NULL;
	close(c->fd);
	c->fd = -1;
	c->settings_seen = false;
	bool report = c->ever_connected && !c->lost_reported;
	if (c->ever_connected) {
		atomic_store(&c->lost, true);
		c->lost_reported = true;
	}
	char why[sizeof(c->broken_why)];
	memcpy(why, c->broken_why, sizeof(why));
	c->broken = false;
	pthread_cond_broadcast(&c->changed);
	if (report) {
		unlock_conn(c);
		KLOG_ERR(why, "Lost connection to CSI driver at %s", c->endpoint);
		if (c->opts.on_lost)
			c->opts.on_lost(c->opts.on_lost_arg);
		pthread_mutex_lock(&c->lock);
	}
}

/* Milliseconds until the keepalive needs attention, or -1 (lock held). */
static int keepalive_tick(struct csi_conn *c)
{
	int64_t ka = c->opts.keepalive_ns;
	if (ka <= 0 || !c->sess || !c->settings_seen)
		return -1;
	int64_t now = mono_now_ns();
	if (c->ping_sent_ns) {
		if (now - c->ping_sent_ns >= ka) {
			mark_broken(c, "keepalive ping not answered within %lld ms",
				    (long long)(ka / NSEC_PER_MSEC));
			return 0;
		}
		return (int)((c->ping_sent_ns + ka - now) / NSEC_PER_MSEC) + 1;
	}
	if (now - c->last_recv_ns >= ka) {
		nghttp2_submit_ping(c->sess, NGHTTP2_FLAG_NONE, NULL);
		c->ping_sent_ns = now;
		flush(c);
		return (int)(ka / NSEC_PER_MSEC) + 1;
	}
	return (int)((c->last_recv_ns + ka - now) / NSEC_PER_MSEC) + 1;
}

static void *io_main(void *arg)
{
	struct csi_conn *c = arg;
	enum { BUFLEN = 64 * 1024 };
	uint8_t *buf = xmalloc(BUFLEN); /* the I/O thread's alone: one per connection */
	pthread_mutex_lock(&c->lock);
	while (!c->stopping) {
		if (c->broken && c->sess) {
			teardown(c);
			continue;
		}
		int fd = c->fd;
		struct pollfd p[2] = { { .fd = c->wake[0], .events = POLLIN },
				       { .fd = fd, .events = POLLIN } };
		if (c->sess && nghttp2_session_want_write(c->sess))
			p[1].events |= POLLOUT;
		int timeout = keepalive_tick(c);
		if (c->broken)
			continue;
		unlock_conn(c);
		int n = poll(p, fd >= 0 ? 2 : 1, timeout);
		if (n > 0 && (p[0].revents & POLLIN)) {
			char drain[64];
			while (read(c->wake[0], drain, sizeof(drain)) > 0)
				;
		}
		ssize_t r = 0;
		int rerr = 0;
		if (fd >= 0 && n > 0 && (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
			r = recv(fd, buf, BUFLEN, 0);
			if (r < 0)
				rerr = errno;
		}
		pthread_mutex_lock(&c->lock);
		if (fd < 0 || c->fd != fd || c->broken)
			continue;
		if (r > 0) {
			ssize_t rv = nghttp2_session_mem_recv(c->sess, buf, (size_t)r);
			if (rv < 0)
				mark_broken(c, "HTTP/2 protocol error from the driver: %s",
					    nghttp2_strerror((int)rv));
		} else if (r == 0 && n > 0 && (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
			mark_broken(c, "the driver closed the connection");
		} else if (r < 0 && rerr != EAGAIN && rerr != EINTR) {
			mark_broken(c, "read from the driver failed: %s", strerror(rerr));
		}
		flush(c);
		if (!c->broken && !nghttp2_session_want_read(c->sess) &&
		    !nghttp2_session_want_write(c->sess)) {
			char why[sizeof(c->broken_why)];
			snprintf(why, sizeof(why), "%s",
				 c->goaway ? c->broken_why : "the HTTP/2 session ended");
			mark_broken(c, "%s", why);
		}
	}
	unlock_conn(c);
	free(buf);
	return NULL;
}

/*
 * Connects the socket if the connection is down (lock held). Returns 0, or -1 with the errno
 * of the failed connect in *err_out (ENOENT: no socket file yet; ECONNREFUSED: nobody listens).
 */
static int ensure_socket(struct csi_conn *c, int *err_out, char *err, size_t errlen)
{
	if (c->sess)
		return 0;
	int fd;
	if (open_socket(c->path, &fd, err_out)) {
		errbuf_printf(err, errlen, "cannot connect to %s: %s", c->endpoint, strerror(*err_out));
		return -1;
	}
	if (start_session(c, fd, err, errlen)) {
		close(fd);
		*err_out = ENOMEM;
		return -1;
	}
	return 0;
}

/* Waits (lock held) until the handshake is done or the deadline (monotonic ns, 0: none) passed. */
static int wait_handshake(struct csi_conn *c, int64_t deadline)
{
	while (c->sess && !c->settings_seen && !c->broken && !c->stopping) {
		int64_t until = deadline;
		if (!until || until - mono_now_ns() > NSEC_PER_SEC)
			until = mono_now_ns() + NSEC_PER_SEC;
		struct timespec ts = wall_deadline(until - mono_now_ns());
		pthread_cond_timedwait(&c->changed, &c->lock, &ts);
		if (deadline && mono_now_ns() >= deadline)
			break;
	}
	return c->sess && c->settings_seen && !c->broken ? 0 : -1;
}

struct csi_conn *csi_connect(const char *endpoint, const struct csi_conn_opts *opts, char *err,
			     size_t errlen)
{
	static const struct csi_conn_opts defaults = CSI_CONN_OPTS_INIT;
	char *path;
	if (csi_endpoint_path(endpoint, &path, err, errlen))
		return NULL;
	struct csi_conn *c = xcalloc(1, sizeof(*c));
	c->endpoint = xstrdup(endpoint);
	c->path = path;
	c->fd = -1;
	c->opts = opts ? *opts : defaults;
	if (c->opts.log_interval_ns <= 0)
		c->opts.log_interval_ns = 10 * NSEC_PER_SEC;
	if (c->opts.max_recv_bytes <= 0)
		c->opts.max_recv_bytes = 4 * 1024 * 1024;
	atomic_init(&c->lost, false);
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->changed, NULL);
	if (pipe2(c->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
		errbuf_printf(err, errlen, "cannot create a pipe: %s", strerror(errno));
		c->wake[0] = c->wake[1] = -1;
		goto fail;
	}
	int rc = pthread_create(&c->io, NULL, io_main, c);
	if (rc != 0) {
		errbuf_printf(err, errlen, "cannot start the connection's I/O thread: %s", strerror(rc));
		goto fail;
	}
	c->io_running = true;

	int64_t start = mono_now_ns(), last_log = start;
	int64_t deadline = c->opts.connect_timeout_ns > 0 ? start + c->opts.connect_timeout_ns : 0;
	KLOG_V(2, "Connecting to %s", endpoint);
	pthread_mutex_lock(&c->lock);
	for (;;) {
		int cerr = 0;
		char why[256] = "";
		int sock = ensure_socket(c, &cerr, why, sizeof(why));
		if (sock == 0 && wait_handshake(c, deadline) == 0)
			break;
		int64_t now = mono_now_ns();
		if (c->opts.fail_fast && (sock != 0 || !deadline || now < deadline)) { /* it broke */
			unlock_conn(c);
			csi_endpoint_why(c->path, cerr, c->broken_why, err, errlen);
			goto fail;
		}
		if (deadline && now >= deadline) {
			unlock_conn(c);
			if (cerr == ENOENT)
				errbuf_printf(err, errlen, "timed out waiting for CSI socket %s to appear",
					c->path);
			else
				errbuf_printf(err, errlen, "timed out connecting to CSI driver at %s%s%s",
					c->endpoint, why[0] ? ": " : "", why);
			goto fail;
		}
		if (now - last_log >= c->opts.log_interval_ns) {
			KLOG_W("Still connecting to %s%s", c->endpoint,
			       cerr == ENOENT ? ": socket does not exist yet" : "");
			last_log = now;
		}
		unlock_conn(c);
		sleep_ns(50 * NSEC_PER_MSEC);
		pthread_mutex_lock(&c->lock);
	}
	c->ever_connected = true;
	unlock_conn(c);
	KLOG_V(2, "Connected to %s", endpoint);
	return c;
fail:
	csi_conn_free(c);
	return NULL;
}

const struct csi_conn_opts *csi_conn_opts(const struct csi_conn *c)
{
	return &c->opts;
}

const char *csi_conn_endpoint(const struct csi_conn *c)
{
	return c->endpoint;
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
	c->stopping = true;
	unlock_conn(c);
	if (c->io_running) {
		wake_io(c);
		pthread_join(c->io, NULL);
	}
	/* No caller may be inside a call now; abandoned calls still belong to the session. */
	while (c->calls) {
		struct call *k = c->calls;
		call_unlink(c, k);
		call_free(k);
	}
	nghttp2_session_del(c->sess);
	if (c->fd >= 0)
		close(c->fd);
	for (int i = 0; i < 2; i++)
		if (c->wake[i] >= 0)
			close(c->wake[i]);
	pthread_cond_destroy(&c->changed);
	pthread_mutex_destroy(&c->lock);
	free(c->endpoint);
	free(c->path);
	free(c);
}

/* Submits the call's stream (lock held). 0, or -1 with the call failed. */
static int submit(struct csi_conn *c, struct call *k, const char *method, int64_t timeout_ns)
{
	char tmo[16];
#define NV(n, v) { (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), \
		   NGHTTP2_NV_FLAG_NO_COPY_NAME }
	nghttp2_nv nva[8] = {
		NV(":method", "POST"), NV(":scheme", "http"), NV(":path", method),
		NV(":authority", "localhost"), NV("content-type", "application/grpc"),
		NV("te", "trailers"), NV("user-agent", kcsi_csi_user_agent),
	};
	size_t n = 7;
	if (timeout_ns > 0) {
		csi_wire_timeout_format(timeout_ns, tmo);
		nva[n++] = (nghttp2_nv)NV("grpc-timeout", tmo);
	}
#undef NV
	if (c->goaway) {
		call_fail(k, CSI_CODE_UNAVAILABLE, "connection to the CSI driver at %s: %s",
			  c->endpoint, c->broken_why);
		return -1;
	}
	nghttp2_data_provider prd = { .source.ptr = k, .read_callback = read_request };
	int32_t id = nghttp2_submit_request(c->sess, NULL, nva, n, &prd, k);
	if (id < 0) {
		call_fail(k, CSI_CODE_UNAVAILABLE, "cannot start a call on the connection to %s: %s",
			  c->endpoint, nghttp2_strerror(id));
		/* Stream IDs used up or GOAWAY received: a new connection is needed. */
		mark_broken(c, "no new stream possible: %s", nghttp2_strerror(id));
		wake_io(c);
		return -1;
	}
	k->stream_id = id;
	k->next = c->calls;
	if (c->calls)
		c->calls->prev = k;
	c->calls = k;
	flush(c);
	if (nghttp2_session_want_write(c->sess) || c->broken)
		wake_io(c);
	return 0;
}

/* Waits for a post until deadline (monotonic ns; 0: none); false when the deadline passed. */
static bool sem_sleep(sem_t *sem, int64_t deadline)
{
	struct timespec ts = { deadline / NSEC_PER_SEC, deadline % NSEC_PER_SEC };
	for (;;) {
		if (!(deadline ? sem_clockwait(sem, CLOCK_MONOTONIC, &ts) : sem_wait(sem)))
			return true;
		if (errno == ETIMEDOUT)
			return false;
	}
}

static int call_run(struct csi_conn *c, const char *method, const void *data, size_t len,
		    bool stream, void **out, size_t *outlen, int64_t timeout_ns,
		    struct csi_status *st);

int csi_call_bytes(struct csi_conn *c, const char *method, const void *data, size_t len,
		   void **out, size_t *outlen, int64_t timeout_ns, struct csi_status *st)
{
	return call_run(c, method, data, len, false, out, outlen, timeout_ns, st);
}

int csi_call_stream_bytes(struct csi_conn *c, const char *method, const void *data, size_t len,
			  void **out, size_t *outlen, int64_t timeout_ns, struct csi_status *st)
{
	return call_run(c, method, data, len, true, out, outlen, timeout_ns, st);
}

static int call_run(struct csi_conn *c, const char *method, const void *data, size_t len,
		    bool stream, void **out, size_t *outlen, int64_t timeout_ns,
		    struct csi_status *st)
{
	struct csi_status local;
	if (!st)
		st = &local;
	st->code = 0;
	st->message[0] = '\0';
	*out = NULL;
	*outlen = 0;
	if (len > UINT32_MAX) {
		st->code = CSI_CODE_RESOURCE_EXHAUSTED;
		snprintf(st->message, sizeof(st->message), "request of %zu bytes is too large", len);
		return st->code;
	}
	int64_t deadline = timeout_ns > 0 ? mono_now_ns() + timeout_ns : 0;

	struct call *k = xcalloc(1, sizeof(*k));
	k->req_len = len + 5;
	k->req = xmalloc(k->req_len);
	csi_wire_msg_prefix(k->req, (uint32_t)len);
	if (len)
		memcpy(k->req + 5, data, len);
	k->max_recv = (size_t)c->opts.max_recv_bytes;
	k->stream = stream;
	k->deadline = deadline;
	csi_wire_msg_init(&k->resp, k->max_recv);
	sem_init(&k->finished, 0, 0);

	pthread_mutex_lock(&c->lock);
	char why[256] = "";
	int cerr = 0;
	if (c->stopping) {
		call_fail(k, CSI_CODE_UNAVAILABLE, "connection to %s is closing", c->endpoint);
	} else if (c->broken) {
		call_fail(k, CSI_CODE_UNAVAILABLE, "connection to the CSI driver at %s lost: %s",
			  c->endpoint, c->broken_why);
	} else if (ensure_socket(c, &cerr, why, sizeof(why)) != 0 ||
		   wait_handshake(c, deadline) != 0) {
		call_fail(k, deadline && mono_now_ns() >= deadline ? CSI_CODE_DEADLINE_EXCEEDED :
			  CSI_CODE_UNAVAILABLE, "%s", why[0] && cerr ? why :
			  "connection to the CSI driver is not ready");
	} else {
		submit(c, k, method, timeout_ns);
	}
	/* Failed before it had a stream: never on the session, so nobody posts it. */
	bool wait = !(k->local_error && !k->stream_id);
	unlock_conn(c);
	if (wait && !sem_sleep(&k->finished, deadline)) {
		pthread_mutex_lock(&c->lock);
		if (!k->done) {
			/* The session keeps the record until nghttp2 closes the stream. */
			k->abandoned = true;
			if (++c->abandoned > CLIENT_MAX_ABANDONED) {
				mark_broken(c, "%d calls past their deadline are still unsent or unanswered: "
					    "the driver stopped reading", c->abandoned);
				wake_io(c);
			}
			if (c->sess && !c->broken) {
				nghttp2_submit_rst_stream(c->sess, NGHTTP2_FLAG_NONE, k->stream_id,
							  NGHTTP2_CANCEL);
				flush(c);
				wake_io(c);
			}
			unlock_conn(c);
			st->code = CSI_CODE_DEADLINE_EXCEEDED;
			snprintf(st->message, sizeof(st->message), "context deadline exceeded");
			return st->code;
		}
		/* It finished as the clock ran out: its post is queued or made; take it. */
		unlock_conn(c);
		sem_sleep(&k->finished, 0);
	}
	/* Done and off the session: k is the caller's alone now. */
	st->code = k->code;
	snprintf(st->message, sizeof(st->message), "%s", k->message);
	if (stream) {
		/* Whatever arrived, also before an error: the caller hands on the whole messages. */
		*out = k->sbuf ? k->sbuf : xmalloc(1);
		*outlen = k->slen;
		k->sbuf = NULL;
	} else if (st->code == CSI_CODE_OK) {
		size_t n;
		uint8_t *b = csi_wire_msg_take(&k->resp, &n);
		*out = b ? b : xmalloc(1);
		*outlen = n;
	}
	call_free(k);
	return st->code;
}
