/*
 * kcsi up: start the stack, wait until it is ready, supervise it, take it down without a trace.
 *
 * Start order follows what each piece waits for: the API server first (everything talks to it),
 * then the controller-mode driver, whose name (GetPluginInfo) and capabilities decide the
 * CSIDriver object and the node plugin socket paths; then all the rest at once. "Ready" is what a
 * user needs before `kubectl apply`: every sidecar past its start-up (its HTTP endpoint answers),
 * every driver instance ready by its Probe (its livenessprobe's /healthz), every node Ready with
 * the driver registered in its CSINode.
 *
 * Signals: SIGINT and SIGTERM are blocked and taken with sigtimedwait() in the one loop that also
 * reaps children, so a Ctrl-C at any moment (even during start-up) leads to the same orderly stop.
 *
 * The objects the run keeps on the API server are objects.c's; what it leaves under its work dir,
 * cleanup.c's (the map: up_internal.h).
 */
#include "up/up.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/loop.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/lockfile.h"
#include "base/strbuf.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "csi/client.h"
#include "emulator/emu_server.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/leader.h"
#include "up/crds.h"
#include "up/fleet.h"
#include "up/precheck.h"
#include "up/proc.h"
#include "up/up_internal.h"

#define LOOP_DRIVER "loop.kcsi.io"
/*
 * Client-side rate limits of every API client in the stack. The upstream defaults (5 qps, burst
 * 10 for sidecars) protect a shared production API server; here the API server is ours alone, and
 * at 5 qps a hundred claims would queue for tens of seconds behind the limiter.
 */
#define KUBE_QPS u->kube_qps
#define KUBE_BURST u->kube_burst
#define STOP_GRACE_NS (3 * NSEC_PER_SEC) /* per tier; every kcsi component stops within 1 s */
#define TICK_NS (20 * NSEC_PER_MSEC)

static volatile int stop_signal;

/* ---- small helpers ---- */

/*
 * snprintf for paths below the work dir. up_run() refuses a work dir longer than MAX_DIR_LEN, so
 * with the buffers used here nothing is cut; a cut path would still end in a clear error later.
 */
#define MAX_DIR_LEN 2048
__attribute__((format(printf, 3, 4))) static void pathf(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

static bool executable(const char *path)
{
	return access(path, X_OK) == 0;
}

/* ---- processes ---- */

static struct up_proc *add_proc(struct up *u, const char *name, const char *const *args)
{
	char log_path[PATH_MAX + 64], file[128];
	pathf(file, sizeof(file), "%s", name);
	for (char *p = file; *p; p++)
		if (*p == '/')
			*p = '_';
	pathf(log_path, sizeof(log_path), "%s/logs/%s.log", u->dir, file);
	return up_procs_add(&u->procs, name, log_path, (char *const *)args);
}

/* Adds and starts a kcsi binary with -v and the given arguments (NULL-terminated). */
static struct up_proc *start_kcsi(struct up *u, const char *name, const char *binary, ...)
{
	const char *args[48];
	char path[PATH_MAX + 64], v[32];
	pathf(path, sizeof(path), "%s/%s", u->bin, binary);
	snprintf(v, sizeof(v), "-v=%d", u->cfg->verbosity);
	int n = 0;
	args[n++] = path;
	va_list ap;
	va_start(ap, binary);
	for (const char *a; n < 46 && (a = va_arg(ap, const char *));)
		args[n++] = a;
	va_end(ap);
	args[n++] = v;
	args[n] = NULL;
	struct up_proc *p = add_proc(u, name, args);
	char err[512];
	if (!p) {
		fprintf(stderr, "kcsi up: too many processes\n");
		return NULL;
	}
	p->tier = !strcmp(binary, "kube-emulator") ? TIER_APISERVER
		  : !strcmp(binary, "kcsi-loopplugin") ? TIER_DRIVER : TIER_CLIENT;
	/* up.h: the components no node can do without */
	p->core = !strcmp(binary, "kube-emulator") || !strcmp(binary, "kcsi-controller-manager");
	if (u->node_env[0])
		snprintf(p->env, sizeof(p->env), "NODE_NAME=%s", u->node_env);
	if (up_proc_start(p, err, sizeof(err))) {
		fprintf(stderr, "kcsi up: %s\n", err);
		return NULL;
	}
	return p;
}

static void add_probe(struct up *u, const struct up_proc *p, int port, const char *path)
{
	if (p && u->nprobes < UP_MAX_PROCS)
		u->probes[u->nprobes++] = (struct up_probe){ p, port, path };
}

/* Replaces {endpoint}, {nodeid} and {mode} in the user's driver command. */
static char *expand_driver_cmd(const char *tmpl, const char *endpoint, const char *nodeid,
			       const char *mode)
{
	struct strbuf sb;
	strbuf_init(&sb, 256);
	strbuf_addstr(&sb, "exec ");
	for (const char *p = tmpl; *p;) {
		if (!strncmp(p, "{endpoint}", 10)) {
			strbuf_addstr(&sb, endpoint);
			p += 10;
		} else if (!strncmp(p, "{nodeid}", 8)) {
			strbuf_addstr(&sb, nodeid);
			p += 8;
		} else if (!strncmp(p, "{mode}", 6)) {
			strbuf_addstr(&sb, mode);
			p += 6;
		} else {
			strbuf_addch(&sb, *p++);
		}
	}
	return strbuf_detach(&sb, NULL);
}

/* Starts the driver for a node (nodeid) or the controller (nodeid "controller"). */
static struct up_proc *start_driver(struct up *u, const char *name, const char *sock,
				    const char *nodeid, const char *mode)
{
	char endpoint[PATH_MAX + 16];
	snprintf(endpoint, sizeof(endpoint), "unix://%s", sock);
	if (!u->cfg->driver_cmd) {
		char pool[PATH_MAX + 8];
		pathf(pool, sizeof(pool), "%s/pool", u->dir);
		/* Distributed: each node's volumes are reachable on that node only (its own zone). */
		return start_kcsi(u, name, "kcsi-loopplugin", "--mode", mode, "--endpoint", endpoint,
				  "--nodeid", nodeid, "--pool-dir", pool, "--zone",
				  u->cfg->distributed ? nodeid : "local", NULL);
	}
	char *cmd = expand_driver_cmd(u->cfg->driver_cmd, endpoint, nodeid, mode);
	const char *args[] = { "/bin/sh", "-c", cmd, NULL };
	struct up_proc *p = add_proc(u, name, args);
	free(cmd);
	char err[512];
	if (p)
		p->tier = TIER_DRIVER;
	if (!p || up_proc_start(p, err, sizeof(err))) {
		fprintf(stderr, "kcsi up: %s\n", p ? err : "too many processes");
		return NULL;
	}
	return p;
}

/* ---- waiting ---- */

static void print_status(struct up *u);

/*
 * Sleeps one tick while watching for a stop signal and for children that exit (restarted, or
 * given up: proc.h). Returns -1 on a stop signal or when a core component was given up.
 */
static int tick(struct up *u)
{
	struct timespec ts = { 0, TICK_NS };
	int sig = sigtimedwait(&u->sigs, NULL, &ts);
	if (sig == SIGINT || sig == SIGTERM) {
		stop_signal = sig;
		return -1;
	}
	if (sig == SIGUSR1) { /* kill -USR1: the status table again, with today's PIDs */
		print_status(u);
		printf("export KUBECONFIG=%s\n", u->kubeconfig);
		fflush(stdout);
	}
	return up_procs_reap(&u->procs) < 0 ? -1 : 0;
}

static bool file_has(const char *path, const char *needle)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	char buf[4096];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return strstr(buf, needle) != NULL;
}

static int wait_for_file(struct up *u, const char *path, const char *needle, int64_t deadline)
{
	while (!file_has(path, needle)) {
		if (tick(u))
			return -1;
		if (mono_now_ns() > deadline) {
			fprintf(stderr, "kcsi up: %s did not appear in time\n", path);
			return -1;
		}
	}
	return 0;
}

/* Asks the controller-mode driver its name and whether it needs ControllerPublish. */
static int learn_driver(struct up *u, const char *sock, int64_t deadline)
{
	char endpoint[PATH_MAX + 16], err[512];
	pathf(endpoint, sizeof(endpoint), "unix://%s", sock);
	struct stat st;
	while (stat(sock, &st) != 0) {
		if (tick(u))
			return -1;
		if (u->first_driver && u->first_driver->given_up) {
			fprintf(stderr, "kcsi up: without %s nothing can start (its name decides the "
					"CSIDriver and the sockets)\n", u->first_driver->name);
			return -1;
		}
		if (mono_now_ns() > deadline) {
			fprintf(stderr, "kcsi up: the driver did not create %s in time\n", sock);
			return -1;
		}
	}
	struct csi_conn_opts o = CSI_CONN_OPTS_INIT;
	o.connect_timeout_ns = 5 * NSEC_PER_SEC;
	struct csi_conn *c = csi_connect(endpoint, &o, err, sizeof(err));
	if (!c) {
		fprintf(stderr, "kcsi up: driver: %s\n", err);
		return -1;
	}
	int rc = -1;
	Csi__V1__GetPluginInfoRequest ireq = CSI__V1__GET_PLUGIN_INFO_REQUEST__INIT;
	Csi__V1__GetPluginInfoResponse *info = NULL;
	Csi__V1__ControllerGetCapabilitiesRequest creq = CSI__V1__CONTROLLER_GET_CAPABILITIES_REQUEST__INIT;
	Csi__V1__ControllerGetCapabilitiesResponse *caps = NULL;
	struct csi_status cs;
	if (csi_get_plugin_info(c, &ireq, &info, 5 * NSEC_PER_SEC, &cs)) {
		fprintf(stderr, "kcsi up: driver GetPluginInfo: %s\n", cs.message);
		goto out;
	}
	snprintf(u->driver_name, sizeof(u->driver_name), "%s", info->name ? info->name : "");
	if (!u->driver_name[0]) {
		fprintf(stderr, "kcsi up: the driver's GetPluginInfo returned no name\n");
		goto out;
	}
	u->attach_required = false;
	if (csi_controller_get_capabilities(c, &creq, &caps, 5 * NSEC_PER_SEC, &cs) == 0) {
		for (size_t i = 0; i < caps->n_capabilities; i++) {
			Csi__V1__ControllerServiceCapability *cap = caps->capabilities[i];
			if (cap->rpc && cap->rpc->type ==
			    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__PUBLISH_UNPUBLISH_VOLUME)
				u->attach_required = true;
			if (cap->rpc && cap->rpc->type ==
			    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_SNAPSHOT)
				u->snapshots = true;
		}
	}
	rc = 0;
out:
	csi_msg_free(&info->base);
	if (caps)
		csi_msg_free(&caps->base);
	csi_conn_free(c);
	return rc;
}

static bool probes_ready(struct up *u)
{
	for (int i = 0; i < u->nprobes; i++) {
		/* a livenessprobe of a driver given up stays unready: not waited for */
		const struct up_proc *p = u->probes[i].proc;
		const char *slash = strchr(p->name, '/');
		if (p->given_up || (slash && up_instance_given_up(u, slash + 1)))
			continue;
		if (up_http_status(u->probes[i].port, u->probes[i].path) != 200)
			return false;
	}
	return true;
}

/* ---- start-up ---- */

/* A free 127.0.0.1 port as "127.0.0.1:P" in arg (48 bytes); returns P or -1 (reported). */
static int port_arg(char *arg)
{
	int port = up_free_port();
	if (port < 0)
		fprintf(stderr, "kcsi up: no free TCP port on 127.0.0.1\n");
	else
		snprintf(arg, 48, "127.0.0.1:%d", port);
	return port;
}

/* Starts a sidecar and registers its HTTP endpoint (path) as a readiness probe. */
#define START_PROBED(u, name, binary, path, ...)                                                \
	do {                                                                                     \
		char arg_[48];                                                                   \
		int port_ = port_arg(arg_);                                                      \
		struct up_proc *p_ = port_ < 0 ? NULL                                            \
					       : start_kcsi(u, name, binary, __VA_ARGS__,         \
							    "--http-endpoint", arg_, NULL);      \
		if (!p_)                                                                         \
			return -1;                                                               \
		add_probe(u, p_, port_, path);                                                   \
	} while (0)

/*
 * Group snapshots are on by default (external-snapshotter v8.7: the gate is GA). Without the
 * group API the gate is turned off, rather than left to the components' own check, which in
 * snapshot-controller waits --retry-crd-interval-max (30 s) for the kinds before going on.
 * An empty --feature-gates changes nothing.
 */
static const char *group_gate(const struct up *u)
{
	return u->no_group_api ? "CSIVolumeGroupSnapshot=false" : "";
}

/*
 * The sidecars of one controller-mode driver instance at sock: provisioner, attacher, resizer
 * (loop driver: a --driver-cmd driver may not expand, and csi-resizer exits then), snapshotter
 * (when the driver takes snapshots) and a livenessprobe. Central layout only.
 */
static int start_controller_sidecars(struct up *u, const char *sock)
{
	START_PROBED(u, "csi-provisioner", "csi-provisioner", "/metrics", "--csi-address", sock,
		     "--kubeconfig", u->kubeconfig, KUBE_QPS, KUBE_BURST,
		     "--extra-create-metadata"); /* Topology is on by default (upstream v5+) */
	START_PROBED(u, "csi-attacher", "csi-attacher", "/metrics", "--csi-address", sock,
		     "--kubeconfig", u->kubeconfig, KUBE_QPS, KUBE_BURST);
	if (!u->cfg->driver_cmd)
		START_PROBED(u, "csi-resizer", "csi-resizer", "/metrics", "--csi-address", sock,
			     "--kubeconfig", u->kubeconfig, KUBE_QPS, KUBE_BURST);
	if (u->snapshots && !u->no_snapshot_api)
		START_PROBED(u, "csi-snapshotter", "csi-snapshotter", "/metrics", "--csi-address",
			     sock, "--kubeconfig", u->kubeconfig, KUBE_QPS, KUBE_BURST,
			     "--feature-gates", group_gate(u));
	/* One livenessprobe per driver instance, as a driver's pod carries one: its /healthz is the
	 * driver's Probe, so "ready" also means every driver says it is ready. */
	START_PROBED(u, "livenessprobe/controller", "livenessprobe", "/healthz", "--csi-address", sock);
	return 0;
}

/* Cluster-wide controllers: kcsi-controller-manager (unless the cluster brings its own) and
 * snapshot-controller (it serves any driver); then the controller-mode sidecars if central. */
static int start_controllers(struct up *u)
{
	if (!u->cfg->no_controllers)
		START_PROBED(u, "kcsi-controller-manager", "kcsi-controller-manager", "/healthz",
			     "--kubeconfig", u->kubeconfig, KUBE_QPS, KUBE_BURST, "--controllers",
			     "*,volume-scheduler");
	if (u->no_snapshot_api)
		goto sidecars;
	START_PROBED(u, "snapshot-controller", "snapshot-controller", "/metrics", "--kubeconfig",
		     u->kubeconfig, KUBE_QPS, KUBE_BURST, "--feature-gates", group_gate(u),
		     /* distributed: each content labelled with its volume's node */
		     u->cfg->distributed ? "--enable-distributed-snapshotting=true"
					 : "--enable-distributed-snapshotting=false");
sidecars:
	if (u->cfg->distributed) {
		/* The nodes' attachers elect their leader through this Lease: ours to delete too. */
		char lease[256];
		kube_leader_lease_name("external-attacher-leader", u->driver_name, lease, sizeof(lease));
		if (u->attach_required)
			up_remember(u, &KUBE_RES_LEASES, "default", lease);
		return 0;
	}
	char sock[PATH_MAX + 32];
	pathf(sock, sizeof(sock), "%s/controller/csi.sock", u->dir);
	return start_controller_sidecars(u, sock);
}

/*
 * A node's driver socket. Central: where kubelet's convention puts it, under the driver's name
 * (known by then). Distributed: the node drivers start before anyone knows the name, so below the
 * node's own folder.
 */
static void node_sock(struct up *u, const char *node, char *sock, size_t len)
{
	if (u->cfg->distributed)
		pathf(sock, len, "%s/nodes/%s/csi.sock", u->dir, node);
	else
		pathf(sock, len, "%s/nodes/%s/plugins/%s/csi.sock", u->dir, node, u->driver_name);
}

/* Starts node i's driver instance: node mode, or all services when distributed. */
static int start_node_driver(struct up *u, int i)
{
	char node[32], sock[PATH_MAX + 320], dir[PATH_MAX + 320], name[64];
	snprintf(node, sizeof(node), "node-%d", i);
	node_sock(u, node, sock, sizeof(sock));
	snprintf(dir, sizeof(dir), "%s", sock);
	*strrchr(dir, '/') = '\0';
	if (up_mkdirs(dir)) {
		fprintf(stderr, "kcsi up: mkdir %s: %s\n", dir, strerror(errno));
		return -1;
	}
	unlink(sock);
	snprintf(name, sizeof(name), "driver/%s", node);
	return start_driver(u, name, sock, node, u->cfg->distributed ? "all" : "node") ? 0 : -1;
}

/*
 * Distributed, with NODE_NAME = the node: the sidecars of a node-local driver's deployment,
 * csi-provisioner --node-deployment (the claims whose pods this node takes), csi-resizer
 * --node-deployment (kcsi's: the volumes whose PV node affinity admits this node) and, when the
 * driver takes snapshots, csi-snapshotter --node-deployment (the contents snapshot-controller
 * --enable-distributed-snapshotting labels with this node).
 */
static int start_node_local_sidecars(struct up *u, const char *node, const char *sock)
{
	char name[96];
	snprintf(name, sizeof(name), "csi-provisioner/%s", node);
	START_PROBED(u, name, "csi-provisioner", "/metrics", "--csi-address", sock, "--kubeconfig",
		     u->kubeconfig, KUBE_QPS, KUBE_BURST, "--extra-create-metadata",
		     "--node-deployment");
	snprintf(name, sizeof(name), "csi-resizer/%s", node);
	START_PROBED(u, name, "csi-resizer", "/metrics", "--csi-address", sock, "--kubeconfig",
		     u->kubeconfig, KUBE_QPS, KUBE_BURST, "--node-deployment");
	if (u->snapshots && !u->no_snapshot_api) {
		snprintf(name, sizeof(name), "csi-snapshotter/%s", node);
		START_PROBED(u, name, "csi-snapshotter", "/metrics", "--csi-address", sock,
			     "--kubeconfig", u->kubeconfig, KUBE_QPS, KUBE_BURST,
			     "--node-deployment", "--feature-gates", group_gate(u));
	}
	return 0;
}

/*
 * Distributed: the node-local sidecars above and, when the driver needs ControllerPublish, a
 * csi-attacher. Every node's attacher would act on every VolumeAttachment of the driver, so they
 * elect one leader; the loop driver's controller service publishes for any node from any
 * instance (the pool is shared).
 */
static int start_node_controller_sidecars(struct up *u, const char *node, const char *sock)
{
	char name[96];
	snprintf(u->node_env, sizeof(u->node_env), "%s", node);
	int rc = start_node_local_sidecars(u, node, sock);
	u->node_env[0] = '\0';
	if (rc)
		return -1;
	if (!u->attach_required)
		return 0;
	snprintf(name, sizeof(name), "csi-attacher/%s", node);
	START_PROBED(u, name, "csi-attacher", "/metrics", "--csi-address", sock, "--kubeconfig",
		     u->kubeconfig, KUBE_QPS, KUBE_BURST, "--leader-election",
		     "--leader-election-namespace", "default");
	return 0;
}

/* Node i's registrar, livenessprobe and kcsi-node (its driver already runs). */
static int start_node_sidecars(struct up *u, int i)
{
	char node[32], sock[PATH_MAX + 320], reg[PATH_MAX + 64], root[PATH_MAX + 64], name[96];
	snprintf(node, sizeof(node), "node-%d", i);
	node_sock(u, node, sock, sizeof(sock));
	pathf(root, sizeof(root), "%s/nodes/%s/kubelet", u->dir, node);
	pathf(reg, sizeof(reg), "%s/plugins_registry", root);
	if (up_mkdirs(reg)) {
		fprintf(stderr, "kcsi up: mkdir %s: %s\n", reg, strerror(errno));
		return -1;
	}
	snprintf(name, sizeof(name), "csi-node-driver-registrar/%s", node);
	START_PROBED(u, name, "csi-node-driver-registrar", "/healthz", "--csi-address", sock,
		     "--kubelet-registration-path", sock, "--plugin-registration-path", reg);
	snprintf(name, sizeof(name), "livenessprobe/%s", node);
	START_PROBED(u, name, "livenessprobe", "/healthz", "--csi-address", sock);
	if (u->cfg->distributed && start_node_controller_sidecars(u, node, sock))
		return -1;
	snprintf(name, sizeof(name), "kcsi-node/%s", node);
	return start_kcsi(u, name, "kcsi-node", "--kubeconfig", u->kubeconfig, KUBE_QPS, KUBE_BURST,
			  "--node-name", node, "--root-dir", root, NULL) ? 0 : -1;
}

static void print_status(struct up *u)
{
	for (int i = 0; i < u->procs.n; i++) {
		const struct up_proc *p = &u->procs.p[i];
		const char *url = "";
		char buf[64] = "";
		for (int k = 0; k < u->nprobes; k++)
			if (u->probes[k].proc == p) {
				snprintf(buf, sizeof(buf), "http://127.0.0.1:%d", u->probes[k].port);
				url = buf;
			}
		if (p == u->apiserver && u->kcfg) /* its kubeconfig's URL, the same after a restart */
			url = u->kcfg->server;
		printf("  %-40s pid %-7d %-8s %s\n", p->name, (int)p->pid,
		       p->given_up ? "given up" : p->pid > 0 ? "running" : "stopped", url);
	}
	if (u->external && u->kcfg)
		printf("  %-40s %-11s %-8s %s\n", "API server (--kubeconfig)", "", "", u->kcfg->server);
	if (u->no_snapshot_api)
		printf("  %-40s not running: the cluster serves no snapshot CRDs\n"
		       "  %-40s not running: the cluster serves no snapshot CRDs\n",
		       "snapshot-controller", "csi-snapshotter");
}

/* Whether this run starts the given binary at all. */
static bool needs_binary(const struct up *u, const char *b)
{
	if (!strcmp(b, "kube-emulator"))
		return !u->external;
	if (!strcmp(b, "kcsi-controller-manager"))
		return !u->cfg->no_controllers;
	if (!strcmp(b, "kcsi-loopplugin"))
		return !u->cfg->driver_cmd;
	if (!strcmp(b, "csi-resizer"))
		return !u->cfg->driver_cmd || u->cfg->distributed;
	return true;
}

static int check_binaries_and_dirs(struct up *u)
{
	static const char *const needed[] = { "kube-emulator", "csi-provisioner", "csi-attacher",
					      "kcsi-controller-manager", "csi-node-driver-registrar",
					      "kcsi-node", "livenessprobe", "kcsi-loopplugin", "csi-resizer",
					      "snapshot-controller", "csi-snapshotter" };
	for (size_t i = 0; i < sizeof(needed) / sizeof(needed[0]); i++) {
		char path[PATH_MAX + 64];
		pathf(path, sizeof(path), "%s/%s", u->bin, needed[i]);
		if (needs_binary(u, needed[i]) && !executable(path)) {
			fprintf(stderr, "kcsi up: %s not found or not executable (build it with 'make build', "
					"or point --bin-dir at the kcsi binaries)\n", path);
			return -1;
		}
	}
	char sub[PATH_MAX + 32];
	const char *subs[] = { "logs", "pool", "controller" };
	for (size_t i = 0; i < 3; i++) {
		pathf(sub, sizeof(sub), "%s/%s", u->dir, subs[i]);
		if (up_mkdirs(sub)) {
			fprintf(stderr, "kcsi up: mkdir %s: %s\n", sub, strerror(errno));
			return -1;
		}
	}
	pathf(sub, sizeof(sub), "%s/ready", u->dir);
	unlink(sub);
	return 0;
}

/*
 * Each run starts an empty cluster: what a run before left in a named D (its state file and
 * log; the lock file stays, base/lockfile.h) is removed before kube-emulator starts.
 */
static void remove_state(const char *state)
{
	char log[PATH_MAX + 64];
	pathf(log, sizeof(log), "%s.log", state);
	unlink(state);
	unlink(log);
}

/*
 * kube-emulator restarts on the address its first start bound (--listen 127.0.0.1:0 picked the
 * port), so that the kubeconfig every component read stays true; if another process took the
 * port meanwhile, the restart exits EMU_EXIT_ADDR_IN_USE and the stack stops (proc.h,
 * fatal_exit): a new address would leave every component knocking at the old one.
 */
static void keep_address(struct up *u)
{
	/* the host as the user gave it (0.0.0.0 stays 0.0.0.0), the port as the URL says */
	const char *server = u->kcfg->server, *auth = strstr(server, "://");
	auth = auth ? auth + 3 : server;
	int alen = (int)strcspn(auth, "/");
	const char *port = auth + alen;
	while (port > auth && port[-1] != ':')
		port--;
	const char *colon = strrchr(u->cfg->listen, ':');
	int hlen = colon ? (int)(colon - u->cfg->listen) : 0;
	char addr[256];
	snprintf(addr, sizeof(addr), "%.*s:%.*s", hlen > 200 ? 200 : hlen, u->cfg->listen,
		 (int)(auth + alen - port) > 16 ? 16 : (int)(auth + alen - port), port);
	up_proc_set_arg(u->apiserver, "--listen", addr);
	u->apiserver->fatal_exit = EMU_EXIT_ADDR_IN_USE;
	snprintf(u->apiserver->fatal_why, sizeof(u->apiserver->fatal_why),
		 "it cannot listen on %s again, the address every component's kubeconfig names: "
		 "another process holds that port; stopping the whole stack", addr);
	u->api_checked = u->apiserver->start_ns;
}

/*
 * After kube-emulator was restarted (killed, crashed): once it answers, what kcsi up keeps on
 * it is checked and made again where missing (objects.c), every 200 ms until that succeeds.
 */
static void after_apiserver_restart(struct up *u)
{
	struct up_proc *p = u->apiserver;
	int64_t now = mono_now_ns();
	if (!p || p->pid <= 0 || p->start_ns == u->api_checked || now < u->api_next_check)
		return;
	u->api_next_check = now + 200 * NSEC_PER_MSEC;
	if (up_restore_objects(u, up_fleet_wanted(u->cfg->nodes)) == 0)
		u->api_checked = p->start_ns;
}

/*
 * The API server: ours (kube-emulator, its kubeconfig and state file in D) or the --kubeconfig
 * one; then the client kcsi up itself uses. Returns 0, or -1 (reported).
 */
static int start_apiserver(struct up *u, int64_t deadline)
{
	if (u->external) {
		if (!realpath(u->cfg->kubeconfig, u->kubeconfig)) {
			fprintf(stderr, "kcsi up: --kubeconfig %s: %s\n", u->cfg->kubeconfig, strerror(errno));
			return -1;
		}
	} else {
		char state[PATH_MAX + 32];
		pathf(u->kubeconfig, sizeof(u->kubeconfig), "%s/kubeconfig", u->dir);
		pathf(state, sizeof(state), "%s/kube-emulator.state", u->dir);
		unlink(u->kubeconfig);
		remove_state(state);
		u->apiserver = start_kcsi(u, "kube-emulator", "kube-emulator", "--listen",
					  u->cfg->listen, "--write-kubeconfig", u->kubeconfig,
					  "--state-file", state, NULL);
		if (!u->apiserver || wait_for_file(u, u->kubeconfig, "server:", deadline))
			return -1;
	}
	char err[512];
	u->kcfg = kube_config_from_kubeconfig(u->kubeconfig, err, sizeof(err));
	struct kube_client_opts ko = { .component = "kcsi-up", .qps = -1 };
	if (u->kcfg)
		u->kc = kube_client_new(u->kcfg, &ko, err, sizeof(err));
	if (!u->kc) {
		fprintf(stderr, "kcsi up: %s\n", err);
		return -1;
	}
	if (u->apiserver) {
		ko.timeout_ns = NSEC_PER_SEC;
		ko.max_retries = 1;
		u->kc_quick = kube_client_new(u->kcfg, &ko, err, sizeof(err));
		if (!u->kc_quick) {
			fprintf(stderr, "kcsi up: %s\n", err);
			return -1;
		}
		keep_address(u);
	}
	return 0;
}

/*
 * The driver instance(s) that answer GetPluginInfo before anything else can start: the
 * controller-mode one (central), or every node's (distributed; node-1's is asked).
 */
static int start_first_drivers(struct up *u, char *sock, size_t len)
{
	if (!u->cfg->distributed) {
		pathf(sock, len, "%s/controller/csi.sock", u->dir);
		unlink(sock);
		u->first_driver = start_driver(u, "driver/controller", sock, "controller", "controller");
		return u->first_driver ? 0 : -1;
	}
	for (int i = 1; i <= u->cfg->nodes; i++)
		if (start_node_driver(u, i))
			return -1;
	u->first_driver = &u->procs.p[0]; /* node-1's: the first process added */
	node_sock(u, "node-1", sock, len);
	return 0;
}

/* The nodes above UP_FLEET_ABOVE: three processes for all of them (up/fleet.h). */
static int start_fleet(struct up *u)
{
	struct up_fleet f = { .dir = u->dir, .bin = u->bin, .kubeconfig = u->kubeconfig,
			      .driver_name = u->driver_name, .qps = KUBE_QPS, .burst = KUBE_BURST,
			      .nodes = u->cfg->nodes, .verbosity = u->cfg->verbosity,
			      .procs = &u->procs };
	struct up_fleet_probe pr[UP_FLEET_PROBES];
	if (up_fleet_start(&f, pr))
		return -1;
	for (int i = 0; i < UP_FLEET_PROBES; i++)
		add_probe(u, pr[i].proc, pr[i].port, pr[i].path);
	return 0;
}

/* Everything up to "ready"; returns 0, or -1 (reported) when the stack cannot start. */
static int bring_up(struct up *u)
{
	int64_t deadline = u->t0 + u->cfg->ready_timeout_ns;
	char sock[PATH_MAX + 320];
	if (check_binaries_and_dirs(u) || start_first_drivers(u, sock, sizeof(sock)) ||
	    start_apiserver(u, deadline) || learn_driver(u, sock, deadline))
		return -1;
	if (up_check_snapshot_api(u, deadline) || up_create_csidriver(u, u->kc) || (u->external && up_claim_node_names(u)) || start_controllers(u))
		return -1;
	bool fleet = up_fleet_wanted(u->cfg->nodes);
	if (fleet && start_fleet(u))
		return -1;
	for (int i = 1; i <= u->cfg->nodes && !fleet; i++)
		if ((!u->cfg->distributed && start_node_driver(u, i)) || start_node_sidecars(u, i))
			return -1;
	while (!probes_ready(u) ||
	       !(fleet ? up_fleet_nodes_ready(u->kc, u->driver_name, u->cfg->nodes)
		       : up_nodes_ready(u, u->kc))) {
		if (tick(u))
			return -1;
		if (mono_now_ns() > deadline) {
			fprintf(stderr, "kcsi up: the stack was not ready within %llds; see the logs in %s/logs\n",
				(long long)(u->cfg->ready_timeout_ns / NSEC_PER_SEC), u->dir);
			return -1;
		}
	}
	return 0;
}

/*
 * D: the named one (made when missing) or a new temporary one, then its lock (base/lockfile.h),
 * taken before anything in D is written or removed and held until up_run() returns: a second
 * `kcsi up` on D would rewrite the first's kubeconfig, replace its sockets and, at its exit,
 * unmount and detach the first's volumes. The lock file, D/kcsi-up.lock, is never removed but
 * with a temporary D. Returns 0, or -1 (reported).
 */
static int open_work_dir(struct up *u)
{
	const struct up_config *cfg = u->cfg;
	if (cfg->dir && strlen(cfg->dir) > MAX_DIR_LEN) {
		fprintf(stderr, "kcsi up: --dir is longer than %d characters\n", MAX_DIR_LEN);
		return -1;
	}
	if (cfg->dir && *cfg->dir) {
		if (up_mkdirs(cfg->dir) || !realpath(cfg->dir, u->dir)) {
			fprintf(stderr, "kcsi up: --dir %s: %s\n", cfg->dir, strerror(errno));
			return -1;
		}
	} else {
		pathf(u->dir, sizeof(u->dir), "%s/kcsi-up-XXXXXX",
			 getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
		if (!mkdtemp(u->dir)) {
			fprintf(stderr, "kcsi up: mkdtemp %s: %s\n", u->dir, strerror(errno));
			return -1;
		}
		u->temp_dir = true;
	}
	char lock[PATH_MAX + 16];
	pathf(lock, sizeof(lock), "%s/kcsi-up.lock", u->dir);
	pid_t holder;
	u->lock_fd = lockfile_take(lock, &holder);
	if (u->lock_fd == LOCKFILE_BUSY) {
		if (holder > 0)
			fprintf(stderr, "kcsi up: %s is in use by another kcsi up (pid %d)\n", u->dir,
				(int)holder);
		else
			fprintf(stderr, "kcsi up: %s is in use by another kcsi up\n", u->dir);
	} else if (u->lock_fd < 0) {
		fprintf(stderr, "kcsi up: %s: %s\n", lock, strerror(errno));
	}
	if (u->lock_fd < 0 && u->temp_dir)
		rmdir(u->dir); /* made just now, still empty */
	return u->lock_fd < 0 ? -1 : 0;
}

/* ---- the whole life ---- */

int up_run(const struct up_config *cfg)
{
	struct up *u = xcalloc(1, sizeof(*u));
	u->cfg = cfg;
	u->external = cfg->kubeconfig && *cfg->kubeconfig;
	u->t0 = mono_now_ns();
	bool many = up_fleet_wanted(cfg->nodes);
	snprintf(u->kube_qps, sizeof(u->kube_qps), "--kube-api-qps=%d", many ? 2000 : 200);
	snprintf(u->kube_burst, sizeof(u->kube_burst), "--kube-api-burst=%d", many ? 4000 : 400);
	sigemptyset(&u->sigs);
	sigaddset(&u->sigs, SIGINT);
	sigaddset(&u->sigs, SIGTERM);
	sigaddset(&u->sigs, SIGUSR1);
	/*
	 * An ignored signal is discarded, never pending, so sigtimedwait() would not see it: a
	 * script that starts `kcsi up &` hands it SIGINT ignored. Ctrl-C must still stop the stack.
	 */
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	sigprocmask(SIG_BLOCK, &u->sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	u->procs.limit = cfg->restart_limit;

	if (up_precheck(cfg->dir, u->external ? NULL : cfg->listen, cfg->driver_cmd) ||
	    open_work_dir(u)) {
		free(u);
		return 1;
	}
	up_warn_leftovers(u->dir);
	if (cfg->bin_dir && *cfg->bin_dir) {
		pathf(u->bin, sizeof(u->bin), "%s", cfg->bin_dir);
	} else {
		ssize_t n = readlink("/proc/self/exe", u->bin, sizeof(u->bin) - 1);
		u->bin[n > 0 ? n : 0] = '\0';
		char *slash = strrchr(u->bin, '/');
		if (slash)
			*slash = '\0';
	}
	printf("kcsi up: work dir %s (logs in %s/logs)\n", u->dir, u->dir);
	fflush(stdout);

	int code = 0;
	if (bring_up(u)) {
		code = 1;
		if (stop_signal)
			code = 0;
	} else {
		char ready[PATH_MAX + 8];
		pathf(ready, sizeof(ready), "%s/ready", u->dir);
		FILE *f = fopen(ready, "w");
		if (f) {
			fprintf(f, "%d\n", (int)getpid());
			fclose(f);
		}
		print_status(u);
		int given_up = 0;
		for (int i = 0; i < u->procs.n; i++)
			given_up += u->procs.p[i].given_up;
		printf("kcsi up: ready in %.2f s: %d node%s, driver %s%s (kill -USR1 %d prints this "
		       "table again)\n"
		       "export KUBECONFIG=%s\n",
		       (double)(mono_now_ns() - u->t0) / 1e9, cfg->nodes, cfg->nodes == 1 ? "" : "s",
		       u->driver_name, given_up ? " (without the components given up above)" : "",
		       (int)getpid(), u->kubeconfig);
		fflush(stdout);
		while (!tick(u))
			after_apiserver_restart(u);
		if (!stop_signal) /* a core component was given up */
			code = 1;
	}
	if (stop_signal)
		printf("kcsi up: %s, stopping\n", stop_signal == SIGINT ? "interrupted" : "terminated");
	fflush(stdout);
	up_procs_stop_all(&u->procs, STOP_GRACE_NS);
	up_procs_release(&u->procs);
	if (u->ncreated && up_delete_created(u))
		code = 1;
	if (u->crds.n && up_crds_remove(u->kc, &u->crds, 10 * NSEC_PER_SEC))
		code = 1;
	kube_client_free(u->kc);
	kube_client_free(u->kc_quick);
	kube_config_free(u->kcfg);
	int left = up_cleanup_dir(u->dir);
	if (left) {
		fprintf(stderr, "kcsi up: %d mount(s) or loop device(s) under %s could not be released\n",
			left, u->dir);
		code = 1;
	}
	/* a failed run keeps its folder: its logs say why */
	if (u->temp_dir && !cfg->keep && !left && !code) {
		struct stat st;
		if (stat(u->dir, &st) || up_remove_tree(u->dir, st.st_dev))
			fprintf(stderr, "kcsi up: could not remove %s: %s\n", u->dir, strerror(errno));
	} else {
		char ready[PATH_MAX + 8];
		pathf(ready, sizeof(ready), "%s/ready", u->dir);
		unlink(ready);
		printf("kcsi up: logs kept in %s/logs\n", u->dir);
	}
	printf("kcsi up: stopped\n");
	close(u->lock_fd);
	free(u);
	return code;
}
