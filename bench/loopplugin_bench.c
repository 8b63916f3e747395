/*
 * loopplugin_bench: volumes per second through kcsi-loopplugin, and per-call latency.
 *
 *   loopplugin_bench PLUGIN_BINARY [VOLUMES_PER_CLIENT]
 *
 * Starts the plugin on a temporary pool, then for 1 and for 8 concurrent clients brings
 * volumes up (CreateVolume, ControllerPublishVolume, NodeStageVolume with mkfs.ext4 and mount,
 * NodePublishVolume) and down again (NodeUnpublish, NodeUnstage, ControllerUnpublish,
 * DeleteVolume). Prints volumes/s for each direction and p50/p99 of every call, the plugin's
 * RSS and private memory (RssAnon) idle and at peak, and for each round the CPU seconds of the
 * plugin, of the programs it runs (mkfs.ext4, mount, ...), of the load generator and of the rest
 * of the machine. Figures only: it never fails on time. Needs root (loop devices, mounts).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"
#include "base/timeutil.h"
#include "csi/client.h"

#define T (120 * NSEC_PER_SEC)

extern char **environ;

enum { C_CREATE, C_CPUB, C_STAGE, C_NPUB, C_NUNPUB, C_UNSTAGE, C_CUNPUB, C_DELETE, NCALLS };
static const char *call_names[NCALLS] = {
	"CreateVolume", "ControllerPublishVolume", "NodeStageVolume", "NodePublishVolume",
	"NodeUnpublishVolume", "NodeUnstageVolume", "ControllerUnpublishVolume", "DeleteVolume",
};

struct samples {
	int64_t *v;
	size_t n, cap;
	pthread_mutex_t mu;
};
static struct samples lat[NCALLS];

static void record(int call, int64_t ns)
{
	struct samples *s = &lat[call];
	pthread_mutex_lock(&s->mu);
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 256;
		s->v = realloc(s->v, s->cap * sizeof(*s->v));
	}
	s->v[s->n++] = ns;
	pthread_mutex_unlock(&s->mu);
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static struct csi_conn *conn;
static pid_t plugin;
static char dir[256];
static int per_client = 20;
static volatile int failures;

static void fail(const char *what, const struct csi_status *st)
{
	fprintf(stderr, "%s failed: %d %s\n", what, st->code, st->message);
	__atomic_add_fetch(&failures, 1, __ATOMIC_SEQ_CST);
}

static Csi__V1__VolumeCapability *mount_cap(void)
{
	static Csi__V1__VolumeCapability__AccessMode mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__INIT;
	static Csi__V1__VolumeCapability__MountVolume mount = CSI__V1__VOLUME_CAPABILITY__MOUNT_VOLUME__INIT;
	static Csi__V1__VolumeCapability cap = CSI__V1__VOLUME_CAPABILITY__INIT;
	mode.mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER;
	mount.fs_type = "ext4";
	cap.access_mode = &mode;
	cap.access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
	cap.mount = &mount;
	return &cap;
}

struct vol {
	char id[64];
	char staging[320];
	char target[320];
};

#define TIMED(call, expr) \
	({ int64_t t0_ = mono_now_ns(); int rc_ = (expr); record(call, mono_now_ns() - t0_); rc_; })

static void up(const char *name, struct vol *v)
{
	struct csi_status st;
	Csi__V1__VolumeCapability *cap = mount_cap();
	Csi__V1__CapacityRange cr = CSI__V1__CAPACITY_RANGE__INIT;
	cr.required_bytes = 64LL << 20;
	Csi__V1__CreateVolumeRequest cq = CSI__V1__CREATE_VOLUME_REQUEST__INIT;
	cq.name = (char *)name;
	cq.capacity_range = &cr;
	cq.n_volume_capabilities = 1;
	cq.volume_capabilities = &cap;
	Csi__V1__CreateVolumeResponse *cresp = NULL;
	if (TIMED(C_CREATE, csi_create_volume(conn, &cq, &cresp, T, &st)))
		return fail("CreateVolume", &st);
	snprintf(v->id, sizeof(v->id), "%s", cresp->volume->volume_id);
	csi_msg_free(cresp);
	snprintf(v->staging, sizeof(v->staging), "%s/staging/%s", dir, name);
	snprintf(v->target, sizeof(v->target), "%s/pods/%s/vol", dir, name);
	mkdir(v->staging, 0750);

	Csi__V1__ControllerPublishVolumeRequest pq = CSI__V1__CONTROLLER_PUBLISH_VOLUME_REQUEST__INIT;
	pq.volume_id = v->id;
	pq.node_id = "bench-node";
	pq.volume_capability = cap;
	Csi__V1__ControllerPublishVolumeResponse *presp = NULL;
	if (TIMED(C_CPUB, csi_controller_publish_volume(conn, &pq, &presp, T, &st)))
		return fail("ControllerPublishVolume", &st);
	csi_msg_free(presp);

	Csi__V1__NodeStageVolumeRequest sq = CSI__V1__NODE_STAGE_VOLUME_REQUEST__INIT;
	sq.volume_id = v->id;
	sq.staging_target_path = v->staging;
	sq.volume_capability = cap;
	Csi__V1__NodeStageVolumeResponse *sresp = NULL;
	if (TIMED(C_STAGE, csi_node_stage_volume(conn, &sq, &sresp, T, &st)))
		return fail("NodeStageVolume", &st);
	csi_msg_free(sresp);

	Csi__V1__NodePublishVolumeRequest nq = CSI__V1__NODE_PUBLISH_VOLUME_REQUEST__INIT;
	nq.volume_id = v->id;
	nq.staging_target_path = v->staging;
	nq.target_path = v->target;
	nq.volume_capability = cap;
	Csi__V1__NodePublishVolumeResponse *nresp = NULL;
	if (TIMED(C_NPUB, csi_node_publish_volume(conn, &nq, &nresp, T, &st)))
		return fail("NodePublishVolume", &st);
	csi_msg_free(nresp);
}

static void down(struct vol *v)
{
	struct csi_status st;
	Csi__V1__NodeUnpublishVolumeRequest uq = CSI__V1__NODE_UNPUBLISH_VOLUME_REQUEST__INIT;
	uq.volume_id = v->id;
	uq.target_path = v->target;
	Csi__V1__NodeUnpublishVolumeResponse *uresp = NULL;
	if (TIMED(C_NUNPUB, csi_node_unpublish_volume(conn, &uq, &uresp, T, &st)))
		fail("NodeUnpublishVolume", &st);
	csi_msg_free(uresp);

	Csi__V1__NodeUnstageVolumeRequest sq = CSI__V1__NODE_UNSTAGE_VOLUME_REQUEST__INIT;
	sq.volume_id = v->id;
	sq.staging_target_path = v->staging;
	Csi__V1__NodeUnstageVolumeResponse *sresp = NULL;
	if (TIMED(C_UNSTAGE, csi_node_unstage_volume(conn, &sq, &sresp, T, &st)))
		fail("NodeUnstageVolume", &st);
	csi_msg_free(sresp);
	rmdir(v->staging);

	Csi__V1__ControllerUnpublishVolumeRequest cq = CSI__V1__CONTROLLER_UNPUBLISH_VOLUME_REQUEST__INIT;
	cq.volume_id = v->id;
	cq.node_id = "bench-node";
	Csi__V1__ControllerUnpublishVolumeResponse *cresp = NULL;
	if (TIMED(C_CUNPUB, csi_controller_unpublish_volume(conn, &cq, &cresp, T, &st)))
		fail("ControllerUnpublishVolume", &st);
	csi_msg_free(cresp);

	Csi__V1__DeleteVolumeRequest dq = CSI__V1__DELETE_VOLUME_REQUEST__INIT;
	dq.volume_id = v->id;
	Csi__V1__DeleteVolumeResponse *dresp = NULL;
	if (TIMED(C_DELETE, csi_delete_volume(conn, &dq, &dresp, T, &st)))
		fail("DeleteVolume", &st);
	csi_msg_free(dresp);
}

struct client {
	int idx, round;
	int dir_up;
	struct vol *vols;
	pthread_barrier_t *bar;
};

static void *client_main(void *arg)
{
	struct client *c = arg;
	for (int i = 0; i < per_client; i++) {
		char name[64];
		snprintf(name, sizeof(name), "bench-r%d-c%d-v%d", c->round, c->idx, i);
		up(name, &c->vols[i]);
	}
	pthread_barrier_wait(c->bar); /* all up, then the clock for down starts */
	pthread_barrier_wait(c->bar);
	for (int i = 0; i < per_client; i++)
		if (c->vols[i].id[0])
			down(&c->vols[i]);
	return NULL;
}

static void report_latencies(void)
{
	printf("  %-27s %7s %9s %9s\n", "call", "count", "p50 ms", "p99 ms");
	for (int k = 0; k < NCALLS; k++) {
		struct samples *s = &lat[k];
		if (!s->n)
			continue;
		qsort(s->v, s->n, sizeof(int64_t), cmp64);
		size_t p99 = (s->n * 99 + 99) / 100 - 1;
		printf("  %-27s %7zu %9.2f %9.2f\n", call_names[k], s->n,
		       s->v[s->n / 2] / 1e6, s->v[p99 < s->n ? p99 : s->n - 1] / 1e6);
		s->n = 0;
	}
}

static void round_with(int clients, int round)
{
	pthread_t th[64];
	struct client cl[64];
	pthread_barrier_t bar;
	struct bench_cpu cpu = { 0 };
	struct bench_mem mem;
	pthread_barrier_init(&bar, NULL, (unsigned)clients + 1);
	bench_cpu_add(&cpu, "kcsi-loopplugin", plugin);
	bench_cpu_add_children(&cpu, "its programs (mkfs, mount, ...)", plugin);
	bench_mem_start(&mem, plugin);
	bench_cpu_start(&cpu);
	int64_t t0 = mono_now_ns();
	for (int i = 0; i < clients; i++) {
		cl[i] = (struct client){ i, round, 1, calloc((size_t)per_client, sizeof(struct vol)),
					 &bar };
		pthread_create(&th[i], NULL, client_main, &cl[i]);
	}
	pthread_barrier_wait(&bar);
	int64_t t_up = mono_now_ns() - t0;
	int64_t t1 = mono_now_ns();
	pthread_barrier_wait(&bar);
	for (int i = 0; i < clients; i++)
		pthread_join(th[i], NULL);
	int64_t t_down = mono_now_ns() - t1;
	bench_cpu_stop(&cpu);
	bench_mem_stop(&mem);
	int n = clients * per_client;
	printf("%d client(s), %d volumes of 64 MiB (ext4):\n", clients, n);
	printf("  up   (create+publish+stage+publish):       %7.1f volumes/s  (%.2f s)\n",
	       n / (t_up / 1e9), t_up / 1e9);
	printf("  down (unpublish+unstage+unpublish+delete): %7.1f volumes/s  (%.2f s)\n",
	       n / (t_down / 1e9), t_down / 1e9);
	report_latencies();
	printf("  plugin memory: peak RSS %ld kB, peak private (RssAnon) %ld kB\n", mem.peak_rss_kb,
	       mem.peak_anon_kb);
	printf("  ");
	bench_cpu_print(&cpu, "the round");
	static const char *const keys[] = { "plugin", "programs" };
	char kv[256] = "";
	bench_cpu_kv(&cpu, keys, kv, sizeof(kv));
	printf("  RESULT clients=%d volumes=%d up_s=%.3f down_s=%.3f rss_peak_kb=%ld anon_peak_kb=%ld%s\n",
	       clients, n, t_up / 1e9, t_down / 1e9, mem.peak_rss_kb, mem.peak_anon_kb, kv);
	for (int i = 0; i < clients; i++)
		free(cl[i].vols);
	pthread_barrier_destroy(&bar);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s PLUGIN_BINARY [VOLUMES_PER_CLIENT]\n", argv[0]);
		return 2;
	}
	if (argc > 2)
		per_client = atoi(argv[2]) > 0 ? atoi(argv[2]) : per_client;
	for (int k = 0; k < NCALLS; k++)
		pthread_mutex_init(&lat[k].mu, NULL);
	snprintf(dir, sizeof(dir), "/tmp/kcsi-lp-bench-XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	char ep[400], epflag[420], pool[420], sub[300];
	snprintf(ep, sizeof(ep), "unix://%s/csi.sock", dir);
	snprintf(epflag, sizeof(epflag), "--endpoint=%s", ep);
	snprintf(pool, sizeof(pool), "--pool-dir=%s/pool", dir);
	snprintf(sub, sizeof(sub), "%s/staging", dir);
	mkdir(sub, 0750);
	const char *pargv[] = { argv[1], epflag, pool, "--nodeid=bench-node", "--threads=16",
				"-v=0", NULL };
	/* the plugin logs a line per operation; keep the figures readable */
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	pid_t pid;
	if (posix_spawn(&plugin, argv[1], &fa, NULL, (char *const *)pargv, environ)) {
		perror("spawn plugin");
		return 1;
	}
	posix_spawn_file_actions_destroy(&fa);
	pid = plugin;
	char err[256];
	struct csi_conn_opts o = CSI_CONN_OPTS_INIT;
	o.connect_timeout_ns = 30 * NSEC_PER_SEC;
	conn = csi_connect(ep, &o, err, sizeof(err));
	if (!conn) {
		fprintf(stderr, "connect: %s\n", err);
		kill(pid, SIGKILL);
		return 1;
	}
	sleep_ns(NSEC_PER_SEC); /* settle */
	printf("plugin idle (connected, no volumes): RSS %ld kB, private (RssAnon) %ld kB\n",
	       bench_status_kb(pid, "VmRSS"), bench_status_kb(pid, "RssAnon"));
	round_with(1, 1);
	round_with(8, 8);
	sleep_ns(NSEC_PER_SEC);
	printf("plugin idle after the rounds: RSS %ld kB, private (RssAnon) %ld kB\n",
	       bench_status_kb(pid, "VmRSS"), bench_status_kb(pid, "RssAnon"));
	csi_conn_free(conn);
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	printf("failures: %d\n", failures);
	return failures ? 1 : 0;
}
