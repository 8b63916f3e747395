/*
 * log: klog-compatible logging to stderr.
 *
 * Lines look exactly like klog's, so log tooling built for the upstream sidecars reads ours:
 *
 *     I1122 10:00:00.000000    1234 attacher.c:42] Attached volume va="csi-1234" node="node-1"
 *
 * The first letter is the level (I info, W warning, E error, F fatal), then month and day, local
 * time with microseconds, the thread id right-aligned in 7 columns, the source file and line.
 * Key/value pairs are written by the caller in klog's style: key="value" with strbuf_addquoted().
 *
 * Verbosity: KLOG_V(n, ...) logs only when the -v level is >= n. KLOG_F logs and exits(255).
 * KLOG_ERR(cause, ...) is an error line with its cause in err="..." (klog's ErrorS).
 * Every call is thread-safe: one line is written with one write(2).
 *
 * --logging-format=json writes each line instead as the JSON object of component-base's JSON
 * logger (zap), one per line:
 *
 *     {"ts":1764230400123.456,"caller":"attacher/run.c:42","msg":"Attached volume","v":0,"va":"csi-1234","node":"node-1"}
 *
 * ts is milliseconds since the epoch, caller the file's folder and name, v the KLOG_V level
 * (absent on errors, as zapr writes none for them), then the caller's key=value pairs taken off
 * the end of the message: a pair is key=value with key [A-Za-z_][A-Za-z0-9_./-]* and value
 * either klog-quoted ("...", unquoted into a JSON string) or a bare word (a JSON number, true,
 * false, or else a string). Text before the first pair is msg. A pair logger="name" is the
 * name of a named logr logger (client-go's "UnhandledError"), which zap writes right after ts.
 *
 * Split stream (--log-*-split-stream): info and warning lines go to stdout, errors to the
 * output (stderr), as component-base splits them.
 *
 * klog's flags (-v, --log_file, ...) are base/log_flags.h's, a layer above this file and flags.
 */
#ifndef KCSI_BASE_LOG_H
#define KCSI_BASE_LOG_H

#include <stdbool.h>
#include <stddef.h>

enum log_level { LOG_INFO = 0, LOG_WARNING, LOG_ERROR, LOG_FATAL };

/* The -v level, read by log_v(); base/log_flags.c binds the -v flag to it. */
extern int log_vlevel;
void log_set_verbosity(int v);
int log_verbosity(void);
static inline bool log_v(int n) { return log_vlevel >= n; }

void log_write(enum log_level level, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* log_write() of an info line at verbosity v (KLOG_V), which the JSON format records as "v". */
void log_write_v(int v, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

enum log_format { LOG_FORMAT_TEXT = 0, LOG_FORMAT_JSON };
void log_set_format(enum log_format f);
/* Info and warning lines to stdout, errors to the output (--log-*-split-stream). */
void log_set_split_stream(bool on);
/*
 * Appends one JSON line (with its newline) for a message logged at tv from file:line: the
 * format above. v < 0 leaves "v" out (errors). Exposed for tests of the exact shape.
 */
struct strbuf;
struct timeval;
void log_json_line(struct strbuf *sb, const struct timeval *tv, int v, const char *file, int line,
		   const char *msg);

/* Redirects output to fd (tests use a pipe or file); -1 restores stderr. */
void log_set_output_fd(int fd);
/*
 * Writes lines to the file fd instead (taken over; a file set before is closed), and to the
 * output as well when also_output (klog's --alsologtostderr). -1 goes back to the output only.
 */
void log_set_file_fd(int fd, bool also_output);

/*
 * Quoting untrusted strings (names, volume handles, paths, driver messages), klog's %q:
 * log_quote() writes s into buf as a double-quoted string with '"', '\\', control bytes,
 * DEL, C1 controls and invalid UTF-8 escaped (\n, \x1b, ...), so nothing it holds can end the
 * line or drive a terminal. Always NUL-terminates; an over-long string is cut and ends in
 * `..."` (the closing quote stays). NULL is written as <nil>. Returns buf.
 * LOGQ(s) is the same into a buffer of LOG_QUOTE_MAX bytes that lives until the end of the
 * enclosing statement's block: KLOG_I("Attached %s", LOGQ(va->meta.name)).
 * As a second line of defence log_write() escapes any control byte left in a formatted line.
 */
#define LOG_QUOTE_MAX 1024
char *log_quote(char *buf, size_t len, const char *s);
#define LOGQ(s) log_quote((char[LOG_QUOTE_MAX]){ 0 }, LOG_QUOTE_MAX, (s))

#define KLOG_I(...) log_write(LOG_INFO, __FILE__, __LINE__, __VA_ARGS__)
#define KLOG_W(...) log_write(LOG_WARNING, __FILE__, __LINE__, __VA_ARGS__)
#define KLOG_E(...) log_write(LOG_ERROR, __FILE__, __LINE__, __VA_ARGS__)
#define KLOG_F(...) log_write(LOG_FATAL, __FILE__, __LINE__, __VA_ARGS__)
/*
 * An error with its cause, as klog's ErrorS(err, msg, kv...) and logr's logger.Error(err, msg,
 * kv...) write it: the message (with its own key="value" pairs), then err="<cause>" quoted, so
 * that --logging-format=json carries the cause in the "err" field, after the message's pairs as
 * zapr orders them. A NULL cause is ErrorS(nil, ...): no err. Use it for every error line that
 * reports a cause (a failed call, a refused request); KLOG_E for a line that has none.
 */
void log_error_s(const char *file, int line, const char *err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
#define KLOG_ERR(err, ...) log_error_s(__FILE__, __LINE__, (err), __VA_ARGS__)
#define KLOG_V(n, ...) \
	do { if (log_v(n)) log_write_v((n), __FILE__, __LINE__, __VA_ARGS__); } while (0)

#endif
