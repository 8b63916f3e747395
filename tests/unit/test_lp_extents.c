/*
 * Unit tests of extents.c on real sparse files (in a temporary folder): the allocated ranges a
 * backup tool would copy from a snapshot, and the changed ranges between two snapshots, with
 * resume offsets, early stops, images of different sizes and a passed deadline.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/timeutil.h"
#include "check.h"
#include "loopplugin/extents.h"

#define KiB 1024LL
#define MiB (1024LL * KiB)
#define SIZE (8 * MiB)

static char tmpdir[256];

struct seen {
	int n, stop_after;
	int64_t off[64], len[64];
};

static int collect(void *arg, int64_t off, int64_t len)
{
	struct seen *s = arg;
	if (s->n < 64) {
		s->off[s->n] = off;
		s->len[s->n] = len;
	}
	s->n++;
	return s->stop_after && s->n == s->stop_after ? 7 : 0;
}

static void put(int fd, int64_t off, int64_t len, int byte)
{
	static char buf[256 * 1024];
	memset(buf, byte, sizeof(buf));
	for (int64_t done = 0; done < len;) {
		int64_t k = len - done < (int64_t)sizeof(buf) ? len - done : (int64_t)sizeof(buf);
		CHECK(pwrite(fd, buf, (size_t)k, off + done) == k);
		done += k;
	}
}

/* A sparse 8 MiB image: 4 KiB at 0, 64 KiB at 1 MiB, 4 KiB at the last block. */
static int image(const char *name)
{
	char path[400];
	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0);
	CHECK(ftruncate(fd, SIZE) == 0);
	put(fd, 0, 4 * KiB, 'a');
	put(fd, 1 * MiB, 64 * KiB, 'b');
	put(fd, SIZE - 4 * KiB, 4 * KiB, 'c');
	fsync(fd);
	return fd;
}

static void expect_range(const struct seen *s, int i, int64_t off, int64_t len)
{
	CHECK(i < s->n);
	if (i >= s->n)
		return;
	if (s->off[i] != off || s->len[i] != len)
		fprintf(stderr, "range %d: got %lld+%lld, want %lld+%lld\n", i,
			(long long)s->off[i], (long long)s->len[i], (long long)off, (long long)len);
	CHECK(s->off[i] == off && s->len[i] == len);
}

/* The data written is what is listed, holes are not, and a resume cuts the first range. */
static void test_allocated(void)
{
	int fd = image("alloc.img");
	struct lp_status st;
	struct seen s = { 0 };
	CHECK_INT(lp_extents_allocated(fd, SIZE, 0, collect, &s, &st), 0);
	CHECK_INT(s.n, 3);
	expect_range(&s, 0, 0, 4 * KiB);
	expect_range(&s, 1, 1 * MiB, 64 * KiB);
	expect_range(&s, 2, SIZE - 4 * KiB, 4 * KiB);

	struct seen r = { 0 };
	CHECK_INT(lp_extents_allocated(fd, SIZE, 1 * MiB + 8 * KiB, collect, &r, &st), 0);
	CHECK_INT(r.n, 2);
	expect_range(&r, 0, 1 * MiB + 8 * KiB, 56 * KiB);

	struct seen end = { 0 };
	CHECK_INT(lp_extents_allocated(fd, SIZE, SIZE, collect, &end, &st), 0);
	CHECK_INT(end.n, 0);

	struct seen stop = { .stop_after = 1 };
	CHECK_INT(lp_extents_allocated(fd, SIZE, 0, collect, &stop, &st), 7);
	CHECK_INT(stop.n, 1);
	close(fd);
}

/*
 * Changes: a punched block, one changed byte, two adjacent changed blocks (one range), zeros
 * written over a hole (no change), new data over a hole.
 */
static void test_changed(void)
{
	int base = image("base.img"), target = image("target.img");
	CHECK(fallocate(target, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4 * KiB) == 0);
	put(target, 1 * MiB + 4 * KiB + 17, 1, 'x');
	put(target, 2 * MiB - 4 * KiB, 8 * KiB, 'y');
	put(target, 5 * MiB, 64 * KiB, 0);
	put(target, 3 * MiB, 8 * KiB, 'z');
	fsync(target);
	struct lp_status st;
	struct seen s = { 0 };
	CHECK_INT(lp_extents_changed(base, target, SIZE, 0, 0, collect, &s, &st), 0);
	CHECK_INT(s.n, 4);
	expect_range(&s, 0, 0, 4 * KiB);
	expect_range(&s, 1, 1 * MiB + 4 * KiB, 4 * KiB);
	expect_range(&s, 2, 2 * MiB - 4 * KiB, 8 * KiB);
	expect_range(&s, 3, 3 * MiB, 8 * KiB);

	/* resumed inside the changed block: it is listed again, whole; nothing before it is */
	struct seen r = { 0 };
	CHECK_INT(lp_extents_changed(base, target, SIZE, 1 * MiB + 4 * KiB + 100, 0, collect, &r,
				     &st), 0);
	CHECK_INT(r.n, 3);
	expect_range(&r, 0, 1 * MiB + 4 * KiB, 4 * KiB);

	struct seen same = { 0 };
	CHECK_INT(lp_extents_changed(base, base, SIZE, 0, 0, collect, &same, &st), 0);
	CHECK_INT(same.n, 0);

	/* a passed deadline stops the walk with DEADLINE_EXCEEDED */
	struct seen late = { 0 };
	CHECK(lp_extents_changed(base, target, SIZE, 0, mono_now_ns() - 1, collect, &late,
				 &st) < 0);
	CHECK_INT(st.code, LP_DEADLINE_EXCEEDED);
	close(base);
	close(target);
}

/* A volume grown between the snapshots: the target's new data past the base's end changed. */
static void test_changed_grown(void)
{
	int base = image("small.img"), target = image("grown.img");
	CHECK(ftruncate(target, SIZE + 2 * MiB) == 0);
	put(target, SIZE + 1 * MiB, 4 * KiB, 'g');
	fsync(target);
	struct lp_status st;
	struct seen s = { 0 };
	CHECK_INT(lp_extents_changed(base, target, SIZE + 2 * MiB, 0, 0, collect, &s, &st), 0);
	CHECK_INT(s.n, 1);
	expect_range(&s, 0, SIZE + 1 * MiB, 4 * KiB);
	close(base);
	close(target);
}

int main(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/var/tmp/kcsi-lp-extents-XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	RUN(test_allocated);
	RUN(test_changed);
	RUN(test_changed_grown);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir);
	return CHECK_DONE();
}
