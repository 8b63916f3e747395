/*
 * Informers against a real kube-emulator: paginated list of 5,000 objects, watch resume after
 * the emulator drops every watch, relist after 410 Gone with deletes delivered, bookmarks,
 * resync, an oversize watch event; client-go's reflector rules as a table (what follows each
 * kind of error), the same rules against the emulator's injected faults, a continue token that
 * expires between pages, and an emulator restarted with an empty store (its resourceVersions
 * went back in time: "Too large resource version").
 */
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/timeutil.h"
#include "check.h"
#include "kube/informer.h"
#include "kube/jv.h"
#include "kube/testing/testenv.h"

static struct kube_testenv env;

struct counts {
	pthread_mutex_t mu;
	int adds, updates, resyncs, deletes;
	char deleted[16][64];
	bool deleted_had_finalizer;
};

static void on_add(const struct kube_obj *o, void *ud)
{
	(void)o;
	struct counts *c = ud;
	pthread_mutex_lock(&c->mu);
	c->adds++;
	pthread_mutex_unlock(&c->mu);
}

static void on_update(const struct kube_obj *old, const struct kube_obj *o, void *ud)
{
	struct counts *c = ud;
	pthread_mutex_lock(&c->mu);
	if (old == o)
		c->resyncs++;
	else
		c->updates++;
	pthread_mutex_unlock(&c->mu);
}

static void on_delete(const struct kube_obj *o, void *ud)
{
	struct counts *c = ud;
	pthread_mutex_lock(&c->mu);
	if (c->deletes < 16)
		snprintf(c->deleted[c->deletes], 64, "%s", o->name);
	if (kube_obj_has_finalizer(o, "kcsi/keep"))
		c->deleted_had_finalizer = true;
	c->deletes++;
	pthread_mutex_unlock(&c->mu);
}

static int get_count(struct counts *c, int *field)
{
	pthread_mutex_lock(&c->mu);
	int v = *field;
	pthread_mutex_unlock(&c->mu);
	return v;
}

/* Polls until *field reaches want (generous timeout); returns the final value. */
static int wait_count(struct counts *c, int *field, int want)
{
	int64_t deadline = mono_now_ns() + 30 * NSEC_PER_SEC;
	int v;
	while ((v = get_count(c, field)) < want && mono_now_ns() < deadline)
		sleep_ns(10 * NSEC_PER_MSEC);
	return v;
}

static struct kube_informer *start(const struct kube_kind *k, struct counts *c, long page,
				   int64_t resync, size_t max_event)
{
	pthread_mutex_init(&c->mu, NULL);
	struct kube_informer_opts o = { .kind = k, .page_size = page, .resync_ns = resync,
					.max_event = max_event };
	struct kube_informer *inf = kube_informer_new(env.client, &o);
	struct kube_handlers h = { on_add, on_update, on_delete, c };
	kube_informer_add_handlers(inf, &h);
	kube_informer_start(inf);
	return inf;
}

static void create_va(const char *name, bool finalizer)
{
	json_t *o = json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:s, s:{s:s}}}", "apiVersion",
			      "storage.k8s.io/v1", "kind", "VolumeAttachment", "metadata", "name", name,
			      "spec", "attacher", "d.example", "nodeName", "node-1", "source",
			      "persistentVolumeName", "pv-x");
	if (finalizer)
		json_object_set_new(json_object_get(o, "metadata"), "finalizers",
				    json_pack("[s]", "kcsi/keep"));
	struct kube_err e;
	json_t *r = kube_create(env.client, &KUBE_RES_VOLUMEATTACHMENTS, NULL, o, &e);
	if (!r)
		fprintf(stderr, "create %s: %s\n", name, e.message);
	json_decref(r);
	json_decref(o);
}

static void delete_va(const char *name)
{
	struct kube_err e;
	if (kube_delete(env.client, &KUBE_RES_VOLUMEATTACHMENTS, NULL, name, NULL, NULL, &e))
		fprintf(stderr, "delete %s: %s\n", name, e.message);
}

struct creator {
	int from, to;
};

static void *create_pvs(void *arg)
{
	struct creator *cr = arg;
	char name[32];
	for (int i = cr->from; i < cr->to; i++) {
		snprintf(name, sizeof(name), "pv-%05d", i);
		json_t *o = json_pack("{s:s, s:s, s:{s:s}, s:{s:{s:s}, s:{s:s, s:s}}}", "apiVersion",
				      "v1", "kind", "PersistentVolume", "metadata", "name", name, "spec",
				      "capacity", "storage", "1Gi", "csi", "driver", "d.example",
				      "volumeHandle", name);
		struct kube_err e;
		json_t *r = kube_create(env.client, &KUBE_RES_PERSISTENTVOLUMES, NULL, o, &e);
		if (!r)
			fprintf(stderr, "create %s: %s\n", name, e.message);
		json_decref(r);
		json_decref(o);
	}
	return NULL;
}

static void test_paginated_list(void)
{
	/* One creating thread: kube-emulator's path parsing is not yet safe for concurrent
	 * requests (strtok), which made a parallel fill lose an object now and then. */
	struct creator cr = { 0, 5000 };
	create_pvs(&cr);
	struct counts c = { 0 };
	struct kube_informer *inf = start(&KUBE_KIND_PERSISTENTVOLUME, &c, 500, 0, 0);
	CHECK(kube_informer_wait_synced(inf, 60 * NSEC_PER_SEC));
	CHECK_INT(kube_store_len(kube_informer_store(inf)), 5000);
	CHECK_INT(get_count(&c, &c.adds), 5000);
	struct kube_informer_stats s;
	kube_informer_stats(inf, &s);
	CHECK(s.pages >= 10); /* 5,000 objects at 500 per page */
	struct kube_obj *o = kube_store_get(kube_informer_store(inf), NULL, "pv-04999");
	CHECK(o && kube_pv_of(o) && !strcmp(kube_pv_of(o)->volume_handle, "pv-04999"));
	CHECK(o && kube_pv_of(o)->capacity == 1LL << 30);
	kube_obj_unref(o);
	kube_informer_free(inf);
	pthread_mutex_destroy(&c.mu);
}

static void test_watch_resume_and_relist(void)
{
	struct counts c = { 0 };
	struct kube_informer *inf = start(&KUBE_KIND_VOLUMEATTACHMENT, &c, 0, 0, 0);
	CHECK(kube_informer_wait_synced(inf, 30 * NSEC_PER_SEC));
	char name[32];
	for (int i = 0; i < 5; i++) {
		snprintf(name, sizeof(name), "va-%d", i);
		create_va(name, i < 3);
	}
	CHECK_INT(wait_count(&c, &c.adds, 5), 5);

	/* The emulator drops every watch: the informer resumes without relisting. */
	CHECK_INT(kube_testenv_faults(&env, "{\"reset\":true,\"closeWatches\":true}"), 0);
	for (int i = 5; i < 10; i++) {
		snprintf(name, sizeof(name), "va-%d", i);
		create_va(name, false);
	}
	CHECK_INT(wait_count(&c, &c.adds, 10), 10);
	struct kube_err e;
	json_decref(kube_patch(env.client, &KUBE_RES_VOLUMEATTACHMENTS, NULL, "va-9", true,
			       KUBE_PATCH_MERGE, "{\"status\":{\"attached\":true}}", &e));
	CHECK_INT(wait_count(&c, &c.updates, 1), 1);
	struct kube_informer_stats s;
	kube_informer_stats(inf, &s);
	CHECK_INT(s.lists, 1);
	CHECK(s.watches >= 2);
	struct kube_obj *o = kube_store_get(kube_informer_store(inf), NULL, "va-9");
	CHECK(o && kube_va_of(o)->attached);
	kube_obj_unref(o);

	/* Bookmarks arrive (the emulator sends one a second here) and move last_rv. */
	int64_t deadline = mono_now_ns() + 20 * NSEC_PER_SEC;
	do {
		kube_informer_stats(inf, &s);
		if (!s.bookmarks)
			sleep_ns(50 * NSEC_PER_MSEC);
	} while (!s.bookmarks && mono_now_ns() < deadline);
	CHECK(s.bookmarks >= 1);

	/*
	 * Relist after 410: the next watch is held back 3 s while more changes happen than the
	 * emulator keeps in its history (30), so resuming fails with 410 and the informer relists.
	 * The three deleted objects (removed meanwhile, finalizers cleared first) must be delivered
	 * as deletes with their last known state.
	 */
	for (int i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "va-%d", i);
		json_decref(kube_patch(env.client, &KUBE_RES_VOLUMEATTACHMENTS, NULL, name, false,
				       KUBE_PATCH_MERGE, "{\"metadata\":{\"labels\":{\"x\":\"y\"}}}", &e));
	}
	CHECK_INT(wait_count(&c, &c.updates, 4), 4);
	int deletes0 = get_count(&c, &c.deletes);
	CHECK_INT(kube_testenv_faults(&env, "{\"reset\":true,\"closeWatches\":true,\"rules\":[{"
				      "\"verb\":\"watch\",\"resource\":\"volumeattachments\","
				      "\"latencyMs\":3000,\"times\":1}]}"), 0);
	for (int i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "va-%d", i);
		json_decref(kube_patch(env.client, &KUBE_RES_VOLUMEATTACHMENTS, NULL, name, false,
				       KUBE_PATCH_MERGE, "{\"metadata\":{\"finalizers\":null}}", &e));
		delete_va(name);
	}
	for (int i = 10; i < 50; i++) {
		snprintf(name, sizeof(name), "va-%d", i);
		create_va(name, false);
	}
	deadline = mono_now_ns() + 30 * NSEC_PER_SEC;
	do {
		kube_informer_stats(inf, &s);
		if (s.lists < 2)
			sleep_ns(50 * NSEC_PER_MSEC);
	} while (s.lists < 2 && mono_now_ns() < deadline);
	CHECK_INT(s.lists, 2);
	CHECK_INT(wait_count(&c, &c.deletes, deletes0 + 3), deletes0 + 3);
	CHECK_INT(wait_count(&c, &c.adds, 50), 50);
	CHECK_INT(kube_store_len(kube_informer_store(inf)), 47);
	pthread_mutex_lock(&c.mu);
	int found = 0;
	for (int i = deletes0; i < c.deletes && i < 16; i++)
		found += !strcmp(c.deleted[i], "va-0") || !strcmp(c.deleted[i], "va-1") ||
			 !strcmp(c.deleted[i], "va-2");
	/* last known state: the informer never saw the finalizer removal */
	CHECK(c.deleted_had_finalizer);
	pthread_mutex_unlock(&c.mu);
	CHECK_INT(found, 3);
	kube_testenv_faults(&env, "{\"reset\":true}");
	kube_informer_free(inf);
	pthread_mutex_destroy(&c.mu);
}

static void test_resync(void)
{
	struct counts c = { 0 };
	struct kube_err e;
	for (int i = 0; i < 3; i++) {
		char name[16];
		snprintf(name, sizeof(name), "node-%d", i);
		json_t *o = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "v1", "kind", "Node",
				      "metadata", "name", name);
		json_decref(kube_create(env.client, &KUBE_RES_NODES, NULL, o, &e));
		json_decref(o);
	}
	struct kube_informer *inf = start(&KUBE_KIND_NODE_T, &c, 0, 200 * NSEC_PER_MSEC, 0);
	CHECK(kube_informer_wait_synced(inf, 30 * NSEC_PER_SEC));
	CHECK(wait_count(&c, &c.resyncs, 6) >= 6); /* every object, at least twice */
	CHECK_INT(get_count(&c, &c.updates), 0);
	kube_informer_free(inf);
	pthread_mutex_destroy(&c.mu);
}

static void test_oversize_event(void)
{
	struct counts c = { 0 };
	struct kube_informer *inf = start(&KUBE_KIND_CSINODE_T, &c, 0, 0, 4096);
	CHECK(kube_informer_wait_synced(inf, 30 * NSEC_PER_SEC));
	struct kube_err e;
	char *big = malloc(8192);
	memset(big, 'x', 8191);
	big[8191] = 0;
	json_t *o = json_pack("{s:s, s:s, s:{s:s, s:{s:s}}, s:{s:[]}}", "apiVersion",
			      "storage.k8s.io/v1", "kind", "CSINode", "metadata", "name", "big",
			      "annotations", "big", big, "spec", "drivers");
	json_decref(kube_create(env.client, &KUBE_RES_CSINODES, NULL, o, &e));
	json_decref(o);
	free(big);
	json_t *small = json_pack("{s:s, s:s, s:{s:s}, s:{s:[]}}", "apiVersion", "storage.k8s.io/v1",
				  "kind", "CSINode", "metadata", "name", "small", "spec", "drivers");
	sleep_ns(500 * NSEC_PER_MSEC);
	/* The oversize event is refused (no crash, not cached): the watch's line buffer stays
	 * bounded. As client-go after an undecodable event, the informer then relists (after a
	 * back-off step, so not yet), and the list, which max_event does not bound, brings it. */
	CHECK(kube_store_get(kube_informer_store(inf), NULL, "big") == NULL);
	json_decref(kube_create(env.client, &KUBE_RES_CSINODES, NULL, small, &e));
	json_decref(small);
	CHECK_INT(wait_count(&c, &c.adds, 2), 2);
	struct kube_informer_stats s;
	kube_informer_stats(inf, &s);
	CHECK_INT(s.lists, 2);
	struct kube_obj *got = kube_store_get(kube_informer_store(inf), NULL, "big");
	CHECK(got != NULL);
	kube_obj_unref(got);
	kube_informer_free(inf);
	pthread_mutex_destroy(&c.mu);
}

/* ---- client-go's reflector rules, as a table ---- */

#define TOO_LARGE_STATUS \
	"{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\"," \
	"\"message\":\"Timeout: Too large resource version: 5107, current: 12\",\"reason\":" \
	"\"Timeout\",\"details\":{\"causes\":[{\"reason\":\"ResourceVersionTooLarge\",\"message\":" \
	"\"Too large resource version\"}],\"retryAfterSeconds\":1},\"code\":504}"

struct step_case {
	const char *name;
	enum kube_informer_at at;
	/* why: NULL (a watch stream that ended), "refused" (no answer), "broke" (a 200 stream that
	 * broke), or a Status (an answer of code http, or with http 0 an ERROR event's object) */
	const char *why;
	int http;
	bool events;
	int lasted_ms;
	enum kube_informer_step want;
	bool too_large; /* kube_err_is_rv_too_large */
};

#define W KUBE_INFORMER_AT_WATCH
#define L KUBE_INFORMER_AT_LIST
#define LC KUBE_INFORMER_AT_LIST_CONTINUE
#define RESUME KUBE_INFORMER_WATCH
#define BACKOFF KUBE_INFORMER_WATCH_BACKOFF
#define RELIST KUBE_INFORMER_RELIST
#define FULL KUBE_INFORMER_FULL_LIST

static const struct step_case step_cases[] = {
	{ "stream ended by the server after events", W, NULL, 0, true, 10, RESUME, false },
	{ "stream ended by the server after 1 s", W, NULL, 0, false, 1000, RESUME, false },
	{ "stream ended at once with nothing (VeryShortWatch)", W, NULL, 0, false, 200, RELIST, false },
	{ "stream broke after events", W, "broke", 0, true, 10, RESUME, false },
	{ "stream broke after 5 s", W, "broke", 0, false, 5000, RESUME, false },
	{ "stream broke at once with nothing", W, "broke", 0, false, 10, RELIST, false },
	{ "connection refused", W, "refused", 0, false, 1, BACKOFF, false },
	{ "429 answer", W, "{\"kind\":\"Status\",\"reason\":\"TooManyRequests\",\"code\":429}", 429,
	  false, 1, BACKOFF, false },
	{ "429 answer without a Status", W, "busy", 429, false, 1, BACKOFF, false },
	{ "429 ERROR event", W, "{\"kind\":\"Status\",\"reason\":\"TooManyRequests\",\"code\":429}", 0,
	  true, 10, BACKOFF, false },
	{ "410 Expired answer", W, "{\"kind\":\"Status\",\"message\":\"too old resource version: 5 "
	  "(10)\",\"reason\":\"Expired\",\"code\":410}", 410, false, 1, RELIST, false },
	{ "410 Expired ERROR event", W, "{\"kind\":\"Status\",\"message\":\"too old resource version: "
	  "5 (10)\",\"reason\":\"Expired\",\"code\":410}", 0, true, 10, RELIST, false },
	{ "410 Gone ERROR event (servers before 1.18)", W, "{\"kind\":\"Status\",\"reason\":\"Gone\","
	  "\"code\":410}", 0, true, 10, RELIST, false },
	{ "504 too large RV answer", W, TOO_LARGE_STATUS, 504, false, 3000, RELIST, true },
	{ "504 too large RV ERROR event", W, TOO_LARGE_STATUS, 0, false, 3000, RELIST, true },
	{ "too large RV by the cause's message (1.17.0-1.18.5)", W, "{\"kind\":\"Status\",\"reason\":"
	  "\"Timeout\",\"message\":\"Timeout: x\",\"details\":{\"causes\":[{\"message\":\"Too large "
	  "resource version\"}]},\"code\":504}", 0, false, 10, RELIST, true },
	{ "too large RV by the message (before 1.17)", W, "{\"kind\":\"Status\",\"reason\":\"Timeout\","
	  "\"message\":\"Too large resource version: 9, current: 3\",\"code\":504}", 0, false, 10,
	  RELIST, true },
	{ "504 Timeout of another kind", W, "{\"kind\":\"Status\",\"reason\":\"Timeout\",\"message\":"
	  "\"Timeout: request did not complete within 60s\",\"code\":504}", 504, false, 1, RELIST,
	  false },
	{ "500 answer", W, "{\"kind\":\"Status\",\"reason\":\"InternalError\",\"code\":500}", 500,
	  false, 1, RELIST, false },
	{ "500 ERROR event", W, "{\"kind\":\"Status\",\"reason\":\"InternalError\",\"code\":500}", 0,
	  true, 10, RELIST, false },
	{ "ERROR event that is not a Status", W, "{\"kind\":\"Pod\"}", 0, true, 10, RELIST, false },
	{ "403 answer", W, "{\"kind\":\"Status\",\"reason\":\"Forbidden\",\"code\":403}", 403, false,
	  1, RELIST, false },
	{ "list: first page fails", L, "refused", 0, false, 0, RELIST, false },
	{ "list: first page 410 Expired", L, "{\"kind\":\"Status\",\"reason\":\"Expired\",\"code\":"
	  "410}", 410, false, 0, RELIST, false },
	{ "list: first page too large RV", L, TOO_LARGE_STATUS, 504, false, 0, RELIST, true },
	{ "list: continue page 410 Expired", LC, "{\"kind\":\"Status\",\"message\":\"The provided "
	  "continue parameter is too old\",\"reason\":\"Expired\",\"code\":410}", 410, false, 0, FULL,
	  false },
	{ "list: continue page 410 without reason Expired", LC, "{\"kind\":\"Status\",\"reason\":"
	  "\"Gone\",\"code\":410}", 410, false, 0, RELIST, false },
	{ "list: continue page 500", LC, "{\"kind\":\"Status\",\"reason\":\"InternalError\",\"code\":"
	  "500}", 500, false, 0, RELIST, false },
	{ "list: continue page not answered", LC, "refused", 0, false, 0, RELIST, false },
};

static void test_next_step_table(void)
{
	for (size_t i = 0; i < sizeof(step_cases) / sizeof(step_cases[0]); i++) {
		const struct step_case *sc = &step_cases[i];
		struct kube_err e = { 0 };
		const struct kube_err *why = &e;
		struct jv_doc doc = { 0 };
		char jerr[64];
		if (!sc->why) {
			why = NULL;
		} else if (!strcmp(sc->why, "refused") || !strcmp(sc->why, "broke")) {
			e.streamed = !strcmp(sc->why, "broke");
			snprintf(e.message, sizeof(e.message), "%s", sc->why);
		} else {
			const jv_t *st = jv_parse(&doc, sc->why, strlen(sc->why), jerr, sizeof(jerr));
			kube_err_from_status(&e, sc->http, st);
		}
		enum kube_informer_step got = kube_informer_next_step(sc->at, why, sc->events,
								      sc->lasted_ms * NSEC_PER_MSEC);
		if (got != sc->want || (why && kube_err_is_rv_too_large(why) != sc->too_large)) {
			fprintf(stderr, "case \"%s\": step %d (want %d), too large %d (want %d)\n",
				sc->name, (int)got, (int)sc->want,
				why ? kube_err_is_rv_too_large(why) : 0, sc->too_large);
			CHECK(false);
		}
		jv_release(&doc);
	}
}

#undef W
#undef L
#undef LC

/* ---- the same rules against kube-emulator's faults ---- */

static void create_named(const struct kube_resource *r, const char *ns, json_t *o)
{
	struct kube_err e;
	json_t *got = kube_create(env.client, r, ns, o, &e);
	if (!got)
		fprintf(stderr, "create: %s\n", e.message);
	json_decref(got);
	json_decref(o);
}

static void create_sc(const char *name)
{
	create_named(&KUBE_RES_STORAGECLASSES, NULL,
		     json_pack("{s:s, s:s, s:{s:s}, s:s}", "apiVersion", "storage.k8s.io/v1",
			       "kind", "StorageClass", "metadata", "name", name, "provisioner",
			       "d.example"));
}

static uint64_t stat_of(struct kube_informer *inf, size_t off)
{
	struct kube_informer_stats s;
	kube_informer_stats(inf, &s);
	return *(uint64_t *)((char *)&s + off);
}

/* Waits until the stat at off passes from; true when it did within 30 s. */
static bool wait_stat_above(struct kube_informer *inf, size_t off, uint64_t from)
{
	int64_t deadline = mono_now_ns() + 30 * NSEC_PER_SEC;
	while (stat_of(inf, off) <= from && mono_now_ns() < deadline)
		sleep_ns(10 * NSEC_PER_MSEC);
	return stat_of(inf, off) > from;
}

struct fault_case {
	const char *name;
	const char *rule; /* fields of one fault rule on watches of storageclasses; NULL: none */
	int lists, backoffs; /* what the informer did about it: relists, back-off waits */
};

static const struct fault_case fault_cases[] = {
	{ "stream closed by the server: watch again at once", NULL, 0, 0 },
	{ "429 answer: back off, watch again", "\"code\":429,\"retryAfterSeconds\":0", 0, 1 },
	{ "429 ERROR event: back off, watch again", "\"code\":429,\"retryAfterSeconds\":0,"
	  "\"asEvent\":true", 0, 1 },
	{ "500 answer: back off, relist", "\"code\":500", 1, 1 },
	{ "500 ERROR event: back off, relist", "\"code\":500,\"asEvent\":true", 1, 1 },
	{ "410 Expired answer: back off, relist", "\"code\":410", 1, 1 },
	{ "410 Expired ERROR event: back off, relist", "\"code\":410,\"asEvent\":true", 1, 1 },
	{ "504 too large RV answer: back off, relist", "\"code\":504,\"retryAfterSeconds\":0", 1, 1 },
	{ "504 too large RV ERROR event: back off, relist", "\"code\":504,\"retryAfterSeconds\":0,"
	  "\"asEvent\":true", 1, 1 },
	{ "504 with Retry-After: the client asks again itself", "\"code\":504,"
	  "\"retryAfterSeconds\":1", 0, 0 },
};

static void test_watch_faults_table(void)
{
	struct counts c = { 0 };
	struct kube_informer *inf = start(&KUBE_KIND_STORAGECLASS, &c, 0, 0, 0);
	CHECK(kube_informer_wait_synced(inf, 30 * NSEC_PER_SEC));
	for (size_t i = 0; i < sizeof(fault_cases) / sizeof(fault_cases[0]); i++) {
		const struct fault_case *fc = &fault_cases[i];
		char name[32], body[512];
		/* An event through the watch: it is live, and the back-off has started over. */
		uint64_t events = stat_of(inf, offsetof(struct kube_informer_stats, events));
		int adds = get_count(&c, &c.adds);
		snprintf(name, sizeof(name), "sc-%zu-a", i);
		create_sc(name);
		CHECK(wait_stat_above(inf, offsetof(struct kube_informer_stats, events), events));
		CHECK_INT(wait_count(&c, &c.adds, adds + 1), adds + 1);
		struct kube_informer_stats s0, s1;
		kube_informer_stats(inf, &s0);
		/* The watch is closed; the next one meets the fault. */
		snprintf(body, sizeof(body), "{\"reset\":true,\"closeWatches\":true%s%s%s}",
			 fc->rule ? ",\"rules\":[{\"verb\":\"watch\",\"resource\":\"storageclasses\","
				    "\"times\":1," : "", fc->rule ? fc->rule : "", fc->rule ? "}]" : "");
		CHECK_INT(kube_testenv_faults(&env, body), 0);
		/* Known once the next object arrives, by a watch or a list. */
		snprintf(name, sizeof(name), "sc-%zu-b", i);
		create_sc(name);
		CHECK_INT(wait_count(&c, &c.adds, adds + 2), adds + 2);
		kube_informer_stats(inf, &s1);
		if ((int)(s1.lists - s0.lists) != fc->lists ||
		    (int)(s1.backoffs - s0.backoffs) != fc->backoffs) {
			fprintf(stderr, "case \"%s\": lists +%d (want %d), backoffs +%d (want %d)\n",
				fc->name, (int)(s1.lists - s0.lists), fc->lists,
				(int)(s1.backoffs - s0.backoffs), fc->backoffs);
			CHECK(false);
		}
	}
	CHECK_INT(get_count(&c, &c.deletes), 0);
	kube_testenv_faults(&env, "{\"reset\":true}");
	kube_informer_free(inf);
	pthread_mutex_destroy(&c.mu);
}

/* ---- a continue token that expires between pages ---- */

/* The injected count of the first fault rule (-1: unknown). */
static long fault_injected(void)
{
	struct kube_request rq = { .method = "GET", .path = "/emulator/faults" };
	struct strbuf out = STRBUF_INIT;
	struct kube_err e;
	long n = -1;
	if (kube_do(env.client, &rq, &out, &e) >= 0) {
		json_t *j = json_loadb(out.buf, out.len, 0, NULL);
		json_t *r = json_array_get(json_object_get(j, "rules"), 0);
		if (r)
			n = (long)json_integer_value(json_object_get(r, "injected"));
		json_decref(j);
	}
	strbuf_release(&out);
	return n;
}

static bool wait_injected(long want)
{
	int64_t deadline = mono_now_ns() + 30 * NSEC_PER_SEC;
	while (fault_injected() < want && mono_now_ns() < deadline)
		sleep_ns(10 * NSEC_PER_MSEC);
	return fault_injected() >= want;
}

static void test_continue_expired(void)
{
	char name[32];
	for (int i = 0; i < 25; i++) {
		snprintf(name, sizeof(name), "cd-%02d.example", i);
		create_named(&KUBE_RES_CSIDRIVERS, NULL,
			     json_pack("{s:s, s:s, s:{s:s}, s:{}}", "apiVersion", "storage.k8s.io/v1",
				       "kind", "CSIDriver", "metadata", "name", name, "spec"));
	}
	/* Both pages of the paginated list are held until released. */
	CHECK_INT(kube_testenv_faults(&env, "{\"reset\":true,\"rules\":[{\"verb\":\"list\","
				      "\"resource\":\"csidrivers\",\"latencyMs\":30000,\"times\":2}]}"), 0);
	struct counts c = { 0 };
	struct kube_informer *inf = start(&KUBE_KIND_CSIDRIVER_T, &c, 10, 0, 0);
	CHECK(wait_injected(1));
	CHECK_INT(kube_testenv_faults(&env, "{\"release\":true}"), 0);
	CHECK(wait_injected(2));
	/* While the second page is held, more writes than the 30-event history: its continue
	 * token's snapshot is gone (410 Expired), as one etcd compacted. */
	struct kube_err e;
	for (int i = 0; i < 40; i++) {
		char patch[96];
		snprintf(patch, sizeof(patch), "{\"metadata\":{\"labels\":{\"n\":\"%d\"}}}", i);
		json_decref(kube_patch(env.client, &KUBE_RES_CSIDRIVERS, NULL, "cd-00.example", false,
				       KUBE_PATCH_MERGE, patch, &e));
	}
	CHECK_INT(kube_testenv_faults(&env, "{\"release\":true}"), 0);
	CHECK(kube_informer_wait_synced(inf, 30 * NSEC_PER_SEC));
	/* As client-go's pager: one full list at once, no back-off, no third paginated try. */
	struct kube_informer_stats s;
	kube_informer_stats(inf, &s);
	CHECK_INT(s.pages, 3);
	CHECK_INT(s.lists, 1);
	CHECK_INT(s.backoffs, 0);
	CHECK_INT(kube_store_len(kube_informer_store(inf)), 25);
	CHECK_INT(get_count(&c, &c.adds), 25);
	kube_testenv_faults(&env, "{\"reset\":true}");
	kube_informer_free(inf);
	pthread_mutex_destroy(&c.mu);
}

/* ---- the store went back in time ---- */

static const char *const emulator_args[] = { "--watch-history", "30", "--bookmark-interval", "1s",
					     NULL };

static json_t *pvc(const char *name)
{
	return json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:[s], s:{s:{s:s}}}}", "apiVersion", "v1",
			 "kind", "PersistentVolumeClaim", "metadata", "name", name, "namespace",
			 "default", "spec", "accessModes", "ReadWriteOnce", "resources", "requests",
			 "storage", "1Gi");
}

static bool deleted_name(struct counts *c, const char *name)
{
	bool found = false;
	pthread_mutex_lock(&c->mu);
	for (int i = 0; i < c->deletes && i < 16; i++)
		found = found || !strcmp(c->deleted[i], name);
	pthread_mutex_unlock(&c->mu);
	return found;
}

static void test_store_went_back(void)
{
	struct counts c = { 0 };
	struct kube_informer *inf = start(&KUBE_KIND_PERSISTENTVOLUMECLAIM, &c, 0, 0, 0);
	CHECK(kube_informer_wait_synced(inf, 30 * NSEC_PER_SEC));
	create_named(&KUBE_RES_PERSISTENTVOLUMECLAIMS, "default", pvc("keep"));
	create_named(&KUBE_RES_PERSISTENTVOLUMECLAIMS, "default", pvc("gone-1"));
	create_named(&KUBE_RES_PERSISTENTVOLUMECLAIMS, "default", pvc("gone-2"));
	CHECK_INT(wait_count(&c, &c.adds, 3), 3);
	char old_uid[64] = "", uid[64];
	struct kube_obj *o = kube_store_get(kube_informer_store(inf), "default", "keep");
	if (o)
		kube_obj_uid(o, old_uid, sizeof(old_uid));
	kube_obj_unref(o);

	/* kube-emulator crashes and comes back on its port with an empty store: every
	 * resourceVersion the informer knows is past the new store's. */
	CHECK_INT(kube_testenv_restart(&env, KCSI_EMULATOR_BIN, emulator_args, SIGKILL,
				       300 * NSEC_PER_MSEC), 0);
	create_named(&KUBE_RES_PERSISTENTVOLUMECLAIMS, "default", pvc("keep"));
	create_named(&KUBE_RES_PERSISTENTVOLUMECLAIMS, "default", pvc("new"));

	/* The watch is told "Too large resource version"; the relist delivers what changed. */
	CHECK_INT(wait_count(&c, &c.deletes, 2), 2);
	CHECK(deleted_name(&c, "gone-1"));
	CHECK(deleted_name(&c, "gone-2"));
	CHECK_INT(wait_count(&c, &c.adds, 4), 4);
	CHECK(wait_count(&c, &c.updates, 1) >= 1); /* keep: another object of that name */
	CHECK_INT(kube_store_len(kube_informer_store(inf)), 2);
	o = kube_store_get(kube_informer_store(inf), "default", "keep");
	CHECK(o && strcmp(kube_obj_uid(o, uid, sizeof(uid)), old_uid) != 0);
	kube_obj_unref(o);
	struct kube_informer_stats s;
	kube_informer_stats(inf, &s);
	CHECK_INT(s.lists, 2);
	CHECK(s.backoffs >= 1);

	/* and it watches the new store from there */
	create_named(&KUBE_RES_PERSISTENTVOLUMECLAIMS, "default", pvc("after"));
	CHECK_INT(wait_count(&c, &c.adds, 5), 5);
	kube_informer_free(inf);
	pthread_mutex_destroy(&c.mu);
}

int main(void)
{
	int rc = kube_testenv_start(&env, KCSI_EMULATOR_BIN, emulator_args);
	if (rc)
		return rc == KUBE_TESTENV_SKIP ? rc : 1;
	RUN(test_next_step_table);
	RUN(test_paginated_list);
	RUN(test_watch_resume_and_relist);
	RUN(test_resync);
	RUN(test_oversize_event);
	RUN(test_watch_faults_table);
	RUN(test_continue_expired);
	RUN(test_store_went_back); /* last: it empties the emulator */
	kube_testenv_stop(&env);
	return CHECK_DONE();
}
