/*
 * csi-resizer on the shared sidecar runtime (src/sidecar): its flags (names and defaults as
 * upstream v2.3; the help text is ours), the discovery check v2.3 makes before it connects to
 * the driver (no storage.k8s.io/v1 VolumeAttributesClass: the gate goes off, unless
 * --feature-gates names it), and the ops that check the driver's capabilities as upstream's
 * NewResizerFromClient does and build the controller, which the sidecar then starts once
 * leading, stops and frees.
 */
#include "resizer/resizer.h"

#include "base/log.h"
#include "base/timeutil.h"
#include "kube/leader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rsz_register_flags(struct flagset *fs, struct rsz_config *c)
{
	sidecar_register_flags(fs, &c->sc);
	/* Upstream's resizer waits 10 s per CSI call and names its resync flag --resync-period. */
	flags_set_default(fs, "timeout", "10s");
	flags_set_help(fs, "timeout",
		       "Deadline of the driver's start-up calls (Probe, GetPluginInfo, capabilities). Given on the command line, it is also the deadline of every ControllerExpandVolume and ControllerModifyVolume, over --resize-timeout and --modify-timeout.");
	flags_duration(fs, "resize-timeout", &c->resize_timeout_ns, 10 * NSEC_PER_SEC,
		       "Deadline of each ControllerExpandVolume call; ignored when --timeout is given.");
	flags_duration(fs, "modify-timeout", &c->modify_timeout_ns, 10 * NSEC_PER_SEC,
		       "Deadline of each ControllerModifyVolume call; ignored when --timeout is given.");
	flags_remove(fs, "resync"); /* upstream has --resync-period only */
	flags_duration(fs, "resync-period", &c->sc.kube.resync_ns, 10 * NSEC_PER_MIN,
		       "How often the informers deliver every claim again (a resync).");
	flags_int(fs, "workers", &c->workers, 10,
		  "Concurrent expansions, and separately concurrent modifications (0 or less: none, so nothing is expanded or modified).");
	flags_bool(fs, "handle-volume-inuse-error", &c->handle_inuse_error, true,
		   "After a driver answers FailedPrecondition (it cannot expand a volume in use), retry only while no pod uses the claim; watches pods.");
	flags_bool(fs, "extra-modify-metadata", &c->extra_modify_metadata, false,
		   "Add csi.storage.k8s.io/pvc/name, pvc/namespace and pv/name to ControllerModifyVolume's mutable parameters.");
	flags_bool(fs, "node-deployment", &c->node_deployment, false,
		   "kcsi only: run beside a node-local driver on every node and expand or modify only the volumes whose PersistentVolume node affinity admits the node named by $NODE_NAME; needs leader election off.");
}

void rsz_config_resolve(struct rsz_config *c, const struct flagset *fs)
{
	c->timeout_given = flags_is_set(fs, "timeout");
}

struct rsz_main {
	const struct rsz_config *cfg;
	struct rsz_gates gates;
};

static void render_metrics(struct rsz_ctrl *c, struct strbuf *out)
{
	struct kube_workqueue *qs[2] = { c->q, c->mq };

	kube_workqueue_render_metrics(qs, c->mq ? 2 : 1, out);
}

SIDECAR_CONTROLLER(rsz_controller, struct rsz_ctrl, rsz_ctrl_start, rsz_ctrl_stop, rsz_ctrl_free,
		   render_metrics);

static void lease_name(const char *driver, char *buf, size_t len)
{
	kube_leader_lease_name("external-resizer", driver, buf, len);
}

/* NodeGetCapabilities on the controller's socket, as upstream's SupportsNodeResize. */
static int node_can_expand(struct sidecar *sc, int64_t timeout_ns, bool *yes, char *err,
			   size_t errlen)
{
	struct csi_arena *a = csi_arena_new();
	Csi__V1__NodeGetCapabilitiesRequest *req =
		csi_msg_new(a, &csi__v1__node_get_capabilities_request__descriptor);
	Csi__V1__NodeGetCapabilitiesResponse *resp = NULL;
	struct csi_status st = { 0 };
	int rc = 0;

	*yes = false;
	if (csi_node_get_capabilities(sc->csi, req, &resp, timeout_ns, &st)) {
		snprintf(err, errlen, "failed to check if plugin supports node resize: rpc error: code = %s desc = %s",
			 csi_code_go_name(st.code), st.message);
		rc = -1;
	} else {
		for (size_t i = 0; i < resp->n_capabilities; i++)
			if (resp->capabilities[i]->rpc && resp->capabilities[i]->rpc->type ==
				CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__EXPAND_VOLUME)
				*yes = true;
		csi_msg_free(resp);
	}
	csi_arena_free(a);
	return rc;
}

static int setup(void *ud, struct sidecar *sc, char *err, size_t errlen)
{
	struct rsz_main *m = ud;
	const struct rsz_config *cfg = m->cfg;
	struct rsz_ctrl_opts o = { 0 };
	char component[300];
	bool node;

	if (!sidecar_has_controller_service(sc)) {
		snprintf(err, errlen, "CSI driver does not support controller service");
		return -1;
	}
	rsz_resolve_timeouts(cfg->sc.timeout_ns, cfg->timeout_given, cfg->resize_timeout_ns,
			     cfg->modify_timeout_ns, &o.resize_timeout_ns, &o.modify_timeout_ns);
	o.controller_expand = sidecar_has_ctrl_cap(sc, CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__EXPAND_VOLUME);
	o.resize = true;
	if (!o.controller_expand) {
		if (node_can_expand(sc, o.resize_timeout_ns, &node, err, errlen))
			return -1;
		if (node)
			KLOG_I("The CSI driver supports node resize only, using trivial resizer to handle resize requests");
		else
			KLOG_I("Resize not supported message=\"CSI driver neither supports controller resize nor node resize\"");
		o.resize = node;
	}
	bool can_modify = sidecar_has_ctrl_cap(sc, CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__MODIFY_VOLUME);
	if (!can_modify)
		KLOG_I("Modify not supported message=\"CSI driver does not support controller modify\"");
	/* A modify-only driver (MODIFY_VOLUME, no expansion anywhere) runs the modify controller
	 * alone, as upstream v2.x does. */
	if (!o.resize && !can_modify) { /* upstream's klog.Fatalf: exit 255 */
		snprintf(err, errlen, "CSI driver does not support resize nor modify");
		return SIDECAR_SETUP_FATAL;
	}
	o.modify = m->gates.vac && can_modify;
	o.snmw = sidecar_has_ctrl_cap(sc, CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__SINGLE_NODE_MULTI_WRITER);
	o.driver = sc->driver;
	o.csi = sc->csi;
	o.gates = m->gates;
	o.workers = cfg->workers;
	o.retry_start_ns = cfg->sc.kube.retry_start_ns;
	o.retry_max_ns = cfg->sc.kube.retry_max_ns;
	o.resync_ns = cfg->sc.kube.resync_ns;
	o.handle_inuse_error = cfg->handle_inuse_error;
	o.extra_modify_metadata = cfg->extra_modify_metadata;
	o.node = cfg->node_deployment ? getenv("NODE_NAME") : NULL;
	snprintf(component, sizeof(component), "external-resizer %s", sc->driver);
	o.recorder = sidecar_recorder(sc, component);
	sidecar_set_controller(sc, rsz_ctrl_new(sc->kc, &o), &rsz_controller);
	return 0;
}

/*
 * v2.3's discovery check, before the driver is asked anything: unless --feature-gates names
 * VolumeAttributesClass, a server that does not list it under storage.k8s.io/v1 turns the gate
 * off (no modify controller, no VolumeAttributesClass informer waiting for ever); a failed
 * check leaves the gate as it is. The log lines are upstream's.
 */
static void check_vac_api(void *ud, struct sidecar *sc)
{
	struct rsz_main *m = ud;
	struct kube_err e;

	if (m->gates.vac_explicit)
		return;
	int served = kube_serves_kind(sc->kc, "storage.k8s.io/v1", "VolumeAttributesClass", &e);
	if (served < 0) {
		KLOG_ERR(e.message, "Failed to check VolumeAttributesClass V1 API availability");
	} else if (served) {
		KLOG_I("VolumeAttributesClass v1 API is available");
	} else {
		KLOG_I("Disabling VolumeAttributesClass feature gate because the VolumeAttributesClass v1 API is not available");
		m->gates.vac = false;
	}
}

int rsz_run(const struct rsz_config *cfg)
{
	struct rsz_main m = { .cfg = cfg };
	struct sidecar_ops ops = {
		.component = "csi-resizer",
		.lease_name = lease_name,
		.kube_ready = check_vac_api,
		.rest_client_metrics = true, /* v2.3 registers client-go's REST client metrics */
		.setup = setup,
		.ud = &m,
	};
	char err[512];

	if (rsz_parse_gates(&cfg->sc.feature_gates, &m.gates, err, sizeof(err))) {
		KLOG_ERR(err, "Failed to set feature gates");
		return 1;
	}
	const char *node = getenv("NODE_NAME");
	if (cfg->node_deployment && cfg->sc.kube.leader_election) {
		KLOG_E("Leader election cannot happen when node-deployment is set to true");
		return 1;
	}
	if (cfg->node_deployment && (!node || !*node)) {
		KLOG_E("The NODE_NAME environment variable must be set when using --node-deployment");
		return 1;
	}
	/* Upstream's flag.Int: 0 or less starts no worker for either queue. */
	if (cfg->workers <= 0)
		KLOG_W("--workers=%d: no claim is expanded and no volume modified", cfg->workers);
	return sidecar_run(&cfg->sc, &ops);
}
