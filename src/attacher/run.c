/*
 * csi-attacher start-up and life cycle, in the order the upstream binary follows:
 * flags -> kube client -> CSI connection (waits for the driver) -> Probe until ready ->
 * GetPluginInfo (the driver name is the attacher name) -> diagnostics server -> capabilities
 * pick the handler and the reconciler -> leader election (optional) -> controller -> SIGTERM.
 *
 * SIGTERM and SIGINT are blocked in every thread and taken by the main thread with
 * sigtimedwait(), so shutdown runs in one place: stop the controller (workers finish their
 * current key), release the Lease, exit 0. Losing the driver connection exits non-zero so that
 * the orchestrator restarts the container, as upstream does.
 */
#include "attacher/attacher.h"
#include "attacher/att.h"
#include "base/diag.h"
#include "base/log.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "csi/metrics.h"
#include "kube/config.h"
#include "kube/leader.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Flag names and defaults are upstream's (a fact of the interface); the help text is ours. */
void att_register_flags(struct flagset *fs, struct att_config *c)
{
	kube_options_register(fs, &c->kube);
	flags_string(fs, "csi-address", &c->csi_address, "/run/csi/socket",
		     "Unix socket of the CSI driver (unix:///path, unix:/path or /path).");
	flags_duration(fs, "timeout", &c->timeout_ns, 15 * NSEC_PER_SEC,
		       "Deadline of each CSI call (ControllerPublishVolume, ControllerUnpublishVolume, ...).");
	flags_int(fs, "worker-threads", &c->worker_threads, 10,
		  "Workers per queue (VolumeAttachments and PersistentVolumes); must be positive.");
	flags_int(fs, "max-entries", &c->max_entries, 0,
		  "Page size of the reconciler's ListVolumes calls; 0 lets the driver choose.");
	flags_duration(fs, "reconcile-sync", &c->reconcile_sync_ns, NSEC_PER_MIN,
		       "How often the reconciler compares VolumeAttachments with the driver's ListVolumes.");
	flags_string(fs, "default-fstype", &c->default_fstype, "",
		     "Filesystem type sent for mount volumes whose PersistentVolume names none.");
	flags_int(fs, "max-grpc-log-length", &c->max_grpc_log_length, -1,
		  "Longest logged CSI request or response, in characters; -1 means no limit.");
	flags_string(fs, "http-endpoint", &c->http_endpoint, "",
		     "Address of the diagnostics HTTP server (metrics, /healthz/leader-election), e.g. :8080; empty disables it. Exclusive with --metrics-address.");
	flags_string(fs, "metrics-address", &c->metrics_address, "",
		     "Older name of --http-endpoint (only one of the two may be set).");
	flags_deprecate(fs, "metrics-address", "use --http-endpoint");
	flags_string(fs, "metrics-path", &c->metrics_path, "/metrics",
		     "HTTP path of the Prometheus metrics.");
	flags_map(fs, "feature-gates", &c->feature_gates,
		  "Feature gates as key=value pairs (accepted; no gate is defined yet).");
	flags_bool(fs, "dummy", &c->dummy, false,
		   "Use no CSI driver: mark VolumeAttachments of attacher \"csi/dummy\" attached (for tests).");
}

/* Everything the diagnostics handlers and the signal loop look at. */
struct att_runtime {
	const struct att_config *cfg;
	struct csi_metrics *metrics;
	struct att_ctrl *ctrl;     /* NULL until leading (or started) */
	struct kube_leader *leader; /* NULL without --leader-election */
	char lease[320];
	atomic_int leading;
};

static void on_connection_lost(void *arg)
{
	(void)arg;
	KLOG_F("Lost connection to CSI driver, exiting");
}

static void on_started_leading(void *ud)
{
	struct att_runtime *rt = ud;

	KLOG_V(2, "became leader, starting");
	atomic_store(&rt->leading, 1);
}

static void on_new_leader(const char *identity, void *ud)
{
	(void)ud;
	KLOG_V(3, "New leader detected leader=\"%s\"", identity);
}

static int serve_metrics(void *ud, struct strbuf *body, const char **ctype)
{
	struct att_runtime *rt = ud;

	*ctype = "text/plain; version=0.0.4; charset=utf-8";
	csi_metrics_render(rt->metrics, body);
	if (rt->ctrl) {
		struct kube_workqueue *qs[2] = { rt->ctrl->vaq, rt->ctrl->pvq };
		kube_workqueue_render_metrics(qs, 2, body);
	}
	if (rt->leader)
		strbuf_addf(body, "# HELP leader_election_master_status 1 while this process holds the named Lease, 0 while it stands by\n"
				  "# TYPE leader_election_master_status gauge\n"
				  "leader_election_master_status{name=\"%s\"} %d\n",
			    rt->lease, kube_leader_is_leader(rt->leader) ? 1 : 0);
	diag_render_process_metrics(body);
	return 200;
}

static int serve_leader_health(void *ud, struct strbuf *body, const char **ctype)
{
	struct att_runtime *rt = ud;

	(void)ctype;
	if (rt->leader && !kube_leader_healthy(rt->leader)) {
		strbuf_addstr(body, "internal server error: failed election to renew leadership on lease\n");
		return 500;
	}
	strbuf_addstr(body, "ok");
	return 200;
}

static bool has_plugin_service(const Csi__V1__GetPluginCapabilitiesResponse *r)
{
	for (size_t i = 0; r && i < r->n_capabilities; i++)
		if (r->capabilities[i]->type_case == CSI__V1__PLUGIN_CAPABILITY__TYPE_SERVICE &&
		    r->capabilities[i]->service->type ==
			    CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__CONTROLLER_SERVICE)
			return true;
	return false;
}

static bool has_ctrl_cap(const Csi__V1__ControllerGetCapabilitiesResponse *r, int type)
{
	for (size_t i = 0; r && i < r->n_capabilities; i++)
		if (r->capabilities[i]->type_case == CSI__V1__CONTROLLER_SERVICE_CAPABILITY__TYPE_RPC &&
		    (int)r->capabilities[i]->rpc->type == type)
			return true;
	return false;
}

/* Discovers the driver name and capabilities; fills the controller options. */
static int discover(struct csi_conn *csi, const struct att_config *cfg, struct att_ctrl_opts *o,
		    char **driver)
{
	Csi__V1__GetPluginInfoRequest ireq = CSI__V1__GET_PLUGIN_INFO_REQUEST__INIT;
	Csi__V1__GetPluginInfoResponse *info = NULL;
	Csi__V1__GetPluginCapabilitiesRequest preq = CSI__V1__GET_PLUGIN_CAPABILITIES_REQUEST__INIT;
	Csi__V1__GetPluginCapabilitiesResponse *pcaps = NULL;
	Csi__V1__ControllerGetCapabilitiesRequest creq = CSI__V1__CONTROLLER_GET_CAPABILITIES_REQUEST__INIT;
	Csi__V1__ControllerGetCapabilitiesResponse *ccaps = NULL;
	struct csi_status st;

	if (csi_get_plugin_info(csi, &ireq, &info, cfg->timeout_ns, &st) != 0) {
		KLOG_E("GetPluginInfo failed: rpc error: code = %s desc = %s",
		       csi_code_go_name(st.code), st.message);
		return -1;
	}
	if (!info->name || !*info->name) {
		KLOG_E("driver name is empty");
		csi_msg_free(info);
		return -1;
	}
	*driver = xstrdup(info->name);
	csi_msg_free(info);
	KLOG_V(2, "CSI driver name: \"%s\"", *driver);
	if (csi_get_plugin_capabilities(csi, &preq, &pcaps, cfg->timeout_ns, &st) != 0) {
		KLOG_E("GetPluginCapabilities failed: rpc error: code = %s desc = %s",
		       csi_code_go_name(st.code), st.message);
		return -1;
	}
	bool service = has_plugin_service(pcaps);
	csi_msg_free(pcaps);
	o->handler = &att_trivial_handler;
	if (!service) {
		KLOG_V(2, "CSI driver does not support Plugin Controller Service, using trivial handler");
		return 0;
	}
	if (csi_controller_get_capabilities(csi, &creq, &ccaps, cfg->timeout_ns, &st) != 0) {
		KLOG_E("ControllerGetCapabilities failed: rpc error: code = %s desc = %s",
		       csi_code_go_name(st.code), st.message);
		return -1;
	}
	if (has_ctrl_cap(ccaps, CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__PUBLISH_UNPUBLISH_VOLUME)) {
		o->handler = &att_csi_handler;
		o->csi = csi;
		KLOG_V(2, "CSI driver supports ControllerPublishUnpublish, using real CSI handler");
	} else {
		KLOG_V(2, "CSI driver does not support ControllerPublishUnpublish, using trivial handler");
	}
	o->publish_readonly =
		has_ctrl_cap(ccaps, CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__PUBLISH_READONLY);
	o->single_node_multi_writer = has_ctrl_cap(
		ccaps, CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__SINGLE_NODE_MULTI_WRITER);
	if (o->csi &&
	    has_ctrl_cap(ccaps, CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__LIST_VOLUMES) &&
	    has_ctrl_cap(ccaps, CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__LIST_VOLUMES_PUBLISHED_NODES)) {
		o->reconcile_ns = cfg->reconcile_sync_ns;
		KLOG_V(2, "CSI driver supports list volumes published nodes. Using capability to "
			  "reconcile volume attachment objects with actual backend state");
	}
	csi_msg_free(ccaps);
	return 0;
}

/* Waits for SIGTERM/SIGINT; while waiting, starts the controller once leading. */
static int wait_for_signal(struct att_runtime *rt, struct att_ctrl *ctrl, const sigset_t *set)
{
	struct timespec tick = { 0, 200 * 1000 * 1000 };
	bool started = false;
	char err[256];

	for (;;) {
		if (!started && atomic_load(&rt->leading)) {
			if (att_ctrl_start(ctrl, err, sizeof(err))) {
				KLOG_E("%s", err);
				return 1;
			}
			rt->ctrl = ctrl;
			started = true;
		}
		int sig = sigtimedwait(set, NULL, &tick);
		if (sig == SIGTERM || sig == SIGINT) {
			KLOG_I("Received %s, shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
			if (started)
				att_ctrl_stop(ctrl);
			return 0;
		}
	}
}

int att_run(const struct att_config *cfg)
{
	struct att_runtime rt = { 0 };
	struct kube_config *kcfg = NULL;
	struct kube_client *kc = NULL, *lec = NULL;
	struct csi_conn *csi = NULL;
	struct diag_server *http = NULL;
	struct kube_recorder *rec = NULL;
	struct att_ctrl *ctrl = NULL;
	struct att_ctrl_opts o = { 0 };
	char err[1024], *driver = NULL;
	const char *addr;
	sigset_t set;
	int rc = 1;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	KLOG_I("Version: %s", KCSI_VERSION);
	if (*cfg->metrics_address && *cfg->http_endpoint) {
		KLOG_E("only one of `--metrics-address` and `--http-endpoint` can be set.");
		return 1;
	}
	addr = *cfg->metrics_address ? cfg->metrics_address : cfg->http_endpoint;
	if (cfg->worker_threads <= 0) {
		KLOG_E("option -worker-threads must be greater than zero");
		return 1;
	}
	kcfg = kube_config_load(cfg->kube.kubeconfig, cfg->kube.master, NULL, err, sizeof(err));
	if (!kcfg) {
		KLOG_E("%s", err);
		return 1;
	}
	struct kube_client_opts ko = { .component = "csi-attacher", .qps = cfg->kube.qps,
				       .burst = cfg->kube.burst };
	kc = kube_client_new(kcfg, &ko, err, sizeof(err));
	if (!kc) {
		KLOG_E("%s", err);
		goto out;
	}
	rt.cfg = cfg;
	rt.metrics = csi_metrics_new();

	o.workers = cfg->worker_threads;
	o.timeout_ns = cfg->timeout_ns;
	o.retry_start_ns = cfg->kube.retry_start_ns;
	o.retry_max_ns = cfg->kube.retry_max_ns;
	o.resync_ns = cfg->kube.resync_ns;
	o.max_entries = cfg->max_entries;
	o.default_fstype = cfg->default_fstype;
	if (cfg->dummy) {
		driver = xstrdup(ATT_DUMMY_ATTACHER);
		o.handler = &att_trivial_handler;
		KLOG_I("Running in dummy mode: VolumeAttachments of \"%s\" are marked attached",
		       ATT_DUMMY_ATTACHER);
	} else {
		struct csi_conn_opts co = CSI_CONN_OPTS_INIT;
		co.on_lost = on_connection_lost;
		co.observer = csi_metrics_observe;
		co.observer_arg = rt.metrics;
		co.max_log_len = cfg->max_grpc_log_length;
		csi = csi_connect(cfg->csi_address, &co, err, sizeof(err));
		if (!csi) {
			KLOG_E("%s", err);
			goto out;
		}
		if (csi_wait_ready(csi, cfg->timeout_ns, err, sizeof(err))) {
			KLOG_E("%s", err);
			goto out;
		}
		if (discover(csi, cfg, &o, &driver))
			goto out;
		csi_metrics_set_driver(rt.metrics, driver);
	}
	o.driver = driver;

	if (*addr) {
		http = diag_server_start(addr, err, sizeof(err));
		if (!http) {
			KLOG_E("Failed to start HTTP server at specified address (\"%s\") and metrics "
			       "path (\"%s\"): %s", addr, cfg->metrics_path, err);
			goto out;
		}
		/* With port 0 the kernel picked one: log the real one so tools can find it. */
		KLOG_I("ServeMux listening at \"%s\" port=%d", addr, diag_server_port(http));
		diag_server_handle(http, cfg->metrics_path, serve_metrics, &rt);
	}

	struct kube_recorder_opts ro = { 0 };
	char component[300];
	snprintf(component, sizeof(component), "csi-attacher %s", driver);
	ro.component = component;
	rec = kube_recorder_new(kc, &ro);
	o.recorder = rec;
	ctrl = att_ctrl_new(kc, &o);

	if (!cfg->kube.leader_election) {
		atomic_store(&rt.leading, 1);
	} else {
		/* Its own client: a throttled volume workload must never delay lease renewal. */
		lec = kube_client_new(kcfg, &ko, err, sizeof(err));
		if (!lec) {
			KLOG_E("Failed to create leaderelection client: %s", err);
			goto out;
		}
		kube_leader_lease_name("external-attacher-leader", driver, rt.lease, sizeof(rt.lease));
		struct kube_leader_opts lo = {
			.ns = cfg->kube.le_namespace, .name = rt.lease,
			.lease_duration_ns = cfg->kube.le_lease_ns,
			.renew_deadline_ns = cfg->kube.le_renew_ns,
			.retry_period_ns = cfg->kube.le_retry_ns,
			.on_started_leading = on_started_leading, .on_new_leader = on_new_leader,
			.ud = &rt,
		};
		if (!lo.ns || !*lo.ns)
			lo.ns = getenv("POD_NAMESPACE");
		rt.leader = kube_leader_new(lec, &lo);
		if (http)
			diag_server_handle(http, "/healthz/leader-election", serve_leader_health, &rt);
		if (kube_leader_start(rt.leader)) {
			KLOG_E("failed to initialize leader election");
			goto out;
		}
	}
	rc = wait_for_signal(&rt, ctrl, &set);
out:
	if (rt.leader) {
		kube_leader_stop(rt.leader);
		kube_leader_free(rt.leader);
	}
	diag_server_stop(http);
	att_ctrl_free(ctrl);
	kube_recorder_free(rec);
	csi_conn_free(csi);
	kube_client_free(lec);
	kube_client_free(kc);
	kube_config_free(kcfg);
	if (rt.metrics)
		csi_metrics_free(rt.metrics);
	free(driver);
	return rc;
}
