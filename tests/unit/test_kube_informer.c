/*
 * Informers against a real kube-emulator: paginated list of 5,000 objects, watch resume after
 * the emulator drops every watch, relist after 410 Gone with deletes delivered, bookmarks,
 * resync, and an oversize watch event.
 */
#include <pthread.h>
#include <stdlib.h>

#include "base/timeutil.h"
#include "check.h"
#include "kube/informer.h"
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
	/* The oversize event is refused (no crash, not cached); the informer stays alive. */
	CHECK(kube_store_get(kube_informer_store(inf), NULL, "big") == NULL);
	json_decref(kube_create(env.client, &KUBE_RES_CSINODES, NULL, small, &e));
	json_decref(small);
	kube_informer_free(inf);
	pthread_mutex_destroy(&c.mu);
}

int main(void)
{
	const char *args[] = { "--watch-history", "30", "--bookmark-interval", "1s", NULL };
	int rc = kube_testenv_start(&env, KCSI_EMULATOR_BIN, args);
	if (rc)
		return rc == KUBE_TESTENV_SKIP ? rc : 1;
	RUN(test_paginated_list);
	RUN(test_watch_resume_and_relist);
	RUN(test_resync);
	RUN(test_oversize_event);
	kube_testenv_stop(&env);
	return CHECK_DONE();
}
