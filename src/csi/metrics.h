/*
 * csi/metrics: the csi_sidecar_operations_seconds histogram the upstream sidecars export.
 *
 * One histogram series per (method_name, grpc_status_code), with the driver_name label, the
 * upstream bucket bounds (0.1 0.25 0.5 1 2.5 5 10 15 25 50 120 300 600 seconds) and Go's
 * status-code spelling ("OK", "DeadlineExceeded"), so dashboards built for the Go sidecars
 * work unchanged. csi_metrics_observe() has the signature of csi_call_observer_fn: pass it with
 * the metrics object as the observer of a connection. Thread-safe.
 */
#ifndef KCSI_CSI_METRICS_H
#define KCSI_CSI_METRICS_H

#include <stdint.h>

struct strbuf;
struct csi_metrics;

struct csi_metrics *csi_metrics_new(void);
void csi_metrics_free(struct csi_metrics *m);
/* The driver_name label; set it once GetPluginInfo has answered. Copied. */
void csi_metrics_set_driver(struct csi_metrics *m, const char *driver_name);
/* Records one call; `m` is a struct csi_metrics *. */
void csi_metrics_observe(void *m, const char *method, int code, int64_t duration_ns);
/* Appends the Prometheus text exposition (HELP, TYPE, buckets, sum, count). */
void csi_metrics_render(struct csi_metrics *m, struct strbuf *out);

#endif
