/*
 * livenessprobe, in the order upstream's binary runs: flags -> wait for the driver's socket
 * (forever, logging every 10 s: the kubelet's probe meanwhile fails with "connection refused",
 * which is what it should) -> GetPluginInfo for the driver name (an error ends the process with
 * 1) -> HTTP server for /healthz (and /metrics with --http-endpoint, or on --metrics-address).
 *
 * Signals: SIGTERM and SIGINT are blocked in every thread and taken by one signal thread. During
 * start-up nothing needs stopping and it exits 0 at once; once serving it wakes the main thread,
 * which stops the servers and exits 0, or exits 0 at once when a Probe is in flight (a hung
 * driver may hold it up to --probe-timeout). The signal thread exits 0 itself 900 ms after the
 * signal whatever the main thread still waits for.
 */
#include "livenessprobe/livenessprobe.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/diag.h"
#include "base/flags.h"
#include "base/log.h"
#include "base/strbuf.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "csi/client.h"
#include "csi/metrics.h"

/* A signalled process is gone after this long, whatever it waits for (the rule is 1 s). */
#define LVP_SHUTDOWN_GRACE_NS (900 * NSEC_PER_MSEC)

void lvp_register_flags(struct flagset *fs, struct lvp_config *c)
{
	flags_duration(fs, "probe-timeout", &c->probe_timeout_ns, 3 * NSEC_PER_SEC,
		       "Deadline of the Probe call behind each /healthz request.");
	flags_string(fs, "csi-address", &c->csi_address, "/run/csi/socket",
		     "Address of the CSI driver socket (unix:///path, unix:/path or /path).");
	flags_string(fs, "health-port", &c->health_port, LVP_DEFAULT_HEALTH_PORT,
		     "TCP port of /healthz on all interfaces. Only one of --health-port (when not 9808) and --http-endpoint may be set.");
	flags_deprecate(fs, "health-port", "use --http-endpoint");
	flags_string(fs, "metrics-address", &c->metrics_address, "",
		     "TCP address of a separate server for the Prometheus metrics (example: :8080); empty disables it. Cannot be set with --http-endpoint.");
	flags_deprecate(fs, "metrics-address", "use --http-endpoint");
	flags_string(fs, "http-endpoint", &c->http_endpoint, "",
		     "TCP address of the HTTP server for /healthz and the metrics (example: :8080), instead of 0.0.0.0:<health-port>; empty: use --health-port, without metrics.");
	flags_string(fs, "metrics-path", &c->metrics_path, "/metrics",
		     "HTTP path of the Prometheus metrics.");
}

/* ---- signals ---- */

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool serving;  /* start-up is over: a signal must stop the servers */
	bool stopping; /* a signal arrived */
} rt = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false };

static void *signal_main(void *arg)
{
	sigset_t *set = arg;
	int sig = 0;

	while (sigwait(set, &sig) != 0 || (sig != SIGTERM && sig != SIGINT))
		;
	KLOG_I("Received %s, exiting", sig == SIGTERM ? "SIGTERM" : "SIGINT");
	pthread_mutex_lock(&rt.mu);
	rt.stopping = true;
	bool serving = rt.serving;
	pthread_cond_signal(&rt.cond);
	pthread_mutex_unlock(&rt.mu);
	if (serving)
		sleep_ns(LVP_SHUTDOWN_GRACE_NS); /* the main thread normally exits before this ends */
	else
		KLOG_I("Not waiting for the CSI driver any longer");
	fflush(NULL);
	_exit(0);
	return NULL;
}

/* Blocks the signals in this thread and every thread started later; starts the signal thread. */
static int start_signal_thread(void)
{
	static sigset_t set;
	pthread_t th;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (pthread_create(&th, NULL, signal_main, &set) != 0) {
		KLOG_ERR(strerror(errno), "cannot start the signal thread");
		return -1;
	}
	pthread_detach(th);
	return 0;
}

/* ---- start-up ---- */

/* Checks the flag combinations upstream refuses; writes the /healthz address into addr. */
static int check_flags(const struct lvp_config *c, char *addr, size_t len)
{
	if (strcmp(c->health_port, LVP_DEFAULT_HEALTH_PORT) != 0 && *c->http_endpoint) {
		KLOG_ERR(NULL, "Only one of `--health-port` and `--http-endpoint` can be explicitly set");
		return -1;
	}
	if (*c->metrics_address && *c->http_endpoint) {
		KLOG_ERR(NULL, "Only one of `--metrics-address` and `--http-endpoint` can be explicitly set");
		return -1;
	}
	if (c->probe_timeout_ns <= 0) {
		KLOG_E("--probe-timeout must be positive");
		return -1;
	}
	if (*c->http_endpoint)
		snprintf(addr, len, "%s", c->http_endpoint);
	else
		snprintf(addr, len, "0.0.0.0:%s", c->health_port);
	return 0;
}

/* Asks the driver's name with no deadline, as upstream does; NULL (logged) on any error. */
static char *driver_name(struct csi_conn *csi)
{
	Csi__V1__GetPluginInfoRequest req = CSI__V1__GET_PLUGIN_INFO_REQUEST__INIT;
	Csi__V1__GetPluginInfoResponse *info = NULL;
	struct csi_status cs;
	char *name = NULL;

	KLOG_I("Calling CSI driver to discover driver name");
	if (csi_get_plugin_info(csi, &req, &info, 0, &cs) != 0) {
		struct strbuf why = STRBUF_INIT;
		strbuf_addf(&why, "rpc error: code = %s desc = %s", csi_code_go_name(cs.code),
			    cs.message);
		KLOG_ERR(why.buf, "Failed to get CSI driver name");
		strbuf_release(&why);
		return NULL;
	}
	if (info->name && *info->name)
		name = xstrdup(info->name);
	else
		KLOG_ERR("driver name is empty", "Failed to get CSI driver name");
	csi_msg_free(info);
	return name;
}

static int serve_metrics(void *ud, struct strbuf *body, const char **ctype)
{
	csi_metrics_render(ud, body);
	diag_render_process_metrics(body);
	*ctype = "text/plain; version=0.0.4; charset=utf-8";
	return 200;
}

/*
 * Starts the /healthz server and, when asked, the metrics; NULL servers are not started. 0, or
 * -1 when the metrics address fails (upstream: exit 1), or 1 when the /healthz one does
 * (upstream's main logs it and returns: exit 0).
 */
static int start_servers(const struct lvp_config *c, const char *addr, struct lvp_health *h,
			 struct csi_metrics *m, struct diag_server **http,
			 struct diag_server **metrics_http)
{
	char err[512];

	if (*c->metrics_address) {
		*metrics_http = diag_server_start(c->metrics_address, err, sizeof(err));
		if (!*metrics_http) {
			KLOG_ERR(err, "Failed to start prometheus metrics endpoint on specified address and path addr=%s path=%s",
				 LOGQ(c->metrics_address), LOGQ(c->metrics_path));
			return -1;
		}
		diag_server_handle(*metrics_http, c->metrics_path, serve_metrics, m);
		KLOG_I("Separate metrics ServeMux listening address=%s port=%d",
		       LOGQ(c->metrics_address), diag_server_port(*metrics_http));
	}
	*http = diag_server_start(addr, err, sizeof(err));
	if (!*http) {
		/* upstream's main logs this and returns: status 0 */
		KLOG_ERR(err, "Failed to start http server");
		return 1;
	}
	diag_server_handle_deferred(*http, "/healthz", lvp_health_start, h);
	if (*c->http_endpoint && !*c->metrics_address)
		diag_server_handle(*http, c->metrics_path, serve_metrics, m);
	KLOG_I("ServeMux listening address=%s port=%d", LOGQ(addr), diag_server_port(*http));
	return 0;
}

int lvp_run(const struct lvp_config *c)
{
	struct csi_metrics *metrics = NULL;
	struct csi_conn *csi = NULL;
	struct lvp_health *health = NULL;
	struct diag_server *http = NULL, *metrics_http = NULL;
	char *driver = NULL;
	char addr[512], err[1024];
	int rc = 1;

	if (check_flags(c, addr, sizeof(addr)) || start_signal_thread())
		return 1;
	metrics = csi_metrics_new();
	struct csi_conn_opts o = CSI_CONN_OPTS_INIT;
	o.connect_timeout_ns = 0; /* wait for the driver as long as it takes: never crash */
	o.observer = csi_metrics_observe;
	o.observer_arg = metrics;
	csi = csi_connect(c->csi_address, &o, err, sizeof(err));
	if (!csi) {
		KLOG_ERR(err, "Failed to establish connection to CSI driver");
		goto out;
	}
	driver = driver_name(csi);
	if (!driver)
		goto out;
	KLOG_I("CSI driver name driver=%s", LOGQ(driver));
	csi_metrics_set_driver(metrics, driver);
	health = lvp_health_new(csi, driver, c->probe_timeout_ns);
	if (!health) {
		KLOG_E("Failed to start the prober thread");
		goto out;
	}
	int started = start_servers(c, addr, health, metrics, &http, &metrics_http);
	if (started) {
		rc = started > 0 ? 0 : 1;
		goto out;
	}

	pthread_mutex_lock(&rt.mu);
	rt.serving = true;
	while (!rt.stopping)
		pthread_cond_wait(&rt.cond, &rt.mu);
	pthread_mutex_unlock(&rt.mu);
	if (lvp_health_close(health)) {
		/* its requests wait for a driver that may not answer before the deadline */
		KLOG_I("Not waiting for the Probe in flight");
		fflush(NULL);
		_exit(0);
	}
	rc = 0;
out:
	diag_server_stop(http);
	diag_server_stop(metrics_http);
	lvp_health_free(health);
	csi_conn_free(csi);
	csi_metrics_free(metrics);
	free(driver);
	return rc;
}
