/*
 * The connection half of kube/http: blocking sockets with receive timeouts (no poll loop on the
 * hot path: a request is one send and, usually, one recv), GnuTLS for https, an HTTP proxy
 * from the environment, and a LIFO pool of idle keep-alive connections.
 *
 * Waiting: a connection's SO_RCVTIMEO is 100 ms while a stop flag is to be polled (watches) and
 * 1 s otherwise, so a request's deadline is kept to within a second without re-arming a timer
 * per read; the option is only set when it changes.
 */
#include "kube/http.h"

#include <errno.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/strbuf.h"
#include "base/timeutil.h"
#include "base/xalloc.h"

#define CONN_BUF HTTP_MAX_HEAD /* a head must fit whole; bodies pass through */
#define POOL_MAX 128              /* idle connections kept, as libcurl's cache was sized */
#define IDLE_CHECK_NS NSEC_PER_SEC /* older idle connections are checked for a close first */
#define IDLE_MAX_NS (90 * NSEC_PER_SEC) /* client-go's IdleConnTimeout */
#define CONNECT_TIMEOUT_NS (10 * NSEC_PER_SEC)
#define SEND_TIMEOUT_MS 10000
#define STOP_POLL_MS 100
#define WAIT_SLICE_MS 1000

/* GnuTLS credentials (trust and client certificate), shared by the sessions made with them. */
struct cred {
	gnutls_certificate_credentials_t x;
	atomic_int refs;
	char *cert, *key; /* the exec plugin's PEM this was made from, to tell a rotation */
	size_t cert_len, key_len;
};

struct hconn {
	int fd;
	gnutls_session_t tls; /* NULL: plain TCP */
	struct cred *cred;
	int rcvtimeo_ms;
	int64_t idle_since;
	size_t off, len; /* unread bytes are buf[off..len) */
	struct hconn *next;
	char buf[CONN_BUF];
};

struct http_client {
	struct http_url url;
	char *vhost;       /* the name verified and sent as SNI and Host */
	char *host_header; /* vhost[:port] */
	char *base;
	bool insecure;
	char *ca_pem, *ca_file;
	size_t ca_pem_len;
	struct cred *cred;      /* trust + the configured client certificate */
	struct cred *exec_cred; /* trust + the exec plugin's latest certificate, or NULL */
	bool proxied;
	struct http_url proxy;
	char *proxy_auth; /* "Proxy-Authorization: Basic ...\r\n" or NULL */
	pthread_mutex_t mu;
	struct hconn *idle;
	int nidle;
};

/* ---- credentials ---- */

static void cred_put(struct cred *c)
{
	if (!c || atomic_fetch_sub(&c->refs, 1) != 1)
		return;
	gnutls_certificate_free_credentials(c->x);
	if (c->key)
		memset(c->key, 0, c->key_len);
	free(c->cert);
	free(c->key);
	free(c);
}

static struct cred *cred_new(const struct http_client *hc, const char *cert, size_t cert_len,
			     const char *key, size_t key_len, const char *cert_file,
			     const char *key_file, char *err, size_t errlen)
{
	struct cred *c = xcalloc(1, sizeof(*c));
	atomic_init(&c->refs, 1);
	int r = gnutls_certificate_allocate_credentials(&c->x);
	if (r < 0) {
		errbuf_printf(err, errlen, "TLS credentials: %s", gnutls_strerror(r));
		free(c);
		return NULL;
	}
	if (!hc->insecure) {
		if (hc->ca_pem) {
			gnutls_datum_t d = { (unsigned char *)hc->ca_pem, (unsigned)hc->ca_pem_len };
			r = gnutls_certificate_set_x509_trust_mem(c->x, &d, GNUTLS_X509_FMT_PEM);
			if (r <= 0) {
				errbuf_printf(err, errlen, "certificate-authority-data holds no usable certificate%s%s",
					      r < 0 ? ": " : "", r < 0 ? gnutls_strerror(r) : "");
				goto fail;
			}
		} else if (hc->ca_file) {
			r = gnutls_certificate_set_x509_trust_file(c->x, hc->ca_file, GNUTLS_X509_FMT_PEM);
			if (r <= 0) {
				errbuf_printf(err, errlen, "%s holds no usable certificate%s%s", hc->ca_file,
					      r < 0 ? ": " : "", r < 0 ? gnutls_strerror(r) : "");
				goto fail;
			}
		} else {
			/* Debian's GnuTLS reads /etc/ssl/certs/ca-certificates.crt, which kcsi's
			 * images carry; the count tells an image without it apart */
			r = gnutls_certificate_set_x509_system_trust(c->x);
			KLOG_V(4, "%d CA certificates from the system trust store", r > 0 ? r : 0);
		}
	}
	if (cert) {
		gnutls_datum_t cd = { (unsigned char *)cert, (unsigned)cert_len };
		gnutls_datum_t kd = { (unsigned char *)key, (unsigned)key_len };
		r = gnutls_certificate_set_x509_key_mem2(c->x, &cd, &kd, GNUTLS_X509_FMT_PEM, NULL, 0);
	} else if (cert_file && key_file) {
		r = gnutls_certificate_set_x509_key_file2(c->x, cert_file, key_file,
							  GNUTLS_X509_FMT_PEM, NULL, 0);
	} else {
		r = 0;
	}
	if (r < 0) {
		errbuf_printf(err, errlen, "client certificate and key: %s", gnutls_strerror(r));
		goto fail;
	}
	return c;
fail:
	gnutls_certificate_free_credentials(c->x);
	free(c);
	return NULL;
}

/* The credentials for an exec plugin's certificate: the last ones when it has not changed. */
static struct cred *exec_cred_get(struct http_client *hc, const struct http_request *rq,
				  char *err, size_t errlen)
{
	pthread_mutex_lock(&hc->mu);
	struct cred *c = hc->exec_cred;
	if (c && c->cert_len == rq->cert_pem_len && c->key_len == rq->key_pem_len &&
	    memcmp(c->cert, rq->cert_pem, c->cert_len) == 0 &&
	    memcmp(c->key, rq->key_pem, c->key_len) == 0) {
		atomic_fetch_add(&c->refs, 1);
		pthread_mutex_unlock(&hc->mu);
		return c;
	}
	pthread_mutex_unlock(&hc->mu);
	c = cred_new(hc, rq->cert_pem, rq->cert_pem_len, rq->key_pem, rq->key_pem_len, NULL, NULL,
		     err, errlen);
	if (!c)
		return NULL;
	c->cert = xmemdup(rq->cert_pem, rq->cert_pem_len);
	c->cert_len = rq->cert_pem_len;
	c->key = xmemdup(rq->key_pem, rq->key_pem_len);
	c->key_len = rq->key_pem_len;
	atomic_fetch_add(&c->refs, 1); /* one for the client, one for the caller */
	pthread_mutex_lock(&hc->mu);
	struct cred *old = hc->exec_cred;
	hc->exec_cred = c;
	pthread_mutex_unlock(&hc->mu);
	cred_put(old);
	return c;
}

/* ---- proxy from the environment (as Go's net/http reads it) ---- */

static const char *env_any(const char *a, const char *b)
{
	const char *v = getenv(a);
	if (!v || !*v)
		v = getenv(b);
	return v && *v ? v : NULL;
}

/* NO_PROXY: "*", or a comma list of hosts and domains (".example.com" or "example.com"). */
static bool no_proxy_matches(const char *list, const char *host)
{
	size_t hl = strlen(host);
	const char *p = list;
	while (*p) {
		while (*p == ',' || *p == ' ')
			p++;
		size_t n = strcspn(p, ", ");
		if (!n)
			break;
		const char *e = p;
		size_t el = n;
		char *colon = memchr(e, ':', el); /* an entry's port is ignored */
		if (colon && e[0] != '[')
			el = (size_t)(colon - e);
		if (el == 1 && e[0] == '*')
			return true;
		if (el && e[0] == '.') {
			e++;
			el--;
		}
		if (el && el <= hl && strncasecmp(host + hl - el, e, el) == 0 &&
		    (el == hl || host[hl - el - 1] == '.'))
			return true;
		p += n;
	}
	return false;
}

static bool is_loopback(const char *host)
{
	return strcasecmp(host, "localhost") == 0 || strncmp(host, "127.", 4) == 0 ||
	       strcmp(host, "::1") == 0;
}

void http_basic_auth(struct strbuf *out, const char *userinfo)
{
	gnutls_datum_t in = { (unsigned char *)userinfo, (unsigned)strlen(userinfo) }, b64 = { 0 };
	if (gnutls_base64_encode2(&in, &b64) == 0) {
		strbuf_add(out, b64.data, b64.size);
		gnutls_free(b64.data);
	}
}

static int setup_proxy(struct http_client *hc, char *err, size_t errlen)
{
	const char *v = hc->url.tls ? env_any("HTTPS_PROXY", "https_proxy")
				    : env_any("HTTP_PROXY", "http_proxy");
	if (!v || is_loopback(hc->url.host))
		return 0;
	const char *np = env_any("NO_PROXY", "no_proxy");
	if (np && no_proxy_matches(np, hc->url.host))
		return 0;
	struct strbuf sb = STRBUF_INIT;
	if (!strstr(v, "://"))
		strbuf_addstr(&sb, "http://");
	strbuf_addstr(&sb, v);
	char perr[200];
	int rc = http_url_parse(sb.buf, &hc->proxy, perr, sizeof(perr));
	strbuf_release(&sb);
	if (rc != 0) {
		errbuf_printf(err, errlen, "proxy from the environment: %s", perr);
		return -1;
	}
	if (hc->proxy.tls) {
		errbuf_printf(err, errlen, "proxy from the environment: https:// proxies are not "
					   "supported; give an http:// one");
		http_url_free(&hc->proxy);
		return -1;
	}
	hc->proxied = true;
	if (hc->proxy.userinfo) {
		strbuf_addstr(&sb, "Proxy-Authorization: Basic ");
		http_basic_auth(&sb, hc->proxy.userinfo);
		strbuf_addstr(&sb, "\r\n");
		hc->proxy_auth = strbuf_detach(&sb, NULL);
	}
	return 0;
}

/* ---- the client ---- */

struct http_client *http_client_new(const struct http_client_opts *o, char *err, size_t errlen)
{
	struct http_client *hc = xcalloc(1, sizeof(*hc));
	pthread_mutex_init(&hc->mu, NULL);
	char uerr[200];
	if (http_url_parse(o->server, &hc->url, uerr, sizeof(uerr)) != 0) {
		errbuf_printf(err, errlen, "server \"%s\" is not a valid URL: %s",
			      strchr(o->server, '@') ? "(not shown: it holds user information)"
						     : o->server,
			      uerr);
		goto fail;
	}
	hc->insecure = o->insecure;
	hc->vhost = xstrdup(o->tls_server_name && *o->tls_server_name ? o->tls_server_name
								       : hc->url.host);
	bool v6 = strchr(hc->vhost, ':') != NULL;
	bool dflt = strcmp(hc->url.port, hc->url.tls ? "443" : "80") == 0;
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "%s%s%s", v6 ? "[" : "", hc->vhost, v6 ? "]" : "");
	if (!dflt)
		strbuf_addf(&sb, ":%s", hc->url.port);
	hc->host_header = strbuf_detach(&sb, NULL);
	strbuf_addf(&sb, "%s://%s%s%s:%s%s", hc->url.tls ? "https" : "http", v6 ? "[" : "",
		    hc->vhost, v6 ? "]" : "", hc->url.port, hc->url.prefix);
	hc->base = strbuf_detach(&sb, NULL);
	if (o->ca_pem) {
		hc->ca_pem = xmemdup(o->ca_pem, o->ca_pem_len);
		hc->ca_pem_len = o->ca_pem_len;
	} else if (o->ca_file) {
		hc->ca_file = xstrdup(o->ca_file);
	}
	if (hc->url.tls) {
		hc->cred = cred_new(hc, o->cert_pem, o->cert_pem_len, o->key_pem, o->key_pem_len,
				    o->cert_file, o->key_file, err, errlen);
		if (!hc->cred)
			goto fail;
	}
	if (!o->no_proxy_env && setup_proxy(hc, err, errlen) != 0)
		goto fail;
	return hc;
fail:
	http_client_free(hc);
	return NULL;
}

static void conn_close(struct hconn *c)
{
	if (!c)
		return;
	if (c->tls)
		gnutls_deinit(c->tls);
	if (c->fd >= 0)
		close(c->fd);
	cred_put(c->cred);
	free(c);
}

void http_client_free(struct http_client *hc)
{
	if (!hc)
		return;
	while (hc->idle) {
		struct hconn *c = hc->idle;
		hc->idle = c->next;
		conn_close(c);
	}
	cred_put(hc->cred);
	cred_put(hc->exec_cred);
	http_url_free(&hc->url);
	http_url_free(&hc->proxy);
	free(hc->proxy_auth);
	free(hc->vhost);
	free(hc->host_header);
	free(hc->base);
	if (hc->ca_pem)
		memset(hc->ca_pem, 0, hc->ca_pem_len);
	free(hc->ca_pem);
	free(hc->ca_file);
	pthread_mutex_destroy(&hc->mu);
	free(hc);
}

const char *http_client_base(const struct http_client *hc)
{
	return hc->base;
}

/* ---- the pool ---- */

/* true when an idle connection has something to read: the server's close, or junk. */
static bool conn_stale(const struct hconn *c)
{
	struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
	return poll(&pfd, 1, 0) != 0;
}

static struct hconn *pool_get(struct http_client *hc)
{
	int64_t now = mono_now_ns();
	for (;;) {
		pthread_mutex_lock(&hc->mu);
		struct hconn *c = hc->idle;
		if (c) {
			hc->idle = c->next;
			hc->nidle--;
		}
		pthread_mutex_unlock(&hc->mu);
		if (!c)
			return NULL;
		int64_t idle = now - c->idle_since;
		if (idle < IDLE_CHECK_NS || (idle < IDLE_MAX_NS && !conn_stale(c)))
			return c;
		conn_close(c);
	}
}

static void pool_put(struct http_client *hc, struct hconn *c)
{
	c->idle_since = mono_now_ns();
	c->off = c->len = 0;
	pthread_mutex_lock(&hc->mu);
	if (hc->nidle < POOL_MAX) {
		c->next = hc->idle;
		hc->idle = c;
		hc->nidle++;
		c = NULL;
	}
	pthread_mutex_unlock(&hc->mu);
	conn_close(c);
}

/* ---- I/O ---- */

static void fail(struct http_result *res, enum http_fail f, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void fail(struct http_result *res, enum http_fail f, const char *fmt, ...)
{
	res->fail = f;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(res->msg, sizeof(res->msg), fmt, ap);
	va_end(ap);
}

static void set_rcvtimeo(struct hconn *c, int ms)
{
	if (c->rcvtimeo_ms == ms)
		return;
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	c->rcvtimeo_ms = ms;
}

/* recv on the connection: >0 bytes, 0 at the peer's close, -1 with errno (EAGAIN: timed out). */
static ssize_t conn_recv(struct hconn *c, char *p, size_t cap, int *tls_err)
{
	if (c->tls) {
		ssize_t r = gnutls_record_recv(c->tls, p, cap);
		if (r >= 0)
			return r;
		if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED) {
			errno = EAGAIN;
			return -1;
		}
		if (r == GNUTLS_E_PREMATURE_TERMINATION)
			return 0; /* closed without close_notify: the end, as for TCP */
		*tls_err = (int)r;
		errno = EPROTO;
		return -1;
	}
	ssize_t r = recv(c->fd, p, cap, 0);
	if (r < 0 && errno == EINTR)
		errno = EAGAIN;
	return r;
}

enum { FILL_EOF = 0, FILL_ERR = -1, FILL_WAITED = -2 };

/*
 * Reads more of the answer into c->buf (compacting it first when full). Returns the bytes read,
 * FILL_EOF at the peer's close, FILL_ERR for an I/O error or a head larger than the buffer, or
 * FILL_WAITED when the deadline passed or the stop flag was set; res is filled for both.
 */
static ssize_t fill(struct hconn *c, const struct http_request *rq, const char *what,
		    struct http_result *res)
{
	if (c->off == c->len) {
		c->off = c->len = 0;
	} else if (c->len == sizeof(c->buf)) {
		memmove(c->buf, c->buf + c->off, c->len - c->off);
		c->len -= c->off;
		c->off = 0;
	}
	if (c->len == sizeof(c->buf)) { /* http_head_parse() refuses such a head first */
		fail(res, HTTP_TRANSPORT, "%s: read buffer full", what);
		return FILL_ERR;
	}
	for (;;) {
		if (rq->stop && atomic_load(rq->stop)) {
			fail(res, HTTP_STOPPED, "%s: stopped", what);
			return FILL_WAITED;
		}
		if (rq->deadline_ns && mono_now_ns() >= rq->deadline_ns) {
			fail(res, HTTP_TRANSPORT, "%s: timed out", what);
			return FILL_WAITED;
		}
		set_rcvtimeo(c, rq->stop ? STOP_POLL_MS : WAIT_SLICE_MS);
		int tls_err = 0;
		ssize_t r = conn_recv(c, c->buf + c->len, sizeof(c->buf) - c->len, &tls_err);
		if (r > 0) {
			c->len += (size_t)r;
			return r;
		}
		if (r == 0)
			return FILL_EOF;
		if (errno == EAGAIN)
			continue;
		fail(res, HTTP_TRANSPORT, "%s: %s", what,
		     tls_err ? gnutls_strerror(tls_err) : strerror(errno));
		return FILL_ERR;
	}
}

/* Sends head and body; 0, or -1 with errno or a TLS error in *tls_err. */
static int conn_send(struct hconn *c, const char *head, size_t hlen, const char *body,
		     size_t blen, int *tls_err)
{
	if (c->tls) {
		gnutls_record_cork(c->tls);
		gnutls_record_send(c->tls, head, hlen);
		if (blen)
			gnutls_record_send(c->tls, body, blen);
		int r;
		do
			r = gnutls_record_uncork(c->tls, GNUTLS_RECORD_WAIT);
		while (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED);
		if (r < 0) {
			*tls_err = r;
			errno = EPROTO;
			return -1;
		}
		return 0;
	}
	struct iovec iov[2] = { { (void *)head, hlen }, { (void *)body, blen } };
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = blen ? 2 : 1 };
	size_t left = hlen + blen;
	while (left) {
		ssize_t n = sendmsg(c->fd, &m, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		left -= (size_t)n;
		while (n > 0 && m.msg_iovlen) {
			if ((size_t)n >= m.msg_iov[0].iov_len) {
				n -= (ssize_t)m.msg_iov[0].iov_len;
				m.msg_iov++;
				m.msg_iovlen--;
			} else {
				m.msg_iov[0].iov_base = (char *)m.msg_iov[0].iov_base + n;
				m.msg_iov[0].iov_len -= (size_t)n;
				n = 0;
			}
		}
	}
	return 0;
}

/* ---- opening a connection ---- */

static int tcp_connect(const char *host, const char *port, int64_t deadline, struct http_result *res)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai = NULL;
	int g = getaddrinfo(host, port, &hints, &ai);
	if (g != 0) {
		fail(res, HTTP_TRANSPORT, "cannot resolve %s: %s", host, gai_strerror(g));
		return -1;
	}
	int fd = -1, why = 0;
	for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
		fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0) {
			why = errno;
			continue;
		}
		if (connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
			why = errno;
			close(fd);
			fd = -1;
			continue;
		}
		struct pollfd pfd = { .fd = fd, .events = POLLOUT };
		int pr;
		do {
			int64_t left = deadline - mono_now_ns();
			pr = left <= 0 ? 0 : poll(&pfd, 1, (int)((left + NSEC_PER_MSEC - 1) / NSEC_PER_MSEC));
		} while (pr < 0 && errno == EINTR);
		int soerr = 0;
		socklen_t sl = sizeof(soerr);
		if (pr == 0)
			soerr = ETIMEDOUT;
		else if (pr < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0)
			soerr = errno;
		if (soerr) {
			why = soerr;
			close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(ai);
	if (fd < 0) {
		fail(res, HTTP_TRANSPORT, "cannot connect to %s port %s: %s", host, port, strerror(why));
		return -1;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	int one = 1, idle = 30, intvl = 10;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* probes find a dead peer within about a minute, so a silent watch does not hang for hours */
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	struct timeval tv = { SEND_TIMEOUT_MS / 1000, 0 };
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	return fd;
}

/* Asks the proxy for a tunnel to the server (https through an http proxy). */
static int proxy_connect(struct http_client *hc, struct hconn *c, const struct http_request *rq,
			 struct http_result *res)
{
	bool v6 = strchr(hc->url.host, ':') != NULL;
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "CONNECT %s%s%s:%s HTTP/1.1\r\nHost: %s%s%s:%s\r\n%s\r\n", v6 ? "[" : "",
		    hc->url.host, v6 ? "]" : "", hc->url.port, v6 ? "[" : "", hc->url.host,
		    v6 ? "]" : "", hc->url.port, hc->proxy_auth ? hc->proxy_auth : "");
	int tls_err = 0;
	int rc = conn_send(c, sb.buf, sb.len, NULL, 0, &tls_err);
	strbuf_release(&sb);
	if (rc != 0) {
		fail(res, HTTP_TRANSPORT, "proxy %s: %s", hc->proxy.host, strerror(errno));
		return -1;
	}
	struct http_head h;
	char perr[160];
	for (;;) {
		ssize_t n = http_head_parse(c->buf, c->len, &h, perr, sizeof(perr));
		if (n < 0) {
			fail(res, HTTP_TRANSPORT, "proxy %s: %s", hc->proxy.host, perr);
			return -1;
		}
		if (n > 0) {
			if (h.status / 100 != 2) {
				fail(res, HTTP_TRANSPORT, "proxy %s refused the tunnel: HTTP %d",
				     hc->proxy.host, h.status);
				return -1;
			}
			if ((size_t)n != c->len) {
				fail(res, HTTP_TRANSPORT, "proxy %s sent bytes after its answer",
				     hc->proxy.host);
				return -1;
			}
			c->off = c->len = 0;
			return 0;
		}
		ssize_t r = fill(c, rq, "proxy", res);
		if (r == FILL_EOF)
			fail(res, HTTP_TRANSPORT, "proxy %s closed the connection", hc->proxy.host);
		if (r <= 0)
			return -1;
	}
}

/* "subject "...", issuer "...", valid until ..." of the server's certificate, or "". */
static void peer_info(gnutls_session_t s, char *out, size_t len)
{
	out[0] = '\0';
	unsigned n = 0;
	const gnutls_datum_t *certs = gnutls_certificate_get_peers(s, &n);
	gnutls_x509_crt_t crt;
	if (!certs || !n || gnutls_x509_crt_init(&crt) < 0)
		return;
	if (gnutls_x509_crt_import(crt, &certs[0], GNUTLS_X509_FMT_DER) == 0) {
		gnutls_datum_t dn = { 0 }, idn = { 0 };
		gnutls_x509_crt_get_dn3(crt, &dn, 0);
		gnutls_x509_crt_get_issuer_dn3(crt, &idn, 0);
		time_t t = gnutls_x509_crt_get_expiration_time(crt);
		struct tm tm;
		char until[40] = "?";
		if (t != (time_t)-1 && gmtime_r(&t, &tm))
			strftime(until, sizeof(until), "%Y-%m-%d %H:%M:%S UTC", &tm);
		snprintf(out, len, "subject \"%.*s\", issuer \"%.*s\", valid until %s", (int)dn.size,
			 dn.data ? (char *)dn.data : "", (int)idn.size, idn.data ? (char *)idn.data : "",
			 until);
		gnutls_free(dn.data);
		gnutls_free(idn.data);
	}
	gnutls_x509_crt_deinit(crt);
}

static int tls_start(struct http_client *hc, struct hconn *c, int64_t deadline,
		     struct http_result *res)
{
	int r = gnutls_init(&c->tls, GNUTLS_CLIENT | GNUTLS_NO_SIGNAL);
	if (r < 0) {
		c->tls = NULL;
		fail(res, HTTP_TRANSPORT, "TLS: %s", gnutls_strerror(r));
		return -1;
	}
	gnutls_set_default_priority(c->tls);
	gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, c->cred->x);
	if (!http_host_is_ip(hc->vhost))
		gnutls_server_name_set(c->tls, GNUTLS_NAME_DNS, hc->vhost, strlen(hc->vhost));
	if (!hc->insecure)
		gnutls_session_set_verify_cert(c->tls, hc->vhost, 0);
	gnutls_datum_t alpn = { (unsigned char *)"http/1.1", 8 };
	gnutls_alpn_set_protocols(c->tls, &alpn, 1, 0);
	gnutls_transport_set_int(c->tls, c->fd);
	set_rcvtimeo(c, WAIT_SLICE_MS);
	do {
		r = gnutls_handshake(c->tls);
	} while (r < 0 && !gnutls_error_is_fatal(r) && mono_now_ns() < deadline);
	if (r == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR) {
		res->verify_status = gnutls_session_get_verify_cert_status(c->tls);
		peer_info(c->tls, res->peer, sizeof(res->peer));
		gnutls_datum_t txt = { 0 };
		if (gnutls_certificate_verification_status_print(res->verify_status, GNUTLS_CRT_X509,
								 &txt, 0) == 0) {
			size_t n = strlen((char *)txt.data);
			while (n && txt.data[n - 1] == ' ')
				n--;
			fail(res, HTTP_TLS_REFUSED, "%.*s", (int)n, (char *)txt.data);
			gnutls_free(txt.data);
		} else {
			fail(res, HTTP_TLS_REFUSED, "certificate refused");
		}
		return -1;
	}
	if (r < 0) {
		fail(res, HTTP_TRANSPORT, "TLS handshake with %s port %s: %s", hc->url.host,
		     hc->url.port, r == GNUTLS_E_AGAIN ? "timed out" : gnutls_strerror(r));
		return -1;
	}
	return 0;
}

static struct hconn *conn_open(struct http_client *hc, const struct http_request *rq,
			       struct http_result *res)
{
	int64_t deadline = mono_now_ns() + CONNECT_TIMEOUT_NS;
	if (rq->deadline_ns && rq->deadline_ns < deadline)
		deadline = rq->deadline_ns;
	struct hconn *c = xmalloc(sizeof(*c));
	c->tls = NULL;
	c->cred = NULL;
	c->rcvtimeo_ms = -1;
	c->off = c->len = 0;
	c->next = NULL;
	const struct http_url *to = hc->proxied ? &hc->proxy : &hc->url;
	c->fd = tcp_connect(to->host, to->port, deadline, res);
	if (c->fd < 0)
		goto fail;
	if (!hc->url.tls)
		return c;
	if (hc->proxied && proxy_connect(hc, c, rq, res) != 0)
		goto fail;
	if (rq->cert_pem) {
		char cerr[300];
		c->cred = exec_cred_get(hc, rq, cerr, sizeof(cerr));
		if (!c->cred) {
			fail(res, HTTP_CLIENT_CERT, "the exec plugin's %s", cerr);
			goto fail;
		}
	} else {
		c->cred = hc->cred;
		atomic_fetch_add(&c->cred->refs, 1);
	}
	if (tls_start(hc, c, deadline, res) != 0)
		goto fail;
	return c;
fail:
	conn_close(c);
	return NULL;
}

/* ---- a request ---- */

struct body_ctx {
	http_body_fn fn;
	void *ud;
	int status;
};

static int to_fn(void *ud, const char *p, size_t n)
{
	struct body_ctx *b = ud;
	return n ? b->fn(b->ud, b->status, p, n) : 0;
}

/* Reads the body after the head; 0 when all of it arrived, -1 with res filled. *reusable says
 * whether the connection may serve another request. */
static int read_body(struct hconn *c, const struct http_request *rq, const struct http_head *h,
		     struct body_ctx *b, bool *reusable, struct http_result *res)
{
	*reusable = !h->close;
	char perr[160];
	if (strcmp(rq->method, "HEAD") == 0 || h->status == 204 || h->status == 304)
		return 0;
	if (h->chunked) {
		struct http_chunked d = { 0 };
		for (;;) {
			bool stopped;
			ssize_t n = http_chunked_feed(&d, c->buf + c->off, c->len - c->off, to_fn, b,
						      &stopped, perr, sizeof(perr));
			if (n < 0) {
				fail(res, HTTP_TRANSPORT, "malformed answer: %s", perr);
				return -1;
			}
			c->off += (size_t)n;
			if (stopped) {
				fail(res, HTTP_STOPPED, "stopped");
				return -1;
			}
			if (d.done)
				break;
			ssize_t r = fill(c, rq, "reading the answer", res);
			if (r == FILL_EOF)
				fail(res, HTTP_TRANSPORT, "the server closed the connection mid-answer");
			if (r <= 0)
				return -1;
		}
	} else {
		int64_t left = h->content_length; /* -1: until the server closes */
		if (left < 0)
			*reusable = false;
		for (;;) {
			size_t avail = c->len - c->off;
			if (left >= 0 && (int64_t)avail > left)
				avail = (size_t)left;
			if (to_fn(b, c->buf + c->off, avail) != 0) {
				fail(res, HTTP_STOPPED, "stopped");
				return -1;
			}
			c->off += avail;
			if (left >= 0) {
				left -= (int64_t)avail;
				if (!left)
					break;
			}
			ssize_t r = fill(c, rq, "reading the answer", res);
			if (r == FILL_EOF && h->content_length < 0)
				break;
			if (r == FILL_EOF)
				fail(res, HTTP_TRANSPORT, "the server closed the connection mid-answer");
			if (r <= 0)
				return -1;
		}
	}
	if (c->off != c->len || (c->tls && gnutls_record_check_pending(c->tls)))
		*reusable = false; /* bytes after the answer: do not trust the connection */
	return 0;
}

int http_do(struct http_client *hc, const struct http_request *rq, http_body_fn fn, void *ud,
	    struct http_result *res)
{
	memset(res, 0, sizeof(*res));
	res->retry_after = -1;
	/* A name from a hostile answer must not split the request line (nor a header) in two. */
	for (const unsigned char *t = (const unsigned char *)rq->target; *t; t++)
		if (*t <= ' ' || *t == 0x7f) {
			fail(res, HTTP_TRANSPORT, "the request path has a space or control character");
			return -1;
		}
	struct strbuf head = STRBUF_INIT;
	strbuf_addf(&head, "%s ", rq->method);
	if (hc->proxied && !hc->url.tls)
		strbuf_addf(&head, "http://%s", hc->host_header);
	strbuf_addf(&head, "%s%s HTTP/1.1\r\nHost: %s\r\n%s", hc->url.prefix, rq->target,
		    hc->host_header, rq->headers ? rq->headers : "");
	if (hc->proxied && !hc->url.tls && hc->proxy_auth)
		strbuf_addstr(&head, hc->proxy_auth);
	if (rq->body || strcmp(rq->method, "POST") == 0 || strcmp(rq->method, "PUT") == 0 ||
	    strcmp(rq->method, "PATCH") == 0)
		strbuf_addf(&head, "Content-Length: %zu\r\n", rq->body ? rq->body_len : 0);
	strbuf_addstr(&head, "\r\n");
	int rc = -1;
	for (int attempt = 0; attempt < 2; attempt++) {
		struct hconn *c = attempt == 0 ? pool_get(hc) : NULL;
		bool reused = c != NULL;
		if (!c && !(c = conn_open(hc, rq, res)))
			break;
		int tls_err = 0;
		if (conn_send(c, head.buf, head.len, rq->body, rq->body ? rq->body_len : 0,
			      &tls_err) != 0) {
			int e = errno;
			conn_close(c);
			if (reused)
				continue; /* the server closed it meanwhile */
			fail(res, HTTP_TRANSPORT, "sending the request: %s",
			     tls_err ? gnutls_strerror(tls_err) : strerror(e));
			break;
		}
		struct http_head h;
		char perr[160];
		ssize_t hl;
		bool retry = false;
		for (;;) {
			hl = http_head_parse(c->buf + c->off, c->len - c->off, &h, perr, sizeof(perr));
			if (hl < 0) {
				fail(res, HTTP_TRANSPORT, "malformed answer: %s", perr);
				break;
			}
			if (hl > 0 && h.status >= 200)
				break;
			if (hl > 0) { /* 1xx: an interim answer, the real one follows */
				if (h.status == 101) {
					fail(res, HTTP_TRANSPORT, "the server switched protocols");
					hl = -1;
					break;
				}
				c->off += (size_t)hl;
				continue;
			}
			bool nothing_yet = c->len == 0;
			ssize_t r = fill(c, rq, "waiting for the answer", res);
			if (r == FILL_EOF || (r == FILL_ERR && nothing_yet && reused)) {
				if (reused && nothing_yet) {
					retry = true; /* a kept connection the server had closed */
				} else {
					fail(res, HTTP_TRANSPORT, "the server closed the connection "
								  "before answering");
				}
				hl = -1;
				break;
			}
			if (r < 0) {
				hl = -1;
				break;
			}
		}
		if (hl < 0) {
			conn_close(c);
			if (retry) {
				res->fail = HTTP_OK;
				res->msg[0] = '\0';
				continue;
			}
			break;
		}
		c->off += (size_t)hl;
		res->status = h.status;
		res->retry_after = h.retry_after;
		struct body_ctx b = { fn, ud, h.status };
		bool reusable;
		if (read_body(c, rq, &h, &b, &reusable, res) != 0) {
			conn_close(c);
			break;
		}
		if (reusable)
			pool_put(hc, c);
		else
			conn_close(c);
		rc = 0;
		break;
	}
	strbuf_release(&head);
	return rc;
}

const char *http_verify_reason(unsigned st)
{
	if (st & (GNUTLS_CERT_SIGNER_NOT_FOUND | GNUTLS_CERT_SIGNER_NOT_CA))
		return "certificate signed by unknown authority";
	if (st & GNUTLS_CERT_EXPIRED)
		return "certificate has expired";
	if (st & GNUTLS_CERT_NOT_ACTIVATED)
		return "certificate is not yet valid";
	if (st & GNUTLS_CERT_UNEXPECTED_OWNER)
		return "certificate is not valid for the server's name (name mismatch)";
	return "certificate refused";
}
