/*
 * Unit tests for emu_patch: RFC 7386 merge patch, RFC 6902 JSON patch (every op, escapes, test
 * failure, atomicity), and the reduced strategic merge patch (finalizers as a set, directives).
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>

#include "check.h"
#include "emulator/emu_patch.h"

/* Compares a result to expected JSON text; frees the result. */
static bool json_is(json_t *got, const char *want)
{
	json_t *w = json_loads(want, 0, NULL);
	bool ok = got && w && json_equal(got, w);
	if (!ok) {
		char *g = got ? json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
		fprintf(stderr, "  got  %s\n  want %s\n", g ? g : "(null)", want);
		free(g);
	}
	json_decref(got);
	json_decref(w);
	return ok;
}

static json_t *J(const char *s)
{
	json_t *j = json_loads(s, JSON_DECODE_ANY, NULL);
	if (!j)
		fprintf(stderr, "bad test JSON: %s\n", s);
	return j;
}

static void test_merge(void)
{
	json_t *t = J("{\"a\":\"b\",\"c\":{\"d\":\"e\",\"f\":\"g\"},\"l\":[1,2]}");
	json_t *p = J("{\"a\":\"z\",\"c\":{\"f\":null},\"l\":[3],\"n\":{\"x\":1}}");
	CHECK(json_is(emu_merge_patch(t, p),
		      "{\"a\":\"z\",\"c\":{\"d\":\"e\"},\"l\":[3],\"n\":{\"x\":1}}"));
	/* the target is never modified */
	CHECK(json_is(json_incref(t), "{\"a\":\"b\",\"c\":{\"d\":\"e\",\"f\":\"g\"},\"l\":[1,2]}"));
	json_decref(p);
	json_decref(t);
}

static json_t *jp(const char *target, const char *ops, int *status)
{
	json_t *t = J(target), *o = J(ops);
	char err[256];
	json_t *r = emu_json_patch(t, o, status, err, sizeof(err));
	json_decref(t);
	json_decref(o);
	return r;
}

static void test_json_patch_ops(void)
{
	int st;
	CHECK(json_is(jp("{\"a\":{\"b\":[1,2]}}",
			 "[{\"op\":\"add\",\"path\":\"/a/b/1\",\"value\":9},"
			 "{\"op\":\"add\",\"path\":\"/a/b/-\",\"value\":7},"
			 "{\"op\":\"replace\",\"path\":\"/a/b/0\",\"value\":0},"
			 "{\"op\":\"copy\",\"from\":\"/a/b\",\"path\":\"/c\"},"
			 "{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/d\"},"
			 "{\"op\":\"test\",\"path\":\"/c/3\",\"value\":7},"
			 "{\"op\":\"remove\",\"path\":\"/c/0\"}]", &st),
		      "{\"c\":[9,2,7],\"d\":{\"b\":[0,9,2,7]}}"));
	CHECK(json_is(jp("{\"metadata\":{\"annotations\":{\"a/b\":\"1\",\"m~n\":\"2\"}}}",
			 "[{\"op\":\"remove\",\"path\":\"/metadata/annotations/a~1b\"},"
			 "{\"op\":\"replace\",\"path\":\"/metadata/annotations/m~0n\",\"value\":\"3\"}]",
			 &st),
		      "{\"metadata\":{\"annotations\":{\"m~n\":\"3\"}}}"));
}

static void test_json_patch_errors(void)
{
	int st = 0;
	CHECK(jp("{\"a\":1}", "[{\"op\":\"test\",\"path\":\"/a\",\"value\":2}]", &st) == NULL);
	CHECK_INT(st, 422);
	CHECK(jp("{\"a\":1}", "[{\"op\":\"remove\",\"path\":\"/b\"}]", &st) == NULL);
	CHECK_INT(st, 422);
	CHECK(jp("{\"a\":[1]}", "[{\"op\":\"add\",\"path\":\"/a/5\",\"value\":1}]", &st) == NULL);
	CHECK_INT(st, 422);
	CHECK(jp("{\"a\":1}", "[{\"op\":\"frobnicate\",\"path\":\"/a\"}]", &st) == NULL);
	CHECK_INT(st, 400);
	CHECK(jp("{\"a\":1}", "{\"op\":\"add\"}", &st) == NULL);
	CHECK_INT(st, 400);
	CHECK(jp("{\"a\":1}", "[{\"op\":\"add\",\"path\":\"/b\"}]", &st) == NULL);
	CHECK_INT(st, 400);
	CHECK(jp("{\"a\":{}}", "[{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/a/b\"}]", &st) == NULL);
}

/*
 * What a real kube-apiserver (v1.26) answered to each op on a ConfigMap with data but without
 * labels or annotations: replace of a missing member adds it; every other op on a missing
 * member or under a missing parent is 422 (csi-snapshotter's first write to a content depends
 * on the first answer).
 */
static void test_json_patch_missing_members(void)
{
	static const char cm[] = "{\"metadata\":{\"name\":\"c\"},\"data\":{\"k\":\"v\"}}";
	int st = 0;
	CHECK(json_is(jp(cm, "[{\"op\":\"replace\",\"path\":\"/metadata/annotations\","
			 "\"value\":{\"a\":\"b\"}}]", &st),
		      "{\"metadata\":{\"name\":\"c\",\"annotations\":{\"a\":\"b\"}},"
		      "\"data\":{\"k\":\"v\"}}"));
	CHECK(json_is(jp(cm, "[{\"op\":\"replace\",\"path\":\"/data/zz\",\"value\":\"1\"}]",
			 &st),
		      "{\"metadata\":{\"name\":\"c\"},\"data\":{\"k\":\"v\",\"zz\":\"1\"}}"));
	static const char *const refused[] = {
		"[{\"op\":\"remove\",\"path\":\"/metadata/annotations\"}]",
		"[{\"op\":\"remove\",\"path\":\"/data/nope\"}]",
		"[{\"op\":\"test\",\"path\":\"/data/nope\",\"value\":\"x\"}]",
		"[{\"op\":\"replace\",\"path\":\"/metadata/labels/k\",\"value\":\"v\"}]",
		"[{\"op\":\"add\",\"path\":\"/metadata/labels/k\",\"value\":\"v\"}]",
		"[{\"op\":\"replace\",\"path\":\"/data/k/0\",\"value\":\"v\"}]",
	};
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		st = 0;
		CHECK(jp(cm, refused[i], &st) == NULL);
		CHECK_INT(st, 422);
	}
	/* an array element past the end is not added by replace */
	CHECK(jp("{\"a\":[1]}", "[{\"op\":\"replace\",\"path\":\"/a/1\",\"value\":2}]", &st) ==
	      NULL);
	CHECK_INT(st, 422);
	/* test of a missing member against null passes, as in the apiserver's library */
	CHECK(json_is(jp(cm, "[{\"op\":\"test\",\"path\":\"/data/nope\",\"value\":null}]", &st),
		      cm));
}

static json_t *smp(const char *target, const char *patch, int *status)
{
	json_t *t = J(target), *p = J(patch);
	char err[256];
	json_t *r = emu_strategic_patch(t, p, status, err, sizeof(err));
	json_decref(t);
	json_decref(p);
	return r;
}

static void test_strategic(void)
{
	int st;
	CHECK(json_is(smp("{\"metadata\":{\"finalizers\":[\"a\"],\"labels\":{\"x\":\"1\"}},"
			  "\"spec\":{\"l\":[1]}}",
			  "{\"metadata\":{\"finalizers\":[\"b\",\"a\"],\"labels\":{\"x\":null}},"
			  "\"spec\":{\"l\":[2]}}", &st),
		      "{\"metadata\":{\"finalizers\":[\"a\",\"b\"],\"labels\":{}},"
		      "\"spec\":{\"l\":[2]}}"));
	CHECK(json_is(smp("{\"metadata\":{\"finalizers\":[\"a\",\"b\"]}}",
			  "{\"metadata\":{\"$deleteFromPrimitiveList/finalizers\":[\"a\"]}}", &st),
		      "{\"metadata\":{\"finalizers\":[\"b\"]}}"));
	CHECK(json_is(smp("{\"spec\":{\"a\":1,\"b\":2}}",
			  "{\"spec\":{\"$patch\":\"replace\",\"c\":3}}", &st),
		      "{\"spec\":{\"c\":3}}"));
	CHECK(json_is(smp("{\"spec\":{\"a\":1},\"status\":{}}",
			  "{\"spec\":{\"$patch\":\"delete\"}}", &st),
		      "{\"status\":{}}"));
	CHECK(smp("{\"spec\":{}}", "{\"spec\":{\"$retainKeys\":[\"a\"]}}", &st) == NULL);
	CHECK_INT(st, 422);
	CHECK(smp("{\"spec\":{}}", "{\"spec\":{\"l\":[{\"$patch\":\"delete\"}]}}", &st) == NULL);
	CHECK_INT(st, 422);
	CHECK(smp("{}", "[1]", &st) == NULL);
	CHECK_INT(st, 400);
}

static void test_strategic_merge_key_lists(void)
{
	int st;
	/* conditions merge by type; an element with $patch: delete removes its match */
	CHECK(json_is(smp("{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\"},"
			  "{\"type\":\"Disk\",\"status\":\"True\"},{\"type\":\"Old\"}]}}",
			  "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"},"
			  "{\"type\":\"New\"},{\"type\":\"Old\",\"$patch\":\"delete\"}]}}", &st),
		      "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"},"
		      "{\"type\":\"Disk\",\"status\":\"True\"},{\"type\":\"New\"}]}}"));
	/* CSINode drivers by name, reordered by $setElementOrder */
	CHECK(json_is(smp("{\"spec\":{\"drivers\":[{\"name\":\"a\",\"nodeID\":\"1\"},"
			  "{\"name\":\"b\",\"nodeID\":\"2\"}]}}",
			  "{\"spec\":{\"$setElementOrder/drivers\":[{\"name\":\"b\"},{\"name\":\"a\"}],"
			  "\"drivers\":[{\"name\":\"a\",\"nodeID\":\"9\"}]}}", &st),
		      "{\"spec\":{\"drivers\":[{\"name\":\"b\",\"nodeID\":\"2\"},"
		      "{\"name\":\"a\",\"nodeID\":\"9\"}]}}"));
	/* {"$patch": "replace"} makes the list exactly the other elements */
	CHECK(json_is(smp("{\"spec\":{\"volumes\":[{\"name\":\"x\"},{\"name\":\"y\"}]}}",
			  "{\"spec\":{\"volumes\":[{\"name\":\"z\"},{\"$patch\":\"replace\"}]}}", &st),
		      "{\"spec\":{\"volumes\":[{\"name\":\"z\"}]}}"));
	/* primitive lists: $deleteFromPrimitiveList for any field */
	CHECK(json_is(smp("{\"spec\":{\"modes\":[\"a\",\"b\",\"c\"]}}",
			  "{\"spec\":{\"$deleteFromPrimitiveList/modes\":[\"b\"]}}", &st),
		      "{\"spec\":{\"modes\":[\"a\",\"c\"]}}"));
	/* an element without its merge key is an error, not a silent append */
	CHECK(smp("{\"status\":{\"conditions\":[]}}",
		  "{\"status\":{\"conditions\":[{\"status\":\"True\"}]}}", &st) == NULL);
	CHECK_INT(st, 422);
}

int main(void)
{
	RUN(test_merge);
	RUN(test_json_patch_ops);
	RUN(test_json_patch_errors);
	RUN(test_json_patch_missing_members);
	RUN(test_strategic);
	RUN(test_strategic_merge_key_lists);
	return CHECK_DONE();
}
