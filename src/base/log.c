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
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	if (sb.len == 0 || sb.buf[sb.len - 1] != '\n')
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
