/*
 * csi/wire: the pieces of gRPC's HTTP/2 mapping that kcsi's client and server share, on top of
 * nghttp2 (which does the HTTP/2 framing, HPACK and flow control).
 *
 * A unary gRPC call is one HTTP/2 stream: request HEADERS (":path" = "/pkg.Service/Method",
 * "content-type: application/grpc", optional "grpc-timeout"), one length-prefixed message in
 * DATA, END_STREAM; the answer is HEADERS (":status: 200"), one length-prefixed message, and
 * trailers carrying "grpc-status" and a percent-encoded "grpc-message". An error may come as
 * a single HEADERS frame with both ("trailers-only").
 *
 * Length-prefixed message: 1 byte compressed flag, 4 bytes big-endian length, the bytes.
 * kcsi never compresses and advertises no encoding, so a set flag is an error.
 *
 * Everything here but csi_wire_send() is pure (no I/O, no locks) so that it can be tested and
 * fuzzed alone.
 */
#ifndef KCSI_CSI_WIRE_H
#define KCSI_CSI_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct strbuf;

/* gRPC status codes (the numbers are the protocol's). */
enum {
	CSI_CODE_OK = 0,
	CSI_CODE_CANCELLED = 1,
	CSI_CODE_UNKNOWN = 2,
	CSI_CODE_INVALID_ARGUMENT = 3,
	CSI_CODE_DEADLINE_EXCEEDED = 4,
	CSI_CODE_NOT_FOUND = 5,
	CSI_CODE_ALREADY_EXISTS = 6,
	CSI_CODE_PERMISSION_DENIED = 7,
	CSI_CODE_RESOURCE_EXHAUSTED = 8,
	CSI_CODE_FAILED_PRECONDITION = 9,
	CSI_CODE_ABORTED = 10,
	CSI_CODE_OUT_OF_RANGE = 11,
	CSI_CODE_UNIMPLEMENTED = 12,
	CSI_CODE_INTERNAL = 13,
	CSI_CODE_UNAVAILABLE = 14,
	CSI_CODE_DATA_LOSS = 15,
	CSI_CODE_UNAUTHENTICATED = 16,
};

/* Largest header block either side accepts (nghttp2 refuses the stream beyond it). */
#define CSI_WIRE_MAX_HEADER_LIST (16 * 1024)

/* ---- grpc-timeout ---- */
/*
 * Parses a grpc-timeout value ("1..8 digits" then one of H M S m u n) into nanoseconds,
 * saturating at INT64_MAX. Returns -1 when the value is malformed.
 */
int64_t csi_wire_timeout_parse(const char *v, size_t len);
/* Formats a positive duration as grpc-timeout (at most 8 digits, rounded up). out >= 16 bytes. */
void csi_wire_timeout_format(int64_t ns, char *out);

/* ---- grpc-message ---- */
/*
 * Appends msg percent-encoded: bytes outside 0x20..0x7e, '%', and a space at either end (which
 * RFC 9113 forbids at the edges of a header value) become %XX.
 */
void csi_wire_message_encode(const char *msg, struct strbuf *out);
/*
 * Decodes a grpc-message value into out (always NUL-terminated, truncated to outlen - 1).
 * A '%' not followed by two hex digits is kept as it is, as gRPC's decoders do. A decoded NUL
 * byte would cut the message short, so it is kept as "%00".
 */
void csi_wire_message_decode(const uint8_t *v, size_t len, char *out, size_t outlen);

/* ---- the one message of a unary stream ---- */
enum csi_wire_msg_err {
	CSI_WIRE_MSG_OK = 0,
	CSI_WIRE_MSG_TOO_LARGE,  /* the prefix announced more than the limit */
	CSI_WIRE_MSG_COMPRESSED, /* the compressed flag was set */
	CSI_WIRE_MSG_TOO_MANY,   /* bytes after the first message */
};

/*
 * Collects the length-prefixed message of a stream from DATA chunks of any size. `buf` is
 * allocated once, when the prefix has been read, to the announced length (at most `limit`).
 * Once feed() has returned an error the state keeps that error, ignores further bytes and holds
 * no buffer (`buf` is NULL): a refused message costs nothing while its stream stays open.
 */
struct csi_wire_msg {
	size_t limit;      /* largest message accepted, bytes */
	uint8_t hdr[5];
	size_t hdr_got;
	uint32_t len;      /* announced length, valid once hdr_got == 5 */
	uint8_t *buf;      /* malloc'd, len bytes (NULL for an empty message) */
	size_t got;
	enum csi_wire_msg_err err;
};
void csi_wire_msg_init(struct csi_wire_msg *m, size_t limit);
enum csi_wire_msg_err csi_wire_msg_feed(struct csi_wire_msg *m, const uint8_t *data, size_t n);
/* True once a whole message has arrived (and no error). */
bool csi_wire_msg_complete(const struct csi_wire_msg *m);
/* True when no byte of a message has arrived. */
bool csi_wire_msg_empty(const struct csi_wire_msg *m);
/* Takes the message bytes (caller frees); the state is left empty. */
uint8_t *csi_wire_msg_take(struct csi_wire_msg *m, size_t *len);
void csi_wire_msg_release(struct csi_wire_msg *m);
/* Writes the 5-byte prefix of an uncompressed message of len bytes. */
void csi_wire_msg_prefix(uint8_t out[5], uint32_t len);

/* ---- the messages of a server-streaming answer ---- */
enum csi_wire_next {
	CSI_WIRE_NEXT_MSG = 0,     /* *msg, *msglen: the next message; *off moved past it */
	CSI_WIRE_NEXT_END,         /* no bytes left */
	CSI_WIRE_NEXT_TRUNCATED,   /* bytes left that are not a whole message */
	CSI_WIRE_NEXT_TOO_LARGE,   /* the prefix announced more than limit */
	CSI_WIRE_NEXT_COMPRESSED,  /* the compressed flag was set */
};
/* Reads the length-prefixed message at buf[*off..len); msg points into buf. */
enum csi_wire_next csi_wire_next(const uint8_t *buf, size_t len, size_t *off, size_t limit,
				 const uint8_t **msg, uint32_t *msglen);

/* ---- mapping HTTP/2 outcomes to gRPC codes (the gRPC HTTP/2 spec's tables) ---- */
/* A non-200 :status without grpc-status. */
int csi_wire_code_from_http(int http_status);
/* A stream reset with an HTTP/2 error code. */
int csi_wire_code_from_rst(uint32_t h2_error);

/* ---- socket I/O (the send callback of both sides' nghttp2 sessions) ---- */
/*
 * send(2) on a non-blocking socket without SIGPIPE, retried on EINTR. Returns the bytes written,
 * NGHTTP2_ERR_WOULDBLOCK when the socket is full, or NGHTTP2_ERR_CALLBACK_FAILURE with errno set.
 */
ssize_t csi_wire_send(int fd, const uint8_t *data, size_t len);

#endif
