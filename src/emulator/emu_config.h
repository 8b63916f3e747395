/*
 * emu_config: what kube-emulator is started with, and the defaults of its hardening limits. Apart
 * from emu_server.h so that the emulator's own files, which the server calls, can read the
 * configuration without including the server's header.
 */
#ifndef KCSI_EMULATOR_CONFIG_H
#define KCSI_EMULATOR_CONFIG_H

#include <stddef.h>
#include <stdint.h>

struct flag_map;

struct emu_config {
	const char *listen;        /* "host:port", "[v6]:port"; port 0 picks a free one */
	const char *token;         /* NULL or "": no authentication */
	const char *tls_cert_file; /* both set: HTTPS */
	const char *tls_key_file;
	const char *tls_ca_file;   /* CA written to the kubeconfig; default: the certificate */
	const char *state_file;    /* NULL: no persistence */
	const struct flag_map *runtime_config; /* --runtime-config (emu_store.h); NULL: all */
	size_t watch_history;      /* events kept for watch resume */
	int64_t bookmark_interval_ns;
	int64_t max_watch_timeout_ns; /* watches without timeoutSeconds end after this */
	/* hardening (0: the defaults below) */
	size_t watch_history_bytes;   /* memory the watch history may hold, bytes */
	unsigned idle_timeout_s;      /* a connection silent this long is closed (not a watch) */
	unsigned max_connections;     /* connections served at once */
	unsigned max_connections_per_ip;
};

/* The kube-apiserver release whose API kube-emulator serves: /version's gitVersion. */
#define EMU_KUBE_VERSION "v1.37.2"

/*
 * What the watch history may hold: event texts and the decoded objects kept with them (see
 * emu_store.h). 64 MiB keeps kube-emulator under ~128 MB RSS whatever is patched: before issue
 * 26 the limit was 256 MiB of text alone, and 89 patches of a 2.9 MB ConfigMap took it to 519 MB.
 */
#define EMU_DEFAULT_WATCH_HISTORY_BYTES ((size_t)64 * 1024 * 1024)
#define EMU_DEFAULT_IDLE_TIMEOUT_S 60
#define EMU_DEFAULT_MAX_CONNECTIONS 2048
#define EMU_DEFAULT_MAX_CONNECTIONS_PER_IP 0 /* no limit: every local client is 127.0.0.1 */

#endif
