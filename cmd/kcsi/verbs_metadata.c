/*
 * kcsi CLI verbs of the SnapshotMetadata service (CSI v1.12, alpha): the two server-streaming
 * RPCs. They print the ranges as the responses arrive (csi_call_stream hands them on in order):
 * a table of BYTE_OFFSET and SIZE_BYTES under the volume's size and the ranges' style, or with
 * -o json an array of the response messages. Ranges received before an error are printed too.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "cli.h"

struct printer {
	struct cli *c;
	int responses;
	int64_t ranges;
};

/* Both responses have this layout; the generated structs differ only in name. */
static int print_response(void *arg, const ProtobufCMessage *msg)
{
	struct printer *p = arg;
	const Csi__V1__GetMetadataAllocatedResponse *r =
		(const Csi__V1__GetMetadataAllocatedResponse *)msg;
	FILE *out = p->c->out;
	if (p->c->json) {
		struct strbuf sb = STRBUF_INIT;
		csi_msg_to_json(msg, CSI_JSON_STRIP_SECRETS | CSI_JSON_PRETTY, &sb);
		fprintf(out, "%s%s", p->responses ? ",\n" : "[\n", sb.buf);
		strbuf_release(&sb);
	} else {
		if (!p->responses) {
			const ProtobufCEnumValue *t = protobuf_c_enum_descriptor_get_value(
				&csi__v1__block_metadata_type__descriptor, r->block_metadata_type);
			fprintf(out, "VOLUME_CAPACITY_BYTES  %" PRId64 "\n", r->volume_capacity_bytes);
			fprintf(out, "BLOCK_METADATA_TYPE    %s\n", t ? t->name : "UNKNOWN");
			fprintf(out, "%-20s %s\n", "BYTE_OFFSET", "SIZE_BYTES");
		}
		for (size_t i = 0; i < r->n_block_metadata; i++)
			fprintf(out, "%-20" PRId64 " %" PRId64 "\n", r->block_metadata[i]->byte_offset,
				r->block_metadata[i]->size_bytes);
	}
	p->responses++;
	p->ranges += (int64_t)r->n_block_metadata;
	return 0;
}

/* Makes the call and closes the output; returns the exit code. */
static int stream(struct cli *c, const char *method, ProtobufCMessage *req,
		  const ProtobufCMessageDescriptor *resp_desc)
{
	struct printer p = { c, 0, 0 };
	struct csi_status st;
	int code = csi_call_stream(c->conn, method, req, resp_desc, print_response, &p,
				   c->timeout_ns, &st);
	if (c->json)
		fprintf(c->out, "%s", p.responses ? "\n]\n" : "[]\n");
	else if (!p.responses && !code)
		fprintf(c->out, "No ranges\n");
	if (code) {
		fprintf(stderr, "%s: %s\n", csi_code_name(code), st.message);
		return EXIT_GRPC_BASE + code;
	}
	return 0;
}

/* --starting-offset (bytes or a quantity) and --max (ranges per response). */
static int window(struct cli *c, int64_t *start, int32_t *max)
{
	char err[256];
	const char *s = cli_opt(c, "starting-offset"), *m = cli_opt(c, "max");
	if (s && cli_parse_bytes(s, start, err, sizeof(err))) {
		fprintf(stderr, "kcsi: --starting-offset %s\n", err);
		return EXIT_USAGE;
	}
	if (m && cli_parse_count(m, max, err, sizeof(err))) {
		fprintf(stderr, "kcsi: --max %s\n", err);
		return EXIT_USAGE;
	}
	return 0;
}

int cli_v_metadata_allocated(struct cli *c)
{
	Csi__V1__GetMetadataAllocatedRequest *req =
		csi_msg_new(c->arena, &csi__v1__get_metadata_allocated_request__descriptor);
	req->snapshot_id = (char *)c->pos[0];
	char err[256];
	int rc = window(c, &req->starting_offset, &req->max_results);
	if (rc)
		return rc;
	if (cli_add_kv_opts(c, &req->base, "secret", "secrets", err, sizeof(err))) {
		fprintf(stderr, "kcsi: %s\n", err);
		return EXIT_USAGE;
	}
	return stream(c, CSI_METHOD(SnapshotMetadata, GetMetadataAllocated), &req->base,
		      &csi__v1__get_metadata_allocated_response__descriptor);
}

int cli_v_metadata_delta(struct cli *c)
{
	Csi__V1__GetMetadataDeltaRequest *req =
		csi_msg_new(c->arena, &csi__v1__get_metadata_delta_request__descriptor);
	req->base_snapshot_id = (char *)c->pos[0];
	req->target_snapshot_id = (char *)c->pos[1];
	char err[256];
	int rc = window(c, &req->starting_offset, &req->max_results);
	if (rc)
		return rc;
	if (cli_add_kv_opts(c, &req->base, "secret", "secrets", err, sizeof(err))) {
		fprintf(stderr, "kcsi: %s\n", err);
		return EXIT_USAGE;
	}
	return stream(c, CSI_METHOD(SnapshotMetadata, GetMetadataDelta), &req->base,
		      &csi__v1__get_metadata_delta_response__descriptor);
}
