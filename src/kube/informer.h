/*
 * kube informer: keeps a store of one kind in sync with the API server and tells handlers about
 * every change, as client-go's shared informer does.
 *
 * One thread per informer: LIST (paginated with limit/continue), then WATCH from the list's
 * resourceVersion with bookmarks. What follows a failed list or an ended watch is client-go's
 * reflector's rule (the table atop informer.c, kube_informer_next_step() below): a stream that
 * ended is resumed from the last resourceVersion seen; 429s and unanswered watches back off and
 * watch again; a resourceVersion the server no longer has (410 Expired) or has not reached (504
 * "Too large resource version": its store went back in time) and any other error back off and
 * relist. A relist delivers the difference: adds, updates for objects whose resourceVersion or
 * uid changed (after a too-large error: for every object still there, as the server's history
 * was not the one cached), and deletes (with the last known state) for objects that vanished
 * meanwhile. A periodic resync (opts.resync_ns) delivers every cached object again as an
 * update(old == new).
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
	uint64_t backoffs; /* waits before a list or watch was asked again */
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

/*
 * The rule the informer thread follows after a failed list page or an ended watch, as
 * client-go's reflector (the table atop informer.c says why for each case). Public for its
 * table test.
 */
enum kube_informer_step {
	KUBE_INFORMER_WATCH,         /* watch again at once from the last resourceVersion */
	KUBE_INFORMER_WATCH_BACKOFF, /* back off, then watch again from the last resourceVersion */
	KUBE_INFORMER_RELIST,        /* back off, then list from the first page, resourceVersion "" */
	KUBE_INFORMER_FULL_LIST,     /* list again at once, in one page (no limit) */
};

enum kube_informer_at {
	KUBE_INFORMER_AT_LIST,          /* a list's first page failed */
	KUBE_INFORMER_AT_LIST_CONTINUE, /* a later page (one with a continue token) failed */
	KUBE_INFORMER_AT_WATCH,         /* a watch ended */
};

/*
 * e: why. For a watch: NULL when its stream ended as streams do (the server closed it), an error
 * answer, the Status of an ERROR event (kube_err_from_status; an undecodable event counts as a
 * 500), or code 0: no answer (e->streamed false) or a 200 stream that broke (e->streamed true).
 * events: the watch delivered an object or a bookmark; lasted_ns: from its request to its end.
 */
enum kube_informer_step kube_informer_next_step(enum kube_informer_at at, const struct kube_err *e,
						bool events, int64_t lasted_ns);

#endif
