/*
 * kcsi-loopplugin --fleet-size N: the node service of N emulated nodes in one process, for
 * `kcsi up --nodes` above 16. Each node keeps what makes it a node to its kubelet: its own
 * socket (--endpoint with {node} replaced by its ID), its own node ID (<--nodeid>-<i>) and so
 * its own NodeGetInfo, its own record under the pool's nodes/, its own in-flight keys and its own
 * stage and publish work (real loop devices and mounts). What they share is the process: its
 * code and libraries (which N processes would map N times) and its exit.
 *
 * Each node's server has FLEET_THREADS worker threads (a kubelet makes one call at a time per
 * volume; the server queues the rest) plus its I/O thread, with small stacks.
 */
#include "loopplugin/fleet.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/strbuf.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "csi/server.h"

#define FLEET_THREADS 2
#define FLEET_STACK (512 * 1024) /* handlers run mkfs and mount through exec.c: keep room */
#define STOP_GRACE_MS 300
#define STOP_BUDGET_MS 700
#define STOPPERS 4

struct fleet_node {
	struct lp_config cfg;
	char *nodeid, *endpoint;
	struct lp_driver *d;
	struct csi_server *s;
};

struct fleet {
	struct fleet_node *nodes;
	int n;
	atomic_int next, stopped;
};

/* tmpl with each "{node}" replaced by the node's name or ID */
static char *replace_node(const char *tmpl, const char *node)
{
	return str_replace_all(tmpl, "{node}", node);
}

static void *stopper_main(void *arg)
{
	struct fleet *f = arg;
	for (int i; (i = atomic_fetch_add(&f->next, 1)) < f->n;) {
		if (f->nodes[i].s)
			csi_server_stop(f->nodes[i].s);
		atomic_fetch_add(&f->stopped, 1);
	}
	return NULL;
}

/* Stops every server, STOPPERS at a time; false when calls still run after the budget. */
static bool stop_all(struct fleet *f)
{
	pthread_t th[STOPPERS];
	int started = 0;
	atomic_store(&f->next, 0);
	for (; started < STOPPERS; started++)
		if (pthread_create(&th[started], NULL, stopper_main, f))
			break;
	for (int i = 0; i < STOP_BUDGET_MS / 20 && atomic_load(&f->stopped) < f->n; i++)
		sleep_ns(20 * NSEC_PER_MSEC);
	if (atomic_load(&f->stopped) < f->n)
		return false;
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	return true;
}

static void fleet_free(struct fleet *f)
{
	for (int i = 0; i < f->n; i++) {
		struct fleet_node *fn = &f->nodes[i];
		csi_server_free(fn->s);
		lp_driver_free(fn->d);
		free(fn->nodeid);
		free(fn->endpoint);
	}
	free(f->nodes);
}

int lp_fleet_serve(const struct lp_config *base, const char *endpoint, int size,
		   const sigset_t *set)
{
	if (size < 1 || size > 5000 || !strstr(endpoint, "{node}") || strcmp(base->mode, "node")) {
		fprintf(stderr, "kcsi-loopplugin: --fleet-size wants 1 to 5000 nodes, --mode node and "
				"an --endpoint with {node}\n");
		return 2;
	}
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, FLEET_STACK);
	pthread_setattr_default_np(&attr);
	pthread_attr_destroy(&attr);

	struct fleet f = { .n = size };
	f.nodes = xcalloc((size_t)size, sizeof(*f.nodes));
	int64_t t0 = mono_now_ns();
	for (int i = 0; i < size; i++) {
		struct fleet_node *fn = &f.nodes[i];
		char id[256], err[512];
		snprintf(id, sizeof(id), "%s-%d", base->nodeid, i + 1);
		fn->nodeid = xstrdup(id);
		fn->endpoint = replace_node(endpoint, id);
		fn->cfg = *base;
		fn->cfg.nodeid = fn->nodeid;
		struct lp_status st;
		fn->d = lp_driver_new(&fn->cfg, &st);
		if (!fn->d) {
			fprintf(stderr, "kcsi-loopplugin: node %s: %s\n", id, st.msg);
			fleet_free(&f);
			return 1;
		}
		struct csi_server_opts o = CSI_SERVER_OPTS_INIT;
		o.threads = FLEET_THREADS;
		o.grace_ns = STOP_GRACE_MS * NSEC_PER_MSEC;
		fn->s = csi_server_new(&o);
		lp_driver_register(fn->d, fn->s);
		if (csi_server_start(fn->s, fn->endpoint, err, sizeof(err))) {
			fprintf(stderr, "kcsi-loopplugin: node %s: %s\n", id, err);
			fleet_free(&f);
			return 1;
		}
	}
	KLOG_I("Serving CSI driver=%s version=%s mode=node nodes=%d (%s-1..%s-%d) pool=%s "
	       "seconds=%.2f", LOGQ(base->drivername), LOGQ(base->version), size, base->nodeid,
	       base->nodeid, size, LOGQ(base->pool_dir), (double)(mono_now_ns() - t0) / 1e9);
	int sig = 0;
	while (sigwait(set, &sig) != 0 || (sig != SIGTERM && sig != SIGINT))
		;
	KLOG_I("Received %s, stopping the CSI servers", sig == SIGTERM ? "SIGTERM" : "SIGINT");
	if (!stop_all(&f)) {
		for (int i = 0; i < size; i++)
			lp_driver_thaw_all(f.nodes[i].d);
		KLOG_W("Calls still running after %d ms; exiting without them (a retry redoes or "
		       "finds their work)", STOP_BUDGET_MS);
		fflush(NULL);
		_exit(0);
	}
	fleet_free(&f);
	return 0;
}
