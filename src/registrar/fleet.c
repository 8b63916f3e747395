/*
 * csi-node-driver-registrar --fleet-size N: the registrar's work for N emulated nodes in one
 * process (kcsi up --nodes above 16), where N registrar processes would cost N times the
 * process's fixed memory for a few hundred bytes of state each.
 *
 * Per node it does what one registrar does, over real sockets: it asks that node's driver
 * socket GetPluginInfo (so each node registers the driver its own socket serves), then serves
 * pluginregistration.Registration on that node's <plugin-registration-path>/<driver>-reg.sock
 * (GetInfo: CSIPlugin, the name, the node's --kubelet-registration-path, ["1.0.0"];
 * NotifyRegistrationStatus). "{node}" in --csi-address, --kubelet-registration-path and
 * --plugin-registration-path is replaced by node i's name, <--fleet-node-prefix>-<i>.
 *
 * What it gives up against N processes: one crash takes every node's registration down (kcsi
 * up restarts it, and each node's plugin watcher registers again), and a failed registration
 * that one kubelet reports ends the process, as it ends upstream's registrar, so every node
 * re-registers. /healthz answers 200 once every socket is served.
 */
#include "registrar/fleet.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/diag.h"
#include "base/log.h"
#include "base/strbuf.h"
#include "base/timeutil.h"
#include "base/version.h"
#include "base/xalloc.h"
#include "csi/client.h"
#include "csi/server.h"
#include "pluginregistration.pb-c.h"

#define FLEET_WORKERS 4
#define FLEET_STACK (256 * 1024)

struct fleet_reg {
	char *name, *csi_address, *endpoint, *reg_dir, *driver;
	struct csi_server *srv;
	struct fleet *f;
};

struct fleet {
	struct fleet_reg *regs;
	int n;
	atomic_int next, stop, failed, served;
	char error[512];
};

void reg_fleet_register_flags(struct flagset *fs, int *size, const char **prefix)
{
	flags_int(fs, "fleet-size", size, 0,
		  "kcsi extension: register the driver for this many nodes from one process (kcsi "
		  "up --nodes above 16); {node} in the path flags is replaced by each node's name. "
		  "0: one node, the normal registrar.");
	flags_string(fs, "fleet-node-prefix", prefix, "node",
		     "With --fleet-size: node i is named <prefix>-<i>.");
}

/* tmpl with each "{node}" replaced by the node's name or ID */
static char *replace_node(const char *tmpl, const char *node)
{
	return str_replace_all(tmpl, "{node}", node);
}

static int get_info(struct csi_call_ctx *ctx, const ProtobufCMessage *req, ProtobufCMessage *resp,
		    void *arg)
{
	struct fleet_reg *r = arg;
	(void)req;
	(void)ctx;
	KLOG_V(2, "Received GetInfo call node=\"%s\"", r->name);
	Pluginregistration__PluginInfo *info = (Pluginregistration__PluginInfo *)resp;
	static char *versions[] = { "1.0.0" };
	info->type = "CSIPlugin";
	info->name = r->driver;
	info->endpoint = r->endpoint;
	info->n_supported_versions = 1;
	info->supported_versions = versions;
	return 0;
}

static int notify_status(struct csi_call_ctx *ctx, const ProtobufCMessage *req,
			 ProtobufCMessage *resp, void *arg)
{
	struct fleet_reg *r = arg;
	const Pluginregistration__RegistrationStatus *s =
		(const Pluginregistration__RegistrationStatus *)req;
	(void)ctx;
	(void)resp;
	KLOG_V(2, "Received NotifyRegistrationStatus call node=\"%s\" plugin_registered=%s",
	       r->name, s->plugin_registered ? "true" : "false");
	if (!s->plugin_registered && !atomic_exchange(&r->f->failed, 1))
		snprintf(r->f->error, sizeof(r->f->error), "node %.200s: %.280s", r->name,
			 s->error ? s->error : "");
	return 0;
}

/* The driver's name from this node's socket, retried until it answers: 0, or -1 when stopped. */
static int discover(struct fleet *f, struct fleet_reg *r)
{
	char err[512];
	int64_t last_log = 0;
	while (!atomic_load(&f->stop)) {
		struct csi_conn_opts o = CSI_CONN_OPTS_INIT;
		o.connect_timeout_ns = 300 * NSEC_PER_MSEC;
		o.log_interval_ns = INT64_MAX / 2;
		struct csi_conn *c = csi_connect(r->csi_address, &o, err, sizeof(err));
		if (c) {
			Csi__V1__GetPluginInfoRequest req = CSI__V1__GET_PLUGIN_INFO_REQUEST__INIT;
			Csi__V1__GetPluginInfoResponse *info = NULL;
			struct csi_status cs;
			if (!csi_get_plugin_info(c, &req, &info, NSEC_PER_SEC, &cs) && info->name &&
			    *info->name)
				r->driver = xstrdup(info->name);
			else
				snprintf(err, sizeof(err), "GetPluginInfo: %.400s",
					 info ? "driver name is empty" : cs.message);
			if (info)
				csi_msg_free(info);
			csi_conn_free(c);
			if (r->driver)
				return 0;
		}
		if (mono_now_ns() - last_log > 10 * NSEC_PER_SEC) {
			KLOG_I("Still waiting for the driver node=\"%s\" address=\"%s\": %s", r->name,
			       r->csi_address, err);
			last_log = mono_now_ns();
		}
		sleep_ns(200 * NSEC_PER_MSEC);
	}
	return -1;
}

static void *serve_worker(void *arg)
{
	struct fleet *f = arg;
	for (int i; !atomic_load(&f->stop) && (i = atomic_fetch_add(&f->next, 1)) < f->n;) {
		struct fleet_reg *r = &f->regs[i];
		if (discover(f, r))
			break;
		struct strbuf sock = STRBUF_INIT;
		strbuf_addf(&sock, "%s/%s-reg.sock", r->reg_dir, r->driver);
		struct csi_server_opts so = CSI_SERVER_OPTS_INIT;
		so.threads = 1;
		so.socket_mode = 0600;
		so.grace_ns = 100 * NSEC_PER_MSEC;
		struct csi_server *srv = csi_server_new(&so);
		csi_server_handle_service(srv, &pluginregistration__registration__descriptor,
					  "GetInfo", get_info, r);
		csi_server_handle_service(srv, &pluginregistration__registration__descriptor,
					  "NotifyRegistrationStatus", notify_status, r);
		char err[512];
		if (csi_server_start(srv, sock.buf, err, sizeof(err))) {
			KLOG_ERR(err, "Failed to listen on socket socketPath=\"%s\"", sock.buf);
			csi_server_free(srv);
			atomic_store(&f->failed, 1);
			snprintf(f->error, sizeof(f->error), "node %.200s: %.280s", r->name, err);
		} else {
			r->srv = srv;
			atomic_fetch_add(&f->served, 1);
		}
		strbuf_release(&sock);
	}
	return NULL;
}

static int serve_healthz(void *ud, struct strbuf *body, const char **ctype)
{
	struct fleet *f = ud;
	(void)ctype;
	int served = atomic_load(&f->served);
	if (served < f->n) {
		strbuf_addf(body, "%d of %d registration sockets served", served, f->n);
		return 500;
	}
	strbuf_addstr(body, "ok");
	return 200;
}

static void *server_stopper(void *arg)
{
	struct fleet *f = arg;
	for (int i; (i = atomic_fetch_add(&f->next, 1)) < f->n;)
		csi_server_free(f->regs[i].srv); /* removes the socket */
	return NULL;
}

int reg_fleet_run(const struct reg_config *cfg, int size, const char *prefix)
{
	if (size < 1 || size > 5000) {
		KLOG_E("--fleet-size %d: want 1 to 5000", size);
		return 1;
	}
	if (!*cfg->kubelet_registration_path) {
		KLOG_E("kubelet-registration-path is a required parameter");
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

	struct fleet f = { .n = size };
	f.regs = xcalloc((size_t)size, sizeof(*f.regs));
	for (int i = 0; i < size; i++) {
		struct fleet_reg *r = &f.regs[i];
		char name[256];
		snprintf(name, sizeof(name), "%s-%d", prefix, i + 1);
		r->name = xstrdup(name);
		r->csi_address = replace_node(cfg->csi_address, name);
		r->endpoint = replace_node(cfg->kubelet_registration_path, name);
		r->reg_dir = replace_node(cfg->plugin_registration_path, name);
		r->f = &f;
	}
	struct diag_server *http = NULL;
	char err[512];
	int rc = 1;
	if (*cfg->http_endpoint) {
		http = diag_server_start(cfg->http_endpoint, err, sizeof(err));
		if (!http) {
			KLOG_ERR(err, "Failed to start HTTP server at \"%s\"", cfg->http_endpoint);
			goto out;
		}
		diag_server_handle(http, "/healthz", serve_healthz, &f);
	}
	pthread_t th[FLEET_WORKERS];
	int workers = 0;
	for (; workers < FLEET_WORKERS; workers++)
		if (pthread_create(&th[workers], NULL, serve_worker, &f))
			break;
	bool joined = false;
	int64_t t0 = mono_now_ns();
	for (;;) {
		struct timespec tick = { 0, 50 * 1000 * 1000 };
		int sig = sigtimedwait(&set, NULL, &tick);
		if (sig == SIGTERM || sig == SIGINT) {
			KLOG_I("Received %s, exiting", sig == SIGTERM ? "SIGTERM" : "SIGINT");
			rc = 0;
			break;
		}
		if (atomic_load(&f.failed)) {
			KLOG_E("Registration process failed with error: %s, restarting registration "
			       "container.", f.error);
			break;
		}
		if (!joined && atomic_load(&f.served) == size) {
			KLOG_I("Registration Servers started count=%d seconds=%.2f", size,
			       (double)(mono_now_ns() - t0) / 1e9);
			joined = true;
		}
	}
	atomic_store(&f.stop, 1);
	struct timespec dl = wall_deadline(500 * NSEC_PER_MSEC);
	for (int i = 0; i < workers; i++)
		if (pthread_timedjoin_np(th[i], NULL, &dl))
			_exit(rc); /* a connect in flight; SIGTERM ends us within a second */
	/* Each server stops within its 100 ms grace; FLEET_WORKERS at a time. */
	atomic_store(&f.next, 0);
	workers = 0;
	for (; workers < FLEET_WORKERS; workers++)
		if (pthread_create(&th[workers], NULL, server_stopper, &f))
			break;
	for (int i = 0; i < workers; i++)
		pthread_join(th[i], NULL);
out:
	diag_server_stop(http);
	for (int i = 0; i < size; i++) {
		struct fleet_reg *r = &f.regs[i];
		free(r->name);
		free(r->csi_address);
		free(r->endpoint);
		free(r->reg_dir);
		free(r->driver);
	}
	free(f.regs);
	return rc;
}
