/* bench_proc: see bench_proc.h. */
#include "bench_proc.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
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
