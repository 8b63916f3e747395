/*
 * log: klog-format lines to stderr (or to --log_file).
 *
 * Each line is formatted into a stack buffer (spilling into a heap strbuf only when long) and
 * written with a single write(2) per destination, so concurrent threads never interleave within a
 * line and no lock is held while formatting.
 */
#include "base/log.h"
#include "base/flags.h"
#include "base/strbuf.h"

#include <errno.h>
#include <fcntl.h>
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

/* klog flag values, read by log_apply_flags(). */
static bool f_logtostderr, f_alsologtostderr, f_ignored_bool;
static const char *f_log_file, *f_log_dir, *f_ignored_str;
static int f_ignored_int;
static int64_t f_ignored_int64;

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
		if (f_alsologtostderr)
			write_all(out_fd, sb.buf, sb.len);
	} else {
		write_all(out_fd, sb.buf, sb.len);
	}
	strbuf_release(&sb);
	if (level == LOG_FATAL)
		exit(255);
}

void log_register_flags(struct flagset *fs)
{
	flags_int(fs, "v", &log_vlevel, 0, "number for the log level verbosity");
	flags_bool(fs, "logtostderr", &f_logtostderr, true,
		   "log to standard error instead of files");
	flags_bool(fs, "alsologtostderr", &f_alsologtostderr, false,
		   "log to standard error as well as files (no effect when -logtostderr=true)");
	flags_string(fs, "log_file", &f_log_file, "",
		     "if non-empty, use this log file (no effect when -logtostderr=true)");
	flags_string(fs, "log_dir", &f_log_dir, "",
		     "not supported by kcsi (it does not rotate log files); use -log_file");
	flags_string(fs, "stderrthreshold", &f_ignored_str, "2",
		     "accepted for compatibility with klog; all lines go to the chosen output");
	flags_string(fs, "vmodule", &f_ignored_str, "",
		     "accepted for compatibility with klog; per-file verbosity is not supported");
	flags_string(fs, "log_backtrace_at", &f_ignored_str, ":0",
		     "accepted for compatibility with klog; ignored");
	flags_int64(fs, "log_file_max_size", &f_ignored_int64, 1800,
		    "accepted for compatibility with klog; kcsi does not rotate log files");
	flags_bool(fs, "add_dir_header", &f_ignored_bool, false,
		   "accepted for compatibility with klog; ignored");
	flags_bool(fs, "skip_headers", &f_ignored_bool, false,
		   "accepted for compatibility with klog; ignored");
	flags_bool(fs, "skip_log_headers", &f_ignored_bool, false,
		   "accepted for compatibility with klog; ignored");
	flags_bool(fs, "one_output", &f_ignored_bool, false,
		   "accepted for compatibility with klog; ignored");
	(void)f_ignored_int;
}

int log_apply_flags(char *err, size_t errlen)
{
	if (f_log_dir && *f_log_dir) {
		snprintf(err, errlen,
			 "-log_dir is not supported: kcsi logs to stderr or to one -log_file");
		return -1;
	}
	if (!f_logtostderr) {
		if (!f_log_file || !*f_log_file) {
			snprintf(err, errlen,
				 "-logtostderr=false needs -log_file: kcsi does not write log "
				 "files into a temporary folder as klog does");
			return -1;
		}
		int fd = open(f_log_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (fd < 0) {
			snprintf(err, errlen, "cannot open -log_file %s: %s", f_log_file,
				 strerror(errno));
			return -1;
		}
		if (file_fd >= 0)
			close(file_fd);
		file_fd = fd;
	}
	return 0;
}

void log_parse_command_line(struct flagset *fs, int argc, char **argv)
{
	char err[256];

	log_register_flags(fs);
	flags_enable_version(fs, KCSI_VERSION);
	int rest = flags_parse_or_exit(fs, argc, argv);
	for (int i = rest; i < argc; i++)
		KLOG_W("Ignoring unexpected argument \"%s\" (flags must come first)", argv[i]);
	if (log_apply_flags(err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		flags_free(fs);
		exit(2);
	}
}
