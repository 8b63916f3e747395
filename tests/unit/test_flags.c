/*
 * Unit tests for base/flags: every argument form the Go flag package accepts, values of each
 * kind, errors with Go's messages, --help/--version and the exit codes of flags_parse_or_exit.
 */
#include "base/flags.h"
#include "base/timeutil.h"
#include "check.h"

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

struct opts {
	bool leader, dummy;
	int workers;
	int64_t max_entries;
	double qps;
	const char *address;
	int64_t timeout;
	struct flag_map gates;
};

static struct flagset *make(struct opts *o)
{
	struct flagset *fs = flags_new("csi-attacher", "csi-attacher [flags]");

	flags_enable_version(fs, "v0.1.0");
	flags_bool(fs, "leader-election", &o->leader, false, "Enable leader election.");
	flags_bool(fs, "dummy", &o->dummy, true, "Dummy mode.");
	flags_int(fs, "worker-threads", &o->workers, 10, "Number of workers.");
	flags_int64(fs, "max-entries", &o->max_entries, 0, "Max entries.");
	flags_double(fs, "kube-api-qps", &o->qps, 5, "QPS.");
	flags_string(fs, "csi-address", &o->address, "/run/csi/socket", "Address of the CSI socket.");
	flags_duration(fs, "timeout", &o->timeout, 15 * NSEC_PER_SEC, "Timeout.");
	flags_map(fs, "feature-gates", &o->gates, "Feature gates.");
	flags_deprecate(fs, "max-entries", "use nothing");
	return fs;
}

static enum flags_result parse(struct flagset *fs, int argc, char **argv, int *rest, char *err)
{
	return flags_parse(fs, argc, argv, rest, err, 256);
}

static void test_defaults(void)
{
	struct opts o;
	struct flagset *fs = make(&o);

	CHECK(!o.leader);
	CHECK(o.dummy);
	CHECK_INT(o.workers, 10);
	CHECK(o.qps == 5);
	CHECK_STR(o.address, "/run/csi/socket");
	CHECK_INT(o.timeout, 15 * NSEC_PER_SEC);
	CHECK_INT(o.gates.len, 0);
	CHECK(!flags_is_set(fs, "timeout"));
	flags_free(fs);
}

static void test_all_forms(void)
{
	struct opts o;
	struct flagset *fs = make(&o);
	char err[256] = "";
	int rest = -1;
	char *argv[] = { "csi-attacher", "-leader-election", "--dummy=false", "-worker-threads=3",
			 "--kube-api-qps", "12.5", "--csi-address", "unix:///x.sock", "-timeout=1m30s",
			 "--max-entries", "0x10", "--feature-gates", "A=true,B=false",
			 "-feature-gates=C=true,A=false", "pos1", "--not-a-flag-after-positional" };

	CHECK_INT(parse(fs, 16, argv, &rest, err), FLAGS_OK);
	CHECK_INT(rest, 14);
	CHECK(o.leader);
	CHECK(!o.dummy);
	CHECK_INT(o.workers, 3);
	CHECK(o.qps == 12.5);
	CHECK_STR(o.address, "unix:///x.sock");
	CHECK_INT(o.timeout, 90 * NSEC_PER_SEC);
	CHECK_INT(o.max_entries, 16);
	CHECK_INT(o.gates.len, 3);
	CHECK_STR(flag_map_get(&o.gates, "A"), "false"); /* a repeat replaces the earlier value */
	CHECK_STR(flag_map_get(&o.gates, "B"), "false");
	CHECK_STR(flag_map_get(&o.gates, "C"), "true");
	CHECK(flag_map_get(&o.gates, "D") == NULL);
	CHECK(flags_is_set(fs, "timeout"));
	CHECK(!flags_is_set(fs, "metrics-path"));
	flags_free(fs);
}

/* --leader-election-labels (csi-lib-utils' stringMap) and --feature-gates (MapStringBool). */
static void test_labels_and_gates(void)
{
	struct flagset *fs = flags_new("p", "p [flags]");
	struct flag_map labels, gates;
	char err[256] = "";
	char *ok[] = { "p", "--leader-election-labels=team:storage,tier:ctl",
		       "--leader-election-labels", "zone=a", "--feature-gates=A=1,B= False ,C=t" };
	char *bad_label[] = { "p", "--leader-election-labels=team" };
	char *two_colons[] = { "p", "--leader-election-labels=a:b:c" };
	char *empty_item[] = { "p", "--leader-election-labels=a:b," };
	char *bad_gate[] = { "p", "--feature-gates=A=maybe" };

	flags_labels(fs, "leader-election-labels", &labels, "Labels.");
	flags_gates(fs, "feature-gates", &gates, "Gates.");
	CHECK_INT(flags_parse(fs, 5, ok, NULL, err, sizeof(err)), FLAGS_OK);
	CHECK_INT(labels.len, 3); /* a repeated flag adds to the map */
	CHECK_STR(flag_map_get(&labels, "team"), "storage");
	CHECK_STR(flag_map_get(&labels, "tier"), "ctl");
	CHECK_STR(flag_map_get(&labels, "zone"), "a"); /* kcsi also takes k=v */
	CHECK_STR(flag_map_get(&gates, "B"), " False ");
	CHECK_INT(flags_parse(fs, 2, bad_label, NULL, err, sizeof(err)), FLAGS_ERROR);
	CHECK(strstr(err, "malformed item in list of labels: team") != NULL);
	CHECK_INT(flags_parse(fs, 2, two_colons, NULL, err, sizeof(err)), FLAGS_ERROR);
	CHECK_INT(flags_parse(fs, 2, empty_item, NULL, err, sizeof(err)), FLAGS_ERROR);
	CHECK_INT(flags_parse(fs, 2, bad_gate, NULL, err, sizeof(err)), FLAGS_ERROR);
	CHECK(strstr(err, "invalid value of A=maybe, err: strconv.ParseBool") != NULL);
	CHECK_STR(flag_map_get(&gates, "A"), "1"); /* a refused list changes nothing */
	flags_free(fs);
}

static void test_bool_does_not_take_next_arg(void)
{
	struct opts o;
	struct flagset *fs = make(&o);
	char err[256];
	int rest;
	char *argv[] = { "p", "--leader-election", "false", "--dummy" };

	/* As in Go: "false" is the first positional argument and parsing stops there. */
	CHECK_INT(parse(fs, 4, argv, &rest, err), FLAGS_OK);
	CHECK(o.leader);
	CHECK_INT(rest, 2);
	CHECK(o.dummy);
	flags_free(fs);
}

static void test_double_dash_ends_flags(void)
{
	struct opts o;
	struct flagset *fs = make(&o);
	char err[256];
	int rest;
	char *argv[] = { "p", "--timeout", "0", "--", "--dummy=false" };

	CHECK_INT(parse(fs, 5, argv, &rest, err), FLAGS_OK);
	CHECK_INT(rest, 4);
	CHECK_INT(o.timeout, 0);
	CHECK(o.dummy);
	flags_free(fs);
}

static void check_error(char **argv, int argc, const char *want)
{
	struct opts o;
	struct flagset *fs = make(&o);
	char err[256] = "";

	CHECK_INT(parse(fs, argc, argv, NULL, err), FLAGS_ERROR);
	CHECK_STR(err, want);
	flags_free(fs);
}

static void test_errors(void)
{
	char *a1[] = { "p", "--no-such-flag" };
	char *a2[] = { "p", "--timeout=10" };
	char *a3[] = { "p", "--worker-threads=ten" };
	char *a4[] = { "p", "--timeout" };
	char *a5[] = { "p", "--dummy=maybe" };
	char *a6[] = { "p", "---x" };
	char *a7[] = { "p", "--worker-threads=99999999999" };
	char *a8[] = { "p", "--feature-gates", "A" };
	char *a9[] = { "p", "--kube-api-qps=fast" };

	check_error(a1, 2, "flag provided but not defined: -no-such-flag");
	check_error(a2, 2, "invalid value \"10\" for flag -timeout: time: missing unit in duration \"10\"");
	check_error(a3, 2, "invalid value \"ten\" for flag -worker-threads: parse error");
	check_error(a4, 2, "flag needs an argument: -timeout");
	check_error(a5, 2, "invalid boolean value \"maybe\" for -dummy: parse error");
	check_error(a6, 2, "bad flag syntax: ---x");
	check_error(a7, 2, "invalid value \"99999999999\" for flag -worker-threads: parse error");
	check_error(a8, 3, "invalid value \"A\" for flag -feature-gates: missing key=value in \"A\"");
	check_error(a9, 2, "invalid value \"fast\" for flag -kube-api-qps: parse error");
}

/* A flag a shared registration adds but the program does not offer is refused, as upstream's
 * binary refuses it, and leaves its variable and the other flags as they were. */
static void test_remove(void)
{
	struct opts o;
	struct flagset *fs = make(&o);
	char err[256];
	char *gone[] = { "p", "--timeout=1s" };
	char *kept[] = { "p", "--worker-threads=3", "--csi-address=/x" };

	flags_remove(fs, "timeout");
	CHECK_INT(parse(fs, 2, gone, NULL, err), FLAGS_ERROR);
	CHECK_STR(err, "flag provided but not defined: -timeout");
	CHECK_INT(o.timeout, 15 * NSEC_PER_SEC);
	CHECK_INT(parse(fs, 3, kept, NULL, err), FLAGS_OK);
	CHECK_INT(o.workers, 3);
	CHECK_STR(o.address, "/x");
	flags_free(fs);
}

/* Unsigned flags (upstream's flag.Uint worker counts, component-base's -v): a sign is refused. */
static void test_unsigned(void)
{
	static const struct {
		const char *arg;
		int ok;
		unsigned want_uint;
		int want_level;
		const char *err;
	} rows[] = {
		{ "--threads=0", 1, 0, 0, NULL },
		{ "--threads=7", 1, 7, 0, NULL },
		{ "--threads=0x10", 1, 16, 0, NULL },
		{ "--threads=0o17", 1, 15, 0, NULL },
		{ "--threads=4294967295", 1, 4294967295u, 0, NULL },
		{ "--threads=-1", 0, 0, 0, "invalid value \"-1\" for flag -threads: parse error" },
		{ "--threads=+3", 0, 0, 0, "invalid value \"+3\" for flag -threads: parse error" },
		{ "--threads= 3", 0, 0, 0, "invalid value \" 3\" for flag -threads: parse error" },
		{ "--threads=4294967296", 0, 0, 0, "invalid value \"4294967296\" for flag -threads: parse error" },
		{ "-v=5", 1, 3, 5, NULL },
		{ "-v=2147483647", 1, 3, 2147483647, NULL },
		{ "-v=-1", 0, 0, 0,
		  "invalid value \"-1\" for flag -v: strconv.ParseUint: parsing \"-1\": invalid syntax" },
		{ "-v=2147483648", 0, 0, 0,
		  "invalid value \"2147483648\" for flag -v: strconv.ParseUint: parsing \"2147483648\": value out of range" },
		{ "-v=0x5", 0, 0, 0,
		  "invalid value \"0x5\" for flag -v: strconv.ParseUint: parsing \"0x5\": invalid syntax" },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct flagset *fs = flags_new("p", "");
		unsigned threads;
		int level;
		char err[256] = "";
		char *argv[] = { "p", (char *)rows[i].arg };
		flags_uint(fs, "threads", &threads, 3, "Threads.");
		flags_level(fs, "v", &level, 0, "Verbosity.");
		enum flags_result r = flags_parse(fs, 2, argv, NULL, err, sizeof(err));
		if (rows[i].ok) {
			CHECK_INT(r, FLAGS_OK);
			CHECK_INT(threads, rows[i].want_uint);
			CHECK_INT(level, rows[i].want_level);
		} else {
			CHECK_INT(r, FLAGS_ERROR);
			CHECK_STR(err, rows[i].err);
		}
		flags_free(fs);
	}
}

static void test_help_and_version_results(void)
{
	struct opts o;
	struct flagset *fs = make(&o);
	char err[256];
	char *h1[] = { "p", "--help" }, *h2[] = { "p", "-h" }, *v[] = { "p", "--version" };

	CHECK_INT(parse(fs, 2, h1, NULL, err), FLAGS_HELP);
	CHECK_INT(parse(fs, 2, h2, NULL, err), FLAGS_HELP);
	CHECK_INT(parse(fs, 2, v, NULL, err), FLAGS_VERSION);
	flags_free(fs);
}

static void test_usage_text(void)
{
	struct opts o;
	struct flagset *fs = make(&o);
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	flags_print_usage(fs, f);
	fclose(f);
	CHECK(strstr(text, "Usage: csi-attacher [flags]") != NULL);
	CHECK(strstr(text, "  -timeout duration\n    \tTimeout. (default 15s)\n") != NULL);
	CHECK(strstr(text, "  -csi-address string\n    \tAddress of the CSI socket. (default \"/run/csi/socket\")\n") != NULL);
	CHECK(strstr(text, "  -leader-election\n    \tEnable leader election.\n") != NULL);
	CHECK(strstr(text, "  -dummy\n    \tDummy mode. (default true)\n") != NULL);
	CHECK(strstr(text, "  -worker-threads int\n    \tNumber of workers. (default 10)\n") != NULL);
	CHECK(strstr(text, "(DEPRECATED: use nothing)") != NULL);
	/* sorted by name like Go's PrintDefaults */
	CHECK(strstr(text, "-csi-address") < strstr(text, "-dummy"));
	CHECK(strstr(text, "-timeout") < strstr(text, "-worker-threads"));
	free(text);
	flags_free(fs);
}

/* Runs flags_parse_or_exit in a child; returns its exit status and what it printed. */
static int run_child(char **argv, int argc, char *out, size_t outlen)
{
	int pfd[2];
	pid_t pid;
	int status;
	ssize_t n, total = 0;

	if (pipe(pfd) != 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		struct opts o;
		dup2(pfd[1], 1);
		dup2(pfd[1], 2);
		close(pfd[0]);
		struct flagset *fs = make(&o);
		flags_parse_or_exit(fs, argc, argv);
		_exit(42);
	}
	close(pfd[1]);
	while ((n = read(pfd[0], out + total, outlen - 1 - (size_t)total)) > 0)
		total += n;
	out[total] = '\0';
	close(pfd[0]);
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_exit_codes(void)
{
	char out[8192];
	char *bad[] = { "csi-attacher", "--bogus" };
	char *help[] = { "csi-attacher", "--help" };
	char *ver[] = { "csi-attacher", "--version" };
	char *ok[] = { "csi-attacher", "--timeout=1s" };

	CHECK_INT(run_child(bad, 2, out, sizeof(out)), 2);
	CHECK(strstr(out, "flag provided but not defined: -bogus") != NULL);
	CHECK(strstr(out, "Usage: csi-attacher [flags]") != NULL);
	CHECK_INT(run_child(help, 2, out, sizeof(out)), 0);
	CHECK(strstr(out, "-worker-threads int") != NULL);
	CHECK_INT(run_child(ver, 2, out, sizeof(out)), 0);
	CHECK_STR(out, "csi-attacher v0.1.0\n");
	CHECK_INT(run_child(ok, 2, out, sizeof(out)), 42);
}

int main(void)
{
	RUN(test_defaults);
	RUN(test_all_forms);
	RUN(test_labels_and_gates);
	RUN(test_bool_does_not_take_next_arg);
	RUN(test_double_dash_ends_flags);
	RUN(test_errors);
	RUN(test_remove);
	RUN(test_unsigned);
	RUN(test_help_and_version_results);
	RUN(test_usage_text);
	RUN(test_exit_codes);
	return CHECK_DONE();
}
