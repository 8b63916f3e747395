/*
 * lockfile: an flock() held for the process's life, with the holder's PID in the file (the
 * contract: lockfile.h). The PID is written after the lock is taken, so a second taker that
 * comes in between finds the file empty; it reads again for a moment before it says "0".
 */
#include "base/lockfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

/* The PID written in the file, or 0 when there is none (yet). */
static pid_t read_holder(int fd)
{
	for (int tries = 0; tries < 20; tries++) {
		char buf[32];
		ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
		if (n > 0) {
			buf[n] = '\0';
			long pid = strtol(buf, NULL, 10);
			if (pid > 0)
				return (pid_t)pid;
		}
		struct timespec ts = { 0, 5 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	return 0;
}

int lockfile_take(const char *path, pid_t *holder)
{
	*holder = 0;
	/* O_NOFOLLOW: a link planted in a shared folder must not make root truncate its target */
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return -1;
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		int err = errno;
		if (err == EWOULDBLOCK)
			*holder = read_holder(fd);
		close(fd);
		errno = err;
		return err == EWOULDBLOCK ? LOCKFILE_BUSY : -1;
	}
	char buf[32];
	int len = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
	if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)len, 0) != len) {
		int err = errno;
		close(fd);
		errno = err;
		return -1;
	}
	return fd;
}
