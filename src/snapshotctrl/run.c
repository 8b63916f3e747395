/*
 * snapshot-controller on the shared sidecar runtime (src/sidecar) with no CSI driver: its
 * flags (upstream's names and defaults), the CRD check of --retry-crd-interval-max, and the
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
	flags_deprecate(fs, "resync", "use --resync-period");
	flags_hide(fs, "resync");
	flags_string(fs, "http-endpoint", &c->sc.http_endpoint, "",
		     "Address of the diagnostics HTTP server (metrics, /healthz/leader-election), e.g. :8080; empty disables it.");
	flags_string(fs, "metrics-path", &c->sc.metrics_path, "/metrics",
		     "HTTP path of the Prometheus metrics.");
	flags_gates(fs, "feature-gates", &c->sc.feature_gates,
		  "Feature gates as key=value pairs; CSIVolumeGroupSnapshot=true serves "
		  "VolumeGroupSnapshots (groupsnapshot.storage.k8s.io/v1).");
	flags_duration(fs, "resync-period", &c->resync_period_ns, 15 * NSEC_PER_MIN,
		       "How often every cached object is processed again.");
	flags_int(fs, "worker-threads", &c->worker_threads, 10,
		  "Workers per queue (snapshots, contents, claims); must be positive.");
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

/* upstream's ensureCustomResourceDefinitionsExist: LIST limit=1 of the three kinds, backing off
 * from 100 ms by 1.5x, for at most --retry-crd-interval-max (at least 1 s). */
static int crds_served(struct kube_client *kc, int64_t max_ns, char *err, size_t errlen)
{
	const struct kube_resource *rs[] = { &KUBE_RES_VOLUMESNAPSHOTS,
					     &KUBE_RES_VOLUMESNAPSHOTCLASSES,
					     &KUBE_RES_VOLUMESNAPSHOTCONTENTS };
	int64_t deadline = mono_now_ns() + (max_ns > NSEC_PER_SEC ? max_ns : NSEC_PER_SEC);
	int64_t delay = 100 * NSEC_PER_MSEC;
	struct kube_list_opts lo = { .limit = 1 };
	struct kube_err e;

	for (;;) {
		size_t ok = 0;
		for (; ok < 3; ok++) {
			json_t *l = kube_list(kc, rs[ok], NULL, &lo, &e);
			if (!l) {
				KLOG_E("Failed to list v1 %s with error=%s", rs[ok]->resource, e.message);
				break;
			}
			json_decref(l);
		}
		if (ok == 3)
			return 0;
		if (mono_now_ns() + delay > deadline) {
			snprintf(err, errlen, "Exiting due to failure to ensure CRDs exist during startup: "
				 "timed out waiting for the condition");
			return -1;
		}
		sleep_ns(delay);
		delay = delay * 3 / 2;
	}
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

	o.groups = groups;

	if (crds_served(sc->kc, cfg->retry_crd_max_ns, err, errlen))
		return -1;
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
	if (cfg->worker_threads <= 0) {
		KLOG_E("option -worker-threads must be greater than zero");
		return 1;
	}
	return sidecar_run(&cfg->sc, &ops);
}
