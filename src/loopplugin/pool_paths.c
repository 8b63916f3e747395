/*
 * pool_paths: where a pool's files live and what their IDs are: "<pool>/<sub>/<id><ext>", the
 * image paths, IDs derived from names, and the check that an ID is safe as a file name. It sits
 * below every other pool file and calls none of them.
 */
#include "loopplugin/pool_int.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/strbuf.h"
#include "base/xalloc.h"

char *lp_pool_path(const struct lp_pool *p, const char *sub, const char *id, const char *ext)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "%s/%s/%s%s", p->dir, sub, id, ext);
	return strbuf_detach(&sb, NULL);
}

char *lp_volume_image(const struct lp_pool *p, const char *id)
{
	return lp_pool_path(p, "volumes", id, ".img");
}

char *lp_snapshot_image(const struct lp_pool *p, const char *id)
{
	return lp_pool_path(p, "snapshots", id, ".img");
}

static char *id_for(const char *prefix, const char *name)
{
	/* FNV-1a, 64 bits: stable across versions and hosts, which the ID must be */
	uint64_t h = 0xcbf29ce484222325ULL;
	for (const unsigned char *c = (const unsigned char *)name; *c; c++) {
		h ^= *c;
		h *= 0x100000001b3ULL;
	}
	char buf[40];
	snprintf(buf, sizeof(buf), "%s%016llx", prefix, (unsigned long long)h);
	return xstrdup(buf);
}

char *lp_volume_id_for_name(const char *name) { return id_for("lv-", name); }
char *lp_snapshot_id_for_name(const char *name) { return id_for("ls-", name); }
char *lp_group_id_for_name(const char *name) { return id_for("lg-", name); }

char *lp_group_member_id(const char *gid, const char *vid)
{
	struct strbuf key = STRBUF_INIT;
	strbuf_addf(&key, "\001%s/%s", gid, vid);
	char *id = id_for("ls-", key.buf);
	strbuf_release(&key);
	return id;
}

bool lp_id_valid(const char *id)
{
	size_t n = strlen(id);
	if (n == 0 || n > 128 || id[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = id[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_' || c == '.'))
			return false;
	}
	return true;
}
