/*
 * Open addressing keeps each entry in one array slot (key pointer, hash, value): one allocation
 * per key and no per-entry nodes, which matters for maps with tens of thousands of keys. The
 * load factor is kept under 1/2; deletion shifts following entries back instead of leaving
 * tombstones, so lookups never degrade after churn.
 */
#include "kube/hmap.h"

#include <stdlib.h>
#include <string.h>

#include "base/xalloc.h"

uint32_t kube_hash_str(const char *s)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 16777619u;
	}
	return h;
}

static size_t find_slot(const struct kube_hmap *m, const char *key, uint32_t h)
{
	size_t mask = m->cap - 1;
	size_t i = h & mask;
	while (m->slots[i].key) {
		if (m->slots[i].hash == h && strcmp(m->slots[i].key, key) == 0)
			return i;
		i = (i + 1) & mask;
	}
	return i;
}

#define HMAP_MIN_SHRINK 64 /* slots; smaller maps are never shrunk */

static void resize(struct kube_hmap *m, size_t ncap)
{
	struct kube_hmap_slot *ns = xcalloc(ncap, sizeof(*ns));
	for (size_t i = 0; i < m->cap; i++) {
		if (!m->slots[i].key)
			continue;
		size_t j = m->slots[i].hash & (ncap - 1);
		while (ns[j].key)
			j = (j + 1) & (ncap - 1);
		ns[j] = m->slots[i];
	}
	free(m->slots);
	m->slots = ns;
	m->cap = ncap;
}

void *kube_hmap_get(const struct kube_hmap *m, const char *key)
{
	if (!m->cap)
		return NULL;
	size_t i = find_slot(m, key, kube_hash_str(key));
	return m->slots[i].key ? m->slots[i].value : NULL;
}

bool kube_hmap_has(const struct kube_hmap *m, const char *key)
{
	return kube_hmap_key(m, key) != NULL;
}

const char *kube_hmap_key(const struct kube_hmap *m, const char *key)
{
	if (!m->cap)
		return NULL;
	return m->slots[find_slot(m, key, kube_hash_str(key))].key;
}

void *kube_hmap_put(struct kube_hmap *m, const char *key, void *value)
{
	if ((m->len + 1) * 2 > m->cap)
		resize(m, m->cap ? m->cap * 2 : 16);
	uint32_t h = kube_hash_str(key);
	size_t i = find_slot(m, key, h);
	if (m->slots[i].key) {
		void *old = m->slots[i].value;
		m->slots[i].value = value;
		return old;
	}
	m->slots[i].key = xstrdup(key);
	m->slots[i].hash = h;
	m->slots[i].value = value;
	m->len++;
	return NULL;
}

void *kube_hmap_del(struct kube_hmap *m, const char *key)
{
	if (!m->cap)
		return NULL;
	size_t mask = m->cap - 1;
	size_t i = find_slot(m, key, kube_hash_str(key));
	if (!m->slots[i].key)
		return NULL;
	void *old = m->slots[i].value;
	free(m->slots[i].key);
	m->slots[i].key = NULL;
	m->len--;
	/* Backward shift: move later entries of the same probe run into the hole. */
	size_t j = i;
	for (;;) {
		j = (j + 1) & mask;
		if (!m->slots[j].key)
			break;
		size_t home = m->slots[j].hash & mask;
		/* Entry j may move to i only if its home is not in the cyclic range (i, j]. */
		bool in_range = (i <= j) ? (home > i && home <= j) : (home > i || home <= j);
		if (in_range)
			continue;
		m->slots[i] = m->slots[j];
		m->slots[j].key = NULL;
		i = j;
	}
	/* Shrink below 1/8 full, to at least 1/4 full: a map a burst grew (a work queue's 10,000
	 * keys) does not keep its slots after the burst. */
	if (m->cap > HMAP_MIN_SHRINK && m->len * 8 < m->cap) {
		size_t ncap = m->cap;
		while (ncap > HMAP_MIN_SHRINK && m->len * 4 < ncap)
			ncap /= 2;
		resize(m, ncap);
	}
	return old;
}

void kube_hmap_clear(struct kube_hmap *m)
{
	for (size_t i = 0; i < m->cap; i++)
		free(m->slots[i].key);
	free(m->slots);
	m->slots = NULL;
	m->cap = m->len = 0;
}
