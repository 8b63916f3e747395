/*
 * csi_bench: unary CSI round trips over a unix socket through the real stack (gRPC C core,
 * protobuf-c, src/csi client and server), and the kcsi CLI's start-to-exit time.
 *
 *   csi_bench [calls-per-run (default 4000)]
 *
 * Prints calls/s and p50/p99 latency for Probe and ControllerPublishVolume with 1 and 16 client
 * threads sharing one connection, then the median wall time of `kcsi identity info` (process
 * start to exit, including connect). The server runs in this process with 8 worker threads;
 * client, server and CLI share the machine's cores, so figures are for comparison between
 * builds on the same host, never pass/fail.
 */
#include <limits.h>
#include <stdbool.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/timeutil.h"
#include "csi/client.h"
#include "csi/server.h"

extern char **environ;

static int h_probe(struct csi_call_ctx *ctx, const ProtobufCMessage *rq, ProtobufCMessage *rs,
		   void *arg)
{
	(void)rq, (void)arg;
	Csi__V1__ProbeResponse *r = (void *)rs;
	r->ready = csi_msg_new(csi_ctx_arena(ctx), &google__protobuf__bool_value__descriptor);
	r->ready->value = 1;
	return 0;
}

static int h_info(struct csi_call_ctx *ctx, const ProtobufCMessage *rq, ProtobufCMessage *rs,
		  void *arg)
{
	(void)rq, (void)arg, (void)ctx;
	Csi__V1__GetPluginInfoResponse *r = (void *)rs;
	r->name = "bench.kcsi.dev";
	r->vendor_version = "v1";
	return 0;
}

static int h_publish(struct csi_call_ctx *ctx, const ProtobufCMessage *rq, ProtobufCMessage *rs,
		     void *arg)
{
	(void)arg;
	const Csi__V1__ControllerPublishVolumeRequest *q = (const void *)rq;
	struct csi_arena *a = csi_ctx_arena(ctx);
	csi_map_add(a, rs, "publish_context", "devicePath",
		    csi_arena_printf(a, "/dev/disk/by-id/%s", q->volume_id));
	return 0;
}

struct run {
	struct csi_conn *conn;
	int publish;
	int calls;
	int64_t *lat;
	int failures;
};

static void *worker(void *arg)
{
	struct run *r = arg;
	struct csi_arena *a = csi_arena_new();
	Csi__V1__ControllerPublishVolumeRequest *pub =
		csi_msg_new(a, &csi__v1__controller_publish_volume_request__descriptor);
	pub->volume_id = "pvc-0b6e2a34-5d7f-4c3e-9a51-2f2f1a0c9d11";
	pub->node_id = "node-0017.example.internal";
	pub->volume_capability = csi_msg_new(a, &csi__v1__volume_capability__descriptor);
	pub->volume_capability->access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
	pub->volume_capability->mount =
		csi_msg_new(a, &csi__v1__volume_capability__mount_volume__descriptor);
	pub->volume_capability->mount->fs_type = "ext4";
	pub->volume_capability->access_mode =
		csi_msg_new(a, &csi__v1__volume_capability__access_mode__descriptor);
	pub->volume_capability->access_mode->mode = 1;
	csi_map_add(a, &pub->base, "volume_context", "storage.kubernetes.io/csiProvisionerIdentity",
		    "1700000000000-8081-bench.kcsi.dev");
	csi_map_add(a, &pub->base, "secrets", "token", "bench");
	Csi__V1__ProbeRequest probe = CSI__V1__PROBE_REQUEST__INIT;
	for (int i = 0; i < r->calls; i++) {
		struct csi_status st;
		int64_t t0 = mono_now_ns();
		int rc;
		if (r->publish) {
			Csi__V1__ControllerPublishVolumeResponse *resp;
			rc = csi_controller_publish_volume(r->conn, pub, &resp, 10 * NSEC_PER_SEC, &st);
			csi_msg_free(resp);
		} else {
			Csi__V1__ProbeResponse *resp;
			rc = csi_probe(r->conn, &probe, &resp, 10 * NSEC_PER_SEC, &st);
			csi_msg_free(resp);
		}
		r->lat[i] = mono_now_ns() - t0;
		if (rc)
			r->failures++;
	}
	csi_arena_free(a);
	return NULL;
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static void bench(struct csi_conn *c, int publish, int threads, int total, bool print)
{
	int per = total / threads;
	struct run *runs = calloc((size_t)threads, sizeof(*runs));
	pthread_t *t = calloc((size_t)threads, sizeof(*t));
	int64_t *all = calloc((size_t)(per * threads), sizeof(int64_t));
	int64_t t0 = mono_now_ns();
	for (int i = 0; i < threads; i++) {
		runs[i] = (struct run){ c, publish, per, all + i * per, 0 };
		pthread_create(&t[i], NULL, worker, &runs[i]);
	}
	int failures = 0;
	for (int i = 0; i < threads; i++) {
		pthread_join(t[i], NULL);
		failures += runs[i].failures;
	}
	int64_t wall = mono_now_ns() - t0;
	int n = per * threads;
	qsort(all, (size_t)n, sizeof(int64_t), cmp64);
	if (print)
		printf("%-24s threads=%-2d calls=%-6d %8.0f calls/s   p50 %7.1f us   p99 %7.1f us%s\n",
	       publish ? "ControllerPublishVolume" : "Probe", threads, n,
	       (double)n / ((double)wall / 1e9), (double)all[n / 2] / 1e3,
	       (double)all[(n * 99) / 100] / 1e3, failures ? "   (FAILURES)" : "");
	free(runs);
	free(t);
	free(all);
}

static void bench_cli(const char *endpoint)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 32);
	if (n <= 0)
		return;
	exe[n] = '\0';
	*strrchr(exe, '/') = '\0';
	char kcsi[PATH_MAX + 16];
	snprintf(kcsi, sizeof(kcsi), "%s/../bin/kcsi", exe);
	if (access(kcsi, X_OK) != 0) {
		printf("kcsi identity info: %s not built, skipped\n", kcsi);
		return;
	}
	char epflag[PATH_MAX + 16];
	snprintf(epflag, sizeof(epflag), "--endpoint=%s", endpoint);
	char *argv[] = { kcsi, epflag, "identity", "info", NULL };
	enum { RUNS = 21 };
	int64_t t[RUNS];
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", 1, 0);
	for (int i = 0; i < RUNS; i++) {
		int64_t t0 = mono_now_ns();
		pid_t pid;
		int status = -1;
		if (posix_spawn(&pid, kcsi, &fa, NULL, argv, environ) == 0)
			waitpid(pid, &status, 0);
		t[i] = mono_now_ns() - t0;
		if (status != 0)
			printf("kcsi exited with status %d\n", status);
	}
	posix_spawn_file_actions_destroy(&fa);
	qsort(t, RUNS, sizeof(int64_t), cmp64);
	printf("kcsi identity info (start to exit): median %.1f ms, min %.1f ms, max %.1f ms "
	       "over %d runs\n", (double)t[RUNS / 2] / 1e6, (double)t[0] / 1e6,
	       (double)t[RUNS - 1] / 1e6, RUNS);
}

int main(int argc, char **argv)
{
	int total = argc > 1 ? atoi(argv[1]) : 4000;
	if (total < 16)
		total = 16;
	char dir[] = "/tmp/csi_bench.XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	char endpoint[128], err[256];
	snprintf(endpoint, sizeof(endpoint), "unix://%s/csi.sock", dir);
	struct csi_server_opts o = CSI_SERVER_OPTS_INIT;
	o.threads = 8;
	struct csi_server *s = csi_server_new(&o);
	csi_server_handle(s, CSI_METHOD(Identity, Probe), h_probe, NULL);
	csi_server_handle(s, CSI_METHOD(Identity, GetPluginInfo), h_info, NULL);
	csi_server_handle(s, CSI_METHOD(Controller, ControllerPublishVolume), h_publish, NULL);
	if (csi_server_start(s, endpoint, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	struct csi_conn *c = csi_connect(endpoint, NULL, err, sizeof(err));
	if (!c) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	bench(c, 0, 1, total / 4, false); /* warm-up */
	printf("csi_bench: unary calls over a unix socket, one connection, server with 8 threads, "
	       "%ld online CPUs\n", sysconf(_SC_NPROCESSORS_ONLN));
	bench(c, 0, 1, total, true);
	bench(c, 0, 16, total, true);
	bench(c, 1, 1, total, true);
	bench(c, 1, 16, total, true);
	bench_cli(endpoint);
	csi_conn_free(c);
	csi_server_free(s);
	rmdir(dir);
	return 0;
}
