/*
 * extents: allocated and changed ranges of sparse images (extents.h has the contract).
 *
 * The changed walk jumps to the next offset where either image has data (two SEEK_DATA calls),
 * reads a chunk of both from there, compares it block by block and keeps one pending range that
 * grows while changed blocks follow each other, so a long run of changes is one range however
 * many chunks it spans. A chunk ends where the images' shared hole begins, as far as the first
 * image whose data ends there says, so runs of zeros between data regions are not read.
 */
#include "loopplugin/extents.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/timeutil.h"
#include "base/xalloc.h"

#define CHUNK (1 << 20)

/* Next offset >= pos with data, or size when there is none before it; -1 on error. */
static int64_t next_data(int fd, int64_t pos, int64_t size)
{
	if (pos >= size)
		return size;
	off_t d = lseek(fd, pos, SEEK_DATA);
	if (d < 0)
		return errno == ENXIO ? size : -1;
	return d < size ? d : size;
}

/* Next hole at or after pos (the file's end counts), capped at size; -1 on error. */
static int64_t next_hole(int fd, int64_t pos, int64_t size)
{
	off_t h = lseek(fd, pos, SEEK_HOLE);
	if (h < 0)
		return errno == ENXIO ? pos : -1;
	return h < size ? h : size;
}

int lp_extents_allocated(int fd, int64_t size, int64_t start, lp_range_fn fn, void *arg,
			 struct lp_status *st)
{
	int64_t pos = start < 0 ? 0 : start;
	while (pos < size) {
		int64_t d = next_data(fd, pos, size);
		if (d < 0)
			return lp_fail(st, LP_INTERNAL, "seeking data at %lld: %s", (long long)pos,
				       strerror(errno));
		if (d >= size)
			break;
		int64_t h = next_hole(fd, d, size);
		if (h < 0)
			return lp_fail(st, LP_INTERNAL, "seeking a hole at %lld: %s", (long long)d,
				       strerror(errno));
		if (h <= d) /* the file ends inside [d, size): the rest reads as zeros */
			break;
		int rc = fn(arg, d, h - d);
		if (rc)
			return rc;
		pos = h;
	}
	return 0;
}

/* Reads up to n bytes at off; what lies past the file's end reads as zeros. */
static int read_zero_filled(int fd, uint8_t *buf, size_t n, int64_t off)
{
	size_t got = 0;
	while (got < n) {
		ssize_t k = pread(fd, buf + got, n - got, off + (int64_t)got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -1;
		if (k == 0)
			break;
		got += (size_t)k;
	}
	memset(buf + got, 0, n - got);
	return 0;
}

struct pending {
	int64_t off, len;
	lp_range_fn fn;
	void *arg;
};

/* Adds a changed block to the pending range; a gap hands the pending one on first. */
static int pending_add(struct pending *p, int64_t off, int64_t len)
{
	if (p->len && p->off + p->len == off) {
		p->len += len;
		return 0;
	}
	int rc = p->len ? p->fn(p->arg, p->off, p->len) : 0;
	p->off = off;
	p->len = len;
	return rc;
}

int lp_extents_changed(int base, int target, int64_t size, int64_t start, int64_t deadline_ns,
		       lp_range_fn fn, void *arg, struct lp_status *st)
{
	uint8_t *a = xmalloc(CHUNK), *b = xmalloc(CHUNK);
	struct pending p = { 0, 0, fn, arg };
	int64_t pos = start < 0 ? 0 : start - start % LP_EXTENT_BLOCK;
	int rc = 0;
	while (pos < size && !rc) {
		if (deadline_ns && mono_now_ns() >= deadline_ns) {
			rc = lp_fail(st, LP_DEADLINE_EXCEEDED, "comparing the snapshots' images: "
				     "the deadline passed at offset %lld", (long long)pos);
			break;
		}
		int64_t da = next_data(base, pos, size), db = next_data(target, pos, size);
		if (da < 0 || db < 0) {
			rc = lp_fail(st, LP_INTERNAL, "seeking data at %lld: %s", (long long)pos,
				     strerror(errno));
			break;
		}
		int64_t from = da < db ? da : db;
		if (from >= size)
			break;
		from -= from % LP_EXTENT_BLOCK;
		/* read up to where the image whose data starts first has a hole */
		int64_t to = next_hole(da <= db ? base : target, da <= db ? da : db, size);
		if (to < 0) {
			rc = lp_fail(st, LP_INTERNAL, "seeking a hole at %lld: %s", (long long)from,
				     strerror(errno));
			break;
		}
		if (to <= from)
			to = from + LP_EXTENT_BLOCK;
		if (to - from > CHUNK)
			to = from + CHUNK;
		if (to > size)
			to = size;
		size_t n = (size_t)(to - from);
		if (read_zero_filled(base, a, n, from) || read_zero_filled(target, b, n, from)) {
			rc = lp_fail(st, LP_INTERNAL, "reading at %lld: %s", (long long)from,
				     strerror(errno));
			break;
		}
		for (size_t i = 0; i < n && !rc; i += LP_EXTENT_BLOCK) {
			size_t k = n - i < LP_EXTENT_BLOCK ? n - i : LP_EXTENT_BLOCK;
			if (memcmp(a + i, b + i, k) != 0)
				rc = pending_add(&p, from + (int64_t)i, (int64_t)k);
		}
		pos = to;
	}
	if (!rc && p.len)
		rc = fn(arg, p.off, p.len);
	free(a);
	free(b);
	return rc;
}
