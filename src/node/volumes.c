/*
 * The volume manager: mounts and unmounts the CSI volumes of the pods bound to this node, as
 * the kubelet's volume manager (desired state, actual state, reconciler) does.
 *
 * One thread runs a reconcile pass every 200 ms over the informers' stores:
 *   desired: every CSI volume of every pod with spec.nodeName == this node that is not
 *            terminating (deletionTimestamp) or terminal (Succeeded/Failed);
 *   actual:  `vm_mounts` (one per pod and volume: NodePublishVolume done or maybe done) and
 *            `vm_devices` (one per staged volume: NodeStageVolume done or maybe done).
 * A pass reports Node.status.volumesInUse (the union of desired and actual volumes), then
 * unpublishes what no pod wants, unstages devices no pod uses, stages and publishes what is
 * missing (only once the volume is attached and reported in use; attached by the attach/detach
 * controller, or by this node itself, attach.c, when --enable-controller-attach-detach=false, then
 * detached by it once unstaged), marks pods whose volumes are
 * all published Running/Ready, and finishes the deletion of terminating pods whose volumes are
 * all unpublished (DELETE with gracePeriodSeconds=0, as the kubelet's status manager does).
 *
 * Paths are the kubelet's (pkg/volume/csi):
 *   filesystem staging  <root>/plugins/kubernetes.io/csi/<driver>/<sha256(handle)>/globalmount
 *                       (+ vol_data.json beside it)
 *   filesystem publish  <root>/pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount (+ vol_data.json)
 *   block staging       <root>/plugins/kubernetes.io/csi/volumeDevices/staging/<pv>
 *   block publish       <root>/plugins/kubernetes.io/csi/volumeDevices/publish/<pv>/<uid>
 *   block data          <root>/plugins/kubernetes.io/csi/volumeDevices/<pv>/data/vol_data.json
 *   block pod link      <root>/pods/<uid>/volumeDevices/kubernetes.io~csi/<pv> -> publish path
 * vol_data.json is written before the CSI call that creates a mount, so after a crash the state
 * is rebuilt from the root dir (vm_reconstruct()) and the mount table: a pod deleted while
 * kcsi-node was down is still unpublished and its volume unstaged.
 *
 * Failures are retried per volume with exponential backoff (500 ms doubling to 1 min) and
 * reported as FailedMount events on the pod with the driver's message.
 *
 * Node expansion (expand.c) runs from here: offline right after a NodeStageVolume, before the
 * pod's NodePublishVolume (the kubelet's expansion during mount), and online for published
 * volumes each pass; its memory per volume (struct vm_resize) lives on the staged device, or on
 * the mount for drivers that do not stage. Volume stats (stats.c) are collected from here too,
 * every --volume-stats-agg-period, so they run on this thread between passes.
 *
 * Files: this one has the desired state, the mounting and the pass; volumes_state.c the actual
 * state's records, the paths and the reconstruction; volumes_unmount.c the teardown
 * (volumes_int.h is what they share).
 */
#include "node/volumes_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/sha256.h"
#include "base/strbuf.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "kube/config.h"
#include "kube/secret.h"

/*
 * The volume manager's state belongs to its thread: one kcsi-node process may run many nodes
 * (fleet.c), each with its own volume manager thread over the shared informers. vm_mounts and
 * vm_devices (volumes_state.c) are per thread too.
 */
static _Thread_local char **reported; /* volumesInUse last written */
static _Thread_local size_t nreported;
static _Thread_local int64_t next_stats; /* monotonic time of the next volume stats pass */

/* ---- desired state ---- */

static bool node_has_attached(const struct kube_node *node, const char *unique)
{
	for (uint16_t i = 0; node && i < node->nvolumes_attached; i++)
		if (!strcmp(node->volumes_attached[i].name, unique))
			return true;
	return false;
}

/* Fills d for one pod volume; returns false for volumes kcsi-node does not handle. */
static bool resolve(struct nd *nd, const struct kube_pod *pod, const struct kube_pod_volume *v,
		    struct desired *d, struct kube_obj **hold)
{
	memset(d, 0, sizeof(*d));
	*hold = NULL;
	d->pod = pod;
	d->vol = v;
	kube_obj_uid(&pod->meta, d->uid, sizeof(d->uid));
	d->readonly = v->read_only;
	if (v->csi_driver) {
		char *s = vm_path_join("%s%s", d->uid, v->name);
		char sha[65];
		sha256_hex(s, strlen(s), sha);
		free(s);
		snprintf(d->inline_handle, sizeof(d->inline_handle), "csi-%s", sha);
		d->inline_vol = true;
		d->spec = v->name;
		d->driver = v->csi_driver;
		d->handle = d->inline_handle;
		d->resolved = true;
	} else {
		d->spec = v->claim_name;
		struct kube_obj *o = kube_store_get(kube_informer_store(nd->pvcs), pod->meta.ns,
						    v->claim_name);
		const struct kube_pvc *pvc = (const struct kube_pvc *)o;
		struct kube_obj *po = pvc && pvc->volume_name
					      ? kube_store_get(kube_informer_store(nd->pvs), NULL,
							       pvc->volume_name)
					      : NULL;
		kube_obj_unref(o);
		const struct kube_pv *pv = (const struct kube_pv *)po;
		if (!pv) {
			return true; /* unresolved: the pod waits for its claim */
		}
		if (!pv->driver || !pv->volume_handle) {
			kube_obj_unref(po);
			return false; /* not a CSI volume */
		}
		*hold = po;
		d->pv = pv;
		d->spec = pv->meta.name;
		d->driver = pv->driver;
		d->handle = pv->volume_handle;
		d->block = pv->block;
		d->readonly = v->read_only || pv->read_only;
		d->resolved = true;
	}
	vm_unique_name(d->driver, d->handle, d->unique, sizeof(d->unique));
	return true;
}

/* ---- CSI requests ---- */

/*
 * The Secret ns/name (the pod's namespace by default) as the request's secrets, through the
 * shared reader (kube/secret.h): a Secret that cannot be read, or holds a value a CSI secret
 * cannot carry, fails the operation in the kubelet's words, "fetching NodeStageSecretRef ns/name
 * failed: kubernetes.io/csi: failed to find the secret ..." (ref_kind names the reference),
 * which becomes the pod's FailedMount event. The arena is wiped when the request is freed.
 */
static int add_secrets(struct nd *nd, struct csi_arena *a, ProtobufCMessage *req,
		       const char *ref_kind, const char *name, const char *ns, char *err, size_t errlen)
{
	struct kube_secret s;
	char why[512];

	if (!name)
		return 0;
	ns = ns && *ns ? ns : "default";
	if (kube_secret_read(nd->kc, ns, name, &s, why, sizeof(why))) {
		snprintf(err, errlen, "fetching %s %s/%s failed: kubernetes.io/csi: failed to find the "
			 "secret %s in the namespace %s with error: %s", ref_kind, ns, name, name, ns, why);
		return -1;
	}
	csi_arena_wipe_on_free(a);
	for (size_t i = 0; i < s.n; i++)
		csi_map_add(a, req, "secrets", s.entries[i].key, s.entries[i].value);
	kube_secret_free(&s);
	return 0;
}

static Csi__V1__VolumeCapability *capability(struct csi_arena *a, const struct desired *d,
					     const struct nd_driver *drv)
{
	if (d->pv)
		return nd_pv_capability(a, d->pv, drv->snmw);
	return nd_capability_of(a, KUBE_RWO, drv->snmw, false, d->vol->csi_fs_type, NULL, 0);
}

/* publish_context from the VolumeAttachment's attachmentMetadata, as the kubelet reads it. */
static void add_publish_context(struct nd *nd, struct csi_arena *a, ProtobufCMessage *req,
				const struct desired *d)
{
	char name[80];
	vm_va_name(nd, d->driver, d->handle, name);
	struct kube_err e;
	json_t *va = kube_get(nd->kc, &KUBE_RES_VOLUMEATTACHMENTS, NULL, name, &e);
	const char *k;
	json_t *v;
	json_object_foreach(json_object_get(json_object_get(va, "status"), "attachmentMetadata"), k, v)
		if (json_string_value(v))
			csi_map_add(a, req, "publish_context", k, json_string_value(v));
	json_decref(va);
}

/*
 * Whether the API server itself (not the informers' cache, which a node coming back from a
 * partition may still hold from before it) has this node's VolumeAttachment of the volume,
 * attached. A volume force-detached meanwhile and attached to another node has none for this
 * node: it is not staged or published here (issue 35). No answer from the API server: no.
 */
static bool attached_here(struct nd *nd, const struct desired *d, char *why, size_t len)
{
	char name[80];
	vm_va_name(nd, d->driver, d->handle, name);
	struct kube_err e;
	json_t *va = kube_get(nd->kc, &KUBE_RES_VOLUMEATTACHMENTS, NULL, name, &e);
	const char *node = json_string_value(json_object_get(json_object_get(va, "spec"), "nodeName"));
	bool ok = va && node && !strcmp(node, nd->cfg->node_name) &&
		  json_is_true(json_object_get(json_object_get(va, "status"), "attached"));
	if (!ok)
		snprintf(why, len, "%s", !va && kube_err_is_not_found(&e)
			 ? "is gone (the volume was detached from this node)"
			 : !va ? "cannot be read from the API server" : "is not attached");
	json_decref(va);
	return ok;
}

static json_t *vol_data(struct nd *nd, const struct desired *d, bool attach)
{
	char va[80] = "";
	if (attach)
		vm_va_name(nd, d->driver, d->handle, va);
	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "specVolID", d->spec, "volumeHandle",
			 d->handle, "driverName", d->driver, "nodeName", nd->cfg->node_name,
			 "attachmentID", va, "volumeLifecycleMode",
			 d->inline_vol ? "Ephemeral" : "Persistent");
}

static int stage(struct nd *nd, struct nd_driver *drv, const struct desired *d,
		 struct vm_device *dev, bool attach, struct csi_status *st, char *err, size_t errlen)
{
	struct csi_arena *a = csi_arena_new();
	Csi__V1__NodeStageVolumeRequest *req = csi_msg_new(a, &csi__v1__node_stage_volume_request__descriptor);
	req->volume_id = csi_arena_strdup(a, d->handle);
	req->staging_target_path = dev->staging;
	req->volume_capability = capability(a, d, drv);
	for (uint16_t i = 0; i < d->pv->nvolume_attributes; i++)
		csi_map_add(a, &req->base, "volume_context", d->pv->volume_attributes[i].key,
			    d->pv->volume_attributes[i].value);
	if (attach)
		add_publish_context(nd, a, &req->base, d);
	int rc = add_secrets(nd, a, &req->base, "NodeStageSecretRef", d->pv->node_stage_secret_name,
			     d->pv->node_stage_secret_ns, err, errlen);
	if (rc == 0) {
		Csi__V1__NodeStageVolumeResponse *resp = NULL;
		rc = csi_node_stage_volume(drv->conn, req, &resp, nd->cfg->timeout_ns, st);
		csi_msg_free(resp);
		if (rc)
			snprintf(err, errlen, "rpc error: code = %s desc = %.400s", csi_code_go_name(st->code),
				 st->message);
	}
	csi_arena_free(a);
	return rc;
}

static int publish(struct nd *nd, struct nd_driver *drv, const struct desired *d,
		   const char *target, const char *staging, bool attach, char *err, size_t errlen)
{
	struct csi_arena *a = csi_arena_new();
	Csi__V1__NodePublishVolumeRequest *req =
		csi_msg_new(a, &csi__v1__node_publish_volume_request__descriptor);
	req->volume_id = csi_arena_strdup(a, d->handle);
	req->target_path = csi_arena_strdup(a, target);
	req->staging_target_path = staging ? csi_arena_strdup(a, staging) : NULL;
	req->volume_capability = capability(a, d, drv);
	req->readonly = d->readonly;
	if (d->pv) {
		for (uint16_t i = 0; i < d->pv->nvolume_attributes; i++)
			csi_map_add(a, &req->base, "volume_context", d->pv->volume_attributes[i].key,
				    d->pv->volume_attributes[i].value);
	} else {
		for (uint16_t i = 0; i < d->vol->ncsi_attributes; i++)
			csi_map_add(a, &req->base, "volume_context", d->vol->csi_attributes[i].key,
				    d->vol->csi_attributes[i].value);
	}
	struct kube_obj *co = kube_store_get(kube_informer_store(nd->csidrivers), NULL, d->driver);
	const struct kube_csidriver *cd = kube_csidriver_of(co);
	if ((cd && cd->pod_info_on_mount) || d->inline_vol) {
		csi_map_add(a, &req->base, "volume_context", "csi.storage.k8s.io/ephemeral",
			    d->inline_vol ? "true" : "false");
	}
	if (cd && cd->pod_info_on_mount) {
		csi_map_add(a, &req->base, "volume_context", "csi.storage.k8s.io/pod.name", d->pod->meta.name);
		csi_map_add(a, &req->base, "volume_context", "csi.storage.k8s.io/pod.namespace",
			    d->pod->meta.ns);
		csi_map_add(a, &req->base, "volume_context", "csi.storage.k8s.io/pod.uid", d->uid);
		csi_map_add(a, &req->base, "volume_context", "csi.storage.k8s.io/serviceAccount.name",
			    d->pod->service_account ? d->pod->service_account : "default");
	}
	kube_obj_unref(co);
	if (attach)
		add_publish_context(nd, a, &req->base, d);
	int rc = d->pv ? add_secrets(nd, a, &req->base, "NodePublishSecretRef",
				     d->pv->node_publish_secret_name, d->pv->node_publish_secret_ns, err,
				     errlen)
		       : add_secrets(nd, a, &req->base, "NodePublishSecretRef", d->vol->csi_secret_name,
				     d->pod->meta.ns, err, errlen);
	if (rc == 0) {
		Csi__V1__NodePublishVolumeResponse *resp = NULL;
		struct csi_status st;
		rc = csi_node_publish_volume(drv->conn, req, &resp, nd->cfg->timeout_ns, &st);
		csi_msg_free(resp);
		if (rc)
			snprintf(err, errlen, "rpc error: code = %s desc = %.400s", csi_code_go_name(st.code),
				 st.message);
	}
	csi_arena_free(a);
	return rc;
}

/* ---- one pass ---- */

static bool is_reported(const char *unique)
{
	for (size_t i = 0; i < nreported; i++)
		if (!strcmp(reported[i], unique))
			return true;
	return false;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Writes Node.status.volumesInUse when the set changed. */
static void report_in_use(struct nd *nd, struct desired *want, size_t nwant)
{
	size_t cap = nwant + 8, n = 0;
	char **set = xcalloc(cap, sizeof(char *));
	for (size_t i = 0; i < nwant; i++)
		if (want[i].resolved && !want[i].inline_vol)
			set[n++] = want[i].unique;
	for (struct vm_device *d = vm_devices; d; d = d->next) {
		if (n == cap)
			set = xrealloc(set, (cap *= 2) * sizeof(char *));
		set[n++] = d->unique;
	}
	for (struct vm_mount *m = vm_mounts; m; m = m->next) {
		if (n == cap)
			set = xrealloc(set, (cap *= 2) * sizeof(char *));
		if (m->maybe || m->published)
			set[n++] = m->unique;
	}
	qsort(set, n, sizeof(char *), cmp_str);
	size_t u = 0;
	for (size_t i = 0; i < n; i++)
		if (u == 0 || strcmp(set[u - 1], set[i]))
			set[u++] = set[i];
	bool same = u == nreported;
	for (size_t i = 0; same && i < u; i++)
		same = !strcmp(set[i], reported[i]);
	if (same) {
		free(set);
		return;
	}
	json_t *arr = json_array();
	for (size_t i = 0; i < u; i++)
		json_array_append_new(arr, json_string(set[i]));
	json_t *patch = json_pack("{s:{s:o}}", "status", "volumesInUse", arr);
	char *body = json_dumps(patch, JSON_COMPACT);
	struct kube_err e;
	json_t *res = kube_patch(nd->kc, &KUBE_RES_NODES, NULL, nd->cfg->node_name, true,
				 KUBE_PATCH_MERGE, body, &e);
	free(body);
	json_decref(patch);
	if (!res) {
		KLOG_ERR(e.message, "Failed to update volumesInUse node=\"%s\"", nd->cfg->node_name);
		free(set);
		return;
	}
	json_decref(res);
	for (size_t i = 0; i < nreported; i++)
		free(reported[i]);
	free(reported);
	reported = xcalloc(u + 1, sizeof(char *));
	for (size_t i = 0; i < u; i++)
		reported[i] = xstrdup(set[i]);
	nreported = u;
	KLOG_V(2, "Reported volumesInUse node=\"%s\" count=%zu", nd->cfg->node_name, u);
	free(set);
}

static int expand(struct nd *nd, struct nd_driver *drv, const struct desired *d, const char *path,
		  const char *staging, struct vm_resize *rs, bool at_mount)
{
	struct nd_expand x = { .pod = d->pod, .pv = d->pv, .spec = d->spec, .volume_path = path,
			       .staging_path = staging, .readonly = d->readonly,
			       .at_mount = at_mount, .done_size = &rs->done,
			       .failed_size = &rs->failed, .next_try = &rs->next_try,
			       .delay = &rs->delay };
	return nd_expand_volume(nd, drv, &x);
}

/* Online expansion of the published volumes whose claim asks for it. */
static void expand_published(struct nd *nd, struct desired *want, size_t nwant)
{
	for (size_t i = 0; i < nwant && !atomic_load(&nd->stop); i++) {
		struct desired *d = &want[i];
		struct vm_mount *m = d->resolved && d->pv ? vm_mount_find(d->uid, d->spec) : NULL;
		if (!m || !m->published)
			continue;
		struct nd_driver *drv = nd_driver_get(nd, d->driver);
		if (!drv)
			continue;
		struct vm_device *dev = vm_device_find(d->unique);
		expand(nd, drv, d, m->target, dev ? dev->staging : NULL, dev ? &dev->rs : &m->rs,
		       false);
		nd_driver_put(nd, drv);
	}
}

/* Every --volume-stats-agg-period: NodeGetVolumeStats of the published claims' volumes. */
static void collect_stats(struct nd *nd, struct desired *want, size_t nwant)
{
	int64_t now = mono_now_ns();
	if (nd->cfg->stats_period_ns <= 0 || now < next_stats)
		return;
	next_stats = now + nd->cfg->stats_period_ns;
	struct nd_stats_volume *v = xcalloc(nwant + 1, sizeof(*v));
	size_t n = 0;
	for (size_t i = 0; i < nwant; i++) {
		struct desired *d = &want[i];
		struct vm_mount *m = d->resolved && d->pv ? vm_mount_find(d->uid, d->spec) : NULL;
		if (!m || !m->published || !d->vol->claim_name)
			continue;
		struct vm_device *dev = vm_device_find(d->unique);
		v[n++] = (struct nd_stats_volume){ .pod = d->pod, .claim = d->vol->claim_name,
						   .pod_volume = d->vol->name, .driver = d->driver,
						   .handle = d->handle, .target = m->target,
						   .staging = dev ? dev->staging : NULL };
	}
	nd_stats_collect(nd, v, n);
	free(v);
}

/* Stages (when needed) and publishes one wanted volume. */
static void mount_one(struct nd *nd, struct desired *d)
{
	char err[1200];
	struct vm_mount *m = vm_mount_find(d->uid, d->spec);
	if (m && m->published)
		return;
	if (!m) {
		char *target = vm_target_path(nd, d->uid, d->spec, d->block);
		m = vm_mount_add(d->uid, d->spec, d->driver, d->handle, d->unique, target, d->block);
		free(target);
	}
	if (mono_now_ns() < m->next_try)
		return;
	struct nd_driver *drv = nd_driver_get(nd, d->driver);
	if (!drv) {
		pod_event(nd, d->pod, "FailedMount",
			  "MountVolume.MountDevice failed for volume \"%s\" : kubernetes.io/csi: "
			  "attacher.MountDevice failed to create newCsiDriverClient: driver name %s "
			  "not found in the list of registered CSI drivers",
			  d->spec, d->driver);
		vm_backoff_fail(&m->next_try, &m->delay);
		return;
	}
	struct kube_obj *co = kube_store_get(kube_informer_store(nd->csidrivers), NULL, d->driver);
	const struct kube_csidriver *cd = kube_csidriver_of(co);
	bool attach = !d->inline_vol && (!cd || cd->attach_required);
	bool ephemeral_ok = cd && cd->ephemeral;
	kube_obj_unref(co);
	if (d->inline_vol && !ephemeral_ok) {
		pod_event(nd, d->pod, "FailedMount",
			  "MountVolume.SetUp failed for volume \"%s\" : CSI driver %s does not allow "
			  "Ephemeral inline volumes (CSIDriver volumeLifecycleModes)",
			  d->spec, d->driver);
		vm_backoff_fail(&m->next_try, &m->delay);
		goto out;
	}
	if (attach && !nd->cfg->controller_attach_detach) {
		if (vm_attach(nd, d) != 1)
			goto out; /* its own backoff: attach.c retries on a later pass */
	} else if (attach) {
		struct kube_obj *no = kube_store_get(kube_informer_store(nd->nodes), NULL,
						     nd->cfg->node_name);
		bool ok = node_has_attached((const struct kube_node *)no, d->unique);
		kube_obj_unref(no);
		if (!ok) {
			if (!m->waiting_reported && mono_now_ns() - m->first_seen > 5 * NSEC_PER_SEC) {
				pod_event(nd, d->pod, "FailedAttachVolume",
					  "AttachVolume.WaitForAttach: volume \"%s\" (%s) is not yet in "
					  "Node %s status.volumesAttached; waiting for the attach/detach "
					  "controller",
					  d->spec, d->unique, nd->cfg->node_name);
				m->waiting_reported = true;
			}
			goto out; /* checked again next pass, no backoff: the attach may land any time */
		}
		char why[80];
		if (!attached_here(nd, d, why, sizeof(why))) {
			char name[80];
			vm_va_name(nd, d->driver, d->handle, name);
			KLOG_W("MountVolume for volume \"%s\" waits: VolumeAttachment %s for node %s %s",
			       d->spec, name, nd->cfg->node_name, why);
			vm_backoff_fail(&m->next_try, &m->delay);
			goto out;
		}
	}
	if (!d->inline_vol && !is_reported(d->unique))
		goto out; /* volumesInUse first, so the controller never detaches a mounted volume */

	char *staging = NULL;
	if (drv->stage_unstage && !d->inline_vol) {
		struct vm_device *dev = vm_device_find(d->unique);
		if (!dev) {
			char *sp = d->block ? vm_block_staging_path(nd, d->spec)
					    : vm_fs_staging_path(nd, d->driver, d->handle);
			dev = vm_device_add(d->unique, d->driver, d->handle, d->spec, sp, d->block);
			free(sp);
		}
		if (!dev->staged) {
			json_t *vd = d->block ? vol_data(nd, d, attach)
					      : json_pack("{s:s, s:s}", "driverName", d->driver,
							  "volumeHandle", d->handle);
			char *ddir = d->block ? vm_block_data_dir(nd, d->spec) : vm_parent_of(dev->staging);
			char *data = vm_path_join("%s/vol_data.json", ddir);
			vm_mkdir_p(ddir, 0750);
			if (d->block)
				vm_mkdir_p(dev->staging, 0750);
			int wrc = vm_write_json(data, vd);
			json_decref(vd);
			free(data);
			free(ddir);
			if (wrc) {
				vm_backoff_fail(&m->next_try, &m->delay);
				goto out;
			}
			dev->maybe = true;
			struct csi_status st;
			if (stage(nd, drv, d, dev, attach, &st, err, sizeof(err))) {
				pod_event(nd, d->pod, "FailedMount",
					  "MountVolume.MountDevice failed for volume \"%s\" : %s", d->spec,
					  err);
				KLOG_ERR(err, "MountVolume.MountDevice failed for volume \"%s\"",
					 d->spec);
				vm_backoff_fail(&m->next_try, &m->delay);
				goto out;
			}
			dev->staged = true;
			KLOG_I("MountVolume.MountDevice succeeded for volume \"%s\" staging=\"%s\"",
			       d->spec, dev->staging);
		}
		staging = dev->staging;
		/* Offline expansion: a claim grown while no pod used it, before the pod sees it. */
		if (expand(nd, drv, d, dev->staging, dev->staging, &dev->rs, true)) {
			vm_backoff_fail(&m->next_try, &m->delay);
			goto out;
		}
	}
	/* SetUp: the parent of the target and vol_data.json, then NodePublishVolume. */
	char *parent = vm_parent_of(m->target);
	vm_mkdir_p(parent, 0750);
	if (!d->block) {
		json_t *vd = vol_data(nd, d, attach);
		char *data = vm_path_join("%s/vol_data.json", parent);
		int wrc = vm_write_json(data, vd);
		json_decref(vd);
		free(data);
		if (wrc) {
			free(parent);
			vm_backoff_fail(&m->next_try, &m->delay);
			goto out;
		}
	} else {
		char *link = vm_block_pod_link(nd, d->uid, d->spec);
		char *ldir = vm_parent_of(link);
		vm_mkdir_p(ldir, 0750);
		/* the link is the pod's record of the mapping: it exists before the publish */
		unlink(link);
		if (symlink(m->target, link) != 0)
			KLOG_ERR(strerror(errno), "Cannot create %s", link);
		free(ldir);
		free(link);
	}
	free(parent);
	m->maybe = true;
	if (publish(nd, drv, d, m->target, staging, attach, err, sizeof(err))) {
		pod_event(nd, d->pod, "FailedMount", "MountVolume.SetUp failed for volume \"%s\" : %s",
			  d->spec, err);
		KLOG_ERR(err, "MountVolume.SetUp failed for volume \"%s\" pod=\"%s/%s\"",
			 d->spec, d->pod->meta.ns, d->pod->meta.name);
		vm_backoff_fail(&m->next_try, &m->delay);
		goto out;
	}
	m->published = true;
	m->delay = 0;
	KLOG_I("MountVolume.SetUp succeeded for volume \"%s\" pod=\"%s/%s\" target=\"%s\"", d->spec,
	       d->pod->meta.ns, d->pod->meta.name, m->target);
out:
	nd_driver_put(nd, drv);
}

/*
 * Reports the pod Running and Ready as the kubelet's status manager would for started
 * containers (status.c builds it). The pod is read first: the informer's record keeps neither
 * the containers nor the scheduler's PodScheduled time.
 */
static void set_pod_running(struct nd *nd, const struct kube_pod *pod, const char *uid)
{
	struct kube_err e;
	json_t *obj = kube_get(nd->kc, &KUBE_RES_PODS, pod->meta.ns, pod->meta.name, &e);
	if (!obj) {
		KLOG_ERR(e.message, "Failed to read pod pod=\"%s/%s\"",
			 pod->meta.ns, pod->meta.name);
		return;
	}
	char now[RFC3339_BUFLEN];
	rfc3339_format(time(NULL), now, sizeof(now));
	json_t *patch = json_pack("{s:{s:s}, s:o}", "metadata", "uid", uid, "status",
				  nd_pod_status(obj, uid, nd->machine.node_ip, now));
	json_decref(obj);
	char *body = json_dumps(patch, JSON_COMPACT);
	json_t *res = kube_patch(nd->kc, &KUBE_RES_PODS, pod->meta.ns, pod->meta.name, true,
				 KUBE_PATCH_MERGE, body, &e);
	if (!res)
		KLOG_ERR(e.message, "Failed to update pod status pod=\"%s/%s\"",
			 pod->meta.ns, pod->meta.name);
	else
		KLOG_I("Pod is running pod=\"%s/%s\"", pod->meta.ns, pod->meta.name);
	json_decref(res);
	free(body);
	json_decref(patch);
}

/*
 * Pods this node reported waiting for their volumes (ContainerCreating, status.c), by uid: the
 * status is written once per pod, and an entry goes when its pod is Running or gone (seen is
 * reset by every reconcile).
 */
struct vm_waiting {
	char uid[40];
	bool seen;
	struct vm_waiting *next;
};
static struct vm_waiting *vm_waiting;

static struct vm_waiting *waiting_find(const char *uid)
{
	for (struct vm_waiting *w = vm_waiting; w; w = w->next)
		if (!strcmp(w->uid, uid))
			return w;
	return NULL;
}

/* Drops the entries of pods a reconcile did not see waiting (and clears seen on the rest). */
static void waiting_prune(bool all)
{
	for (struct vm_waiting **p = &vm_waiting; *p;) {
		struct vm_waiting *w = *p;
		if (!w->seen || all) {
			*p = w->next;
			free(w);
		} else {
			w->seen = false;
			p = &w->next;
		}
	}
}

/* Reports a pod placed here as the kubelet does while its volumes are set up, once. */
static void set_pod_waiting(struct nd *nd, const struct kube_pod *pod, const char *uid)
{
	struct vm_waiting *w = waiting_find(uid);
	if (w) {
		w->seen = true;
		return;
	}
	struct kube_err e;
	json_t *obj = kube_get(nd->kc, &KUBE_RES_PODS, pod->meta.ns, pod->meta.name, &e);
	if (!obj)
		return; /* the next reconcile tries again */
	char now[RFC3339_BUFLEN];
	rfc3339_format(time(NULL), now, sizeof(now));
	json_t *patch = json_pack("{s:{s:s}, s:o}", "metadata", "uid", uid, "status",
				  nd_pod_status_waiting(obj, nd->machine.node_ip, now));
	json_decref(obj);
	char *body = json_dumps(patch, JSON_COMPACT);
	json_t *res = kube_patch(nd->kc, &KUBE_RES_PODS, pod->meta.ns, pod->meta.name, true,
				 KUBE_PATCH_MERGE, body, &e);
	if (res) {
		w = xcalloc(1, sizeof(*w));
		snprintf(w->uid, sizeof(w->uid), "%s", uid);
		w->seen = true;
		w->next = vm_waiting;
		vm_waiting = w;
	} else {
		KLOG_ERR(e.message, "Failed to update pod status pod=\"%s/%s\"",
			 pod->meta.ns, pod->meta.name);
	}
	json_decref(res);
	free(body);
	json_decref(patch);
}

static void finish_deletion(struct nd *nd, const struct kube_pod *pod, const char *uid)
{
	struct strbuf path = STRBUF_INIT, body = STRBUF_INIT, out = STRBUF_INIT;
	kube_path(&path, &KUBE_RES_PODS, pod->meta.ns, pod->meta.name, NULL);
	strbuf_addf(&body, "{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\",\"gracePeriodSeconds\":0,"
			   "\"preconditions\":{\"uid\":\"%s\"}}", uid);
	struct kube_request rq = { .method = "DELETE", .path = path.buf,
				   .content_type = "application/json", .body = body.buf,
				   .body_len = body.len };
	struct kube_err e;
	if (kube_do(nd->kc, &rq, &out, &e) < 0 && !kube_err_is_not_found(&e) && !kube_err_is_conflict(&e))
		KLOG_ERR(e.message, "Failed to delete pod pod=\"%s/%s\"",
			 pod->meta.ns, pod->meta.name);
	else
		KLOG_I("Pod's volumes are unmounted, deleted pod=\"%s/%s\"", pod->meta.ns, pod->meta.name);
	strbuf_release(&path);
	strbuf_release(&body);
	strbuf_release(&out);
}

static bool pod_has_mounts(const char *uid)
{
	for (struct vm_mount *m = vm_mounts; m; m = m->next)
		if (!strcmp(m->pod_uid, uid) && (m->maybe || m->published))
			return true;
	return false;
}

static void reconcile(struct nd *nd)
{
	size_t npods = 0;
	struct kube_obj **pods = kube_store_by_index(kube_informer_store(nd->pods), ND_PODS_BY_NODE,
						     nd->cfg->node_name, &npods);
	size_t cap = 16, nwant = 0, nhold = 0;
	struct desired *want = xcalloc(cap, sizeof(*want));
	struct kube_obj **hold = xcalloc(cap, sizeof(*hold));
	for (size_t i = 0; i < npods; i++) {
		const struct kube_pod *pod = kube_pod_of(pods[i]);
		if (!pod || !pod->node_name || strcmp(pod->node_name, nd->cfg->node_name) != 0)
			continue;
		if (pod->meta.deletion_ts || kube_pod_terminated(pod))
			continue;
		for (uint16_t v = 0; v < pod->nvolumes; v++) {
			if (nwant == cap) {
				cap *= 2;
				want = xrealloc(want, cap * sizeof(*want));
				hold = xrealloc(hold, cap * sizeof(*hold));
			}
			struct kube_obj *h = NULL;
			if (resolve(nd, pod, &pod->volumes[v], &want[nwant], &h))
				nwant++;
			if (h)
				hold[nhold++] = h;
		}
	}
	report_in_use(nd, want, nwant);
	vm_unpublish_unwanted(nd, want, nwant);
	vm_unstage_unused(nd, want, nwant);
	if (!nd->cfg->controller_attach_detach)
		vm_detach_unused(nd, want, nwant);
	for (size_t i = 0; i < nwant && !atomic_load(&nd->stop); i++)
		if (want[i].resolved)
			mount_one(nd, &want[i]);
	expand_published(nd, want, nwant);
	collect_stats(nd, want, nwant);
	/* Pods: Running once every volume is published; terminating ones deleted once unmounted. */
	for (size_t i = 0; i < npods && !atomic_load(&nd->stop); i++) {
		const struct kube_pod *pod = kube_pod_of(pods[i]);
		if (!pod || !pod->node_name || strcmp(pod->node_name, nd->cfg->node_name) != 0)
			continue;
		char uid[40];
		kube_obj_uid(&pod->meta, uid, sizeof(uid));
		if (pod->meta.deletion_ts) {
			if (!pod_has_mounts(uid))
				finish_deletion(nd, pod, uid);
			continue;
		}
		if (kube_pod_terminated(pod) || (pod->phase == KUBE_POD_RUNNING && pod->ready))
			continue;
		bool all = true;
		for (size_t w = 0; w < nwant && all; w++) {
			if (want[w].pod != pod)
				continue;
			struct vm_mount *m = want[w].resolved ? vm_mount_find(uid, want[w].spec) : NULL;
			all = m && m->published;
		}
		if (all)
			set_pod_running(nd, pod, uid);
		else if (pod->phase == KUBE_POD_PENDING && !pod->running)
			set_pod_waiting(nd, pod, uid);
	}
	waiting_prune(false);
	for (size_t i = 0; i < nhold; i++)
		kube_obj_unref(hold[i]);
	free(hold);
	free(want);
	kube_objs_free(pods, npods);
}

/* Frees the thread's state (the end of volumes_main). */
static void forget_state(void)
{
	next_stats = 0;
	waiting_prune(true);
	while (vm_mounts) {
		struct vm_mount *m = vm_mounts;
		vm_mounts = m->next;
		vm_mount_free(m);
	}
	while (vm_devices) {
		struct vm_device *d = vm_devices;
		vm_devices = d->next;
		vm_device_free(d);
	}
	for (size_t i = 0; i < nreported; i++)
		free(reported[i]);
	free(reported);
	reported = NULL;
	nreported = 0;
	vm_attach_forget();
}

static bool vm_stopping(void *ud)
{
	return atomic_load(&((struct nd *)ud)->stop);
}

static void *volumes_main(void *arg)
{
	struct nd *nd = arg;
	vm_reconstruct(nd);
	struct kube_informer *infs[] = { nd->pods, nd->nodes, nd->pvs, nd->pvcs, nd->csidrivers };
	const struct kube_stop stop = { .fn = vm_stopping, .ud = nd };
	char err[256];
	/* the controller kit's wait (kube/informer.h), as every controller's: a stop ends it */
	if (kube_informers_wait_synced(infs, sizeof(infs) / sizeof(infs[0]), "volume manager",
				       &stop, 0, err, sizeof(err))) {
		forget_state();
		return NULL;
	}
	KLOG_I("Volume manager started node=\"%s\"", nd->cfg->node_name);
	while (!atomic_load(&nd->stop)) {
		if (!nd->cfg->controller_attach_detach)
			vm_attach_adopt(nd);
		reconcile(nd);
		sleep_ns(200 * NSEC_PER_MSEC);
	}
	forget_state();
	return NULL;
}

int nd_volumes_start(struct nd *nd)
{
	if (pthread_create(&nd->vm_thread, NULL, volumes_main, nd) != 0) {
		KLOG_E("Cannot start the volume manager thread");
		return -1;
	}
	nd->vm_started = true;
	return 0;
}

int nd_volumes_stop(struct nd *nd)
{
	if (nd->vm_started) {
		/* A CSI call in flight may take long: never hold up shutdown for it. */
		struct timespec dl = wall_deadline(250 * NSEC_PER_MSEC);
		if (pthread_timedjoin_np(nd->vm_thread, NULL, &dl) != 0) {
			KLOG_W("Volume manager busy in a CSI call; exiting without waiting for it");
			return -1;
		}
	}
	nd->vm_started = false;
	return 0;
}
