/*
 * libFuzzer, differential: src/kube/jv.c against jansson on the same bytes. Both must accept or
 * both refuse, and what they accept must be the same value (types, integers, strings byte for
 * byte, arrays element by element, objects key by key, jv_get giving the last of duplicate
 * keys as jansson keeps). Inputs are kept under 2,000 bytes so both depth limits are out of
 * reach, and inputs with a NUL byte are skipped: jansson reads "[1\0,2]" as [1, 2] (a NUL
 * after a number is lost in its lexer), which jv refuses. A difference aborts.
 */
#include <jansson.h>

#include "fuzz_common.h"
#include "kube/jv.h"

static void same(json_t *j, const jv_t *v)
{
	switch (json_typeof(j)) {
	case JSON_OBJECT: {
		if (v->type != JV_OBJECT || jv_size(v) < json_object_size(j))
			abort();
		const char *k;
		json_t *x;
		json_object_foreach(j, k, x) {
			const jv_t *y = jv_get(v, k);
			if (!y)
				abort();
			same(x, y);
		}
		const jv_t *val;
		const char *key;
		size_t n = 0;
		jv_object_foreach(v, key, val) {
			if (!json_object_get(j, key) || (val->flags & JV_KEY))
				abort();
			n++;
		}
		if (n != jv_size(v))
			abort();
		break;
	}
	case JSON_ARRAY: {
		if (v->type != JV_ARRAY || jv_size(v) != json_array_size(j))
			abort();
		size_t i;
		const jv_t *y;
		jv_array_foreach(v, i, y)
			same(json_array_get(j, i), y);
		if (i != json_array_size(j))
			abort();
		break;
	}
	case JSON_STRING:
		if (v->type != JV_STRING || v->count != json_string_length(j) ||
		    memcmp(v->s, json_string_value(j), v->count) != 0 || v->s[v->count] != '\0')
			abort();
		break;
	case JSON_INTEGER:
		if (v->type != JV_INT || v->i != json_integer_value(j))
			abort();
		break;
	case JSON_REAL:
		if (v->type != JV_REAL)
			abort();
		break;
	case JSON_TRUE:
		if (v->type != JV_TRUE)
			abort();
		break;
	case JSON_FALSE:
		if (v->type != JV_FALSE)
			abort();
		break;
	case JSON_NULL:
		if (v->type != JV_NULL)
			abort();
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 2000 || memchr(data, 0, size))
		return 0;
	json_error_t je;
	json_t *j = json_loadb((const char *)data, size, 0, &je);
	static struct jv_doc doc; /* reused, as the watch decoder reuses its document */
	char err[200];
	const jv_t *v = jv_parse(&doc, (const char *)data, size, err, sizeof(err));
	if (!j != !v)
		abort();
	if (j)
		same(j, v);
	json_decref(j);
	return 0;
}
