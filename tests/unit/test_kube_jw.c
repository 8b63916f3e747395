/*
 * kube/jw, the writer of the hot-path objects (the provisioner's PV, events): commas and nesting,
 * escapes, and bytes that are not UTF-8 (a CSI driver's volume id can hold any) coming out as
 * U+FFFD in text that kube/jv and jansson both accept.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/strbuf.h"
#include "check.h"
#include "kube/jv.h"
#include "kube/jw.h"

static void test_nesting(void)
{
	struct strbuf sb = STRBUF_INIT;
	struct jw w = JW_INIT(&sb);

	jw_begin_object(&w);
	jw_kv_str(&w, "a", "x");
	jw_key(&w, "e");
	jw_begin_object(&w);
	jw_end_object(&w);
	jw_key(&w, "l");
	jw_begin_array(&w);
	jw_int(&w, -5);
	jw_begin_array(&w);
	jw_end_array(&w);
	jw_begin_object(&w);
	jw_key(&w, "t");
	jw_bool(&w, true);
	jw_kv_str(&w, "n", NULL);
	jw_end_object(&w);
	jw_str(&w, "z");
	jw_end_array(&w);
	jw_key(&w, "f");
	jw_bool(&w, false);
	jw_end_object(&w);
	CHECK_STR(sb.buf, "{\"a\":\"x\",\"e\":{},\"l\":[-5,[],{\"t\":true,\"n\":\"\"},\"z\"],\"f\":false}");
	strbuf_release(&sb);
}

static void quote(struct strbuf *sb, const char *s)
{
	strbuf_reset(sb);
	jw_quote(sb, s);
}

static void test_escapes(void)
{
	struct strbuf sb = STRBUF_INIT;

	quote(&sb, "q\"b\\s/\n\r\t\x01\x1f\x7f");
	CHECK_STR(sb.buf, "\"q\\\"b\\\\s/\\n\\r\\t\\u0001\\u001f\\u007f\"");
	quote(&sb, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"); /* é € 😀 stay as they are */
	CHECK_STR(sb.buf, "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"");
	/* a stray continuation, a cut sequence, an overlong '/', a surrogate, beyond U+10FFFF */
	quote(&sb, "a\x80" "b\xc3" "c\xc0\xaf" "d\xed\xa0\x80" "e\xf4\x90\x80\x80" "f\xff");
	CHECK_STR(sb.buf, "\"a\\ufffdb\\ufffdc\\ufffd\\ufffdd\\ufffd\\ufffd\\ufffde\\ufffd\\ufffd\\ufffd\\ufffdf\\ufffd\"");
	strbuf_release(&sb);
}

/* Any bytes at all: the text parses with jv and with jansson to the same string, which equals the
 * input when the input is UTF-8. */
static void test_random_round_trip(void)
{
	struct strbuf sb = STRBUF_INIT;
	struct jv_doc doc = { 0 };
	char in[64], err[128];
	unsigned seed = 12345;
	int same = 0;

	for (int n = 0; n < 20000; n++) {
		size_t len = (size_t)(rand_r(&seed) % 40);
		for (size_t i = 0; i < len; i++) {
			int r = rand_r(&seed) % 4;
			in[i] = (char)(r == 0 ? 1 + rand_r(&seed) % 127 : r == 1 ? 0x80 + rand_r(&seed) % 128
					     : r == 2 ? "\xc3\xa9\xe2\x82\xac"[rand_r(&seed) % 5] : 'a');
		}
		in[len] = 0;
		strbuf_reset(&sb);
		struct jw w = JW_INIT(&sb);
		jw_begin_array(&w); /* jv reads objects and arrays only */
		jw_str(&w, in);
		jw_end_array(&w);
		const jv_t *v = jv_first(jv_parse(&doc, sb.buf, sb.len, err, sizeof(err)));
		json_t *arr = json_loadb(sb.buf, sb.len, 0, NULL);
		const char *js = json_string_value(json_array_get(arr, 0));
		CHECK(v != NULL && js != NULL);
		if (!v || !js) {
			fprintf(stderr, "%s: %s\n", sb.buf, err);
			json_decref(arr);
			break;
		}
		CHECK_STR(jv_str(v), js);
		json_t *orig = json_string(in); /* NULL when in is not UTF-8 */
		if (orig) {
			CHECK_STR(jv_str(v), in);
			same++;
		}
		json_decref(orig);
		json_decref(arr);
	}
	CHECK(same > 100); /* the generator made both kinds */
	jv_release(&doc);
	strbuf_release(&sb);
}

int main(void)
{
	RUN(test_nesting);
	RUN(test_escapes);
	RUN(test_random_round_trip);
	return CHECK_DONE();
}
