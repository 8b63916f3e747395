/*
 * kcsi-node --fleet-size N: many emulated nodes in one process, as kwok runs its fake nodes, for
 * `kcsi up --nodes 1000` on one machine. Each node is still a whole kcsi-node: its own Node,
 * CSINode and Lease, its own root dir and plugin watcher (which registers the driver through
 * the node's registration socket and asks its driver NodeGetInfo), its own volume manager thread
 * (which makes the real NodeStage/NodePublish calls on the node's own driver socket), its own
 * event recorder (source host = the node). What the nodes share is what a process needs once:
 * one API client (its connection pool), one informer per kind (one pod watch for all nodes;
 * each volume manager takes the pods whose spec.nodeName is its node), the machine facts, and
 * one heartbeat thread (the main thread only waits for SIGTERM) that renews every node's Lease and status when due.
 *
 * Start-up registers the nodes with FLEET_WORKERS threads in parallel (a few requests each:
 * Node, status, Lease, CSINode), then starts the informers and the per-node threads.
 *
 * Names: node i (1..N) is "<--node-name>-<i>"; its root dir is --root-dir with "{node}"
 * replaced by that name. --kube-api-qps and --kube-api-burst are per node (the shared client gets
 * N times them), as each kubelet has its own client. /healthz and the process metrics are served once; the per-node
 * kubelet_volume_stats_* gauges are not (one /metrics per node would be N endpoints).
 */
#include "node/fleet.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/diag.h"
#include "base/log.h"
#include "base/strbuf.h"
#include "base/timeutil.h"
#include "base/version.h"
#include "base/xalloc.h"
#include "kube/config.h"
#include "node/node_int.h"

#define FLEET_WORKERS 4
#define FLEET_MAX 5000
/* Per-node threads sleep, poll or make one CSI call at a time: a small stack is plenty. */
#define FLEET_STACK (256 * 1024)

struct fleet_node {
	struct nd nd;
	struct nd_config cfg;
	char *name, *root;
	int64_t next_lease, next_status;
};

struct fleet {
	struct nd_config *cfg;
	struct fleet_node *nodes;
	int n;
	atomic_int next, failed;
	atomic_int stop;
};

void nd_fleet_register_flags(struct flagset *fs, int *size)
{
	flags_int(fs, "fleet-size", size, 0,
		  "Run this many nodes in this one process (kcsi up --nodes above 16): node i is "
		  "named <node-name>-<i>, its root dir is --root-dir with {node} replaced by that "
		  "name; one API client, one watch per kind and one heartbeat loop for all. 0: one "
		  "node, the normal kcsi-node.");
}

/* tmpl with each "{node}" replaced by the node's name or ID */
static char *replace_node(const char *tmpl, const char *node)
{
	return str_replace_all(tmpl, "{node}", node);
}

/* Node, status, Lease and CSINode of the nodes this worker takes, until all are done. */
static void *register_worker(void *arg)
{
	struct fleet *f = arg;
	for (int i; !atomic_load(&f->stop) && (i = atomic_fetch_add(&f->next, 1)) < f->n;) {
		struct nd *nd = &f->nodes[i].nd;
		int64_t delay = 100 * NSEC_PER_MSEC;
		while (nd_node_register(nd) && !atomic_load(&f->stop)) {
			sleep_ns(delay);
			delay = delay * 2 > 7 * NSEC_PER_SEC ? 7 * NSEC_PER_SEC : delay * 2;
		}
		nd_node_set_status(nd);
		nd_lease_renew(nd);
		nd_csinode_ensure(nd);
	}
	return NULL;
}

/* 0 all registered, 1 a signal came first, -1 no threads. */
static int register_all(struct fleet *f, const sigset_t *set)
{
	pthread_t th[FLEET_WORKERS];
	bool done[FLEET_WORKERS] = { false };
	int started = 0, left;
	for (; started < FLEET_WORKERS; started++)
		if (pthread_create(&th[started], NULL, register_worker, f))
			break;
	if (!started)
		return -1;
	for (left = started; left > 0;) {
		struct timespec tick = { 0, 20 * 1000 * 1000 };
		int sig = sigtimedwait(set, NULL, &tick);
		if (sig == SIGTERM || sig == SIGINT) {
			KLOG_I("Received %s while registering the nodes, shutting down",
			       sig == SIGTERM ? "SIGTERM" : "SIGINT");
			atomic_store(&f->stop, 1);
			struct timespec dl = wall_deadline(700 * NSEC_PER_MSEC);
			for (int i = 0; i < started; i++)
				if (!done[i] && pthread_timedjoin_np(th[i], NULL, &dl))
					_exit(0); /* a request in flight; SIGTERM ends us within a second */
			return 1;
		}
		for (int i = 0; i < started; i++)
			if (!done[i] && pthread_tryjoin_np(th[i], NULL) == 0) {
				done[i] = true;
				left--;
			}
	}
	return 0;
}

static void *informer_stopper(void *arg)
{
	kube_informer_stop(arg);
	return NULL;
}

/* As run.c: the informers stop in parallel within 400 ms, or -1 (the caller exits at once). */
static int stop_informers(struct kube_informer **infs, int n)
{
	pthread_t th[5];
	bool started[5] = { false };
	int rc = 0;
	struct timespec dl = wall_deadline(400 * NSEC_PER_MSEC);
	for (int i = 0; i < n; i++)
		started[i] = infs[i] && pthread_create(&th[i], NULL, informer_stopper, infs[i]) == 0;
	for (int i = 0; i < n; i++)
		if (started[i] && pthread_timedjoin_np(th[i], NULL, &dl) != 0)
			rc = -1;
	if (rc)
		return -1;
	for (int i = 0; i < n; i++)
		kube_informer_free(infs[i]);
	return 0;
}

static int serve_healthz(void *ud, struct strbuf *body, const char **ctype)
{
	(void)ud;
	(void)ctype;
	strbuf_addstr(body, "ok");
	return 200;
}

static int serve_metrics(void *ud, struct strbuf *body, const char **ctype)
{
	(void)ud;
	*ctype = "text/plain; version=0.0.4; charset=utf-8";
	diag_render_process_metrics(body);
	return 200;
}

static struct kube_informer *informer(struct kube_client *kc, const struct kube_kind *kind,
				      int64_t resync_ns)
{
	struct kube_informer_opts o = { .kind = kind, .resync_ns = resync_ns };
	struct kube_informer *inf = kube_informer_new(kc, &o);
	if (kind == &KUBE_KIND_POD_T)
		kube_informer_add_index(inf, ND_PODS_BY_NODE, kube_index_pod_by_node);
	kube_informer_start(inf);
	return inf;
}

/* Builds node i's struct nd on the shared parts of nd0 (client, machine, resources). */
static int node_init(struct fleet *f, int i, const struct nd *shared)
{
	struct fleet_node *fn = &f->nodes[i];
	char name[256];
	snprintf(name, sizeof(name), "%s-%d", f->cfg->node_name, i + 1);
	fn->name = xstrdup(name);
	fn->root = replace_node(f->cfg->root_dir, name);
	fn->cfg = *f->cfg;
	fn->cfg.node_name = fn->name;
	fn->cfg.root_dir = fn->root;
	struct nd *nd = &fn->nd;
	nd->cfg = &fn->cfg;
	nd->kc = shared->kc;
	nd->machine = shared->machine;
	nd->capacity = shared->capacity;
	nd->allocatable = shared->allocatable;
	pthread_mutex_init(&nd->lock, NULL);
	nd->stats = nd_stats_new();
	struct kube_recorder_opts ro = { .component = "kubelet", .host = fn->name };
	nd->rec = kube_recorder_new(nd->kc, &ro);
	return nd_root_open(nd);
}

/* One pass of the heartbeat loop: every node whose Lease or status is due, within 100 ms. */
static void heartbeat(struct fleet *f, int64_t lease_every)
{
	int64_t start = mono_now_ns();
	for (int i = 0; i < f->n && mono_now_ns() - start < 100 * NSEC_PER_MSEC; i++) {
		struct fleet_node *fn = &f->nodes[i];
		int64_t now = mono_now_ns();
		if (now >= fn->next_lease) {
			nd_lease_renew(&fn->nd);
			fn->next_lease = now + lease_every;
		}
		if (now >= fn->next_status) {
			nd_node_set_status(&fn->nd);
			fn->next_status = now + f->cfg->status_update_ns;
		}
	}
}

/* The heartbeat thread: a pass every 200 ms until stop (a write that hangs holds only it). */
struct fleet_beat {
	struct fleet *f;
	int64_t lease_every;
	atomic_int stop;
};

static void *fleet_beat_main(void *arg)
{
	struct fleet_beat *b = arg;
	while (!atomic_load(&b->stop)) {
		sleep_ns(200 * NSEC_PER_MSEC);
		if (!atomic_load(&b->stop))
			heartbeat(b->f, b->lease_every);
	}
	return NULL;
}

/* Stops every node's threads; -1 when one is stuck in a call (the caller exits at once). */
static int stop_nodes(struct fleet *f, int started)
{
	for (int i = 0; i < started; i++)
		atomic_store(&f->nodes[i].nd.stop, 1);
	for (int i = 0; i < started; i++)
		if (nd_plugins_stop(&f->nodes[i].nd) || nd_volumes_stop(&f->nodes[i].nd))
			return -1;
	return 0;
}

int nd_fleet_run(struct nd_config *cfg, int size)
{
	if (size < 1 || size > FLEET_MAX) {
		KLOG_E("--fleet-size %d: want 1 to %d", size, FLEET_MAX);
		return 1;
	}
	if (!*cfg->node_name || !strstr(cfg->root_dir, "{node}")) {
		KLOG_E("--fleet-size needs --node-name (the name prefix) and a --root-dir with {node}");
		return 1;
	}
	if (cfg->lease_duration_s <= 0 || cfg->status_update_ns <= 0) {
		KLOG_E("--node-lease-duration-seconds and --node-status-update-frequency must be positive");
		return 1;
	}
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, FLEET_STACK);
	pthread_setattr_default_np(&attr);
	pthread_attr_destroy(&attr);

	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	KLOG_I("Version: %s", kcsi_version);

	struct fleet f = { .cfg = cfg, .n = size };
	struct nd shared = { .cfg = cfg };
	struct kube_config *kcfg = NULL;
	struct diag_server *http = NULL;
	struct kube_informer *infs[5] = { NULL };
	char err[1024];
	int rc = 1, started = 0;
	f.nodes = xcalloc((size_t)size, sizeof(*f.nodes));

	struct nd_resource_flags rf = { .max_pods = cfg->max_pods, .capacity = &cfg->capacity,
					.system_reserved = &cfg->system_reserved,
					.kube_reserved = &cfg->kube_reserved };
	char *root1 = replace_node(cfg->root_dir, "");
	char *slash = strrchr(root1, '/');
	if (slash && slash != root1)
		*slash = '\0'; /* the parent of the node dirs: statvfs there for ephemeral-storage */
	nd_machine_read(&shared.machine, root1, cfg->node_ip);
	free(root1);
	if (nd_resources_build(&shared.machine, &rf, &shared.capacity, &shared.allocatable, err,
			       sizeof(err))) {
		KLOG_E("%s", err);
		goto out;
	}
	kcfg = kube_config_load(cfg->kube.kubeconfig, cfg->kube.master, NULL, err, sizeof(err));
	/* --kube-api-qps and -burst are per node, as each kubelet has its own client. */
	struct kube_client_opts ko = { .component = "kcsi-node",
				       .qps = cfg->kube.qps > 0 ? cfg->kube.qps * size : cfg->kube.qps,
				       .burst = cfg->kube.burst * size,
				       .timeout_ns = 10 * NSEC_PER_SEC, .max_retries = 2 };
	if (kcfg)
		shared.kc = kube_client_new(kcfg, &ko, err, sizeof(err));
	if (!shared.kc) {
		KLOG_E("%s", err);
		goto out;
	}
	for (int i = 0; i < size; i++)
		if (node_init(&f, i, &shared))
			goto out;
	int64_t t0 = mono_now_ns();
	int registered = register_all(&f, &set);
	if (registered) {
		rc = registered > 0 ? 0 : 1;
		goto out;
	}
	KLOG_I("Registered nodes count=%d prefix=\"%s\" seconds=%.2f", size, cfg->node_name,
	       (double)(mono_now_ns() - t0) / 1e9);
	if (*cfg->http_endpoint) {
		http = diag_server_start(cfg->http_endpoint, err, sizeof(err));
		if (!http) {
			KLOG_ERR(err, "Failed to start HTTP server at \"%s\"", cfg->http_endpoint);
			goto out;
		}
		diag_server_handle(http, "/healthz", serve_healthz, NULL);
		diag_server_handle(http, "/metrics", serve_metrics, NULL);
	}
	const struct kube_kind *kinds[5] = { &KUBE_KIND_POD_T, &KUBE_KIND_NODE_T,
					     &KUBE_KIND_PERSISTENTVOLUME,
					     &KUBE_KIND_PERSISTENTVOLUMECLAIM, &KUBE_KIND_CSIDRIVER_T };
	for (int k = 0; k < 5; k++)
		infs[k] = informer(shared.kc, kinds[k], cfg->kube.resync_ns);
	int64_t lease_every = (int64_t)cfg->lease_duration_s * NSEC_PER_SEC / 4;
	int64_t now = mono_now_ns();
	for (; started < size; started++) {
		struct fleet_node *fn = &f.nodes[started];
		struct nd *nd = &fn->nd;
		nd->pods = infs[0];
		nd->nodes = infs[1];
		nd->pvs = infs[2];
		nd->pvcs = infs[3];
		nd->csidrivers = infs[4];
		/* spread the heartbeats over their period, so they do not all fall due at once */
		fn->next_lease = now + lease_every * (started + 1) / size;
		fn->next_status = now + cfg->status_update_ns * (started + 1) / size;
		if (nd_volumes_start(nd))
			goto stop;
		if (nd_plugins_start(nd)) {
			atomic_store(&nd->stop, 1);
			nd_volumes_stop(nd);
			goto stop;
		}
	}
	KLOG_I("Fleet running nodes=%d", size);
	struct fleet_beat beat = { .f = &f, .lease_every = lease_every };
	atomic_init(&beat.stop, 0);
	rc = 0;
	nd_beat_until_signal(fleet_beat_main, &beat, &beat.stop, &set, rc);
stop:
	if (stop_nodes(&f, started) || stop_informers(infs, 5)) {
		KLOG_I("Not waiting for busy threads; exiting");
		_exit(rc);
	}
out:
	diag_server_stop(http);
	for (int i = 0; i < size; i++) {
		struct fleet_node *fn = &f.nodes[i];
		kube_recorder_free(fn->nd.rec);
		nd_stats_free(fn->nd.stats);
		free(fn->nd.registry_dir);
		if (fn->name)
			pthread_mutex_destroy(&fn->nd.lock);
		free(fn->name);
		free(fn->root);
	}
	free(f.nodes);
	kube_client_free(shared.kc);
	kube_config_free(kcfg);
	return rc;
}
