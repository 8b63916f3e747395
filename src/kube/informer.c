/*
 * The informer thread is a small state machine: LIST (until one succeeds), then WATCH in a loop.
 * What follows a failed list page or an ended watch is kube_informer_next_step(), client-go's
 * reflector's rules (k8s.io/client-go v0.36 tools/cache/reflector.go, tools/pager, rest's watch),
 * after kube_stream has asked a 429/5xx answer with Retry-After again, as client-go's REST client
 * does:
 *
 *   what ended                                   next                  why
 *   list, a continue page: 410 Expired           one full list at once its snapshot was compacted
 *                                                (no limit)            meanwhile: pages cannot help
 *   list, any other failure                      back off, list again  as client-go
 *   watch stream ended or broke, after an event  watch again at once   the server closed it or
 *     or after 1 s                               from last RV          went away: the RV is good
 *   watch stream ended within 1 s, no event      back off, relist      client-go's VeryShortWatch:
 *                                                                      something is wrong with RV
 *   watch not answered (connection refused)      back off, watch again server down; once back the
 *                                                from last RV          RV is good (*)
 *   watch answer or ERROR event 429              back off, watch again server overloaded
 *   410 / Expired / Gone (answer or event)       back off, relist      RV left the history
 *   504 too large RV (cause ResourceVersion-     back off, relist      the server is behind RV:
 *     TooLarge, or "Too large resource version")                       its store went back in time
 *   any other answer or event (500, 403, ...),   back off, relist      client-go relists on every
 *     an undecodable or oversize event                                 other error
 *
 * kcsi lists with resourceVersion "" always: a consistent read of the latest state. client-go
 * lists at its last RV (first "0": from the watch cache) and falls back to "" once a list at
 * that RV answers Expired or too large; kcsi is always in that fallback, so a list never meets
 * those two, and a relist after a store went back in time reads the store as it now is, its
 * vanished objects delivered as deletes.
 * (*) client-go tells a refused connection from other transport errors, which its REST client
 * retries and then relists after; kcsi's transport does not tell them apart and watches again:
 * an RV the server no longer has is answered 410 or too large, which relist.
 * A relist waits a back-off step, as client-go's: it costs the server a full read, and every
 * informer of a server that compacted or restarted would ask at once.
 *
 * The back-off is 800 ms doubling to 30 s, jittered; it starts over after a watch delivered an
 * event (a healthy server) and, as client-go's, 2 min after it last started over. Sleeps wait on
 * a condition variable so stop() ends them at once.
 *
 * A relist builds the new state in a scratch store (which only holds extra references to the
 * new records), then applies it to the live store and delivers the difference, so handlers see
 * exactly what changed while the watch was down.
 */
#include "kube/informer.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/backoff.h"
#include "base/log.h"
#include "base/strbuf.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "kube/watch.h"

#define MAX_HANDLERS 8

struct kube_informer {
	struct kube_client *client;
	struct kube_informer_opts opts;
	char *ns, *label_selector, *field_selector;
	struct kube_store *store;
	struct kube_handlers handlers[MAX_HANDLERS];
	int nhandlers;

	pthread_t thread, resync_thread;
	bool started;
	atomic_int stop; /* written under mu (to pair with the condition), read anywhere */
	pthread_mutex_t mu; /* guards synced, last_rv, stats, stop wakeups */
	pthread_cond_t cond;
	bool synced;
	char last_rv[64];
	struct kube_informer_stats stats;
	pthread_mutex_t dispatch_mu; /* one handler call at a time */
};

struct kube_informer *kube_informer_new(struct kube_client *c, const struct kube_informer_opts *o)
{
	struct kube_informer *inf = xcalloc(1, sizeof(*inf));
	inf->client = c;
	inf->opts = *o;
	inf->ns = o->ns ? xstrdup(o->ns) : NULL;
	inf->label_selector = o->label_selector ? xstrdup(o->label_selector) : NULL;
	inf->field_selector = o->field_selector ? xstrdup(o->field_selector) : NULL;
	if (!inf->opts.page_size)
		inf->opts.page_size = 500;
	inf->store = kube_store_new();
	pthread_mutex_init(&inf->mu, NULL);
	pthread_cond_init(&inf->cond, NULL);
	pthread_mutex_init(&inf->dispatch_mu, NULL);
	return inf;
}

void kube_informer_add_handlers(struct kube_informer *inf, const struct kube_handlers *h)
{
	if (inf->nhandlers < MAX_HANDLERS)
		inf->handlers[inf->nhandlers++] = *h;
}

void kube_informer_add_index(struct kube_informer *inf, const char *name, kube_index_fn fn)
{
	kube_store_add_index(inf->store, name, fn);
}

struct kube_store *kube_informer_store(struct kube_informer *inf)
{
	return inf->store;
}

void kube_informer_stats(struct kube_informer *inf, struct kube_informer_stats *s)
{
	pthread_mutex_lock(&inf->mu);
	*s = inf->stats;
	pthread_mutex_unlock(&inf->mu);
}

void kube_informer_last_rv(struct kube_informer *inf, char *buf, size_t len)
{
	pthread_mutex_lock(&inf->mu);
	snprintf(buf, len, "%s", inf->last_rv);
	pthread_mutex_unlock(&inf->mu);
}

static void set_rv(struct kube_informer *inf, const char *rv)
{
	if (!rv || !*rv)
		return;
	pthread_mutex_lock(&inf->mu);
	snprintf(inf->last_rv, sizeof(inf->last_rv), "%s", rv);
	pthread_mutex_unlock(&inf->mu);
}

/* Sleeps up to ns, returning early (true) when stopping. */
static bool sleep_or_stop(struct kube_informer *inf, int64_t ns)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	int64_t t = ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec + ns;
	ts.tv_sec = t / NSEC_PER_SEC;
	ts.tv_nsec = t % NSEC_PER_SEC;
	pthread_mutex_lock(&inf->mu);
	while (!inf->stop && pthread_cond_timedwait(&inf->cond, &inf->mu, &ts) == 0)
		;
	bool s = inf->stop;
	pthread_mutex_unlock(&inf->mu);
	return s;
}

static void stat_add(struct kube_informer *inf, uint64_t *field)
{
	pthread_mutex_lock(&inf->mu);
	(*field)++;
	pthread_mutex_unlock(&inf->mu);
}

/* ---- delivery ---- */

static void deliver_add(struct kube_informer *inf, const struct kube_obj *o)
{
	for (int i = 0; i < inf->nhandlers; i++)
		if (inf->handlers[i].on_add)
			inf->handlers[i].on_add(o, inf->handlers[i].ud);
}

static void deliver_update(struct kube_informer *inf, const struct kube_obj *old,
			   const struct kube_obj *o)
{
	for (int i = 0; i < inf->nhandlers; i++)
		if (inf->handlers[i].on_update)
			inf->handlers[i].on_update(old, o, inf->handlers[i].ud);
}

static void deliver_delete(struct kube_informer *inf, const struct kube_obj *o)
{
	for (int i = 0; i < inf->nhandlers; i++)
		if (inf->handlers[i].on_delete)
			inf->handlers[i].on_delete(o, inf->handlers[i].ud);
}

/* Puts o (taking its reference) and delivers add or update. */
static void apply_put(struct kube_informer *inf, struct kube_obj *o)
{
	struct kube_obj *old = kube_store_put(inf->store, o);
	pthread_mutex_lock(&inf->dispatch_mu);
	if (!old)
		deliver_add(inf, o);
	else
		deliver_update(inf, old, o);
	pthread_mutex_unlock(&inf->dispatch_mu);
	kube_obj_unref(old);
}

static void apply_delete(struct kube_informer *inf, struct kube_obj *last)
{
	struct kube_obj *old = kube_store_remove(inf->store, last->ns, last->name);
	pthread_mutex_lock(&inf->dispatch_mu);
	deliver_delete(inf, old ? old : last);
	pthread_mutex_unlock(&inf->dispatch_mu);
	kube_obj_unref(old);
}

/* ---- the rules (the table at the top) ---- */

enum kube_informer_step kube_informer_next_step(enum kube_informer_at at, const struct kube_err *e,
						bool events, int64_t lasted_ns)
{
	switch (at) {
	case KUBE_INFORMER_AT_LIST_CONTINUE:
		/* client-go's pager: only reason Expired, only past the first page */
		if (e && !strcmp(e->reason, "Expired"))
			return KUBE_INFORMER_FULL_LIST;
		return KUBE_INFORMER_RELIST;
	case KUBE_INFORMER_AT_LIST:
		return KUBE_INFORMER_RELIST;
	case KUBE_INFORMER_AT_WATCH:
		break;
	}
	if (!e || (e->code == 0 && e->streamed))
		return events || lasted_ns >= NSEC_PER_SEC ? KUBE_INFORMER_WATCH : KUBE_INFORMER_RELIST;
	if (e->code == 0 || e->code == 429 || !strcmp(e->reason, "TooManyRequests"))
		return KUBE_INFORMER_WATCH_BACKOFF;
	return KUBE_INFORMER_RELIST; /* 410, too large RV, and every other error */
}

/* ---- LIST ---- */

/*
 * A failed list or watch, in client-go's words (its reflector's "Failed to watch" through
 * HandleError's logger "UnhandledError", with reflector=, type= and err=, a failed list's cause
 * prefixed "failed to list *v1.Kind: "), so that both logs read alike and their JSON lines have
 * the same keys; the reflector is named by the resource it lists rather than a Go source line.
 */
static void watch_failed(const struct kube_informer *inf, bool listing, const char *why)
{
	const struct kube_resource *r = inf->opts.kind->res;
	struct strbuf err = STRBUF_INIT;

	if (listing)
		strbuf_addf(&err, "failed to list *%s.%s: ", r->version, inf->opts.kind->name);
	strbuf_addstr(&err, why);
	KLOG_ERR(err.buf, "Failed to watch logger=\"UnhandledError\" reflector=\"%s%s%s/%s\" "
		 "type=\"*%s.%s\"", r->group, *r->group ? "/" : "", r->version, r->resource,
		 r->version, inf->opts.kind->name);
	strbuf_release(&err);
}

/* Decodes one page's items into scratch; false (with *e) when the page is not a list. */
static bool take_page(struct kube_informer *inf, struct jv_doc *doc, const struct strbuf *page,
		      struct kube_store *scratch, char *rv, size_t rvlen, char **cont,
		      struct kube_err *e)
{
	char jerr[160];
	const jv_t *list = jv_parse(doc, page->buf, page->len, jerr, sizeof(jerr));
	if (!list) {
		memset(e, 0, sizeof(*e));
		snprintf(e->message, sizeof(e->message), "%s", jerr);
		return false;
	}
	const jv_t *md = jv_get(list, "metadata");
	size_t i;
	const jv_t *item;
	jv_array_foreach(jv_get(list, "items"), i, item) {
		char err[128];
		struct kube_obj *o = inf->opts.kind->decode(item, err, sizeof(err));
		if (!o) {
			KLOG_W("Skipping undecodable %s in list: %s", inf->opts.kind->name, err);
			continue;
		}
		if (inf->opts.filter && !inf->opts.filter(o, inf->opts.filter_ud)) {
			kube_obj_unref(o);
			continue;
		}
		kube_obj_unref(kube_store_put(scratch, o));
	}
	const char *c = jv_str(jv_get(md, "continue"));
	snprintf(rv, rvlen, "%s", jv_str(jv_get(md, "resourceVersion")) ?: "");
	*cont = (c && *c) ? xstrdup(c) : NULL;
	return true;
}

/*
 * Lists every page (limit per page, 0: one page) into scratch; 0 with the list's resourceVersion
 * in rv, or -1 with *e and *at saying which page failed.
 */
static int list_all(struct kube_informer *inf, struct kube_store *scratch, long limit, char *rv,
		    size_t rvlen, struct kube_err *e, enum kube_informer_at *at)
{
	char *cont = NULL;
	int rc = -1;
	struct strbuf page = STRBUF_INIT;
	struct jv_doc doc = { 0 };
	memset(e, 0, sizeof(*e));
	for (;;) {
		struct kube_list_opts lo = { .label_selector = inf->label_selector,
					     .field_selector = inf->field_selector,
					     .continue_token = cont,
					     .limit = limit };
		*at = cont ? KUBE_INFORMER_AT_LIST_CONTINUE : KUBE_INFORMER_AT_LIST;
		stat_add(inf, &inf->stats.pages);
		if (kube_list_raw(inf->client, inf->opts.kind->res, inf->ns, &lo, &page, e) != 0)
			break;
		char *next = NULL;
		bool ok = take_page(inf, &doc, &page, scratch, rv, rvlen, &next, e);
		free(cont);
		cont = next;
		if (!ok)
			break;
		if (!cont) {
			rc = 0;
			break;
		}
		if (inf->stop) {
			snprintf(e->message, sizeof(e->message), "stopped");
			break;
		}
	}
	free(cont);
	strbuf_release(&page);
	jv_release(&doc);
	return rc;
}

/* Whether two records of one key are the same version of the same object. */
static bool same_version(const struct kube_obj *a, const struct kube_obj *b)
{
	char ua[64], ub[64];
	return !strcmp(a->rv, b->rv) &&
	       !strcmp(kube_obj_uid(a, ua, sizeof(ua)), kube_obj_uid(b, ub, sizeof(ub)));
}

/*
 * Applies a full list to the live store, delivering the difference: every object still there
 * is an update when every is set (the server's history is not the one cached: the same name,
 * uid and resourceVersion may hold other content), else only when its version changed.
 */
static void replace(struct kube_informer *inf, struct kube_store *scratch, bool every)
{
	size_t n, m;
	struct kube_obj **fresh = kube_store_list(scratch, &n);
	for (size_t i = 0; i < n; i++) {
		struct kube_obj *o = kube_obj_ref(fresh[i]);
		struct kube_obj *old = kube_store_put(inf->store, o);
		pthread_mutex_lock(&inf->dispatch_mu);
		if (!old)
			deliver_add(inf, o);
		else if (every || !same_version(old, o))
			deliver_update(inf, old, o);
		pthread_mutex_unlock(&inf->dispatch_mu);
		kube_obj_unref(old);
	}
	struct kube_obj **live = kube_store_list(inf->store, &m);
	for (size_t i = 0; i < m; i++) {
		struct kube_obj *still = kube_store_get(scratch, live[i]->ns, live[i]->name);
		if (!still)
			apply_delete(inf, live[i]);
		kube_obj_unref(still);
	}
	kube_objs_free(live, m);
	kube_objs_free(fresh, n);
}

/* One full list; KUBE_INFORMER_WATCH when it is applied, else KUBE_INFORMER_RELIST. */
static enum kube_informer_step do_list(struct kube_informer *inf, bool every)
{
	struct kube_store *scratch = kube_store_new();
	char rv[64];
	struct kube_err e;
	enum kube_informer_at at;
	int rc = list_all(inf, scratch, inf->opts.page_size, rv, sizeof(rv), &e, &at);
	if (rc != 0 && !inf->stop &&
	    kube_informer_next_step(at, &e, false, 0) == KUBE_INFORMER_FULL_LIST) {
		KLOG_V(2, "List of %s expired between pages, listing again in one page: %s",
		       inf->opts.kind->name, e.message);
		kube_store_free(scratch);
		scratch = kube_store_new();
		rc = list_all(inf, scratch, 0, rv, sizeof(rv), &e, &at);
	}
	if (rc == 0) {
		replace(inf, scratch, every);
		set_rv(inf, rv);
		stat_add(inf, &inf->stats.lists);
		pthread_mutex_lock(&inf->mu);
		if (!inf->synced)
			KLOG_V(2, "Informer synced kind=%s objects=%zu", LOGQ(inf->opts.kind->name),
			       kube_store_len(inf->store));
		inf->synced = true;
		pthread_cond_broadcast(&inf->cond);
		pthread_mutex_unlock(&inf->mu);
	} else if (!inf->stop) {
		watch_failed(inf, true, e.message);
	}
	kube_store_free(scratch);
	return rc == 0 ? KUBE_INFORMER_WATCH : KUBE_INFORMER_RELIST;
}

/* ---- WATCH ---- */

struct watch_ctx {
	struct kube_informer *inf;
	struct kube_watch_decoder dec;
	bool failed;      /* an ERROR event, or an event that could not be decoded: err says */
	struct kube_err err;
	bool progressed;  /* an object event or a bookmark arrived */
};

static int on_event(enum kube_watch_type type, const jv_t *obj, void *ud)
{
	struct watch_ctx *w = ud;
	struct kube_informer *inf = w->inf;
	if (type == KUBE_WATCH_ERROR) {
		kube_err_from_status(&w->err, 0, obj);
		w->failed = true;
		KLOG_V(2, "Watch error event kind=%s code=%d reason=%s message=%s",
		       LOGQ(inf->opts.kind->name), w->err.code, LOGQ(w->err.reason),
		       LOGQ(w->err.message));
		return 1;
	}
	w->progressed = true;
	const char *rv = jv_str(jv_get(jv_get(obj, "metadata"), "resourceVersion"));
	if (type == KUBE_WATCH_BOOKMARK) {
		set_rv(inf, rv);
		stat_add(inf, &inf->stats.bookmarks);
		return 0;
	}
	char err[128];
	struct kube_obj *o = inf->opts.kind->decode(obj, err, sizeof(err));
	if (!o) {
		KLOG_W("Skipping undecodable %s watch event: %s", inf->opts.kind->name, err);
		set_rv(inf, rv);
		return 0;
	}
	bool keep = !inf->opts.filter || inf->opts.filter(o, inf->opts.filter_ud);
	if (!keep) {
		/* Filtered out: only its leaving the cache is news. */
		struct kube_obj *had = kube_store_get(inf->store, o->ns, o->name);
		if (had)
			apply_delete(inf, o);
		kube_obj_unref(had);
		kube_obj_unref(o);
	} else if (type == KUBE_WATCH_DELETED) {
		apply_delete(inf, o);
		kube_obj_unref(o);
	} else {
		apply_put(inf, o);
	}
	set_rv(inf, rv);
	stat_add(inf, &inf->stats.events);
	return 0;
}

static int on_data(const char *data, size_t len, void *ud)
{
	struct watch_ctx *w = ud;
	int rc = kube_watch_feed(&w->dec, data, len, on_event, w);
	if (rc < 0) {
		/* as client-go's stream watcher: an ERROR event with a 500 Status */
		watch_failed(w->inf, false, w->dec.err);
		memset(&w->err, 0, sizeof(w->err));
		w->err.code = 500;
		snprintf(w->err.reason, sizeof(w->err.reason), "InternalError");
		snprintf(w->err.message, sizeof(w->err.message),
			 "unable to decode an event from the watch stream: %s", w->dec.err);
		w->failed = true;
	}
	return rc;
}

static void log_step(const struct kube_informer *inf, enum kube_informer_step step,
		     const struct kube_err *why)
{
	const char *kind = inf->opts.kind->name;
	if (step == KUBE_INFORMER_WATCH || !why)
		return;
	if (step == KUBE_INFORMER_WATCH_BACKOFF)
		KLOG_V(2, "Watch of %s ended: %s", kind, why->message);
	else if (kube_err_is_gone(why))
		KLOG_V(2, "Watch of %s expired, relisting: %s", kind, why->message);
	else if (kube_err_is_rv_too_large(why))
		KLOG_I("Watch of %s: the API server is behind the resourceVersion cached (its store "
		       "went back in time?), relisting: %s", kind, why->message);
	else
		KLOG_V(2, "Watch of %s ended, relisting: %s", kind, why->message);
}

/*
 * Runs one watch request from last_rv; returns what comes next. *progressed: an event arrived;
 * *too_large: the server answered that it has not reached last_rv.
 */
static enum kube_informer_step do_watch(struct kube_informer *inf, bool *progressed,
					bool *too_large)
{
	struct strbuf path = STRBUF_INIT, q = STRBUF_INIT;
	char rv[64], tmo[32];
	kube_informer_last_rv(inf, rv, sizeof(rv));
	kube_path(&path, inf->opts.kind->res, inf->ns, NULL, NULL);
	kube_query_add(&q, "watch", "true");
	kube_query_add(&q, "resourceVersion", rv);
	kube_query_add(&q, "allowWatchBookmarks", "true");
	/* As client-go: a server-side timeout between 5 and 10 minutes spreads reconnects. */
	snprintf(tmo, sizeof(tmo), "%d", 300 + (int)(random_unit() * 300));
	kube_query_add(&q, "timeoutSeconds", tmo);
	if (inf->label_selector)
		kube_query_add(&q, "labelSelector", inf->label_selector);
	if (inf->field_selector)
		kube_query_add(&q, "fieldSelector", inf->field_selector);
	struct watch_ctx w = { .inf = inf };
	kube_watch_decoder_init(&w.dec, inf->opts.max_event);
	stat_add(inf, &inf->stats.watches);
	struct kube_err e;
	int64_t started = mono_now_ns();
	int rc = kube_stream(inf->client, path.buf, q.buf, on_data, &w, &inf->stop, &e);
	const struct kube_err *why = w.failed ? &w.err : rc != 0 ? &e : NULL;
	enum kube_informer_step step = kube_informer_next_step(KUBE_INFORMER_AT_WATCH, why,
							       w.progressed,
							       mono_now_ns() - started);
	if (!inf->stop)
		log_step(inf, step, why);
	*progressed = w.progressed;
	*too_large = why && kube_err_is_rv_too_large(why);
	kube_watch_decoder_release(&w.dec);
	strbuf_release(&path);
	strbuf_release(&q);
	return step;
}

/* The back-off between attempts; as client-go's, it starts over 2 min after it last did. */
struct retry {
	struct backoff bo;
	int64_t since;
};

static void retry_reset(struct retry *r)
{
	backoff_reset(&r->bo);
	r->since = mono_now_ns();
}

static void back_off(struct kube_informer *inf, struct retry *r)
{
	if (mono_now_ns() - r->since > 120 * NSEC_PER_SEC)
		retry_reset(r);
	stat_add(inf, &inf->stats.backoffs);
	sleep_or_stop(inf, backoff_next(&r->bo));
}

static void *run(void *arg)
{
	struct kube_informer *inf = arg;
	struct retry r;
	backoff_init(&r.bo, 800 * NSEC_PER_MSEC, 30 * NSEC_PER_SEC, 2.0, 0.2);
	r.since = mono_now_ns();
	bool need_list = true, every = false;
	while (!inf->stop) {
		enum kube_informer_step step;
		if (need_list) {
			step = do_list(inf, every);
			every = every && step != KUBE_INFORMER_WATCH;
		} else {
			bool progressed = false, too_large = false;
			step = do_watch(inf, &progressed, &too_large);
			if (progressed)
				retry_reset(&r);
			every = every || too_large;
		}
		if (inf->stop)
			break;
		need_list = step == KUBE_INFORMER_RELIST || step == KUBE_INFORMER_FULL_LIST;
		if (step == KUBE_INFORMER_WATCH_BACKOFF || step == KUBE_INFORMER_RELIST)
			back_off(inf, &r);
	}
	return NULL;
}

static void *resync_run(void *arg)
{
	struct kube_informer *inf = arg;
	while (!sleep_or_stop(inf, inf->opts.resync_ns)) {
		if (!kube_informer_has_synced(inf))
			continue;
		size_t n;
		struct kube_obj **all = kube_store_list(inf->store, &n);
		pthread_mutex_lock(&inf->dispatch_mu);
		for (size_t i = 0; i < n; i++)
			deliver_update(inf, all[i], all[i]);
		pthread_mutex_unlock(&inf->dispatch_mu);
		kube_objs_free(all, n);
		stat_add(inf, &inf->stats.resyncs);
	}
	return NULL;
}

int kube_informer_start(struct kube_informer *inf)
{
	if (pthread_create(&inf->thread, NULL, run, inf) != 0)
		return -1;
	inf->started = true;
	if (inf->opts.resync_ns > 0 && pthread_create(&inf->resync_thread, NULL, resync_run, inf) != 0) {
		inf->opts.resync_ns = 0;
		kube_informer_stop(inf);
		return -1;
	}
	return 0;
}

bool kube_informer_has_synced(struct kube_informer *inf)
{
	pthread_mutex_lock(&inf->mu);
	bool s = inf->synced;
	pthread_mutex_unlock(&inf->mu);
	return s;
}

bool kube_informer_wait_synced(struct kube_informer *inf, int64_t timeout_ns)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	int64_t t = ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec + timeout_ns;
	ts.tv_sec = t / NSEC_PER_SEC;
	ts.tv_nsec = t % NSEC_PER_SEC;
	pthread_mutex_lock(&inf->mu);
	while (!inf->synced && !inf->stop && pthread_cond_timedwait(&inf->cond, &inf->mu, &ts) == 0)
		;
	bool s = inf->synced;
	pthread_mutex_unlock(&inf->mu);
	return s;
}

/* Tells the threads to end; true when the caller is the one to join them. */
static bool ask_stop(struct kube_informer *inf)
{
	pthread_mutex_lock(&inf->mu);
	bool was = inf->stop;
	inf->stop = 1;
	pthread_cond_broadcast(&inf->cond);
	pthread_mutex_unlock(&inf->mu);
	return !was && inf->started;
}

static void join(struct kube_informer *inf)
{
	pthread_join(inf->thread, NULL);
	if (inf->opts.resync_ns > 0)
		pthread_join(inf->resync_thread, NULL);
}

void kube_informer_stop(struct kube_informer *inf)
{
	if (ask_stop(inf))
		join(inf);
}

void kube_informer_free(struct kube_informer *inf)
{
	if (!inf)
		return;
	kube_informer_stop(inf);
	kube_store_free(inf->store);
	free(inf->ns);
	free(inf->label_selector);
	free(inf->field_selector);
	pthread_mutex_destroy(&inf->mu);
	pthread_cond_destroy(&inf->cond);
	pthread_mutex_destroy(&inf->dispatch_mu);
	free(inf);
}

/* ---- informer sets ---- */

bool kube_stop_requested(const struct kube_stop *s)
{
	bool stop = false;

	if (!s)
		return false;
	if (s->flag) {
		pthread_mutex_lock(s->mu);
		stop = *s->flag;
		pthread_mutex_unlock(s->mu);
	}
	return stop || (s->fn && s->fn(s->ud));
}

int kube_informers_start(struct kube_informer *const *infs, size_t n, char *err, size_t errlen)
{
	for (size_t i = 0; i < n; i++)
		if (infs[i] && kube_informer_start(infs[i])) {
			snprintf(err, errlen, "cannot start the %s informer", infs[i]->opts.kind->name);
			return -1;
		}
	return 0;
}

int kube_informers_wait_synced(struct kube_informer *const *infs, size_t n, const char *what,
			       const struct kube_stop *stop, int64_t timeout_ns, char *err,
			       size_t errlen)
{
	const int64_t slice = 100 * NSEC_PER_MSEC;
	int64_t waited = 0;

	for (size_t i = 0; i < n; i++)
		while (infs[i] && !kube_informer_wait_synced(infs[i], slice)) {
			/* A stopped informer never syncs: its controller is on its way out. */
			if (kube_stop_requested(stop) || atomic_load(&infs[i]->stop)) {
				snprintf(err, errlen, "stopped before the caches synced");
				return 1;
			}
			waited += slice;
			if (timeout_ns > 0 && waited >= timeout_ns) {
				snprintf(err, errlen, "timed out waiting for the %s cache to sync",
					 infs[i]->opts.kind->name);
				return -1;
			}
			if (what && waited % (10 * NSEC_PER_SEC) == 0)
				KLOG_I("Waiting for %s to sync", what);
		}
	return 0;
}

void kube_informers_stop(struct kube_informer *const *infs, size_t n)
{
	/* Each watch notices a stop within 100 ms (STOP_POLL_MS): ask them all, then join them all. */
	bool *owed = xcalloc(n ? n : 1, sizeof(*owed));

	for (size_t i = 0; i < n; i++)
		owed[i] = infs[i] && ask_stop(infs[i]);
	for (size_t i = 0; i < n; i++)
		if (owed[i])
			join(infs[i]);
	free(owed);
}
