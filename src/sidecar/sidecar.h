/*
 * sidecar: the start-up and life cycle every kcsi sidecar shares (csi-attacher, csi-provisioner),
 * in the order the upstream binaries follow:
 *
 *   flags -> kube client -> CSI connection (waits for the socket, logging every 10 s) ->
 *   Probe until ready (not-ready and timeouts retried, any other error fatal) -> GetPluginInfo ->
 *   GetPluginCapabilities -> ControllerGetCapabilities (a failure of these three is fatal) ->
 *   the sidecar's setup -> diagnostics HTTP server (/metrics, /healthz/leader-election) ->
 *   leader election (optional) -> the sidecar's start once leading -> SIGTERM/SIGINT.
 *
 * A sidecar supplies only a struct sidecar_ops: its name, its lease name, setup (build the
 * controller from the discovered driver), start (informers, cache sync, workers), stop and a
 * metrics renderer. Nothing of this file is copied into a sidecar.
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
 * responses, the metrics and the diagnostics server; the sidecar's own state lives behind ops->ud
 * and is freed by ops->cleanup before the clients it borrows are closed.
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
	/* After discovery, before the HTTP server: build the controller. 0 or -1 with err. */
	int (*setup)(void *ud, struct sidecar *sc, char *err, size_t errlen);
	/* Once leading: start informers, wait for caches, start workers. 0 or -1 with err. */
	int (*start)(void *ud, struct sidecar *sc, char *err, size_t errlen);
	/* After a successful start, on shutdown: stop workers and informers. */
	void (*stop)(void *ud);
	/* Frees what setup built, before the clients it borrows are closed. May be NULL. */
	void (*cleanup)(void *ud);
	/* Appends the sidecar's own series (workqueues, controller counters) to /metrics. */
	void (*render_metrics)(void *ud, struct strbuf *out);
	void *ud;
	/*
	 * The start-up steps whose failure exits SIDECAR_EXIT_FATAL (255, as klog.Fatal exits in
	 * the upstream binary) instead of 1 (upstream's os.Exit(1) / klog.FlushAndExit(.., 1)):
	 * SIDECAR_FATAL_* bits. Each upstream main differs; each run.c says which it copies.
	 */
	unsigned fatal_255;
	/*
	 * Start-up failures logged as upstream's logger.Error(err, "What failed", kv...) writes
	 * them: the step's message, then err="..." (the JSON format's "err" field), as
	 * external-attacher v4.12 does. false: the error text alone, as the klog.Errorf / Fatalf
	 * of the other mains.
	 */
	bool structured_errors;
};
#define SIDECAR_EXIT_FATAL 255
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
};

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
