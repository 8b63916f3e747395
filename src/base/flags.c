/*
 * flags: a command-line parser with Go's flag package semantics (see flags.h).
 *
 * A flagset is a small array of flag records; lookups are linear because a program has a few dozen
 * flags and parses once. Values are converted by kind with the same rules as Go (strconv for
 * numbers and booleans, time.ParseDuration for durations) so error messages name the same things.
 * --help lists flags sorted by name, like Go's PrintDefaults.
 */
#include "base/flags.h"
#include "base/log.h"
#include "base/timeutil.h"
#include "base/xalloc.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum flag_kind { F_BOOL, F_INT, F_INT64, F_DOUBLE, F_STRING, F_DURATION, F_MAP, F_LABELS, F_GATES,
		 F_UINT, F_LEVEL };

struct flag {
	char *name;
	char *help;
	enum flag_kind kind;
	void *ptr;
	char *def;	  /* default as printed by --help; NULL when it is the zero value */
	char *str;	  /* F_STRING: the current value, owned */
	char *deprecated; /* non-NULL: message printed when used */
	bool hidden;
	bool set;
};

struct flagset {
	char *program;
	char *usage;
	char *version;
	struct flag *flags;
	size_t len, cap;
};

static const char *kind_names[] = { "", "int", "int", "float", "string", "duration", "mapStringBool",
				     "value", "mapStringBool", "uint", "value" };

struct flagset *flags_new(const char *program, const char *usage)
{
	struct flagset *fs = xcalloc(1, sizeof(*fs));

	fs->program = xstrdup(program);
	fs->usage = xstrdup(usage);
	return fs;
}

static void map_clear(struct flag_map *m)
{
	for (size_t i = 0; i < m->len; i++) {
		free(m->items[i].key);
		free(m->items[i].value);
	}
	free(m->items);
	m->items = NULL;
	m->len = 0;
}

void flags_free(struct flagset *fs)
{
	if (!fs)
		return;
	for (size_t i = 0; i < fs->len; i++) {
		struct flag *f = &fs->flags[i];
		if (f->kind == F_MAP || f->kind == F_LABELS || f->kind == F_GATES)
			map_clear(f->ptr);
		if (f->kind == F_STRING)
			*(const char **)f->ptr = NULL;
		free(f->name);
		free(f->help);
		free(f->def);
		free(f->str);
		free(f->deprecated);
	}
	free(fs->flags);
	free(fs->program);
	free(fs->usage);
	free(fs->version);
	free(fs);
}

static struct flag *lookup(const struct flagset *fs, const char *name, size_t namelen)
{
	for (size_t i = 0; i < fs->len; i++) {
		if (strlen(fs->flags[i].name) == namelen &&
		    strncmp(fs->flags[i].name, name, namelen) == 0)
			return &fs->flags[i];
	}
	return NULL;
}

static struct flag *add(struct flagset *fs, const char *name, enum flag_kind kind, void *ptr,
			const char *help)
{
	struct flag *f;

	if (lookup(fs, name, strlen(name))) {
		/* Programming error: two registrations of one name. Go panics here too. */
		log_write(LOG_FATAL, __FILE__, __LINE__, "flag redefined: %s", name);
	}
	if (fs->len == fs->cap) {
		fs->cap = fs->cap ? fs->cap * 2 : 32;
		fs->flags = xrealloc(fs->flags, fs->cap * sizeof(*fs->flags));
	}
	f = &fs->flags[fs->len++];
	memset(f, 0, sizeof(*f));
	f->name = xstrdup(name);
	f->help = xstrdup(help ? help : "");
	f->kind = kind;
	f->ptr = ptr;
	return f;
}

static char *xprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xprintf(const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = xstrdup("");
	va_end(ap);
	return s;
}

void flags_enable_version(struct flagset *fs, const char *version)
{
	static bool dummy;

	free(fs->version);
	fs->version = xstrdup(version);
	add(fs, "version", F_BOOL, &dummy, "Show version.");
}

void flags_bool(struct flagset *fs, const char *name, bool *p, bool def, const char *help)
{
	struct flag *f = add(fs, name, F_BOOL, p, help);

	*p = def;
	if (def)
		f->def = xstrdup("true");
}

void flags_int(struct flagset *fs, const char *name, int *p, int def, const char *help)
{
	struct flag *f = add(fs, name, F_INT, p, help);

	*p = def;
	if (def)
		f->def = xprintf("%d", def);
}

void flags_uint(struct flagset *fs, const char *name, unsigned *p, unsigned def, const char *help)
{
	struct flag *f = add(fs, name, F_UINT, p, help);

	*p = def;
	if (def)
		f->def = xprintf("%u", def);
}

void flags_level(struct flagset *fs, const char *name, int *p, int def, const char *help)
{
	struct flag *f = add(fs, name, F_LEVEL, p, help);

	assert(def >= 0);
	*p = def;
	if (def)
		f->def = xprintf("%d", def);
}

void flags_int64(struct flagset *fs, const char *name, int64_t *p, int64_t def, const char *help)
{
	struct flag *f = add(fs, name, F_INT64, p, help);

	*p = def;
	if (def)
		f->def = xprintf("%lld", (long long)def);
}

void flags_double(struct flagset *fs, const char *name, double *p, double def, const char *help)
{
	struct flag *f = add(fs, name, F_DOUBLE, p, help);

	*p = def;
	if (def != 0)
		f->def = xprintf("%g", def);
}

void flags_string(struct flagset *fs, const char *name, const char **p, const char *def,
		  const char *help)
{
	struct flag *f = add(fs, name, F_STRING, (void *)p, help);

	f->str = xstrdup(def ? def : "");
	*p = f->str;
	if (def && *def)
		f->def = xprintf("\"%s\"", def);
}

void flags_duration(struct flagset *fs, const char *name, int64_t *ns, int64_t def_ns,
		    const char *help)
{
	struct flag *f = add(fs, name, F_DURATION, ns, help);
	char buf[DURATION_BUFLEN];

	*ns = def_ns;
	if (def_ns) {
		duration_format(def_ns, buf, sizeof(buf));
		f->def = xstrdup(buf);
	}
}

void flags_map(struct flagset *fs, const char *name, struct flag_map *p, const char *help)
{
	add(fs, name, F_MAP, p, help);
	p->items = NULL;
	p->len = 0;
}

void flags_gates(struct flagset *fs, const char *name, struct flag_map *p, const char *help)
{
	add(fs, name, F_GATES, p, help);
	p->items = NULL;
	p->len = 0;
}

void flags_labels(struct flagset *fs, const char *name, struct flag_map *p, const char *help)
{
	add(fs, name, F_LABELS, p, help);
	p->items = NULL;
	p->len = 0;
}

void flags_deprecate(struct flagset *fs, const char *name, const char *message)
{
	struct flag *f = lookup(fs, name, strlen(name));

	if (f) {
		free(f->deprecated);
		f->deprecated = xstrdup(message);
	}
}

void flags_hide(struct flagset *fs, const char *name)
{
	struct flag *f = lookup(fs, name, strlen(name));

	if (f)
		f->hidden = true;
}

void flags_remove(struct flagset *fs, const char *name)
{
	struct flag *f = lookup(fs, name, strlen(name));

	assert(f && f->kind != F_STRING && f->kind != F_MAP && f->kind != F_LABELS &&
	       f->kind != F_GATES);
	if (!f)
		return;
	free(f->name);
	free(f->help);
	free(f->def);
	free(f->str);
	free(f->deprecated);
	size_t i = (size_t)(f - fs->flags);
	memmove(f, f + 1, (fs->len - i - 1) * sizeof(*f));
	fs->len--;
}

bool flags_is_set(const struct flagset *fs, const char *name)
{
	struct flag *f = lookup(fs, name, strlen(name));
	return f && f->set;
}

const char *flag_map_get(const struct flag_map *m, const char *key)
{
	for (size_t i = 0; i < m->len; i++) {
		if (strcmp(m->items[i].key, key) == 0)
			return m->items[i].value;
	}
	return NULL;
}

/* Go's strconv.ParseBool. */
static int parse_bool(const char *s, bool *out)
{
	static const char *truths[] = { "1", "t", "T", "TRUE", "true", "True" };
	static const char *falses[] = { "0", "f", "F", "FALSE", "false", "False" };

	for (size_t i = 0; i < 6; i++) {
		if (strcmp(s, truths[i]) == 0) {
			*out = true;
			return 0;
		}
		if (strcmp(s, falses[i]) == 0) {
			*out = false;
			return 0;
		}
	}
	return -1;
}

static int parse_int64(const char *s, long long min, long long max, long long *out)
{
	char *end;
	long long v;

	if (!*s || (*s == ' ' || *s == '\t'))
		return -1;
	errno = 0;
	v = strtoll(s, &end, 0);
	if (errno || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

/* Go's strconv.ParseUint(s, base, ...) up to max: digits only, no sign (a "-1" is a parse error,
 * not a large number as strtoull would make it). base 0 takes Go's 0x, 0o, 0b prefixes and a
 * leading 0 for octal (Go's underscores between digits are not taken). */
static int parse_uint(const char *s, int base, unsigned long long max, unsigned long long *out)
{
	char *end;
	unsigned long long v;

	if (*s < '0' || *s > '9')
		return -1;
	if (base == 0 && s[0] == '0' && (s[1] == 'o' || s[1] == 'O')) {
		s += 2;
		base = 8;
		if (*s < '0' || *s > '7')
			return -1;
	} else if (base == 0 && s[0] == '0' && (s[1] == 'b' || s[1] == 'B')) {
		s += 2;
		base = 2;
		if (*s != '0' && *s != '1')
			return -1;
	}
	errno = 0;
	v = strtoull(s, &end, base);
	if (errno || *end || v > max)
		return -1;
	*out = v;
	return 0;
}

static void map_put(struct flag_map *m, const char *key, const char *value)
{
	size_t i;

	for (i = 0; i < m->len && strcmp(m->items[i].key, key) != 0; i++)
		;
	if (i == m->len) {
		m->items = xrealloc(m->items, (m->len + 1) * sizeof(*m->items));
		m->items[m->len].key = xstrdup(key);
		m->items[m->len].value = NULL;
		m->len++;
	}
	free(m->items[i].value);
	m->items[i].value = xstrdup(value);
}

/* Parses "k=v,k2=v2" into m, replacing values of keys already present. */
static int parse_map(const char *s, struct flag_map *m, char *why, size_t whylen)
{
	char *copy = xstrdup(s), *save = NULL;
	int rc = 0;

	for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		while (*item == ' ')
			item++;
		char *eq = strchr(item, '=');
		if (!eq || eq == item) {
			snprintf(why, whylen, "missing key=value in \"%s\"", item);
			rc = -1;
			break;
		}
		*eq = '\0';
		char *key = item, *value = eq + 1;
		size_t kl = strlen(key);
		while (kl > 0 && key[kl - 1] == ' ')
			key[--kl] = '\0';
		map_put(m, key, value);
	}
	free(copy);
	return rc;
}

/*
 * component-base's MapStringBool: "k=v" items, each value one of Go's bools, so a bad value is
 * refused while parsing (exit 2), as upstream's flag parser refuses it.
 */
static int parse_gates(const char *s, struct flag_map *m, char *why, size_t whylen)
{
	struct flag_map add = { NULL, 0 };
	int rc = parse_map(s, &add, why, whylen);

	for (size_t i = 0; rc == 0 && i < add.len; i++) {
		const char *v = add.items[i].value;
		char trimmed[16];
		size_t n;
		bool b;

		while (*v == ' ')
			v++;
		n = strlen(v);
		while (n > 0 && v[n - 1] == ' ')
			n--;
		if (n >= sizeof(trimmed) || (memcpy(trimmed, v, n), trimmed[n] = '\0',
					     parse_bool(trimmed, &b))) {
			snprintf(why, whylen,
				 "invalid value of %s=%s, err: strconv.ParseBool: parsing \"%s\": invalid syntax",
				 add.items[i].key, add.items[i].value, add.items[i].value);
			rc = -1;
		}
	}
	for (size_t i = 0; rc == 0 && i < add.len; i++)
		map_put(m, add.items[i].key, add.items[i].value);
	map_clear(&add);
	return rc;
}

/*
 * csi-lib-utils' stringMap: split on ',', each item exactly one "key:value" (no trimming, an
 * empty item is malformed); kcsi also takes "key=value" for an item without ':'.
 */
static int parse_labels(const char *s, struct flag_map *m, char *why, size_t whylen)
{
	char *copy = xstrdup(s);
	int rc = 0;

	for (char *item = copy, *next; item; item = next) {
		next = strchr(item, ',');
		if (next)
			*next++ = '\0';
		char sep = strchr(item, ':') ? ':' : '=';
		char *mid = strchr(item, sep);
		if (!mid || mid == item || strchr(mid + 1, sep)) {
			snprintf(why, whylen, "malformed item in list of labels: %s", item);
			rc = -1;
			break;
		}
		*mid = '\0';
		map_put(m, item, mid + 1);
	}
	free(copy);
	return rc;
}

static int set_value(struct flag *f, const char *value, char *why, size_t whylen)
{
	unsigned long long ull;
	long long ll;
	bool b;

	why[0] = '\0';
	switch (f->kind) {
	case F_BOOL:
		if (parse_bool(value, &b))
			return snprintf(why, whylen, "parse error"), -1;
		*(bool *)f->ptr = b;
		return 0;
	case F_INT:
		if (parse_int64(value, INT_MIN, INT_MAX, &ll))
			return snprintf(why, whylen, "parse error"), -1;
		*(int *)f->ptr = (int)ll;
		return 0;
	case F_INT64:
		if (parse_int64(value, LLONG_MIN, LLONG_MAX, &ll))
			return snprintf(why, whylen, "parse error"), -1;
		*(int64_t *)f->ptr = ll;
		return 0;
	case F_UINT:
		if (parse_uint(value, 0, UINT_MAX, &ull))
			return snprintf(why, whylen, "parse error"), -1;
		*(unsigned *)f->ptr = (unsigned)ull;
		return 0;
	case F_LEVEL:
		/* component-base's VerbosityLevel: ParseUint(s, 10, 31) */
		if (parse_uint(value, 10, INT_MAX, &ull)) {
			bool digits = *value && strspn(value, "0123456789") == strlen(value);
			snprintf(why, whylen, "strconv.ParseUint: parsing \"%.100s\": %s", value,
				 digits ? "value out of range" : "invalid syntax");
			return -1;
		}
		*(int *)f->ptr = (int)ull;
		return 0;
	case F_DOUBLE: {
		char *end;
		errno = 0;
		double d = strtod(value, &end);
		if (!*value || *end || errno || isnan(d))
			return snprintf(why, whylen, "parse error"), -1;
		*(double *)f->ptr = d;
		return 0;
	}
	case F_STRING:
		free(f->str);
		f->str = xstrdup(value);
		*(const char **)f->ptr = f->str;
		return 0;
	case F_DURATION: {
		int64_t ns;
		if (duration_parse(value, &ns, why, whylen))
			return -1;
		*(int64_t *)f->ptr = ns;
		return 0;
	}
	case F_MAP:
		return parse_map(value, f->ptr, why, whylen);
	case F_LABELS:
		return parse_labels(value, f->ptr, why, whylen);
	case F_GATES:
		return parse_gates(value, f->ptr, why, whylen);
	}
	return -1;
}

enum flags_result flags_parse(struct flagset *fs, int argc, char **argv, int *rest, char *err,
			      size_t errlen)
{
	int i;

	for (i = 1; i < argc; i++) {
		const char *s = argv[i], *name, *eq, *value = NULL;
		size_t namelen;
		struct flag *f;
		char why[256];

		if (strlen(s) < 2 || s[0] != '-')
			break;
		name = s + 1;
		if (*name == '-') {
			name++;
			if (*name == '\0') { /* "--" ends the flags */
				i++;
				break;
			}
		}
		if (*name == '-' || *name == '=') {
			snprintf(err, errlen, "bad flag syntax: %s", s);
			return FLAGS_ERROR;
		}
		eq = strchr(name, '=');
		namelen = eq ? (size_t)(eq - name) : strlen(name);
		if (eq)
			value = eq + 1;
		f = lookup(fs, name, namelen);
		if (!f) {
			if ((namelen == 4 && strncmp(name, "help", 4) == 0) ||
			    (namelen == 1 && name[0] == 'h'))
				return FLAGS_HELP;
			snprintf(err, errlen, "flag provided but not defined: -%.*s", (int)namelen,
				 name);
			return FLAGS_ERROR;
		}
		if (f->kind == F_BOOL && !value) {
			value = "true";
		} else if (!value) {
			if (i + 1 >= argc) {
				snprintf(err, errlen, "flag needs an argument: -%s", f->name);
				return FLAGS_ERROR;
			}
			value = argv[++i];
		}
		if (set_value(f, value, why, sizeof(why))) {
			if (f->kind == F_BOOL)
				snprintf(err, errlen, "invalid boolean value \"%s\" for -%s: %s", value,
					 f->name, why);
			else
				snprintf(err, errlen, "invalid value \"%s\" for flag -%s: %s", value,
					 f->name, why);
			return FLAGS_ERROR;
		}
		f->set = true;
		if (strcmp(f->name, "version") == 0 && fs->version && *(bool *)f->ptr)
			return FLAGS_VERSION;
		if (f->deprecated)
			KLOG_W("Flag -%s is deprecated: %s", f->name, f->deprecated);
	}
	if (rest)
		*rest = i;
	return FLAGS_OK;
}

static int by_name(const void *a, const void *b)
{
	const struct flag *const *fa = a, *const *fb = b;
	return strcmp((*fa)->name, (*fb)->name);
}

void flags_print_usage(const struct flagset *fs, FILE *out)
{
	const struct flag **sorted = xcalloc(fs->len, sizeof(*sorted));

	for (size_t i = 0; i < fs->len; i++)
		sorted[i] = &fs->flags[i];
	qsort(sorted, fs->len, sizeof(*sorted), by_name);
	if (fs->usage && fs->usage[0])
		fprintf(out, "Usage: %s\n\n", fs->usage);
	fputs("Flags:\n", out);
	for (size_t i = 0; i < fs->len; i++) {
		const struct flag *f = sorted[i];
		if (f->hidden)
			continue;
		fprintf(out, "  -%s", f->name);
		if (f->kind != F_BOOL)
			fprintf(out, " %s", kind_names[f->kind]);
		fprintf(out, "\n    \t%s", f->help);
		if (f->def)
			fprintf(out, " (default %s)", f->def);
		if (f->deprecated)
			fprintf(out, " (DEPRECATED: %s)", f->deprecated);
		fputc('\n', out);
	}
	free(sorted);
}

int flags_parse_or_exit(struct flagset *fs, int argc, char **argv)
{
	char err[512];
	int rest = argc;

	switch (flags_parse(fs, argc, argv, &rest, err, sizeof(err))) {
	case FLAGS_OK:
		return rest;
	case FLAGS_HELP:
		flags_print_usage(fs, stdout);
		flags_free(fs); /* LeakSanitizer would turn the exit code into 1 */
		exit(0);
	case FLAGS_VERSION:
		printf("%s %s\n", fs->program, fs->version);
		flags_free(fs);
		exit(0);
	case FLAGS_ERROR:
		break;
	}
	fprintf(stderr, "%s\nUsage: %s\nRun '%s --help' for the list of flags.\n", err, fs->usage,
		fs->program);
	flags_free(fs);
	exit(2);
}

void flags_set_help(struct flagset *fs, const char *name, const char *help)
{
	struct flag *f = lookup(fs, name, strlen(name));

	if (!f) {
		log_write(LOG_FATAL, __FILE__, __LINE__, "flag help %s: no such flag", name);
		return;
	}
	free(f->help);
	f->help = xstrdup(help);
}

void flags_set_default(struct flagset *fs, const char *name, const char *value)
{
	struct flag *f = lookup(fs, name, strlen(name));
	char why[128];

	/* Programming errors, as a redefinition: the value is ours, not the user's. */
	if (!f || f->kind == F_MAP || f->kind == F_LABELS || f->kind == F_GATES || set_value(f, value, why, sizeof(why)) < 0) {
		log_write(LOG_FATAL, __FILE__, __LINE__, "flag default %s=%s: %s", name, value,
			  f ? why : "no such flag");
		return;
	}
	free(f->def);
	f->def = f->kind == F_STRING ? xprintf("\"%s\"", value) : xstrdup(value);
}
