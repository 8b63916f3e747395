/*
 * sidecar: the start-up and life cycle every kcsi sidecar shares (csi-attacher, csi-provisioner),
 * in the order the upstream binaries follow:
 *
 *   flags -> kube client (-> ops->kube_ready) -> CSI connection (waits for the socket, logging
 *   every 10 s) -> Probe until ready (not-ready and timeouts retried, any other error fatal) ->
 *   GetPluginInfo -> GetPluginCapabilities -> ControllerGetCapabilities (a failure of these
 *   three is fatal) ->
 *   the sidecar's setup -> diagnostics HTTP server (/metrics, /healthz/leader-election) ->
 *   leader election (optional) -> the sidecar's start once leading -> SIGTERM/SIGINT.
 *
 * A sidecar supplies only a struct sidecar_ops: its name, its lease name and setup, which builds
 * the controller from the discovered driver and hands it over with sidecar_set_controller().
 * From there the sidecar drives it through a struct sidecar_controller (start once leading:
 * informers, cache sync, workers; stop on shutdown; free; its series on /metrics), which
 * SIDECAR_CONTROLLER() writes from the component's own typed functions. The event recorder
 * (sidecar_recorder()) is the sidecar's too. A component's run.c is therefore its flags, its
 * checks of them and its setup; nothing of this file, and no start/stop glue, is copied into it.
 *
 * The controller kit under every component, sidecar or not, is these pieces:
 *   informer set   kube/informer.h: kube_informers_start / _wait_synced / _stop
 *   worker pool    kube/workqueue.h: kube_workqueue_serve (rate limits: --retry-interval-*)
 *   events         kube/events.h: kube_event_about (one recorder per component)
 *   wiring         this file (sidecars), controllers/cm.h (kcsi-controller-manager)
 *
 * Shutdown: SIGTERM and SIGINT are blocked in every thread and taken by one signal thread. On a
 * signal it arms a watchdog (the process exits 0 at the latest 900 ms later, whatever any
 * thread is blocked in), releases the Lease when held, and then either lets the main thread stop
 * the controller (workers finish their current key) and exit 0, or, when the main thread is
 * still in a start-up wait (driver socket absent, Probe retries, API server unreachable, cache
 * sync, leader-election standby), exits 0 at once. Losing the driver connection exits non-zero
 * so that the orchestrator restarts the container, as upstream does.
 *
 * Ownership: struct sidecar owns the kube clients, the CSI connection, the capability
 * responses, the metrics, the diagnostics server, the event recorder and the controller
 * (freed with its own free function, first); the sidecar's own further state lives behind
 * ops->ud and is freed by ops->cleanup, after the controller, before the clients it borrows
 * are closed.
 */
#ifndef KCSI_SIDECAR_SIDECAR_H
#define KCSI_SIDECAR_SIDECAR_H

#include <stdbool.h>
#include <stdint.h>

#include "base/flags.h"
#include "base/strbuf.h"
#include "csi/client.h"
#include "csi/metrics.h"
#include "csi/msg.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/events.h"
#include "kube/options.h"

/* The flags every sidecar has, with upstream's names and defaults. */
struct sidecar_config {
	struct kube_options kube; /* --kubeconfig, --master, QPS, resync, retries, leader election */
	const char *csi_address;  /* --csi-address /run/csi/socket */
	int64_t timeout_ns;       /* --timeout 15s: each CSI call */
	int64_t connection_timeout_ns; /* --connection-timeout: deprecated, ignored (upstream v4) */
	const char *http_endpoint;
	const char *metrics_address; /* deprecated older name of --http-endpoint */
	const char *metrics_path;    /* --metrics-path /metrics */
	struct flag_map feature_gates;
	int max_grpc_log_length;  /* set by a sidecar that has the flag; -1: no limit */
	struct flag_map le_labels; /* --leader-election-labels k:v,k2:v2 */
};

/* Registers the shared flags on fs. Sidecar-specific flags are registered by the sidecar. */
void sidecar_register_flags(struct flagset *fs, struct sidecar_config *c);

struct sidecar;

/*
 * A controller as the sidecar drives it: started once leading (informers, cache sync, workers;
 * 0, or -1 with err), stopped on shutdown after a successful start (workers finish their key),
 * freed last, and its own series (workqueues, counters) appended to /metrics while running.
 * render_metrics may be NULL.
 */
struct sidecar_controller {
	int (*start)(void *ctrl, char *err, size_t errlen);
	void (*stop)(void *ctrl);
	void (*free)(void *ctrl);
	void (*render_metrics)(void *ctrl, struct strbuf *out);
};

/*
 * Defines `static const struct sidecar_controller name` from a component's typed functions
 * (type *ctrl), so neither side casts a function pointer:
 *   SIDECAR_CONTROLLER(att_controller, struct att_ctrl, att_ctrl_start, att_ctrl_stop,
 *                      att_ctrl_free, att_render_metrics);
 */
#define SIDECAR_CONTROLLER(name, type, start_fn, stop_fn, free_fn, metrics_fn)                  \
	static int name##_start(void *c, char *err, size_t errlen)                                \
	{                                                                                          \
		return start_fn((type *)c, err, errlen);                                           \
	}                                                                                          \
	static void name##_stop(void *c) { stop_fn((type *)c); }                                   \
	static void name##_free(void *c) { free_fn((type *)c); }                                   \
	static void name##_metrics(void *c, struct strbuf *out) { metrics_fn((type *)c, out); }    \
	static const struct sidecar_controller name = { name##_start, name##_stop, name##_free,   \
							name##_metrics }

struct sidecar_ops {
	const char *component;  /* "csi-attacher": User-Agent, logs */
	/* Lease name for the discovered driver, written into buf. */
	void (*lease_name)(const char *driver, char *buf, size_t len);
	/* No CSI driver: skip connect and discovery and use this driver name (attacher --dummy). */
	const char *dummy_driver;
	/*
	 * Upstream csi-attacher asks ControllerGetCapabilities only from a driver that announces the
	 * controller service; csi-provisioner always asks. true: ask only when announced.
	 */
	bool ctrl_caps_only_with_service;
	/*
	 * Right after the API client is made, before the driver is connected: where upstream's
	 * mains ask the API server's discovery (csi-provisioner v6.4 and csi-resizer v2.3: is
	 * VolumeAttributesClass served?). sc->kc is set; nothing of the driver is. May be NULL.
	 */
	void (*kube_ready)(void *ud, struct sidecar *sc);
	/*
	 * After discovery, before the HTTP server: build the controller and hand it over with
	 * sidecar_set_controller(). 0, or -1 with err (exit as fatal_255's SETUP bit says), or
	 * SIDECAR_SETUP_FATAL with err for a check upstream ends with klog.Fatal although its other
	 * set-up failures exit 1 (csi-resizer: "does not support resize nor modify").
	 */
	int (*setup)(void *ud, struct sidecar *sc, char *err, size_t errlen);
	/* Frees what else setup built, after the controller. May be NULL. */
	void (*cleanup)(void *ud);
	void *ud;
	/*
	 * The start-up steps whose failure exits SIDECAR_EXIT_FATAL (255, as klog.Fatal exits in
	 * the upstream binary) instead of 1 (upstream's os.Exit(1) / klog.FlushAndExit(.., 1)):
	 * SIDECAR_FATAL_* bits. Each upstream main differs; each run.c says which it copies.
	 */
	unsigned fatal_255;
	/* /metrics also serves client-go's rest_client_requests_total (csi-resizer v2.3 does). */
	bool rest_client_metrics;
	/*
	 * Start-up failures logged as upstream's logger.Error(err, "What failed", kv...) writes
	 * them: the step's message, then err="..." (the JSON format's "err" field), as
	 * external-attacher v4.12 does. false: the error text alone, as the klog.Errorf / Fatalf
	 * of the other mains.
	 */
	bool structured_errors;
};
#define SIDECAR_EXIT_FATAL 255
#define SIDECAR_SETUP_FATAL (-2)
enum {
	SIDECAR_FATAL_KUBE = 1u << 0,     /* the kubeconfig / client ("Failed to create config") */
	SIDECAR_FATAL_DISCOVER = 1u << 1, /* the driver's name and capabilities */
	SIDECAR_FATAL_SETUP = 1u << 2,    /* ops->setup (the component's own start-up) */
	SIDECAR_FATAL_HTTP = 1u << 3,     /* the metrics / HTTP endpoint */
	SIDECAR_FATAL_LEADER = 1u << 4,   /* the leader election's client and start */
};

/* What the sidecar's setup may read (valid from setup until sidecar_run returns). */
struct sidecar {
	const struct sidecar_config *cfg;
	const struct sidecar_ops *ops;
	struct kube_config *kcfg;
	struct kube_client *kc;       /* for the controller (rate-limited by --kube-api-qps) */
	struct csi_conn *csi;         /* NULL in dummy mode */
	char *driver;                 /* GetPluginInfo name */
	Csi__V1__GetPluginCapabilitiesResponse *plugin_caps;   /* NULL in dummy mode */
	Csi__V1__ControllerGetCapabilitiesResponse *ctrl_caps; /* NULL when not asked */
	struct csi_metrics *metrics;  /* csi_sidecar_operations_seconds */
	char lease[320];
	/* Set by setup through sidecar_set_controller() and sidecar_recorder(); owned here. */
	void *ctrl;
	const struct sidecar_controller *ctrl_ops;
	struct kube_recorder *recorder;
};

/* Hands setup's controller to the sidecar, which starts, stops and frees it through ops. */
void sidecar_set_controller(struct sidecar *sc, void *ctrl, const struct sidecar_controller *ops);
/*
 * The component's event recorder on the sidecar's client, source.component `component`
 * ("csi-attacher <driver>", as upstream names it); made once, owned by the sidecar and freed
 * after the controller.
 */
struct kube_recorder *sidecar_recorder(struct sidecar *sc, const char *component);

/* True when the driver announces the CONTROLLER_SERVICE plugin capability. */
bool sidecar_has_controller_service(const struct sidecar *sc);
/* True when the driver announces VOLUME_ACCESSIBILITY_CONSTRAINTS. */
bool sidecar_has_accessibility_constraints(const struct sidecar *sc);
/* True when ControllerGetCapabilities listed the RPC capability type. */
bool sidecar_has_ctrl_cap(const struct sidecar *sc, int type);

/*
 * Reads the Secret ns/name and adds each data entry to map `field` of msg (e.g. "secrets").
 * The values live only in the arena, freed with the request, and are never logged. 0, or -1
 * with err naming the secret (never a value).
 */
int sidecar_add_secrets(struct kube_client *kc, struct csi_arena *a, ProtobufCMessage *msg,
			const char *field, const char *ns, const char *name, char *err, size_t errlen);

/* Runs the sidecar until SIGTERM/SIGINT or a fatal error; returns the process exit code. */
int sidecar_run(const struct sidecar_config *cfg, const struct sidecar_ops *ops);

/*
 * Probe until ready: a not-ready answer and a timeout (DEADLINE_EXCEEDED) are retried once a
 * second, logged every 10 s; any other error is returned (-1 with err), as upstream's
 * ProbeForever does.
 */
int sidecar_probe_forever(struct csi_conn *csi, int64_t timeout_ns, char *err, size_t errlen);

#endif
