/*
 * csi-provisioner on the shared sidecar runtime (src/sidecar): its flags, and the setup that
 * builds the controller from the discovered driver, which the sidecar then starts once leading,
 * stops and frees. Flag names and defaults are upstream's (v6.4); the help text is ours. Set-up of the
 * two optional parts: --node-deployment (NODE_NAME, NodeGetInfo) and --enable-capacity
 * (namespace from NAMESPACE, as upstream reads it, owner from POD_NAME and --capacity-ownerref-level,
 * its own API client at --kube-api-capacity-qps/-burst). KUBECONFIG in the environment wins
 * over --kubeconfig, as upstream's provisioner has it.
 */
#include "provisioner/provisioner.h"
#include "provisioner/prov.h"

#include "base/log.h"
#include "base/timeutil.h"
#include "base/xalloc.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void prov_register_flags(struct flagset *fs, struct prov_config *c)
{
	sidecar_register_flags(fs, &c->sc);
	flags_uint(fs, "worker-threads", &c->worker_threads, 100,
		   "Number of provisioner workers, and separately of deleter workers (0: none, so nothing is provisioned or deleted).");
	flags_uint(fs, "cloning-protection-threads", &c->cloning_protection_threads, 1,
		   "Number of workers removing the cloning-protection finalizer from source claims (0: none).");
	flags_string(fs, "volume-name-prefix", &c->volume_name_prefix, "pvc",
		     "Prefix of PersistentVolume names: <prefix>-<claim UID>.");
	flags_int(fs, "volume-name-uuid-length", &c->volume_name_uuid_length, -1,
		  "Cut the claim UID (without dashes) to this length in volume names; -1 keeps it whole.");
	flags_bool(fs, "strict-topology", &c->strict_topology, false,
		   "With delayed binding, send only the selected node's topology as requisite and preferred.");
	flags_bool(fs, "immediate-topology", &c->immediate_topology, true,
		   "With immediate binding and no allowed topologies, send the cluster's aggregated topology.");
	flags_bool(fs, "extra-create-metadata", &c->extra_create_metadata, false,
		   "Add csi.storage.k8s.io/pvc/name, pvc/namespace and pv/name to CreateVolume parameters.");
	flags_string(fs, "default-fstype", &c->default_fstype, "",
		     "Filesystem type of mount volumes whose StorageClass names none.");
	flags_bool(fs, "controller-publish-readonly", &c->controller_publish_readonly, false,
		   "Mark the PV readOnly when the claim's only access mode is ReadOnlyMany.");
	flags_bool(fs, "prevent-volume-mode-conversion", &c->prevent_volume_mode_conversion, true,
		   "Refuse to restore a snapshot into another volume mode unless the content allows it.");
	flags_bool(fs, "enable-capacity", &c->enable_capacity, false,
		   "Publish CSIStorageCapacity objects (one per topology segment and StorageClass) in the namespace of the NAMESPACE environment variable.");
	flags_int(fs, "capacity-ownerref-level", &c->capacity_ownerref_level, 1,
		  "Owner of CSIStorageCapacity objects, counted from the pod POD_NAME: -1 none, 0 the pod, 1 its StatefulSet/ReplicaSet/DaemonSet, 2 the Deployment, ...");
	flags_uint(fs, "capacity-threads", &c->capacity_threads, 1,
		   "Number of workers creating, updating and deleting CSIStorageCapacity objects (0: none).");
	flags_duration(fs, "capacity-poll-interval", &c->capacity_poll_interval_ns, NSEC_PER_MIN,
		       "How often GetCapacity is called again for every CSIStorageCapacity object.");
	flags_bool(fs, "capacity-for-immediate-binding", &c->capacity_for_immediate_binding, false,
		   "Publish capacity also for StorageClasses with immediate binding.");
	flags_bool(fs, "node-deployment", &c->node_deployment, false,
		   "Run next to the driver on every node (NODE_NAME): provision only claims selected for this node, delete only its volumes, topology from its NodeGetInfo.");
	flags_bool(fs, "node-deployment-immediate-binding", &c->node_deployment_immediate_binding, true,
		   "With --node-deployment, also compete for immediate-binding claims by setting the selected-node annotation to this node.");
	flags_duration(fs, "node-deployment-base-delay", &c->node_deployment_base_delay_ns,
		       20 * NSEC_PER_SEC, "With --node-deployment, the wait unit for immediate-binding claims: the first node in a claim's order tries at once, each next one half this much later; after a failed try a random delay up to this long, doubled per try.");
	flags_duration(fs, "node-deployment-max-delay", &c->node_deployment_max_delay_ns,
		       60 * NSEC_PER_SEC, "With --node-deployment, the longest delay between tries for one claim.");
	flags_string(fs, "provisioner", &c->provisioner_deprecated, "",
		     "Has no effect: the driver's name from GetPluginInfo is the provisioner name.");
	flags_deprecate(fs, "provisioner", "it has no effect");
	flags_set_default(fs, "timeout", "10s"); /* upstream's provisioner waits less than the attacher */
	flags_double(fs, "kube-api-capacity-qps", &c->capacity_qps, 1,
		     "Sustained requests per second of the CSIStorageCapacity client (--enable-capacity), which is separate from the controller's.");
	flags_int(fs, "kube-api-capacity-burst", &c->capacity_burst, 5,
		  "Requests allowed above --kube-api-capacity-qps in a burst.");
	flags_bool(fs, "enable-pprof", &c->enable_pprof, false,
		   "Accepted for compatibility: upstream serves Go's pprof under /debug/pprof/ on --http-endpoint; kcsi is not a Go program and serves none (profile it with perf).");
	flags_duration(fs, "snapshot-orphan-sweep-interval", &c->orphan_sweep_ns, 5 * NSEC_PER_MIN,
		       "How often the VolumeSnapshot source-protection finalizer is removed from snapshots that no Pending claim restores from (left by a deleted claim or a killed provisioner); 0 disables the sweep.");
}

struct prov_main {
	const struct prov_config *cfg;
	struct prov_gates gates;
	char identity[400];
	/* --enable-capacity */
	struct prov_cap_opts cap;
	struct kube_client *cap_kc; /* the capacity client (its own rate limit) */
	json_t *owner;
	char managed_by[96];
	const char *cap_ns;
	/* --node-deployment */
	struct prov_node_deployment nd;
	Csi__V1__NodeGetInfoResponse *node_info;
	struct kube_kv *node_topology;
};

/* A worker count as the controllers take it; more than INT_MAX threads could never start anyway. */
static int threads(unsigned n)
{
	return n > INT_MAX ? INT_MAX : (int)n;
}

/* NodeGetInfo of the driver next to us: its topology is the only one this instance uses. */
static int node_setup(struct prov_main *m, struct sidecar *sc, char *err, size_t errlen)
{
	const struct prov_config *cfg = m->cfg;
	const char *node = getenv("NODE_NAME");
	struct csi_arena *a = csi_arena_new();
	Csi__V1__NodeGetInfoRequest *req = csi_msg_new(a, &csi__v1__node_get_info_request__descriptor);
	struct csi_status st = { 0 };
	int rc = -1;

	if (!node || !*node) {
		snprintf(err, errlen, "--node-deployment: NODE_NAME env variable is required (the name of the Kubernetes node this instance runs on)");
	} else if (csi_node_get_info(sc->csi, req, &m->node_info, cfg->sc.timeout_ns, &st)) {
		snprintf(err, errlen, "--node-deployment: NodeGetInfo: rpc error: code = %s desc = %.300s",
			 csi_code_go_name(st.code), st.message);
	} else {
		const Csi__V1__Topology *t = m->node_info->accessible_topology;
		size_t n = t ? t->n_segments : 0;
		m->node_topology = xcalloc(n + 1, sizeof(*m->node_topology));
		for (size_t i = 0; i < n; i++)
			m->node_topology[i] = (struct kube_kv){ t->segments[i]->key, t->segments[i]->value };
		m->nd = (struct prov_node_deployment){
			.node = node, .topology = m->node_topology, .ntopology = n,
			.immediate_binding = cfg->node_deployment_immediate_binding,
			.base_delay_ns = cfg->node_deployment_base_delay_ns,
			.max_delay_ns = cfg->node_deployment_max_delay_ns,
		};
		KLOG_I("Node deployment on node %s (driver node ID %s, %zu topology segment(s))", node,
		       m->node_info->node_id ? m->node_info->node_id : "", n);
		rc = 0;
	}
	csi_arena_free(a);
	return rc;
}

/* "apps/v1" + "ReplicaSet" -> /apis/apps/v1/namespaces/NS/replicasets/NAME (plural: kind + "s"). */
static void owner_path(const char *api_version, const char *kind, const char *ns, const char *name,
		       struct strbuf *sb)
{
	strbuf_reset(sb);
	strbuf_addf(sb, "%s%s/namespaces/%s/", strchr(api_version, '/') ? "/apis/" : "/api/",
		    api_version, ns);
	for (const char *p = kind; *p; p++)
		strbuf_addch(sb, (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p));
	strbuf_addf(sb, "s/%s", name);
}

/*
 * Upstream's owner.Lookup: level 0 is the pod itself, each further level the controller
 * ownerReference of the object before. Returns a new ownerReference or NULL with err.
 */
static json_t *lookup_owner(struct kube_client *kc, const char *ns, const char *pod, int level,
			    char *err, size_t errlen)
{
	struct strbuf path = STRBUF_INIT, body = STRBUF_INIT;
	struct kube_err e;
	json_t *ref = json_pack("{s:s,s:s,s:s}", "apiVersion", "v1", "kind", "Pod", "name", pod);
	json_t *obj = NULL;

	for (int l = 0;; l++) {
		owner_path(json_string_value(json_object_get(ref, "apiVersion")),
			   json_string_value(json_object_get(ref, "kind")), ns,
			   json_string_value(json_object_get(ref, "name")), &path);
		struct kube_request rq = { .method = "GET", .path = path.buf };
		strbuf_reset(&body);
		if (kube_do(kc, &rq, &body, &e) < 0) {
			snprintf(err, errlen, "look up owner(s) of pod: get %s: %s", path.buf, e.message);
			goto fail;
		}
		obj = json_loads(body.buf, 0, NULL);
		json_t *md = json_object_get(obj, "metadata");
		if (l == 0 && level == 0) { /* the pod itself */
			const char *uid = json_string_value(json_object_get(md, "uid"));
			if (!uid) {
				snprintf(err, errlen, "look up owner(s) of pod: %s has no uid", path.buf);
				goto fail;
			}
			json_object_set_new(ref, "uid", json_string(uid));
			json_object_set_new(ref, "controller", json_true());
			break;
		}
		json_t *next = NULL, *o;
		size_t i;
		json_array_foreach(json_object_get(md, "ownerReferences"), i, o)
			if (json_is_true(json_object_get(o, "controller")) &&
			    json_is_string(json_object_get(o, "apiVersion")) &&
			    json_is_string(json_object_get(o, "kind")) &&
			    json_is_string(json_object_get(o, "name")) &&
			    json_is_string(json_object_get(o, "uid")))
				next = o;
		if (!next) {
			snprintf(err, errlen, "look up owner(s) of pod: %s has no controller owner (level %d of %d)",
				 path.buf, l + 1, level);
			goto fail;
		}
		json_decref(ref);
		ref = json_pack("{s:O,s:O,s:O,s:O,s:b}", "apiVersion", json_object_get(next, "apiVersion"),
				"kind", json_object_get(next, "kind"), "name", json_object_get(next, "name"),
				"uid", json_object_get(next, "uid"), "controller", 1);
		json_decref(obj);
		obj = NULL;
		if (l + 1 == level)
			break;
	}
	json_decref(obj);
	strbuf_release(&path);
	strbuf_release(&body);
	return ref;
fail:
	json_decref(obj);
	json_decref(ref);
	strbuf_release(&path);
	strbuf_release(&body);
	return NULL;
}

/* The capacity controller's options: namespace, owner, managed-by label. 0 or -1 with err. */
static int capacity_setup(struct prov_main *m, struct sidecar *sc, const char *node, char *err,
			  size_t errlen)
{
	const struct prov_config *cfg = m->cfg;
	/* Only NAMESPACE, as upstream: POD_NAMESPACE is the leader election's (csi-lib-utils). */
	const char *ns = getenv("NAMESPACE");
	const char *pod = getenv("POD_NAME");

	if (!ns || !*ns) {
		snprintf(err, errlen, "need NAMESPACE env variable for CSIStorageCapacity objects");
		return -1;
	}
	if (cfg->capacity_ownerref_level >= 0) {
		if (!pod || !*pod) {
			snprintf(err, errlen, "need POD_NAME env variable to determine CSIStorageCapacity owner");
			return -1;
		}
		m->owner = lookup_owner(sc->kc, ns, pod, cfg->capacity_ownerref_level, err, errlen);
		if (!m->owner)
			return -1;
		KLOG_I("using %s/%s %s as owner of CSIStorageCapacity objects",
		       json_string_value(json_object_get(m->owner, "apiVersion")),
		       json_string_value(json_object_get(m->owner, "kind")),
		       json_string_value(json_object_get(m->owner, "name")));
	} else if (cfg->capacity_ownerref_level < -1) {
		snprintf(err, errlen, "--capacity-ownerref-level must be -1 (no owner) or more, got %d",
			 cfg->capacity_ownerref_level);
		return -1;
	}
	struct kube_client_opts ko = { .component = "csi-provisioner", .qps = cfg->capacity_qps,
				       .burst = cfg->capacity_burst };
	m->cap_kc = kube_client_new(sc->kcfg, &ko, err, errlen);
	if (!m->cap_kc)
		return -1;
	prov_capacity_managed_by(node, m->managed_by, sizeof(m->managed_by));
	m->cap_ns = ns;
	m->cap = (struct prov_cap_opts){
		.driver = sc->driver, .csi = sc->csi, .timeout_ns = cfg->sc.timeout_ns,
		.poll_ns = cfg->capacity_poll_interval_ns, .retry_start_ns = cfg->sc.kube.retry_start_ns,
		.retry_max_ns = cfg->sc.kube.retry_max_ns, .workers = threads(cfg->capacity_threads),
		.immediate_binding = cfg->capacity_for_immediate_binding, .ns = ns,
		.managed_by = m->managed_by, .owner = m->owner, .kc = m->cap_kc,
	};
	return 0;
}

/* Upstream names the Lease after the driver with every '/' replaced by '-'. */
static void lease_name(const char *driver, char *buf, size_t len)
{
	snprintf(buf, len, "%s", driver);
	for (char *p = buf; *p; p++)
		if (*p == '/')
			*p = '-';
}

SIDECAR_CONTROLLER(prov_controller, struct prov_ctrl, prov_ctrl_start, prov_ctrl_stop,
		   prov_ctrl_free, prov_ctrl_render_metrics);

static int setup(void *ud, struct sidecar *sc, char *err, size_t errlen)
{
	struct prov_main *m = ud;
	const struct prov_config *cfg = m->cfg;
	struct prov_ctrl_opts o = { 0 };
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	srandom((unsigned)(ts.tv_nsec ^ getpid()));
	snprintf(m->identity, sizeof(m->identity), "%lld-%d-%s",
		 (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000, (int)(random() % 10000), sc->driver);
	o.driver = sc->driver;
	o.csi = sc->csi;
	o.gates = m->gates;
	o.workers = threads(cfg->worker_threads);
	o.clone_workers = threads(cfg->cloning_protection_threads);
	o.timeout_ns = cfg->sc.timeout_ns;
	o.retry_start_ns = cfg->sc.kube.retry_start_ns;
	o.retry_max_ns = cfg->sc.kube.retry_max_ns;
	o.resync_ns = cfg->sc.kube.resync_ns;
	o.prefix = cfg->volume_name_prefix;
	o.uuid_length = cfg->volume_name_uuid_length;
	o.strict_topology = cfg->strict_topology;
	o.immediate_topology = cfg->immediate_topology;
	o.extra_create_metadata = cfg->extra_create_metadata;
	o.controller_publish_readonly = cfg->controller_publish_readonly;
	o.prevent_volume_mode_conversion = cfg->prevent_volume_mode_conversion;
	o.default_fstype = cfg->default_fstype;
	o.identity = m->identity;
	o.orphan_sweep_ns = cfg->orphan_sweep_ns;
	o.cap_controller_service = sidecar_has_controller_service(sc);
	o.cap_topology = sidecar_has_accessibility_constraints(sc);
	o.cap_create_delete = sidecar_has_ctrl_cap(sc, CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_VOLUME);
	o.cap_clone = sidecar_has_ctrl_cap(sc, CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CLONE_VOLUME);
	o.cap_snapshot = sidecar_has_ctrl_cap(sc, CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_SNAPSHOT);
	o.cap_snmw = sidecar_has_ctrl_cap(sc, CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__SINGLE_NODE_MULTI_WRITER);
	o.cap_publish = sidecar_has_ctrl_cap(sc, CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__PUBLISH_UNPUBLISH_VOLUME);
	o.cap_modify = sidecar_has_ctrl_cap(sc, CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__MODIFY_VOLUME);
	KLOG_V(2, "Supports topology: %s (feature gate Topology=%s)", o.cap_topology ? "true" : "false",
	       m->gates.topology ? "true" : "false");
	if (!o.cap_controller_service || !o.cap_create_delete)
		KLOG_W("CSI driver does not support dynamic provisioning: CONTROLLER_SERVICE or CREATE_DELETE_VOLUME capability is not reported");
	o.recorder = sidecar_recorder(sc, "external-provisioner");
	if (cfg->node_deployment) {
		if (node_setup(m, sc, err, errlen))
			return -1;
		o.node_deployment = &m->nd;
	}
	if (cfg->enable_capacity) {
		if (capacity_setup(m, sc, cfg->node_deployment ? m->nd.node : NULL, err, errlen))
			return -1;
		if (cfg->node_deployment) {
			m->cap.fixed = true;
			m->cap.fixed_segment = m->nd.topology;
			m->cap.nfixed = m->nd.ntopology;
		}
		o.capacity = &m->cap;
	}
	sidecar_set_controller(sc, prov_ctrl_new(sc->kc, &o), &prov_controller);
	return 0;
}

/*
 * v6.4's discovery check: unless --feature-gates names VolumeAttributesClass, a server that does
 * not list it under storage.k8s.io/v1 turns the gate off (claims' classes are then neither
 * read nor written onto PVs); a failed check changes nothing, silently, as upstream.
 */
static void check_vac_api(void *ud, struct sidecar *sc)
{
	struct prov_main *m = ud;
	struct kube_err e;

	if (m->gates.vac_explicit || !m->gates.vac)
		return;
	if (kube_serves_kind(sc->kc, "storage.k8s.io/v1", "VolumeAttributesClass", &e) == 0) {
		KLOG_I("Disabling VolumeAttributesClass feature gate because the VolumeAttributesClass v1 API is not available");
		m->gates.vac = false;
	}
}

static void cleanup(void *ud)
{
	struct prov_main *m = ud;

	kube_client_free(m->cap_kc);
	json_decref(m->owner);
	free(m->node_topology);
	csi_msg_free(m->node_info);
}

int prov_run(const struct prov_config *flags_cfg)
{
	struct prov_config env_cfg = *flags_cfg;
	const struct prov_config *cfg = &env_cfg;
	const char *kubeconfig_env = getenv("KUBECONFIG");
	struct prov_main m = { .cfg = cfg };
	struct sidecar_ops ops = {
		.component = "csi-provisioner",
		.lease_name = lease_name,
		.kube_ready = check_vac_api,
		.setup = setup, .cleanup = cleanup,
		.ud = &m,
		/* external-provisioner v6.4's main calls klog.Fatal (exit 255) for the gates, the
		 * kubeconfig and client, the driver's name and capabilities, NodeGetInfo and the
		 * capacity set-up (setup), and the HTTP server; os.Exit(1) for connect and probe. */
		.fatal_255 = SIDECAR_FATAL_KUBE | SIDECAR_FATAL_DISCOVER | SIDECAR_FATAL_SETUP |
			     SIDECAR_FATAL_HTTP,
	};
	char err[512];

	if (prov_parse_gates(&cfg->sc.feature_gates, &m.gates, err, sizeof(err))) {
		KLOG_E("%s", err);
		return SIDECAR_EXIT_FATAL;
	}
	if (kubeconfig_env && *kubeconfig_env) {
		KLOG_I("Found KUBECONFIG environment variable set, using that..");
		env_cfg.sc.kube.kubeconfig = kubeconfig_env;
	}
	if (cfg->enable_pprof)
		KLOG_W("--enable-pprof: kcsi serves no /debug/pprof/ (Go's profiler); profile it with perf");

	/* Upstream takes 0 for its worker counts and starts no worker for that queue. */
	if (cfg->worker_threads == 0)
		KLOG_W("--worker-threads=0: no claim is provisioned and no volume deleted");
	if (cfg->node_deployment &&
	    (cfg->node_deployment_base_delay_ns < 0 || cfg->node_deployment_max_delay_ns < 0)) {
		KLOG_E("--node-deployment-base-delay and --node-deployment-max-delay must not be negative");
		return 1;
	}
	if (cfg->enable_capacity && cfg->capacity_poll_interval_ns <= 0) {
		KLOG_E("option -capacity-poll-interval must be greater than zero");
		return 1;
	}
	return sidecar_run(&cfg->sc, &ops);
}
