/*
 * snapshot_bench: how fast snapshot-controller and csi-snapshotter turn VolumeSnapshots into
 * ready snapshots of the in-memory csi-testdriver, and what it costs.
 *
 * It runs kube-emulator, csi-testdriver and both components (unthrottled: --kube-api-qps 1000)
 * as separate processes, creates one bound claim and a class, then -n VolumeSnapshots at once
 * from 16 threads, and waits (polling a LIST) until all are readyToUse. It prints the time, API
 * writes per snapshot (from the global resourceVersion, minus the bench's own creations; events
 * included), idle and peak RSS of both components, and the CPU seconds of each process. The last
 * line is machine-readable. It never fails on a figure.
 */
#include "bench_util.h"
#include "base/flags.h"
#include "base/log.h"
#include "base/log_flags.h"
#include "base/timeutil.h"
#include "kube/client.h"
#include "kube/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LOADERS 16

static struct kube_client *kc;

static void make_vs(int i)
{
	char name[64];
	snprintf(name, sizeof(name), "snap-%06d", i);
	bench_create_or_die(kc, &KUBE_RES_VOLUMESNAPSHOTS, "default",
			    json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:s,s:{s:s}}}", "apiVersion",
				      "snapshot.storage.k8s.io/v1", "kind", "VolumeSnapshot",
				      "metadata", "name", name, "namespace", "default", "spec",
				      "volumeSnapshotClassName", "bench", "source",
				      "persistentVolumeClaimName", "src"));
}

static long long current_rv(void)
{
	struct kube_list_opts lo = { .limit = 1 };
	struct kube_err e;
	json_t *l = kube_list(kc, &KUBE_RES_STORAGECLASSES, NULL, &lo, &e);
	if (!l)
		bench_die("list: %s", e.message);
	const char *rv = json_string_value(json_object_get(json_object_get(l, "metadata"), "resourceVersion"));
	long long v = rv ? atoll(rv) : 0;
	json_decref(l);
	return v;
}

static int ready_count(void)
{
	struct kube_err e;
	json_t *l = kube_list(kc, &KUBE_RES_VOLUMESNAPSHOTS, "default", NULL, &e), *it;
	size_t i;
	int n = 0;
	if (!l)
		bench_die("list snapshots: %s", e.message);
	json_array_foreach(json_object_get(l, "items"), i, it)
		n += json_is_true(json_object_get(json_object_get(it, "status"), "readyToUse"));
	json_decref(l);
	return n;
}

static void setup_objects(void)
{
	struct kube_err e;
	json_t *pvc = json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:[s],s:s,s:{s:{s:s}}}}", "apiVersion", "v1",
				"kind", "PersistentVolumeClaim", "metadata", "name", "src", "namespace",
				"default", "spec", "accessModes", "ReadWriteOnce", "volumeName", "pv-src",
				"resources", "requests", "storage", "1Mi");
	json_t *made = kube_create(kc, &KUBE_RES_PERSISTENTVOLUMECLAIMS, "default", pvc, &e);
	json_decref(pvc);
	if (!made)
		bench_die("create claim: %s", e.message);
	const char *uid = json_string_value(json_object_get(json_object_get(made, "metadata"), "uid"));
	bench_create_or_die(kc, &KUBE_RES_PERSISTENTVOLUMES, NULL,
			    json_pack("{s:s,s:s,s:{s:s},s:{s:{s:s},s:[s],s:{s:s,s:s},s:{s:s,s:s,s:s}}}",
				      "apiVersion", "v1", "kind", "PersistentVolume", "metadata", "name",
				      "pv-src", "spec", "capacity", "storage", "1Mi", "accessModes",
				      "ReadWriteOnce", "csi", "driver", "testdriver.kcsi.dev",
				      "volumeHandle", "vol-src", "claimRef", "namespace", "default",
				      "name", "src", "uid", uid));
	json_decref(made);
	const char *st = "{\"status\":{\"phase\":\"Bound\"}}";
	if (kube_patch_discard(kc, &KUBE_RES_PERSISTENTVOLUMECLAIMS, "default", "src", true,
			       KUBE_PATCH_MERGE, st, &e) ||
	    kube_patch_discard(kc, &KUBE_RES_PERSISTENTVOLUMES, NULL, "pv-src", true,
			       KUBE_PATCH_MERGE, st, &e))
		bench_die("bind: %s", e.message);
	bench_create_or_die(kc, &KUBE_RES_VOLUMESNAPSHOTCLASSES, NULL,
			    json_pack("{s:s,s:s,s:{s:s},s:s,s:s}", "apiVersion",
				      "snapshot.storage.k8s.io/v1", "kind", "VolumeSnapshotClass",
				      "metadata", "name", "bench", "driver", "testdriver.kcsi.dev",
				      "deletionPolicy", "Delete"));
}

int main(int argc, char **argv)
{
	const char *bin, *tests;
	int n;
	char tmp[] = "/tmp/kcsi-snapbench.XXXXXX", path[512], kcpath[512], sock[600], err[512];
	struct flagset *fs = flags_new("snapshot_bench", "snapshot_bench [flags]");

	flags_string(fs, "bin", &bin, "build/bin", "folder of the kcsi binaries");
	flags_string(fs, "tests", &tests, "build/tests", "folder of csi-testdriver");
	flags_int(fs, "n", &n, 1000, "snapshots to create");
	log_parse_command_line(fs, argc, argv);
	if (!mkdtemp(tmp))
		bench_die("mkdtemp: %m");
	snprintf(kcpath, sizeof(kcpath), "%s/kubeconfig", tmp);
	snprintf(sock, sizeof(sock), "unix://%s/td.sock", tmp);

	snprintf(path, sizeof(path), "%s/kube-emulator", bin);
	char log[600];
	snprintf(log, sizeof(log), "%s/emulator.log", tmp);
	pid_t emu = bench_spawn((char *[]){ path, "--listen", "127.0.0.1:0", "--write-kubeconfig",
					    kcpath, NULL }, log);
	if (!bench_wait_file(kcpath, false, 10 * NSEC_PER_SEC))
		bench_die("kube-emulator did not start");
	char tdpath[512], tdlog[600];
	snprintf(tdpath, sizeof(tdpath), "%s/csi-testdriver", tests);
	snprintf(tdlog, sizeof(tdlog), "%s/td.log", tmp);
	pid_t td = bench_spawn((char *[]){ tdpath, "--endpoint", sock, NULL }, tdlog);
	if (!bench_wait_file(sock + 7, true, 10 * NSEC_PER_SEC))
		bench_die("csi-testdriver did not start");

	struct kube_config *cfg = kube_config_load(kcpath, NULL, NULL, err, sizeof(err));
	struct kube_client_opts ko = { .component = "snapshot_bench", .qps = 10000, .burst = 10000 };
	if (!cfg || !(kc = kube_client_new(cfg, &ko, err, sizeof(err))))
		bench_die("client: %s", err);
	setup_objects();

	char sc[512], sn[512], sclog[600], snlog[600];
	snprintf(sc, sizeof(sc), "%s/snapshot-controller", bin);
	snprintf(sn, sizeof(sn), "%s/csi-snapshotter", bin);
	snprintf(sclog, sizeof(sclog), "%s/sctrl.log", tmp);
	snprintf(snlog, sizeof(snlog), "%s/snapper.log", tmp);
	pid_t ctrl = bench_spawn((char *[]){ sc, "--kubeconfig", kcpath, "--kube-api-qps", "1000",
					     "--kube-api-burst", "2000", NULL }, sclog);
	pid_t side = bench_spawn((char *[]){ sn, "--kubeconfig", kcpath, "--csi-address", sock,
					     "--kube-api-qps", "1000", "--kube-api-burst", "2000",
					     NULL }, snlog);
	sleep_ns(2 * NSEC_PER_SEC);
	long idle_ctrl = bench_status_kb(ctrl, "VmRSS"), idle_side = bench_status_kb(side, "VmRSS");

	struct bench_cpu cpu = { 0 };
	bench_cpu_add(&cpu, "snapshot-controller", ctrl);
	bench_cpu_add(&cpu, "csi-snapshotter", side);
	bench_cpu_add(&cpu, "kube-emulator", emu);
	bench_cpu_add(&cpu, "csi-testdriver", td);
	struct bench_mem mc, ms;
	bench_mem_start(&mc, ctrl);
	bench_mem_start(&ms, side);
	long long rv0 = current_rv();
	int64_t t0 = mono_now_ns();
	bench_cpu_start(&cpu);
	bench_parallel(n, make_vs, LOADERS);
	int ready = 0;
	while ((ready = ready_count()) < n && mono_now_ns() - t0 < 600 * NSEC_PER_SEC)
		sleep_ns(100 * NSEC_PER_MSEC);
	double secs = (double)(mono_now_ns() - t0) / NSEC_PER_SEC;
	bench_cpu_stop(&cpu);
	bench_mem_stop(&mc);
	bench_mem_stop(&ms);
	long long writes = current_rv() - rv0 - n;

	printf("%d of %d snapshots ready in %.2f s (%.0f/s)\n", ready, n, secs, ready / secs);
	printf("API writes per snapshot: %.1f (events included)\n", (double)writes / n);
	printf("snapshot-controller RSS: idle %ld kB, peak %ld kB\n", idle_ctrl, mc.peak_rss_kb);
	printf("csi-snapshotter RSS: idle %ld kB, peak %ld kB\n", idle_side, ms.peak_rss_kb);
	bench_cpu_print(&cpu, "the snapshots");
	char kv[1024];
	static const char *const keys[] = { "sctrl", "snapper", "emulator", "driver" };
	bench_cpu_kv(&cpu, keys, kv, sizeof(kv));
	printf("n=%d ready=%d secs=%.2f writes_per_snapshot=%.1f sctrl_idle_kb=%ld sctrl_peak_kb=%ld "
	       "snapper_idle_kb=%ld snapper_peak_kb=%ld%s\n", n, ready, secs, (double)writes / n,
	       idle_ctrl, mc.peak_rss_kb, idle_side, ms.peak_rss_kb, kv);

	bench_stop(side);
	bench_stop(ctrl);
	bench_stop(td);
	bench_stop(emu);
	kube_client_free(kc);
	kube_config_free(cfg);
	char rm[600];
	snprintf(rm, sizeof(rm), "rm -rf %s", tmp);
	if (system(rm) != 0)
		fprintf(stderr, "could not remove %s\n", tmp);
	flags_free(fs);
	return 0;
}
