/* bench_util: see bench_util.h. */
#include "bench_util.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/timeutil.h"

pid_t bench_spawn(char *const argv[], const char *log)
{
	pid_t pid = fork();

	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		dup2(fd, 1);
		dup2(fd, 2);
		setpgid(0, 0);
		/* A benchmark that dies (bench_die, a signal) takes its processes with it. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() == 1)
			_exit(127);
		execv(argv[0], argv);
		_exit(127);
	}
	return pid;
}

void bench_stop(pid_t pid)
{
	if (pid > 0) {
		kill(pid, SIGTERM);
		waitpid(pid, NULL, 0);
	}
}

bool bench_wait_file(const char *path, bool sock, int64_t timeout_ns)
{
	int64_t end = mono_now_ns() + timeout_ns;
	struct stat st;

	while (mono_now_ns() < end) {
		if (stat(path, &st) == 0 && (sock ? S_ISSOCK(st.st_mode) : st.st_size > 0))
			return true;
		sleep_ns(20 * NSEC_PER_MSEC);
	}
	return false;
}

long bench_status_kb(pid_t pid, const char *key)
{
	char path[64], line[256], fmt[64];
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	snprintf(fmt, sizeof(fmt), "%s: %%ld", key);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, fmt, &kb) == 1)
			break;
	fclose(f);
	return kb;
}

double bench_cpu_s(pid_t pid)
{
	char path[64], buf[1024];
	unsigned long long ut = 0, st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	char *p = strrchr(buf, ')');
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

void bench_die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "%s: ", program_invocation_short_name);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

struct range_job {
	void (*fn)(int i);
	atomic_int next;
	int n;
};

static void *range_worker(void *arg)
{
	struct range_job *j = arg;
	int i;

	while ((i = atomic_fetch_add(&j->next, 1)) < j->n)
		j->fn(i);
	return NULL;
}

void bench_parallel(int n, void (*fn)(int i), int threads)
{
	struct range_job j = { fn, 0, n };
	pthread_t t[64];

	if (threads > 64)
		threads = 64;
	for (int k = 0; k < threads; k++)
		if (pthread_create(&t[k], NULL, range_worker, &j) != 0)
			bench_die("cannot start a load thread");
	for (int k = 0; k < threads; k++)
		pthread_join(t[k], NULL);
}

void bench_create_or_die(struct kube_client *c, const struct kube_resource *r, const char *ns,
			 json_t *obj)
{
	struct kube_err e;
	json_t *res = NULL;

	for (int attempt = 0; attempt < 5 && !res; attempt++) {
		res = kube_create(c, r, ns, obj, &e);
		if (!res && kube_err_is_already_exists(&e))
			break;
	}
	if (!res && !kube_err_is_already_exists(&e))
		bench_die("create failed: %s", e.message);
	json_decref(res);
	json_decref(obj);
}
