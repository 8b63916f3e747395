/*
 * Child processes of `kcsi up`. fork + execv, nothing else: the child resets the signal mask and
 * dispositions the supervisor changed, moves to its own process group (a Ctrl-C at the terminal
 * reaches only the supervisor, which then stops the children in order) and asks the kernel for
 * SIGTERM when the supervisor dies. Exits are collected with waitpid(WNOHANG) from the main loop.
 */
#include "up/proc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/timeutil.h"
#include "base/xalloc.h"

#define BACKOFF_START_NS (1 * NSEC_PER_SEC)
#define BACKOFF_MAX_NS (30 * NSEC_PER_SEC)
#define TAIL_LINES 15

struct up_proc *up_procs_add(struct up_procs *ps, const char *name, const char *log_path,
			     char *const argv[])
{
	if (ps->n >= UP_MAX_PROCS)
		return NULL;
	struct up_proc *p = &ps->p[ps->n++];
	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "%s", name);
	snprintf(p->log_path, sizeof(p->log_path), "%s", log_path);
	int argc = 0;
	while (argv[argc])
		argc++;
	p->argv = xcalloc((size_t)argc + 1, sizeof(char *));
	for (int i = 0; i < argc; i++)
		p->argv[i] = xstrdup(argv[i]);
	return p;
}

int up_proc_start(struct up_proc *p, char *err, size_t errlen)
{
	int fd = open(p->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0) {
		snprintf(err, errlen, "%s: open %s: %s", p->name, p->log_path, strerror(errno));
		return -1;
	}
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "%s: fork: %s", p->name, strerror(errno));
		close(fd);
		return -1;
	}
	if (pid == 0) {
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		/* A shell ignores SIGINT in its background jobs; exec keeps an ignored signal ignored. */
		signal(SIGPIPE, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent) /* the supervisor died between fork and prctl */
			_exit(1);
		int null = open("/dev/null", O_RDONLY);
		if (null >= 0)
			dup2(null, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (p->env[0])
			putenv(p->env); /* the child's copy of p; it lives until execv */
		execv(p->argv[0], p->argv);
		dprintf(2, "kcsi up: exec %s: %s\n", p->argv[0], strerror(errno));
		_exit(127);
	}
	close(fd);
	p->pid = pid;
	p->start_ns = mono_now_ns();
	p->restart_at = 0;
	return 0;
}

void up_print_tail(const char *path, int lines)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	/* Read the last 8 KiB and print its last `lines` lines. */
	char buf[8192];
	if (fseek(f, 0, SEEK_END) == 0) {
		long size = ftell(f);
		fseek(f, size > (long)sizeof(buf) - 1 ? size - (long)sizeof(buf) + 1 : 0, SEEK_SET);
	}
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	while (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	char *start = buf + n;
	for (int seen = 0; start > buf; start--)
		if (start[-1] == '\n' && ++seen == lines)
			break;
	for (char *line = start, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		fprintf(stderr, "    | %s\n", line);
	}
}

static void describe_exit(int status, char *buf, size_t len)
{
	if (WIFEXITED(status))
		snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "was killed by signal %d (%s)", WTERMSIG(status),
			 strsignal(WTERMSIG(status)));
	else
		snprintf(buf, len, "stopped (status 0x%x)", status);
}

/* Gives p up after its last failure: says which, why and how to see more. */
static void give_up(struct up_proc *p, const char *how)
{
	p->given_up = true;
	p->restart_at = 0;
	fprintf(stderr, "kcsi up: giving up on %s: it failed %d times in a row (last: %s)%s. "
			"Last lines of %s:\n", p->name, p->restarts, how,
		p->core ? "; it is a core component, so the stack stops"
			: "; the rest of the stack keeps running without it",
		p->log_path);
	up_print_tail(p->log_path, TAIL_LINES);
}

int up_procs_reap(struct up_procs *ps)
{
	int exited = 0;
	bool core_lost = false;
	int64_t now = mono_now_ns();
	for (int i = 0; i < ps->n; i++) {
		struct up_proc *p = &ps->p[i];
		if (p->pid > 0) {
			int st;
			pid_t r = waitpid(p->pid, &st, WNOHANG);
			if (r != p->pid)
				continue;
			exited++;
			p->pid = 0;
			p->last_status = st;
			char how[96];
			describe_exit(st, how, sizeof(how));
			if (p->fatal_exit && WIFEXITED(st) && WEXITSTATUS(st) == p->fatal_exit) {
				p->given_up = true;
				p->restart_at = 0;
				fprintf(stderr, "kcsi up: %s %s: %s. Last lines of %s:\n", p->name,
					how, p->fatal_why, p->log_path);
				up_print_tail(p->log_path, TAIL_LINES);
				core_lost = true;
				continue;
			}
			/* A child that ran for a minute starts its back-off afresh. */
			if (now - p->start_ns > 60 * NSEC_PER_SEC)
				p->restarts = 0;
			p->restarts++;
			if (ps->limit > 0 && p->restarts >= ps->limit) {
				give_up(p, how);
				core_lost = core_lost || p->core;
				continue;
			}
			int64_t delay = BACKOFF_START_NS;
			for (int k = 1; k < p->restarts && delay < BACKOFF_MAX_NS; k++)
				delay *= 2;
			if (delay > BACKOFF_MAX_NS)
				delay = BACKOFF_MAX_NS;
			p->restart_at = now + delay;
			fprintf(stderr, "kcsi up: %s %s; restarting in %llds (failure %d%s). Last lines of %s:\n",
				p->name, how, (long long)(delay / NSEC_PER_SEC), p->restarts,
				ps->limit > 0 ? (p->restarts + 1 == ps->limit ? ", the next one is the last"
									     : "")
					      : "",
				p->log_path);
			up_print_tail(p->log_path, TAIL_LINES);
		} else if (p->restart_at && now >= p->restart_at) {
			char err[256];
			if (up_proc_start(p, err, sizeof(err)))
				fprintf(stderr, "kcsi up: %s\n", err);
		}
	}
	return core_lost ? -1 : exited;
}

static void stop_tier(struct up_procs *ps, int tier, int64_t grace_ns)
{
	for (int i = ps->n - 1; i >= 0; i--) {
		struct up_proc *p = &ps->p[i];
		if (p->tier != tier)
			continue;
		p->restart_at = 0;
		if (p->pid > 0)
			kill(p->pid, SIGTERM);
	}
	int64_t deadline = mono_now_ns() + grace_ns;
	for (;;) {
		int alive = 0;
		for (int i = 0; i < ps->n; i++) {
			struct up_proc *p = &ps->p[i];
			if (p->tier != tier || p->pid <= 0)
				continue;
			if (waitpid(p->pid, &p->last_status, WNOHANG) == p->pid)
				p->pid = 0;
			alive += p->pid > 0;
		}
		if (!alive)
			return;
		if (mono_now_ns() >= deadline)
			break;
		sleep_ns(5 * NSEC_PER_MSEC);
	}
	for (int i = 0; i < ps->n; i++) {
		struct up_proc *p = &ps->p[i];
		if (p->tier != tier || p->pid <= 0)
			continue;
		fprintf(stderr, "kcsi up: %s (pid %d) did not stop within %.1fs of SIGTERM; killing it\n",
			p->name, (int)p->pid, (double)grace_ns / 1e9);
		kill(-p->pid, SIGKILL);
		kill(p->pid, SIGKILL);
		waitpid(p->pid, &p->last_status, 0);
		p->pid = 0;
	}
}

void up_procs_stop_all(struct up_procs *ps, int64_t grace_ns)
{
	int top = 0;
	for (int i = 0; i < ps->n; i++)
		if (ps->p[i].tier > top)
			top = ps->p[i].tier;
	for (int t = top; t >= 0; t--)
		stop_tier(ps, t, grace_ns);
}

int up_proc_restart(struct up_proc *p, int64_t grace_ns, char *err, size_t errlen)
{
	if (p->pid > 0) {
		kill(p->pid, SIGTERM);
		int64_t deadline = mono_now_ns() + grace_ns;
		while (waitpid(p->pid, &p->last_status, WNOHANG) != p->pid) {
			if (mono_now_ns() >= deadline) {
				kill(-p->pid, SIGKILL);
				kill(p->pid, SIGKILL);
				waitpid(p->pid, &p->last_status, 0);
				break;
			}
			sleep_ns(5 * NSEC_PER_MSEC);
		}
		p->pid = 0;
	}
	return up_proc_start(p, err, errlen);
}

int up_proc_set_arg(struct up_proc *p, const char *flag, const char *value)
{
	for (char **a = p->argv; a && *a && a[1]; a++) {
		if (strcmp(*a, flag))
			continue;
		free(a[1]);
		a[1] = xstrdup(value);
		return 0;
	}
	return -1;
}

void up_procs_release(struct up_procs *ps)
{
	for (int i = 0; i < ps->n; i++) {
		for (char **a = ps->p[i].argv; a && *a; a++)
			free(*a);
		free(ps->p[i].argv);
		ps->p[i].argv = NULL;
	}
	ps->n = 0;
}

int up_mkdirs(const char *path)
{
	char tmp[PATH_MAX];
	snprintf(tmp, sizeof(tmp), "%s", path);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0755) && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return mkdir(tmp, 0755) && errno != EEXIST ? -1 : 0;
}

int up_free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int port = -1;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	close(fd);
	return port;
}

int up_http_status(int port, const char *path)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct timeval tv = { 0, 300000 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int code = -1;
	char req[512], resp[64];
	int n = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0 && write(fd, req, (size_t)n) == n) {
		ssize_t r = read(fd, resp, sizeof(resp) - 1);
		if (r > 12) {
			resp[r] = '\0';
			if (sscanf(resp, "HTTP/%*d.%*d %d", &code) != 1)
				code = -1;
		}
	}
	close(fd);
	return code;
}
