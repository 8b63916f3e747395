/*
 * log_flags: klog's command-line flags and a daemon's whole command line. It sits above
 * base/log and base/flags (it uses both; neither knows it), so that the flag parser may log and
 * the logger needs no flag parser.
 *
 * The flags the upstream sidecars accept through klog: -v, --logtostderr (default true),
 * --alsologtostderr, --log_file (honoured: with --logtostderr=false lines go to that file; with
 * --alsologtostderr to both), --stderrthreshold, --add_dir_header, --skip_headers,
 * --skip_log_headers, --one_output, --vmodule, --log_file_max_size, --log_backtrace_at (accepted
 * and ignored, as they only tune klog's file handling), --log_dir (rejected: kcsi does not rotate
 * log files; use --log_file). Upstream's sidecars no longer accept these klog flags (KEP-2845
 * removed them); kcsi keeps them so older manifests start too.
 *
 * The flags component-base's logsapi.AddGoFlags gives every upstream sidecar:
 * --logging-format text|json (json: base/log.h's JSON lines), --log-flush-frequency 5s (kcsi
 * writes each line at once, so it only has to be a valid positive duration),
 * --log-text-split-stream / --log-json-split-stream (info to stdout, errors to stderr; upstream
 * keeps them behind the LoggingAlphaOptions gate), --log-text-info-buffer-size /
 * --log-json-info-buffer-size (a quantity, checked, no effect: nothing is buffered). And
 * csi-lib-utils' --automaxprocs, which all seven upstream sidecars have: accepted, no effect in a
 * C program (there is no GOMAXPROCS; thread counts are flags).
 */
#ifndef KCSI_BASE_LOG_FLAGS_H
#define KCSI_BASE_LOG_FLAGS_H

#include <stddef.h>

struct flagset;

/* Registers -v and klog's flags on fs; log_apply_flags() acts on them after parsing. */
void log_register_flags(struct flagset *fs);
/*
 * Hides every flag log_register_flags() registered but -v from --help; they are still accepted.
 * For a command-line tool, whose help would otherwise be mostly klog's.
 */
void log_hide_flags(struct flagset *fs);
/* Registers component-base's logging flags and --automaxprocs only (log_register_flags does too). */
void log_register_component_flags(struct flagset *fs);
/*
 * Returns 0, or -1 with a message in err when the klog flags ask for something unsupported, or
 * -2 when component-base's logging flags are invalid (upstream then exits 1, not 2).
 */
int log_apply_flags(char *err, size_t errlen);
/*
 * A component's command line, as every kcsi daemon reads it: registers klog's flags and
 * --version on fs (the component's own flags are registered before), parses argv, warns about
 * positional arguments (Go's flag package leaves them unread, and so does upstream), and applies
 * the klog flags. Help and version exit 0, a bad flag exits 2 (fs freed first); returns on success.
 */
void log_parse_command_line(struct flagset *fs, int argc, char **argv);

#endif
