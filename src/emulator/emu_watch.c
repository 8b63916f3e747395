/*
 * emu_watch: list (selectors, limit/continue pagination, resourceVersion), watch, and
 * deletecollection.
 *
 * A list past the latest state (a continued page, or resourceVersionMatch=Exact) is rebuilt from
 * the event history: the state of a key at rv R is the "before" object of its first event after
 * R, or the stored object when there is none. That is why continue tokens and exact lists are
 * 410 once R falls out of the history, just as upstream's are once etcd compacts.
 *
 * A watch is a chunked HTTP response whose content reader runs in the connection's own thread
 * (libmicrohttpd thread-per-connection mode). The reader keeps a cursor: the resourceVersion up
 * to which the history has been examined. When its output buffer is empty it takes the store
 * lock, turns every newer event of its resource into a frame (filtered by namespace and
 * selectors, with selection changes sent as ADDED/DELETED), and sleeps on the store's condition
 * variable when there is nothing to send. Event texts are serialized once at commit and shared,
 * so a hundred watchers cost a hundred memcpy's per event, not a hundred JSON encodings.
 *
 * A watch ends on timeoutSeconds, on server shutdown, on a "close watches" fault, when the client
 * hangs up (seen with poll(POLLRDHUP) once a second), with a 410 ERROR event when it has fallen
 * behind the retained history, or with a 504 "Too large resource version" ERROR event when it
 * asked for a resourceVersion the store has not reached within 3 s.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/strbuf.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "emulator/emu_base64.h"
#include "emulator/emu_events.h"
#include "emulator/emu_internal.h"
#include "emulator/emu_patch.h"
#include "emulator/emu_reply.h"
#include "emulator/emu_select.h"
#include "emulator/emu_verbs.h"
#include "emulator/emu_watch.h"

struct query {
	struct kube_selector *labels, *fields;
	const char *ns;
	int res;
};

static void query_free(struct query *q)
{
	kube_selector_free(q->labels);
	kube_selector_free(q->fields);
}

static bool field_allowed(const struct emu_resource *r, const char *key)
{
	if (!strcmp(key, "metadata.name") || !strcmp(key, "metadata.namespace"))
		return true;
	size_t n = strlen(key);
	for (const char *p = r->fields; *p;) {
		const char *c = strchr(p, ',');
		size_t len = c ? (size_t)(c - p) : strlen(p);
		if (len == n && !strncmp(p, key, n))
			return true;
		p += len + (c ? 1 : 0);
	}
	return false;
}

static bool query_parse(struct emu_call *k, struct query *q, struct reply *rp)
{
	char err[600];
	memset(q, 0, sizeof(*q));
	q->ns = k->ns;
	q->res = k->res;
	q->labels = kube_selector_parse(emu_arg(k, "labelSelector"), err, sizeof(err));
	if (!q->labels) {
		reply_bad(rp, "unable to parse requirement: %s", err);
		return false;
	}
	const char *fields = emu_arg(k, "fieldSelector");
	char *mapped = NULL;
	if (k->view && fields) { /* events.k8s.io's field labels, in the core terms stored */
		if (!(mapped = emu_event_fields_to_stored(fields, err, sizeof(err)))) {
			kube_selector_free(q->labels);
			q->labels = NULL;
			reply_bad(rp, "%s", err);
			return false;
		}
		fields = mapped;
	}
	q->fields = kube_field_selector_parse(fields, err, sizeof(err));
	free(mapped);
	if (!q->fields) {
		reply_bad(rp, "%s", err);
		return false;
	}
	for (size_t i = 0; i < kube_selector_len(q->fields); i++) {
		const char *key = kube_selector_key(q->fields, i);
		if (!field_allowed(k->r, key)) {
			reply_bad(rp, "field label not supported: %s", key);
			return false;
		}
	}
	return true;
}

static bool query_match(const struct query *q, const json_t *obj)
{
	const json_t *meta = json_object_get(obj, "metadata");
	if (q->ns) {
		const char *ns = json_string_value(json_object_get(meta, "namespace"));
		if (!ns || strcmp(ns, q->ns))
			return false;
	}
	return emu_selector_match_labels(q->labels, json_object_get(meta, "labels")) &&
	       emu_selector_match_fields(q->fields, obj);
}

static bool has_selectors(const struct query *q)
{
	return !kube_selector_empty(q->labels) || !kube_selector_empty(q->fields);
}

/* ---- list ---- */

static char *continue_encode(uint64_t rv, const char *key)
{
	struct strbuf start = STRBUF_INIT;
	strbuf_addstr(&start, key);
	json_t *tok = json_pack("{s:s, s:I, s:s#}", "v", "meta.k8s.io/v1", "rv", (json_int_t)rv,
				"start", start.buf, start.len + 1);
	char *text = json_dumps(tok, JSON_COMPACT);
	char *b64 = emu_base64_encode((unsigned char *)text, strlen(text), true);
	free(text);
	json_decref(tok);
	strbuf_release(&start);
	return b64;
}

/* Returns 0 with rv and the start key (owned), or -1 when the token is not one of ours. */
static int continue_decode(const char *tok, uint64_t *rv, char **key)
{
	size_t len;
	unsigned char *raw = emu_base64_decode(tok, &len);
	if (!raw)
		return -1;
	json_t *j = json_loadb((char *)raw, len, JSON_ALLOW_NUL, NULL);
	free(raw);
	if (emu_json_too_deep(j, EMU_MAX_JSON_DEPTH)) {
		json_decref(j);
		return -1;
	}
	json_t *jrv = json_object_get(j, "rv"), *js = json_object_get(j, "start");
	int rc = -1;
	if (json_is_integer(jrv) && json_integer_value(jrv) > 0 && json_is_string(js) &&
	    !strcmp(json_string_value(json_object_get(j, "v")) ?: "", "meta.k8s.io/v1")) {
		*rv = (uint64_t)json_integer_value(jrv);
		*key = xstrdup(json_string_value(js)); /* stops at the trailing NUL */
		rc = 0;
	}
	json_decref(j);
	return rc;
}

static bool parse_limit(struct emu_call *k, long *limit, struct reply *rp)
{
	const char *s = emu_arg(k, "limit");
	*limit = 0;
	if (!s || !*s)
		return true;
	char *end;
	long v = strtol(s, &end, 10);
	if (*end || v < 0) {
		reply_bad(rp, "limit must be a non-negative integer, got \"%s\"", s);
		return false;
	}
	*limit = v;
	return true;
}

struct list_range {
	char prefix[300]; /* "ns/" or "" */
	char *after;      /* continue key (exclusive), or NULL: from the start of the prefix */
	uint64_t rv;      /* the snapshot the list shows */
};

/*
 * resourceVersion on a list: "" or "0" is the latest state; N is "not older than N" (the latest,
 * unless N is in the future: 504 as upstream after its wait) or, with resourceVersionMatch=Exact,
 * the snapshot at N (410 when N is older than the history).
 */
static bool list_at_version(struct emu_call *k, struct list_range *lr, struct reply *rp)
{
	struct emu_store *st = &k->srv->st;
	const char *rvs = emu_arg(k, "resourceVersion");
	const char *match = emu_arg(k, "resourceVersionMatch");
	if (match && *match && strcmp(match, "Exact") && strcmp(match, "NotOlderThan")) {
		reply_status(rp, 422, "Invalid", "resourceVersionMatch: Unsupported value: must be "
			     "\"Exact\" or \"NotOlderThan\"", NULL);
		return false;
	}
	if (!rvs || !*rvs || !strcmp(rvs, "0")) {
		if (match && *match) {
			reply_status(rp, 422, "Invalid", "resourceVersionMatch is forbidden unless "
				     "resourceVersion is provided and not \"0\"", NULL);
			return false;
		}
		return true;
	}
	char *end;
	errno = 0;
	unsigned long long v = strtoull(rvs, &end, 10);
	if (*end || *rvs == '-' || errno || v > INT64_MAX) {
		reply_bad(rp, "resourceVersion: Invalid value: \"%.40s\": must be an unsigned integer",
			  rvs);
		return false;
	}
	if (v > st->rv) { /* kube-apiserver first waits up to 3 s for its cache, and says Retry-After */
		free(rp->text);
		rp->code = 504;
		rp->text = emu_status_rv_too_large(v, st->rv, 1);
		return false;
	}
	if (match && !strcmp(match, "Exact")) {
		if (v < st->history_start) { /* kube-apiserver's words: the list goes to etcd */
			reply_status(rp, 410, "Expired",
				     "The resourceVersion for the provided list is too old.", NULL);
			return false;
		}
		lr->rv = v;
	}
	return true;
}

/* Resolves where the list starts (namespace range and continue token); false with a reply. */
static bool list_start(struct emu_call *k, struct list_range *lr, struct reply *rp)
{
	struct emu_store *st = &k->srv->st;
	lr->prefix[0] = '\0';
	lr->after = NULL;
	if (k->ns)
		snprintf(lr->prefix, sizeof(lr->prefix), "%s/", k->ns);
	lr->rv = st->rv;
	const char *tok = emu_arg(k, "continue");
	if (!tok || !*tok)
		return list_at_version(k, lr, rp);
	char *key = NULL;
	uint64_t rv;
	if (continue_decode(tok, &rv, &key) < 0 || strncmp(key, lr->prefix, strlen(lr->prefix)) ||
	    rv > st->rv) {
		free(key);
		reply_bad(rp, "continue key is not valid: the token was not issued by this server "
			  "for this list; start a new list without the continue parameter");
		return false;
	}
	if (rv < st->history_start) {
		free(key);
		reply_status(rp, 410, "Expired", "The provided continue parameter is too old to "
			     "display a consistent list result. You can start a new list without the "
			     "continue parameter.", NULL);
		return false;
	}
	lr->rv = rv;
	lr->after = key;
	return true;
}

static bool in_range(const struct emu_resource *r, size_t i, const char *prefix)
{
	return i < r->n && !strncmp(r->items[i].key, prefix, strlen(prefix));
}

struct view_item {
	char *key;    /* owned only in the change list */
	json_t *obj;  /* borrowed; NULL: absent at the snapshot */
	uint64_t rv;  /* of the change */
};

static int view_cmp(const void *a, const void *b)
{
	const struct view_item *x = a, *y = b;
	int c = strcmp(x->key, y->key);
	return c ? c : (x->rv < y->rv ? -1 : x->rv > y->rv);
}

static bool key_in_list_range(const struct list_range *lr, const char *key)
{
	return !strncmp(key, lr->prefix, strlen(lr->prefix)) && (!lr->after || strcmp(key, lr->after) > 0);
}

/*
 * The objects of the list range as they were at lr->rv, in key order (lock held). Every change
 * after lr->rv is in the history (list_start checked), and the state of a key at lr->rv is the
 * "before" of its first later event, so a continued list is the same snapshot upstream's etcd
 * read gives. The result borrows the stored objects; free it with view_free().
 */
static struct view_item *list_view(struct emu_store *st, int res, const struct list_range *lr,
				   size_t *n)
{
	const struct emu_resource *r = &st->res[res];
	struct view_item *chg = NULL;
	size_t nchg = 0;
	for (uint64_t rv = lr->rv + 1; rv <= st->rv; rv++) {
		const struct emu_event *ev = emu_store_event(st, rv);
		if (!ev || ev->res != res)
			continue;
		json_t *meta = json_object_get(ev->obj, "metadata");
		char key[600];
		emu_store_key(r, json_string_value(json_object_get(meta, "namespace")),
			      json_string_value(json_object_get(meta, "name")) ?: "", key, sizeof(key));
		if (!key_in_list_range(lr, key))
			continue;
		chg = xrealloc(chg, (nchg + 1) * sizeof(*chg));
		chg[nchg++] = (struct view_item){ xstrdup(key), ev->prev, rv };
	}
	if (nchg)
		qsort(chg, nchg, sizeof(*chg), view_cmp);
	size_t i = emu_store_lower_bound(r, lr->after ? lr->after : lr->prefix), j = 0, cap = 16;
	if (lr->after && i < r->n && !strcmp(r->items[i].key, lr->after))
		i++;
	struct view_item *out = xmalloc(cap * sizeof(*out));
	*n = 0;
	while (in_range(r, i, lr->prefix) || j < nchg) {
		int c = !in_range(r, i, lr->prefix) ? 1 : j >= nchg ? -1 :
			strcmp(r->items[i].key, chg[j].key);
		struct view_item it = { NULL, NULL, 0 };
		if (c < 0) {
			it = (struct view_item){ r->items[i].key, r->items[i].obj, 0 };
			i++;
		} else {
			it = (struct view_item){ chg[j].key, chg[j].obj, 0 };
			if (c == 0)
				i++;
			const char *key = chg[j].key;
			while (j < nchg && !strcmp(chg[j].key, key)) /* first change per key */
				j++;
		}
		if (!it.obj)
			continue;
		if (*n == cap) {
			cap *= 2;
			out = xrealloc(out, cap * sizeof(*out));
		}
		out[(*n)++] = it;
	}
	/* keys in out point into chg: keep chg alive by parking it after the items */
	out = xrealloc(out, (*n + nchg + 1) * sizeof(*out));
	if (nchg)
		memcpy(out + *n, chg, nchg * sizeof(*chg));
	out[*n + nchg] = (struct view_item){ NULL, NULL, 0 };
	free(chg);
	return out;
}

static void view_free(struct view_item *v, size_t n)
{
	for (size_t i = n; v[i].key; i++)
		free(v[i].key);
	free(v);
}

enum MHD_Result emu_do_list(struct emu_call *k)
{
	struct reply rp = { 0 };
	struct query q;
	struct list_range lr;
	long limit;
	struct emu_store *st = &k->srv->st;
	if (!query_parse(k, &q, &rp) || !parse_limit(k, &limit, &rp)) {
		query_free(&q);
		return emu_reply_text(k->conn, rp.code, rp.text, 0);
	}
	pthread_mutex_lock(&st->mu);
	if (list_start(k, &lr, &rp)) {
		size_t nv, i;
		struct view_item *view = list_view(st, k->res, &lr, &nv);
		struct strbuf items = STRBUF_INIT;
		json_t *table = k->table ? emu_table_new(k->r, &k->treq, NULL) : NULL;
		time_t now = time(NULL);
		long count = 0;
		bool more = false;
		const char *last = NULL;
		for (i = 0; i < nv; i++) {
			json_t *obj = view[i].obj;
			if (!query_match(&q, obj))
				continue;
			if (limit && count == limit) {
				more = true;
				break;
			}
			last = view[i].key;
			if (table) {
				count++;
				emu_table_add_row(table, k->r, &k->treq, obj, now);
				continue;
			}
			/* a built-in kind's list items carry no apiVersion and kind, as the real
			 * server's; a custom resource's do */
			json_t *item = json_copy(obj);
			emu_served_object(k, item);
			if (!emu_resource_is_crd(k->r)) {
				json_object_del(item, "apiVersion");
				json_object_del(item, "kind");
			}
			char *t = json_dumps(item, JSON_COMPACT);
			json_decref(item);
			if (count++)
				strbuf_addch(&items, ',');
			strbuf_addstr(&items, t);
			free(t);
		}
		struct strbuf out = STRBUF_INIT;
		strbuf_addf(&out, "{\"kind\":\"%sList\",\"apiVersion\":\"%s\",\"metadata\":"
			    "{\"resourceVersion\":\"%" PRIu64 "\"", k->r->kind, k->api_version,
			    lr.rv);
		char *tok = more ? continue_encode(lr.rv, last) : NULL;
		if (more) {
			strbuf_addf(&out, ",\"continue\":\"%s\"", tok);
			if (!has_selectors(&q))
				strbuf_addf(&out, ",\"remainingItemCount\":%zu", nv - i);
		} else if (emu_resource_is_crd(k->r)) {
			/* a custom resource's list says "continue":"" on its last page */
			strbuf_addstr(&out, ",\"continue\":\"\"");
		}
		strbuf_addstr(&out, "},\"items\":[");
		strbuf_add(&out, items.buf, items.len);
		strbuf_addstr(&out, "]}");
		strbuf_release(&items);
		view_free(view, nv);
		rp.code = 200;
		if (table) {
			/* the Table takes the list's metadata */
			json_t *lm = json_object_get(table, "metadata");
			char rvb[32];
			snprintf(rvb, sizeof(rvb), "%" PRIu64, lr.rv);
			json_object_set_new(lm, "resourceVersion", json_string(rvb));
			if (tok)
				json_object_set_new(lm, "continue", json_string(tok));
			if (more && !has_selectors(&q))
				json_object_set_new(lm, "remainingItemCount",
						    json_integer((json_int_t)(nv - i)));
			strbuf_release(&out);
			rp.text = json_dumps(table, JSON_COMPACT);
			json_decref(table);
		} else {
			rp.text = strbuf_detach(&out, NULL);
		}
		free(tok);
	}
	free(lr.after);
	pthread_mutex_unlock(&st->mu);
	query_free(&q);
	return emu_reply_text(k->conn, rp.code, rp.text, 0);
}

/* ---- watch ---- */

/* How long a watch from a resourceVersion past the store's waits for it (kube-apiserver's watch
 * cache: blockTimeout). */
#define EMU_RV_WAIT_NS (3 * NSEC_PER_SEC)

struct emu_watch {
	struct emu_server *srv;
	struct emu_resource *r;
	char api_version[96]; /* the version the client addressed (emu_call.api_version) */
	struct query q;
	uint64_t cursor;
	/* The cursor is past the store's resourceVersion: wait for the store until then (mono),
	 * and then answer "too large" (0: not ahead). The initial events wait too. */
	int64_t ahead_until_ns;
	bool initial_pending;
	int64_t deadline_ns; /* mono; 0: none */
	bool fault_deadline; /* the deadline came from the watchMaxSeconds fault */
	bool bookmarks;
	int64_t next_bookmark_ns;
	unsigned epoch;
	int fd;
	bool finished;
	bool table; /* frames carry one-row Tables (kubectl get -w) */
	struct emu_table_req treq;
	struct strbuf out;
	size_t off;
};

static void add_frame(struct strbuf *sb, const char *type, const char *text)
{
	strbuf_addstr(sb, "{\"type\":\"");
	strbuf_addstr(sb, type);
	strbuf_addstr(sb, "\",\"object\":");
	strbuf_addstr(sb, text);
	strbuf_addstr(sb, "}\n");
}

static void add_bookmark(struct strbuf *sb, const struct emu_resource *r, const char *api_version,
			 uint64_t rv, bool initial_end)
{
	strbuf_addf(sb, "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"%s\",\"apiVersion\":\"%s\","
		    "\"metadata\":{\"resourceVersion\":\"%" PRIu64 "\"%s}}}\n", r->kind,
		    api_version, rv,
		    initial_end ? ",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}" : "");
}

static void add_expired(struct strbuf *sb, uint64_t rv, uint64_t oldest)
{
	strbuf_addf(sb, "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\","
		    "\"metadata\":{},\"status\":\"Failure\",\"message\":\"too old resource version: "
		    "%" PRIu64 " (%" PRIu64 ")\",\"reason\":\"Expired\",\"code\":410}}\n", rv, oldest);
}

/* A frame for obj: its text (serialized when text is NULL), or its one-row Table. */
static void add_object_frame(struct emu_watch *w, const char *type, const json_t *obj,
			     const char *text)
{
	char *own = NULL;
	if (w->table) {
		json_t *t = emu_table_new(w->r, &w->treq,
			json_string_value(json_object_get(json_object_get(obj, "metadata"),
							  "resourceVersion")));
		emu_table_add_row(t, w->r, &w->treq, obj, time(NULL));
		own = json_dumps(t, JSON_COMPACT);
		json_decref(t);
	} else if (strcmp(w->api_version, w->r->api_version)) {
		/* addressed at the resource's other served version or group: the object in that one */
		json_t *c = json_copy((json_t *)obj);
		emu_serve_as(w->r, w->api_version, c);
		own = json_dumps(c, JSON_COMPACT);
		json_decref(c);
	} else if (!text) {
		own = json_dumps(obj, JSON_COMPACT);
	}
	add_frame(&w->out, type, own ? own : text);
	free(own);
}

/* Frames for the events after the cursor (lock held). */
static void watch_collect(struct emu_watch *w)
{
	struct emu_store *st = &w->srv->st;
	for (uint64_t rv = w->cursor + 1; rv <= st->rv; rv++) {
		const struct emu_event *ev = emu_store_event(st, rv);
		if (!ev || ev->res != w->q.res)
			continue;
		bool now = query_match(&w->q, ev->obj);
		bool before = ev->prev && query_match(&w->q, ev->prev);
		const char *type = NULL;
		if (ev->type == EMU_DELETED)
			type = now || before ? "DELETED" : NULL;
		else if (now)
			type = before ? "MODIFIED" : "ADDED"; /* entering the selection: ADDED */
		else if (before)
			type = "DELETED"; /* leaving the selection */
		if (type)
			add_object_frame(w, type, ev->obj, ev->text);
	}
	if (st->rv > w->cursor)
		w->cursor = st->rv;
}

static bool client_gone(int fd)
{
	if (fd < 0)
		return false;
	struct pollfd p = { .fd = fd, .events = POLLRDHUP };
	return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

static void wait_until(struct emu_store *st, int64_t until_mono_ns)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	int64_t now = (int64_t)ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
	int64_t wait = until_mono_ns - now;
	if (wait <= 0)
		return;
	int64_t abs = now + wait;
	ts.tv_sec = abs / NSEC_PER_SEC;
	ts.tv_nsec = abs % NSEC_PER_SEC;
	pthread_cond_timedwait(&st->cv, &st->mu, &ts);
}

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
}

static void watch_initial(struct emu_watch *w);

/*
 * Whether a watch from a resourceVersion past the store's has seen the store reach it (lock
 * held); then its initial events, if it asked for them, are its first frames.
 */
static bool watch_caught_up(struct emu_watch *w)
{
	struct emu_store *st = &w->srv->st;
	if (st->rv < w->cursor)
		return false;
	w->ahead_until_ns = 0;
	if (w->initial_pending) {
		w->initial_pending = false;
		watch_initial(w);
		w->cursor = st->rv;
		if (w->bookmarks)
			add_bookmark(&w->out, w->r, w->api_version, w->cursor, true);
	}
	return true;
}

/* Blocks until w->out has data or the watch is finished. */
static void watch_fill(struct emu_watch *w)
{
	struct emu_store *st = &w->srv->st;
	pthread_mutex_lock(&st->mu);
	for (;;) {
		if (st->shutdown || w->epoch != st->watch_epoch) {
			if (!st->shutdown)
				emu_faults_count(&w->srv->faults, &w->srv->faults.watches_closed);
			w->finished = true;
			break;
		}
		if (w->ahead_until_ns && !watch_caught_up(w)) {
			if (mono_ns() >= w->ahead_until_ns) {
				char *t = emu_status_rv_too_large(w->cursor, st->rv, 1);
				add_frame(&w->out, "ERROR", t);
				free(t);
				w->finished = true;
				break;
			}
		} else if (w->cursor < st->history_start) {
			add_expired(&w->out, w->cursor, st->history_start);
			w->finished = true;
			break;
		}
		watch_collect(w);
		if (w->out.len)
			break;
		int64_t now = mono_ns();
		if (w->deadline_ns && now >= w->deadline_ns) {
			if (w->fault_deadline)
				emu_faults_count(&w->srv->faults, &w->srv->faults.watches_ended);
			w->finished = true;
			break;
		}
		if (w->bookmarks && !w->ahead_until_ns && now >= w->next_bookmark_ns) {
			add_bookmark(&w->out, w->r, w->api_version, w->cursor, false);
			w->next_bookmark_ns = now + w->srv->cfg.bookmark_interval_ns;
			break;
		}
		if (client_gone(w->fd)) {
			w->finished = true;
			break;
		}
		int64_t until = now + NSEC_PER_SEC;
		if (w->deadline_ns && w->deadline_ns < until)
			until = w->deadline_ns;
		if (w->bookmarks && w->next_bookmark_ns < until)
			until = w->next_bookmark_ns;
		if (w->ahead_until_ns && w->ahead_until_ns < until)
			until = w->ahead_until_ns;
		wait_until(st, until);
	}
	pthread_mutex_unlock(&st->mu);
}

static ssize_t watch_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct emu_watch *w = cls;
	(void)pos;
	while (w->off >= w->out.len) {
		strbuf_reset(&w->out);
		w->off = 0;
		if (w->finished)
			return MHD_CONTENT_READER_END_OF_STREAM;
		watch_fill(w);
	}
	size_t n = w->out.len - w->off;
	if (n > max)
		n = max;
	memcpy(buf, w->out.buf + w->off, n);
	w->off += n;
	return (ssize_t)n;
}

static void watch_free(void *cls)
{
	struct emu_watch *w = cls;
	query_free(&w->q);
	free((char *)w->q.ns);
	strbuf_release(&w->out);
	free(w);
}

static bool arg_true(struct emu_call *k, const char *name)
{
	const char *v = emu_arg(k, name);
	return v && (!strcmp(v, "true") || !strcmp(v, "1"));
}

/* Parses resourceVersion and timeoutSeconds; false with a reply. */
static bool watch_params(struct emu_call *k, struct emu_watch *w, bool *initial,
			 struct reply *rp)
{
	const char *rv = emu_arg(k, "resourceVersion");
	*initial = !rv || !*rv || !strcmp(rv, "0");
	if (!*initial) {
		char *end;
		errno = 0;
		unsigned long long v = strtoull(rv, &end, 10);
		if (*end || *rv == '-' || errno || v > INT64_MAX) {
			reply_bad(rp, "resourceVersion: Invalid value: \"%s\": must be an unsigned "
				  "integer", rv);
			return false;
		}
		w->cursor = v;
	}
	int64_t timeout = w->srv->cfg.max_watch_timeout_ns;
	const char *ts = emu_arg(k, "timeoutSeconds");
	if (ts && *ts) {
		char *end;
		long v = strtol(ts, &end, 10);
		if (*end || v < 0) {
			reply_bad(rp, "timeoutSeconds must be a non-negative integer, got \"%s\"", ts);
			return false;
		}
		/* past INT64_MAX ns (292 years) it is longer than any limit: no overflow */
		if (v > 0 && v <= INT64_MAX / NSEC_PER_SEC && (!timeout || v * NSEC_PER_SEC < timeout))
			timeout = v * NSEC_PER_SEC;
	}
	int64_t fmax = emu_faults_watch_max(&w->srv->faults);
	int64_t now = mono_ns();
	w->deadline_ns = timeout ? now + timeout : 0;
	if (fmax && (!timeout || fmax < timeout)) {
		w->deadline_ns = now + fmax;
		w->fault_deadline = true;
	}
	w->bookmarks = arg_true(k, "allowWatchBookmarks");
	w->next_bookmark_ns = now + w->srv->cfg.bookmark_interval_ns;
	return true;
}

/* Synthetic ADDED events for the current objects (lock held). */
static void watch_initial(struct emu_watch *w)
{
	const struct emu_resource *r = w->r;
	char prefix[300] = "";
	if (w->q.ns)
		snprintf(prefix, sizeof(prefix), "%s/", w->q.ns);
	for (size_t i = emu_store_lower_bound(r, prefix); in_range(r, i, prefix); i++) {
		if (!query_match(&w->q, r->items[i].obj))
			continue;
		add_object_frame(w, "ADDED", r->items[i].obj, NULL);
	}
}

enum MHD_Result emu_do_watch(struct emu_call *k)
{
	struct reply rp = { 0 };
	struct emu_watch *w = xcalloc(1, sizeof(*w));
	struct emu_store *st = &k->srv->st;
	bool initial;
	w->srv = k->srv;
	w->r = k->r;
	snprintf(w->api_version, sizeof(w->api_version), "%s", k->api_version);
	w->out = (struct strbuf)STRBUF_INIT;
	w->table = k->table;
	w->treq = k->treq;
	if (!query_parse(k, &w->q, &rp) || !watch_params(k, w, &initial, &rp)) {
		query_free(&w->q);
		free(w);
		return emu_reply_text(k->conn, rp.code, rp.text, 0);
	}
	bool send_initial = arg_true(k, "sendInitialEvents");
	w->q.ns = k->ns ? xstrdup(k->ns) : NULL;
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(k->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	w->fd = ci ? ci->connect_fd : -1;

	pthread_mutex_lock(&st->mu);
	w->epoch = st->watch_epoch;
	if (!initial && w->cursor > st->rv) {
		/*
		 * A resourceVersion the store has not reached (it went back in time: kube-emulator
		 * restarted without its state file): as kube-apiserver's watch cache for a watch-list,
		 * wait up to 3 s for the store, then one ERROR event with the 504 "Too large resource
		 * version" Status. kube-apiserver accepts a plain watch from there and stays silent
		 * until its store passes that version; kube-emulator answers it as a watch-list, so
		 * that a client learns its cache is of another history (docs/kube-emulator.md).
		 */
		w->ahead_until_ns = mono_ns() + EMU_RV_WAIT_NS;
		w->initial_pending = send_initial;
	} else if (send_initial || initial) {
		watch_initial(w);
		w->cursor = st->rv;
		if (send_initial && w->bookmarks)
			add_bookmark(&w->out, w->r, w->api_version, w->cursor, true);
	} else if (w->cursor < st->history_start) {
		add_expired(&w->out, w->cursor, st->history_start);
		w->finished = true;
	}
	pthread_mutex_unlock(&st->mu);

	struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024,
								      watch_read, w, watch_free);
	MHD_add_response_header(resp, "Content-Type", "application/json");
	MHD_add_response_header(resp, "Cache-Control", "no-cache, private");
	enum MHD_Result ret = MHD_queue_response(k->conn, 200, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* ---- deletecollection ---- */

enum MHD_Result emu_do_delete_collection(struct emu_call *k)
{
	struct reply rp = { 0 };
	struct query q;
	struct emu_store *st = &k->srv->st;
	if (!query_parse(k, &q, &rp)) {
		query_free(&q);
		return emu_reply_text(k->conn, rp.code, rp.text, 0);
	}
	json_t *opts = NULL;
	if (k->body_len && (!parse_body(k, &opts, &rp) || !emu_delete_options(k, opts, &rp))) {
		json_decref(opts);
		query_free(&q);
		return emu_reply_text(k->conn, rp.code, rp.text, 0);
	}
	json_decref(opts);
	if (!k->body_len && !emu_delete_options(k, NULL, &rp)) {
		query_free(&q);
		return emu_reply_text(k->conn, rp.code, rp.text, 0);
	}
	char prefix[300] = "";
	if (k->ns)
		snprintf(prefix, sizeof(prefix), "%s/", k->ns);
	pthread_mutex_lock(&st->mu);
	size_t n = 0, cap = 0;
	char **keys = NULL;
	for (size_t i = emu_store_lower_bound(k->r, prefix); in_range(k->r, i, prefix); i++) {
		if (!query_match(&q, k->r->items[i].obj))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			keys = xrealloc(keys, cap * sizeof(*keys));
		}
		keys[n++] = xstrdup(k->r->items[i].key);
	}
	for (size_t i = 0; i < n; i++) {
		struct reply one = { 0 };
		json_t *old = emu_store_get(st, k->res, keys[i]);
		if (old)
			emu_delete_locked(k, keys[i], old, &one);
		free(one.text);
		free(keys[i]);
	}
	free(keys);
	pthread_mutex_unlock(&st->mu);
	query_free(&q);
	return emu_reply_text(k->conn, 200, xstrdup("{\"kind\":\"Status\",\"apiVersion\":\"v1\","
						    "\"metadata\":{},\"status\":\"Success\"}"), 0);
}
