/*
 * The node side of `kcsi up --nodes N` above UP_FLEET_ABOVE: three processes for all the nodes
 * instead of four per node (driver, registrar, livenessprobe, kcsi-node), so that a thousand
 * nodes fit on a small machine:
 *
 *   kcsi-loopplugin --mode node --fleet-size N     node-i's socket D/nodes/node-i/plugins/<driver>/csi.sock,
 *                                                  node ID node-i, real loop devices and mounts
 *   csi-node-driver-registrar --fleet-size N       node-i's registration socket in
 *                                                  D/nodes/node-i/kubelet/plugins_registry
 *   kcsi-node --fleet-size N                       Node, CSINode, Lease and volume manager per
 *                                                  node; one watch per kind for all
 *
 * Every CSI and registration call stays a real gRPC call over the node's own socket. The
 * per-node livenessprobe is dropped: the registrar's /healthz counts every node's driver answering
 * GetPluginInfo, and "ready" still waits for every node Ready with the driver in its CSINode.
 * Readiness is checked with two LISTs (Nodes and CSINodes) rather than two GETs per node.
 */
#include "up/fleet.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/strbuf.h"
#include "kube/client.h"

bool up_fleet_wanted(int nodes)
{
	return nodes > UP_FLEET_ABOVE;
}

static void pathf(char *buf, size_t len, const char *fmt, ...);

/* "127.0.0.1:P" with a port that was free a moment ago; P, or -1. */
static int free_port_arg(char arg[48])
{
	int port = up_free_port();
	if (port > 0)
		snprintf(arg, 48, "127.0.0.1:%d", port);
	return port;
}

static struct up_proc *start(const struct up_fleet *f, const char *name, int tier, char **argv)
{
	char log_path[4096 + 64], file[64], err[512];
	pathf(file, sizeof(file), "%s", name);
	for (char *p = file; *p; p++)
		if (*p == '/')
			*p = '_';
	pathf(log_path, sizeof(log_path), "%s/logs/%s.log", f->dir, file);
	struct up_proc *p = up_procs_add(f->procs, name, log_path, argv);
	if (!p) {
		fprintf(stderr, "kcsi up: too many processes\n");
		return NULL;
	}
	p->tier = tier;
	/* Each of the three serves every node: given up (proc.h), no node works, so the run ends. */
	p->core = true;
	if (up_proc_start(p, err, sizeof(err))) {
		fprintf(stderr, "kcsi up: %s\n", err);
		return NULL;
	}
	return p;
}

/* snprintf for paths below the work dir, which up_run() keeps under 2048 characters. */
__attribute__((format(printf, 3, 4))) static void pathf(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}
#define PATHF(buf, ...) pathf(buf, sizeof(buf), __VA_ARGS__)

int up_fleet_start(const struct up_fleet *f, struct up_fleet_probe probes[UP_FLEET_PROBES])
{
	char path[4096 + 512];
	for (int i = 1; i <= f->nodes; i++) {
		const char *subs[] = { "plugins", "kubelet/plugins_registry" };
		for (int k = 0; k < 2; k++) {
			if (k == 0)
				PATHF(path, "%s/nodes/node-%d/plugins/%s", f->dir, i, f->driver_name);
			else
				PATHF(path, "%s/nodes/node-%d/%s", f->dir, i, subs[k]);
			if (up_mkdirs(path)) {
				fprintf(stderr, "kcsi up: mkdir %s: %s\n", path, strerror(errno));
				return -1;
			}
		}
	}
	char bin[3][4096 + 64], v[32], size[16], pool[4096 + 16], ep[4096 + 128], sock[4096 + 128];
	char reg[4096 + 64], root[4096 + 64], reg_http[48], node_http[48];
	PATHF(bin[0], "%s/kcsi-loopplugin", f->bin);
	PATHF(bin[1], "%s/csi-node-driver-registrar", f->bin);
	PATHF(bin[2], "%s/kcsi-node", f->bin);
	PATHF(v, "-v=%d", f->verbosity);
	PATHF(size, "%d", f->nodes);
	PATHF(pool, "%s/pool", f->dir);
	PATHF(sock, "%s/nodes/{node}/plugins/%s/csi.sock", f->dir, f->driver_name);
	PATHF(ep, "unix://%s", sock);
	PATHF(reg, "%s/nodes/{node}/kubelet/plugins_registry", f->dir);
	PATHF(root, "%s/nodes/{node}/kubelet", f->dir);
	int reg_port = free_port_arg(reg_http), node_port = free_port_arg(node_http);
	if (reg_port < 0 || node_port < 0) {
		fprintf(stderr, "kcsi up: no free TCP port on 127.0.0.1\n");
		return -1;
	}
	char *driver[] = { bin[0], "--mode", "node", "--fleet-size", size, "--endpoint", ep,
			   "--nodeid", "node", "--pool-dir", pool, "--zone", "local", v, NULL };
	char *registrar[] = { bin[1], "--fleet-size", size, "--fleet-node-prefix", "node",
			      "--csi-address", sock, "--kubelet-registration-path", sock,
			      "--plugin-registration-path", reg, "--http-endpoint", reg_http, v,
			      NULL };
	char *node[] = { bin[2], "--fleet-size", size, "--node-name", "node", "--root-dir", root,
			 "--kubeconfig", (char *)f->kubeconfig, (char *)f->qps, (char *)f->burst,
			 "--http-endpoint", node_http, v, NULL };
	if (!start(f, "driver/nodes", TIER_DRIVER, driver))
		return -1;
	probes[0].proc = start(f, "csi-node-driver-registrar/nodes", TIER_CLIENT, registrar);
	probes[0].port = reg_port;
	probes[0].path = "/healthz";
	probes[1].proc = probes[0].proc ? start(f, "kcsi-node/nodes", TIER_CLIENT, node) : NULL;
	probes[1].port = node_port;
	probes[1].path = "/healthz";
	return probes[1].proc ? 0 : -1;
}

/* The names in a LIST reply whose items pass `ok`, as a sorted-free count of node-1..N hits. */
static int count_nodes(json_t *list, int n, bool (*ok)(json_t *item, const char *driver),
		       const char *driver)
{
	int hits = 0;
	size_t k;
	json_t *it;
	json_array_foreach(json_object_get(list, "items"), k, it) {
		const char *name = json_string_value(json_object_get(json_object_get(it, "metadata"), "name"));
		int i;
		char end;
		if (name && sscanf(name, "node-%d%c", &i, &end) == 1 && i >= 1 && i <= n && ok(it, driver))
			hits++;
	}
	return hits;
}

static bool has_driver(json_t *csinode, const char *driver)
{
	size_t k;
	json_t *d;
	json_array_foreach(json_object_get(json_object_get(csinode, "spec"), "drivers"), k, d) {
		const char *dn = json_string_value(json_object_get(d, "name"));
		if (dn && !strcmp(dn, driver))
			return true;
	}
	return false;
}

static bool is_ready(json_t *node, const char *driver)
{
	(void)driver;
	size_t k;
	json_t *c;
	json_array_foreach(json_object_get(json_object_get(node, "status"), "conditions"), k, c) {
		const char *t = json_string_value(json_object_get(c, "type"));
		const char *s = json_string_value(json_object_get(c, "status"));
		if (t && s && !strcmp(t, "Ready"))
			return !strcmp(s, "True");
	}
	return false;
}

bool up_fleet_nodes_ready(struct kube_client *kc, const char *driver, int n)
{
	struct kube_err e;
	json_t *list = kube_list(kc, &KUBE_RES_CSINODES, NULL, NULL, &e);
	int with_driver = list ? count_nodes(list, n, has_driver, driver) : 0;
	json_decref(list);
	if (with_driver < n)
		return false;
	list = kube_list(kc, &KUBE_RES_NODES, NULL, NULL, &e);
	int ready = list ? count_nodes(list, n, is_ready, driver) : 0;
	json_decref(list);
	return ready == n;
}
