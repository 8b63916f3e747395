/*
 * exec: posix_spawn + a pipe read to EOF + waitpid. The output is read before waiting so a chatty
 * tool never blocks on a full pipe.
 */
#include "loopplugin/exec.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/strbuf.h"

extern char **environ;

static const char *const lp_sysdirs[] = { "/usr/sbin", "/sbin", "/usr/bin", "/bin" };

static bool find_program(const char *name, char *path, size_t len)
{
	for (size_t i = 0; i < sizeof(lp_sysdirs) / sizeof(lp_sysdirs[0]); i++) {
		snprintf(path, len, "%s/%s", lp_sysdirs[i], name);
		if (access(path, X_OK) == 0)
			return true;
	}
	return false;
}

bool lp_have_program(const char *name)
{
	char path[256];
	return find_program(name, path, sizeof(path));
}

static void read_all(int fd, struct strbuf *out)
{
	char buf[4096];
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (out && out->len < 65536)
			strbuf_add(out, buf, (size_t)n);
	}
}

int lp_exec(const char *const argv[], struct strbuf *out)
{
	char path[256];
	if (!find_program(argv[0], path, sizeof(path))) {
		if (out)
			strbuf_addf(out, "%s: not installed", argv[0]);
		return -1;
	}
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		if (out)
			strbuf_addf(out, "pipe: %s", strerror(errno));
		return -1;
	}
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 2);
	pid_t pid;
	int rc = posix_spawn(&pid, path, &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(pfd[1]);
	if (rc != 0) {
		close(pfd[0]);
		if (out)
			strbuf_addf(out, "%s: %s", path, strerror(rc));
		return -1;
	}
	read_all(pfd[0], out);
	close(pfd[0]);
	int status;
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			if (out)
				strbuf_addf(out, "waitpid: %s", strerror(errno));
			return -1;
		}
	}
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (out)
		strbuf_addf(out, "%s killed by signal %d", argv[0], WTERMSIG(status));
	return -1;
}
