/*
 * The REST client against a real kube-emulator: every verb, preconditions, the error helpers,
 * 409 conflicts, 429 + Retry-After and 500 retries, and the client-side rate limit.
 */
#include <stdlib.h>

#include "base/timeutil.h"
#include "check.h"
#include "kube/client.h"
#include "kube/testing/testenv.h"

static struct kube_testenv env;

static json_t *pv_obj(const char *name)
{
	return json_pack("{s:s, s:s, s:{s:s}, s:{s:{s:s}, s:[s], s:{s:s, s:s}}}", "apiVersion", "v1",
			 "kind", "PersistentVolume", "metadata", "name", name, "spec", "capacity",
			 "storage", "1Gi", "accessModes", "ReadWriteOnce", "csi", "driver", "d.example",
			 "volumeHandle", name);
}

static const char *jget(json_t *o, const char *a, const char *b)
{
	return json_string_value(json_object_get(json_object_get(o, a), b));
}

static void test_verbs(void)
{
	struct kube_client *c = env.client;
	struct kube_err e;
	json_t *obj = pv_obj("pv-verbs");
	json_t *created = kube_create(c, &KUBE_RES_PERSISTENTVOLUMES, NULL, obj, &e);
	CHECK(created != NULL);
	/* creating it again: AlreadyExists, which is not a plain conflict */
	CHECK(kube_create(c, &KUBE_RES_PERSISTENTVOLUMES, NULL, obj, &e) == NULL);
	CHECK_INT(e.code, 409);
	CHECK(kube_err_is_already_exists(&e));
	CHECK(!kube_err_is_conflict(&e));
	json_decref(obj);

	json_t *got = kube_get(c, &KUBE_RES_PERSISTENTVOLUMES, NULL, "pv-verbs", &e);
	CHECK(got && !strcmp(jget(got, "metadata", "uid"), jget(created, "metadata", "uid")));

	/* update with the current resourceVersion works, a stale one is a 409 Conflict */
	json_object_set_new(json_object_get(got, "spec"), "storageClassName", json_string("fast"));
	json_t *upd = kube_update(c, &KUBE_RES_PERSISTENTVOLUMES, NULL, got, false, &e);
	CHECK(upd && !strcmp(jget(upd, "spec", "storageClassName"), "fast"));
	json_t *stale = kube_update(c, &KUBE_RES_PERSISTENTVOLUMES, NULL, got, false, &e);
	CHECK(stale == NULL);
	CHECK_INT(e.code, 409);
	CHECK(kube_err_is_conflict(&e));
	CHECK_STR(e.reason, "Conflict");
	CHECK(strstr(e.message, "pv-verbs") != NULL);

	/* status update and status patch touch status only */
	json_object_set_new(upd, "status", json_pack("{s:s}", "phase", "Available"));
	json_t *st = kube_update(c, &KUBE_RES_PERSISTENTVOLUMES, NULL, upd, true, &e);
	CHECK(st && !strcmp(jget(st, "status", "phase"), "Available"));
	json_t *sp = kube_patch(c, &KUBE_RES_PERSISTENTVOLUMES, NULL, "pv-verbs", true,
				KUBE_PATCH_MERGE, "{\"status\":{\"phase\":\"Released\"}}", &e);
	CHECK(sp && !strcmp(jget(sp, "status", "phase"), "Released"));

	/* merge patch and JSON patch on the object */
	json_t *mp = kube_patch(c, &KUBE_RES_PERSISTENTVOLUMES, NULL, "pv-verbs", false,
				KUBE_PATCH_MERGE,
				"{\"metadata\":{\"finalizers\":[\"kcsi/test\"]}}", &e);
	CHECK(mp && json_array_size(json_object_get(json_object_get(mp, "metadata"), "finalizers")) == 1);
	json_t *jp = kube_patch(c, &KUBE_RES_PERSISTENTVOLUMES, NULL, "pv-verbs", false,
				KUBE_PATCH_JSON,
				"[{\"op\":\"replace\",\"path\":\"/spec/storageClassName\",\"value\":\"slow\"}]", &e);
	CHECK(jp && !strcmp(jget(jp, "spec", "storageClassName"), "slow"));

	/* list */
	json_t *list = kube_list(c, &KUBE_RES_PERSISTENTVOLUMES, NULL, NULL, &e);
	CHECK(list && json_array_size(json_object_get(list, "items")) >= 1);

	/* delete with a wrong uid precondition fails, with the right one succeeds */
	CHECK_INT(kube_delete(c, &KUBE_RES_PERSISTENTVOLUMES, NULL, "pv-verbs", "wrong-uid", NULL, &e), -1);
	CHECK_INT(e.code, 409);
	json_t *nofin = kube_patch(c, &KUBE_RES_PERSISTENTVOLUMES, NULL, "pv-verbs", false,
				   KUBE_PATCH_MERGE, "{\"metadata\":{\"finalizers\":null}}", &e);
	CHECK(nofin != NULL);
	json_decref(nofin);
	CHECK_INT(kube_delete(c, &KUBE_RES_PERSISTENTVOLUMES, NULL, "pv-verbs",
			      jget(created, "metadata", "uid"), NULL, &e), 0);
	CHECK(kube_get(c, &KUBE_RES_PERSISTENTVOLUMES, NULL, "pv-verbs", &e) == NULL);
	CHECK(kube_err_is_not_found(&e));
	CHECK_STR(e.reason, "NotFound");
	json_decref(created);
	json_decref(got);
	json_decref(upd);
	json_decref(st);
	json_decref(sp);
	json_decref(mp);
	json_decref(jp);
	json_decref(list);
}

static void test_namespaced(void)
{
	struct kube_err e;
	json_t *lease = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s}}", "apiVersion",
				  "coordination.k8s.io/v1", "kind", "Lease", "metadata", "name", "l1",
				  "namespace", "default", "spec", "holderIdentity", "me");
	json_t *r = kube_create(env.client, &KUBE_RES_LEASES, "default", lease, &e);
	CHECK(r != NULL);
	json_decref(r);
	r = kube_get(env.client, &KUBE_RES_LEASES, "default", "l1", &e);
	CHECK(r && !strcmp(jget(r, "spec", "holderIdentity"), "me"));
	json_decref(r);
	CHECK(kube_get(env.client, &KUBE_RES_LEASES, "kube-system", "l1", &e) == NULL);
	CHECK(kube_err_is_not_found(&e));
	json_decref(lease);
}

static void test_retry_429(void)
{
	struct kube_err e;
	json_t *o = pv_obj("pv-429");
	json_decref(kube_create(env.client, &KUBE_RES_PERSISTENTVOLUMES, NULL, o, &e));
	json_decref(o);
	CHECK_INT(kube_testenv_faults(&env, "{\"reset\":true,\"rules\":[{\"verb\":\"get\","
				      "\"resource\":\"persistentvolumes\",\"code\":429,"
				      "\"retryAfterSeconds\":1,\"times\":2}]}"), 0);
	struct kube_client_stats s0, s1;
	kube_client_stats(env.client, &s0);
	int64_t t0 = mono_now_ns();
	json_t *got = kube_get(env.client, &KUBE_RES_PERSISTENTVOLUMES, NULL, "pv-429", &e);
	int64_t took = mono_now_ns() - t0;
	kube_client_stats(env.client, &s1);
	CHECK(got != NULL);
	CHECK_INT(s1.retries - s0.retries, 2);
	CHECK(took >= 2 * NSEC_PER_SEC - 50 * NSEC_PER_MSEC); /* honoured Retry-After: 1s twice */
	json_decref(got);
	/* a 429 that keeps coming: gives up after max_retries with the server's answer */
	struct kube_client_opts o2 = { .qps = -1, .max_retries = 2 };
	char err[256];
	struct kube_client *c2 = kube_client_new(env.cfg, &o2, err, sizeof(err));
	CHECK_INT(kube_testenv_faults(&env, "{\"reset\":true,\"rules\":[{\"verb\":\"get\","
				      "\"resource\":\"persistentvolumes\",\"code\":429,"
				      "\"retryAfterSeconds\":0}]}"), 0);
	CHECK(kube_get(c2, &KUBE_RES_PERSISTENTVOLUMES, NULL, "pv-429", &e) == NULL);
	CHECK_INT(e.code, 429);
	CHECK_STR(e.reason, "TooManyRequests");
	kube_client_free(c2);
	kube_testenv_faults(&env, "{\"reset\":true}");
}

static void test_retry_500(void)
{
	struct kube_err e;
	CHECK_INT(kube_testenv_faults(&env, "{\"reset\":true,\"rules\":[{\"verb\":\"get\","
				      "\"resource\":\"persistentvolumes\",\"code\":500,\"times\":3}]}"), 0);
	json_t *got = kube_get(env.client, &KUBE_RES_PERSISTENTVOLUMES, NULL, "pv-429", &e);
	CHECK(got != NULL); /* three 500s, then success */
	json_decref(got);
	/* a POST answered 500 without Retry-After is not retried: it may have been applied */
	CHECK_INT(kube_testenv_faults(&env, "{\"reset\":true,\"rules\":[{\"verb\":\"create\","
				      "\"resource\":\"persistentvolumes\",\"code\":500,\"times\":1}]}"), 0);
	json_t *o = pv_obj("pv-500");
	CHECK(kube_create(env.client, &KUBE_RES_PERSISTENTVOLUMES, NULL, o, &e) == NULL);
	CHECK_INT(e.code, 500);
	json_t *again = kube_create(env.client, &KUBE_RES_PERSISTENTVOLUMES, NULL, o, &e);
	CHECK(again != NULL);
	json_decref(again);
	json_decref(o);
	kube_testenv_faults(&env, "{\"reset\":true}");
}

static void test_rate_limit(void)
{
	struct kube_client_opts o = { .qps = 20, .burst = 2 };
	char err[256];
	struct kube_client *c = kube_client_new(env.cfg, &o, err, sizeof(err));
	struct kube_err e;
	int64_t t0 = mono_now_ns();
	for (int i = 0; i < 22; i++)
		json_decref(kube_get(c, &KUBE_RES_PERSISTENTVOLUMES, NULL, "pv-429", &e));
	int64_t ms = (mono_now_ns() - t0) / NSEC_PER_MSEC;
	/* 2 free (burst) + 20 at 20/s: at least ~1 s */
	CHECK(ms >= 900);
	kube_client_free(c);
}

static void test_connection_refused(void)
{
	char err[256];
	struct kube_config *cfg = kube_config_load(NULL, "http://127.0.0.1:1", NULL, err, sizeof(err));
	struct kube_client_opts o = { .qps = -1, .max_retries = 1 };
	struct kube_client *c = kube_client_new(cfg, &o, err, sizeof(err));
	struct kube_err e;
	CHECK(kube_get(c, &KUBE_RES_NODES, NULL, "x", &e) == NULL);
	CHECK_INT(e.code, 0);
	CHECK(strstr(e.message, "127.0.0.1:1") != NULL);
	kube_client_free(c);
	kube_config_free(cfg);
}

int main(void)
{
	int rc = kube_testenv_start(&env, KCSI_EMULATOR_BIN, NULL);
	if (rc)
		return rc == KUBE_TESTENV_SKIP ? rc : 1;
	RUN(test_verbs);
	RUN(test_namespaced);
	RUN(test_retry_429);
	RUN(test_retry_500);
	RUN(test_rate_limit);
	RUN(test_connection_refused);
	kube_testenv_stop(&env);
	return CHECK_DONE();
}
