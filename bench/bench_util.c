/* bench_util: see bench_util.h. */
#include "bench_util.h"

#include <assert.h>
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
#include <sys/resource.h>
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

/* utime, stime, cutime, cstime of /proc/<pid>/stat in seconds; false when unreadable. */
static bool proc_times(pid_t pid, double t[4])
{
	char path[64], buf[1024];
	long long v[4];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return false;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	char *p = strrchr(buf, ')');
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lld %lld %lld %lld",
			 &v[0], &v[1], &v[2], &v[3]) != 4)
		return false;
	for (int i = 0; i < 4; i++)
		t[i] = (double)v[i] / (double)sysconf(_SC_CLK_TCK);
	return true;
}

double bench_cpu_s(pid_t pid)
{
	double t[4];

	return proc_times(pid, t) ? t[0] + t[1] : -1;
}

double bench_children_cpu_s(pid_t pid)
{
	double t[4];

	return proc_times(pid, t) ? t[2] + t[3] : -1;
}

/* Busy seconds of all cores from the first line of /proc/stat (user nice system idle iowait irq
 * softirq steal ...): user + nice + system + irq + softirq. */
static double machine_busy_s(void)
{
	unsigned long long u = 0, ni = 0, sy = 0, id = 0, io = 0, irq = 0, sirq = 0;
	FILE *f = fopen("/proc/stat", "r");

	if (!f)
		return 0;
	if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu", &u, &ni, &sy, &id, &io, &irq,
		   &sirq) != 7)
		u = ni = sy = irq = sirq = 0;
	fclose(f);
	return (double)(u + ni + sy + irq + sirq) / (double)sysconf(_SC_CLK_TCK);
}

static double self_cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

void bench_cpu_add(struct bench_cpu *b, const char *name, pid_t pid)
{
	assert(b->n < BENCH_CPU_MAX);
	b->name[b->n] = name;
	b->pid[b->n++] = pid;
}

void bench_cpu_add_children(struct bench_cpu *b, const char *name, pid_t pid)
{
	bench_cpu_add(b, name, pid);
	b->children[b->n - 1] = true;
}

static double entry_cpu_s(const struct bench_cpu *b, int i)
{
	return b->children[i] ? bench_children_cpu_s(b->pid[i]) : bench_cpu_s(b->pid[i]);
}

void bench_cpu_start(struct bench_cpu *b)
{
	for (int i = 0; i < b->n; i++)
		b->at0[i] = entry_cpu_s(b, i);
	b->self0 = self_cpu_s();
	b->busy0 = machine_busy_s();
	b->t0 = mono_now_ns();
}

void bench_cpu_stop(struct bench_cpu *b)
{
	double accounted;

	b->wall_s = (double)(mono_now_ns() - b->t0) / 1e9;
	b->busy_s = machine_busy_s() - b->busy0;
	b->self_s = self_cpu_s() - b->self0;
	accounted = b->self_s;
	for (int i = 0; i < b->n; i++) {
		double now = entry_cpu_s(b, i);
		b->s[i] = now >= 0 && b->at0[i] >= 0 ? now - b->at0[i] : 0;
		accounted += b->s[i];
	}
	/* /proc/stat and the per-process times tick separately: a small negative rest is noise. */
	b->other_s = b->busy_s > accounted ? b->busy_s - accounted : 0;
	b->cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
}

static double share(const struct bench_cpu *b, double s)
{
	return b->busy_s > 0 ? 100.0 * s / b->busy_s : 0;
}

void bench_cpu_add_measured(struct bench_cpu *b, const char *name, double s)
{
	if (b->n >= BENCH_CPU_MAX)
		bench_die("too many CPU entries");
	b->name[b->n] = name;
	b->pid[b->n] = -1;
	b->s[b->n++] = s;
	b->other_s -= s;
	if (b->other_s < 0)
		b->other_s = 0;
}

void bench_cpu_print(const struct bench_cpu *b, const char *what)
{
	printf("CPU during %s (%.2f s wall):", what, b->wall_s);
	for (int i = 0; i < b->n; i++)
		printf(" %s %.2f s (%.0f%%),", b->name[i], b->s[i], share(b, b->s[i]));
	printf(" load generator %.2f s (%.0f%%), other %.2f s (%.0f%%); machine busy %.2f s of "
	       "%.2f s on %d cores (%.0f%%)\n", b->self_s, share(b, b->self_s), b->other_s,
	       share(b, b->other_s), b->busy_s, b->wall_s * b->cores, b->cores,
	       b->wall_s > 0 ? 100.0 * b->busy_s / (b->wall_s * b->cores) : 0);
}

void bench_cpu_kv(const struct bench_cpu *b, const char *const keys[], char *out, size_t len)
{
	size_t at = strlen(out);

	for (int i = 0; i < b->n && at < len; i++)
		at += (size_t)snprintf(out + at, len - at, " cpu_%s_s=%.2f", keys[i], b->s[i]);
	if (at < len)
		snprintf(out + at, len - at, " cpu_load_s=%.2f cpu_other_s=%.2f cpu_busy_s=%.2f",
			 b->self_s, b->other_s, b->busy_s);
}

static void *mem_sampler(void *arg)
{
	struct bench_mem *m = arg;

	while (!atomic_load(&m->stop)) {
		long rss = bench_status_kb(m->pid, "VmRSS"), anon = bench_status_kb(m->pid, "RssAnon");
		if (rss > atomic_load(&m->rss))
			atomic_store(&m->rss, rss);
		if (anon > atomic_load(&m->anon))
			atomic_store(&m->anon, anon);
		sleep_ns(20 * NSEC_PER_MSEC);
	}
	return NULL;
}

void bench_mem_start(struct bench_mem *m, pid_t pid)
{
	m->pid = pid;
	atomic_store(&m->rss, 0);
	atomic_store(&m->anon, 0);
	atomic_store(&m->stop, false);
	if (pthread_create(&m->thread, NULL, mem_sampler, m) != 0)
		bench_die("cannot start the memory sampler");
}

void bench_mem_stop(struct bench_mem *m)
{
	atomic_store(&m->stop, true);
	pthread_join(m->thread, NULL);
	m->peak_rss_kb = atomic_load(&m->rss);
	m->peak_anon_kb = atomic_load(&m->anon);
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

long long bench_current_rv(struct kube_client *c)
{
	struct kube_list_opts lo = { .limit = 1 };
	struct kube_err e;
	json_t *l = kube_list(c, &KUBE_RES_STORAGECLASSES, NULL, &lo, &e);
	if (!l)
		bench_die("list: %s", e.message);
	const char *rv = json_string_value(json_object_get(json_object_get(l, "metadata"),
							   "resourceVersion"));
	long long v = atoll(rv ? rv : "0");
	json_decref(l);
	return v;
}

int bench_cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

bool bench_log_has(const char *path, const char *needle)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	bool found = false;

	while (f && !found && fgets(line, sizeof(line), f))
		found = strstr(line, needle) != NULL;
	if (f)
		fclose(f);
	return found;
}
