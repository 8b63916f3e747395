/*
 * diag: libmicrohttpd-based diagnostics endpoint (see diag.h).
 *
 * Routes live in a small fixed array guarded by a mutex: a sidecar registers two or three paths,
 * so a linear search is the simplest correct thing. Responses are built in memory per request;
 * nothing here streams.
 *
 * A deferred route suspends its connection (libmicrohttpd stops polling it) until
 * diag_reply_finish() stores the answer and resumes it; libmicrohttpd then calls answer() again
 * for the same request, which finds the reply in the request's context and queues it. The reply
 * is freed when the request completes. The server's mutex orders the two threads: the handler's
 * return (suspend, unless already finished) and diag_reply_finish() (resume, if suspended).
 */
#include "base/diag.h"
#include "base/xalloc.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <malloc.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdbool.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"

#define DIAG_MAX_ROUTES 16
/* Memory for one request's head and the answer's headers: a GET from a prober fits in 1 KiB. */
#define DIAG_CONN_MEMORY (16 * 1024)
#define DIAG_IDLE_TIMEOUT_S 30
/* Files the rest of the program may still open when its servers hold every connection. */
#define DIAG_RESERVED_FDS 256
/* Accepted but not yet taken connections the kernel keeps (it caps this at somaxconn). */
#define DIAG_LISTEN_BACKLOG 4096
/* Open connections after which memory is given back once they have gone (connection_notify). */
#define DIAG_TRIM_AFTER 128

struct diag_route {
	char *path;
	diag_handler_fn fn;       /* or: */
	diag_deferred_fn deferred;
	void *ud;
};

struct diag_server {
	struct MHD_Daemon *daemon;
	int fd;
	int port;
	pthread_mutex_t lock;
	struct diag_route routes[DIAG_MAX_ROUTES];
	size_t nroutes;
	size_t suspended; /* replies handed out and not finished (guarded by lock) */
	/* the server's thread only: */
	size_t conns;     /* open connections */
	size_t conns_high; /* the most open since memory was last given back */
};

/* One deferred request; its connection's request context from the handler's call to completion. */
struct diag_reply {
	struct diag_server *s;
	struct MHD_Connection *conn;
	/* Guarded by s->lock: */
	bool done;      /* diag_reply_finish() ran */
	bool suspended; /* the connection is suspended, waiting for it */
	int status;
	char *body;
};

int diag_split_address(const char *address, char *host, size_t hostlen, int *port)
{
	const char *colon;
	char *end;
	long p;
	size_t hl;

	if (address[0] == '[') {
		const char *close = strchr(address, ']');
		if (!close || close[1] != ':')
			return -1;
		hl = (size_t)(close - address - 1);
		if (hl + 1 > hostlen)
			return -1;
		memcpy(host, address + 1, hl);
		host[hl] = '\0';
		colon = close + 1;
	} else {
		colon = strrchr(address, ':');
		if (!colon)
			return -1;
		hl = (size_t)(colon - address);
		if (hl + 1 > hostlen || memchr(address, ':', hl))
			return -1;
		memcpy(host, address, hl);
		host[hl] = '\0';
	}
	errno = 0;
	p = strtol(colon + 1, &end, 10);
	if (colon[1] == '\0' || *end || errno || p < 0 || p > 65535)
		return -1;
	*port = (int)p;
	return 0;
}

static int listen_socket(const char *address, int *port_out, char *err, size_t errlen)
{
	char host[256], portstr[16];
	struct addrinfo hints = { 0 }, *res = NULL, *ai;
	int port, fd = -1, rc, one = 1;

	if (diag_split_address(address, host, sizeof(host), &port)) {
		snprintf(err, errlen, "invalid address %s: want host:port, :port or [ipv6]:port",
			 address);
		return -1;
	}
	snprintf(portstr, sizeof(portstr), "%d", port);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE;
	rc = getaddrinfo(host[0] ? host : NULL, portstr, &hints, &res);
	if (rc) {
		snprintf(err, errlen, "cannot resolve %s: %s", address, gai_strerror(rc));
		return -1;
	}
	/* Prefer IPv6 any-address for ":port" (it accepts IPv4 too), as Go does. */
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, DIAG_LISTEN_BACKLOG) == 0)
			break;
		snprintf(err, errlen, "cannot listen on %s: %s", address, strerror(errno));
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return -1;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	getsockname(fd, (struct sockaddr *)&ss, &sl);
	*port_out = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
						   : ((struct sockaddr_in *)&ss)->sin_port);
	return fd;
}

static enum MHD_Result queue(struct MHD_Connection *conn, int status, const char *ctype,
				  char *data, size_t len)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
	MHD_add_response_header(r, "Content-Type", ctype);
	enum MHD_Result ret = MHD_queue_response(conn, (unsigned)status, r);
	MHD_destroy_response(r);
	return ret;
}

/* A deferred route's request: the handler finished it at once, or the connection waits. */
static enum MHD_Result defer(struct diag_server *s, struct MHD_Connection *conn,
			     const struct diag_route *rt, void **con_cls)
{
	struct diag_reply *r = xcalloc(1, sizeof(*r));

	r->s = s;
	r->conn = conn;
	*con_cls = r;
	rt->deferred(rt->ud, r);
	pthread_mutex_lock(&s->lock);
	if (!r->done) {
		r->suspended = true;
		s->suspended++;
		MHD_suspend_connection(conn);
		pthread_mutex_unlock(&s->lock);
		return MHD_YES;
	}
	pthread_mutex_unlock(&s->lock);
	return queue(conn, r->status, "text/plain; charset=utf-8", xstrdup(r->body),
		     strlen(r->body));
}

void diag_reply_finish(struct diag_reply *r, int status, const char *body)
{
	struct diag_server *s = r->s;

	pthread_mutex_lock(&s->lock);
	assert(!r->done);
	r->status = status;
	r->body = xstrdup(body);
	r->done = true;
	if (r->suspended) {
		s->suspended--;
		MHD_resume_connection(r->conn);
	}
	pthread_mutex_unlock(&s->lock);
}

static void request_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			      enum MHD_RequestTerminationCode toe)
{
	struct diag_reply *r = *con_cls;

	(void)cls;
	(void)conn;
	(void)toe;
	if (!r)
		return;
	free(r->body);
	free(r);
	*con_cls = NULL;
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *conn, const char *url,
			      const char *method, const char *version, const char *upload_data,
			      size_t *upload_size, void **con_cls)
{
	struct diag_server *s = cls;
	struct diag_reply *r = *con_cls;
	struct strbuf body = STRBUF_INIT;
	const char *ctype = "text/plain; charset=utf-8";
	struct diag_route rt = { 0 };
	int status;

	(void)version;
	(void)upload_data;
	*upload_size = 0;
	if (r) { /* resumed: the deferred answer is in */
		pthread_mutex_lock(&s->lock);
		assert(r->done);
		status = r->status;
		strbuf_addstr(&body, r->body);
		pthread_mutex_unlock(&s->lock);
	} else if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
		status = MHD_HTTP_METHOD_NOT_ALLOWED;
		strbuf_addstr(&body, "method not allowed\n");
	} else {
		pthread_mutex_lock(&s->lock);
		for (size_t i = 0; i < s->nroutes; i++)
			if (strcmp(s->routes[i].path, url) == 0)
				rt = s->routes[i];
		pthread_mutex_unlock(&s->lock);
		if (rt.deferred)
			return defer(s, conn, &rt, con_cls);
		if (rt.fn) {
			status = rt.fn(rt.ud, &body, &ctype);
		} else {
			status = MHD_HTTP_NOT_FOUND;
			strbuf_addstr(&body, "404 page not found\n");
		}
	}
	size_t len;
	char *data = strbuf_detach(&body, &len);
	return queue(conn, status, ctype, data, len);
}

/*
 * Connections come and go on the server's thread. A crowd of them (a thousand idle clients)
 * leaves their freed memory inside malloc's heap, where it stays resident: once the crowd has
 * gone (a quarter of its peak left), the heap's free pages go back to the system.
 */
static void connection_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
			      enum MHD_ConnectionNotificationCode toe)
{
	struct diag_server *s = cls;

	(void)conn;
	(void)socket_context;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		if (++s->conns > s->conns_high)
			s->conns_high = s->conns;
		return;
	}
	assert(s->conns > 0);
	s->conns--;
	if (s->conns_high >= DIAG_TRIM_AFTER && s->conns <= s->conns_high / 4) {
		malloc_trim(0);
		s->conns_high = s->conns;
	}
}

/* libmicrohttpd's messages (a client that sent garbage, the connection limit) are not ours to
 * print at every hostile connection: they go to -v=4. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char buf[512];
	size_t n;

	(void)cls;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	n = strlen(buf);
	while (n && buf[n - 1] == '\n')
		buf[--n] = '\0';
	KLOG_V(4, "libmicrohttpd: %s", buf);
}

static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* As many connections as the process may open files, less a reserve for its other work. */
static unsigned connection_limit(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	struct rlimit rl;

	pthread_once(&once, raise_nofile);
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur > (1u << 20))
		return 1u << 20;
	if (rl.rlim_cur <= 2 * DIAG_RESERVED_FDS)
		return (unsigned)rl.rlim_cur / 2;
	return (unsigned)rl.rlim_cur - DIAG_RESERVED_FDS;
}

struct diag_server *diag_server_start(const char *address, char *err, size_t errlen)
{
	struct diag_server *s;
	int port, fd = listen_socket(address, &port, err, errlen);

	if (fd < 0)
		return NULL;
	s = xcalloc(1, sizeof(*s));
	pthread_mutex_init(&s->lock, NULL);
	s->fd = fd;
	s->port = port;
	s->daemon = MHD_start_daemon(MHD_USE_POLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME |
					     MHD_USE_ERROR_LOG,
				     0, NULL, NULL, answer, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
				     MHD_OPTION_LISTEN_SOCKET, fd,
				     MHD_OPTION_NOTIFY_COMPLETED, request_completed, NULL,
				     MHD_OPTION_NOTIFY_CONNECTION, connection_notify, s,
				     MHD_OPTION_CONNECTION_LIMIT, connection_limit(),
				     MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)DIAG_CONN_MEMORY,
				     MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)DIAG_IDLE_TIMEOUT_S,
				     MHD_OPTION_END);
	if (!s->daemon) {
		snprintf(err, errlen, "cannot start HTTP server on %s", address);
		close(fd);
		pthread_mutex_destroy(&s->lock);
		free(s);
		return NULL;
	}
	return s;
}

void diag_server_handle(struct diag_server *s, const char *path, diag_handler_fn fn, void *ud)
{
	pthread_mutex_lock(&s->lock);
	if (s->nroutes < DIAG_MAX_ROUTES) {
		s->routes[s->nroutes].path = xstrdup(path);
		s->routes[s->nroutes].fn = fn;
		s->routes[s->nroutes].ud = ud;
		s->nroutes++;
	}
	pthread_mutex_unlock(&s->lock);
}

void diag_server_handle_deferred(struct diag_server *s, const char *path, diag_deferred_fn fn,
				 void *ud)
{
	pthread_mutex_lock(&s->lock);
	if (s->nroutes < DIAG_MAX_ROUTES) {
		s->routes[s->nroutes].path = xstrdup(path);
		s->routes[s->nroutes].deferred = fn;
		s->routes[s->nroutes].ud = ud;
		s->nroutes++;
	}
	pthread_mutex_unlock(&s->lock);
}

int diag_server_port(const struct diag_server *s)
{
	return s->port;
}

void diag_server_stop(struct diag_server *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	/* libmicrohttpd cannot stop with a suspended connection; the owner of the replies finishes
	 * them first */
	assert(s->suspended == 0);
	pthread_mutex_unlock(&s->lock);
	MHD_stop_daemon(s->daemon);
	close(s->fd);
	for (size_t i = 0; i < s->nroutes; i++)
		free(s->routes[i].path);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

static long count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	long n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the directory stream's own fd */
}

void diag_render_process_metrics(struct strbuf *out)
{
	long page = sysconf(_SC_PAGESIZE), ticks = sysconf(_SC_CLK_TCK);
	unsigned long long utime = 0, stime = 0, start = 0, vsize = 0;
	long long rss = 0;
	struct rlimit rl;
	char buf[2048];
	FILE *f;

	f = fopen("/proc/self/stat", "r");
	if (f) {
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		buf[n] = '\0';
		fclose(f);
		/* Fields after the command name (which may hold spaces) start after the last ')'. */
		char *p = strrchr(buf, ')');
		if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu "
				"%*d %*d %*d %*d %*d %*d %llu %llu %lld",
				&utime, &stime, &start, &vsize, &rss) != 5)
			utime = stime = start = vsize = 0, rss = 0;
	}
	double boot = 0;
	f = fopen("/proc/stat", "r");
	if (f) {
		while (fgets(buf, sizeof(buf), f))
			if (sscanf(buf, "btime %lf", &boot) == 1)
				break;
		fclose(f);
	}
	strbuf_addf(out, "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n"
			 "# TYPE process_cpu_seconds_total counter\n"
			 "process_cpu_seconds_total %.2f\n",
		    (double)(utime + stime) / (double)ticks);
	strbuf_addf(out, "# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
			 "# TYPE process_resident_memory_bytes gauge\n"
			 "process_resident_memory_bytes %lld\n",
		    rss * page);
	strbuf_addf(out, "# HELP process_virtual_memory_bytes Virtual memory size in bytes.\n"
			 "# TYPE process_virtual_memory_bytes gauge\n"
			 "process_virtual_memory_bytes %llu\n",
		    vsize);
	strbuf_addf(out, "# HELP process_open_fds Number of open file descriptors.\n"
			 "# TYPE process_open_fds gauge\n"
			 "process_open_fds %ld\n",
		    count_fds());
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		strbuf_addf(out, "# HELP process_max_fds Maximum number of open file descriptors.\n"
				 "# TYPE process_max_fds gauge\n"
				 "process_max_fds %llu\n",
			    (unsigned long long)rl.rlim_cur);
	strbuf_addf(out, "# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.\n"
			 "# TYPE process_start_time_seconds gauge\n"
			 "process_start_time_seconds %.2f\n",
		    boot + (double)start / (double)ticks);
}
