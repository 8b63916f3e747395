/*
 * libFuzzer: the kube client's HTTP parsing (src/kube/http_parse.c), which reads what the API
 * server (or anything at its address) sends. The first byte picks the parser:
 *   0: the server URL;
 *   1: a response head, given whole and as every growing prefix (a prefix must never parse to a
 *      different head than the whole);
 *   2: a chunked body, decoded in one piece and in pieces whose size comes from the second byte;
 *      both must give the same bytes and the same verdict.
 */
#include "fuzz_common.h"
#include "base/strbuf.h"
#include "kube/http.h"

static int collect(void *ud, const char *p, size_t n)
{
	strbuf_add(ud, p, n);
	return 0;
}

/* Returns -1 (malformed), 0 (more needed) or 1 (done); body bytes into out. */
static int decode(const char *in, size_t len, size_t piece, struct strbuf *out)
{
	struct http_chunked d = { 0 };
	char err[160];
	for (size_t off = 0; off < len; off += piece) {
		size_t n = len - off < piece ? len - off : piece;
		bool stopped;
		ssize_t r = http_chunked_feed(&d, in + off, n, collect, out, &stopped, err, sizeof(err));
		if (r < 0)
			return -1;
		if ((size_t)r > n || stopped)
			abort();
		if (d.done)
			return 1;
		if ((size_t)r != n)
			abort(); /* not done and not stopped: everything must be consumed */
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	const char *in = (const char *)data + 2;
	size_t len = size - 2;
	char err[200];
	switch (data[0] % 3) {
	case 0: {
		char *s = fuzz_cstr(data + 2, len);
		struct http_url u;
		if (http_url_parse(s, &u, err, sizeof(err)) == 0) {
			if (!u.host || !u.host[0] || !u.port || !u.prefix)
				abort();
			http_host_is_ip(u.host);
			http_url_free(&u);
		}
		free(s);
		break;
	}
	case 1: {
		struct http_head whole, part;
		ssize_t n = http_head_parse(in, len, &whole, err, sizeof(err));
		if (n > (ssize_t)len)
			abort();
		for (size_t i = 0; i < len && i < 4096; i++) {
			ssize_t m = http_head_parse(in, i, &part, err, sizeof(err));
			if (m > 0 && (m != n || part.status != whole.status ||
				      part.content_length != whole.content_length ||
				      part.chunked != whole.chunked))
				abort();
		}
		break;
	}
	case 2: {
		struct strbuf a = STRBUF_INIT, b = STRBUF_INIT;
		int ra = decode(in, len, len ? len : 1, &a);
		int rb = decode(in, len, (size_t)data[1] % 17 + 1, &b);
		if (ra != rb || (ra >= 0 && (a.len != b.len || memcmp(a.buf, b.buf, a.len) != 0)))
			abort();
		strbuf_release(&a);
		strbuf_release(&b);
		break;
	}
	}
	return 0;
}
