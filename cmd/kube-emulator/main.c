/*
 * kube-emulator: flags -> emu_server -> wait for SIGTERM/SIGINT -> stop (close watches, save
 * state) -> exit 0; exit 1 when it cannot start, EMU_EXIT_ADDR_IN_USE (3) when the cause is a
 * --listen address in use. Signals are blocked before any thread starts and taken with sigwait() here,
 * so no server thread is ever interrupted by them.
 */
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/flags.h"
#include "base/log.h"
#include "base/log_flags.h"
#include "base/timeutil.h"
#include "base/version.h"
#include "emulator/emu_server.h"

int main(int argc, char **argv)
{
	struct emu_config cfg = { 0 };
	const char *kubeconfig;
	int history;
	struct flagset *fs = flags_new("kube-emulator", "kube-emulator [flags]");
	flags_enable_version(fs, kcsi_version);
	flags_string(fs, "listen", &cfg.listen, "127.0.0.1:0",
		     "Address to serve on, host:port; port 0 picks a free port.");
	flags_string(fs, "write-kubeconfig", &kubeconfig, "",
		     "Write a kubeconfig for this server to this path once it is listening.");
	flags_string(fs, "token", &cfg.token, "",
		     "Require 'Authorization: Bearer <token>' on every request (default: no auth).");
	flags_string(fs, "tls-cert", &cfg.tls_cert_file, "", "PEM certificate: serve HTTPS.");
	flags_string(fs, "tls-key", &cfg.tls_key_file, "", "PEM private key for --tls-cert.");
	flags_string(fs, "tls-ca", &cfg.tls_ca_file, "",
		     "PEM CA written to the kubeconfig (default: the certificate itself).");
	flags_string(fs, "state-file", &cfg.state_file, "",
		     "Keep the objects and the resourceVersion counter in this file: loaded at start, "
		     "every write logged to FILE.log as it commits (a kill -9 loses none), folded "
		     "into FILE at start and exit; FILE.lock keeps a second emulator off it.");
	flags_int(fs, "watch-history", &history, 10000,
		  "Events kept for watch resume; older resourceVersions get 410 Expired.");
	flags_duration(fs, "bookmark-interval", &cfg.bookmark_interval_ns, 60 * NSEC_PER_SEC,
		       "Interval of BOOKMARK events on watches that allow them.");
	flags_duration(fs, "max-watch-timeout", &cfg.max_watch_timeout_ns, 30 * NSEC_PER_MIN,
		       "Longest watch; a client's timeoutSeconds may shorten it.");
	struct flag_map runtime_config = { NULL, 0 };
	flags_gates(fs, "runtime-config", &runtime_config,
		    "Stop serving API versions or resources, as kube-apiserver's flag: "
		    "GROUP/VERSION=false or GROUP/VERSION/RESOURCE=false, comma-separated (e.g. "
		    "storage.k8s.io/v1/volumeattributesclasses=false: 404 and absent from discovery). "
		    "Named groups only; everything is served by default.");
	cfg.runtime_config = &runtime_config;
	int64_t idle_ns;
	int history_mib, max_conns, max_per_ip;
	flags_int(fs, "watch-history-mib", &history_mib,
		  (int)(EMU_DEFAULT_WATCH_HISTORY_BYTES >> 20),
		  "MiB of memory the watch history may hold: event texts and their decoded objects "
		  "(with --watch-history, whichever is hit first; the default keeps the emulator under "
		  "~128 MB).");
	flags_duration(fs, "idle-timeout", &idle_ns, EMU_DEFAULT_IDLE_TIMEOUT_S * NSEC_PER_SEC,
		       "Close a connection silent this long (watches are exempt); at least 1s.");
	flags_int(fs, "max-connections", &max_conns, EMU_DEFAULT_MAX_CONNECTIONS,
		  "Connections served at once; more are refused until one closes.");
	flags_int(fs, "max-connections-per-ip", &max_per_ip, EMU_DEFAULT_MAX_CONNECTIONS_PER_IP,
		  "Connections from one client address at once (0: no limit).");
	log_register_flags(fs);
	flags_parse_or_exit(fs, argc, argv);
	char err[1024];
	if (log_apply_flags(err, sizeof(err)) < 0) {
		fprintf(stderr, "kube-emulator: %s\n", err);
		goto usage;
	}
	if (history < 1) {
		fprintf(stderr, "kube-emulator: --watch-history must be at least 1\n");
		goto usage;
	}
	cfg.watch_history = (size_t)history;
	if (history_mib < 1 || idle_ns < NSEC_PER_SEC || max_conns < 1 || max_per_ip < 0) {
		fprintf(stderr, "kube-emulator: --watch-history-mib and --max-connections must be at "
			"least 1, --idle-timeout at least 1s, --max-connections-per-ip at least 0\n");
		goto usage;
	}
	cfg.watch_history_bytes = (size_t)history_mib << 20;
	cfg.idle_timeout_s = (unsigned)(idle_ns / NSEC_PER_SEC);
	cfg.max_connections = (unsigned)max_conns;
	cfg.max_connections_per_ip = (unsigned)max_per_ip;

	/* A fixed threshold: blocks of 128 KiB and more (large objects, their texts) are mapped
	 * and unmapped on their own, so a history that drops them gives the memory back. glibc's
	 * moving threshold put them in the heap, where freed ones kept RSS ~50 % above the
	 * history's limit (docs/kube-emulator.md, "Memory"). */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	bool addr_in_use = false;
	struct emu_server *srv = emu_server_start(&cfg, &addr_in_use, err, sizeof(err));
	if (!srv) {
		KLOG_E("Cannot start: %s", err);
		flags_free(fs);
		return addr_in_use ? EMU_EXIT_ADDR_IN_USE : 1;
	}
	if (*kubeconfig && emu_server_write_kubeconfig(srv, kubeconfig, err, sizeof(err)) < 0) {
		KLOG_E("Cannot write kubeconfig: %s", err);
		emu_server_stop(srv, err, sizeof(err));
		flags_free(fs);
		return 1;
	}
	int sig = 0;
	sigwait(&set, &sig);
	KLOG_I("Received %s, shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
	int rc = emu_server_stop(srv, err, sizeof(err));
	if (rc < 0)
		KLOG_E("Cannot save state: %s", err);
	if (rc == 1 || rc == -2) { /* busy connection threads were left behind: do not wait */
		fflush(stderr);
		_exit(rc == 1 ? 0 : 1);
	}
	flags_free(fs);
	return rc < 0 ? 1 : 0;
usage: /* a bad flag value: said on stderr, exit 2 as upstream's flag package */
	flags_free(fs);
	return 2;
}
