/*
 * controller_bench: how fast kcsi-controller-manager's attachdetach controller turns pods into
 * attached volumes (seed 002 end to end, with the in-memory csi-testdriver and kcsi's
 * csi-attacher, so the controller and the API dominate).
 *
 * It runs kube-emulator, csi-testdriver, csi-attacher and kcsi-controller-manager
 * (--controllers attachdetach) as separate processes; creates --nodes Ready nodes with the
 * controller-managed annotation, -n volumes, PVs and bound claims; then creates -n pods at once
 * (pod i on node i % nodes) and records for each the time from its creation to its volume
 * appearing in the node's status.volumesAttached (seen in a watch). Then it deletes the pods and
 * records the time until no VolumeAttachment is left. It prints p50/p99, API writes per attach
 * (every successful write counted by the global resourceVersion, minus the bench's pod creates;
 * includes the attacher's), the controller-manager's node-status writes, its peak RSS and CPU.
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
#include "kube/hmap.h"
#include "kube/informer.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define LOADERS 16

static const char *DRIVER = "testdriver.kcsi.dev";

static struct {
	const char *bin;
	int n, nodes;
} opt;

static char tmp[PATH_MAX];
static struct kube_client *kc;
static struct csi_conn *csi;
static char **volumes;
static int64_t *t_create, *t_attached;
static atomic_int n_attached;
static struct kube_hmap by_uniq = KUBE_HMAP_INIT; /* "kubernetes.io/csi/<drv>^<handle>" -> i+1 */

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

struct sampler {
	pid_t pid;
	atomic_long peak;
	atomic_bool stop;
};

static void *sample_rss(void *arg)
{
	struct sampler *s = arg;

	while (!atomic_load(&s->stop)) {
		long kb = bench_status_kb(s->pid, "VmRSS");
		if (kb > atomic_load(&s->peak))
			atomic_store(&s->peak, kb);
		sleep_ns(20 * NSEC_PER_MSEC);
	}
	return NULL;
}


static void make_objects(int i)
{
	char pv[64], claim[64], node[32], body[256];
	struct kube_err e;
	json_t *r;

	snprintf(pv, sizeof(pv), "bench-pv-%05d", i);
	snprintf(claim, sizeof(claim), "bench-claim-%05d", i);
	snprintf(node, sizeof(node), "node-%d", i % opt.nodes);
	bench_create_or_die(kc, &KUBE_RES_PERSISTENTVOLUMES, NULL,
		      json_pack("{s:s,s:s,s:{s:s},s:{s:{s:s},s:[s],s:s,s:{s:s,s:s}}}", "apiVersion", "v1",
				"kind", "PersistentVolume", "metadata", "name", pv, "spec",
				"capacity", "storage", "1Mi", "accessModes", "ReadWriteOnce",
				"storageClassName", "", "csi", "driver", DRIVER, "volumeHandle", volumes[i]));
	json_t *c = json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:[s],s:{s:{s:s}},s:s,s:s}}", "apiVersion", "v1",
			      "kind", "PersistentVolumeClaim", "metadata", "name", claim, "namespace",
			      "default", "spec", "accessModes", "ReadWriteOnce", "resources", "requests",
			      "storage", "1Mi", "volumeName", pv, "storageClassName", "");
	r = kube_create(kc, &KUBE_RES_PERSISTENTVOLUMECLAIMS, "default", c, &e);
	json_decref(c);
	if (!r && !kube_err_is_already_exists(&e))
		bench_die("create claim: %s", e.message);
	json_decref(r);
	snprintf(body, sizeof(body), "{\"status\":{\"phase\":\"Bound\",\"accessModes\":[\"ReadWriteOnce\"],\"capacity\":{\"storage\":\"1Mi\"}}}");
	r = kube_patch(kc, &KUBE_RES_PERSISTENTVOLUMECLAIMS, "default", claim, true, KUBE_PATCH_MERGE, body, &e);
	if (!r)
		bench_die("claim status: %s", e.message);
	json_decref(r);
}

static void make_pod(int i)
{
	char name[64], claim[64], node[32];
	struct kube_err e;
	json_t *r;

	snprintf(name, sizeof(name), "bench-pod-%05d", i);
	snprintf(claim, sizeof(claim), "bench-claim-%05d", i);
	snprintf(node, sizeof(node), "node-%d", i % opt.nodes);
	json_t *p = json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:s,s:[{s:s,s:s}],s:[{s:s,s:{s:s}}]}}",
			      "apiVersion", "v1", "kind", "Pod", "metadata", "name", name, "namespace",
			      "default", "spec", "nodeName", node, "containers", "name", "c", "image",
			      "busybox", "volumes", "name", "v", "persistentVolumeClaim", "claimName", claim);
	t_create[i] = mono_now_ns();
	r = kube_create(kc, &KUBE_RES_PODS, "default", p, &e);
	json_decref(p);
	if (!r)
		bench_die("create pod: %s", e.message);
	json_decref(r);
}

static void delete_pod(int i)
{
	char name[64];
	struct kube_err e;

	snprintf(name, sizeof(name), "bench-pod-%05d", i);
	if (kube_delete(kc, &KUBE_RES_PODS, "default", name, NULL, NULL, &e) && !kube_err_is_not_found(&e))
		fprintf(stderr, "delete pod: %s\n", e.message);
}

static void on_node(const struct kube_obj *old, const struct kube_obj *o, void *ud)
{
	const struct kube_node *n = kube_node_of(o);
	(void)old, (void)ud;
	for (uint16_t k = 0; n && k < n->nvolumes_attached; k++) {
		size_t i = (size_t)kube_hmap_get(&by_uniq, n->volumes_attached[k].name);
		if (i && !t_attached[i - 1]) {
			t_attached[i - 1] = mono_now_ns();
			atomic_fetch_add(&n_attached, 1);
		}
	}
}
static void on_node_add(const struct kube_obj *o, void *ud) { on_node(NULL, o, ud); }

static int va_count(void)
{
	struct kube_list_opts lo = { 0 };
	struct kube_err e;
	json_t *l = kube_list(kc, &KUBE_RES_VOLUMEATTACHMENTS, NULL, &lo, &e);
	int n;
	if (!l)
		bench_die("list VAs: %s", e.message);
	n = (int)json_array_size(json_object_get(l, "items"));
	json_decref(l);
	return n;
}

static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) || getsockname(fd, (struct sockaddr *)&a, &len))
		bench_die("no free port");
	port = ntohs(a.sin_port);
	close(fd);
	return port;
}

/* One counter of the controller-manager's /metrics (0 when absent). */
static double metric(int port, const char *name)
{
	char cmd[256], line[512];
	double v = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "curl -s http://127.0.0.1:%d/metrics", port);
	f = popen(cmd, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, name, strlen(name)) && line[strlen(name)] == ' ')
			v = atof(line + strlen(name) + 1);
	pclose(f);
	return v;
}

int main(int argc, char **argv)
{
	struct flagset *fs = flags_new("controller_bench", "controller_bench [flags]");
	char path[PATH_MAX + 64], kcpath[PATH_MAX + 64], sock[PATH_MAX + 64], err[512], log[PATH_MAX + 64];
	char self[PATH_MAX], defbin[PATH_MAX + 16], tdbin[PATH_MAX + 64], ep[PATH_MAX + 80];
	pid_t emu, td, att, cm;
	ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);

	self[sl > 0 ? sl : 0] = '\0';
	*strrchr(self, '/') = '\0'; /* <build>/tests */
	snprintf(defbin, sizeof(defbin), "%s/../bin", self);
	flags_string(fs, "bin", &opt.bin, defbin, "folder with kube-emulator, csi-attacher and kcsi-controller-manager");
	flags_int(fs, "n", &opt.n, 1000, "pods, each with its own volume");
	flags_int(fs, "nodes", &opt.nodes, 50, "nodes the pods spread over");
	log_register_flags(fs);
	flags_parse_or_exit(fs, argc, argv);
	if (opt.n < 1 || opt.nodes < 1)
		bench_die("-n and --nodes must be positive");
	signal(SIGPIPE, SIG_IGN);
	snprintf(tmp, sizeof(tmp), "/tmp/kcsi-cbench.XXXXXX");
	if (!mkdtemp(tmp))
		bench_die("mkdtemp: %s", strerror(errno));
	snprintf(kcpath, sizeof(kcpath), "%s/kubeconfig", tmp);
	snprintf(path, sizeof(path), "%s/kube-emulator", opt.bin);
	/* The history bounded by its count alone, as before the 64 MiB default of issue 26, so
	 * that a byte bound reached mid-run adds no relists to the figures. */
	char hist[32];
	snprintf(hist, sizeof(hist), "%d", 20 * opt.n + 1000);
	char *emu_argv[] = { path, "--listen", "127.0.0.1:0", "--write-kubeconfig", kcpath,
			     "--watch-history", hist, "--watch-history-mib", "1024", NULL };
	snprintf(log, sizeof(log), "%s/emulator.log", tmp);
	emu = bench_spawn(emu_argv, log);
	if (!bench_wait_file(kcpath, false, 10 * NSEC_PER_SEC))
		bench_die("kube-emulator did not start (see %s)", log);
	snprintf(sock, sizeof(sock), "%s/td.sock", tmp);
	snprintf(ep, sizeof(ep), "unix://%s", sock);
	snprintf(tdbin, sizeof(tdbin), "%s/csi-testdriver", self);
	char *td_argv[] = { tdbin, "--endpoint", ep, "--threads", "16", NULL };
	snprintf(log, sizeof(log), "%s/driver.log", tmp);
	td = bench_spawn(td_argv, log);
	if (!bench_wait_file(sock, true, 10 * NSEC_PER_SEC))
		bench_die("csi-testdriver did not start (see %s)", log);
	struct kube_config *cfg = kube_config_load(kcpath, NULL, NULL, err, sizeof(err));
	struct kube_client_opts ko = { .component = "controller_bench", .qps = 0 };
	if (!cfg || !(kc = kube_client_new(cfg, &ko, err, sizeof(err))))
		bench_die("%s", err);
	struct csi_conn_opts co = CSI_CONN_OPTS_INIT;
	co.connect_timeout_ns = 10 * NSEC_PER_SEC;
	if (!(csi = csi_connect(ep, &co, err, sizeof(err))))
		bench_die("%s", err);
	volumes = xcalloc((size_t)opt.n, sizeof(char *));
	t_create = xcalloc((size_t)opt.n, sizeof(int64_t));
	t_attached = xcalloc((size_t)opt.n, sizeof(int64_t));
	fprintf(stderr, "setup: %d volumes, PVs and bound claims, %d nodes\n", opt.n, opt.nodes);
	bench_parallel(opt.n, make_volume, LOADERS);
	for (int i = 0; i < opt.n; i++) {
		char u[512];
		snprintf(u, sizeof(u), "kubernetes.io/csi/%s^%s", DRIVER, volumes[i]);
		kube_hmap_put(&by_uniq, u, (void *)(size_t)(i + 1));
	}
	for (int k = 0; k < opt.nodes; k++) {
		char node[32];
		struct kube_err e;
		snprintf(node, sizeof(node), "node-%d", k);
		bench_create_or_die(kc, &KUBE_RES_NODES, NULL,
			      json_pack("{s:s,s:s,s:{s:s,s:{s:s}}}", "apiVersion", "v1", "kind", "Node",
					"metadata", "name", node, "annotations",
					"volumes.kubernetes.io/controller-managed-attach-detach", "true"));
		json_t *r = kube_patch(kc, &KUBE_RES_NODES, NULL, node, true, KUBE_PATCH_MERGE,
				       "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}", &e);
		if (!r)
			bench_die("node status: %s", e.message);
		json_decref(r);
		bench_create_or_die(kc, &KUBE_RES_CSINODES, NULL,
			      json_pack("{s:s,s:s,s:{s:s},s:{s:[{s:s,s:s}]}}", "apiVersion",
					"storage.k8s.io/v1", "kind", "CSINode", "metadata", "name",
					node, "spec", "drivers", "name", DRIVER, "nodeID", node));
	}
	bench_parallel(opt.n, make_objects, LOADERS);

	struct kube_informer_opts io = { .kind = &KUBE_KIND_NODE_T };
	struct kube_informer *inf = kube_informer_new(kc, &io);
	struct kube_handlers h = { on_node_add, on_node, NULL, NULL };
	kube_informer_add_handlers(inf, &h);
	kube_informer_start(inf);
	kube_informer_wait_synced(inf, 10 * NSEC_PER_SEC);

	char csiaddr[PATH_MAX + 80], port_s[16], endpoint[64];
	snprintf(csiaddr, sizeof(csiaddr), "unix://%s", sock);
	snprintf(path, sizeof(path), "%s/csi-attacher", opt.bin);
	char *att_argv[] = { path, "--csi-address", csiaddr, "--kubeconfig", kcpath, "--worker-threads",
			     "10", "--kube-api-qps", "10000", "--kube-api-burst", "10000", NULL };
	snprintf(log, sizeof(log), "%s/attacher.log", tmp);
	att = bench_spawn(att_argv, log);
	int port = free_port();
	snprintf(port_s, sizeof(port_s), "%d", port);
	snprintf(endpoint, sizeof(endpoint), "127.0.0.1:%d", port);
	char cmpath[PATH_MAX + 64];
	snprintf(cmpath, sizeof(cmpath), "%s/kcsi-controller-manager", opt.bin);
	char *cm_argv[] = { cmpath, "--kubeconfig", kcpath, "--controllers", "attachdetach",
			    "--kube-api-qps", "10000", "--kube-api-burst", "10000",
			    "--http-endpoint", endpoint, NULL };
	snprintf(log, sizeof(log), "%s/cm.log", tmp);
	cm = bench_spawn(cm_argv, log);
	sleep_ns(2 * NSEC_PER_SEC);
	if (waitpid(cm, NULL, WNOHANG) == cm || waitpid(att, NULL, WNOHANG) == att)
		bench_die("a controller exited at start (see %s)", tmp);
	long rss_start = bench_status_kb(cm, "VmRSS");
	struct sampler smp = { .pid = cm };
	pthread_t sampler;
	pthread_create(&sampler, NULL, sample_rss, &smp);
	double cpu0 = bench_cpu_s(cm);
	double sw0 = metric(port, "kcsi_attachdetach_node_status_writes_total");
	long long rv0 = current_rv();
	int64_t t0 = mono_now_ns();
	bench_parallel(opt.n, make_pod, LOADERS);
	int64_t end = mono_now_ns() + 600 * NSEC_PER_SEC;
	while (atomic_load(&n_attached) < opt.n && mono_now_ns() < end)
		sleep_ns(NSEC_PER_MSEC);
	if (atomic_load(&n_attached) < opt.n)
		bench_die("timed out: %d of %d volumes in volumesAttached", atomic_load(&n_attached), opt.n);
	int64_t t1 = mono_now_ns();
	sleep_ns(500 * NSEC_PER_MSEC);
	long long rv1 = current_rv();
	double sw1 = metric(port, "kcsi_attachdetach_node_status_writes_total");
	double cpu1 = bench_cpu_s(cm);
	long rss_idle = bench_status_kb(cm, "VmRSS");
	int64_t t2 = mono_now_ns();
	bench_parallel(opt.n, delete_pod, LOADERS);
	end = mono_now_ns() + 600 * NSEC_PER_SEC;
	while (va_count() > 0 && mono_now_ns() < end)
		sleep_ns(50 * NSEC_PER_MSEC);
	int64_t t3 = mono_now_ns();
	double cpu2 = bench_cpu_s(cm);
	atomic_store(&smp.stop, true);
	pthread_join(sampler, NULL);

	double a50, a99;
	percentiles(t_create, t_attached, &a50, &a99);
	double attach_s = (double)(t1 - t0) / 1e9, detach_s = (double)(t3 - t2) / 1e9;
	double wpa = (double)(rv1 - rv0 - opt.n) / opt.n;
	double swpa = (sw1 - sw0) / opt.n;
	printf("load: %d pods over %d nodes, each pod with its own ReadWriteOnce volume; csi-testdriver + csi-attacher\n",
	       opt.n, opt.nodes);
	printf("attach: pod creation -> volumesAttached: all in %.3f s, %.0f/s, p50 %.1f ms, p99 %.1f ms\n",
	       attach_s, opt.n / attach_s, a50, a99);
	printf("API writes per attach: %.2f in all; controller-manager: 1 VolumeAttachment create, 1 pod event (SuccessfulAttachVolume), %.2f node status writes; csi-attacher: VA finalizer, VA status, PV finalizer (each PV here is attached for the first time)\n",
	       wpa, swpa);
	printf("detach: pods deleted -> no VolumeAttachment left in %.3f s\n", detach_s);
	printf("kcsi-controller-manager: RSS %ld kB at start, %ld kB peak, %ld kB after attach; CPU %.2f s attach, %.2f s detach\n",
	       rss_start, atomic_load(&smp.peak), rss_idle, cpu1 - cpu0, cpu2 - cpu1);
	printf("controller_bench n=%d nodes=%d total_s=%.3f p50_ms=%.1f p99_ms=%.1f writes_per_attach=%.2f status_writes_per_attach=%.2f rss_peak_kb=%ld cpu_attach_s=%.2f detach_s=%.3f\n",
	       opt.n, opt.nodes, attach_s, a50, a99, wpa, swpa, atomic_load(&smp.peak), cpu1 - cpu0, detach_s);
	fflush(stdout);
	bench_stop(cm);
	bench_stop(att);
	kube_informer_stop(inf);
	kube_informer_free(inf);
	bench_parallel(opt.n, delete_volume, LOADERS);
	csi_conn_free(csi);
	bench_stop(td);
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
