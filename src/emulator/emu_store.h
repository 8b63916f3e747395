/*
 * emu_store: the emulator's object store, its resourceVersion counter and its event history.
 *
 * One mutex (`mu`) guards everything here. The HTTP layer takes it for the whole of one API
 * operation (read, decide, commit, serialize the answer), so every operation is atomic and the
 * resourceVersion order is the commit order, as with etcd. Watchers sleep on `cv`, which is
 * broadcast after every commit and on shutdown.
 *
 * Objects: each resource keeps a sorted array of (key, object); the key is "ns/name" or "name",
 * so a namespace is a contiguous key range and lists come out in the same order as upstream's
 * etcd keys. Stored json_t objects are immutable once committed: writers build a new object and
 * commit it, so an event and the store can share one object by reference.
 *
 * History: a ring of the last `cap` events, fewer when what they hold in memory (text and decoded
 * object, estimated from jansson's allocations) exceeds `ring_bytes_max` bytes (the newest event
 * is always kept). Every commit bumps the global resourceVersion by one
 * and appends exactly one event, so event rv values are contiguous and the event for rv r sits at
 * a computable position. `history_start` is the oldest rv a watch may resume from: a watch from
 * rv >= history_start has every later event in the ring; older ones get 410 Expired.
 *
 * Persistence (emu_state.h): with a state file, every commit is also appended to its log while
 * `mu` is held, so the log's order is the resourceVersion order.
 *
 * Ownership: the store owns its objects, keys and events, and the state file's descriptors;
 * emu_store_free() releases all of them.
 */
#ifndef KCSI_EMULATOR_STORE_H
#define KCSI_EMULATOR_STORE_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum emu_event_type { EMU_ADDED = 0, EMU_MODIFIED, EMU_DELETED };
extern const char *const emu_event_names[3];

struct emu_entry {
	char *key;
	json_t *obj;
};

/* A served resource: static description plus its objects. */
struct emu_resource {
	const char *group; /* "" for the core group */
	const char *version;
	const char *plural, *singular, *kind;
	bool namespaced;
	bool has_status;         /* a /status subresource exists */
	const char *short_names; /* comma-separated, may be "" */
	const char *fields;      /* extra field-selector paths, comma-separated, may be "" */
	const char *create_status; /* JSON the status is reset to on create; NULL: keep, "": drop */
	/*
	 * A second served version of the same kind and schema, or NULL: a CRD with several served
	 * versions. Objects are stored once, at `version` (the storage version); a request addressed
	 * to also_version reads and writes them with that apiVersion, as kube-apiserver converts.
	 */
	const char *also_version;
	char api_version[64];      /* "v1" or "group/version" */
	struct emu_entry *items;   /* sorted by key */
	size_t n, cap;
};

struct emu_event {
	uint64_t rv;
	int res;
	enum emu_event_type type;
	json_t *obj;  /* state after the event (for DELETED: the last state, rv = event rv) */
	json_t *prev; /* state before, NULL for ADDED */
	char *text;   /* obj serialized compactly, shared by every watcher */
	size_t cost;  /* bytes the event holds: text, decoded obj, this entry */
};

struct emu_store {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t rv;
	uint64_t history_start;
	struct emu_event *ring;
	size_t ring_cap, ring_head, ring_len;
	size_t ring_bytes, ring_bytes_max; /* events' cost held; the oldest go beyond max */
	unsigned watch_epoch; /* bumped to close every open watch */
	bool shutdown;
	struct emu_resource *res;
	size_t nres;
	/*
	 * The state file (emu_state.h, which sets these): on_commit, when set, is called for every
	 * commit with mu held (the log's append); the lock and log descriptors are -1 when there is
	 * none, and emu_store_free() closes them.
	 */
	void (*on_commit)(struct emu_store *st, const struct emu_event *ev, const char *key);
	int state_lock_fd, log_fd;
	char *state_path, *log_path;
	uint64_t log_bytes;      /* bytes in the log now */
	uint64_t log_compact_at; /* the log is folded into the state file past this size */
};

/*
 * What kube-apiserver does differently for a custom resource (the snapshot kinds): its list
 * items carry apiVersion and kind, and an update must name a resourceVersion. Built-in kinds'
 * list items carry neither, and a PUT without resourceVersion is unconditional.
 */
bool emu_resource_is_crd(const struct emu_resource *r);
/* Whether kube-apiserver keeps metadata.generation for the kind: pods, apps/v1, custom resources. */
bool emu_resource_has_generation(const struct emu_resource *r);

/* Whether a DELETE that removes an object answers with the object (kube-apiserver's
 * ReturnDeletedObject: namespaces, PVs, PVCs, pods, ServiceAccounts and the storage.k8s.io kinds
 * but CSIStorageCapacity) rather than a Success Status. */
bool emu_resource_returns_deleted(const struct emu_resource *r);

/* Life cycle. history: events retained for watch resume (>= 1). */
void emu_store_init(struct emu_store *st, size_t history);
void emu_store_free(struct emu_store *st);

/*
 * --runtime-config, as kube-apiserver takes it for named groups: GROUP/VERSION=false stops
 * serving every resource of that version, GROUP/VERSION/RESOURCE=false one resource (e.g.
 * storage.k8s.io/v1/volumeattributesclasses=false): its requests are 404 and discovery no longer
 * lists it (a group left with nothing leaves /apis). =true changes nothing (everything is served
 * by default). Refused, with a message: the core group, api/all (ga, beta, alpha), and an entry
 * that names nothing kube-emulator serves. Call before the state file is loaded (its objects of a kind no
 * longer served are then refused, not dropped). 0, or -1 with err.
 */
struct flag_map;
int emu_store_runtime_config(struct emu_store *st, const struct flag_map *m, char *err,
			     size_t errlen);

/* Lookups (caller holds mu where it reads objects). Return -1 when not served. A resource is
 * found by its storage version or its also_version. */
int emu_store_resource(const struct emu_store *st, const char *group, const char *version,
		       const char *plural);
int emu_store_resource_by_kind(const struct emu_store *st, const char *api_version,
			       const char *kind);
/* Builds the key for ns/name into buf. */
void emu_store_key(const struct emu_resource *r, const char *ns, const char *name, char *buf,
		   size_t len);
/* Borrowed object or NULL. */
json_t *emu_store_get(struct emu_store *st, int res, const char *key);
/* First index whose key is >= key. */
size_t emu_store_lower_bound(const struct emu_resource *r, const char *key);

/*
 * Commits one change: obj (stolen; must not be shared) gets metadata.resourceVersion = the new
 * rv, replaces or inserts the entry for key (EMU_DELETED removes it), and one event is appended.
 * Returns the event, valid until the lock is released.
 */
const struct emu_event *emu_store_commit(struct emu_store *st, int res, const char *key,
					 json_t *obj, enum emu_event_type type);

/* Event with rv, or NULL when it is not in the ring. */
const struct emu_event *emu_store_event(const struct emu_store *st, uint64_t rv);

/*
 * For loading a state file only (no event, no resourceVersion change): puts obj (stolen) at key,
 * or removes the entry when remove is true (obj is then released).
 */
void emu_store_restore(struct emu_store *st, int res, const char *key, json_t *obj, bool remove);

#endif
