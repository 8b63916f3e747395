/*
 * emu_faults: the fault table of kube-emulator (rules that fail or delay requests, watch faults)
 * and its HTTP endpoint /emulator/faults. See emu_faults.c for the request format.
 *
 * Ownership: the server embeds one struct emu_faults; rules are owned by the table. The table
 * has its own mutex, taken before (never inside) the store lock.
 */
#ifndef KCSI_EMULATOR_FAULTS_H
#define KCSI_EMULATOR_FAULTS_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct emu_store;

/* The longest delay one request gets from fault rules (their latencyMs added up), and the most one
 * rule may ask for: a rule is a test's tool, not a way to hold a connection for ever. */
#define EMU_FAULT_MAX_LATENCY_MS 60000

struct emu_fault_rule {
	char verb[16];     /* "get", "list", "watch", "create", "update", "patch", "delete",
			      "write" (create/update/patch/delete), "*" */
	char resource[64]; /* plural or "*" */
	double fraction;   /* probability in [0,1] */
	int code;          /* 500, 429, 409, 410, 504, or 0 for latency only */
	int retry_after;   /* seconds, for 429 and 504 */
	bool as_event;     /* a watch gets a 200 with one ERROR event carrying the Status */
	int latency_ms;    /* 0 .. EMU_FAULT_MAX_LATENCY_MS */
	long times;        /* stop after this many injections; 0 = unlimited */
	long injected;
};

struct emu_faults {
	pthread_mutex_t mu;
	struct emu_fault_rule *rules;
	size_t n;
	int64_t watch_max_ns; /* 0: off */
	long c500, c429, c409, c404, c410, c504, clatency, watches_closed, watches_ended;
	pthread_cond_t cv; /* delays sleep on it, so that shutdown and a release can end them */
	unsigned long releases; /* a delay ends when this changes ("release": true) */
	bool shutdown;
};

void emu_faults_init(struct emu_faults *f);
void emu_faults_free(struct emu_faults *f);
/* The failure the rules chose for one request. */
struct emu_fault_hit {
	int code; /* 0: none */
	int retry_after;
	bool as_event;
};
/* Sleeps for matching latency rules; returns 0 or the HTTP code to fail with (*hit filled). */
int emu_faults_apply(struct emu_faults *f, const char *verb, const char *plural,
		     struct emu_fault_hit *hit);
/*
 * Answers a request with the failure hit chose, in kube-apiserver's words: 500 InternalError,
 * 429 TooManyRequests (Retry-After), 409 Conflict on name, 410 Expired ("The resourceVersion for
 * the provided <verb> is too old."), 504 Timeout "Too large resource version" (rv: the request's
 * resourceVersion, measured against st's); a watch with as_event gets a 200 with one ERROR event.
 */
enum MHD_Result emu_faults_reply(struct emu_store *st, struct MHD_Connection *c,
				 const struct emu_fault_hit *hit, const char *verb,
				 const char *plural, const char *name, const char *rv);
int64_t emu_faults_watch_max(struct emu_faults *f);
/* Ends every injected delay now and makes later ones return at once (server shutdown). */
void emu_faults_shutdown(struct emu_faults *f);
void emu_faults_count(struct emu_faults *f, long *counter);
/*
 * Serves /emulator/faults (GET: the table; POST: change it). A closeWatches request ends every
 * watch of st through its watch epoch.
 */
enum MHD_Result emu_faults_http(struct emu_faults *f, struct emu_store *st,
				struct MHD_Connection *c, const char *method, const char *body,
				size_t len);

#endif
