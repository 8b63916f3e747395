/*
 * Unit tests for emu_store: the global resourceVersion, key order, the event ring and its
 * history_start (what decides 410 Expired), and the state file: round trip, its log (a kill
 * loses no commit, the resourceVersion resumes, a torn last line is dropped) and its lock;
 * --runtime-config: what stops being served, and what is refused.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/flags.h"
#include "check.h"
#include "emulator/emu_state.h"
#include "emulator/emu_store.h"

static json_t *obj(const char *kind, const char *name, const char *ns)
{
	json_t *o = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "v1", "kind", kind, "metadata",
			      "name", name);
	if (ns)
		json_object_set_new(json_object_get(o, "metadata"), "namespace", json_string(ns));
	return o;
}

static const char *rv_of(const json_t *o)
{
	return json_string_value(json_object_get(json_object_get(o, "metadata"), "resourceVersion"));
}

static void test_commit_and_order(void)
{
	struct emu_store st;
	emu_store_init(&st, 100);
	int pv = emu_store_resource(&st, "", "v1", "persistentvolumes");
	int cm = emu_store_resource(&st, "", "v1", "configmaps");
	CHECK(pv >= 0 && cm >= 0);
	CHECK_INT(emu_store_resource(&st, "", "v1", "nope"), -1);
	CHECK_INT(emu_store_resource_by_kind(&st, "storage.k8s.io/v1", "VolumeAttachment"),
		  emu_store_resource(&st, "storage.k8s.io", "v1", "volumeattachments"));
	emu_store_commit(&st, pv, "b", obj("PersistentVolume", "b", NULL), EMU_ADDED);
	emu_store_commit(&st, pv, "a", obj("PersistentVolume", "a", NULL), EMU_ADDED);
	const struct emu_event *ev = emu_store_commit(&st, cm, "ns1/c",
						      obj("ConfigMap", "c", "ns1"), EMU_ADDED);
	CHECK_INT(ev->rv, 3);
	CHECK_STR(rv_of(ev->obj), "3");
	CHECK(strstr(ev->text, "\"resourceVersion\":\"3\"") != NULL);
	CHECK_STR(st.res[pv].items[0].key, "a"); /* sorted, whatever the insertion order */
	CHECK_STR(st.res[pv].items[1].key, "b");
	CHECK_INT(emu_store_lower_bound(&st.res[pv], "az"), 1);
	ev = emu_store_commit(&st, pv, "a", obj("PersistentVolume", "a", NULL), EMU_MODIFIED);
	CHECK(ev->prev != NULL);
	CHECK_STR(rv_of(ev->prev), "2");
	CHECK_STR(rv_of(emu_store_get(&st, pv, "a")), "4");
	emu_store_commit(&st, pv, "a", obj("PersistentVolume", "a", NULL), EMU_DELETED);
	CHECK(emu_store_get(&st, pv, "a") == NULL);
	CHECK_INT(st.res[pv].n, 1);
	CHECK_INT(st.rv, 5);
	emu_store_free(&st);
}

static void test_history_ring(void)
{
	struct emu_store st;
	emu_store_init(&st, 3);
	int pv = emu_store_resource(&st, "", "v1", "persistentvolumes");
	for (int i = 0; i < 5; i++)
		emu_store_commit(&st, pv, "x", obj("PersistentVolume", "x", NULL),
				 i ? EMU_MODIFIED : EMU_ADDED);
	/* events 3, 4, 5 are kept; a watch may resume from rv 2 (it needs 3..5), not from 1 */
	CHECK_INT(st.history_start, 2);
	CHECK(emu_store_event(&st, 2) == NULL);
	CHECK(emu_store_event(&st, 3) != NULL);
	CHECK_INT(emu_store_event(&st, 5)->rv, 5);
	CHECK(emu_store_event(&st, 6) == NULL);
	emu_store_free(&st);
}

static void test_state_file(void)
{
	char dir[] = "/tmp/test-emu-store.XXXXXX", path[256], err[512];
	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/state.json", dir);
	struct emu_store st;
	emu_store_init(&st, 10);
	CHECK_INT(emu_state_open(&st, path, err, sizeof(err)), 0); /* missing file: empty start */
	CHECK_INT(st.rv, 0);
	int cm = emu_store_resource(&st, "", "v1", "configmaps");
	emu_store_commit(&st, cm, "ns1/c", obj("ConfigMap", "c", "ns1"), EMU_ADDED);
	emu_store_commit(&st, cm, "ns1/d", obj("ConfigMap", "d", "ns1"), EMU_ADDED);
	CHECK_INT(emu_state_save(&st, err, sizeof(err)), 0);
	CHECK_INT(st.log_bytes, 0); /* the save folded the log */
	emu_store_free(&st);

	emu_store_init(&st, 10);
	CHECK_INT(emu_state_open(&st, path, err, sizeof(err)), 0);
	CHECK_INT(st.rv, 2);
	CHECK_INT(st.history_start, 2); /* nothing before the restart can be resumed */
	CHECK(emu_store_get(&st, cm, "ns1/d") != NULL);
	emu_store_free(&st);

	FILE *f = fopen(path, "w");
	fputs("{\"resourceVersion\":1,\"objects\":[{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\","
	      "\"metadata\":{\"name\":\"no-namespace\"}}]}", f);
	fclose(f);
	emu_store_init(&st, 10);
	CHECK_INT(emu_state_open(&st, path, err, sizeof(err)), -1);
	CHECK(strstr(err, "no-namespace") != NULL);
	emu_store_free(&st);

	char rm[600];
	snprintf(rm, sizeof(rm), "rm -rf %s", dir);
	CHECK_INT(system(rm), 0);
}

static long file_size(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fclose(f);
	return n;
}

static void append_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "a");
	fputs(text, f);
	fclose(f);
}

/*
 * The log: an emulator that dies without saving (emu_store_free without emu_state_save, as after
 * kill -9) loses no commit; the next one resumes the resourceVersion counter above the last one
 * handed out; a last line cut short is dropped, a bad line before the last is an error.
 */
static void test_state_log(void)
{
	char dir[] = "/tmp/test-emu-store.XXXXXX", path[256], log[300], err[512];
	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/state.json", dir);
	snprintf(log, sizeof(log), "%s.log", path);
	struct emu_store st;
	emu_store_init(&st, 10);
	CHECK_INT(emu_state_open(&st, path, err, sizeof(err)), 0);
	int cm = emu_store_resource(&st, "", "v1", "configmaps");
	int pv = emu_store_resource(&st, "", "v1", "persistentvolumes");
	emu_store_commit(&st, cm, "ns1/c", obj("ConfigMap", "c", "ns1"), EMU_ADDED);
	emu_store_commit(&st, pv, "p", obj("PersistentVolume", "p", NULL), EMU_ADDED);
	emu_store_commit(&st, pv, "gone", obj("PersistentVolume", "gone", NULL), EMU_ADDED);
	json_t *c2 = obj("ConfigMap", "c", "ns1");
	json_object_set_new(c2, "data", json_pack("{s:s}", "k", "v2"));
	emu_store_commit(&st, cm, "ns1/c", c2, EMU_MODIFIED);
	emu_store_commit(&st, pv, "gone", obj("PersistentVolume", "gone", NULL), EMU_DELETED);
	CHECK(file_size(log) > 0);
	CHECK(file_size(path) < 0); /* nothing saved: only the log has them */
	emu_store_free(&st);        /* "killed": no save */

	emu_store_init(&st, 10);
	CHECK_INT(emu_state_open(&st, path, err, sizeof(err)), 0);
	CHECK_INT(st.rv, 5);
	CHECK_INT(st.history_start, 5);
	CHECK(emu_store_get(&st, pv, "p") != NULL);
	CHECK(emu_store_get(&st, pv, "gone") == NULL);
	json_t *c = emu_store_get(&st, cm, "ns1/c");
	CHECK_STR(json_string_value(json_object_get(json_object_get(c, "data"), "k")), "v2");
	CHECK_STR(rv_of(c), "4");
	CHECK_INT(file_size(log), 0);   /* folded into the state file at start */
	CHECK(file_size(path) > 0);
	const struct emu_event *ev = emu_store_commit(&st, pv, "q", obj("PersistentVolume", "q", NULL),
						      EMU_ADDED);
	CHECK_INT(ev->rv, 6); /* never back in time */
	emu_store_free(&st);

	/* A last line cut short (the writer died inside write()) is dropped. */
	append_text(log, "{\"rv\":7,\"type\":\"ADDED\",\"resource\":\"v1/persistentvolumes\",\"key\":\"r\","
			 "\"object\":{\"apiVersion\":\"v1\",\"kind\":\"Persis");
	emu_store_init(&st, 10);
	CHECK_INT(emu_state_open(&st, path, err, sizeof(err)), 0);
	CHECK_INT(st.rv, 6);
	CHECK(emu_store_get(&st, pv, "q") != NULL);
	CHECK(emu_store_get(&st, pv, "r") == NULL);
	CHECK_INT(file_size(log), 0);
	emu_store_free(&st);

	/* A bad line with good ones after it is damage, not a torn tail: refused, named. */
	append_text(log, "garbage\n{\"rv\":7,\"type\":\"ADDED\",\"resource\":\"v1/persistentvolumes\","
			 "\"key\":\"r\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"PersistentVolume\","
			 "\"metadata\":{\"name\":\"r\",\"resourceVersion\":\"7\"}}}\n");
	emu_store_init(&st, 10);
	CHECK_INT(emu_state_open(&st, path, err, sizeof(err)), -1);
	CHECK(strstr(err, "line 1") != NULL && strstr(err, log) != NULL);
	emu_store_free(&st);
	CHECK_INT(truncate(log, 0), 0);

	/* Lines the snapshot already holds (a crash between its rename and the log's truncation)
	 * are skipped. */
	append_text(log, "{\"rv\":2,\"type\":\"DELETED\",\"resource\":\"v1/persistentvolumes\","
			 "\"key\":\"p\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"PersistentVolume\","
			 "\"metadata\":{\"name\":\"p\"}}}\n");
	emu_store_init(&st, 10);
	CHECK_INT(emu_state_open(&st, path, err, sizeof(err)), 0);
	CHECK(emu_store_get(&st, pv, "p") != NULL);
	CHECK_INT(st.rv, 6);
	emu_store_free(&st);

	char rm[600];
	snprintf(rm, sizeof(rm), "rm -rf %s", dir);
	CHECK_INT(system(rm), 0);
}

/* Two emulators never share a state file: the second is refused, naming the first's PID. */
static void test_state_lock(void)
{
	char dir[] = "/tmp/test-emu-store.XXXXXX", path[256], err[512], want[64];
	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/state.json", dir);
	struct emu_store a, b;
	emu_store_init(&a, 10);
	emu_store_init(&b, 10);
	CHECK_INT(emu_state_open(&a, path, err, sizeof(err)), 0);
	CHECK_INT(emu_state_open(&b, path, err, sizeof(err)), -1);
	snprintf(want, sizeof(want), "pid %d", (int)getpid());
	CHECK(strstr(err, "in use by another kube-emulator") != NULL && strstr(err, want) != NULL);
	CHECK(strstr(err, path) != NULL);
	emu_store_free(&b);
	emu_store_free(&a); /* the lock ends with its holder */
	emu_store_init(&b, 10);
	CHECK_INT(emu_state_open(&b, path, err, sizeof(err)), 0);
	emu_store_free(&b);
	char rm[600];
	snprintf(rm, sizeof(rm), "rm -rf %s", dir);
	CHECK_INT(system(rm), 0);
}

/* --runtime-config as a table: the entries, then what is served at the end (or the error). */
static void test_runtime_config(void)
{
	static const struct {
		const char *what;
		struct flag_kv kv[2];
		size_t n;
		const char *err; /* substring of the refusal; NULL: accepted */
		bool vac, sc, vgs_v1, vgs_v1beta2, leases;
	} t[] = {
		{ "nothing given: all served", { { 0 } }, 0, NULL, true, true, true, true, true },
		{ "one resource off: VolumeAttributesClass only",
		  { { "storage.k8s.io/v1/volumeattributesclasses", "false" } }, 1, NULL,
		  false, true, true, true, true },
		{ "=true (Go's bool spellings) changes nothing",
		  { { "storage.k8s.io/v1/volumeattributesclasses", "T" } }, 1, NULL,
		  true, true, true, true, true },
		{ "a whole group version off",
		  { { "coordination.k8s.io/v1", "0" } }, 1, NULL, true, true, true, true, false },
		{ "v1 of a kind also served at v1beta2: v1 goes, v1beta2 stays",
		  { { "groupsnapshot.storage.k8s.io/v1", "false" } }, 1, NULL,
		  true, true, false, true, true },
		{ "its storage version cannot go while v1 is served",
		  { { "groupsnapshot.storage.k8s.io/v1beta2/volumegroupsnapshots", "false" } }, 1,
		  "cannot stop serving", true, true, true, true, true },
		{ "both, v1 first: the storage version may go then",
		  { { "groupsnapshot.storage.k8s.io/v1", "false" },
		    { "groupsnapshot.storage.k8s.io/v1beta2", "false" } }, 2, NULL,
		  true, true, false, false, true },
		{ "a misspelt resource", { { "storage.k8s.io/v1/volumeattributeclasses", "false" } }, 1,
		  "serves no such resource", true, true, true, true, true },
		{ "an unknown group version", { { "storage.k8s.io/v2", "false" } }, 1,
		  "serves no such group version", true, true, true, true, true },
		{ "the core group", { { "api/v1", "false" } }, 1, "named group", true, true, true, true, true },
		{ "api/all", { { "api/all", "false" } }, 1, "named group", true, true, true, true, true },
		{ "too many parts", { { "storage.k8s.io/v1/storageclasses/x", "false" } }, 1,
		  "named group", true, true, true, true, true },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct emu_store st;
		struct flag_map m = { (struct flag_kv *)t[i].kv, t[i].n };
		char err[300] = "";
		emu_store_init(&st, 10);
		int rc = emu_store_runtime_config(&st, &m, err, sizeof(err));
		if (t[i].err) {
			if (rc != -1 || !strstr(err, t[i].err))
				fprintf(stderr, "runtime-config: %s: rc %d, %s\n", t[i].what, rc, err);
			CHECK(rc == -1 && strstr(err, t[i].err));
			emu_store_free(&st);
			continue;
		}
		bool vac = emu_store_resource(&st, "storage.k8s.io", "v1", "volumeattributesclasses") >= 0;
		bool sc = emu_store_resource(&st, "storage.k8s.io", "v1", "storageclasses") >= 0;
		bool v1 = emu_store_resource(&st, "groupsnapshot.storage.k8s.io", "v1",
					     "volumegroupsnapshots") >= 0;
		bool v1b2 = emu_store_resource(&st, "groupsnapshot.storage.k8s.io", "v1beta2",
					       "volumegroupsnapshots") >= 0;
		bool leases = emu_store_resource(&st, "coordination.k8s.io", "v1", "leases") >= 0;
		if (rc || vac != t[i].vac || sc != t[i].sc || v1 != t[i].vgs_v1 ||
		    v1b2 != t[i].vgs_v1beta2 || leases != t[i].leases)
			fprintf(stderr, "runtime-config: %s (%s)\n", t[i].what, err);
		CHECK_INT(rc, 0);
		CHECK(vac == t[i].vac && sc == t[i].sc && v1 == t[i].vgs_v1 &&
		      v1b2 == t[i].vgs_v1beta2 && leases == t[i].leases);
		/* what is left is still found by kind, and namespaces always */
		CHECK(emu_store_resource(&st, "", "v1", "namespaces") >= 0);
		emu_store_free(&st);
	}
}

int main(void)
{
	RUN(test_commit_and_order);
	RUN(test_history_ring);
	RUN(test_state_file);
	RUN(test_state_log);
	RUN(test_state_lock);
	RUN(test_runtime_config);
	return CHECK_DONE();
}
