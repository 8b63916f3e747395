/*
 * provisioner_bench: how fast a provisioner turns PersistentVolumeClaims into PersistentVolumes,
 * and what it costs.
 *
 * It runs kube-emulator, a driver (--driver test: the in-memory csi-testdriver, which isolates the
 * provisioner; --driver loop: kcsi-loopplugin, real image files) and the provisioner under test
 * (--provisioner BIN: kcsi's csi-provisioner by default, or any binary that takes the upstream
 * flags, e.g. the Go external-provisioner) as separate processes, unthrottled
 * (--kube-api-qps/--kube-api-burst high), then:
 *   1. creates --cached claims of another provisioner (a big cluster: the provisioner must not
 *      pay memory for them),
 *   2. creates -n claims of the driver at once from 16 threads and records for each the time
 *      from its creation to its PV being seen in a watch,
 * and prints the time to all PVs, p50/p99 latency, API writes per provision (from the global
 * resourceVersion: every successful write, events included, minus the bench's own), idle and
 * peak RSS and private memory (RssAnon) of the provisioner, and the CPU seconds of the
 * provisioner, the emulator, the driver, the load generator and the rest of the machine. The last line is machine-readable. It never fails on a
 * figure.
 *
 * --node-deployment N runs N provisioners with --node-deployment instead of one, each next to its
 * own csi-testdriver (node ID and topology node-<i>) with NODE_NAME=node-<i>, all competing for
 * the immediate-binding claims through the selected-node annotation (--base-delay, --max-delay).
 * It prints volumes/s, the conflicts (409 answers to the annotation update, counted from the
 * instances' -v=3 logs), the total API writes, and the sum of the instances' RSS.
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

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define LOADERS 16

static struct {
	const char *provisioner, *bin, *tests, *driver;
	int n, cached, workers, nodes;
	int64_t base_delay, max_delay;
} opt;

static const char *drvname;
static struct kube_client *kc;
static int64_t *t_create, *t_pv;
static atomic_int n_pv;

static json_t *pvc_json(const char *name, const char *provisioner)
{
	return json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}}, s:{s:s, s:[s], s:{s:{s:s}}}}",
			 "apiVersion", "v1", "kind", "PersistentVolumeClaim", "metadata", "name", name,
			 "namespace", "default", "annotations", "volume.kubernetes.io/storage-provisioner",
			 provisioner, "spec", "storageClassName", "bench", "accessModes", "ReadWriteOnce",
			 "resources", "requests", "storage", "1Mi");
}

static void make_cached(int i)
{
	char name[64];
	snprintf(name, sizeof(name), "other-%06d", i);
	bench_create_or_die(kc, &KUBE_RES_PERSISTENTVOLUMECLAIMS, "default", pvc_json(name, "other.example.com"));
}

static void make_pvc(int i)
{
	char name[64];
	snprintf(name, sizeof(name), "claim-%06d", i);
	t_create[i] = mono_now_ns();
	bench_create_or_die(kc, &KUBE_RES_PERSISTENTVOLUMECLAIMS, "default", pvc_json(name, drvname));
}

/* PV claimRef.name "claim-NNNNNN" -> its index; the PV informer keeps only the claim name. */
static void on_pv(const struct kube_obj *o, void *ud)
{
	const struct kube_pv *pv = kube_pv_of(o);
	(void)ud;
	if (!pv || !pv->claim_name || strncmp(pv->claim_name, "claim-", 6) != 0)
		return;
	int i = atoi(pv->claim_name + 6);
	if (i >= 0 && i < opt.n && t_pv[i] == 0) {
		t_pv[i] = mono_now_ns();
		atomic_fetch_add(&n_pv, 1);
	}
}

static void on_pv_update(const struct kube_obj *old, const struct kube_obj *o, void *ud)
{
	(void)old;
	on_pv(o, ud);
}

static long long current_rv(void)
{
	struct kube_list_opts lo = { .limit = 1 };
	struct kube_err e;
	json_t *l = kube_list(kc, &KUBE_RES_STORAGECLASSES, NULL, &lo, &e);
	if (!l)
		bench_die("list: %s", e.message);
	long long rv = atoll(json_string_value(json_object_get(json_object_get(l, "metadata"), "resourceVersion")) ?: "0");
	json_decref(l);
	return rv;
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/* ---- --node-deployment N ---- */

struct node_run {
	pid_t *prov, *drv;
	int n;
	atomic_long peak_sum_kb;
	atomic_bool stop;
};

/* A field of /proc/PID/<file> in kB ("Pss:" of smaps_rollup, "RssAnon:" of status). */
static long proc_kb(pid_t pid, const char *file, const char *field)
{
	char path[64], line[256];
	long kb = -1;
	size_t fl = strlen(field);
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	if (!(f = fopen(path, "r")))
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, fl) && sscanf(line + fl, "%ld", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static long sum_kb(struct node_run *r, const char *file, const char *field)
{
	long sum = 0;
	for (int i = 0; i < r->n; i++) {
		long kb = proc_kb(r->prov[i], file, field);
		if (kb > 0)
			sum += kb;
	}
	return sum;
}

static long rss_sum_kb(struct node_run *r)
{
	long sum = 0;
	for (int i = 0; i < r->n; i++) {
		long kb = bench_status_kb(r->prov[i], "VmRSS");
		if (kb > 0)
			sum += kb;
	}
	return sum;
}

static void *sample_rss_sum(void *arg)
{
	struct node_run *r = arg;
	while (!atomic_load(&r->stop)) {
		long kb = rss_sum_kb(r);
		if (kb > atomic_load(&r->peak_sum_kb))
			atomic_store(&r->peak_sum_kb, kb);
		sleep_ns(200 * NSEC_PER_MSEC);
	}
	return NULL;
}

/* Lines of a file that contain needle. */
static long count_lines(const char *path, const char *needle)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	long n = 0;
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, needle))
			n++;
	fclose(f);
	return n;
}

static int run_nodes(const char *tmp, const char *kcpath, pid_t emu)
{
	struct node_run r = { .n = opt.nodes };
	char path[PATH_MAX + 64], addr[PATH_MAX + 80], log[PATH_MAX + 64], node[32], zone[32];
	char b1[PATH_MAX + 64], wt[32], base[32], maxd[32];

	r.prov = xcalloc((size_t)r.n, sizeof(pid_t));
	r.drv = xcalloc((size_t)r.n, sizeof(pid_t));
	snprintf(b1, sizeof(b1), "%s/csi-testdriver", opt.tests);
	snprintf(wt, sizeof(wt), "%d", opt.workers);
	duration_format(opt.base_delay, base, sizeof(base));
	duration_format(opt.max_delay, maxd, sizeof(maxd));
	for (int i = 0; i < r.n; i++) {
		snprintf(node, sizeof(node), "node-%d", i);
		snprintf(zone, sizeof(zone), "node-%d", i);
		snprintf(path, sizeof(path), "%s/csi-%d.sock", tmp, i);
		snprintf(addr, sizeof(addr), "unix://%s", path);
		snprintf(log, sizeof(log), "%s/driver-%d.log", tmp, i);
		char *dargv[] = { b1, "--endpoint", addr, "--threads", "2", "--node-id", node, "--zone",
				  zone, NULL };
		r.drv[i] = bench_spawn(dargv, log);
	}
	for (int i = 0; i < r.n; i++) {
		snprintf(path, sizeof(path), "%s/csi-%d.sock", tmp, i);
		if (!bench_wait_file(path, true, 30 * NSEC_PER_SEC))
			bench_die("driver %d did not start", i);
	}
	/* What kubelet's plugin registration would write: each node runs the driver. */
	for (int i = 0; i < r.n; i++) {
		snprintf(node, sizeof(node), "node-%d", i);
		bench_create_or_die(kc, &KUBE_RES_CSINODES, NULL,
			      json_pack("{s:s,s:s,s:{s:s},s:{s:[{s:s,s:s,s:[s]}]}}", "apiVersion",
					"storage.k8s.io/v1", "kind", "CSINode", "metadata", "name", node,
					"spec", "drivers", "name", drvname, "nodeID", node, "topologyKeys",
					"topology.kcsi.dev/zone"));
	}
	for (int i = 0; i < r.n; i++) {
		snprintf(node, sizeof(node), "node-%d", i);
		snprintf(addr, sizeof(addr), "unix://%s/csi-%d.sock", tmp, i);
		snprintf(log, sizeof(log), "%s/provisioner-%d.log", tmp, i);
		setenv("NODE_NAME", node, 1);
		char *pargv[] = { (char *)opt.provisioner, "--csi-address", addr, "--kubeconfig",
				  (char *)kcpath, "--kube-api-qps", "100000", "--kube-api-burst", "100000",
				  "--worker-threads", wt, "--timeout", "60s", "--node-deployment",
				  "--node-deployment-base-delay", base, "--node-deployment-max-delay", maxd,
				  "-v", "3", NULL };
		r.prov[i] = bench_spawn(pargv, log);
	}
	unsetenv("NODE_NAME");
	int64_t end = mono_now_ns() + 120 * NSEC_PER_SEC;
	for (int i = 0; i < r.n; i++) {
		snprintf(log, sizeof(log), "%s/provisioner-%d.log", tmp, i);
		while (!count_lines(log, "Started provisioner controller")) {
			if (mono_now_ns() > end || waitpid(r.prov[i], NULL, WNOHANG) == r.prov[i])
				bench_die("provisioner %d did not start (see %s)", i, log);
			sleep_ns(50 * NSEC_PER_MSEC);
		}
	}
	long idle_kb = rss_sum_kb(&r);

	t_create = xcalloc((size_t)opt.n, sizeof(int64_t));
	t_pv = xcalloc((size_t)opt.n, sizeof(int64_t));
	struct kube_informer_opts io = { .kind = &KUBE_KIND_PERSISTENTVOLUME };
	struct kube_informer *pvi = kube_informer_new(kc, &io);
	struct kube_handlers h = { on_pv, on_pv_update, NULL, NULL };
	kube_informer_add_handlers(pvi, &h);
	kube_informer_start(pvi);
	kube_informer_wait_synced(pvi, 10 * NSEC_PER_SEC);
	pthread_t st;
	pthread_create(&st, NULL, sample_rss_sum, &r);
	long long rv0 = current_rv();
	struct bench_cpu cpus = { 0 };
	double prov0 = 0, drv0 = 0;
	bench_cpu_add(&cpus, "kube-emulator", emu);
	for (int i = 0; i < r.n; i++) {
		prov0 += bench_cpu_s(r.prov[i]);
		drv0 += bench_cpu_s(r.drv[i]);
	}
	bench_cpu_start(&cpus);
	int64_t t0 = mono_now_ns();
	bench_parallel(opt.n, make_pvc, LOADERS);
	end = mono_now_ns() + 1800 * NSEC_PER_SEC;
	while (atomic_load(&n_pv) < opt.n) {
		if (mono_now_ns() > end)
			bench_die("stopped at %d of %d PVs (see %s)", atomic_load(&n_pv), opt.n, tmp);
		sleep_ns(10 * NSEC_PER_MSEC);
	}
	int64_t t_all = mono_now_ns() - t0;
	bench_cpu_stop(&cpus);
	double prov_s = -prov0, drv_s = -drv0;
	for (int i = 0; i < r.n; i++) {
		prov_s += bench_cpu_s(r.prov[i]);
		drv_s += bench_cpu_s(r.drv[i]);
	}
	char provname[48], drvname2[48];
	snprintf(provname, sizeof(provname), "%d provisioners", r.n);
	snprintf(drvname2, sizeof(drvname2), "%d csi-testdrivers", r.n);
	bench_cpu_add_measured(&cpus, provname, prov_s);
	bench_cpu_add_measured(&cpus, drvname2, drv_s);
	sleep_ns(1000 * NSEC_PER_MSEC); /* events and late writes settle */
	long long writes = current_rv() - rv0 - opt.n;
	atomic_store(&r.stop, true);
	pthread_join(st, NULL);
	long end_kb = rss_sum_kb(&r);
	long pss_kb = sum_kb(&r, "smaps_rollup", "Pss:");
	long anon_kb = sum_kb(&r, "status", "RssAnon:");
	long conflicts = 0, owned = 0;
	int busiest = 0, idle_nodes = 0;
	for (int i = 0; i < r.n; i++) {
		snprintf(log, sizeof(log), "%s/provisioner-%d.log", tmp, i);
		conflicts += count_lines(log, "conflict during PVC");
		long o = count_lines(log, "became owner of PVC");
		owned += o;
		if (o > busiest)
			busiest = (int)o;
		if (!o)
			idle_nodes++;
	}
	double cpu = 0;
	for (int i = 0; i < r.n; i++)
		cpu += bench_cpu_s(r.prov[i]);

	printf("node deployment: %d instances (each with its own csi-testdriver), base delay %s, max delay %s, --worker-threads %d\n",
	       r.n, base, maxd, opt.workers);
	printf("claims: %d immediate-binding; time to all PVs: %.2f s (%.1f volumes/s)\n", opt.n,
	       (double)t_all / 1e9, opt.n / ((double)t_all / 1e9));
	printf("conflicts (409 on the selected-node update): %ld; claims owned: %ld (busiest node %d, nodes with none %d)\n",
	       conflicts, owned, busiest, idle_nodes);
	printf("API writes: %lld in total, %.2f per volume (events included)\n", writes,
	       (double)writes / opt.n);
	printf("RSS of the %d instances: idle %.1f MB, peak %.1f MB, after %.1f MB (sum)\n", r.n,
	       idle_kb / 1024.0, atomic_load(&r.peak_sum_kb) / 1024.0, end_kb / 1024.0);
	printf("memory of the %d instances after: PSS %.1f MB (shared libraries counted once), private anonymous %.1f MB (sum)\n",
	       r.n, pss_kb / 1024.0, anon_kb / 1024.0);
	printf("CPU of the instances: %.1f s in total\n", cpu);
	bench_cpu_print(&cpus, "the provisioning");
	printf("RESULT nodes=%d n=%d base_delay=%s total_s=%.3f volumes_per_s=%.1f conflicts=%ld "
	       "writes=%lld rss_sum_peak_kb=%ld rss_sum_idle_kb=%ld pss_sum_kb=%ld anon_sum_kb=%ld cpu_s=%.1f\n",
	       r.n, opt.n, base, (double)t_all / 1e9, opt.n / ((double)t_all / 1e9), conflicts, writes,
	       atomic_load(&r.peak_sum_kb), idle_kb, pss_kb, anon_kb, cpu);

	kube_informer_stop(pvi);
	kube_informer_free(pvi);
	for (int i = 0; i < r.n; i++)
		kill(r.prov[i], SIGTERM);
	for (int i = 0; i < r.n; i++)
		waitpid(r.prov[i], NULL, 0);
	for (int i = 0; i < r.n; i++)
		kill(r.drv[i], SIGTERM);
	for (int i = 0; i < r.n; i++)
		waitpid(r.drv[i], NULL, 0);
	bench_stop(emu);
	free(r.prov);
	free(r.drv);
	return 0;
}

int main(int argc, char **argv)
{
	struct flagset *fs = flags_new("provisioner_bench", "provisioner_bench [flags]");
	char self[PATH_MAX], defbin[PATH_MAX + 16], defprov[PATH_MAX + 40], err[512];
	char tmp[] = "/tmp/kcsi-prov-bench.XXXXXX";
	char kcpath[PATH_MAX + 64], sock[PATH_MAX + 64], log[PATH_MAX + 64], addr[PATH_MAX + 80];
	char b0[PATH_MAX + 64], b1[PATH_MAX + 64], wt[32];

	ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
	self[sl > 0 ? sl : 0] = '\0';
	*strrchr(self, '/') = '\0'; /* <build>/tests */
	snprintf(defbin, sizeof(defbin), "%s/../bin", self);
	snprintf(defprov, sizeof(defprov), "%s/csi-provisioner", defbin);
	flags_string(fs, "provisioner", &opt.provisioner, defprov, "provisioner binary under test (upstream flags)");
	flags_string(fs, "bin", &opt.bin, defbin, "folder with kube-emulator and kcsi-loopplugin");
	flags_string(fs, "tests", &opt.tests, self, "folder with csi-testdriver");
	flags_string(fs, "driver", &opt.driver, "test", "test: in-memory csi-testdriver; loop: kcsi-loopplugin");
	flags_int(fs, "n", &opt.n, 1000, "claims to provision");
	flags_int(fs, "cached", &opt.cached, 0, "claims of another provisioner created first");
	flags_int(fs, "worker-threads", &opt.workers, 100, "--worker-threads of the provisioner");
	flags_int(fs, "node-deployment", &opt.nodes, 0,
		  "run this many --node-deployment provisioners (each with its own csi-testdriver) instead of one");
	flags_duration(fs, "base-delay", &opt.base_delay, NSEC_PER_SEC,
		       "--node-deployment-base-delay of the instances");
	flags_duration(fs, "max-delay", &opt.max_delay, 60 * NSEC_PER_SEC,
		       "--node-deployment-max-delay of the instances");
	log_register_flags(fs);
	flags_parse_or_exit(fs, argc, argv);
	if (opt.n <= 0)
		bench_die("-n must be positive");
	if (!mkdtemp(tmp))
		bench_die("mkdtemp failed");
	drvname = strcmp(opt.driver, "loop") ? "testdriver.kcsi.dev" : "loop.kcsi.io";

	snprintf(kcpath, sizeof(kcpath), "%s/kubeconfig", tmp);
	snprintf(sock, sizeof(sock), "%s/csi.sock", tmp);
	snprintf(addr, sizeof(addr), "unix://%s", sock);
	snprintf(b0, sizeof(b0), "%s/kube-emulator", opt.bin);
	snprintf(log, sizeof(log), "%s/emulator.log", tmp);
	char *eargv[] = { b0, "--listen", "127.0.0.1:0", "--write-kubeconfig", kcpath, NULL };
	pid_t emu = bench_spawn(eargv, log);
	if (!bench_wait_file(kcpath, false, 10 * NSEC_PER_SEC))
		bench_die("kube-emulator did not start (see %s)", log);
	if (opt.nodes > 0) {
		struct kube_config *ncfg = kube_config_load(kcpath, NULL, NULL, err, sizeof(err));
		if (!ncfg)
			bench_die("%s", err);
		struct kube_client_opts nko = { .component = "provisioner_bench", .qps = 0 };
		kc = kube_client_new(ncfg, &nko, err, sizeof(err));
		if (!kc)
			bench_die("%s", err);
		drvname = "testdriver.kcsi.dev";
		bench_create_or_die(kc, &KUBE_RES_STORAGECLASSES, NULL,
			      json_pack("{s:s, s:s, s:{s:s}, s:s, s:s}", "apiVersion", "storage.k8s.io/v1",
					"kind", "StorageClass", "metadata", "name", "bench", "provisioner",
					drvname, "reclaimPolicy", "Delete"));
		int rc = run_nodes(tmp, kcpath, emu);
		kube_client_free(kc);
		kube_config_free(ncfg);
		char cmd[PATH_MAX + 16];
		snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", tmp);
		free(t_create);
		free(t_pv);
		flags_free(fs);
		return rc;
	}
	pid_t drv;
	snprintf(log, sizeof(log), "%s/driver.log", tmp);
	if (!strcmp(opt.driver, "loop")) {
		char pool[PATH_MAX + 16];
		snprintf(pool, sizeof(pool), "%s/pool", tmp);
		mkdir(pool, 0755);
		snprintf(b1, sizeof(b1), "%s/kcsi-loopplugin", opt.bin);
		char *dargv[] = { b1, "--mode", "controller", "--endpoint", addr, "--nodeid", "node-0",
				  "--pool-dir", pool, NULL };
		drv = bench_spawn(dargv, log);
	} else {
		snprintf(b1, sizeof(b1), "%s/csi-testdriver", opt.tests);
		char *dargv[] = { b1, "--endpoint", addr, "--threads", "16", NULL };
		drv = bench_spawn(dargv, log);
	}
	if (!bench_wait_file(sock, true, 10 * NSEC_PER_SEC))
		bench_die("driver did not start (see %s)", log);

	struct kube_config *cfg = kube_config_load(kcpath, NULL, NULL, err, sizeof(err));
	if (!cfg)
		bench_die("%s", err);
	struct kube_client_opts ko = { .component = "provisioner_bench", .qps = 0 };
	kc = kube_client_new(cfg, &ko, err, sizeof(err));
	if (!kc)
		bench_die("%s", err);
	bench_create_or_die(kc, &KUBE_RES_STORAGECLASSES, NULL,
		      json_pack("{s:s, s:s, s:{s:s}, s:s, s:s}", "apiVersion", "storage.k8s.io/v1",
				"kind", "StorageClass", "metadata", "name", "bench", "provisioner", drvname,
				"reclaimPolicy", "Delete"));
	/* The node the driver runs on, as kubelet and the registrar leave it: a provisioner with
	 * topology refuses an immediate claim until some node registered the driver's keys. */
	const char *zkey = strcmp(opt.driver, "loop") ? "topology.kcsi.dev/zone" : "topology.loop.kcsi.io/zone";
	const char *zval = strcmp(opt.driver, "loop") ? "z1" : "local";
	bench_create_or_die(kc, &KUBE_RES_NODES, NULL,
		      json_pack("{s:s, s:s, s:{s:s, s:{s:s}}}", "apiVersion", "v1", "kind", "Node",
				"metadata", "name", "node-0", "labels", zkey, zval));
	bench_create_or_die(kc, &KUBE_RES_CSINODES, NULL,
		      json_pack("{s:s,s:s,s:{s:s},s:{s:[{s:s,s:s,s:[s]}]}}", "apiVersion",
				"storage.k8s.io/v1", "kind", "CSINode", "metadata", "name", "node-0",
				"spec", "drivers", "name", drvname, "nodeID", "node-0", "topologyKeys",
				zkey));
	if (opt.cached > 0) {
		int64_t t0 = mono_now_ns();
		bench_parallel(opt.cached, make_cached, LOADERS);
		printf("created %d claims of another provisioner in %.1f s\n", opt.cached,
		       (double)(mono_now_ns() - t0) / 1e9);
	}

	snprintf(log, sizeof(log), "%s/provisioner.log", tmp);
	snprintf(wt, sizeof(wt), "%d", opt.workers);
	char *pargv[] = { (char *)opt.provisioner, "--csi-address", addr, "--kubeconfig", kcpath,
			  "--kube-api-qps", "100000", "--kube-api-burst", "100000", "--worker-threads",
			  wt, "--timeout", "60s", NULL };
	pid_t prov = bench_spawn(pargv, log);
	/* Start-up and cache sync (the log line comes after every informer synced), then settle. */
	int64_t up_end = mono_now_ns() + 60 * NSEC_PER_SEC;
	while (!count_lines(log, "Started provisioner controller")) {
		if (mono_now_ns() > up_end || waitpid(prov, NULL, WNOHANG) == prov)
			bench_die("the provisioner did not start (see %s)", log);
		sleep_ns(50 * NSEC_PER_MSEC);
	}
	sleep_ns(NSEC_PER_SEC);
	long idle_kb = bench_status_kb(prov, "VmRSS"), idle_anon_kb = bench_status_kb(prov, "RssAnon");

	t_create = xcalloc((size_t)opt.n, sizeof(int64_t));
	t_pv = xcalloc((size_t)opt.n, sizeof(int64_t));
	struct kube_informer_opts io = { .kind = &KUBE_KIND_PERSISTENTVOLUME };
	struct kube_informer *pvi = kube_informer_new(kc, &io);
	struct kube_handlers h = { on_pv, on_pv_update, NULL, NULL };
	kube_informer_add_handlers(pvi, &h);
	kube_informer_start(pvi);
	kube_informer_wait_synced(pvi, 10 * NSEC_PER_SEC);

	struct bench_mem mem;
	struct bench_cpu cpus = { 0 };
	bench_cpu_add(&cpus, "provisioner", prov);
	bench_cpu_add(&cpus, "kube-emulator", emu);
	bench_cpu_add(&cpus, strcmp(opt.driver, "loop") ? "csi-testdriver" : "kcsi-loopplugin", drv);
	bench_mem_start(&mem, prov);
	bench_cpu_start(&cpus);
	long long rv0 = current_rv();
	int64_t t0 = mono_now_ns();
	bench_parallel(opt.n, make_pvc, LOADERS);
	int64_t end = mono_now_ns() + 600 * NSEC_PER_SEC;
	while (atomic_load(&n_pv) < opt.n) {
		if (mono_now_ns() > end || waitpid(prov, NULL, WNOHANG) == prov)
			bench_die("stopped at %d of %d PVs (see %s)", atomic_load(&n_pv), opt.n, log);
		sleep_ns(NSEC_PER_MSEC);
	}
	int64_t t_all = mono_now_ns() - t0;
	sleep_ns(500 * NSEC_PER_MSEC); /* events and late writes settle */
	long long writes = current_rv() - rv0 - opt.n;
	bench_cpu_stop(&cpus);
	bench_mem_stop(&mem);
	double cpu = cpus.s[0];
	long end_kb = bench_status_kb(prov, "VmRSS");

	int64_t *d = xcalloc((size_t)opt.n, sizeof(int64_t));
	for (int i = 0; i < opt.n; i++)
		d[i] = t_pv[i] - t_create[i];
	qsort(d, (size_t)opt.n, sizeof(int64_t), cmp64);
	double p50 = (double)d[opt.n / 2] / 1e6;
	double p99 = (double)d[(opt.n * 99) / 100 >= opt.n ? opt.n - 1 : (opt.n * 99) / 100] / 1e6;

	printf("provisioner: %s  driver: %s  claims: %d  other claims cached: %d\n", opt.provisioner,
	       opt.driver, opt.n, opt.cached);
	printf("time to all PVs: %.2f s (%.0f PVs/s)\n", (double)t_all / 1e9,
	       opt.n / ((double)t_all / 1e9));
	printf("latency claim -> PV: p50 %.1f ms, p99 %.1f ms\n", p50, p99);
	printf("API writes per provision: %.2f (events included)\n", (double)writes / opt.n);
	printf("RSS: idle %.1f MB, peak %.1f MB, after %.1f MB\n", idle_kb / 1024.0,
	       mem.peak_rss_kb / 1024.0, end_kb / 1024.0);
	printf("private memory (RssAnon, without shared library pages): idle %.1f MB, peak %.1f MB\n",
	       idle_anon_kb / 1024.0, mem.peak_anon_kb / 1024.0);
	printf("CPU: %.2f s for %d provisions (%.3f s per 1000)\n", cpu, opt.n, cpu * 1000.0 / opt.n);
	bench_cpu_print(&cpus, "the provisioning");
	static const char *const keys[] = { "provisioner", "emulator", "driver" };
	char kv[256] = "";
	bench_cpu_kv(&cpus, keys, kv, sizeof(kv));
	printf("RESULT n=%d cached=%d total_s=%.3f p50_ms=%.1f p99_ms=%.1f writes_per_op=%.2f "
	       "rss_peak_kb=%ld rss_idle_kb=%ld anon_idle_kb=%ld anon_peak_kb=%ld cpu_s=%.3f%s\n",
	       opt.n, opt.cached, (double)t_all / 1e9, p50, p99, (double)writes / opt.n,
	       mem.peak_rss_kb, idle_kb, idle_anon_kb, mem.peak_anon_kb, cpu, kv);

	kube_informer_stop(pvi);
	kube_informer_free(pvi);
	bench_stop(prov);
	bench_stop(drv);
	bench_stop(emu);
	kube_client_free(kc);
	kube_config_free(cfg);
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmp);
	free(d);
	free(t_create);
	free(t_pv);
	flags_free(fs);
	return 0;
}
