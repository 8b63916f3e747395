/*
 * csi-testdriver: a programmable, in-memory CSI driver built on src/csi/server, for tests of the
 * CSI client, the kcsi CLI and the sidecars. It is not a storage driver: volumes and snapshots
 * live in a list in memory and node operations only record what they were asked.
 *
 *   csi-testdriver --endpoint unix:///tmp/x.sock [--record FILE] [--fail Method=CODE,...]
 *                  [--slow Method=DURATION,...] [--start-delay DURATION] [--threads N] [-v N]
 *
 * --record appends one line per request: "<method> <full JSON, secrets included>". It exists so
 * tests can check what a client sent; never point it at a real driver's secrets.
 * --fail makes a method (short name, e.g. CreateVolume) answer the given gRPC code.
 * --fail-count Method=N limits that failure to the method's first N calls (then it succeeds;
 *   without --fail for the method the code is UNAVAILABLE).
 * --controller-caps NAME,... replaces the controller capabilities (RPC type names such as
 *   PUBLISH_UNPUBLISH_VOLUME, or "none"); --no-controller-service drops the plugin's
 *   CONTROLLER_SERVICE capability; --no-node-expand drops the node's EXPAND_VOLUME.
 * --slow delays a method before it answers (deadline tests).
 * --hold Method=FILE makes a method wait until FILE exists (at most 2 minutes): the test decides
 *   when the call goes on, however slowly a loaded machine runs the checks meanwhile.
 * --probe-not-ready makes Probe answer ready=false.
 * --start-delay waits before creating the socket (clients that must wait for it).
 * --capacity BYTES and --max-volume-size BYTES are GetCapacity's answer (100 GiB, 10 GiB);
 *   ControllerExpandVolume above --max-volume-size answers OUT_OF_RANGE, and answers
 *   --node-expansion-required (true) otherwise; ControllerModifyVolume only records its request;
 *   --capacity-file FILE, when it exists, overrides --capacity and is read again on every call,
 *   so a test changes the driver's capacity at run time (a quantity such as "5Gi" or "0"; "fail"
 *   makes GetCapacity answer UNAVAILABLE).
 * Group snapshots (GroupController) are in memory too: "group-<name>" holds one member snapshot
 *   "group-<name>-<volume>" per source volume, which ListSnapshots shows with its group.
 *   --group-members-unready makes the group calls report each member not ready until a
 *   ListSnapshots by its ID has asked about it (a member still uploading, as a sidecar polls it).
 *   --group-unready-calls N makes CreateVolumeGroupSnapshot answer a group not ready for its
 *   first N calls (a group still being cut, which the sidecar asks about again with back-off).
 * GetMetadataAllocated (SnapshotMetadata, the one streaming RPC served) answers snapshot
 *   "ranges-N" with N ranges, for the streaming tests; GetSnapshot and GetMetadataDelta are not
 *   served (UNIMPLEMENTED).
 * --adopt-volumes makes ControllerPublishVolume take an unknown volume ID as an existing 1 GiB
 *   volume (a cluster loaded without this driver's CreateVolume, as bench/cluster_scale's is).
 * --node-id and --zone are NodeGetInfo's node ID and topology.kcsi.dev/zone value ("test-node",
 *   "z1"); the zone is also the topology of volumes created without accessibility requirements.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/flags.h"
#include "base/log.h"
#include "base/log_flags.h"
#include "base/strbuf.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "csi/client.h"
#include "csi/server.h"
#ifdef KCSI_TESTDRIVER_LIBGRPC
#include "libgrpc_server.h"
#endif

#define GiB (1024LL * 1024 * 1024)

struct vol {
	struct vol *next;
	char *id, *name, *node;
	int64_t bytes;
};
struct snap {
	struct snap *next;
	char *id, *source;
	char *group; /* "" unless a member of a group snapshot */
	bool listed; /* a ListSnapshots by ID has named it (--group-members-unready) */
	int creates; /* CreateVolumeGroupSnapshot calls that named its group (--group-unready-calls) */
	int64_t bytes;
	int64_t created;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct vol *vols;
static struct snap *snaps;
static FILE *record;
static struct flag_map fail_map, slow_map, hold_map, fail_count_map;
static const char *controller_caps;
static bool no_controller_service, probe_not_ready, no_node_expand;
static bool node_expansion_required;
static bool adopt_volumes, group_members_unready;
static int group_unready_calls;
static const char *capacity_flag, *capacity_file, *max_volume_size_flag, *node_id, *zone;
/* Calls seen per method, for --fail-count (guarded by lock). */
static struct { char method[64]; long calls; } call_counts[64];

static long count_call(const char *m)
{
	long n = 0;
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < sizeof(call_counts) / sizeof(call_counts[0]); i++) {
		if (!call_counts[i].method[0])
			snprintf(call_counts[i].method, sizeof(call_counts[i].method), "%s", m);
		if (strcmp(call_counts[i].method, m) == 0) {
			n = ++call_counts[i].calls;
			break;
		}
	}
	pthread_mutex_unlock(&lock);
	return n;
}

static const char *short_name(const char *method)
{
	const char *s = strrchr(method, '/');
	return s ? s + 1 : method;
}

/* Records the request and applies --slow/--fail; returns a code (0 = go on). */
static int prologue(struct csi_call_ctx *ctx, const ProtobufCMessage *req)
{
	const char *m = short_name(csi_ctx_method(ctx));
	if (record) {
		struct strbuf sb = STRBUF_INIT;
		csi_msg_to_json(req, 0, &sb);
		pthread_mutex_lock(&lock);
		fprintf(record, "%s %s\n", m, sb.buf);
		fflush(record);
		pthread_mutex_unlock(&lock);
		strbuf_release(&sb);
	}
	const char *slow = flag_map_get(&slow_map, m);
	int64_t ns;
	if (slow && duration_parse(slow, &ns, NULL, 0) == 0)
		sleep_ns(ns);
	const char *gate = flag_map_get(&hold_map, m);
	for (int i = 0; gate && i < 6000 && access(gate, F_OK) != 0; i++)
		sleep_ns(20 * NSEC_PER_MSEC);
	const char *fail = flag_map_get(&fail_map, m);
	const char *times = flag_map_get(&fail_count_map, m);
	if (times) {
		long call = count_call(m);
		if (call > atol(times))
			return 0;
		int code = fail ? csi_code_parse(fail) : 14;
		return csi_ctx_error(ctx, code > 0 ? code : 2, "injected failure %ld of %s for %s",
				     call, times, m);
	}
	if (fail) {
		int code = csi_code_parse(fail);
		return csi_ctx_error(ctx, code > 0 ? code : 2, "injected failure for %s", m);
	}
	return 0;
}

#define H(name) static int h_##name(struct csi_call_ctx *ctx, const ProtobufCMessage *rq, \
				    ProtobufCMessage *rs, void *arg)
#define PRO() do { (void)arg; int c_ = prologue(ctx, rq); if (c_) return c_; } while (0)

static Csi__V1__Topology *topo(struct csi_arena *a, const char *zone)
{
	Csi__V1__Topology *t = csi_msg_new(a, &csi__v1__topology__descriptor);
	csi_map_add(a, &t->base, "segments", "topology.kcsi.dev/zone", zone);
	return t;
}

H(GetPluginInfo)
{
	PRO();
	Csi__V1__GetPluginInfoResponse *r = (void *)rs;
	r->name = "testdriver.kcsi.dev";
	r->vendor_version = "v0.0.1";
	csi_map_add(csi_ctx_arena(ctx), rs, "manifest", "kind", "test");
	return 0;
}

H(GetPluginCapabilities)
{
	PRO();
	struct csi_arena *a = csi_ctx_arena(ctx);
	int svc[] = { 1, 2, 3 };
	for (int i = 0; i < 3; i++) {
		if (svc[i] == 1 && no_controller_service)
			continue;
		Csi__V1__PluginCapability *c = csi_msg_new(a, &csi__v1__plugin_capability__descriptor);
		c->type_case = CSI__V1__PLUGIN_CAPABILITY__TYPE_SERVICE;
		c->service = csi_msg_new(a, &csi__v1__plugin_capability__service__descriptor);
		c->service->type = svc[i];
		csi_repeated_add(a, rs, "capabilities", c);
	}
	Csi__V1__PluginCapability *c = csi_msg_new(a, &csi__v1__plugin_capability__descriptor);
	c->type_case = CSI__V1__PLUGIN_CAPABILITY__TYPE_VOLUME_EXPANSION;
	c->volume_expansion = csi_msg_new(a, &csi__v1__plugin_capability__volume_expansion__descriptor);
	c->volume_expansion->type = CSI__V1__PLUGIN_CAPABILITY__VOLUME_EXPANSION__TYPE__ONLINE;
	csi_repeated_add(a, rs, "capabilities", c);
	return 0;
}

/*
 * A streaming answer for the interop tests: snapshot "ranges-N" has N ranges of 4 KiB, one every
 * 8 KiB from 0; they come max_results (0: 100) to a response, from the first that ends after
 * starting_offset. Any other ID is NOT_FOUND.
 */
H(GetMetadataAllocated)
{
	PRO();
	const Csi__V1__GetMetadataAllocatedRequest *q = (const void *)rq;
	Csi__V1__GetMetadataAllocatedResponse *r = (void *)rs;
	char *end;
	long n = strncmp(q->snapshot_id, "ranges-", 7) ? -1 : strtol(q->snapshot_id + 7, &end, 10);
	if (n < 0 || n > 1000000 || !q->snapshot_id[7] || *end)
		return csi_ctx_error(ctx, 5, "snapshot %s not found", q->snapshot_id);
	size_t per = q->max_results > 0 ? (size_t)q->max_results : 100;
	r->block_metadata_type = CSI__V1__BLOCK_METADATA_TYPE__FIXED_LENGTH;
	r->volume_capacity_bytes = (int64_t)n * 8192;
	r->block_metadata = csi_arena_alloc(csi_ctx_arena(ctx), per * sizeof(*r->block_metadata));
	Csi__V1__BlockMetadata *b = csi_arena_alloc(csi_ctx_arena(ctx), per * sizeof(*b));
	for (long i = q->starting_offset > 0 ? q->starting_offset / 8192 : 0; i < n; i++) {
		Csi__V1__BlockMetadata *m = &b[r->n_block_metadata];
		csi__v1__block_metadata__init(m);
		m->byte_offset = (int64_t)i * 8192;
		m->size_bytes = 4096;
		r->block_metadata[r->n_block_metadata++] = m;
		if (r->n_block_metadata == per || i == n - 1) {
			int code = csi_ctx_send(ctx, rs);
			r->n_block_metadata = 0;
			if (code)
				return code;
		}
	}
	return 0;
}

H(Probe)
{
	PRO();
	Csi__V1__ProbeResponse *r = (void *)rs;
	r->ready = csi_msg_new(csi_ctx_arena(ctx), &google__protobuf__bool_value__descriptor);
	r->ready->value = !probe_not_ready;
	return 0;
}

H(ControllerGetCapabilities)
{
	PRO();
	struct csi_arena *a = csi_ctx_arena(ctx);
	int types[32], ntypes = 0;
	if (controller_caps && *controller_caps) {
		char *list = xstrdup(controller_caps), *save = NULL;
		for (char *n = strtok_r(list, ",", &save); n && ntypes < 32; n = strtok_r(NULL, ",", &save)) {
			const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value_by_name(
				&csi__v1__controller_service_capability__rpc__type__descriptor, n);
			if (v)
				types[ntypes++] = v->value;
		}
		free(list);
	} else {
		for (int t = 1; t <= 10; t++)
			types[ntypes++] = t;
	}
	for (int i = 0; i < ntypes; i++) {
		int t = types[i];
		Csi__V1__ControllerServiceCapability *c =
			csi_msg_new(a, &csi__v1__controller_service_capability__descriptor);
		c->type_case = CSI__V1__CONTROLLER_SERVICE_CAPABILITY__TYPE_RPC;
		c->rpc = csi_msg_new(a, &csi__v1__controller_service_capability__rpc__descriptor);
		c->rpc->type = t;
		csi_repeated_add(a, rs, "capabilities", c);
	}
	return 0;
}

static struct vol *find_vol(const char *id)
{
	for (struct vol *v = vols; v; v = v->next)
		if (strcmp(v->id, id) == 0)
			return v;
	return NULL;
}

H(CreateVolume)
{
	PRO();
	const Csi__V1__CreateVolumeRequest *q = (const void *)rq;
	Csi__V1__CreateVolumeResponse *r = (void *)rs;
	struct csi_arena *a = csi_ctx_arena(ctx);
	if (!q->name[0])
		return csi_ctx_error(ctx, 3, "name is required");
	if (!q->n_volume_capabilities)
		return csi_ctx_error(ctx, 3, "volume_capabilities are required");
	int64_t bytes = q->capacity_range && q->capacity_range->required_bytes
				? q->capacity_range->required_bytes : GiB;
	char *id = csi_arena_printf(a, "vol-%s", q->name);
	pthread_mutex_lock(&lock);
	struct vol *v = find_vol(id);
	if (!v) {
		v = xcalloc(1, sizeof(*v));
		v->id = xstrdup(id);
		v->name = xstrdup(q->name);
		v->bytes = bytes;
		v->next = vols;
		vols = v;
	}
	bytes = v->bytes;
	pthread_mutex_unlock(&lock);
	r->volume = csi_msg_new(a, &csi__v1__volume__descriptor);
	r->volume->volume_id = id;
	r->volume->capacity_bytes = bytes;
	for (size_t i = 0; i < q->n_parameters; i++)
		csi_map_add(a, &r->volume->base, "volume_context", q->parameters[i]->key,
			    q->parameters[i]->value);
	r->volume->content_source = q->volume_content_source;
	const Csi__V1__TopologyRequirement *tr = q->accessibility_requirements;
	if (tr && (tr->n_preferred || tr->n_requisite))
		csi_repeated_add(a, &r->volume->base, "accessible_topology",
				 tr->n_preferred ? tr->preferred[0] : tr->requisite[0]);
	else
		csi_repeated_add(a, &r->volume->base, "accessible_topology", topo(a, zone));
	return 0;
}

H(DeleteVolume)
{
	PRO();
	(void)rs;
	const Csi__V1__DeleteVolumeRequest *q = (const void *)rq;
	pthread_mutex_lock(&lock);
	for (struct vol **p = &vols; *p; p = &(*p)->next) {
		if (strcmp((*p)->id, q->volume_id) == 0) {
			struct vol *v = *p;
			*p = v->next;
			free(v->id);
			free(v->name);
			free(v->node);
			free(v);
			break;
		}
	}
	pthread_mutex_unlock(&lock);
	return 0;
}

H(ControllerPublishVolume)
{
	PRO();
	const Csi__V1__ControllerPublishVolumeRequest *q = (const void *)rq;
	struct csi_arena *a = csi_ctx_arena(ctx);
	pthread_mutex_lock(&lock);
	struct vol *v = find_vol(q->volume_id);
	if (!v && adopt_volumes) {
		v = xcalloc(1, sizeof(*v));
		v->id = xstrdup(q->volume_id);
		v->name = xstrdup(q->volume_id);
		v->bytes = GiB;
		v->next = vols;
		vols = v;
	}
	if (v) {
		free(v->node);
		v->node = xstrdup(q->node_id);
	}
	pthread_mutex_unlock(&lock);
	if (!v)
		return csi_ctx_error(ctx, 5, "volume %s not found", q->volume_id);
	csi_map_add(a, rs, "publish_context", "devicePath",
		    csi_arena_printf(a, "/dev/test/%s", q->volume_id));
	csi_map_add(a, rs, "publish_context", "readonly", q->readonly ? "true" : "false");
	return 0;
}

H(ControllerUnpublishVolume)
{
	PRO();
	(void)rs;
	const Csi__V1__ControllerUnpublishVolumeRequest *q = (const void *)rq;
	pthread_mutex_lock(&lock);
	struct vol *v = find_vol(q->volume_id);
	if (v) {
		free(v->node);
		v->node = NULL;
	}
	pthread_mutex_unlock(&lock);
	return 0;
}

H(ValidateVolumeCapabilities)
{
	PRO();
	const Csi__V1__ValidateVolumeCapabilitiesRequest *q = (const void *)rq;
	Csi__V1__ValidateVolumeCapabilitiesResponse *r = (void *)rs;
	pthread_mutex_lock(&lock);
	bool found = find_vol(q->volume_id) != NULL;
	pthread_mutex_unlock(&lock);
	if (!found)
		return csi_ctx_error(ctx, 5, "volume %s not found", q->volume_id);
	r->confirmed = csi_msg_new(csi_ctx_arena(ctx),
				   &csi__v1__validate_volume_capabilities_response__confirmed__descriptor);
	r->confirmed->n_volume_capabilities = q->n_volume_capabilities;
	r->confirmed->volume_capabilities = q->volume_capabilities;
	return 0;
}

H(ListVolumes)
{
	PRO();
	const Csi__V1__ListVolumesRequest *q = (const void *)rq;
	Csi__V1__ListVolumesResponse *r = (void *)rs;
	struct csi_arena *a = csi_ctx_arena(ctx);
	int skip = q->starting_token[0] ? atoi(q->starting_token) : 0, idx = 0;
	pthread_mutex_lock(&lock);
	for (struct vol *v = vols; v; v = v->next, idx++) {
		if (idx < skip)
			continue;
		if (q->max_entries > 0 && (int)r->n_entries >= q->max_entries) {
			r->next_token = csi_arena_printf(a, "%d", idx);
			break;
		}
		Csi__V1__ListVolumesResponse__Entry *e =
			csi_msg_new(a, &csi__v1__list_volumes_response__entry__descriptor);
		e->volume = csi_msg_new(a, &csi__v1__volume__descriptor);
		e->volume->volume_id = csi_arena_strdup(a, v->id);
		e->volume->capacity_bytes = v->bytes;
		e->status = csi_msg_new(a, &csi__v1__list_volumes_response__volume_status__descriptor);
		if (v->node)
			csi_repeated_add(a, &e->status->base, "published_node_ids",
					 csi_arena_strdup(a, v->node));
		csi_repeated_add(a, rs, "entries", e);
	}
	pthread_mutex_unlock(&lock);
	return 0;
}

/* Bytes with an optional binary suffix (Ki, Mi, Gi, Ti); def when malformed. */
static int64_t parse_bytes(const char *s, int64_t def)
{
	char *end;
	long long v = strtoll(s, &end, 10);
	static const char *const sfx[] = { "", "Ki", "Mi", "Gi", "Ti" };
	if (end == s || v < 0)
		return def;
	for (int i = 0; i < 5; i++)
		if (!strcmp(end, sfx[i]))
			return (int64_t)v << (10 * i);
	return def;
}

/* --capacity, or the quantity in --capacity-file when that file exists; -1 for "fail". */
static int64_t current_capacity(void)
{
	int64_t v = parse_bytes(capacity_flag, 100 * GiB);
	char buf[64];
	FILE *f = capacity_file[0] ? fopen(capacity_file, "r") : NULL;
	if (f) {
		if (fgets(buf, sizeof(buf), f)) {
			buf[strcspn(buf, " \r\n")] = 0;
			v = strcmp(buf, "fail") ? parse_bytes(buf, v) : -1;
		}
		fclose(f);
	}
	return v;
}

H(GetCapacity)
{
	PRO();
	Csi__V1__GetCapacityResponse *r = (void *)rs;
	int64_t max = parse_bytes(max_volume_size_flag, 10 * GiB);
	r->available_capacity = current_capacity();
	if (r->available_capacity < 0)
		return csi_ctx_error(ctx, 14, "capacity unknown (--capacity-file says fail)");
	r->maximum_volume_size = csi_msg_new(csi_ctx_arena(ctx),
					     &google__protobuf__int64_value__descriptor);
	r->maximum_volume_size->value = max;
	return 0;
}

H(CreateSnapshot)
{
	PRO();
	const Csi__V1__CreateSnapshotRequest *q = (const void *)rq;
	Csi__V1__CreateSnapshotResponse *r = (void *)rs;
	struct csi_arena *a = csi_ctx_arena(ctx);
	char *id = csi_arena_printf(a, "snap-%s", q->name);
	pthread_mutex_lock(&lock);
	struct snap *s = snaps;
	while (s && strcmp(s->id, id) != 0)
		s = s->next;
	if (!s) {
		s = xcalloc(1, sizeof(*s));
		s->id = xstrdup(id);
		s->source = xstrdup(q->source_volume_id);
		s->group = xstrdup("");
		struct vol *v = find_vol(q->source_volume_id);
		s->bytes = v ? v->bytes : GiB;
		s->created = (int64_t)time(NULL);
		s->next = snaps;
		snaps = s;
	}
	r->snapshot = csi_msg_new(a, &csi__v1__snapshot__descriptor);
	r->snapshot->snapshot_id = id;
	r->snapshot->source_volume_id = csi_arena_strdup(a, s->source);
	r->snapshot->size_bytes = s->bytes;
	r->snapshot->ready_to_use = 1;
	r->snapshot->creation_time = csi_msg_new(a, &google__protobuf__timestamp__descriptor);
	r->snapshot->creation_time->seconds = s->created;
	pthread_mutex_unlock(&lock);
	return 0;
}

H(DeleteSnapshot)
{
	PRO();
	(void)rs;
	const Csi__V1__DeleteSnapshotRequest *q = (const void *)rq;
	pthread_mutex_lock(&lock);
	for (struct snap **p = &snaps; *p; p = &(*p)->next) {
		if (strcmp((*p)->id, q->snapshot_id) == 0) {
			struct snap *s = *p;
			*p = s->next;
			free(s->id);
			free(s->source);
			free(s->group);
			free(s);
			break;
		}
	}
	pthread_mutex_unlock(&lock);
	return 0;
}

H(ListSnapshots)
{
	PRO();
	const Csi__V1__ListSnapshotsRequest *q = (const void *)rq;
	struct csi_arena *a = csi_ctx_arena(ctx);
	pthread_mutex_lock(&lock);
	for (struct snap *s = snaps; s; s = s->next) {
		/* The filters csi-snapshotter uses for a pre-provisioned handle (CSI: AND-ed). */
		if ((q->snapshot_id && *q->snapshot_id && strcmp(q->snapshot_id, s->id)) ||
		    (q->source_volume_id && *q->source_volume_id && strcmp(q->source_volume_id, s->source)))
			continue;
		if (q->snapshot_id && *q->snapshot_id)
			s->listed = true;
		Csi__V1__ListSnapshotsResponse__Entry *e =
			csi_msg_new(a, &csi__v1__list_snapshots_response__entry__descriptor);
		e->snapshot = csi_msg_new(a, &csi__v1__snapshot__descriptor);
		e->snapshot->snapshot_id = csi_arena_strdup(a, s->id);
		e->snapshot->source_volume_id = csi_arena_strdup(a, s->source);
		e->snapshot->size_bytes = s->bytes;
		e->snapshot->ready_to_use = 1;
		e->snapshot->creation_time = csi_msg_new(a, &google__protobuf__timestamp__descriptor);
		e->snapshot->creation_time->seconds = s->created;
		e->snapshot->group_snapshot_id = csi_arena_strdup(a, s->group);
		csi_repeated_add(a, rs, "entries", e);
	}
	pthread_mutex_unlock(&lock);
	return 0;
}

/* Grows the volume (when known) up to --max-volume-size; above it answers OUT_OF_RANGE. */
H(ControllerExpandVolume)
{
	PRO();
	const Csi__V1__ControllerExpandVolumeRequest *q = (const void *)rq;
	Csi__V1__ControllerExpandVolumeResponse *r = (void *)rs;
	int64_t want = q->capacity_range ? q->capacity_range->required_bytes : 0;
	int64_t max = parse_bytes(max_volume_size_flag, 10 * GiB);
	if (want > max)
		return csi_ctx_error(ctx, 11, "requested %lld bytes is above the maximum volume size %lld",
				     (long long)want, (long long)max);
	pthread_mutex_lock(&lock);
	struct vol *v = find_vol(q->volume_id);
	if (v && v->bytes < want)
		v->bytes = want;
	pthread_mutex_unlock(&lock);
	r->capacity_bytes = want;
	r->node_expansion_required = node_expansion_required;
	return 0;
}

H(ControllerGetVolume)
{
	PRO();
	const Csi__V1__ControllerGetVolumeRequest *q = (const void *)rq;
	Csi__V1__ControllerGetVolumeResponse *r = (void *)rs;
	struct csi_arena *a = csi_ctx_arena(ctx);
	pthread_mutex_lock(&lock);
	struct vol *v = find_vol(q->volume_id);
	if (v) {
		r->volume = csi_msg_new(a, &csi__v1__volume__descriptor);
		r->volume->volume_id = csi_arena_strdup(a, v->id);
		r->volume->capacity_bytes = v->bytes;
		r->status = csi_msg_new(a,
			&csi__v1__controller_get_volume_response__volume_status__descriptor);
		if (v->node)
			csi_repeated_add(a, &r->status->base, "published_node_ids",
					 csi_arena_strdup(a, v->node));
	}
	pthread_mutex_unlock(&lock);
	return v ? 0 : csi_ctx_error(ctx, 5, "volume %s not found", q->volume_id);
}

H(GroupControllerGetCapabilities)
{
	PRO();
	struct csi_arena *a = csi_ctx_arena(ctx);
	Csi__V1__GroupControllerServiceCapability *c =
		csi_msg_new(a, &csi__v1__group_controller_service_capability__descriptor);
	c->type_case = CSI__V1__GROUP_CONTROLLER_SERVICE_CAPABILITY__TYPE_RPC;
	c->rpc = csi_msg_new(a, &csi__v1__group_controller_service_capability__rpc__descriptor);
	c->rpc->type =
		CSI__V1__GROUP_CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT;
	csi_repeated_add(a, rs, "capabilities", c);
	return 0;
}

/* The group's members, as a message; NULL when the group has none (lock held). */
static Csi__V1__VolumeGroupSnapshot *group_msg(struct csi_arena *a, const char *gid)
{
	Csi__V1__VolumeGroupSnapshot *g = NULL;
	for (struct snap *s = snaps; s; s = s->next) {
		if (strcmp(s->group, gid) != 0)
			continue;
		if (!g) {
			g = csi_msg_new(a, &csi__v1__volume_group_snapshot__descriptor);
			g->group_snapshot_id = csi_arena_strdup(a, gid);
			g->ready_to_use = 1;
			g->creation_time = csi_msg_new(a, &google__protobuf__timestamp__descriptor);
			g->creation_time->seconds = s->created;
		}
		Csi__V1__Snapshot *m = csi_msg_new(a, &csi__v1__snapshot__descriptor);
		m->snapshot_id = csi_arena_strdup(a, s->id);
		m->source_volume_id = csi_arena_strdup(a, s->source);
		m->size_bytes = s->bytes;
		m->ready_to_use = !group_members_unready || s->listed;
		m->group_snapshot_id = g->group_snapshot_id;
		m->creation_time = g->creation_time;
		csi_repeated_add(a, &g->base, "snapshots", m);
	}
	return g;
}

H(CreateVolumeGroupSnapshot)
{
	PRO();
	const Csi__V1__CreateVolumeGroupSnapshotRequest *q = (const void *)rq;
	Csi__V1__CreateVolumeGroupSnapshotResponse *r = (void *)rs;
	struct csi_arena *a = csi_ctx_arena(ctx);
	if (!q->name[0] || !q->n_source_volume_ids)
		return csi_ctx_error(ctx, 3, "name and source_volume_ids are required");
	char *gid = csi_arena_printf(a, "group-%s", q->name);
	pthread_mutex_lock(&lock);
	if (!(r->group_snapshot = group_msg(a, gid))) {
		time_t now = time(NULL);
		for (size_t i = 0; i < q->n_source_volume_ids; i++) {
			struct snap *s = xcalloc(1, sizeof(*s));
			s->id = xstrdup(csi_arena_printf(a, "%s-%s", gid, q->source_volume_ids[i]));
			s->source = xstrdup(q->source_volume_ids[i]);
			s->group = xstrdup(gid);
			struct vol *v = find_vol(s->source);
			s->bytes = v ? v->bytes : GiB;
			s->created = (int64_t)now;
			s->next = snaps;
			snaps = s;
		}
		r->group_snapshot = group_msg(a, gid);
	}
	int creates = 0;
	for (struct snap *s = snaps; s; s = s->next)
		if (!strcmp(s->group, gid))
			creates = ++s->creates;
	if (creates <= group_unready_calls)
		r->group_snapshot->ready_to_use = 0;
	pthread_mutex_unlock(&lock);
	return 0;
}

H(DeleteVolumeGroupSnapshot)
{
	PRO();
	(void)rs;
	const Csi__V1__DeleteVolumeGroupSnapshotRequest *q = (const void *)rq;
	pthread_mutex_lock(&lock);
	for (struct snap **p = &snaps; *p;) {
		struct snap *s = *p;
		if (strcmp(s->group, q->group_snapshot_id) != 0) {
			p = &s->next;
			continue;
		}
		*p = s->next;
		free(s->id);
		free(s->source);
		free(s->group);
		free(s);
	}
	pthread_mutex_unlock(&lock);
	return 0;
}

H(GetVolumeGroupSnapshot)
{
	PRO();
	const Csi__V1__GetVolumeGroupSnapshotRequest *q = (const void *)rq;
	Csi__V1__GetVolumeGroupSnapshotResponse *r = (void *)rs;
	pthread_mutex_lock(&lock);
	r->group_snapshot = group_msg(csi_ctx_arena(ctx), q->group_snapshot_id);
	pthread_mutex_unlock(&lock);
	return r->group_snapshot ? 0 : csi_ctx_error(ctx, 5, "group snapshot %s not found",
						     q->group_snapshot_id);
}

/* Node operations only record the request. */
H(NodeOk)
{
	PRO();
	(void)rs;
	return 0;
}

H(NodeGetVolumeStats)
{
	PRO();
	struct csi_arena *a = csi_ctx_arena(ctx);
	Csi__V1__VolumeUsage *b = csi_msg_new(a, &csi__v1__volume_usage__descriptor);
	b->unit = CSI__V1__VOLUME_USAGE__UNIT__BYTES;
	b->total = GiB;
	b->used = 1024 * 1024;
	b->available = GiB - b->used;
	csi_repeated_add(a, rs, "usage", b);
	Csi__V1__VolumeUsage *n = csi_msg_new(a, &csi__v1__volume_usage__descriptor);
	n->unit = CSI__V1__VOLUME_USAGE__UNIT__INODES;
	n->total = 65536;
	n->used = 11;
	n->available = 65525;
	csi_repeated_add(a, rs, "usage", n);
	return 0;
}

H(NodeExpandVolume)
{
	PRO();
	const Csi__V1__NodeExpandVolumeRequest *q = (const void *)rq;
	Csi__V1__NodeExpandVolumeResponse *r = (void *)rs;
	r->capacity_bytes = q->capacity_range ? q->capacity_range->required_bytes : 0;
	return 0;
}

H(NodeGetCapabilities)
{
	PRO();
	struct csi_arena *a = csi_ctx_arena(ctx);
	for (int t = 1; t <= (no_node_expand ? 2 : 3); t++) {
		Csi__V1__NodeServiceCapability *c =
			csi_msg_new(a, &csi__v1__node_service_capability__descriptor);
		c->type_case = CSI__V1__NODE_SERVICE_CAPABILITY__TYPE_RPC;
		c->rpc = csi_msg_new(a, &csi__v1__node_service_capability__rpc__descriptor);
		c->rpc->type = t;
		csi_repeated_add(a, rs, "capabilities", c);
	}
	return 0;
}

H(NodeGetInfo)
{
	PRO();
	Csi__V1__NodeGetInfoResponse *r = (void *)rs;
	r->node_id = (char *)node_id;
	r->max_volumes_per_node = 16;
	r->accessible_topology = topo(csi_ctx_arena(ctx), zone);
	return 0;
}

int main(int argc, char **argv)
{
	const char *endpoint, *record_path;
	int64_t start_delay;
	int threads;
	struct flagset *fs = flags_new("csi-testdriver", "csi-testdriver [flags]");
	flags_string(fs, "endpoint", &endpoint, "unix:///tmp/csi-testdriver.sock",
		     "CSI endpoint to serve");
	flags_string(fs, "record", &record_path, "", "append every request as JSON to this file");
	flags_map(fs, "fail", &fail_map, "Method=CODE: make a method fail with a gRPC code");
	flags_map(fs, "slow", &slow_map, "Method=DURATION: delay a method");
	flags_map(fs, "hold", &hold_map, "Method=FILE: a method waits until FILE exists");
	flags_map(fs, "fail-count", &fail_count_map,
		  "Method=N: fail only the first N calls of a method (code from --fail, else UNAVAILABLE)");
	flags_string(fs, "controller-caps", &controller_caps, "",
		     "comma-separated controller RPC capability names to report (default: types 1-10)");
	flags_bool(fs, "no-controller-service", &no_controller_service, false,
		   "do not report the CONTROLLER_SERVICE plugin capability");
	flags_bool(fs, "no-node-expand", &no_node_expand, false,
		   "do not report the node's EXPAND_VOLUME capability (a modify-only driver)");
	flags_bool(fs, "probe-not-ready", &probe_not_ready, false,
		   "Probe answers ready=false (livenessprobe tests)");
	flags_duration(fs, "start-delay", &start_delay, 0, "wait this long before listening");
	flags_int(fs, "threads", &threads, 4, "worker threads");
	flags_string(fs, "capacity", &capacity_flag, "100Gi", "GetCapacity's available_capacity");
	flags_string(fs, "capacity-file", &capacity_file, "",
		     "read available_capacity from this file on every GetCapacity (when it exists)");
	flags_string(fs, "max-volume-size", &max_volume_size_flag, "10Gi",
		     "GetCapacity's maximum_volume_size; ControllerExpandVolume above it answers OUT_OF_RANGE");
	flags_bool(fs, "node-expansion-required", &node_expansion_required, true,
		   "ControllerExpandVolume's node_expansion_required");
	flags_bool(fs, "group-members-unready", &group_members_unready, false,
		   "group calls report a member not ready until ListSnapshots asked about it");
	flags_int(fs, "group-unready-calls", &group_unready_calls, 0,
		  "CreateVolumeGroupSnapshot answers a group not ready for its first N calls");
	flags_bool(fs, "adopt-volumes", &adopt_volumes, false,
		   "ControllerPublishVolume takes an unknown volume ID as an existing 1 GiB volume");
	flags_string(fs, "node-id", &node_id, "test-node", "NodeGetInfo's node_id");
	flags_string(fs, "zone", &zone, "z1",
		     "topology.kcsi.dev/zone of NodeGetInfo and of volumes created without requirements");
	log_register_flags(fs);
	flags_parse_or_exit(fs, argc, argv);
	char err[512];
	if (log_apply_flags(err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		return 2;
	}
	if (record_path[0] && !(record = fopen(record_path, "a"))) {
		perror(record_path);
		return 1;
	}
	if (start_delay > 0)
		sleep_ns(start_delay);

	struct csi_server_opts o = CSI_SERVER_OPTS_INIT;
	o.threads = threads;
	o.grace_ns = 2 * NSEC_PER_SEC;
	struct csi_server *s = csi_server_new(&o);
#define REG(svc, name, fn) csi_server_handle(s, CSI_METHOD(svc, name), h_##fn, NULL)
	REG(Identity, GetPluginInfo, GetPluginInfo);
	REG(Identity, GetPluginCapabilities, GetPluginCapabilities);
	REG(Identity, Probe, Probe);
	REG(Controller, CreateVolume, CreateVolume);
	REG(Controller, DeleteVolume, DeleteVolume);
	REG(Controller, ControllerPublishVolume, ControllerPublishVolume);
	REG(Controller, ControllerUnpublishVolume, ControllerUnpublishVolume);
	REG(Controller, ValidateVolumeCapabilities, ValidateVolumeCapabilities);
	REG(Controller, ListVolumes, ListVolumes);
	REG(Controller, GetCapacity, GetCapacity);
	REG(Controller, ControllerGetCapabilities, ControllerGetCapabilities);
	REG(Controller, CreateSnapshot, CreateSnapshot);
	REG(Controller, DeleteSnapshot, DeleteSnapshot);
	REG(Controller, ListSnapshots, ListSnapshots);
	REG(Controller, ControllerExpandVolume, ControllerExpandVolume);
	REG(Controller, ControllerGetVolume, ControllerGetVolume);
	REG(Controller, ControllerModifyVolume, NodeOk);
	REG(GroupController, GroupControllerGetCapabilities, GroupControllerGetCapabilities);
	REG(GroupController, CreateVolumeGroupSnapshot, CreateVolumeGroupSnapshot);
	REG(GroupController, DeleteVolumeGroupSnapshot, DeleteVolumeGroupSnapshot);
	REG(GroupController, GetVolumeGroupSnapshot, GetVolumeGroupSnapshot);
	REG(SnapshotMetadata, GetMetadataAllocated, GetMetadataAllocated);
	REG(Node, NodeStageVolume, NodeOk);
	REG(Node, NodeUnstageVolume, NodeOk);
	REG(Node, NodePublishVolume, NodeOk);
	REG(Node, NodeUnpublishVolume, NodeOk);
	REG(Node, NodeGetVolumeStats, NodeGetVolumeStats);
	REG(Node, NodeExpandVolume, NodeExpandVolume);
	REG(Node, NodeGetCapabilities, NodeGetCapabilities);
	REG(Node, NodeGetInfo, NodeGetInfo);
#ifdef KCSI_TESTDRIVER_LIBGRPC
	/* csi-testdriver-libgrpc: the same handlers behind Debian's libgrpc (tests/grpc-peer). */
	(void)err;
	if (libgrpc_peer_serve(s, endpoint, threads, o.max_recv_bytes)) {
		csi_server_free(s);
		return 1;
	}
#else
	if (csi_server_start(s, endpoint, err, sizeof(err))) {
		fprintf(stderr, "csi-testdriver: %s\n", err);
		csi_server_free(s);
		return 1;
	}
	csi_server_run(s);
#endif
	csi_server_free(s);
	pthread_mutex_lock(&lock);
	while (vols) {
		struct vol *v = vols;
		vols = v->next;
		free(v->id);
		free(v->name);
		free(v->node);
		free(v);
	}
	while (snaps) {
		struct snap *sn = snaps;
		snaps = sn->next;
		free(sn->id);
		free(sn->source);
		free(sn->group);
		free(sn);
	}
	pthread_mutex_unlock(&lock);
	if (record)
		fclose(record);
	flags_free(fs);
	return 0;
}
