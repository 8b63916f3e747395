/*
 * Unit tests for emu_store: the global resourceVersion, key order, the event ring and its
 * history_start (what decides 410 Expired), and the state file round trip.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
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
	int cm = emu_store_resource(&st, "", "v1", "configmaps");
	emu_store_commit(&st, cm, "ns1/c", obj("ConfigMap", "c", "ns1"), EMU_ADDED);
	emu_store_commit(&st, cm, "ns1/d", obj("ConfigMap", "d", "ns1"), EMU_ADDED);
	CHECK_INT(emu_store_save(&st, path, err, sizeof(err)), 0);
	emu_store_free(&st);

	emu_store_init(&st, 10);
	CHECK_INT(emu_store_load(&st, path, err, sizeof(err)), 0);
	CHECK_INT(st.rv, 2);
	CHECK_INT(st.history_start, 2); /* nothing before the restart can be resumed */
	CHECK(emu_store_get(&st, cm, "ns1/d") != NULL);
	emu_store_free(&st);

	FILE *f = fopen(path, "w");
	fputs("{\"resourceVersion\":1,\"objects\":[{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\","
	      "\"metadata\":{\"name\":\"no-namespace\"}}]}", f);
	fclose(f);
	emu_store_init(&st, 10);
	CHECK_INT(emu_store_load(&st, path, err, sizeof(err)), -1);
	CHECK(strstr(err, "no-namespace") != NULL);
	emu_store_free(&st);

	unlink(path);
	emu_store_init(&st, 10);
	CHECK_INT(emu_store_load(&st, path, err, sizeof(err)), 0); /* missing file: empty start */
	CHECK_INT(st.rv, 0);
	emu_store_free(&st);
	rmdir(dir);
}

int main(void)
{
	RUN(test_commit_and_order);
	RUN(test_history_ring);
	RUN(test_state_file);
	return CHECK_DONE();
}
