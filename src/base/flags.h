/*
 * flags: command-line flags parsed the way Go's flag package parses them, so that every argument
 * list an upstream sidecar accepts is accepted here unchanged.
 *
 *   -name, --name            boolean true
 *   -name=value, --name=value
 *   -name value, --name value   (not for booleans: "--b false" leaves "false" as an argument)
 *   --                       ends flags
 * Parsing stops at the first argument that is not a flag; the rest are positional.
 *
 * Value kinds: bool, int, uint, int64, double, string, duration (Go syntax, see timeutil.h), a
 * verbosity level (-v), and string
 * maps ("A=true,B=false", as --feature-gates, or "k:v,k2:v2", as --leader-election-labels;
 * repeated flags add to the map).
 *
 * A flagset owns its flag table and every string it stores. Pointers given at registration are
 * the caller's variables; the flagset writes the default into them at registration and the parsed
 * value when parsing. String variables point into memory owned by the flagset until flags_free().
 *
 * -h / --help prints the usage line and every flag with its help and default, and
 * flags_parse_or_exit() exits 0; --version (when enabled) prints "<program> <version>" and exits 0.
 * An unknown flag or a bad value prints the reason and the usage to stderr and exits 2. Before it
 * exits it frees the flagset (so LeakSanitizer keeps the exit code); it returns only on success.
 */
#ifndef KCSI_BASE_FLAGS_H
#define KCSI_BASE_FLAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct flagset;

/* One key=value entry of a string-map flag, in the order given. */
struct flag_kv {
	char *key;
	char *value;
};
struct flag_map {
	struct flag_kv *items;
	size_t len;
};
/* Returns the value for key, or NULL. */
const char *flag_map_get(const struct flag_map *m, const char *key);

/* Life cycle. `usage` is the line after "Usage: ", e.g. "csi-attacher [flags]". */
struct flagset *flags_new(const char *program, const char *usage);
void flags_free(struct flagset *fs);
/* Adds --version, printing "<program> <version>". */
void flags_enable_version(struct flagset *fs, const char *version);

/* Registration. `name` has no dashes. The default is stored in *p at once. */
void flags_bool(struct flagset *fs, const char *name, bool *p, bool def, const char *help);
void flags_int(struct flagset *fs, const char *name, int *p, int def, const char *help);
/* Go's flag.Uint: digits with Go's base prefixes, no sign, at most UINT_MAX; "-1" is a parse
 * error (upstream's pflag/flag refuse it the same way). */
void flags_uint(struct flagset *fs, const char *name, unsigned *p, unsigned def, const char *help);
/* component-base's verbosity (-v): decimal digits, 0 to 2^31-1; a negative value is a parse
 * error whose reason is strconv.ParseUint's, as upstream prints it. */
void flags_level(struct flagset *fs, const char *name, int *p, int def, const char *help);
void flags_int64(struct flagset *fs, const char *name, int64_t *p, int64_t def, const char *help);
void flags_double(struct flagset *fs, const char *name, double *p, double def, const char *help);
void flags_string(struct flagset *fs, const char *name, const char **p, const char *def,
		  const char *help);
void flags_duration(struct flagset *fs, const char *name, int64_t *ns, int64_t def_ns,
		    const char *help);
void flags_map(struct flagset *fs, const char *name, struct flag_map *p, const char *help);
/* A string map of Go bools ("A=true,B=0", as --feature-gates): a value ParseBool refuses is a
 * parse error. */
void flags_gates(struct flagset *fs, const char *name, struct flag_map *p, const char *help);
/*
 * A string map in csi-lib-utils' label syntax, "k:v,k2:v2" (as --leader-election-labels): each
 * item must be exactly key:value with a non-empty key; key=value is accepted too. Repeated
 * flags add to the map.
 */
void flags_labels(struct flagset *fs, const char *name, struct flag_map *p, const char *help);
/* Marks a flag deprecated: still accepted, a warning is logged when it is used. */
void flags_deprecate(struct flagset *fs, const char *name, const char *message);
/* Unregisters a flag of a shared registration that this program does not offer (its variable
 * keeps the default); the name is then refused as upstream refuses it. Not for string or map
 * flags. */
void flags_remove(struct flagset *fs, const char *name);
/* Hides a flag from --help (for compatibility-only flags). */
void flags_hide(struct flagset *fs, const char *name);

/* Parsing. */
enum flags_result { FLAGS_OK = 0, FLAGS_HELP, FLAGS_VERSION, FLAGS_ERROR };
/*
 * Parses argv[1..argc-1]. On FLAGS_OK, *rest is the index of the first positional argument.
 * On FLAGS_ERROR, err holds the reason ("flag provided but not defined: -x").
 */
enum flags_result flags_parse(struct flagset *fs, int argc, char **argv, int *rest, char *err,
			      size_t errlen);
/* flags_parse(), then help/version -> print and exit 0, error -> reason + usage, exit 2. */
int flags_parse_or_exit(struct flagset *fs, int argc, char **argv);

/* True when the flag was given on the command line. */
bool flags_is_set(const struct flagset *fs, const char *name);
/* Writes the usage line (none when flags_new() was given "") and the flag table. */
void flags_print_usage(const struct flagset *fs, FILE *out);

/*
 * Changes a registered flag's default (before parsing): the variable and what --help shows, so
 * that a program whose upstream default differs from a shared registration (kcsi-node's
 * --kube-api-qps) says the default it uses. value is in the flag's syntax ("50", "10s").
 */
void flags_set_default(struct flagset *fs, const char *name, const char *value);
/* Replaces a registered flag's help text (a program whose flag acts otherwise than the shared
 * registration says). */
void flags_set_help(struct flagset *fs, const char *name, const char *help);

#endif
