/*
 * log_flags: klog's flags bound to static variables at registration, turned into base/log
 * settings (verbosity, log file) by log_apply_flags() once parsing is done.
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

/* klog flag values, read by log_apply_flags(); -v writes log_vlevel directly. */
static bool f_logtostderr, f_alsologtostderr, f_ignored_bool;
static const char *f_log_file, *f_log_dir, *f_ignored_str;
static int f_ignored_int;
static int64_t f_ignored_int64;

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
		log_set_file_fd(fd, f_alsologtostderr);
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
