/*
 * csi-snapshotter on the shared sidecar runtime (src/sidecar): its flags (upstream's names and
 * defaults), the checks upstream's main makes after discovery, and the setup that builds the
 * controller, which the sidecar then starts once leading, stops and frees.
 */
#include "snapshotter/snapshotter.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "snapshots/snapshots.h"
#include "base/timeutil.h"
#include "csi/msg.h"
#include "kube/leader.h"

void snapper_register_flags(struct flagset *fs, struct snapper_config *c)
{
	sidecar_register_flags(fs, &c->sc);
	flags_set_default(fs, "timeout", "1m0s"); /* upstream's csi-snapshotter waits longer */
	flags_deprecate(fs, "resync", "use --resync-period");
	flags_hide(fs, "resync");
	flags_duration(fs, "resync-period", &c->resync_period_ns, 15 * NSEC_PER_MIN,
		       "How often every cached object is processed again.");
	flags_int(fs, "worker-threads", &c->worker_threads, 10,
		  "Workers taking VolumeSnapshotContents; must be positive.");
	flags_string(fs, "snapshot-name-prefix", &c->name_prefix, "snapshot",
		     "Prefix of the snapshot names sent to CreateSnapshot (\"<prefix>-<snapshot uid>\").");
	flags_int(fs, "snapshot-name-uuid-length", &c->uuid_length, -1,
		  "Cut the uid in snapshot names to this many characters, dashes removed; -1 keeps it whole.");
	flags_string(fs, "groupsnapshot-name-prefix", &c->group_prefix, "groupsnapshot",
		     "Prefix of the driver's group snapshot names (with --feature-gates CSIVolumeGroupSnapshot=true).");
	flags_int(fs, "groupsnapshot-name-uuid-length", &c->group_uuid_length, -1,
		  "Length of the group snapshot's uid (dashes removed) in the driver's group snapshot names; -1 keeps the whole uid.");
	flags_bool(fs, "extra-create-metadata", &c->extra_create_metadata, false,
		   "Add csi.storage.k8s.io/volumesnapshot/name, /namespace and volumesnapshotcontent/name to CreateSnapshot's parameters.");
	flags_bool(fs, "node-deployment", &c->node_deployment, false,
		   "Run beside a node's driver: take only contents labelled snapshot.storage.kubernetes.io/managed-by=$NODE_NAME.");
	flags_int(fs, "max-grpc-log-length", &c->sc.max_grpc_log_length, -1,
		  "Longest logged CSI request or response, in characters; -1 means no limit.");
}

SIDECAR_CONTROLLER(snapper_controller, struct snapper, snapper_start, snapper_stop, snapper_free,
		   snapper_render_metrics);

static void lease_name(const char *driver, char *buf, size_t len)
{
	kube_leader_lease_name("external-snapshotter-leader", driver, buf, len);
}

/* GroupControllerGetCapabilities lists CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT. */
static bool group_capable(struct sidecar *sc, int64_t timeout_ns)
{
	Csi__V1__GroupControllerGetCapabilitiesRequest req =
		CSI__V1__GROUP_CONTROLLER_GET_CAPABILITIES_REQUEST__INIT;
	Csi__V1__GroupControllerGetCapabilitiesResponse *resp = NULL;
	struct csi_status st = { 0 };
	bool yes = false;

	if (csi_group_controller_get_capabilities(sc->csi, &req, &resp, timeout_ns, &st) != 0) {
		KLOG_ERR(st.message, "error determining if driver supports create/delete group snapshot operations");
		return false;
	}
	for (size_t i = 0; i < resp->n_capabilities; i++)
		if (resp->capabilities[i]->rpc &&
		    resp->capabilities[i]->rpc->type ==
			    CSI__V1__GROUP_CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT)
			yes = true;
	csi_msg_free(resp);
	return yes;
}

static int setup(void *ud, struct sidecar *sc, char *err, size_t errlen)
{
	const struct snapper_config *cfg = ud;
	char component[300];

	if (!sidecar_has_ctrl_cap(sc, CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_SNAPSHOT)) {
		snprintf(err, errlen, "CSI driver %s does not support ControllerCreateSnapshot",
			 sc->driver);
		return -1;
	}
	struct snapper_opts o = {
		.driver = sc->driver, .csi = sc->csi, .workers = cfg->worker_threads,
		.timeout_ns = cfg->sc.timeout_ns, .resync_ns = cfg->resync_period_ns,
		.retry_start_ns = cfg->sc.kube.retry_start_ns, .retry_max_ns = cfg->sc.kube.retry_max_ns,
		.name_prefix = cfg->name_prefix, .uuid_length = cfg->uuid_length,
		.extra_create_metadata = cfg->extra_create_metadata,
		.node = cfg->node_deployment ? getenv("NODE_NAME") : NULL,
		.group_prefix = cfg->group_prefix, .group_uuid_length = cfg->group_uuid_length,
	};
	bool groups = feature_gate_enabled(&cfg->sc.feature_gates, snap_feature_gates,
					   snap_feature_gates_len, SNAP_GATE_GROUPS);
	if (groups) {
		o.groups = group_capable(sc, cfg->sc.timeout_ns);
		if (!o.groups)
			KLOG_W("CSI driver %s does not support group snapshot creation", sc->driver);
	}
	KLOG_V(2, "Start NewCSISnapshotSideCarController with snapshotter [%s] csiAddress [%s] "
		  "snapshotNamePrefix [%s] snapshotNameUUIDLength [%d]", sc->driver,
	       cfg->sc.csi_address, cfg->name_prefix, cfg->uuid_length);
	snprintf(component, sizeof(component), "csi-snapshotter %s", sc->driver);
	o.recorder = sidecar_recorder(sc, component);
	sidecar_set_controller(sc, snapper_new(sc->kc, &o), &snapper_controller);
	return 0;
}

int snapper_run(const struct snapper_config *cfg)
{
	struct sidecar_ops ops = {
		.component = "csi-snapshotter",
		.lease_name = lease_name,
		.setup = setup,
		.ud = (void *)cfg,
		/* csi-snapshotter v8.6: klog.Fatal (exit 255) for the gates, NODE_NAME and the HTTP
		 * server; every other start-up failure is os.Exit(1). */
		.fatal_255 = SIDECAR_FATAL_HTTP,
	};
	const char *node = getenv("NODE_NAME");

	char err[512];

	if (feature_gates_check(&cfg->sc.feature_gates, snap_feature_gates, snap_feature_gates_len, err, sizeof(err))) {
		KLOG_ERR(err, "Error while parsing feature gates");
		return SIDECAR_EXIT_FATAL;
	}
	if (cfg->worker_threads <= 0) {
		KLOG_E("option -worker-threads must be greater than zero");
		return 1;
	}
	if (cfg->node_deployment && cfg->sc.kube.leader_election) {
		KLOG_E("Leader election cannot happen when node-deployment is set to true");
		return 1;
	}
	if (cfg->node_deployment && (!node || !*node)) {
		KLOG_E("The NODE_NAME environment variable must be set when using --enable-node-deployment.");
		return SIDECAR_EXIT_FATAL;
	}
	if (!*cfg->name_prefix) {
		KLOG_E("Snapshot name prefix cannot be of length 0");
		return 1;
	}
	return sidecar_run(&cfg->sc, &ops);
}
