/*
 * The parsing half of kube/http: the server URL, response heads and chunked bodies. Everything
 * here is bounded by the caller's buffer or by a fixed limit, and never trusts a length it read.
 */
#include "kube/http.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/strbuf.h"
#include "base/xalloc.h"

/* ---- URL ---- */

bool http_host_is_ip(const char *host)
{
	unsigned char a[16];
	return inet_pton(AF_INET, host, a) == 1 || inet_pton(AF_INET6, host, a) == 1;
}

/* A malloc'd copy of s[0..n) with %XX decoded; NULL when an escape is malformed. */
static char *pct_decode(const char *s, size_t n)
{
	char *out = xmalloc(n + 1), *o = out;
	for (size_t i = 0; i < n; i++) {
		if (s[i] != '%') {
			*o++ = s[i];
			continue;
		}
		if (i + 2 >= n || hex_digit(s[i + 1]) < 0 || hex_digit(s[i + 2]) < 0) {
			free(out);
			return NULL;
		}
		*o++ = (char)(hex_digit(s[i + 1]) * 16 + hex_digit(s[i + 2]));
		i += 2;
	}
	*o = '\0';
	return out;
}

int http_url_parse(const char *s, struct http_url *u, char *err, size_t errlen)
{
	memset(u, 0, sizeof(*u));
	const char *p;
	if (strncasecmp(s, "https://", 8) == 0) {
		u->tls = true;
		p = s + 8;
	} else if (strncasecmp(s, "http://", 7) == 0) {
		p = s + 7;
	} else {
		errbuf_printf(err, errlen, "the URL must start with http:// or https://");
		return -1;
	}
	size_t alen = strcspn(p, "/?#");
	const char *auth = p, *path = p + alen;
	const char *at = NULL;
	for (const char *q = auth; q < auth + alen; q++)
		if (*q == '@')
			at = q;
	if (at) {
		u->userinfo = pct_decode(auth, (size_t)(at - auth));
		if (!u->userinfo) {
			errbuf_printf(err, errlen, "the URL's user information has a bad %% escape");
			goto fail;
		}
		alen -= (size_t)(at + 1 - auth);
		auth = at + 1;
	}
	const char *hend, *port = NULL;
	size_t plen = 0;
	if (alen && auth[0] == '[') {
		hend = memchr(auth, ']', alen);
		if (!hend) {
			errbuf_printf(err, errlen, "the URL's IPv6 address has no closing ']'");
			goto fail;
		}
		u->host = xstrndup(auth + 1, (size_t)(hend - auth - 1));
		hend++;
	} else {
		hend = memchr(auth, ':', alen);
		if (!hend)
			hend = auth + alen;
		u->host = xstrndup(auth, (size_t)(hend - auth));
	}
	if (hend < auth + alen) {
		if (*hend != ':') {
			errbuf_printf(err, errlen, "the URL's host is followed by something else than a port");
			goto fail;
		}
		port = hend + 1;
		plen = (size_t)(auth + alen - port);
	}
	if (!u->host[0] || strpbrk(u->host, " \t\r\n\\%[]")) {
		errbuf_printf(err, errlen, "the URL has no valid host");
		goto fail;
	}
	if (port && plen) {
		long v = 0;
		for (size_t i = 0; i < plen; i++) {
			if (!isdigit((unsigned char)port[i]) || i >= 5) {
				v = -1;
				break;
			}
			v = v * 10 + (port[i] - '0');
		}
		if (v < 1 || v > 65535) {
			errbuf_printf(err, errlen, "the URL's port is not a number from 1 to 65535");
			goto fail;
		}
		u->port = xstrndup(port, plen);
	} else {
		u->port = xstrdup(u->tls ? "443" : "80");
	}
	if (*path == '?' || *path == '#' || strpbrk(path, "?# \t\r\n")) {
		errbuf_printf(err, errlen, "the URL may have a path but no query, fragment or spaces");
		goto fail;
	}
	size_t n = strlen(path);
	while (n && path[n - 1] == '/')
		n--;
	u->prefix = xstrndup(path, n);
	return 0;
fail:
	http_url_free(u);
	return -1;
}

void http_url_free(struct http_url *u)
{
	free(u->host);
	free(u->port);
	free(u->prefix);
	if (u->userinfo)
		memset(u->userinfo, 0, strlen(u->userinfo));
	free(u->userinfo);
	memset(u, 0, sizeof(*u));
}

/* ---- response head ---- */

/* true when the comma-separated list v[0..n) holds token (case-insensitive). */
static bool list_has(const char *v, size_t n, const char *token)
{
	size_t tl = strlen(token);
	size_t i = 0;
	while (i < n) {
		while (i < n && (v[i] == ',' || v[i] == ' ' || v[i] == '\t'))
			i++;
		size_t j = i;
		while (j < n && v[j] != ',')
			j++;
		size_t k = j;
		while (k > i && (v[k - 1] == ' ' || v[k - 1] == '\t'))
			k--;
		if (k - i == tl && strncasecmp(v + i, token, tl) == 0)
			return true;
		i = j;
	}
	return false;
}

/* true when the last coding of the list v[0..n) is token. */
static bool list_last_is(const char *v, size_t n, const char *token)
{
	while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
		n--;
	size_t i = n;
	while (i && v[i - 1] != ',')
		i--;
	while (i < n && (v[i] == ' ' || v[i] == '\t'))
		i++;
	size_t tl = strlen(token);
	return n - i == tl && strncasecmp(v + i, token, tl) == 0;
}

static bool name_is(const char *name, size_t n, const char *want)
{
	return strlen(want) == n && strncasecmp(name, want, n) == 0;
}

static bool is_tchar(unsigned char c)
{
	return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

ssize_t http_head_parse(const char *buf, size_t len, struct http_head *h, char *err, size_t errlen)
{
	/* find the empty line that ends the head: "\r\n\r\n", or "\n\n" from lenient servers */
	size_t end = 0;
	size_t scan = len < HTTP_MAX_HEAD ? len : HTTP_MAX_HEAD;
	for (size_t i = 0; i < scan; i++) {
		if (buf[i] != '\n')
			continue;
		if (i + 1 < len && buf[i + 1] == '\n') {
			end = i + 2;
			break;
		}
		if (i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n') {
			end = i + 3;
			break;
		}
	}
	if (!end) {
		if (len >= HTTP_MAX_HEAD) {
			errbuf_printf(err, errlen, "response head larger than %d bytes", HTTP_MAX_HEAD);
			return -1;
		}
		return 0;
	}
	memset(h, 0, sizeof(*h));
	h->content_length = -1;
	h->retry_after = -1;
	/* status line: HTTP/1.x SP 3DIGIT [SP reason] */
	if (end < 12 || memcmp(buf, "HTTP/1.", 7) != 0 || !isdigit((unsigned char)buf[7]) ||
	    buf[8] != ' ' || !isdigit((unsigned char)buf[9]) || !isdigit((unsigned char)buf[10]) ||
	    !isdigit((unsigned char)buf[11]) || (buf[12] != ' ' && buf[12] != '\r' && buf[12] != '\n')) {
		errbuf_printf(err, errlen, "the answer is not HTTP/1.x");
		return -1;
	}
	bool http10 = buf[7] == '0';
	h->status = (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0');
	if (h->status < 100) {
		errbuf_printf(err, errlen, "the answer has status %d", h->status);
		return -1;
	}
	bool keep_alive = false, has_te = false;
	const char *p = memchr(buf, '\n', end);
	p++;
	while ((size_t)(p - buf) < end) {
		const char *nl = memchr(p, '\n', end - (size_t)(p - buf));
		size_t ll = (size_t)(nl - p);
		if (ll && p[ll - 1] == '\r')
			ll--;
		if (ll == 0)
			break; /* the empty line */
		if (p[0] == ' ' || p[0] == '\t') {
			errbuf_printf(err, errlen, "the answer folds a header line (obsolete)");
			return -1;
		}
		const char *colon = memchr(p, ':', ll);
		size_t nlen = colon ? (size_t)(colon - p) : 0;
		for (size_t i = 0; i < nlen; i++)
			if (!is_tchar((unsigned char)p[i]))
				nlen = 0;
		if (!nlen) {
			errbuf_printf(err, errlen, "the answer has a malformed header line");
			return -1;
		}
		const char *v = colon + 1, *ve = p + ll;
		while (v < ve && (*v == ' ' || *v == '\t'))
			v++;
		while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
			ve--;
		size_t vl = (size_t)(ve - v);
		if (name_is(p, nlen, "content-length")) {
			int64_t cl = 0;
			if (!vl || vl > 18) {
				errbuf_printf(err, errlen, "the answer has a bad Content-Length");
				return -1;
			}
			for (size_t i = 0; i < vl; i++) {
				if (!isdigit((unsigned char)v[i])) {
					errbuf_printf(err, errlen, "the answer has a bad Content-Length");
					return -1;
				}
				cl = cl * 10 + (v[i] - '0');
			}
			if (h->content_length >= 0 && h->content_length != cl) {
				errbuf_printf(err, errlen, "the answer has two different Content-Lengths");
				return -1;
			}
			h->content_length = cl;
		} else if (name_is(p, nlen, "transfer-encoding")) {
			has_te = true;
			h->chunked = list_last_is(v, vl, "chunked");
		} else if (name_is(p, nlen, "connection")) {
			if (list_has(v, vl, "close"))
				h->close = true;
			if (list_has(v, vl, "keep-alive"))
				keep_alive = true;
		} else if (name_is(p, nlen, "retry-after")) {
			long ra = 0;
			size_t i = 0;
			for (; i < vl && i < 9 && isdigit((unsigned char)v[i]); i++)
				ra = ra * 10 + (v[i] - '0');
			if (i && i == vl)
				h->retry_after = ra;
		}
		p = nl + 1;
	}
	if (has_te) {
		if (!h->chunked) {
			errbuf_printf(err, errlen, "the answer uses a transfer coding other than chunked");
			return -1;
		}
		/* RFC 9112 §6.3: Transfer-Encoding overrides Content-Length; do not reuse */
		if (h->content_length >= 0)
			h->close = true;
		h->content_length = -1;
	}
	if (http10 && !keep_alive)
		h->close = true;
	return (ssize_t)end;
}

/* ---- chunked bodies ---- */

enum { C_SIZE, C_EXT, C_SIZE_LF, C_DATA, C_DATA_CR, C_DATA_LF, C_TRAILER_START, C_TRAILER, C_END_LF };

#define CHUNK_MAX_DIGITS 15 /* < 2^60 */
#define CHUNK_MAX_LINE 4096
#define CHUNK_MAX_TRAILERS (64 * 1024)

ssize_t http_chunked_feed(struct http_chunked *d, const char *in, size_t len, http_sink_fn sink,
			  void *ud, bool *stopped, char *err, size_t errlen)
{
	*stopped = false;
	size_t i = 0;
	while (i < len && !d->done) {
		unsigned char c = (unsigned char)in[i];
		switch (d->state) {
		case C_SIZE: {
			int x = hex_digit(c);
			if (x >= 0) {
				if (++d->digits > CHUNK_MAX_DIGITS) {
					errbuf_printf(err, errlen, "chunk size too large");
					return -1;
				}
				d->left = d->left * 16 + (uint64_t)x;
				i++;
				break;
			}
			if (!d->digits) {
				errbuf_printf(err, errlen, "malformed chunk size");
				return -1;
			}
			if (c == ';' || c == ' ' || c == '\t') {
				d->state = C_EXT;
				d->line = 0;
			} else if (c == '\r') {
				d->state = C_SIZE_LF;
			} else if (c == '\n') {
				d->state = d->left ? C_DATA : C_TRAILER_START;
			} else {
				errbuf_printf(err, errlen, "malformed chunk size");
				return -1;
			}
			i++;
			break;
		}
		case C_EXT:
			if (c == '\r')
				d->state = C_SIZE_LF;
			else if (c == '\n')
				d->state = d->left ? C_DATA : C_TRAILER_START;
			else if (++d->line > CHUNK_MAX_LINE) {
				errbuf_printf(err, errlen, "chunk extension too long");
				return -1;
			}
			i++;
			break;
		case C_SIZE_LF:
			if (c != '\n') {
				errbuf_printf(err, errlen, "chunk size line not ended by CRLF");
				return -1;
			}
			d->state = d->left ? C_DATA : C_TRAILER_START;
			i++;
			break;
		case C_DATA: {
			size_t n = len - i;
			if ((uint64_t)n > d->left)
				n = (size_t)d->left;
			d->left -= n;
			if (d->left == 0) {
				d->state = C_DATA_CR;
				d->digits = 0;
			}
			if (sink(ud, in + i, n) != 0) {
				*stopped = true;
				return (ssize_t)(i + n);
			}
			i += n;
			break;
		}
		case C_DATA_CR:
			if (c == '\r') {
				d->state = C_DATA_LF;
			} else if (c == '\n') {
				d->state = C_SIZE;
			} else {
				errbuf_printf(err, errlen, "chunk data longer than its size");
				return -1;
			}
			i++;
			break;
		case C_DATA_LF:
			if (c != '\n') {
				errbuf_printf(err, errlen, "chunk data not ended by CRLF");
				return -1;
			}
			d->state = C_SIZE;
			i++;
			break;
		case C_TRAILER_START:
			if (c == '\r')
				d->state = C_END_LF;
			else if (c == '\n')
				d->done = true;
			else
				d->state = C_TRAILER;
			if (++d->trailers > CHUNK_MAX_TRAILERS) {
				errbuf_printf(err, errlen, "chunked trailers too long");
				return -1;
			}
			i++;
			break;
		case C_TRAILER:
			if (c == '\n')
				d->state = C_TRAILER_START;
			if (++d->trailers > CHUNK_MAX_TRAILERS) {
				errbuf_printf(err, errlen, "chunked trailers too long");
				return -1;
			}
			i++;
			break;
		case C_END_LF:
			if (c != '\n') {
				errbuf_printf(err, errlen, "chunked body not ended by CRLF");
				return -1;
			}
			d->done = true;
			i++;
			break;
		}
	}
	return (ssize_t)i;
}
