/*
 * The shared sidecar runtime; see sidecar.h for the order of start-up and the shutdown rules.
 *
 * Threads: the main thread runs start-up and then waits on rt.cond; the signal thread waits in
 * sigwait(); the watchdog exists only after a signal. rt.mu guards phase, stopping and
 * lease_released.
 */
#include "sidecar/sidecar.h"

#include "base/diag.h"
#include "base/log.h"
#include "base/timeutil.h"
#include "base/version.h"
#include "base/xalloc.h"
#include "kube/leader.h"
#include "kube/secret.h"

#include <assert.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define GRPC_DEADLINE_EXCEEDED 4
/* A signalled process is gone after this long, whatever it waits for (the rule is 1 s). */
#define SHUTDOWN_WATCHDOG_NS (900 * NSEC_PER_MSEC)

void sidecar_register_flags(struct flagset *fs, struct sidecar_config *c)
{
	c->max_grpc_log_length = -1;
	c->le_labels = (struct flag_map){ NULL, 0 };
	kube_options_register(fs, &c->kube);
	flags_string(fs, "csi-address", &c->csi_address, "/run/csi/socket",
		     "Unix socket of the CSI driver (unix:///path, unix:/path or /path).");
	flags_duration(fs, "timeout", &c->timeout_ns, 15 * NSEC_PER_SEC,
		       "Deadline of each CSI call.");
	flags_duration(fs, "connection-timeout", &c->connection_timeout_ns, 0,
		       "Has no effect: the sidecar waits for the driver for ever, logging every 10 s.");
	flags_deprecate(fs, "connection-timeout", "it has no effect");
	flags_string(fs, "http-endpoint", &c->http_endpoint, "",
		     "Address of the diagnostics HTTP server (metrics, /healthz/leader-election), e.g. :8080; empty disables it. Exclusive with --metrics-address.");
	flags_string(fs, "metrics-address", &c->metrics_address, "",
		     "Address of the diagnostics HTTP server, as --http-endpoint; only one of the two may be set.");
	flags_deprecate(fs, "metrics-address", "use --http-endpoint");
	flags_string(fs, "metrics-path", &c->metrics_path, "/metrics",
		     "HTTP path of the Prometheus metrics.");
	flags_gates(fs, "feature-gates", &c->feature_gates,
		  "Feature gates as key=value pairs (Go bools); unknown gates are refused, as upstream refuses them.");
	flags_labels(fs, "leader-election-labels", &c->le_labels,
		     "Labels put on the leader-election Lease while this replica leads, as key:value pairs separated by commas (key=value is accepted too).");
}

int sidecar_add_secrets(struct kube_client *kc, struct csi_arena *a, ProtobufCMessage *msg,
			const char *field, const char *ns, const char *name, char *err, size_t errlen)
{
	struct kube_secret s;
	char why[512];

	if (kube_secret_read(kc, ns, name, &s, why, sizeof(why))) {
		snprintf(err, errlen, "failed to load secret \"%s/%s\": %s", ns, name, why);
		return -1;
	}
	csi_arena_wipe_on_free(a);
	for (size_t i = 0; i < s.n; i++)
		csi_map_add(a, msg, field, s.entries[i].key, s.entries[i].value);
	kube_secret_free(&s);
	return 0;
}

enum phase {
	PHASE_STARTING, /* main thread in a start-up wait: a signal exits at once */
	PHASE_RUNNING,  /* main thread waits on cond: it stops the controller itself */
	PHASE_DONE,     /* main thread is cleaning up */
};

struct runtime {
	struct sidecar sc;
	struct kube_client *lec;
	struct kube_leader *leader; /* NULL without --leader-election */
	json_t *le_labels;          /* the Lease's labels, borrowed by the leader */
	struct diag_server *http;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	enum phase phase;
	bool stopping;       /* a signal arrived */
	bool lease_released; /* the signal thread is done with the leader */
	bool leading;
	bool started;        /* the controller started: its stop is owed */
	int signo;
};

static void on_connection_lost(void *arg)
{
	(void)arg;
	KLOG_F("Lost connection to CSI driver, exiting");
}

static void on_started_leading(void *ud)
{
	struct runtime *rt = ud;

	KLOG_V(2, "became leader, starting");
	pthread_mutex_lock(&rt->mu);
	rt->leading = true;
	pthread_cond_broadcast(&rt->cond);
	pthread_mutex_unlock(&rt->mu);
}

/* The elector calls this after releasing the Lease on stop: nothing more to do. */
static void on_stopped_leading(void *ud)
{
	struct runtime *rt = ud;

	pthread_mutex_lock(&rt->mu);
	bool stopping = rt->stopping;
	pthread_mutex_unlock(&rt->mu);
	if (!stopping)
		KLOG_F("leaderelection lost");
}

static void on_new_leader(const char *identity, void *ud)
{
	(void)ud;
	KLOG_V(3, "New leader detected leader=\"%s\"", identity);
}

static int serve_metrics(void *ud, struct strbuf *body, const char **ctype)
{
	struct runtime *rt = ud;

	*ctype = "text/plain; version=0.0.4; charset=utf-8";
	csi_metrics_render(rt->sc.metrics, body);
	pthread_mutex_lock(&rt->mu);
	bool started = rt->started;
	pthread_mutex_unlock(&rt->mu);
	if (started && rt->sc.ctrl_ops->render_metrics)
		rt->sc.ctrl_ops->render_metrics(rt->sc.ctrl, body);
	if (rt->leader)
		kube_leader_render_metrics(rt->leader, body);
	if (rt->sc.ops->rest_client_metrics)
		kube_render_rest_client_metrics(body);
	diag_render_process_metrics(body);
	return 200;
}

static int serve_leader_health(void *ud, struct strbuf *body, const char **ctype)
{
	struct runtime *rt = ud;

	(void)ctype;
	if (rt->leader && !kube_leader_healthy(rt->leader)) {
		strbuf_addstr(body, "internal server error: failed election to renew leadership on lease\n");
		return 500;
	}
	strbuf_addstr(body, "ok");
	return 200;
}

bool sidecar_has_controller_service(const struct sidecar *sc)
{
	const Csi__V1__GetPluginCapabilitiesResponse *r = sc->plugin_caps;

	for (size_t i = 0; r && i < r->n_capabilities; i++)
		if (r->capabilities[i]->type_case == CSI__V1__PLUGIN_CAPABILITY__TYPE_SERVICE &&
		    r->capabilities[i]->service->type ==
			    CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__CONTROLLER_SERVICE)
			return true;
	return false;
}

bool sidecar_has_accessibility_constraints(const struct sidecar *sc)
{
	const Csi__V1__GetPluginCapabilitiesResponse *r = sc->plugin_caps;

	for (size_t i = 0; r && i < r->n_capabilities; i++)
		if (r->capabilities[i]->type_case == CSI__V1__PLUGIN_CAPABILITY__TYPE_SERVICE &&
		    r->capabilities[i]->service->type ==
			    CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__VOLUME_ACCESSIBILITY_CONSTRAINTS)
			return true;
	return false;
}

bool sidecar_has_ctrl_cap(const struct sidecar *sc, int type)
{
	const Csi__V1__ControllerGetCapabilitiesResponse *r = sc->ctrl_caps;

	for (size_t i = 0; r && i < r->n_capabilities; i++)
		if (r->capabilities[i]->type_case == CSI__V1__CONTROLLER_SERVICE_CAPABILITY__TYPE_RPC &&
		    (int)r->capabilities[i]->rpc->type == type)
			return true;
	return false;
}

int sidecar_probe_forever(struct csi_conn *csi, int64_t timeout_ns, char *err, size_t errlen)
{
	Csi__V1__ProbeRequest req = CSI__V1__PROBE_REQUEST__INIT;
	int64_t last_log = 0;

	for (;;) {
		Csi__V1__ProbeResponse *resp = NULL;
		struct csi_status st;
		const char *why;

		if (csi_probe(csi, &req, &resp, timeout_ns, &st) == 0) {
			bool ready = !resp->ready || resp->ready->value;
			csi_msg_free(resp);
			if (ready) {
				KLOG_V(2, "CSI driver is ready");
				return 0;
			}
			why = "CSI driver is not ready yet";
		} else if (st.code == GRPC_DEADLINE_EXCEEDED) {
			why = "CSI driver probe timed out";
		} else {
			snprintf(err, errlen, "CSI driver probe failed: rpc error: code = %s desc = %.800s",
				 csi_code_go_name(st.code), st.message);
			return -1;
		}
		int64_t now = mono_now_ns();
		if (!last_log || now - last_log >= 10 * NSEC_PER_SEC) {
			KLOG_I("%s, retrying", why);
			last_log = now;
		}
		sleep_ns(NSEC_PER_SEC);
	}
}

/* GetPluginInfo, GetPluginCapabilities, ControllerGetCapabilities: no retries, as upstream. */
static int discover(struct runtime *rt, char *err, size_t errlen)
{
	struct sidecar *sc = &rt->sc;
	Csi__V1__GetPluginInfoRequest ireq = CSI__V1__GET_PLUGIN_INFO_REQUEST__INIT;
	Csi__V1__GetPluginInfoResponse *info = NULL;
	Csi__V1__GetPluginCapabilitiesRequest preq = CSI__V1__GET_PLUGIN_CAPABILITIES_REQUEST__INIT;
	Csi__V1__ControllerGetCapabilitiesRequest creq = CSI__V1__CONTROLLER_GET_CAPABILITIES_REQUEST__INIT;
	struct csi_status st;

	if (csi_get_plugin_info(sc->csi, &ireq, &info, sc->cfg->timeout_ns, &st) != 0) {
		snprintf(err, errlen, "error getting CSI driver name: rpc error: code = %s desc = %.800s",
			 csi_code_go_name(st.code), st.message);
		return -1;
	}
	if (!info->name || !*info->name) {
		snprintf(err, errlen, "error getting CSI driver name: driver name is empty");
		csi_msg_free(info);
		return -1;
	}
	sc->driver = xstrdup(info->name);
	csi_msg_free(info);
	KLOG_V(2, "CSI driver name: \"%s\"", sc->driver);
	if (csi_get_plugin_capabilities(sc->csi, &preq, &sc->plugin_caps, sc->cfg->timeout_ns,
					&st) != 0) {
		snprintf(err, errlen, "error getting CSI driver capabilities: rpc error: code = %s desc = %.800s",
			 csi_code_go_name(st.code), st.message);
		return -1;
	}
	if (sc->ops->ctrl_caps_only_with_service && !sidecar_has_controller_service(sc))
		return 0;
	if (csi_controller_get_capabilities(sc->csi, &creq, &sc->ctrl_caps, sc->cfg->timeout_ns,
					    &st) != 0) {
		snprintf(err, errlen, "error getting CSI driver controller capabilities: rpc error: code = %s desc = %.800s",
			 csi_code_go_name(st.code), st.message);
		return -1;
	}
	return 0;
}

static void *watchdog_main(void *arg)
{
	(void)arg;
	sleep_ns(SHUTDOWN_WATCHDOG_NS);
	KLOG_W("Shutdown did not finish in time, exiting");
	_exit(0);
}

/*
 * Takes SIGTERM/SIGINT. The Lease is released here (the elector thread does it on stop), so it is
 * released whatever the main thread is blocked in; the watchdog bounds the whole shutdown.
 */
static void *signal_main(void *arg)
{
	struct runtime *rt = arg;
	sigset_t set;
	int sig = 0;
	pthread_t wd;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	while (sigwait(&set, &sig) != 0 || (sig != SIGTERM && sig != SIGINT))
		;
	KLOG_I("Received %s, shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
	if (pthread_create(&wd, NULL, watchdog_main, NULL) != 0)
		KLOG_W("cannot start the shutdown watchdog");
	pthread_mutex_lock(&rt->mu);
	rt->stopping = true;
	rt->signo = sig;
	struct kube_leader *le = rt->leader;
	pthread_cond_broadcast(&rt->cond);
	pthread_mutex_unlock(&rt->mu);
	if (le)
		kube_leader_stop(le); /* a leader releases the Lease; a standby just stops */
	pthread_mutex_lock(&rt->mu);
	rt->lease_released = true;
	enum phase p = rt->phase;
	pthread_cond_broadcast(&rt->cond);
	pthread_mutex_unlock(&rt->mu);
	if (p == PHASE_STARTING)
		_exit(0); /* nothing started that needs stopping; the Lease is released */
	return NULL;
}

/* Main thread, once start-up is done: start when leading, then wait for the signal. */
static int run_loop(struct runtime *rt)
{
	char err[1024];

	pthread_mutex_lock(&rt->mu);
	while (!rt->stopping && !rt->leading)
		pthread_cond_wait(&rt->cond, &rt->mu);
	pthread_mutex_unlock(&rt->mu);
	if (!rt->stopping) {
		/* Cache sync may wait for an unreachable API server: a signal exits from here. */
		if (rt->sc.ctrl_ops->start(rt->sc.ctrl, err, sizeof(err))) {
			KLOG_E("%s", err);
			return 1;
		}
		pthread_mutex_lock(&rt->mu);
		rt->started = true;
		rt->phase = PHASE_RUNNING;
		pthread_mutex_unlock(&rt->mu);
	}
	pthread_mutex_lock(&rt->mu);
	rt->phase = PHASE_RUNNING;
	while (!rt->stopping || !rt->lease_released)
		pthread_cond_wait(&rt->cond, &rt->mu);
	rt->phase = PHASE_DONE;
	pthread_mutex_unlock(&rt->mu);
	return 0;
}

static int start_leader(struct runtime *rt, const struct kube_client_opts *ko, char *err,
			size_t errlen)
{
	const struct sidecar_config *cfg = rt->sc.cfg;

	/* Its own client: a throttled volume workload must never delay lease renewal. */
	rt->lec = kube_client_new(rt->sc.kcfg, ko, err, errlen);
	if (!rt->lec)
		return -1;
	rt->sc.ops->lease_name(rt->sc.driver, rt->sc.lease, sizeof(rt->sc.lease));
	struct kube_leader_opts lo = {
		.ns = cfg->kube.le_namespace, .name = rt->sc.lease,
		.lease_duration_ns = cfg->kube.le_lease_ns,
		.renew_deadline_ns = cfg->kube.le_renew_ns,
		.retry_period_ns = cfg->kube.le_retry_ns,
		.on_started_leading = on_started_leading, .on_new_leader = on_new_leader,
		.on_stopped_leading = on_stopped_leading, .ud = rt,
		.events = true, /* upstream's LeaderElection event on the Lease */
	};
	if (!lo.ns || !*lo.ns)
		lo.ns = getenv("POD_NAMESPACE");
	for (size_t i = 0; i < cfg->le_labels.len; i++) {
		if (!rt->le_labels)
			rt->le_labels = json_object();
		json_object_set_new(rt->le_labels, cfg->le_labels.items[i].key,
				    json_string(cfg->le_labels.items[i].value));
	}
	lo.labels = rt->le_labels;
	struct kube_leader *le = kube_leader_new(rt->lec, &lo);
	if (rt->http)
		diag_server_handle(rt->http, "/healthz/leader-election", serve_leader_health, rt);
	pthread_mutex_lock(&rt->mu);
	bool stopping = rt->stopping;
	if (!stopping)
		rt->leader = le;
	pthread_mutex_unlock(&rt->mu);
	if (stopping) {
		kube_leader_free(le);
		return 0;
	}
	if (kube_leader_start(le)) {
		snprintf(err, errlen, "failed to initialize leader election");
		return -1;
	}
	return 0;
}

void sidecar_set_controller(struct sidecar *sc, void *ctrl, const struct sidecar_controller *ops)
{
	assert(!sc->ctrl && ctrl && ops);
	sc->ctrl = ctrl;
	sc->ctrl_ops = ops;
}

struct kube_recorder *sidecar_recorder(struct sidecar *sc, const char *component)
{
	struct kube_recorder_opts ro = { .component = component };

	assert(!sc->recorder);
	sc->recorder = kube_recorder_new(sc->kc, &ro);
	return sc->recorder;
}

/* A failed start-up step's line: "<what> err=<quoted err>" (structured), or err alone. */
static void startup_error(const struct sidecar_ops *ops, const char *what, const char *err)
{
	if (ops->structured_errors)
		KLOG_E("%s err=%s", what, LOGQ(err));
	else
		KLOG_E("%s", err);
}

/* The exit code of a failed start-up step: 255 where upstream's main calls klog.Fatal. */
static int fatal_rc(const struct sidecar_ops *ops, unsigned step)
{
	return (ops->fatal_255 & step) ? SIDECAR_EXIT_FATAL : 1;
}

int sidecar_run(const struct sidecar_config *cfg, const struct sidecar_ops *ops)
{
	static struct runtime the_runtime;
	struct runtime *rt = &the_runtime;
	struct sidecar *sc = &rt->sc;
	char err[1024];
	const char *addr;
	sigset_t set;
	pthread_t sigthr;
	int rc = 1;

	sc->cfg = cfg;
	sc->ops = ops;
	pthread_mutex_init(&rt->mu, NULL);
	pthread_cond_init(&rt->cond, NULL);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (pthread_create(&sigthr, NULL, signal_main, rt) != 0) {
		KLOG_E("cannot start the signal thread");
		return 1;
	}
	pthread_detach(sigthr);

	KLOG_I("Version: %s", kcsi_version);
	if (cfg->connection_timeout_ns != 0)
		KLOG_W("--connection-timeout is deprecated and will have no effect");
	if (*cfg->metrics_address && *cfg->http_endpoint) {
		KLOG_E("only one of `--metrics-address` and `--http-endpoint` can be set.");
		return 1;
	}
	addr = *cfg->metrics_address ? cfg->metrics_address : cfg->http_endpoint;
	sc->kcfg = kube_config_load(cfg->kube.kubeconfig, cfg->kube.master, NULL, err, sizeof(err));
	if (!sc->kcfg) {
		startup_error(ops, "Failed to build a Kubernetes config", err);
		return fatal_rc(ops, SIDECAR_FATAL_KUBE);
	}
	struct kube_client_opts ko = { .component = ops->component, .qps = cfg->kube.qps,
				       .burst = cfg->kube.burst };
	sc->kc = kube_client_new(sc->kcfg, &ko, err, sizeof(err));
	if (!sc->kc) {
		startup_error(ops, "Failed to create a Clientset", err);
		rc = fatal_rc(ops, SIDECAR_FATAL_KUBE);
		goto out;
	}
	sc->metrics = csi_metrics_new();
	if (ops->kube_ready)
		ops->kube_ready(ops->ud, sc);

	if (ops->dummy_driver) {
		sc->driver = xstrdup(ops->dummy_driver);
	} else {
		struct csi_conn_opts co = CSI_CONN_OPTS_INIT;
		co.on_lost = on_connection_lost;
		co.observer = csi_metrics_observe;
		co.observer_arg = sc->metrics;
		co.max_log_len = cfg->max_grpc_log_length;
		sc->csi = csi_connect(cfg->csi_address, &co, err, sizeof(err));
		if (!sc->csi) {
			char what[600];
			snprintf(what, sizeof(what), "Failed to connect to the CSI driver csiAddress=%s",
				 LOGQ(cfg->csi_address));
			/* err= last, after the step's pairs, as zapr orders them */
			startup_error(ops, what, err);
			goto out;
		}
		if (sidecar_probe_forever(sc->csi, cfg->timeout_ns, err, sizeof(err))) {
			startup_error(ops, "Failed to probe the CSI driver", err);
			goto out;
		}
		if (discover(rt, err, sizeof(err))) {
			startup_error(ops, "Failed to get the CSI driver name", err);
			rc = fatal_rc(ops, SIDECAR_FATAL_DISCOVER);
			goto out;
		}
		csi_metrics_set_driver(sc->metrics, sc->driver);
	}
	int setup_rc = ops->setup(ops->ud, sc, err, sizeof(err));
	if (setup_rc) {
		KLOG_E("%s", err);
		rc = setup_rc == SIDECAR_SETUP_FATAL ? SIDECAR_EXIT_FATAL : fatal_rc(ops, SIDECAR_FATAL_SETUP);
		goto out;
	}
	assert(sc->ctrl && sc->ctrl_ops); /* setup's contract: it built the controller */
	if (*addr) {
		rt->http = diag_server_start(addr, err, sizeof(err));
		if (!rt->http && ops->structured_errors) {
			char what[600];
			snprintf(what, sizeof(what), "Failed to start HTTP server at specified address "
				 "and metrics path address=%s", LOGQ(addr));
			snprintf(what + strlen(what), sizeof(what) - strlen(what), " metricsPath=%s",
				 LOGQ(cfg->metrics_path));
			startup_error(ops, what, err);
		} else if (!rt->http) {
			KLOG_ERR(err, "Failed to start HTTP server at specified address (\"%s\") and metrics path (\"%s\")",
				 addr, cfg->metrics_path);
		}
		if (!rt->http) {
			rc = fatal_rc(ops, SIDECAR_FATAL_HTTP);
			goto out;
		}
		/* With port 0 the kernel picked one: log the real one so tools can find it. */
		KLOG_I("ServeMux listening at \"%s\" port=%d", addr, diag_server_port(rt->http));
		diag_server_handle(rt->http, cfg->metrics_path, serve_metrics, rt);
	}
	if (!cfg->kube.leader_election) {
		on_started_leading(rt);
	} else if (start_leader(rt, &ko, err, sizeof(err))) {
		KLOG_E("%s", err);
		rc = fatal_rc(ops, SIDECAR_FATAL_LEADER);
		goto out;
	}
	rc = run_loop(rt);
out:
	pthread_mutex_lock(&rt->mu);
	bool signalled = rt->stopping;
	rt->phase = PHASE_DONE;
	bool started = rt->started;
	/* A signal that raced with a fatal error: let the signal thread finish with the leader. */
	while (rt->stopping && !rt->lease_released)
		pthread_cond_wait(&rt->cond, &rt->mu);
	pthread_mutex_unlock(&rt->mu);
	if (started)
		sc->ctrl_ops->stop(sc->ctrl);
	if (signalled) {
		/*
		 * Workers are done and the Lease is released: exit now. Closing informers and sending
		 * queued events (requests to an API server that may be slow or gone) could take longer
		 * than the 1 s a signalled process has; upstream's sidecars drop them too.
		 */
		KLOG_I("Exiting");
		_exit(0);
	}
	if (rt->leader)
		kube_leader_stop(rt->leader);
	diag_server_stop(rt->http);
	if (sc->ctrl)
		sc->ctrl_ops->free(sc->ctrl);
	if (ops->cleanup)
		ops->cleanup(ops->ud);
	kube_recorder_free(sc->recorder);
	kube_leader_free(rt->leader);
	json_decref(rt->le_labels);
	csi_msg_free(sc->plugin_caps);
	csi_msg_free(sc->ctrl_caps);
	csi_conn_free(sc->csi);
	kube_client_free(rt->lec);
	kube_client_free(sc->kc);
	kube_config_free(sc->kcfg);
	if (sc->metrics)
		csi_metrics_free(sc->metrics);
	free(sc->driver);
	/* The runtime itself is static: the signal thread may still hold its mutex. */
	return rc;
}
