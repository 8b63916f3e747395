/*
 * kube/jw: writes JSON text straight into a strbuf, for the objects written on the hot path (the
 * provisioner's PersistentVolume, events). Building a jansson tree to serialize it once cost a
 * hash table per object and a malloc per value: for the provisioner, prov_pv_json with its
 * json_dumps and json_delete was 17% of the CPU per provision (docs/performance.md, round 4).
 *
 *     struct jw w = JW_INIT(&sb);
 *     jw_begin_object(&w);
 *     jw_kv_str(&w, "name", name);
 *     jw_key(&w, "items");
 *     jw_begin_array(&w);
 *     jw_str(&w, "a");
 *     jw_end_array(&w);
 *     jw_end_object(&w);
 *
 * The writer places the commas and colons; the caller nests begin/end pairs correctly (up to
 * JW_MAX_DEPTH - 1 levels) and writes a key before each member value. Strings go through
 * strbuf_addjson(): control bytes escaped, and each byte that is not UTF-8 written as U+FFFD as
 * Go's encoding/json does, so the text is valid JSON whatever a CSI driver put in a volume id or
 * context.
 */
#ifndef KCSI_KUBE_JW_H
#define KCSI_KUBE_JW_H

#include <stdbool.h>
#include <stdint.h>

#include "base/strbuf.h"

#define JW_MAX_DEPTH 64

struct jw {
	struct strbuf *sb;
	unsigned depth;
	uint64_t nonempty; /* bit d: the container at depth d has a member already */
	bool after_key;    /* the next value belongs to the key just written */
};

#define JW_INIT(sbp) { (sbp), 0, 0, false }

void jw_begin_object(struct jw *w);
void jw_end_object(struct jw *w);
void jw_begin_array(struct jw *w);
void jw_end_array(struct jw *w);
void jw_key(struct jw *w, const char *key);
void jw_str(struct jw *w, const char *s); /* NULL writes "" */
void jw_int(struct jw *w, int64_t v);
void jw_bool(struct jw *w, bool v);
void jw_null(struct jw *w); /* a merge patch's "remove this key" */

static inline void jw_kv_str(struct jw *w, const char *key, const char *s)
{
	jw_key(w, key);
	jw_str(w, s);
}

/* Appends s as a JSON string literal (quotes included). */
void jw_quote(struct strbuf *sb, const char *s);

#endif
