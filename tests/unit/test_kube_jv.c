/*
 * kube/jv, the informer's JSON reader: values, escapes and UTF-8, duplicate keys, iteration
 * without the container, what it refuses (each with a reason), and a document reused across
 * parses of different sizes. fuzz_kube_jv checks it against jansson on random input.
 */
#include <stdlib.h>

#include "check.h"
#include "kube/jv.h"

static struct jv_doc doc;
static char err[200];

static const jv_t *parse(const char *s)
{
	err[0] = 0;
	return jv_parse(&doc, s, strlen(s), err, sizeof(err));
}

static void test_values(void)
{
	const jv_t *v = parse(" {\"s\":\"a\\\"b\\\\c\\/\\n\\u00e9\\ud83d\\ude00\", \"i\":-42, \"big\":9223372036854775807,"
			      " \"r\":1.5e3, \"t\":true, \"f\":false, \"n\":null, \"e\":{}, \"a\":[1,[2,3],{\"x\":4}],"
			      " \"d\":1, \"d\":2} ");
	CHECK(v != NULL);
	CHECK_STR(jv_str(jv_get(v, "s")), "a\"b\\c/\n\xc3\xa9\xf0\x9f\x98\x80");
	CHECK_INT(jv_get(v, "s")->count, 13);
	CHECK_INT(jv_int(jv_get(v, "i")), -42);
	CHECK(jv_int(jv_get(v, "big")) == INT64_MAX);
	CHECK(jv_get(v, "r")->type == JV_REAL && jv_int(jv_get(v, "r")) == 0);
	CHECK(jv_is_true(jv_get(v, "t")) && jv_is_boolean(jv_get(v, "f")) && !jv_is_true(jv_get(v, "f")));
	CHECK(jv_get(v, "n")->type == JV_NULL);
	CHECK(jv_is_object(jv_get(v, "e")) && jv_size(jv_get(v, "e")) == 0);
	CHECK_INT(jv_int(jv_get(v, "d")), 2); /* the last of duplicate keys, as jansson */
	CHECK(jv_get(v, "missing") == NULL && jv_get(jv_get(v, "i"), "x") == NULL);
	CHECK(jv_str(NULL) == NULL && jv_int(NULL) == 0 && jv_size(NULL) == 0);
	/* arrays, nested: iteration skips whole subtrees */
	const jv_t *a = jv_get(v, "a"), *e;
	size_t i;
	int sum = 0;
	jv_array_foreach(a, i, e) {
		if (jv_is_integer(e))
			sum += (int)jv_int(e);
		else if (jv_is_object(e))
			sum += (int)jv_int(jv_get(e, "x")) * 10;
		else
			sum += (int)jv_size(e) * 100;
	}
	CHECK_INT(i, 3);
	CHECK_INT(sum, 1 + 200 + 40);
	/* members in order, with their keys */
	const char *k, *keys = "s i big r t f n e a d d";
	char seen[64] = "";
	jv_object_foreach(v, k, e) {
		strcat(seen, seen[0] ? " " : "");
		strcat(seen, k);
	}
	CHECK_STR(seen, keys);
	CHECK_INT(jv_size(v), 11);
}

static void test_refused(void)
{
	const char *bad[] = {
		"", "  ", "1", "\"s\"", "[1 2]", "{\"a\"}", "{\"a\":}", "{\"a\" 1}", "{a:1}", "[1,]",
		"[,1]", "{\"a\":1,}", "[\"\x01\"]", "[\"\\x\"]", "[\"\\u12\"]", "[\"\\udc00\"]",
		"[\"\\ud800x\"]", "[\"\\u0000\"]", "[\"\xc3\"]", "[\"\xc0\x80\"]", "[\"\xed\xa0\x80\"]",
		"[01]", "[-]", "[1.]", "[1e]", "[.5]", "[+1]", "[tru]", "[nul]", "[1e999]",
		"[9223372036854775808]", "{} {}", "[1]x", "[", "{\"a\":[1,2}", "[\"unterminated]",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (parse(bad[i]) != NULL || !err[0])
			fprintf(stderr, "accepted or no reason: %s\n", bad[i]);
		CHECK(parse(bad[i]) == NULL);
		CHECK(err[0] != 0);
	}
	/* depth: 2,048 levels parse, one more is refused without recursion */
	char *deep = malloc(2 * 2049 + 1);
	memset(deep, '[', 2049);
	memset(deep + 2049, ']', 2049);
	deep[2 * 2049] = 0;
	CHECK(jv_parse(&doc, deep + 1, 2 * 2048, err, sizeof(err)) != NULL);
	CHECK(parse(deep) == NULL);
	CHECK(strstr(err, "depth") != NULL);
	free(deep);
}

static void test_reuse(void)
{
	/* a big document, then a small one, then a big one again: the buffers are reused */
	char big[20000];
	size_t n = 0;
	n += (size_t)sprintf(big + n, "{\"items\":[");
	for (int i = 0; i < 1000; i++)
		n += (size_t)sprintf(big + n, "%s{\"n\":%d}", i ? "," : "", i);
	sprintf(big + n, "]}");
	const jv_t *v = parse(big);
	CHECK(v && jv_size(jv_get(v, "items")) == 1000);
	v = parse("{\"a\":\"b\"}");
	CHECK_STR(jv_str(jv_get(v, "a")), "b");
	v = parse(big);
	const jv_t *e;
	size_t i;
	int64_t sum = 0;
	jv_array_foreach(jv_get(v, "items"), i, e)
		sum += jv_int(jv_get(e, "n"));
	CHECK(sum == 999 * 1000 / 2);
}

int main(void)
{
	RUN(test_values);
	RUN(test_refused);
	RUN(test_reuse);
	jv_release(&doc);
	return CHECK_DONE();
}
