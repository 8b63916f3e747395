/*
 * up objects: what `kcsi up` writes to and reads from the API server besides starting processes.
 * On an external API server (--kubeconfig) every object it creates is noted and deleted again
 * at exit, newest first, and nothing it did not create is touched: a CSIDriver or a CRD that was
 * there stays, and a Node name that exists makes the run refuse to start. After kube-emulator
 * restarts, up_restore_objects() makes again whatever of its objects is missing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "up/up_internal.h"

void up_remember(struct up *u, const struct kube_resource *res, const char *ns,
		     const char *name)
{
	int max = (int)(sizeof(u->created) / sizeof(u->created[0]));
	if (!u->external || u->ncreated >= max)
		return;
	struct up_created *c = &u->created[u->ncreated++];
	c->res = res;
	c->ns = ns;
	snprintf(c->name, sizeof(c->name), "%s", name);
}

/*
 * Deletes what this run created on an external API server, newest first: a node's Lease and
 * CSINode before its Node, the CSIDriver last. Runs after every process stopped, so no kcsi-node
 * writes its Node again. Gone already (404) is fine; anything else is reported.
 */
int up_delete_created(struct up *u)
{
	int failed = 0;
	for (int i = u->ncreated - 1; i >= 0; i--) {
		struct up_created *c = &u->created[i];
		struct kube_err e;
		if (kube_delete(u->kc, c->res, c->ns, c->name, NULL, NULL, &e) &&
		    !kube_err_is_not_found(&e)) {
			fprintf(stderr, "kcsi up: could not delete %s %s: %s\n", c->res->resource, c->name,
				e.message);
			failed++;
		}
	}
	u->ncreated = 0;
	return failed;
}

/*
 * The CSIDriver object a driver's deployment would create: attachRequired from the driver's
 * PUBLISH_UNPUBLISH_VOLUME capability, pod info on mount so drivers see who mounts.
 */
int up_create_csidriver(struct up *u, struct kube_client *kc)
{
	json_t *obj = json_pack("{s:s, s:s, s:{s:s}, s:{s:b, s:b, s:[s], s:s}}",
				"apiVersion", "storage.k8s.io/v1", "kind", "CSIDriver",
				"metadata", "name", u->driver_name,
				"spec", "attachRequired", u->attach_required, "podInfoOnMount", 1,
				"volumeLifecycleModes", "Persistent", "fsGroupPolicy",
				"ReadWriteOnceWithFSType");
	struct kube_err e;
	json_t *r = kube_create(kc, &KUBE_RES_CSIDRIVERS, NULL, obj, &e);
	json_decref(obj);
	if (!r && e.code != 409) {
		fprintf(stderr, "kcsi up: creating CSIDriver %s: %s\n", u->driver_name, e.message);
		return -1;
	}
	if (r) /* one that was there before is not ours to delete */
		up_remember(u, &KUBE_RES_CSIDRIVERS, NULL, u->driver_name);
	json_decref(r);
	return 0;
}

/*
 * On an external API server, node-1..N must be new: a Node of that name belongs to a real kubelet
 * (or to another kcsi up), and deleting it at exit would take it from its owner. Each node's
 * Node, CSINode and Lease (written by kcsi-node) are then ours to delete.
 */
int up_claim_node_names(struct up *u)
{
	for (int i = 1; i <= u->cfg->nodes; i++) {
		char name[32];
		snprintf(name, sizeof(name), "node-%d", i);
		struct kube_err e;
		json_t *n = kube_get(u->kc, &KUBE_RES_NODES, NULL, name, &e);
		json_decref(n);
		if (n) {
			fprintf(stderr, "kcsi up: Node %s already exists on that cluster; kcsi up runs only "
					"nodes it creates (remove it, or use another cluster)\n", name);
			return -1;
		}
		if (!kube_err_is_not_found(&e)) {
			fprintf(stderr, "kcsi up: reading Node %s: %s\n", name, e.message);
			return -1;
		}
		up_remember(u, &KUBE_RES_NODES, NULL, name);
		up_remember(u, &KUBE_RES_CSINODES, NULL, name);
		up_remember(u, &KUBE_RES_LEASES, "kube-node-lease", name);
	}
	return 0;
}

/*
 * Whether a process of one driver instance was given up: instance is what follows the '/' in the
 * names of its processes ("node-1" for driver/node-1, kcsi-node/node-1...; "controller").
 */
bool up_instance_given_up(const struct up *u, const char *node)
{
	size_t n = strlen(node);
	for (int i = 0; i < u->procs.n; i++) {
		const struct up_proc *p = &u->procs.p[i];
		size_t len = strlen(p->name);
		if (p->given_up && len > n && p->name[len - n - 1] == '/' &&
		    !strcmp(p->name + len - n, node))
			return true;
	}
	return false;
}

/* True when every node is Ready with the driver in its CSINode, but nodes with a component given up. */
bool up_nodes_ready(struct up *u, struct kube_client *kc)
{
	struct kube_err e;
	for (int i = 1; i <= u->cfg->nodes; i++) {
		char name[32];
		snprintf(name, sizeof(name), "node-%d", i);
		if (up_instance_given_up(u, name))
			continue;
		json_t *cn = kube_get(kc, &KUBE_RES_CSINODES, NULL, name, &e);
		bool has = false;
		size_t k;
		json_t *d;
		json_array_foreach(json_object_get(json_object_get(cn, "spec"), "drivers"), k, d) {
			const char *dn = json_string_value(json_object_get(d, "name"));
			has = has || (dn && !strcmp(dn, u->driver_name));
		}
		json_decref(cn);
		if (!has)
			return false;
		json_t *node = kube_get(kc, &KUBE_RES_NODES, NULL, name, &e);
		bool ready = false;
		json_array_foreach(json_object_get(json_object_get(node, "status"), "conditions"), k, d) {
			const char *t = json_string_value(json_object_get(d, "type"));
			const char *s = json_string_value(json_object_get(d, "status"));
			ready = ready || (t && s && !strcmp(t, "Ready") && !strcmp(s, "True"));
		}
		json_decref(node);
		if (!ready)
			return false;
	}
	return true;
}

/* Whether the API server serves a group version (GET /apis/<gv> answers 2xx). */
static bool serves(struct up *u, const char *gv, int *code)
{
	char path[128];
	snprintf(path, sizeof(path), "/apis/%s", gv);
	struct strbuf out = STRBUF_INIT;
	struct kube_err e = { 0 };
	struct kube_request rq = { .method = "GET", .path = path };
	bool ok = kube_do(u->kc, &rq, &out, &e) >= 0;
	strbuf_release(&out);
	*code = e.code;
	return ok;
}

/*
 * Most clusters do not install the external-snapshotter CRDs. Without them snapshot-controller
 * exits after --retry-crd-interval-max (as upstream's does), so on such a cluster the snapshot
 * components are not started, and kcsi up says so at start; everything else runs. With
 * --install-snapshot-crds it first creates the missing ones (removed at exit). Without the group
 * kinds, the snapshot components run with the group gate off. Returns -1 when installing failed.
 */
int up_check_snapshot_api(struct up *u, int64_t deadline)
{
	if (!u->external)
		return 0;
	if (u->cfg->install_snapshot_crds && up_crds_install(u->kc, &u->crds, deadline))
		return -1;
	int code;
	if (!serves(u, "snapshot.storage.k8s.io/v1", &code)) {
		u->no_snapshot_api = true;
		printf("kcsi up: the cluster does not serve snapshot.storage.k8s.io/v1 (HTTP %d): "
		       "snapshot-controller and csi-snapshotter are not started, the rest of the stack "
		       "is; run kcsi up with --install-snapshot-crds (or kubectl apply -k "
		       "deploy/kubernetes/snapshot-crds) for snapshots\n", code);
	} else if (!serves(u, "groupsnapshot.storage.k8s.io/v1", &code)) {
		u->no_group_api = true;
		printf("kcsi up: the cluster does not serve groupsnapshot.storage.k8s.io/v1 (HTTP "
		       "%d): the snapshot components run without group snapshots\n", code);
	}
	fflush(stdout);
	return 0;
}

/* Which of node-1..N appear in a list of Nodes or CSINodes: seen[i] for node-i. */
static void mark_nodes(json_t *list, bool *seen, int n)
{
	size_t i;
	json_t *it;
	json_array_foreach(json_object_get(list, "items"), i, it) {
		const char *name = json_string_value(json_object_get(json_object_get(it, "metadata"),
								     "name"));
		char *end;
		long k = name && !strncmp(name, "node-", 5) ? strtol(name + 5, &end, 10) : 0;
		if (k >= 1 && k <= n && !*end)
			seen[k] = true;
	}
}

/* Restarts the kcsi-node process named name (it registers its Node and CSINode as it starts). */
static int restart_node_agent(struct up *u, const char *name)
{
	for (int i = 0; i < u->procs.n; i++) {
		struct up_proc *p = &u->procs.p[i];
		if (strcmp(p->name, name) || p->given_up)
			continue;
		char err[512];
		if (up_proc_restart(p, 3 * NSEC_PER_SEC, err, sizeof(err)) < 0) {
			fprintf(stderr, "kcsi up: %s\n", err);
			return -1;
		}
		return 0;
	}
	return 0;
}

int up_restore_objects(struct up *u, bool fleet)
{
	struct kube_client *kc = u->kc_quick;
	struct strbuf out = STRBUF_INIT;
	struct kube_err e = { 0 };
	struct kube_request rq = { .method = "GET", .path = "/readyz" };
	int rc = kube_do(kc, &rq, &out, &e);
	strbuf_release(&out);
	if (rc < 0)
		return 1; /* not answering yet */
	struct strbuf made = STRBUF_INIT;
	json_t *d = kube_get(kc, &KUBE_RES_CSIDRIVERS, NULL, u->driver_name, &e);
	json_decref(d);
	if (!d && !kube_err_is_not_found(&e))
		goto fail;
	if (!d) {
		if (up_create_csidriver(u, kc) < 0)
			goto fail;
		strbuf_addf(&made, " CSIDriver %s", u->driver_name);
	}
	int n = u->cfg->nodes;
	bool *node = xcalloc((size_t)n + 1, sizeof(bool)), *csinode = xcalloc((size_t)n + 1, sizeof(bool));
	json_t *nl = kube_list(kc, &KUBE_RES_NODES, NULL, NULL, &e);
	json_t *cl = nl ? kube_list(kc, &KUBE_RES_CSINODES, NULL, NULL, &e) : NULL;
	if (cl) {
		mark_nodes(nl, node, n);
		mark_nodes(cl, csinode, n);
	}
	json_decref(nl);
	json_decref(cl);
	bool failed = !cl, fleet_restarted = false;
	for (int i = 1; i <= n && !failed; i++) {
		char name[32], agent[64];
		snprintf(name, sizeof(name), "node-%d", i);
		if ((node[i] && csinode[i]) || up_instance_given_up(u, name))
			continue;
		if (fleet && fleet_restarted)
			continue;
		snprintf(agent, sizeof(agent), fleet ? "kcsi-node/nodes" : "kcsi-node/%s", name);
		failed = restart_node_agent(u, agent) < 0;
		fleet_restarted = fleet;
		strbuf_addf(&made, " %s%s of %s (%s restarted)", node[i] ? "" : "Node and ",
			    csinode[i] ? "" : "CSINode", name, agent);
	}
	free(node);
	free(csinode);
	if (failed)
		goto fail;
	printf("kcsi up: kube-emulator is back at %s with its objects%s%s\n", u->kcfg->server,
	       made.len ? "; made again:" : "", made.buf);
	fflush(stdout);
	strbuf_release(&made);
	return 0;
fail:
	strbuf_release(&made);
	return -1;
}
