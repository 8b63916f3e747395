/*
 * livenessprobe: the sidecar that turns a CSI driver's Probe into an HTTP /healthz for the
 * kubelet's livenessProbe (kubernetes-csi/livenessprobe v2.x, same flags and answers).
 *
 * Files:
 *   run.c    start-up in upstream's order (wait for the driver's socket, GetPluginInfo for the
 *            driver name: an error there ends the process with 1), the HTTP servers, signals.
 *   health.c /healthz: one Probe per request, sent by a prober thread and shared by the requests
 *            that arrive while it is in flight (lvp_health), so concurrent requests never pile up
 *            calls on the driver and the HTTP server's thread never waits for it.
 *
 * Ownership: run.c owns the CSI connection, the metrics and the servers; struct lvp_health
 * borrows the connection. The config's strings point into the flagset's memory.
 */
#ifndef KCSI_LIVENESSPROBE_LIVENESSPROBE_H
#define KCSI_LIVENESSPROBE_LIVENESSPROBE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/strbuf.h"

struct flagset;
struct csi_conn;
struct diag_reply;

struct lvp_config {
	const char *csi_address;     /* --csi-address /run/csi/socket */
	int64_t probe_timeout_ns;    /* --probe-timeout 1s: each /healthz */
	const char *health_port;     /* --health-port "9808" (a string upstream too) */
	const char *http_endpoint;   /* --http-endpoint: replaces 0.0.0.0:<health-port>, adds metrics */
	const char *metrics_address; /* --metrics-address: deprecated separate metrics server */
	const char *metrics_path;    /* --metrics-path /metrics */
};

#define LVP_DEFAULT_HEALTH_PORT "9808"

/* Registers upstream's flags with their names and defaults. */
void lvp_register_flags(struct flagset *fs, struct lvp_config *c);
/* Runs until SIGTERM/SIGINT (0) or a failure at start-up (1). */
int lvp_run(const struct lvp_config *c);

/* ---- /healthz (health.c) ---- */

struct lvp_health;

/*
 * csi and driver are borrowed and must outlive the lvp_health. Starts the prober thread; NULL
 * when it cannot. lvp_health_free() waits for a Probe in flight (call it when none is: after
 * lvp_health_close() said false).
 */
struct lvp_health *lvp_health_new(struct csi_conn *csi, const char *driver, int64_t timeout_ns);
void lvp_health_free(struct lvp_health *h);
/*
 * Takes one /healthz request and answers it, from the prober thread, within the probe timeout:
 * 200 "ok" when Probe says ready (or leaves ready unset); 500 with the reason when it says not
 * ready, fails, times out or the driver is unreachable. Has diag_deferred_fn's signature
 * (ud = h).
 */
void lvp_health_start(void *h, struct diag_reply *r);
/*
 * Shutdown: from now on no new Probe starts (requests answer 503 at once). Returns true when a
 * Probe is still in flight: its requests are still waiting, and the HTTP server cannot stop
 * before they are answered.
 */
bool lvp_health_close(struct lvp_health *h);

#endif
