/*
 * What `kcsi up` checks before it starts anything (up/precheck.h): mistakes a user makes on the
 * command line are named at once, instead of surfacing as a component that crashes five times.
 */
#include "up/precheck.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* --listen HOST:PORT: a local address this process may bind now (the port free, or 0). */
static int check_listen(const char *listen)
{
	const char *colon = strrchr(listen, ':');
	if (!colon || colon == listen || !colon[1]) {
		fprintf(stderr, "kcsi up: --listen %s: want HOST:PORT, e.g. 127.0.0.1:0 or "
				"0.0.0.0:6443\n", listen);
		return -1;
	}
	char host[256];
	size_t hl = (size_t)(colon - listen);
	if (listen[0] == '[' && hl >= 2 && listen[hl - 1] == ']') /* [::1]:6443 */
		snprintf(host, sizeof(host), "%.*s", (int)(hl - 2), listen + 1);
	else
		snprintf(host, sizeof(host), "%.*s", (int)hl, listen);
	char *end;
	long port = strtol(colon + 1, &end, 10);
	if (*end || port < 0 || port > 65535) {
		fprintf(stderr, "kcsi up: --listen %s: the port must be a number from 0 to 65535\n",
			listen);
		return -1;
	}
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV | AI_PASSIVE };
	struct addrinfo *res = NULL;
	int rc = getaddrinfo(host, colon + 1, &hints, &res);
	if (rc) {
		fprintf(stderr, "kcsi up: --listen %s: %s: %s\n", listen, host, gai_strerror(rc));
		return -1;
	}
	int err = 0;
	for (struct addrinfo *a = res; a; a = a->ai_next) {
		int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
		if (fd < 0) {
			err = errno;
			continue;
		}
		int one = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		rc = bind(fd, a->ai_addr, a->ai_addrlen);
		err = rc ? errno : 0;
		close(fd);
		if (!rc)
			break;
	}
	freeaddrinfo(res);
	if (err) {
		fprintf(stderr, "kcsi up: --listen %s: cannot listen there: %s%s\n", listen,
			strerror(err), err == EADDRINUSE ? " (another process has the port; "
			"127.0.0.1:0 picks a free one)" : err == EADDRNOTAVAIL ? " (not an address "
			"of this machine)" : "");
		return -1;
	}
	return 0;
}

/*
 * --driver-cmd: its first word found, when it is a plain word (a command line with shell syntax
 * up front, a variable or a subshell, is left to /bin/sh).
 */
static int check_driver_cmd(const char *cmd)
{
	while (*cmd == ' ' || *cmd == '\t')
		cmd++;
	size_t n = strcspn(cmd, " \t\n");
	if (!n) {
		fprintf(stderr, "kcsi up: --driver-cmd is empty\n");
		return -1;
	}
	char word[PATH_MAX];
	if (n >= sizeof(word))
		return 0;
	memcpy(word, cmd, n);
	word[n] = '\0';
	if (strpbrk(word, "$`\"'\\=(){}<>|;&*?[~"))
		return 0;
	if (strchr(word, '/')) {
		if (access(word, X_OK) == 0)
			return 0;
		fprintf(stderr, "kcsi up: --driver-cmd: %s: %s\n", word,
			errno == ENOENT ? "no such file" : strerror(errno));
		return -1;
	}
	const char *path = getenv("PATH");
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (const char *p = path; *p;) {
		size_t l = strcspn(p, ":");
		char full[PATH_MAX + 8];
		snprintf(full, sizeof(full), "%.*s/%s", (int)(l ? l : 1), l ? p : ".", word);
		struct stat st;
		if (stat(full, &st) == 0 && S_ISREG(st.st_mode) && access(full, X_OK) == 0)
			return 0;
		p += l + (p[l] ? 1 : 0);
	}
	fprintf(stderr, "kcsi up: --driver-cmd: %s: command not found in PATH\n", word);
	return -1;
}

int up_precheck(const char *dir, const char *listen, const char *driver_cmd)
{
	if (!driver_cmd && geteuid() != 0) {
		fprintf(stderr, "kcsi up: the loop driver makes loop devices, file systems and mounts, "
				"which need root: run kcsi up as root (or give --driver-cmd a driver "
				"that needs none)\n");
		return -1;
	}
	if (dir && *dir) {
		struct stat st;
		if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode)) {
			fprintf(stderr, "kcsi up: --dir %s is not a directory\n", dir);
			return -1;
		}
	}
	if (listen && check_listen(listen))
		return -1;
	if (driver_cmd && check_driver_cmd(driver_cmd))
		return -1;
	return 0;
}

void up_warn_leftovers(const char *dir)
{
	char pool[PATH_MAX + 8];
	snprintf(pool, sizeof(pool), "%s/pool", dir);
	DIR *d = opendir(pool);
	if (!d)
		return;
	int n = 0;
	long long bytes = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		struct stat st;
		char p[PATH_MAX + 300];
		snprintf(p, sizeof(p), "%s/%s", pool, e->d_name);
		if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) {
			n++;
			bytes += (long long)st.st_blocks * 512;
		}
	}
	closedir(d);
	if (n)
		fprintf(stderr, "kcsi up: warning: %d file(s) left in %s by an earlier run (%.1f MiB "
				"on disk); this run's cluster starts empty, so no PersistentVolume refers "
				"to them: remove them, or use another --dir\n", n, pool, (double)bytes / (1 << 20));
}
