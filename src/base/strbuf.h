/*
 * strbuf: a growable byte buffer that is always NUL-terminated.
 *
 * Invariants:
 *   - `buf` is never NULL. An empty strbuf points at a shared empty string and owns no memory.
 *   - `buf[len] == '\0'`, so `buf` can be used as a C string (it may also hold binary data).
 *   - `alloc` is 0 when no memory is owned; otherwise `len < alloc`.
 *
 * Ownership: the strbuf owns `buf`. strbuf_release() frees it; strbuf_detach() hands it to the
 * caller (who frees it with free()) and leaves the strbuf empty.
 *
 *     struct strbuf sb = STRBUF_INIT;
 *     strbuf_addf(&sb, "%s=%d", key, value);
 *     use(sb.buf);
 *     strbuf_release(&sb);
 */
#ifndef KCSI_BASE_STRBUF_H
#define KCSI_BASE_STRBUF_H

#include <stdarg.h>
#include <stddef.h>

extern char strbuf_empty[];

struct strbuf {
	size_t alloc;
	size_t len;
	char *buf;
};

#define STRBUF_INIT { 0, 0, strbuf_empty }

/* Life cycle */
void strbuf_init(struct strbuf *sb, size_t hint);
void strbuf_release(struct strbuf *sb);
char *strbuf_detach(struct strbuf *sb, size_t *len);

/* Size */
void strbuf_grow(struct strbuf *sb, size_t extra);
void strbuf_setlen(struct strbuf *sb, size_t len);
static inline void strbuf_reset(struct strbuf *sb) { strbuf_setlen(sb, 0); }

/* Adding data */
void strbuf_add(struct strbuf *sb, const void *data, size_t len);
void strbuf_addstr(struct strbuf *sb, const char *s);
void strbuf_addch(struct strbuf *sb, char c);
void strbuf_addf(struct strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void strbuf_vaddf(struct strbuf *sb, const char *fmt, va_list ap);
/* Appends s with '"' and '\\' escaped and control bytes as \n, \t or \xNN: klog's quoting. */
void strbuf_addquoted(struct strbuf *sb, const char *s);

/*
 * Appends s[0..len) as a JSON string literal: '"', '\\' and control bytes escaped (\n, \r, \t,
 * else \u00XX, DEL too), and each byte that does not start valid UTF-8 written as \ufffd, as
 * Go's encoding/json does, so the text is valid JSON whatever the bytes.
 */
void strbuf_addjson(struct strbuf *sb, const char *s, size_t len);

/* Editing */
void strbuf_trim(struct strbuf *sb);

/* A new string (the caller frees it): s with every `from` (not empty) replaced by `to`. */
char *str_replace_all(const char *s, const char *from, const char *to);

/* ---- small helpers for fixed buffers ---- */
/* Formats into a caller's error buffer (the `char *err, size_t errlen` pairs of many APIs);
 * NULL or a zero length is a no-op. */
void errbuf_printf(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The value of one hex digit (either case), or -1. */
int hex_digit(int c);

#endif
