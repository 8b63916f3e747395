/*
 * kube hmap: a string-keyed hash map, open addressing with linear probing.
 *
 * Used by the workqueue (dirty/processing sets, failure counts), the intern table and the
 * informer indexes. The map owns a copy of each key; values are opaque pointers owned by the
 * caller. Not thread-safe: every user guards its map with its own lock.
 *
 * Invariants: `cap` is 0 or a power of two; `len` < cap / 2 after any insert (so probes stay
 * short); removal uses backward-shift so no tombstones are needed.
 */
#ifndef KCSI_KUBE_HMAP_H
#define KCSI_KUBE_HMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kube_hmap_slot {
	char *key; /* NULL when the slot is free */
	uint32_t hash;
	void *value;
};

struct kube_hmap {
	struct kube_hmap_slot *slots;
	size_t cap;
	size_t len;
};

#define KUBE_HMAP_INIT { NULL, 0, 0 }

uint32_t kube_hash_str(const char *s);

/* Returns the value for key, or NULL (use kube_hmap_has to tell a NULL value from absence). */
void *kube_hmap_get(const struct kube_hmap *m, const char *key);
bool kube_hmap_has(const struct kube_hmap *m, const char *key);
/* Sets key to value; returns the previous value (NULL if the key was new). */
void *kube_hmap_put(struct kube_hmap *m, const char *key, void *value);
/* Returns the stored key string of an entry (owned by the map), or NULL. */
const char *kube_hmap_key(const struct kube_hmap *m, const char *key);
/* Removes key; returns its value, or NULL. A map less than 1/8 full shrinks (slots move). */
void *kube_hmap_del(struct kube_hmap *m, const char *key);
/* Frees the slots and keys (not the values). */
void kube_hmap_clear(struct kube_hmap *m);

/* Iteration: for (size_t i = 0; i < m->cap; i++) if (m->slots[i].key) ... (no changes meanwhile). */

#endif
