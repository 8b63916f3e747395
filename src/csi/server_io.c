/*
 * The CSI server's threads: the I/O thread polls the listening socket and every connection,
 * accepts, reads into the sessions and writes what they queued (and stops reading a peer with
 * CSI_SERVER_MAX_OUTBOUND frames it does not read); the workers take queued calls, run them
 * without the lock and answer on the session.
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

/* ---- workers ---- */

void *srv_worker_main(void *arg)
{
	struct csi_server *s = arg;
	pthread_mutex_lock(&s->lock);
	for (;;) {
		while (!s->qhead && !s->workers_exit)
			pthread_cond_wait(&s->work, &s->lock);
		struct sstream *st = s->qhead;
		if (!st)
			break;
		srv_queue_unlink(s, st);
		/* The worker owns it from here: on_close() must only mark it closed. */
		st->state = ST_RUNNING;
		if (st->deadline && mono_now_ns() >= st->deadline) {
			srv_answer_error(st, CSI_CODE_DEADLINE_EXCEEDED, "context deadline exceeded");
			srv_flush(st->conn);
			srv_wake_io(s);
			srv_job_done(s, st);
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
		int code = srv_dispatch(s, &ctx, req ? req : (const uint8_t *)"", len, &out, &outlen);
		free(req);
		uint8_t *framed = NULL;
		size_t framed_len = outlen + 5;
		if (code == 0 && ctx.streaming) {
			framed = out; /* already a sequence of framed messages */
			framed_len = outlen;
			out = NULL;
		} else if (code == 0) {
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
		srv_answer(st, code, ctx.message, framed, framed_len);
		csi_arena_free(ctx.arena);
		struct sconn *cn = st->conn;
		srv_flush(cn);
		if (!cn->dead && nghttp2_session_want_write(cn->sess))
			srv_wake_io(s);
		if (cn->dead)
			srv_wake_io(s);
		srv_job_done(s, st);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
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
		struct sconn *cn = srv_conn_new(s, fd);
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
	srv_flush(cn);
	if (!cn->dead && !nghttp2_session_want_read(cn->sess) &&
	    !nghttp2_session_want_write(cn->sess))
		cn->dead = true;
}

void *srv_io_main(void *arg)
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
				srv_flush(cn);
			}
		}
		bool pending = false;
		for (struct sconn *cn = s->conns, *next; cn; cn = next) {
			next = cn->next;
			if (cn->dead)
				srv_conn_close(s, cn);
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
		srv_conn_close(s, s->conns);
	pthread_mutex_unlock(&s->lock);
	free(p);
	free(pc);
	free(buf);
	return NULL;
}
