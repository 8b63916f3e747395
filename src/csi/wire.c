/*
 * csi/wire: grpc-timeout, grpc-message and length-prefixed message handling (see wire.h).
 *
 * These are the parsers of what a peer sends besides HTTP/2 itself, so each is written to
 * accept any bytes: lengths are checked before they are used, numbers saturate rather than
 * overflow, and nothing is allocated beyond the caller's limit.
 */
#include "csi/wire.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <nghttp2/nghttp2.h>

#include "base/strbuf.h"
#include "base/xalloc.h"

/* ---- grpc-timeout ---- */

int64_t csi_wire_timeout_parse(const char *v, size_t len)
{
	if (len < 2 || len > 9)
		return -1;
	int64_t n = 0;
	for (size_t i = 0; i + 1 < len; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -1;
		n = n * 10 + (v[i] - '0'); /* at most 8 digits: no overflow */
	}
	int64_t unit;
	switch (v[len - 1]) {
	case 'H': unit = 3600LL * 1000000000LL; break;
	case 'M': unit = 60LL * 1000000000LL; break;
	case 'S': unit = 1000000000LL; break;
	case 'm': unit = 1000000LL; break;
	case 'u': unit = 1000LL; break;
	case 'n': unit = 1; break;
	default: return -1;
	}
	if (n > INT64_MAX / unit)
		return INT64_MAX;
	return n * unit;
}

void csi_wire_timeout_format(int64_t ns, char *out)
{
	static const struct {
		char unit;
		int64_t ns;
	} units[] = { { 'n', 1 }, { 'u', 1000 }, { 'm', 1000000 }, { 'S', 1000000000LL },
		      { 'M', 60LL * 1000000000LL }, { 'H', 3600LL * 1000000000LL } };
	if (ns < 1)
		ns = 1;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		int64_t v = ns / units[i].ns + (ns % units[i].ns != 0);
		if (v <= 99999999 || i + 1 == sizeof(units) / sizeof(units[0])) {
			if (v > 99999999)
				v = 99999999;
			snprintf(out, 16, "%d%c", (int)v, units[i].unit);
			return;
		}
	}
}

/* ---- grpc-message ---- */

void csi_wire_message_encode(const char *msg, struct strbuf *out)
{
	static const char hex[] = "0123456789ABCDEF";
	for (const unsigned char *p = (const unsigned char *)msg; *p; p++) {
		/* A header value must not begin or end with a space (RFC 9113 8.2.1): nghttp2 resets
		 * the stream of one that does, so an edge space goes as %20. */
		bool edge_space = *p == ' ' && ((const char *)p == msg || !p[1]);
		if (*p >= 0x20 && *p <= 0x7e && *p != '%' && !edge_space) {
			strbuf_addch(out, (char)*p);
		} else {
			strbuf_addch(out, '%');
			strbuf_addch(out, hex[*p >> 4]);
			strbuf_addch(out, hex[*p & 15]);
		}
	}
}

void csi_wire_message_decode(const uint8_t *v, size_t len, char *out, size_t outlen)
{
	size_t o = 0;
	if (!outlen)
		return;
	for (size_t i = 0; i < len && o + 1 < outlen; i++) {
		int hi, lo;
		if (v[i] == '%' && i + 2 < len && (hi = hex_digit(v[i + 1])) >= 0 &&
		    (lo = hex_digit(v[i + 2])) >= 0 && (hi | lo) != 0) {
			out[o++] = (char)(hi << 4 | lo);
			i += 2;
		} else {
			out[o++] = (char)v[i];
		}
	}
	out[o] = '\0';
}

/* ---- length-prefixed messages ---- */

void csi_wire_msg_init(struct csi_wire_msg *m, size_t limit)
{
	memset(m, 0, sizeof(*m));
	m->limit = limit;
}

enum csi_wire_msg_err csi_wire_msg_feed(struct csi_wire_msg *m, const uint8_t *data, size_t n)
{
	while (n && !m->err) {
		if (m->hdr_got < 5) {
			size_t k = 5 - m->hdr_got < n ? 5 - m->hdr_got : n;
			memcpy(m->hdr + m->hdr_got, data, k);
			m->hdr_got += k;
			data += k;
			n -= k;
			if (m->hdr_got < 5)
				break;
			m->len = (uint32_t)m->hdr[1] << 24 | (uint32_t)m->hdr[2] << 16 |
				 (uint32_t)m->hdr[3] << 8 | m->hdr[4];
			if (m->hdr[0] != 0)
				m->err = CSI_WIRE_MSG_COMPRESSED;
			else if (m->len > m->limit)
				m->err = CSI_WIRE_MSG_TOO_LARGE;
			else if (m->len)
				m->buf = xmalloc(m->len);
			continue;
		}
		if (m->got == m->len) {
			/*
			 * The message is refused: free it now, not when its stream closes, which the
			 * peer may put off while the bytes would count against no bound.
			 */
			m->err = CSI_WIRE_MSG_TOO_MANY;
			csi_wire_msg_release(m);
			m->got = 0;
			break;
		}
		size_t k = m->len - m->got < n ? m->len - m->got : n;
		memcpy(m->buf + m->got, data, k);
		m->got += k;
		data += k;
		n -= k;
	}
	return m->err;
}

enum csi_wire_next csi_wire_next(const uint8_t *buf, size_t len, size_t *off, size_t limit,
				 const uint8_t **msg, uint32_t *msglen)
{
	assert(*off <= len);
	size_t left = len - *off;
	if (!left)
		return CSI_WIRE_NEXT_END;
	if (left < 5)
		return CSI_WIRE_NEXT_TRUNCATED;
	const uint8_t *p = buf + *off;
	uint32_t n = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
	if (p[0] != 0)
		return CSI_WIRE_NEXT_COMPRESSED;
	if (n > limit)
		return CSI_WIRE_NEXT_TOO_LARGE;
	if (n > left - 5)
		return CSI_WIRE_NEXT_TRUNCATED;
	*msg = p + 5;
	*msglen = n;
	*off += 5 + (size_t)n;
	return CSI_WIRE_NEXT_MSG;
}

bool csi_wire_msg_complete(const struct csi_wire_msg *m)
{
	return !m->err && m->hdr_got == 5 && m->got == m->len;
}

bool csi_wire_msg_empty(const struct csi_wire_msg *m)
{
	return m->hdr_got == 0;
}

uint8_t *csi_wire_msg_take(struct csi_wire_msg *m, size_t *len)
{
	uint8_t *b = m->buf;
	*len = m->got;
	m->buf = NULL;
	m->got = 0;
	m->hdr_got = 0;
	m->len = 0;
	return b;
}

void csi_wire_msg_release(struct csi_wire_msg *m)
{
	free(m->buf);
	m->buf = NULL;
}

void csi_wire_msg_prefix(uint8_t out[5], uint32_t len)
{
	out[0] = 0;
	out[1] = (uint8_t)(len >> 24);
	out[2] = (uint8_t)(len >> 16);
	out[3] = (uint8_t)(len >> 8);
	out[4] = (uint8_t)len;
}

/* ---- outcome mapping ---- */

int csi_wire_code_from_http(int http_status)
{
	switch (http_status) {
	case 400: return CSI_CODE_INTERNAL;
	case 401: return CSI_CODE_UNAUTHENTICATED;
	case 403: return CSI_CODE_PERMISSION_DENIED;
	case 404: return CSI_CODE_UNIMPLEMENTED;
	case 429:
	case 502:
	case 503:
	case 504: return CSI_CODE_UNAVAILABLE;
	default: return CSI_CODE_UNKNOWN;
	}
}

int csi_wire_code_from_rst(uint32_t h2_error)
{
	switch (h2_error) {
	case 0x7: /* REFUSED_STREAM: the server never began the call, safe to retry */
		return CSI_CODE_UNAVAILABLE;
	case 0x8: /* CANCEL */
		return CSI_CODE_CANCELLED;
	case 0xb: /* ENHANCE_YOUR_CALM */
		return CSI_CODE_RESOURCE_EXHAUSTED;
	case 0xc: /* INADEQUATE_SECURITY */
		return CSI_CODE_PERMISSION_DENIED;
	default:
		return CSI_CODE_INTERNAL;
	}
}

/* ---- socket I/O ---- */

ssize_t csi_wire_send(int fd, const uint8_t *data, size_t len)
{
	for (;;) {
		ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
		if (n >= 0)
			return n;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return NGHTTP2_ERR_WOULDBLOCK;
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	}
}
