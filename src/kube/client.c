/*
 * The REST client is a thin, blocking layer over libcurl easy handles. Connections, TLS sessions
 * and DNS answers live in one CURLSH per client, so sequential and concurrent requests reuse warm
 * connections without a multi loop. Easy handles are pooled and curl_easy_reset() between uses
 * (which keeps the shared caches), then given the client's fixed options again: one code path
 * sets every option, so no state leaks from one request into the next.
 *
 * Everything that varies per attempt (bearer token, rate-limit token) is taken inside the retry
 * loop, so a rotated token or a re-run exec plugin applies to the retry itself.
 */
#include "kube/client.h"

#include <ctype.h>
#include <curl/curl.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#include "base/backoff.h"
#include "base/log.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "kube/ratelimit.h"

#ifndef KCSI_VERSION
#define KCSI_VERSION "v0.0.0"
#endif

const struct kube_resource KUBE_RES_VOLUMEATTACHMENTS = { "storage.k8s.io", "v1", "volumeattachments", false };
const struct kube_resource KUBE_RES_PERSISTENTVOLUMES = { "", "v1", "persistentvolumes", false };
const struct kube_resource KUBE_RES_PERSISTENTVOLUMECLAIMS = { "", "v1", "persistentvolumeclaims", true };
const struct kube_resource KUBE_RES_CSINODES = { "storage.k8s.io", "v1", "csinodes", false };
const struct kube_resource KUBE_RES_NODES = { "", "v1", "nodes", false };
const struct kube_resource KUBE_RES_LEASES = { "coordination.k8s.io", "v1", "leases", true };
const struct kube_resource KUBE_RES_EVENTS = { "", "v1", "events", true };
const struct kube_resource KUBE_RES_SECRETS = { "", "v1", "secrets", true };
const struct kube_resource KUBE_RES_STORAGECLASSES = { "storage.k8s.io", "v1", "storageclasses", false };
const struct kube_resource KUBE_RES_PODS = { "", "v1", "pods", true };
const struct kube_resource KUBE_RES_CSIDRIVERS = { "storage.k8s.io", "v1", "csidrivers", false };
const struct kube_resource KUBE_RES_CSISTORAGECAPACITIES = { "storage.k8s.io", "v1", "csistoragecapacities", true };
const struct kube_resource KUBE_RES_VOLUMESNAPSHOTS = { "snapshot.storage.k8s.io", "v1", "volumesnapshots", true };
const struct kube_resource KUBE_RES_VOLUMESNAPSHOTCONTENTS = { "snapshot.storage.k8s.io", "v1", "volumesnapshotcontents", false };
const struct kube_resource KUBE_RES_VOLUMESNAPSHOTCLASSES = { "snapshot.storage.k8s.io", "v1", "volumesnapshotclasses", false };

#define POOL_MAX 32
/*
 * Connections the shared cache may hold, in use (watch streams included) or idle. libcurl's
 * default of 5 counts the watches too: with a few informers and 10 workers, nearly every request
 * closed the oldest idle connection on its way out and the next one opened a new one (a TCP
 * handshake, and a thread in a thread-per-connection server). 128 covers csi-provisioner's
 * default 100 workers plus its watches (64 did not: its CPU did not move). The cache never holds
 * more than the peak of concurrent requests; client-go keeps 25 idle connections per host on top
 * of the busy ones.
 */
#define CONN_CACHE_MAX 128
#define RETRY_AFTER_CAP_S 60

struct kube_client {
	struct kube_config *cfg;
	struct kube_client_opts opts;
	char *user_agent;
	char *url_base;                /* scheme://host:port[/prefix], host possibly tls-server-name */
	struct curl_slist *connect_to; /* maps tls-server-name to the real host */
	CURLSH *share;
	pthread_mutex_t share_mu[CURL_LOCK_DATA_LAST];
	pthread_mutex_t pool_mu;
	CURL *pool[POOL_MAX];
	int npool;
	struct kube_ratelimit rl;
	atomic_uint_fast64_t requests, retries;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void)
{
	curl_global_init(CURL_GLOBAL_ALL);
}

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access acc, void *ud)
{
	(void)h;
	(void)acc;
	pthread_mutex_lock(&((struct kube_client *)ud)->share_mu[data]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *ud)
{
	(void)h;
	pthread_mutex_unlock(&((struct kube_client *)ud)->share_mu[data]);
}

/* ---- errors ---- */

bool kube_err_is_not_found(const struct kube_err *e) { return e->code == 404; }
bool kube_err_is_conflict(const struct kube_err *e) { return e->code == 409 && strcmp(e->reason, "AlreadyExists") != 0; }
bool kube_err_is_already_exists(const struct kube_err *e) { return e->code == 409 && strcmp(e->reason, "AlreadyExists") == 0; }
bool kube_err_is_gone(const struct kube_err *e) { return e->code == 410 || strcmp(e->reason, "Expired") == 0 || strcmp(e->reason, "Gone") == 0; }

static const char *reason_for(int code)
{
	switch (code) {
	case 400: return "BadRequest";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "NotFound";
	case 405: return "MethodNotAllowed";
	case 409: return "Conflict";
	case 410: return "Expired";
	case 413: return "RequestEntityTooLarge";
	case 415: return "UnsupportedMediaType";
	case 422: return "Invalid";
	case 429: return "TooManyRequests";
	case 500: return "InternalError";
	case 503: return "ServiceUnavailable";
	case 504: return "Timeout";
	default: return "";
	}
}

/* Fills e from an HTTP error answer: the Status object when the body is one. */
static void err_from_answer(struct kube_err *e, int code, const char *body, size_t len)
{
	e->code = code;
	snprintf(e->reason, sizeof(e->reason), "%s", reason_for(code));
	json_t *st = json_loadb(body, len, 0, NULL);
	const char *r = json_string_value(json_object_get(st, "reason"));
	const char *m = json_string_value(json_object_get(st, "message"));
	if (r && *r)
		snprintf(e->reason, sizeof(e->reason), "%s", r);
	if (m)
		snprintf(e->message, sizeof(e->message), "%s", m);
	else
		snprintf(e->message, sizeof(e->message), "HTTP %d: %.*s", code,
			 (int)(len > 200 ? 200 : len), body);
	json_decref(st);
}

/* ---- life cycle ---- */

static const char *go_arch(void)
{
#if defined(__x86_64__)
	return "amd64";
#elif defined(__aarch64__)
	return "arm64";
#elif defined(__arm__)
	return "arm";
#elif defined(__powerpc64__)
	return "ppc64le";
#elif defined(__s390x__)
	return "s390x";
#else
	return "unknown";
#endif
}

/* Builds url_base and, with tls-server-name, the CONNECT_TO mapping. */
static int setup_url(struct kube_client *c, char *err, size_t errlen)
{
	CURLU *u = curl_url();
	char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL;
	int rc = -1;
	if (curl_url_set(u, CURLUPART_URL, c->cfg->server, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK) {
		snprintf(err, errlen, "%s: server \"%s\" is not a valid URL", c->cfg->source,
			 c->cfg->server);
		goto out;
	}
	curl_url_get(u, CURLUPART_PATH, &path, 0);
	const char *prefix = path && strcmp(path, "/") ? path : "";
	size_t plen = strlen(prefix);
	while (plen && prefix[plen - 1] == '/')
		plen--;
	const char *vhost = c->cfg->tls_server_name ? c->cfg->tls_server_name : host;
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "%s://%s:%s%.*s", scheme, vhost, port, (int)plen, prefix);
	c->url_base = strbuf_detach(&sb, NULL);
	if (c->cfg->tls_server_name) {
		strbuf_addf(&sb, "%s:%s:%s:%s", vhost, port, host, port);
		c->connect_to = curl_slist_append(NULL, sb.buf);
		strbuf_release(&sb);
	}
	rc = 0;
out:
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_free(path);
	curl_url_cleanup(u);
	return rc;
}

struct kube_client *kube_client_new(struct kube_config *cfg, const struct kube_client_opts *o,
				    char *err, size_t errlen)
{
	pthread_once(&curl_once, curl_init_once);
	struct kube_client *c = xcalloc(1, sizeof(*c));
	c->cfg = cfg;
	if (o)
		c->opts = *o;
	if (!c->opts.component)
		c->opts.component = "kcsi";
	if (!c->opts.timeout_ns)
		c->opts.timeout_ns = 60 * NSEC_PER_SEC;
	if (!c->opts.max_retries)
		c->opts.max_retries = 10;
	if (!c->opts.max_response)
		c->opts.max_response = (size_t)1 << 30;
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "%s/%s (linux/%s) kcsi", c->opts.component, KCSI_VERSION, go_arch());
	c->user_agent = strbuf_detach(&sb, NULL);
	if (setup_url(c, err, errlen) != 0) {
		free(c->user_agent);
		free(c);
		return NULL;
	}
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&c->share_mu[i], NULL);
	pthread_mutex_init(&c->pool_mu, NULL);
	c->share = curl_share_init();
	curl_share_setopt(c->share, CURLSHOPT_LOCKFUNC, share_lock);
	curl_share_setopt(c->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
	curl_share_setopt(c->share, CURLSHOPT_USERDATA, c);
	curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
	curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
	curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
	kube_ratelimit_init(&c->rl, c->opts.qps, c->opts.burst);
	return c;
}

void kube_client_free(struct kube_client *c)
{
	if (!c)
		return;
	for (int i = 0; i < c->npool; i++)
		curl_easy_cleanup(c->pool[i]);
	curl_share_cleanup(c->share);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&c->share_mu[i]);
	pthread_mutex_destroy(&c->pool_mu);
	kube_ratelimit_destroy(&c->rl);
	curl_slist_free_all(c->connect_to);
	free(c->url_base);
	free(c->user_agent);
	free(c);
}

struct kube_config *kube_client_config(struct kube_client *c)
{
	return c->cfg;
}

void kube_client_stats(struct kube_client *c, struct kube_client_stats *s)
{
	s->requests = atomic_load(&c->requests);
	s->retries = atomic_load(&c->retries);
}

static CURL *handle_get(struct kube_client *c)
{
	CURL *h = NULL;
	pthread_mutex_lock(&c->pool_mu);
	if (c->npool)
		h = c->pool[--c->npool];
	pthread_mutex_unlock(&c->pool_mu);
	if (!h)
		h = curl_easy_init();
	else
		curl_easy_reset(h);
	return h;
}

static void handle_put(struct kube_client *c, CURL *h)
{
	pthread_mutex_lock(&c->pool_mu);
	if (c->npool < POOL_MAX) {
		c->pool[c->npool++] = h;
		h = NULL;
	}
	pthread_mutex_unlock(&c->pool_mu);
	if (h)
		curl_easy_cleanup(h);
}

/* The options every request carries. */
static void apply_base(struct kube_client *c, CURL *h)
{
	struct kube_config *cfg = c->cfg;
	curl_easy_setopt(h, CURLOPT_SHARE, c->share);
	curl_easy_setopt(h, CURLOPT_MAXCONNECTS, (long)CONN_CACHE_MAX);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_USERAGENT, c->user_agent);
	curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "gzip");
	curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
	/* Probes find a dead peer within about a minute, so a silent watch does not hang for hours. */
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPIDLE, 30L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPINTVL, 10L);
	if (c->connect_to)
		curl_easy_setopt(h, CURLOPT_CONNECT_TO, c->connect_to);
	if (cfg->insecure) {
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
	} else if (cfg->ca_pem) {
		struct curl_blob b = { cfg->ca_pem, cfg->ca_pem_len, CURL_BLOB_NOCOPY };
		curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &b);
	} else if (cfg->ca_file) {
		curl_easy_setopt(h, CURLOPT_CAINFO, cfg->ca_file);
	}
	if (cfg->cert_pem) {
		struct curl_blob b = { cfg->cert_pem, cfg->cert_pem_len, CURL_BLOB_NOCOPY };
		curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &b);
		curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
	} else if (cfg->cert_file) {
		curl_easy_setopt(h, CURLOPT_SSLCERT, cfg->cert_file);
	}
	if (cfg->key_pem) {
		struct curl_blob b = { cfg->key_pem, cfg->key_pem_len, CURL_BLOB_NOCOPY };
		curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &b);
		curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
	} else if (cfg->key_file) {
		curl_easy_setopt(h, CURLOPT_SSLKEY, cfg->key_file);
	}
	if (cfg->username) {
		curl_easy_setopt(h, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		curl_easy_setopt(h, CURLOPT_USERNAME, cfg->username);
		curl_easy_setopt(h, CURLOPT_PASSWORD, cfg->password ? cfg->password : "");
	}
}

/* ---- one attempt ---- */

struct xfer {
	struct strbuf *body;
	size_t max;
	bool too_large;
	long retry_after; /* seconds, -1 when absent */
	/* streaming */
	CURL *h;
	kube_stream_fn on_data;
	void *ud;
	const atomic_int *stop;
	bool stopped;
	bool tls_refused; /* the server's certificate failed verification: retrying cannot help */
};

static size_t on_write(char *p, size_t sz, size_t n, void *ud)
{
	struct xfer *x = ud;
	size_t len = sz * n;
	if (x->on_data) {
		long code = 0;
		curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &code);
		if (code >= 200 && code < 300) {
			if (x->on_data(p, len, x->ud) != 0) {
				x->stopped = true;
				return 0;
			}
			return len;
		}
	}
	if (x->body->len + len > x->max) {
		x->too_large = true;
		return 0;
	}
	strbuf_add(x->body, p, len);
	return len;
}

static size_t on_header(char *p, size_t sz, size_t n, void *ud)
{
	struct xfer *x = ud;
	size_t len = sz * n;
	static const char name[] = "retry-after:";
	if (len > sizeof(name) - 1 && strncasecmp(p, name, sizeof(name) - 1) == 0) {
		const char *v = p + sizeof(name) - 1;
		while (*v == ' ' || *v == '\t')
			v++;
		if (isdigit((unsigned char)*v))
			x->retry_after = strtol(v, NULL, 10);
	}
	return len;
}

static int on_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c2, curl_off_t d)
{
	(void)a, (void)b, (void)c2, (void)d;
	struct xfer *x = ud;
	if (x->stop && atomic_load(x->stop)) {
		x->stopped = true;
		return 1;
	}
	return 0;
}

/*
 * A stream (watch) runs in a multi handle polled every 100 ms, so a stop is seen within 100 ms:
 * libcurl calls the progress function of an idle transfer only about once a second, too late
 * for a process that must end within a second of SIGTERM.
 */
static CURLcode perform_stream(CURL *h, struct xfer *x)
{
	CURLM *m = curl_multi_init();
	if (!m)
		return curl_easy_perform(h);
	curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, (long)CONN_CACHE_MAX);
	CURLcode cc = CURLE_OK;
	if (curl_multi_add_handle(m, h) != CURLM_OK) {
		curl_multi_cleanup(m);
		return curl_easy_perform(h);
	}
	int running = 1;
	while (running) {
		if (x->stop && atomic_load(x->stop)) {
			x->stopped = true;
			cc = CURLE_ABORTED_BY_CALLBACK;
			break;
		}
		CURLMcode mc = curl_multi_perform(m, &running);
		if (mc == CURLM_OK && running)
			mc = curl_multi_poll(m, NULL, 0, 100, NULL);
		if (mc != CURLM_OK) {
			cc = CURLE_RECV_ERROR;
			break;
		}
	}
	int left;
	CURLMsg *msg;
	while ((msg = curl_multi_info_read(m, &left)))
		if (msg->msg == CURLMSG_DONE && msg->easy_handle == h)
			cc = msg->data.result;
	curl_multi_remove_handle(m, h);
	curl_multi_cleanup(m);
	return cc;
}

/* Copies the value of the "Name:" line of a curl certinfo list into out ("" when absent). */
static void certinfo_field(const struct curl_slist *l, const char *name, char *out, size_t len)
{
	size_t n = strlen(name);
	out[0] = '\0';
	for (; l; l = l->next)
		if (strncmp(l->data, name, n) == 0 && l->data[n] == ':') {
			snprintf(out, len, "%s", l->data + n + 1);
			return;
		}
}

/*
 * The certificate the server presents, for an error message: a second handshake to the same
 * address with verification off and CURLOPT_CERTINFO on, sending nothing (CONNECT_ONLY) and
 * sharing nothing with the client's connection cache, so no unverified connection is ever used
 * for a request. Writes "subject ..., issuer ..., valid until ..." or "" when it cannot tell.
 */
static void server_certificate(struct kube_client *c, const char *url, char *out, size_t len)
{
	out[0] = '\0';
	CURL *h = curl_easy_init();
	if (!h)
		return;
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECT_ONLY, 1L);
	curl_easy_setopt(h, CURLOPT_CERTINFO, 1L);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 2000L);
	if (c->connect_to)
		curl_easy_setopt(h, CURLOPT_CONNECT_TO, c->connect_to);
	struct curl_certinfo *ci = NULL;
	if (curl_easy_perform(h) == CURLE_OK &&
	    curl_easy_getinfo(h, CURLINFO_CERTINFO, &ci) == CURLE_OK && ci && ci->num_of_certs > 0) {
		char subject[120], issuer[120], until[48];
		certinfo_field(ci->certinfo[0], "Subject", subject, sizeof(subject));
		certinfo_field(ci->certinfo[0], "Issuer", issuer, sizeof(issuer));
		certinfo_field(ci->certinfo[0], "Expire date", until, sizeof(until));
		snprintf(out, len, "subject \"%s\", issuer \"%s\", valid until %s", subject, issuer,
			 until);
	}
	curl_easy_cleanup(h);
}

/*
 * The words kubectl users know for why a server certificate is refused (Go's x509 errors), from
 * OpenSSL's verify result, or curl's own message for a name that does not match.
 */
static const char *tls_reason(long vr, const char *curl_msg)
{
	/* curl checks the name itself after OpenSSL's verification passed */
	if (strstr(curl_msg, "host name") || strstr(curl_msg, "subject name"))
		return "certificate is not valid for the server's name (name mismatch)";
	switch (vr) {
	case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
	case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
	case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
	case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
	case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
		return "certificate signed by unknown authority";
	case X509_V_ERR_CERT_HAS_EXPIRED:
		return "certificate has expired";
	case X509_V_ERR_CERT_NOT_YET_VALID:
		return "certificate is not yet valid";
	case X509_V_ERR_HOSTNAME_MISMATCH:
	case X509_V_ERR_IP_ADDRESS_MISMATCH:
		return "certificate is not valid for the server's name (name mismatch)";
	}
	return "certificate refused";
}

/* The message for a refused server certificate: server, reason, certificate, CAs in use. */
static void tls_message(struct kube_client *c, CURL *h, const char *method, const char *url,
			const char *curl_msg, struct kube_err *e)
{
	long vr = X509_V_OK;
	curl_easy_getinfo(h, CURLINFO_SSL_VERIFYRESULT, &vr);
	char cert[400];
	server_certificate(c, url, cert, sizeof(cert));
	const struct kube_config *cfg = c->cfg;
	snprintf(e->message, sizeof(e->message),
		 "%s %s: tls: x509: %s (%s); server %s%s%s presents %s; trusted CAs: %s", method,
		 url, tls_reason(vr, curl_msg),
		 vr != X509_V_OK && vr != X509_V_ERR_UNSPECIFIED ? X509_verify_cert_error_string(vr)
								 : curl_msg,
		 cfg->server,
		 cfg->tls_server_name ? " as " : "", cfg->tls_server_name ? cfg->tls_server_name : "",
		 cert[0] ? cert : "a certificate that could not be read",
		 cfg->ca_file	? cfg->ca_file
		 : cfg->ca_pem	? "certificate-authority-data of the kubeconfig"
				: "the system's");
}

static char *make_url(struct kube_client *c, const char *path, const char *query)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "%s%s", c->url_base, path);
	if (query && *query)
		strbuf_addf(&sb, "?%s", query);
	return strbuf_detach(&sb, NULL);
}

/*
 * One HTTP exchange. Returns the HTTP code, or 0 for a transport error (message in e).
 * *cred_gen receives the credential generation used (for 401 handling).
 */
static long attempt(struct kube_client *c, const struct kube_request *rq, struct xfer *x,
		    bool stream, unsigned *cred_gen, struct kube_err *e)
{
	struct strbuf tok = STRBUF_INIT;
	char cerr[512];
	if (kube_config_bearer(c->cfg, &tok, cred_gen, cerr, sizeof(cerr)) != 0) {
		e->code = 0;
		snprintf(e->reason, sizeof(e->reason), "Unauthorized");
		snprintf(e->message, sizeof(e->message), "%s", cerr);
		strbuf_release(&tok);
		return -1;
	}
	CURL *h = handle_get(c);
	apply_base(c, h);
	struct strbuf xcert = STRBUF_INIT, xkey = STRBUF_INIT;
	if (c->cfg->exec) {
		kube_config_exec_cert(c->cfg, &xcert, &xkey);
		if (xcert.len) {
			/* Copied: the plugin may replace its certificate while this request runs. */
			struct curl_blob cb = { xcert.buf, xcert.len, CURL_BLOB_COPY };
			struct curl_blob kb = { xkey.buf, xkey.len, CURL_BLOB_COPY };
			curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &cb);
			curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
			curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &kb);
			curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
		}
	}
	char *url = make_url(c, rq->path, rq->query);
	curl_easy_setopt(h, CURLOPT_URL, url);
	struct curl_slist *hd = curl_slist_append(NULL, "Accept: application/json");
	/* No "Expect: 100-continue" round trip before larger bodies: the API server answers at once. */
	hd = curl_slist_append(hd, "Expect:");
	struct strbuf line = STRBUF_INIT;
	if (tok.len) {
		strbuf_addf(&line, "Authorization: Bearer %s", tok.buf);
		hd = curl_slist_append(hd, line.buf);
		strbuf_reset(&line);
	}
	if (rq->content_type) {
		strbuf_addf(&line, "Content-Type: %s", rq->content_type);
		hd = curl_slist_append(hd, line.buf);
	}
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
	if (strcmp(rq->method, "GET") != 0)
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, rq->method);
	if (rq->body) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->body_len);
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, rq->body);
	}
	x->h = h;
	x->retry_after = -1;
	char curl_msg[CURL_ERROR_SIZE] = "";
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, curl_msg);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
	if (stream) {
		curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
		curl_easy_setopt(h, CURLOPT_XFERINFODATA, x);
	} else {
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(c->opts.timeout_ns / NSEC_PER_MSEC));
	}
	atomic_fetch_add(&c->requests, 1);
	CURLcode cc = stream ? perform_stream(h, x) : curl_easy_perform(h);
	long code = 0;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	if (cc != CURLE_OK && !(x->stopped && (cc == CURLE_ABORTED_BY_CALLBACK || cc == CURLE_WRITE_ERROR))) {
		e->code = 0;
		e->reason[0] = 0;
		if (x->too_large) {
			snprintf(e->message, sizeof(e->message), "%s %s: response larger than %zu bytes",
				 rq->method, rq->path, x->max);
		} else if (cc == CURLE_PEER_FAILED_VERIFICATION) {
			x->tls_refused = true;
			tls_message(c, h, rq->method, url, curl_msg, e);
		} else {
			snprintf(e->message, sizeof(e->message), "%s %s: %s", rq->method, url,
				 curl_easy_strerror(cc));
		}
		code = 0;
	}
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL); /* curl_msg is about to go */
	curl_slist_free_all(hd);
	strbuf_release(&line);
	strbuf_release(&tok);
	strbuf_release(&xcert);
	strbuf_release(&xkey);
	free(url);
	handle_put(c, h);
	return code;
}

static bool is_get(const struct kube_request *rq)
{
	return strcmp(rq->method, "GET") == 0;
}

int kube_do(struct kube_client *c, const struct kube_request *rq, struct strbuf *out,
	    struct kube_err *e)
{
	struct backoff bo;
	backoff_init(&bo, 100 * NSEC_PER_MSEC, 2 * NSEC_PER_SEC, 2.0, 0.1);
	bool reauthed = false;
	memset(e, 0, sizeof(*e));
	for (int n = 0;; n++) {
		kube_ratelimit_wait(&c->rl);
		strbuf_reset(out);
		struct xfer x = { .body = out, .max = c->opts.max_response };
		unsigned gen = 0;
		long code = attempt(c, rq, &x, false, &gen, e);
		if (code < 0)
			return -1; /* credential error: retrying will not help */
		if (code >= 200 && code < 300)
			return (int)code;
		bool last = n >= c->opts.max_retries;
		int64_t delay = -1;
		if (code == 0) {
			if (is_get(rq) && !x.too_large && !x.tls_refused)
				delay = backoff_next(&bo);
		} else {
			err_from_answer(e, (int)code, out->buf, out->len);
			if ((code == 429 || code >= 500) && x.retry_after >= 0)
				delay = (x.retry_after > RETRY_AFTER_CAP_S ? RETRY_AFTER_CAP_S
									   : x.retry_after) *
					NSEC_PER_SEC;
			else if (code >= 500 && is_get(rq))
				delay = backoff_next(&bo);
			else if (code == 401 && c->cfg->exec && !reauthed) {
				kube_config_invalidate(c->cfg, gen);
				reauthed = true;
				delay = 0;
			}
		}
		if (delay < 0 || last)
			return -1;
		atomic_fetch_add(&c->retries, 1);
		KLOG_V(4, "Retrying request method=%s path=%s code=%ld attempt=%d", LOGQ(rq->method),
		       LOGQ(rq->path), code, n + 1);
		sleep_ns(delay);
	}
}

int kube_stream(struct kube_client *c, const char *path, const char *query, kube_stream_fn on_data,
		void *ud, const atomic_int *stop, struct kube_err *e)
{
	struct kube_request rq = { .method = "GET", .path = path, .query = query };
	struct strbuf body = STRBUF_INIT;
	struct xfer x = { .body = &body, .max = 1 << 20, .on_data = on_data, .ud = ud, .stop = stop };
	memset(e, 0, sizeof(*e));
	kube_ratelimit_wait(&c->rl);
	unsigned gen;
	long code = attempt(c, &rq, &x, true, &gen, e);
	int rc = 0;
	if (code < 0 || (code == 0 && !x.stopped)) {
		rc = -1;
	} else if (code != 0 && (code < 200 || code >= 300)) {
		err_from_answer(e, (int)code, body.buf, body.len);
		if (code == 401 && c->cfg->exec)
			kube_config_invalidate(c->cfg, gen);
		rc = -1;
	}
	strbuf_release(&body);
	return rc;
}

/* ---- paths and verbs ---- */

void kube_path(struct strbuf *sb, const struct kube_resource *r, const char *ns, const char *name,
	       const char *subresource)
{
	if (!r->group || !*r->group)
		strbuf_addf(sb, "/api/%s", r->version);
	else
		strbuf_addf(sb, "/apis/%s/%s", r->group, r->version);
	if (r->namespaced && ns && *ns)
		strbuf_addf(sb, "/namespaces/%s", ns);
	strbuf_addf(sb, "/%s", r->resource);
	if (name)
		strbuf_addf(sb, "/%s", name);
	if (name && subresource)
		strbuf_addf(sb, "/%s", subresource);
}

void kube_query_add(struct strbuf *q, const char *key, const char *value)
{
	if (q->len)
		strbuf_addch(q, '&');
	strbuf_addf(q, "%s=", key);
	for (const unsigned char *p = (const unsigned char *)value; *p; p++) {
		if (isalnum(*p) || strchr("-_.~", *p))
			strbuf_addch(q, (char)*p);
		else
			strbuf_addf(q, "%%%02X", *p);
	}
}

/* Runs a request and decodes the JSON answer. */
static json_t *do_json(struct kube_client *c, const struct kube_request *rq, struct kube_err *e)
{
	struct strbuf out = STRBUF_INIT;
	json_t *j = NULL;
	if (kube_do(c, rq, &out, e) >= 0) {
		json_error_t jerr;
		j = json_loadb(out.buf, out.len, 0, &jerr);
		if (!j) {
			e->code = 0;
			snprintf(e->reason, sizeof(e->reason), "InvalidResponse");
			snprintf(e->message, sizeof(e->message), "%s %s: answer is not JSON: %s",
				 rq->method, rq->path, jerr.text);
		}
	}
	strbuf_release(&out);
	return j;
}

json_t *kube_get(struct kube_client *c, const struct kube_resource *r, const char *ns,
		 const char *name, struct kube_err *e)
{
	struct strbuf p = STRBUF_INIT;
	kube_path(&p, r, ns, name, NULL);
	struct kube_request rq = { .method = "GET", .path = p.buf };
	json_t *j = do_json(c, &rq, e);
	strbuf_release(&p);
	return j;
}

json_t *kube_list(struct kube_client *c, const struct kube_resource *r, const char *ns,
		  const struct kube_list_opts *o, struct kube_err *e)
{
	struct strbuf p = STRBUF_INIT, q = STRBUF_INIT;
	kube_path(&p, r, ns, NULL, NULL);
	if (o && o->label_selector)
		kube_query_add(&q, "labelSelector", o->label_selector);
	if (o && o->field_selector)
		kube_query_add(&q, "fieldSelector", o->field_selector);
	if (o && o->resource_version)
		kube_query_add(&q, "resourceVersion", o->resource_version);
	if (o && o->continue_token)
		kube_query_add(&q, "continue", o->continue_token);
	if (o && o->limit > 0) {
		char b[32];
		snprintf(b, sizeof(b), "%ld", o->limit);
		kube_query_add(&q, "limit", b);
	}
	struct kube_request rq = { .method = "GET", .path = p.buf, .query = q.buf };
	json_t *j = do_json(c, &rq, e);
	strbuf_release(&p);
	strbuf_release(&q);
	return j;
}

static json_t *send_obj(struct kube_client *c, const char *method, const char *path, json_t *obj,
			struct kube_err *e)
{
	char *body = json_dumps(obj, JSON_COMPACT);
	if (!body) {
		memset(e, 0, sizeof(*e));
		snprintf(e->message, sizeof(e->message), "%s %s: object cannot be encoded", method, path);
		return NULL;
	}
	struct kube_request rq = { .method = method, .path = path, .content_type = "application/json",
				   .body = body, .body_len = strlen(body) };
	json_t *j = do_json(c, &rq, e);
	free(body);
	return j;
}

json_t *kube_create(struct kube_client *c, const struct kube_resource *r, const char *ns,
		    json_t *obj, struct kube_err *e)
{
	struct strbuf p = STRBUF_INIT;
	kube_path(&p, r, ns, NULL, NULL);
	json_t *j = send_obj(c, "POST", p.buf, obj, e);
	strbuf_release(&p);
	return j;
}

json_t *kube_update(struct kube_client *c, const struct kube_resource *r, const char *ns,
		    json_t *obj, bool status, struct kube_err *e)
{
	const char *name = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
	if (!name || !*name) {
		memset(e, 0, sizeof(*e));
		snprintf(e->message, sizeof(e->message), "update of %s: metadata.name missing",
			 r->resource);
		return NULL;
	}
	struct strbuf p = STRBUF_INIT;
	kube_path(&p, r, ns, name, status ? "status" : NULL);
	json_t *j = send_obj(c, "PUT", p.buf, obj, e);
	strbuf_release(&p);
	return j;
}

/* The request of a PATCH; the caller releases *p. */
static struct kube_request patch_request(struct strbuf *p, const struct kube_resource *r,
					 const char *ns, const char *name, bool status,
					 enum kube_patch_type type, const char *body)
{
	static const char *ctype[] = { "application/merge-patch+json", "application/json-patch+json",
				       "application/strategic-merge-patch+json" };
	kube_path(p, r, ns, name, status ? "status" : NULL);
	return (struct kube_request){ .method = "PATCH", .path = p->buf, .content_type = ctype[type],
				      .body = body, .body_len = strlen(body) };
}

json_t *kube_patch(struct kube_client *c, const struct kube_resource *r, const char *ns,
		   const char *name, bool status, enum kube_patch_type type, const char *body,
		   struct kube_err *e)
{
	struct strbuf p = STRBUF_INIT;
	struct kube_request rq = patch_request(&p, r, ns, name, status, type, body);
	json_t *j = do_json(c, &rq, e);
	strbuf_release(&p);
	return j;
}

int kube_patch_discard(struct kube_client *c, const struct kube_resource *r, const char *ns,
		       const char *name, bool status, enum kube_patch_type type, const char *body,
		       struct kube_err *e)
{
	struct strbuf p = STRBUF_INIT, out = STRBUF_INIT;
	struct kube_request rq = patch_request(&p, r, ns, name, status, type, body);
	int rc = kube_do(c, &rq, &out, e) >= 0 ? 0 : -1;
	strbuf_release(&out);
	strbuf_release(&p);
	return rc;
}

int kube_delete(struct kube_client *c, const struct kube_resource *r, const char *ns,
		const char *name, const char *uid, const char *resource_version, struct kube_err *e)
{
	struct strbuf p = STRBUF_INIT, out = STRBUF_INIT;
	kube_path(&p, r, ns, name, NULL);
	json_t *opts = json_pack("{s:s, s:s}", "kind", "DeleteOptions", "apiVersion", "v1");
	if (uid || resource_version) {
		json_t *pre = json_object();
		if (uid)
			json_object_set_new(pre, "uid", json_string(uid));
		if (resource_version)
			json_object_set_new(pre, "resourceVersion", json_string(resource_version));
		json_object_set_new(opts, "preconditions", pre);
	}
	char *body = json_dumps(opts, JSON_COMPACT);
	struct kube_request rq = { .method = "DELETE", .path = p.buf, .content_type = "application/json",
				   .body = body, .body_len = strlen(body) };
	int rc = kube_do(c, &rq, &out, e) >= 0 ? 0 : -1;
	free(body);
	json_decref(opts);
	strbuf_release(&p);
	strbuf_release(&out);
	return rc;
}
