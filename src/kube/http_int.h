/*
 * kube/http_int: what the files of the HTTP client's connection half share (kube/http.h is
 * the transport's API). Layers, each using only those below it:
 *
 *   http_conn.c  the client: its life, the pool of idle connections, one request (http_do)
 *   http_dial.c  one connection: open (TCP, proxy CONNECT, TLS and the peer's check), send,
 *                receive with the timeouts that keep a deadline, close
 *   http_cred.c  what a client brings to its connections: TLS credentials (the kubeconfig's,
 *                the exec plugin's, rotated), basic auth, the proxy from the environment
 */
#ifndef KCSI_KUBE_HTTP_INT_H
#define KCSI_KUBE_HTTP_INT_H

#include <gnutls/gnutls.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

#include "kube/http.h"

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

/* A failed request's kind and message (res is the caller's). */
static inline void fail(struct http_result *res, enum http_fail f, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static inline void fail(struct http_result *res, enum http_fail f, const char *fmt, ...)
{
	res->fail = f;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(res->msg, sizeof(res->msg), fmt, ap);
	va_end(ap);
}

/* ---- http_cred.c ---- */

/* Drops a reference; the last frees the credentials. NULL is ignored. */
void http_cred_put(struct cred *c);
/* Trust (hc's CA, or the system's) and a client certificate (PEM, or files); NULL with err. */
struct cred *http_cred_new(const struct http_client *hc, const char *cert, size_t cert_len,
			   const char *key, size_t key_len, const char *cert_file,
			   const char *key_file, char *err, size_t errlen);
/* The exec plugin's credentials for rq, made again when the plugin's certificate rotated. */
struct cred *http_exec_cred_get(struct http_client *hc, const struct http_request *rq,
				char *err, size_t errlen);
/* HTTPS_PROXY/HTTP_PROXY and NO_PROXY as client-go reads them; 0, or -1 with err. */
int http_setup_proxy(struct http_client *hc, char *err, size_t errlen);

/* ---- http_dial.c ---- */

enum { FILL_EOF = 0, FILL_ERR = -1, FILL_WAITED = -2 };
void http_conn_close(struct hconn *c);
/* Reads more of the answer into c->buf: the bytes read, or a FILL_ value (res says why). */
ssize_t http_fill(struct hconn *c, const struct http_request *rq, const char *what,
		  struct http_result *res);
/* Writes head and body whole; 0, or -1 (errno, or *tls_err for TLS). */
int http_conn_send(struct hconn *c, const char *head, size_t hlen, const char *body,
		   size_t blen, int *tls_err);
/* A new connection to hc's server for rq (through the proxy, TLS set up); NULL with res. */
struct hconn *http_conn_open(struct http_client *hc, const struct http_request *rq,
			     struct http_result *res);

#endif
