/*
 * kube client: REST calls to the Kubernetes API over kube/http (HTTP/1.1, GnuTLS for https)
 * with jansson for the bodies the callers build and read.
 *
 * One struct kube_client owns a kube/http client (a pool of keep-alive connections, TLS
 * credentials loaded once, an HTTP proxy from the environment) and a token-bucket rate limiter
 * (--kube-api-qps / --kube-api-burst) shared by every request made through it. A second client
 * (for leader election) has its own limiter and connections. All calls are thread-safe and
 * blocking.
 *
 * The client borrows its struct kube_config, which must outlive it.
 *
 * Retries: 429 and 5xx answers carrying Retry-After are retried after that delay (capped), up
 * to max_retries times; GET requests are also retried with exponential backoff on connection
 * errors and 5xx answers without Retry-After. A 401 with an exec-plugin credential re-runs the
 * plugin once.
 *
 * Results: functions returning json_t* give a new reference the caller json_decref()s, or NULL
 * with *e filled. struct kube_err carries the HTTP code (0: no answer), the Status reason and
 * message.
 */
#ifndef KCSI_KUBE_CLIENT_H
#define KCSI_KUBE_CLIENT_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/strbuf.h"
#include "kube/config.h"

struct kube_err {
	int code;         /* HTTP status; 0 when there was no HTTP answer */
	char reason[64];  /* Status.reason ("NotFound", "Conflict", ...) or "" */
	char message[512];
	bool streamed;    /* kube_stream: the answer (200) had begun when the stream broke */
	bool rv_too_large; /* the Status says "Too large resource version" (kube_err_is_rv_too_large) */
};

bool kube_err_is_not_found(const struct kube_err *e);
bool kube_err_is_conflict(const struct kube_err *e);
bool kube_err_is_already_exists(const struct kube_err *e);
/* 410, or reason Expired or Gone: the resourceVersion asked for has left the server's history. */
bool kube_err_is_gone(const struct kube_err *e);
/*
 * The server has not reached the resourceVersion asked for: a Status with a details.causes entry
 * of reason ResourceVersionTooLarge (kube-apiserver 1.18.6 on: 504 Timeout "Timeout: Too large
 * resource version: N, current: C"), or, from older servers, a Timeout whose cause message or
 * message says "Too large resource version" (client-go's isTooLargeResourceVersionError).
 */
bool kube_err_is_rv_too_large(const struct kube_err *e);
/*
 * Fills e from a metav1.Status (an error answer's body, a watch ERROR event's object): the code
 * http_code (0: the Status's own, 500 without one, as client-go), the reason (else the one
 * upstream gives that code), the message and rv_too_large. status may be NULL: then only the
 * code and its reason. e->streamed is left as it was.
 */
struct jv;
void kube_err_from_status(struct kube_err *e, int http_code, const struct jv *status);

/* A group/version/resource. group "" is the core group. */
struct kube_resource {
	const char *group;
	const char *version;
	const char *resource;
	bool namespaced;
};

extern const struct kube_resource KUBE_RES_VOLUMEATTACHMENTS; /* storage.k8s.io/v1 */
extern const struct kube_resource KUBE_RES_PERSISTENTVOLUMES;
extern const struct kube_resource KUBE_RES_PERSISTENTVOLUMECLAIMS;
extern const struct kube_resource KUBE_RES_CSINODES;
extern const struct kube_resource KUBE_RES_NODES;
extern const struct kube_resource KUBE_RES_LEASES; /* coordination.k8s.io/v1 */
extern const struct kube_resource KUBE_RES_EVENTS;
extern const struct kube_resource KUBE_RES_SECRETS;
extern const struct kube_resource KUBE_RES_STORAGECLASSES;
extern const struct kube_resource KUBE_RES_PODS;
extern const struct kube_resource KUBE_RES_CSIDRIVERS;
extern const struct kube_resource KUBE_RES_CSISTORAGECAPACITIES;
extern const struct kube_resource KUBE_RES_VOLUMEATTRIBUTESCLASSES;
extern const struct kube_resource KUBE_RES_VOLUMESNAPSHOTS;        /* snapshot.storage.k8s.io/v1 */
extern const struct kube_resource KUBE_RES_VOLUMESNAPSHOTCONTENTS;
extern const struct kube_resource KUBE_RES_VOLUMESNAPSHOTCLASSES;
extern const struct kube_resource KUBE_RES_VOLUMEGROUPSNAPSHOTS; /* groupsnapshot.storage.k8s.io/v1 (v8.6) */
extern const struct kube_resource KUBE_RES_VOLUMEGROUPSNAPSHOTCONTENTS;
extern const struct kube_resource KUBE_RES_VOLUMEGROUPSNAPSHOTCLASSES;

struct kube_client_opts {
	const char *component; /* User-Agent "<component>/<version> (linux/<arch>) kcsi" */
	double qps;            /* upstream default 5; <= 0 disables the limiter */
	int burst;             /* upstream default 10 */
	int64_t timeout_ns;    /* per request; 0 means 60s */
	int max_retries;       /* 0 means 10 */
	size_t max_response;   /* bytes; 0 means 1 GiB */
};

struct kube_client;

struct kube_client *kube_client_new(struct kube_config *cfg, const struct kube_client_opts *o,
				    char *err, size_t errlen);
void kube_client_free(struct kube_client *c);
struct kube_config *kube_client_config(struct kube_client *c);

/* ---- raw requests ---- */

struct kube_request {
	const char *method;       /* "GET", "POST", ... */
	const char *path;         /* "/api/v1/nodes" */
	const char *query;        /* without '?', or NULL */
	const char *content_type; /* for the body, or NULL */
	const char *body;
	size_t body_len;
};

/*
 * Performs a request with retries. On a 2xx answer returns the HTTP code with the body in *out;
 * otherwise returns -1 with *e filled.
 */
int kube_do(struct kube_client *c, const struct kube_request *rq, struct strbuf *out,
	    struct kube_err *e);

/*
 * Streams a GET (watches): on_data receives the body as it arrives; returning non-zero stops the
 * transfer. *stop (when not NULL) is polled at least once a second and ends the stream when set.
 * Returns 0 when the stream ended normally (server closed or stopped by the caller), -1 with *e
 * filled for an error answer or a broken connection (e->streamed: after a 200 answer began).
 * The one retry, as client-go's watch: a 429 or 5xx answer with Retry-After is asked again after
 * that delay (capped, up to max_retries times, ended early by *stop); otherwise the caller
 * resumes.
 */
typedef int (*kube_stream_fn)(const char *data, size_t len, void *ud);
int kube_stream(struct kube_client *c, const char *path, const char *query, kube_stream_fn on_data,
		void *ud, const atomic_int *stop, struct kube_err *e);

/* Builds the path of a collection (name NULL) or object, with an optional subresource. */
void kube_path(struct strbuf *sb, const struct kube_resource *r, const char *ns, const char *name,
	       const char *subresource);
/* Appends "&key=value" (or "key=value" first) with value URL-encoded. */
void kube_query_add(struct strbuf *q, const char *key, const char *value);

/* ---- typed verbs ---- */

struct kube_list_opts {
	const char *label_selector;
	const char *field_selector;
	const char *resource_version;
	const char *continue_token;
	long limit; /* 0: none */
};

json_t *kube_get(struct kube_client *c, const struct kube_resource *r, const char *ns,
		 const char *name, struct kube_err *e);
json_t *kube_list(struct kube_client *c, const struct kube_resource *r, const char *ns,
		  const struct kube_list_opts *o, struct kube_err *e);
/* The same LIST, its answer left undecoded in *out (the informer parses it with kube/jv):
 * 0, or -1 with *e filled. */
int kube_list_raw(struct kube_client *c, const struct kube_resource *r, const char *ns,
		  const struct kube_list_opts *o, struct strbuf *out, struct kube_err *e);
json_t *kube_create(struct kube_client *c, const struct kube_resource *r, const char *ns,
		    json_t *obj, struct kube_err *e);
/* A POST of the object given as JSON text (kube/jw writes it without a jansson tree), its
 * answer not decoded: 0, or -1 with *e filled (as kube_patch_discard). */
int kube_create_discard(struct kube_client *c, const struct kube_resource *r, const char *ns,
			const char *body, struct kube_err *e);
/* PUT of obj (name taken from obj.metadata.name); status: the /status subresource. */
json_t *kube_update(struct kube_client *c, const struct kube_resource *r, const char *ns,
		    json_t *obj, bool status, struct kube_err *e);

enum kube_patch_type {
	KUBE_PATCH_MERGE, /* application/merge-patch+json */
	KUBE_PATCH_JSON,  /* application/json-patch+json */
	KUBE_PATCH_STRATEGIC,
};
json_t *kube_patch(struct kube_client *c, const struct kube_resource *r, const char *ns,
		   const char *name, bool status, enum kube_patch_type type, const char *body,
		   struct kube_err *e);
/* The same PATCH without decoding the answer (the patched object): 0, or -1 with *e filled. For
 * callers whose informer delivers the new object anyway; it saves a JSON parse per write. */
int kube_patch_discard(struct kube_client *c, const struct kube_resource *r, const char *ns,
		       const char *name, bool status, enum kube_patch_type type, const char *body,
		       struct kube_err *e);
/* DELETE with optional preconditions (uid, resourceVersion); returns 0 or -1. */
int kube_delete(struct kube_client *c, const struct kube_resource *r, const char *ns,
		const char *name, const char *uid, const char *resource_version, struct kube_err *e);
/* The same with DeleteOptions.gracePeriodSeconds (>= 0; 0 is a force delete of a pod). */
int kube_delete_grace(struct kube_client *c, const struct kube_resource *r, const char *ns,
		      const char *name, const char *uid, const char *resource_version,
		      long long grace_seconds, struct kube_err *e);

/*
 * Discovery, as client-go's ServerResourcesForGroupVersion: whether the server lists a resource
 * of `kind` under group_version ("storage.k8s.io/v1"; "v1" is the core group). 1: listed; 0: not
 * listed, or the group version is not served (404); -1: any other failure, with *e.
 */
int kube_serves_kind(struct kube_client *c, const char *group_version, const char *kind,
		     struct kube_err *e);

/*
 * client-go's rest_client_requests_total{code,host,method} of every client of this process
 * (code "<error>" when a request got no answer), in Prometheus' text format; nothing before the
 * first request. For the binaries whose upstream serves client-go's REST client metrics.
 */
void kube_render_rest_client_metrics(struct strbuf *out);

/* Counters for tests and benchmarks. */
struct kube_client_stats {
	uint64_t requests; /* HTTP attempts made */
	uint64_t retries;
};
void kube_client_stats(struct kube_client *c, struct kube_client_stats *s);

#endif
