/*
 * emu_faults: fault injection for reliability tests, driven over HTTP at /emulator/faults.
 *
 * A rule matches requests by verb and resource and fails a fraction of them with 500, 429 (with
 * Retry-After), 409, 404 (the answer for a kind the server does not serve, such as a CRD not
 * installed), 410 Expired or 504 "Too large resource version" (a watch's as an ERROR event
 * when the rule says asEvent), and/or delays them. Every injection is counted per rule and in
 * totals, so a test can assert that the fault it asked for really happened. Watch faults (close
 * all watches now, end every new watch after N seconds) act through the store's watch epoch and
 * the watch deadline. The table has its own mutex: it is consulted before the store lock is
 * taken.
 *
 *   GET  /emulator/faults    -> the rules with their counts, and the totals
 *   POST /emulator/faults    {"reset": true, "rules": [...], "watchMaxSeconds": N,
 *                             "closeWatches": true, "release": true}; reset runs first, rules
 *                            are appended; release ends every delay in progress.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/backoff.h"
#include "base/log.h"
#include "base/strbuf.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "emulator/emu_faults.h"
#include "emulator/emu_patch.h"
#include "emulator/emu_reply.h"
#include "emulator/emu_store.h"

void emu_faults_init(struct emu_faults *f)
{
	memset(f, 0, sizeof(*f));
	pthread_mutex_init(&f->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&f->cv, &ca);
	pthread_condattr_destroy(&ca);
}

void emu_faults_free(struct emu_faults *f)
{
	free(f->rules);
	pthread_mutex_destroy(&f->mu);
	pthread_cond_destroy(&f->cv);
}

void emu_faults_shutdown(struct emu_faults *f)
{
	pthread_mutex_lock(&f->mu);
	f->shutdown = true;
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->mu);
}

/* Sleeps for ms unless the server shuts down first (lock held on entry and on return). */
static void delay_locked(struct emu_faults *f, int ms)
{
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (long)(ms % 1000) * 1000000L;
	until.tv_sec += until.tv_nsec / 1000000000L;
	until.tv_nsec %= 1000000000L;
	unsigned long gen = f->releases;
	while (!f->shutdown && f->releases == gen &&
	       pthread_cond_timedwait(&f->cv, &f->mu, &until) == 0)
		;
}

static bool verb_matches(const char *rule, const char *verb)
{
	if (!strcmp(rule, "*") || !strcmp(rule, verb))
		return true;
	return !strcmp(rule, "write") && (!strcmp(verb, "create") || !strcmp(verb, "update") ||
					  !strcmp(verb, "patch") || !strcmp(verb, "delete"));
}

int emu_faults_apply(struct emu_faults *f, const char *verb, const char *plural,
		     struct emu_fault_hit *hit)
{
	int code = 0;
	memset(hit, 0, sizeof(*hit));
	int64_t latency_ms = 0;
	pthread_mutex_lock(&f->mu);
	for (size_t i = 0; i < f->n; i++) {
		struct emu_fault_rule *r = &f->rules[i];
		if (!verb_matches(r->verb, verb) ||
		    (strcmp(r->resource, "*") && strcmp(r->resource, plural)))
			continue;
		if (r->times && r->injected >= r->times)
			continue;
		if (r->fraction < 1.0 && random_unit() >= r->fraction)
			continue;
		r->injected++;
		if (r->latency_ms > 0) {
			latency_ms += r->latency_ms;
			f->clatency++;
		}
		if (r->code && !code) {
			code = r->code;
			hit->code = code;
			hit->retry_after = r->retry_after;
			hit->as_event = r->as_event && !strcmp(verb, "watch");
			long *counter = code == 500 ? &f->c500 : code == 429 ? &f->c429 :
					code == 410 ? &f->c410 : code == 504 ? &f->c504 :
					code == 404 ? &f->c404 : &f->c409;
			(*counter)++;
		}
	}
	if (latency_ms > EMU_FAULT_MAX_LATENCY_MS)
		latency_ms = EMU_FAULT_MAX_LATENCY_MS;
	if (latency_ms)
		delay_locked(f, (int)latency_ms);
	pthread_mutex_unlock(&f->mu);
	return code;
}

enum MHD_Result emu_faults_reply(struct emu_store *st, struct MHD_Connection *c,
				 const struct emu_fault_hit *hit, const char *verb,
				 const char *plural, const char *name, const char *rv)
{
	char msg[512];
	char *text;
	int retry_after = 0;
	switch (hit->code) {
	case 429:
		retry_after = hit->retry_after;
		text = emu_status_text(429, "TooManyRequests", "the server has received too many "
			"requests and has asked us to try again later",
			json_pack("{s:i}", "retryAfterSeconds", retry_after));
		break;
	case 409:
		snprintf(msg, sizeof(msg), "Operation cannot be fulfilled on %s \"%s\": the object "
			 "has been modified; please apply your changes to the latest version and try "
			 "again", plural, name ? name : "");
		text = emu_status_text(409, "Conflict", msg, NULL);
		break;
	case 404: /* kube-apiserver's answer for a resource it does not serve */
		text = emu_status_text(404, "NotFound", "the server could not find the requested "
				       "resource", NULL);
		break;
	case 410:
		snprintf(msg, sizeof(msg), "The resourceVersion for the provided %s is too old.", verb);
		text = emu_status_text(410, "Expired", msg, NULL);
		break;
	case 504: {
		uint64_t cur;
		pthread_mutex_lock(&st->mu);
		cur = st->rv;
		pthread_mutex_unlock(&st->mu);
		retry_after = hit->retry_after;
		text = emu_status_rv_too_large(rv ? strtoull(rv, NULL, 10) : 0, cur, retry_after);
		break;
	}
	default:
		text = emu_status_text(500, "InternalError", "Internal error occurred: injected by "
				       "kube-emulator fault rule", NULL);
	}
	if (!hit->as_event)
		return emu_reply_text(c, (unsigned)hit->code, text, retry_after);
	struct strbuf ev = STRBUF_INIT;
	strbuf_addf(&ev, "{\"type\":\"ERROR\",\"object\":%s}\n", text);
	free(text);
	return emu_reply_text(c, 200, strbuf_detach(&ev, NULL), 0);
}

int64_t emu_faults_watch_max(struct emu_faults *f)
{
	pthread_mutex_lock(&f->mu);
	int64_t v = f->watch_max_ns;
	pthread_mutex_unlock(&f->mu);
	return v;
}

void emu_faults_count(struct emu_faults *f, long *counter)
{
	pthread_mutex_lock(&f->mu);
	(*counter)++;
	pthread_mutex_unlock(&f->mu);
}

static json_t *faults_view(struct emu_faults *f)
{
	pthread_mutex_lock(&f->mu);
	json_t *rules = json_array();
	for (size_t i = 0; i < f->n; i++) {
		struct emu_fault_rule *r = &f->rules[i];
		json_array_append_new(rules, json_pack("{s:s, s:s, s:f, s:i, s:i, s:b, s:i, s:I, s:I}",
			"verb", r->verb, "resource", r->resource, "fraction", r->fraction,
			"code", r->code, "retryAfterSeconds", r->retry_after, "asEvent", r->as_event,
			"latencyMs", r->latency_ms, "times", (json_int_t)r->times,
			"injected", (json_int_t)r->injected));
	}
	json_t *v = json_pack("{s:o, s:I, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}}", "rules",
		rules, "watchMaxSeconds", (json_int_t)(f->watch_max_ns / NSEC_PER_SEC), "counters",
		"errors500", (json_int_t)f->c500, "errors429", (json_int_t)f->c429,
		"conflicts409", (json_int_t)f->c409, "notFound404", (json_int_t)f->c404,
		"expired410", (json_int_t)f->c410,
		"tooLarge504", (json_int_t)f->c504, "delayed", (json_int_t)f->clatency,
		"watchesClosed", (json_int_t)f->watches_closed,
		"watchesEnded", (json_int_t)f->watches_ended);
	pthread_mutex_unlock(&f->mu);
	return v;
}

/* Validates one rule from JSON; returns 0 or -1 with a reason. */
static int rule_parse(json_t *j, struct emu_fault_rule *r, char *err, size_t errlen)
{
	memset(r, 0, sizeof(*r));
	json_error_t je;
	const char *verb = "*", *res = "*";
	double fraction = 1.0;
	int code = 0, retry = 1, latency = 0, as_event = 0;
	json_int_t times = 0;
	if (json_unpack_ex(j, &je, JSON_STRICT, "{s?s, s?s, s?F, s?i, s?i, s?b, s?i, s?I}",
			   "verb", &verb, "resource", &res, "fraction", &fraction, "code", &code,
			   "retryAfterSeconds", &retry, "asEvent", &as_event, "latencyMs", &latency,
			   "times", &times)) {
		snprintf(err, errlen, "bad fault rule: %s", je.text);
		return -1;
	}
	static const char *const verbs[] = { "*", "write", "get", "list", "watch", "create",
					     "update", "patch", "delete", "deletecollection" };
	bool known = false;
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		known = known || !strcmp(verb, verbs[i]);
	if (!known || strlen(res) >= sizeof(r->resource)) {
		snprintf(err, errlen, "bad fault rule: unknown verb \"%.40s\" or resource name too "
			 "long", verb);
		return -1;
	}
	if (code != 0 && code != 500 && code != 429 && code != 409 && code != 404 && code != 410 &&
	    code != 504) {
		snprintf(err, errlen, "bad fault rule: code must be 500, 429, 409, 404, 410, 504 or 0, "
			 "got %d", code);
		return -1;
	}
	if (fraction < 0 || fraction > 1 || latency < 0 || retry < 0 || times < 0 ||
	    (code == 0 && latency == 0)) {
		snprintf(err, errlen, "bad fault rule: need 0 <= fraction <= 1, a code or latencyMs, "
			 "and non-negative numbers");
		return -1;
	}
	if (latency > EMU_FAULT_MAX_LATENCY_MS) {
		snprintf(err, errlen, "bad fault rule: latencyMs must be at most %d, got %d",
			 EMU_FAULT_MAX_LATENCY_MS, latency);
		return -1;
	}
	snprintf(r->verb, sizeof(r->verb), "%s", verb);
	snprintf(r->resource, sizeof(r->resource), "%s", res);
	r->fraction = fraction;
	r->code = code;
	r->retry_after = retry;
	r->as_event = as_event;
	r->latency_ms = latency;
	r->times = (long)times;
	return 0;
}

static int faults_post(struct emu_faults *f, struct emu_store *st, json_t *body, char *err,
		       size_t errlen)
{
	json_t *rules = json_object_get(body, "rules");
	json_t *wmax = json_object_get(body, "watchMaxSeconds");
	if ((rules && !json_is_array(rules)) || (wmax && !json_is_integer(wmax)) ||
	    (wmax && (json_integer_value(wmax) < 0 ||
		      json_integer_value(wmax) > INT64_MAX / NSEC_PER_SEC))) {
		snprintf(err, errlen, "expected {\"reset\": bool, \"rules\": [...], "
			 "\"watchMaxSeconds\": int >= 0, \"closeWatches\": bool, \"release\": bool}");
		return -1;
	}
	size_t n = json_array_size(rules);
	struct emu_fault_rule *parsed = xcalloc(n + 1, sizeof(*parsed));
	for (size_t i = 0; i < n; i++) {
		if (rule_parse(json_array_get(rules, i), &parsed[i], err, errlen) < 0) {
			free(parsed);
			return -1;
		}
	}
	pthread_mutex_lock(&f->mu);
	if (json_is_true(json_object_get(body, "reset"))) {
		f->n = 0;
		f->watch_max_ns = 0;
		f->c500 = f->c429 = f->c409 = f->c404 = f->c410 = f->c504 = f->clatency = 0;
		f->watches_closed = f->watches_ended = 0;
	}
	if (json_is_true(json_object_get(body, "release"))) {
		f->releases++;
		pthread_cond_broadcast(&f->cv);
	}
	f->rules = xrealloc(f->rules, (f->n + n + 1) * sizeof(*f->rules));
	memcpy(f->rules + f->n, parsed, n * sizeof(*parsed));
	f->n += n;
	if (wmax)
		f->watch_max_ns = (int64_t)json_integer_value(wmax) * NSEC_PER_SEC;
	pthread_mutex_unlock(&f->mu);
	free(parsed);
	if (json_is_true(json_object_get(body, "closeWatches"))) {
		pthread_mutex_lock(&st->mu);
		st->watch_epoch++;
		pthread_cond_broadcast(&st->cv);
		pthread_mutex_unlock(&st->mu);
	}
	KLOG_I("Fault injection changed: %zu rules added", n);
	return 0;
}

enum MHD_Result emu_faults_http(struct emu_faults *f, struct emu_store *st,
				struct MHD_Connection *c, const char *method, const char *body,
				size_t len)
{
	if (!strcmp(method, "POST")) {
		char err[512];
		json_error_t je;
		json_t *j = json_loadb(body, len, 0, &je);
		if (!json_is_object(j) || emu_json_too_deep(j, EMU_MAX_JSON_DEPTH)) {
			json_decref(j);
			return emu_reply_status(c, 400, "BadRequest",
						"the fault request body must be a JSON object", NULL);
		}
		int rc = faults_post(f, st, j, err, sizeof(err));
		json_decref(j);
		if (rc < 0)
			return emu_reply_status(c, 400, "BadRequest", err, NULL);
	} else if (strcmp(method, "GET")) {
		return emu_reply_status(c, 405, "MethodNotAllowed",
					"/emulator/faults supports GET and POST", NULL);
	}
	return emu_reply_json(c, 200, faults_view(f));
}
