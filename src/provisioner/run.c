/*
 * csi-provisioner on the shared sidecar runtime (src/sidecar): its flags, and the ops that build
 * the controller from the discovered driver, start it once leading, stop it and render its
 * metrics. Flag names and defaults are upstream's (v3.x); the help text is ours.
 */
#include "provisioner/provisioner.h"
#include "provisioner/prov.h"

#include "base/log.h"
#include "base/timeutil.h"
#include "base/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void prov_register_flags(struct flagset *fs, struct prov_config *c)
{
	sidecar_register_flags(fs, &c->sc);
	flags_int(fs, "worker-threads", &c->worker_threads, 100,
		  "Number of provisioner workers, and separately of deleter workers; must be positive.");
	flags_int(fs, "cloning-protection-threads", &c->cloning_protection_threads, 1,
		  "Number of workers removing the cloning-protection finalizer from source claims.");
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
	flags_bool(fs, "prevent-volume-mode-conversion", &c->prevent_volume_mode_conversion, false,
		   "Refuse to restore a snapshot into another volume mode unless the content allows it.");
	flags_bool(fs, "enable-capacity", &c->enable_capacity, false,
		   "Publish CSIStorageCapacity objects (not implemented yet in kcsi).");
	flags_int(fs, "capacity-ownerref-level", &c->capacity_ownerref_level, 1,
		  "Owner level of CSIStorageCapacity objects (not implemented yet in kcsi).");
	flags_int(fs, "capacity-threads", &c->capacity_threads, 1,
		  "Workers for CSIStorageCapacity objects (not implemented yet in kcsi).");
	flags_duration(fs, "capacity-poll-interval", &c->capacity_poll_interval_ns, NSEC_PER_MIN,
		       "How often capacity is polled (not implemented yet in kcsi).");
	flags_bool(fs, "capacity-for-immediate-binding", &c->capacity_for_immediate_binding, false,
		   "Capacity also for immediate-binding classes (not implemented yet in kcsi).");
	flags_bool(fs, "node-deployment", &c->node_deployment, false,
		   "Run on each node for node-local volumes (not implemented yet in kcsi).");
	flags_bool(fs, "node-deployment-immediate-binding", &c->node_deployment_immediate_binding, true,
		   "With --node-deployment, also take immediate-binding claims (not implemented yet).");
	flags_duration(fs, "node-deployment-base-delay", &c->node_deployment_base_delay_ns,
		       20 * NSEC_PER_SEC, "With --node-deployment, initial delay before owning a claim.");
	flags_duration(fs, "node-deployment-max-delay", &c->node_deployment_max_delay_ns,
		       60 * NSEC_PER_SEC, "With --node-deployment, longest delay before owning a claim.");
	flags_string(fs, "provisioner", &c->provisioner_deprecated, "",
		     "Ignored: the driver's name from GetPluginInfo is the provisioner name.");
	flags_deprecate(fs, "provisioner", "the driver name is used");
}

struct prov_main {
	const struct prov_config *cfg;
	struct prov_gates gates;
	struct kube_recorder *rec;
	struct prov_ctrl *ctrl;
	char identity[400];
};

/* Upstream names the Lease after the driver with every '/' replaced by '-'. */
static void lease_name(const char *driver, char *buf, size_t len)
{
	snprintf(buf, len, "%s", driver);
	for (char *p = buf; *p; p++)
		if (*p == '/')
			*p = '-';
}

static int setup(void *ud, struct sidecar *sc, char *err, size_t errlen)
{
	struct prov_main *m = ud;
	const struct prov_config *cfg = m->cfg;
	struct prov_ctrl_opts o = { 0 };
	struct timespec ts;

	(void)err;
	(void)errlen;
	clock_gettime(CLOCK_REALTIME, &ts);
	srandom((unsigned)(ts.tv_nsec ^ getpid()));
	snprintf(m->identity, sizeof(m->identity), "%lld-%d-%s",
		 (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000, (int)(random() % 10000), sc->driver);
	o.driver = sc->driver;
	o.csi = sc->csi;
	o.gates = m->gates;
	o.workers = cfg->worker_threads;
	o.clone_workers = cfg->cloning_protection_threads;
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
	o.cap_controller_service = sidecar_has_controller_service(sc);
	o.cap_topology = sidecar_has_accessibility_constraints(sc);
	o.cap_create_delete = sidecar_has_ctrl_cap(sc, CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_VOLUME);
	o.cap_clone = sidecar_has_ctrl_cap(sc, CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CLONE_VOLUME);
	o.cap_snapshot = sidecar_has_ctrl_cap(sc, CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_SNAPSHOT);
	o.cap_snmw = sidecar_has_ctrl_cap(sc, CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__SINGLE_NODE_MULTI_WRITER);
	o.cap_publish = sidecar_has_ctrl_cap(sc, CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__PUBLISH_UNPUBLISH_VOLUME);
	KLOG_V(2, "Supports topology: %s (feature gate Topology=%s)", o.cap_topology ? "true" : "false",
	       m->gates.topology ? "true" : "false");
	if (!o.cap_controller_service || !o.cap_create_delete)
		KLOG_W("CSI driver does not support dynamic provisioning: CONTROLLER_SERVICE or CREATE_DELETE_VOLUME capability is not reported");
	struct kube_recorder_opts ro = { .component = "external-provisioner" };
	m->rec = kube_recorder_new(sc->kc, &ro);
	o.recorder = m->rec;
	m->ctrl = prov_ctrl_new(sc->kc, &o);
	return 0;
}

static int start(void *ud, struct sidecar *sc, char *err, size_t errlen)
{
	struct prov_main *m = ud;

	(void)sc;
	return prov_ctrl_start(m->ctrl, err, errlen);
}

static void stop(void *ud)
{
	struct prov_main *m = ud;

	prov_ctrl_stop(m->ctrl);
}

static void cleanup(void *ud)
{
	struct prov_main *m = ud;

	prov_ctrl_free(m->ctrl);
	kube_recorder_free(m->rec);
}

static void render_metrics(void *ud, struct strbuf *out)
{
	struct prov_main *m = ud;

	prov_ctrl_render_metrics(m->ctrl, out);
}

int prov_run(const struct prov_config *cfg)
{
	struct prov_main m = { .cfg = cfg };
	struct sidecar_ops ops = {
		.component = "csi-provisioner",
		.lease_name = lease_name,
		.setup = setup, .start = start, .stop = stop, .cleanup = cleanup,
		.render_metrics = render_metrics,
		.ud = &m,
	};
	char err[512];

	if (prov_parse_gates(&cfg->sc.feature_gates, &m.gates, err, sizeof(err))) {
		KLOG_E("%s", err);
		return 1;
	}
	if (cfg->worker_threads <= 0) {
		KLOG_E("option -worker-threads must be greater than zero");
		return 1;
	}
	if (cfg->cloning_protection_threads <= 0) {
		KLOG_E("option -cloning-protection-threads must be greater than zero");
		return 1;
	}
	if (cfg->node_deployment) {
		/* Running it as a central provisioner on every node would provision each claim on
		 * every node: refuse instead. */
		KLOG_E("--node-deployment is not implemented yet in kcsi's csi-provisioner");
		return 1;
	}
	if (cfg->enable_capacity)
		KLOG_W("--enable-capacity is not implemented yet in kcsi's csi-provisioner: no CSIStorageCapacity objects are published");
	return sidecar_run(&cfg->sc, &ops);
}
