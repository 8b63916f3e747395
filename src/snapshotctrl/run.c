/*
 * snapshot-controller on the shared sidecar runtime (src/sidecar) with no CSI driver: its
 * flags (upstream's names and defaults), the CRD checks of --retry-crd-interval-max (the
 * snapshot kinds or exit 1; the group kinds or group snapshots off for the run), and the
 * setup that builds the controller, which the sidecar then starts once leading, stops and
 * frees. Lease "snapshot-controller-leader".
 */
#include "snapshotctrl/snapshotctrl.h"

#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "snapshots/snapshots.h"
#include "base/timeutil.h"
#include "kube/options.h"

#define SCTRL_LEASE "snapshot-controller-leader"

void sctrl_register_flags(struct flagset *fs, struct sctrl_config *c)
{
	memset(c, 0, sizeof(*c));
	/* No driver: only the shared kube flags and the diagnostics server's. */
	c->sc.csi_address = "";
	c->sc.metrics_address = "";
	c->sc.max_grpc_log_length = -1;
	kube_options_register(fs, &c->sc.kube);
	flags_remove(fs, "resync"); /* upstream has --resync-period only */
	flags_string(fs, "http-endpoint", &c->sc.http_endpoint, "",
		     "Address of the diagnostics HTTP server (metrics, /healthz/leader-election), e.g. :8080; empty disables it.");
	flags_string(fs, "metrics-path", &c->sc.metrics_path, "/metrics",
		     "HTTP path of the Prometheus metrics.");
	flags_gates(fs, "feature-gates", &c->sc.feature_gates,
		  "Feature gates as key=value pairs; CSIVolumeGroupSnapshot (GA, on by default) serves "
		  "VolumeGroupSnapshots (groupsnapshot.storage.k8s.io/v1) when their CRDs exist.");
	flags_duration(fs, "resync-period", &c->resync_period_ns, 15 * NSEC_PER_MIN,
		       "How often every cached object is processed again.");
	flags_int(fs, "worker-threads", &c->worker_threads, 10,
		  "Workers per queue (snapshots, contents, claims); 0 or less starts none, as upstream, and nothing is processed.");
	flags_duration(fs, "retry-crd-interval-max", &c->retry_crd_max_ns, 30 * NSEC_PER_SEC,
		       "How long to wait at start-up for the snapshot CRDs to be served before exiting.");
	flags_bool(fs, "enable-distributed-snapshotting", &c->distributed, false,
		   "Label each new content with the node of its volume (snapshot.storage.kubernetes.io/managed-by) for node-deployed csi-snapshotters.");
	flags_bool(fs, "prevent-volume-mode-conversion", &c->prevent_mode_conversion, true,
		   "Record the source volume's mode in each new content (spec.sourceVolumeMode), so that restores may not change it.");
}

SIDECAR_CONTROLLER(sctrl_controller, struct sctrl, sctrl_start, sctrl_stop, sctrl_free,
		   sctrl_render_metrics);

static void lease_name(const char *driver, char *buf, size_t len)
{
	(void)driver;
	snprintf(buf, len, "%s", SCTRL_LEASE);
}

/*
 * upstream's waitForCRDCondition: LIST limit=1 of each kind in turn, backing off from 100 ms by
 * 1.5x until all answer, for at most --retry-crd-interval-max (at least 1 s). 0, or -1 when
 * the time ran out (upstream's error then is its context's: "context deadline exceeded").
 */
static int crds_served(struct kube_client *kc, const struct kube_resource *const *rs, size_t n,
		       int64_t max_ns)
{
	int64_t deadline = mono_now_ns() + (max_ns > NSEC_PER_SEC ? max_ns : NSEC_PER_SEC);
	int64_t delay = 100 * NSEC_PER_MSEC;
	struct kube_list_opts lo = { .limit = 1 };
	struct kube_err e;

	for (;;) {
		size_t ok = 0;
		for (; ok < n; ok++) {
			json_t *l = kube_list(kc, rs[ok], NULL, &lo, &e);
			if (!l) {
				KLOG_E("Failed to list v1 %s with error=%s", rs[ok]->resource, e.message);
				break;
			}
			json_decref(l);
		}
		if (ok == n)
			return 0;
		if (mono_now_ns() + delay > deadline)
			return -1;
		sleep_ns(delay);
		delay = delay * 3 / 2;
	}
}

static const struct kube_resource *const snapshot_kinds[] = {
	&KUBE_RES_VOLUMESNAPSHOTS, &KUBE_RES_VOLUMESNAPSHOTCLASSES, &KUBE_RES_VOLUMESNAPSHOTCONTENTS
};
static const struct kube_resource *const group_kinds[] = {
	&KUBE_RES_VOLUMEGROUPSNAPSHOTS, &KUBE_RES_VOLUMEGROUPSNAPSHOTCLASSES,
	&KUBE_RES_VOLUMEGROUPSNAPSHOTCONTENTS
};

/*
 * v8.7's start-up: the snapshot kinds must be served (else exit 1); with the group gate on
 * (its default), group kinds that are not served within the same wait turn group snapshots
 * off for this run with a warning rather than stopping the controller.
 */
static int check_crds(struct kube_client *kc, int64_t max_ns, bool *groups, char *err,
		      size_t errlen)
{
	if (crds_served(kc, snapshot_kinds, 3, max_ns)) {
		snprintf(err, errlen, "Exiting due to failure to ensure CRDs exist during startup: "
			 "context deadline exceeded");
		return -1;
	}
	if (*groups && crds_served(kc, group_kinds, 3, max_ns)) {
		KLOG_W("VolumeGroupSnapshot CRDs were not found; disabling the VolumeGroupSnapshot "
		       "feature for this run. Install the VolumeGroupSnapshot CRDs to use this "
		       "feature: context deadline exceeded");
		*groups = false;
	}
	return 0;
}

static int setup(void *ud, struct sidecar *sc, char *err, size_t errlen)
{
	const struct sctrl_config *cfg = ud;
	struct sctrl_opts o = {
		.workers = cfg->worker_threads, .resync_ns = cfg->resync_period_ns,
		.retry_start_ns = cfg->sc.kube.retry_start_ns, .retry_max_ns = cfg->sc.kube.retry_max_ns,
		.prevent_mode_conversion = cfg->prevent_mode_conversion,
		.distributed = cfg->distributed,
	};
	bool groups = feature_gate_enabled(&cfg->sc.feature_gates, snap_feature_gates,
					   snap_feature_gates_len, SNAP_GATE_GROUPS);

	if (check_crds(sc->kc, cfg->retry_crd_max_ns, &groups, err, errlen))
		return -1;
	o.groups = groups;
	KLOG_V(2, "Start NewCSISnapshotController with kubeconfig [%s] resyncPeriod [%lldms]",
	       cfg->sc.kube.kubeconfig, (long long)(cfg->resync_period_ns / NSEC_PER_MSEC));
	o.recorder = sidecar_recorder(sc, "snapshot-controller");
	sidecar_set_controller(sc, sctrl_new(sc->kc, &o), &sctrl_controller);
	return 0;
}

int sctrl_run(const struct sctrl_config *cfg)
{
	struct sidecar_ops ops = {
		.component = "snapshot-controller",
		.lease_name = lease_name,
		.dummy_driver = "snapshot-controller", /* no CSI driver: skip connect and discovery */
		.setup = setup,
		.ud = (void *)cfg,
		/* snapshot-controller v8.6: klog.Fatal (exit 255) for the gates, the HTTP endpoint and
		 * the leader election; every other start-up failure is os.Exit(1). */
		.fatal_255 = SIDECAR_FATAL_HTTP | SIDECAR_FATAL_LEADER,
	};
	char err[512];

	if (feature_gates_check(&cfg->sc.feature_gates, snap_feature_gates, snap_feature_gates_len, err, sizeof(err))) {
		KLOG_ERR(err, "Error while parsing feature gates");
		return SIDECAR_EXIT_FATAL;
	}
	if (cfg->worker_threads <= 0)
		KLOG_W("--worker-threads=%d: no worker is started, so no object is processed",
		       cfg->worker_threads);
	return sidecar_run(&cfg->sc, &ops);
}
