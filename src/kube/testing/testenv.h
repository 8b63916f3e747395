/*
 * kube testenv: starts a real kube-emulator process for integration tests and benchmarks.
 *
 * kube_testenv_start() runs `kube-emulator --listen 127.0.0.1:0 --write-kubeconfig <tmp>/kc`
 * plus extra arguments, waits for the kubeconfig, and builds a config and an unthrottled client
 * for it. The emulator dies with the test process (PR_SET_PDEATHSIG) even if the test crashes;
 * kube_testenv_stop() terminates it and removes the temp folder.
 *
 * Not part of kcsi_kube: linked only into tests and benchmarks (library kcsi_kube_testenv).
 */
#ifndef KCSI_KUBE_TESTENV_H
#define KCSI_KUBE_TESTENV_H

#include <stdint.h>
#include <sys/types.h>

#include "kube/client.h"
#include "kube/config.h"

#define KUBE_TESTENV_SKIP 77

struct kube_testenv {
	pid_t pid;
	char dir[256];        /* temp folder (kubeconfig, emulator log) */
	char kubeconfig[320];
	struct kube_config *cfg;
	struct kube_client *client;
};

/*
 * Starts the emulator binary bin with extra arguments (NULL-terminated, may be NULL).
 * Returns 0; KUBE_TESTENV_SKIP (with a SKIP line on stderr) when bin does not exist; -1 on error.
 */
int kube_testenv_start(struct kube_testenv *env, const char *bin, const char *const *extra);
void kube_testenv_stop(struct kube_testenv *env);
/*
 * Restarts the emulator on the address it listens on, the config and client staying valid:
 * signal sig to it (SIGKILL: a crash, its store lost; SIGTERM: an orderly stop, which saves a
 * --state-file), nothing listening for down_ns (clients meet "connection refused"), then bin
 * again with extra (NULL-terminated; the first start's are not repeated). Returns 0 or -1.
 */
int kube_testenv_restart(struct kube_testenv *env, const char *bin, const char *const *extra,
			 int sig, int64_t down_ns);
/* POSTs a fault-injection request (JSON text) to /emulator/faults; returns 0 or -1. */
int kube_testenv_faults(struct kube_testenv *env, const char *json);
/* Makes a temp folder path under env->dir into buf. */
void kube_testenv_path(struct kube_testenv *env, const char *name, char *buf, size_t len);
/* Current RSS of this process in bytes. */
long kube_testenv_rss(void);

#endif
