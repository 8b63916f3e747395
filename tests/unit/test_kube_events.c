/*
 * Events against a real kube-emulator: a repeated event becomes one Event with a count, a
 * different message is a new Event, and the per-object spam filter stops an error loop; the queue
 * and the spam filter stay bounded, and freeing a recorder in front of a slow API server is quick.
 */
#include <stdlib.h>

#include "base/timeutil.h"
#include "check.h"
#include "kube/events.h"
#include "kube/testing/testenv.h"

static struct kube_testenv env;

/* Returns the Events about an object name, as a new list reference. */
static json_t *events_for(const char *name)
{
	struct kube_err e;
	json_t *list = kube_list(env.client, &KUBE_RES_EVENTS, "default", NULL, &e);
	json_t *out = json_array();
	size_t i;
	json_t *it;
	json_array_foreach(json_object_get(list, "items"), i, it) {
		const char *n = json_string_value(
			json_object_get(json_object_get(it, "involvedObject"), "name"));
		if (n && !strcmp(n, name))
			json_array_append(out, it);
	}
	json_decref(list);
	return out;
}

static void test_aggregation(void)
{
	struct kube_recorder_opts o = { .component = "csi-attacher", .host = "node-1" };
	struct kube_recorder *r = kube_recorder_new(env.client, &o);
	struct kube_objref ref = { .kind = "VolumeAttachment", .api_version = "storage.k8s.io/v1",
				   .name = "va-ev", .uid = "3f1e2d4c-5b6a-4789-8abc-def012345678" };
	for (int i = 0; i < 3; i++)
		kube_event(r, &ref, KUBE_EVENT_WARNING, "AttachFailed", "Attach failed: %s", "timeout");
	kube_event(r, &ref, KUBE_EVENT_NORMAL, "Attached", "Attached volume");
	kube_recorder_flush(r);
	struct kube_recorder_stats s;
	kube_recorder_stats(r, &s);
	CHECK_INT(s.created, 2);
	CHECK_INT(s.patched, 2);
	json_t *evs = events_for("va-ev");
	CHECK_INT(json_array_size(evs), 2);
	size_t i;
	json_t *ev;
	json_array_foreach(evs, i, ev) {
		const char *reason = json_string_value(json_object_get(ev, "reason"));
		json_int_t count = json_integer_value(json_object_get(ev, "count"));
		if (reason && !strcmp(reason, "AttachFailed")) {
			CHECK_INT(count, 3);
			CHECK_STR(json_string_value(json_object_get(ev, "type")), "Warning");
			CHECK_STR(json_string_value(json_object_get(ev, "message")), "Attach failed: timeout");
			CHECK_STR(json_string_value(json_object_get(json_object_get(ev, "source"), "component")),
				  "csi-attacher");
			CHECK_STR(json_string_value(json_object_get(json_object_get(ev, "involvedObject"), "uid")),
				  "3f1e2d4c-5b6a-4789-8abc-def012345678");
		} else {
			CHECK_INT(count, 1);
		}
	}
	json_decref(evs);
	kube_recorder_free(r);
}

static void test_spam_filter(void)
{
	struct kube_recorder_opts o = { .component = "csi-attacher", .spam_burst = 5 };
	struct kube_recorder *r = kube_recorder_new(env.client, &o);
	struct kube_objref ref = { .kind = "PersistentVolume", .api_version = "v1", .name = "pv-spam" };
	struct kube_objref other = { .kind = "PersistentVolume", .api_version = "v1", .name = "pv-quiet" };
	for (int i = 0; i < 20; i++)
		kube_event(r, &ref, KUBE_EVENT_WARNING, "Failed", "error number %d", i);
	kube_event(r, &other, KUBE_EVENT_NORMAL, "Ok", "fine");
	kube_recorder_flush(r);
	struct kube_recorder_stats s;
	kube_recorder_stats(r, &s);
	CHECK_INT(s.dropped, 15);
	CHECK_INT(s.created, 6); /* 5 for the noisy object, 1 for the other: its own bucket */
	json_t *evs = events_for("pv-spam");
	CHECK_INT(json_array_size(evs), 5);
	json_decref(evs);
	kube_recorder_free(r);
}

static void test_similar_combined(void)
{
	struct kube_recorder_opts o = { .component = "csi-attacher", .spam_burst = 100 };
	struct kube_recorder *r = kube_recorder_new(env.client, &o);
	struct kube_objref ref = { .kind = "VolumeAttachment", .api_version = "storage.k8s.io/v1",
				   .name = "va-similar" };
	for (int i = 0; i < 15; i++)
		kube_event(r, &ref, KUBE_EVENT_WARNING, "AttachFailed", "rpc error %d", i);
	kube_recorder_flush(r);
	struct kube_recorder_stats s;
	kube_recorder_stats(r, &s);
	CHECK_INT(s.created, 11); /* ten distinct messages, then one combined Event */
	CHECK_INT(s.patched, 4);
	json_t *evs = events_for("va-similar");
	CHECK_INT(json_array_size(evs), 11);
	int combined = 0;
	size_t i;
	json_t *ev;
	json_array_foreach(evs, i, ev) {
		const char *m = json_string_value(json_object_get(ev, "message"));
		if (m && !strncmp(m, "(combined from similar events): ", 32)) {
			combined++;
			CHECK_STR(m, "(combined from similar events): rpc error 14");
			CHECK_INT(json_integer_value(json_object_get(ev, "count")), 5);
		}
	}
	CHECK_INT(combined, 1);
	json_decref(evs);
	kube_recorder_free(r);
}

/* 5,000 objects with one event each: all sent, the spam filter never holds more than 4,096. */
static void test_spam_filter_bounded(void)
{
	struct kube_recorder_opts o = { .component = "csi-provisioner" };
	struct kube_recorder *r = kube_recorder_new(env.client, &o);
	char name[64];
	struct kube_recorder_stats s;
	uint64_t tracked_max = 0;
	for (int i = 0; i < 5000; i++) {
		snprintf(name, sizeof(name), "pvc-bound-%d", i);
		struct kube_objref ref = { .kind = "PersistentVolumeClaim", .api_version = "v1",
					   .ns = "default", .name = name };
		kube_event(r, &ref, KUBE_EVENT_NORMAL, "Provisioning", "provisioning %s", name);
		if (i % 500 == 499) {
			kube_recorder_flush(r); /* stay under the queue bound */
			kube_recorder_stats(r, &s);
			if (s.tracked > tracked_max)
				tracked_max = s.tracked;
		}
	}
	kube_recorder_flush(r);
	kube_recorder_stats(r, &s);
	CHECK_INT(s.created, 5000);
	CHECK_INT(s.dropped, 0);
	CHECK(tracked_max <= 4096);
	CHECK(tracked_max >= 4000);
	kube_recorder_free(r);
}

/*
 * One process, two upstream controllers (kcsi-controller-manager): the same event about the same
 * pod from two views is two Events, each naming its own component as source and reporting
 * component, each aggregated on its own; a view's spam bucket is not the other's.
 */
static const char *event_component(json_t *evs, const char *component, json_int_t *count)
{
	size_t i;
	json_t *ev;
	json_array_foreach(evs, i, ev) {
		const char *c = json_string_value(json_object_get(json_object_get(ev, "source"),
								  "component"));
		if (c && !strcmp(c, component)) {
			*count = json_integer_value(json_object_get(ev, "count"));
			return json_string_value(json_object_get(ev, "reportingComponent"));
		}
	}
	return NULL;
}

static void test_views(void)
{
	struct kube_recorder_opts o = { .component = "kcsi-controller-manager", .spam_burst = 3 };
	struct kube_recorder *r = kube_recorder_new(env.client, &o);
	struct kube_recorder *ad = kube_recorder_as(r, "attachdetach-controller");
	struct kube_recorder *nl = kube_recorder_as(r, "node-controller");
	struct kube_objref ref = { .kind = "Pod", .api_version = "v1", .ns = "default",
				   .name = "pod-views", .uid = "0d6e3a52-0c4e-4b59-9a51-5b8e3f7d2a10" };
	json_int_t count = 0;

	CHECK(kube_recorder_as(NULL, "x") == NULL);
	for (int i = 0; i < 3; i++) /* the whole burst of ad's bucket */
		kube_event(ad, &ref, KUBE_EVENT_WARNING, "NodeNotReady", "Node is not ready");
	kube_event(nl, &ref, KUBE_EVENT_WARNING, "NodeNotReady", "Node is not ready");
	kube_recorder_flush(nl);
	struct kube_recorder_stats s;
	kube_recorder_stats(ad, &s);
	CHECK_INT(s.created, 2);
	CHECK_INT(s.patched, 2);
	CHECK_INT(s.dropped, 0);
	json_t *evs = events_for("pod-views");
	CHECK_INT(json_array_size(evs), 2);
	CHECK_STR(event_component(evs, "attachdetach-controller", &count), "attachdetach-controller");
	CHECK_INT(count, 3);
	CHECK_STR(event_component(evs, "node-controller", &count), "node-controller");
	CHECK_INT(count, 1);
	CHECK(event_component(evs, "kcsi-controller-manager", &count) == NULL);
	json_decref(evs);
	kube_recorder_free(ad);
	kube_recorder_free(nl);
	kube_recorder_free(r);
}

/*
 * An API server that takes 300 ms per Event: at most 1,000 events wait (the rest are dropped and
 * counted), and kube_recorder_free() gives up on the backlog after its grace time instead of
 * sending it for five minutes.
 */
static void test_queue_bounded(void)
{
	CHECK_INT(kube_testenv_faults(&env, "{\"reset\":true,\"rules\":[{\"verb\":\"create\","
				      "\"resource\":\"events\",\"latencyMs\":300}]}"), 0);
	struct kube_recorder_opts o = { .component = "csi-provisioner" };
	struct kube_recorder *r = kube_recorder_new(env.client, &o);
	char name[64];
	for (int i = 0; i < 1500; i++) {
		snprintf(name, sizeof(name), "pvc-queue-%d", i);
		struct kube_objref ref = { .kind = "PersistentVolumeClaim", .api_version = "v1",
					   .ns = "default", .name = name };
		kube_event(r, &ref, KUBE_EVENT_WARNING, "ProvisioningFailed", "no room for %s", name);
	}
	struct kube_recorder_stats s;
	kube_recorder_stats(r, &s);
	/* 1,000 queued and at most a couple already taken by the sender: about 500 dropped. */
	CHECK(s.dropped >= 490 && s.dropped <= 500);
	int64_t t0 = mono_now_ns();
	kube_recorder_free(r);
	int64_t took = mono_now_ns() - t0;
	CHECK(took < 3 * NSEC_PER_SEC); /* 0.5 s grace + one request in flight; 300 s without a bound */
	CHECK_INT(kube_testenv_faults(&env, "{\"reset\":true}"), 0);
}

int main(void)
{
	int rc = kube_testenv_start(&env, KCSI_EMULATOR_BIN, NULL);
	if (rc)
		return rc == KUBE_TESTENV_SKIP ? rc : 1;
	RUN(test_aggregation);
	RUN(test_spam_filter);
	RUN(test_similar_combined);
	RUN(test_spam_filter_bounded);
	RUN(test_views);
	RUN(test_queue_bounded);
	kube_testenv_stop(&env);
	return CHECK_DONE();
}
