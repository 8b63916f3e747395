/*
 * kube/http: the HTTP/1.1 client under the kube client, on TCP sockets with GnuTLS for https.
 *
 * Why not libcurl: loading libcurl and its dependency tree (OpenSSL, and GnuTLS again through
 * librtmp, Kerberos, LDAP, libssh2...) cost every sidecar 6 MB of RSS before its first request,
 * and its per-request machinery more CPU than the rest of the request path (docs/performance.md,
 * round 3). The API server needs little of it: one host, keep-alive connections, fixed-length
 * and chunked bodies, TLS with the kubeconfig's CA and client certificate, and an HTTP proxy
 * from the environment, as client-go reads it.
 *
 * Two halves:
 * - parsing (http_parse.c): the server URL, a response head, a chunked body. Pure functions,
 *   bounded, fuzzed (tests/fuzz/fuzz_kube_http.c);
 * - connections (http_conn.c, http_dial.c, http_cred.c; kube/http_int.h has their layers):
 *   connect, TLS, proxy CONNECT, a pool of idle keep-alive connections, one request at a time
 *   per connection, blocking, thread-safe.
 */
#ifndef KCSI_KUBE_HTTP_H
#define KCSI_KUBE_HTTP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- parsing ---- */

/* An absolute http or https URL: scheme://[user:pass@]host[:port][/prefix]. */
struct http_url {
	bool tls;       /* https */
	char *host;     /* without brackets for IPv6 */
	char *port;     /* decimal; 80 or 443 when the URL gives none */
	char *prefix;   /* path without trailing '/', "" when none */
	char *userinfo; /* "user:pass" percent-decoded, or NULL */
};
/* Returns 0, or -1 with a reason in err (the URL itself is not quoted: it may hold a password). */
int http_url_parse(const char *s, struct http_url *u, char *err, size_t errlen);
void http_url_free(struct http_url *u);
/* true when host is an IPv4 or IPv6 literal (no SNI is sent for those). */
bool http_host_is_ip(const char *host);

/* Heads larger than this are refused: the API server's are under 1 KiB. A connection's read
 * buffer is this size, so a whole head always fits in it. */
#define HTTP_MAX_HEAD (16 * 1024)

struct http_head {
	int status;             /* 100..999 */
	int64_t content_length; /* -1: absent */
	bool chunked;           /* Transfer-Encoding: chunked */
	bool close;             /* Connection: close, or HTTP/1.0 without keep-alive */
	long retry_after;       /* Retry-After seconds, -1: absent or a date */
};
/*
 * Parses the response head at the start of buf[0..len). Returns the head's length (through the
 * empty line) when buf holds all of it, 0 when more bytes are needed (and len < HTTP_MAX_HEAD),
 * or -1 with a reason in err when it is malformed or too large.
 */
ssize_t http_head_parse(const char *buf, size_t len, struct http_head *h, char *err, size_t errlen);

/* A chunked body decoder (RFC 9112 §7.1); zero it to start. */
struct http_chunked {
	int state;
	uint64_t left;    /* data bytes left in the current chunk */
	unsigned digits;  /* hex digits of the current size */
	size_t line;      /* bytes in the current extension or trailer line, bounded */
	size_t trailers;  /* trailer bytes so far, bounded */
	bool done;        /* the last chunk and the trailers have been read */
};
/* Receives body bytes; a non-zero return stops decoding. */
typedef int (*http_sink_fn)(void *ud, const char *p, size_t n);
/*
 * Decodes in[0..len), handing data to sink. Returns the bytes consumed (len, or fewer when the
 * body ended or the sink stopped), or -1 with a reason in err when the framing is malformed.
 * *stopped tells a sink stop apart.
 */
ssize_t http_chunked_feed(struct http_chunked *d, const char *in, size_t len, http_sink_fn sink,
			  void *ud, bool *stopped, char *err, size_t errlen);

/* ---- connections ---- */

struct http_client_opts {
	const char *server;          /* http(s)://host[:port][/prefix] */
	const char *tls_server_name; /* the name to verify (and send as SNI), or NULL: the host */
	bool insecure;               /* no verification of the server's certificate */
	const char *ca_pem;          /* trusted CAs: PEM data, else a PEM file, else the system's */
	size_t ca_pem_len;
	const char *ca_file;
	const char *cert_pem, *key_pem; /* client certificate: PEM data, else files, else none */
	size_t cert_pem_len, key_pem_len;
	const char *cert_file, *key_file;
	bool no_proxy_env; /* ignore HTTPS_PROXY/HTTP_PROXY (tests) */
};

struct http_client;

/* Loads the CAs and the client certificate now: a bad file is an error at start, not later. */
struct http_client *http_client_new(const struct http_client_opts *o, char *err, size_t errlen);
void http_client_free(struct http_client *hc);
/* "scheme://host:port/prefix" as requests see it (the tls-server-name in place of the host). */
const char *http_client_base(const struct http_client *hc);

struct http_request {
	const char *method;
	const char *target;  /* path[?query], starting with '/'; the URL prefix is added */
	const char *headers; /* extra header lines, each ending in "\r\n", or NULL */
	const char *body;
	size_t body_len;
	int64_t deadline_ns; /* monotonic; 0: none */
	const atomic_int *stop; /* polled every 100 ms while waiting; ends the request when set */
	/* an exec plugin's client certificate (PEM), replacing the configured one, or NULL */
	const char *cert_pem, *key_pem;
	size_t cert_pem_len, key_pem_len;
};

enum http_fail {
	HTTP_OK,
	HTTP_STOPPED,      /* *stop was set or the sink returned non-zero */
	HTTP_TRANSPORT,    /* connect, I/O, timeout, malformed answer */
	HTTP_TLS_REFUSED,  /* the server's certificate failed verification: retrying cannot help */
	HTTP_CLIENT_CERT,  /* the exec plugin's certificate and key cannot be used */
};

struct http_result {
	enum http_fail fail;
	int status;              /* HTTP status, 0 when no head arrived */
	long retry_after;        /* seconds, -1: absent */
	unsigned verify_status;  /* GnuTLS verification bits, for HTTP_TLS_REFUSED */
	char peer[400];          /* the server's certificate (subject, issuer, expiry), or "" */
	char msg[400];           /* what went wrong, for HTTP_TRANSPORT and the TLS failures */
};

/*
 * Called once the head arrived (status known) with each piece of the body; non-zero stops the
 * transfer (result HTTP_STOPPED, the connection is closed).
 */
typedef int (*http_body_fn)(void *ud, int status, const char *p, size_t n);

/*
 * One request on a pooled or new connection. A pooled connection that the server closed
 * meanwhile (no answer byte arrived) is replaced once by a new one. Returns 0 when a whole
 * answer arrived (any status), -1 otherwise; *res says which.
 */
int http_do(struct http_client *hc, const struct http_request *rq, http_body_fn fn, void *ud,
	    struct http_result *res);

/* Appends base64(userinfo) ("user:password") for a Basic Authorization header. */
struct strbuf;
void http_basic_auth(struct strbuf *out, const char *userinfo);

/* Why a certificate was refused, in Go's x509 words (kubectl users know them). */
const char *http_verify_reason(unsigned verify_status);

#endif
