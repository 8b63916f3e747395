/*
 * resizer_bench: how fast csi-resizer expands claims, and what it costs.
 *
 * It runs kube-emulator, the in-memory csi-testdriver and the resizer under test (--resizer BIN:
 * kcsi's csi-resizer by default, or any binary that takes the upstream flags, e.g. the Go
 * external-resizer) as separate processes, unthrottled (--kube-api-qps/--kube-api-burst high),
 * makes -n bound claims of 1Gi with their PVs before the resizer starts, then raises every
 * claim's request to 2Gi from 16 threads and records for each the time from its patch to the
 * claim showing NodeResizePending for 2Gi in a watch. It prints the time to all, p50/p99
 * latency, API writes per expansion (from the global resourceVersion: every successful write,
 * events included, minus the bench's own), idle and peak RSS and private memory of the resizer,
 * and the CPU seconds of the resizer, the emulator, the driver, the load generator and the rest
 * of the machine. The last line is machine-readable. It never fails on a figure.
 */
#include "bench_util.h"
#include "base/flags.h"
#include "base/log.h"
#include "base/log_flags.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/informer.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define LOADERS 16
#define GI (1024LL * 1024 * 1024)

static struct {
	const char *resizer, *bin, *tests;
	int n, workers;
} opt;

static struct kube_client *kc;
static int64_t *t_patch, *t_done;
static atomic_int n_done;

/* A bound claim "claim-NNNNNN" of 1Gi and its PV, as the provisioner and binder leave them. */
static void make_bound(int i)
{
	char name[64], pv[64];
	struct kube_err e;

	snprintf(name, sizeof(name), "claim-%06d", i);
	snprintf(pv, sizeof(pv), "pv-%06d", i);
	json_t *c = kube_create(kc, &KUBE_RES_PERSISTENTVOLUMECLAIMS, "default",
		json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:s, s:[s], s:{s:{s:s}}}}", "apiVersion",
			  "v1", "kind", "PersistentVolumeClaim", "metadata", "name", name, "namespace",
			  "default", "spec", "storageClassName", "bench", "volumeName", pv,
			  "accessModes", "ReadWriteOnce", "resources", "requests", "storage", "1Gi"),
		&e);
	if (!c)
		bench_die("create %s: %s", name, e.message);
	const char *uid = json_string_value(json_object_get(json_object_get(c, "metadata"), "uid"));
	bench_create_or_die(kc, &KUBE_RES_PERSISTENTVOLUMES, NULL,
		json_pack("{s:s, s:s, s:{s:s}, s:{s:{s:s}, s:[s], s:s, s:{s:s, s:s, s:s}, s:{s:s, s:s}}}",
			  "apiVersion", "v1", "kind", "PersistentVolume", "metadata", "name", pv, "spec",
			  "capacity", "storage", "1Gi", "accessModes", "ReadWriteOnce",
			  "storageClassName", "bench", "claimRef", "namespace", "default", "name", name,
			  "uid", uid ? uid : "", "csi", "driver", "testdriver.kcsi.dev",
			  "volumeHandle", pv));
	json_decref(c);
	if (kube_patch_discard(kc, &KUBE_RES_PERSISTENTVOLUMECLAIMS, "default", name, true,
			       KUBE_PATCH_MERGE,
			       "{\"status\":{\"phase\":\"Bound\",\"capacity\":{\"storage\":\"1Gi\"}}}", &e))
		bench_die("bind %s: %s", name, e.message);
}

static void resize(int i)
{
	char name[64];
	struct kube_err e;

	snprintf(name, sizeof(name), "claim-%06d", i);
	t_patch[i] = mono_now_ns();
	if (kube_patch_discard(kc, &KUBE_RES_PERSISTENTVOLUMECLAIMS, "default", name, false,
			       KUBE_PATCH_MERGE,
			       "{\"spec\":{\"resources\":{\"requests\":{\"storage\":\"2Gi\"}}}}", &e))
		bench_die("resize %s: %s", name, e.message);
}

static void on_pvc(const struct kube_obj *old, const struct kube_obj *o, void *ud)
{
	const struct kube_pvc *pvc = kube_pvc_of(o);

	(void)old;
	(void)ud;
	if (!pvc || strncmp(pvc->meta.name, "claim-", 6) || pvc->allocated != 2 * GI ||
	    pvc->resize_status != KUBE_RESIZE_NODE_PENDING)
		return;
	int i = atoi(pvc->meta.name + 6);
	if (i >= 0 && i < opt.n && t_done[i] == 0 && t_patch[i] != 0) {
		t_done[i] = mono_now_ns();
		atomic_fetch_add(&n_done, 1);
	}
}

int main(int argc, char **argv)
{
	struct flagset *fs = flags_new("resizer_bench", "resizer_bench [flags]");
	char self[PATH_MAX], defbin[PATH_MAX + 16], defrsz[PATH_MAX + 40], err[512];
	char tmp[] = "/tmp/kcsi-rsz-bench.XXXXXX";
	char kcpath[PATH_MAX + 64], sock[PATH_MAX + 64], log[PATH_MAX + 64], addr[PATH_MAX + 80];
	char b0[PATH_MAX + 64], b1[PATH_MAX + 64], wk[32];

	ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
	self[sl > 0 ? sl : 0] = '\0';
	*strrchr(self, '/') = '\0'; /* <build>/tests */
	snprintf(defbin, sizeof(defbin), "%s/../bin", self);
	snprintf(defrsz, sizeof(defrsz), "%s/csi-resizer", defbin);
	flags_string(fs, "resizer", &opt.resizer, defrsz, "resizer binary under test (upstream flags)");
	flags_string(fs, "bin", &opt.bin, defbin, "folder with kube-emulator");
	flags_string(fs, "tests", &opt.tests, self, "folder with csi-testdriver");
	flags_int(fs, "n", &opt.n, 1000, "claims to expand");
	flags_int(fs, "workers", &opt.workers, 10, "--workers of the resizer");
	log_register_flags(fs);
	flags_parse_or_exit(fs, argc, argv);
	if (opt.n <= 0)
		bench_die("-n must be positive");
	if (!mkdtemp(tmp))
		bench_die("mkdtemp failed");

	snprintf(kcpath, sizeof(kcpath), "%s/kubeconfig", tmp);
	snprintf(sock, sizeof(sock), "%s/csi.sock", tmp);
	snprintf(addr, sizeof(addr), "unix://%s", sock);
	snprintf(b0, sizeof(b0), "%s/kube-emulator", opt.bin);
	snprintf(log, sizeof(log), "%s/emulator.log", tmp);
	char *eargv[] = { b0, "--listen", "127.0.0.1:0", "--write-kubeconfig", kcpath, NULL };
	pid_t emu = bench_spawn(eargv, log);
	if (!bench_wait_file(kcpath, false, 10 * NSEC_PER_SEC))
		bench_die("kube-emulator did not start (see %s)", log);
	snprintf(b1, sizeof(b1), "%s/csi-testdriver", opt.tests);
	snprintf(log, sizeof(log), "%s/driver.log", tmp);
	char *dargv[] = { b1, "--endpoint", addr, "--threads", "16", NULL };
	pid_t drv = bench_spawn(dargv, log);
	if (!bench_wait_file(sock, true, 10 * NSEC_PER_SEC))
		bench_die("driver did not start (see %s)", log);

	struct kube_config *cfg = kube_config_load(kcpath, NULL, NULL, err, sizeof(err));
	if (!cfg)
		bench_die("%s", err);
	struct kube_client_opts ko = { .component = "resizer_bench", .qps = 0 };
	kc = kube_client_new(cfg, &ko, err, sizeof(err));
	if (!kc)
		bench_die("%s", err);
	bench_create_or_die(kc, &KUBE_RES_STORAGECLASSES, NULL,
		json_pack("{s:s, s:s, s:{s:s}, s:s, s:b}", "apiVersion", "storage.k8s.io/v1", "kind",
			  "StorageClass", "metadata", "name", "bench", "provisioner",
			  "testdriver.kcsi.dev", "allowVolumeExpansion", 1));
	int64_t t0 = mono_now_ns();
	bench_parallel(opt.n, make_bound, LOADERS);
	printf("made %d bound claims in %.1f s\n", opt.n, (double)(mono_now_ns() - t0) / 1e9);

	snprintf(log, sizeof(log), "%s/resizer.log", tmp);
	snprintf(wk, sizeof(wk), "%d", opt.workers);
	char *rargv[] = { (char *)opt.resizer, "--csi-address", addr, "--kubeconfig", kcpath,
			  "--kube-api-qps", "100000", "--kube-api-burst", "100000", "--workers", wk,
			  "--timeout", "60s", NULL };
	pid_t rsz = bench_spawn(rargv, log);
	int64_t up_end = mono_now_ns() + 60 * NSEC_PER_SEC;
	/* Both upstream's and kcsi's resizer log this once their caches synced. */
	while (!bench_log_has(log, "Starting external resizer")) {
		if (mono_now_ns() > up_end || waitpid(rsz, NULL, WNOHANG) == rsz)
			bench_die("the resizer did not start (see %s)", log);
		sleep_ns(50 * NSEC_PER_MSEC);
	}
	sleep_ns(2 * NSEC_PER_SEC);
	long idle_kb = bench_status_kb(rsz, "VmRSS"), idle_anon_kb = bench_status_kb(rsz, "RssAnon");

	t_patch = xcalloc((size_t)opt.n, sizeof(int64_t));
	t_done = xcalloc((size_t)opt.n, sizeof(int64_t));
	struct kube_informer_opts io = { .kind = &KUBE_KIND_PERSISTENTVOLUMECLAIM };
	struct kube_informer *inf = kube_informer_new(kc, &io);
	struct kube_handlers h = { NULL, on_pvc, NULL, NULL };
	kube_informer_add_handlers(inf, &h);
	kube_informer_start(inf);
	kube_informer_wait_synced(inf, 10 * NSEC_PER_SEC);

	struct bench_mem mem;
	struct bench_cpu cpus = { 0 };
	bench_cpu_add(&cpus, "resizer", rsz);
	bench_cpu_add(&cpus, "kube-emulator", emu);
	bench_cpu_add(&cpus, "csi-testdriver", drv);
	bench_mem_start(&mem, rsz);
	bench_cpu_start(&cpus);
	long long rv0 = bench_current_rv(kc);
	t0 = mono_now_ns();
	bench_parallel(opt.n, resize, LOADERS);
	int64_t end = mono_now_ns() + 600 * NSEC_PER_SEC;
	while (atomic_load(&n_done) < opt.n) {
		if (mono_now_ns() > end || waitpid(rsz, NULL, WNOHANG) == rsz)
			bench_die("stopped at %d of %d expansions (see %s)", atomic_load(&n_done), opt.n, log);
		sleep_ns(NSEC_PER_MSEC);
	}
	int64_t t_all = mono_now_ns() - t0;
	sleep_ns(500 * NSEC_PER_MSEC); /* events and late writes settle */
	long long writes = bench_current_rv(kc) - rv0 - opt.n;
	bench_cpu_stop(&cpus);
	bench_mem_stop(&mem);
	double cpu = cpus.s[0];

	int64_t *d = xcalloc((size_t)opt.n, sizeof(int64_t));
	for (int i = 0; i < opt.n; i++)
		d[i] = t_done[i] - t_patch[i];
	qsort(d, (size_t)opt.n, sizeof(int64_t), bench_cmp_i64);
	double p50 = (double)d[opt.n / 2] / 1e6;
	double p99 = (double)d[(opt.n * 99) / 100 >= opt.n ? opt.n - 1 : (opt.n * 99) / 100] / 1e6;

	printf("resizer: %s  claims: %d  --workers %d\n", opt.resizer, opt.n, opt.workers);
	printf("time to all expanded (NodeResizePending at 2Gi): %.2f s (%.0f expansions/s)\n",
	       (double)t_all / 1e9, opt.n / ((double)t_all / 1e9));
	printf("latency request -> expanded: p50 %.1f ms, p99 %.1f ms\n", p50, p99);
	printf("API writes per expansion: %.2f (events included)\n", (double)writes / opt.n);
	printf("RSS: idle %.1f MB, peak %.1f MB\n", idle_kb / 1024.0, mem.peak_rss_kb / 1024.0);
	printf("private memory (RssAnon): idle %.1f MB, peak %.1f MB\n", idle_anon_kb / 1024.0,
	       mem.peak_anon_kb / 1024.0);
	printf("CPU: %.2f s for %d expansions (%.3f s per 1000)\n", cpu, opt.n, cpu * 1000.0 / opt.n);
	bench_cpu_print(&cpus, "the expansions");
	static const char *const keys[] = { "resizer", "emulator", "driver" };
	char kv[256] = "";
	bench_cpu_kv(&cpus, keys, kv, sizeof(kv));
	printf("RESULT n=%d total_s=%.3f p50_ms=%.1f p99_ms=%.1f writes_per_op=%.2f rss_idle_kb=%ld "
	       "rss_peak_kb=%ld anon_idle_kb=%ld anon_peak_kb=%ld cpu_s=%.3f%s\n", opt.n,
	       (double)t_all / 1e9, p50, p99, (double)writes / opt.n, idle_kb, mem.peak_rss_kb,
	       idle_anon_kb, mem.peak_anon_kb, cpu, kv);

	kube_informer_stop(inf);
	kube_informer_free(inf);
	bench_stop(rsz);
	bench_stop(drv);
	bench_stop(emu);
	kube_client_free(kc);
	kube_config_free(cfg);
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmp);
	free(d);
	free(t_patch);
	free(t_done);
	flags_free(fs);
	return 0;
}
