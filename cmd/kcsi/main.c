/*
 * kcsi: a command-line CSI client, for driver developers and for scripts (csc's role upstream).
 *
 *   kcsi [--endpoint unix:///path] [--timeout 30s] [-o table|json] [-v N] SERVICE VERB [args]
 *
 * Global flags are parsed Go-style (base/flags) up to SERVICE; after VERB, positionals and the
 * verb's options mix freely (--param a=b NAME --cap ...), and -o/--timeout/-v are accepted
 * there too since people type them last. See cli.h for exit codes.
 */
#include <stdlib.h>
#include <string.h>

#include "base/flags.h"
#include "base/log.h"
#include "base/log_flags.h"
#include "base/timeutil.h"
#include "base/version.h"
#include "base/xalloc.h"
#include "cli.h"

/* What a mistyped command line gets: a few lines, not the whole help. */
static const char short_usage[] =
	"Usage: kcsi [flags] SERVICE VERB [args] [options]   (kcsi up [flags]: the whole stack)\n"
	"Services: identity, controller, group, metadata, node. "
	"'kcsi --help' lists every verb and flag.\n";

static const struct { const char *name, *arg, *help; } option_help[] = {
	{ "cap-bytes", "SIZE", "required capacity, bytes or quantity (10Gi, 500M)" },
	{ "limit-bytes", "SIZE", "capacity limit" },
	{ "param", "KEY=VALUE", "parameter (repeatable)" },
	{ "mutable-param", "KEY=VALUE", "mutable parameter (repeatable, alpha)" },
	{ "cap", "MODE,mount|block[,FSTYPE[,FLAG...]]",
	  "volume capability; MODE is SINGLE_NODE_WRITER, MULTI_NODE_READER_ONLY, ... "
	  "(default SINGLE_NODE_WRITER,mount)" },
	{ "from-snapshot", "ID", "create the volume from this snapshot" },
	{ "from-volume", "ID", "clone this volume" },
	{ "secret", "KEY=VALUE", "secret passed to the driver, never printed (repeatable)" },
	{ "requisite", "KEY=VALUE[,KEY=VALUE]", "requisite topology (repeatable)" },
	{ "preferred", "KEY=VALUE[,KEY=VALUE]", "preferred topology (repeatable)" },
	{ "readonly", "", "publish read-only" },
	{ "vol-ctx", "KEY=VALUE", "volume context from CreateVolume (repeatable)" },
	{ "pub-ctx", "KEY=VALUE", "publish context from ControllerPublish (repeatable)" },
	{ "max", "N", "maximum entries per page (ranges per response for metadata)" },
	{ "starting-offset", "SIZE", "resume the ranges at this byte (bytes or quantity)" },
	{ "starting-token", "TOKEN", "continue a paged listing" },
	{ "topology", "KEY=VALUE[,KEY=VALUE]", "accessible topology" },
	{ "source-volume", "ID", "only snapshots of this volume" },
	{ "snapshot-id", "ID", "only this snapshot" },
	{ "staging", "PATH", "staging target path" },
};

static const char *opt_arg(const char *name)
{
	for (size_t i = 0; i < sizeof(option_help) / sizeof(option_help[0]); i++)
		if (strcmp(option_help[i].name, name) == 0)
			return option_help[i].arg;
	return "";
}

static void print_verb(const struct verb *v, FILE *out, bool options)
{
	fprintf(out, "  kcsi %s %s%s%s", v->service, v->name, v->args[0] ? " " : "", v->args);
	if (!options && v->options[0]) {
		/* The overview names every option; SERVICE --help explains them. */
		char *list = xstrdup(v->options), *save = NULL;
		for (char *o = strtok_r(list, " ", &save); o; o = strtok_r(NULL, " ", &save)) {
			size_t n = strlen(o);
			bool rep = o[n - 1] == '*';
			if (rep)
				o[n - 1] = '\0';
			fprintf(out, " [--%s%s%s]%s", o, opt_arg(o)[0] ? " " : "", opt_arg(o),
				rep ? "..." : "");
		}
		free(list);
	}
	fprintf(out, "\n      %s\n", v->help);
	if (!options || !v->options[0])
		return;
	char *list = xstrdup(v->options), *save = NULL;
	for (char *o = strtok_r(list, " ", &save); o; o = strtok_r(NULL, " ", &save)) {
		size_t n = strlen(o);
		bool rep = o[n - 1] == '*';
		if (rep)
			o[n - 1] = '\0';
		for (size_t i = 0; i < sizeof(option_help) / sizeof(option_help[0]); i++)
			if (strcmp(option_help[i].name, o) == 0)
				fprintf(out, "        --%s %s\n            %s\n", o, opt_arg(o),
					option_help[i].help);
	}
	free(list);
}

static void print_help(FILE *out, const char *service, struct flagset *fs)
{
	if (!service) {
		fprintf(out, "kcsi: call any CSI driver over its unix socket, or run the whole stack.\n\n"
			     "Usage: kcsi [flags] SERVICE VERB [args] [options]\n"
			     "       kcsi up [flags]   (kube-emulator and every component; 'kcsi up --help')\n\n"
			     "Services and verbs:\n");
	} else {
		fprintf(out, "Verbs of %s:\n", service);
	}
	for (const struct verb *v = cli_verbs; v->service; v++)
		if (!service || strcmp(v->service, service) == 0)
			print_verb(v, out, service != NULL);
	if (!service) {
		fprintf(out, "\n'kcsi SERVICE --help' lists the options of each verb.\n"
			     "Exit status: 0 ok, 1 local error, 2 usage, 3 cannot connect, "
			     "10+N gRPC status N (e.g. 15 NOT_FOUND).\n\n");
		flags_print_usage(fs, out);
	}
}

static bool verb_accepts(const struct verb *v, const char *name, bool *repeatable)
{
	char *list = xstrdup(v->options), *save = NULL;
	bool found = false;
	for (char *o = strtok_r(list, " ", &save); o && !found; o = strtok_r(NULL, " ", &save)) {
		size_t n = strlen(o);
		*repeatable = o[n - 1] == '*';
		if (*repeatable)
			o[n - 1] = '\0';
		found = strcmp(o, name) == 0;
	}
	free(list);
	return found;
}

struct globals {
	const char *output;
	int64_t timeout_ns;
};

/* Splits the verb's arguments into positionals and options; returns 0 or EXIT_USAGE. */
static int parse_verb_args(const struct verb *v, int argc, char **argv, struct cli *c,
			   struct globals *g)
{
	c->pos = xcalloc((size_t)argc + 1, sizeof(char *));
	c->opts = xcalloc((size_t)argc + 1, sizeof(struct cli_opt));
	bool only_pos = false;
	for (int i = 0; i < argc; i++) {
		char *a = argv[i];
		if (only_pos || a[0] != '-' || a[1] == '\0') {
			c->pos[c->npos++] = a;
			continue;
		}
		if (strcmp(a, "--") == 0) {
			only_pos = true;
			continue;
		}
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0 || strcmp(a, "-help") == 0) {
			print_verb(v, stdout, true);
			exit(0);
		}
		const char *name = a + (a[1] == '-' ? 2 : 1);
		const char *eq = strchr(name, '=');
		char *key = eq ? xstrndup(name, (size_t)(eq - name)) : xstrdup(name);
		const char *value = eq ? eq + 1 : NULL;
		bool rep = false, is_bool = strcmp(key, "readonly") == 0;
		bool global = !strcmp(key, "o") || !strcmp(key, "output") ||
			      !strcmp(key, "timeout") || !strcmp(key, "v");
		if (!global && !verb_accepts(v, key, &rep)) {
			fprintf(stderr, "kcsi: %s %s does not take --%s (see kcsi %s --help)\n",
				v->service, v->name, key, v->service);
			free(key);
			return EXIT_USAGE;
		}
		if (!value && is_bool)
			value = "true";
		if (!value) {
			if (i + 1 >= argc) {
				fprintf(stderr, "kcsi: --%s needs a value\n", key);
				free(key);
				return EXIT_USAGE;
			}
			value = argv[++i];
		}
		if (!strcmp(key, "o") || !strcmp(key, "output")) {
			g->output = value;
		} else if (!strcmp(key, "timeout")) {
			char e[128];
			if (duration_parse(value, &g->timeout_ns, e, sizeof(e))) {
				fprintf(stderr, "kcsi: --timeout %s: %s\n", value, e);
				free(key);
				return EXIT_USAGE;
			}
		} else if (!strcmp(key, "v")) {
			int32_t lv;
			char e[128];
			if (cli_parse_count(value, &lv, e, sizeof(e))) {
				fprintf(stderr, "kcsi: -v %s\n", e);
				free(key);
				return EXIT_USAGE;
			}
			log_set_verbosity(lv);
		} else {
			c->opts[c->nopts].name = xstrdup(key);
			c->opts[c->nopts++].value = value;
		}
		free(key);
	}
	if (c->npos < v->min_pos || c->npos > v->max_pos) {
		fprintf(stderr, "kcsi: %s %s takes %s%s\n", v->service, v->name,
			v->args[0] ? "arguments " : "no arguments", v->args);
		return EXIT_USAGE;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "up") == 0)
		return cli_up_main(argc - 1, argv + 1);
	const char *endpoint, *o_short, *o_long;
	int64_t timeout_ns, connect_timeout_ns;
	int max_log;
	struct flagset *fs = flags_new("kcsi", ""); /* print_help() writes the usage line */
	flags_enable_version(fs, kcsi_version);
	flags_string(fs, "endpoint", &endpoint, "",
		     "CSI endpoint: unix:///path, unix:/path or /path (default $CSI_ENDPOINT, "
		     "else unix:///run/csi/socket)");
	flags_duration(fs, "timeout", &timeout_ns, 30 * NSEC_PER_SEC, "deadline of the call");
	flags_duration(fs, "connect-timeout", &connect_timeout_ns, 10 * NSEC_PER_SEC,
		       "how long to wait for the socket to appear and the driver to accept; without "
		       "it, a missing socket, a file that is not one, a socket nobody listens on or "
		       "a peer that is not a gRPC server fails at once, and a silent peer after 10s");
	flags_string(fs, "o", &o_short, "", "output format: table or json");
	flags_string(fs, "output", &o_long, "table", "output format: table or json");
	flags_int(fs, "max-grpc-log-length", &max_log, -1,
		  "truncate logged gRPC requests and responses to this many bytes (-1: no limit)");
	log_register_flags(fs);
	log_hide_flags(fs); /* accepted, but a CLI's help shows only -v */

	int rest;
	char err[512];
	switch (flags_parse(fs, argc, argv, &rest, err, sizeof(err))) {
	case FLAGS_HELP:
		print_help(stdout, NULL, fs);
		flags_free(fs);
		return 0;
	case FLAGS_VERSION:
		printf("kcsi %s\n", kcsi_version);
		flags_free(fs);
		return 0;
	case FLAGS_ERROR:
		fprintf(stderr, "kcsi: %s\n%s", err, short_usage);
		flags_free(fs);
		return EXIT_USAGE;
	case FLAGS_OK:
		break;
	}
	if (log_apply_flags(err, sizeof(err))) {
		fprintf(stderr, "kcsi: %s\n", err);
		flags_free(fs);
		return EXIT_USAGE;
	}
	int code = EXIT_USAGE;
	struct cli c = { .out = stdout };
	struct globals g = { o_short[0] ? o_short : o_long, timeout_ns };
	const char *service = rest < argc ? argv[rest] : NULL;
	const char *verb = rest + 1 < argc ? argv[rest + 1] : NULL;
	if (!service) {
		fputs(short_usage, stderr);
		goto out;
	}
	const struct verb *v = cli_verbs;
	bool known_service = false;
	for (; v->service; v++) {
		if (strcmp(v->service, service) != 0)
			continue;
		known_service = true;
		if (verb && strcmp(v->name, verb) == 0)
			break;
	}
	if (!known_service) {
		fprintf(stderr, "kcsi: unknown service %s\n%s", service, short_usage);
		goto out;
	}
	if (!v->service) {
		bool help = verb && (!strcmp(verb, "--help") || !strcmp(verb, "-h") ||
				     !strcmp(verb, "-help") || !strcmp(verb, "help"));
		if (help) {
			print_help(stdout, service, fs);
			code = 0;
			goto out;
		}
		if (verb)
			fprintf(stderr, "kcsi: unknown verb %s %s\n", service, verb);
		else
			fprintf(stderr, "kcsi: %s needs a verb\n", service);
		fprintf(stderr, "Verbs of %s:", service);
		for (const struct verb *w = cli_verbs; w->service; w++)
			if (!strcmp(w->service, service))
				fprintf(stderr, " %s", w->name);
		fprintf(stderr, "\n'kcsi %s --help' explains them and their options.\n", service);
		goto out;
	}
	if ((code = parse_verb_args(v, argc - rest - 2, argv + rest + 2, &c, &g)))
		goto out;
	if (strcmp(g.output, "json") && strcmp(g.output, "table")) {
		fprintf(stderr, "kcsi: -o %s: want table or json\n", g.output);
		code = EXIT_USAGE;
		goto out;
	}
	if (cli_check_positive("timeout", g.timeout_ns, err, sizeof(err)) ||
	    cli_check_positive("connect-timeout", connect_timeout_ns, err, sizeof(err))) {
		fprintf(stderr, "kcsi: %s\n", err);
		code = EXIT_USAGE;
		goto out;
	}
	c.json = !strcmp(g.output, "json");
	c.timeout_ns = g.timeout_ns;
	if (!endpoint[0])
		endpoint = getenv("CSI_ENDPOINT") ? getenv("CSI_ENDPOINT") : "unix:///run/csi/socket";

	char *path;
	if (csi_endpoint_path(endpoint, &path, err, sizeof(err))) {
		fprintf(stderr, "kcsi: %s\n", err);
		code = EXIT_USAGE;
		goto out;
	}
	free(path);
	struct csi_conn_opts co = CSI_CONN_OPTS_INIT;
	co.connect_timeout_ns = connect_timeout_ns;
	co.fail_fast = !flags_is_set(fs, "connect-timeout");
	co.max_log_len = max_log;
	c.conn = csi_connect(endpoint, &co, err, sizeof(err));
	if (!c.conn) {
		fprintf(stderr, "kcsi: %s\n", err);
		code = EXIT_CONNECT;
		goto out;
	}
	c.arena = csi_arena_new();
	code = v->run(&c);
	csi_arena_free(c.arena);
	csi_conn_free(c.conn);
out:
	for (int i = 0; i < c.nopts; i++)
		free((char *)c.opts[i].name);
	free(c.opts);
	free(c.pos);
	flags_free(fs);
	return code;
}
