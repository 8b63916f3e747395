/*
 * The connection half of kube/http: blocking sockets with receive timeouts (no poll loop on the
 * hot path: a request is one send and, usually, one recv), GnuTLS for https, an HTTP proxy
 * from the environment, and a LIFO pool of idle keep-alive connections.
 *
 * Waiting: a connection's SO_RCVTIMEO is 100 ms while a stop flag is to be polled (watches) and
 * 1 s otherwise, so a request's deadline is kept to within a second without re-arming a timer
 * per read; the option is only set when it changes.
 *
 * Files: this one is the client (its life, the pool, one request); http_dial.c one connection,
 * http_cred.c the credentials and the proxy (kube/http_int.h has the layers).
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
		hc->cred = http_cred_new(hc, o->cert_pem, o->cert_pem_len, o->key_pem, o->key_pem_len,
				    o->cert_file, o->key_file, err, errlen);
		if (!hc->cred)
			goto fail;
	}
	if (!o->no_proxy_env && http_setup_proxy(hc, err, errlen) != 0)
		goto fail;
	return hc;
fail:
	http_client_free(hc);
	return NULL;
}

void http_client_free(struct http_client *hc)
{
	if (!hc)
		return;
	while (hc->idle) {
		struct hconn *c = hc->idle;
		hc->idle = c->next;
		http_conn_close(c);
	}
	http_cred_put(hc->cred);
	http_cred_put(hc->exec_cred);
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
		http_conn_close(c);
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
	http_conn_close(c);
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
			ssize_t r = http_fill(c, rq, "reading the answer", res);
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
			ssize_t r = http_fill(c, rq, "reading the answer", res);
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
		if (!c && !(c = http_conn_open(hc, rq, res)))
			break;
		int tls_err = 0;
		if (http_conn_send(c, head.buf, head.len, rq->body, rq->body ? rq->body_len : 0,
			      &tls_err) != 0) {
			int e = errno;
			http_conn_close(c);
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
			ssize_t r = http_fill(c, rq, "waiting for the answer", res);
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
			http_conn_close(c);
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
			http_conn_close(c);
			break;
		}
		if (reusable)
			pool_put(hc, c);
		else
			http_conn_close(c);
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
