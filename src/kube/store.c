/*
 * The table is an open-addressing array of record pointers: the record already holds its
 * namespace and name, so the table stores no keys of its own (8 bytes per slot at a load factor
 * up to 3/4). Deletion uses backward shift, as in hmap.c. Index entries are small arrays of
 * record pointers per value in a kube_hmap; they hold no references of their own, since the
 * store's table reference outlives every index entry of the same record.
 */
#include "kube/store.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/xalloc.h"
#include "kube/hmap.h"

#define MAX_INDEXES 4
#define MAX_VALUES 16

struct idx_set {
	size_t n, cap;
	struct kube_obj **v;
};

struct index {
	char *name;
	kube_index_fn fn;
	struct kube_hmap map; /* value -> struct idx_set* */
};

struct kube_store {
	pthread_rwlock_t lock;
	struct kube_obj **slots;
	size_t cap, len;
	struct index idx[MAX_INDEXES];
	int nidx;
};

static const char *ns_norm(const char *ns)
{
	return ns ? ns : "";
}

static uint32_t key_hash(const char *ns, const char *name)
{
	return kube_hash_str(ns_norm(ns)) * 31u + kube_hash_str(name);
}

static bool key_eq(const struct kube_obj *o, const char *ns, const char *name)
{
	return strcmp(o->name, name) == 0 && strcmp(ns_norm(o->ns), ns_norm(ns)) == 0;
}

static size_t find(const struct kube_store *s, const char *ns, const char *name)
{
	size_t mask = s->cap - 1, i = key_hash(ns, name) & mask;
	while (s->slots[i] && !key_eq(s->slots[i], ns, name))
		i = (i + 1) & mask;
	return i;
}

static void grow(struct kube_store *s)
{
	size_t ncap = s->cap ? s->cap * 2 : 64;
	struct kube_obj **ns = xcalloc(ncap, sizeof(*ns));
	for (size_t i = 0; i < s->cap; i++) {
		struct kube_obj *o = s->slots[i];
		if (!o)
			continue;
		size_t j = key_hash(o->ns, o->name) & (ncap - 1);
		while (ns[j])
			j = (j + 1) & (ncap - 1);
		ns[j] = o;
	}
	free(s->slots);
	s->slots = ns;
	s->cap = ncap;
}

static size_t one_value(const char *v, const char **vals, size_t max)
{
	if (!v || !max)
		return 0;
	vals[0] = v;
	return 1;
}

size_t kube_index_va_by_pv(const struct kube_obj *o, const char **vals, size_t max)
{
	const struct kube_va *va = kube_va_of(o);
	return va ? one_value(va->pv_name, vals, max) : 0;
}

size_t kube_index_va_by_node(const struct kube_obj *o, const char **vals, size_t max)
{
	const struct kube_va *va = kube_va_of(o);
	return va ? one_value(va->node_name, vals, max) : 0;
}

size_t kube_index_pod_by_node(const struct kube_obj *o, const char **vals, size_t max)
{
	const struct kube_pod *pod = kube_pod_of(o);
	return pod ? one_value(pod->node_name, vals, max) : 0;
}

size_t kube_index_pvc_by_volume(const struct kube_obj *o, const char **vals, size_t max)
{
	const struct kube_pvc *pvc = kube_pvc_of(o);
	return pvc ? one_value(pvc->volume_name, vals, max) : 0;
}

struct kube_store *kube_store_new(void)
{
	struct kube_store *s = xcalloc(1, sizeof(*s));
	pthread_rwlock_init(&s->lock, NULL);
	return s;
}

static void idx_free(struct index *ix)
{
	for (size_t i = 0; i < ix->map.cap; i++) {
		struct idx_set *set = ix->map.slots[i].value;
		if (ix->map.slots[i].key && set) {
			free(set->v);
			free(set);
		}
	}
	kube_hmap_clear(&ix->map);
	free(ix->name);
}

void kube_store_free(struct kube_store *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->cap; i++)
		kube_obj_unref(s->slots[i]);
	free(s->slots);
	for (int i = 0; i < s->nidx; i++)
		idx_free(&s->idx[i]);
	pthread_rwlock_destroy(&s->lock);
	free(s);
}

void kube_store_add_index(struct kube_store *s, const char *name, kube_index_fn fn)
{
	if (s->nidx >= MAX_INDEXES)
		abort(); /* a programming error: kcsi registers at most a couple */
	s->idx[s->nidx].name = xstrdup(name);
	s->idx[s->nidx].fn = fn;
	s->nidx++;
}

static void idx_add(struct kube_store *s, struct kube_obj *o)
{
	for (int i = 0; i < s->nidx; i++) {
		const char *vals[MAX_VALUES];
		size_t n = s->idx[i].fn(o, vals, MAX_VALUES);
		for (size_t k = 0; k < n; k++) {
			struct idx_set *set = kube_hmap_get(&s->idx[i].map, vals[k]);
			if (!set) {
				set = xcalloc(1, sizeof(*set));
				kube_hmap_put(&s->idx[i].map, vals[k], set);
			}
			if (set->n == set->cap) {
				set->cap = set->cap ? set->cap * 2 : 2;
				set->v = xrealloc(set->v, set->cap * sizeof(*set->v));
			}
			set->v[set->n++] = o;
		}
	}
}

static void idx_del(struct kube_store *s, struct kube_obj *o)
{
	for (int i = 0; i < s->nidx; i++) {
		const char *vals[MAX_VALUES];
		size_t n = s->idx[i].fn(o, vals, MAX_VALUES);
		for (size_t k = 0; k < n; k++) {
			struct idx_set *set = kube_hmap_get(&s->idx[i].map, vals[k]);
			if (!set)
				continue;
			for (size_t j = 0; j < set->n; j++) {
				if (set->v[j] == o) {
					set->v[j] = set->v[--set->n];
					break;
				}
			}
			if (!set->n) {
				kube_hmap_del(&s->idx[i].map, vals[k]);
				free(set->v);
				free(set);
			}
		}
	}
}

struct kube_obj *kube_store_get(struct kube_store *s, const char *ns, const char *name)
{
	struct kube_obj *o = NULL;
	pthread_rwlock_rdlock(&s->lock);
	if (s->cap)
		o = kube_obj_ref(s->slots[find(s, ns, name)]);
	pthread_rwlock_unlock(&s->lock);
	return o;
}

size_t kube_store_len(struct kube_store *s)
{
	pthread_rwlock_rdlock(&s->lock);
	size_t n = s->len;
	pthread_rwlock_unlock(&s->lock);
	return n;
}

struct kube_obj **kube_store_list(struct kube_store *s, size_t *n)
{
	pthread_rwlock_rdlock(&s->lock);
	struct kube_obj **v = xmalloc((s->len + 1) * sizeof(*v));
	size_t k = 0;
	for (size_t i = 0; i < s->cap; i++)
		if (s->slots[i])
			v[k++] = kube_obj_ref(s->slots[i]);
	pthread_rwlock_unlock(&s->lock);
	*n = k;
	return v;
}

struct kube_obj **kube_store_by_index(struct kube_store *s, const char *index, const char *value,
				      size_t *n)
{
	struct kube_obj **v = NULL;
	*n = 0;
	pthread_rwlock_rdlock(&s->lock);
	for (int i = 0; i < s->nidx; i++) {
		if (strcmp(s->idx[i].name, index) != 0)
			continue;
		struct idx_set *set = kube_hmap_get(&s->idx[i].map, value);
		size_t cnt = set ? set->n : 0;
		v = xmalloc((cnt + 1) * sizeof(*v));
		for (size_t j = 0; j < cnt; j++)
			v[j] = kube_obj_ref(set->v[j]);
		*n = cnt;
	}
	pthread_rwlock_unlock(&s->lock);
	if (!v)
		v = xmalloc(sizeof(*v));
	return v;
}

void kube_objs_free(struct kube_obj **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		kube_obj_unref(v[i]);
	free(v);
}

struct kube_obj *kube_store_put(struct kube_store *s, struct kube_obj *o)
{
	pthread_rwlock_wrlock(&s->lock);
	if ((s->len + 1) * 4 > s->cap * 3)
		grow(s);
	size_t i = find(s, o->ns, o->name);
	struct kube_obj *old = s->slots[i];
	if (old)
		idx_del(s, old);
	else
		s->len++;
	s->slots[i] = o;
	idx_add(s, o);
	pthread_rwlock_unlock(&s->lock);
	return old;
}

struct kube_obj *kube_store_remove(struct kube_store *s, const char *ns, const char *name)
{
	pthread_rwlock_wrlock(&s->lock);
	struct kube_obj *old = NULL;
	if (s->cap) {
		size_t mask = s->cap - 1, i = find(s, ns, name);
		old = s->slots[i];
		if (old) {
			idx_del(s, old);
			s->slots[i] = NULL;
			s->len--;
			size_t j = i;
			for (;;) {
				j = (j + 1) & mask;
				struct kube_obj *e = s->slots[j];
				if (!e)
					break;
				size_t home = key_hash(e->ns, e->name) & mask;
				bool in_range = (i <= j) ? (home > i && home <= j) : (home > i || home <= j);
				if (in_range)
					continue;
				s->slots[i] = e;
				s->slots[j] = NULL;
				i = j;
			}
		}
	}
	pthread_rwlock_unlock(&s->lock);
	return old;
}
