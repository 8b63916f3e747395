/* Unit tests for base/log: klog line format, verbosity, thread safety, klog flags. */
#include "base/flags.h"
#include "base/log.h"
#include "base/log_flags.h"
#include "base/strbuf.h"
#include "check.h"

#include <fcntl.h>
#include <pthread.h>
#include <regex.h>
#include <sys/time.h>
#include <stdlib.h>
#include <unistd.h>

static char *capture_path;
static int capture_fd;

static void capture_start(void)
{
	static char path[] = "/tmp/kcsi-test-log-XXXXXX";

	strcpy(path, "/tmp/kcsi-test-log-XXXXXX");
	capture_fd = mkstemp(path);
	capture_path = path;
	log_set_output_fd(capture_fd);
}

/* Returns the captured text (caller frees) and restores stderr. */
static char *capture_end(void)
{
	off_t len = lseek(capture_fd, 0, SEEK_END);
	char *buf = calloc(1, (size_t)len + 1);

	if (pread(capture_fd, buf, (size_t)len, 0) != len)
		buf[0] = '\0';
	log_set_output_fd(-1);
	close(capture_fd);
	unlink(capture_path);
	return buf;
}

static int matches(const char *re, const char *s)
{
	regex_t r;
	int ok;

	if (regcomp(&r, re, REG_EXTENDED | REG_NEWLINE) != 0)
		return 0;
	ok = regexec(&r, s, 0, NULL, 0) == 0;
	regfree(&r);
	return ok;
}

static void test_klog_line_format(void)
{
	capture_start();
	KLOG_I("Attached volume va=\"%s\"", "csi-1");
	KLOG_W("slow");
	KLOG_E("failed: %d", 7);
	char *out = capture_end();

	CHECK(matches("^I[0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6} +[0-9]+ test_log\\.c:[0-9]+\\] "
		      "Attached volume va=\"csi-1\"$", out));
	CHECK(matches("^W[0-9]{4} .* test_log\\.c:[0-9]+\\] slow$", out));
	CHECK(matches("^E[0-9]{4} .* test_log\\.c:[0-9]+\\] failed: 7$", out));
	/* klog pads the thread id to 7 columns */
	CHECK(matches("^I[0-9]{4} [0-9:.]{15} [ 0-9]{7} ", out));
	free(out);
}

static void test_verbosity(void)
{
	log_set_verbosity(2);
	capture_start();
	KLOG_V(2, "shown at 2");
	KLOG_V(3, "hidden at 3");
	char *out = capture_end();
	CHECK(strstr(out, "shown at 2") != NULL);
	CHECK(strstr(out, "hidden at 3") == NULL);
	CHECK(log_v(2) && !log_v(3));
	free(out);
	log_set_verbosity(0);
}

static void *writer(void *arg)
{
	long id = (long)arg;

	for (int i = 0; i < 500; i++)
		KLOG_I("thread=%ld line=%d payload=%s", id, i,
		       "0123456789012345678901234567890123456789012345678901234567890123456789");
	return NULL;
}

static void test_threads_do_not_interleave(void)
{
	pthread_t t[8];
	int lines = 0, good = 0;

	capture_start();
	for (long i = 0; i < 8; i++)
		pthread_create(&t[i], NULL, writer, (void *)i);
	for (int i = 0; i < 8; i++)
		pthread_join(t[i], NULL);
	char *out = capture_end(), *save = NULL;
	for (char *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		lines++;
		if (l[0] == 'I' && strstr(l, "] thread=") && strstr(l, "payload=0123") &&
		    strlen(strstr(l, "payload=")) == 8 + 70)
			good++;
	}
	CHECK_INT(lines, 4000);
	CHECK_INT(good, 4000);
	free(out);
}

static void test_klog_flags(void)
{
	struct flagset *fs = flags_new("prog", "prog [flags]");
	char err[256] = "";
	char *argv_ok[] = { "prog", "--v=4", "-logtostderr", "--alsologtostderr=false",
			    "--skip_headers", "-vmodule", "x=2", "--stderrthreshold", "INFO" };
	char *argv_dir[] = { "prog", "--log_dir=/tmp" };
	char *argv_nofile[] = { "prog", "--logtostderr=false" };

	log_register_flags(fs);
	CHECK_INT(flags_parse(fs, 9, argv_ok, NULL, err, sizeof(err)), FLAGS_OK);
	CHECK_INT(log_apply_flags(err, sizeof(err)), 0);
	CHECK_INT(log_verbosity(), 4);
	CHECK_INT(flags_parse(fs, 2, argv_dir, NULL, err, sizeof(err)), FLAGS_OK);
	CHECK_INT(log_apply_flags(err, sizeof(err)), -1);
	CHECK(strstr(err, "-log_dir is not supported") != NULL);
	flags_free(fs);

	fs = flags_new("prog", "prog [flags]");
	log_register_flags(fs);
	CHECK_INT(flags_parse(fs, 2, argv_nofile, NULL, err, sizeof(err)), FLAGS_OK);
	CHECK_INT(log_apply_flags(err, sizeof(err)), -1);
	CHECK(strstr(err, "needs -log_file") != NULL);
	flags_free(fs);
	log_set_verbosity(0);
}

/* --logging-format=json: the exact line component-base's JSON logger (zap) writes. */
static void test_json_line_shape(void)
{
	struct strbuf sb = STRBUF_INIT;
	struct timeval tv = { 1764230400, 123456 };

	log_json_line(&sb, &tv, 2, "/src/kcsi/src/attacher/run.c", 42,
		      "Attached volume va=\"csi-1\" node=\"node-1\" count=3 ok=true");
	CHECK_STR(sb.buf, "{\"ts\":1764230400123.456,\"caller\":\"attacher/run.c:42\","
			  "\"msg\":\"Attached volume\",\"v\":2,\"va\":\"csi-1\",\"node\":\"node-1\","
			  "\"count\":3,\"ok\":true}\n");
	strbuf_setlen(&sb, 0);
	/* An error (v < 0) has no "v"; whole milliseconds have no fraction; a message without pairs,
	 * with quotes, a newline and a word=word inside quotes stays msg. */
	tv = (struct timeval){ 1764230400, 120000 };
	log_json_line(&sb, &tv, -1, "x.c", 7, "Failed \"a b=c\"\nnext");
	CHECK_STR(sb.buf, "{\"ts\":1764230400120,\"caller\":\"x.c:7\",\"msg\":\"Failed \\\"a b=c\\\"\\nnext\"}\n");
	strbuf_setlen(&sb, 0);
	/* klog-quoted values are unquoted into JSON strings; bare words that are not numbers stay
	 * strings; control bytes and invalid UTF-8 are escaped. */
	tv = (struct timeval){ 1, 1000 };
	log_json_line(&sb, &tv, 0, "a/b/c.c", 1, "Done path=\"/x\\\"y\\n\" mode=0644x bad=\"\xff\x01\"");
	CHECK_STR(sb.buf, "{\"ts\":1001,\"caller\":\"b/c.c:1\",\"msg\":\"Done\",\"v\":0,"
			  "\"path\":\"/x\\\"y\\n\",\"mode\":\"0644x\",\"bad\":\"\\ufffd\\u0001\"}\n");
	strbuf_setlen(&sb, 0);
	/* a named logger's name goes right after ts, as zap writes it, whatever its place */
	log_json_line(&sb, &tv, -1, "a/b/c.c", 1, "Failed to watch logger=\"UnhandledError\" type=\"*v1.Pod\" err=\"x\"");
	CHECK_STR(sb.buf, "{\"ts\":1001,\"logger\":\"UnhandledError\",\"caller\":\"b/c.c:1\","
			  "\"msg\":\"Failed to watch\",\"type\":\"*v1.Pod\",\"err\":\"x\"}\n");
	strbuf_release(&sb);

	/* Through the logger: KLOG_V's level lands in "v", and the format is switched back after. */
	capture_start();
	log_set_format(LOG_FORMAT_JSON);
	log_set_verbosity(3);
	KLOG_V(3, "Synced key=%s", "ns/a");
	KLOG_E("Broken err=\"%s\"", "x");
	log_set_format(LOG_FORMAT_TEXT);
	log_set_verbosity(0);
	char *out = capture_end();
	CHECK(matches("^\\{\"ts\":[0-9]{13}(\\.[0-9]{1,3})?,\"caller\":\"unit/test_log\\.c:[0-9]+\",\"msg\":\"Synced\",\"v\":3,\"key\":\"ns/a\"\\}$", out));
	CHECK(matches("\"msg\":\"Broken\",\"err\":\"x\"\\}$", out));
	free(out);
}

/*
 * KLOG_ERR, klog's ErrorS: the cause lands in "err", after the message's own pairs, in JSON;
 * err="..." ends the text line; a NULL cause writes no err; a cause with quotes and a newline
 * stays one line and comes back whole out of the JSON.
 */
static void test_error_with_cause(void)
{
	capture_start();
	log_set_format(LOG_FORMAT_JSON);
	KLOG_ERR("dial unix /x.sock: connect: no such file", "Failed to connect csiAddress=\"%s\"", "/x.sock");
	KLOG_ERR(NULL, "Only one of `--a` and `--b` can be set");
	KLOG_ERR("bad \"name\"\nsecond", "Failed to list %s", "pods");
	log_set_format(LOG_FORMAT_TEXT);
	KLOG_ERR("rpc error: code = Internal desc = boom", "Error syncing claim=\"%s\"", "ns/a");
	char *out = capture_end();

	CHECK(matches("^\\{\"ts\":[0-9.]+,\"caller\":\"unit/test_log\\.c:[0-9]+\",\"msg\":\"Failed to connect\","
		      "\"csiAddress\":\"/x\\.sock\",\"err\":\"dial unix /x\\.sock: connect: no such file\"\\}$", out));
	CHECK(matches("\"msg\":\"Only one of `--a` and `--b` can be set\"\\}$", out));
	CHECK(strstr(out, "\"msg\":\"Failed to list pods\",\"err\":\"bad \\\"name\\\"\\nsecond\"}") != NULL);
	CHECK(matches("^E[0-9]{4} .* test_log\\.c:[0-9]+\\] Error syncing claim=\"ns/a\" "
		      "err=\"rpc error: code = Internal desc = boom\"$", out));
	int lines = 0;
	for (const char *p = out; *p; p++)
		lines += *p == '\n';
	CHECK_INT(lines, 4);
	free(out);
}

/* --logging-format, --log-flush-frequency, the split and buffer flags and --automaxprocs. */
static void test_component_base_flags(void)
{
	struct flagset *fs = flags_new("prog", "prog [flags]");
	char err[256] = "";
	char *ok[] = { "prog", "--logging-format=json", "--log-flush-frequency=1m30s",
		       "--log-json-split-stream=false", "--log-json-info-buffer-size=2Ki",
		       "--automaxprocs" };
	char *xml[] = { "prog", "--logging-format=xml" };
	char *size[] = { "prog", "--logging-format=text", "--log-text-info-buffer-size=lots" };

	log_register_flags(fs);
	CHECK_INT(flags_parse(fs, 6, ok, NULL, err, sizeof(err)), FLAGS_OK);
	CHECK_INT(log_apply_flags(err, sizeof(err)), 0);
	CHECK_INT(flags_parse(fs, 2, xml, NULL, err, sizeof(err)), FLAGS_OK);
	CHECK_INT(log_apply_flags(err, sizeof(err)), -2);
	CHECK(strstr(err, "Unsupported log format") != NULL);
	CHECK_INT(flags_parse(fs, 3, size, NULL, err, sizeof(err)), FLAGS_OK);
	CHECK_INT(log_apply_flags(err, sizeof(err)), -2);
	CHECK(strstr(err, "not a quantity") != NULL);
	flags_free(fs);
	log_set_format(LOG_FORMAT_TEXT);
}

static void test_log_file(void)
{
	char path[] = "/tmp/kcsi-test-logfile-XXXXXX";
	int fd = mkstemp(path);
	struct flagset *fs = flags_new("prog", "prog [flags]");
	char err[256] = "", buf[4096] = "";
	char arg[128];
	snprintf(arg, sizeof(arg), "--log_file=%s", path);
	char *argv[] = { "prog", "--logtostderr=false", arg };

	close(fd);
	log_register_flags(fs);
	CHECK_INT(flags_parse(fs, 3, argv, NULL, err, sizeof(err)), FLAGS_OK);
	CHECK_INT(log_apply_flags(err, sizeof(err)), 0);
	capture_start();
	KLOG_I("to the file");
	char *out = capture_end();
	CHECK(strstr(out, "to the file") == NULL); /* not on stderr */
	free(out);
	fd = open(path, O_RDONLY);
	CHECK(read(fd, buf, sizeof(buf) - 1) > 0);
	close(fd);
	CHECK(strstr(buf, "to the file") != NULL);
	unlink(path);
	flags_free(fs);
}

/* Issue 16: a volume handle with a newline or a terminal escape must not forge a log line. */
static void test_untrusted_strings_cannot_forge_lines(void)
{
	const char *handle = "vol-1\nI1122 10:00:00.000000       1 fake.c:1] Attached volume \x1b[2J";
	char small[16];

	CHECK_STR(LOGQ(handle), "\"vol-1\\nI1122 10:00:00.000000       1 fake.c:1] Attached volume "
				"\\x1b[2J\"");
	CHECK_STR(LOGQ("a\"b\\c\td"), "\"a\\\"b\\\\c\\td\"");
	CHECK_STR(LOGQ("caf\xc3\xa9 \xff \xc2\x9b"), "\"caf\xc3\xa9 \\xff \\xc2\\x9b\"");
	CHECK_STR(LOGQ(NULL), "<nil>");
	CHECK_STR(log_quote(small, sizeof(small), "0123456789abcdef"), "\"012345678...\"");

	capture_start();
	KLOG_I("Attaching %s", LOGQ(handle));
	KLOG_E("driver said: %s", "line one\nE1122 forged line\r\x1b]0;title\x07");
	KLOG_I("ends with a newline\n");
	char *out = capture_end();
	int lines = 0;
	for (char *p = out; *p; p++)
		lines += *p == '\n';
	CHECK_INT(lines, 3);
	CHECK(strstr(out, "driver said: line one\\nE1122 forged line\\r\\x1b]0;title\\x07\n") != NULL);
	CHECK(strchr(out, '\x1b') == NULL);
	free(out);
}

int main(void)
{
	RUN(test_untrusted_strings_cannot_forge_lines);
	RUN(test_klog_line_format);
	RUN(test_verbosity);
	RUN(test_threads_do_not_interleave);
	RUN(test_klog_flags);
	RUN(test_json_line_shape);
	RUN(test_error_with_cause);
	RUN(test_component_base_flags);
	RUN(test_log_file); /* last: it leaves the logger writing to a file */
	return CHECK_DONE();
}
