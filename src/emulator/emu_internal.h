/*
 * emu_internal: what the emulator's own files share (server state, one API call, replies,
 * fault injection). Not a public interface: only the emulator's own .c files include it.
 *
 * Ownership: struct emu_call borrows everything from the MHD connection and the request; it lives
 * on the stack of one request handler.
 */
#ifndef KCSI_EMULATOR_INTERNAL_H
#define KCSI_EMULATOR_INTERNAL_H

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdbool.h>

#include "emulator/emu_server.h"
#include "emulator/emu_store.h"
#include "emulator/emu_table.h"

/* The longest delay one request gets from fault rules (their latencyMs added up), and the most one
 * rule may ask for: a rule is a test's tool, not a way to hold a connection for ever. */
#define EMU_FAULT_MAX_LATENCY_MS 60000

struct emu_fault_rule {
	char verb[16];     /* "get", "list", "watch", "create", "update", "patch", "delete",
			      "write" (create/update/patch/delete), "*" */
	char resource[64]; /* plural or "*" */
	double fraction;   /* probability in [0,1] */
	int code;          /* 500, 429, 409, or 0 for latency only */
	int retry_after;   /* seconds, for 429 */
	int latency_ms;    /* 0 .. EMU_FAULT_MAX_LATENCY_MS */
	long times;        /* stop after this many injections; 0 = unlimited */
	long injected;
};

struct emu_faults {
	pthread_mutex_t mu;
	struct emu_fault_rule *rules;
	size_t n;
	int64_t watch_max_ns; /* 0: off */
	long c500, c429, c409, clatency, watches_closed, watches_ended;
	pthread_cond_t cv; /* delays sleep on it, so that shutdown can end them */
	bool shutdown;
};

struct emu_server {
	struct emu_config cfg;
	char *token, *state_file;
	char *tls_cert, *tls_key, *tls_ca; /* PEM contents */
	struct emu_store st;
	struct emu_faults faults;
	struct MHD_Daemon *daemon;
	int listen_fd;
	char url[160];
	char host_port[128];
};

/* One resource request after routing. */
struct emu_call {
	struct emu_server *srv;
	struct MHD_Connection *conn;
	const char *method;
	int res;
	struct emu_resource *r;
	const char *ns;   /* NULL for cluster-scoped, or all namespaces */
	const char *name; /* NULL for the collection */
	const char *sub;  /* NULL or "status" */
	const char *body;
	size_t body_len;
	bool dry_run; /* dryRun=All: decide and answer, but commit nothing */
	/* DeleteOptions (emu_delete_options): gracePeriodSeconds when has_grace */
	bool has_grace;
	long long grace;
	void *rq; /* the server's per-request state */
	/* Accept asked for a Table (emu_table_wanted) */
	bool table;
	struct emu_table_req treq;
};

/* An answer being built under the store lock: HTTP code and JSON text (owned). */
struct reply {
	unsigned code;
	char *text;
};
void reply_status(struct reply *rp, unsigned code, const char *reason, const char *msg,
		  json_t *details);
void reply_bad(struct reply *rp, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool parse_body(struct emu_call *k, json_t **out, struct reply *rp);
void emu_set_type(const struct emu_resource *r, json_t *obj);
/* Deletes (or marks for deletion, when finalizers remain) the stored object old at key. */
void emu_delete_locked(struct emu_call *k, const char *key, json_t *old, struct reply *rp);
/* A metav1.Status JSON text (owned by the caller); details is taken over, may be NULL. */
char *emu_status_text(unsigned code, const char *reason, const char *message, json_t *details);

/* Replies. `text` and `j` are taken over. */
enum MHD_Result emu_reply_text(struct MHD_Connection *c, unsigned code, char *text,
			       int retry_after);
enum MHD_Result emu_reply_json(struct MHD_Connection *c, unsigned code, json_t *j);
enum MHD_Result emu_reply_status(struct MHD_Connection *c, unsigned code, const char *reason,
				 const char *message, json_t *details);
const char *emu_arg(struct emu_call *k, const char *name);

/* Verbs (emu_verbs.c). */
enum MHD_Result emu_do_get(struct emu_call *k);
enum MHD_Result emu_do_list(struct emu_call *k);
enum MHD_Result emu_do_watch(struct emu_call *k);
enum MHD_Result emu_do_create(struct emu_call *k);
enum MHD_Result emu_do_update(struct emu_call *k);
enum MHD_Result emu_do_patch(struct emu_call *k);
enum MHD_Result emu_do_delete(struct emu_call *k);
enum MHD_Result emu_do_delete_collection(struct emu_call *k);
/* POST pods/{name}/binding: sets spec.nodeName once, as the scheduler's bind does. */
enum MHD_Result emu_do_binding(struct emu_call *k);
/*
 * Reads DeleteOptions from the query and from opts (the parsed body, may be NULL) into k:
 * gracePeriodSeconds, propagationPolicy (checked, then ignored: no garbage collector).
 * False with a 400/422 reply when they are malformed.
 */
bool emu_delete_options(struct emu_call *k, const json_t *opts, struct reply *rp);

/* Faults (emu_faults.c). */
void emu_faults_init(struct emu_faults *f);
void emu_faults_free(struct emu_faults *f);
/* Sleeps for matching latency rules; returns 0 or the HTTP code to fail with (*retry_after set). */
int emu_faults_apply(struct emu_faults *f, const char *verb, const char *plural, int *retry_after);
int64_t emu_faults_watch_max(struct emu_faults *f);
/* Ends every injected delay now and makes later ones return at once (server shutdown). */
void emu_faults_shutdown(struct emu_faults *f);
void emu_faults_count(struct emu_faults *f, long *counter);
enum MHD_Result emu_faults_http(struct emu_server *srv, struct MHD_Connection *c,
				const char *method, const char *body, size_t len);

/* base64: standard and padded, or URL-safe and unpadded (url); decode accepts both and
 * returns NULL on bad input. */
char *emu_base64_encode(const unsigned char *data, size_t len, bool url);
unsigned char *emu_base64_decode(const char *s, size_t *len);

#endif
