/*
 * kcsi-controller-manager start-up and life cycle: flags -> kube client -> controllers chosen by
 * --controllers (their informer handlers registered) -> diagnostics server -> leader election
 * (optional; Lease "kcsi-controller-manager", in kube-system unless told otherwise) -> once
 * leading: informers, cache sync, controllers -> SIGTERM.
 *
 * SIGTERM and SIGINT are blocked in every thread and taken by the main thread. Shutdown stops the
 * controllers on a helper thread and waits for it at most 600 ms (a worker may be inside an API
 * call with a long timeout), releases the Lease, and exits 0 without waiting for the informers'
 * watches to wind down (that can take a second), so the process is gone within a second whatever
 * it was doing. Nothing is lost by not freeing: every write the controllers make is to the API.
 */
#include "controllers/cm.h"

#include "base/diag.h"
#include "base/log.h"
#include "base/timeutil.h"
#include "base/version.h"
#include "base/xalloc.h"
#include "kube/config.h"
#include "kube/leader.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CM_LEASE "kcsi-controller-manager"

static const struct cm_controller *const all_controllers[] = {
	&cm_attachdetach,
	&cm_pv_binder,
	&cm_pvc_protection,
	&cm_pv_protection,
	&cm_volume_scheduler,
	&cm_nodelifecycle,
	&cm_taint_eviction,
	&cm_podgc,
};
#define NCONTROLLERS (sizeof(all_controllers) / sizeof(all_controllers[0]))

void cm_register_flags(struct flagset *fs, struct cm_config *c)
{
	kube_options_register(fs, &c->kube);
	/* kube-controller-manager v1.37's client defaults, as v1.36's (its config v1alpha1 defaulting) */
	flags_set_default(fs, "kube-api-qps", "20");
	flags_set_default(fs, "kube-api-burst", "30");
	flags_set_help(fs, "leader-election-namespace",
		       "Namespace of the Lease; empty means kube-system, as kube-controller-manager's.");
	flags_string(fs, "controllers", &c->controllers, "*",
		     "Controllers to run, as kube-controller-manager spells it: '*' runs the default ones, 'name' adds one, '-name' removes one. Known: attachdetach, persistentvolume-binder, pvc-protection, pv-protection, nodelifecycle, taint-eviction-controller, podgc, volume-scheduler (not in '*').");
	flags_string(fs, "http-endpoint", &c->http_endpoint, "",
		     "Address of the diagnostics HTTP server (/healthz, /metrics), e.g. :8080; empty disables it.");
	flags_bool(fs, "leader-elect", &c->leader_elect, false,
		   "kube-controller-manager's name for --leader-election (either one enables it).");
	flags_duration(fs, "attach-detach-reconcile-sync-period", &c->ad_sync_ns, NSEC_PER_MIN,
		       "How often the attach/detach controller checks attached volumes against their VolumeAttachments.");
	flags_bool(fs, "disable-attach-detach-reconcile-sync", &c->ad_disable_sync, false,
		   "Do not run that periodic check.");
	flags_duration(fs, "max-wait-for-unmount", &c->ad_max_wait_ns, 6 * NSEC_PER_MIN,
		       "How long a volume still mounted on a node that is not Ready is waited for before it is detached anyway.");
	flags_bool(fs, "disable-force-detach-on-timeout", &c->ad_no_force_detach, false,
		   "Prevent force detaching volumes based on maximum unmount time and node status. If this flag is set to true, the non-graceful node shutdown feature (the node.kubernetes.io/out-of-service taint) must be used to recover from node failure.");
	flags_string(fs, "va-naming", &c->va_naming, "kubernetes",
		     "VolumeAttachment names: 'kubernetes' (csi-<sha256(volumeHandle+driver+node)>, as kubelet and kube-controller-manager) or 'seed' (pv-<sha256(pvName+node)>, as the Kubernetes CSI design document names them).");
	flags_int(fs, "attach-detach-workers", &c->ad_workers, 10,
		  "Attach/detach operations whose API calls run at once.");
	flags_duration(fs, "pvclaimbinder-sync-period", &c->pv_sync_ns, 15 * NSEC_PER_SEC,
		       "How often the persistentvolume-binder looks at every claim and volume again.");
	flags_string(fs, "scheduler-name", &c->scheduler_name, "default-scheduler",
		     "Pods with this spec.schedulerName (or none) are placed by volume-scheduler.");
	flags_duration(fs, "node-monitor-period", &c->node_monitor_period_ns, 5 * NSEC_PER_SEC,
		       "How often nodelifecycle looks at every node's heartbeats, conditions and taints.");
	flags_duration(fs, "node-monitor-grace-period", &c->node_monitor_grace_ns, 50 * NSEC_PER_SEC,
		       "How long a node may go without a Ready heartbeat or a Lease renewal before its conditions become Unknown and it gets the unreachable taints.");
	flags_duration(fs, "node-startup-grace-period", &c->node_startup_grace_ns, NSEC_PER_MIN,
		       "The same for a node that has never posted a Ready condition, counted from its creation.");
	flags_double(fs, "node-eviction-rate", &c->node_eviction_rate, 0.1,
		     "Number of nodes per second on which pods are deleted in case of node failure when a zone is healthy (see --unhealthy-zone-threshold): the rate at which nodes of a zone get their NoExecute taint. Zone refers to entire cluster in non-multizone clusters.");
	flags_double(fs, "secondary-node-eviction-rate", &c->secondary_eviction_rate, 0.01,
		     "The same when a zone is unhealthy. Implicitly 0 when the zone has --large-cluster-size-threshold nodes or fewer.");
	flags_int(fs, "large-cluster-size-threshold", &c->large_cluster_threshold, 50,
		  "Number of nodes of a zone from which it is large for the eviction logic: --secondary-node-eviction-rate is 0 for zones this size or smaller.");
	flags_double(fs, "unhealthy-zone-threshold", &c->unhealthy_zone_threshold, 0.55,
		     "Fraction of Nodes in a zone which needs to be not Ready (minimum 3) for zone to be treated as unhealthy.");
}

struct cm_runtime {
	const struct cm_config *cfg;
	struct cm_ctx ctx;
	void *self[NCONTROLLERS]; /* NULL: not enabled */
	struct kube_leader *leader;
	atomic_int leading;
	atomic_int running;
	pthread_mutex_t stop_mu;
	pthread_cond_t stop_cond;
	bool stopped;
	bool signalled; /* SIGTERM/SIGINT taken while the caches synced */
};

static void on_started_leading(void *ud)
{
	struct cm_runtime *rt = ud;

	KLOG_I("became leader of Lease %s", CM_LEASE);
	atomic_store(&rt->leading, 1);
}

static void on_new_leader(const char *identity, void *ud)
{
	(void)ud;
	KLOG_I("New leader elected: %s", identity);
}

static int serve_healthz(void *ud, struct strbuf *body, const char **ctype)
{
	struct cm_runtime *rt = ud;

	(void)ctype;
	if (rt->leader && !kube_leader_healthy(rt->leader)) {
		strbuf_addstr(body, "[-]leaderElection failed: failed election to renew leadership on lease\n");
		return 500;
	}
	strbuf_addstr(body, "ok");
	return 200;
}

static int serve_metrics(void *ud, struct strbuf *body, const char **ctype)
{
	struct cm_runtime *rt = ud;

	*ctype = "text/plain; version=0.0.4; charset=utf-8";
	if (atomic_load(&rt->running)) {
		struct kube_workqueue *qs[16];
		size_t nq = 0;
		for (size_t i = 0; i < NCONTROLLERS; i++) {
			if (!rt->self[i])
				continue;
			if (all_controllers[i]->metrics)
				all_controllers[i]->metrics(rt->self[i], body);
			if (all_controllers[i]->queues)
				nq += all_controllers[i]->queues(rt->self[i], qs + nq, 16 - nq);
		}
		if (nq)
			kube_workqueue_render_metrics(qs, nq, body);
	}
	if (rt->leader)
		kube_leader_render_metrics(rt->leader, body);
	diag_render_process_metrics(body);
	return 200;
}

/* A SIGTERM or SIGINT pending for this (the main) thread: taken, and remembered. */
static bool signalled(void *ud)
{
	struct cm_runtime *rt = ud;
	sigset_t set;
	struct timespec zero = { 0, 0 };

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	int sig = sigtimedwait(&set, NULL, &zero);
	if (sig == SIGTERM || sig == SIGINT) {
		KLOG_I("Received %s while waiting for the caches to sync, shutting down",
		       sig == SIGTERM ? "SIGTERM" : "SIGINT");
		rt->signalled = true;
	}
	return rt->signalled;
}

/* 0, 1 when a signal came while the caches synced, or -1. */
static int start_controllers(struct cm_runtime *rt)
{
	char err[512];

	atomic_store(&rt->running, 1); /* from here on, shutdown does not free under the threads */
	int r = cm_start_informers(&rt->ctx, signalled, rt, err, sizeof(err));
	if (r) {
		if (r < 0)
			KLOG_E("%s", err);
		return r;
	}
	for (size_t i = 0; i < NCONTROLLERS; i++) {
		if (!rt->self[i])
			continue;
		if (all_controllers[i]->start(rt->self[i])) {
			KLOG_E("Error starting \"%s\"", all_controllers[i]->name);
			return -1;
		}
		KLOG_I("Started \"%s\"", all_controllers[i]->name);
	}
	return 0;
}

static void *stopper_main(void *arg)
{
	struct cm_runtime *rt = arg;

	if (atomic_load(&rt->running))
		for (size_t i = 0; i < NCONTROLLERS; i++)
			if (rt->self[i])
				all_controllers[i]->stop(rt->self[i]);
	pthread_mutex_lock(&rt->stop_mu);
	rt->stopped = true;
	pthread_cond_signal(&rt->stop_cond);
	pthread_mutex_unlock(&rt->stop_mu);
	return NULL;
}

/* Stops everything within budget_ns; returns true when everything stopped. */
static bool stop_within(struct cm_runtime *rt, int64_t budget_ns)
{
	pthread_t t;
	struct timespec ts = wall_deadline(budget_ns);
	bool done;

	if (pthread_create(&t, NULL, stopper_main, rt))
		return false;
	pthread_mutex_lock(&rt->stop_mu);
	while (!rt->stopped)
		if (pthread_cond_timedwait(&rt->stop_cond, &rt->stop_mu, &ts))
			break;
	done = rt->stopped;
	pthread_mutex_unlock(&rt->stop_mu);
	if (done)
		pthread_join(t, NULL);
	else
		pthread_detach(t);
	return done;
}

int cm_run(const struct cm_config *cfg)
{
	struct cm_runtime *rt = xcalloc(1, sizeof(*rt));
	struct kube_config *kcfg = NULL;
	struct kube_client *kc = NULL, *lec = NULL;
	struct diag_server *http = NULL;
	char err[1024];
	sigset_t set;
	int rc = 1, enabled = 0;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	pthread_mutex_init(&rt->stop_mu, NULL);
	pthread_cond_init(&rt->stop_cond, NULL);
	rt->cfg = cfg;

	KLOG_I("Version: %s", kcsi_version);
	if (cm_check_controllers(cfg->controllers, all_controllers, NCONTROLLERS, err, sizeof(err))) {
		KLOG_E("--controllers: %s", err);
		free(rt);
		return 1;
	}
	kcfg = kube_config_load(cfg->kube.kubeconfig, cfg->kube.master, NULL, err, sizeof(err));
	if (!kcfg) {
		KLOG_E("%s", err);
		free(rt);
		return 1;
	}
	struct kube_client_opts ko = { .component = "kcsi-controller-manager", .qps = cfg->kube.qps,
				       .burst = cfg->kube.burst };
	kc = kube_client_new(kcfg, &ko, err, sizeof(err));
	if (!kc) {
		KLOG_E("%s", err);
		goto out;
	}
	rt->ctx.cfg = cfg;
	rt->ctx.kc = kc;
	struct kube_recorder_opts ro = { .component = "kcsi-controller-manager" };
	rt->ctx.rec = kube_recorder_new(kc, &ro);
	for (size_t i = 0; i < NCONTROLLERS; i++) {
		if (!cm_controller_enabled(cfg->controllers, all_controllers[i]->name,
					   all_controllers[i]->default_on)) {
			KLOG_I("\"%s\" is disabled", all_controllers[i]->name);
			continue;
		}
		rt->self[i] = all_controllers[i]->init(&rt->ctx);
		if (!rt->self[i])
			goto out;
		enabled++;
	}
	if (!enabled)
		KLOG_W("no controller is enabled by --controllers=%s", cfg->controllers);

	if (*cfg->http_endpoint) {
		http = diag_server_start(cfg->http_endpoint, err, sizeof(err));
		if (!http) {
			KLOG_ERR(err, "Failed to start HTTP server at \"%s\"", cfg->http_endpoint);
			goto out;
		}
		KLOG_I("ServeMux listening at \"%s\" port=%d", cfg->http_endpoint, diag_server_port(http));
		diag_server_handle(http, "/healthz", serve_healthz, rt);
		diag_server_handle(http, "/metrics", serve_metrics, rt);
	}

	if (!cfg->kube.leader_election && !cfg->leader_elect) {
		atomic_store(&rt->leading, 1);
	} else {
		lec = kube_client_new(kcfg, &ko, err, sizeof(err));
		if (!lec) {
			KLOG_ERR(err, "Failed to create leaderelection client");
			goto out;
		}
		struct kube_leader_opts lo = {
			.ns = *cfg->kube.le_namespace ? cfg->kube.le_namespace : "kube-system",
			.name = CM_LEASE,
			.lease_duration_ns = cfg->kube.le_lease_ns,
			.renew_deadline_ns = cfg->kube.le_renew_ns,
			.retry_period_ns = cfg->kube.le_retry_ns,
			.on_started_leading = on_started_leading, .on_new_leader = on_new_leader,
			.ud = rt,
		};
		rt->leader = kube_leader_new(lec, &lo);
		if (kube_leader_start(rt->leader)) {
			KLOG_E("failed to initialize leader election");
			goto out;
		}
	}

	struct timespec tick = { 0, 100 * 1000 * 1000 };
	bool started = false;
	for (;;) {
		if (!started && atomic_load(&rt->leading)) {
			started = true;
			int r = start_controllers(rt);
			if (r > 0)
				break; /* a signal: a clean stop */
			if (r < 0)
				goto out;
		}
		int sig = sigtimedwait(&set, NULL, &tick);
		if (sig == SIGTERM || sig == SIGINT) {
			KLOG_I("Received %s, shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
			break;
		}
	}
	rc = 0;
out:
	if (!stop_within(rt, 600 * NSEC_PER_MSEC))
		KLOG_W("controllers did not stop within 600ms; exiting anyway");
	if (rt->leader)
		kube_leader_stop(rt->leader); /* releases the Lease: a standby takes over at once */
	if (atomic_load(&rt->running) || !rt->stopped) {
		/* Informer threads are still watching; freeing under them is unsafe and stopping them
		 * takes up to a second. The process ends here. */
		fflush(NULL);
		_exit(rc);
	}
	if (rt->leader)
		kube_leader_free(rt->leader);
	diag_server_stop(http);
	for (size_t i = 0; i < NCONTROLLERS; i++)
		if (rt->self[i])
			all_controllers[i]->free(rt->self[i]);
	for (int k = 0; k < CM_NKINDS; k++)
		if (rt->ctx.inf[k])
			kube_informer_free(rt->ctx.inf[k]);
	cm_recorders_free(&rt->ctx);
	kube_client_free(lec);
	kube_client_free(kc);
	kube_config_free(kcfg);
	free(rt);
	return rc;
}
