/* Unit tests for base/diag: address parsing, serving paths over real TCP, process metrics. */
#include "base/diag.h"
#include "check.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Sends one HTTP/1.0 request to 127.0.0.1:port; returns the whole answer (caller frees). */
static char *http(int port, const char *method, const char *path)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct strbuf sb = STRBUF_INIT;
	char buf[4096];
	ssize_t n;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		return strdup("");
	}
	snprintf(buf, sizeof(buf), "%s %s HTTP/1.0\r\nHost: x\r\n\r\n", method, path);
	if (write(fd, buf, strlen(buf)) < 0)
		buf[0] = '\0';
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		strbuf_add(&sb, buf, (size_t)n);
	close(fd);
	return strbuf_detach(&sb, NULL);
}

static int hello(void *ud, struct strbuf *body, const char **ctype)
{
	strbuf_addf(body, "hello %s\n", (const char *)ud);
	*ctype = "text/plain; version=0.0.4";
	return 200;
}

static int failing(void *ud, struct strbuf *body, const char **ctype)
{
	(void)ud;
	(void)ctype;
	strbuf_addstr(body, "internal server error: not leading\n");
	return 500;
}

static void test_split_address(void)
{
	char host[64];
	int port;

	CHECK_INT(diag_split_address(":8080", host, sizeof(host), &port), 0);
	CHECK_STR(host, "");
	CHECK_INT(port, 8080);
	CHECK_INT(diag_split_address("127.0.0.1:0", host, sizeof(host), &port), 0);
	CHECK_STR(host, "127.0.0.1");
	CHECK_INT(diag_split_address("[::1]:9", host, sizeof(host), &port), 0);
	CHECK_STR(host, "::1");
	CHECK_INT(port, 9);
	CHECK_INT(diag_split_address("8080", host, sizeof(host), &port), -1);
	CHECK_INT(diag_split_address("host:", host, sizeof(host), &port), -1);
	CHECK_INT(diag_split_address("host:99999", host, sizeof(host), &port), -1);
	CHECK_INT(diag_split_address("::1:80", host, sizeof(host), &port), -1);
	CHECK_INT(diag_split_address("[::1:80", host, sizeof(host), &port), -1);
}

static void test_serving(void)
{
	char err[256];
	struct diag_server *s = diag_server_start("127.0.0.1:0", err, sizeof(err));
	char *r;

	CHECK(s != NULL);
	if (!s)
		return;
	CHECK(diag_server_port(s) > 0);
	diag_server_handle(s, "/metrics", hello, "world");
	diag_server_handle(s, "/healthz/leader-election", failing, NULL);
	r = http(diag_server_port(s), "GET", "/metrics");
	CHECK(strstr(r, "HTTP/1.0 200") == r || strstr(r, "HTTP/1.1 200") == r);
	CHECK(strstr(r, "Content-Type: text/plain; version=0.0.4") != NULL);
	CHECK(strstr(r, "\r\n\r\nhello world\n") != NULL);
	free(r);
	r = http(diag_server_port(s), "GET", "/healthz/leader-election");
	CHECK(strstr(r, " 500 ") != NULL);
	CHECK(strstr(r, "not leading") != NULL);
	free(r);
	r = http(diag_server_port(s), "GET", "/nope");
	CHECK(strstr(r, " 404 ") != NULL);
	free(r);
	r = http(diag_server_port(s), "POST", "/metrics");
	CHECK(strstr(r, " 405 ") != NULL);
	free(r);

	/* A second server on the same port is refused with a reason. */
	char addr[64];
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", diag_server_port(s));
	CHECK(diag_server_start(addr, err, sizeof(err)) == NULL);
	CHECK(strstr(err, "cannot listen on") != NULL);
	diag_server_stop(s);
	CHECK(diag_server_start("nonsense", err, sizeof(err)) == NULL);
	CHECK(strstr(err, "invalid address nonsense") != NULL);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A deferred route: the replies wait here until a finisher thread answers them all. */
static struct {
	pthread_mutex_t mu;
	struct diag_reply *waiting[8];
	int n;
} later = { PTHREAD_MUTEX_INITIALIZER, { 0 }, 0 };

static void defer_slow(void *ud, struct diag_reply *r)
{
	(void)ud;
	pthread_mutex_lock(&later.mu);
	later.waiting[later.n++] = r;
	pthread_mutex_unlock(&later.mu);
}

static void defer_at_once(void *ud, struct diag_reply *r)
{
	diag_reply_finish(r, 503, ud);
}

/* Answers every waiting reply after 800 ms. */
static void *finisher(void *arg)
{
	(void)arg;
	usleep(800 * 1000);
	pthread_mutex_lock(&later.mu);
	for (int i = 0; i < later.n; i++)
		diag_reply_finish(later.waiting[i], 200, "slow");
	later.n = 0;
	pthread_mutex_unlock(&later.mu);
	return NULL;
}

static void *slow_request(void *port)
{
	return http(*(int *)port, "GET", "/slow");
}

static int connect_to(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * A deferred route answers later, from another thread, while the server answers other paths at
 * once; one that answers within its handler is served like any other; a client gone before its
 * answer costs nothing.
 */
static void test_deferred(void)
{
	char err[256];
	struct diag_server *s = diag_server_start("127.0.0.1:0", err, sizeof(err));
	pthread_t th, fin;
	void *slow_answer = NULL;

	CHECK(s != NULL);
	if (!s)
		return;
	diag_server_handle_deferred(s, "/slow", defer_slow, NULL);
	diag_server_handle_deferred(s, "/closing", defer_at_once, "shutting down");
	diag_server_handle(s, "/metrics", hello, "deferred");
	int port = diag_server_port(s);

	/* a client that asks and goes away before the answer */
	int gone = connect_to(port);
	CHECK(gone >= 0);
	const char *req = "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n";
	CHECK(write(gone, req, strlen(req)) == (ssize_t)strlen(req));
	CHECK(pthread_create(&th, NULL, slow_request, &port) == 0);
	usleep(100 * 1000);
	close(gone);
	CHECK(pthread_create(&fin, NULL, finisher, NULL) == 0);
	double t0 = now_s();
	char *r = http(port, "GET", "/metrics");
	CHECK(strstr(r, "hello deferred") != NULL);
	CHECK(now_s() - t0 < 0.5);
	free(r);
	r = http(port, "GET", "/closing");
	CHECK(strstr(r, " 503 ") != NULL && strstr(r, "\r\n\r\nshutting down") != NULL);
	free(r);
	pthread_join(th, &slow_answer);
	CHECK(strstr(slow_answer, " 200 ") != NULL);
	CHECK(strstr(slow_answer, "\r\n\r\nslow") != NULL);
	CHECK(now_s() - t0 > 0.5); /* it waited for the finisher */
	free(slow_answer);
	pthread_join(fin, NULL);
	usleep(50 * 1000); /* the gone client's connection is resumed and closed */
	diag_server_stop(s);
}

/*
 * Silent connections hold no pool a request needs: with 300 of them open (more than any fixed
 * pool of threads would hold) a request is answered at once; a 64 KiB header is refused with 431.
 */
static void test_silent_clients(void)
{
	char err[256];
	struct diag_server *s = diag_server_start("127.0.0.1:0", err, sizeof(err));
	int fds[300], n = 0;

	CHECK(s != NULL);
	if (!s)
		return;
	diag_server_handle(s, "/metrics", hello, "anyway");
	int port = diag_server_port(s);
	for (int i = 0; i < 300; i++)
		if ((fds[n] = connect_to(port)) >= 0)
			n++;
	CHECK_INT(n, 300);
	usleep(100 * 1000);
	double t0 = now_s();
	char *r = http(port, "GET", "/metrics");
	CHECK(strstr(r, "hello anyway") != NULL);
	CHECK(now_s() - t0 < 0.5);
	free(r);

	struct strbuf big = STRBUF_INIT;
	strbuf_addstr(&big, "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: ");
	for (int i = 0; i < 64 * 1024; i++)
		strbuf_addch(&big, 'a');
	strbuf_addstr(&big, "\r\n\r\n");
	int fd = connect_to(port);
	CHECK(fd >= 0);
	size_t off = 0;
	ssize_t w;
	while (off < big.len && (w = write(fd, big.buf + off, big.len - off)) > 0)
		off += (size_t)w;
	char buf[256] = "";
	ssize_t got = read(fd, buf, sizeof(buf) - 1);
	CHECK(got > 0 && strstr(buf, " 431 ") != NULL);
	close(fd);
	strbuf_release(&big);
	for (int i = 0; i < n; i++)
		close(fds[i]);
	diag_server_stop(s);
}

static void test_process_metrics(void)
{
	struct strbuf sb = STRBUF_INIT;
	long long rss = 0;
	double cpu = -1, start = 0;
	long fds = 0;

	diag_render_process_metrics(&sb);
	const char *p = strstr(sb.buf, "\nprocess_resident_memory_bytes ");
	CHECK(p && sscanf(p + 31, "%lld", &rss) == 1);
	CHECK(rss > 100 * 1024); /* a running test program has at least 100 KiB resident */
	p = strstr(sb.buf, "\nprocess_cpu_seconds_total ");
	CHECK(p && sscanf(p + 27, "%lf", &cpu) == 1 && cpu >= 0);
	p = strstr(sb.buf, "\nprocess_open_fds ");
	CHECK(p && sscanf(p + 18, "%ld", &fds) == 1 && fds >= 3);
	p = strstr(sb.buf, "\nprocess_start_time_seconds ");
	CHECK(p && sscanf(p + 28, "%lf", &start) == 1 && start > 1.6e9);
	CHECK(strstr(sb.buf, "# TYPE process_cpu_seconds_total counter\n") != NULL);
	strbuf_release(&sb);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN); /* a refused big header may close before it is all written */
	RUN(test_split_address);
	RUN(test_serving);
	RUN(test_deferred);
	RUN(test_silent_clients);
	RUN(test_process_metrics);
	return CHECK_DONE();
}
