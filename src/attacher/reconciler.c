/*
 * The reconciler (drivers with LIST_VOLUMES_PUBLISHED_NODES): every --reconcile-sync it asks the
 * driver where each volume is published and compares with the VolumeAttachments. A VA that says
 * attached for a volume the driver does not publish on that node is marked attached: false and
 * queued with force-sync, so it is attached again; any other disagreement is queued with
 * force-sync too and the normal attach/detach path settles it. The reconciler never calls
 * Publish/Unpublish itself, so it cannot race the workers on a volume.
 */
#include "attacher/att.h"
#include "base/log.h"
#include "base/strbuf.h"
#include "base/timeutil.h"
#include "base/xalloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* volume ID -> "\n"-separated list of node IDs ("\nnode1\nnode2\n"), malloc'd. */
static int list_published(struct att_ctrl *c, struct kube_hmap *pub, char *err, size_t errlen)
{
	char *token = xstrdup("");

	for (;;) {
		Csi__V1__ListVolumesRequest req = CSI__V1__LIST_VOLUMES_REQUEST__INIT;
		Csi__V1__ListVolumesResponse *resp = NULL;
		struct csi_status st;

		req.max_entries = c->o.max_entries;
		req.starting_token = token;
		if (csi_list_volumes(c->o.csi, &req, &resp, c->o.timeout_ns, &st) != 0) {
			char why[1200];
			att_grpc_error(&st, why, sizeof(why));
			snprintf(err, errlen, "failed to ListVolumes: %s", why);
			free(token);
			return -1;
		}
		for (size_t i = 0; i < resp->n_entries; i++) {
			const Csi__V1__ListVolumesResponse__Entry *en = resp->entries[i];
			struct strbuf sb = STRBUF_INIT;
			if (!en->volume || !en->volume->volume_id)
				continue;
			char *prev = kube_hmap_get(pub, en->volume->volume_id);
			strbuf_addstr(&sb, prev ? prev : "\n");
			for (size_t j = 0; en->status && j < en->status->n_published_node_ids; j++)
				strbuf_addf(&sb, "%s\n", en->status->published_node_ids[j]);
			free(kube_hmap_put(pub, en->volume->volume_id, strbuf_detach(&sb, NULL)));
		}
		free(token);
		token = xstrdup(resp->next_token ? resp->next_token : "");
		csi_msg_free(resp);
		if (!*token)
			break;
	}
	free(token);
	return 0;
}

static bool published_on(struct kube_hmap *pub, const char *volume, const char *node_id)
{
	const char *nodes = kube_hmap_get(pub, volume);
	char needle[512];

	if (!nodes)
		return false;
	snprintf(needle, sizeof(needle), "\n%s\n", node_id);
	return strstr(nodes, needle) != NULL;
}

static void mark_not_attached(struct att_ctrl *c, const struct kube_va *va)
{
	json_t *patch = json_pack("{s:{s:b}}", "status", "attached", 0);
	struct kube_err e;
	int rc = att_patch_only(c, &KUBE_RES_VOLUMEATTACHMENTS, va->meta.name, true, patch, &e);

	json_decref(patch);
	if (rc)
		KLOG_W("Reconciler: cannot mark %s as not attached: %s", LOGQ(va->meta.name), e.message);
}

int att_reconcile_once(struct att_ctrl *c, char *err, size_t errlen)
{
	struct kube_hmap pub = KUBE_HMAP_INIT;
	struct kube_obj **vas;
	size_t n;
	int rc;

	KLOG_V(4, "Reconciling VolumeAttachments with driver backend state");
	rc = list_published(c, &pub, err, errlen);
	if (rc)
		goto out;
	vas = kube_store_list(kube_informer_store(c->va_inf), &n);
	for (size_t i = 0; i < n; i++) {
		const struct kube_va *va = kube_va_of(vas[i]);
		const struct kube_pv *pv;
		char why[1024];
		char *node_id;

		if (!va || !va->attacher || strcmp(va->attacher, c->o.driver) || !va->pv_name)
			continue;
		pv = att_get_pv(c, va->pv_name);
		if (!pv || !pv->volume_handle) {
			kube_obj_unref((struct kube_obj *)(pv ? &pv->meta : NULL));
			continue;
		}
		node_id = att_node_id(c, va->node_name, va, why, sizeof(why));
		if (!node_id) {
			KLOG_W("Reconciler: failed to find node ID of %s: %s", LOGQ(va->meta.name), why);
		} else {
			bool found = published_on(&pub, pv->volume_handle, node_id);
			if (found != va->attached) {
				KLOG_W("VA %s for volume %s has attached status %s but actual state %s. "
				       "Adding back to VA queue for forced reprocessing",
				       LOGQ(va->meta.name), LOGQ(pv->volume_handle), va->attached ? "true" : "false",
				       found ? "true" : "false");
				if (va->attached && !va->meta.deletion_ts)
					mark_not_attached(c, va);
				att_set_force_sync(c, va->meta.name);
				kube_workqueue_add(c->vaq, va->meta.name);
			}
		}
		free(node_id);
		kube_obj_unref((struct kube_obj *)&pv->meta);
	}
	kube_objs_free(vas, n);
out:
	for (size_t i = 0; i < pub.cap; i++)
		if (pub.slots[i].key)
			free(pub.slots[i].value);
	kube_hmap_clear(&pub);
	return rc;
}

void *att_reconciler_main(void *arg)
{
	struct att_ctrl *c = arg;

	for (;;) {
		struct timespec until;
		int64_t at = wall_now_ns() + c->o.reconcile_ns;
		char err[1400] = "";

		until.tv_sec = at / NSEC_PER_SEC;
		until.tv_nsec = at % NSEC_PER_SEC;
		pthread_mutex_lock(&c->mu);
		while (!c->stop && pthread_cond_timedwait(&c->cond, &c->mu, &until) != ETIMEDOUT)
			;
		bool stop = c->stop;
		pthread_mutex_unlock(&c->mu);
		if (stop)
			return NULL;
		if (att_reconcile_once(c, err, sizeof(err)))
			KLOG_ERR(err, "Reconciler");
	}
}
