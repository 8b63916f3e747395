/*
 * The REST client: kube/http's pooled keep-alive connections (HTTP/1.1, GnuTLS for https) under
 * retries, rate limiting and credentials. Everything that varies per attempt (bearer token,
 * exec-plugin certificate, rate-limit token) is taken inside the retry loop, so a rotated token
 * or a re-run exec plugin applies to the retry itself.
 */
#include "kube/client.h"

#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/backoff.h"
#include "base/log.h"
#include "base/timeutil.h"
#include "base/version.h"
#include "base/xalloc.h"
#include "kube/http.h"
#include "kube/jv.h"
#include "kube/ratelimit.h"


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
const struct kube_resource KUBE_RES_VOLUMEATTRIBUTESCLASSES = { "storage.k8s.io", "v1", "volumeattributesclasses", false };
const struct kube_resource KUBE_RES_VOLUMESNAPSHOTS = { "snapshot.storage.k8s.io", "v1", "volumesnapshots", true };
const struct kube_resource KUBE_RES_VOLUMESNAPSHOTCONTENTS = { "snapshot.storage.k8s.io", "v1", "volumesnapshotcontents", false };
const struct kube_resource KUBE_RES_VOLUMESNAPSHOTCLASSES = { "snapshot.storage.k8s.io", "v1", "volumesnapshotclasses", false };
const struct kube_resource KUBE_RES_VOLUMEGROUPSNAPSHOTS = { "groupsnapshot.storage.k8s.io", "v1", "volumegroupsnapshots", true };
const struct kube_resource KUBE_RES_VOLUMEGROUPSNAPSHOTCONTENTS = { "groupsnapshot.storage.k8s.io", "v1", "volumegroupsnapshotcontents", false };
const struct kube_resource KUBE_RES_VOLUMEGROUPSNAPSHOTCLASSES = { "groupsnapshot.storage.k8s.io", "v1", "volumegroupsnapshotclasses", false };

#define RETRY_AFTER_CAP_S 60

struct kube_client {
	struct kube_config *cfg;
	struct kube_client_opts opts;
	struct http_client *http;
	char *fixed_headers; /* User-Agent, Accept */
	char *basic_auth;    /* "Authorization: Basic ...\r\n" with a username, else NULL */
	struct kube_ratelimit rl;
	atomic_uint_fast64_t requests, retries;
};

/* ---- errors ---- */

bool kube_err_is_not_found(const struct kube_err *e) { return e->code == 404; }
bool kube_err_is_conflict(const struct kube_err *e) { return e->code == 409 && strcmp(e->reason, "AlreadyExists") != 0; }
bool kube_err_is_already_exists(const struct kube_err *e) { return e->code == 409 && strcmp(e->reason, "AlreadyExists") == 0; }
bool kube_err_is_gone(const struct kube_err *e) { return e->code == 410 || strcmp(e->reason, "Expired") == 0 || strcmp(e->reason, "Gone") == 0; }
bool kube_err_is_rv_too_large(const struct kube_err *e) { return e->rv_too_large; }

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

#define TOO_LARGE_RV "Too large resource version"

/* client-go's isTooLargeResourceVersionError over a Status whose reason is already in e. */
static bool status_rv_too_large(const struct kube_err *e, const jv_t *status)
{
	const jv_t *cause;
	size_t i;
	bool timeout = !strcmp(e->reason, "Timeout") || (e->code == 504 && !*e->reason);
	bool said = false;

	jv_array_foreach(jv_get(jv_get(status, "details"), "causes"), i, cause) {
		const char *r = jv_str(jv_get(cause, "reason")), *m = jv_str(jv_get(cause, "message"));
		if (r && !strcmp(r, "ResourceVersionTooLarge"))
			return true;
		said = said || (m && !strcmp(m, TOO_LARGE_RV));
	}
	return timeout && (said || strstr(e->message, TOO_LARGE_RV));
}

void kube_err_from_status(struct kube_err *e, int http_code, const jv_t *status)
{
	int64_t code = jv_int(jv_get(status, "code"));
	const char *r = jv_str(jv_get(status, "reason"));
	const char *m = jv_str(jv_get(status, "message"));

	e->code = http_code ? http_code : code > 0 && code < 1000 ? (int)code : 500;
	snprintf(e->reason, sizeof(e->reason), "%s", r && *r ? r : reason_for(e->code));
	snprintf(e->message, sizeof(e->message), "%s", m ? m : "");
	e->rv_too_large = jv_is_object(status) && status_rv_too_large(e, status);
}

/* Fills e from an HTTP error answer: the Status object when the body is one. */
static void err_from_answer(struct kube_err *e, int code, const char *body, size_t len)
{
	struct jv_doc doc = { 0 };
	char jerr[64];
	const jv_t *st = jv_parse(&doc, body ? body : "", body ? len : 0, jerr, sizeof(jerr));

	kube_err_from_status(e, code, jv_is_object(st) ? st : NULL);
	if (!jv_is_string(jv_get(st, "message")))
		snprintf(e->message, sizeof(e->message), "HTTP %d: %.*s", code,
			 (int)(len > 200 ? 200 : len), body ? body : "");
	jv_release(&doc);
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

struct kube_client *kube_client_new(struct kube_config *cfg, const struct kube_client_opts *o,
				    char *err, size_t errlen)
{
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
	struct http_client_opts ho = {
		.server = cfg->server,
		.tls_server_name = cfg->tls_server_name,
		.insecure = cfg->insecure,
		.ca_pem = cfg->ca_pem,
		.ca_pem_len = cfg->ca_pem_len,
		.ca_file = cfg->ca_file,
		.cert_pem = cfg->cert_pem,
		.cert_pem_len = cfg->cert_pem_len,
		.key_pem = cfg->key_pem,
		.key_pem_len = cfg->key_pem_len,
		.cert_file = cfg->cert_file,
		.key_file = cfg->key_file,
	};
	char herr[400];
	c->http = http_client_new(&ho, herr, sizeof(herr));
	if (!c->http) {
		errbuf_printf(err, errlen, "%s: %s", cfg->source, herr);
		free(c);
		return NULL;
	}
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "User-Agent: %s/%s (linux/%s) kcsi\r\nAccept: application/json\r\n",
		    c->opts.component, kcsi_version, go_arch());
	c->fixed_headers = strbuf_detach(&sb, NULL);
	if (cfg->username) {
		struct strbuf up = STRBUF_INIT;
		strbuf_addf(&up, "%s:%s", cfg->username, cfg->password ? cfg->password : "");
		strbuf_addstr(&sb, "Authorization: Basic ");
		http_basic_auth(&sb, up.buf);
		strbuf_addstr(&sb, "\r\n");
		memset(up.buf, 0, up.len);
		strbuf_release(&up);
		c->basic_auth = strbuf_detach(&sb, NULL);
	}
	kube_ratelimit_init(&c->rl, c->opts.qps, c->opts.burst);
	return c;
}

void kube_client_free(struct kube_client *c)
{
	if (!c)
		return;
	http_client_free(c->http);
	kube_ratelimit_destroy(&c->rl);
	free(c->fixed_headers);
	if (c->basic_auth)
		memset(c->basic_auth, 0, strlen(c->basic_auth));
	free(c->basic_auth);
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

/* ---- rest_client_requests_total ---- */

/*
 * One count per (code, host, method) for the whole process, as client-go keeps it in one
 * registry whatever client made the request (the controller's, the leader election's, ...).
 * The set of keys is tiny (a handful of codes and verbs against one host), so a linear table.
 */
struct rc_count {
	char code[24];  /* "200", or "<error>" when no answer came */
	char method[8];
	char host[128];
	uint64_t n;
};
static pthread_mutex_t rc_mu = PTHREAD_MUTEX_INITIALIZER;
static struct rc_count *rc_counts;
static size_t rc_len, rc_cap;

static void rc_add(const struct kube_client *c, const char *method, long code)
{
	char scode[24], host[128];
	const char *base = http_client_base(c->http), *h = strstr(base, "://");

	h = h ? h + 3 : base;
	snprintf(host, sizeof(host), "%.*s", (int)strcspn(h, "/"), h);
	if (code > 0)
		snprintf(scode, sizeof(scode), "%ld", code);
	else
		snprintf(scode, sizeof(scode), "<error>");
	pthread_mutex_lock(&rc_mu);
	size_t i = 0;
	while (i < rc_len && (strcmp(rc_counts[i].code, scode) || strcmp(rc_counts[i].method, method) ||
			      strcmp(rc_counts[i].host, host)))
		i++;
	if (i == rc_len) {
		if (rc_len == rc_cap) {
			rc_cap = rc_cap ? 2 * rc_cap : 16;
			rc_counts = xrealloc(rc_counts, rc_cap * sizeof(*rc_counts));
		}
		rc_counts[rc_len] = (struct rc_count){ .n = 0 };
		snprintf(rc_counts[rc_len].code, sizeof(rc_counts[0].code), "%s", scode);
		snprintf(rc_counts[rc_len].method, sizeof(rc_counts[0].method), "%s", method);
		snprintf(rc_counts[rc_len].host, sizeof(rc_counts[0].host), "%s", host);
		rc_len++;
	}
	rc_counts[i].n++;
	pthread_mutex_unlock(&rc_mu);
}

/* Prometheus' order: by the label values, code first, then host, then method. */
static int rc_cmp(const void *a, const void *b)
{
	const struct rc_count *x = a, *y = b;
	int d = strcmp(x->code, y->code);
	if (!d)
		d = strcmp(x->host, y->host);
	return d ? d : strcmp(x->method, y->method);
}

void kube_render_rest_client_metrics(struct strbuf *out)
{
	pthread_mutex_lock(&rc_mu);
	if (rc_len) {
		qsort(rc_counts, rc_len, sizeof(*rc_counts), rc_cmp);
		strbuf_addstr(out, "# HELP rest_client_requests_total [ALPHA] Number of HTTP requests, "
			      "partitioned by status code, method, and host.\n"
			      "# TYPE rest_client_requests_total counter\n");
	}
	for (size_t i = 0; i < rc_len; i++)
		strbuf_addf(out, "rest_client_requests_total{code=\"%s\",host=\"%s\",method=\"%s\"} %llu\n",
			    rc_counts[i].code, rc_counts[i].host, rc_counts[i].method,
			    (unsigned long long)rc_counts[i].n);
	pthread_mutex_unlock(&rc_mu);
}

/* ---- one attempt ---- */

struct xfer {
	struct strbuf *body;
	size_t max;
	bool too_large;
	long retry_after; /* seconds, -1 when absent */
	/* streaming */
	kube_stream_fn on_data;
	void *ud;
	const atomic_int *stop;
	bool stopped;
	bool tls_refused; /* the server's certificate failed verification: retrying cannot help */
	int head_status;  /* the status of an answer whose body then failed, else 0 */
};

static int on_body(void *ud, int status, const char *p, size_t len)
{
	struct xfer *x = ud;
	if (x->on_data && status >= 200 && status < 300)
		return x->on_data(p, len, x->ud);
	if (x->body->len + len > x->max) {
		x->too_large = true;
		return 1;
	}
	strbuf_add(x->body, p, len);
	return 0;
}

/* The message for a refused server certificate: server, reason, certificate, CAs in use. */
static void tls_message(struct kube_client *c, const char *method, const char *url,
			const struct http_result *res, struct kube_err *e)
{
	const struct kube_config *cfg = c->cfg;
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "%s %s: tls: x509: %s (%s); server %s%s%s presents %s; trusted CAs: %s",
		    method, url, http_verify_reason(res->verify_status), res->msg, cfg->server,
		    cfg->tls_server_name ? " as " : "",
		    cfg->tls_server_name ? cfg->tls_server_name : "",
		    res->peer[0] ? res->peer : "a certificate that could not be read",
		    cfg->ca_file ? cfg->ca_file
		    : cfg->ca_pem ? "certificate-authority-data of the kubeconfig"
				  : "the system's");
	snprintf(e->message, sizeof(e->message), "%s", sb.buf);
	strbuf_release(&sb);
}

/*
 * One HTTP exchange. Returns the HTTP code, 0 for a transport error (message in e), or -1 for a
 * credential error retrying cannot mend. *cred_gen receives the credential generation used
 * (for 401 handling).
 */
static long attempt(struct kube_client *c, const struct kube_request *rq, struct xfer *x,
		    bool stream, unsigned *cred_gen, struct kube_err *e)
{
	struct strbuf tok = STRBUF_INIT;
	char cerr[512];
	if (kube_config_bearer(c->cfg, &tok, cred_gen, cerr, sizeof(cerr)) != 0) {
		e->code = 0;
		e->rv_too_large = false;
		snprintf(e->reason, sizeof(e->reason), "Unauthorized");
		snprintf(e->message, sizeof(e->message), "%s", cerr);
		strbuf_release(&tok);
		return -1;
	}
	struct strbuf hd = STRBUF_INIT, target = STRBUF_INIT;
	strbuf_addstr(&hd, c->fixed_headers);
	/* One Authorization header: a bearer token wins over a username (as libcurl did here). */
	if (tok.len)
		strbuf_addf(&hd, "Authorization: Bearer %s\r\n", tok.buf);
	else if (c->basic_auth)
		strbuf_addstr(&hd, c->basic_auth);
	if (rq->content_type)
		strbuf_addf(&hd, "Content-Type: %s\r\n", rq->content_type);
	strbuf_addstr(&target, rq->path);
	if (rq->query && *rq->query)
		strbuf_addf(&target, "?%s", rq->query);
	struct http_request hr = {
		.method = rq->method,
		.target = target.buf,
		.headers = hd.buf,
		.body = rq->body,
		.body_len = rq->body_len,
		.deadline_ns = stream ? 0 : mono_now_ns() + c->opts.timeout_ns,
		.stop = stream ? x->stop : NULL,
	};
	/* Copied: the plugin may replace its certificate while this request runs. */
	struct strbuf xcert = STRBUF_INIT, xkey = STRBUF_INIT;
	if (c->cfg->exec) {
		kube_config_exec_cert(c->cfg, &xcert, &xkey);
		if (xcert.len) {
			hr.cert_pem = xcert.buf;
			hr.cert_pem_len = xcert.len;
			hr.key_pem = xkey.buf;
			hr.key_pem_len = xkey.len;
		}
	}
	x->retry_after = -1;
	atomic_fetch_add(&c->requests, 1);
	struct http_result res;
	long code = 0;
	if (http_do(c->http, &hr, on_body, x, &res) == 0) {
		code = res.status;
		x->retry_after = res.retry_after;
		rc_add(c, rq->method, code);
	} else if (res.fail == HTTP_STOPPED && !x->too_large) {
		x->stopped = true;
		code = res.status;
		rc_add(c, rq->method, code);
	} else {
		rc_add(c, rq->method, res.status);
		x->head_status = res.status;
		e->code = 0;
		e->rv_too_large = false;
		e->reason[0] = 0;
		const char *url = http_client_base(c->http);
		if (x->too_large) {
			snprintf(e->message, sizeof(e->message), "%s %s: response larger than %zu bytes",
				 rq->method, rq->path, x->max);
		} else if (res.fail == HTTP_TLS_REFUSED) {
			x->tls_refused = true;
			struct strbuf u = STRBUF_INIT;
			strbuf_addf(&u, "%s%s", url, target.buf);
			tls_message(c, rq->method, u.buf, &res, e);
			strbuf_release(&u);
		} else {
			snprintf(e->message, sizeof(e->message), "%s %s%s: %s", rq->method, url,
				 target.buf, res.msg);
			if (res.fail == HTTP_CLIENT_CERT)
				code = -1;
		}
	}
	memset(hd.buf, 0, hd.len); /* it may hold a credential */
	strbuf_release(&hd);
	strbuf_release(&target);
	strbuf_release(&tok);
	if (xkey.len)
		memset(xkey.buf, 0, xkey.len);
	strbuf_release(&xcert);
	strbuf_release(&xkey);
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
	int rc = 0;
	/* As client-go's watch: a 429 or 5xx answer with Retry-After (an API server still starting,
	 * or shedding load) is asked again after that delay, up to max_retries times, before the
	 * caller sees an error (and backs off). */
	for (int n = 0;; n++) {
		struct xfer x = { .body = &body, .max = 1 << 20, .on_data = on_data, .ud = ud,
				  .stop = stop };
		memset(e, 0, sizeof(*e));
		strbuf_reset(&body);
		kube_ratelimit_wait(&c->rl);
		unsigned gen;
		long code = attempt(c, &rq, &x, true, &gen, e);
		rc = 0;
		if (code < 0 || (code == 0 && !x.stopped)) {
			e->streamed = x.head_status >= 200 && x.head_status < 300;
			rc = -1;
		} else if (code != 0 && (code < 200 || code >= 300)) {
			err_from_answer(e, (int)code, body.buf, body.len);
			if (code == 401 && c->cfg->exec)
				kube_config_invalidate(c->cfg, gen);
			rc = -1;
			if ((code == 429 || code >= 500) && x.retry_after >= 0 && n < c->opts.max_retries) {
				int64_t end = mono_now_ns() +
					      (x.retry_after > RETRY_AFTER_CAP_S ? RETRY_AFTER_CAP_S
										 : x.retry_after) * NSEC_PER_SEC;
				atomic_fetch_add(&c->retries, 1);
				KLOG_V(4, "Retrying watch path=%s code=%ld attempt=%d", LOGQ(path), code,
				       n + 1);
				while (!(stop && atomic_load(stop)) && mono_now_ns() < end)
					sleep_ns(50 * NSEC_PER_MSEC);
				if (!(stop && atomic_load(stop)))
					continue;
			}
		}
		break;
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

int kube_serves_kind(struct kube_client *c, const char *group_version, const char *kind,
		     struct kube_err *e)
{
	struct strbuf p = STRBUF_INIT;
	strbuf_addf(&p, "%s%s", strchr(group_version, '/') ? "/apis/" : "/api/", group_version);
	struct kube_request rq = { .method = "GET", .path = p.buf };
	json_t *list = do_json(c, &rq, e);
	strbuf_release(&p);
	if (!list)
		return kube_err_is_not_found(e) ? 0 : -1;
	size_t i;
	json_t *r;
	int found = 0;
	json_array_foreach(json_object_get(list, "resources"), i, r) {
		const char *k = json_string_value(json_object_get(r, "kind"));
		if (k && !strcmp(k, kind))
			found = 1;
	}
	json_decref(list);
	return found;
}

/* The path and query of a LIST; the caller releases both. */
static void list_request(struct strbuf *p, struct strbuf *q, const struct kube_resource *r,
			 const char *ns, const struct kube_list_opts *o)
{
	kube_path(p, r, ns, NULL, NULL);
	if (o && o->label_selector)
		kube_query_add(q, "labelSelector", o->label_selector);
	if (o && o->field_selector)
		kube_query_add(q, "fieldSelector", o->field_selector);
	if (o && o->resource_version)
		kube_query_add(q, "resourceVersion", o->resource_version);
	if (o && o->continue_token)
		kube_query_add(q, "continue", o->continue_token);
	if (o && o->limit > 0) {
		char b[32];
		snprintf(b, sizeof(b), "%ld", o->limit);
		kube_query_add(q, "limit", b);
	}
}

json_t *kube_list(struct kube_client *c, const struct kube_resource *r, const char *ns,
		  const struct kube_list_opts *o, struct kube_err *e)
{
	struct strbuf p = STRBUF_INIT, q = STRBUF_INIT;
	list_request(&p, &q, r, ns, o);
	struct kube_request rq = { .method = "GET", .path = p.buf, .query = q.buf };
	json_t *j = do_json(c, &rq, e);
	strbuf_release(&p);
	strbuf_release(&q);
	return j;
}

int kube_list_raw(struct kube_client *c, const struct kube_resource *r, const char *ns,
		  const struct kube_list_opts *o, struct strbuf *out, struct kube_err *e)
{
	struct strbuf p = STRBUF_INIT, q = STRBUF_INIT;
	list_request(&p, &q, r, ns, o);
	struct kube_request rq = { .method = "GET", .path = p.buf, .query = q.buf };
	int rc = kube_do(c, &rq, out, e) >= 0 ? 0 : -1;
	strbuf_release(&p);
	strbuf_release(&q);
	return rc;
}

/*
 * Sends obj as the JSON body. With decode, returns the answer decoded (NULL with *e filled);
 * without, returns a non-NULL dummy on success so both callers test the same way.
 */
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

int kube_create_discard(struct kube_client *c, const struct kube_resource *r, const char *ns,
			const char *body, struct kube_err *e)
{
	struct strbuf p = STRBUF_INIT, out = STRBUF_INIT;
	kube_path(&p, r, ns, NULL, NULL);
	struct kube_request rq = { .method = "POST", .path = p.buf, .content_type = "application/json",
				   .body = body, .body_len = strlen(body) };
	int rc = kube_do(c, &rq, &out, e) >= 0 ? 0 : -1;
	strbuf_release(&out);
	strbuf_release(&p);
	return rc;
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
	return kube_delete_grace(c, r, ns, name, uid, resource_version, -1, e);
}

int kube_delete_grace(struct kube_client *c, const struct kube_resource *r, const char *ns,
		      const char *name, const char *uid, const char *resource_version,
		      long long grace_seconds, struct kube_err *e)
{
	struct strbuf p = STRBUF_INIT, out = STRBUF_INIT;
	kube_path(&p, r, ns, name, NULL);
	json_t *opts = json_pack("{s:s, s:s}", "kind", "DeleteOptions", "apiVersion", "v1");
	if (grace_seconds >= 0)
		json_object_set_new(opts, "gracePeriodSeconds", json_integer(grace_seconds));
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
