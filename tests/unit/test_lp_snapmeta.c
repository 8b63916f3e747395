/*
 * kcsi-loopplugin's GetSnapshot and SnapshotMetadata service through CSI: the real plugin binary
 * in --mode controller (images and metadata only, no loop device) on a unix socket in a
 * temporary folder, driven with kcsi's client. The volume's image is written directly, as a
 * mounted filesystem would write it, then snapshotted; the tests read back the ranges a backup
 * tool would copy: exact offsets and sizes, responses of at most max_results ranges, a resumed
 * listing, and every error the spec lists.
 *
 * LP_PLUGIN_BIN is the plugin's path, set by the build.
 */
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/timeutil.h"
#include "check.h"
#include "csi/client.h"
#include "csi/wire.h"

#define KiB 1024LL
#define MiB (1024LL * KiB)
#define T (30 * NSEC_PER_SEC)

extern char **environ;

static char dir[256], endpoint[320], pool[300];
static pid_t plugin = -1;
static struct csi_conn *conn;

static void start_plugin(const char *extra)
{
	char ep[400], pd[400];
	snprintf(ep, sizeof(ep), "--endpoint=%s", endpoint);
	snprintf(pd, sizeof(pd), "--pool-dir=%s", pool);
	const char *argv[] = { LP_PLUGIN_BIN, ep, pd, "--nodeid=ctrl", "--mode=controller",
			       extra, NULL };
	CHECK_INT(posix_spawn(&plugin, LP_PLUGIN_BIN, NULL, NULL, (char *const *)argv, environ),
		  0);
	char err[256];
	struct csi_conn_opts o = CSI_CONN_OPTS_INIT;
	o.connect_timeout_ns = T;
	conn = csi_connect(endpoint, &o, err, sizeof(err));
	if (!conn) {
		fprintf(stderr, "connect: %s\n", err);
		exit(1);
	}
}

static void stop_plugin(void)
{
	csi_conn_free(conn);
	conn = NULL;
	kill(plugin, SIGTERM);
	waitpid(plugin, NULL, 0);
	plugin = -1;
}

static struct csi_status st;

static void create_volume(const char *name, char *id, size_t len)
{
	Csi__V1__CreateVolumeRequest r = CSI__V1__CREATE_VOLUME_REQUEST__INIT;
	Csi__V1__CapacityRange cr = CSI__V1__CAPACITY_RANGE__INIT;
	Csi__V1__VolumeCapability cap = CSI__V1__VOLUME_CAPABILITY__INIT;
	Csi__V1__VolumeCapability__BlockVolume blk = CSI__V1__VOLUME_CAPABILITY__BLOCK_VOLUME__INIT;
	Csi__V1__VolumeCapability__AccessMode am = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__INIT;
	Csi__V1__VolumeCapability *caps[] = { &cap };
	am.mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER;
	cap.access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;
	cap.block = &blk;
	cap.access_mode = &am;
	cr.required_bytes = 8 * MiB;
	r.name = (char *)name;
	r.capacity_range = &cr;
	r.n_volume_capabilities = 1;
	r.volume_capabilities = caps;
	Csi__V1__CreateVolumeResponse *resp = NULL;
	CHECK_INT(csi_create_volume(conn, &r, &resp, T, &st), 0);
	snprintf(id, len, "%s", resp && resp->volume ? resp->volume->volume_id : "");
	csi_msg_free(resp);
}

static void write_image(const char *vol, int64_t off, int64_t len, int byte)
{
	char img[500], buf[64 * 1024];
	snprintf(img, sizeof(img), "%s/volumes/%s.img", pool, vol);
	int fd = open(img, O_WRONLY);
	CHECK(fd >= 0);
	memset(buf, byte, sizeof(buf));
	for (int64_t done = 0; fd >= 0 && done < len; done += (int64_t)sizeof(buf))
		CHECK(pwrite(fd, buf, (size_t)(len - done < (int64_t)sizeof(buf) ?
					       len - done : (int64_t)sizeof(buf)), off + done) > 0);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
}

static void snapshot(const char *name, const char *vol, char *id, size_t len)
{
	Csi__V1__CreateSnapshotRequest r = CSI__V1__CREATE_SNAPSHOT_REQUEST__INIT;
	r.name = (char *)name;
	r.source_volume_id = (char *)vol;
	Csi__V1__CreateSnapshotResponse *resp = NULL;
	CHECK_INT(csi_create_snapshot(conn, &r, &resp, T, &st), 0);
	snprintf(id, len, "%s", resp && resp->snapshot ? resp->snapshot->snapshot_id : "");
	csi_msg_free(resp);
}

/* What a stream brought: the ranges in order, and the largest response. */
struct got {
	int responses;
	size_t most;
	int n;
	int64_t off[256], len[256], capacity;
	int type;
};

static int collect(void *arg, const ProtobufCMessage *m)
{
	struct got *g = arg;
	const Csi__V1__GetMetadataDeltaResponse *r = (const Csi__V1__GetMetadataDeltaResponse *)m;
	g->responses++;
	g->capacity = r->volume_capacity_bytes;
	g->type = r->block_metadata_type;
	if (r->n_block_metadata > g->most)
		g->most = r->n_block_metadata;
	for (size_t i = 0; i < r->n_block_metadata && g->n < 256; i++, g->n++) {
		g->off[g->n] = r->block_metadata[i]->byte_offset;
		g->len[g->n] = r->block_metadata[i]->size_bytes;
	}
	return 0;
}

static int allocated(const char *snap, int64_t start, int32_t max, struct got *g)
{
	Csi__V1__GetMetadataAllocatedRequest r = CSI__V1__GET_METADATA_ALLOCATED_REQUEST__INIT;
	r.snapshot_id = (char *)snap;
	r.starting_offset = start;
	r.max_results = max;
	memset(g, 0, sizeof(*g));
	return csi_call_stream(conn, CSI_METHOD(SnapshotMetadata, GetMetadataAllocated), &r.base,
			       &csi__v1__get_metadata_allocated_response__descriptor, collect, g, T,
			       &st);
}

static int delta(const char *base, const char *target, int64_t start, int32_t max,
		 struct got *g)
{
	Csi__V1__GetMetadataDeltaRequest r = CSI__V1__GET_METADATA_DELTA_REQUEST__INIT;
	r.base_snapshot_id = (char *)base;
	r.target_snapshot_id = (char *)target;
	r.starting_offset = start;
	r.max_results = max;
	memset(g, 0, sizeof(*g));
	return csi_call_stream(conn, CSI_METHOD(SnapshotMetadata, GetMetadataDelta), &r.base,
			       &csi__v1__get_metadata_delta_response__descriptor, collect, g, T,
			       &st);
}

static void expect_range(const struct got *g, int i, int64_t off, int64_t len)
{
	CHECK(i < g->n);
	if (i < g->n && (g->off[i] != off || g->len[i] != len))
		fprintf(stderr, "range %d: %lld+%lld, want %lld+%lld\n", i, (long long)g->off[i],
			(long long)g->len[i], (long long)off, (long long)len);
	CHECK(i < g->n && g->off[i] == off && g->len[i] == len);
}

static char vol[128], other[128], s1[128], s2[128], s3[128];

/* Ten written 4 KiB blocks 64 KiB apart; then two of them rewritten, one range added. */
static void setup(void)
{
	create_volume("meta-vol", vol, sizeof(vol));
	create_volume("meta-other", other, sizeof(other));
	for (int i = 0; i < 10; i++)
		write_image(vol, i * 64 * KiB, 4 * KiB, 'a' + i);
	snapshot("meta-s1", vol, s1, sizeof(s1));
	write_image(vol, 3 * 64 * KiB, 4 * KiB, 'X');
	write_image(vol, 7 * 64 * KiB + 100, 1, 'Y');
	write_image(vol, 4 * MiB, 12 * KiB, 'Z');
	snapshot("meta-s2", vol, s2, sizeof(s2));
	snapshot("meta-s3", other, s3, sizeof(s3));
}

/* GetSnapshot answers what CreateSnapshot made, NOT_FOUND once it is gone. */
static void test_get_snapshot(void)
{
	Csi__V1__GetSnapshotRequest r = CSI__V1__GET_SNAPSHOT_REQUEST__INIT;
	r.snapshot_id = s1;
	Csi__V1__GetSnapshotResponse *resp = NULL;
	CHECK_INT(csi_get_snapshot(conn, &r, &resp, T, &st), 0);
	if (resp && resp->snapshot) {
		CHECK_STR(resp->snapshot->snapshot_id, s1);
		CHECK_STR(resp->snapshot->source_volume_id, vol);
		CHECK(resp->snapshot->ready_to_use);
		CHECK_INT(resp->snapshot->size_bytes, 8 * MiB);
	}
	csi_msg_free(resp);
	r.snapshot_id = "no-such-snapshot";
	CHECK_INT(csi_get_snapshot(conn, &r, &resp, T, &st), CSI_CODE_NOT_FOUND);
	r.snapshot_id = "";
	CHECK_INT(csi_get_snapshot(conn, &r, &resp, T, &st), CSI_CODE_INVALID_ARGUMENT);
}

static void test_allocated(void)
{
	struct got g;
	CHECK_INT(allocated(s1, 0, 0, &g), 0);
	CHECK_INT(g.n, 10);
	for (int i = 0; i < 10 && i < g.n; i++)
		expect_range(&g, i, i * 64 * KiB, 4 * KiB);
	CHECK_INT(g.capacity, 8 * MiB);
	CHECK_INT(g.type, CSI__V1__BLOCK_METADATA_TYPE__VARIABLE_LENGTH);
	CHECK_INT(g.responses, 1);

	/* three per response: four responses, the same ranges */
	CHECK_INT(allocated(s1, 0, 3, &g), 0);
	CHECK_INT(g.responses, 4);
	CHECK_INT((int)g.most, 3);
	CHECK_INT(g.n, 10);

	/* resumed inside the sixth block: it is cut there, nothing before it comes again */
	CHECK_INT(allocated(s1, 5 * 64 * KiB + 1000, 0, &g), 0);
	CHECK_INT(g.n, 5);
	expect_range(&g, 0, 5 * 64 * KiB + 1000, 4 * KiB - 1000);

	/* at the very end: an empty stream; past it OUT_OF_RANGE */
	CHECK_INT(allocated(s1, 8 * MiB, 0, &g), 0);
	CHECK_INT(g.responses, 0);
	CHECK_INT(allocated(s1, 8 * MiB + 1, 0, &g), CSI_CODE_OUT_OF_RANGE);
	CHECK(strstr(st.message, "starting_offset") != NULL);
	CHECK_INT(allocated(s1, -1, 0, &g), CSI_CODE_OUT_OF_RANGE);
	CHECK_INT(allocated(s1, 0, -1, &g), CSI_CODE_INVALID_ARGUMENT);
	CHECK_INT(allocated("", 0, 0, &g), CSI_CODE_INVALID_ARGUMENT);
	CHECK_INT(allocated("no-such-snapshot", 0, 0, &g), CSI_CODE_NOT_FOUND);
}

static void test_delta(void)
{
	struct got g;
	CHECK_INT(delta(s1, s2, 0, 0, &g), 0);
	CHECK_INT(g.n, 3);
	expect_range(&g, 0, 3 * 64 * KiB, 4 * KiB);
	expect_range(&g, 1, 7 * 64 * KiB, 4 * KiB);
	expect_range(&g, 2, 4 * MiB, 12 * KiB);

	CHECK_INT(delta(s1, s2, 0, 1, &g), 0);
	CHECK_INT(g.responses, 3);
	CHECK_INT(delta(s1, s2, 7 * 64 * KiB + 4 * KiB, 0, &g), 0);
	CHECK_INT(g.n, 1);
	expect_range(&g, 0, 4 * MiB, 12 * KiB);
	CHECK_INT(delta(s2, s2, 0, 0, &g), 0);
	CHECK_INT(g.n, 0);

	CHECK_INT(delta(s2, s1, 0, 0, &g), CSI_CODE_INVALID_ARGUMENT);
	CHECK(strstr(st.message, "taken before") != NULL);
	CHECK_INT(delta(s1, s3, 0, 0, &g), CSI_CODE_INVALID_ARGUMENT);
	CHECK(strstr(st.message, "different volumes") != NULL);
	CHECK_INT(delta(s1, "", 0, 0, &g), CSI_CODE_INVALID_ARGUMENT);
	CHECK_INT(delta("", s2, 0, 0, &g), CSI_CODE_INVALID_ARGUMENT);
	CHECK_INT(delta(s1, "no-such-snapshot", 0, 0, &g), CSI_CODE_NOT_FOUND);
	CHECK_INT(delta(s1, s2, 9 * MiB, 0, &g), CSI_CODE_OUT_OF_RANGE);
}

static bool announces_get_snapshot(void)
{
	Csi__V1__ControllerGetCapabilitiesRequest r = CSI__V1__CONTROLLER_GET_CAPABILITIES_REQUEST__INIT;
	Csi__V1__ControllerGetCapabilitiesResponse *resp = NULL;
	bool found = false;
	CHECK_INT(csi_controller_get_capabilities(conn, &r, &resp, T, &st), 0);
	for (size_t i = 0; resp && i < resp->n_capabilities; i++)
		found |= resp->capabilities[i]->rpc && resp->capabilities[i]->rpc->type ==
			CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__GET_SNAPSHOT;
	csi_msg_free(resp);
	return found;
}

/* GET_SNAPSHOT (alpha) is announced by default and hidden by --get-snapshot-capability=false;
 * the RPC is served either way. */
static void test_capability_flag(void)
{
	CHECK(announces_get_snapshot());
	stop_plugin();
	start_plugin("--get-snapshot-capability=false");
	CHECK(!announces_get_snapshot());
	Csi__V1__GetSnapshotRequest r = CSI__V1__GET_SNAPSHOT_REQUEST__INIT;
	r.snapshot_id = s2;
	Csi__V1__GetSnapshotResponse *resp = NULL;
	CHECK_INT(csi_get_snapshot(conn, &r, &resp, T, &st), 0);
	csi_msg_free(resp);
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/var/tmp/kcsi-lp-meta-XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(endpoint, sizeof(endpoint), "unix://%s/csi.sock", dir);
	snprintf(pool, sizeof(pool), "%s/pool", dir);
	start_plugin(NULL);
	setup();
	RUN(test_get_snapshot);
	RUN(test_allocated);
	RUN(test_delta);
	RUN(test_capability_flag);
	stop_plugin();
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	return CHECK_DONE();
}
