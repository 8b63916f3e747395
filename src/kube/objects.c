/*
 * Decoders run twice over the same JSON: a sizing pass that only adds up the bytes the blob
 * needs (pk->base is NULL, arrays are not written), then a copy pass into one allocation of
 * exactly struct + blob. One malloc per object keeps allocator overhead to a single chunk
 * header, which is most of what makes a cached VolumeAttachment cost a few hundred bytes.
 *
 * Records come from a small slab allocator rather than malloc: size classes of 8 bytes, each
 * carved from 64 KiB chunks mapped at 64 KiB boundaries, with a free list per chunk. Records then
 * cost their exact size (no malloc header or 16-byte rounding), and, more importantly, they are
 * not interleaved with the many short-lived JSON nodes decoded next to them, which otherwise pin
 * pages of heap after a LIST. A chunk whose records are all freed is unmapped (unless it is its
 * class's last one with room), so the records of a burst (10,000 VolumeAttachments attached
 * and deleted) do not stay mapped after it. Under AddressSanitizer the slab is bypassed so
 * use-after-free stays detectable.
 */
#include "kube/objects.h"

#include <assert.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>

#include "base/timeutil.h"
#include "base/xalloc.h"
#include "kube/hmap.h"
#include "kube/quantity.h"

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
static void *slab_alloc(size_t n, uint8_t *cls)
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

/* ---- packing ---- */

struct packer {
	char *base; /* NULL in the sizing pass */
	size_t off;
};

static void *pk_alloc(struct packer *pk, size_t n, size_t align)
{
	pk->off = (pk->off + align - 1) & ~(align - 1);
	void *p = pk->base ? pk->base + pk->off : NULL;
	pk->off += n;
	return p;
}

static const char *pk_str(struct packer *pk, const char *s)
{
	if (!s)
		return NULL;
	size_t n = strlen(s) + 1;
	char *p = pk_alloc(pk, n, 1);
	if (p)
		memcpy(p, s, n);
	return p ? p : s;
}

static const char *jstr(const jv_t *o, const char *key)
{
	return jv_str(jv_get(o, key));
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9') return c - '0';
	if (c >= 'a' && c <= 'f') return c - 'a' + 10;
	return -1;
}

/* Parses a lowercase canonical UUID into 16 bytes. */
static bool uuid_parse(const char *s, uint8_t out[16])
{
	if (!s || strlen(s) != 36)
		return false;
	int j = 0;
	for (int i = 0; i < 36;) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i++] != '-')
				return false;
			continue;
		}
		int a = hexval(s[i]), b = hexval(s[i + 1]);
		if (a < 0 || b < 0)
			return false;
		out[j++] = (uint8_t)(a << 4 | b);
		i += 2;
	}
	return true;
}

/*
 * Fills the common header from metadata. Returns -1 when the object has no name.
 */
static int decode_meta(struct packer *pk, const jv_t *obj, struct kube_obj *m, char *err, size_t errlen)
{
	const jv_t *md = jv_get(obj, "metadata");
	const char *name = jstr(md, "name");
	if (!name || !*name) {
		snprintf(err, errlen, "object without metadata.name");
		return -1;
	}
	m->name = pk_str(pk, name);
	m->ns = kube_intern(jstr(md, "namespace"));
	m->rv = pk_str(pk, jstr(md, "resourceVersion") ? jstr(md, "resourceVersion") : "");
	const char *uid = jstr(md, "uid");
	if (uuid_parse(uid, m->uid.bin)) {
		m->flags |= KUBE_OBJ_UID_BINARY;
	} else {
		m->flags &= ~KUBE_OBJ_UID_BINARY;
		m->uid.str = pk_str(pk, uid ? uid : "");
	}
	m->generation = jv_int(jv_get(md, "generation"));
	const char *dts = jstr(md, "deletionTimestamp");
	time_t t = 0;
	m->deletion_ts = (dts && rfc3339_parse(dts, &t) == 0) ? (int64_t)t : (dts ? 1 : 0);
	const jv_t *fin = jv_get(md, "finalizers");
	size_t n = jv_is_array(fin) ? jv_size(fin) : 0;
	if (n > UINT16_MAX)
		n = UINT16_MAX;
	const char **arr = pk_alloc(pk, n * sizeof(char *), sizeof(char *));
	m->nfinalizers = (uint16_t)n;
	m->finalizers = arr;
	const jv_t *fe = jv_first(fin);
	for (size_t i = 0; i < n; i++, fe = jv_next(fe)) {
		const char *f = kube_intern(jv_str(fe));
		if (arr)
			arr[i] = f ? f : kube_intern("");
	}
	return 0;
}

/* Packs a string map (labels, annotations, attributes) as a kv array. */
static const struct kube_kv *pk_map(struct packer *pk, const jv_t *map, uint16_t *count)
{
	size_t n = jv_is_object(map) ? jv_size(map) : 0;
	if (n > UINT16_MAX)
		n = UINT16_MAX;
	struct kube_kv *kv = pk_alloc(pk, n * sizeof(*kv), sizeof(char *));
	size_t i = 0;
	const char *k;
	const jv_t *v;
	jv_object_foreach(map, k, v) {
		if (i >= n)
			break;
		/* Keys repeat across objects (devicePath, attribute names): interned. */
		const char *ks = kube_intern(k), *vs = pk_str(pk, jv_is_string(v) ? jv_str(v) : "");
		if (kv) {
			kv[i].key = ks;
			kv[i].value = vs;
		}
		i++;
	}
	*count = (uint16_t)n;
	return kv;
}

/* Packs a JSON array of strings; interned when the values repeat across objects. */
static const char *const *pk_strv(struct packer *pk, const jv_t *arr, bool intern, uint16_t *count)
{
	size_t n = jv_is_array(arr) ? jv_size(arr) : 0;
	if (n > UINT16_MAX)
		n = UINT16_MAX;
	const char **v = pk_alloc(pk, n * sizeof(char *), sizeof(char *));
	const jv_t *ae = jv_first(arr);
	for (size_t i = 0; i < n; i++, ae = jv_next(ae)) {
		const char *e = jv_str(ae);
		e = intern ? kube_intern(e ? e : "") : pk_str(pk, e ? e : "");
		if (v)
			v[i] = e;
	}
	*count = (uint16_t)n;
	return v;
}

static uint8_t selector_op(const char *op)
{
	if (!op || !strcmp(op, "In")) return KUBE_OP_IN;
	if (!strcmp(op, "NotIn")) return KUBE_OP_NOT_IN;
	if (!strcmp(op, "Exists")) return KUBE_OP_EXISTS;
	if (!strcmp(op, "DoesNotExist")) return KUBE_OP_DOES_NOT_EXIST;
	if (!strcmp(op, "Gt")) return KUBE_OP_GT;
	if (!strcmp(op, "Lt")) return KUBE_OP_LT;
	return KUBE_OP_DOES_NOT_EXIST + 16; /* unknown operator: matches nothing */
}

/*
 * Packs node selector terms. `exprs` names the member holding the requirements:
 * "matchExpressions" (nodeAffinity) or "matchLabelExpressions" (allowedTopologies, op In).
 */
static const struct kube_node_selector_term *pk_terms(struct packer *pk, const jv_t *terms,
						      const char *exprs, uint16_t *count)
{
	size_t n = jv_is_array(terms) ? jv_size(terms) : 0;
	if (n > UINT16_MAX)
		n = UINT16_MAX;
	struct kube_node_selector_term *t = pk_alloc(pk, n * sizeof(*t), sizeof(char *));
	const jv_t *te = jv_first(terms);
	for (size_t i = 0; i < n; i++, te = jv_next(te)) {
		const jv_t *ex = jv_get(te, exprs);
		size_t nr = jv_is_array(ex) ? jv_size(ex) : 0;
		if (nr > UINT16_MAX)
			nr = UINT16_MAX;
		struct kube_node_selector_req *r = pk_alloc(pk, nr * sizeof(*r), sizeof(char *));
		const jv_t *e = jv_first(ex);
		for (size_t k = 0; k < nr; k++, e = jv_next(e)) {
			const char *key = kube_intern(jstr(e, "key"));
			uint16_t nv;
			const char *const *vals = pk_strv(pk, jv_get(e, "values"), true, &nv);
			if (r) {
				r[k].key = key ? key : kube_intern("");
				r[k].values = vals;
				r[k].nvalues = nv;
				r[k].op = selector_op(jstr(e, "operator"));
			}
		}
		if (t) {
			t[i].reqs = r;
			t[i].nreqs = (uint16_t)nr;
		}
	}
	*count = (uint16_t)n;
	return t;
}

static const char *label_value(const struct kube_kv *labels, uint16_t n, const char *key)
{
	for (uint16_t i = 0; i < n; i++)
		if (!strcmp(labels[i].key, key))
			return labels[i].value;
	return NULL;
}

static bool req_match(const struct kube_node_selector_req *r, const struct kube_kv *labels,
		      uint16_t nlabels)
{
	const char *v = label_value(labels, nlabels, r->key);
	bool in = false;
	for (uint16_t i = 0; v && i < r->nvalues; i++)
		in = in || !strcmp(v, r->values[i]);
	switch (r->op) {
	case KUBE_OP_IN: return in;
	case KUBE_OP_NOT_IN: return !in;
	case KUBE_OP_EXISTS: return v != NULL;
	case KUBE_OP_DOES_NOT_EXIST: return v == NULL;
	case KUBE_OP_GT:
	case KUBE_OP_LT: {
		if (!v || r->nvalues != 1)
			return false;
		char *end1, *end2;
		long long a = strtoll(v, &end1, 10), b = strtoll(r->values[0], &end2, 10);
		if (*end1 || *end2 || !*v || !*r->values[0])
			return false;
		return r->op == KUBE_OP_GT ? a > b : a < b;
	}
	default: return false;
	}
}

bool kube_node_selector_match(const struct kube_node_selector_term *terms, uint16_t nterms,
			      const struct kube_kv *labels, uint16_t nlabels)
{
	if (nterms == 0)
		return true;
	for (uint16_t t = 0; t < nterms; t++) {
		bool all = true;
		for (uint16_t i = 0; all && i < terms[t].nreqs; i++)
			all = req_match(&terms[t].reqs[i], labels, nlabels);
		/* A term without requirements matches nothing, as in Kubernetes. */
		if (all && terms[t].nreqs > 0)
			return true;
	}
	return false;
}

typedef int (*decode_fn)(struct packer *pk, const jv_t *obj, void *rec, char *err, size_t errlen);

/* Runs a decoder's two passes and returns the record. */
static struct kube_obj *decode2(const jv_t *obj, size_t size, uint8_t kind, decode_fn fn, char *err,
				size_t errlen)
{
	_Alignas(max_align_t) char scratch[512];
	if (size > sizeof(scratch))
		abort();
	memset(scratch, 0, size);
	struct packer pk = { NULL, size };
	if (fn(&pk, obj, scratch, err, errlen) != 0)
		return NULL;
	uint8_t cls;
	char *mem = slab_alloc(pk.off, &cls);
	pk.base = mem;
	pk.off = size;
	fn(&pk, obj, mem, err, errlen);
	struct kube_obj *o = (struct kube_obj *)mem;
	atomic_init(&o->refs, 1);
	o->kind = kind;
	o->flags = (uint8_t)((o->flags & KUBE_OBJ_UID_BINARY) | (cls << 1));
	return o;
}

/* ---- VolumeAttachment ---- */

static int va_fields(struct packer *pk, const jv_t *obj, void *rec, char *err, size_t errlen)
{
	struct kube_va *va = rec;
	if (decode_meta(pk, obj, &va->meta, err, errlen))
		return -1;
	const jv_t *spec = jv_get(obj, "spec"), *st = jv_get(obj, "status");
	const jv_t *src = jv_get(spec, "source");
	va->attacher = kube_intern(jstr(spec, "attacher"));
	va->node_name = kube_intern(jstr(spec, "nodeName"));
	va->pv_name = pk_str(pk, jstr(src, "persistentVolumeName"));
	va->inline_spec = jv_is_object(jv_get(src, "inlineVolumeSpec"));
	const jv_t *ann = jv_get(jv_get(obj, "metadata"), "annotations");
	va->node_id = pk_str(pk, jstr(ann, "csi.alpha.kubernetes.io/node-id"));
	va->attached = jv_is_true(jv_get(st, "attached"));
	va->metadata = pk_map(pk, jv_get(st, "attachmentMetadata"), &va->nmetadata);
	va->attach_error = pk_str(pk, jstr(jv_get(st, "attachError"), "message"));
	va->detach_error = pk_str(pk, jstr(jv_get(st, "detachError"), "message"));
	return 0;
}

static struct kube_obj *va_decode(const jv_t *obj, char *err, size_t errlen)
{
	return decode2(obj, sizeof(struct kube_va), KUBE_KIND_VA, va_fields, err, errlen);
}

/* ---- PersistentVolume ---- */

static uint8_t access_mode(const char *s)
{
	if (!s) return 0;
	if (!strcmp(s, "ReadWriteOnce")) return KUBE_RWO;
	if (!strcmp(s, "ReadOnlyMany")) return KUBE_ROX;
	if (!strcmp(s, "ReadWriteMany")) return KUBE_RWX;
	if (!strcmp(s, "ReadWriteOncePod")) return KUBE_RWOP;
	return 0;
}

static uint8_t access_modes(const jv_t *arr)
{
	uint8_t m = 0;
	size_t i;
	const jv_t *v;
	jv_array_foreach(arr, i, v)
		m |= access_mode(jv_str(v));
	return m;
}

static uint8_t pv_phase(const char *s)
{
	if (!s) return KUBE_PV_PENDING;
	if (!strcmp(s, "Available")) return KUBE_PV_AVAILABLE;
	if (!strcmp(s, "Bound")) return KUBE_PV_BOUND;
	if (!strcmp(s, "Released")) return KUBE_PV_RELEASED;
	if (!strcmp(s, "Failed")) return KUBE_PV_FAILED;
	return KUBE_PV_PENDING;
}

static int pv_fields(struct packer *pk, const jv_t *obj, void *rec, char *err, size_t errlen)
{
	struct kube_pv *pv = rec;
	if (decode_meta(pk, obj, &pv->meta, err, errlen))
		return -1;
	const jv_t *spec = jv_get(obj, "spec");
	const jv_t *csi = jv_get(spec, "csi");
	pv->driver = kube_intern(jstr(csi, "driver"));
	pv->volume_handle = pk_str(pk, jstr(csi, "volumeHandle"));
	pv->fs_type = kube_intern(jstr(csi, "fsType"));
	pv->read_only = jv_is_true(jv_get(csi, "readOnly"));
	pv->volume_attributes = pk_map(pk, jv_get(csi, "volumeAttributes"),
				       &pv->nvolume_attributes);
	const jv_t *sec = jv_get(csi, "controllerPublishSecretRef");
	pv->secret_name = kube_intern(jstr(sec, "name"));
	pv->secret_ns = kube_intern(jstr(sec, "namespace"));
	pv->mount_options = pk_strv(pk, jv_get(spec, "mountOptions"), false, &pv->nmount_options);
	pv->storage_class = kube_intern(jstr(spec, "storageClassName"));
	const jv_t *claim = jv_get(spec, "claimRef");
	pv->claim_ns = kube_intern(jstr(claim, "namespace"));
	pv->claim_name = pk_str(pk, jstr(claim, "name"));
	const char *cap = jstr(jv_get(spec, "capacity"), "storage");
	char qerr[128];
	int64_t bytes;
	pv->capacity = (cap && kube_quantity_parse(cap, &bytes, qerr, sizeof(qerr)) == 0) ? bytes : -1;
	pv->access_modes = access_modes(jv_get(spec, "accessModes"));
	pv->first_access_mode = access_mode(jv_str(jv_first(jv_get(spec, "accessModes"))));
	const char *mode = jstr(spec, "volumeMode");
	pv->block = mode && !strcmp(mode, "Block");
	const char *rp = jstr(spec, "persistentVolumeReclaimPolicy");
	pv->reclaim = !rp || !strcmp(rp, "Delete") ? 0 : !strcmp(rp, "Retain") ? 1 : 2;
	pv->phase = pv_phase(jstr(jv_get(obj, "status"), "phase"));
	pv->claim_uid = pk_str(pk, jstr(claim, "uid"));
	const jv_t *md = jv_get(obj, "metadata"), *ann = jv_get(md, "annotations");
	const char *bbc = jstr(ann, "pv.kubernetes.io/bound-by-controller");
	pv->bound_by_controller = bbc && !strcmp(bbc, "yes");
	pv->provisioned_by = kube_intern(jstr(ann, "pv.kubernetes.io/provisioned-by"));
	pv->delete_secret_name = kube_intern(jstr(ann, "volume.kubernetes.io/provisioner-deletion-secret-name"));
	pv->delete_secret_ns = kube_intern(jstr(ann, "volume.kubernetes.io/provisioner-deletion-secret-namespace"));
	pv->labels = pk_map(pk, jv_get(md, "labels"), &pv->nlabels);
	const jv_t *req = jv_get(jv_get(spec, "nodeAffinity"), "required");
	pv->node_affinity = pk_terms(pk, jv_get(req, "nodeSelectorTerms"), "matchExpressions",
				     &pv->nnode_affinity);
	/* kcsi-node */
	const jv_t *nss = jv_get(csi, "nodeStageSecretRef");
	pv->node_stage_secret_name = kube_intern(jstr(nss, "name"));
	pv->node_stage_secret_ns = kube_intern(jstr(nss, "namespace"));
	const jv_t *nps = jv_get(csi, "nodePublishSecretRef");
	pv->node_publish_secret_name = kube_intern(jstr(nps, "name"));
	/* csi-resizer */
	const jv_t *ces = jv_get(csi, "controllerExpandSecretRef");
	pv->expand_secret_name = kube_intern(jstr(ces, "name"));
	pv->expand_secret_ns = kube_intern(jstr(ces, "namespace"));
	pv->vac_name = kube_intern(jstr(spec, "volumeAttributesClassName"));
	pv->node_publish_secret_ns = kube_intern(jstr(nps, "namespace"));
	return 0;
}

static struct kube_obj *pv_decode(const jv_t *obj, char *err, size_t errlen)
{
	return decode2(obj, sizeof(struct kube_pv), KUBE_KIND_PV, pv_fields, err, errlen);
}

/* A quantity of a map (status.capacity, allocatable, ...) in its unit; -1 when absent or bad. */
static int64_t quantity_or(const jv_t *map, const char *key)
{
	const char *q = jstr(map, key);
	char err[128];
	int64_t v;
	return (q && kube_quantity_parse(q, &v, err, sizeof(err)) == 0) ? v : -1;
}

/* ---- CSINode and Node ---- */

static int csinode_fields(struct packer *pk, const jv_t *obj, void *rec, char *err, size_t errlen)
{
	struct kube_csinode *cn = rec;
	if (decode_meta(pk, obj, &cn->meta, err, errlen))
		return -1;
	const jv_t *drv = jv_get(jv_get(obj, "spec"), "drivers");
	size_t n = jv_is_array(drv) ? jv_size(drv) : 0;
	if (n > UINT16_MAX)
		n = UINT16_MAX;
	struct kube_csinode_driver *d = pk_alloc(pk, n * sizeof(*d), sizeof(char *));
	const jv_t *e = jv_first(drv);
	for (size_t i = 0; i < n; i++, e = jv_next(e)) {
		/* The API server requires both; an object that lacks one is refused whole (the
		 * informer logs and skips it) rather than cached with a NULL its readers trip on. */
		if (!jstr(e, "name") || !*jstr(e, "name") || !jstr(e, "nodeID")) {
			snprintf(err, errlen, "CSINode %s: spec.drivers[%zu] has no %s",
				 cn->meta.name, i, jstr(e, "name") && *jstr(e, "name") ? "nodeID" : "name");
			return -1;
		}
		const char *name = kube_intern(jstr(e, "name"));
		const char *id = pk_str(pk, jstr(e, "nodeID"));
		const jv_t *tk = jv_get(e, "topologyKeys");
		size_t nk = jv_is_array(tk) ? jv_size(tk) : 0;
		if (nk > UINT16_MAX)
			nk = UINT16_MAX;
		const char **keys = pk_alloc(pk, nk * sizeof(char *), sizeof(char *));
		const jv_t *ke = jv_first(tk);
		for (size_t k = 0; k < nk; k++, ke = jv_next(ke)) {
			const char *key = kube_intern(jv_str(ke));
			if (keys)
				keys[k] = key ? key : kube_intern("");
		}
		const jv_t *cnt = jv_get(jv_get(e, "allocatable"), "count");
		if (d) {
			d[i].name = name;
			d[i].node_id = id;
			d[i].topology_keys = keys;
			d[i].ntopology_keys = (uint16_t)nk;
			d[i].allocatable = jv_is_integer(cnt) ? (int32_t)jv_int(cnt) : -1;
		}
	}
	cn->drivers = d;
	cn->ndrivers = (uint16_t)n;
	return 0;
}

static struct kube_obj *csinode_decode(const jv_t *obj, char *err, size_t errlen)
{
	return decode2(obj, sizeof(struct kube_csinode), KUBE_KIND_CSINODE, csinode_fields, err, errlen);
}

/*
 * Packs a JSON array whose elements become fixed-size structs: elem() fills one element from its
 * JSON (it packs the element's strings itself, so it runs in both passes; in the sizing pass its
 * result lands in a scratch element and is dropped).
 */
typedef void (*pk_elem_fn)(struct packer *pk, const jv_t *e, void *out);
static void *pk_array(struct packer *pk, const jv_t *arr, size_t size, pk_elem_fn elem,
		      uint16_t *count)
{
	_Alignas(max_align_t) char scratch[64];
	size_t n = jv_is_array(arr) ? jv_size(arr) : 0;
	if (n > UINT16_MAX)
		n = UINT16_MAX;
	assert(size <= sizeof(scratch));
	char *a = pk_alloc(pk, n * size, sizeof(char *));
	const jv_t *e = jv_first(arr);
	for (size_t i = 0; i < n; i++, e = jv_next(e))
		elem(pk, e, a ? a + i * size : scratch);
	*count = (uint16_t)n;
	return a;
}

/* An entry of Node.spec.taints, every field kept (nodelifecycle writes the list back whole). */
static void pk_taint(struct packer *pk, const jv_t *e, void *out)
{
	*(struct kube_taint *)out = (struct kube_taint){
		kube_intern(jstr(e, "key") ? jstr(e, "key") : ""),
		kube_intern(jstr(e, "value") ? jstr(e, "value") : ""),
		kube_intern(jstr(e, "effect") ? jstr(e, "effect") : ""),
		pk_str(pk, jstr(e, "timeAdded")),
	};
}

/* An entry of Node.status.conditions, every field kept (nodelifecycle writes the list back). */
static void pk_condition(struct packer *pk, const jv_t *e, void *out)
{
	*(struct kube_node_condition *)out = (struct kube_node_condition){
		.type = kube_intern(jstr(e, "type") ? jstr(e, "type") : ""),
		.status = kube_intern(jstr(e, "status") ? jstr(e, "status") : ""),
		.reason = pk_str(pk, jstr(e, "reason")),
		.message = pk_str(pk, jstr(e, "message")),
		.heartbeat = pk_str(pk, jstr(e, "lastHeartbeatTime")),
		.transition = pk_str(pk, jstr(e, "lastTransitionTime")),
	};
}

/* An entry of Pod.spec.tolerations (volume-scheduler's TaintToleration rule, taint eviction). */
static void pk_toleration(struct packer *pk, const jv_t *e, void *out)
{
	const jv_t *secs = jv_get(e, "tolerationSeconds");
	(void)pk;
	*(struct kube_toleration *)out = (struct kube_toleration){
		kube_intern(jstr(e, "key")), kube_intern(jstr(e, "operator")),
		kube_intern(jstr(e, "value")), kube_intern(jstr(e, "effect")),
		jv_is_integer(secs), jv_is_integer(secs) ? jv_int(secs) : 0,
	};
}

/* Whether a status list has a container neither terminated nor waiting (upstream's notRunning). */
static bool any_running(const jv_t *statuses)
{
	size_t i;
	const jv_t *e;
	jv_array_foreach(statuses, i, e) {
		const jv_t *state = jv_get(e, "state");
		if (!jv_get(state, "terminated") && !jv_get(state, "waiting"))
			return true;
	}
	return false;
}

static int node_fields(struct packer *pk, const jv_t *obj, void *rec, char *err, size_t errlen)
{
	struct kube_node *n = rec;
	if (decode_meta(pk, obj, &n->meta, err, errlen))
		return -1;
	const jv_t *ann = jv_get(jv_get(obj, "metadata"), "annotations");
	n->csi_node_ids = pk_str(pk, jstr(ann, "csi.volume.kubernetes.io/nodeid"));
	const jv_t *labels = jv_get(jv_get(obj, "metadata"), "labels");
	size_t cnt = jv_is_object(labels) ? jv_size(labels) : 0;
	if (cnt > UINT16_MAX)
		cnt = UINT16_MAX;
	struct kube_kv *kv = pk_alloc(pk, cnt * sizeof(*kv), sizeof(char *));
	size_t i = 0;
	const char *k;
	const jv_t *v;
	jv_object_foreach(labels, k, v) {
		if (i >= cnt)
			break;
		const char *ks = kube_intern(k);
		const char *vs = kube_intern(jv_is_string(v) ? jv_str(v) : "");
		if (kv) {
			kv[i].key = ks;
			kv[i].value = vs;
		}
		i++;
	}
	n->labels = kv;
	n->nlabels = (uint16_t)cnt;
	const char *cm = jstr(ann, "volumes.kubernetes.io/controller-managed-attach-detach");
	n->controller_managed = cm && !strcmp(cm, "true");
	const jv_t *spec = jv_get(obj, "spec"), *st = jv_get(obj, "status");
	n->unschedulable = jv_is_true(jv_get(spec, "unschedulable"));
	n->allocatable_pods = quantity_or(jv_get(st, "allocatable"), "pods");
	size_t i2;
	const jv_t *e;
	jv_array_foreach(jv_get(spec, "taints"), i2, e) {
		const char *key = jstr(e, "key");
		if (key && !strcmp(key, "node.kubernetes.io/out-of-service"))
			n->out_of_service = true;
	}
	n->ready = KUBE_COND_UNKNOWN;
	jv_array_foreach(jv_get(st, "conditions"), i2, e) {
		const char *type = jstr(e, "type"), *cs = jstr(e, "status");
		if (type && cs && !strcmp(type, "Ready"))
			n->ready = !strcmp(cs, "True") ? KUBE_COND_TRUE
				   : !strcmp(cs, "False") ? KUBE_COND_FALSE : KUBE_COND_UNKNOWN;
	}
	const jv_t *va = jv_get(st, "volumesAttached");
	size_t nva = jv_is_array(va) ? jv_size(va) : 0;
	if (nva > UINT16_MAX)
		nva = UINT16_MAX;
	struct kube_attached_volume *av = pk_alloc(pk, nva * sizeof(*av), sizeof(char *));
	const jv_t *ent = jv_first(va);
	for (size_t k = 0; k < nva; k++, ent = jv_next(ent)) {
		const char *vn = pk_str(pk, jstr(ent, "name") ? jstr(ent, "name") : "");
		const char *dp = pk_str(pk, jstr(ent, "devicePath") ? jstr(ent, "devicePath") : "");
		if (av) {
			av[k].name = vn;
			av[k].device_path = dp;
		}
	}
	n->volumes_attached = av;
	n->nvolumes_attached = (uint16_t)nva;
	n->volumes_in_use = pk_strv(pk, jv_get(st, "volumesInUse"), false, &n->nvolumes_in_use);
	n->created = pk_str(pk, jstr(jv_get(obj, "metadata"), "creationTimestamp"));
	n->taints = pk_array(pk, jv_get(spec, "taints"), sizeof(struct kube_taint), pk_taint,
			     &n->ntaints);
	n->conditions = pk_array(pk, jv_get(st, "conditions"), sizeof(struct kube_node_condition),
				 pk_condition, &n->nconditions);
	return 0;
}

static struct kube_obj *node_decode(const jv_t *obj, char *err, size_t errlen)
{
	return decode2(obj, sizeof(struct kube_node), KUBE_KIND_NODE, node_fields, err, errlen);
}

/* ---- PersistentVolumeClaim and StorageClass ---- */

/*
 * A LabelSelector (matchLabels, matchExpressions) as selector text: "k=v,k in (a,b),!k".
 * Writes "!" (matches nothing: "!" is not a valid selector, so it is refused) when the
 * selector does not fit or uses an unknown operator.
 */
static void pvc_selector_text(const jv_t *sel, char *buf, size_t len)
{
	struct strbuf sb;
	const char *k;
	const jv_t *v, *e;
	size_t i;
	bool bad = false;

	strbuf_init(&sb, 64);
	jv_object_foreach(jv_get(sel, "matchLabels"), k, v) {
		strbuf_addf(&sb, "%s%s=%s", sb.len ? "," : "", k, jv_is_string(v) ? jv_str(v) : "");
	}
	jv_array_foreach(jv_get(sel, "matchExpressions"), i, e) {
		const char *key = jstr(e, "key"), *op = jstr(e, "operator");
		const jv_t *vals = jv_get(e, "values"), *x;
		size_t j;
		if (!key || !op) {
			bad = true;
			break;
		}
		if (sb.len)
			strbuf_addch(&sb, ',');
		if (!strcmp(op, "Exists"))
			strbuf_addstr(&sb, key);
		else if (!strcmp(op, "DoesNotExist"))
			strbuf_addf(&sb, "!%s", key);
		else if (!strcmp(op, "In") || !strcmp(op, "NotIn")) {
			strbuf_addf(&sb, "%s %s (", key, !strcmp(op, "In") ? "in" : "notin");
			jv_array_foreach(vals, j, x)
				strbuf_addf(&sb, "%s%s", j ? "," : "", jv_is_string(x) ? jv_str(x) : "");
			strbuf_addch(&sb, ')');
		} else {
			bad = true;
			break;
		}
	}
	snprintf(buf, len, "%s", bad || sb.len >= len ? "!" : sb.buf ? sb.buf : "");
	strbuf_release(&sb);
}

static uint8_t word_index(const char *s, const char *const *words, size_t n, uint8_t other)
{
	if (!s)
		return 0;
	for (size_t i = 1; i < n; i++)
		if (!strcmp(s, words[i]))
			return (uint8_t)i;
	return other;
}

/* What csi-resizer reads: allocated size and its status, resize and modify conditions, classes. */
static void pvc_resize_fields(struct kube_pvc *pvc, const jv_t *spec, const jv_t *st,
			      const jv_t *ann)
{
	static const char *const resize[] = { "", "ControllerResizeInProgress",
		"ControllerResizeInfeasible", "NodeResizePending", "NodeResizeInProgress",
		"NodeResizeInfeasible" };
	static const char *const conds[] = { "Resizing", "FileSystemResizePending",
		"ControllerResizeError", "NodeResizeError", "ModifyingVolume", "ModifyVolumeError" };
	static const char *const modify[] = { "", "Pending", "InProgress", "Infeasible" };
	pvc->allocated = quantity_or(jv_get(st, "allocatedResources"), "storage");
	pvc->resize_status = word_index(jstr(jv_get(st, "allocatedResourceStatuses"), "storage"),
					resize, 6, KUBE_RESIZE_NONE);
	size_t i;
	const jv_t *c;
	pvc->conds = 0; /* the record's second pass writes into memory that is not zeroed */
	jv_array_foreach(jv_get(st, "conditions"), i, c) {
		const char *type = jstr(c, "type"), *cs = jstr(c, "status");
		for (size_t k = 0; type && cs && !strcmp(cs, "True") && k < 6; k++)
			if (!strcmp(type, conds[k]))
				pvc->conds |= (uint8_t)(1u << k);
	}
	pvc->resizer = kube_intern(jstr(ann, "volume.kubernetes.io/storage-resizer"));
	pvc->vac_name = kube_intern(jstr(spec, "volumeAttributesClassName"));
	pvc->current_vac = kube_intern(jstr(st, "currentVolumeAttributesClassName"));
	const jv_t *mvs = jv_get(st, "modifyVolumeStatus");
	const char *ms = jstr(mvs, "status");
	pvc->modify_status = !jv_is_object(mvs) ? KUBE_MODIFY_NONE
			     : ms ? word_index(ms, modify, 4, KUBE_MODIFY_OTHER) : KUBE_MODIFY_OTHER;
	pvc->modify_target = kube_intern(jstr(mvs, "targetVolumeAttributesClassName"));
}

static int pvc_fields(struct packer *pk, const jv_t *obj, void *rec, char *err, size_t errlen)
{
	struct kube_pvc *pvc = rec;
	if (decode_meta(pk, obj, &pvc->meta, err, errlen))
		return -1;
	const jv_t *spec = jv_get(obj, "spec");
	const jv_t *ann = jv_get(jv_get(obj, "metadata"), "annotations");
	pvc->storage_class = kube_intern(jstr(spec, "storageClassName"));
	pvc->volume_name = pk_str(pk, jstr(spec, "volumeName"));
	const char *prov = jstr(ann, "volume.kubernetes.io/storage-provisioner");
	pvc->provisioner = kube_intern(prov ? prov : jstr(ann, "volume.beta.kubernetes.io/storage-provisioner"));
	pvc->selected_node = kube_intern(jstr(ann, "volume.kubernetes.io/selected-node"));
	const jv_t *ds = jv_get(spec, "dataSource");
	pvc->data_source_kind = kube_intern(jstr(ds, "kind"));
	pvc->data_source_group = kube_intern(jstr(ds, "apiGroup"));
	pvc->data_source_name = pk_str(pk, jstr(ds, "name"));
	const jv_t *res = jv_get(spec, "resources");
	pvc->request = quantity_or(jv_get(res, "requests"), "storage");
	pvc->limit = quantity_or(jv_get(res, "limits"), "storage");
	const jv_t *st = jv_get(obj, "status");
	pvc->capacity = quantity_or(jv_get(st, "capacity"), "storage");
	pvc->access_modes = access_modes(jv_get(spec, "accessModes"));
	const char *mode = jstr(spec, "volumeMode");
	pvc->block = mode && !strcmp(mode, "Block");
	pvc->has_selector = jv_is_object(jv_get(spec, "selector"));
	const char *ph = jstr(st, "phase");
	pvc->phase = ph && !strcmp(ph, "Bound") ? KUBE_PVC_BOUND
		     : ph && !strcmp(ph, "Lost") ? KUBE_PVC_LOST : KUBE_PVC_PENDING;
	/* kcsi-controller-manager */
	pvc->bind_completed = jv_get(ann, "pv.kubernetes.io/bind-completed") != NULL;
	pvc->bound_by_controller = jv_get(ann, "pv.kubernetes.io/bound-by-controller") != NULL;
	if (pvc->has_selector) {
		char sel[1024];
		pvc_selector_text(jv_get(spec, "selector"), sel, sizeof(sel));
		pvc->selector = pk_str(pk, sel);
	}
	pvc->labels = pk_map(pk, jv_get(jv_get(obj, "metadata"), "labels"), &pvc->nlabels);
	pvc_resize_fields(pvc, spec, st, ann);
	return 0;
}

static struct kube_obj *pvc_decode(const jv_t *obj, char *err, size_t errlen)
{
	return decode2(obj, sizeof(struct kube_pvc), KUBE_KIND_PVC, pvc_fields, err, errlen);
}

static int sc_fields(struct packer *pk, const jv_t *obj, void *rec, char *err, size_t errlen)
{
	struct kube_storageclass *sc = rec;
	if (decode_meta(pk, obj, &sc->meta, err, errlen))
		return -1;
	sc->provisioner = kube_intern(jstr(obj, "provisioner"));
	sc->parameters = pk_map(pk, jv_get(obj, "parameters"), &sc->nparameters);
	sc->mount_options = pk_strv(pk, jv_get(obj, "mountOptions"), false, &sc->nmount_options);
	const char *rp = jstr(obj, "reclaimPolicy");
	sc->reclaim = rp && !strcmp(rp, "Retain") ? 1 : 0;
	const char *bm = jstr(obj, "volumeBindingMode");
	sc->wait_for_first_consumer = bm && !strcmp(bm, "WaitForFirstConsumer");
	sc->allow_expansion = jv_is_true(jv_get(obj, "allowVolumeExpansion"));
	const jv_t *ann = jv_get(jv_get(obj, "metadata"), "annotations");
	const char *def = jstr(ann, "storageclass.kubernetes.io/is-default-class");
	sc->is_default = def && !strcmp(def, "true");
	sc->allowed_topologies = pk_terms(pk, jv_get(obj, "allowedTopologies"),
					  "matchLabelExpressions", &sc->nallowed_topologies);
	return 0;
}

static struct kube_obj *sc_decode(const jv_t *obj, char *err, size_t errlen)
{
	return decode2(obj, sizeof(struct kube_storageclass), KUBE_KIND_SC, sc_fields, err, errlen);
}

/* ---- Pod and CSIDriver ---- */

static uint8_t pod_phase(const char *s)
{
	if (!s || !strcmp(s, "Pending")) return KUBE_POD_PENDING;
	if (!strcmp(s, "Running")) return KUBE_POD_RUNNING;
	if (!strcmp(s, "Succeeded")) return KUBE_POD_SUCCEEDED;
	if (!strcmp(s, "Failed")) return KUBE_POD_FAILED;
	return KUBE_POD_UNKNOWN;
}

/* True when a container or init container of the pod names volume `name` in volumeDevices. */
static bool pod_uses_as_device(const jv_t *spec, const char *name)
{
	static const char *lists[] = { "containers", "initContainers" };
	for (size_t l = 0; l < 2; l++) {
		size_t i, k;
		const jv_t *c, *d;
		jv_array_foreach(jv_get(spec, lists[l]), i, c) {
			jv_array_foreach(jv_get(c, "volumeDevices"), k, d) {
				const char *dn = jstr(d, "name");
				if (dn && !strcmp(dn, name))
					return true;
			}
		}
	}
	return false;
}

static int pod_fields(struct packer *pk, const jv_t *obj, void *rec, char *err, size_t errlen)
{
	struct kube_pod *p = rec;
	if (decode_meta(pk, obj, &p->meta, err, errlen))
		return -1;
	const jv_t *spec = jv_get(obj, "spec"), *st = jv_get(obj, "status");
	const jv_t *md = jv_get(obj, "metadata");
	p->node_name = kube_intern(jstr(spec, "nodeName"));
	p->scheduler_name = kube_intern(jstr(spec, "schedulerName"));
	p->service_account = kube_intern(jstr(spec, "serviceAccountName"));
	p->labels = pk_map(pk, jv_get(md, "labels"), &p->nlabels);
	p->node_selector = pk_map(pk, jv_get(spec, "nodeSelector"), &p->nnode_selector);
	p->phase = pod_phase(jstr(st, "phase"));
	size_t i;
	const jv_t *e;
	jv_array_foreach(jv_get(st, "conditions"), i, e) {
		const char *type = jstr(e, "type"), *cs = jstr(e, "status");
		if (type && cs && !strcmp(type, "Ready"))
			p->ready = !strcmp(cs, "True");
	}
	p->running = any_running(jv_get(st, "initContainerStatuses")) ||
		     any_running(jv_get(st, "containerStatuses")) ||
		     any_running(jv_get(st, "ephemeralContainerStatuses"));
	/* Two passes over spec.volumes: count the kept ones, then pack them. */
	const jv_t *vols = jv_get(spec, "volumes");
	size_t n = 0;
	jv_array_foreach(vols, i, e) {
		if (!jstr(e, "name"))
			continue;
		if (jv_is_object(jv_get(e, "persistentVolumeClaim")) ||
		    jv_is_object(jv_get(e, "ephemeral")) ||
		    jv_is_object(jv_get(e, "csi")))
			n++;
	}
	if (n > UINT16_MAX)
		n = UINT16_MAX;
	struct kube_pod_volume *pv = pk_alloc(pk, n * sizeof(*pv), sizeof(char *));
	size_t k = 0;
	jv_array_foreach(vols, i, e) {
		const char *vname = jstr(e, "name");
		const jv_t *claim = jv_get(e, "persistentVolumeClaim");
		const jv_t *eph = jv_get(e, "ephemeral"), *csi = jv_get(e, "csi");
		if (k >= n || !vname || (!jv_is_object(claim) && !jv_is_object(eph) && !jv_is_object(csi)))
			continue;
		struct kube_pod_volume v = { 0 };
		v.name = pk_str(pk, vname);
		if (jv_is_object(claim)) {
			const char *cn = jstr(claim, "claimName");
			v.claim_name = pk_str(pk, cn ? cn : "");
			v.read_only = jv_is_true(jv_get(claim, "readOnly"));
		} else if (jv_is_object(eph)) {
			/* The ephemeral volume controller names the claim "<pod>-<volume>". */
			char cn[512];
			snprintf(cn, sizeof(cn), "%s-%s", jstr(md, "name"), vname);
			v.claim_name = pk_str(pk, cn);
			v.ephemeral = true;
		} else {
			v.csi_driver = kube_intern(jstr(csi, "driver") ? jstr(csi, "driver") : "");
			v.csi_fs_type = kube_intern(jstr(csi, "fsType"));
			v.read_only = jv_is_true(jv_get(csi, "readOnly"));
			v.csi_attributes = pk_map(pk, jv_get(csi, "volumeAttributes"), &v.ncsi_attributes);
			v.csi_secret_name = pk_str(pk, jstr(jv_get(csi, "nodePublishSecretRef"), "name"));
		}
		v.block = pod_uses_as_device(spec, vname);
		if (pv)
			pv[k] = v;
		k++;
	}
	p->volumes = pv;
	p->nvolumes = (uint16_t)n;
	p->tolerations = pk_array(pk, jv_get(spec, "tolerations"), sizeof(struct kube_toleration),
				  pk_toleration, &p->ntolerations);
	return 0;
}

static struct kube_obj *pod_decode(const jv_t *obj, char *err, size_t errlen)
{
	return decode2(obj, sizeof(struct kube_pod), KUBE_KIND_POD, pod_fields, err, errlen);
}

static int csidriver_fields(struct packer *pk, const jv_t *obj, void *rec, char *err, size_t errlen)
{
	struct kube_csidriver *d = rec;
	if (decode_meta(pk, obj, &d->meta, err, errlen))
		return -1;
	const jv_t *spec = jv_get(obj, "spec");
	const jv_t *ar = jv_get(spec, "attachRequired");
	d->attach_required = !jv_is_boolean(ar) || jv_is_true(ar);
	d->pod_info_on_mount = jv_is_true(jv_get(spec, "podInfoOnMount"));
	d->storage_capacity = jv_is_true(jv_get(spec, "storageCapacity"));
	d->requires_republish = jv_is_true(jv_get(spec, "requiresRepublish"));
	d->fs_group_policy = kube_intern(jstr(spec, "fsGroupPolicy"));
	const jv_t *modes = jv_get(spec, "volumeLifecycleModes");
	d->persistent = !jv_is_array(modes) || jv_size(modes) == 0;
	size_t i;
	const jv_t *m;
	jv_array_foreach(modes, i, m) {
		const char *s = jv_str(m);
		if (s && !strcmp(s, "Persistent"))
			d->persistent = true;
		if (s && !strcmp(s, "Ephemeral"))
			d->ephemeral = true;
	}
	return 0;
}

static struct kube_obj *csidriver_decode(const jv_t *obj, char *err, size_t errlen)
{
	return decode2(obj, sizeof(struct kube_csidriver), KUBE_KIND_CSIDRIVER, csidriver_fields, err,
		       errlen);
}

/* ---- CSIStorageCapacity ---- */

static int csisc_fields(struct packer *pk, const jv_t *obj, void *rec, char *err, size_t errlen)
{
	struct kube_csisc *c = rec;
	if (decode_meta(pk, obj, &c->meta, err, errlen))
		return -1;
	const jv_t *md = jv_get(obj, "metadata");
	const jv_t *labels = jv_get(md, "labels");
	c->storage_class = kube_intern(jstr(obj, "storageClassName"));
	c->driver_label = kube_intern(jstr(labels, "csi.storage.k8s.io/drivername"));
	c->managed_by = kube_intern(jstr(labels, "csi.storage.k8s.io/managed-by"));
	size_t i;
	const jv_t *ref;
	c->controller_uid = NULL;
	jv_array_foreach(jv_get(md, "ownerReferences"), i, ref)
		if (jv_is_true(jv_get(ref, "controller")) && jstr(ref, "uid")) {
			c->controller_uid = pk_str(pk, jstr(ref, "uid"));
			break;
		}
	const jv_t *topo = jv_get(obj, "nodeTopology");
	c->topology = pk_map(pk, jv_get(topo, "matchLabels"), &c->ntopology);
	const jv_t *exprs = jv_get(topo, "matchExpressions");
	c->topology_expressions = jv_is_array(exprs) && jv_size(exprs) > 0;
	c->capacity = quantity_or(obj, "capacity");
	c->max_volume_size = quantity_or(obj, "maximumVolumeSize");
	return 0;
}

static struct kube_obj *csisc_decode(const jv_t *obj, char *err, size_t errlen)
{
	return decode2(obj, sizeof(struct kube_csisc), KUBE_KIND_CSISC, csisc_fields, err, errlen);
}

/* ---- Lease ---- */

static int lease_fields(struct packer *pk, const jv_t *obj, void *rec, char *err, size_t errlen)
{
	struct kube_lease *l = rec;
	if (decode_meta(pk, obj, &l->meta, err, errlen))
		return -1;
	const jv_t *spec = jv_get(obj, "spec");
	l->holder = pk_str(pk, jstr(spec, "holderIdentity"));
	l->renew_time = pk_str(pk, jstr(spec, "renewTime"));
	return 0;
}

static struct kube_obj *lease_decode(const jv_t *obj, char *err, size_t errlen)
{
	return decode2(obj, sizeof(struct kube_lease), KUBE_KIND_LEASE, lease_fields, err, errlen);
}

/* ---- VolumeAttributesClass ---- */

static int vac_fields(struct packer *pk, const jv_t *obj, void *rec, char *err, size_t errlen)
{
	struct kube_vac *v = rec;
	if (decode_meta(pk, obj, &v->meta, err, errlen))
		return -1;
	v->driver_name = kube_intern(jstr(obj, "driverName"));
	v->parameters = pk_map(pk, jv_get(obj, "parameters"), &v->nparameters);
	return 0;
}

static struct kube_obj *vac_decode(const jv_t *obj, char *err, size_t errlen)
{
	return decode2(obj, sizeof(struct kube_vac), KUBE_KIND_VAC, vac_fields, err, errlen);
}

/* ---- snapshot.storage.k8s.io/v1 ---- */

static uint8_t snap_policy(const char *p)
{
	if (p && !strcmp(p, "Delete"))
		return KUBE_SNAP_DELETE;
	if (p && !strcmp(p, "Retain"))
		return KUBE_SNAP_RETAIN;
	return KUBE_SNAP_POLICY_INVALID;
}

static uint8_t cond_of(const jv_t *v)
{
	if (!jv_is_boolean(v))
		return KUBE_COND_UNKNOWN;
	return jv_is_true(v) ? KUBE_COND_TRUE : KUBE_COND_FALSE;
}

static int vs_fields(struct packer *pk, const jv_t *obj, void *rec, char *err, size_t errlen)
{
	struct kube_vs *vs = rec;
	if (decode_meta(pk, obj, &vs->meta, err, errlen))
		return -1;
	const jv_t *spec = jv_get(obj, "spec"), *st = jv_get(obj, "status");
	const jv_t *src = jv_get(spec, "source");
	vs->source_pvc = pk_str(pk, jstr(src, "persistentVolumeClaimName"));
	vs->source_content = pk_str(pk, jstr(src, "volumeSnapshotContentName"));
	vs->class_name = kube_intern(jstr(spec, "volumeSnapshotClassName"));
	vs->has_status = jv_is_object(st);
	vs->bound_content = pk_str(pk, jstr(st, "boundVolumeSnapshotContentName"));
	vs->creation_time = pk_str(pk, jstr(st, "creationTime"));
	vs->error_message = pk_str(pk, jstr(jv_get(st, "error"), "message"));
	vs->error_time = pk_str(pk, jstr(jv_get(st, "error"), "time"));
	vs->restore_size = jv_get(st, "restoreSize") ? quantity_or(st, "restoreSize") : -1;
	vs->ready = cond_of(jv_get(st, "readyToUse"));
	return 0;
}

static struct kube_obj *vs_decode(const jv_t *obj, char *err, size_t errlen)
{
	return decode2(obj, sizeof(struct kube_vs), KUBE_KIND_VS, vs_fields, err, errlen);
}

static int vsc_fields(struct packer *pk, const jv_t *obj, void *rec, char *err, size_t errlen)
{
	struct kube_vsc *c = rec;
	if (decode_meta(pk, obj, &c->meta, err, errlen))
		return -1;
	const jv_t *md = jv_get(obj, "metadata"), *ann = jv_get(md, "annotations");
	const jv_t *spec = jv_get(obj, "spec"), *st = jv_get(obj, "status");
	const jv_t *src = jv_get(spec, "source"), *ref = jv_get(spec, "volumeSnapshotRef");
	c->driver = kube_intern(jstr(spec, "driver"));
	c->volume_handle = pk_str(pk, jstr(src, "volumeHandle"));
	c->snapshot_handle = pk_str(pk, jstr(src, "snapshotHandle"));
	c->class_name = kube_intern(jstr(spec, "volumeSnapshotClassName"));
	c->source_volume_mode = kube_intern(jstr(spec, "sourceVolumeMode"));
	c->policy = snap_policy(jstr(spec, "deletionPolicy"));
	c->ref_name = pk_str(pk, jstr(ref, "name"));
	c->ref_ns = kube_intern(jstr(ref, "namespace"));
	c->ref_uid = pk_str(pk, jstr(ref, "uid") ? jstr(ref, "uid") : "");
	c->deletion_secret_name = kube_intern(jstr(ann, "snapshot.storage.kubernetes.io/deletion-secret-name"));
	c->deletion_secret_ns = kube_intern(jstr(ann, "snapshot.storage.kubernetes.io/deletion-secret-namespace"));
	c->being_created = jv_get(ann, "snapshot.storage.kubernetes.io/volumesnapshot-being-created") != NULL;
	c->being_deleted = jv_get(ann, "snapshot.storage.kubernetes.io/volumesnapshot-being-deleted") != NULL;
	c->in_group = jv_get(ann, "groupsnapshot.storage.k8s.io/volumeGroupSnapshotHandle") != NULL;
	c->managed_by = kube_intern(jstr(jv_get(md, "labels"), "snapshot.storage.kubernetes.io/managed-by"));
	c->has_status = jv_is_object(st);
	c->status_handle = pk_str(pk, jstr(st, "snapshotHandle"));
	c->error_message = pk_str(pk, jstr(jv_get(st, "error"), "message"));
	c->error_time = pk_str(pk, jstr(jv_get(st, "error"), "time"));
	const jv_t *ct = jv_get(st, "creationTime"), *rs = jv_get(st, "restoreSize");
	c->creation_time = jv_is_integer(ct) ? jv_int(ct) : -1;
	c->restore_size = jv_is_integer(rs) ? jv_int(rs) : -1;
	c->ready = cond_of(jv_get(st, "readyToUse"));
	return 0;
}

static struct kube_obj *vsc_decode(const jv_t *obj, char *err, size_t errlen)
{
	return decode2(obj, sizeof(struct kube_vsc), KUBE_KIND_VSC, vsc_fields, err, errlen);
}

static int vsclass_fields(struct packer *pk, const jv_t *obj, void *rec, char *err, size_t errlen)
{
	struct kube_vsclass *c = rec;
	if (decode_meta(pk, obj, &c->meta, err, errlen))
		return -1;
	const jv_t *ann = jv_get(jv_get(obj, "metadata"), "annotations");
	const char *def = jstr(ann, "snapshot.storage.kubernetes.io/is-default-class");
	c->driver = kube_intern(jstr(obj, "driver"));
	c->parameters = pk_map(pk, jv_get(obj, "parameters"), &c->nparameters);
	c->policy = snap_policy(jstr(obj, "deletionPolicy"));
	c->is_default = def && !strcmp(def, "true");
	return 0;
}

static struct kube_obj *vsclass_decode(const jv_t *obj, char *err, size_t errlen)
{
	return decode2(obj, sizeof(struct kube_vsclass), KUBE_KIND_VSCLASS, vsclass_fields, err, errlen);
}

/* ---- groupsnapshot.storage.k8s.io/v1beta2 ---- */

static int vgs_fields(struct packer *pk, const jv_t *obj, void *rec, char *err, size_t errlen)
{
	struct kube_vgs *g = rec;
	if (decode_meta(pk, obj, &g->meta, err, errlen))
		return -1;
	const jv_t *spec = jv_get(obj, "spec"), *st = jv_get(obj, "status");
	const jv_t *src = jv_get(spec, "source"), *sel = jv_get(src, "selector");
	if (jv_is_object(sel)) {
		char text[1024];
		pvc_selector_text(sel, text, sizeof(text));
		g->selector = pk_str(pk, text);
	}
	g->source_content = pk_str(pk, jstr(src, "volumeGroupSnapshotContentName"));
	g->class_name = kube_intern(jstr(spec, "volumeGroupSnapshotClassName"));
	g->has_status = jv_is_object(st);
	g->bound_content = pk_str(pk, jstr(st, "boundVolumeGroupSnapshotContentName"));
	g->creation_time = pk_str(pk, jstr(st, "creationTime"));
	g->error_message = pk_str(pk, jstr(jv_get(st, "error"), "message"));
	g->error_time = pk_str(pk, jstr(jv_get(st, "error"), "time"));
	g->ready = cond_of(jv_get(st, "readyToUse"));
	return 0;
}

static struct kube_obj *vgs_decode(const jv_t *obj, char *err, size_t errlen)
{
	return decode2(obj, sizeof(struct kube_vgs), KUBE_KIND_VGS, vgs_fields, err, errlen);
}

static void pk_vgs_member(struct packer *pk, const jv_t *e, void *out)
{
	struct kube_vgs_member *m = out;
	const jv_t *ct = jv_get(e, "creationTime"), *rs = jv_get(e, "restoreSize");
	m->volume_handle = pk_str(pk, jstr(e, "volumeHandle"));
	m->snapshot_handle = pk_str(pk, jstr(e, "snapshotHandle"));
	m->creation_time = jv_is_integer(ct) ? jv_int(ct) : -1;
	m->restore_size = jv_is_integer(rs) ? jv_int(rs) : -1;
	m->ready = cond_of(jv_get(e, "readyToUse"));
}

static int vgsc_fields(struct packer *pk, const jv_t *obj, void *rec, char *err, size_t errlen)
{
	struct kube_vgsc *c = rec;
	if (decode_meta(pk, obj, &c->meta, err, errlen))
		return -1;
	const jv_t *ann = jv_get(jv_get(obj, "metadata"), "annotations");
	const jv_t *spec = jv_get(obj, "spec"), *st = jv_get(obj, "status");
	const jv_t *src = jv_get(spec, "source"), *ref = jv_get(spec, "volumeGroupSnapshotRef");
	c->driver = kube_intern(jstr(spec, "driver"));
	c->class_name = kube_intern(jstr(spec, "volumeGroupSnapshotClassName"));
	c->policy = snap_policy(jstr(spec, "deletionPolicy"));
	c->ref_name = pk_str(pk, jstr(ref, "name"));
	c->ref_ns = kube_intern(jstr(ref, "namespace"));
	c->ref_uid = pk_str(pk, jstr(ref, "uid") ? jstr(ref, "uid") : "");
	c->volume_handles = pk_strv(pk, jv_get(src, "volumeHandles"), false, &c->nvolume_handles);
	c->group_handle = pk_str(pk, jstr(jv_get(src, "groupSnapshotHandles"), "volumeGroupSnapshotHandle"));
	c->deletion_secret_name = kube_intern(jstr(ann, "groupsnapshot.storage.kubernetes.io/deletion-secret-name"));
	c->deletion_secret_ns = kube_intern(jstr(ann, "groupsnapshot.storage.kubernetes.io/deletion-secret-namespace"));
	c->being_deleted = jv_get(ann, "groupsnapshot.storage.kubernetes.io/volumegroupsnapshot-being-deleted") != NULL;
	c->has_status = jv_is_object(st);
	c->status_handle = pk_str(pk, jstr(st, "volumeGroupSnapshotHandle"));
	c->creation_time = pk_str(pk, jstr(st, "creationTime"));
	c->error_message = pk_str(pk, jstr(jv_get(st, "error"), "message"));
	c->ready = cond_of(jv_get(st, "readyToUse"));
	c->members = pk_array(pk, jv_get(st, "volumeSnapshotInfoList"), sizeof(struct kube_vgs_member),
			      pk_vgs_member, &c->nmembers);
	return 0;
}

static struct kube_obj *vgsc_decode(const jv_t *obj, char *err, size_t errlen)
{
	return decode2(obj, sizeof(struct kube_vgsc), KUBE_KIND_VGSC, vgsc_fields, err, errlen);
}

static int vgsclass_fields(struct packer *pk, const jv_t *obj, void *rec, char *err, size_t errlen)
{
	struct kube_vsclass *c = rec;
	if (vsclass_fields(pk, obj, rec, err, errlen))
		return -1;
	const jv_t *ann = jv_get(jv_get(obj, "metadata"), "annotations");
	const char *def = jstr(ann, "groupsnapshot.storage.kubernetes.io/is-default-class");
	c->is_default = def && !strcmp(def, "true");
	return 0;
}

static struct kube_obj *vgsclass_decode(const jv_t *obj, char *err, size_t errlen)
{
	return decode2(obj, sizeof(struct kube_vsclass), KUBE_KIND_VGSCLASS, vgsclass_fields, err,
		       errlen);
}

const struct kube_kind KUBE_KIND_VOLUMEATTACHMENT = { "VolumeAttachment", &KUBE_RES_VOLUMEATTACHMENTS, va_decode };
const struct kube_kind KUBE_KIND_PERSISTENTVOLUME = { "PersistentVolume", &KUBE_RES_PERSISTENTVOLUMES, pv_decode };
const struct kube_kind KUBE_KIND_CSINODE_T = { "CSINode", &KUBE_RES_CSINODES, csinode_decode };
const struct kube_kind KUBE_KIND_NODE_T = { "Node", &KUBE_RES_NODES, node_decode };
const struct kube_kind KUBE_KIND_PERSISTENTVOLUMECLAIM = { "PersistentVolumeClaim", &KUBE_RES_PERSISTENTVOLUMECLAIMS, pvc_decode };
const struct kube_kind KUBE_KIND_STORAGECLASS = { "StorageClass", &KUBE_RES_STORAGECLASSES, sc_decode };
const struct kube_kind KUBE_KIND_POD_T = { "Pod", &KUBE_RES_PODS, pod_decode };
const struct kube_kind KUBE_KIND_CSIDRIVER_T = { "CSIDriver", &KUBE_RES_CSIDRIVERS, csidriver_decode };
const struct kube_kind KUBE_KIND_CSISTORAGECAPACITY = { "CSIStorageCapacity", &KUBE_RES_CSISTORAGECAPACITIES, csisc_decode };
const struct kube_kind KUBE_KIND_LEASE_T = { "Lease", &KUBE_RES_LEASES, lease_decode };
const struct kube_kind KUBE_KIND_VOLUMEATTRIBUTESCLASS = { "VolumeAttributesClass", &KUBE_RES_VOLUMEATTRIBUTESCLASSES, vac_decode };
const struct kube_kind KUBE_KIND_VOLUMESNAPSHOT = { "VolumeSnapshot", &KUBE_RES_VOLUMESNAPSHOTS, vs_decode };
const struct kube_kind KUBE_KIND_VOLUMESNAPSHOTCONTENT = { "VolumeSnapshotContent", &KUBE_RES_VOLUMESNAPSHOTCONTENTS, vsc_decode };
const struct kube_kind KUBE_KIND_VOLUMESNAPSHOTCLASS = { "VolumeSnapshotClass", &KUBE_RES_VOLUMESNAPSHOTCLASSES, vsclass_decode };
const struct kube_kind KUBE_KIND_VOLUMEGROUPSNAPSHOT = { "VolumeGroupSnapshot", &KUBE_RES_VOLUMEGROUPSNAPSHOTS, vgs_decode };
const struct kube_kind KUBE_KIND_VOLUMEGROUPSNAPSHOTCONTENT = { "VolumeGroupSnapshotContent", &KUBE_RES_VOLUMEGROUPSNAPSHOTCONTENTS, vgsc_decode };
const struct kube_kind KUBE_KIND_VOLUMEGROUPSNAPSHOTCLASS = { "VolumeGroupSnapshotClass", &KUBE_RES_VOLUMEGROUPSNAPSHOTCLASSES, vgsclass_decode };

/* ---- helpers ---- */

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

const char *kube_obj_uid(const struct kube_obj *o, char *buf, size_t len)
{
	if (!(o->flags & KUBE_OBJ_UID_BINARY)) {
		snprintf(buf, len, "%s", o->uid.str);
		return buf;
	}
	const uint8_t *b = o->uid.bin;
	snprintf(buf, len,
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
		 b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
	return buf;
}

bool kube_obj_has_finalizer(const struct kube_obj *o, const char *finalizer)
{
	for (uint16_t i = 0; i < o->nfinalizers; i++)
		if (strcmp(o->finalizers[i], finalizer) == 0)
			return true;
	return false;
}

void kube_obj_key(const struct kube_obj *o, char *buf, size_t len)
{
	if (o->ns && *o->ns)
		snprintf(buf, len, "%s/%s", o->ns, o->name);
	else
		snprintf(buf, len, "%s", o->name);
}

struct kube_obj *kube_decode_text(const struct kube_kind *k, const char *text, size_t len,
				  char *err, size_t errlen)
{
	struct jv_doc doc = { 0 };
	const jv_t *v = jv_parse(&doc, text, len, err, errlen);
	struct kube_obj *o = v ? k->decode(v, err, errlen) : NULL;
	jv_release(&doc);
	return o;
}

struct kube_obj *kube_decode_json(const struct kube_kind *k, json_t *obj, char *err, size_t errlen)
{
	char *text = json_is_object(obj) ? json_dumps(obj, JSON_COMPACT) : NULL;
	if (!text) {
		snprintf(err, errlen, "%s: not a JSON object", k->name);
		return NULL;
	}
	struct kube_obj *o = kube_decode_text(k, text, strlen(text), err, errlen);
	free(text);
	return o;
}
