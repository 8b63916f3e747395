/*
 * Unit tests of the loop plugin's storage backend, on the real thing: a pool in a temporary
 * folder, real loop devices, real mkfs and mounts (the tests run as root). Every test removes
 * what it set up; at the end the test checks that no loop device backed by its pool and no
 * mount below its folder is left.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "base/strbuf.h"
#include "check.h"
#include "loopplugin/exec.h"
#include "loopplugin/fs.h"
#include "loopplugin/inflight.h"
#include "loopplugin/loopdev.h"
#include "loopplugin/mount.h"
#include "loopplugin/pool.h"

#define MiB (1024LL * 1024)

static char tmpdir[256];
static struct lp_pool *pool;

static struct lp_volume *new_volume(const char *name, int64_t size, bool thick)
{
	struct lp_volume *v = calloc(1, sizeof(*v));
	v->id = lp_volume_id_for_name(name);
	v->name = strdup(name);
	v->size = size;
	v->thick = thick;
	v->fstype = strdup("ext4");
	v->source_kind = strdup("");
	v->source_id = strdup("");
	v->zone = strdup("local");
	static int64_t clock = 1000;
	v->created_ns = clock++;
	return v;
}

static int64_t allocated(const char *path)
{
	struct stat sb;
	return stat(path, &sb) == 0 ? (int64_t)sb.st_blocks * 512 : -1;
}

static void test_ids(void)
{
	char *a = lp_volume_id_for_name("pvc-1"), *b = lp_volume_id_for_name("pvc-1");
	char *c = lp_volume_id_for_name("pvc-2"), *s = lp_snapshot_id_for_name("pvc-1");
	CHECK_STR(a, b);
	CHECK(strcmp(a, c) != 0);
	CHECK(strncmp(a, "lv-", 3) == 0);
	CHECK(strncmp(s, "ls-", 3) == 0);
	CHECK(lp_id_valid(a));
	CHECK(!lp_id_valid("../etc"));
	CHECK(!lp_id_valid("a/b"));
	CHECK(!lp_id_valid(""));
	free(a), free(b), free(c), free(s);
}

static void test_create_thin_thick(void)
{
	struct lp_status st;
	struct lp_volume *thin = new_volume("thin", 64 * MiB, false);
	struct lp_volume *thick = new_volume("thick", 8 * MiB, true);
	CHECK_INT(lp_volume_create(pool, thin, NULL, &st), 0);
	CHECK_INT(lp_volume_create(pool, thick, NULL, &st), 0);
	char *ti = lp_volume_image(pool, thin->id), *ki = lp_volume_image(pool, thick->id);
	struct stat sb;
	CHECK(stat(ti, &sb) == 0 && sb.st_size == 64 * MiB);
	CHECK(allocated(ti) < 1 * MiB);
	CHECK(allocated(ki) >= 8 * MiB);

	struct lp_volume *back;
	CHECK_INT(lp_volume_load(pool, thin->id, &back, &st), 0);
	CHECK_STR(back->name, "thin");
	CHECK_INT(back->size, 64 * MiB);
	CHECK(!back->thick);
	CHECK_STR(back->zone, "local");
	lp_volume_free(back);

	char **ids;
	int64_t *created;
	size_t n;
	CHECK_INT(lp_volume_list(pool, &ids, &created, &n, &st), 0);
	CHECK_INT(n, 2);
	if (n == 2) {
		CHECK_STR(ids[0], thin->id); /* creation order */
		CHECK_STR(ids[1], thick->id);
	}
	lp_free_strings(ids, n);
	free(created);

	CHECK_INT(lp_volume_grow(pool, thin, 128 * MiB, &st), 0);
	CHECK(stat(ti, &sb) == 0 && sb.st_size == 128 * MiB);
	CHECK_INT(lp_volume_load(pool, thin->id, &back, &st), 0);
	CHECK_INT(back->size, 128 * MiB);
	lp_volume_free(back);

	CHECK_INT(lp_volume_delete(pool, thin->id, &st), 0);
	CHECK_INT(lp_volume_delete(pool, thin->id, &st), 0); /* idempotent */
	CHECK_INT(lp_volume_delete(pool, thick->id, &st), 0);
	CHECK(access(ti, F_OK) < 0 && access(ki, F_OK) < 0);
	CHECK_INT(lp_volume_load(pool, thin->id, &back, &st), -LP_NOT_FOUND);
	CHECK_INT(st.code, LP_NOT_FOUND);
	CHECK(strstr(st.msg, thin->id) != NULL);
	free(ti), free(ki);
	lp_volume_free(thin);
	lp_volume_free(thick);
}

static void test_pool_full(void)
{
	struct lp_status st;
	struct lp_volume *v = new_volume("huge", lp_pool_free_bytes(pool) + 1024 * MiB, false);
	CHECK_INT(lp_volume_create(pool, v, NULL, &st), -LP_RESOURCE_EXHAUSTED);
	CHECK(strstr(st.msg, v->id) != NULL);
	char *img = lp_volume_image(pool, v->id);
	CHECK(access(img, F_OK) < 0);
	free(img);
	lp_volume_free(v);
}

static void touch(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT, 0600);
	if (fd >= 0)
		close(fd);
}

static void test_recover(void)
{
	struct lp_status st;
	char path[512], orphan[512], tmpimg[512];
	snprintf(path, sizeof(path), "%s/pool/volumes/lv-x.json.tmp", tmpdir);
	snprintf(orphan, sizeof(orphan), "%s/pool/volumes/lv-orphan.img", tmpdir);
	snprintf(tmpimg, sizeof(tmpimg), "%s/pool/snapshots/ls-y.img.tmp", tmpdir);
	touch(path);
	touch(orphan);
	touch(tmpimg);
	struct lp_volume *keep = new_volume("keep", 4 * MiB, false);
	CHECK_INT(lp_volume_create(pool, keep, NULL, &st), 0);
	/* a file another writer holds locked is in progress, not a leftover */
	char busy[512];
	snprintf(busy, sizeof(busy), "%s/pool/nodes/n9.json.tmp", tmpdir);
	int bfd = open(busy, O_RDWR | O_CREAT, 0600);
	CHECK(bfd >= 0 && flock(bfd, LOCK_EX) == 0);
	CHECK_INT(lp_pool_recover(pool, &st), 3);
	CHECK(access(busy, F_OK) == 0);
	close(bfd);
	CHECK_INT(lp_pool_recover(pool, &st), 1);
	CHECK(access(busy, F_OK) < 0);
	CHECK(access(path, F_OK) < 0);
	CHECK(access(orphan, F_OK) < 0);
	CHECK(access(tmpimg, F_OK) < 0);
	char *img = lp_volume_image(pool, keep->id);
	CHECK(access(img, F_OK) == 0);
	free(img);
	CHECK_INT(lp_volume_delete(pool, keep->id, &st), 0);
	lp_volume_free(keep);
}

static void test_attach_device_names(void)
{
	struct lp_status st;
	struct lp_volume *a = new_volume("att-a", 4 * MiB, false);
	struct lp_volume *b = new_volume("att-b", 4 * MiB, false);
	struct lp_volume *c = new_volume("att-c", 4 * MiB, false);
	CHECK_INT(lp_volume_create(pool, a, NULL, &st), 0);
	CHECK_INT(lp_volume_create(pool, b, NULL, &st), 0);
	CHECK_INT(lp_volume_create(pool, c, NULL, &st), 0);
	lp_pool_lock(pool);
	CHECK_INT(lp_volume_attach(pool, a, "n1", false, 2, &st), 0);
	CHECK_INT(lp_volume_attach(pool, b, "n1", true, 2, &st), 0);
	/* the limit counts per node */
	CHECK_INT(lp_volume_attach(pool, c, "n1", false, 2, &st), -LP_RESOURCE_EXHAUSTED);
	CHECK(strstr(st.msg, "n1") && strstr(st.msg, c->id));
	CHECK_INT(lp_volume_attach(pool, c, "n2", false, 2, &st), 0);
	lp_pool_unlock(pool);
	CHECK_STR(lp_volume_attachment(a, "n1")->device, "xvdba");
	CHECK_STR(lp_volume_attachment(b, "n1")->device, "xvdbb");
	CHECK(lp_volume_attachment(b, "n1")->readonly);
	CHECK_STR(lp_volume_attachment(c, "n2")->device, "xvdba");

	/* a freed name is reused; one in use never is */
	CHECK_INT(lp_volume_detach(pool, a, "n1", &st), 0);
	CHECK_INT(lp_volume_detach(pool, a, "n1", &st), 0);
	CHECK(lp_volume_attachment(a, "n1") == NULL);
	lp_pool_lock(pool);
	CHECK_INT(lp_volume_attach(pool, c, "n1", false, 2, &st), 0);
	lp_pool_unlock(pool);
	CHECK_STR(lp_volume_attachment(c, "n1")->device, "xvdba");

	/* what was saved is what a fresh load sees */
	struct lp_volume *back;
	CHECK_INT(lp_volume_load(pool, c->id, &back, &st), 0);
	CHECK_INT(back->natt, 2);
	CHECK(lp_volume_attachment(back, "n2") != NULL);
	lp_volume_free(back);
	CHECK_INT(lp_volume_load(pool, a->id, &back, &st), 0);
	CHECK_INT(back->natt, 0);
	lp_volume_free(back);

	/* the names are files under attachments/<node>; a stale one (a crash between taking the
	 * name and saving the metadata) is removed by recovery, the backed ones stay */
	char stale[512], backed[512];
	snprintf(stale, sizeof(stale), "%s/pool/attachments/n1/xvdzz", tmpdir);
	snprintf(backed, sizeof(backed), "%s/pool/attachments/n1/xvdba", tmpdir);
	CHECK(access(backed, F_OK) == 0);
	touch(stale);
	CHECK_INT(lp_pool_recover(pool, &st), 1);
	CHECK(access(stale, F_OK) < 0);
	CHECK(access(backed, F_OK) == 0);
	CHECK_INT(lp_volume_detach(pool, c, "n1", &st), 0);
	CHECK_INT(lp_volume_detach(pool, c, "n2", &st), 0);
	CHECK_INT(lp_volume_detach(pool, b, "n1", &st), 0);
	CHECK(access(backed, F_OK) < 0);

	lp_volume_delete(pool, a->id, &st);
	lp_volume_delete(pool, b->id, &st);
	lp_volume_delete(pool, c->id, &st);
	lp_volume_free(a), lp_volume_free(b), lp_volume_free(c);
}

static void test_mount_flags(void)
{
	unsigned long fl;
	char data[128], bad[64];
	const char *ok[] = { "noatime", "ro", "discard" };
	CHECK_INT(lp_mount_parse_flags(ok, 3, &fl, data, sizeof(data), bad, sizeof(bad)), 0);
	CHECK(fl & MS_NOATIME);
	CHECK(fl & MS_RDONLY);
	CHECK_STR(data, "discard");
	const char *no[] = { "noatime", "bind" };
	CHECK_INT(lp_mount_parse_flags(no, 2, &fl, data, sizeof(data), bad, sizeof(bad)), -1);
	CHECK_STR(bad, "bind");
}

static void test_inflight(void)
{
	struct lp_inflight *f = lp_inflight_new();
	CHECK(lp_inflight_begin(f, "v1"));
	CHECK(!lp_inflight_begin(f, "v1"));
	CHECK(lp_inflight_begin(f, "v2"));
	lp_inflight_end(f, "v1");
	CHECK(lp_inflight_begin(f, "v1"));
	lp_inflight_end(f, "v1");
	lp_inflight_end(f, "v2");
	lp_inflight_free(f);
}

static void test_exec(void)
{
	struct strbuf out = STRBUF_INIT;
	const char *argv[] = { "no-such-tool-kcsi", NULL };
	CHECK_INT(lp_exec(argv, &out), -1);
	CHECK(strstr(out.buf, "not installed") != NULL);
	strbuf_reset(&out);
	const char *t[] = { "sh", "-c", "echo hello; exit 3", NULL };
	CHECK_INT(lp_exec(t, &out), 3);
	CHECK(strstr(out.buf, "hello") != NULL);
	strbuf_release(&out);
	CHECK(lp_have_program("blkid"));
	CHECK(lp_fs_supported("ext4"));
	CHECK(!lp_fs_supported("ntfs"));
}

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, text, strlen(text));
	fsync(fd);
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

static bool file_has(const char *path, const char *text)
{
	char buf[256] = { 0 };
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 && strcmp(buf, text) == 0;
}

/* loop device + ext4 + mount + grow + snapshot copy: the node path end to end */
static void test_loop_fs_lifecycle(void)
{
	struct lp_status st;
	struct lp_volume *v = new_volume("fsvol", 64 * MiB, false);
	CHECK_INT(lp_volume_create(pool, v, NULL, &st), 0);
	char *img = lp_volume_image(pool, v->id);
	char *dev = NULL, *dev2 = NULL, *found = NULL;
	CHECK_INT(lp_loop_find(img, &found), 0);
	CHECK_INT(lp_loop_attach(v->id, img, false, &dev, &st), 0);
	if (!dev) {
		fprintf(stderr, "loop attach failed: %s\n", st.msg);
		goto out;
	}
	/* idempotent: the same device, found through its backing file */
	CHECK_INT(lp_loop_attach(v->id, img, false, &dev2, &st), 0);
	CHECK_STR(dev2, dev);
	free(found);
	CHECK_INT(lp_loop_find(img, &found), 1);
	CHECK_STR(found, dev);
	CHECK_INT(lp_blockdev_size(dev), 64 * MiB);

	char type[32];
	CHECK_INT(lp_fs_probe(v->id, dev, type, sizeof(type), &st), 0);
	CHECK_INT(lp_fs_format(v->id, dev, "ext4", &st), 0);
	CHECK_INT(lp_fs_probe(v->id, dev, type, sizeof(type), &st), 1);
	CHECK_STR(type, "ext4");
	CHECK_INT(lp_fs_check(v->id, dev, "ext4", &st), 0);

	char mnt[512], file[600];
	snprintf(mnt, sizeof(mnt), "%s/mnt", tmpdir);
	mkdir(mnt, 0755);
	CHECK_INT(lp_mount_fs(v->id, dev, mnt, "ext4", MS_NOATIME, NULL, &st), 0);
	struct lp_mount m;
	CHECK_INT(lp_mount_find(mnt, &m), 1);
	CHECK_STR(m.fstype, "ext4");
	CHECK_STR(m.source, dev);
	CHECK(!m.readonly);
	lp_mount_release(&m);
	snprintf(file, sizeof(file), "%s/data", mnt);
	CHECK_INT(write_file(file, "kept"), 0);

	/* growth: image, then device; ext4 then grows at the next mount (offline) */
	CHECK_INT(lp_volume_grow(pool, v, 128 * MiB, &st), 0);
	CHECK_INT(lp_loop_refresh_size(v->id, dev, &st), 0);
	CHECK_INT(lp_blockdev_size(dev), 128 * MiB);
	CHECK_INT(lp_ext4_size(dev), 64 * MiB);
	CHECK_INT(lp_umount(v->id, mnt, &st), 0);
	CHECK_INT(lp_umount(v->id, mnt, &st), 0); /* idempotent */
	CHECK_INT(lp_mount_find(mnt, &m), 0);
	CHECK_INT(lp_fs_grow_offline(v->id, dev, "ext4", &st), 0);
	CHECK_INT(lp_ext4_size(dev), 128 * MiB);
	CHECK_INT(lp_fs_grow_offline(v->id, dev, "ext4", &st), 0); /* no-op now */
	CHECK_INT(lp_mount_fs(v->id, dev, mnt, "ext4", 0, NULL, &st), 0);
	CHECK(file_has(file, "kept"));
	CHECK_INT(lp_umount(v->id, mnt, &st), 0);
	CHECK_INT(lp_loop_detach(v->id, dev, &st), 0);
	free(found);
	/* the image still names the device in its hint: the kernel's backing_file decides */
	CHECK_INT(lp_loop_find(img, &found), 0);

	/* a device another program set up (no hint) is found once the start-up scan has run */
	struct strbuf los = STRBUF_INIT;
	const char *losetup[] = { "losetup", "--find", "--show", img, NULL };
	if (lp_exec(losetup, &los) == 0 && strncmp(los.buf, "/dev/loop", 9) == 0) {
		los.buf[strcspn(los.buf, "\n")] = '\0';
		CHECK(lp_loop_hint_all(lp_pool_dir(pool)) >= 1);
		CHECK_INT(lp_loop_find(img, &found), 1);
		CHECK_STR(found, los.buf);
		CHECK_INT(lp_loop_detach(v->id, los.buf, &st), 0);
		free(found);
		found = NULL;
		CHECK_INT(lp_loop_find(img, &found), 0);
	} else {
		CHECK(!"losetup --find --show failed");
	}
	strbuf_release(&los);

	/* snapshot: a copy of the image; a new volume from it has the data */
	struct lp_snapshot s = { lp_snapshot_id_for_name("snap1"), "snap1", v->id, v->size, 5, "" };
	char *simg = lp_snapshot_image(pool, s.id);
	CHECK_INT(lp_snapshot_create(pool, &s, img, &st), 0);
	struct lp_snapshot *sb;
	CHECK_INT(lp_snapshot_load(pool, s.id, &sb, &st), 0);
	CHECK(sb && sb->size == v->size && strcmp(sb->source_volume, v->id) == 0);
	lp_snapshot_free(sb);
	struct lp_volume *r = new_volume("restored", 256 * MiB, false);
	CHECK_INT(lp_volume_create(pool, r, simg, &st), 0);
	char *rimg = lp_volume_image(pool, r->id);
	char *rdev = NULL;
	CHECK_INT(lp_loop_attach(r->id, rimg, false, &rdev, &st), 0);
	if (rdev) {
		CHECK_INT(lp_fs_probe(r->id, rdev, type, sizeof(type), &st), 1);
		CHECK_INT(lp_mount_fs(r->id, rdev, mnt, "ext4", 0, NULL, &st), 0);
		CHECK(file_has(file, "kept"));
		CHECK_INT(lp_umount(r->id, mnt, &st), 0);
		CHECK_INT(lp_loop_detach(r->id, rdev, &st), 0);
	}
	free(rdev);
	free(rimg);
	lp_volume_delete(pool, r->id, &st);
	lp_volume_free(r);
	CHECK_INT(lp_snapshot_delete(pool, s.id, &st), 0);
	CHECK(access(simg, F_OK) < 0);
	free(simg);
	free(s.id);
out:
	free(dev), free(dev2), free(found);
	lp_volume_delete(pool, v->id, &st);
	free(img);
	lp_volume_free(v);
}

/* xfs grows online, while mounted */
static void test_xfs_online_grow(void)
{
	if (!lp_fs_supported("xfs"))
		return;
	struct lp_status st;
	struct lp_volume *v = new_volume("xfsvol", 320 * MiB, false);
	CHECK_INT(lp_volume_create(pool, v, NULL, &st), 0);
	char *img = lp_volume_image(pool, v->id), *dev = NULL;
	char mnt[512];
	snprintf(mnt, sizeof(mnt), "%s/mnt", tmpdir);
	mkdir(mnt, 0755);
	CHECK_INT(lp_loop_attach(v->id, img, false, &dev, &st), 0);
	if (dev) {
		CHECK_INT(lp_fs_format(v->id, dev, "xfs", &st), 0);
		CHECK_INT(lp_fs_check(v->id, dev, "xfs", &st), 0);
		CHECK_INT(lp_mount_fs(v->id, dev, mnt, "xfs", 0, NULL, &st), 0);
		struct statvfs before, after;
		statvfs(mnt, &before);
		CHECK_INT(lp_volume_grow(pool, v, 640 * MiB, &st), 0);
		CHECK_INT(lp_loop_refresh_size(v->id, dev, &st), 0);
		CHECK_INT(lp_fs_grow(v->id, dev, mnt, "xfs", &st), 0);
		statvfs(mnt, &after);
		CHECK((int64_t)after.f_blocks * after.f_frsize >
		      (int64_t)before.f_blocks * before.f_frsize + 250 * MiB);
		CHECK_INT(lp_umount(v->id, mnt, &st), 0);
		CHECK_INT(lp_loop_detach(v->id, dev, &st), 0);
	}
	free(dev);
	lp_volume_delete(pool, v->id, &st);
	free(img);
	lp_volume_free(v);
}

/* A damaged filesystem is refused, with the volume in the message. */
static void test_fsck_refuses_damage(void)
{
	struct lp_status st;
	struct lp_volume *v = new_volume("broken", 32 * MiB, false);
	CHECK_INT(lp_volume_create(pool, v, NULL, &st), 0);
	char *img = lp_volume_image(pool, v->id), *dev = NULL;
	CHECK_INT(lp_loop_attach(v->id, img, false, &dev, &st), 0);
	if (dev) {
		CHECK_INT(lp_fs_format(v->id, dev, "ext4", &st), 0);
		/* wipe the primary superblock: e2fsck -p will not repair that on its own */
		int fd = open(dev, O_WRONLY);
		char zero[1024] = { 0 };
		CHECK(pwrite(fd, zero, sizeof(zero), 1024) == (ssize_t)sizeof(zero));
		fsync(fd);
		close(fd);
		CHECK(lp_fs_check(v->id, dev, "ext4", &st) < 0);
		CHECK_INT(st.code, LP_FAILED_PRECONDITION);
		CHECK(strstr(st.msg, v->id) != NULL);
		CHECK_INT(lp_loop_detach(v->id, dev, &st), 0);
	}
	free(dev);
	lp_volume_delete(pool, v->id, &st);
	free(img);
	lp_volume_free(v);
}

/* Paths with spaces come back from mountinfo as they were given (\040 undone). */
static void test_mount_path_with_space(void)
{
	struct lp_status st;
	char src[512], dst[512];
	snprintf(src, sizeof(src), "%s/bind src", tmpdir);
	snprintf(dst, sizeof(dst), "%s/bind dst", tmpdir);
	mkdir(src, 0755);
	mkdir(dst, 0755);
	CHECK_INT(lp_mount_bind("vol-x", src, dst, true, &st), 0);
	struct lp_mount m;
	CHECK_INT(lp_mount_find(dst, &m), 1);
	CHECK_STR(m.target, dst);
	CHECK(m.readonly);
	lp_mount_release(&m);
	CHECK_INT(lp_umount("vol-x", dst, &st), 0);
	CHECK_INT(lp_mount_find(dst, &m), 0);
	rmdir(src);
	rmdir(dst);
}

/*
 * The mount table is kept between lookups (src/loopplugin/mount.c): a mount or unmount another
 * program makes on a path that stays a mount root must show at the next lookup.
 */
static void test_mount_table_follows_others(void)
{
	struct lp_status st;
	char src[512], dst[512], cmd[1200];
	struct lp_mount m = { 0 };
	snprintf(src, sizeof(src), "%s/others-src", tmpdir);
	snprintf(dst, sizeof(dst), "%s/others-dst", tmpdir);
	mkdir(src, 0755);
	mkdir(dst, 0755);
	CHECK_INT(lp_mount_bind("vol-o", src, dst, false, &st), 0);
	CHECK_INT(lp_mount_find(dst, &m), 1);
	CHECK(strcmp(m.source, "kcsi-others") != 0);
	lp_mount_release(&m);
	snprintf(cmd, sizeof(cmd), "mount -t tmpfs -o size=1m kcsi-others '%s'", dst);
	CHECK_INT(system(cmd), 0);
	CHECK_INT(lp_mount_find(dst, &m), 1); /* the top one: theirs */
	CHECK_STR(m.fstype, "tmpfs");
	CHECK_STR(m.source, "kcsi-others");
	lp_mount_release(&m);
	snprintf(cmd, sizeof(cmd), "umount '%s'", dst);
	CHECK_INT(system(cmd), 0);
	CHECK_INT(lp_mount_find(dst, &m), 1); /* ours again */
	CHECK(strcmp(m.source, "kcsi-others") != 0);
	lp_mount_release(&m);
	CHECK_INT(lp_umount("vol-o", dst, &st), 0);
	CHECK_INT(lp_mount_find(dst, &m), 0);
	rmdir(src);
	rmdir(dst);
}

/* Leaves nothing: no loop device on our pool, no mount below our folder. */
static void check_nothing_left(void)
{
	FILE *fp = fopen("/proc/self/mountinfo", "r");
	char line[4096];
	while (fp && fgets(line, sizeof(line), fp))
		CHECK(strstr(line, tmpdir) == NULL);
	if (fp)
		fclose(fp);
	struct strbuf out = STRBUF_INIT;
	const char *argv[] = { "losetup", "-a", NULL };
	lp_exec(argv, &out);
	CHECK(strstr(out.buf, tmpdir) == NULL);
	strbuf_release(&out);
}

int main(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/kcsi-lp-unit-XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	char dir[300];
	snprintf(dir, sizeof(dir), "%s/pool", tmpdir);
	struct lp_status st;
	pool = lp_pool_open(dir, &st);
	CHECK(pool != NULL);
	if (!pool) {
		fprintf(stderr, "%s\n", st.msg);
		return 1;
	}
	RUN(test_ids);
	RUN(test_create_thin_thick);
	RUN(test_pool_full);
	RUN(test_recover);
	RUN(test_attach_device_names);
	RUN(test_mount_flags);
	RUN(test_mount_path_with_space);
	RUN(test_mount_table_follows_others);
	RUN(test_inflight);
	RUN(test_exec);
	RUN(test_loop_fs_lifecycle);
	RUN(test_xfs_online_grow);
	RUN(test_fsck_refuses_damage);
	RUN(check_nothing_left);
	lp_pool_free(pool);
	struct strbuf rm = STRBUF_INIT;
	const char *argv[] = { "rm", "-rf", tmpdir, NULL };
	lp_exec(argv, &rm);
	strbuf_release(&rm);
	return CHECK_DONE();
}
