/*
 * kcsi CLI: verb argument helpers (quantities, key=value maps, volume capabilities, topology)
 * and output (aligned tables, the JSON path, the call wrapper that maps errors to exit codes).
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/strbuf.h"
#include "base/xalloc.h"
#include "cli.h"

const char *cli_opt(const struct cli *c, const char *name)
{
	const char *v = NULL;
	for (int i = 0; i < c->nopts; i++)
		if (strcmp(c->opts[i].name, name) == 0)
			v = c->opts[i].value;
	return v;
}

bool cli_flag(const struct cli *c, const char *name)
{
	const char *v = cli_opt(c, name);
	return v && (strcmp(v, "true") == 0 || strcmp(v, "1") == 0);
}

int cli_parse_count(const char *s, int32_t *out, char *err, size_t errlen)
{
	int64_t v = 0;
	const char *p = s;

	for (; p && *p && isdigit((unsigned char)*p) && v <= INT32_MAX; p++)
		v = v * 10 + (*p - '0');
	if (!s || !*s || *p || v > INT32_MAX) {
		snprintf(err, errlen, "invalid count %s: want a whole number from 0 to %d",
			 s ? s : "(none)", INT32_MAX);
		return -1;
	}
	*out = (int32_t)v;
	return 0;
}

int cli_check_positive(const char *flag, int64_t ns, char *err, size_t errlen)
{
	if (ns > 0)
		return 0;
	snprintf(err, errlen, "--%s must be a positive duration such as 30s", flag);
	return -1;
}

int cli_parse_bytes(const char *s, int64_t *out, char *err, size_t errlen)
{
	static const struct { const char *suffix; long double mult; } units[] = {
		{ "Ki", 1024.0L }, { "Mi", 1048576.0L }, { "Gi", 1073741824.0L },
		{ "Ti", 1099511627776.0L }, { "Pi", 1125899906842624.0L },
		{ "Ei", 1152921504606846976.0L },
		{ "k", 1e3L }, { "M", 1e6L }, { "G", 1e9L }, { "T", 1e12L }, { "P", 1e15L },
		{ "E", 1e18L }, { "", 1.0L },
	};
	char *end;
	if (!s || !*s || !(isdigit((unsigned char)s[0]) || s[0] == '.'))
		goto bad;
	errno = 0;
	long double v = strtold(s, &end);
	if ((errno && errno != ERANGE) || end == s)
		goto bad;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(end, units[i].suffix) == 0) {
			long double b = ceill(v * units[i].mult);
			/* CSI sizes are int64 bytes: 8 EiB less one byte at most. */
			if (errno == ERANGE || b > 9223372036854775807.0L) {
				snprintf(err, errlen, "size %s is too large: at most %" PRId64
					 " bytes (8Ei less one byte)", s, INT64_MAX);
				return -1;
			}
			*out = (int64_t)b;
			return 0;
		}
	}
bad:
	snprintf(err, errlen, "invalid size %s: want bytes or a quantity like 10Gi, 500Mi, 1G",
		 s ? s : "(none)");
	return -1;
}

int cli_add_kv_opts(struct cli *c, ProtobufCMessage *msg, const char *name, const char *field,
		    char *err, size_t errlen)
{
	for (int i = 0; i < c->nopts; i++) {
		if (strcmp(c->opts[i].name, name) != 0)
			continue;
		const char *kv = c->opts[i].value;
		const char *eq = strchr(kv, '=');
		if (!eq || eq == kv) {
			snprintf(err, errlen, "--%s wants key=value, got %s", name, kv);
			return -1;
		}
		char *key = xstrndup(kv, (size_t)(eq - kv));
		csi_map_add(c->arena, msg, field, key, eq + 1);
		free(key);
	}
	return 0;
}

static int parse_mode(const char *s)
{
	const ProtobufCEnumDescriptor *d = &csi__v1__volume_capability__access_mode__mode__descriptor;
	for (unsigned i = 0; i < d->n_values; i++)
		if (strcasecmp(d->values[i].name, s) == 0)
			return d->values[i].value;
	char *end;
	long v = strtol(s, &end, 10);
	if (*s && !*end && protobuf_c_enum_descriptor_get_value(d, (int)v))
		return (int)v;
	return -1;
}

Csi__V1__VolumeCapability *cli_parse_cap(struct cli *c, const char *spec, char *err,
					 size_t errlen)
{
	struct csi_arena *a = c->arena;
	char *copy = csi_arena_strdup(a, spec);
	char *save = NULL;
	char *mode = strtok_r(copy, ",", &save);
	char *type = strtok_r(NULL, ",", &save);
	int m = mode ? parse_mode(mode) : -1;
	if (m <= 0) {
		snprintf(err, errlen, "--cap %s: unknown access mode %s (want e.g. SINGLE_NODE_WRITER)",
			 spec, mode ? mode : "");
		return NULL;
	}
	Csi__V1__VolumeCapability *cap = csi_msg_new(a, &csi__v1__volume_capability__descriptor);
	cap->access_mode = csi_msg_new(a, &csi__v1__volume_capability__access_mode__descriptor);
	cap->access_mode->mode = m;
	if (!type || strcmp(type, "mount") == 0) {
		cap->access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
		cap->mount = csi_msg_new(a, &csi__v1__volume_capability__mount_volume__descriptor);
		char *fstype = strtok_r(NULL, ",", &save);
		if (fstype)
			cap->mount->fs_type = fstype;
		for (char *f; (f = strtok_r(NULL, ",", &save));)
			csi_repeated_add(a, &cap->mount->base, "mount_flags", f);
	} else if (strcmp(type, "block") == 0) {
		cap->access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;
		cap->block = csi_msg_new(a, &csi__v1__volume_capability__block_volume__descriptor);
		if (strtok_r(NULL, ",", &save)) {
			snprintf(err, errlen, "--cap %s: block volumes take no fstype or flags", spec);
			return NULL;
		}
	} else {
		snprintf(err, errlen, "--cap %s: access type must be mount or block, not %s", spec,
			 type);
		return NULL;
	}
	return cap;
}

int cli_add_caps(struct cli *c, ProtobufCMessage *msg, const char *field, char *err,
		 size_t errlen)
{
	int n = 0;
	for (int i = 0; i < c->nopts; i++) {
		if (strcmp(c->opts[i].name, "cap") != 0)
			continue;
		Csi__V1__VolumeCapability *cap = cli_parse_cap(c, c->opts[i].value, err, errlen);
		if (!cap)
			return -1;
		csi_repeated_add(c->arena, msg, field, cap);
		n++;
	}
	if (!n)
		csi_repeated_add(c->arena, msg, field,
				 cli_parse_cap(c, "SINGLE_NODE_WRITER,mount", err, errlen));
	return 0;
}

Csi__V1__Topology *cli_parse_topology(struct cli *c, const char *spec, char *err, size_t errlen)
{
	Csi__V1__Topology *t = csi_msg_new(c->arena, &csi__v1__topology__descriptor);
	char *copy = csi_arena_strdup(c->arena, spec), *save = NULL;
	for (char *kv = strtok_r(copy, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(kv, '=');
		if (!eq || eq == kv) {
			snprintf(err, errlen, "topology %s: want key=value[,key=value...]", spec);
			return NULL;
		}
		*eq = '\0';
		csi_map_add(c->arena, &t->base, "segments", kv, eq + 1);
	}
	if (!t->n_segments) {
		snprintf(err, errlen, "topology %s: empty", spec);
		return NULL;
	}
	return t;
}

/* ---- tables ---- */

struct cli_table {
	int ncols;
	char **cells; /* row-major */
	int nrows, alloc;
};

static void table_add(struct cli_table *t, va_list ap)
{
	if (t->nrows == t->alloc) {
		t->alloc = t->alloc ? 2 * t->alloc : 8;
		t->cells = xrealloc(t->cells, (size_t)t->alloc * (size_t)t->ncols * sizeof(char *));
	}
	for (int i = 0; i < t->ncols; i++) {
		const char *s = va_arg(ap, const char *);
		t->cells[t->nrows * t->ncols + i] = xstrdup(s ? s : "");
	}
	t->nrows++;
}

struct cli_table *cli_table_new(int ncols, ...)
{
	struct cli_table *t = xcalloc(1, sizeof(*t));
	t->ncols = ncols;
	va_list ap;
	va_start(ap, ncols);
	table_add(t, ap);
	va_end(ap);
	return t;
}

void cli_table_row(struct cli_table *t, ...)
{
	va_list ap;
	va_start(ap, t);
	table_add(t, ap);
	va_end(ap);
}

/* Prints and frees the table. */
void cli_table_print(struct cli_table *t, FILE *out)
{
	int *w = xcalloc((size_t)t->ncols, sizeof(int));
	for (int r = 0; r < t->nrows; r++)
		for (int i = 0; i < t->ncols; i++) {
			int l = (int)strlen(t->cells[r * t->ncols + i]);
			if (l > w[i])
				w[i] = l;
		}
	for (int r = 0; r < t->nrows; r++) {
		for (int i = 0; i < t->ncols; i++) {
			const char *s = t->cells[r * t->ncols + i];
			if (i == t->ncols - 1)
				fprintf(out, "%s\n", s);
			else
				fprintf(out, "%-*s   ", w[i], s);
			free(t->cells[r * t->ncols + i]);
		}
	}
	free(w);
	free(t->cells);
	free(t);
}

const char *cli_map_str(struct cli *c, size_t n, void *entries)
{
	struct csi_map_entry **e = entries;
	struct strbuf sb = STRBUF_INIT;
	for (size_t i = 0; i < n; i++)
		strbuf_addf(&sb, "%s%s=%s", i ? "," : "", e[i]->key, e[i]->value);
	const char *s = csi_arena_strdup(c->arena, sb.buf);
	strbuf_release(&sb);
	return s;
}

int cli_call(struct cli *c, const char *method, ProtobufCMessage *req,
	     const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp)
{
	struct csi_status st;
	int code = csi_call(c->conn, method, req, resp_desc, resp, c->timeout_ns, &st);
	if (code) {
		fprintf(stderr, "%s: %s\n", csi_code_name(code), st.message);
		return EXIT_GRPC_BASE + code;
	}
	if (c->json) {
		struct strbuf sb = STRBUF_INIT;
		csi_msg_to_json(*resp, CSI_JSON_STRIP_SECRETS | CSI_JSON_PRETTY, &sb);
		fprintf(c->out, "%s\n", sb.buf);
		strbuf_release(&sb);
	}
	return 0;
}
