/*
 * test_csi_msg: message helpers without a network: JSON rendering of every kind of field,
 * secret stripping driven by the schema, map/repeated building, status names, method lookup.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "check.h"
#include "csi/msg.h"
#include "test_csi_fill.h"

static char *json(const void *m, int flags)
{
	struct strbuf sb = STRBUF_INIT;
	csi_msg_to_json(m, flags, &sb);
	return strbuf_detach(&sb, NULL);
}

static void test_json_fields(void)
{
	struct csi_arena *a = csi_arena_new();
	Csi__V1__CreateVolumeRequest *r = csi_msg_new(a, &csi__v1__create_volume_request__descriptor);
	char *s = json(r, 0);
	CHECK_STR(s, "{}");
	free(s);
	r->name = "pvc-1";
	r->capacity_range = csi_msg_new(a, &csi__v1__capacity_range__descriptor);
	r->capacity_range->required_bytes = 1073741824;
	CHECK_INT(csi_map_add(a, &r->base, "parameters", "type", "fast \"x\""), 0);
	CHECK_INT(csi_map_add(a, &r->base, "secrets", "password", "hunter2"), 0);
	CHECK_INT(csi_map_add(a, &r->base, "name", "k", "v"), -1);
	CHECK_INT(csi_map_add(a, &r->base, "no_such_field", "k", "v"), -1);
	Csi__V1__VolumeCapability *cap = csi_msg_new(a, &csi__v1__volume_capability__descriptor);
	cap->access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;
	cap->block = csi_msg_new(a, &csi__v1__volume_capability__block_volume__descriptor);
	cap->access_mode = csi_msg_new(a, &csi__v1__volume_capability__access_mode__descriptor);
	cap->access_mode->mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER;
	CHECK_INT(csi_repeated_add(a, &r->base, "volume_capabilities", cap), 0);
	s = json(r, 0);
	CHECK_STR(s, "{\"name\":\"pvc-1\",\"capacity_range\":{\"required_bytes\":1073741824},"
		     "\"volume_capabilities\":[{\"block\":{},\"access_mode\":{\"mode\":"
		     "\"SINGLE_NODE_WRITER\"}}],\"parameters\":{\"type\":\"fast \\\"x\\\"\"},"
		     "\"secrets\":{\"password\":\"hunter2\"}}");
	free(s);
	s = json(r, CSI_JSON_STRIP_SECRETS);
	CHECK(strstr(s, "\"secrets\":\"***stripped***\"") != NULL);
	CHECK(strstr(s, "hunter2") == NULL);
	CHECK(strstr(s, "\"type\":\"fast") != NULL);
	free(s);
	s = json(r, CSI_JSON_PRETTY | CSI_JSON_STRIP_SECRETS);
	CHECK(strstr(s, "{\n  \"name\": \"pvc-1\",\n") == s);
	free(s);
	CHECK_STR(csi_map_get(r->n_parameters, r->parameters, "type"), "fast \"x\"");
	CHECK(csi_map_get(r->n_parameters, r->parameters, "nope") == NULL);
	csi_arena_free(a);
}

static void test_json_wrappers_and_timestamps(void)
{
	struct csi_arena *a = csi_arena_new();
	Csi__V1__ProbeResponse *p = csi_msg_new(a, &csi__v1__probe_response__descriptor);
	p->ready = csi_msg_new(a, &google__protobuf__bool_value__descriptor);
	char *s = json(p, 0);
	CHECK_STR(s, "{\"ready\":{}}"); /* present but false: proto3 omits the false value */
	free(s);
	p->ready->value = 1;
	s = json(p, 0);
	CHECK_STR(s, "{\"ready\":{\"value\":true}}");
	free(s);
	Csi__V1__Snapshot *sn = csi_msg_new(a, &csi__v1__snapshot__descriptor);
	sn->creation_time = csi_msg_new(a, &google__protobuf__timestamp__descriptor);
	sn->creation_time->seconds = 1700000000;
	sn->creation_time->nanos = 5;
	sn->ready_to_use = 1;
	s = json(sn, 0);
	CHECK_STR(s, "{\"creation_time\":{\"seconds\":1700000000,\"nanos\":5},\"ready_to_use\":true}");
	free(s);
	csi_arena_free(a);
}

/* Every secret field of the schema is stripped, wherever it sits, and nothing else is. */
static void test_every_secret_field_stripped(void)
{
	int secret_fields = 0;
	for (const ProtobufCServiceDescriptor *const *sv = csi_services; *sv; sv++) {
		for (unsigned i = 0; i < (*sv)->n_methods; i++) {
			const ProtobufCMessageDescriptor *d = (*sv)->methods[i].input;
			struct csi_arena *a = csi_arena_new();
			ProtobufCMessage *m = csi_msg_new(a, d);
			csi_test_fill(a, m, 0, 0);
			char *full = json(m, 0), *stripped = json(m, CSI_JSON_STRIP_SECRETS);
			bool has_secret = false;
			for (unsigned f = 0; f < d->n_fields; f++)
				if (csi_field_is_secret(d, &d->fields[f])) {
					has_secret = true;
					secret_fields++;
					CHECK_STR(d->fields[f].name, "secrets");
				}
			if (has_secret) {
				CHECK(strstr(full, "\"secrets\":{") != NULL);
				CHECK(strstr(stripped, "\"secrets\":\"***stripped***\"") != NULL);
			} else {
				CHECK_STR(full, stripped);
			}
			free(full);
			free(stripped);
			csi_arena_free(a);
		}
	}
	/* Create/Delete/Publish/Unpublish/Validate/Modify/CreateSnap/DeleteSnap/ListSnap/
	 * ControllerExpand/CreateGroupSnap/DeleteGroupSnap/GetGroupSnap/NodeStage/NodePublish/
	 * NodeExpand, and GetSnapshot, GetMetadataAllocated, GetMetadataDelta; CSI v1.13's
	 * ControllerListVolumeHealth, ControllerGetVolumeHealth, NodeGetStorageHealth. */
	CHECK_INT(secret_fields, 22);
}

static void test_codes(void)
{
	CHECK_STR(csi_code_name(0), "OK");
	CHECK_STR(csi_code_name(4), "DEADLINE_EXCEEDED");
	CHECK_STR(csi_code_name(16), "UNAUTHENTICATED");
	CHECK_STR(csi_code_name(17), "UNKNOWN_CODE");
	CHECK_STR(csi_code_go_name(1), "Canceled");
	CHECK_STR(csi_code_go_name(4), "DeadlineExceeded");
	CHECK_INT(csi_code_parse("NOT_FOUND"), 5);
	CHECK_INT(csi_code_parse("not_found"), 5);
	CHECK_INT(csi_code_parse("NotFound"), 5);
	CHECK_INT(csi_code_parse("12"), 12);
	CHECK_INT(csi_code_parse("nope"), -1);
	CHECK_INT(csi_code_parse("99"), -1);
}

static void test_method_lookup(void)
{
	const ProtobufCMethodDescriptor *m = csi_method_lookup("/csi.v1.Controller/CreateVolume");
	CHECK(m != NULL);
	if (m) {
		CHECK(m->input == &csi__v1__create_volume_request__descriptor);
		CHECK(m->output == &csi__v1__create_volume_response__descriptor);
	}
	CHECK(csi_method_lookup("/csi.v1.Node/NodeGetInfo") != NULL);
	CHECK(csi_method_lookup("/csi.v1.Identity/Probe") != NULL);
	CHECK(csi_method_lookup("/csi.v1.Controller/Nope") == NULL);
	CHECK(csi_method_lookup("/csi.v0.Controller/CreateVolume") == NULL);
	CHECK(csi_method_lookup("csi.v1.Controller/CreateVolume") == NULL);
	CHECK(csi_method_lookup("/csi.v1.Controller") == NULL);
	int n = 0;
	for (const ProtobufCServiceDescriptor *const *s = csi_services; *s; s++)
		n += (int)(*s)->n_methods;
	CHECK_INT(n, 3 + 17 + 4 + 2 + 10);
	CHECK(csi_method_lookup("/csi.v1.Controller/ControllerListVolumeHealth") != NULL);
	CHECK(csi_method_lookup("/csi.v1.Controller/ControllerGetVolumeHealth") != NULL);
	CHECK(csi_method_lookup("/csi.v1.Node/NodeGetVolumeHealth") != NULL);
	CHECK(csi_method_lookup("/csi.v1.Node/NodeGetStorageHealth") != NULL);
	CHECK(csi_method_server_streams(csi_method_lookup(
		"/csi.v1.SnapshotMetadata/GetMetadataDelta")));
	CHECK(!csi_method_server_streams(csi_method_lookup("/csi.v1.Controller/GetSnapshot")));
}

/*
 * A message with many map entries or repeated elements (a PV's volume attributes, a ListVolumes
 * page) costs arena bytes linear in their number: checked after every append, so a builder
 * that copies the array on each append (O(N^2) bytes) fails within the first hundred entries,
 * whatever the machine's speed. Two fields grow interleaved, as real builders do.
 */
#define BYTES_PER_ENTRY 256 /* entry message, key and value strings, headers, array room */

static void test_many_entries_linear(void)
{
	enum { N = 100000 };
	struct csi_arena *a = csi_arena_new();
	Csi__V1__CreateVolumeRequest *r = csi_msg_new(a, &csi__v1__create_volume_request__descriptor);
	size_t base = csi_arena_bytes(a), nsecrets = 0;
	char k[32], v[32];
	for (size_t i = 0; i < N; i++) {
		snprintf(k, sizeof(k), "k%zu", i);
		snprintf(v, sizeof(v), "v%zu", i);
		CHECK_INT(csi_map_add(a, &r->base, "parameters", k, v), 0);
		if (i % 10 == 0) {
			CHECK_INT(csi_map_add(a, &r->base, "secrets", k, v), 0);
			nsecrets++;
		}
		size_t used = csi_arena_bytes(a) - base;
		size_t bound = (i + 1 + nsecrets) * BYTES_PER_ENTRY + 4096;
		if (used > bound) {
			fprintf(stderr, "after %zu entries the arena holds %zu bytes (> %zu)\n",
				i + 1 + nsecrets, used, bound);
			CHECK(used <= bound);
			break;
		}
	}
	CHECK_INT(r->n_parameters, N);
	CHECK_INT(r->n_secrets, (N + 9) / 10);
	if (r->n_parameters == N && r->n_secrets == (N + 9) / 10) {
		CHECK_STR(r->parameters[0]->key, "k0");
		CHECK_STR(r->parameters[N - 1]->value, "v99999");
		CHECK_STR(csi_map_get(r->n_parameters, r->parameters, "k65537"), "v65537");
		CHECK_STR(r->secrets[r->n_secrets - 1]->key, "k99990");
	}

	Csi__V1__ListVolumesResponse *l = csi_msg_new(a, &csi__v1__list_volumes_response__descriptor);
	Csi__V1__ListVolumesResponse__Entry *e =
		csi_msg_new(a, &csi__v1__list_volumes_response__entry__descriptor);
	base = csi_arena_bytes(a);
	for (size_t i = 0; i < N; i++) {
		CHECK_INT(csi_repeated_add(a, &l->base, "entries", e), 0);
		size_t used = csi_arena_bytes(a) - base, bound = (i + 1) * 8 * 4 + 4096;
		if (used > bound) {
			fprintf(stderr, "after %zu elements the arena holds %zu bytes (> %zu)\n", i + 1,
				used, bound);
			CHECK(used <= bound);
			break;
		}
	}
	CHECK_INT(l->n_entries, N);
	CHECK(l->n_entries == N && l->entries[N - 1] == e);
	csi_arena_free(a);
}

/*
 * Appends never write into an array the arena did not grow for that very field at that count:
 * the caller's own array, an array two messages share, a field whose count the caller cut.
 */
static void test_append_to_foreign_and_shared_arrays(void)
{
	struct csi_arena *a = csi_arena_new();
	Csi__V1__VolumeCapability__MountVolume *m1 =
		csi_msg_new(a, &csi__v1__volume_capability__mount_volume__descriptor);
	char *mine[2] = { "ro", "noexec" };
	m1->mount_flags = mine;
	m1->n_mount_flags = 2;
	CHECK_INT(csi_repeated_add(a, &m1->base, "mount_flags", "nodev"), 0);
	CHECK(m1->mount_flags != mine);
	CHECK_STR(mine[0], "ro");
	CHECK_STR(mine[1], "noexec");
	CHECK_INT(m1->n_mount_flags, 3);
	CHECK_STR(m1->mount_flags[0], "ro");
	CHECK_STR(m1->mount_flags[2], "nodev");

	/* m2 shares m1's array (room for more); each then appends its own flag */
	Csi__V1__VolumeCapability__MountVolume m2 = CSI__V1__VOLUME_CAPABILITY__MOUNT_VOLUME__INIT;
	m2.mount_flags = m1->mount_flags;
	m2.n_mount_flags = m1->n_mount_flags;
	CHECK_INT(csi_repeated_add(a, &m2.base, "mount_flags", "m2"), 0);
	CHECK_INT(csi_repeated_add(a, &m1->base, "mount_flags", "m1"), 0);
	CHECK_INT(m1->n_mount_flags, 4);
	CHECK_INT(m2.n_mount_flags, 4);
	CHECK_STR(m1->mount_flags[3], "m1");
	CHECK_STR(m2.mount_flags[3], "m2");
	CHECK_STR(m2.mount_flags[2], "nodev");

	for (int i = 0; i < 100; i++)
		CHECK_INT(csi_repeated_add(a, &m2.base, "mount_flags", "more"), 0);
	CHECK_INT(m2.n_mount_flags, 104);
	CHECK_STR(m2.mount_flags[103], "more");
	CHECK_STR(m1->mount_flags[3], "m1");

	/* a copy of m2 cut to 2 flags (its array has room) appends: m2 keeps its third flag */
	Csi__V1__VolumeCapability__MountVolume m3 = m2;
	m3.n_mount_flags = 2;
	CHECK_INT(csi_repeated_add(a, &m3.base, "mount_flags", "m3"), 0);
	CHECK_INT(m3.n_mount_flags, 3);
	CHECK_STR(m3.mount_flags[2], "m3");
	CHECK_STR(m2.mount_flags[2], "nodev");
	CHECK_INT(csi_repeated_add(a, &m2.base, "mount_flags", "last"), 0);
	CHECK_INT(m2.n_mount_flags, 105);
	CHECK_STR(m2.mount_flags[2], "nodev");
	CHECK_STR(m2.mount_flags[104], "last");
	CHECK_STR(m3.mount_flags[2], "m3");
	csi_arena_free(a);
}

int main(void)
{
	RUN(test_json_fields);
	RUN(test_json_wrappers_and_timestamps);
	RUN(test_every_secret_field_stripped);
	RUN(test_codes);
	RUN(test_method_lookup);
	RUN(test_many_entries_linear);
	RUN(test_append_to_foreign_and_shared_arrays);
	return CHECK_DONE();
}
