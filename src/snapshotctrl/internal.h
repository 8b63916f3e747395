/*
 * snapshot-controller's insides shared by its two sync files: controller.c (snapshots, contents,
 * claims) and group.c (group snapshots, gate CSIVolumeGroupSnapshot, on by default), and
 * opmetrics.c (upstream's operation_total_seconds, fed by controller.c and group.c).
 * struct sctrl owns its informers and queues; the group ones are NULL without the gate.
 */
#ifndef KCSI_SNAPSHOTCTRL_INTERNAL_H
#define KCSI_SNAPSHOTCTRL_INTERNAL_H

#include <pthread.h>

#include "kube/informer.h"
#include "kube/workqueue.h"
#include "snapshotctrl/snapshotctrl.h"

enum { INF_VS, INF_VSC, INF_CLASS, INF_PVC, INF_PV, INF_NODE, INF_VGS, INF_VGSC, INF_VGSCLASS,
       NINF };

struct sctrl {
	struct sctrl_opts o;
	struct kube_client *kc;
	/* INF_NODE only with --enable-distributed-snapshotting, INF_VG* only with groups */
	struct kube_informer *inf[NINF];
	struct kube_workqueue *vsq, *vscq, *claimq, *vgsq; /* vgsq NULL without groups */
	pthread_mutex_t mu;
	bool stop;
	struct sctrl_opm *opm; /* opmetrics.c: operation_total_seconds */
};

/* opmetrics.c: upstream's operation metrics (names as upstream's metrics package), fed by
 * controller.c (snapshots) and group.c (group snapshots). */
#define SCTRL_OP_CREATE "CreateSnapshot"
#define SCTRL_OP_CREATE_READY "CreateSnapshotAndReady"
#define SCTRL_OP_DELETE "DeleteSnapshot"
#define SCTRL_OP_GROUP_CREATE "CreateGroupSnapshot"
#define SCTRL_OP_GROUP_CREATE_READY "CreateGroupSnapshotAndReady"
#define SCTRL_OP_GROUP_DELETE "DeleteGroupSnapshot"
struct sctrl_opm;
struct strbuf;
struct sctrl_opm *sctrl_opm_new(void);
void sctrl_opm_free(struct sctrl_opm *m);
/* Starts op for the snapshot of uid unless it is pending already. */
void sctrl_opm_start(struct sctrl_opm *m, const char *op, const char *uid, const char *driver,
		     bool preprovisioned);
/* Ends a pending op as a success (driver: the one known now, NULL or "" for the start's); a
 * DeleteSnapshot also ends the snapshot's pending creates as "cancel" (a DeleteGroupSnapshot
 * does not: upstream observes no cancel for groups). No-op when not pending. */
void sctrl_opm_success(struct sctrl_opm *m, const char *op, const char *uid, const char *driver);
/* Drops whatever is still pending for the snapshot (or group snapshot) of uid (it is gone):
 * keeps the map bounded; a later start for uid (a sync racing the deletion) is a no-op. */
void sctrl_opm_forget(struct sctrl_opm *m, const char *uid);
void sctrl_opm_render(struct sctrl_opm *m, struct strbuf *out);

#define DONE KUBE_WORK_DONE
#define RETRY KUBE_WORK_RETRY
#define AGAIN KUBE_WORK_AGAIN

/* cache.c: the cached record (one reference) or NULL; NULL name or informer: NULL. */
struct kube_obj *sctrl_get(struct sctrl *c, int inf, const char *ns, const char *name);
/* The same by a queue key "ns/name" (NULL for a key without a slash). */
struct kube_obj *sctrl_get_key(struct sctrl *c, int inf, const char *key);

/* group.c: handlers feeding vgsq, and its worker. */
void sctrl_group_handlers(struct sctrl *c);
enum kube_work_result sctrl_group_work(void *arg, const char *key);

#endif
