/*
 * pause: the process that holds a pod's namespaces (the CRI sandbox's first container).
 *
 * It is PID 1 of the pod's PID namespace when the pod shares one, so besides sleeping it must
 * reap: every child re-parented to it is waited for as soon as SIGCHLD arrives, or zombies would
 * pile up in the pod. SIGTERM and SIGINT end it with status 0 (the runtime's stop); every other
 * signal keeps its default. Nothing is read from outside but argv: `--version` (or `-v`) prints
 * the version, any other argument is refused with status 2. Built static (no loader, no libc in
 * the image), so the image holds this one file.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef KCSI_VERSION
#define KCSI_VERSION "unknown"
#endif

static void on_stop(int sig)
{
	(void)sig;
	_exit(0);
}

static void on_child(int sig)
{
	int saved = errno;

	(void)sig;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	errno = saved;
}

int main(int argc, char **argv)
{
	struct sigaction sa;

	if (argc == 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-v") == 0)) {
		printf("pause %s\n", KCSI_VERSION);
		return 0;
	}
	if (argc > 1) {
		fprintf(stderr, "pause: unknown argument '%s' (only --version)\n", argv[1]);
		return 2;
	}
	if (getpid() != 1)
		fprintf(stderr, "pause: not PID 1 of its namespace; children elsewhere are not reaped here\n");

	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_stop;
	if (sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGINT, &sa, NULL) != 0) {
		perror("pause: sigaction");
		return 1;
	}
	sa.sa_handler = on_child;
	sa.sa_flags = SA_NOCLDSTOP | SA_RESTART;
	if (sigaction(SIGCHLD, &sa, NULL) != 0) {
		perror("pause: sigaction");
		return 1;
	}
	for (;;)
		pause();
}
