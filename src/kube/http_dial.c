/*
 * One connection of the HTTP client: TCP connect with a deadline (every address in turn), the
 * proxy's CONNECT, the TLS handshake with the peer's certificate checked against the verified
 * name, and the bytes: send whole, receive into the connection's buffer with SO_RCVTIMEO
 * slices so a request's deadline and a watch's stop are kept (http_conn.c's comment).
 */
#include "kube/http_int.h"

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

void http_conn_close(struct hconn *c)
{
	if (!c)
		return;
	if (c->tls)
		gnutls_deinit(c->tls);
	if (c->fd >= 0)
		close(c->fd);
	http_cred_put(c->cred);
	free(c);
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

/*
 * Reads more of the answer into c->buf (compacting it first when full). Returns the bytes read,
 * FILL_EOF at the peer's close, FILL_ERR for an I/O error or a head larger than the buffer, or
 * FILL_WAITED when the deadline passed or the stop flag was set; res is filled for both.
 */
ssize_t http_fill(struct hconn *c, const struct http_request *rq, const char *what,
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
int http_conn_send(struct hconn *c, const char *head, size_t hlen, const char *body,
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
	int rc = http_conn_send(c, sb.buf, sb.len, NULL, 0, &tls_err);
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
		ssize_t r = http_fill(c, rq, "proxy", res);
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
	/*
	 * GNUTLS_FORCE_CLIENT_CERT: the credentials hold one certificate, which is sent whatever
	 * the server's CertificateRequest lists, as client-go's GetClientCertificate does. Without
	 * it GnuTLS before 3.8.13 picks a certificate only if its key type is among the TLS 1.3
	 * request's signature schemes as it reads them: RSA-PSS-RSAE counts as an RSA-PSS key, so
	 * an RSA certificate (kubeadm's) never matches and the handshake goes on without one; Go's
	 * server (kube-apiserver) lists a CA, which is when GnuTLS checks, and no PKCS#1 scheme, and
	 * the request is served as system:anonymous.
	 */
	int r = gnutls_init(&c->tls, GNUTLS_CLIENT | GNUTLS_NO_SIGNAL | GNUTLS_FORCE_CLIENT_CERT);
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

struct hconn *http_conn_open(struct http_client *hc, const struct http_request *rq,
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
		c->cred = http_exec_cred_get(hc, rq, cerr, sizeof(cerr));
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
	http_conn_close(c);
	return NULL;
}
