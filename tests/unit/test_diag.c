/* Unit tests for base/diag: address parsing, serving paths over real TCP, process metrics. */
#include "base/diag.h"
#include "check.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
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

static int slow(void *ud, struct strbuf *body, const char **ctype)
{
	(void)ud;
	(void)ctype;
	usleep(800 * 1000);
	strbuf_addstr(body, "slow");
	return 200;
}

static void *slow_request(void *port)
{
	return http(*(int *)port, "GET", "/slow");
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A threaded server answers a fast path while a slow handler still runs. */
static void test_threaded(void)
{
	char err[256];
	struct diag_server *s = diag_server_start_threaded("127.0.0.1:0", 4, err, sizeof(err));
	pthread_t th;
	void *slow_answer = NULL;

	CHECK(s != NULL);
	if (!s)
		return;
	diag_server_handle(s, "/slow", slow, NULL);
	diag_server_handle(s, "/metrics", hello, "threads");
	int port = diag_server_port(s);
	CHECK(pthread_create(&th, NULL, slow_request, &port) == 0);
	usleep(100 * 1000);
	double t0 = now_s();
	char *r = http(port, "GET", "/metrics");
	CHECK(strstr(r, "hello threads") != NULL);
	CHECK(now_s() - t0 < 0.5);
	free(r);
	pthread_join(th, &slow_answer);
	CHECK(strstr(slow_answer, "\r\n\r\nslow") != NULL);
	free(slow_answer);
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
	RUN(test_split_address);
	RUN(test_serving);
	RUN(test_threaded);
	RUN(test_process_metrics);
	return CHECK_DONE();
}
