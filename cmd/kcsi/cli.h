/*
 * kcsi CLI internals: the verb table, per-verb argument parsing, request building helpers and
 * output. main.c parses the global flags and dispatches; verbs.c holds one function per verb.
 *
 * Exit codes: 0 success; 1 local error (bad value, I/O); 2 usage error; 3 cannot connect to the
 * driver; 10 + N when the driver answered with gRPC status code N (e.g. 15 = NOT_FOUND,
 * 14 = DEADLINE_EXCEEDED, 22 = UNIMPLEMENTED).
 */
#ifndef KCSI_CMD_KCSI_CLI_H
#define KCSI_CMD_KCSI_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "csi/client.h"

enum { EXIT_LOCAL = 1, EXIT_USAGE = 2, EXIT_CONNECT = 3, EXIT_GRPC_BASE = 10 };

/* One option given to a verb, in command-line order. */
struct cli_opt {
	const char *name; /* without dashes */
	const char *value; /* "true" for booleans */
};

/* Everything a verb needs. */
struct cli {
	struct csi_conn *conn;
	struct csi_arena *arena; /* owns the request being built */
	int64_t timeout_ns;
	bool json;
	const char **pos; /* positional arguments of the verb */
	int npos;
	struct cli_opt *opts;
	int nopts;
	FILE *out;
};

struct verb {
	const char *service; /* identity, controller, group, metadata, node */
	const char *name;
	const char *args;    /* positional usage, e.g. "ID NODE" */
	const char *options; /* space-separated option names it accepts; '*' suffix: repeatable */
	const char *help;
	int min_pos, max_pos;
	int (*run)(struct cli *c);
};
extern const struct verb cli_verbs[];

/* ---- argument helpers (args.c) ---- */
/* Last value of option `name`, or NULL. */
const char *cli_opt(const struct cli *c, const char *name);
bool cli_flag(const struct cli *c, const char *name);
/* Parses a Kubernetes quantity ("10Gi", "500M", "1073741824") into bytes; 0 or -1 with err. */
int cli_parse_bytes(const char *s, int64_t *out, char *err, size_t errlen);
/* Parses a count (--max): decimal digits only, 0..INT32_MAX; -1 with err otherwise. */
int cli_parse_count(const char *s, int32_t *out, char *err, size_t errlen);
/* Checks a duration flag's value is > 0; -1 with err ("--timeout -1s: must be positive"). */
int cli_check_positive(const char *flag, int64_t ns, char *err, size_t errlen);
/* Adds every `--name k=v` of the verb to map field `field` of msg; -1 with err on a bad pair. */
int cli_add_kv_opts(struct cli *c, ProtobufCMessage *msg, const char *name, const char *field,
		    char *err, size_t errlen);
/* Builds a VolumeCapability from "MODE,mount|block[,fstype[,flag...]]". NULL with err. */
Csi__V1__VolumeCapability *cli_parse_cap(struct cli *c, const char *spec, char *err,
					 size_t errlen);
/* Adds every --cap to repeated field `field`; when none was given adds the default one. */
int cli_add_caps(struct cli *c, ProtobufCMessage *msg, const char *field, char *err,
		 size_t errlen);
/* Parses "k=v,k2=v2" into a Topology. */
Csi__V1__Topology *cli_parse_topology(struct cli *c, const char *spec, char *err, size_t errlen);

/* ---- output ---- */
/* A simple aligned table: add rows of cells, then print. Cells are copied. */
struct cli_table;
struct cli_table *cli_table_new(int ncols, ...);
void cli_table_row(struct cli_table *t, ...);
void cli_table_print(struct cli_table *t, FILE *out);
/* Renders a map as "k=v,k2=v2" into the arena. */
const char *cli_map_str(struct cli *c, size_t n, void *entries);
/* Runs one call; prints JSON of the response when -o json; returns the exit code. */
int cli_call(struct cli *c, const char *method, ProtobufCMessage *req,
	     const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp);
/* An enum value's name as the schema spells it, or "UNKNOWN". */
const char *cli_enum_name(const ProtobufCEnumDescriptor *d, int v);

/*
 * A verb's body in three lines: REQ(Name, snake) declares `req` (Csi__V1__<Name>Request in the
 * CLI's arena), CALL(svc, Name, snake) makes the call into `resp` (returning the exit code when
 * it failed), FAIL(fmt, ...) reports a usage error and returns EXIT_USAGE.
 */
#define REQ(Name, snake) \
	Csi__V1__##Name##Request *req = csi_msg_new(c->arena, &csi__v1__##snake##_request__descriptor)
#define CALL(svc, Name, snake) \
	Csi__V1__##Name##Response *resp = NULL; \
	do { \
		int rc_ = cli_call(c, CSI_METHOD(svc, Name), &req->base, \
				   &csi__v1__##snake##_response__descriptor, \
				   (ProtobufCMessage **)&resp); \
		if (rc_) \
			return rc_; \
	} while (0)
#define FAIL(...) do { fprintf(stderr, "kcsi: " __VA_ARGS__); fputc('\n', stderr); \
		       return EXIT_USAGE; } while (0)

/* ---- the health verbs (verbs_health.c, CSI v1.13 alpha) ---- */
int cli_v_controller_volume_health(struct cli *c);
int cli_v_controller_list_volume_health(struct cli *c);
int cli_v_node_volume_health(struct cli *c);
int cli_v_node_storage_health(struct cli *c);

/* ---- the SnapshotMetadata verbs (verbs_metadata.c), streaming ---- */
int cli_v_metadata_allocated(struct cli *c);
int cli_v_metadata_delta(struct cli *c);

/* `kcsi up` (cmd/kcsi/up.c): argv starts after "up". Returns the exit code. */
int cli_up_main(int argc, char **argv);

#endif
