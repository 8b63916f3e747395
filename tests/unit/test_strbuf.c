/* Unit tests for base/strbuf: growth, formatting, quoting, detach, trim. */
#include "base/strbuf.h"
#include "check.h"

#include <stdlib.h>

static void test_empty_is_valid_string(void)
{
	struct strbuf sb = STRBUF_INIT;

	CHECK(sb.buf != NULL);
	CHECK_STR(sb.buf, "");
	CHECK_INT(sb.len, 0);
	strbuf_release(&sb);
	CHECK_STR(sb.buf, "");
}

static void test_add_and_grow(void)
{
	struct strbuf sb = STRBUF_INIT;

	for (int i = 0; i < 10000; i++)
		strbuf_addch(&sb, (char)('a' + i % 26));
	CHECK_INT(sb.len, 10000);
	CHECK_INT(sb.buf[10000], 0);
	CHECK(sb.alloc > sb.len);
	CHECK_INT(sb.buf[26], 'a');
	strbuf_reset(&sb);
	CHECK_STR(sb.buf, "");
	strbuf_add(&sb, "a\0b", 3); /* binary data keeps its length */
	CHECK_INT(sb.len, 3);
	CHECK_INT(sb.buf[2], 'b');
	strbuf_release(&sb);
}

static void test_addf_long(void)
{
	struct strbuf sb = STRBUF_INIT;
	char big[5000];

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	strbuf_addf(&sb, "%s=%d", "k", 42);
	CHECK_STR(sb.buf, "k=42");
	strbuf_addf(&sb, "[%s]", big); /* forces the second vsnprintf pass */
	CHECK_INT(sb.len, 4 + 2 + 4999);
	CHECK_INT(sb.buf[sb.len - 1], ']');
	strbuf_release(&sb);
}

static void test_quoted(void)
{
	struct strbuf sb = STRBUF_INIT;

	strbuf_addquoted(&sb, "a\"b\\c\nd\x01");
	CHECK_STR(sb.buf, "\"a\\\"b\\\\c\\nd\\x01\"");
	strbuf_release(&sb);
}

/* JSON string literals of any bytes: a NUL inside the length, a sequence cut by the length, and
 * a valid multi-byte character (the CLI's CSI JSON and the provisioner's PV go through this). */
static void test_addjson(void)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_addjson(&sb, "a\0b\xc3\xa9z\xc3", 7);
	CHECK_STR(sb.buf, "\"a\\u0000b\xc3\xa9z\\ufffd\"");
	strbuf_reset(&sb);
	strbuf_addjson(&sb, "\xe2\x82", 2); /* the first two bytes of a three-byte character */
	CHECK_STR(sb.buf, "\"\\ufffd\\ufffd\"");
	strbuf_reset(&sb);
	strbuf_addjson(&sb, "", 0);
	CHECK_STR(sb.buf, "\"\"");
	strbuf_release(&sb);
}

static void test_detach_and_trim(void)
{
	struct strbuf sb = STRBUF_INIT;
	size_t len;
	char *s;

	s = strbuf_detach(&sb, &len); /* detaching an empty buffer still gives a freeable string */
	CHECK_STR(s, "");
	CHECK_INT(len, 0);
	free(s);
	strbuf_addstr(&sb, "  \t hello world \n");
	strbuf_trim(&sb);
	CHECK_STR(sb.buf, "hello world");
	s = strbuf_detach(&sb, &len);
	CHECK_INT(len, 11);
	CHECK_STR(sb.buf, "");
	free(s);
}

/* The fleet modes' "{node}" templates: every occurrence, at either end, none, or an empty
 * replacement. */
static void test_replace_all(void)
{
	const char *cases[][4] = {
		{ "/run/{node}/csi.sock", "{node}", "n-1", "/run/n-1/csi.sock" },
		{ "{node}/x/{node}", "{node}", "ab", "ab/x/ab" },
		{ "/var/lib/kubelet", "{node}", "n-1", "/var/lib/kubelet" },
		{ "/root/{node}", "{node}", "", "/root/" },
		{ "", "{node}", "n", "" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *r = str_replace_all(cases[i][0], cases[i][1], cases[i][2]);
		CHECK_STR(r, cases[i][3]);
		free(r);
	}
}

int main(void)
{
	RUN(test_empty_is_valid_string);
	RUN(test_add_and_grow);
	RUN(test_addf_long);
	RUN(test_quoted);
	RUN(test_addjson);
	RUN(test_detach_and_trim);
	RUN(test_replace_all);
	return CHECK_DONE();
}
