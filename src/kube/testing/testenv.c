/*
 * The emulator is started with fork+exec so the test owns its pid and can SIGKILL it; its log
 * goes to <dir>/emulator.log, which stays for inspection only while the test runs.
 */
#include "kube/testing/testenv.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/timeutil.h"

/* Runs bin listening on listen, its log added to <dir>/emulator.log; waits for its kubeconfig. */
static int spawn(struct kube_testenv *env, const char *bin, const char *listen,
		 const char *const *extra)
{
	const char *argv[64];
	int n = 0;
	argv[n++] = bin;
	argv[n++] = "--listen";
	argv[n++] = listen;
	argv[n++] = "--write-kubeconfig";
	argv[n++] = env->kubeconfig;
	for (int i = 0; extra && extra[i] && n < 62; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	char log[320];
	snprintf(log, sizeof(log), "%s/emulator.log", env->dir);
	unlink(env->kubeconfig);
	pid_t parent = getpid();
	env->pid = fork();
	if (env->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execv(bin, (char **)argv);
		_exit(127);
	}
	if (env->pid < 0)
		return -1;
	int64_t deadline = mono_now_ns() + 20 * NSEC_PER_SEC;
	while (access(env->kubeconfig, R_OK) != 0) {
		int st;
		if (waitpid(env->pid, &st, WNOHANG) == env->pid || mono_now_ns() > deadline) {
			fprintf(stderr, "kube-emulator did not start; its log is %s\n", log);
			env->pid = 0;
			return -1;
		}
		sleep_ns(10 * NSEC_PER_MSEC);
	}
	return 0;
}

int kube_testenv_start(struct kube_testenv *env, const char *bin, const char *const *extra)
{
	memset(env, 0, sizeof(*env));
	if (access(bin, X_OK) != 0) {
		fprintf(stderr, "SKIP: kube-emulator not found at %s (build the kube-emulator target)\n",
			bin);
		return KUBE_TESTENV_SKIP;
	}
	snprintf(env->dir, sizeof(env->dir), "/tmp/kcsi-kube-test-XXXXXX");
	if (!mkdtemp(env->dir))
		return -1;
	snprintf(env->kubeconfig, sizeof(env->kubeconfig), "%s/kc", env->dir);
	if (spawn(env, bin, "127.0.0.1:0", extra) != 0)
		return -1;
	char err[512];
	env->cfg = kube_config_load(env->kubeconfig, NULL, NULL, err, sizeof(err));
	if (!env->cfg) {
		fprintf(stderr, "testenv: %s\n", err);
		return -1;
	}
	struct kube_client_opts o = { .component = "kcsi-test", .qps = -1 };
	env->client = kube_client_new(env->cfg, &o, err, sizeof(err));
	if (!env->client) {
		fprintf(stderr, "testenv: %s\n", err);
		return -1;
	}
	return 0;
}

/* Sends sig and waits for the emulator to end (SIGKILL after 5 s). */
static void end_emulator(struct kube_testenv *env, int sig)
{
	if (env->pid <= 0)
		return;
	kill(env->pid, sig);
	int st;
	int64_t deadline = mono_now_ns() + 5 * NSEC_PER_SEC;
	while (waitpid(env->pid, &st, WNOHANG) == 0) {
		if (mono_now_ns() > deadline) {
			kill(env->pid, SIGKILL);
			waitpid(env->pid, &st, 0);
			break;
		}
		sleep_ns(10 * NSEC_PER_MSEC);
	}
	env->pid = 0;
}

int kube_testenv_restart(struct kube_testenv *env, const char *bin, const char *const *extra,
			 int sig, int64_t down_ns)
{
	const char *url = env->cfg ? env->cfg->server : NULL;
	const char *hostport = url ? strstr(url, "://") : NULL;
	if (!hostport) {
		fprintf(stderr, "testenv: no server address to restart on\n");
		return -1;
	}
	char listen[128];
	snprintf(listen, sizeof(listen), "%s", hostport + 3);
	end_emulator(env, sig);
	sleep_ns(down_ns);
	return spawn(env, bin, listen, extra);
}

void kube_testenv_stop(struct kube_testenv *env)
{
	kube_client_free(env->client);
	env->client = NULL;
	kube_config_free(env->cfg);
	env->cfg = NULL;
	end_emulator(env, SIGTERM);
	if (env->dir[0]) {
		char cmd[320];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", env->dir);
		if (system(cmd) != 0)
			fprintf(stderr, "testenv: could not remove %s\n", env->dir);
		env->dir[0] = 0;
	}
}

int kube_testenv_faults(struct kube_testenv *env, const char *json)
{
	struct kube_request rq = { .method = "POST", .path = "/emulator/faults",
				   .content_type = "application/json", .body = json,
				   .body_len = strlen(json) };
	struct strbuf out = STRBUF_INIT;
	struct kube_err e;
	int rc = kube_do(env->client, &rq, &out, &e) >= 0 ? 0 : -1;
	if (rc)
		fprintf(stderr, "testenv: fault request failed: %s\n", e.message);
	strbuf_release(&out);
	return rc;
}

void kube_testenv_path(struct kube_testenv *env, const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", env->dir, name);
}

long kube_testenv_rss(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long pages = 0, rss = 0;
	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
			rss = 0;
		fclose(f);
	}
	return rss * sysconf(_SC_PAGESIZE);
}
