/*
 * kube/objects_pack: the two-pass packer every record decoder shares; private to the
 * kube/objects*.c files (objects.h is the public side).
 *
 * A decoder runs twice over the same JSON: a sizing pass that only adds up the bytes the blob
 * needs (pk->base is NULL, arrays are not written), then a copy pass into one allocation of
 * exactly struct + blob. One allocation per object keeps allocator overhead to nothing, which is
 * most of what makes a cached VolumeAttachment cost a few hundred bytes. A kind supplies only
 * its fields function (pk_fields_fn); pk_decode() runs it twice into a slab record
 * (objects_slab.c).
 *
 * Every pk_ function returns NULL (and writes nothing) in the sizing pass and the packed copy in
 * the copy pass; counts are capped at UINT16_MAX entries.
 */
#ifndef KCSI_KUBE_OBJECTS_PACK_H
#define KCSI_KUBE_OBJECTS_PACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kube/jv.h"
#include "kube/objects.h"

struct packer {
	char *base; /* NULL in the sizing pass */
	size_t off;
};

/* n bytes at the next offset aligned to align (NULL in the sizing pass). */
static inline void *pk_alloc(struct packer *pk, size_t n, size_t align)
{
	pk->off = (pk->off + align - 1) & ~(align - 1);
	void *p = pk->base ? pk->base + pk->off : NULL;
	pk->off += n;
	return p;
}

/* A copy of s in the blob (s itself in the sizing pass); NULL stays NULL. */
static inline const char *pk_str(struct packer *pk, const char *s)
{
	if (!s)
		return NULL;
	size_t n = strlen(s) + 1;
	char *p = pk_alloc(pk, n, 1);
	if (p)
		memcpy(p, s, n);
	return p ? p : s;
}

/* The string member key of o (borrowed from the JSON), or NULL. */
static inline const char *pk_jstr(const jv_t *o, const char *key)
{
	return jv_str(jv_get(o, key));
}

/* Fills the header every record has from metadata; -1 with err when it has no name. */
int pk_meta(struct packer *pk, const jv_t *obj, struct kube_obj *m, char *err, size_t errlen);
/* A string map (labels, annotations, attributes) as a kv array; keys interned. */
const struct kube_kv *pk_map(struct packer *pk, const jv_t *map, uint16_t *count);
/* A JSON array of strings; interned when the values repeat across objects. */
const char *const *pk_strv(struct packer *pk, const jv_t *arr, bool intern, uint16_t *count);
/* Node selector terms; exprs: "matchExpressions" or "matchLabelExpressions". */
const struct kube_node_selector_term *pk_terms(struct packer *pk, const jv_t *terms,
					      const char *exprs, uint16_t *count);
/* An array whose elements become fixed-size structs (at most 64 bytes), elem() filling one. */
typedef void (*pk_elem_fn)(struct packer *pk, const jv_t *e, void *out);
void *pk_array(struct packer *pk, const jv_t *arr, size_t size, pk_elem_fn elem,
	       uint16_t *count);
/*
 * A LabelSelector (matchLabels, matchExpressions) as selector text: "k=v,k in (a,b),!k"; "!"
 * (which matches nothing) when it does not fit or uses an unknown operator.
 */
void pk_selector_text(const jv_t *sel, char *buf, size_t len);
/* A quantity member of map in its unit; -1 when absent or bad. */
int64_t pk_quantity(const jv_t *map, const char *key);
/* The index of s in words[1..n-1]; 0 for NULL, other when not found. */
uint8_t pk_word(const char *s, const char *const *words, size_t n, uint8_t other);

/* A kind's fields: called twice (sizing, then copy) on rec, a zeroed struct of the kind. */
typedef int (*pk_fields_fn)(struct packer *pk, const jv_t *obj, void *rec, char *err,
			    size_t errlen);
/* Runs fn's two passes and returns the record (size: the kind's struct, at most 512 bytes). */
struct kube_obj *pk_decode(const jv_t *obj, size_t size, uint8_t kind, pk_fields_fn fn,
			   char *err, size_t errlen);

/* objects_slab.c: n bytes for a record; *cls is its size class (0: malloc). */
void *kube_slab_alloc(size_t n, uint8_t *cls);

#endif
