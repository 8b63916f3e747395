/*
 * log_flags: klog's and component-base's logging flags bound to static variables at
 * registration, turned into base/log settings (verbosity, log file, format, split streams) by
 * log_apply_flags() once parsing is done.
 */
#include "base/log_flags.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/flags.h"
#include "base/log.h"
#include "base/timeutil.h"
#include "base/version.h"

/* klog flag values, read by log_apply_flags(); -v writes log_vlevel directly. */
static bool f_logtostderr, f_alsologtostderr, f_ignored_bool;
static const char *f_log_file, *f_log_dir, *f_ignored_str;
static int f_ignored_int;
static int64_t f_ignored_int64;
/* component-base's logging flags (logsapi.AddGoFlags) and csi-lib-utils' --automaxprocs. */
static const char *f_format, *f_text_buffer, *f_json_buffer;
static int64_t f_flush_ns;
static bool f_text_split, f_json_split, f_automaxprocs;

void log_register_flags(struct flagset *fs)
{
	flags_level(fs, "v", &log_vlevel, 0, "number for the log level verbosity");
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
	log_register_component_flags(fs);
}

void log_hide_flags(struct flagset *fs)
{
	static const char *const names[] = {
		"logtostderr", "alsologtostderr", "log_file", "log_dir", "stderrthreshold",
		"vmodule", "log_backtrace_at", "log_file_max_size", "add_dir_header",
		"skip_headers", "skip_log_headers", "one_output", "logging-format",
		"log-flush-frequency", "log-text-split-stream", "log-text-info-buffer-size",
		"log-json-split-stream", "log-json-info-buffer-size", "automaxprocs",
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		flags_hide(fs, names[i]);
}

void log_register_component_flags(struct flagset *fs)
{
	flags_string(fs, "logging-format", &f_format, "text",
		     "Log line format: text (klog's) or json (component-base's JSON logger).");
	flags_duration(fs, "log-flush-frequency", &f_flush_ns, 5 * NSEC_PER_SEC,
		       "Maximum time between log flushes; kcsi writes every line at once, so nothing waits for a flush.");
	flags_bool(fs, "log-text-split-stream", &f_text_split, false,
		   "In text format, write info and warning lines to stdout and errors to stderr.");
	flags_string(fs, "log-text-info-buffer-size", &f_text_buffer, "",
		     "Buffer for info lines with split streams, a quantity (512, 1K, 2Ki); accepted and checked, kcsi writes every line at once.");
	flags_bool(fs, "log-json-split-stream", &f_json_split, false,
		   "In JSON format, write info and warning lines to stdout and errors to stderr.");
	flags_string(fs, "log-json-info-buffer-size", &f_json_buffer, "",
		     "Buffer for info lines with split streams, a quantity (512, 1K, 2Ki); accepted and checked, kcsi writes every line at once.");
	flags_bool(fs, "automaxprocs", &f_automaxprocs, false,
		   "Accepted for compatibility: in Go it sets GOMAXPROCS to the container's CPU quota; a C program has no GOMAXPROCS, and kcsi's thread counts are its flags (--worker-threads, ...), so it has no effect.");
}

/* A resource.Quantity as the buffer-size flags take it: digits with an optional fraction,
 * exponent or suffix (k, M, G, T, P, E, Ki ... Ei). */
static bool is_quantity(const char *s)
{
	static const char *const suffixes[] = { "", "k", "M", "G", "T", "P", "E", "Ki", "Mi",
						"Gi", "Ti", "Pi", "Ei" };
	size_t n = strspn(s, "0123456789");

	if (*s == '+')
		s++, n = strspn(s, "0123456789");
	if (!n)
		return false;
	s += n;
	if (*s == '.')
		s += 1 + strspn(s + 1, "0123456789");
	if ((*s == 'e' || *s == 'E') && s[1]) {
		const char *e = s + 1 + (s[1] == '+' || s[1] == '-');
		size_t d = strspn(e, "0123456789");
		if (d && !e[d])
			return true;
	}
	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++)
		if (!strcmp(s, suffixes[i]))
			return true;
	return false;
}

static int apply_component_flags(char *err, size_t errlen)
{
	bool json = !strcmp(f_format, "json");

	if (!json && strcmp(f_format, "text")) {
		snprintf(err, errlen,
			 "LoggingConfiguration is invalid: format: Invalid value: \"%s\": Unsupported log format (text, json)",
			 f_format);
		return -1;
	}
	if (f_flush_ns <= 0) {
		snprintf(err, errlen, "LoggingConfiguration is invalid: flushFrequency: Invalid value: must be positive");
		return -1;
	}
	if ((*f_text_buffer && !is_quantity(f_text_buffer)) ||
	    (*f_json_buffer && !is_quantity(f_json_buffer))) {
		snprintf(err, errlen, "LoggingConfiguration is invalid: info buffer size \"%s\" is not a quantity (512, 1K, 2Ki)",
			 *f_text_buffer && !is_quantity(f_text_buffer) ? f_text_buffer : f_json_buffer);
		return -1;
	}
	log_set_format(json ? LOG_FORMAT_JSON : LOG_FORMAT_TEXT);
	log_set_split_stream(json ? f_json_split : f_text_split);
	return 0;
}

int log_apply_flags(char *err, size_t errlen)
{
	if (f_format && apply_component_flags(err, errlen))
		return -2;
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
		log_set_file_fd(fd, f_alsologtostderr);
	}
	return 0;
}

void log_parse_command_line(struct flagset *fs, int argc, char **argv)
{
	char err[256];

	log_register_flags(fs);
	flags_enable_version(fs, kcsi_version);
	int rest = flags_parse_or_exit(fs, argc, argv);
	for (int i = rest; i < argc; i++)
		KLOG_W("Ignoring unexpected argument \"%s\" (flags must come first)", argv[i]);
	int rc = log_apply_flags(err, sizeof(err));
	if (rc) {
		fprintf(stderr, "%s\n", err);
		flags_free(fs);
		exit(rc == -2 ? 1 : 2); /* upstream: a bad logging configuration exits 1 */
	}
}
