/*
 * csi-snapshotter's insides shared by controller.c (contents) and group.c (group contents).
 * struct snapper owns its informers and queues; the group ones are NULL without groups.
 */
#ifndef KCSI_SNAPSHOTTER_INTERNAL_H
#define KCSI_SNAPSHOTTER_INTERNAL_H

#include <jansson.h>
#include <pthread.h>

#include "csi/msg.h"
#include "kube/informer.h"
#include "kube/workqueue.h"
#include "snapshots/snapshots.h"
#include "snapshotter/snapshotter.h"

struct snapper;

/* An informer's handlers: the name of each object of our driver into q, on an update only when
 * wanted() says it is worth a sync (shared.c). */
struct snapper_watch {
	struct snapper *s;
	struct kube_workqueue *q;
	const char *(*driver_of)(const struct kube_obj *o); /* NULL: not of the watched kind */
	bool (*wanted)(const struct kube_obj *old, const struct kube_obj *o);
};

struct snapper {
	struct snapper_opts o;
	struct kube_client *kc;
	struct kube_informer *vsc_inf, *class_inf;
	struct kube_informer *vgsc_inf, *vgsclass_inf; /* NULL without groups */
	struct kube_workqueue *q, *gq;                 /* gq NULL without groups */
	struct snapper_watch watch, gwatch;            /* on vsc_inf and vgsc_inf */
	char selector[300];
	pthread_mutex_t mu;
	bool stop;
};

#define DONE KUBE_WORK_DONE
#define RETRY KUBE_WORK_RETRY
#define AGAIN KUBE_WORK_AGAIN

/* ---- shared.c: the shape both paths have ---- */

void snapper_watch(struct snapper_watch *w, struct kube_informer *inf);
/*
 * A content without a status in the cache may be one this process has just written: the
 * informer's echo can come after the next sync. The worker reads it (o, a cluster-scoped
 * object of kind) from the API before a first create call, as upstream reads before its status
 * update, so the driver is not asked twice. Returns the fresh object (o released), or o when
 * the read fails.
 */
struct kube_obj *snapper_fresh(struct snapper *s, struct kube_obj *o,
			       const struct kube_resource *res, const struct kube_kind *kind);
/* A finalizer or annotation patch's failure as the worker's answer (gone: done). */
enum kube_work_result snapper_patch_result(const struct kube_err *ke);
/* Patches {"status": status} (taken; an empty one writes nothing); 0, or -1 logged. */
int snapper_patch_status(struct snapper *s, const struct kube_obj *meta, json_t *status,
			 const char *what);
/*
 * The class's parameters into req's "parameters" and, with --extra-create-metadata, the three
 * pairs of extra (key, value; a NULL value is sent empty). 0, or -1 with err.
 */
int snapper_add_params(struct snapper *s, struct csi_arena *a, ProtobufCMessage *req,
		       const struct kube_vsclass *cls, const char *const extra[6], char *err,
		       size_t errlen);

/* One deletion: the CSI call, then the status handle cleared; events on each failure. */
struct snapper_delete {
	const struct kube_obj *meta;
	const char *what;       /* "snapshot", "group snapshot": logs and events */
	const char *clear_what; /* "", "group snapshot ": "Failed to clear <>content status" */
	const char *reason;     /* the Warning events' reason */
	const char *secret_ns, *secret_name; /* the deletion secret, when both are set */
	const ProtobufCMessageDescriptor *request;
	void (*fill)(ProtobufCMessage *req, struct csi_arena *a, const void *ud);
	int (*call)(struct snapper *s, ProtobufCMessage *req, const void *ud, struct csi_status *st);
	const char *clear_status; /* the status patch once the driver's copy is gone */
	const void *ud;           /* the content */
};
/* DONE, or RETRY after a failure (logged, and a Warning event). */
int snapper_delete(struct snapper *s, const struct snapper_delete *d);

/* group.c: the group informers, handlers and queue; the worker of gq. */
void snapper_group_new(struct snapper *s);
enum kube_work_result snapper_group_work(void *arg, const char *key);

#endif
