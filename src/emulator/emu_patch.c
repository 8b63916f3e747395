/*
 * emu_patch: merge, JSON and (reduced) strategic merge patch.
 *
 * All three work on a deep copy of the target so the stored object, which other threads may be
 * reading, is never modified. JSON patch operations run in order on that copy and the first
 * failing operation aborts the whole patch, as RFC 6902 requires (the copy is dropped).
 */
#include "emulator/emu_patch.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"

static json_t *merge_into(json_t *target /* owned, may be NULL */, const json_t *patch)
{
	if (!json_is_object(patch)) {
		json_decref(target);
		return json_deep_copy(patch);
	}
	if (!json_is_object(target)) {
		json_decref(target);
		target = json_object();
	}
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)patch, k, v) {
		if (json_is_null(v)) {
			json_object_del(target, k);
			continue;
		}
		json_t *cur = json_object_get(target, k);
		json_incref(cur);
		json_object_set_new(target, k, merge_into(cur, v));
	}
	return target;
}

json_t *emu_merge_patch(const json_t *target, const json_t *patch)
{
	return merge_into(target ? json_deep_copy(target) : NULL, patch);
}

/* ---- RFC 6902 ---- */

/*
 * Resolves pointer to (parent container, last token). Returns 0, or -1 when a parent is
 * missing. An empty pointer is the whole document: *parent is NULL.
 */
static int ptr_split(json_t *doc, const char *ptr, json_t **parent, struct strbuf *last)
{
	strbuf_reset(last);
	*parent = NULL;
	if (!*ptr)
		return 0;
	if (*ptr != '/')
		return -1;
	json_t *cur = doc;
	const char *p = ptr + 1;
	for (;;) {
		strbuf_reset(last);
		for (; *p && *p != '/'; p++) {
			if (*p == '~' && (p[1] == '0' || p[1] == '1')) {
				strbuf_addch(last, p[1] == '0' ? '~' : '/');
				p++;
			} else if (*p == '~') {
				return -1;
			} else {
				strbuf_addch(last, *p);
			}
		}
		if (!*p) {
			*parent = cur;
			return 0;
		}
		p++;
		if (json_is_object(cur)) {
			cur = json_object_get(cur, last->buf);
		} else if (json_is_array(cur)) {
			char *end;
			long idx = strtol(last->buf, &end, 10);
			if (*end || !last->len || idx < 0)
				return -1;
			cur = json_array_get(cur, (size_t)idx);
		} else {
			return -1;
		}
		if (!cur)
			return -1;
	}
}

/* Array index for token: -1 invalid; for_add allows "-" and len. */
static long arr_index(json_t *arr, const char *tok, bool for_add)
{
	size_t n = json_array_size(arr);
	if (!strcmp(tok, "-"))
		return for_add ? (long)n : -1;
	if (!*tok || (tok[0] == '0' && tok[1]) || tok[0] == '-')
		return -1;
	char *end;
	long idx = strtol(tok, &end, 10);
	if (*end || idx < 0 || (size_t)idx > n || (!for_add && (size_t)idx == n))
		return -1;
	return idx;
}

static json_t *ptr_get(json_t *doc, const char *ptr)
{
	json_t *parent;
	struct strbuf last = STRBUF_INIT;
	json_t *r = NULL;
	if (ptr_split(doc, ptr, &parent, &last) == 0) {
		if (!parent) {
			r = doc;
		} else if (json_is_object(parent)) {
			r = json_object_get(parent, last.buf);
		} else if (json_is_array(parent)) {
			long i = arr_index(parent, last.buf, false);
			r = i < 0 ? NULL : json_array_get(parent, (size_t)i);
		}
	}
	strbuf_release(&last);
	return r;
}

/* Whether ptr names a member of an existing object (present or not). */
static bool ptr_parent_is_object(json_t *doc, const char *ptr)
{
	json_t *parent;
	struct strbuf last = STRBUF_INIT;
	bool r = ptr_split(doc, ptr, &parent, &last) == 0 && json_is_object(parent);
	strbuf_release(&last);
	return r;
}

/* Removes and returns (new reference) the value at ptr, or NULL. */
static json_t *ptr_take(json_t *doc, const char *ptr)
{
	json_t *parent, *r = NULL;
	struct strbuf last = STRBUF_INIT;
	if (ptr_split(doc, ptr, &parent, &last) == 0 && parent) {
		if (json_is_object(parent)) {
			r = json_incref(json_object_get(parent, last.buf));
			if (r)
				json_object_del(parent, last.buf);
		} else if (json_is_array(parent)) {
			long i = arr_index(parent, last.buf, false);
			if (i >= 0) {
				r = json_incref(json_array_get(parent, (size_t)i));
				json_array_remove(parent, (size_t)i);
			}
		}
	}
	strbuf_release(&last);
	return r;
}

/* Adds value (stolen) at ptr. *doc may be replaced for the root pointer. */
static int ptr_add(json_t **doc, const char *ptr, json_t *value, bool replace)
{
	json_t *parent;
	struct strbuf last = STRBUF_INIT;
	int rc = -1;
	if (ptr_split(*doc, ptr, &parent, &last) < 0) {
		json_decref(value);
	} else if (!parent) {
		json_decref(*doc);
		*doc = value;
		rc = 0;
	} else if (json_is_object(parent)) {
		/*
		 * kube-apiserver's JSON-patch library replaces a missing object member by adding
		 * it (`replace /metadata/annotations` on an object without annotations is 200),
		 * while a missing array element or parent is still an error.
		 */
		rc = json_object_set_new(parent, last.buf, value);
	} else if (json_is_array(parent)) {
		long i = arr_index(parent, last.buf, !replace);
		if (i < 0)
			json_decref(value);
		else if (replace)
			rc = json_array_set_new(parent, (size_t)i, value);
		else
			rc = json_array_insert_new(parent, (size_t)i, value);
	} else {
		json_decref(value);
	}
	strbuf_release(&last);
	return rc;
}

bool emu_json_too_deep(const json_t *v, int max)
{
	if (!json_is_object(v) && !json_is_array(v))
		return false;
	if (max <= 0)
		return true;
	size_t i;
	const char *k;
	json_t *e;
	if (json_is_array(v)) {
		json_array_foreach((json_t *)v, i, e)
			if (emu_json_too_deep(e, max - 1))
				return true;
	} else {
		json_object_foreach((json_t *)v, k, e)
			if (emu_json_too_deep(e, max - 1))
				return true;
	}
	return false;
}

/* Levels a pointer descends: its '/' count. */
static int ptr_depth(const char *ptr)
{
	int n = 0;
	for (; *ptr; ptr++)
		n += *ptr == '/';
	return n;
}

static int apply_op(json_t **doc, const json_t *op, int idx, size_t *copied, int *status,
		    char *err, size_t errlen)
{
	const char *name = json_string_value(json_object_get(op, "op"));
	const char *path = json_string_value(json_object_get(op, "path"));
	const char *from = json_string_value(json_object_get(op, "from"));
	json_t *value = json_object_get(op, "value");
	*status = 400;
	if (!name || !path) {
		snprintf(err, errlen, "json patch operation %d: \"op\" and \"path\" must be strings", idx);
		return -1;
	}
	bool needs_value = !strcmp(name, "add") || !strcmp(name, "replace") || !strcmp(name, "test");
	bool needs_from = !strcmp(name, "move") || !strcmp(name, "copy");
	if (!needs_value && !needs_from && strcmp(name, "remove")) {
		snprintf(err, errlen, "json patch operation %d: unknown op \"%s\"", idx, name);
		return -1;
	}
	if ((needs_value && !value) || (needs_from && !from)) {
		snprintf(err, errlen, "json patch operation %d (%s): missing \"%s\"", idx, name,
			 needs_value ? "value" : "from");
		return -1;
	}
	*status = 422;
	int rc = 0;
	const json_t *placed = !strcmp(name, "add") || !strcmp(name, "replace") ? value :
			       needs_from ? ptr_get(*doc, from) : NULL;
	if (placed && emu_json_too_deep(placed, EMU_MAX_JSON_DEPTH - ptr_depth(path))) {
		snprintf(err, errlen, "json patch operation %d (%s): the result would nest deeper "
			 "than %d levels", idx, name, EMU_MAX_JSON_DEPTH);
		return -1;
	}
	if (placed && !strcmp(name, "copy")) {
		*copied += json_dumpb(placed, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY);
		if (*copied > EMU_MAX_PATCH_COPY) {
			*status = 413;
			snprintf(err, errlen, "json patch operation %d (copy): the copy operations "
				 "of this patch duplicate more than %d bytes", idx,
				 EMU_MAX_PATCH_COPY);
			return -1;
		}
	}
	if (!strcmp(name, "add") || !strcmp(name, "replace")) {
		rc = ptr_add(doc, path, json_deep_copy(value), name[0] == 'r');
	} else if (!strcmp(name, "remove")) {
		json_t *v = ptr_take(*doc, path);
		rc = v ? 0 : -1;
		json_decref(v);
	} else if (!strcmp(name, "test")) {
		json_t *have = ptr_get(*doc, path);
		/* as kube-apiserver: a missing member equals a test value of null */
		bool missing_null = !have && json_is_null(value) && ptr_parent_is_object(*doc, path);
		if (!missing_null && (!have || !json_equal(have, value))) {
			snprintf(err, errlen, "json patch operation %d: test failed: value at \"%s\" "
				 "differs from the expected value", idx, path);
			return -1;
		}
	} else if (!strcmp(name, "copy")) {
		json_t *src = ptr_get(*doc, from);
		rc = src ? ptr_add(doc, path, json_deep_copy(src), false) : -1;
	} else {
		size_t fl = strlen(from);
		if (!strncmp(path, from, fl) && path[fl] == '/') {
			snprintf(err, errlen, "json patch operation %d: cannot move \"%s\" into itself",
				 idx, from);
			return -1;
		}
		json_t *src = ptr_take(*doc, from);
		rc = src ? ptr_add(doc, path, src, false) : -1;
	}
	if (rc < 0)
		snprintf(err, errlen, "json patch operation %d (%s): path \"%s\" does not exist or "
			 "is not valid for this object", idx, name, needs_from ? from : path);
	return rc;
}

json_t *emu_json_patch(const json_t *target, const json_t *ops, int *status, char *err,
		       size_t errlen)
{
	if (!json_is_array(ops)) {
		*status = 400;
		snprintf(err, errlen, "a json patch must be a JSON array of operations");
		return NULL;
	}
	if (json_array_size(ops) > EMU_MAX_JSON_PATCH_OPS) {
		*status = 413;
		snprintf(err, errlen, "The allowed maximum operations in a JSON patch is %d, got %zu",
			 EMU_MAX_JSON_PATCH_OPS, json_array_size(ops));
		return NULL;
	}
	json_t *doc = json_deep_copy(target);
	size_t i, copied = 0;
	json_t *op;
	json_array_foreach(ops, i, op) {
		if (!json_is_object(op)) {
			*status = 400;
			snprintf(err, errlen, "json patch operation %zu is not an object", i);
			json_decref(doc);
			return NULL;
		}
		if (apply_op(&doc, op, (int)i, &copied, status, err, errlen) < 0) {
			json_decref(doc);
			return NULL;
		}
	}
	return doc;
}

/* ---- strategic merge (reduced) ---- */

static void finalizers_union(json_t *meta, const json_t *add)
{
	json_t *cur = json_object_get(meta, "finalizers");
	json_t *out = json_is_array(cur) ? json_deep_copy(cur) : json_array();
	size_t i, j;
	json_t *v, *w;
	json_array_foreach(add, i, v) {
		bool have = false;
		json_array_foreach(out, j, w)
			have = have || json_equal(v, w);
		if (!have)
			json_array_append(out, v);
	}
	json_object_set_new(meta, "finalizers", out);
}

/* Fails on a directive we do not implement anywhere inside v. */
static int check_no_directive(const json_t *v, const char *where, char *err, size_t errlen)
{
	if (json_is_array(v)) {
		size_t i;
		json_t *e;
		json_array_foreach((json_t *)v, i, e)
			if (check_no_directive(e, where, err, errlen) < 0)
				return -1;
	} else if (json_is_object(v)) {
		const char *k;
		json_t *e;
		json_object_foreach((json_t *)v, k, e) {
			if (k[0] == '$') {
				snprintf(err, errlen, "strategic merge patch directive \"%s\" in %s is not "
					 "supported by kube-emulator; send a merge patch "
					 "(application/merge-patch+json) instead", k, where);
				return -1;
			}
			if (check_no_directive(e, where, err, errlen) < 0)
				return -1;
		}
	}
	return 0;
}

static json_t *smp_into(json_t *target, const json_t *patch, bool is_meta, int depth, char *err,
			size_t errlen);
static json_t *smp_object(json_t *target, const json_t *patch, bool is_meta, int depth, char *err,
			  size_t errlen);

/*
 * Lists that upstream merges by a key (patchStrategy "merge" with a patchMergeKey), known by their
 * field name: the ones of the kinds served here that a strategic patch may carry.
 */
static const struct {
	const char *field, *key;
} merge_keys[] = {
	{ "containers", "name" }, { "initContainers", "name" }, { "ephemeralContainers", "name" },
	{ "volumes", "name" },    { "volumeMounts", "mountPath" }, { "env", "name" },
	{ "drivers", "name" },    { "conditions", "type" },        { "addresses", "type" },
	{ "ownerReferences", "uid" }, { "imagePullSecrets", "name" },
};

static const char *merge_key_of(const char *field)
{
	for (size_t i = 0; i < sizeof(merge_keys) / sizeof(merge_keys[0]); i++)
		if (!strcmp(merge_keys[i].field, field))
			return merge_keys[i].key;
	return NULL;
}

/* Index of the element of arr whose key equals v, or -1. */
/*
 * An index of list elements by the text of a value (their merge key, or themselves), so that
 * merging a patch of m elements into a list of n is O(n + m), not O(n * m). Keys are the compact
 * JSON text of the value: two values have the same text exactly when json_equal() holds for
 * the scalars merge keys are.
 */
static char *value_key(const json_t *v)
{
	return v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
}

/* idx[text of e's key value] = first position of such an element in arr. */
static json_t *index_by_key(const json_t *arr, const char *key)
{
	json_t *idx = json_object();
	size_t i;
	json_t *e;
	json_array_foreach((json_t *)arr, i, e) {
		char *t = value_key(key ? json_object_get(e, key) : e);
		if (t && !json_object_get(idx, t))
			json_object_set_new(idx, t, json_integer((json_int_t)i));
		free(t);
	}
	return idx;
}

static long index_find(const json_t *idx, const json_t *v)
{
	char *t = value_key(v);
	json_t *p = t ? json_object_get(idx, t) : NULL;
	free(t);
	return p ? (long)json_integer_value(p) : -1;
}

/* Merges patch into the list target (taken) element by element, matched on key. */
static json_t *smp_list(json_t *target, const json_t *patch, const char *field, const char *key,
			char *err, size_t errlen)
{
	size_t i;
	json_t *pe;
	json_array_foreach((json_t *)patch, i, pe) {
		const char *d = json_string_value(json_object_get(pe, "$patch"));
		if (d && !strcmp(d, "replace") && json_object_size(pe) == 1) {
			/* {"$patch": "replace"} in a list: the list becomes the other elements */
			json_t *out = json_array();
			size_t j;
			json_t *e;
			json_array_foreach((json_t *)patch, j, e)
				if (j != i)
					json_array_append(out, e);
			json_decref(target);
			if (check_no_directive(out, field, err, errlen) < 0) {
				json_decref(out);
				return NULL;
			}
			return out;
		}
	}
	json_t *out = json_is_array(target) ? json_deep_copy(target) : json_array();
	json_decref(target);
	/* deleted elements become tombstones (a shared marker) until the end, so that positions
	 * in the index stay valid */
	json_t *idx = index_by_key(out, key), *tomb = json_object();
	json_array_foreach((json_t *)patch, i, pe) {
		json_t *kv = json_object_get(pe, key);
		if (!json_is_object(pe) || !kv) {
			snprintf(err, errlen, "strategic merge patch: every element of %s must be an "
				 "object with its merge key \"%s\"", field, key);
			json_decref(out);
			json_decref(idx);
			json_decref(tomb);
			return NULL;
		}
		long j = index_find(idx, kv);
		const char *d = json_string_value(json_object_get(pe, "$patch"));
		if (d && !strcmp(d, "delete")) {
			if (j >= 0) {
				json_array_set(out, (size_t)j, tomb);
				char *t = value_key(kv);
				json_object_del(idx, t);
				free(t);
			}
			continue;
		}
		json_t *cur = j >= 0 ? json_incref(json_array_get(out, (size_t)j)) : json_object();
		json_t *nv = smp_object(cur, pe, false, 2, err, errlen);
		if (!nv || json_is_null(nv)) {
			if (nv)
				snprintf(err, errlen, "strategic merge patch: bad $patch in %s", field);
			json_decref(nv);
			json_decref(out);
			json_decref(idx);
			json_decref(tomb);
			return NULL;
		}
		if (j >= 0) {
			json_array_set_new(out, (size_t)j, nv);
		} else {
			char *t = value_key(kv);
			json_object_set_new(idx, t, json_integer((json_int_t)json_array_size(out)));
			free(t);
			json_array_append_new(out, nv);
		}
	}
	json_t *kept = json_array();
	json_t *e;
	json_array_foreach(out, i, e)
		if (e != tomb)
			json_array_append(kept, e);
	json_decref(out);
	json_decref(idx);
	json_decref(tomb);
	return kept;
}

/* $setElementOrder/<field>: listed elements first, in the given order, then the others. */
static int set_element_order(json_t *target, const char *field, const json_t *order, char *err,
			     size_t errlen)
{
	json_t *cur = json_object_get(target, field);
	if (!json_is_array(order)) {
		snprintf(err, errlen, "strategic merge patch: $setElementOrder/%s must be a list", field);
		return -1;
	}
	if (!json_is_array(cur))
		return 0;
	const char *key = merge_key_of(field);
	json_t *out = json_array(), *idx = index_by_key(cur, key);
	size_t n = json_array_size(cur), i;
	char *used = calloc(n ? n : 1, 1);
	json_t *o;
	json_array_foreach((json_t *)order, i, o) {
		long j = index_find(idx, key ? json_object_get(o, key) : o);
		if (j >= 0 && !used[j]) {
			json_array_append(out, json_array_get(cur, (size_t)j));
			used[j] = 1;
		}
	}
	for (i = 0; i < n; i++)
		if (!used[i])
			json_array_append(out, json_array_get(cur, i));
	free(used);
	json_decref(idx);
	json_object_set_new(target, field, out);
	return 0;
}

/* $deleteFromPrimitiveList/<field>: removes the listed values. */
static void delete_from_list(json_t *target, const char *field, const json_t *del)
{
	json_t *cur = json_object_get(target, field);
	if (!json_is_array(cur) || !json_is_array(del))
		return;
	json_t *out = json_array(), *idx = index_by_key(del, NULL);
	size_t i;
	json_t *v;
	json_array_foreach(cur, i, v)
		if (index_find(idx, v) < 0)
			json_array_append(out, v);
	json_decref(idx);
	json_object_set_new(target, field, out);
}

static json_t *smp_object(json_t *target, const json_t *patch, bool is_meta, int depth, char *err,
			  size_t errlen)
{
	const json_t *directive = json_object_get(patch, "$patch");
	if (directive) {
		const char *d = json_string_value(directive);
		if (d && !strcmp(d, "delete")) {
			json_decref(target);
			return json_null(); /* caller removes the key */
		}
		if (!d || strcmp(d, "replace")) {
			snprintf(err, errlen, "strategic merge patch: $patch must be \"replace\" or "
				 "\"delete\" on a map");
			json_decref(target);
			return NULL;
		}
		json_t *copy = json_deep_copy(patch);
		json_object_del(copy, "$patch");
		json_decref(target);
		if (check_no_directive(copy, "a replaced map", err, errlen) < 0) {
			json_decref(copy);
			return NULL;
		}
		return copy;
	}
	if (!json_is_object(target)) {
		json_decref(target);
		target = json_object();
	}
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)patch, k, v) {
		if (!strncmp(k, "$deleteFromPrimitiveList/", 25)) {
			delete_from_list(target, k + 25, v);
			continue;
		}
		if (!strncmp(k, "$setElementOrder/", 17))
			continue; /* applied below, once the list itself is merged */
		if (k[0] == '$') {
			snprintf(err, errlen, "strategic merge patch directive \"%s\" is not supported "
				 "by kube-emulator; send a merge patch (application/merge-patch+json) "
				 "instead", k);
			json_decref(target);
			return NULL;
		}
		if (json_is_null(v)) {
			json_object_del(target, k);
			continue;
		}
		if (is_meta && !strcmp(k, "finalizers") && json_is_array(v)) {
			finalizers_union(target, v);
			continue;
		}
		json_t *cur = json_incref(json_object_get(target, k));
		json_t *nv;
		const char *mkey = json_is_array(v) ? merge_key_of(k) : NULL;
		if (mkey) {
			nv = smp_list(cur, v, k, mkey, err, errlen);
		} else if (json_is_array(v) && check_no_directive(v, k, err, errlen) < 0) {
			json_decref(cur);
			nv = NULL;
		} else {
			nv = smp_into(cur, v, depth == 0 && !strcmp(k, "metadata"), depth + 1, err,
				      errlen);
		}
		if (!nv) {
			json_decref(target);
			return NULL;
		}
		if (json_is_null(nv))
			json_object_del(target, k);
		else
			json_object_set(target, k, nv);
		json_decref(nv);
	}
	json_object_foreach((json_t *)patch, k, v) {
		if (!strncmp(k, "$setElementOrder/", 17) &&
		    set_element_order(target, k + 17, v, err, errlen) < 0) {
			json_decref(target);
			return NULL;
		}
	}
	return target;
}

static json_t *smp_into(json_t *target, const json_t *patch, bool is_meta, int depth, char *err,
			size_t errlen)
{
	if (!json_is_object(patch)) {
		json_decref(target);
		return json_deep_copy(patch);
	}
	return smp_object(target, patch, is_meta, depth, err, errlen);
}

json_t *emu_strategic_patch(const json_t *target, const json_t *patch, int *status, char *err,
			    size_t errlen)
{
	*status = 400;
	if (!json_is_object(patch)) {
		snprintf(err, errlen, "a strategic merge patch must be a JSON object");
		return NULL;
	}
	*status = 422;
	json_t *r = smp_object(json_deep_copy(target), patch, false, 0, err, errlen);
	if (r && json_is_null(r)) {
		json_decref(r);
		snprintf(err, errlen, "strategic merge patch: $patch: delete of the whole object is "
			 "not supported");
		return NULL;
	}
	return r;
}
