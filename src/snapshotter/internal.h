/*
 * csi-snapshotter's insides shared by controller.c (contents) and group.c (group contents).
 * struct snapper owns its informers and queues; the group ones are NULL without groups.
 */
#ifndef KCSI_SNAPSHOTTER_INTERNAL_H
#define KCSI_SNAPSHOTTER_INTERNAL_H

#include <pthread.h>

#include "kube/informer.h"
#include "kube/workqueue.h"
#include "snapshotter/snapshotter.h"

struct snapper {
	struct snapper_opts o;
	struct kube_client *kc;
	struct kube_informer *vsc_inf, *class_inf;
	struct kube_informer *vgsc_inf, *vgsclass_inf; /* NULL without groups */
	struct kube_workqueue *q, *gq;                 /* gq NULL without groups */
	char selector[300];
	pthread_mutex_t mu;
	bool stop;
};

#define DONE KUBE_WORK_DONE
#define RETRY KUBE_WORK_RETRY
#define AGAIN KUBE_WORK_AGAIN

/* group.c: the group informers, handlers and queue; the worker of gq. */
void snapper_group_new(struct snapper *s);
enum kube_work_result snapper_group_work(void *arg, const char *key);

#endif
