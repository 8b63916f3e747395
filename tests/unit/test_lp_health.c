/*
 * kcsi-loopplugin's health decisions (src/loopplugin/health.h) as tables: what the driver has
 * observed of a volume or of the pool, and the conditions a CO is told, as "STATUS/Reason" words
 * in the order the rules list them. Each row is one situation a user can meet; the messages are
 * checked where they carry a figure or the checker's words.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "csi/client.h"
#include "loopplugin/health.h"

#define MiB (1024LL * 1024)

static const char *status_name(int s, bool pool)
{
	const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(
		pool ? &csi__v1__storage_health_error_type__descriptor
		     : &csi__v1__volume_health_error_type__descriptor, s);
	return v ? v->name : "?";
}

/* The entries as "STATUS/Reason STATUS/Reason". */
static void words(const struct lp_health_entry *e, size_t n, bool pool, char *out, size_t len)
{
	out[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		size_t used = strlen(out);
		snprintf(out + used, len - used, "%s%s/%s", i ? " " : "", status_name(e[i].status, pool),
			 e[i].reason);
	}
}

static void test_volume_rules(void)
{
	/* the defaults: image whole, nothing asked of the node, file system not checked */
#define OK .image = LP_IMAGE_OK, .image_size = 64 * MiB, .volume_size = 64 * MiB
	static const struct {
		const char *what;
		struct lp_volume_facts f;
		const char *want;
	} rows[] = {
		{ "unused, never formatted", { OK }, "" },
		{ "unused, file system clean", { OK, .fs = LP_FS_CLEAN }, "" },
		{ "image larger than the volume (grown, not yet recorded)",
		  { .image = LP_IMAGE_OK, .image_size = 128 * MiB, .volume_size = 64 * MiB }, "" },
		{ "image deleted", { .image = LP_IMAGE_MISSING, .volume_size = 64 * MiB },
		  "DATA_LOSS/ImageMissing" },
		{ "image unreadable", { .image = LP_IMAGE_UNREADABLE, .image_errno = EACCES },
		  "INACCESSIBLE/ImageUnreadable" },
		{ "image truncated", { .image = LP_IMAGE_OK, .image_size = MiB, .volume_size = 64 * MiB },
		  "DATA_LOSS/ImageTruncated" },
		{ "staged, device backs the image",
		  { OK, .staged_here = true, .loop = LP_LOOP_BACKED, .staging = LP_PLACE_OK,
		    .publish = LP_PLACE_OK, .fs = LP_FS_CLEAN }, "" },
		{ "staged, device detached (losetup -d)",
		  { OK, .staged_here = true, .loop = LP_LOOP_NONE },
		  "INACCESSIBLE/LoopDeviceDetached" },
		{ "staged, device told to detach while mounted",
		  { OK, .staged_here = true, .loop = LP_LOOP_DETACHING, .staging = LP_PLACE_OK },
		  "DEGRADED/LoopDeviceDetaching" },
		{ "staged, image deleted under the device",
		  { .image = LP_IMAGE_MISSING, .volume_size = 64 * MiB, .staged_here = true,
		    .loop = LP_LOOP_STALE, .staging = LP_PLACE_OK },
		  "DATA_LOSS/ImageMissing DATA_LOSS/LoopDeviceNotBackedByImage" },
		{ "staged, image replaced under the device",
		  { OK, .staged_here = true, .loop = LP_LOOP_STALE },
		  "DATA_LOSS/LoopDeviceNotBackedByImage" },
		{ "device there, staging mount gone",
		  { OK, .staged_here = true, .loop = LP_LOOP_BACKED, .staging = LP_PLACE_MISSING },
		  "INACCESSIBLE/NotMountedAtStagingPath" },
		{ "device there, publish mount gone",
		  { OK, .staged_here = true, .loop = LP_LOOP_BACKED, .publish = LP_PLACE_MISSING },
		  "INACCESSIBLE/NotPublishedAtPath" },
		{ "not staged here: the loop state is not looked at",
		  { OK, .staged_here = false, .loop = LP_LOOP_NONE }, "" },
		{ "unused, file system damaged",
		  { OK, .fs = LP_FS_DAMAGED, .fs_detail = "e2fsck -f -n exit 4: x" },
		  "DATA_LOSS/FilesystemNeedsRepair" },
		{ "mounted, file system gave up",
		  { OK, .staged_here = true, .loop = LP_LOOP_BACKED, .staging = LP_PLACE_OK,
		    .fs = LP_FS_IO_ERROR, .fs_detail = "statvfs: EIO" },
		  "INACCESSIBLE/FilesystemIOError" },
		{ "everything at once, in the rules' order",
		  { .image = LP_IMAGE_OK, .image_size = MiB, .volume_size = 64 * MiB,
		    .staged_here = true, .loop = LP_LOOP_NONE, .staging = LP_PLACE_MISSING,
		    .publish = LP_PLACE_MISSING, .fs = LP_FS_DAMAGED },
		  "DATA_LOSS/ImageTruncated INACCESSIBLE/LoopDeviceDetached "
		  "INACCESSIBLE/NotMountedAtStagingPath INACCESSIBLE/NotPublishedAtPath "
		  "DATA_LOSS/FilesystemNeedsRepair" },
	};
#undef OK
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct lp_health_entry e[LP_HEALTH_MAX];
		size_t n = lp_volume_health(&rows[i].f, e);
		char got[600];
		words(e, n, false, got, sizeof(got));
		if (strcmp(got, rows[i].want) != 0)
			fprintf(stderr, "row \"%s\"\n", rows[i].what);
		CHECK_STR(got, rows[i].want);
		/* the spec: no two entries with the same (status, reason), every one with a reason */
		for (size_t a = 0; a < n; a++) {
			CHECK(e[a].reason && e[a].reason[0] && e[a].message[0]);
			for (size_t b = a + 1; b < n; b++)
				CHECK(e[a].status != e[b].status || strcmp(e[a].reason, e[b].reason));
		}
	}
}

static void test_volume_messages(void)
{
	struct lp_health_entry e[LP_HEALTH_MAX];
	struct lp_volume_facts f = { .image = LP_IMAGE_OK, .image_size = MiB,
				     .volume_size = 64 * MiB };
	CHECK_INT(lp_volume_health(&f, e), 1);
	CHECK(strstr(e[0].message, "1048576 bytes, the volume 67108864") != NULL);
	struct lp_volume_facts g = { .image = LP_IMAGE_OK, .image_size = 64 * MiB,
				     .volume_size = 64 * MiB, .fs = LP_FS_DAMAGED,
				     .fs_detail = "e2fsck -f -n exit 4: Free blocks count wrong" };
	CHECK_INT(lp_volume_health(&g, e), 1);
	CHECK(strstr(e[0].message, "Free blocks count wrong") != NULL);
	struct lp_volume_facts h = { .image = LP_IMAGE_OK, .image_size = 64 * MiB,
				     .volume_size = 64 * MiB, .staged_here = true,
				     .loop = LP_LOOP_DETACHING, .device = "/dev/loop7" };
	CHECK_INT(lp_volume_health(&h, e), 1);
	CHECK(strstr(e[0].message, "/dev/loop7") != NULL);
	struct lp_volume_facts u = { .image = LP_IMAGE_UNREADABLE, .image_errno = EIO };
	CHECK_INT(lp_volume_health(&u, e), 1);
	CHECK(strstr(e[0].message, strerror(EIO)) != NULL);
}

static void test_pool_rules(void)
{
	static const struct {
		const char *what;
		struct lp_pool_facts f;
		const char *want;
	} rows[] = {
		{ "room to spare", { .free_bytes = 10LL << 30, .free_inodes = 1000 }, "" },
		{ "no inode count (a file system without one)",
		  { .free_bytes = 10LL << 30, .free_inodes = -1 }, "" },
		{ "free space unknown", { .free_bytes = -1, .free_inodes = -1 }, "" },
		{ "exactly one MiB free", { .free_bytes = LP_POOL_FULL_BYTES, .free_inodes = 5 }, "" },
		{ "less than a MiB free", { .free_bytes = LP_POOL_FULL_BYTES - 1, .free_inodes = 5 },
		  "STORAGE_DEGRADED/PoolFull" },
		{ "no inode left", { .free_bytes = 10LL << 30, .free_inodes = 0 },
		  "STORAGE_DEGRADED/PoolFull" },
		{ "read-only", { .write_errno = EROFS, .free_bytes = 10LL << 30, .free_inodes = 9 },
		  "STORAGE_DEGRADED/PoolNotWritable" },
		{ "read-only and full", { .write_errno = EROFS, .free_bytes = 0, .free_inodes = 9 },
		  "STORAGE_DEGRADED/PoolNotWritable STORAGE_DEGRADED/PoolFull" },
		{ "folder gone", { .dir_errno = ENOENT, .free_bytes = 0, .free_inodes = 0 },
		  "STORAGE_UNREACHABLE/PoolMissing" },
		{ "folder unreachable", { .dir_errno = EIO }, "STORAGE_UNREACHABLE/PoolUnreachable" },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct lp_health_entry e[LP_HEALTH_MAX];
		size_t n = lp_pool_health("/var/lib/pool", &rows[i].f, e);
		char got[300];
		words(e, n, true, got, sizeof(got));
		if (strcmp(got, rows[i].want) != 0)
			fprintf(stderr, "row \"%s\"\n", rows[i].what);
		CHECK_STR(got, rows[i].want);
		for (size_t k = 0; k < n; k++)
			CHECK(strstr(e[k].message, "/var/lib/pool") != NULL);
	}
}

int main(void)
{
	RUN(test_volume_rules);
	RUN(test_volume_messages);
	RUN(test_pool_rules);
	return CHECK_DONE();
}
