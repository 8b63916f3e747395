/*
 * kcsi CLI verbs of the health RPCs (CSI v1.13, alpha): a volume's health as the controller and
 * as a node see it, every abnormal volume, and the storage a node reaches. A driver reports only
 * what is wrong, so the table has one row per condition (STATUS, REASON, MESSAGE) and a volume
 * with none prints one line saying so; -o json prints the response as it came.
 */
#include <stdio.h>

#include "cli.h"

static char err[512];

/* One row per condition of one volume, or a line when there is none. */
static void print_volume_health(struct cli *c, const Csi__V1__VolumeHealth *h, const char *id)
{
	if (!h || !h->n_health_statuses) {
		fprintf(c->out, "Volume %s: no abnormal condition\n", h ? h->volume_id : id);
		return;
	}
	struct cli_table *t = cli_table_new(4, "VOLUME_ID", "STATUS", "REASON", "MESSAGE");
	for (size_t i = 0; i < h->n_health_statuses; i++) {
		const Csi__V1__VolumeHealth__VolumeHealthEntry *e = h->health_statuses[i];
		cli_table_row(t, h->volume_id,
			      cli_enum_name(&csi__v1__volume_health_error_type__descriptor, e->status),
			      e->reason, e->message);
	}
	cli_table_print(t, c->out);
}

int cli_v_controller_volume_health(struct cli *c)
{
	REQ(ControllerGetVolumeHealth, controller_get_volume_health);
	req->volume_id = (char *)c->pos[0];
	if (cli_add_kv_opts(c, &req->base, "secret", "secrets", err, sizeof(err)))
		FAIL("%s", err);
	CALL(Controller, ControllerGetVolumeHealth, controller_get_volume_health);
	if (!c->json)
		print_volume_health(c, resp->volume_health, c->pos[0]);
	csi_msg_free(resp);
	return 0;
}

int cli_v_controller_list_volume_health(struct cli *c)
{
	REQ(ControllerListVolumeHealth, controller_list_volume_health);
	const char *max = cli_opt(c, "max"), *tok = cli_opt(c, "starting-token");
	if (max && cli_parse_count(max, &req->max_entries, err, sizeof(err)))
		FAIL("--max %s", err);
	if (tok)
		req->starting_token = (char *)tok;
	if (cli_add_kv_opts(c, &req->base, "secret", "secrets", err, sizeof(err)))
		FAIL("%s", err);
	CALL(Controller, ControllerListVolumeHealth, controller_list_volume_health);
	if (!c->json) {
		size_t rows = 0;
		for (size_t i = 0; i < resp->n_entries; i++)
			rows += resp->entries[i]->n_health_statuses;
		/* cli_table_print frees the table: made only when there is a row to print */
		struct cli_table *t = rows ? cli_table_new(4, "VOLUME_ID", "STATUS", "REASON",
							   "MESSAGE") : NULL;
		for (size_t i = 0; t && i < resp->n_entries; i++) {
			const Csi__V1__VolumeHealth *h = resp->entries[i];
			for (size_t k = 0; k < h->n_health_statuses; k++)
				cli_table_row(t, h->volume_id,
					      cli_enum_name(&csi__v1__volume_health_error_type__descriptor,
							    h->health_statuses[k]->status),
					      h->health_statuses[k]->reason,
					      h->health_statuses[k]->message);
		}
		if (t)
			cli_table_print(t, c->out);
		else
			fprintf(c->out, "No abnormal volumes\n");
		if (resp->next_token[0])
			fprintf(c->out, "NEXT_TOKEN   %s\n", resp->next_token);
	}
	csi_msg_free(resp);
	return 0;
}

int cli_v_node_volume_health(struct cli *c)
{
	REQ(NodeGetVolumeHealth, node_get_volume_health);
	req->volume_id = (char *)c->pos[0];
	const char *publish = cli_opt(c, "publish"), *staging = cli_opt(c, "staging");
	if (publish)
		req->volume_publish_path = (char *)publish;
	if (staging)
		req->staging_target_path = (char *)staging;
	CALL(Node, NodeGetVolumeHealth, node_get_volume_health);
	if (!c->json)
		print_volume_health(c, resp->volume_health, c->pos[0]);
	csi_msg_free(resp);
	return 0;
}

/* "block" or "mount[,fstype]" and the access mode; "" when the condition names no capability. */
static const char *cap_str(struct cli *c, const Csi__V1__VolumeCapability *cap)
{
	if (!cap)
		return "";
	const char *type = cap->block ? "block" : "mount";
	const char *fs = cap->mount && cap->mount->fs_type[0] ? cap->mount->fs_type : NULL;
	const char *mode = cap->access_mode
		? cli_enum_name(&csi__v1__volume_capability__access_mode__mode__descriptor,
				cap->access_mode->mode)
		: NULL;
	return csi_arena_printf(c->arena, "%s%s%s%s%s", mode ? mode : "", mode ? "," : "", type,
				fs ? "," : "", fs ? fs : "");
}

int cli_v_node_storage_health(struct cli *c)
{
	REQ(NodeGetStorageHealth, node_get_storage_health);
	if (cli_add_kv_opts(c, &req->base, "secret", "secrets", err, sizeof(err)))
		FAIL("%s", err);
	CALL(Node, NodeGetStorageHealth, node_get_storage_health);
	if (!c->json) {
		if (!resp->n_backend_health) {
			fprintf(c->out, "Storage: no abnormal condition\n");
		} else {
			struct cli_table *t =
				cli_table_new(4, "STATUS", "REASON", "CAPABILITY", "MESSAGE");
			for (size_t i = 0; i < resp->n_backend_health; i++) {
				const Csi__V1__NodeGetStorageHealthResponse__StorageBackendHealth *b =
					resp->backend_health[i];
				cli_table_row(t,
					      cli_enum_name(&csi__v1__storage_health_error_type__descriptor,
							    b->status),
					      b->reason, cap_str(c, b->volume_capability), b->message);
			}
			cli_table_print(t, c->out);
		}
	}
	csi_msg_free(resp);
	return 0;
}
