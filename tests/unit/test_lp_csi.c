/*
 * kcsi-loopplugin through CSI: the real plugin binary, started as a process on a unix socket in
 * a temporary folder, driven with kcsi's CSI client. Real loop devices, mkfs and mounts (root).
 *
 * Scenarios follow the issue: the full lifecycle of a mount volume and of a block volume,
 * idempotency of every call, each error code from an invalid request, the attach limit and
 * device-name reuse, ABORTED for concurrent calls on one volume, kill -9 and restart. After each
 * scenario nothing of ours may remain: no loop device backed by our pool (losetup -a), no mount
 * below our folder (/proc/self/mountinfo), no temporary file in the pool.
 *
 * LP_PLUGIN_BIN is the plugin's path, set by the build.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/strbuf.h"
#include "base/timeutil.h"
#include "check.h"
#include "csi/client.h"
#include "loopplugin/driver.h"
#include "loopplugin/fs.h"

#define MiB (1024LL * 1024)
#define GiB (1024LL * MiB)
#define T (60 * NSEC_PER_SEC)

enum { SNW = 1, SNRO = 2, MNRO = 3, MNSW = 4, MNMW = 5 };

extern char **environ;

static char dir[256], sock[300], endpoint[320], pool[300];
static pid_t plugin = -1;
static struct csi_conn *conn;
static struct csi_arena *A;
static const char *NODE = "node-1";

/* ---- the plugin process ---- */

static void start_plugin(const char *extra)
{
	const char *argv[16];
	int n = 0;
	char ep[400], pd[400], nd[64];
	snprintf(ep, sizeof(ep), "--endpoint=%s", endpoint);
	snprintf(pd, sizeof(pd), "--pool-dir=%s", pool);
	snprintf(nd, sizeof(nd), "--nodeid=%s", NODE);
	argv[n++] = LP_PLUGIN_BIN;
	argv[n++] = ep;
	argv[n++] = pd;
	argv[n++] = nd;
	argv[n++] = "--volume-attach-limit=3";
	argv[n++] = "--max-volume-size=4Gi";
	if (extra)
		argv[n++] = extra;
	argv[n] = NULL;
	int rc = posix_spawn(&plugin, LP_PLUGIN_BIN, NULL, NULL, (char *const *)argv, environ);
	CHECK_INT(rc, 0);
	char err[256];
	struct csi_conn_opts o = CSI_CONN_OPTS_INIT;
	o.connect_timeout_ns = T;
	conn = csi_connect(endpoint, &o, err, sizeof(err));
	if (!conn) {
		fprintf(stderr, "connect: %s\n", err);
		exit(1);
	}
}

static void stop_plugin(int sig)
{
	csi_conn_free(conn);
	conn = NULL;
	if (plugin > 0) {
		kill(plugin, sig);
		waitpid(plugin, NULL, 0);
	}
	plugin = -1;
}

static int run(const char *const argv[], struct strbuf *out)
{
	int pfd[2];
	if (pipe(pfd) < 0)
		return -1;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
	posix_spawn_file_actions_addclose(&fa, pfd[0]);
	pid_t pid;
	int rc = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(pfd[1]);
	char buf[4096];
	ssize_t k;
	while ((k = read(pfd[0], buf, sizeof(buf))) > 0)
		if (out)
			strbuf_add(out, buf, (size_t)k);
	close(pfd[0]);
	int status = 0;
	if (rc == 0)
		waitpid(pid, &status, 0);
	return rc ? -1 : WEXITSTATUS(status);
}

/* No loop device or mount of ours. */
static void check_system(void)
{
	struct strbuf out = STRBUF_INIT;
	const char *argv[] = { "losetup", "-a", NULL };
	run(argv, &out);
	CHECK(strstr(out.buf, dir) == NULL);
	if (strstr(out.buf, dir))
		fprintf(stderr, "left loop devices:\n%s", out.buf);
	strbuf_release(&out);
	FILE *fp = fopen("/proc/self/mountinfo", "r");
	char line[4096];
	while (fp && fgets(line, sizeof(line), fp)) {
		CHECK(strstr(line, dir) == NULL);
		if (strstr(line, dir))
			fprintf(stderr, "left mount: %s", line);
	}
	if (fp)
		fclose(fp);
}

/* Nothing of ours left at the end of a scenario: the above, no device name taken, no
 * temporary file in the pool. */
static void check_clean(void)
{
	check_system();
	/* no device name stays taken once everything is unpublished */
	char adir[400];
	snprintf(adir, sizeof(adir), "%s/attachments/%s", pool, NODE);
	DIR *ad = opendir(adir);
	struct dirent *ade;
	while (ad && (ade = readdir(ad))) {
		CHECK(ade->d_name[0] == '.');
		if (ade->d_name[0] != '.')
			fprintf(stderr, "device name left: %s\n", ade->d_name);
	}
	if (ad)
		closedir(ad);
	const char *subs[] = { "volumes", "snapshots" };
	for (int i = 0; i < 2; i++) {
		char p[400];
		snprintf(p, sizeof(p), "%s/%s", pool, subs[i]);
		DIR *d = opendir(p);
		struct dirent *de;
		while (d && (de = readdir(d))) {
			CHECK(strstr(de->d_name, ".tmp") == NULL);
		}
		if (d)
			closedir(d);
	}
}

/* ---- request builders ---- */

static Csi__V1__VolumeCapability *cap(bool block, int mode, const char *fstype)
{
	Csi__V1__VolumeCapability *c = csi_msg_new(A, &csi__v1__volume_capability__descriptor);
	c->access_mode = csi_msg_new(A, &csi__v1__volume_capability__access_mode__descriptor);
	c->access_mode->mode = mode;
	if (block) {
		c->access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;
		c->block = csi_msg_new(A, &csi__v1__volume_capability__block_volume__descriptor);
	} else {
		c->access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
		c->mount = csi_msg_new(A, &csi__v1__volume_capability__mount_volume__descriptor);
		c->mount->fs_type = csi_arena_strdup(A, fstype ? fstype : "");
	}
	return c;
}

struct vol {
	char id[128];
	int64_t size;
};

static struct csi_status st;

static Csi__V1__CreateVolumeRequest *create_req(const char *name, int64_t size,
						Csi__V1__VolumeCapability *c)
{
	Csi__V1__CreateVolumeRequest *r = csi_msg_new(A, &csi__v1__create_volume_request__descriptor);
	r->name = csi_arena_strdup(A, name);
	if (size) {
		r->capacity_range = csi_msg_new(A, &csi__v1__capacity_range__descriptor);
		r->capacity_range->required_bytes = size;
	}
	if (c)
		csi_repeated_add(A, &r->base, "volume_capabilities", c);
	return r;
}

static int create_r(Csi__V1__CreateVolumeRequest *r, struct vol *v)
{
	Csi__V1__CreateVolumeResponse *resp = NULL;
	int rc = csi_create_volume(conn, r, &resp, T, &st);
	if (rc == 0 && v) {
		snprintf(v->id, sizeof(v->id), "%s", resp->volume->volume_id);
		v->size = resp->volume->capacity_bytes;
	}
	csi_msg_free(resp);
	return rc;
}

static int create(const char *name, int64_t size, Csi__V1__VolumeCapability *c, struct vol *v)
{
	return create_r(create_req(name, size, c), v);
}

static int del(const char *id)
{
	Csi__V1__DeleteVolumeRequest r = CSI__V1__DELETE_VOLUME_REQUEST__INIT;
	r.volume_id = (char *)id;
	Csi__V1__DeleteVolumeResponse *resp = NULL;
	int rc = csi_delete_volume(conn, &r, &resp, T, &st);
	csi_msg_free(resp);
	return rc;
}

static int cpublish(const char *id, const char *node, Csi__V1__VolumeCapability *c, bool ro,
		    char *device)
{
	Csi__V1__ControllerPublishVolumeRequest r = CSI__V1__CONTROLLER_PUBLISH_VOLUME_REQUEST__INIT;
	r.volume_id = (char *)id;
	r.node_id = (char *)node;
	r.volume_capability = c;
	r.readonly = ro;
	Csi__V1__ControllerPublishVolumeResponse *resp = NULL;
	int rc = csi_controller_publish_volume(conn, &r, &resp, T, &st);
	if (rc == 0 && device) {
		const char *dv = csi_map_get(resp->n_publish_context, resp->publish_context, "device");
		snprintf(device, 16, "%s", dv ? dv : "");
	}
	csi_msg_free(resp);
	return rc;
}

static int cunpublish(const char *id, const char *node)
{
	Csi__V1__ControllerUnpublishVolumeRequest r =
		CSI__V1__CONTROLLER_UNPUBLISH_VOLUME_REQUEST__INIT;
	r.volume_id = (char *)id;
	r.node_id = (char *)node;
	Csi__V1__ControllerUnpublishVolumeResponse *resp = NULL;
	int rc = csi_controller_unpublish_volume(conn, &r, &resp, T, &st);
	csi_msg_free(resp);
	return rc;
}

static int stage(const char *id, const char *path, Csi__V1__VolumeCapability *c)
{
	Csi__V1__NodeStageVolumeRequest r = CSI__V1__NODE_STAGE_VOLUME_REQUEST__INIT;
	r.volume_id = (char *)id;
	r.staging_target_path = (char *)path;
	r.volume_capability = c;
	Csi__V1__NodeStageVolumeResponse *resp = NULL;
	int rc = csi_node_stage_volume(conn, &r, &resp, T, &st);
	csi_msg_free(resp);
	return rc;
}

static int unstage(const char *id, const char *path)
{
	Csi__V1__NodeUnstageVolumeRequest r = CSI__V1__NODE_UNSTAGE_VOLUME_REQUEST__INIT;
	r.volume_id = (char *)id;
	r.staging_target_path = (char *)path;
	Csi__V1__NodeUnstageVolumeResponse *resp = NULL;
	int rc = csi_node_unstage_volume(conn, &r, &resp, T, &st);
	csi_msg_free(resp);
	return rc;
}

static int npublish(const char *id, const char *staging, const char *target,
		    Csi__V1__VolumeCapability *c, bool ro)
{
	Csi__V1__NodePublishVolumeRequest r = CSI__V1__NODE_PUBLISH_VOLUME_REQUEST__INIT;
	r.volume_id = (char *)id;
	r.staging_target_path = (char *)staging;
	r.target_path = (char *)target;
	r.volume_capability = c;
	r.readonly = ro;
	Csi__V1__NodePublishVolumeResponse *resp = NULL;
	int rc = csi_node_publish_volume(conn, &r, &resp, T, &st);
	csi_msg_free(resp);
	return rc;
}

static int nunpublish(const char *id, const char *target)
{
	Csi__V1__NodeUnpublishVolumeRequest r = CSI__V1__NODE_UNPUBLISH_VOLUME_REQUEST__INIT;
	r.volume_id = (char *)id;
	r.target_path = (char *)target;
	Csi__V1__NodeUnpublishVolumeResponse *resp = NULL;
	int rc = csi_node_unpublish_volume(conn, &r, &resp, T, &st);
	csi_msg_free(resp);
	return rc;
}

static int cexpand(const char *id, int64_t size, int64_t *got, bool *node_needed)
{
	Csi__V1__ControllerExpandVolumeRequest r = CSI__V1__CONTROLLER_EXPAND_VOLUME_REQUEST__INIT;
	Csi__V1__CapacityRange cr = CSI__V1__CAPACITY_RANGE__INIT;
	cr.required_bytes = size;
	r.volume_id = (char *)id;
	r.capacity_range = &cr;
	Csi__V1__ControllerExpandVolumeResponse *resp = NULL;
	int rc = csi_controller_expand_volume(conn, &r, &resp, T, &st);
	if (rc == 0) {
		*got = resp->capacity_bytes;
		*node_needed = resp->node_expansion_required;
	}
	csi_msg_free(resp);
	return rc;
}

static int nexpand(const char *id, const char *path, int64_t *got)
{
	Csi__V1__NodeExpandVolumeRequest r = CSI__V1__NODE_EXPAND_VOLUME_REQUEST__INIT;
	r.volume_id = (char *)id;
	r.volume_path = (char *)path;
	Csi__V1__NodeExpandVolumeResponse *resp = NULL;
	int rc = csi_node_expand_volume(conn, &r, &resp, T, &st);
	if (rc == 0)
		*got = resp->capacity_bytes;
	csi_msg_free(resp);
	return rc;
}

static int snapshot(const char *name, const char *src, char *id)
{
	Csi__V1__CreateSnapshotRequest r = CSI__V1__CREATE_SNAPSHOT_REQUEST__INIT;
	r.name = (char *)name;
	r.source_volume_id = (char *)src;
	Csi__V1__CreateSnapshotResponse *resp = NULL;
	int rc = csi_create_snapshot(conn, &r, &resp, T, &st);
	if (rc == 0) {
		CHECK(resp->snapshot->ready_to_use);
		CHECK_STR(resp->snapshot->source_volume_id, src);
		CHECK(resp->snapshot->creation_time && resp->snapshot->creation_time->seconds > 0);
		if (id)
			snprintf(id, 128, "%s", resp->snapshot->snapshot_id);
	}
	csi_msg_free(resp);
	return rc;
}

static int del_snapshot(const char *id)
{
	Csi__V1__DeleteSnapshotRequest r = CSI__V1__DELETE_SNAPSHOT_REQUEST__INIT;
	r.snapshot_id = (char *)id;
	Csi__V1__DeleteSnapshotResponse *resp = NULL;
	int rc = csi_delete_snapshot(conn, &r, &resp, T, &st);
	csi_msg_free(resp);
	return rc;
}

/* ---- files ---- */

static void put(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	if (fd < 0)
		return;
	CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
	fsync(fd);
	close(fd);
}

static bool has(const char *path, const char *text)
{
	char buf[256] = { 0 };
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 && strcmp(buf, text) == 0;
}

static void path_in(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
}

static int64_t fs_size(const char *path)
{
	struct statvfs sv;
	if (statvfs(path, &sv) < 0)
		return -1;
	return (int64_t)sv.f_blocks * (int64_t)sv.f_frsize;
}

/* ---- scenarios ---- */

static void test_parse_size(void)
{
	int64_t v = 0;
	CHECK_INT(lp_parse_size("1Ti", &v), 0);
	CHECK_INT(v, 1024 * GiB);
	CHECK_INT(lp_parse_size("512Mi", &v), 0);
	CHECK_INT(v, 512 * MiB);
	CHECK_INT(lp_parse_size("10G", &v), 0);
	CHECK_INT(v, 10000000000LL);
	CHECK_INT(lp_parse_size("4096", &v), 0);
	CHECK_INT(v, 4096);
	CHECK_INT(lp_parse_size("1Xi", &v), -1);
	CHECK_INT(lp_parse_size("-1Gi", &v), -1);
	CHECK_INT(lp_parse_size("", &v), -1);
	CHECK_INT(lp_parse_size("99999Pi", &v), -1);
}

static void test_identity(void)
{
	Csi__V1__GetPluginInfoRequest r = CSI__V1__GET_PLUGIN_INFO_REQUEST__INIT;
	Csi__V1__GetPluginInfoResponse *resp = NULL;
	CHECK_INT(csi_get_plugin_info(conn, &r, &resp, T, &st), 0);
	if (resp) {
		CHECK_STR(resp->name, "loop.kcsi.io");
		CHECK(resp->vendor_version && resp->vendor_version[0]);
	}
	csi_msg_free(resp);
	Csi__V1__NodeGetInfoRequest ni = CSI__V1__NODE_GET_INFO_REQUEST__INIT;
	Csi__V1__NodeGetInfoResponse *nresp = NULL;
	CHECK_INT(csi_node_get_info(conn, &ni, &nresp, T, &st), 0);
	if (nresp) {
		CHECK_STR(nresp->node_id, NODE);
		CHECK_INT(nresp->max_volumes_per_node, 3);
		CHECK(nresp->accessible_topology != NULL);
		if (nresp->accessible_topology)
			CHECK_STR(csi_map_get(nresp->accessible_topology->n_segments,
					      nresp->accessible_topology->segments,
					      "topology.loop.kcsi.io/zone"),
				  "local");
	}
	csi_msg_free(nresp);
	Csi__V1__ProbeRequest pr = CSI__V1__PROBE_REQUEST__INIT;
	Csi__V1__ProbeResponse *presp = NULL;
	CHECK_INT(csi_probe(conn, &pr, &presp, T, &st), 0);
	csi_msg_free(presp);
}

static void expect(int rc, int code, const char *needle);

/* The calls csi-sanity checks that the lifecycle tests do not reach. */
static void test_sanity_calls(void)
{
	Csi__V1__VolumeCapability *c = cap(false, SNW, "ext4");
	struct vol v;
	CHECK_INT(create("sanity-like", 32 * MiB, c, &v), 0);

	/* ValidateVolumeCapabilities: confirmed for what fits, a message for what does not */
	Csi__V1__ValidateVolumeCapabilitiesRequest vr =
		CSI__V1__VALIDATE_VOLUME_CAPABILITIES_REQUEST__INIT;
	Csi__V1__ValidateVolumeCapabilitiesResponse *vresp = NULL;
	Csi__V1__VolumeCapability *caps[1] = { c };
	vr.volume_id = v.id;
	vr.n_volume_capabilities = 1;
	vr.volume_capabilities = caps;
	CHECK_INT(csi_validate_volume_capabilities(conn, &vr, &vresp, T, &st), 0);
	CHECK(vresp && vresp->confirmed && vresp->confirmed->n_volume_capabilities == 1);
	csi_msg_free(vresp);
	caps[0] = cap(true, SNW, NULL);
	CHECK_INT(csi_validate_volume_capabilities(conn, &vr, &vresp, T, &st), 0);
	CHECK(vresp && !vresp->confirmed && vresp->message && strstr(vresp->message, "block"));
	csi_msg_free(vresp);
	vr.n_volume_capabilities = 0;
	expect(csi_validate_volume_capabilities(conn, &vr, &vresp, T, &st), 3, v.id);
	vr.volume_id = "lv-missing";
	vr.n_volume_capabilities = 1;
	expect(csi_validate_volume_capabilities(conn, &vr, &vresp, T, &st), 5, "lv-missing");

	/* ControllerGetVolume: the volume, its nodes; ControllerGetVolumeHealth: nothing wrong */
	CHECK_INT(cpublish(v.id, NODE, c, false, NULL), 0);
	Csi__V1__ControllerGetVolumeRequest gr = CSI__V1__CONTROLLER_GET_VOLUME_REQUEST__INIT;
	Csi__V1__ControllerGetVolumeResponse *gresp = NULL;
	gr.volume_id = v.id;
	CHECK_INT(csi_controller_get_volume(conn, &gr, &gresp, T, &st), 0);
	if (gresp) {
		CHECK_INT(gresp->volume->capacity_bytes, 32 * MiB);
		CHECK_INT(gresp->status->n_published_node_ids, 1);
	}
	csi_msg_free(gresp);
	Csi__V1__ControllerGetVolumeHealthRequest hr =
		CSI__V1__CONTROLLER_GET_VOLUME_HEALTH_REQUEST__INIT;
	Csi__V1__ControllerGetVolumeHealthResponse *hresp = NULL;
	hr.volume_id = v.id;
	CHECK_INT(csi_controller_get_volume_health(conn, &hr, &hresp, T, &st), 0);
	CHECK(hresp && hresp->volume_health && hresp->volume_health->n_health_statuses == 0);
	if (hresp && hresp->volume_health)
		CHECK_STR(hresp->volume_health->volume_id, v.id);
	csi_msg_free(hresp);
	hr.volume_id = "";
	expect(csi_controller_get_volume_health(conn, &hr, &hresp, T, &st), 3, "volume_id");
	hr.volume_id = "lv-missing";
	expect(csi_controller_get_volume_health(conn, &hr, &hresp, T, &st), 5, "lv-missing");
	gr.volume_id = "lv-missing";
	expect(csi_controller_get_volume(conn, &gr, &gresp, T, &st), 5, "lv-missing");

	/* NodeGetVolumeStats on a published volume: bytes and inodes; NodeGetVolumeHealth: healthy
	 * there, abnormal at the publish path once the mount is gone */
	char staging[400], target[400];
	path_in(staging, sizeof(staging), "sstaging");
	path_in(target, sizeof(target), "spods/vol");
	mkdir(staging, 0750);
	CHECK_INT(stage(v.id, staging, c), 0);
	CHECK_INT(npublish(v.id, staging, target, c, false), 0);
	Csi__V1__NodeGetVolumeStatsRequest sr = CSI__V1__NODE_GET_VOLUME_STATS_REQUEST__INIT;
	Csi__V1__NodeGetVolumeStatsResponse *sresp = NULL;
	sr.volume_id = v.id;
	sr.volume_path = target;
	CHECK_INT(csi_node_get_volume_stats(conn, &sr, &sresp, T, &st), 0);
	if (sresp) {
		CHECK_INT(sresp->n_usage, 2);
		CHECK(sresp->usage[0]->unit == CSI__V1__VOLUME_USAGE__UNIT__BYTES &&
		      sresp->usage[0]->total > 16 * MiB && sresp->usage[0]->available > 0);
		CHECK(sresp->usage[1]->unit == CSI__V1__VOLUME_USAGE__UNIT__INODES &&
		      sresp->usage[1]->total > 0);
	}
	csi_msg_free(sresp);
	Csi__V1__NodeGetVolumeHealthRequest nh = CSI__V1__NODE_GET_VOLUME_HEALTH_REQUEST__INIT;
	Csi__V1__NodeGetVolumeHealthResponse *nhresp = NULL;
	nh.volume_id = v.id;
	nh.volume_publish_path = target;
	nh.staging_target_path = staging;
	CHECK_INT(csi_node_get_volume_health(conn, &nh, &nhresp, T, &st), 0);
	CHECK(nhresp && nhresp->volume_health && nhresp->volume_health->n_health_statuses == 0);
	csi_msg_free(nhresp);
	CHECK_INT(nunpublish(v.id, target), 0);
	mkdir(target, 0750); /* the path is there, the volume is not */
	CHECK_INT(csi_node_get_volume_health(conn, &nh, &nhresp, T, &st), 0);
	CHECK(nhresp && nhresp->volume_health && nhresp->volume_health->n_health_statuses == 1);
	if (nhresp && nhresp->volume_health && nhresp->volume_health->n_health_statuses == 1) {
		CHECK_STR(nhresp->volume_health->health_statuses[0]->reason, "NotPublishedAtPath");
		CHECK_INT(nhresp->volume_health->health_statuses[0]->status,
			  CSI__V1__VOLUME_HEALTH_ERROR_TYPE__INACCESSIBLE);
	}
	csi_msg_free(nhresp);
	nh.volume_publish_path = "relative/path";
	expect(csi_node_get_volume_health(conn, &nh, &nhresp, T, &st), 3, "absolute");
	rmdir(target);
	CHECK_INT(unstage(v.id, staging), 0);
	CHECK_INT(cunpublish(v.id, NODE), 0);

	/* ListSnapshots: filters and pagination */
	char sid[3][128];
	for (int i = 0; i < 3; i++) {
		char name[32];
		snprintf(name, sizeof(name), "ls-snap-%d", i);
		CHECK_INT(snapshot(name, v.id, sid[i]), 0);
	}
	Csi__V1__ListSnapshotsRequest lr = CSI__V1__LIST_SNAPSHOTS_REQUEST__INIT;
	Csi__V1__ListSnapshotsResponse *lresp = NULL;
	lr.snapshot_id = sid[1];
	CHECK_INT(csi_list_snapshots(conn, &lr, &lresp, T, &st), 0);
	CHECK(lresp && lresp->n_entries == 1 &&
	      strcmp(lresp->entries[0]->snapshot->snapshot_id, sid[1]) == 0);
	csi_msg_free(lresp);
	lr.snapshot_id = "none-exist-id";
	CHECK_INT(csi_list_snapshots(conn, &lr, &lresp, T, &st), 0);
	CHECK(lresp && lresp->n_entries == 0);
	csi_msg_free(lresp);
	lr.snapshot_id = NULL;
	lr.source_volume_id = "lv-other";
	CHECK_INT(csi_list_snapshots(conn, &lr, &lresp, T, &st), 0);
	CHECK(lresp && lresp->n_entries == 0);
	csi_msg_free(lresp);
	lr.source_volume_id = v.id;
	lr.max_entries = 2;
	CHECK_INT(csi_list_snapshots(conn, &lr, &lresp, T, &st), 0);
	char token[256] = "";
	if (lresp) {
		CHECK_INT(lresp->n_entries, 2);
		CHECK(lresp->next_token && lresp->next_token[0]);
		snprintf(token, sizeof(token), "%s", lresp->next_token ? lresp->next_token : "");
	}
	csi_msg_free(lresp);
	lr.max_entries = 0;
	lr.starting_token = token;
	CHECK_INT(csi_list_snapshots(conn, &lr, &lresp, T, &st), 0);
	CHECK(lresp && lresp->n_entries == 1 &&
	      strcmp(lresp->entries[0]->snapshot->snapshot_id, sid[2]) == 0);
	csi_msg_free(lresp);
	lr.starting_token = "bogus";
	expect(csi_list_snapshots(conn, &lr, &lresp, T, &st), 10, "bogus");
	for (int i = 0; i < 3; i++)
		CHECK_INT(del_snapshot(sid[i]), 0);

	/* GetCapacity: our zone has room, another zone none */
	Csi__V1__GetCapacityRequest cr = CSI__V1__GET_CAPACITY_REQUEST__INIT;
	Csi__V1__GetCapacityResponse *cresp = NULL;
	Csi__V1__Topology *t = csi_msg_new(A, &csi__v1__topology__descriptor);
	csi_map_add(A, &t->base, "segments", "topology.loop.kcsi.io/zone", "local");
	cr.accessible_topology = t;
	CHECK_INT(csi_get_capacity(conn, &cr, &cresp, T, &st), 0);
	CHECK(cresp && cresp->available_capacity > 0);
	csi_msg_free(cresp);
	Csi__V1__Topology *t2 = csi_msg_new(A, &csi__v1__topology__descriptor);
	csi_map_add(A, &t2->base, "segments", "topology.loop.kcsi.io/zone", "far");
	cr.accessible_topology = t2;
	CHECK_INT(csi_get_capacity(conn, &cr, &cresp, T, &st), 0);
	CHECK(cresp && cresp->available_capacity == 0);
	csi_msg_free(cresp);

	/* capabilities */
	Csi__V1__ControllerGetCapabilitiesRequest ccr = CSI__V1__CONTROLLER_GET_CAPABILITIES_REQUEST__INIT;
	Csi__V1__ControllerGetCapabilitiesResponse *ccresp = NULL;
	CHECK_INT(csi_controller_get_capabilities(conn, &ccr, &ccresp, T, &st), 0);
	/* 16 with GET_SNAPSHOT (alpha, on by default: test_lp_snapmeta) and both health RPCs */
	CHECK(ccresp && ccresp->n_capabilities == 16);
	int health = 0;
	for (size_t i = 0; ccresp && i < ccresp->n_capabilities; i++)
		health += ccresp->capabilities[i]->rpc &&
			(ccresp->capabilities[i]->rpc->type ==
			 CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__GET_VOLUME_HEALTH ||
			 ccresp->capabilities[i]->rpc->type ==
			 CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__LIST_VOLUME_HEALTH);
	CHECK_INT(health, 2);
	csi_msg_free(ccresp);
	Csi__V1__NodeGetCapabilitiesRequest ncr = CSI__V1__NODE_GET_CAPABILITIES_REQUEST__INIT;
	Csi__V1__NodeGetCapabilitiesResponse *ncresp = NULL;
	CHECK_INT(csi_node_get_capabilities(conn, &ncr, &ncresp, T, &st), 0);
	/* with GET_VOLUME_HEALTH and GET_STORAGE_HEALTH */
	CHECK(ncresp && ncresp->n_capabilities == 6);
	csi_msg_free(ncresp);

	CHECK_INT(del(v.id), 0);
	rmdir(staging);
	check_clean();
}

/*
 * The lifecycle for a mount volume: create, publish, stage, publish, write, unpublish,
 * unstage, stage again and read back, expand, snapshot and restore, tear down, delete. Every
 * call is made twice: the repeat must succeed and change nothing.
 */
static void lifecycle_mount(const char *fstype, int64_t size, int64_t grown)
{
	char name[64], staging[400], target[400], file[500], dev1[16], dev2[16];
	snprintf(name, sizeof(name), "pvc-life-%s", fstype);
	path_in(staging, sizeof(staging), "staging");
	path_in(target, sizeof(target), "pods/p1/vol");
	mkdir(staging, 0750);
	Csi__V1__VolumeCapability *c = cap(false, SNW, fstype);
	struct vol v, v2;
	CHECK_INT(create(name, size, c, &v), 0);
	CHECK_INT(create(name, size, c, &v2), 0);
	CHECK_STR(v.id, v2.id);
	CHECK_INT(v.size, size);
	CHECK_INT(cpublish(v.id, NODE, c, false, dev1), 0);
	CHECK_INT(cpublish(v.id, NODE, c, false, dev2), 0);
	CHECK_STR(dev1, dev2);
	CHECK_INT(stage(v.id, staging, c), 0);
	CHECK_INT(stage(v.id, staging, c), 0);
	CHECK_INT(npublish(v.id, staging, target, c, false), 0);
	CHECK_INT(npublish(v.id, staging, target, c, false), 0);
	/* the same target with another access mode is a conflict */
	CHECK_INT(npublish(v.id, staging, target, c, true), 6 /* ALREADY_EXISTS */);
	/* unstaging under a published target is refused, and changes nothing */
	expect(unstage(v.id, staging), 9, "unpublish it first");
	CHECK(access(target, F_OK) == 0);
	snprintf(file, sizeof(file), "%s/hello.txt", target);
	put(file, "data written through the mount");
	CHECK_INT(nunpublish(v.id, target), 0);
	CHECK_INT(nunpublish(v.id, target), 0);
	CHECK(access(target, F_OK) < 0); /* removed */
	CHECK_INT(unstage(v.id, staging), 0);
	CHECK_INT(unstage(v.id, staging), 0);

	/* stage again: the filesystem is found, not formatted again */
	CHECK_INT(stage(v.id, staging, c), 0);
	CHECK_INT(npublish(v.id, staging, target, c, false), 0);
	CHECK(has(file, "data written through the mount"));

	/* expand while published */
	int64_t got = 0, before = fs_size(target);
	bool node_needed = false;
	CHECK_INT(cexpand(v.id, grown, &got, &node_needed), 0);
	CHECK_INT(got, grown);
	CHECK(node_needed);
	CHECK_INT(cexpand(v.id, grown, &got, &node_needed), 0);
	if (strcmp(fstype, "xfs") == 0) {
		/* online growth */
		CHECK_INT(nexpand(v.id, target, &got), 0);
		CHECK_INT(got, grown);
		CHECK_INT(nexpand(v.id, target, &got), 0);
		CHECK(fs_size(target) > before + (grown - size) / 2);
	}

	/* snapshot, restore into a new volume with the same data */
	char sid[128], rname[80];
	CHECK_INT(snapshot("snap-life", v.id, sid), 0);
	CHECK_INT(snapshot("snap-life", v.id, NULL), 0);
	snprintf(rname, sizeof(rname), "%s-restored", name);
	Csi__V1__CreateVolumeRequest *rr = create_req(rname, 0, c);
	rr->volume_content_source = csi_msg_new(A, &csi__v1__volume_content_source__descriptor);
	rr->volume_content_source->type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT;
	rr->volume_content_source->snapshot =
		csi_msg_new(A, &csi__v1__volume_content_source__snapshot_source__descriptor);
	rr->volume_content_source->snapshot->snapshot_id = csi_arena_strdup(A, sid);
	struct vol r;
	CHECK_INT(create_r(rr, &r), 0);
	CHECK_INT(r.size, grown);

	CHECK_INT(nunpublish(v.id, target), 0);
	CHECK_INT(unstage(v.id, staging), 0);
	CHECK_INT(cunpublish(v.id, NODE), 0);
	CHECK_INT(cunpublish(v.id, NODE), 0);

	/* the restored volume has the data; offline growth makes ext4 as large as the volume */
	CHECK_INT(cpublish(r.id, NODE, c, false, dev1), 0);
	CHECK_INT(stage(r.id, staging, c), 0);
	if (st.code)
		fprintf(stderr, "stage restored: %s\n", st.message);
	CHECK_INT(npublish(r.id, staging, target, c, false), 0);
	CHECK(has(file, "data written through the mount"));
	CHECK(fs_size(target) > grown - grown / 8);
	CHECK_INT(nunpublish(r.id, target), 0);
	CHECK_INT(unstage(r.id, staging), 0);
	CHECK_INT(cunpublish(r.id, NODE), 0);

	CHECK_INT(del_snapshot(sid), 0);
	CHECK_INT(del_snapshot(sid), 0);
	CHECK_INT(del(r.id), 0);
	CHECK_INT(del(v.id), 0);
	CHECK_INT(del(v.id), 0);
	rmdir(staging);
	check_clean();
}

static void test_lifecycle_ext4(void) { lifecycle_mount("ext4", 64 * MiB, 128 * MiB); }
static void test_lifecycle_xfs(void) { lifecycle_mount("xfs", 320 * MiB, 640 * MiB); }

/*
 * A 64Mi claim of an xfs class gets a volume of 300 MiB, the smallest mkfs.xfs makes, so its
 * NodeStageVolume can format it (before: created at 64 MiB, then every stage failed with
 * "Filesystem must be larger than 300MB"). A limit below that is refused up front; ext4 and
 * block keep the size asked for.
 */
static void test_filesystem_minimum(void)
{
	if (!lp_fs_supported("xfs")) {
		CHECK(!"mkfs.xfs is missing: install xfsprogs (scripts/deps.sh)");
		return;
	}
	struct vol v;
	CHECK_INT(create("xfs-small", 64 * MiB, cap(false, SNW, "xfs"), &v), 0);
	CHECK(v.size == 300 * MiB);
	CHECK_INT(del(v.id), 0);
	Csi__V1__CreateVolumeRequest *r = create_req("xfs-limited", 64 * MiB, cap(false, SNW, "xfs"));
	r->capacity_range->limit_bytes = 100 * MiB;
	expect(create_r(r, NULL), 11, "300 MiB, the smallest xfs");
	CHECK_INT(create("ext4-small", 64 * MiB, cap(false, SNW, "ext4"), &v), 0);
	CHECK(v.size == 64 * MiB);
	CHECK_INT(del(v.id), 0);
	CHECK_INT(create("block-small", 64 * MiB, cap(true, SNW, NULL), &v), 0);
	CHECK(v.size == 64 * MiB);
	CHECK_INT(del(v.id), 0);
	check_clean();
}

static void test_lifecycle_block(void)
{
	char staging[400], target[400], dev[16];
	path_in(staging, sizeof(staging), "bstaging");
	path_in(target, sizeof(target), "pods/p2/dev");
	mkdir(staging, 0750);
	Csi__V1__VolumeCapability *c = cap(true, SNW, NULL);
	struct vol v;
	CHECK_INT(create("pvc-block", 16 * MiB, c, &v), 0);
	CHECK_INT(cpublish(v.id, NODE, c, false, dev), 0);
	CHECK_INT(stage(v.id, staging, c), 0);
	CHECK_INT(stage(v.id, staging, c), 0);
	CHECK_INT(npublish(v.id, staging, target, c, false), 0);
	CHECK_INT(npublish(v.id, staging, target, c, false), 0);
	struct stat sb;
	CHECK(stat(target, &sb) == 0 && S_ISBLK(sb.st_mode));
	/* write raw data through the device, read it back after unstage + stage */
	int fd = open(target, O_RDWR);
	CHECK(fd >= 0);
	char msg[512] = "raw block data";
	CHECK(pwrite(fd, msg, sizeof(msg), 4096) == (ssize_t)sizeof(msg));
	fsync(fd);
	close(fd);
	/* the device is in use by the published target: unstage must refuse */
	expect(unstage(v.id, staging), 9, "unpublish it first");
	CHECK_INT(nunpublish(v.id, target), 0);
	CHECK(access(target, F_OK) < 0);
	CHECK_INT(unstage(v.id, staging), 0);
	CHECK_INT(stage(v.id, staging, c), 0);
	CHECK_INT(npublish(v.id, staging, target, c, false), 0);
	char back[512] = { 0 };
	fd = open(target, O_RDONLY);
	CHECK(fd >= 0 && pread(fd, back, sizeof(back), 4096) == (ssize_t)sizeof(back));
	if (fd >= 0)
		close(fd);
	CHECK_STR(back, "raw block data");
	/* expansion reaches the device */
	int64_t got;
	bool node_needed;
	CHECK_INT(cexpand(v.id, 32 * MiB, &got, &node_needed), 0);
	CHECK(node_needed); /* published: the loop device must re-read its size */
	CHECK_INT(nexpand(v.id, target, &got), 0);
	CHECK_INT(got, 32 * MiB);
	CHECK_INT(nunpublish(v.id, target), 0);
	CHECK_INT(unstage(v.id, staging), 0);
	CHECK_INT(cunpublish(v.id, NODE), 0);
	CHECK_INT(del(v.id), 0);
	rmdir(staging);
	check_clean();
}

static void expect(int rc, int code, const char *needle)
{
	CHECK_INT(rc, code);
	if (needle && !strstr(st.message, needle)) {
		fprintf(stderr, "message \"%s\" lacks \"%s\"\n", st.message, needle);
		CHECK(0);
	}
}

static void test_errors(void)
{
	Csi__V1__VolumeCapability *c = cap(false, SNW, "ext4");
	struct vol v;
	/* CreateVolume */
	expect(create("", MiB, c, NULL), 3, "name");
	expect(create("e1", MiB, NULL, NULL), 3, "capabilities");
	expect(create("e1", MiB, cap(false, MNMW, "ext4"), NULL), 3, "MULTI_NODE_MULTI_WRITER");
	expect(create("e1", MiB, cap(false, SNW, "btrfs"), NULL), 3, "btrfs");
	expect(create("e1", 5 * GiB, c, NULL), 11, "e1");
	Csi__V1__CreateVolumeRequest *r = create_req("e1", 2 * MiB, c);
	r->capacity_range->limit_bytes = MiB;
	expect(create_r(r, NULL), 11, "e1");
	r = create_req("e1", MiB, c);
	csi_map_add(A, &r->base, "parameters", "color", "blue");
	expect(create_r(r, NULL), 3, "color");
	r = create_req("e1", MiB, c);
	csi_map_add(A, &r->base, "parameters", "type", "fat");
	expect(create_r(r, NULL), 3, "fat");
	r = create_req("e1", MiB, c);
	r->accessibility_requirements = csi_msg_new(A, &csi__v1__topology_requirement__descriptor);
	Csi__V1__Topology *t = csi_msg_new(A, &csi__v1__topology__descriptor);
	csi_map_add(A, &t->base, "segments", "topology.loop.kcsi.io/zone", "elsewhere");
	csi_repeated_add(A, &r->accessibility_requirements->base, "requisite", t);
	expect(create_r(r, NULL), 8, "zone");
	r = create_req("e1", MiB, c);
	r->volume_content_source = csi_msg_new(A, &csi__v1__volume_content_source__descriptor);
	r->volume_content_source->type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_VOLUME;
	r->volume_content_source->volume =
		csi_msg_new(A, &csi__v1__volume_content_source__volume_source__descriptor);
	r->volume_content_source->volume->volume_id = "lv-missing";
	expect(create_r(r, NULL), 5, "lv-missing");
	r = create_req("e1", 0, c);
	r->volume_content_source = csi_msg_new(A, &csi__v1__volume_content_source__descriptor);
	r->volume_content_source->type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT;
	r->volume_content_source->snapshot =
		csi_msg_new(A, &csi__v1__volume_content_source__snapshot_source__descriptor);
	r->volume_content_source->snapshot->snapshot_id = "ls-missing";
	expect(create_r(r, NULL), 5, "ls-missing");

	/* default size, thick, and an incompatible repeat */
	CHECK_INT(create("e1", 0, c, &v), 0);
	CHECK_INT(v.size, GiB);
	expect(create("e1", 2 * GiB, c, NULL), 6, "e1");
	expect(create("e1", 0, cap(true, SNW, NULL), NULL), 6, "access type");
	r = create_req("e1", 0, c);
	csi_map_add(A, &r->base, "parameters", "type", "thick");
	expect(create_r(r, NULL), 6, "type");

	/* DeleteVolume */
	expect(del(""), 3, NULL);
	CHECK_INT(del("lv-never-existed"), 0);

	/* ControllerPublishVolume */
	expect(cpublish("", NODE, c, false, NULL), 3, NULL);
	expect(cpublish(v.id, "", c, false, NULL), 3, v.id);
	expect(cpublish(v.id, NODE, NULL, false, NULL), 3, v.id);
	expect(cpublish("lv-missing", NODE, c, false, NULL), 5, "lv-missing");
	expect(cpublish(v.id, "no-such-node", c, false, NULL), 5, "no-such-node");
	CHECK_INT(cpublish(v.id, NODE, c, false, NULL), 0);
	expect(cpublish(v.id, NODE, c, true, NULL), 6, v.id);
	/* a node that never started is unknown; a single-node volume on a second node fails */
	expect(cpublish(v.id, "node-2", c, false, NULL), 5, "node-2");
	char node2[400];
	snprintf(node2, sizeof(node2), "%s/nodes/node-2.json", pool);
	put(node2, "{\"node\":\"node-2\",\"zone\":\"local\"}");
	expect(cpublish(v.id, "node-2", c, false, NULL), 9, NODE);
	unlink(node2);
	expect(del(v.id), 9, NODE);

	/* ControllerUnpublishVolume */
	expect(cunpublish("", NODE), 3, NULL);
	CHECK_INT(cunpublish("lv-missing", NODE), 0);
	CHECK_INT(cunpublish(v.id, "unknown-node"), 0);

	/* Node calls */
	char staging[400], target[400];
	path_in(staging, sizeof(staging), "estaging");
	path_in(target, sizeof(target), "etarget");
	mkdir(staging, 0750);
	expect(stage("", staging, c), 3, NULL);
	expect(stage(v.id, "", c), 3, v.id);
	expect(stage(v.id, staging, NULL), 3, v.id);
	expect(stage("lv-missing", staging, c), 5, "lv-missing");
	expect(npublish(v.id, staging, target, c, false), 9, v.id); /* not staged */
	expect(npublish("", staging, target, c, false), 3, NULL);
	expect(npublish(v.id, staging, "", c, false), 3, v.id);
	expect(npublish(v.id, staging, target, NULL, false), 3, v.id);
	expect(nunpublish("", target), 3, NULL);
	expect(nunpublish(v.id, ""), 3, v.id);
	expect(unstage("", staging), 3, NULL);
	expect(unstage(v.id, ""), 3, v.id);
	int64_t got;
	expect(nexpand("lv-missing", "/tmp", &got), 5, "lv-missing");
	expect(nexpand(v.id, "", &got), 3, v.id);
	Csi__V1__NodeGetVolumeStatsRequest sr = CSI__V1__NODE_GET_VOLUME_STATS_REQUEST__INIT;
	Csi__V1__NodeGetVolumeStatsResponse *sresp = NULL;
	sr.volume_id = v.id;
	sr.volume_path = "some/path";
	expect(csi_node_get_volume_stats(conn, &sr, &sresp, T, &st), 5, v.id);
	sr.volume_id = "lv-missing";
	expect(csi_node_get_volume_stats(conn, &sr, &sresp, T, &st), 5, "lv-missing");

	/* ListVolumes: bad token */
	Csi__V1__ListVolumesRequest lr = CSI__V1__LIST_VOLUMES_REQUEST__INIT;
	Csi__V1__ListVolumesResponse *lresp = NULL;
	lr.starting_token = "garbage";
	expect(csi_list_volumes(conn, &lr, &lresp, T, &st), 10, "garbage");

	/* snapshots */
	expect(snapshot("", v.id, NULL), 3, NULL);
	expect(snapshot("s-e", "", NULL), 3, "s-e");
	expect(snapshot("s-e", "lv-missing", NULL), 5, "lv-missing");
	CHECK_INT(snapshot("s-e", v.id, NULL), 0);
	struct vol w;
	CHECK_INT(create("e2", MiB, c, &w), 0);
	expect(snapshot("s-e", w.id, NULL), 6, "s-e");
	expect(del_snapshot(""), 3, NULL);
	CHECK_INT(del_snapshot("ls-never"), 0);
	char sid[128];
	CHECK_INT(snapshot("s-e", v.id, sid), 0);
	CHECK_INT(del_snapshot(sid), 0);

	/* ControllerExpandVolume */
	bool nn;
	expect(cexpand("", GiB, &got, &nn), 3, NULL);
	expect(cexpand("lv-missing", GiB, &got, &nn), 5, "lv-missing");
	expect(cexpand(v.id, 8 * GiB, &got, &nn), 11, v.id);

	CHECK_INT(cunpublish(v.id, NODE), 0);
	CHECK_INT(del(v.id), 0);
	CHECK_INT(del(w.id), 0);
	rmdir(staging);
	check_clean();
}

static void test_list_and_capacity(void)
{
	Csi__V1__VolumeCapability *c = cap(false, SNW, "ext4");
	struct vol v[5];
	for (int i = 0; i < 5; i++) {
		char name[32];
		snprintf(name, sizeof(name), "list-%d", i);
		CHECK_INT(create(name, MiB, c, &v[i]), 0);
	}
	CHECK_INT(cpublish(v[1].id, NODE, c, false, NULL), 0);
	/* pages of 2 add up to the 5 volumes, in order, each once */
	Csi__V1__ListVolumesRequest lr = CSI__V1__LIST_VOLUMES_REQUEST__INIT;
	lr.max_entries = 2;
	int seen = 0, pages = 0;
	char token[256] = "";
	bool published_seen = false;
	do {
		Csi__V1__ListVolumesResponse *resp = NULL;
		lr.starting_token = token;
		CHECK_INT(csi_list_volumes(conn, &lr, &resp, T, &st), 0);
		if (!resp)
			break;
		CHECK(resp->n_entries <= 2);
		for (size_t i = 0; i < resp->n_entries; i++) {
			Csi__V1__ListVolumesResponse__Entry *e = resp->entries[i];
			CHECK_STR(e->volume->volume_id, v[seen].id);
			CHECK(e->status != NULL);
			if (strcmp(e->volume->volume_id, v[1].id) == 0) {
				CHECK_INT(e->status->n_published_node_ids, 1);
				published_seen = e->status->n_published_node_ids == 1;
			}
			seen++;
		}
		snprintf(token, sizeof(token), "%s", resp->next_token ? resp->next_token : "");
		csi_msg_free(resp);
		pages++;
	} while (token[0] && pages < 10);
	CHECK_INT(seen, 5);
	CHECK_INT(pages, 3);
	CHECK(published_seen);

	Csi__V1__GetCapacityRequest gr = CSI__V1__GET_CAPACITY_REQUEST__INIT;
	Csi__V1__GetCapacityResponse *gresp = NULL;
	CHECK_INT(csi_get_capacity(conn, &gr, &gresp, T, &st), 0);
	CHECK(gresp && gresp->available_capacity > 0);
	CHECK(gresp && gresp->maximum_volume_size && gresp->maximum_volume_size->value <= 4 * GiB);
	csi_msg_free(gresp);

	CHECK_INT(cunpublish(v[1].id, NODE), 0);
	for (int i = 0; i < 5; i++)
		CHECK_INT(del(v[i].id), 0);
	check_clean();
}

/* Issue 16: hostile names and sizes get a clear error before anything is made; GetCapacity with
 * a capability without access mode (upstream's capacity controller sends one) is answered. */
static void test_hostile_requests(void)
{
	Csi__V1__VolumeCapability *c = cap(false, SNW, "ext4");
	struct vol v;
	char long_name[200];
	memset(long_name, 'n', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	expect(create("bad-\xff\xfe", MiB, c, NULL), 3, "not valid UTF-8");
	expect(create("bad-\xc0\xaf", MiB, c, NULL), 3, "not valid UTF-8");
	expect(create("bad\nname", MiB, c, NULL), 3, "control character");
	expect(create(long_name, MiB, c, NULL), 3, "more than 128");
	char sid[128];
	expect(snapshot("snap-\xff", "lv-x", sid), 3, "not valid UTF-8");
	check_clean(); /* no image, no metadata left behind by any of them */

	/* sizes near INT64_MAX: OUT_OF_RANGE, never INTERNAL or an overflow */
	expect(create("huge", INT64_MAX, c, NULL), 11, "largest volume");
	expect(create("huge", INT64_MAX - MiB / 2, c, NULL), 11, "largest volume");
	CHECK_INT(create("hv", 8 * MiB, c, &v), 0);
	int64_t got = 0;
	bool node_needed;
	expect(cexpand(v.id, INT64_MAX, &got, &node_needed), 11, "largest volume");
	/* required_bytes 0 keeps the size (it used to grow the volume to 1 GiB) */
	CHECK_INT(cexpand(v.id, 0, &got, &node_needed), 0);
	CHECK_INT(got, 8 * MiB);
	CHECK_INT(cexpand(v.id, 4 * MiB, &got, &node_needed), 0);
	CHECK_INT(got, 8 * MiB);

	Csi__V1__GetCapacityRequest gr = CSI__V1__GET_CAPACITY_REQUEST__INIT;
	Csi__V1__GetCapacityResponse *gresp = NULL;
	Csi__V1__VolumeCapability *nomode = cap(false, SNW, "ext4");
	nomode->access_mode = NULL;
	csi_repeated_add(A, &gr.base, "volume_capabilities", nomode);
	CHECK_INT(csi_get_capacity(conn, &gr, &gresp, T, &st), 0);
	CHECK(gresp && gresp->available_capacity > 0);
	csi_msg_free(gresp);
	CHECK_INT(del(v.id), 0);
	check_clean();
}

/* Issue 16: node calls act only on what the driver made for that volume. */
static void test_node_calls_touch_only_their_own(void)
{
	char file[400], link[400], victim[400], mnt[400];
	snprintf(file, sizeof(file), "%s/precious", dir);
	snprintf(victim, sizeof(victim), "%s/victim", dir);
	snprintf(link, sizeof(link), "%s/link", dir);
	snprintf(mnt, sizeof(mnt), "%s/foreign", dir);
	FILE *f = fopen(file, "w");
	fputs("data", f);
	fclose(f);
	CHECK_INT(mkdir(victim, 0755), 0);
	CHECK_INT(symlink(victim, link), 0);
	CHECK_INT(mkdir(mnt, 0755), 0);
	CHECK_INT(mount("tmpfs", mnt, "tmpfs", 0, "size=1m"), 0);

	/* unknown volume: NOT_FOUND, nothing touched */
	expect(nunpublish("lv-nope", file), 5, "does not exist");
	expect(unstage("lv-nope", mnt), 5, "does not exist");
	expect(nunpublish("lv-nope", mnt), 5, "does not exist");
	struct vol v;
	CHECK_INT(create("own", 8 * MiB, cap(false, SNW, "ext4"), &v), 0);
	/* a symlink is never followed (its target used to be deleted) */
	expect(nunpublish(v.id, link), 3, "symbolic link");
	expect(unstage(v.id, link), 3, "symbolic link");
	/* a mount the driver did not make stays */
	expect(nunpublish(v.id, mnt), 9, "did not make");
	expect(unstage(v.id, mnt), 9, "did not make");
	/* a file holding data is not removed */
	CHECK_INT(nunpublish(v.id, file), 0);
	struct stat sb;
	CHECK(stat(file, &sb) == 0 && sb.st_size == 4);
	CHECK(stat(victim, &sb) == 0 && S_ISDIR(sb.st_mode));
	CHECK(lstat(link, &sb) == 0 && S_ISLNK(sb.st_mode));
	struct statvfs vf;
	CHECK(statvfs(mnt, &vf) == 0 && vf.f_blocks * vf.f_frsize == 1024 * 1024); /* still tmpfs */
	CHECK_INT(umount(mnt), 0);
	rmdir(mnt);
	unlink(link);
	rmdir(victim);
	unlink(file);
	CHECK_INT(del(v.id), 0);
	check_clean();
}

/* The limit of 3 per node, and device names: never two alike, freed ones reused. */
static void test_attach_limit_and_device_names(void)
{
	Csi__V1__VolumeCapability *c = cap(false, SNW, "ext4");
	struct vol v[4];
	char dev[4][16];
	for (int i = 0; i < 4; i++) {
		char name[32];
		snprintf(name, sizeof(name), "att-%d", i);
		CHECK_INT(create(name, MiB, c, &v[i]), 0);
	}
	for (int i = 0; i < 3; i++)
		CHECK_INT(cpublish(v[i].id, NODE, c, false, dev[i]), 0);
	CHECK(strcmp(dev[0], dev[1]) != 0 && strcmp(dev[1], dev[2]) != 0 &&
	      strcmp(dev[0], dev[2]) != 0);
	expect(cpublish(v[3].id, NODE, c, false, NULL), 8, NODE);
	CHECK_INT(cunpublish(v[1].id, NODE), 0);
	CHECK_INT(cpublish(v[3].id, NODE, c, false, dev[3]), 0);
	CHECK_STR(dev[3], dev[1]); /* the freed name, not a new one */
	for (int i = 0; i < 4; i++) {
		CHECK_INT(cunpublish(v[i].id, NODE), 0);
		CHECK_INT(del(v[i].id), 0);
	}
	check_clean();
}

struct bg_call {
	Csi__V1__CreateVolumeRequest *req;
	int rc;
	volatile int done;
};

static void *bg_create(void *arg)
{
	struct bg_call *b = arg;
	struct csi_status s2;
	Csi__V1__CreateVolumeResponse *resp = NULL;
	b->rc = csi_create_volume(conn, b->req, &resp, T, &s2);
	csi_msg_free(resp);
	b->done = 1;
	return NULL;
}

/* Fills a thick volume's image with data so that cloning it takes a while. */
static void fill_image(const char *id, int64_t bytes)
{
	char img[500];
	snprintf(img, sizeof(img), "%s/volumes/%s.img", pool, id);
	int fd = open(img, O_WRONLY);
	CHECK(fd >= 0);
	static char buf[1 << 20];
	memset(buf, 0x5a, sizeof(buf));
	for (int64_t off = 0; fd >= 0 && off < bytes; off += sizeof(buf))
		CHECK(pwrite(fd, buf, sizeof(buf), off) == (ssize_t)sizeof(buf));
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
}

static Csi__V1__CreateVolumeRequest *clone_req(const char *name, const char *src,
					       Csi__V1__VolumeCapability *c)
{
	Csi__V1__CreateVolumeRequest *r = create_req(name, 0, c);
	r->volume_content_source = csi_msg_new(A, &csi__v1__volume_content_source__descriptor);
	r->volume_content_source->type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_VOLUME;
	r->volume_content_source->volume =
		csi_msg_new(A, &csi__v1__volume_content_source__volume_source__descriptor);
	r->volume_content_source->volume->volume_id = csi_arena_strdup(A, src);
	return r;
}

/*
 * A second call on a volume with an operation in flight gets ABORTED. The first call is a clone
 * of a volume full of data; the second is made while the first has not returned. If the first
 * finishes before the second arrives (a very fast disk) the round is repeated with more data.
 */
static void test_concurrent_aborted(void)
{
	Csi__V1__VolumeCapability *c = cap(false, SNW, "ext4");
	struct vol src;
	CHECK_INT(create("conc-src", 512 * MiB, c, &src), 0);
	bool seen = false;
	for (int round = 0; round < 4 && !seen; round++) {
		fill_image(src.id, round < 2 ? (128LL << round) * MiB : 512 * MiB);
		char name[32];
		snprintf(name, sizeof(name), "conc-%d", round);
		struct bg_call b = { clone_req(name, src.id, c), -1, 0 };
		pthread_t th;
		pthread_create(&th, NULL, bg_create, &b);
		/* wait until the clone's temporary image appears: the first call is in flight */
		char *id = NULL;
		{
			Csi__V1__CreateVolumeRequest *r = clone_req(name, src.id, c);
			int64_t until = mono_now_ns() + 30 * NSEC_PER_SEC;
			while (!b.done && mono_now_ns() < until) {
				DIR *d;
				char p[400];
				snprintf(p, sizeof(p), "%s/volumes", pool);
				d = opendir(p);
				struct dirent *de;
				bool tmp = false;
				while (d && (de = readdir(d)))
					if (strstr(de->d_name, ".img.tmp"))
						tmp = true;
				if (d)
					closedir(d);
				if (tmp) {
					int rc = create_r(r, NULL);
					if (rc == 10) {
						seen = true;
						CHECK(strstr(st.message, "in progress") != NULL);
					}
					break;
				}
				sleep_ns(NSEC_PER_MSEC);
			}
		}
		pthread_join(th, NULL);
		CHECK_INT(b.rc, 0);
		/* afterwards the retry succeeds with the same volume */
		struct vol v;
		CHECK_INT(create_r(clone_req(name, src.id, c), &v), 0);
		CHECK_INT(del(v.id), 0);
		free(id);
	}
	CHECK(seen);
	CHECK_INT(del(src.id), 0);
	check_clean();
}

/*
 * kill -9 in the middle of a create (a long clone), and after publish and stage: after a restart
 * the leftovers are gone, the retried calls answer as the first would have, and tearing down
 * leaves nothing behind.
 */
static void test_kill9_recovery(void)
{
	Csi__V1__VolumeCapability *c = cap(false, SNW, "ext4");
	struct vol src, v;
	CHECK_INT(create("crash-src", 512 * MiB, c, &src), 0);
	fill_image(src.id, 512 * MiB);
	struct bg_call b = { clone_req("crash-clone", src.id, c), -1, 0 };
	pthread_t th;
	pthread_create(&th, NULL, bg_create, &b);
	/* kill as soon as the clone's image is being written */
	int64_t until = mono_now_ns() + 30 * NSEC_PER_SEC;
	bool killed = false;
	while (!b.done && mono_now_ns() < until && !killed) {
		char p[400];
		snprintf(p, sizeof(p), "%s/volumes", pool);
		DIR *d = opendir(p);
		struct dirent *de;
		while (d && (de = readdir(d)))
			if (strstr(de->d_name, ".img.tmp"))
				killed = true;
		if (d)
			closedir(d);
		if (killed)
			kill(plugin, SIGKILL);
		else
			sleep_ns(NSEC_PER_MSEC);
	}
	pthread_join(th, NULL);
	stop_plugin(SIGKILL);
	start_plugin(NULL);
	check_clean(); /* the half-written image was removed at start */
	CHECK_INT(create_r(clone_req("crash-clone", src.id, c), &v), 0);

	/* publish + stage, then kill -9: the kernel keeps the loop device and the mount */
	char staging[400], target[400];
	path_in(staging, sizeof(staging), "cstaging");
	path_in(target, sizeof(target), "cpods/vol");
	mkdir(staging, 0750);
	char dev1[16], dev2[16];
	CHECK_INT(cpublish(v.id, NODE, c, false, dev1), 0);
	CHECK_INT(stage(v.id, staging, c), 0);
	stop_plugin(SIGKILL);
	start_plugin(NULL);
	CHECK_INT(cpublish(v.id, NODE, c, false, dev2), 0);
	CHECK_STR(dev1, dev2);
	CHECK_INT(stage(v.id, staging, c), 0);
	CHECK_INT(npublish(v.id, staging, target, c, false), 0);
	stop_plugin(SIGKILL);
	start_plugin(NULL);
	CHECK_INT(npublish(v.id, staging, target, c, false), 0);
	CHECK_INT(nunpublish(v.id, target), 0);
	CHECK_INT(unstage(v.id, staging), 0);
	CHECK_INT(cunpublish(v.id, NODE), 0);
	CHECK_INT(del(v.id), 0);
	CHECK_INT(del(src.id), 0);
	rmdir(staging);
	check_clean();
}

/*
 * A damaged filesystem is refused at stage (and the loop device set up for it is released);
 * a formatting mark left by an interrupted mkfs makes the next stage format again.
 */
static void test_damaged_and_interrupted_format(void)
{
	Csi__V1__VolumeCapability *c = cap(false, SNW, "ext4");
	char staging[400], img[500], mark[500];
	path_in(staging, sizeof(staging), "dstaging");
	mkdir(staging, 0750);
	struct vol v;
	CHECK_INT(create("damaged", 64 * MiB, c, &v), 0);
	CHECK_INT(cpublish(v.id, NODE, c, false, NULL), 0);
	CHECK_INT(stage(v.id, staging, c), 0);
	CHECK_INT(unstage(v.id, staging), 0);
	/* zero the group descriptors: blkid still sees ext4, e2fsck -p gives up */
	snprintf(img, sizeof(img), "%s/volumes/%s.img", pool, v.id);
	int fd = open(img, O_WRONLY);
	char zero[1024] = { 0 };
	CHECK(fd >= 0 && pwrite(fd, zero, sizeof(zero), 2048) == (ssize_t)sizeof(zero));
	if (fd >= 0)
		close(fd);
	expect(stage(v.id, staging, c), 9, "damaged");
	CHECK(strstr(st.message, v.id) != NULL);
	check_system(); /* the failed stage released its loop device */
	/* as if mkfs had been killed: the mark makes stage format again */
	snprintf(mark, sizeof(mark), "%s/volumes/%s.formatting", pool, v.id);
	put(mark, "");
	CHECK_INT(stage(v.id, staging, c), 0);
	CHECK(access(mark, F_OK) < 0);
	CHECK_INT(unstage(v.id, staging), 0);
	CHECK_INT(cunpublish(v.id, NODE), 0);
	CHECK_INT(del(v.id), 0);
	rmdir(staging);
	check_clean();
}

/*
 * A call that outlives its caller's deadline still finishes; the retry (ABORTED while the first
 * is running) then returns the volume the first call created.
 */
static void test_deadline_then_retry(void)
{
	Csi__V1__VolumeCapability *c = cap(false, SNW, "ext4");
	struct vol src, v;
	CHECK_INT(create("late-src", 256 * MiB, c, &src), 0);
	fill_image(src.id, 256 * MiB);
	Csi__V1__CreateVolumeResponse *resp = NULL;
	int rc = csi_create_volume(conn, clone_req("late-clone", src.id, c), &resp,
				   NSEC_PER_MSEC, &st);
	csi_msg_free(resp);
	CHECK(rc == 4 || rc == 0); /* DEADLINE_EXCEEDED (or a very fast disk) */
	int64_t until = mono_now_ns() + 60 * NSEC_PER_SEC;
	do {
		rc = create_r(clone_req("late-clone", src.id, c), &v);
		if (rc == 10)
			sleep_ns(20 * NSEC_PER_MSEC);
	} while (rc == 10 && mono_now_ns() < until);
	CHECK_INT(rc, 0);
	CHECK_INT(v.size, 256 * MiB);
	CHECK_INT(del(v.id), 0);
	CHECK_INT(del(src.id), 0);
	check_clean();
}

/* --mode controller answers no node calls; --mode node creates nothing. */
static void test_modes(void)
{
	stop_plugin(SIGTERM);
	start_plugin("--mode=node");
	Csi__V1__GetPluginCapabilitiesRequest r = CSI__V1__GET_PLUGIN_CAPABILITIES_REQUEST__INIT;
	Csi__V1__GetPluginCapabilitiesResponse *resp = NULL;
	CHECK_INT(csi_get_plugin_capabilities(conn, &r, &resp, T, &st), 0);
	for (size_t i = 0; resp && i < resp->n_capabilities; i++)
		if (resp->capabilities[i]->type_case == CSI__V1__PLUGIN_CAPABILITY__TYPE_SERVICE)
			CHECK(resp->capabilities[i]->service->type !=
			      CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__CONTROLLER_SERVICE);
	csi_msg_free(resp);
	expect(create("mode-node", MiB, cap(false, SNW, "ext4"), NULL), 12, NULL);
	stop_plugin(SIGTERM);
	start_plugin("--mode=controller");
	char staging[400];
	path_in(staging, sizeof(staging), "mstaging");
	expect(stage("lv-x", staging, cap(false, SNW, "ext4")), 12, NULL);
	stop_plugin(SIGTERM);
	start_plugin(NULL);
}

/* ---- ControllerModifyVolume and group snapshots ---- */

/* Bytes allocated to a volume's image. */
static int64_t allocated(const char *id)
{
	char img[500];
	snprintf(img, sizeof(img), "%s/volumes/%s.img", pool, id);
	struct stat sb;
	return stat(img, &sb) == 0 ? (int64_t)sb.st_blocks * 512 : -1;
}

/* The type a volume's metadata records: 1 thick, 0 thin, -1 unreadable. */
static int recorded_thick(const char *id)
{
	char meta[500];
	snprintf(meta, sizeof(meta), "%s/volumes/%s.json", pool, id);
	json_t *j = json_load_file(meta, 0, NULL);
	int t = j ? json_is_true(json_object_get(j, "thick")) : -1;
	json_decref(j);
	return t;
}

/* "k=v" (or NULL: no parameters) as a ControllerModifyVolume call on id. */
static int modify(const char *id, const char *kv)
{
	Csi__V1__ControllerModifyVolumeRequest *r =
		csi_msg_new(A, &csi__v1__controller_modify_volume_request__descriptor);
	r->volume_id = csi_arena_strdup(A, id);
	if (kv) {
		char k[64];
		const char *eq = strchr(kv, '=');
		snprintf(k, sizeof(k), "%.*s", (int)(eq - kv), kv);
		csi_map_add(A, &r->base, "mutable_parameters", k, eq + 1);
	}
	Csi__V1__ControllerModifyVolumeResponse *resp = NULL;
	int rc = csi_controller_modify_volume(conn, r, &resp, T, &st);
	csi_msg_free(resp);
	return rc;
}

static void test_modify_volume(void)
{
	struct vol v;
	CHECK_INT(create("mod1", 64 * MiB, cap(false, SNW, "ext4"), &v), 0);
	CHECK(allocated(v.id) < 64 * MiB);
	static const struct {
		const char *what, *id, *kv;
		int code;
		const char *needle;
		bool thick_after;
	} cases[] = {
		{ "no volume ID", "", "type=thick", 3, "volume_id", false },
		{ "no mutable parameters changes nothing", NULL, NULL, 0, NULL, false },
		{ "no mutable parameters on a volume that does not exist",
		  "lv-0000000000000000", NULL, 5, NULL, false },
		{ "an unknown key", NULL, "iops=100", 3, "iops", false },
		{ "an unknown type", NULL, "type=fat", 3, "fat", false },
		{ "a volume that does not exist", "lv-0000000000000000", "type=thick", 5, NULL,
		  false },
		{ "thin to thick allocates the image", NULL, "type=thick", 0, NULL, true },
		{ "thick again changes nothing", NULL, "type=thick", 0, NULL, true },
		{ "no mutable parameters keeps a thick volume thick", NULL, NULL, 0, NULL, true },
		{ "thick to thin keeps the blocks", NULL, "type=thin", 0, NULL, true },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		fprintf(stderr, "  modify: %s\n", cases[i].what);
		expect(modify(cases[i].id ? cases[i].id : v.id, cases[i].kv), cases[i].code,
		       cases[i].needle);
		CHECK_INT(allocated(v.id) >= 64 * MiB, cases[i].thick_after);
		if (i + 1 < sizeof(cases) / sizeof(cases[0]))
			CHECK_INT(recorded_thick(v.id), cases[i].thick_after);
	}
	CHECK_INT(recorded_thick(v.id), 0); /* the last case: thick -> thin, recorded */
	/* CreateVolume takes the same mutable parameters, which win over parameters */
	Csi__V1__CreateVolumeRequest *r = create_req("mod2", 32 * MiB, cap(false, SNW, "ext4"));
	csi_map_add(A, &r->base, "parameters", "type", "thin");
	csi_map_add(A, &r->base, "mutable_parameters", "type", "thick");
	struct vol v2;
	CHECK_INT(create_r(r, &v2), 0);
	CHECK(allocated(v2.id) >= 32 * MiB);
	r = create_req("mod3", 32 * MiB, cap(false, SNW, "ext4"));
	csi_map_add(A, &r->base, "mutable_parameters", "color", "blue");
	expect(create_r(r, NULL), 3, "color");
	CHECK_INT(del(v.id), 0);
	CHECK_INT(del(v2.id), 0);
	expect(modify(v.id, "type=thick"), 5, NULL);
}

struct group {
	char id[128];
	char snaps[4][128];
	char srcs[4][128];
	size_t n;
};

static int group_create(const char *name, const char *const *vols, size_t n, const char *param,
			struct group *g)
{
	Csi__V1__CreateVolumeGroupSnapshotRequest *r =
		csi_msg_new(A, &csi__v1__create_volume_group_snapshot_request__descriptor);
	r->name = csi_arena_strdup(A, name);
	for (size_t i = 0; i < n; i++)
		csi_repeated_add(A, &r->base, "source_volume_ids", csi_arena_strdup(A, vols[i]));
	if (param)
		csi_map_add(A, &r->base, "parameters", param, "x");
	Csi__V1__CreateVolumeGroupSnapshotResponse *resp = NULL;
	int rc = csi_create_volume_group_snapshot(conn, r, &resp, T, &st);
	if (rc == 0 && g) {
		Csi__V1__VolumeGroupSnapshot *gs = resp->group_snapshot;
		CHECK(gs->ready_to_use && gs->creation_time && gs->creation_time->seconds > 0);
		snprintf(g->id, sizeof(g->id), "%s", gs->group_snapshot_id);
		g->n = gs->n_snapshots < 4 ? gs->n_snapshots : 4;
		for (size_t i = 0; i < g->n; i++) {
			CHECK_STR(gs->snapshots[i]->group_snapshot_id, g->id);
			CHECK(gs->snapshots[i]->ready_to_use);
			snprintf(g->snaps[i], 128, "%s", gs->snapshots[i]->snapshot_id);
			snprintf(g->srcs[i], 128, "%s", gs->snapshots[i]->source_volume_id);
		}
	}
	csi_msg_free(resp);
	return rc;
}

/* Get (get true) or Delete of group id, naming snapshot IDs snaps[0..n). */
static int group_call(bool get, const char *id, char (*snaps)[128], size_t n, size_t *members)
{
	ProtobufCMessage *r = csi_msg_new(
		A, get ? &csi__v1__get_volume_group_snapshot_request__descriptor
		       : &csi__v1__delete_volume_group_snapshot_request__descriptor);
	Csi__V1__GetVolumeGroupSnapshotRequest *g = (void *)r;
	Csi__V1__DeleteVolumeGroupSnapshotRequest *dl = (void *)r;
	if (get)
		g->group_snapshot_id = csi_arena_strdup(A, id);
	else
		dl->group_snapshot_id = csi_arena_strdup(A, id);
	for (size_t i = 0; i < n; i++)
		csi_repeated_add(A, r, "snapshot_ids", snaps[i]);
	int rc;
	if (get) {
		Csi__V1__GetVolumeGroupSnapshotResponse *resp = NULL;
		rc = csi_get_volume_group_snapshot(conn, g, &resp, T, &st);
		if (rc == 0 && members)
			*members = resp->group_snapshot->n_snapshots;
		csi_msg_free(resp);
	} else {
		Csi__V1__DeleteVolumeGroupSnapshotResponse *resp = NULL;
		rc = csi_delete_volume_group_snapshot(conn, dl, &resp, T, &st);
		csi_msg_free(resp);
	}
	return rc;
}

/* The group_snapshot_id ListSnapshots shows for snapshot id, or "-" when it lists none. */
static const char *listed_group(const char *id)
{
	Csi__V1__ListSnapshotsRequest r = CSI__V1__LIST_SNAPSHOTS_REQUEST__INIT;
	r.snapshot_id = (char *)id;
	Csi__V1__ListSnapshotsResponse *resp = NULL;
	static char out[128];
	snprintf(out, sizeof(out), "-");
	if (csi_list_snapshots(conn, &r, &resp, T, &st) == 0 && resp->n_entries == 1)
		snprintf(out, sizeof(out), "%s", resp->entries[0]->snapshot->group_snapshot_id);
	csi_msg_free(resp);
	return out;
}

static void test_group_snapshots(void)
{
	Csi__V1__GroupControllerGetCapabilitiesRequest cr =
		CSI__V1__GROUP_CONTROLLER_GET_CAPABILITIES_REQUEST__INIT;
	Csi__V1__GroupControllerGetCapabilitiesResponse *cresp = NULL;
	CHECK_INT(csi_group_controller_get_capabilities(conn, &cr, &cresp, T, &st), 0);
	CHECK(cresp && cresp->n_capabilities == 1 && cresp->capabilities[0]->rpc &&
	      cresp->capabilities[0]->rpc->type ==
		      CSI__V1__GROUP_CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT);
	csi_msg_free(cresp);

	struct vol a, b;
	CHECK_INT(create("gva", 16 * MiB, cap(false, SNW, "ext4"), &a), 0);
	CHECK_INT(create("gvb", 16 * MiB, cap(false, SNW, "ext4"), &b), 0);
	fill_image(a.id, MiB);
	const char *ab[] = { a.id, b.id }, *ba[] = { b.id, a.id }, *aa[] = { a.id, a.id };
	const char *amissing[] = { a.id, "lv-0000000000000000" }, *only_a[] = { a.id };
	/* the sources of case i are vols[i] (nvols[i] of them) */
	static const struct {
		const char *what, *name;
		const char *param;
		int code;
		const char *needle;
	} cases[] = {
		{ "no name", "", NULL, 3, "name" },
		{ "no volumes", "grp", NULL, 3, "source_volume_ids" },
		{ "a volume twice", "grp", NULL, 3, "twice" },
		{ "a volume that does not exist", "grp", NULL, 5, "lv-0000000000000000" },
		{ "an unknown parameter", "grp", "color", 3, "color" },
		{ "two volumes", "grp", NULL, 0, NULL },
		{ "the same again, in another order", "grp", NULL, 0, NULL },
		{ "the same name over other volumes", "grp", NULL, 6, "other volumes" },
	};
	const char *const *vols[] = { ab, NULL, aa, amissing, ab, ab, ba, only_a };
	size_t nvols[] = { 1, 0, 2, 2, 2, 2, 2, 1 };
	struct group g = { 0 }, again = { 0 };
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		fprintf(stderr, "  group create: %s\n", cases[i].what);
		expect(group_create(cases[i].name, vols[i], nvols[i], cases[i].param,
				    g.n ? &again : &g),
		       cases[i].code, cases[i].needle);
	}
	CHECK_INT(g.n, 2);
	CHECK_STR(again.id, g.id);
	for (size_t i = 0; i < g.n; i++) {
		CHECK(strcmp(g.srcs[i], a.id) == 0 || strcmp(g.srcs[i], b.id) == 0);
		CHECK(strcmp(again.snaps[0], g.snaps[i]) == 0 ||
		      strcmp(again.snaps[1], g.snaps[i]) == 0);
		CHECK_STR(listed_group(g.snaps[i]), g.id);
	}
	CHECK(strcmp(g.srcs[0], g.srcs[1]) != 0);

	/* members: restorable, not deletable alone */
	expect(del_snapshot(g.snaps[0]), 9, g.id);
	Csi__V1__CreateVolumeRequest *r = create_req("from-member", 0, cap(false, SNW, "ext4"));
	r->volume_content_source = csi_msg_new(A, &csi__v1__volume_content_source__descriptor);
	r->volume_content_source->type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT;
	r->volume_content_source->snapshot =
		csi_msg_new(A, &csi__v1__volume_content_source__snapshot_source__descriptor);
	r->volume_content_source->snapshot->snapshot_id = g.snaps[0];
	struct vol restored;
	CHECK_INT(create_r(r, &restored), 0);
	CHECK_INT(restored.size, 16 * MiB);
	CHECK_INT(del(restored.id), 0);

	size_t members = 0;
	char wrong[1][128] = { "ls-0000000000000000" };
	expect(group_call(true, "", NULL, 0, NULL), 3, "group_snapshot_id");
	expect(group_call(true, "lg-0000000000000000", NULL, 0, NULL), 5, NULL);
	expect(group_call(true, g.id, wrong, 1, NULL), 9, "snapshot_ids");
	expect(group_call(true, g.id, g.snaps, 2, &members), 0, NULL);
	CHECK_INT(members, 2);
	expect(group_call(false, "", NULL, 0, NULL), 3, "group_snapshot_id");
	expect(group_call(false, g.id, wrong, 1, NULL), 9, "snapshot_ids");
	expect(group_call(false, g.id, g.snaps, 2, NULL), 0, NULL);
	expect(group_call(false, g.id, g.snaps, 2, NULL), 0, NULL); /* deleted is deleted */
	expect(group_call(true, g.id, NULL, 0, NULL), 5, NULL);
	for (size_t i = 0; i < g.n; i++) {
		CHECK_STR(listed_group(g.snaps[i]), "-");
		char img[500];
		snprintf(img, sizeof(img), "%s/snapshots/%s.img", pool, g.snaps[i]);
		CHECK(access(img, F_OK) < 0);
	}
	char meta[500];
	snprintf(meta, sizeof(meta), "%s/groups/%s.json", pool, g.id);
	CHECK(access(meta, F_OK) < 0);
	CHECK_INT(del(a.id), 0);
	CHECK_INT(del(b.id), 0);
	check_clean();
}

static void cleanup(void)
{
	if (plugin > 0)
		stop_plugin(SIGKILL);
	/* unmount and detach whatever a failed test left below our folder */
	FILE *fp = fopen("/proc/self/mountinfo", "r");
	char line[4096];
	while (fp && fgets(line, sizeof(line), fp)) {
		char mp[2048];
		if (sscanf(line, "%*s %*s %*s %*s %2047s", mp) == 1 && strstr(mp, dir)) {
			const char *argv[] = { "umount", "-l", mp, NULL };
			run(argv, NULL);
		}
	}
	if (fp)
		fclose(fp);
	struct strbuf out = STRBUF_INIT;
	const char *ls[] = { "losetup", "-a", NULL };
	run(ls, &out);
	for (char *l = strtok(out.buf, "\n"); l; l = strtok(NULL, "\n")) {
		if (!strstr(l, dir))
			continue;
		char *colon = strchr(l, ':');
		if (colon) {
			*colon = '\0';
			const char *argv[] = { "losetup", "-d", l, NULL };
			run(argv, NULL);
		}
	}
	strbuf_release(&out);
	const char *rm[] = { "rm", "-rf", dir, NULL };
	run(rm, NULL);
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/kcsi-lp-csi-XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(sock, sizeof(sock), "%s/csi.sock", dir);
	snprintf(endpoint, sizeof(endpoint), "unix://%s", sock);
	snprintf(pool, sizeof(pool), "%s/pool", dir);
	atexit(cleanup);
	A = csi_arena_new();
	start_plugin(NULL);
	RUN(test_parse_size);
	RUN(test_identity);
	RUN(test_lifecycle_ext4);
	RUN(test_lifecycle_xfs);
	RUN(test_filesystem_minimum);
	RUN(test_lifecycle_block);
	RUN(test_errors);
	RUN(test_list_and_capacity);
	RUN(test_hostile_requests);
	RUN(test_node_calls_touch_only_their_own);
	RUN(test_sanity_calls);
	RUN(test_modify_volume);
	RUN(test_group_snapshots);
	RUN(test_attach_limit_and_device_names);
	RUN(test_concurrent_aborted);
	RUN(test_kill9_recovery);
	RUN(test_damaged_and_interrupted_format);
	RUN(test_deadline_then_retry);
	RUN(test_modes);
	stop_plugin(SIGTERM);
	csi_arena_free(A);
	return CHECK_DONE();
}
