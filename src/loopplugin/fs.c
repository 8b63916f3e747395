/*
 * fs: thin wrappers over the tools, each turning an exit status into a CSI status whose
 * message quotes the first line of the tool's output.
 */
#include "loopplugin/fs.h"

#include <endian.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <unistd.h>

#include "base/strbuf.h"
#include "loopplugin/loopdev.h"
#include "loopplugin/exec.h"

bool lp_fs_supported(const char *fstype)
{
	if (strcmp(fstype, "ext4") == 0)
		return true;
	if (strcmp(fstype, "xfs") == 0)
		return lp_have_program("mkfs.xfs");
	return false;
}

long long lp_fs_min_bytes(const char *fstype)
{
	return fstype && strcmp(fstype, "xfs") == 0 ? LP_XFS_MIN_BYTES : 0;
}

/* The tool output reduced to one line for an error message. */
static const char *first_line(struct strbuf *sb)
{
	strbuf_trim(sb);
	char *nl = strchr(sb->buf, '\n');
	if (nl)
		*nl = '\0';
	return sb->buf;
}

int lp_fs_probe(const char *volume, const char *dev, char *type, size_t len,
		struct lp_status *st)
{
	const char *argv[] = { "blkid", "-p", "-o", "value", "-s", "TYPE", dev, NULL };
	struct strbuf out = STRBUF_INIT;
	int rc = lp_exec(argv, &out);
	int ret;
	if (rc == 0) {
		strbuf_trim(&out);
		snprintf(type, len, "%s", out.buf);
		ret = 1;
		if (!type[0]) {
			/* a signature without a TYPE (a partition table): not empty either */
			snprintf(type, len, "unknown");
		}
	} else if (rc == 2) {
		/* blkid: nothing found */
		type[0] = '\0';
		ret = 0;
	} else {
		ret = lp_fail(st, LP_INTERNAL, "volume %s: blkid %s failed (%d): %s", volume, dev,
			      rc, first_line(&out));
	}
	strbuf_release(&out);
	return ret;
}

int lp_fs_format(const char *volume, const char *dev, const char *fstype, struct lp_status *st)
{
	struct strbuf out = STRBUF_INIT;
	int rc;
	if (strcmp(fstype, "ext4") == 0) {
		/* lazy init keeps formatting fast on big sparse images; -F: it is a whole device */
		const char *argv[] = { "mkfs.ext4", "-q", "-F", "-E",
				       "lazy_itable_init=1,lazy_journal_init=1", dev, NULL };
		rc = lp_exec(argv, &out);
	} else if (strcmp(fstype, "xfs") == 0) {
		/* -f: the caller decided to format (blank, or an interrupted earlier mkfs) */
		const char *argv[] = { "mkfs.xfs", "-q", "-f", dev, NULL };
		rc = lp_exec(argv, &out);
	} else {
		strbuf_release(&out);
		return lp_fail(st, LP_INVALID_ARGUMENT, "volume %s: unsupported fs type %s",
			       volume, fstype);
	}
	int ret = 0;
	if (rc != 0)
		ret = lp_fail(st, LP_INTERNAL, "volume %s: mkfs.%s %s failed (%d): %s", volume,
			      fstype, dev, rc, first_line(&out));
	strbuf_release(&out);
	return ret;
}

int lp_fs_check(const char *volume, const char *dev, const char *fstype, struct lp_status *st)
{
	struct strbuf out = STRBUF_INIT;
	int ret = 0;
	if (strcmp(fstype, "ext4") == 0 || strcmp(fstype, "ext3") == 0 ||
	    strcmp(fstype, "ext2") == 0) {
		const char *argv[] = { "e2fsck", "-p", dev, NULL };
		int rc = lp_exec(argv, &out);
		/* 0: clean, 1: errors fixed; 2 and up: needs a human (or failed) */
		if (rc < 0 || rc > 1)
			ret = lp_fail(st, LP_FAILED_PRECONDITION,
				      "volume %s: filesystem %s on %s is damaged (e2fsck exit %d), "
				      "refusing to mount: %s",
				      volume, fstype, dev, rc, first_line(&out));
	} else if (strcmp(fstype, "xfs") == 0) {
		const char *argv[] = { "xfs_repair", "-n", dev, NULL };
		int rc = lp_exec(argv, &out);
		/*
		 * A dirty log (a copy of a mounted filesystem, frozen or not) makes -n report
		 * "spurious inconsistencies" that replaying the log at mount resolves; xfs
		 * verifies its metadata as it reads it, so mounting is the check in that case.
		 */
		bool dirty_log = strstr(out.buf, "metadata changes in a log") != NULL;
		if (rc != 0 && !dirty_log)
			ret = lp_fail(st, LP_FAILED_PRECONDITION,
				      "volume %s: xfs on %s is damaged (xfs_repair -n exit %d), "
				      "refusing to mount: %s",
				      volume, dev, rc, first_line(&out));
	}
	strbuf_release(&out);
	return ret;
}

/* The first line of a checker's output that says something: no banner, no "Pass N:". */
static const char *finding(struct strbuf *sb)
{
	for (char *line = sb->buf; *line;) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		if (*line && strncmp(line, "Pass ", 5) != 0 && strncmp(line, "e2fsck ", 7) != 0 &&
		    strncmp(line, "Phase ", 6) != 0 && strncmp(line, "        - ", 10) != 0)
			return line;
		if (!nl)
			break;
		line = nl + 1;
	}
	return "";
}

int lp_fs_check_readonly(const char *path, const char *fstype, char *detail, size_t len)
{
	struct strbuf out = STRBUF_INIT;
	int ret = -1, rc;
	if (strcmp(fstype, "ext4") == 0 || strcmp(fstype, "ext3") == 0 ||
	    strcmp(fstype, "ext2") == 0) {
		/* -f: a file system marked clean is checked all the same; -n: opened read-only */
		const char *argv[] = { "e2fsck", "-f", "-n", path, NULL };
		rc = lp_exec(argv, &out);
		/* 0: clean; 1..4: errors found (none fixed with -n); 8: it could not make sense
		 * of the file system; 16 and up: usage, cancelled, a library missing */
		ret = rc == 0 ? 0 : rc > 0 && rc < 16 ? 1 : -1;
		if (ret == 1)
			snprintf(detail, len, "e2fsck -f -n exit %d: %s", rc, finding(&out));
	} else if (strcmp(fstype, "xfs") == 0 && lp_have_program("xfs_repair")) {
		/* -f: path is a file, not a device */
		const char *argv[] = { "xfs_repair", "-n", "-f", path, NULL };
		rc = lp_exec(argv, &out);
		bool dirty_log = strstr(out.buf, "metadata changes in a log") != NULL;
		ret = rc == 0 ? 0 : rc > 0 && !dirty_log ? 1 : -1;
		if (ret == 1)
			snprintf(detail, len, "xfs_repair -n exit %d: %s", rc, finding(&out));
	}
	strbuf_release(&out);
	return ret;
}

int lp_fs_grow(const char *volume, const char *dev, const char *mountpoint, const char *fstype,
	       struct lp_status *st)
{
	struct strbuf out = STRBUF_INIT;
	int rc;
	if (strcmp(fstype, "xfs") == 0) {
		const char *argv[] = { "xfs_growfs", mountpoint, NULL };
		rc = lp_exec(argv, &out);
	} else {
		const char *argv[] = { "resize2fs", dev, NULL };
		rc = lp_exec(argv, &out);
	}
	int ret = 0;
	if (rc != 0) {
		/* resize2fs prints its version first; the reason is on the last line */
		strbuf_trim(&out);
		const char *last = strrchr(out.buf, '\n');
		ret = lp_fail(st, LP_INTERNAL,
			      "volume %s: grow %s filesystem on %s failed (%d): %s%s", volume,
			      fstype, dev, rc, last ? last + 1 : out.buf,
			      strstr(out.buf, "Permission denied")
				      ? " (online ext4 growth needs CAP_SYS_RESOURCE; the "
					"filesystem grows at the next stage)"
				      : "");
	}
	strbuf_release(&out);
	return ret;
}

long long lp_ext4_size(const char *dev)
{
	unsigned char sb[1024];
	int fd = open(dev, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = pread(fd, sb, sizeof(sb), 1024);
	close(fd);
	if (n != (ssize_t)sizeof(sb))
		return -1;
	uint16_t magic;
	uint32_t lo, hi = 0, log_bs, incompat;
	memcpy(&magic, sb + 0x38, 2);
	if (le16toh(magic) != 0xEF53)
		return -1;
	memcpy(&lo, sb + 0x4, 4);
	memcpy(&log_bs, sb + 0x18, 4);
	memcpy(&incompat, sb + 0x60, 4);
	if (le32toh(incompat) & 0x80) /* 64bit */
		memcpy(&hi, sb + 0x150, 4);
	uint64_t blocks = ((uint64_t)le32toh(hi) << 32) | le32toh(lo);
	return (long long)(blocks << (10 + le32toh(log_bs)));
}

int lp_fs_grow_offline(const char *volume, const char *dev, const char *fstype,
		       struct lp_status *st)
{
	if (strcmp(fstype, "ext4") != 0)
		return 0;
	long long fs = lp_ext4_size(dev);
	int64_t bd = lp_blockdev_size(dev);
	if (fs < 0 || bd < 0 || bd - fs < 1024 * 1024)
		return 0;
	struct strbuf out = STRBUF_INIT;
	/* resize2fs insists on a fresh full check before an offline resize */
	const char *fsck[] = { "e2fsck", "-f", "-p", dev, NULL };
	int rc = lp_exec(fsck, &out);
	int ret = 0;
	if (rc < 0 || rc > 1) {
		ret = lp_fail(st, LP_FAILED_PRECONDITION,
			      "volume %s: e2fsck -f before growing %s failed (%d): %s", volume,
			      dev, rc, first_line(&out));
	} else {
		strbuf_reset(&out);
		const char *grow[] = { "resize2fs", dev, NULL };
		rc = lp_exec(grow, &out);
		if (rc != 0)
			ret = lp_fail(st, LP_INTERNAL, "volume %s: resize2fs %s failed (%d): %s",
				      volume, dev, rc, first_line(&out));
	}
	strbuf_release(&out);
	return ret;
}

int lp_fs_freeze(const char *mountpoint)
{
	int fd = open(mountpoint, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int r = ioctl(fd, FIFREEZE, 0);
	close(fd);
	return r;
}

void lp_fs_thaw(const char *mountpoint)
{
	int fd = open(mountpoint, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return;
	ioctl(fd, FITHAW, 0);
	close(fd);
}
