/*
 * csi-node-driver-registrar, in the order upstream's binary runs:
 * flags -> (probe mode: exit 0) -> connect to the driver and ask
 * GetPluginInfo until it answers -> serve pluginregistration.Registration on the registration
 * socket -> HTTP /healthz -> wait for SIGTERM (exit 0, socket removed) or a failed registration
 * reported by the kubelet (exit 1).
 *
 * SIGTERM and SIGINT are blocked in every thread and taken by the main thread with
 * sigtimedwait(), so every wait (the driver's socket, its GetPluginInfo, the server) ends within
 * a fraction of a second. Handlers run on the gRPC server's threads and only set flags the main
 * thread reads.
 *
 * --mode is deprecated, as upstream deprecated it in v2.9: --mode=kubelet-registration-probe
 * exits 0 at once (an exec probe that used it keeps passing) and any other value, the default ""
 * included, runs the registrar. GetInfo writes no "registration" probe file any more (upstream
 * v2.9 removed it, so a read-only root filesystem works); /healthz is the check.
 */
#include "registrar/registrar.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/diag.h"
#include "base/flags.h"
#include "base/log.h"
#include "base/strbuf.h"
#include "base/timeutil.h"
#include "base/version.h"
#include "base/xalloc.h"
#include "csi/client.h"
#include "csi/server.h"
#include "pluginregistration.pb-c.h"

#define MODE_PROBE "kubelet-registration-probe"

void reg_register_flags(struct flagset *fs, struct reg_config *c)
{
	flags_string(fs, "csi-address", &c->csi_address, "/run/csi/socket",
		     "Unix socket of the CSI driver this registrar asks for its name (unix:///path, unix:/path or /path).");
	flags_string(fs, "kubelet-registration-path", &c->kubelet_registration_path, "",
		     "Path of the driver's socket as the kubelet sees it on the host (required); sent to the kubelet as the plugin endpoint.");
	flags_string(fs, "plugin-registration-path", &c->plugin_registration_path, "/registration",
		     "Directory of the kubelet's plugin watcher (the host's <kubelet root>/plugins_registry) where the registration socket is created.");
	flags_duration(fs, "timeout", &c->timeout_ns, NSEC_PER_SEC,
		       "Deadline of each call to the driver and of the /healthz self-check.");
	flags_duration(fs, "connection-timeout", &c->connection_timeout_ns, 0,
		       "Has no effect: the registrar waits for the driver until it answers.");
	flags_deprecate(fs, "connection-timeout", "it has no effect");
	flags_int(fs, "health-port", &c->health_port, 0,
		  "TCP port of /healthz (0 disables it); only one of --health-port and --http-endpoint may be set.");
	flags_deprecate(fs, "health-port", "use --http-endpoint");
	flags_string(fs, "http-endpoint", &c->http_endpoint, "",
		     "Address of the HTTP server for /healthz (the registration socket exists and answers GetInfo), e.g. :8080; empty disables it.");
	flags_string(fs, "mode", &c->mode, "",
		     "\"kubelet-registration-probe\" exits 0 at once (as upstream since v2.9); any other value runs the registrar.");
	flags_deprecate(fs, "mode", "use /healthz on --http-endpoint");
	flags_bool(fs, "enable-pprof", &c->enable_pprof, false,
		   "Accepted for compatibility; kcsi serves no profiling endpoints.");
}

struct reg_state {
	const struct reg_config *cfg;
	struct csi_conn *csi;
	char *driver;
	char *reg_socket;
	atomic_int failed; /* the kubelet reported a failed registration */
	char error[512];   /* its message (written before failed is set) */
};

static bool signalled(const sigset_t *set, int64_t wait_ns)
{
	struct timespec ts = { (time_t)(wait_ns / NSEC_PER_SEC), (long)(wait_ns % NSEC_PER_SEC) };
	int sig = sigtimedwait(set, NULL, &ts);
	if (sig == SIGTERM || sig == SIGINT) {
		KLOG_I("Received %s, exiting", sig == SIGTERM ? "SIGTERM" : "SIGINT");
		return true;
	}
	return false;
}

/* ---- registration service ---- */

static int get_info(struct csi_call_ctx *ctx, const ProtobufCMessage *req, ProtobufCMessage *resp,
		    void *arg)
{
	struct reg_state *st = arg;
	(void)req;
	(void)ctx;
	KLOG_I("Received GetInfo call");
	Pluginregistration__PluginInfo *info = (Pluginregistration__PluginInfo *)resp;
	static char *versions[] = { "1.0.0" };
	info->type = "CSIPlugin";
	info->name = st->driver;
	info->endpoint = (char *)st->cfg->kubelet_registration_path;
	info->n_supported_versions = 1;
	info->supported_versions = versions;
	return 0;
}

static int notify_status(struct csi_call_ctx *ctx, const ProtobufCMessage *req,
			 ProtobufCMessage *resp, void *arg)
{
	struct reg_state *st = arg;
	const Pluginregistration__RegistrationStatus *s =
		(const Pluginregistration__RegistrationStatus *)req;
	(void)ctx;
	(void)resp;
	KLOG_I("Received NotifyRegistrationStatus call plugin_registered=%s error=\"%s\"",
	       s->plugin_registered ? "true" : "false", s->error ? s->error : "");
	if (!s->plugin_registered && !atomic_load(&st->failed)) {
		snprintf(st->error, sizeof(st->error), "%s", s->error ? s->error : "");
		atomic_store(&st->failed, 1);
	}
	return 0;
}

/* ---- /healthz ---- */

/*
 * upstream v2.17's /healthz: the registration socket exists (os.Stat: missing 404, another kind
 * of file or a failed stat 500) and answers GetInfo with our driver's name, as the kubelet
 * would ask it. The driver itself is not asked: a driver that is down still gets 200, as
 * upstream (livenessprobe is the sidecar that probes the driver).
 */
static int serve_healthz(void *ud, struct strbuf *body, const char **ctype)
{
	struct reg_state *st = ud;
	struct stat sb;
	char err[512];
	(void)ctype;

	if (stat(st->reg_socket, &sb) != 0) {
		if (errno == ENOENT) {
			strbuf_addstr(body, "registration socket does not exist");
			return 404;
		}
		strbuf_addf(body, "failed to stat the socket %s with error: %s", st->reg_socket,
			    strerror(errno));
		return 500;
	}
	if (!S_ISSOCK(sb.st_mode)) {
		strbuf_addf(body, "file exists in socketPath %s but it's not a socket.", st->reg_socket);
		return 500;
	}
	struct csi_conn_opts o = CSI_CONN_OPTS_INIT;
	o.connect_timeout_ns = st->cfg->timeout_ns;
	struct csi_conn *c = csi_connect(st->reg_socket, &o, err, sizeof(err));
	if (!c) {
		strbuf_addf(body, "error connecting to node-registrar socket %s: %s", st->reg_socket, err);
		return 500;
	}
	Pluginregistration__InfoRequest req = PLUGINREGISTRATION__INFO_REQUEST__INIT;
	Pluginregistration__PluginInfo *info = NULL;
	struct csi_status cs;
	int rc = 200;
	if (csi_call(c, "/pluginregistration.Registration/GetInfo", &req.base,
		     &pluginregistration__plugin_info__descriptor, (ProtobufCMessage **)&info,
		     st->cfg->timeout_ns, &cs) != 0) {
		strbuf_addf(body, "error getting info from node-registrar socket: rpc error: code = %s desc = %s",
			    csi_code_go_name(cs.code), cs.message);
		rc = 500;
	} else if (!info->name || strcmp(info->name, st->driver) != 0) {
		strbuf_addf(body, "invalid driver name %s", info->name ? info->name : "");
		rc = 500;
	} else {
		strbuf_addstr(body, "ok");
	}
	csi_msg_free(info);
	csi_conn_free(c);
	return rc;
}

/* ---- start-up ---- */

/*
 * One GetPluginInfo in a thread of its own, so that the main thread keeps taking signals while
 * the call is in flight (a driver may take up to --timeout to answer). The thread owns the
 * struct; the main thread reads it only after `done`.
 */
struct info_call {
	struct csi_conn *csi;
	int64_t timeout_ns;
	Csi__V1__GetPluginInfoResponse *info;
	struct csi_status cs;
	int rc;
	atomic_int done;
};

static void *info_main(void *arg)
{
	struct info_call *c = arg;
	Csi__V1__GetPluginInfoRequest req = CSI__V1__GET_PLUGIN_INFO_REQUEST__INIT;
	c->rc = csi_get_plugin_info(c->csi, &req, &c->info, c->timeout_ns, &c->cs);
	atomic_store(&c->done, 1);
	return NULL;
}

/* GetPluginInfo while taking signals: 0 answered (c filled), 1 a signal, -1 no thread. */
static int plugin_info(struct reg_state *st, const sigset_t *set, struct info_call *c)
{
	pthread_t th;
	memset(c, 0, sizeof(*c));
	c->csi = st->csi;
	c->timeout_ns = st->cfg->timeout_ns;
	if (pthread_create(&th, NULL, info_main, c)) {
		KLOG_ERR(strerror(errno), "Cannot start a thread for GetPluginInfo");
		return -1;
	}
	while (!atomic_load(&c->done)) {
		if (signalled(set, 50 * NSEC_PER_MSEC)) {
			/* nothing is served yet: leave without waiting for the driver's answer */
			KLOG_I("Not waiting for the GetPluginInfo call in flight");
			fflush(NULL);
			_exit(0);
		}
	}
	pthread_join(th, NULL);
	return 0;
}

/*
 * Connects (retrying until the socket answers, or a signal) and asks the driver's name once, as
 * upstream's main: an error or an empty name ends the start-up with status 1 (-1 here).
 */
static int discover_driver(struct reg_state *st, const sigset_t *set)
{
	char err[512];
	int64_t last_log = 0;

	while (!st->csi) {
		struct csi_conn_opts o = CSI_CONN_OPTS_INIT;
		o.connect_timeout_ns = 300 * NSEC_PER_MSEC;
		o.log_interval_ns = INT64_MAX / 2;
		st->csi = csi_connect(st->cfg->csi_address, &o, err, sizeof(err));
		if (st->csi)
			break;
		if (mono_now_ns() - last_log > 10 * NSEC_PER_SEC) {
			KLOG_I("Still connecting to %s: %s", st->cfg->csi_address, err);
			last_log = mono_now_ns();
		}
		if (signalled(set, 200 * NSEC_PER_MSEC))
			return 1;
	}
	KLOG_V(1, "Calling CSI driver to discover driver name");
	struct info_call call;
	if (plugin_info(st, set, &call))
		return -1;
	Csi__V1__GetPluginInfoResponse *info = call.info;
	if (call.rc == 0 && info->name && *info->name) {
		st->driver = xstrdup(info->name);
		csi_msg_free(info);
		KLOG_V(2, "CSI driver name csiDriverName=\"%s\"", st->driver);
		return 0;
	}
	if (call.rc == 0) {
		KLOG_ERR("driver name is empty", "Error retreiving CSI driver name");
		csi_msg_free(info);
	} else {
		struct strbuf why = STRBUF_INIT;
		strbuf_addf(&why, "rpc error: code = %s desc = %s", csi_code_go_name(call.cs.code),
			    call.cs.message);
		KLOG_ERR(why.buf, "Error retreiving CSI driver name");
		strbuf_release(&why);
	}
	return -1;
}

int reg_run(const struct reg_config *cfg)
{
	struct reg_state st = { .cfg = cfg };
	struct csi_server *srv = NULL;
	struct diag_server *http = NULL;
	char err[1024], addr[64];
	const char *http_addr = cfg->http_endpoint;
	sigset_t set;
	int rc = 1;

	/* upstream v2.17's order: the required path first, then the no-op probe mode */
	if (!*cfg->kubelet_registration_path) {
		KLOG_ERR(NULL, "kubelet-registration-path is a required parameter");
		return 1;
	}
	if (strcmp(cfg->mode, MODE_PROBE) == 0) {
		KLOG_W("--mode=%s is deprecated and does nothing: exiting 0", MODE_PROBE);
		return 0;
	}
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	KLOG_I("Version: %s", kcsi_version);
	if (*cfg->mode)
		KLOG_W("--mode is deprecated and will be removed; running the registrar");
	if (cfg->health_port > 0 && *cfg->http_endpoint) {
		KLOG_ERR(NULL, "Only one of `--health-port` and `--http-endpoint` can be set");
		return 1;
	}
	if (cfg->health_port > 0) {
		snprintf(addr, sizeof(addr), ":%d", cfg->health_port);
		http_addr = addr;
	}
	if (cfg->connection_timeout_ns != 0)
		KLOG_W("--connection-timeout is deprecated and will have no effect");

	KLOG_V(1, "Attempting to open a gRPC connection with: \"%s\"", cfg->csi_address);
	int found = discover_driver(&st, &set);
	if (found) {
		if (found > 0)
			rc = 0; /* a signal while waiting for the driver */
		goto out;
	}
	struct strbuf sock = STRBUF_INIT;
	strbuf_addf(&sock, "%s/%s-reg.sock", cfg->plugin_registration_path, st.driver);
	st.reg_socket = strbuf_detach(&sock, NULL);

	struct csi_server_opts so = CSI_SERVER_OPTS_INIT;
	so.threads = 2;
	so.socket_mode = 0600; /* upstream listens under umask 0077 */
	so.grace_ns = 300 * NSEC_PER_MSEC;
	srv = csi_server_new(&so);
	csi_server_handle_service(srv, &pluginregistration__registration__descriptor, "GetInfo",
				  get_info, &st);
	csi_server_handle_service(srv, &pluginregistration__registration__descriptor,
				  "NotifyRegistrationStatus", notify_status, &st);
	KLOG_I("Starting Registration Server socketPath=\"%s\"", st.reg_socket);
	if (csi_server_start(srv, st.reg_socket, err, sizeof(err))) {
		KLOG_ERR(err, "Failed to listen on socket socketPath=%s", LOGQ(st.reg_socket));
		goto out;
	}
	KLOG_I("Registration Server started socketPath=\"%s\"", st.reg_socket);

	if (*http_addr) {
		http = diag_server_start(http_addr, err, sizeof(err));
		if (!http) {
			KLOG_ERR(err, "Failed to start HTTP server endpoint=%s", LOGQ(http_addr));
			goto out;
		}
		KLOG_I("Starting HTTP server endpoint=\"%s\" port=%d", http_addr, diag_server_port(http));
		diag_server_handle(http, "/healthz", serve_healthz, &st);
	} else {
		KLOG_I("Skipping HTTP server");
	}

	for (;;) {
		if (signalled(&set, 100 * NSEC_PER_MSEC)) {
			rc = 0;
			break;
		}
		if (atomic_load(&st.failed)) {
			KLOG_ERR(st.error, "Registration process failed with error, restarting registration container");
			rc = 1;
			break;
		}
	}
out:
	diag_server_stop(http);
	csi_server_free(srv); /* removes the registration socket */
	csi_conn_free(st.csi);
	free(st.driver);
	free(st.reg_socket);
	return rc;
}
