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
 *
 * The files: this one is the server's life (new, start, stop, run, free); server_io.c its
 * threads, server_h2.c the HTTP/2 side, server_call.c one call (server_int.h has the layers).
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
	srv_wake_io(s);
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
	int rc = pthread_create(&s->io, NULL, srv_io_main, s);
	if (rc != 0) {
		errbuf_printf(err, errlen, "cannot start the server's I/O thread: %s", strerror(rc));
		goto fail_unlink;
	}
	s->io_running = true;
	for (int i = 0; i < s->opts.threads; i++) {
		rc = pthread_create(&s->workers[i], NULL, srv_worker_main, s);
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
	srv_wake_io(s);
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
