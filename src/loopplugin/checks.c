/*
 * checks: what more than one CSI service of the loop driver needs: the request checks (names,
 * capabilities and access modes, parameters, pagination tokens, sizes), the in-flight and
 * "still staged" answers, node path checks, and the message pieces several RPCs return.
 */
#include "loopplugin/driver_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "base/strbuf.h"
#include "base/xalloc.h"
#include "loopplugin/fs.h"
#include "loopplugin/loopdev.h"
#include "loopplugin/mount.h"

/* CSI names and IDs from a CO: at most LP_NAME_MAX bytes (the CSI spec's limit). */
#define LP_NAME_MAX 128

/*
 * The byte offset of the first character of s that is not valid UTF-8 (*control false) or is a
 * control character (*control true); -1 when there is none.
 */
static long utf8_bad(const char *s, bool *control)
{
	for (const unsigned char *p = (const unsigned char *)s; *p;) {
		size_t n = *p < 0x80 ? 1 : (*p & 0xe0) == 0xc0 ? 2 : (*p & 0xf0) == 0xe0 ? 3
			 : (*p & 0xf8) == 0xf0 ? 4 : 0;
		unsigned cp = n == 1 ? *p : n == 2 ? (*p & 0x1fu) : n == 3 ? (*p & 0x0fu) : (*p & 0x07u);
		for (size_t i = 1; i < n; i++) {
			if ((p[i] & 0xc0) != 0x80) {
				n = 0;
				break;
			}
			cp = cp << 6 | (p[i] & 0x3fu);
		}
		bool overlong = (n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) ||
				(n == 4 && cp < 0x10000);
		*control = false;
		if (!n || overlong || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return (long)(p - (const unsigned char *)s);
		*control = true;
		if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f))
			return (long)(p - (const unsigned char *)s);
		p += n;
	}
	return -1;
}

int lp_check_name(const char *what, const char *field, const char *s, struct lp_status *st)
{
	size_t len = strlen(s);
	if (len > LP_NAME_MAX)
		return lp_fail(st, LP_INVALID_ARGUMENT, "%s: %s is %zu bytes long, more than %d",
			       what, field, len, LP_NAME_MAX);
	bool control;
	long at = utf8_bad(s, &control);
	if (at >= 0)
		return lp_fail(st, LP_INVALID_ARGUMENT, "%s: %s %s (byte %ld)", what, field,
			       control ? "holds a control character" : "is not valid UTF-8", at);
	return 0;
}

int lp_tags_check(const struct lp_tag *t, size_t n, char *err, size_t errlen)
{
	if (n > LP_MAX_TAGS) {
		snprintf(err, errlen, "%zu tags, more than %d", n, LP_MAX_TAGS);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		size_t kl = strlen(t[i].key), vl = strlen(t[i].value);
		bool control;
		long at;
		if (kl == 0 || kl > LP_TAG_KEY_MAX) {
			snprintf(err, errlen, "tag key \"%.40s%s\" is %zu bytes long; a key has 1 to %d",
				 t[i].key, kl > 40 ? "..." : "", kl, LP_TAG_KEY_MAX);
			return -1;
		}
		for (size_t k = 0; k < kl; k++) {
			unsigned char c = (unsigned char)t[i].key[k];
			if (c < 0x20 || c > 0x7e || (c == ' ' && (k == 0 || k == kl - 1))) {
				snprintf(err, errlen, "tag key \"%.40s%s\": byte %zu is not allowed (a key "
					 "is printable ASCII, no space at either end)",
					 t[i].key, kl > 40 ? "..." : "", k);
				return -1;
			}
		}
		if (vl > LP_TAG_VALUE_MAX) {
			snprintf(err, errlen, "the value of tag %s is %zu bytes long, more than %d",
				 t[i].key, vl, LP_TAG_VALUE_MAX);
			return -1;
		}
		if ((at = utf8_bad(t[i].value, &control)) >= 0) {
			snprintf(err, errlen, "the value of tag %s %s (byte %ld)", t[i].key,
				 control ? "holds a control character" : "is not valid UTF-8", at);
			return -1;
		}
	}
	return 0;
}

int lp_fail_call(struct csi_call_ctx *ctx, const struct lp_status *st)
{
	return csi_ctx_error(ctx, st->code ? (int)st->code : LP_INTERNAL, "%s", st->msg);
}

int lp_parse_size(const char *s, int64_t *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || v < 0)
		return -1;
	double mult = 1;
	static const struct {
		const char *suffix;
		double mult;
	} units[] = {
		{ "", 1 },        { "Ki", 1024.0 },     { "Mi", 1048576.0 },
		{ "Gi", 1073741824.0 }, { "Ti", 1099511627776.0 }, { "Pi", 1125899906842624.0 },
		{ "k", 1e3 },     { "K", 1e3 },         { "M", 1e6 },
		{ "G", 1e9 },     { "T", 1e12 },        { "P", 1e15 },
	};
	bool found = false;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(end, units[i].suffix) == 0) {
			mult = units[i].mult;
			found = true;
			break;
		}
	}
	if (!found || v * mult > 9.2e18)
		return -1;
	*out = (int64_t)(v * mult);
	return 0;
}

const char *lp_mode_name(int mode)
{
	switch (mode) {
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER:
		return "SINGLE_NODE_WRITER";
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_READER_ONLY:
		return "SINGLE_NODE_READER_ONLY";
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_READER_ONLY:
		return "MULTI_NODE_READER_ONLY";
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_SINGLE_WRITER:
		return "MULTI_NODE_SINGLE_WRITER";
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_MULTI_WRITER:
		return "MULTI_NODE_MULTI_WRITER";
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_SINGLE_WRITER:
		return "SINGLE_NODE_SINGLE_WRITER";
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_MULTI_WRITER:
		return "SINGLE_NODE_MULTI_WRITER";
	default:
		return "UNKNOWN";
	}
}

static bool mode_supported(int mode)
{
	switch (mode) {
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER:
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_READER_ONLY:
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_READER_ONLY:
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_SINGLE_WRITER:
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_MULTI_WRITER:
		return true;
	default:
		return false;
	}
}

bool lp_mode_readonly(int mode)
{
	return mode == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_READER_ONLY ||
	       mode == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_READER_ONLY;
}

int lp_check_caps_mode(struct lp_driver *d, const char *what, VolCap *const *caps, size_t n,
		       struct capset *cs, struct lp_status *st, bool need_mode)
{
	if (n == 0)
		return lp_fail(st, LP_INVALID_ARGUMENT, "%s: volume capabilities are missing", what);
	memset(cs, 0, sizeof(*cs));
	for (size_t i = 0; i < n; i++) {
		const VolCap *c = caps[i];
		if (!c || (!c->access_mode && need_mode))
			return lp_fail(st, LP_INVALID_ARGUMENT,
				       "%s: volume capability %zu has no access mode", what, i);
		if (c->access_mode && !mode_supported(c->access_mode->mode))
			return lp_fail(st, LP_INVALID_ARGUMENT,
				       "%s: access mode %s is not supported (supported: "
				       "SINGLE_NODE_WRITER, SINGLE_NODE_READER_ONLY, "
				       "SINGLE_NODE_SINGLE_WRITER, SINGLE_NODE_MULTI_WRITER, "
				       "MULTI_NODE_READER_ONLY)",
				       what, lp_mode_name(c->access_mode->mode));
		bool block;
		const char *fstype = NULL;
		if (c->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK) {
			block = true;
		} else if (c->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT) {
			block = false;
			fstype = c->mount && !lp_empty(c->mount->fs_type) ? c->mount->fs_type
								      : d->cfg.default_fstype;
			if (!lp_fs_supported(fstype))
				return lp_fail(st, LP_INVALID_ARGUMENT,
					       "%s: fs type %s is not supported (ext4%s)", what,
					       fstype, lp_fs_supported("xfs") ? ", xfs" : "");
		} else {
			return lp_fail(st, LP_INVALID_ARGUMENT,
				       "%s: volume capability %zu has no access type (block or "
				       "mount)",
				       what, i);
		}
		if (i == 0) {
			cs->block = block;
			cs->fstype = fstype;
			cs->mode = c->access_mode ? c->access_mode->mode : 0;
		} else if (block != cs->block) {
			return lp_fail(st, LP_INVALID_ARGUMENT,
				       "%s: capabilities mix block and mount access", what);
		} else if (!block && strcmp(fstype, cs->fstype) != 0) {
			return lp_fail(st, LP_INVALID_ARGUMENT,
				       "%s: capabilities ask for two fs types (%s, %s)", what,
				       cs->fstype, fstype);
		}
	}
	return 0;
}

int lp_check_caps(struct lp_driver *d, const char *what, VolCap *const *caps, size_t n,
		  struct capset *cs, struct lp_status *st)
{
	return lp_check_caps_mode(d, what, caps, n, cs, st, true);
}

int lp_check_cap(struct lp_driver *d, const char *what, VolCap *cap, struct capset *cs,
		 struct lp_status *st)
{
	VolCap *caps[1] = { cap };
	return lp_check_caps(d, what, caps, cap ? 1 : 0, cs, st);
}

int lp_caps_fit_volume(const struct lp_volume *v, const struct capset *cs,
		       struct lp_status *st)
{
	if (cs->block != v->block)
		return lp_fail(st, LP_INVALID_ARGUMENT, "volume %s was created for %s access, not %s",
			       v->id, v->block ? "block" : "mount", cs->block ? "block" : "mount");
	return 0;
}

int lp_parse_params(const char *what, size_t n, Csi__V1__CreateVolumeRequest__ParametersEntry **p,
		    bool *thick, struct lp_status *st)
{
	*thick = false;
	for (size_t i = 0; i < n; i++) {
		const char *k = p[i]->key, *v = p[i]->value;
		if (strncmp(k, "csi.storage.k8s.io/", 19) == 0)
			continue;
		if (strcmp(k, "type") != 0)
			return lp_fail(st, LP_INVALID_ARGUMENT,
				       "%s: unknown parameter %s (known: type=thin|thick)", what, k);
		if (strcmp(v, "thick") == 0)
			*thick = true;
		else if (strcmp(v, "thin") != 0)
			return lp_fail(st, LP_INVALID_ARGUMENT,
				       "%s: parameter type=%s, expected thin or thick", what, v);
	}
	return 0;
}

int lp_parse_token(const char *tok, int64_t *created, const char **id)
{
	char *end;
	errno = 0;
	long long c = strtoll(tok, &end, 10);
	if (errno || end == tok || *end != ':' || !end[1])
		return -1;
	*created = c;
	*id = end + 1;
	return 0;
}

bool lp_after_token(int64_t created, const char *id, int64_t tc, const char *tid)
{
	return created > tc || (created == tc && strcmp(id, tid) > 0);
}

bool lp_op_begin(struct lp_driver *d, char kind, const char *id, char *key, size_t len)
{
	snprintf(key, len, "%c/%s", kind, id);
	return lp_inflight_begin(d->inflight, key);
}

int lp_op_busy(struct csi_call_ctx *ctx, const char *id)
{
	return csi_ctx_error(ctx, LP_ABORTED,
			     "volume %s: an operation on this volume is already in progress", id);
}

bool lp_in_use_on_nodes(struct csi_call_ctx *ctx, struct lp_driver *d, const char *id,
			const char *node, int *ret)
{
	char **nodes = NULL;
	size_t n = 0;
	lp_stage_nodes(d->pool, id, &nodes, &n);
	struct strbuf where = STRBUF_INIT;
	for (size_t i = 0; i < n; i++) {
		if (node && strcmp(nodes[i], node) != 0)
			continue;
		struct lp_stage *sr = NULL;
		lp_stage_load(d->pool, nodes[i], id, &sr);
		strbuf_addf(&where, "%snode %s (at %s)", where.len ? ", " : "", nodes[i],
			    sr ? sr->path : "?");
		lp_stage_free(sr);
	}
	lp_free_strings(nodes, n);
	bool detaching = false;
	if (!where.len && d->node && (!node || strcmp(node, d->cfg.nodeid) == 0)) {
		char *img = lp_volume_image(d->pool, id), *dev = NULL;
		int state = lp_loop_state(img, &dev);
		if (state == LP_LOOP_BACKED || state == LP_LOOP_DETACHING)
			strbuf_addf(&where, "node %s (loop device %s)", d->cfg.nodeid, dev);
		detaching = state == LP_LOOP_DETACHING;
		free(dev);
		free(img);
	}
	bool busy_there = where.len > 0;
	/* Unstaged, but the device is still open: a mount namespace made while the volume was
	 * staged (a container, ip netns, unshare) holds a copy of its mount. The kernel detaches
	 * the device when that copy goes; until then the volume's data is still reachable. */
	if (busy_there && detaching)
		*ret = csi_ctx_error(ctx, LP_FAILED_PRECONDITION,
				     "volume %s is unstaged but its device on %s is still held open "
				     "(a copy of its mount in another mount namespace?); it detaches "
				     "when that lets go", id, where.buf);
	else if (busy_there)
		*ret = csi_ctx_error(ctx, LP_FAILED_PRECONDITION,
				     "volume %s is still staged on %s; NodeUnstageVolume it first",
				     id, where.buf);
	strbuf_release(&where);
	return busy_there;
}

char *lp_canon_path(const char *path)
{
	char *r = realpath(path, NULL);
	if (r)
		return r;
	char *copy = xstrdup(path);
	char *slash = strrchr(copy, '/');
	if (slash && slash != copy) {
		*slash = '\0';
		char *parent = realpath(copy, NULL);
		if (parent) {
			struct strbuf sb = STRBUF_INIT;
			strbuf_addf(&sb, "%s/%s", parent, slash + 1);
			free(parent);
			free(copy);
			return strbuf_detach(&sb, NULL);
		}
	}
	free(copy);
	return xstrdup(path);
}

int lp_target_is_volumes(const char *path, const char *dev)
{
	struct lp_mount m;
	int r = lp_mount_find(path, &m);
	if (r != 1)
		return r < 0 ? -1 : 0;
	unsigned ma, mi;
	bool ours = false;
	if (dev && lp_blockdev_numbers(dev, &ma, &mi) == 0) {
		struct stat devfs;
		const char *base = strrchr(dev, '/');
		ours = (m.major == ma && m.minor == mi) ||
		       (base && stat("/dev", &devfs) == 0 && m.major == major(devfs.st_dev) &&
			m.minor == minor(devfs.st_dev) && strcmp(m.root, base) == 0);
	}
	lp_mount_release(&m);
	return ours ? 1 : -1;
}

int lp_check_node_target(struct csi_call_ctx *ctx, struct lp_driver *d, const char *id,
			 const char *path, const char *field)
{
	struct lp_status st;
	struct lp_volume *v = NULL;
	struct stat ls;
	if (!lp_id_valid(id) || lp_volume_load(d->pool, id, &v, &st))
		return csi_ctx_error(ctx, LP_NOT_FOUND, "volume %s does not exist; %s left as it is",
				     id, field);
	lp_volume_free(v);
	if (lstat(path, &ls) == 0 && S_ISLNK(ls.st_mode))
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT, "volume %s: %s %s is a symbolic link; "
				     "it is never followed", id, field, path);
	return 0;
}

int lp_check_topology(struct lp_driver *d, const char *what,
		      const Csi__V1__TopologyRequirement *tr, struct lp_status *st)
{
	if (!tr)
		return 0;
	Csi__V1__Topology **lists[2] = { tr->requisite, tr->preferred };
	size_t ns[2] = { tr->n_requisite, tr->n_preferred };
	bool ours = false;
	for (int l = 0; l < 2; l++) {
		for (size_t i = 0; i < ns[l]; i++) {
			Csi__V1__Topology *t = lists[l][i];
			for (size_t k = 0; k < t->n_segments; k++) {
				if (strcmp(t->segments[k]->key, LP_TOPOLOGY_KEY) != 0)
					return lp_fail(st, LP_INVALID_ARGUMENT,
						       "%s: unknown topology key %s (known: %s)",
						       what, t->segments[k]->key,
						       LP_TOPOLOGY_KEY);
			}
			const char *z = csi_map_get(t->n_segments, t->segments, LP_TOPOLOGY_KEY);
			if (l == 0 && z && strcmp(z, d->cfg.zone) == 0)
				ours = true;
		}
	}
	if (tr->n_requisite && !ours)
		return lp_fail(st, LP_RESOURCE_EXHAUSTED,
			       "%s: no requisite topology allows zone %s, the only one this driver "
			       "serves",
			       what, d->cfg.zone);
	return 0;
}

Csi__V1__Topology *lp_csi_topology(struct csi_arena *a, struct lp_driver *d)
{
	Csi__V1__Topology *t = csi_msg_new(a, &csi__v1__topology__descriptor);
	csi_map_add(a, &t->base, "segments", LP_TOPOLOGY_KEY, d->cfg.zone);
	return t;
}

Csi__V1__Volume *lp_csi_volume(struct csi_arena *a, struct lp_driver *d,
			       const struct lp_volume *v)
{
	Csi__V1__Volume *m = csi_msg_new(a, &csi__v1__volume__descriptor);
	m->volume_id = csi_arena_strdup(a, v->id);
	m->capacity_bytes = v->size;
	csi_map_add(a, &m->base, "volume_context", "type", v->thick ? "thick" : "thin");
	for (size_t i = 0; i < v->ntags; i++)
		csi_map_add(a, &m->base, "volume_context",
			    csi_arena_printf(a, "%s%s", LP_TAG_CONTEXT_PREFIX, v->tags[i].key),
			    v->tags[i].value);
	if (!lp_empty(v->source_kind)) {
		Csi__V1__VolumeContentSource *src =
			csi_msg_new(a, &csi__v1__volume_content_source__descriptor);
		if (strcmp(v->source_kind, "snapshot") == 0) {
			src->type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT;
			src->snapshot = csi_msg_new(
				a, &csi__v1__volume_content_source__snapshot_source__descriptor);
			src->snapshot->snapshot_id = csi_arena_strdup(a, v->source_id);
		} else {
			src->type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_VOLUME;
			src->volume = csi_msg_new(
				a, &csi__v1__volume_content_source__volume_source__descriptor);
			src->volume->volume_id = csi_arena_strdup(a, v->source_id);
		}
		m->content_source = src;
	}
	csi_repeated_add(a, &m->base, "accessible_topology", lp_csi_topology(a, d));
	return m;
}
