/*
 * kcsi CLI verbs: one function per SERVICE VERB. Each builds the request from positionals and
 * options (in the CLI's arena), makes the call, and prints a table (people) or, with -o json,
 * the response as JSON (scripts; printed by cli_call). The verb table at the end drives
 * parsing, dispatch and help.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/strbuf.h"
#include "base/timeutil.h"
#include "cli.h"

static char err[512];

static const char *num(struct cli *c, int64_t v)
{
	return csi_arena_printf(c->arena, "%" PRId64, v);
}

/* Lists are joined in a strbuf and copied once: re-printing the growing string into the arena
 * per element would keep every intermediate copy (O(N^2) bytes for a driver's long list). */
static const char *topo_str(struct cli *c, Csi__V1__Topology **t, size_t n)
{
	struct strbuf sb = STRBUF_INIT;
	for (size_t i = 0; i < n; i++)
		strbuf_addf(&sb, "%s{%s}", i ? " " : "",
			    cli_map_str(c, t[i]->n_segments, t[i]->segments));
	const char *s = csi_arena_strdup(c->arena, sb.buf);
	strbuf_release(&sb);
	return s;
}

/* Node IDs, comma-separated. */
static const char *nodes_str(struct cli *c, char **ids, size_t n)
{
	struct strbuf sb = STRBUF_INIT;
	for (size_t j = 0; j < n; j++)
		strbuf_addf(&sb, "%s%s", j ? "," : "", ids[j]);
	const char *s = csi_arena_strdup(c->arena, sb.buf);
	strbuf_release(&sb);
	return s;
}

const char *cli_enum_name(const ProtobufCEnumDescriptor *d, int v)
{
	const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(d, v);
	return ev ? ev->name : "UNKNOWN";
}

/* ---- identity ---- */

static int v_identity_info(struct cli *c)
{
	REQ(GetPluginInfo, get_plugin_info);
	CALL(Identity, GetPluginInfo, get_plugin_info);
	if (!c->json) {
		struct cli_table *t = cli_table_new(3, "NAME", "VENDOR_VERSION", "MANIFEST");
		cli_table_row(t, resp->name, resp->vendor_version,
			      cli_map_str(c, resp->n_manifest, resp->manifest));
		cli_table_print(t, c->out);
	}
	csi_msg_free(resp);
	return 0;
}

static int v_identity_caps(struct cli *c)
{
	REQ(GetPluginCapabilities, get_plugin_capabilities);
	CALL(Identity, GetPluginCapabilities, get_plugin_capabilities);
	if (!c->json) {
		struct cli_table *t = cli_table_new(2, "CAPABILITY", "TYPE");
		for (size_t i = 0; i < resp->n_capabilities; i++) {
			Csi__V1__PluginCapability *p = resp->capabilities[i];
			if (p->type_case == CSI__V1__PLUGIN_CAPABILITY__TYPE_SERVICE)
				cli_table_row(t, "SERVICE", cli_enum_name(
					&csi__v1__plugin_capability__service__type__descriptor,
					p->service->type));
			else if (p->type_case == CSI__V1__PLUGIN_CAPABILITY__TYPE_VOLUME_EXPANSION)
				cli_table_row(t, "VOLUME_EXPANSION", cli_enum_name(
					&csi__v1__plugin_capability__volume_expansion__type__descriptor,
					p->volume_expansion->type));
		}
		cli_table_print(t, c->out);
	}
	csi_msg_free(resp);
	return 0;
}

static int v_identity_probe(struct cli *c)
{
	REQ(Probe, probe);
	CALL(Identity, Probe, probe);
	if (!c->json)
		fprintf(c->out, "READY   %s\n",
			!resp->ready ? "true (unset)" : resp->ready->value ? "true" : "false");
	csi_msg_free(resp);
	return 0;
}

/* ---- controller ---- */

static int v_ctrl_caps(struct cli *c)
{
	REQ(ControllerGetCapabilities, controller_get_capabilities);
	CALL(Controller, ControllerGetCapabilities, controller_get_capabilities);
	if (!c->json) {
		struct cli_table *t = cli_table_new(1, "CAPABILITY");
		for (size_t i = 0; i < resp->n_capabilities; i++)
			if (resp->capabilities[i]->rpc)
				cli_table_row(t, cli_enum_name(
					&csi__v1__controller_service_capability__rpc__type__descriptor,
					resp->capabilities[i]->rpc->type));
		cli_table_print(t, c->out);
	}
	csi_msg_free(resp);
	return 0;
}

static void print_volume(struct cli *c, const Csi__V1__Volume *v)
{
	struct cli_table *t = cli_table_new(4, "VOLUME_ID", "CAPACITY", "CONTEXT", "TOPOLOGY");
	if (v)
		cli_table_row(t, v->volume_id, num(c, v->capacity_bytes),
			      cli_map_str(c, v->n_volume_context, v->volume_context),
			      topo_str(c, v->accessible_topology, v->n_accessible_topology));
	cli_table_print(t, c->out);
}

static int v_create_volume(struct cli *c)
{
	REQ(CreateVolume, create_volume);
	req->name = (char *)c->pos[0];
	const char *cap = cli_opt(c, "cap-bytes"), *lim = cli_opt(c, "limit-bytes");
	if (cap || lim) {
		req->capacity_range = csi_msg_new(c->arena, &csi__v1__capacity_range__descriptor);
		if (cap && cli_parse_bytes(cap, &req->capacity_range->required_bytes, err,
					   sizeof(err)))
			FAIL("--cap-bytes: %s", err);
		if (lim && cli_parse_bytes(lim, &req->capacity_range->limit_bytes, err,
					   sizeof(err)))
			FAIL("--limit-bytes: %s", err);
	}
	if (cli_add_caps(c, &req->base, "volume_capabilities", err, sizeof(err)) ||
	    cli_add_kv_opts(c, &req->base, "param", "parameters", err, sizeof(err)) ||
	    cli_add_kv_opts(c, &req->base, "secret", "secrets", err, sizeof(err)) ||
	    cli_add_kv_opts(c, &req->base, "mutable-param", "mutable_parameters", err,
			    sizeof(err)))
		FAIL("%s", err);
	const char *snap = cli_opt(c, "from-snapshot"), *vol = cli_opt(c, "from-volume");
	if (snap && vol)
		FAIL("--from-snapshot and --from-volume are exclusive");
	if (snap || vol) {
		Csi__V1__VolumeContentSource *s =
			csi_msg_new(c->arena, &csi__v1__volume_content_source__descriptor);
		if (snap) {
			s->type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT;
			s->snapshot = csi_msg_new(c->arena,
				&csi__v1__volume_content_source__snapshot_source__descriptor);
			s->snapshot->snapshot_id = (char *)snap;
		} else {
			s->type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_VOLUME;
			s->volume = csi_msg_new(c->arena,
				&csi__v1__volume_content_source__volume_source__descriptor);
			s->volume->volume_id = (char *)vol;
		}
		req->volume_content_source = s;
	}
	for (int i = 0; i < c->nopts; i++) {
		bool reqs = strcmp(c->opts[i].name, "requisite") == 0;
		if (!reqs && strcmp(c->opts[i].name, "preferred") != 0)
			continue;
		Csi__V1__Topology *t = cli_parse_topology(c, c->opts[i].value, err, sizeof(err));
		if (!t)
			FAIL("--%s: %s", c->opts[i].name, err);
		if (!req->accessibility_requirements)
			req->accessibility_requirements = csi_msg_new(c->arena,
				&csi__v1__topology_requirement__descriptor);
		csi_repeated_add(c->arena, &req->accessibility_requirements->base,
				 reqs ? "requisite" : "preferred", t);
	}
	CALL(Controller, CreateVolume, create_volume);
	if (!c->json)
		print_volume(c, resp->volume);
	csi_msg_free(resp);
	return 0;
}

static int v_delete_volume(struct cli *c)
{
	REQ(DeleteVolume, delete_volume);
	req->volume_id = (char *)c->pos[0];
	if (cli_add_kv_opts(c, &req->base, "secret", "secrets", err, sizeof(err)))
		FAIL("%s", err);
	CALL(Controller, DeleteVolume, delete_volume);
	if (!c->json)
		fprintf(c->out, "Deleted volume %s\n", c->pos[0]);
	csi_msg_free(resp);
	return 0;
}

static int v_ctrl_publish(struct cli *c)
{
	REQ(ControllerPublishVolume, controller_publish_volume);
	req->volume_id = (char *)c->pos[0];
	req->node_id = (char *)c->pos[1];
	req->readonly = cli_flag(c, "readonly");
	const char *cap = cli_opt(c, "cap");
	if (!(req->volume_capability = cli_parse_cap(c, cap ? cap : "SINGLE_NODE_WRITER,mount",
						     err, sizeof(err))) ||
	    cli_add_kv_opts(c, &req->base, "secret", "secrets", err, sizeof(err)) ||
	    cli_add_kv_opts(c, &req->base, "vol-ctx", "volume_context", err, sizeof(err)))
		FAIL("%s", err);
	CALL(Controller, ControllerPublishVolume, controller_publish_volume);
	if (!c->json) {
		struct cli_table *t = cli_table_new(2, "KEY", "VALUE");
		for (size_t i = 0; i < resp->n_publish_context; i++)
			cli_table_row(t, resp->publish_context[i]->key,
				      resp->publish_context[i]->value);
		cli_table_print(t, c->out);
	}
	csi_msg_free(resp);
	return 0;
}

static int v_ctrl_unpublish(struct cli *c)
{
	REQ(ControllerUnpublishVolume, controller_unpublish_volume);
	req->volume_id = (char *)c->pos[0];
	req->node_id = (char *)c->pos[1];
	if (cli_add_kv_opts(c, &req->base, "secret", "secrets", err, sizeof(err)))
		FAIL("%s", err);
	CALL(Controller, ControllerUnpublishVolume, controller_unpublish_volume);
	if (!c->json)
		fprintf(c->out, "Unpublished volume %s from node %s\n", c->pos[0], c->pos[1]);
	csi_msg_free(resp);
	return 0;
}

static int v_list_volumes(struct cli *c)
{
	REQ(ListVolumes, list_volumes);
	const char *max = cli_opt(c, "max"), *tok = cli_opt(c, "starting-token");
	if (max && cli_parse_count(max, &req->max_entries, err, sizeof(err)))
		FAIL("--max %s", err);
	if (tok)
		req->starting_token = (char *)tok;
	CALL(Controller, ListVolumes, list_volumes);
	if (!c->json) {
		struct cli_table *t = cli_table_new(3, "VOLUME_ID", "CAPACITY", "PUBLISHED_NODES");
		for (size_t i = 0; i < resp->n_entries; i++) {
			Csi__V1__ListVolumesResponse__Entry *e = resp->entries[i];
			cli_table_row(t, e->volume ? e->volume->volume_id : "",
				      e->volume ? num(c, e->volume->capacity_bytes) : "",
				      e->status ? nodes_str(c, e->status->published_node_ids,
							    e->status->n_published_node_ids) : "");
		}
		cli_table_print(t, c->out);
		if (resp->next_token[0])
			fprintf(c->out, "NEXT_TOKEN   %s\n", resp->next_token);
	}
	csi_msg_free(resp);
	return 0;
}

static int v_get_capacity(struct cli *c)
{
	REQ(GetCapacity, get_capacity);
	if (cli_opt(c, "cap") &&
	    cli_add_caps(c, &req->base, "volume_capabilities", err, sizeof(err)))
		FAIL("%s", err);
	if (cli_add_kv_opts(c, &req->base, "param", "parameters", err, sizeof(err)))
		FAIL("%s", err);
	const char *topo = cli_opt(c, "topology");
	if (topo && !(req->accessible_topology = cli_parse_topology(c, topo, err, sizeof(err))))
		FAIL("--topology: %s", err);
	CALL(Controller, GetCapacity, get_capacity);
	if (!c->json) {
		struct cli_table *t = cli_table_new(3, "AVAILABLE", "MAXIMUM_VOLUME_SIZE",
						    "MINIMUM_VOLUME_SIZE");
		cli_table_row(t, num(c, resp->available_capacity),
			      resp->maximum_volume_size ? num(c, resp->maximum_volume_size->value) : "",
			      resp->minimum_volume_size ? num(c, resp->minimum_volume_size->value) : "");
		cli_table_print(t, c->out);
	}
	csi_msg_free(resp);
	return 0;
}

static int v_validate(struct cli *c)
{
	REQ(ValidateVolumeCapabilities, validate_volume_capabilities);
	req->volume_id = (char *)c->pos[0];
	if (cli_add_caps(c, &req->base, "volume_capabilities", err, sizeof(err)) ||
	    cli_add_kv_opts(c, &req->base, "param", "parameters", err, sizeof(err)) ||
	    cli_add_kv_opts(c, &req->base, "vol-ctx", "volume_context", err, sizeof(err)) ||
	    cli_add_kv_opts(c, &req->base, "secret", "secrets", err, sizeof(err)))
		FAIL("%s", err);
	CALL(Controller, ValidateVolumeCapabilities, validate_volume_capabilities);
	if (!c->json)
		fprintf(c->out, "CONFIRMED   %s%s%s\n", resp->confirmed ? "true" : "false",
			resp->message[0] ? "\nMESSAGE     " : "", resp->message);
	csi_msg_free(resp);
	return 0;
}

static int v_ctrl_expand(struct cli *c)
{
	REQ(ControllerExpandVolume, controller_expand_volume);
	req->volume_id = (char *)c->pos[0];
	req->capacity_range = csi_msg_new(c->arena, &csi__v1__capacity_range__descriptor);
	if (cli_parse_bytes(c->pos[1], &req->capacity_range->required_bytes, err, sizeof(err)))
		FAIL("%s", err);
	const char *cap = cli_opt(c, "cap");
	if (cap && !(req->volume_capability = cli_parse_cap(c, cap, err, sizeof(err))))
		FAIL("%s", err);
	if (cli_add_kv_opts(c, &req->base, "secret", "secrets", err, sizeof(err)))
		FAIL("%s", err);
	CALL(Controller, ControllerExpandVolume, controller_expand_volume);
	if (!c->json) {
		struct cli_table *t = cli_table_new(2, "CAPACITY", "NODE_EXPANSION_REQUIRED");
		cli_table_row(t, num(c, resp->capacity_bytes),
			      resp->node_expansion_required ? "true" : "false");
		cli_table_print(t, c->out);
	}
	csi_msg_free(resp);
	return 0;
}

static void print_snapshots(struct cli *c, Csi__V1__Snapshot **s, size_t n)
{
	struct cli_table *t = cli_table_new(5, "SNAPSHOT_ID", "SOURCE_VOLUME_ID", "SIZE",
					    "READY_TO_USE", "CREATION_TIME");
	for (size_t i = 0; i < n; i++) {
		if (!s[i])
			continue;
		char ts[RFC3339_BUFLEN] = "";
		if (s[i]->creation_time)
			rfc3339_format((time_t)s[i]->creation_time->seconds, ts, sizeof(ts));
		cli_table_row(t, s[i]->snapshot_id, s[i]->source_volume_id,
			      num(c, s[i]->size_bytes), s[i]->ready_to_use ? "true" : "false", ts);
	}
	cli_table_print(t, c->out);
}

static int v_create_snapshot(struct cli *c)
{
	REQ(CreateSnapshot, create_snapshot);
	req->name = (char *)c->pos[0];
	req->source_volume_id = (char *)c->pos[1];
	if (cli_add_kv_opts(c, &req->base, "param", "parameters", err, sizeof(err)) ||
	    cli_add_kv_opts(c, &req->base, "secret", "secrets", err, sizeof(err)))
		FAIL("%s", err);
	CALL(Controller, CreateSnapshot, create_snapshot);
	if (!c->json)
		print_snapshots(c, &resp->snapshot, 1);
	csi_msg_free(resp);
	return 0;
}

static int v_delete_snapshot(struct cli *c)
{
	REQ(DeleteSnapshot, delete_snapshot);
	req->snapshot_id = (char *)c->pos[0];
	if (cli_add_kv_opts(c, &req->base, "secret", "secrets", err, sizeof(err)))
		FAIL("%s", err);
	CALL(Controller, DeleteSnapshot, delete_snapshot);
	if (!c->json)
		fprintf(c->out, "Deleted snapshot %s\n", c->pos[0]);
	csi_msg_free(resp);
	return 0;
}

static int v_list_snapshots(struct cli *c)
{
	REQ(ListSnapshots, list_snapshots);
	const char *max = cli_opt(c, "max"), *tok = cli_opt(c, "starting-token");
	const char *src = cli_opt(c, "source-volume"), *id = cli_opt(c, "snapshot-id");
	if (max && cli_parse_count(max, &req->max_entries, err, sizeof(err)))
		FAIL("--max %s", err);
	if (tok)
		req->starting_token = (char *)tok;
	if (src)
		req->source_volume_id = (char *)src;
	if (id)
		req->snapshot_id = (char *)id;
	if (cli_add_kv_opts(c, &req->base, "secret", "secrets", err, sizeof(err)))
		FAIL("%s", err);
	CALL(Controller, ListSnapshots, list_snapshots);
	if (!c->json) {
		Csi__V1__Snapshot **s = csi_arena_alloc(c->arena, (resp->n_entries + 1) * sizeof(*s));
		for (size_t i = 0; i < resp->n_entries; i++)
			s[i] = resp->entries[i]->snapshot;
		print_snapshots(c, s, resp->n_entries);
		if (resp->next_token[0])
			fprintf(c->out, "NEXT_TOKEN   %s\n", resp->next_token);
	}
	csi_msg_free(resp);
	return 0;
}

static int v_get_snapshot(struct cli *c)
{
	REQ(GetSnapshot, get_snapshot);
	req->snapshot_id = (char *)c->pos[0];
	if (cli_add_kv_opts(c, &req->base, "secret", "secrets", err, sizeof(err)))
		FAIL("%s", err);
	CALL(Controller, GetSnapshot, get_snapshot);
	if (!c->json)
		print_snapshots(c, &resp->snapshot, 1);
	csi_msg_free(resp);
	return 0;
}

static int v_get_volume(struct cli *c)
{
	REQ(ControllerGetVolume, controller_get_volume);
	req->volume_id = (char *)c->pos[0];
	CALL(Controller, ControllerGetVolume, controller_get_volume);
	if (!c->json) {
		print_volume(c, resp->volume);
		if (resp->status)
			fprintf(c->out, "PUBLISHED_NODES   %s\n",
				nodes_str(c, resp->status->published_node_ids,
					  resp->status->n_published_node_ids));
	}
	csi_msg_free(resp);
	return 0;
}

static int v_modify_volume(struct cli *c)
{
	REQ(ControllerModifyVolume, controller_modify_volume);
	req->volume_id = (char *)c->pos[0];
	if (cli_add_kv_opts(c, &req->base, "mutable-param", "mutable_parameters", err,
			    sizeof(err)) ||
	    cli_add_kv_opts(c, &req->base, "secret", "secrets", err, sizeof(err)))
		FAIL("%s", err);
	CALL(Controller, ControllerModifyVolume, controller_modify_volume);
	if (!c->json)
		fprintf(c->out, "Modified volume %s\n", c->pos[0]);
	csi_msg_free(resp);
	return 0;
}

/* ---- group controller ---- */

static int v_group_caps(struct cli *c)
{
	REQ(GroupControllerGetCapabilities, group_controller_get_capabilities);
	CALL(GroupController, GroupControllerGetCapabilities, group_controller_get_capabilities);
	if (!c->json) {
		struct cli_table *t = cli_table_new(1, "CAPABILITY");
		for (size_t i = 0; i < resp->n_capabilities; i++)
			if (resp->capabilities[i]->rpc)
				cli_table_row(t, cli_enum_name(
					&csi__v1__group_controller_service_capability__rpc__type__descriptor,
					resp->capabilities[i]->rpc->type));
		cli_table_print(t, c->out);
	}
	csi_msg_free(resp);
	return 0;
}

/* The group's line, then its members in the table of `controller list-snapshots`. */
static void print_group(struct cli *c, const Csi__V1__VolumeGroupSnapshot *g)
{
	if (!g)
		return;
	char ts[RFC3339_BUFLEN] = "";
	if (g->creation_time)
		rfc3339_format((time_t)g->creation_time->seconds, ts, sizeof(ts));
	fprintf(c->out, "GROUP_SNAPSHOT_ID   %s\nREADY_TO_USE        %s\nCREATION_TIME       %s\n",
		g->group_snapshot_id, g->ready_to_use ? "true" : "false", ts);
	print_snapshots(c, g->snapshots, g->n_snapshots);
}

/* Positional arguments from index `from` on into repeated string field `field`. */
static void add_pos_strings(struct cli *c, ProtobufCMessage *m, const char *field, int from)
{
	for (int i = from; i < c->npos; i++)
		csi_repeated_add(c->arena, m, field, (char *)c->pos[i]);
}

static int v_group_create(struct cli *c)
{
	REQ(CreateVolumeGroupSnapshot, create_volume_group_snapshot);
	req->name = (char *)c->pos[0];
	add_pos_strings(c, &req->base, "source_volume_ids", 1);
	if (cli_add_kv_opts(c, &req->base, "param", "parameters", err, sizeof(err)) ||
	    cli_add_kv_opts(c, &req->base, "secret", "secrets", err, sizeof(err)))
		FAIL("%s", err);
	CALL(GroupController, CreateVolumeGroupSnapshot, create_volume_group_snapshot);
	if (!c->json)
		print_group(c, resp->group_snapshot);
	csi_msg_free(resp);
	return 0;
}

static int v_group_delete(struct cli *c)
{
	REQ(DeleteVolumeGroupSnapshot, delete_volume_group_snapshot);
	req->group_snapshot_id = (char *)c->pos[0];
	add_pos_strings(c, &req->base, "snapshot_ids", 1);
	if (cli_add_kv_opts(c, &req->base, "secret", "secrets", err, sizeof(err)))
		FAIL("%s", err);
	CALL(GroupController, DeleteVolumeGroupSnapshot, delete_volume_group_snapshot);
	if (!c->json)
		fprintf(c->out, "Deleted group snapshot %s\n", c->pos[0]);
	csi_msg_free(resp);
	return 0;
}

static int v_group_get(struct cli *c)
{
	REQ(GetVolumeGroupSnapshot, get_volume_group_snapshot);
	req->group_snapshot_id = (char *)c->pos[0];
	add_pos_strings(c, &req->base, "snapshot_ids", 1);
	if (cli_add_kv_opts(c, &req->base, "secret", "secrets", err, sizeof(err)))
		FAIL("%s", err);
	CALL(GroupController, GetVolumeGroupSnapshot, get_volume_group_snapshot);
	if (!c->json)
		print_group(c, resp->group_snapshot);
	csi_msg_free(resp);
	return 0;
}

/* ---- node ---- */

static int v_node_info(struct cli *c)
{
	REQ(NodeGetInfo, node_get_info);
	CALL(Node, NodeGetInfo, node_get_info);
	if (!c->json) {
		struct cli_table *t = cli_table_new(3, "NODE_ID", "MAX_VOLUMES", "TOPOLOGY");
		cli_table_row(t, resp->node_id, num(c, resp->max_volumes_per_node),
			      resp->accessible_topology ? topo_str(c, &resp->accessible_topology, 1)
							: "");
		cli_table_print(t, c->out);
	}
	csi_msg_free(resp);
	return 0;
}

static int v_node_caps(struct cli *c)
{
	REQ(NodeGetCapabilities, node_get_capabilities);
	CALL(Node, NodeGetCapabilities, node_get_capabilities);
	if (!c->json) {
		struct cli_table *t = cli_table_new(1, "CAPABILITY");
		for (size_t i = 0; i < resp->n_capabilities; i++)
			if (resp->capabilities[i]->rpc)
				cli_table_row(t, cli_enum_name(
					&csi__v1__node_service_capability__rpc__type__descriptor,
					resp->capabilities[i]->rpc->type));
		cli_table_print(t, c->out);
	}
	csi_msg_free(resp);
	return 0;
}

static int v_node_stage(struct cli *c)
{
	REQ(NodeStageVolume, node_stage_volume);
	req->volume_id = (char *)c->pos[0];
	req->staging_target_path = (char *)c->pos[1];
	const char *cap = cli_opt(c, "cap");
	if (!(req->volume_capability = cli_parse_cap(c, cap ? cap : "SINGLE_NODE_WRITER,mount",
						     err, sizeof(err))) ||
	    cli_add_kv_opts(c, &req->base, "pub-ctx", "publish_context", err, sizeof(err)) ||
	    cli_add_kv_opts(c, &req->base, "vol-ctx", "volume_context", err, sizeof(err)) ||
	    cli_add_kv_opts(c, &req->base, "secret", "secrets", err, sizeof(err)))
		FAIL("%s", err);
	CALL(Node, NodeStageVolume, node_stage_volume);
	if (!c->json)
		fprintf(c->out, "Staged volume %s at %s\n", c->pos[0], c->pos[1]);
	csi_msg_free(resp);
	return 0;
}

static int v_node_unstage(struct cli *c)
{
	REQ(NodeUnstageVolume, node_unstage_volume);
	req->volume_id = (char *)c->pos[0];
	req->staging_target_path = (char *)c->pos[1];
	CALL(Node, NodeUnstageVolume, node_unstage_volume);
	if (!c->json)
		fprintf(c->out, "Unstaged volume %s from %s\n", c->pos[0], c->pos[1]);
	csi_msg_free(resp);
	return 0;
}

static int v_node_publish(struct cli *c)
{
	REQ(NodePublishVolume, node_publish_volume);
	req->volume_id = (char *)c->pos[0];
	req->target_path = (char *)c->pos[1];
	const char *staging = cli_opt(c, "staging"), *cap = cli_opt(c, "cap");
	if (staging)
		req->staging_target_path = (char *)staging;
	req->readonly = cli_flag(c, "readonly");
	if (!(req->volume_capability = cli_parse_cap(c, cap ? cap : "SINGLE_NODE_WRITER,mount",
						     err, sizeof(err))) ||
	    cli_add_kv_opts(c, &req->base, "pub-ctx", "publish_context", err, sizeof(err)) ||
	    cli_add_kv_opts(c, &req->base, "vol-ctx", "volume_context", err, sizeof(err)) ||
	    cli_add_kv_opts(c, &req->base, "secret", "secrets", err, sizeof(err)))
		FAIL("%s", err);
	CALL(Node, NodePublishVolume, node_publish_volume);
	if (!c->json)
		fprintf(c->out, "Published volume %s at %s\n", c->pos[0], c->pos[1]);
	csi_msg_free(resp);
	return 0;
}

static int v_node_unpublish(struct cli *c)
{
	REQ(NodeUnpublishVolume, node_unpublish_volume);
	req->volume_id = (char *)c->pos[0];
	req->target_path = (char *)c->pos[1];
	CALL(Node, NodeUnpublishVolume, node_unpublish_volume);
	if (!c->json)
		fprintf(c->out, "Unpublished volume %s from %s\n", c->pos[0], c->pos[1]);
	csi_msg_free(resp);
	return 0;
}

static int v_node_stats(struct cli *c)
{
	REQ(NodeGetVolumeStats, node_get_volume_stats);
	req->volume_id = (char *)c->pos[0];
	req->volume_path = (char *)c->pos[1];
	const char *staging = cli_opt(c, "staging");
	if (staging)
		req->staging_target_path = (char *)staging;
	CALL(Node, NodeGetVolumeStats, node_get_volume_stats);
	if (!c->json) {
		struct cli_table *t = cli_table_new(4, "UNIT", "TOTAL", "USED", "AVAILABLE");
		for (size_t i = 0; i < resp->n_usage; i++) {
			Csi__V1__VolumeUsage *u = resp->usage[i];
			cli_table_row(t, cli_enum_name(&csi__v1__volume_usage__unit__descriptor, u->unit),
				      num(c, u->total), num(c, u->used), num(c, u->available));
		}
		cli_table_print(t, c->out);
	}
	csi_msg_free(resp);
	return 0;
}

static int v_node_expand(struct cli *c)
{
	REQ(NodeExpandVolume, node_expand_volume);
	req->volume_id = (char *)c->pos[0];
	req->volume_path = (char *)c->pos[1];
	if (c->npos > 2) {
		req->capacity_range = csi_msg_new(c->arena, &csi__v1__capacity_range__descriptor);
		if (cli_parse_bytes(c->pos[2], &req->capacity_range->required_bytes, err,
				    sizeof(err)))
			FAIL("%s", err);
	}
	const char *staging = cli_opt(c, "staging"), *cap = cli_opt(c, "cap");
	if (staging)
		req->staging_target_path = (char *)staging;
	if (cap && !(req->volume_capability = cli_parse_cap(c, cap, err, sizeof(err))))
		FAIL("%s", err);
	if (cli_add_kv_opts(c, &req->base, "secret", "secrets", err, sizeof(err)))
		FAIL("%s", err);
	CALL(Node, NodeExpandVolume, node_expand_volume);
	if (!c->json) {
		struct cli_table *t = cli_table_new(1, "CAPACITY");
		cli_table_row(t, num(c, resp->capacity_bytes));
		cli_table_print(t, c->out);
	}
	csi_msg_free(resp);
	return 0;
}

const struct verb cli_verbs[] = {
	{ "identity", "info", "", "", "GetPluginInfo: driver name, version, manifest",
	  0, 0, v_identity_info },
	{ "identity", "capabilities", "", "", "GetPluginCapabilities", 0, 0, v_identity_caps },
	{ "identity", "probe", "", "", "Probe: is the driver ready", 0, 0, v_identity_probe },
	{ "controller", "capabilities", "", "", "ControllerGetCapabilities", 0, 0, v_ctrl_caps },
	{ "controller", "create-volume", "NAME",
	  "cap-bytes limit-bytes param* mutable-param* cap* from-snapshot from-volume secret* "
	  "requisite* preferred*",
	  "CreateVolume", 1, 1, v_create_volume },
	{ "controller", "delete-volume", "ID", "secret*", "DeleteVolume", 1, 1, v_delete_volume },
	{ "controller", "publish", "ID NODE", "readonly cap secret* vol-ctx*",
	  "ControllerPublishVolume; prints the publish context", 2, 2, v_ctrl_publish },
	{ "controller", "unpublish", "ID NODE", "secret*", "ControllerUnpublishVolume", 2, 2,
	  v_ctrl_unpublish },
	{ "controller", "list-volumes", "", "max starting-token", "ListVolumes", 0, 0,
	  v_list_volumes },
	{ "controller", "get-capacity", "", "param* cap* topology", "GetCapacity", 0, 0,
	  v_get_capacity },
	{ "controller", "validate", "ID", "cap* param* vol-ctx* secret*",
	  "ValidateVolumeCapabilities", 1, 1, v_validate },
	{ "controller", "expand", "ID BYTES", "cap secret*", "ControllerExpandVolume", 2, 2,
	  v_ctrl_expand },
	{ "controller", "create-snapshot", "NAME SOURCE_VOLUME_ID", "param* secret*",
	  "CreateSnapshot", 2, 2, v_create_snapshot },
	{ "controller", "delete-snapshot", "ID", "secret*", "DeleteSnapshot", 1, 1,
	  v_delete_snapshot },
	{ "controller", "list-snapshots", "", "max starting-token source-volume snapshot-id secret*",
	  "ListSnapshots", 0, 0, v_list_snapshots },
	{ "controller", "get-snapshot", "ID", "secret*", "GetSnapshot (alpha in CSI v1.12)", 1, 1,
	  v_get_snapshot },
	{ "controller", "get-volume", "ID", "", "ControllerGetVolume (alpha in CSI v1.12)", 1, 1,
	  v_get_volume },
	{ "controller", "modify-volume", "ID", "mutable-param* secret*", "ControllerModifyVolume",
	  1, 1, v_modify_volume },
	{ "controller", "volume-health", "ID", "secret*",
	  "ControllerGetVolumeHealth (alpha in CSI v1.13): what is wrong with the volume", 1, 1,
	  cli_v_controller_volume_health },
	{ "controller", "list-volume-health", "", "max starting-token secret*",
	  "ControllerListVolumeHealth (alpha in CSI v1.13): every abnormal volume", 0, 0,
	  cli_v_controller_list_volume_health },
	{ "group", "capabilities", "", "", "GroupControllerGetCapabilities", 0, 0, v_group_caps },
	{ "group", "create-snapshot", "NAME VOLUME_ID...", "param* secret*",
	  "CreateVolumeGroupSnapshot: one snapshot of every volume, taken together", 2, 64,
	  v_group_create },
	{ "group", "delete-snapshot", "GROUP_ID [SNAPSHOT_ID...]", "secret*",
	  "DeleteVolumeGroupSnapshot: the group and its member snapshots", 1, 64,
	  v_group_delete },
	{ "group", "get-snapshot", "GROUP_ID [SNAPSHOT_ID...]", "secret*",
	  "GetVolumeGroupSnapshot", 1, 64, v_group_get },
	{ "metadata", "allocated", "SNAPSHOT_ID", "starting-offset max secret*",
	  "GetMetadataAllocated (alpha): the ranges of the snapshot that hold data", 1, 1,
	  cli_v_metadata_allocated },
	{ "metadata", "delta", "BASE_SNAPSHOT_ID TARGET_SNAPSHOT_ID", "starting-offset max secret*",
	  "GetMetadataDelta (alpha): the ranges that changed between two snapshots", 2, 2,
	  cli_v_metadata_delta },
	{ "node", "info", "", "", "NodeGetInfo: node ID, volume limit, topology", 0, 0,
	  v_node_info },
	{ "node", "capabilities", "", "", "NodeGetCapabilities", 0, 0, v_node_caps },
	{ "node", "stage", "ID STAGING_PATH", "cap pub-ctx* vol-ctx* secret*", "NodeStageVolume",
	  2, 2, v_node_stage },
	{ "node", "unstage", "ID STAGING_PATH", "", "NodeUnstageVolume", 2, 2, v_node_unstage },
	{ "node", "publish", "ID TARGET_PATH", "staging readonly cap pub-ctx* vol-ctx* secret*",
	  "NodePublishVolume", 2, 2, v_node_publish },
	{ "node", "unpublish", "ID TARGET_PATH", "", "NodeUnpublishVolume", 2, 2,
	  v_node_unpublish },
	{ "node", "stats", "ID VOLUME_PATH", "staging", "NodeGetVolumeStats", 2, 2, v_node_stats },
	{ "node", "expand", "ID VOLUME_PATH [BYTES]", "staging cap secret*", "NodeExpandVolume",
	  2, 3, v_node_expand },
	{ "node", "volume-health", "ID", "publish staging",
	  "NodeGetVolumeHealth (alpha in CSI v1.13): the volume as this node sees it", 1, 1,
	  cli_v_node_volume_health },
	{ "node", "storage-health", "", "secret*",
	  "NodeGetStorageHealth (alpha in CSI v1.13): the storage this node reaches", 0, 0,
	  cli_v_node_storage_health },
	{ NULL, NULL, NULL, NULL, NULL, 0, 0, NULL },
};
