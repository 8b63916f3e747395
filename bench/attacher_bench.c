/*
 * attacher_bench: how fast an attacher turns VolumeAttachments into attached volumes, and back.
 *
 * It runs kube-emulator, kcsi-loopplugin (one controller+node process and a registration for
 * every other node; or, with --driver test, the in-memory csi-testdriver, to measure the attacher
 * alone: the loop driver writes its state durably and serializes publishes) and the attacher under test (--attacher BIN: kcsi's csi-attacher by default,
 * or any binary that takes the upstream flags) as separate processes, then:
 *   1. creates --cached VolumeAttachments of another driver (the attacher caches but skips them),
 *   2. creates -n VolumeAttachments over --nodes nodes at once from 16 threads, and records for
 *      each the time from its creation to `status.attached` seen in a watch,
 *   3. deletes them all at once and records the time to each object's disappearance.
 * It prints throughput, p50/p99 latency, API writes per attach (from the global resourceVersion,
 * which counts every successful write, so it works for any attacher), the attacher's RSS and
 * private memory (RssAnon) at start, peak and idle, and the CPU seconds of attach+detach for the
 * attacher, the emulator, the driver, the load generator (this process) and the rest of the
 * machine, each with its share: when the attacher's share is small, the times measure the others.
 * The last line is machine-readable. It never fails on a figure.
 */
#include "bench_util.h"
#include "base/flags.h"
#include "base/log.h"
#include "base/log_flags.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "csi/client.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/informer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define LOADERS 16

static const char *DRIVER = "loop.kcsi.io";

static struct {
	const char *attacher, *bin, *driver;
	int n, nodes, workers, burst, cached, settle;
	double qps;
} opt;

static char tmp[PATH_MAX];
static struct kube_client *kc;
static struct csi_conn *csi;
static char **volumes;
static int64_t *t_create, *t_attached, *t_delete, *t_gone;
static atomic_int n_attached, n_gone;

static void make_volume(int i)
{
	Csi__V1__CreateVolumeRequest req = CSI__V1__CREATE_VOLUME_REQUEST__INIT;
	Csi__V1__CreateVolumeResponse *resp = NULL;
	Csi__V1__VolumeCapability cap = CSI__V1__VOLUME_CAPABILITY__INIT;
	Csi__V1__VolumeCapability__AccessMode mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__INIT;
	Csi__V1__VolumeCapability__MountVolume mnt = CSI__V1__VOLUME_CAPABILITY__MOUNT_VOLUME__INIT;
	Csi__V1__VolumeCapability *caps[1] = { &cap };
	Csi__V1__CapacityRange range = CSI__V1__CAPACITY_RANGE__INIT;
	struct csi_status st;
	char name[64];

	snprintf(name, sizeof(name), "bench-vol-%05d", i);
	mode.mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER;
	cap.access_mode = &mode;
	cap.access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
	cap.mount = &mnt;
	range.required_bytes = 1 << 20;
	req.name = name;
	req.capacity_range = &range;
	req.n_volume_capabilities = 1;
	req.volume_capabilities = caps;
	if (csi_create_volume(csi, &req, &resp, 60 * NSEC_PER_SEC, &st) != 0)
		bench_die("CreateVolume %s: %s", name, st.message);
	volumes[i] = xstrdup(resp->volume->volume_id);
	csi_msg_free(resp);
}

static void delete_volume(int i)
{
	Csi__V1__DeleteVolumeRequest req = CSI__V1__DELETE_VOLUME_REQUEST__INIT;
	Csi__V1__DeleteVolumeResponse *resp = NULL;
	struct csi_status st;

	if (!volumes[i])
		return;
	req.volume_id = volumes[i];
	if (csi_delete_volume(csi, &req, &resp, 60 * NSEC_PER_SEC, &st) != 0)
		fprintf(stderr, "DeleteVolume %s: %s\n", volumes[i], st.message);
	csi_msg_free(resp);
}

static void make_pv(int i)
{
	char name[64];

	snprintf(name, sizeof(name), "bench-pv-%05d", i);
	bench_create_or_die(kc, &KUBE_RES_PERSISTENTVOLUMES, NULL,
		      json_pack("{s:s,s:s,s:{s:s},s:{s:{s:s},s:[s],s:{s:s,s:s,s:s}}}", "apiVersion", "v1",
				"kind", "PersistentVolume", "metadata", "name", name, "spec",
				"capacity", "storage", "1Mi", "accessModes", "ReadWriteOnce", "csi",
				"driver", DRIVER, "volumeHandle", volumes[i], "fsType", "ext4"));
}

static json_t *va_json(const char *name, const char *attacher, const char *node, const char *pv,
		       const char *label)
{
	return json_pack("{s:s,s:s,s:{s:s,s:{s:s}},s:{s:s,s:s,s:{s:s}}}", "apiVersion",
			 "storage.k8s.io/v1", "kind", "VolumeAttachment", "metadata", "name", name,
			 "labels", "bench", label, "spec", "attacher", attacher, "nodeName", node,
			 "source", "persistentVolumeName", pv);
}

static void make_cached(int i)
{
	char name[64];

	snprintf(name, sizeof(name), "cached-va-%05d", i);
	bench_create_or_die(kc, &KUBE_RES_VOLUMEATTACHMENTS, NULL,
		      va_json(name, "other.example.com", "node-0", "some-pv-of-another-driver",
			      "cached"));
}

static void make_va(int i)
{
	char name[64], node[32], pv[64];

	snprintf(name, sizeof(name), "bench-va-%05d", i);
	snprintf(node, sizeof(node), "node-%d", i % opt.nodes);
	snprintf(pv, sizeof(pv), "bench-pv-%05d", i);
	t_create[i] = mono_now_ns();
	bench_create_or_die(kc, &KUBE_RES_VOLUMEATTACHMENTS, NULL,
			    va_json(name, DRIVER, node, pv, "load"));
}

static void delete_va(int i)
{
	char name[64];
	struct kube_err e;

	snprintf(name, sizeof(name), "bench-va-%05d", i);
	t_delete[i] = mono_now_ns();
	if (kube_delete(kc, &KUBE_RES_VOLUMEATTACHMENTS, NULL, name, NULL, NULL, &e) &&
	    !kube_err_is_not_found(&e))
		bench_die("delete %s: %s", name, e.message);
}

static int va_index(const struct kube_obj *o)
{
	return strncmp(o->name, "bench-va-", 9) == 0 ? atoi(o->name + 9) : -1;
}

static void on_va(const struct kube_obj *old, const struct kube_obj *o, void *ud)
{
	const struct kube_va *va = kube_va_of(o);
	int i = va_index(o);

	(void)old;
	(void)ud;
	if (i >= 0 && i < opt.n && va->attached && !t_attached[i]) {
		t_attached[i] = mono_now_ns();
		atomic_fetch_add(&n_attached, 1);
	}
}

static void on_va_add(const struct kube_obj *o, void *ud)
{
	on_va(NULL, o, ud);
}

static void on_va_delete(const struct kube_obj *o, void *ud)
{
	int i = va_index(o);

	(void)ud;
	if (i >= 0 && i < opt.n && !t_gone[i]) {
		t_gone[i] = mono_now_ns();
		atomic_fetch_add(&n_gone, 1);
	}
}

static long long current_rv(void)
{
	struct kube_list_opts lo = { .limit = 1 };
	struct kube_err e;
	json_t *l = kube_list(kc, &KUBE_RES_NODES, NULL, &lo, &e);
	long long rv;

	if (!l)
		bench_die("list: %s", e.message);
	rv = atoll(json_string_value(json_object_get(json_object_get(l, "metadata"), "resourceVersion")));
	json_decref(l);
	return rv;
}

/* PVs of the bench that carry an external-attacher finalizer: each cost the attacher one write. */
static int pvs_with_attacher_finalizer(void)
{
	struct kube_list_opts lo = { 0 };
	struct kube_err e;
	json_t *l = kube_list(kc, &KUBE_RES_PERSISTENTVOLUMES, NULL, &lo, &e), *pv, *f;
	size_t i, j;
	int n = 0;

	if (!l)
		bench_die("list PVs: %s", e.message);
	json_array_foreach(json_object_get(l, "items"), i, pv) {
		json_array_foreach(json_object_get(json_object_get(pv, "metadata"), "finalizers"), j, f) {
			if (json_is_string(f) && !strncmp(json_string_value(f), "external-attacher/", 18)) {
				n++;
				break;
			}
		}
	}
	json_decref(l);
	return n;
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/* p50 and p99 of end[i]-start[i] in ms. */
static void percentiles(const int64_t *start, const int64_t *end, double *p50, double *p99)
{
	int64_t *d = xcalloc((size_t)opt.n, sizeof(int64_t));

	for (int i = 0; i < opt.n; i++)
		d[i] = end[i] - start[i];
	qsort(d, (size_t)opt.n, sizeof(int64_t), cmp64);
	*p50 = (double)d[opt.n / 2] / 1e6;
	*p99 = (double)d[(opt.n * 99) / 100 >= opt.n ? opt.n - 1 : (opt.n * 99) / 100] / 1e6;
	free(d);
}

static void wait_count(atomic_int *counter, int want, const char *what)
{
	int64_t end = mono_now_ns() + 600 * NSEC_PER_SEC;

	while (atomic_load(counter) < want) {
		if (mono_now_ns() > end)
			bench_die("timed out: %d of %d %s", atomic_load(counter), want, what);
		sleep_ns(NSEC_PER_MSEC);
	}
}

int main(int argc, char **argv)
{
	struct flagset *fs = flags_new("attacher_bench", "attacher_bench [flags]");
	char path[PATH_MAX + 64], kcpath[PATH_MAX + 64], sock[PATH_MAX + 64], err[512];
	char self[PATH_MAX], defbin[PATH_MAX + 16], defatt[PATH_MAX + 32];
	pid_t emu, lp = -1, att;

	ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
	self[sl > 0 ? sl : 0] = '\0';
	*strrchr(self, '/') = '\0'; /* <build>/tests */
	snprintf(defbin, sizeof(defbin), "%s/../bin", self);
	snprintf(defatt, sizeof(defatt), "%s/csi-attacher", defbin);
	flags_string(fs, "attacher", &opt.attacher, defatt, "attacher binary under test (upstream flags)");
	flags_string(fs, "bin", &opt.bin, defbin, "folder with kube-emulator and kcsi-loopplugin");
	flags_string(fs, "driver", &opt.driver, "loop",
		     "loop: kcsi-loopplugin; test: csi-testdriver (in memory, isolates the attacher)");
	flags_int(fs, "n", &opt.n, 1000, "VolumeAttachments to attach and detach");
	flags_int(fs, "nodes", &opt.nodes, 10, "nodes the attachments spread over");
	flags_int(fs, "cached", &opt.cached, 10000, "VolumeAttachments of another driver kept in the cache");
	flags_int(fs, "worker-threads", &opt.workers, 10, "passed to the attacher");
	flags_int(fs, "settle", &opt.settle, 0,
		  "seconds to wait after the run before measuring the attacher's memory again "
		  "(35: its extra workers have ended, 30 s idle, and given the heap back)");
	flags_double(fs, "kube-api-qps", &opt.qps, 10000, "passed to the attacher");
	flags_int(fs, "kube-api-burst", &opt.burst, 10000, "passed to the attacher");
	log_register_flags(fs);
	flags_parse_or_exit(fs, argc, argv);
	if (opt.n < 1 || opt.nodes < 1)
		bench_die("-n and --nodes must be positive");

	signal(SIGPIPE, SIG_IGN);
	snprintf(tmp, sizeof(tmp), "/tmp/kcsi-bench.XXXXXX");
	if (!mkdtemp(tmp))
		bench_die("mkdtemp: %s", strerror(errno));
	snprintf(kcpath, sizeof(kcpath), "%s/kubeconfig", tmp);
	snprintf(path, sizeof(path), "%s/kube-emulator", opt.bin);
	/* The history bounded by its count alone, as before the 64 MiB default of issue 26, so
	 * that a byte bound reached mid-run adds no relists to the figures. */
	char hist[32];
	snprintf(hist, sizeof(hist), "%d", 10 * (opt.n + opt.cached) + 1000);
	char *emu_argv[] = { path, "--listen", "127.0.0.1:0", "--write-kubeconfig", kcpath,
			     "--watch-history", hist, "--watch-history-mib", "1024", NULL };
	char log[PATH_MAX + 64];
	snprintf(log, sizeof(log), "%s/emulator.log", tmp);
	emu = bench_spawn(emu_argv, log);
	if (!bench_wait_file(kcpath, false, 10 * NSEC_PER_SEC))
		bench_die("kube-emulator did not start (see %s)", log);

	char pool[PATH_MAX + 16], lpbin[PATH_MAX + 64], nodeid[32], ep[PATH_MAX + 80];
	snprintf(pool, sizeof(pool), "%s/pool", tmp);
	mkdir(pool, 0755);
	snprintf(log, sizeof(log), "%s/driver.log", tmp);
	snprintf(sock, sizeof(sock), "%s/lp-0.sock", tmp);
	snprintf(ep, sizeof(ep), "unix://%s", sock);
	if (strcmp(opt.driver, "test") == 0) {
		DRIVER = "testdriver.kcsi.dev";
		snprintf(lpbin, sizeof(lpbin), "%s/csi-testdriver", self);
		char *td_argv[] = { lpbin, "--endpoint", ep, "--threads", "16", NULL };
		lp = bench_spawn(td_argv, log);
		if (!bench_wait_file(sock, true, 10 * NSEC_PER_SEC))
			bench_die("csi-testdriver did not start (see %s)", log);
	} else if (strcmp(opt.driver, "loop") == 0) {
		snprintf(lpbin, sizeof(lpbin), "%s/kcsi-loopplugin", opt.bin);
		/* Register nodes 1..M-1 with short-lived node plugins; node-0 keeps running. */
		for (int k = opt.nodes - 1; k >= 0; k--) {
			char ksock[PATH_MAX + 64], kep[PATH_MAX + 80];
			snprintf(nodeid, sizeof(nodeid), "node-%d", k);
			snprintf(ksock, sizeof(ksock), "%s/lp-%d.sock", tmp, k);
			snprintf(kep, sizeof(kep), "unix://%s", ksock);
			char *lp_argv[] = { lpbin, "--endpoint", kep, "--nodeid", nodeid, "--pool-dir",
					    pool, "--mode", k ? "node" : "all", "--threads", "16", NULL };
			pid_t p = bench_spawn(lp_argv, log);
			if (!bench_wait_file(ksock, true, 10 * NSEC_PER_SEC))
				bench_die("kcsi-loopplugin did not start (see %s)", log);
			if (k)
				bench_stop(p);
			else
				lp = p;
		}
	} else {
		bench_die("--driver must be loop or test");
	}

	struct kube_config *cfg = kube_config_load(kcpath, NULL, NULL, err, sizeof(err));
	struct kube_client_opts ko = { .component = "attacher_bench", .qps = 0 };
	if (!cfg || !(kc = kube_client_new(cfg, &ko, err, sizeof(err))))
		bench_die("%s", err);
	struct csi_conn_opts co = CSI_CONN_OPTS_INIT;
	co.connect_timeout_ns = 10 * NSEC_PER_SEC;
	if (!(csi = csi_connect(ep, &co, err, sizeof(err))))
		bench_die("%s", err);

	volumes = xcalloc((size_t)opt.n, sizeof(char *));
	t_create = xcalloc((size_t)opt.n, sizeof(int64_t));
	t_attached = xcalloc((size_t)opt.n, sizeof(int64_t));
	t_delete = xcalloc((size_t)opt.n, sizeof(int64_t));
	t_gone = xcalloc((size_t)opt.n, sizeof(int64_t));
	fprintf(stderr, "setup: %d volumes, %d nodes, %d PVs, %d cached VAs of another driver\n",
		opt.n, opt.nodes, opt.n, opt.cached);
	bench_parallel(opt.n, make_volume, LOADERS);
	for (int k = 0; k < opt.nodes; k++) {
		snprintf(nodeid, sizeof(nodeid), "node-%d", k);
		bench_create_or_die(kc, &KUBE_RES_NODES, NULL, json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1",
							 "kind", "Node", "metadata", "name", nodeid));
		bench_create_or_die(kc, &KUBE_RES_CSINODES, NULL,
			      json_pack("{s:s,s:s,s:{s:s},s:{s:[{s:s,s:s}]}}", "apiVersion",
					"storage.k8s.io/v1", "kind", "CSINode", "metadata", "name",
					nodeid, "spec", "drivers", "name", DRIVER, "nodeID", nodeid));
	}
	bench_parallel(opt.n, make_pv, LOADERS);
	bench_parallel(opt.cached, make_cached, LOADERS);

	struct kube_informer_opts io = { .kind = &KUBE_KIND_VOLUMEATTACHMENT,
					 .label_selector = "bench=load" };
	struct kube_informer *inf = kube_informer_new(kc, &io);
	struct kube_handlers h = { on_va_add, on_va, on_va_delete, NULL };
	kube_informer_add_handlers(inf, &h);
	kube_informer_start(inf);
	kube_informer_wait_synced(inf, 10 * NSEC_PER_SEC);

	char workers[16], qps[32], burst[16], csiaddr[PATH_MAX + 80];
	snprintf(workers, sizeof(workers), "%d", opt.workers);
	snprintf(qps, sizeof(qps), "%g", opt.qps);
	snprintf(burst, sizeof(burst), "%d", opt.burst);
	snprintf(csiaddr, sizeof(csiaddr), "unix://%s/lp-0.sock", tmp);
	char *att_argv[] = { (char *)opt.attacher, "--csi-address", csiaddr, "--kubeconfig", kcpath,
			     "--worker-threads", workers, "--kube-api-qps", qps,
			     "--kube-api-burst", burst, NULL };
	snprintf(log, sizeof(log), "%s/attacher.log", tmp);
	att = bench_spawn(att_argv, log);
	sleep_ns(2 * NSEC_PER_SEC); /* connect, discover, sync the caches */
	if (waitpid(att, NULL, WNOHANG) == att)
		bench_die("the attacher exited at start (see %s)", log);
	long rss_start = bench_status_kb(att, "VmRSS"), anon_start = bench_status_kb(att, "RssAnon");

	struct bench_mem mem;
	struct bench_cpu cpu = { 0 };
	bench_cpu_add(&cpu, "attacher", att);
	bench_cpu_add(&cpu, "kube-emulator", emu);
	bench_cpu_add(&cpu, strcmp(opt.driver, "test") ? "kcsi-loopplugin" : "csi-testdriver", lp);
	bench_mem_start(&mem, att);
	bench_cpu_start(&cpu);
	long long rv0 = current_rv();
	int64_t t0 = mono_now_ns();
	bench_parallel(opt.n, make_va, LOADERS);
	wait_count(&n_attached, opt.n, "attached");
	int64_t t1 = mono_now_ns();
	long long rv1 = current_rv();
	int pv_finalizers = pvs_with_attacher_finalizer();
	sleep_ns(NSEC_PER_SEC);
	long rss_idle = bench_status_kb(att, "VmRSS"), anon_idle = bench_status_kb(att, "RssAnon");

	long long rv2 = current_rv();
	int64_t t2 = mono_now_ns();
	bench_parallel(opt.n, delete_va, LOADERS);
	wait_count(&n_gone, opt.n, "detached");
	int64_t t3 = mono_now_ns();
	long long rv3 = current_rv();
	bench_cpu_stop(&cpu);
	bench_mem_stop(&mem);

	double attach_s = (double)(t1 - t0) / 1e9, detach_s = (double)(t3 - t2) / 1e9;
	double a50, a99, d50, d99;
	percentiles(t_create, t_attached, &a50, &a99);
	percentiles(t_delete, t_gone, &d50, &d99);
	/* The bench's own writes: one create per VA, one delete per VA. */
	double wpa = (double)(rv1 - rv0 - opt.n) / opt.n;
	double wpd = (double)(rv3 - rv2 - opt.n) / opt.n;

	printf("attacher: %s\n", opt.attacher);
	printf("load: %d VolumeAttachments over %d nodes, %d cached VAs of another driver, "
	       "--worker-threads %d --kube-api-qps %g --kube-api-burst %d\n",
	       opt.n, opt.nodes, opt.cached, opt.workers, opt.qps, opt.burst);
	printf("attach: all attached in %.3f s, %.0f attaches/s, latency p50 %.1f ms p99 %.1f ms, "
	       "%.2f API writes per attach: %.2f to the VolumeAttachment + %.2f PV finalizers (each "
	       "VA here has its own PV, attached for the first time)\n", attach_s, opt.n / attach_s,
	       a50, a99, wpa, wpa - (double)pv_finalizers / opt.n, (double)pv_finalizers / opt.n);
	printf("detach: all gone in %.3f s, %.0f detaches/s, latency p50 %.1f ms p99 %.1f ms, "
	       "%.2f API writes per detach\n", detach_s, opt.n / detach_s, d50, d99, wpd);
	printf("attacher process: RSS %ld kB at start (cache synced), %ld kB peak, %ld kB idle "
	       "after attach; CPU %.2f s for attach+detach (%.2f s per 1,000)\n",
	       rss_start, mem.peak_rss_kb, rss_idle, cpu.s[0], cpu.s[0] * 1000.0 / opt.n);
	printf("attacher private memory (RssAnon, without shared library pages): %ld kB at start, "
	       "%ld kB peak, %ld kB idle after attach\n", anon_start, mem.peak_anon_kb, anon_idle);
	bench_cpu_print(&cpu, "attach+detach");
	printf("driver: %s (%s)\n", opt.driver, DRIVER);
	static const char *const keys[] = { "attacher", "emulator", "driver" };
	char kv[256] = "";
	bench_cpu_kv(&cpu, keys, kv, sizeof(kv));
	printf("attach n=%d total_s=%.3f ops_s=%.0f p50_ms=%.1f p99_ms=%.1f rss_kb=%ld cpu_s=%.2f "
	       "api_writes_per_attach=%.2f va_writes_per_attach=%.2f detach_total_s=%.3f detach_p50_ms=%.1f detach_p99_ms=%.1f "
	       "rss_start_kb=%ld anon_start_kb=%ld anon_peak_kb=%ld%s\n",
	       opt.n, attach_s, opt.n / attach_s, a50, a99, mem.peak_rss_kb, cpu.s[0], wpa,
	       wpa - (double)pv_finalizers / opt.n, detach_s, d50, d99, rss_start, anon_start,
	       mem.peak_anon_kb, kv);
	fflush(stdout);
	if (opt.settle > 0) {
		sleep_ns((int64_t)opt.settle * NSEC_PER_SEC);
		printf("attacher process %d s after the run: RSS %ld kB, private (RssAnon) %ld kB, "
		       "%ld threads\n", opt.settle, bench_status_kb(att, "VmRSS"),
		       bench_status_kb(att, "RssAnon"), bench_status_kb(att, "Threads"));
		fflush(stdout);
	}

	bench_stop(att);
	kube_informer_stop(inf);
	kube_informer_free(inf);
	bench_parallel(opt.n, delete_volume, LOADERS);
	csi_conn_free(csi);
	bench_stop(lp);
	bench_stop(emu);
	kube_client_free(kc);
	kube_config_free(cfg);
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmp);
	flags_free(fs);
	return 0;
}
