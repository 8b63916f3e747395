/*
 * kube/http: the parsers (URL, response heads, chunked bodies) table by table, then the
 * connection layer against a scripted HTTP peer on a real TCP socket: keep-alive reuse, a kept
 * connection the server closed (retried once on a new one), chunked and read-to-close bodies,
 * the request deadline, a stop flag, an HTTP proxy from the environment (absolute-form request
 * line, Proxy-Authorization), and NO_PROXY.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/strbuf.h"
#include "base/timeutil.h"
#include "check.h"
#include "kube/client.h"
#include "kube/http.h"

/* ---- parsers ---- */

static void test_url(void)
{
	struct http_url u;
	char err[200];
	CHECK_INT(http_url_parse("https://10.0.0.1:6443", &u, err, sizeof(err)), 0);
	CHECK(u.tls);
	CHECK_STR(u.host, "10.0.0.1");
	CHECK_STR(u.port, "6443");
	CHECK_STR(u.prefix, "");
	http_url_free(&u);
	CHECK_INT(http_url_parse("HTTP://user:p%40ss@[fd00::1]/k8s/", &u, err, sizeof(err)), 0);
	CHECK(!u.tls);
	CHECK_STR(u.host, "fd00::1");
	CHECK_STR(u.port, "80");
	CHECK_STR(u.prefix, "/k8s");
	CHECK_STR(u.userinfo, "user:p@ss");
	CHECK(http_host_is_ip(u.host));
	http_url_free(&u);
	CHECK_INT(http_url_parse("https://kube.example", &u, err, sizeof(err)), 0);
	CHECK_STR(u.port, "443");
	CHECK(!http_host_is_ip(u.host));
	http_url_free(&u);
	const char *bad[] = { "ftp://x", "https://", "https://h:0", "https://h:65536", "https://h:8x",
			      "https://[::1", "https://h/p?q=1", "https://h/p#f", "https://a b",
			      "http://u%4@h", "https://h:1:2" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		CHECK_INT(http_url_parse(bad[i], &u, err, sizeof(err)), -1);
		CHECK(err[0] != 0);
	}
}

static ssize_t head(const char *s, struct http_head *h, char *err)
{
	return http_head_parse(s, strlen(s), h, err, 200);
}

static void test_head(void)
{
	struct http_head h;
	char err[200];
	const char *ok = "HTTP/1.1 201 Created\r\nContent-Length: 42\r\nRetry-After: 7\r\n\r\nbody";
	CHECK_INT(head(ok, &h, err), (long)(strlen(ok) - 4));
	CHECK_INT(h.status, 201);
	CHECK_INT(h.content_length, 42);
	CHECK_INT(h.retry_after, 7);
	CHECK(!h.chunked && !h.close);
	/* every prefix is "need more" */
	for (size_t i = 0; i < strlen(ok) - 4; i++)
		CHECK_INT(http_head_parse(ok, i, &h, err, sizeof(err)), 0);
	CHECK(head("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nConnection: Close\r\n\r\n", &h, err) > 0);
	CHECK(h.chunked && h.close && h.content_length == -1);
	/* chunked wins over Content-Length, and the connection is not reused */
	CHECK(head("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", &h, err) > 0);
	CHECK(h.chunked && h.close);
	CHECK(head("HTTP/1.0 200 OK\n\n", &h, err) > 0);
	CHECK(h.close);
	CHECK(head("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\n", &h, err) > 0);
	CHECK(!h.close);
	CHECK(head("HTTP/1.1 503 x\r\nRetry-After: Wed, 21 Oct 2015 07:28:00 GMT\r\n\r\n", &h, err) > 0);
	CHECK_INT(h.retry_after, -1);
	const char *bad[] = {
		"HTTP/2 200 OK\r\n\r\n",
		"HTTP/1.1 20 OK\r\n\r\n",
		"HTTP/1.1 099 x\r\n\r\n",
		"ICY 200 OK\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 9999999999999999999\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
		"HTTP/1.1 200 OK\r\nNo colon\r\n\r\n",
		"HTTP/1.1 200 OK\r\nBad name: v\r\n\r\n",
		"HTTP/1.1 200 OK\r\nA: b\r\n folded\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		CHECK_INT(head(bad[i], &h, err), -1);
		CHECK(err[0] != 0);
	}
	/* a head that never ends is refused at the limit, not buffered forever */
	char *big = malloc(HTTP_MAX_HEAD + 10);
	memcpy(big, "HTTP/1.1 200 OK\r\nX: ", 20);
	memset(big + 20, 'a', HTTP_MAX_HEAD - 10);
	CHECK_INT(http_head_parse(big, HTTP_MAX_HEAD + 10, &h, err, sizeof(err)), -1);
	CHECK(strstr(err, "larger") != NULL);
	free(big);
}

static int collect(void *ud, const char *p, size_t n)
{
	strbuf_add(ud, p, n);
	return 0;
}

static int stop_after_first(void *ud, const char *p, size_t n)
{
	(void)p;
	(void)n;
	(*(int *)ud)++;
	return 1;
}

static void test_chunked(void)
{
	const char *body = "4;name=v\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nX-T: 1\r\n\r\nNEXT";
	char err[200];
	/* byte by byte and whole give the same */
	for (size_t piece = 1; piece <= strlen(body); piece += strlen(body) - 1) {
		struct http_chunked d = { 0 };
		struct strbuf out = STRBUF_INIT;
		size_t used = 0;
		while (!d.done && used < strlen(body)) {
			size_t n = strlen(body) - used < piece ? strlen(body) - used : piece;
			bool stopped;
			ssize_t r = http_chunked_feed(&d, body + used, n, collect, &out, &stopped, err,
						      sizeof(err));
			CHECK(r >= 0);
			used += (size_t)r;
		}
		CHECK(d.done);
		CHECK_INT(used, strlen(body) - 4); /* "NEXT" is not the body's */
		CHECK_STR(out.buf, "Wikipedia in\r\n\r\nchunks.");
		strbuf_release(&out);
	}
	const char *bad[] = { "x\r\n", "\r\n", "5\r\nabcdefg\r\n", "1234567890abcdef0\r\n",
			      "2\r\nab\rX" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct http_chunked d = { 0 };
		struct strbuf out = STRBUF_INIT;
		bool stopped;
		CHECK_INT(http_chunked_feed(&d, bad[i], strlen(bad[i]), collect, &out, &stopped, err,
					    sizeof(err)), -1);
		strbuf_release(&out);
	}
	/* a sink that stops ends the decoding at once */
	struct http_chunked d = { 0 };
	int calls = 0;
	bool stopped;
	CHECK_INT(http_chunked_feed(&d, "3\r\nabc\r\n3\r\ndef\r\n", 16, stop_after_first, &calls,
				    &stopped, err, sizeof(err)), 6);
	CHECK(stopped && calls == 1);
}

/* ---- a scripted peer ---- */

enum mode {
	M_KEEPALIVE,    /* Content-Length answers, connection kept */
	M_CLOSE_IDLE,   /* answers, then closes the connection once idle */
	M_CHUNKED,      /* a chunked answer */
	M_TO_CLOSE,     /* no length: the body ends at the close */
	M_SILENT,       /* reads the request, never answers */
	M_PROXY,        /* answers as a proxy would, recording the request line */
};

static struct {
	int lfd, port;
	enum mode mode;
	int accepted;
	char last[2048];
	pthread_mutex_t mu;
} peer = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* Reads one request head (and a Content-Length body) from fd; 0 at the close. */
static int read_request(int fd, char *buf, size_t cap)
{
	size_t len = 0;
	while (len < cap - 1) {
		ssize_t n = read(fd, buf + len, cap - 1 - len);
		if (n <= 0)
			return 0;
		len += (size_t)n;
		buf[len] = 0;
		char *end = strstr(buf, "\r\n\r\n");
		if (end) {
			char *cl = strcasestr(buf, "content-length:");
			size_t want = (size_t)(end + 4 - buf) + (cl && cl < end ? strtoul(cl + 15, NULL, 10) : 0);
			if (len >= want)
				return 1;
		}
	}
	return 1;
}

static void *serve_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char req[8192];
	while (read_request(fd, req, sizeof(req))) {
		pthread_mutex_lock(&peer.mu);
		size_t rl = strlen(req) < sizeof(peer.last) - 1 ? strlen(req) : sizeof(peer.last) - 1;
		memcpy(peer.last, req, rl);
		peer.last[rl] = 0;
		enum mode m = peer.mode;
		pthread_mutex_unlock(&peer.mu);
		const char *ans = NULL;
		switch (m) {
		case M_KEEPALIVE:
		case M_CLOSE_IDLE:
		case M_PROXY:
			ans = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
			break;
		case M_CHUNKED:
			ans = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
			break;
		case M_TO_CLOSE:
			ans = "HTTP/1.1 200 OK\r\n\r\nuntil-close";
			break;
		case M_SILENT:
			sleep(3);
			break;
		}
		if (ans && write(fd, ans, strlen(ans)) < 0)
			break;
		if (m == M_TO_CLOSE || m == M_SILENT)
			break;
		if (m == M_CLOSE_IDLE) {
			usleep(50 * 1000);
			break; /* the server's idle timeout, as it were */
		}
	}
	close(fd);
	return NULL;
}

static void *accept_loop(void *arg)
{
	(void)arg;
	for (;;) {
		int fd = accept(peer.lfd, NULL, NULL);
		if (fd < 0)
			return NULL;
		pthread_mutex_lock(&peer.mu);
		peer.accepted++;
		pthread_mutex_unlock(&peer.mu);
		pthread_t t;
		pthread_create(&t, NULL, serve_conn, (void *)(intptr_t)fd);
		pthread_detach(t);
	}
}

static void peer_start(void)
{
	peer.lfd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	bind(peer.lfd, (struct sockaddr *)&a, sizeof(a));
	listen(peer.lfd, 16);
	getsockname(peer.lfd, (struct sockaddr *)&a, &al);
	peer.port = ntohs(a.sin_port);
	pthread_t t;
	pthread_create(&t, NULL, accept_loop, NULL);
	pthread_detach(t);
}

static void set_mode(enum mode m)
{
	pthread_mutex_lock(&peer.mu);
	peer.mode = m;
	peer.accepted = 0;
	pthread_mutex_unlock(&peer.mu);
}

static int accepted(void)
{
	pthread_mutex_lock(&peer.mu);
	int n = peer.accepted;
	pthread_mutex_unlock(&peer.mu);
	return n;
}

static int body_fn(void *ud, int status, const char *p, size_t n)
{
	(void)status;
	strbuf_add(ud, p, n);
	return 0;
}

static struct http_client *client(const char *host, bool env_proxy)
{
	char url[128], err[400];
	snprintf(url, sizeof(url), "http://%s:%d/pre", host, peer.port);
	struct http_client_opts o = { .server = url, .no_proxy_env = !env_proxy };
	struct http_client *hc = http_client_new(&o, err, sizeof(err));
	if (!hc)
		fprintf(stderr, "http_client_new: %s\n", err);
	return hc;
}

static int get(struct http_client *hc, struct strbuf *out, struct http_result *res)
{
	strbuf_reset(out);
	struct http_request rq = { .method = "GET", .target = "/api/v1/nodes?limit=1",
				   .deadline_ns = mono_now_ns() + 5 * NSEC_PER_SEC };
	return http_do(hc, &rq, body_fn, out, res);
}

struct stopper {
	struct http_client *hc;
	struct http_request rq;
	struct http_result res;
	int rc;
};

static void *run_request(void *arg)
{
	struct stopper *w = arg;
	struct strbuf out = STRBUF_INIT;
	w->rc = http_do(w->hc, &w->rq, body_fn, &out, &w->res);
	strbuf_release(&out);
	return NULL;
}

static void test_connections(void)
{
	peer_start();
	struct strbuf out = STRBUF_INIT;
	struct http_result res;
	struct http_client *hc = client("127.0.0.1", false);
	CHECK(hc != NULL);

	set_mode(M_KEEPALIVE);
	for (int i = 0; i < 5; i++) {
		CHECK_INT(get(hc, &out, &res), 0);
		CHECK_INT(res.status, 200);
		CHECK_STR(out.buf, "ok");
	}
	CHECK_INT(accepted(), 1); /* one connection, kept alive */
	CHECK(strncmp(peer.last, "GET /pre/api/v1/nodes?limit=1 HTTP/1.1\r\n", 40) == 0);
	char host[64];
	snprintf(host, sizeof(host), "Host: 127.0.0.1:%d\r\n", peer.port);
	CHECK(strstr(peer.last, host) != NULL);

	/* the server closes kept connections: each request still succeeds, on a new connection */
	set_mode(M_CLOSE_IDLE);
	CHECK_INT(get(hc, &out, &res), 0); /* the old kept connection is still open here */
	for (int i = 0; i < 3; i++) {
		usleep(100 * 1000);
		CHECK_INT(get(hc, &out, &res), 0);
		CHECK_STR(out.buf, "ok");
	}
	CHECK(accepted() >= 3);

	set_mode(M_CHUNKED);
	CHECK_INT(get(hc, &out, &res), 0);
	CHECK_STR(out.buf, "abcde");
	set_mode(M_TO_CLOSE);
	CHECK_INT(get(hc, &out, &res), 0);
	CHECK_STR(out.buf, "until-close");

	/* a path with a space or a line break is refused before anything is sent */
	int before = accepted();
	struct http_request inj = { .method = "GET", .target = "/api/v1/x HTTP/1.1\r\nX: y" };
	CHECK_INT(http_do(hc, &inj, body_fn, &out, &res), -1);
	CHECK(strstr(res.msg, "control character") != NULL);
	CHECK_INT(accepted(), before);

	/* a server that never answers: the deadline ends the request, within a second of it */
	set_mode(M_SILENT);
	struct http_request rq = { .method = "POST", .target = "/x", .body = "{}", .body_len = 2,
				   .deadline_ns = mono_now_ns() + 500 * NSEC_PER_MSEC };
	int64_t t0 = mono_now_ns();
	CHECK_INT(http_do(hc, &rq, body_fn, &out, &res), -1);
	int64_t ms = (mono_now_ns() - t0) / NSEC_PER_MSEC;
	CHECK(res.fail == HTTP_TRANSPORT && strstr(res.msg, "timed out"));
	CHECK(ms >= 450 && ms < 1800);
	CHECK(strstr(peer.last, "Content-Length: 2\r\n") != NULL);

	/* a stop flag ends a waiting request within 100 ms or so */
	static atomic_int stop;
	atomic_store(&stop, 0);
	struct stopper w = { .hc = hc, .rq = { .method = "GET", .target = "/watch", .stop = &stop } };
	pthread_t t;
	pthread_create(&t, NULL, run_request, &w);
	usleep(200 * 1000);
	t0 = mono_now_ns();
	atomic_store(&stop, 1);
	pthread_join(t, NULL);
	ms = (mono_now_ns() - t0) / NSEC_PER_MSEC;
	CHECK_INT(w.rc, -1);
	CHECK(w.res.fail == HTTP_STOPPED);
	CHECK(ms < 500);
	http_client_free(hc);

	/* HTTP_PROXY from the environment: the peer plays the proxy */
	set_mode(M_PROXY);
	setenv("HTTP_PROXY", "", 1);
	char proxy[96];
	snprintf(proxy, sizeof(proxy), "http://bob:s%%3Acret@127.0.0.1:%d", peer.port);
	setenv("http_proxy", proxy, 1);
	/* the target is not loopback, else it would not be proxied; the peer answers for it */
	hc = client("kube.invalid", true);
	CHECK(hc != NULL);
	CHECK_INT(get(hc, &out, &res), 0);
	CHECK_STR(out.buf, "ok");
	CHECK(strncmp(peer.last, "GET http://kube.invalid:", 24) == 0);
	CHECK(strstr(peer.last, "/pre/api/v1/nodes?limit=1 HTTP/1.1\r\n") != NULL);
	CHECK(strstr(peer.last, "Proxy-Authorization: Basic Ym9iOnM6Y3JldA==\r\n") != NULL);
	http_client_free(hc);
	/* NO_PROXY names the host: it is reached directly (and cannot be resolved) */
	setenv("NO_PROXY", "example.com,.invalid", 1);
	hc = client("kube.invalid", true);
	CHECK_INT(get(hc, &out, &res), -1);
	CHECK(res.fail == HTTP_TRANSPORT && strstr(res.msg, "resolve") != NULL);
	http_client_free(hc);
	/* an https proxy is refused with a reason */
	unsetenv("NO_PROXY");
	setenv("http_proxy", "https://127.0.0.1:1", 1);
	char url[64], err[400];
	snprintf(url, sizeof(url), "http://kube.invalid:%d", peer.port);
	struct http_client_opts o = { .server = url };
	CHECK(http_client_new(&o, err, sizeof(err)) == NULL);
	CHECK(strstr(err, "https:// proxies are not supported") != NULL);
	unsetenv("http_proxy");
	strbuf_release(&out);
}

/* Counts occurrences of needle in hay. */
static int count_of(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

/* The kube client's headers on the wire: Basic from username/password, and one Authorization
 * header only (the bearer token's) when the kubeconfig gives both. */
static void test_client_auth_headers(void)
{
	set_mode(M_KEEPALIVE);
	char kc[] = "/tmp/kcsi-http-kc-XXXXXX", body[512], err[400];
	int fd = mkstemp(kc);
	for (int both = 0; both < 2; both++) {
		int n = snprintf(body, sizeof(body),
				 "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
				 "contexts:\n- name: t\n  context: {cluster: c, user: u}\n"
				 "clusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:%d\n"
				 "users:\n- name: u\n  user:\n    username: admin\n    password: pw\n%s",
				 peer.port, both ? "    token: tok\n" : "");
		CHECK(ftruncate(fd, 0) == 0 && pwrite(fd, body, (size_t)n, 0) == n);
		struct kube_config *cfg = kube_config_load(kc, NULL, NULL, err, sizeof(err));
		CHECK(cfg != NULL);
		struct kube_client_opts o = { .qps = -1, .max_retries = 1 };
		struct kube_client *c = cfg ? kube_client_new(cfg, &o, err, sizeof(err)) : NULL;
		struct kube_request rq = { .method = "GET", .path = "/api/v1/nodes" };
		struct strbuf out = STRBUF_INIT;
		struct kube_err e;
		CHECK(c && kube_do(c, &rq, &out, &e) == 200);
		CHECK_INT(count_of(peer.last, "Authorization:"), 1);
		CHECK(strstr(peer.last, both ? "Authorization: Bearer tok\r\n"
					      : "Authorization: Basic YWRtaW46cHc=\r\n") != NULL);
		strbuf_release(&out);
		kube_client_free(c);
		kube_config_free(cfg);
	}
	close(fd);
	unlink(kc);
}

int main(void)
{
	RUN(test_url);
	RUN(test_head);
	RUN(test_chunked);
	RUN(test_connections);
	RUN(test_client_auth_headers);
	return CHECK_DONE();
}
