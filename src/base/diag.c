/*
 * diag: libmicrohttpd-based diagnostics endpoint (see diag.h).
 *
 * Routes live in a small fixed array guarded by a mutex: a sidecar registers two or three paths,
 * so a linear search is the simplest correct thing. Responses are built in memory per request;
 * nothing here streams.
 */
#include "base/diag.h"
#include "base/xalloc.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#define DIAG_MAX_ROUTES 16

struct diag_route {
	char *path;
	diag_handler_fn fn;
	void *ud;
};

struct diag_server {
	struct MHD_Daemon *daemon;
	int fd;
	int port;
	pthread_mutex_t lock;
	struct diag_route routes[DIAG_MAX_ROUTES];
	size_t nroutes;
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
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 64) == 0)
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

static enum MHD_Result answer(void *cls, struct MHD_Connection *conn, const char *url,
			      const char *method, const char *version, const char *upload_data,
			      size_t *upload_size, void **con_cls)
{
	struct diag_server *s = cls;
	struct strbuf body = STRBUF_INIT;
	const char *ctype = "text/plain; charset=utf-8";
	diag_handler_fn fn = NULL;
	void *ud = NULL;
	int status;

	(void)version;
	(void)upload_data;
	(void)con_cls;
	*upload_size = 0;
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
		status = MHD_HTTP_METHOD_NOT_ALLOWED;
		strbuf_addstr(&body, "method not allowed\n");
	} else {
		pthread_mutex_lock(&s->lock);
		for (size_t i = 0; i < s->nroutes; i++) {
			if (strcmp(s->routes[i].path, url) == 0) {
				fn = s->routes[i].fn;
				ud = s->routes[i].ud;
			}
		}
		pthread_mutex_unlock(&s->lock);
		if (fn) {
			status = fn(ud, &body, &ctype);
		} else {
			status = MHD_HTTP_NOT_FOUND;
			strbuf_addstr(&body, "404 page not found\n");
		}
	}
	size_t len;
	char *data = strbuf_detach(&body, &len);
	struct MHD_Response *r = MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
	MHD_add_response_header(r, "Content-Type", ctype);
	enum MHD_Result ret = MHD_queue_response(conn, (unsigned)status, r);
	MHD_destroy_response(r);
	return ret;
}

/* max_conns == 0: one polling thread serves every connection in turn. */
static struct diag_server *start(const char *address, unsigned max_conns, char *err,
				 size_t errlen)
{
	struct diag_server *s;
	int port, fd = listen_socket(address, &port, err, errlen);

	if (fd < 0)
		return NULL;
	s = xcalloc(1, sizeof(*s));
	pthread_mutex_init(&s->lock, NULL);
	s->fd = fd;
	s->port = port;
	if (max_conns == 0)
		s->daemon = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0,
					     NULL, NULL, answer, s, MHD_OPTION_LISTEN_SOCKET, fd,
					     MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30,
					     MHD_OPTION_END);
	else /* idle keep-alive clients must not hold the few threads for long */
		s->daemon = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD |
						     MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG,
					     0, NULL, NULL, answer, s, MHD_OPTION_LISTEN_SOCKET, fd,
					     MHD_OPTION_CONNECTION_LIMIT, max_conns,
					     MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)5,
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

struct diag_server *diag_server_start(const char *address, char *err, size_t errlen)
{
	return start(address, 0, err, errlen);
}

struct diag_server *diag_server_start_threaded(const char *address, unsigned max_conns,
					       char *err, size_t errlen)
{
	assert(max_conns > 0);
	return start(address, max_conns, err, errlen);
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

int diag_server_port(const struct diag_server *s)
{
	return s->port;
}

void diag_server_stop(struct diag_server *s)
{
	if (!s)
		return;
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
