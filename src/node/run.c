/*
 * kcsi-node start-up and the node's own object: flags -> kube client -> Node (created or
 * updated with the controller-managed attach/detach annotation, or without it under
 * --enable-controller-attach-detach=false, the labels; then its status:
 * capacity, allocatable, nodeInfo, addresses, conditions, see status.h) -> CSINode ->
 * informers (pods, nodes, PVs, PVCs, CSIDrivers) -> volume manager (rebuilds its state from the
 * root dir first) -> plugin watcher -> heartbeat thread (Lease renewal every lease-duration/4
 * as the kubelet does, the Node's status every --node-status-update-frequency) until
 * SIGTERM/SIGINT.
 *
 * Signals are blocked in every thread and taken by the main thread, which does nothing else once
 * the node runs; the other threads poll a stop flag at least every 200 ms, and one that is stuck
 * in a request is left behind (exit_now), so shutdown takes well under a second.
 */
#include "node/node_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/diag.h"
#include "base/lockfile.h"
#include "base/log.h"
#include "base/strbuf.h"
#include "base/timeutil.h"
#include "base/version.h"
#include "base/xalloc.h"
#include "kube/config.h"

void nd_register_flags(struct flagset *fs, struct nd_config *c)
{
	kube_options_register(fs, &c->kube);
	flags_string(fs, "node-name", &c->node_name, "",
		     "Name of this node's Node object (default: the host name).");
	flags_string(fs, "root-dir", &c->root_dir, "/var/lib/kubelet",
		     "Kubelet directory: plugins_registry/, plugins/ and pods/ live here.");
	flags_map(fs, "node-labels", &c->node_labels,
		  "Labels set on the Node at start, key=value pairs separated by commas.");
	flags_string(fs, "http-endpoint", &c->http_endpoint, "",
		     "Address of the HTTP server for /healthz and /metrics, e.g. :10248; empty disables it.");
	flags_duration(fs, "timeout", &c->timeout_ns, 2 * NSEC_PER_MIN,
		       "Deadline of each CSI call to a driver (NodeStageVolume, NodePublishVolume, ...).");
	flags_duration(fs, "node-status-update-frequency", &c->status_update_ns, 10 * NSEC_PER_SEC,
		       "How often the Node's Ready condition is refreshed.");
	flags_int(fs, "node-lease-duration-seconds", &c->lease_duration_s, 40,
		  "Duration of the node's Lease in kube-node-lease; renewed every quarter of it.");
	flags_duration(fs, "volume-stats-agg-period", &c->stats_period_ns, NSEC_PER_MIN,
		       "How often NodeGetVolumeStats is asked of every published volume for the "
		       "kubelet_volume_stats_* metrics on /metrics; 0 disables it.");
	flags_string(fs, "node-ip", &c->node_ip, "",
		     "IP address reported as the Node's InternalIP and as the pods' hostIP and podIP "
		     "(default: the address of the default route's interface, else 127.0.0.1).");
	flags_int(fs, "max-pods", &c->max_pods, 110,
		  "Number of pods the node can hold: its capacity and allocatable \"pods\".");
	flags_map(fs, "capacity", &c->capacity,
		  "Resources the node reports instead of the machine's, e.g. "
		  "cpu=4,memory=8Gi,ephemeral-storage=100Gi; other names add extended resources.");
	flags_map(fs, "system-reserved", &c->system_reserved,
		  "Resources reserved for the system, subtracted from capacity for allocatable, "
		  "e.g. cpu=500m,memory=1Gi.");
	flags_bool(fs, "enable-controller-attach-detach", &c->controller_attach_detach, true,
		   "The attach/detach controller attaches and detaches this node's volumes (the Node "
		   "gets the volumes.kubernetes.io/controller-managed-attach-detach annotation); false: "
		   "kcsi-node removes the annotation and attaches its volumes itself, creating and "
		   "deleting their VolumeAttachments, as the kubelet's enableControllerAttachDetach.");
	flags_map(fs, "kube-reserved", &c->kube_reserved,
		  "Resources reserved for Kubernetes components, subtracted from capacity for "
		  "allocatable, e.g. cpu=100m,memory=256Mi.");
}

static void json_merge_patch(struct nd *nd, const struct kube_resource *r, const char *name,
			     bool status, json_t *patch, const char *what)
{
	struct kube_err e;
	char *body = json_dumps(patch, JSON_COMPACT);
	json_t *res = kube_patch(nd->kc, r, NULL, name, status, KUBE_PATCH_MERGE, body, &e);
	if (!res)
		KLOG_ERR(e.message, "Failed to %s node=\"%s\"", what, name);
	json_decref(res);
	free(body);
}

static json_t *node_labels(struct nd *nd)
{
	json_t *labels = json_object();
	json_object_set_new(labels, "kubernetes.io/hostname", json_string(nd->cfg->node_name));
	json_object_set_new(labels, "kubernetes.io/os", json_string("linux"));
	for (size_t i = 0; i < nd->cfg->node_labels.len; i++)
		json_object_set_new(labels, nd->cfg->node_labels.items[i].key,
				    json_string(nd->cfg->node_labels.items[i].value));
	return labels;
}

/*
 * Registers the node as the kubelet does: create, or merge our labels and annotation. Without
 * controller attach/detach the annotation is left out of a new Node and removed from an existing
 * one (a merge patch's null), as the kubelet's reconcileCMADAnnotationWithExistingNode.
 */
int nd_node_register(struct nd *nd)
{
	struct kube_err e;
	bool cmad = nd->cfg->controller_attach_detach;
	json_t *md = json_pack("{s:s, s:o}", "name", nd->cfg->node_name, "labels", node_labels(nd));
	if (cmad)
		json_object_set_new(md, "annotations",
				    json_pack("{s:s}", "volumes.kubernetes.io/controller-managed-attach-detach",
					      "true"));
	json_t *obj = json_pack("{s:s, s:s, s:o}", "apiVersion", "v1", "kind", "Node", "metadata", md);
	json_t *res = kube_create(nd->kc, &KUBE_RES_NODES, NULL, obj, &e);
	if (!res && kube_err_is_already_exists(&e)) {
		if (!cmad)
			json_object_set_new(md, "annotations",
					    json_pack("{s:n}", "volumes.kubernetes.io/controller-managed-attach-detach"));
		json_t *patch = json_pack("{s:O}", "metadata", md);
		char *body = json_dumps(patch, JSON_COMPACT);
		res = kube_patch(nd->kc, &KUBE_RES_NODES, NULL, nd->cfg->node_name, false,
				 KUBE_PATCH_MERGE, body, &e);
		free(body);
		json_decref(patch);
	}
	json_decref(obj);
	if (!res) {
		KLOG_ERR(e.message, "Unable to register node node=\"%s\"", nd->cfg->node_name);
		return -1;
	}
	json_decref(res);
	KLOG_I("Successfully registered node node=\"%s\" controllerAttachDetach=%s",
	       nd->cfg->node_name, cmad ? "true" : "false");
	return 0;
}

/*
 * Registration as the kubelet's registerWithAPIServer: retried until it works (an API server that
 * is not up yet, or not reachable, is waited for: 100 ms doubling to 7 s between attempts), in a
 * thread of its own so that a SIGTERM during the wait, even with a request in flight, ends the
 * process at once.
 */
struct reg_job {
	struct nd *nd;
	atomic_int stop, done;
};

static void *register_main(void *arg)
{
	struct reg_job *j = arg;
	int64_t delay = 100 * NSEC_PER_MSEC;
	while (!atomic_load(&j->stop) && nd_node_register(j->nd)) {
		for (int64_t slept = 0; slept < delay && !atomic_load(&j->stop);
		     slept += 50 * NSEC_PER_MSEC) {
			struct timespec ts = { 0, 50 * 1000 * 1000 };
			nanosleep(&ts, NULL);
		}
		delay = delay * 2 > 7 * NSEC_PER_SEC ? 7 * NSEC_PER_SEC : delay * 2;
	}
	atomic_store(&j->done, 1);
	return NULL;
}

/* 0 registered, 1 a signal came first (the caller exits 0), -1 no thread. */
static int register_until_done(struct nd *nd, const sigset_t *set)
{
	struct reg_job j = { .nd = nd };
	pthread_t th;
	if (pthread_create(&th, NULL, register_main, &j)) {
		KLOG_ERR(strerror(errno), "Cannot start the node registration thread");
		return -1;
	}
	while (!atomic_load(&j.done)) {
		struct timespec tick = { 0, 50 * 1000 * 1000 };
		int sig = sigtimedwait(set, NULL, &tick);
		if (sig != SIGTERM && sig != SIGINT)
			continue;
		KLOG_I("Received %s while registering the node, shutting down",
		       sig == SIGTERM ? "SIGTERM" : "SIGINT");
		atomic_store(&j.stop, 1);
		for (int i = 0; i < 14 && !atomic_load(&j.done); i++) {
			struct timespec ts = { 0, 50 * 1000 * 1000 };
			nanosleep(&ts, NULL);
		}
		if (!atomic_load(&j.done)) {
			KLOG_I("Not waiting for the registration request in flight; exiting");
			_exit(0);
		}
		pthread_join(th, NULL);
		return 1;
	}
	pthread_join(th, NULL);
	return 0;
}

/*
 * The whole status on every update, as a merge patch of the status subresource: it replaces the
 * conditions (ours are all of them) and leaves spec.taints alone, which the node lifecycle
 * controller owns (node.kubernetes.io/not-ready and unreachable).
 */
void nd_node_set_status(struct nd *nd)
{
	char now[RFC3339_BUFLEN];
	rfc3339_format(time(NULL), now, sizeof(now));
	if (!nd->since[0])
		snprintf(nd->since, sizeof(nd->since), "%s", now);
	json_t *patch = json_pack("{s:o}", "status",
				  nd_node_status(&nd->machine, &nd->capacity, &nd->allocatable,
						 now, nd->since));
	json_merge_patch(nd, &KUBE_RES_NODES, nd->cfg->node_name, true, patch, "update node status");
	json_decref(patch);
}

/* Creates or renews the node's Lease in kube-node-lease (holder = node name). */
void nd_lease_renew(struct nd *nd)
{
	struct kube_err e;
	char now[64];
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	snprintf(now, sizeof(now), "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000);
	json_t *res = kube_get(nd->kc, &KUBE_RES_LEASES, "kube-node-lease", nd->cfg->node_name, &e);
	if (!res && kube_err_is_not_found(&e)) {
		json_t *obj = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:i, s:s}}", "apiVersion",
					"coordination.k8s.io/v1", "kind", "Lease", "metadata", "name",
					nd->cfg->node_name, "namespace", "kube-node-lease", "spec",
					"holderIdentity", nd->cfg->node_name, "leaseDurationSeconds",
					nd->cfg->lease_duration_s, "renewTime", now);
		res = kube_create(nd->kc, &KUBE_RES_LEASES, "kube-node-lease", obj, &e);
		if (!res && kube_err_is_not_found(&e)) {
			/* The namespace itself is missing (a bare emulator): create it, retry. */
			struct kube_request rq = { .method = "POST", .path = "/api/v1/namespaces",
						   .content_type = "application/json",
						   .body = "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"kube-node-lease\"}}" };
			rq.body_len = strlen(rq.body);
			struct strbuf out = STRBUF_INIT;
			struct kube_err e2;
			kube_do(nd->kc, &rq, &out, &e2);
			strbuf_release(&out);
			res = kube_create(nd->kc, &KUBE_RES_LEASES, "kube-node-lease", obj, &e);
		}
		json_decref(obj);
	} else if (res) {
		json_t *spec = json_object_get(res, "spec");
		if (!json_is_object(spec)) {
			spec = json_object();
			json_object_set_new(res, "spec", spec);
		}
		json_object_set_new(spec, "holderIdentity", json_string(nd->cfg->node_name));
		json_object_set_new(spec, "leaseDurationSeconds", json_integer(nd->cfg->lease_duration_s));
		json_object_set_new(spec, "renewTime", json_string(now));
		json_t *upd = kube_update(nd->kc, &KUBE_RES_LEASES, "kube-node-lease", res, false, &e);
		json_decref(res);
		res = upd;
	}
	if (!res)
		KLOG_ERR(e.message, "Failed to update lease lease=\"kube-node-lease/%s\"",
			 nd->cfg->node_name);
	json_decref(res);
}

static int serve_healthz(void *ud, struct strbuf *body, const char **ctype)
{
	(void)ud;
	(void)ctype;
	strbuf_addstr(body, "ok");
	return 200;
}

/* /metrics: the process figures and the last volume stats pass. */
static int serve_metrics(void *ud, struct strbuf *body, const char **ctype)
{
	struct nd *nd = ud;
	*ctype = "text/plain; version=0.0.4; charset=utf-8";
	diag_render_process_metrics(body);
	nd_stats_render(nd->stats, body);
	return 200;
}

static struct kube_informer *informer(struct nd *nd, const struct kube_kind *kind)
{
	struct kube_informer_opts o = { .kind = kind, .resync_ns = nd->cfg->kube.resync_ns };
	struct kube_informer *inf = kube_informer_new(nd->kc, &o);
	if (kind == &KUBE_KIND_POD_T)
		kube_informer_add_index(inf, ND_PODS_BY_NODE, kube_index_pod_by_node);
	kube_informer_start(inf);
	return inf;
}

/*
 * SIGTERM must end the process within a second: when a thread does not stop in time (a watch
 * that has not noticed yet, a CSI call in flight), leave now; the kernel releases what is held.
 */
static _Noreturn void exit_now(int rc)
{
	KLOG_I("Not waiting for busy threads; exiting");
	_exit(rc);
}

int nd_root_open(struct nd *nd)
{
	const char *root = nd->cfg->root_dir;
	if (mkdir(root, 0750) != 0 && errno != EEXIST) {
		KLOG_ERR(strerror(errno), "Cannot create --root-dir %s", root);
		return -1;
	}
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "%s/kcsi-node.lock", root);
	pid_t holder;
	int fd = lockfile_take(sb.buf, &holder); /* held until exit: never closed */
	if (fd == LOCKFILE_BUSY && holder > 0)
		KLOG_E("%s is in use by another kcsi-node (pid %d)", root, (int)holder);
	else if (fd == LOCKFILE_BUSY)
		KLOG_E("%s is in use by another kcsi-node", root);
	else if (fd < 0)
		KLOG_ERR(strerror(errno), "Cannot lock %s", sb.buf);
	strbuf_release(&sb);
	if (fd < 0)
		return -1;
	strbuf_addf(&sb, "%s/plugins_registry", root);
	nd->registry_dir = strbuf_detach(&sb, NULL);
	if (mkdir(nd->registry_dir, 0750) != 0 && errno != EEXIST) {
		KLOG_ERR(strerror(errno), "Cannot create %s", nd->registry_dir);
		return -1;
	}
	return 0;
}

static void *informer_stopper(void *arg)
{
	kube_informer_stop(arg);
	return NULL;
}

/*
 * Stops the informers in parallel (each may take up to a second to notice) and frees them;
 * -1 when they did not all stop within 400 ms: the caller then exits without freeing, since
 * SIGTERM must end the process within a second.
 */
static int stop_informers(struct nd *nd)
{
	struct kube_informer *infs[] = { nd->pods, nd->nodes, nd->pvs, nd->pvcs, nd->csidrivers };
	pthread_t th[5];
	bool started[5] = { false };
	int rc = 0;
	struct timespec dl = wall_deadline(400 * NSEC_PER_MSEC);
	for (int i = 0; i < 5; i++)
		started[i] = infs[i] && pthread_create(&th[i], NULL, informer_stopper, infs[i]) == 0;
	for (int i = 0; i < 5; i++)
		if (started[i] && pthread_timedjoin_np(th[i], NULL, &dl) != 0)
			rc = -1;
	if (rc)
		return -1;
	for (int i = 0; i < 5; i++)
		kube_informer_free(infs[i]);
	return 0;
}

/* The machine's facts and the resources they make (--node-ip checked first); 0 or -1 logged. */
static int read_machine(struct nd *nd)
{
	const struct nd_config *cfg = nd->cfg;
	struct nd_resource_flags rf = { .max_pods = cfg->max_pods, .capacity = &cfg->capacity,
					.system_reserved = &cfg->system_reserved,
					.kube_reserved = &cfg->kube_reserved };
	unsigned char addr[16];
	char err[1024];
	if (*cfg->node_ip && inet_pton(AF_INET, cfg->node_ip, addr) != 1 &&
	    inet_pton(AF_INET6, cfg->node_ip, addr) != 1) {
		KLOG_E("--node-ip %s is not an IP address", cfg->node_ip);
		return -1;
	}
	nd_machine_read(&nd->machine, cfg->root_dir, cfg->node_ip);
	if (nd_resources_build(&nd->machine, &rf, &nd->capacity, &nd->allocatable, err, sizeof(err))) {
		KLOG_E("%s", err);
		return -1;
	}
	KLOG_I("Node address node=\"%s\" internalIP=\"%s\"", cfg->node_name, nd->machine.node_ip);
	return 0;
}

/* The heartbeat thread: the Lease every lease-duration/4, the status when due, until stop. */
struct heartbeat {
	struct nd *nd;
	atomic_int stop;
};

static void *heartbeat_main(void *arg)
{
	struct heartbeat *hb = arg;
	const struct nd_config *cfg = hb->nd->cfg;
	int64_t lease_every = (int64_t)cfg->lease_duration_s * NSEC_PER_SEC / 4;
	int64_t next_lease = mono_now_ns() + lease_every;
	int64_t next_status = mono_now_ns() + cfg->status_update_ns;
	while (!atomic_load(&hb->stop)) {
		sleep_ns(200 * NSEC_PER_MSEC);
		int64_t now = mono_now_ns();
		if (!atomic_load(&hb->stop) && now >= next_lease) {
			nd_lease_renew(hb->nd);
			next_lease = now + lease_every;
		}
		if (!atomic_load(&hb->stop) && now >= next_status) {
			nd_node_set_status(hb->nd);
			next_status = now + cfg->status_update_ns;
		}
	}
	return NULL;
}

void nd_beat_until_signal(void *(*beat)(void *), void *arg, atomic_int *stop, const sigset_t *set,
			  int rc)
{
	pthread_t th;
	bool started = pthread_create(&th, NULL, beat, arg) == 0;
	if (!started)
		KLOG_E("Cannot start the heartbeat thread: Leases and node status stay as they are");
	int sig = 0;
	while (sigwait(set, &sig) == 0 && sig != SIGTERM && sig != SIGINT)
		;
	KLOG_I("Received %s, shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
	atomic_store(stop, 1);
	struct timespec dl = wall_deadline(300 * NSEC_PER_MSEC);
	if (started && pthread_timedjoin_np(th, NULL, &dl) != 0)
		exit_now(rc);
}

int nd_run(struct nd_config *cfg)
{
	struct nd nd = { .cfg = cfg };
	struct kube_config *kcfg = NULL;
	struct diag_server *http = NULL;
	char err[1024], host[256];
	sigset_t set;
	int rc = 1;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	pthread_mutex_init(&nd.lock, NULL);

	KLOG_I("Version: %s", kcsi_version);
	if (!*cfg->node_name) {
		if (gethostname(host, sizeof(host)) != 0) {
			KLOG_E("--node-name is empty and the host name is unknown");
			return 1;
		}
		host[sizeof(host) - 1] = '\0';
		cfg->node_name = host;
	}
	if (cfg->lease_duration_s <= 0 || cfg->status_update_ns <= 0) {
		KLOG_E("--node-lease-duration-seconds and --node-status-update-frequency must be positive");
		return 1;
	}
	nd.stats = nd_stats_new();
	if (nd_root_open(&nd))
		goto out;
	if (read_machine(&nd))
		goto out;
	kcfg = kube_config_load(cfg->kube.kubeconfig, cfg->kube.master, NULL, err, sizeof(err));
	if (!kcfg) {
		KLOG_E("%s", err);
		goto out;
	}
	struct kube_client_opts ko = { .component = "kcsi-node", .qps = cfg->kube.qps,
				       .burst = cfg->kube.burst, .timeout_ns = 10 * NSEC_PER_SEC,
				       .max_retries = 2 };
	nd.kc = kube_client_new(kcfg, &ko, err, sizeof(err));
	if (!nd.kc) {
		KLOG_E("%s", err);
		goto out;
	}
	struct kube_recorder_opts ro = { .component = "kubelet", .host = cfg->node_name };
	nd.rec = kube_recorder_new(nd.kc, &ro);
	int registered = register_until_done(&nd, &set);
	if (registered) {
		if (registered > 0)
			rc = 0;
		goto out;
	}
	nd_node_set_status(&nd);
	nd_lease_renew(&nd);
	nd_csinode_ensure(&nd);

	if (*cfg->http_endpoint) {
		http = diag_server_start(cfg->http_endpoint, err, sizeof(err));
		if (!http) {
			KLOG_ERR(err, "Failed to start HTTP server at \"%s\"", cfg->http_endpoint);
			goto out;
		}
		KLOG_I("Starting HTTP server endpoint=\"%s\" port=%d", cfg->http_endpoint,
		       diag_server_port(http));
		diag_server_handle(http, "/healthz", serve_healthz, &nd);
		diag_server_handle(http, "/metrics", serve_metrics, &nd);
	}

	nd.pods = informer(&nd, &KUBE_KIND_POD_T);
	nd.nodes = informer(&nd, &KUBE_KIND_NODE_T);
	nd.pvs = informer(&nd, &KUBE_KIND_PERSISTENTVOLUME);
	nd.pvcs = informer(&nd, &KUBE_KIND_PERSISTENTVOLUMECLAIM);
	nd.csidrivers = informer(&nd, &KUBE_KIND_CSIDRIVER_T);
	if (nd_volumes_start(&nd) || nd_plugins_start(&nd))
		goto stop;

	rc = 0;
	struct heartbeat hb = { .nd = &nd };
	atomic_init(&hb.stop, 0);
	nd_beat_until_signal(heartbeat_main, &hb, &hb.stop, &set, rc);
stop:
	atomic_store(&nd.stop, 1);
	if (nd_plugins_stop(&nd))
		exit_now(rc);
	if (nd_volumes_stop(&nd))
		exit_now(rc);
	if (stop_informers(&nd))
		exit_now(rc);
out:
	diag_server_stop(http);
	kube_recorder_free(nd.rec);
	kube_client_free(nd.kc);
	kube_config_free(kcfg);
	free(nd.registry_dir);
	nd_stats_free(nd.stats);
	pthread_mutex_destroy(&nd.lock);
	return rc;
}
