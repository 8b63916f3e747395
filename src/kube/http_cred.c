/*
 * What the HTTP client brings to its connections: GnuTLS credentials (trust from the
 * kubeconfig's CA or the system's, the client certificate, and the exec plugin's certificate,
 * made again when it rotates; reference-counted, as sessions outlive a rotation), basic auth,
 * and the proxy from HTTPS_PROXY, HTTP_PROXY and NO_PROXY, as client-go reads them.
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

/* ---- credentials ---- */

void http_cred_put(struct cred *c)
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

struct cred *http_cred_new(const struct http_client *hc, const char *cert, size_t cert_len,
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
struct cred *http_exec_cred_get(struct http_client *hc, const struct http_request *rq,
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
	c = http_cred_new(hc, rq->cert_pem, rq->cert_pem_len, rq->key_pem, rq->key_pem_len, NULL, NULL,
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
	http_cred_put(old);
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

int http_setup_proxy(struct http_client *hc, char *err, size_t errlen)
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
