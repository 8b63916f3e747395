/*
 * csi-attacher on the shared sidecar runtime (src/sidecar): its flags, and the setup that
 * builds the controller from the discovered driver (the CSI or the trivial handler, reconciler
 * when the driver can list published nodes), which the sidecar then starts once leading, stops
 * and frees.
 */
#include "attacher/attacher.h"
#include "attacher/att.h"
#include "base/featuregate.h"
#include "base/log.h"
#include "base/timeutil.h"
#include "kube/leader.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

/* Flag names and defaults are upstream's (a fact of the interface); the help text is ours. */
void att_register_flags(struct flagset *fs, struct att_config *c)
{
	sidecar_register_flags(fs, &c->sc);
	flags_uint(fs, "worker-threads", &c->worker_threads, 10,
		   "Workers per queue (VolumeAttachments and PersistentVolumes); must be positive.");
	flags_int(fs, "max-entries", &c->max_entries, 0,
		  "Page size of the reconciler's ListVolumes calls; 0: no limit (the driver returns as many as it will).");
	flags_duration(fs, "reconcile-sync", &c->reconcile_sync_ns, NSEC_PER_MIN,
		       "How often the reconciler compares VolumeAttachments with the driver's ListVolumes.");
	flags_string(fs, "default-fstype", &c->default_fstype, "",
		     "Filesystem type sent for mount volumes whose PersistentVolume names none.");
	flags_int(fs, "max-grpc-log-length", &c->sc.max_grpc_log_length, -1,
		  "Longest logged CSI request or response, in characters; -1 means no limit.");
	flags_bool(fs, "dummy", &c->dummy, false,
		   "Use no CSI driver: mark VolumeAttachments of attacher \"csi/dummy\" attached (for tests).");
}

/* external-attacher v4.12's own gates (the generic ones are base/featuregate.h's). */
static const struct feature_gate att_feature_gates[] = {
	{ "ReleaseLeaderElectionOnExit", false, FG_ALPHA, false },
	{ "MutableCSINodeAllocatableCount", true, FG_GA, false },
};
static const size_t att_feature_gates_len = sizeof(att_feature_gates) / sizeof(att_feature_gates[0]);

static void render_metrics(struct att_ctrl *c, struct strbuf *out)
{
	struct kube_workqueue *qs[2] = { c->vaq, c->pvq };

	kube_workqueue_render_metrics(qs, 2, out);
}

SIDECAR_CONTROLLER(att_controller, struct att_ctrl, att_ctrl_start, att_ctrl_stop, att_ctrl_free,
		   render_metrics);

static void lease_name(const char *driver, char *buf, size_t len)
{
	kube_leader_lease_name("external-attacher-leader", driver, buf, len);
}

/* Picks the handler from the capabilities, as upstream's main does. */
static void choose_handler(struct sidecar *sc, const struct att_config *cfg, struct att_ctrl_opts *o)
{
	o->handler = &att_trivial_handler;
	if (!sidecar_has_controller_service(sc)) {
		KLOG_V(2, "CSI driver does not support Plugin Controller Service, using trivial handler");
		return;
	}
	if (sidecar_has_ctrl_cap(sc, CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__PUBLISH_UNPUBLISH_VOLUME)) {
		o->handler = &att_csi_handler;
		o->csi = sc->csi;
		KLOG_V(2, "CSI driver supports ControllerPublishUnpublish, using real CSI handler");
	} else {
		KLOG_V(2, "CSI driver does not support ControllerPublishUnpublish, using trivial handler");
	}
	o->publish_readonly =
		sidecar_has_ctrl_cap(sc, CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__PUBLISH_READONLY);
	o->single_node_multi_writer = sidecar_has_ctrl_cap(
		sc, CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__SINGLE_NODE_MULTI_WRITER);
	if (o->csi &&
	    sidecar_has_ctrl_cap(sc, CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__LIST_VOLUMES) &&
	    sidecar_has_ctrl_cap(sc, CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__LIST_VOLUMES_PUBLISHED_NODES)) {
		o->reconcile_ns = cfg->reconcile_sync_ns;
		KLOG_V(2, "CSI driver supports list volumes published nodes. Using capability to "
			  "reconcile volume attachment objects with actual backend state");
	}
}

static int setup(void *ud, struct sidecar *sc, char *err, size_t errlen)
{
	const struct att_config *cfg = ud;
	struct att_ctrl_opts o = { 0 };
	char component[300];

	(void)err;
	(void)errlen;
	o.workers = cfg->worker_threads > INT_MAX ? INT_MAX : (int)cfg->worker_threads;
	o.timeout_ns = cfg->sc.timeout_ns;
	o.retry_start_ns = cfg->sc.kube.retry_start_ns;
	o.retry_max_ns = cfg->sc.kube.retry_max_ns;
	o.resync_ns = cfg->sc.kube.resync_ns;
	o.max_entries = cfg->max_entries;
	o.default_fstype = cfg->default_fstype;
	o.driver = sc->driver;
	if (cfg->dummy) {
		o.handler = &att_trivial_handler;
		KLOG_I("Running in dummy mode: VolumeAttachments of \"%s\" are marked attached",
		       ATT_DUMMY_ATTACHER);
	} else {
		choose_handler(sc, cfg, &o);
	}
	snprintf(component, sizeof(component), "csi-attacher %s", sc->driver);
	o.recorder = sidecar_recorder(sc, component);
	sidecar_set_controller(sc, att_ctrl_new(sc->kc, &o), &att_controller);
	return 0;
}

int att_run(const struct att_config *cfg)
{
	struct sidecar_ops ops = {
		.component = "csi-attacher",
		.lease_name = lease_name,
		.dummy_driver = cfg->dummy ? ATT_DUMMY_ATTACHER : NULL,
		.ctrl_caps_only_with_service = true,
		.setup = setup,
		.ud = (void *)cfg,
		.structured_errors = true, /* v4.12's logger.Error(err, ...): err="..." */
	};
	char err[512];

	if (feature_gates_check(&cfg->sc.feature_gates, att_feature_gates, att_feature_gates_len, err, sizeof(err))) {
		KLOG_E("failed to store flag gates err=%s", LOGQ(err));
		return 1;
	}
	if (cfg->worker_threads == 0) { /* upstream's words; a sign is flag.Uint's parse error */
		KLOG_E("Option -worker-threads must be greater than zero");
		return 1;
	}
	return sidecar_run(&cfg->sc, &ops);
}
