/*
 * log: klog-format lines to stderr (or to --log_file), or component-base's JSON lines.
 *
 * Each line is formatted into a stack buffer (spilling into a heap strbuf only when long) and
 * written with a single write(2) per destination, so concurrent threads never interleave within a
 * line and no lock is held while formatting.
 */
#include "base/log.h"
#include "base/strbuf.h"

#include <ctype.h>
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
static enum log_format format = LOG_FORMAT_TEXT;
static bool split_stream;  /* info and warnings to stdout */

void log_set_format(enum log_format f)
{
	format = f;
}

void log_set_split_stream(bool on)
{
	split_stream = on;
}

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

/* ---- JSON lines ---- */

/* Appends s[0..n) as the inside of a JSON string: escapes, and U+FFFD for invalid UTF-8. */
static void json_add_escaped(struct strbuf *sb, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + n;

	while (p < end) {
		size_t k;
		switch (*p) {
		case '"': strbuf_addstr(sb, "\\\""); p++; continue;
		case '\\': strbuf_addstr(sb, "\\\\"); p++; continue;
		case '\n': strbuf_addstr(sb, "\\n"); p++; continue;
		case '\r': strbuf_addstr(sb, "\\r"); p++; continue;
		case '\t': strbuf_addstr(sb, "\\t"); p++; continue;
		}
		if (*p < 0x20 || *p == 0x7f) {
			strbuf_addf(sb, "\\u%04x", *p++);
		} else if (*p == 0xc2 && p + 1 < end && p[1] >= 0x80 && p[1] <= 0x9f) {
			strbuf_addf(sb, "\\u%04x", p[1]); /* a C1 control */
			p += 2;
		} else if ((k = utf8_len(p)) != 0 && k <= (size_t)(end - p)) {
			strbuf_add(sb, (const char *)p, k);
			p += k;
		} else {
			strbuf_addstr(sb, "\\ufffd");
			p++;
		}
	}
}

/* Appends the klog-quoted string q[0..n) ("..." with its quotes), unquoted, as JSON. */
static void json_add_unquoted(struct strbuf *sb, const char *q, size_t n)
{
	struct strbuf raw = STRBUF_INIT;

	for (size_t i = 1; i + 1 < n; i++) {
		char c = q[i];
		if (c == '\\' && i + 2 < n) {
			c = q[++i];
			switch (c) {
			case 'n': c = '\n'; break;
			case 'r': c = '\r'; break;
			case 't': c = '\t'; break;
			case 'x':
				if (i + 3 < n && isxdigit((unsigned char)q[i + 1]) &&
				    isxdigit((unsigned char)q[i + 2])) {
					char hex[3] = { q[i + 1], q[i + 2], 0 };
					c = (char)strtol(hex, NULL, 16);
					i += 2;
				}
				break;
			}
		}
		strbuf_addch(&raw, c);
	}
	strbuf_addch(sb, '"');
	json_add_escaped(sb, raw.buf ? raw.buf : "", raw.len);
	strbuf_addch(sb, '"');
	strbuf_release(&raw);
}

static bool is_key_char(char c)
{
	return isalnum((unsigned char)c) || c == '_' || c == '.' || c == '/' || c == '-';
}

/* Length of the key=value pair at p up to a space or the end, or 0 when p holds none. */
static size_t pair_len(const char *p)
{
	const char *q = p;

	if (!isalpha((unsigned char)*q) && *q != '_')
		return 0;
	while (is_key_char(*q))
		q++;
	if (*q++ != '=')
		return 0;
	if (*q == '"') {
		for (q++; *q && *q != '"'; q++)
			if (*q == '\\' && q[1])
				q++;
		if (*q++ != '"')
			return 0;
	} else {
		while (*q && *q != ' ' && *q != '"')
			q++;
	}
	return *q && *q != ' ' ? 0 : (size_t)(q - p);
}

static bool all_pairs(const char *s)
{
	while (*s) {
		size_t n = pair_len(s);
		if (!n)
			return false;
		s += n;
		while (*s == ' ')
			s++;
	}
	return true;
}

/* Where the trailing key=value pairs of msg start (outside quotes), or its end. */
static const char *pairs_start(const char *msg)
{
	bool quoted = false;

	for (const char *p = msg; *p; p++) {
		if (*p == '"' && (p == msg || p[-1] != '\\'))
			quoted = !quoted;
		if (!quoted && (p == msg || p[-1] == ' ') && *p != ' ' && all_pairs(p))
			return p;
	}
	return msg + strlen(msg);
}

/* A bare value JSON can hold as it is: a number in JSON's grammar, true, false. */
static bool json_literal(const char *v, size_t n)
{
	size_t i = 0;

	if ((n == 4 && !strncmp(v, "true", 4)) || (n == 5 && !strncmp(v, "false", 5)))
		return true;
	if (i < n && v[i] == '-')
		i++;
	if (i >= n || !isdigit((unsigned char)v[i]))
		return false;
	if (v[i] == '0')
		i++;
	else
		while (i < n && isdigit((unsigned char)v[i]))
			i++;
	if (i < n && v[i] == '.') {
		if (++i >= n || !isdigit((unsigned char)v[i]))
			return false;
		while (i < n && isdigit((unsigned char)v[i]))
			i++;
	}
	if (i < n && (v[i] == 'e' || v[i] == 'E')) {
		if (++i < n && (v[i] == '+' || v[i] == '-'))
			i++;
		if (i >= n || !isdigit((unsigned char)v[i]))
			return false;
		while (i < n && isdigit((unsigned char)v[i]))
			i++;
	}
	return i == n;
}

/* zap's ShortCallerEncoder: the file's folder and name. */
static const char *short_caller(const char *path)
{
	const char *last = strrchr(path, '/');

	if (!last)
		return path;
	for (const char *p = last - 1; p >= path; p--)
		if (*p == '/')
			return p + 1;
	return path;
}

/* Appends the value of the pair at kv (n bytes): a JSON string, number or literal. */
static void json_add_value(struct strbuf *sb, const char *kv, size_t n)
{
	const char *val = (const char *)memchr(kv, '=', n) + 1;
	size_t vlen = n - (size_t)(val - kv);

	if (vlen && *val == '"') {
		json_add_unquoted(sb, val, vlen);
	} else if (json_literal(val, vlen)) {
		strbuf_add(sb, val, vlen);
	} else {
		strbuf_addch(sb, '"');
		json_add_escaped(sb, val, vlen);
		strbuf_addch(sb, '"');
	}
}

static bool is_logger_pair(const char *kv)
{
	return !strncmp(kv, "logger=", 7);
}

void log_json_line(struct strbuf *sb, const struct timeval *tv, int v, const char *file, int line,
		   const char *msg)
{
	const char *kv = pairs_start(msg);
	size_t msglen = (size_t)(kv - msg);
	char frac[8];

	while (msglen > 0 && msg[msglen - 1] == ' ')
		msglen--;
	/* Milliseconds as Go's shortest float: no trailing zeros, no dot for whole ones. */
	snprintf(frac, sizeof(frac), ".%03ld", (long)(tv->tv_usec % 1000));
	for (size_t n = strlen(frac); n > 1 && frac[n - 1] == '0'; n--)
		frac[n - 1] = '\0';
	if (!strcmp(frac, "."))
		frac[0] = '\0';
	strbuf_addf(sb, "{\"ts\":%lld%s", (long long)tv->tv_sec * 1000 + tv->tv_usec / 1000, frac);
	/* a named logger's name (logger="UnhandledError"): zap writes it second */
	for (const char *p = kv; *p;) {
		size_t n = pair_len(p);
		if (is_logger_pair(p)) {
			strbuf_addstr(sb, ",\"logger\":");
			json_add_value(sb, p, n);
		}
		for (p += n; *p == ' '; p++)
			;
	}
	strbuf_addstr(sb, ",\"caller\":\"");
	json_add_escaped(sb, short_caller(file), strlen(short_caller(file)));
	strbuf_addf(sb, ":%d\",\"msg\":\"", line);
	json_add_escaped(sb, msg, msglen);
	strbuf_addch(sb, '"');
	if (v >= 0)
		strbuf_addf(sb, ",\"v\":%d", v);
	while (*kv) {
		size_t n = pair_len(kv);
		const char *eq = memchr(kv, '=', n);
		if (!is_logger_pair(kv)) {
			strbuf_addstr(sb, ",\"");
			json_add_escaped(sb, kv, (size_t)(eq - kv));
			strbuf_addstr(sb, "\":");
			json_add_value(sb, kv, n);
		}
		for (kv += n; *kv == ' '; kv++)
			;
	}
	strbuf_addstr(sb, "}\n");
}

/* ---- writing ---- */

static void emit(enum log_level level, const struct strbuf *sb)
{
	int out = split_stream && level < LOG_ERROR ? STDOUT_FILENO : out_fd;

	if (file_fd >= 0) {
		write_all(file_fd, sb->buf, sb->len);
		if (also_stderr)
			write_all(out, sb->buf, sb->len);
	} else {
		write_all(out, sb->buf, sb->len);
	}
}

static void vlog(enum log_level level, int v, const char *file, int line, const char *fmt,
		 va_list ap)
{
	static const char letters[] = "IWEF";
	struct strbuf sb = STRBUF_INIT;
	struct timeval tv;
	struct tm tm;

	gettimeofday(&tv, NULL);
	strbuf_grow(&sb, 256);
	if (format == LOG_FORMAT_JSON) {
		struct strbuf msg = STRBUF_INIT;
		strbuf_vaddf(&msg, fmt, ap);
		if (msg.len && msg.buf[msg.len - 1] == '\n')
			strbuf_setlen(&msg, msg.len - 1);
		log_json_line(&sb, &tv, level >= LOG_ERROR ? -1 : v, file, line,
			      msg.buf ? msg.buf : "");
		strbuf_release(&msg);
	} else {
		localtime_r(&tv.tv_sec, &tm);
		strbuf_addf(&sb, "%c%02d%02d %02d:%02d:%02d.%06ld %7ld %s:%d] ", letters[level],
			    tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
			    (long)tv.tv_usec, (long)syscall(SYS_gettid), basename_of(file), line);
		size_t head = sb.len;
		strbuf_vaddf(&sb, fmt, ap);
		/* One call, one line: a trailing newline is the caller's line end, any other is data. */
		if (sb.len > head && sb.buf[sb.len - 1] == '\n')
			strbuf_setlen(&sb, sb.len - 1);
		escape_tail(&sb, head);
		strbuf_addch(&sb, '\n');
	}
	emit(level, &sb);
	strbuf_release(&sb);
	if (level == LOG_FATAL)
		exit(255);
}

void log_write(enum log_level level, const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(level, 0, file, line, fmt, ap);
	va_end(ap);
}

void log_write_v(int v, const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(LOG_INFO, v, file, line, fmt, ap);
	va_end(ap);
}

void log_error_s(const char *file, int line, const char *err, const char *fmt, ...)
{
	struct strbuf msg = STRBUF_INIT;
	va_list ap;

	va_start(ap, fmt);
	strbuf_vaddf(&msg, fmt, ap);
	va_end(ap);
	if (err) {
		strbuf_addstr(&msg, " err=");
		strbuf_addquoted(&msg, err);
	}
	log_write(LOG_ERROR, file, line, "%s", msg.buf ? msg.buf : "");
	strbuf_release(&msg);
}
