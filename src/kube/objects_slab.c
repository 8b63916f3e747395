/*
 * Where records live: the slab allocator and the interned strings.
 *
 * Records come from a small slab allocator rather than malloc: size classes of 8 bytes, each
 * carved from 64 KiB chunks mapped at 64 KiB boundaries, with a free list per chunk. Records then
 * cost their exact size (no malloc header or 16-byte rounding), and, more importantly, they are
 * not interleaved with the many short-lived JSON nodes decoded next to them, which otherwise pin
 * pages of heap after a LIST. A chunk whose records are all freed is unmapped (unless it is its
 * class's last one with room), so the records of a burst (10,000 VolumeAttachments attached
 * and deleted) do not stay mapped after it. Under AddressSanitizer the slab is bypassed so
 * use-after-free stays detectable.
 *
 * Strings that repeat across objects (keys of maps, driver and node names) are interned once
 * for the process's life: kube_intern() returns the one copy.
 */
#include "kube/objects_pack.h"

#include <assert.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>

#include "base/xalloc.h"
#include "kube/hmap.h"

/* ---- interning ---- */

static pthread_mutex_t intern_mu = PTHREAD_MUTEX_INITIALIZER;
static struct kube_hmap intern_map = KUBE_HMAP_INIT;

const char *kube_intern(const char *s)
{
	if (!s)
		return NULL;
	pthread_mutex_lock(&intern_mu);
	const char *k = kube_hmap_key(&intern_map, s);
	if (!k) {
		kube_hmap_put(&intern_map, s, NULL);
		k = kube_hmap_key(&intern_map, s);
	}
	pthread_mutex_unlock(&intern_mu);
	return k;
}

/* ---- record slabs ---- */

#define SLAB_GRAN 8
#define SLAB_CLASSES 127 /* class c holds records of c * 8 bytes; 0 means malloc */
#define SLAB_CHUNK (64 * 1024)

#if defined(__SANITIZE_ADDRESS__)
#define SLAB_ENABLED 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SLAB_ENABLED 0
#endif
#endif
#ifndef SLAB_ENABLED
#define SLAB_ENABLED 1
#endif

/* At the start of each chunk; a record's chunk is its address rounded down to SLAB_CHUNK. */
struct slab_chunk {
	struct slab_chunk *prev, *next; /* in its class's list of chunks with room */
	void *free_list;                /* freed slots of this chunk */
	uint32_t live;                  /* records allocated from it now */
	uint32_t bump;                  /* offset of the never-used tail */
	uint8_t cls;
	bool listed;
};

#define SLAB_FIRST ((sizeof(struct slab_chunk) + 15) & ~(size_t)15)

static pthread_mutex_t slab_mu = PTHREAD_MUTEX_INITIALIZER;
static struct slab_chunk *slab_room[SLAB_CLASSES + 1]; /* chunks with a free slot or tail */
static size_t slab_mapped;                             /* bytes, for kube_record_bytes_mapped */

static void chunk_list(struct slab_chunk *ch)
{
	ch->prev = NULL;
	ch->next = slab_room[ch->cls];
	if (ch->next)
		ch->next->prev = ch;
	slab_room[ch->cls] = ch;
	ch->listed = true;
}

static void chunk_unlist(struct slab_chunk *ch)
{
	if (ch->prev)
		ch->prev->next = ch->next;
	else
		slab_room[ch->cls] = ch->next;
	if (ch->next)
		ch->next->prev = ch->prev;
	ch->prev = ch->next = NULL;
	ch->listed = false;
}

/* A new chunk at a SLAB_CHUNK boundary: map twice the size, give back the misaligned ends. */
static struct slab_chunk *chunk_new(uint8_t cls)
{
	char *m = mmap(NULL, 2 * SLAB_CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	if (m == MAP_FAILED) {
		fprintf(stderr, "kcsi: out of memory (record slab)\n");
		abort();
	}
	char *start = (char *)(((uintptr_t)m + SLAB_CHUNK - 1) & ~(uintptr_t)(SLAB_CHUNK - 1));
	if (start > m)
		munmap(m, (size_t)(start - m));
	if (start + SLAB_CHUNK < m + 2 * SLAB_CHUNK)
		munmap(start + SLAB_CHUNK, (size_t)(m + 2 * SLAB_CHUNK - (start + SLAB_CHUNK)));
	struct slab_chunk *ch = (struct slab_chunk *)start;
	ch->cls = cls;
	ch->bump = (uint32_t)SLAB_FIRST;
	slab_mapped += SLAB_CHUNK;
	chunk_list(ch);
	return ch;
}

static bool chunk_has_room(const struct slab_chunk *ch)
{
	return ch->free_list || ch->bump + (size_t)ch->cls * SLAB_GRAN <= SLAB_CHUNK;
}

/* Returns zeroed memory of at least n bytes; *cls receives the class to free it with. */
void *kube_slab_alloc(size_t n, uint8_t *cls)
{
	size_t c = (n + SLAB_GRAN - 1) / SLAB_GRAN;
	if (!SLAB_ENABLED || c > SLAB_CLASSES) {
		*cls = 0;
		return xcalloc(1, n);
	}
	size_t sz = c * SLAB_GRAN;
	pthread_mutex_lock(&slab_mu);
	struct slab_chunk *ch = slab_room[c] ? slab_room[c] : chunk_new((uint8_t)c);
	void *p = ch->free_list;
	if (p) {
		ch->free_list = *(void **)p;
	} else {
		p = (char *)ch + ch->bump;
		ch->bump += (uint32_t)sz;
	}
	ch->live++;
	if (!chunk_has_room(ch))
		chunk_unlist(ch);
	pthread_mutex_unlock(&slab_mu);
	memset(p, 0, sz);
	*cls = (uint8_t)c;
	return p;
}

static void slab_free(void *p, uint8_t cls)
{
	if (!cls) {
		free(p);
		return;
	}
	struct slab_chunk *ch = (struct slab_chunk *)((uintptr_t)p & ~(uintptr_t)(SLAB_CHUNK - 1));
	pthread_mutex_lock(&slab_mu);
	*(void **)p = ch->free_list;
	ch->free_list = p;
	ch->live--;
	if (!ch->listed)
		chunk_list(ch);
	/* Empty: unmap it, unless the class would have no chunk with room left. */
	bool unmap = ch->live == 0 && (ch->prev || ch->next);
	if (unmap) {
		chunk_unlist(ch);
		slab_mapped -= SLAB_CHUNK;
	}
	pthread_mutex_unlock(&slab_mu);
	if (unmap)
		munmap(ch, SLAB_CHUNK);
}

size_t kube_record_bytes_mapped(void)
{
	pthread_mutex_lock(&slab_mu);
	size_t n = slab_mapped;
	pthread_mutex_unlock(&slab_mu);
	return n;
}

/* ---- a record's end ---- */

void kube_obj_unref(struct kube_obj *o)
{
	if (o && atomic_fetch_sub_explicit(&o->refs, 1, memory_order_acq_rel) == 1)
		slab_free(o, o->flags >> 1);
}

size_t kube_obj_mem_size(const struct kube_obj *o)
{
	uint8_t cls = o->flags >> 1;
	return cls ? (size_t)cls * SLAB_GRAN : malloc_usable_size((void *)o) + sizeof(size_t);
}
