/*
 * csi-snapshotter on the shared sidecar runtime (src/sidecar): its flags (upstream's names and
 * defaults), the checks upstream's main makes after discovery (v8.7: group snapshots on unless
 * the gate is off or their CRDs are missing), and the setup that builds the
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
	flags_remove(fs, "resync"); /* upstream has --resync-period only */
	flags_duration(fs, "resync-period", &c->resync_period_ns, 15 * NSEC_PER_MIN,
		       "How often every cached object is processed again.");
	flags_int(fs, "worker-threads", &c->worker_threads, 10,
		  "Workers taking VolumeSnapshotContents (and, with groups, VolumeGroupSnapshotContents); 0 or less starts none, as upstream, and nothing is processed.");
	flags_string(fs, "snapshot-name-prefix", &c->name_prefix, "snapshot",
		     "Prefix of the snapshot names sent to CreateSnapshot (\"<prefix>-<snapshot uid>\").");
	flags_int(fs, "snapshot-name-uuid-length", &c->uuid_length, -1,
		  "Cut the uid in snapshot names to this many characters, dashes removed; -1 keeps it whole.");
	flags_string(fs, "groupsnapshot-name-prefix", &c->group_prefix, "groupsnapshot",
		     "Prefix of the driver's group snapshot names (\"<prefix>-<group snapshot uid>\"); empty: exit 1 when group snapshots are on.");
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

/* GroupControllerGetCapabilities lists CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT: 1 yes, 0 no, -1
 * the call failed (logged). */
static int group_capable(struct sidecar *sc, int64_t timeout_ns)
{
	Csi__V1__GroupControllerGetCapabilitiesRequest req =
		CSI__V1__GROUP_CONTROLLER_GET_CAPABILITIES_REQUEST__INIT;
	Csi__V1__GroupControllerGetCapabilitiesResponse *resp = NULL;
	struct csi_status st = { 0 };
	int yes = 0;

	if (csi_group_controller_get_capabilities(sc->csi, &req, &resp, timeout_ns, &st) != 0) {
		KLOG_ERR(st.message, "error determining if driver supports create/delete group snapshot operations");
		return -1;
	}
	for (size_t i = 0; i < resp->n_capabilities; i++)
		if (resp->capabilities[i]->rpc &&
		    resp->capabilities[i]->rpc->type ==
			    CSI__V1__GROUP_CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT)
			yes = 1;
	csi_msg_free(resp);
	return yes;
}

/*
 * v8.7's check that the two group kinds this sidecar reads are served: one LIST limit=1 of
 * each. Missing (a cluster without the group CRDs, which a driver's vendor does not control)
 * turns group snapshots off for this run with upstream's warning.
 */
static bool group_crds_served(struct kube_client *kc)
{
	const struct kube_resource *rs[] = { &KUBE_RES_VOLUMEGROUPSNAPSHOTCONTENTS,
					     &KUBE_RES_VOLUMEGROUPSNAPSHOTCLASSES };
	struct kube_list_opts lo = { .limit = 1 };
	struct kube_err e;

	for (size_t i = 0; i < 2; i++) {
		json_t *l = kube_list(kc, rs[i], NULL, &lo, &e);
		if (!l) {
			KLOG_W("VolumeGroupSnapshot CRDs were not found; disabling the "
			       "VolumeGroupSnapshot feature for this run. Install the "
			       "VolumeGroupSnapshot CRDs to use this feature: %s", e.message);
			return false;
		}
		json_decref(l);
	}
	return true;
}

/*
 * Group snapshots as v8.7 decides them: the gate (on by default) and the CRDs. A driver without
 * the GroupController capability gets a warning but the group contents of its name are still
 * worked on, so such a content shows the driver's refusal in its status, as upstream's does.
 * -1 with err: the group name prefix is empty (exit 1).
 */
static int groups_on(const struct snapper_config *cfg, struct sidecar *sc, bool *on, char *err,
		     size_t errlen)
{
	*on = feature_gate_enabled(&cfg->sc.feature_gates, snap_feature_gates,
				   snap_feature_gates_len, SNAP_GATE_GROUPS) &&
	      group_crds_served(sc->kc);
	if (!*on)
		return 0;
	if (group_capable(sc, cfg->sc.timeout_ns) == 0)
		KLOG_W("CSI driver %s does not support GroupControllerCreateVolumeGroupSnapshot when "
		       "the --feature-gates=CSIVolumeGroupSnapshot=true flag is set", sc->driver);
	if (!*cfg->group_prefix) {
		snprintf(err, errlen, "group snapshot name prefix cannot be of length 0");
		return -1;
	}
	return 0;
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
	if (groups_on(cfg, sc, &o.groups, err, errlen))
		return -1;
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
	if (cfg->worker_threads <= 0)
		KLOG_W("--worker-threads=%d: no worker is started, so no object is processed",
		       cfg->worker_threads);
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
