/*
 * kube informer: keeps a store of one kind in sync with the API server and tells handlers about
 * every change, as client-go's shared informer does.
 *
 * One thread per informer: LIST (paginated with limit/continue), then WATCH from the list's
 * resourceVersion with bookmarks. A stream that ends or breaks is resumed from the last
 * resourceVersion seen; a 410 Gone (expired resourceVersion) triggers a relist that delivers the
 * difference: adds, updates for objects whose resourceVersion changed, and deletes (with the last
 * known state) for objects that vanished meanwhile. A periodic resync (opts.resync_ns) delivers
 * every cached object again as an update(old == new).
 *
 * Handlers run on the informer's threads, one call at a time per informer, and get borrowed
 * records valid during the call (kube_obj_ref() to keep one). They must not block for long:
 * enqueue a key in a workqueue and return.
 *
 * Life cycle: new -> add_handlers / add_index -> start -> ... -> stop -> free. The informer borrows
 * the client, which must outlive it.
 */
#ifndef KCSI_KUBE_INFORMER_H
#define KCSI_KUBE_INFORMER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kube/client.h"
#include "kube/objects.h"
#include "kube/store.h"

struct kube_handlers {
	void (*on_add)(const struct kube_obj *obj, void *ud);
	void (*on_update)(const struct kube_obj *old, const struct kube_obj *obj, void *ud);
	void (*on_delete)(const struct kube_obj *last, void *ud);
	void *ud;
};

struct kube_informer_opts {
	const struct kube_kind *kind;
	const char *ns;             /* NULL: all namespaces */
	const char *label_selector; /* optional */
	const char *field_selector; /* optional */
	int64_t resync_ns;          /* 0: no resync */
	long page_size;             /* LIST limit; 0 means 500 */
	size_t max_event;           /* largest watch event; 0 means 16 MiB */
	/* csi-provisioner: keep only objects for which filter() is true (NULL keeps all). A kept
	 * object that stops passing is removed from the store and delivered as a delete, so a cache
	 * holds what the component owns, not the whole cluster. Called on the informer thread. */
	bool (*filter)(const struct kube_obj *o, void *ud);
	void *filter_ud;
};

struct kube_informer_stats {
	uint64_t lists;    /* full LISTs done (first + relists) */
	uint64_t pages;    /* LIST requests */
	uint64_t watches;  /* WATCH requests */
	uint64_t events;   /* watch events applied */
	uint64_t bookmarks;
	uint64_t resyncs;
};

struct kube_informer;

struct kube_informer *kube_informer_new(struct kube_client *c, const struct kube_informer_opts *o);
/* Up to 8 handler sets, registered before start. */
void kube_informer_add_handlers(struct kube_informer *inf, const struct kube_handlers *h);
void kube_informer_add_index(struct kube_informer *inf, const char *name, kube_index_fn fn);
/* Starts the thread; returns 0 or -1. */
int kube_informer_start(struct kube_informer *inf);
bool kube_informer_has_synced(struct kube_informer *inf);
/* Waits until synced or timeout (ns); returns has_synced. */
bool kube_informer_wait_synced(struct kube_informer *inf, int64_t timeout_ns);
/* Stops the threads (the watch ends within about a second). */
void kube_informer_stop(struct kube_informer *inf);
void kube_informer_free(struct kube_informer *inf);

/*
 * An informer set: the informers one controller starts together, waits for and stops. Every
 * function takes the set as an array of n and skips NULL entries, so an optional informer (one
 * behind a feature gate) stays in the array.
 */

/* What ends a wait early: a flag read under its mutex (a controller's stop, set by its stop
 * function), a callback (a pending signal, an atomic flag), both, or neither. */
struct kube_stop {
	pthread_mutex_t *mu;
	const bool *flag;
	bool (*fn)(void *ud);
	void *ud;
};
bool kube_stop_requested(const struct kube_stop *s);

/* Starts each informer; 0, or -1 with err naming the kind that did not start. */
int kube_informers_start(struct kube_informer *const *infs, size_t n, char *err, size_t errlen);
/*
 * Waits until every informer has synced, the wait a controller makes before its first decision
 * (upstream's cache.WaitForCacheSync). While it waits it logs "Waiting for <what> to sync" every
 * 10 s (what NULL: silent) and asks stop every 100 ms. 0 once synced; 1 when stop came first
 * (err "stopped before the caches synced"); -1 when timeout_ns (0: none) passed first (err
 * names the kind still unsynced).
 */
int kube_informers_wait_synced(struct kube_informer *const *infs, size_t n, const char *what,
			       const struct kube_stop *stop, int64_t timeout_ns, char *err,
			       size_t errlen);
/* Stops them all at once: about a second in all, not a second each. */
void kube_informers_stop(struct kube_informer *const *infs, size_t n);

struct kube_store *kube_informer_store(struct kube_informer *inf);
void kube_informer_stats(struct kube_informer *inf, struct kube_informer_stats *s);
/* The resourceVersion the next watch would start from (copied into buf). */
void kube_informer_last_rv(struct kube_informer *inf, char *buf, size_t len);

#endif
