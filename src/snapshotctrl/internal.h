/*
 * snapshot-controller's insides shared by its two sync files: controller.c (snapshots, contents,
 * claims) and group.c (group snapshots, with --feature-gates CSIVolumeGroupSnapshot=true).
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
};

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
