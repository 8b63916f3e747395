/*
 * kube store: the informer's cache of records, keyed by namespace/name, with secondary indexes.
 *
 * The store holds one reference to each record it contains. Readers get their own reference
 * (kube_store_get, kube_store_list, kube_store_by_index) and release it with kube_obj_unref()
 * or kube_objs_free(); they may keep it as long as they like, even after the store replaced or
 * removed the record. Readers never see a record change: a new version is a new record.
 *
 * Indexes are registered before the first put: an index function returns the index values of a
 * record (e.g. a VolumeAttachment's PV name); kube_store_by_index() finds the records with a value.
 *
 * Thread-safe: a read-write lock guards the table; writes come from the informer's thread.
 */
#ifndef KCSI_KUBE_STORE_H
#define KCSI_KUBE_STORE_H

#include <stddef.h>

#include "kube/objects.h"

struct kube_store;

/* Writes up to max index values of o into vals (pointers into o); returns how many. */
typedef size_t (*kube_index_fn)(const struct kube_obj *o, const char **vals, size_t max);

/* Ready-made index functions: a VolumeAttachment by spec.source.persistentVolumeName and by
 * spec.nodeName; a PersistentVolumeClaim by spec.volumeName. */
size_t kube_index_va_by_pv(const struct kube_obj *o, const char **vals, size_t max);
size_t kube_index_va_by_node(const struct kube_obj *o, const char **vals, size_t max);
size_t kube_index_pvc_by_volume(const struct kube_obj *o, const char **vals, size_t max);
/* A Pod by spec.nodeName (none while unscheduled): what a node's kubelet reads. */
size_t kube_index_pod_by_node(const struct kube_obj *o, const char **vals, size_t max);

struct kube_store *kube_store_new(void);
/* Releases the store's references and frees it. */
void kube_store_free(struct kube_store *s);
void kube_store_add_index(struct kube_store *s, const char *name, kube_index_fn fn);

/* Reading. ns is NULL or "" for cluster-scoped objects. */
struct kube_obj *kube_store_get(struct kube_store *s, const char *ns, const char *name);
size_t kube_store_len(struct kube_store *s);
/* A snapshot of every record (references); *n receives the count. */
struct kube_obj **kube_store_list(struct kube_store *s, size_t *n);
struct kube_obj **kube_store_by_index(struct kube_store *s, const char *index, const char *value,
				      size_t *n);
void kube_objs_free(struct kube_obj **v, size_t n);

/* Writing (the informer). put takes the caller's reference to o and returns the replaced record
 * (whose reference passes to the caller) or NULL; remove returns the removed record or NULL. */
struct kube_obj *kube_store_put(struct kube_store *s, struct kube_obj *o);
struct kube_obj *kube_store_remove(struct kube_store *s, const char *ns, const char *name);

#endif
