/*
 * test_csi_wire: the parts of gRPC's HTTP/2 mapping that kcsi's client and server share
 * (src/csi/wire.c), without a socket: grpc-timeout in both directions, grpc-message percent
 * encoding, the length-prefixed message accumulator and the tables that turn an HTTP status or
 * a stream reset into a gRPC code. Each table row is what a caller of the gRPC layer sees: the
 * deadline a handler gets, the error text a sidecar logs, the status a call returns.
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "check.h"
#include "csi/wire.h"

#define NS_S 1000000000LL
#define NS_M (60 * NS_S)
#define NS_H (3600 * NS_S)

/* ---- grpc-timeout ---- */

static int64_t parse(const char *v)
{
	return csi_wire_timeout_parse(v, strlen(v));
}

static void test_timeout_parse(void)
{
	static const struct {
		const char *in;
		int64_t want; /* -1: refused, the server then runs the call without a deadline */
	} cases[] = {
		/* every unit */
		{ "1H", NS_H },
		{ "2M", 2 * NS_M },
		{ "3S", 3 * NS_S },
		{ "4m", 4000000 },
		{ "5u", 5000 },
		{ "6n", 6 },
		{ "0n", 0 },
		{ "007S", 7 * NS_S },
		/* 8 digits is the protocol's maximum; 9 are refused */
		{ "12345678S", 12345678 * NS_S },
		{ "99999999n", 99999999 },
		{ "99999999M", 99999999 * NS_M },
		{ "123456789S", -1 },
		{ "000000001n", -1 },
		/* saturation instead of overflow: the deadline is "never" */
		{ "99999999H", INT64_MAX },
		{ "2562047H", 2562047 * NS_H },
		{ "2562048H", INT64_MAX },
		/* malformed */
		{ "", -1 },
		{ "S", -1 },
		{ "5", -1 },
		{ "100", -1 },
		{ "10s", -1 },
		{ "10h", -1 },
		{ "10x", -1 },
		{ "10SS", -1 },
		{ "1a0S", -1 },
		{ "-1S", -1 },
		{ "+1S", -1 },
		{ " 1S", -1 },
		{ "1S ", -1 },
		{ "1.5S", -1 },
		{ "0x10S", -1 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int64_t got = parse(cases[i].in);
		if (got != cases[i].want)
			fprintf(stderr, "grpc-timeout \"%s\"\n", cases[i].in);
		CHECK_INT(got, cases[i].want);
	}
	/* only len bytes are read: the value need not be NUL-terminated */
	CHECK_INT(csi_wire_timeout_parse("10Sxyz", 3), 10 * NS_S);
	CHECK_INT(csi_wire_timeout_parse("1S", 1), -1);
	CHECK_INT(csi_wire_timeout_parse("1\0S", 3), -1);
	CHECK_INT(csi_wire_timeout_parse("1S\0", 3), -1);
}

static void test_timeout_format(void)
{
	static const struct {
		int64_t ns;
		const char *want;
	} cases[] = {
		/* non-positive becomes the shortest timeout there is, never "0n" or a sign */
		{ INT64_MIN, "1n" },
		{ -5, "1n" },
		{ 0, "1n" },
		{ 1, "1n" },
		/* the smallest unit that fits in 8 digits, exactly when it can be */
		{ 99999999, "99999999n" },
		{ 100000000, "100000u" },
		{ NS_S, "1000000u" },
		{ 99999999000LL, "99999999u" },
		{ NS_H, "3600000m" },
		{ 99999999 * 1000000LL, "99999999m" },
		{ 99999999 * NS_S, "99999999S" },
		/* rounded up, never down: the peer must not give up before we do */
		{ 100000001, "100001u" },
		{ 99999999001LL, "100000m" },
		{ 99999999 * 1000000LL + 1, "100000S" },
		{ 99999999 * NS_S + 1, "1666667M" },
		{ 99999999 * NS_M + 1, "1666667H" },
		{ INT64_MAX, "2562048H" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char out[16];
		memset(out, 'X', sizeof(out));
		csi_wire_timeout_format(cases[i].ns, out);
		CHECK_STR(out, cases[i].want);
	}
}

/* The unit a formatted timeout ends in, in ns. */
static int64_t unit_ns(char u)
{
	switch (u) {
	case 'H': return NS_H;
	case 'M': return NS_M;
	case 'S': return NS_S;
	case 'm': return 1000000;
	case 'u': return 1000;
	default: return 1;
	}
}

static void test_timeout_round_trip(void)
{
	int64_t vals[200];
	size_t n = 0;
	/* each unit's boundaries */
	static const int64_t units[] = { 1, 1000, 1000000, NS_S, NS_M, NS_H };
	static const int64_t counts[] = { 1, 99999999, 100000000 };
	for (size_t u = 0; u < 6; u++) {
		for (size_t c = 0; c < 3; c++) {
			if (counts[c] > (INT64_MAX - 1) / units[u])
				continue; /* past INT64_MAX: covered by INT64_MAX itself */
			for (int64_t d = -1; d <= 1; d++)
				vals[n++] = counts[c] * units[u] + d;
		}
	}
	vals[n++] = INT64_MAX;
	vals[n++] = INT64_MAX - 1;
	/* and a spread of others (a fixed LCG, so failures reproduce) */
	uint64_t x = 88172645463325252ULL;
	while (n < sizeof(vals) / sizeof(vals[0])) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		vals[n++] = (int64_t)(x >> (1 + (x & 31))); /* magnitudes from 2^31 to 2^63 */
	}
	for (size_t i = 0; i < n; i++) {
		int64_t want = vals[i] < 1 ? 1 : vals[i];
		char out[16];
		csi_wire_timeout_format(vals[i], out);
		size_t len = strlen(out);
		CHECK(len >= 2 && len <= 9); /* 1..8 digits and the unit */
		int64_t back = csi_wire_timeout_parse(out, len);
		CHECK(back >= want);
		/* rounded up by less than one of its unit: the finest unit that fits was chosen */
		CHECK(back - want < unit_ns(out[len - 1]));
		if (back < want || back - want >= unit_ns(out[len - 1]))
			fprintf(stderr, "timeout %lld -> \"%s\" -> %lld\n", (long long)vals[i], out,
				(long long)back);
	}
}

/* ---- grpc-message ---- */

static void test_message_encode(void)
{
	static const struct {
		const char *in, *want;
	} cases[] = {
		{ "", "" },
		{ "volume vol-1 not found", "volume vol-1 not found" },
		{ "x !\"#$&'()*+,-./09:;<=>?@AZ[\\]^_`az{|}~", "x !\"#$&'()*+,-./09:;<=>?@AZ[\\]^_`az{|}~" },
		/* spaces at the edges of a header value are malformed in HTTP/2 (RFC 9113 8.2.1) */
		{ " leading and trailing ", "%20leading and trailing%20" },
		{ " ", "%20" },
		{ "  two  ", "%20 two %20" },
		{ "100%", "100%25" },
		{ "%41", "%2541" },
		{ "line1\nline2", "line1%0Aline2" },
		{ "\r\t", "%0D%09" },
		{ "\x1f\x7f", "%1F%7F" },
		{ "caf\xc3\xa9", "caf%C3%A9" },          /* UTF-8 is sent as its bytes */
		{ "\xff\x80", "%FF%80" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct strbuf sb = STRBUF_INIT;
		strbuf_addstr(&sb, "pre:"); /* appends, keeps what is there */
		csi_wire_message_encode(cases[i].in, &sb);
		CHECK(strncmp(sb.buf, "pre:", 4) == 0);
		CHECK_STR(sb.buf + 4, cases[i].want);
		strbuf_release(&sb);
	}
}

static void decode(const char *in, char *out, size_t outlen)
{
	csi_wire_message_decode((const uint8_t *)in, strlen(in), out, outlen);
}

static void test_message_decode(void)
{
	static const struct {
		const char *in, *want;
	} cases[] = {
		{ "", "" },
		{ "volume vol-1 not found", "volume vol-1 not found" },
		{ "%41%42", "AB" },
		{ "caf%c3%a9", "caf\xc3\xa9" },         /* lowercase hex */
		{ "caf%C3%A9", "caf\xc3\xa9" },         /* uppercase hex */
		{ "%e2%82%AC", "\xe2\x82\xac" },        /* mixed */
		{ "a%0Ab", "a\nb" },
		{ "100%25", "100%" },
		{ "%2541", "%41" },                     /* decoded once, not twice */
		/* malformed escapes are kept as sent, as gRPC's decoders do */
		{ "100%", "100%" },
		{ "%4", "%4" },
		{ "50%x", "50%x" },
		{ "%zz", "%zz" },
		{ "%4g", "%4g" },
		{ "%g4", "%g4" },
		{ "%%41", "%A" },
		{ "% 41", "% 41" },
		/* a NUL would cut the message short where it is printed: kept literally */
		{ "%00", "%00" },
		{ "a%00b%41", "a%00bA" },
		{ "%01", "\x01" },
		/* bytes outside the encoded set are passed through */
		{ "caf\xc3\xa9", "caf\xc3\xa9" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char out[64];
		memset(out, 'X', sizeof(out));
		decode(cases[i].in, out, sizeof(out));
		CHECK_STR(out, cases[i].want);
	}
}

static void test_message_decode_truncates(void)
{
	static const struct {
		const char *in;
		size_t outlen;
		const char *want;
	} cases[] = {
		{ "abcdef", 4, "abc" },
		{ "abc", 4, "abc" },
		{ "abcd", 4, "abc" },
		{ "%41%42%43", 3, "AB" },
		{ "%41%42%43", 4, "ABC" },
		{ "%00", 3, "%0" },
		{ "x%", 2, "x" },
		{ "abc", 1, "" },
		{ "%41", 1, "" },
		{ "", 1, "" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char out[16];
		memset(out, 'X', sizeof(out));
		decode(cases[i].in, out, cases[i].outlen);
		CHECK_STR(out, cases[i].want);
		/* nothing written past outlen */
		for (size_t j = cases[i].outlen; j < sizeof(out); j++)
			CHECK(out[j] == 'X');
	}
	/* outlen 0: nothing written at all */
	char out[4] = "XXX";
	decode("abc", out, 0);
	CHECK_STR(out, "XXX");
	/* the value need not be NUL-terminated: only len bytes are read */
	char small[8];
	csi_wire_message_decode((const uint8_t *)"ab%41", 3, small, sizeof(small));
	CHECK_STR(small, "ab%");
	csi_wire_message_decode((const uint8_t *)"%41", 2, small, sizeof(small));
	CHECK_STR(small, "%4"); /* an escape cut by the end of the value is not completed */
}

/* What the server sends, its client reads back: every byte but NUL survives the round trip. */
static void test_message_round_trip(void)
{
	char all[256];
	for (int i = 1; i < 256; i++)
		all[i - 1] = (char)i;
	all[255] = '\0';
	const char *msgs[] = { "", "plain", "100% sure", "%41 is not A", "new\nline", " edges ", all };
	for (size_t i = 0; i < sizeof(msgs) / sizeof(msgs[0]); i++) {
		struct strbuf sb = STRBUF_INIT;
		csi_wire_message_encode(msgs[i], &sb);
		for (size_t j = 0; j < sb.len; j++)
			CHECK(sb.buf[j] >= 0x20 && sb.buf[j] <= 0x7e); /* a valid header value */
		CHECK(sb.len == 0 || (sb.buf[0] != ' ' && sb.buf[sb.len - 1] != ' '));
		char out[1024];
		csi_wire_message_decode((const uint8_t *)sb.buf, sb.len, out, sizeof(out));
		CHECK_STR(out, msgs[i]);
		strbuf_release(&sb);
	}
}

/* ---- the length-prefixed message ---- */

/* Feeds bytes one at a time; returns the first error (or OK). */
static enum csi_wire_msg_err feed_bytewise(struct csi_wire_msg *m, const uint8_t *b, size_t n)
{
	enum csi_wire_msg_err e = CSI_WIRE_MSG_OK;
	for (size_t i = 0; i < n && !e; i++)
		e = csi_wire_msg_feed(m, b + i, 1);
	return e;
}

static void test_msg_split_prefix(void)
{
	static const uint8_t in[] = { 0, 0, 0, 0, 5, 'h', 'e', 'l', 'l', 'o' };
	struct csi_wire_msg m;
	csi_wire_msg_init(&m, 1024);
	CHECK(csi_wire_msg_empty(&m));
	CHECK(!csi_wire_msg_complete(&m));
	CHECK_INT(csi_wire_msg_feed(&m, in, 0), CSI_WIRE_MSG_OK); /* an empty DATA frame */
	CHECK(csi_wire_msg_empty(&m));
	for (size_t i = 0; i < sizeof(in); i++) {
		CHECK_INT(csi_wire_msg_feed(&m, in + i, 1), CSI_WIRE_MSG_OK);
		CHECK(!csi_wire_msg_empty(&m));
		/* complete only with the last byte; "truncated", not "no message", before it */
		CHECK(csi_wire_msg_complete(&m) == (i == sizeof(in) - 1));
	}
	size_t len = 99;
	uint8_t *b = csi_wire_msg_take(&m, &len);
	CHECK_INT(len, 5);
	CHECK(b && memcmp(b, "hello", 5) == 0);
	free(b);
	/* taken: empty again, nothing left to free */
	CHECK(csi_wire_msg_empty(&m));
	CHECK(!csi_wire_msg_complete(&m));
	CHECK(m.buf == NULL);
	csi_wire_msg_release(&m);
}

static void test_msg_whole_and_chunked(void)
{
	/* the same message in one DATA frame, and in frames of 2, 3 and 7 bytes */
	uint8_t in[5 + 32];
	csi_wire_msg_prefix(in, 32);
	for (int i = 0; i < 32; i++)
		in[5 + i] = (uint8_t)('a' + i % 26);
	static const size_t chunks[] = { sizeof(in), 2, 3, 7 };
	for (size_t c = 0; c < 4; c++) {
		struct csi_wire_msg m;
		csi_wire_msg_init(&m, 32);
		for (size_t off = 0; off < sizeof(in); off += chunks[c]) {
			size_t k = sizeof(in) - off < chunks[c] ? sizeof(in) - off : chunks[c];
			CHECK_INT(csi_wire_msg_feed(&m, in + off, k), CSI_WIRE_MSG_OK);
		}
		CHECK(csi_wire_msg_complete(&m));
		size_t len;
		uint8_t *b = csi_wire_msg_take(&m, &len);
		CHECK_INT(len, 32);
		CHECK(b && memcmp(b, in + 5, 32) == 0);
		free(b);
		csi_wire_msg_release(&m);
	}
}

static void test_msg_empty_message(void)
{
	/* ProbeRequest{} is zero bytes: a complete message that allocates nothing */
	static const uint8_t in[] = { 0, 0, 0, 0, 0 };
	struct csi_wire_msg m;
	csi_wire_msg_init(&m, 0);
	CHECK_INT(feed_bytewise(&m, in, sizeof(in)), CSI_WIRE_MSG_OK);
	CHECK(csi_wire_msg_complete(&m));
	CHECK(!csi_wire_msg_empty(&m));
	size_t len = 99;
	CHECK(csi_wire_msg_take(&m, &len) == NULL);
	CHECK_INT(len, 0);
	csi_wire_msg_release(&m);

	/* no bytes at all: not complete, and "empty" (the server says "no request message") */
	csi_wire_msg_init(&m, 16);
	CHECK(!csi_wire_msg_complete(&m));
	CHECK(csi_wire_msg_empty(&m));
	csi_wire_msg_release(&m);
}

static void test_msg_truncated(void)
{
	static const uint8_t in[] = { 0, 0, 0, 0, 10, 'a', 'b', 'c' };
	struct csi_wire_msg m;
	csi_wire_msg_init(&m, 16);
	CHECK_INT(csi_wire_msg_feed(&m, in, sizeof(in)), CSI_WIRE_MSG_OK);
	CHECK(!csi_wire_msg_complete(&m));
	CHECK(!csi_wire_msg_empty(&m)); /* "truncated request message" */
	csi_wire_msg_release(&m);
	CHECK(m.buf == NULL);
	csi_wire_msg_release(&m); /* twice is harmless */

	/* a prefix cut short is truncated too */
	csi_wire_msg_init(&m, 16);
	CHECK_INT(csi_wire_msg_feed(&m, in, 3), CSI_WIRE_MSG_OK);
	CHECK(!csi_wire_msg_complete(&m));
	CHECK(!csi_wire_msg_empty(&m));
	CHECK(m.buf == NULL);
	csi_wire_msg_release(&m);
}

static void test_msg_limit(void)
{
	static const struct {
		size_t limit;
		uint32_t announced;
		enum csi_wire_msg_err want;
	} cases[] = {
		{ 8, 8, CSI_WIRE_MSG_OK },
		{ 8, 9, CSI_WIRE_MSG_TOO_LARGE },
		{ 0, 0, CSI_WIRE_MSG_OK },
		{ 0, 1, CSI_WIRE_MSG_TOO_LARGE },
		{ 4 << 20, 4 << 20, CSI_WIRE_MSG_OK },
		{ 4 << 20, (4 << 20) + 1, CSI_WIRE_MSG_TOO_LARGE },
		{ 4 << 20, UINT32_MAX, CSI_WIRE_MSG_TOO_LARGE },
		{ 4 << 20, 0x80000000u, CSI_WIRE_MSG_TOO_LARGE },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct csi_wire_msg m;
		uint8_t pfx[5];
		csi_wire_msg_init(&m, cases[i].limit);
		csi_wire_msg_prefix(pfx, cases[i].announced);
		/* the verdict comes with the prefix, before any byte of the body */
		CHECK_INT(feed_bytewise(&m, pfx, 5), cases[i].want);
		if (cases[i].want == CSI_WIRE_MSG_TOO_LARGE) {
			/* nothing of the announced size was allocated */
			CHECK(m.buf == NULL);
			CHECK(!csi_wire_msg_complete(&m));
			/* the error sticks; more bytes are ignored */
			CHECK_INT(csi_wire_msg_feed(&m, (const uint8_t *)"abc", 3),
				  CSI_WIRE_MSG_TOO_LARGE);
			CHECK_INT(m.got, 0);
		} else if (cases[i].announced) {
			uint8_t *body = calloc(1, cases[i].announced);
			CHECK_INT(csi_wire_msg_feed(&m, body, cases[i].announced), CSI_WIRE_MSG_OK);
			CHECK(csi_wire_msg_complete(&m));
			free(body);
		} else {
			CHECK(csi_wire_msg_complete(&m));
		}
		csi_wire_msg_release(&m);
	}
}

static void test_msg_compressed(void)
{
	static const struct {
		uint8_t in[8];
		size_t n;
	} cases[] = {
		{ { 1, 0, 0, 0, 2, 'h', 'i' }, 7 },
		{ { 1, 0, 0, 0, 0 }, 5 },        /* even an empty one */
		{ { 0x80, 0, 0, 0, 1, 'x' }, 6 }, /* any flag but 0 */
		{ { 1, 0xff, 0xff, 0xff, 0xff }, 5 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct csi_wire_msg m;
		csi_wire_msg_init(&m, 1 << 20);
		CHECK_INT(csi_wire_msg_feed(&m, cases[i].in, cases[i].n), CSI_WIRE_MSG_COMPRESSED);
		CHECK(!csi_wire_msg_complete(&m));
		CHECK(m.buf == NULL);
		CHECK_INT(csi_wire_msg_feed(&m, cases[i].in, 1), CSI_WIRE_MSG_COMPRESSED);
		csi_wire_msg_release(&m);
	}
}

static void test_msg_too_many(void)
{
	static const struct {
		const char *name;
		uint8_t first[16];
		size_t n1;
		uint8_t second[16];
		size_t n2;
	} cases[] = {
		{ "one byte more in the same frame", { 0, 0, 0, 0, 2, 'o', 'k', '!' }, 8, { 0 }, 0 },
		{ "a second message in the same frame",
		  { 0, 0, 0, 0, 1, 'a', 0, 0, 0, 0, 1, 'b' }, 12, { 0 }, 0 },
		{ "a second frame", { 0, 0, 0, 0, 2, 'o', 'k' }, 7, { 'x' }, 1 },
		{ "a second empty message", { 0, 0, 0, 0, 0 }, 5, { 0, 0, 0, 0, 0 }, 5 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct csi_wire_msg m;
		csi_wire_msg_init(&m, 64);
		enum csi_wire_msg_err e = csi_wire_msg_feed(&m, cases[i].first, cases[i].n1);
		if (cases[i].n2)
			e = csi_wire_msg_feed(&m, cases[i].second, cases[i].n2);
		if (e != CSI_WIRE_MSG_TOO_MANY)
			fprintf(stderr, "case: %s\n", cases[i].name);
		CHECK_INT(e, CSI_WIRE_MSG_TOO_MANY);
		CHECK(!csi_wire_msg_complete(&m));
		/* the refused message is freed at once: the server counts it nowhere */
		CHECK(m.buf == NULL);
		CHECK_INT(csi_wire_msg_feed(&m, (const uint8_t *)"z", 1), CSI_WIRE_MSG_TOO_MANY);
		csi_wire_msg_release(&m);
	}
}

static void test_msg_prefix(void)
{
	uint8_t p[5];
	csi_wire_msg_prefix(p, 0x01020304);
	CHECK(memcmp(p, "\x00\x01\x02\x03\x04", 5) == 0);
	csi_wire_msg_prefix(p, 0);
	CHECK(memcmp(p, "\x00\x00\x00\x00\x00", 5) == 0);
	csi_wire_msg_prefix(p, UINT32_MAX);
	CHECK(memcmp(p, "\x00\xff\xff\xff\xff", 5) == 0);
	/* what one side writes the other reads as the same length */
	struct csi_wire_msg m;
	csi_wire_msg_init(&m, SIZE_MAX);
	csi_wire_msg_prefix(p, 300);
	CHECK_INT(csi_wire_msg_feed(&m, p, 5), CSI_WIRE_MSG_OK);
	CHECK_INT(m.len, 300);
	csi_wire_msg_release(&m);
}

/* ---- outcome mapping (gRPC's doc/http-grpc-status-mapping.md and PROTOCOL-HTTP2.md) ---- */

/*
 * A server-streaming body splits into its messages, an empty one included; a body cut inside a
 * prefix or a message, a message over the limit or a compressed one is reported, never read past.
 */
static void test_next_splits_stream(void)
{
	const uint8_t body[] = { 0, 0, 0, 0, 2, 'h', 'i', 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 'a', 'b', 'c' };
	size_t off = 0;
	const uint8_t *m;
	uint32_t n;
	CHECK_INT(csi_wire_next(body, sizeof(body), &off, 16, &m, &n), CSI_WIRE_NEXT_MSG);
	CHECK(n == 2 && memcmp(m, "hi", 2) == 0);
	CHECK_INT(csi_wire_next(body, sizeof(body), &off, 16, &m, &n), CSI_WIRE_NEXT_MSG);
	CHECK_INT(n, 0);
	CHECK_INT(csi_wire_next(body, sizeof(body), &off, 16, &m, &n), CSI_WIRE_NEXT_MSG);
	CHECK(n == 3 && memcmp(m, "abc", 3) == 0);
	CHECK_INT(csi_wire_next(body, sizeof(body), &off, 16, &m, &n), CSI_WIRE_NEXT_END);
	CHECK_INT(off, sizeof(body));

	off = 0;
	CHECK_INT(csi_wire_next(body, 3, &off, 16, &m, &n), CSI_WIRE_NEXT_TRUNCATED);
	CHECK_INT(csi_wire_next(body, 6, &off, 16, &m, &n), CSI_WIRE_NEXT_TRUNCATED);
	CHECK_INT(off, 0);
	CHECK_INT(csi_wire_next(body, sizeof(body), &off, 1, &m, &n), CSI_WIRE_NEXT_TOO_LARGE);
	const uint8_t zipped[] = { 1, 0, 0, 0, 1, 'x' };
	CHECK_INT(csi_wire_next(zipped, sizeof(zipped), &off, 16, &m, &n),
		  CSI_WIRE_NEXT_COMPRESSED);
	const uint8_t huge[] = { 0, 0xff, 0xff, 0xff, 0xff, 'x' };
	CHECK_INT(csi_wire_next(huge, sizeof(huge), &off, UINT32_MAX, &m, &n),
		  CSI_WIRE_NEXT_TRUNCATED);
}

static void test_code_from_http(void)
{
	static const struct {
		int http;
		int code;
	} cases[] = {
		{ 400, CSI_CODE_INTERNAL },
		{ 401, CSI_CODE_UNAUTHENTICATED },
		{ 403, CSI_CODE_PERMISSION_DENIED },
		{ 404, CSI_CODE_UNIMPLEMENTED },
		{ 429, CSI_CODE_UNAVAILABLE },
		{ 502, CSI_CODE_UNAVAILABLE },
		{ 503, CSI_CODE_UNAVAILABLE },
		{ 504, CSI_CODE_UNAVAILABLE },
		{ 405, CSI_CODE_UNKNOWN },
		{ 415, CSI_CODE_UNKNOWN },
		{ 500, CSI_CODE_UNKNOWN },
		{ 302, CSI_CODE_UNKNOWN },
		{ 0, CSI_CODE_UNKNOWN },
		{ -1, CSI_CODE_UNKNOWN },
		{ 999, CSI_CODE_UNKNOWN },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		CHECK_INT(csi_wire_code_from_http(cases[i].http), cases[i].code);
}

static void test_code_from_rst(void)
{
	static const struct {
		uint32_t h2;
		int code;
	} cases[] = {
		{ 0x0, CSI_CODE_INTERNAL },           /* NO_ERROR before any status */
		{ 0x1, CSI_CODE_INTERNAL },           /* PROTOCOL_ERROR */
		{ 0x2, CSI_CODE_INTERNAL },           /* INTERNAL_ERROR */
		{ 0x3, CSI_CODE_INTERNAL },           /* FLOW_CONTROL_ERROR */
		{ 0x4, CSI_CODE_INTERNAL },           /* SETTINGS_TIMEOUT */
		{ 0x5, CSI_CODE_INTERNAL },           /* STREAM_CLOSED */
		{ 0x6, CSI_CODE_INTERNAL },           /* FRAME_SIZE_ERROR */
		{ 0x7, CSI_CODE_UNAVAILABLE },        /* REFUSED_STREAM: safe to retry */
		{ 0x8, CSI_CODE_CANCELLED },          /* CANCEL */
		{ 0x9, CSI_CODE_INTERNAL },           /* COMPRESSION_ERROR */
		{ 0xa, CSI_CODE_INTERNAL },           /* CONNECT_ERROR */
		{ 0xb, CSI_CODE_RESOURCE_EXHAUSTED }, /* ENHANCE_YOUR_CALM */
		{ 0xc, CSI_CODE_PERMISSION_DENIED },  /* INADEQUATE_SECURITY */
		{ 0xd, CSI_CODE_INTERNAL },           /* HTTP_1_1_REQUIRED */
		{ 0xffffffffu, CSI_CODE_INTERNAL },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		CHECK_INT(csi_wire_code_from_rst(cases[i].h2), cases[i].code);
}

int main(void)
{
	RUN(test_timeout_parse);
	RUN(test_timeout_format);
	RUN(test_timeout_round_trip);
	RUN(test_message_encode);
	RUN(test_message_decode);
	RUN(test_message_decode_truncates);
	RUN(test_message_round_trip);
	RUN(test_msg_split_prefix);
	RUN(test_msg_whole_and_chunked);
	RUN(test_msg_empty_message);
	RUN(test_msg_truncated);
	RUN(test_msg_limit);
	RUN(test_msg_compressed);
	RUN(test_next_splits_stream);
	RUN(test_msg_too_many);
	RUN(test_msg_prefix);
	RUN(test_code_from_http);
	RUN(test_code_from_rst);
	return CHECK_DONE();
}
