/*
 * up cleanup: what a run leaves under its work dir D once its processes stopped: mounts (the
 * node plugins' staging and publish targets), loop devices whose image lives in D, and, for a
 * temporary D, the tree itself. /proc/self/mountinfo and /sys/block are the truth; nothing is
 * remembered from the run, so a run killed with SIGKILL is cleaned up by the next up_cleanup_dir.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/loop.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/xalloc.h"
#include "up/up_internal.h"

/* Undoes mountinfo's octal escapes (\040 for a space) in place. */
static void unescape_mount_path(char *s)
{
	char *w = s;
	for (char *r = s; *r; r++) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
		    r[3] >= '0' && r[3] <= '7') {
			*w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
			r += 3;
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
}

static bool below(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	return strncmp(path, dir, n) == 0 && path[n] == '/';
}

static int cmp_len_desc(const void *a, const void *b)
{
	size_t la = strlen(*(char *const *)a), lb = strlen(*(char *const *)b);
	return la < lb ? 1 : la > lb ? -1 : 0;
}

static int unmount_below(const char *dir)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	if (!f)
		return 0;
	char **list = NULL, line[8192];
	size_t n = 0, cap = 0;
	while (fgets(line, sizeof(line), f)) {
		char mp[4096];
		if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) != 1)
			continue;
		unescape_mount_path(mp);
		if (!below(mp, dir))
			continue;
		if (n == cap)
			list = xrealloc(list, (cap = cap ? cap * 2 : 16) * sizeof(char *));
		list[n++] = xstrdup(mp);
	}
	fclose(f);
	if (n > 1)
		qsort(list, n, sizeof(char *), cmp_len_desc);
	int failed = 0;
	for (size_t i = 0; i < n; i++) {
		if (umount2(list[i], 0) && errno != EINVAL && errno != ENOENT &&
		    umount2(list[i], MNT_DETACH)) {
			fprintf(stderr, "kcsi up: cannot unmount %s: %s\n", list[i], strerror(errno));
			failed++;
		}
		free(list[i]);
	}
	free(list);
	return failed;
}

enum loops_do { LOOPS_COUNT, LOOPS_DETACH, LOOPS_NAME };

/*
 * Counts, detaches or names (on stderr) the loop devices whose backing file is below dir.
 * Returns how many there are, or how many could not be detached.
 */
static int loops_below(const char *dir, enum loops_do what)
{
	DIR *d = opendir("/sys/block");
	if (!d)
		return 0;
	int failed = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, "loop", 4))
			continue;
		char path[512], backing[PATH_MAX];
		snprintf(path, sizeof(path), "/sys/block/%s/loop/backing_file", e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		bool ours = fgets(backing, sizeof(backing), f) && below(backing, dir);
		fclose(f);
		if (!ours)
			continue;
		snprintf(path, sizeof(path), "/dev/%s", e->d_name);
		if (what != LOOPS_DETACH) {
			if (what == LOOPS_NAME)
				fprintf(stderr, "kcsi up: %s is still attached to %s (in use)\n", path,
					strtok(backing, "\n"));
			failed++;
			continue;
		}
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || ioctl(fd, LOOP_CLR_FD, 0)) {
			fprintf(stderr, "kcsi up: cannot detach %s: %s\n", path, strerror(errno));
			failed++;
		}
		if (fd >= 0)
			close(fd);
	}
	closedir(d);
	return failed;
}

/*
 * LOOP_CLR_FD on a device still in use (a lazily unmounted file system, an open file) only
 * marks it to go when the last user closes it: wait up to 2 s for that, then name what stays.
 */
static int detach_loops_below(const char *dir)
{
	loops_below(dir, LOOPS_DETACH); /* what fails to detach is still there below */
	for (int i = 0; i < 20 && loops_below(dir, LOOPS_COUNT); i++) {
		struct timespec ts = { 0, 100 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	return loops_below(dir, LOOPS_NAME);
}

int up_cleanup_dir(const char *dir)
{
	char real[PATH_MAX];
	if (!realpath(dir, real))
		snprintf(real, sizeof(real), "%s", dir);
	int failed = unmount_below(real) + detach_loops_below(real);
	if (strcmp(real, dir))
		failed += unmount_below(dir) + detach_loops_below(dir);
	return failed;
}

/* Removes a tree without crossing into another filesystem (a mount left behind stays intact). */
int up_remove_tree(const char *path, dev_t dev)
{
	struct stat st;
	if (lstat(path, &st))
		return errno == ENOENT ? 0 : -1;
	if (st.st_dev != dev)
		return -1;
	if (S_ISDIR(st.st_mode)) {
		DIR *d = opendir(path);
		if (!d)
			return -1;
		struct dirent *e;
		int rc = 0;
		while ((e = readdir(d))) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			char sub[PATH_MAX];
			snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
			rc |= up_remove_tree(sub, dev);
		}
		closedir(d);
		return rmdir(path) || rc ? -1 : 0;
	}
	return unlink(path);
}
