/*
 * base/lockfile: the lock that makes a folder one process's (kcsi up --dir, a node's part of
 * the loop driver's pool, kcsi-node --root-dir). A second taker is refused at once and told the
 * holder's PID; the holder's end (close, exit, kill -9) frees it; the file stays; children do
 * not inherit it; a missing folder is an error, not a lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/lockfile.h"
#include "check.h"

static char dir[64], path[128];

static void test_second_taker_refused(void)
{
	pid_t holder = -1;
	int fd = lockfile_take(path, &holder);
	CHECK(fd >= 0);
	CHECK_INT(holder, 0);
	CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	char buf[32] = "";
	FILE *f = fopen(path, "r");
	CHECK(f && fgets(buf, sizeof(buf), f));
	if (f)
		fclose(f);
	CHECK_INT(atoi(buf), getpid());
	/* another open file description, as another process has: refused, the holder named */
	CHECK_INT(lockfile_take(path, &holder), LOCKFILE_BUSY);
	CHECK_INT(holder, getpid());
	close(fd);
	fd = lockfile_take(path, &holder);
	CHECK(fd >= 0);
	close(fd);
}

/* A child takes the lock and is killed with SIGKILL: the lock is free, the file still there. */
static void test_holder_killed(void)
{
	int ready[2];
	CHECK_INT(pipe(ready), 0);
	pid_t child = fork();
	if (child == 0) {
		pid_t h;
		int fd = lockfile_take(path, &h);
		char c = fd >= 0 ? 'y' : 'n';
		if (write(ready[1], &c, 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	char c = 0;
	CHECK_INT(read(ready[0], &c, 1), 1);
	CHECK_INT(c, 'y');
	pid_t holder = 0;
	CHECK_INT(lockfile_take(path, &holder), LOCKFILE_BUSY);
	CHECK_INT(holder, child);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	int fd = lockfile_take(path, &holder);
	CHECK(fd >= 0);
	CHECK_INT(holder, 0);
	close(fd);
	close(ready[0]);
	close(ready[1]);
}

static void test_missing_folder(void)
{
	char missing[160];
	snprintf(missing, sizeof(missing), "%s/none/x.lock", dir);
	pid_t holder = -1;
	errno = 0;
	CHECK_INT(lockfile_take(missing, &holder), -1);
	CHECK_INT(errno, ENOENT);
	CHECK_INT(holder, 0);
}

/* A symbolic link in place of the file is refused, its target left alone. */
static void test_link_refused(void)
{
	char target[160], link[160];
	snprintf(target, sizeof(target), "%s/target", dir);
	snprintf(link, sizeof(link), "%s/link.lock", dir);
	FILE *f = fopen(target, "w");
	CHECK(f != NULL);
	if (f) {
		fputs("keep\n", f);
		fclose(f);
	}
	CHECK_INT(symlink(target, link), 0);
	pid_t holder;
	CHECK_INT(lockfile_take(link, &holder), -1);
	struct stat st;
	CHECK(stat(target, &st) == 0 && st.st_size == 5);
	unlink(link);
	unlink(target);
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/kcsi-lockfile-XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/owner.lock", dir);
	RUN(test_second_taker_refused);
	RUN(test_holder_killed);
	RUN(test_missing_folder);
	RUN(test_link_refused);
	unlink(path);
	rmdir(dir);
	return CHECK_DONE();
}
