/*
 * registrar: csi-node-driver-registrar, the sidecar that registers a CSI driver with the kubelet.
 *
 * It asks the driver its name (GetPluginInfo), then serves the kubelet's plugin registration
 * service (proto/pluginregistration.proto) on <plugin-registration-path>/<driver>-reg.sock. The
 * kubelet's plugin watcher finds the socket, calls GetInfo (type CSIPlugin, the driver name, the
 * driver socket's host path, supported versions ["1.0.0"]), registers the driver and reports the
 * outcome with NotifyRegistrationStatus; a failed registration ends the registrar with status 1
 * so that its container restarts, as upstream does.
 *
 * The config's strings point into the flagset's memory (filled by flags_parse()).
 */
#ifndef KCSI_REGISTRAR_REGISTRAR_H
#define KCSI_REGISTRAR_REGISTRAR_H

#include <stdbool.h>
#include <stdint.h>

struct flagset;

struct reg_config {
	const char *csi_address;
	const char *kubelet_registration_path;
	const char *plugin_registration_path;
	const char *http_endpoint;
	const char *mode;
	int64_t timeout_ns;
	int64_t connection_timeout_ns; /* deprecated, no effect */
	int health_port;               /* deprecated form of --http-endpoint :PORT */
	bool enable_pprof;             /* accepted; kcsi has no profiler endpoints */
};

/* Registers the upstream flags (names and defaults are upstream's). */
void reg_register_flags(struct flagset *fs, struct reg_config *c);
/* Runs until SIGTERM/SIGINT (0) or a failure (1). */
int reg_run(const struct reg_config *c);

#endif
