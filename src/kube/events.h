/*
 * kube events: core/v1 Events about an object, recorded the way client-go's recorder does.
 *
 * kube_event() returns at once: events are queued and sent by the recorder's own thread, so a
 * worker never waits on the API for an event. A repeat of the same event (same object, type,
 * reason, message) within the aggregation window (10 minutes) patches the existing Event's
 * count and lastTimestamp instead of creating a new object. A per-object token bucket (burst 25,
 * then one event per 5 minutes, client-go's spam filter) drops events of an error loop before
 * they reach the API; dropped events are counted. Events that differ only in their message are
 * combined after ten distinct messages in the window: further ones update a single Event whose
 * message is "(combined from similar events): <latest message>".
 *
 * Bounds: at most 1,000 events wait to be sent (more are dropped and counted, as client-go's
 * broadcaster drops when its queue is full); the spam filter and the aggregation caches hold at
 * most 4,096 keys each.
 *
 * The recorder borrows its client. kube_recorder_free() sends what is queued for at most 0.5 s
 * more (the rest is dropped), then frees; a request already in flight runs to its own timeout.
 */
#ifndef KCSI_KUBE_EVENTS_H
#define KCSI_KUBE_EVENTS_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "kube/client.h"
#include "kube/objects.h"

/* The object an event is about (strings are copied). */
struct kube_objref {
	const char *kind;        /* "VolumeAttachment" */
	const char *api_version; /* "storage.k8s.io/v1" */
	const char *ns;          /* NULL for cluster-scoped objects (the Event goes to "default") */
	const char *name;
	const char *uid;
	const char *resource_version;
};

enum kube_event_type { KUBE_EVENT_NORMAL, KUBE_EVENT_WARNING };

struct kube_recorder_opts {
	const char *component; /* source.component, e.g. "csi-attacher" */
	const char *host;      /* source.host; optional */
	int spam_burst;        /* 0: 25 */
	int64_t spam_refill_ns; /* 0: 5 minutes per token */
	int64_t window_ns;     /* 0: 10 minutes */
};

struct kube_recorder_stats {
	uint64_t created, patched, dropped, failed;
	uint64_t tracked; /* objects the spam filter holds a bucket for (at most 4,096) */
};

struct kube_recorder;

struct kube_recorder *kube_recorder_new(struct kube_client *c, const struct kube_recorder_opts *o);
/*
 * A view of r that records as another source.component (and reportingComponent), as one process
 * holding several upstream controllers, each with its own recorder, must: kube-controller-manager's
 * "attachdetach-controller", "persistentvolume-controller", ... A view has no thread of its own:
 * its events go through r's queue, bounds and thread, and r's spam filter and aggregation keep
 * each component's events apart (client-go's keys include the source). NULL for a NULL r.
 * Free a view with kube_recorder_free() before r; flush and stats of a view are r's.
 */
struct kube_recorder *kube_recorder_as(struct kube_recorder *r, const char *component);
void kube_event(struct kube_recorder *r, const struct kube_objref *ref, enum kube_event_type type,
		const char *reason, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Fills an objref from a record (kind and apiVersion from the record's kind). */
void kube_objref_of(const struct kube_obj *o, struct kube_objref *ref, char *uidbuf, size_t uidlen);
/*
 * The event a controller records about one of its objects: the reference is taken from the
 * record. Every component's event helper is this call (a NULL recorder or object records
 * nothing, so a controller built without a recorder in a unit test needs no branch). The
 * message is cut at KUBE_EVENT_MESSAGE_MAX bytes: a driver's error text is the driver's to
 * size, and 1,000 queued events of a 4 MiB gRPC message each would be 4 GiB.
 */
#define KUBE_EVENT_MESSAGE_MAX 2048
void kube_event_about(struct kube_recorder *r, const struct kube_obj *about,
		      enum kube_event_type type, const char *reason, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
void kube_vevent_about(struct kube_recorder *r, const struct kube_obj *about,
		       enum kube_event_type type, const char *reason, const char *fmt, va_list ap)
	__attribute__((format(printf, 5, 0)));
/* Waits until every queued event has been sent (tests). */
void kube_recorder_flush(struct kube_recorder *r);
void kube_recorder_stats(struct kube_recorder *r, struct kube_recorder_stats *s);
void kube_recorder_free(struct kube_recorder *r);

#endif
