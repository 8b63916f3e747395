/*
 * log: klog-format lines to stderr (or to --log_file).
 *
 * Each line is formatted into a stack buffer (spilling into a heap strbuf only when long) and
 * written with a single write(2) per destination, so concurrent threads never interleave within a
 * line and no lock is held while formatting.
 */
#include "base/log.h"
#include "base/strbuf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

int log_vlevel;
static int out_fd = STDERR_FILENO;
static int file_fd = -1;

static bool also_stderr; /* with a file: write each line to out_fd as well */

void log_set_verbosity(int v)
{
	log_vlevel = v;
}

int log_verbosity(void)
{
	return log_vlevel;
}

void log_set_output_fd(int fd)
{
	out_fd = fd >= 0 ? fd : STDERR_FILENO;
}

void log_set_file_fd(int fd, bool also)
{
	if (file_fd >= 0)
		close(file_fd);
	file_fd = fd;
	also_stderr = also;
}

static void write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		p += w;
		n -= (size_t)w;
	}
}

static const char *basename_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

/* Length of the valid UTF-8 sequence at p (1..4), or 0 when it is not one. */
static size_t utf8_len(const unsigned char *p)
{
	size_t n;
	unsigned cp;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		n = 2, cp = p[0] & 0x1f;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		n = 3, cp = p[0] & 0x0f;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		n = 4, cp = p[0] & 0x07;
	else
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0x80 && cp <= 0x9f))
		return 0; /* overlong, surrogate, out of range, or a C1 control */
	return n;
}

/* Escape for one byte sequence at p, or NULL when it is printed as it is (*n bytes). */
static const char *escape_of(const unsigned char *p, size_t *n, char tmp[8], bool quote)
{
	*n = 1;
	switch (*p) {
	case '\n': return "\\n";
	case '\r': return "\\r";
	case '\t': return quote ? "\\t" : NULL;
	case '"': return quote ? "\\\"" : NULL;
	case '\\': return quote ? "\\\\" : NULL;
	}
	if (*p < 0x20 || *p == 0x7f || !(*n = utf8_len(p))) {
		*n = 1;
		snprintf(tmp, 8, "\\x%02x", *p);
		return tmp;
	}
	return NULL;
}

char *log_quote(char *buf, size_t len, const char *s)
{
	size_t o = 0;
	char tmp[8];

	if (len < 8) {
		if (len)
			buf[0] = '\0';
		return buf;
	}
	if (!s) {
		snprintf(buf, len, "<nil>");
		return buf;
	}
	buf[o++] = '"';
	for (const unsigned char *p = (const unsigned char *)s; *p;) {
		size_t n;
		const char *esc = escape_of(p, &n, tmp, true);
		size_t need = esc ? strlen(esc) : n;
		if (o + need + 1 > len - 5) { /* room for ...", NUL */
			memcpy(buf + o, "...", 3);
			o += 3;
			break;
		}
		memcpy(buf + o, esc ? esc : (const char *)p, need);
		o += need;
		p += n;
	}
	buf[o++] = '"';
	buf[o] = '\0';
	return buf;
}

/* Rewrites sb from offset start with every control byte and invalid UTF-8 escaped. */
static void escape_tail(struct strbuf *sb, size_t start)
{
	size_t i = start;
	char tmp[8];

	while (i < sb->len) {
		size_t n;
		if (!escape_of((const unsigned char *)sb->buf + i, &n, tmp, false)) {
			i += n;
			continue;
		}
		struct strbuf out = STRBUF_INIT;
		strbuf_add(&out, sb->buf, start);
		for (size_t j = start; j < sb->len;) {
			const char *esc = escape_of((const unsigned char *)sb->buf + j, &n, tmp, false);
			if (esc)
				strbuf_addstr(&out, esc);
			else
				strbuf_add(&out, sb->buf + j, n);
			j += n;
		}
		strbuf_release(sb);
		*sb = out;
		return;
	}
}

void log_write(enum log_level level, const char *file, int line, const char *fmt, ...)
{
	static const char letters[] = "IWEF";
	struct strbuf sb = STRBUF_INIT;
	struct timeval tv;
	struct tm tm;
	va_list ap;

	gettimeofday(&tv, NULL);
	localtime_r(&tv.tv_sec, &tm);
	strbuf_grow(&sb, 256);
	strbuf_addf(&sb, "%c%02d%02d %02d:%02d:%02d.%06ld %7ld %s:%d] ", letters[level],
		    tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (long)tv.tv_usec,
		    (long)syscall(SYS_gettid), basename_of(file), line);
	size_t head = sb.len;
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	/* One call, one line: a trailing newline is the caller's line end, any other is data. */
	if (sb.len > head && sb.buf[sb.len - 1] == '\n')
		strbuf_setlen(&sb, sb.len - 1);
	escape_tail(&sb, head);
	strbuf_addch(&sb, '\n');

	if (file_fd >= 0) {
		write_all(file_fd, sb.buf, sb.len);
		if (also_stderr)
			write_all(out_fd, sb.buf, sb.len);
	} else {
		write_all(out_fd, sb.buf, sb.len);
	}
	strbuf_release(&sb);
	if (level == LOG_FATAL)
		exit(255);
}
