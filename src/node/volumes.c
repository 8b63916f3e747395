/*
 * The volume manager: mounts and unmounts the CSI volumes of the pods bound to this node, as
 * the kubelet's volume manager (desired state, actual state, reconciler) does.
 *
 * One thread runs a reconcile pass every 200 ms over the informers' stores:
 *   desired: every CSI volume of every pod with spec.nodeName == this node that is not
 *            terminating (deletionTimestamp) or terminal (Succeeded/Failed);
 *   actual:  `mounts` (one per pod and volume: NodePublishVolume done or maybe done) and
 *            `devices` (one per staged volume: NodeStageVolume done or maybe done).
 * A pass reports Node.status.volumesInUse (the union of desired and actual volumes), then
 * unpublishes what no pod wants, unstages devices no pod uses, stages and publishes what is
 * missing (only once the volume is attached and reported in use), marks pods whose volumes are
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
 * is rebuilt from the root dir (reconstruct()) and the mount table: a pod deleted while
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
 */
#include "node/node_int.h"

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

/* What a volume's node expansion remembers across passes (expand.c's nd_expand fields). */
struct vm_resize {
	int64_t done, failed, next_try, delay;
};

struct vm_mount {
	struct vm_mount *next;
	char *pod_uid, *spec, *driver, *handle, *unique, *target;
	bool block;
	bool published; /* NodePublishVolume succeeded (or the mount table shows it) */
	bool maybe;     /* a NodePublishVolume was tried: unpublish before forgetting it */
	bool waiting_reported;
	int64_t first_seen, next_try, delay;
	struct vm_resize rs; /* online expansion of a driver that does not stage */
};

struct vm_device {
	struct vm_device *next;
	char *unique, *driver, *handle, *spec, *staging;
	bool block, staged, maybe;
	int64_t next_try, delay;
	struct vm_resize rs; /* node expansion, shared by the pods of the volume */
};

/* One CSI volume a pod wants, for one pass. Strings are borrowed from records or `buf`. */
struct desired {
	const struct kube_pod *pod;
	const struct kube_pv *pv; /* NULL for inline volumes */
	const struct kube_pod_volume *vol;
	char uid[40];
	const char *spec, *driver, *handle;
	char unique[600];
	char inline_handle[80];
	bool resolved, block, readonly, inline_vol;
};

/*
 * The volume manager's state belongs to its thread: one kcsi-node process may run many nodes
 * (fleet.c), each with its own volume manager thread over the shared informers.
 */
static _Thread_local struct vm_mount *mounts;
static _Thread_local struct vm_device *devices;
static _Thread_local char **reported; /* volumesInUse last written */
static _Thread_local size_t nreported;
static _Thread_local int64_t next_stats; /* monotonic time of the next volume stats pass */

/* ---- small helpers ---- */

static char *path_join(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *path_join(const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	return strbuf_detach(&sb, NULL);
}

static void mkdir_p(const char *path, mode_t mode)
{
	char *p = xstrdup(path);
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		mkdir(p, mode);
		*s = '/';
	}
	mkdir(p, mode);
	free(p);
}

static char *parent_of(const char *path)
{
	char *p = xstrdup(path);
	char *slash = strrchr(p, '/');
	if (slash && slash != p)
		*slash = '\0';
	return p;
}

/* True when path is a mount point in this mount namespace (/proc/self/mountinfo). */
static bool is_mountpoint(const char *path)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return false;
	char line[8192];
	bool found = false;
	while (!found && fgets(line, sizeof(line), f)) {
		char *save = NULL, *tok = strtok_r(line, " ", &save);
		for (int i = 0; tok && i < 4; i++)
			tok = strtok_r(NULL, " ", &save);
		if (!tok)
			continue;
		/* mountinfo escapes space, tab, newline and backslash as \ooo */
		char dec[4096];
		size_t n = 0;
		for (char *s = tok; *s && n + 1 < sizeof(dec); s++) {
			if (s[0] == '\\' && s[1] >= '0' && s[1] <= '7' && s[2] && s[3]) {
				dec[n++] = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
				s += 3;
			} else {
				dec[n++] = *s;
			}
		}
		dec[n] = '\0';
		found = strcmp(dec, path) == 0;
	}
	fclose(f);
	return found;
}

static int write_json(const char *path, json_t *obj)
{
	char *tmp = path_join("%s.tmp", path);
	int rc = json_dump_file(obj, tmp, JSON_COMPACT | JSON_SORT_KEYS);
	if (rc == 0)
		rc = rename(tmp, path);
	if (rc)
		KLOG_E("Cannot write %s: %s", path, strerror(errno));
	unlink(tmp);
	free(tmp);
	return rc;
}

static json_t *read_json(const char *path)
{
	return json_load_file(path, 0, NULL);
}

static const char *jget(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static void backoff_fail(int64_t *next_try, int64_t *delay)
{
	*delay = *delay ? (*delay * 2 > NSEC_PER_MIN ? NSEC_PER_MIN : *delay * 2) : 500 * NSEC_PER_MSEC;
	*next_try = mono_now_ns() + *delay;
}

#define pod_event(nd, pod, reason, ...) \
	nd_event((nd), (pod) ? &(pod)->meta : NULL, true, (reason), __VA_ARGS__)

/* ---- paths ---- */

static char *fs_staging_path(struct nd *nd, const char *driver, const char *handle)
{
	char sha[65];
	sha256_hex(handle, strlen(handle), sha);
	return path_join("%s/plugins/kubernetes.io/csi/%s/%s/globalmount", nd->cfg->root_dir, driver,
			 sha);
}

static char *block_staging_path(struct nd *nd, const char *pv)
{
	return path_join("%s/plugins/kubernetes.io/csi/volumeDevices/staging/%s", nd->cfg->root_dir, pv);
}

static char *target_path(struct nd *nd, const char *uid, const char *spec, bool block)
{
	if (block)
		return path_join("%s/plugins/kubernetes.io/csi/volumeDevices/publish/%s/%s",
				 nd->cfg->root_dir, spec, uid);
	return path_join("%s/pods/%s/volumes/kubernetes.io~csi/%s/mount", nd->cfg->root_dir, uid, spec);
}

static char *block_data_dir(struct nd *nd, const char *pv)
{
	return path_join("%s/plugins/kubernetes.io/csi/volumeDevices/%s/data", nd->cfg->root_dir, pv);
}

static char *block_pod_link(struct nd *nd, const char *uid, const char *pv)
{
	return path_join("%s/pods/%s/volumeDevices/kubernetes.io~csi/%s", nd->cfg->root_dir, uid, pv);
}

static void va_name(struct nd *nd, const char *driver, const char *handle, char out[80])
{
	char *s = path_join("%s%s%s", handle, driver, nd->cfg->node_name);
	char sha[65];
	sha256_hex(s, strlen(s), sha);
	free(s);
	snprintf(out, 80, "csi-%s", sha);
}

/* Removes the pod's empty kubelet directories, deepest first (non-empty ones stay). */
static void prune_pod_dirs(struct nd *nd, const char *uid)
{
	const char *sub[] = { "volumes/kubernetes.io~csi", "volumes", "volumeDevices/kubernetes.io~csi",
			      "volumeDevices", "" };
	for (size_t i = 0; i < sizeof(sub) / sizeof(sub[0]); i++) {
		char *p = path_join("%s/pods/%s/%s", nd->cfg->root_dir, uid, sub[i]);
		rmdir(p);
		free(p);
	}
}

/* ---- actual state ---- */

static struct vm_mount *mount_find(const char *uid, const char *spec)
{
	for (struct vm_mount *m = mounts; m; m = m->next)
		if (!strcmp(m->pod_uid, uid) && !strcmp(m->spec, spec))
			return m;
	return NULL;
}

static struct vm_mount *mount_add(const char *uid, const char *spec, const char *driver,
				  const char *handle, const char *unique, const char *target,
				  bool block)
{
	struct vm_mount *m = xcalloc(1, sizeof(*m));
	m->pod_uid = xstrdup(uid);
	m->spec = xstrdup(spec);
	m->driver = xstrdup(driver);
	m->handle = xstrdup(handle);
	m->unique = xstrdup(unique);
	m->target = xstrdup(target);
	m->block = block;
	m->first_seen = mono_now_ns();
	m->next = mounts;
	mounts = m;
	return m;
}

static void mount_free(struct vm_mount *m)
{
	free(m->pod_uid);
	free(m->spec);
	free(m->driver);
	free(m->handle);
	free(m->unique);
	free(m->target);
	free(m);
}

static struct vm_device *device_find(const char *unique)
{
	for (struct vm_device *d = devices; d; d = d->next)
		if (!strcmp(d->unique, unique))
			return d;
	return NULL;
}

static struct vm_device *device_add(const char *unique, const char *driver, const char *handle,
				    const char *spec, const char *staging, bool block)
{
	struct vm_device *d = xcalloc(1, sizeof(*d));
	d->unique = xstrdup(unique);
	d->driver = xstrdup(driver);
	d->handle = xstrdup(handle);
	d->spec = xstrdup(spec);
	d->staging = xstrdup(staging);
	d->block = block;
	d->next = devices;
	devices = d;
	return d;
}

static void device_free(struct vm_device *d)
{
	free(d->unique);
	free(d->driver);
	free(d->handle);
	free(d->spec);
	free(d->staging);
	free(d);
}

static void unique_name(const char *driver, const char *handle, char *out, size_t len)
{
	snprintf(out, len, "kubernetes.io/csi/%s^%s", driver, handle);
}

/* ---- reconstruction after a restart ---- */

static void reconstruct_pod(struct nd *nd, const char *uid)
{
	char unique[600];
	char *dir = path_join("%s/pods/%s/volumes/kubernetes.io~csi", nd->cfg->root_dir, uid);
	DIR *dd = opendir(dir);
	for (struct dirent *de; dd && (de = readdir(dd));) {
		if (de->d_name[0] == '.')
			continue;
		char *data = path_join("%s/%s/vol_data.json", dir, de->d_name);
		json_t *j = read_json(data);
		const char *drv = jget(j, "driverName"), *h = jget(j, "volumeHandle");
		if (drv && h) {
			char *target = target_path(nd, uid, de->d_name, false);
			unique_name(drv, h, unique, sizeof(unique));
			struct vm_mount *m = mount_add(uid, de->d_name, drv, h, unique, target, false);
			m->maybe = true;
			m->published = is_mountpoint(target);
			KLOG_I("Reconstructed volume pod=\"%s\" volume=\"%s\" driver=\"%s\" mounted=%d", uid,
			       de->d_name, drv, m->published);
			free(target);
		} else {
			KLOG_W("Ignoring %s: no driverName/volumeHandle", data);
		}
		json_decref(j);
		free(data);
	}
	if (dd)
		closedir(dd);
	free(dir);
	dir = path_join("%s/pods/%s/volumeDevices/kubernetes.io~csi", nd->cfg->root_dir, uid);
	dd = opendir(dir);
	for (struct dirent *de; dd && (de = readdir(dd));) {
		if (de->d_name[0] == '.')
			continue;
		char *ddir = block_data_dir(nd, de->d_name);
		char *data = path_join("%s/vol_data.json", ddir);
		json_t *j = read_json(data);
		const char *drv = jget(j, "driverName"), *h = jget(j, "volumeHandle");
		if (drv && h) {
			char *target = target_path(nd, uid, de->d_name, true);
			unique_name(drv, h, unique, sizeof(unique));
			struct vm_mount *m = mount_add(uid, de->d_name, drv, h, unique, target, true);
			m->maybe = true;
			m->published = is_mountpoint(target);
			KLOG_I("Reconstructed block volume pod=\"%s\" volume=\"%s\" mapped=%d", uid,
			       de->d_name, m->published);
			free(target);
		}
		json_decref(j);
		free(data);
		free(ddir);
	}
	if (dd)
		closedir(dd);
	free(dir);
}

static void reconstruct(struct nd *nd)
{
	char unique[600];
	char *dir = path_join("%s/pods", nd->cfg->root_dir);
	DIR *dd = opendir(dir);
	for (struct dirent *de; dd && (de = readdir(dd));)
		if (de->d_name[0] != '.')
			reconstruct_pod(nd, de->d_name);
	if (dd)
		closedir(dd);
	free(dir);

	char *csi = path_join("%s/plugins/kubernetes.io/csi", nd->cfg->root_dir);
	DIR *drivers = opendir(csi);
	for (struct dirent *dr; drivers && (dr = readdir(drivers));) {
		if (dr->d_name[0] == '.' || !strcmp(dr->d_name, "volumeDevices"))
			continue;
		char *ddir = path_join("%s/%s", csi, dr->d_name);
		DIR *vols = opendir(ddir);
		for (struct dirent *v; vols && (v = readdir(vols));) {
			if (v->d_name[0] == '.')
				continue;
			char *data = path_join("%s/%s/vol_data.json", ddir, v->d_name);
			json_t *j = read_json(data);
			const char *drv = jget(j, "driverName"), *h = jget(j, "volumeHandle");
			if (drv && h) {
				char *staging = path_join("%s/%s/globalmount", ddir, v->d_name);
				unique_name(drv, h, unique, sizeof(unique));
				struct vm_device *d = device_add(unique, drv, h, v->d_name, staging, false);
				d->maybe = true;
				d->staged = is_mountpoint(staging);
				KLOG_I("Reconstructed staged volume driver=\"%s\" handle=\"%s\" mounted=%d",
				       drv, h, d->staged);
				free(staging);
			}
			json_decref(j);
			free(data);
		}
		if (vols)
			closedir(vols);
		free(ddir);
	}
	if (drivers)
		closedir(drivers);
	char *staging_dir = path_join("%s/volumeDevices/staging", csi);
	DIR *st = opendir(staging_dir);
	for (struct dirent *v; st && (v = readdir(st));) {
		if (v->d_name[0] == '.')
			continue;
		char *ddir = block_data_dir(nd, v->d_name);
		char *data = path_join("%s/vol_data.json", ddir);
		json_t *j = read_json(data);
		const char *drv = jget(j, "driverName"), *h = jget(j, "volumeHandle");
		if (drv && h) {
			char *staging = block_staging_path(nd, v->d_name);
			unique_name(drv, h, unique, sizeof(unique));
			struct vm_device *d = device_add(unique, drv, h, v->d_name, staging, true);
			d->maybe = true;
			d->staged = true; /* a block staging path holds no mount to check */
			free(staging);
		}
		json_decref(j);
		free(data);
		free(ddir);
	}
	if (st)
		closedir(st);
	free(staging_dir);
	free(csi);
}

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
		char *s = path_join("%s%s", d->uid, v->name);
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
	unique_name(d->driver, d->handle, d->unique, sizeof(d->unique));
	return true;
}

/* ---- CSI requests ---- */

static int add_secrets(struct nd *nd, struct csi_arena *a, ProtobufCMessage *req, const char *name,
		       const char *ns, char *err, size_t errlen)
{
	if (!name)
		return 0;
	struct kube_err e;
	json_t *s = kube_get(nd->kc, &KUBE_RES_SECRETS, ns ? ns : "default", name, &e);
	if (!s) {
		snprintf(err, errlen, "cannot get secret %s/%s: %s", ns ? ns : "default", name,
			 e.message);
		return -1;
	}
	const char *k;
	json_t *v;
	json_object_foreach(json_object_get(s, "data"), k, v) {
		size_t n = 0;
		char *val = kube_base64_decode(json_string_value(v) ? json_string_value(v) : "", &n);
		if (val) {
			char *z = csi_arena_alloc(a, n + 1);
			memcpy(z, val, n);
			csi_map_add(a, req, "secrets", k, z);
			free(val);
		}
	}
	json_decref(s);
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
	va_name(nd, d->driver, d->handle, name);
	struct kube_err e;
	json_t *va = kube_get(nd->kc, &KUBE_RES_VOLUMEATTACHMENTS, NULL, name, &e);
	const char *k;
	json_t *v;
	json_object_foreach(json_object_get(json_object_get(va, "status"), "attachmentMetadata"), k, v)
		if (json_string_value(v))
			csi_map_add(a, req, "publish_context", k, json_string_value(v));
	json_decref(va);
}

static json_t *vol_data(struct nd *nd, const struct desired *d, bool attach)
{
	char va[80] = "";
	if (attach)
		va_name(nd, d->driver, d->handle, va);
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
	int rc = add_secrets(nd, a, &req->base, d->pv->node_stage_secret_name,
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
	int rc = d->pv ? add_secrets(nd, a, &req->base, d->pv->node_publish_secret_name,
				     d->pv->node_publish_secret_ns, err, errlen)
		       : add_secrets(nd, a, &req->base, d->vol->csi_secret_name, d->pod->meta.ns,
				     err, errlen);
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
	for (struct vm_device *d = devices; d; d = d->next) {
		if (n == cap)
			set = xrealloc(set, (cap *= 2) * sizeof(char *));
		set[n++] = d->unique;
	}
	for (struct vm_mount *m = mounts; m; m = m->next) {
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
		KLOG_E("Failed to update volumesInUse node=\"%s\": %s", nd->cfg->node_name, e.message);
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

static bool wanted(struct desired *want, size_t nwant, const char *uid, const char *spec)
{
	for (size_t i = 0; i < nwant; i++)
		if (want[i].resolved && !strcmp(want[i].uid, uid) && !strcmp(want[i].spec, spec))
			return true;
	return false;
}

static bool unique_wanted(struct desired *want, size_t nwant, const char *unique)
{
	for (size_t i = 0; i < nwant; i++)
		if (want[i].resolved && !strcmp(want[i].unique, unique))
			return true;
	return false;
}

static void unpublish_unwanted(struct nd *nd, struct desired *want, size_t nwant)
{
	int64_t now = mono_now_ns();
	for (struct vm_mount **pp = &mounts; *pp;) {
		struct vm_mount *m = *pp;
		if (wanted(want, nwant, m->pod_uid, m->spec) || now < m->next_try) {
			pp = &m->next;
			continue;
		}
		if (m->maybe || m->published) {
			struct nd_driver *drv = nd_driver_get(nd, m->driver);
			if (!drv) {
				KLOG_V(2, "Waiting for driver %s to unpublish volume=\"%s\" pod=\"%s\"",
				       m->driver, m->spec, m->pod_uid);
				backoff_fail(&m->next_try, &m->delay);
				pp = &m->next;
				continue;
			}
			Csi__V1__NodeUnpublishVolumeRequest req = CSI__V1__NODE_UNPUBLISH_VOLUME_REQUEST__INIT;
			Csi__V1__NodeUnpublishVolumeResponse *resp = NULL;
			struct csi_status st;
			req.volume_id = m->handle;
			req.target_path = m->target;
			int rc = csi_node_unpublish_volume(drv->conn, &req, &resp, nd->cfg->timeout_ns, &st);
			csi_msg_free(resp);
			nd_driver_put(nd, drv);
			if (rc) {
				KLOG_E("UnmountVolume.TearDown failed for volume \"%s\" pod=\"%s\": rpc error: code = %s desc = %.400s",
				       m->spec, m->pod_uid, csi_code_go_name(st.code), st.message);
				backoff_fail(&m->next_try, &m->delay);
				pp = &m->next;
				continue;
			}
			KLOG_I("UnmountVolume.TearDown succeeded for volume \"%s\" pod=\"%s\"", m->spec,
			       m->pod_uid);
		}
		/* The directories the kubelet made: target (if the driver left it), vol_data, parent. */
		rmdir(m->target);
		unlink(m->target);
		if (m->block) {
			char *link = block_pod_link(nd, m->pod_uid, m->spec);
			unlink(link);
			free(link);
			char *parent = parent_of(m->target);
			rmdir(parent);
			free(parent);
		} else {
			char *parent = parent_of(m->target);
			char *data = path_join("%s/vol_data.json", parent);
			unlink(data);
			rmdir(parent);
			free(data);
			free(parent);
		}
		prune_pod_dirs(nd, m->pod_uid);
		*pp = m->next;
		mount_free(m);
	}
}

static bool device_in_use(const struct vm_device *d)
{
	for (struct vm_mount *m = mounts; m; m = m->next)
		if (!strcmp(m->unique, d->unique) && (m->maybe || m->published))
			return true;
	return false;
}

static void unstage_unused(struct nd *nd, struct desired *want, size_t nwant)
{
	int64_t now = mono_now_ns();
	for (struct vm_device **pp = &devices; *pp;) {
		struct vm_device *d = *pp;
		if (unique_wanted(want, nwant, d->unique) || device_in_use(d) || now < d->next_try) {
			pp = &d->next;
			continue;
		}
		struct nd_driver *drv = nd_driver_get(nd, d->driver);
		if (!drv) {
			backoff_fail(&d->next_try, &d->delay);
			pp = &d->next;
			continue;
		}
		Csi__V1__NodeUnstageVolumeRequest req = CSI__V1__NODE_UNSTAGE_VOLUME_REQUEST__INIT;
		Csi__V1__NodeUnstageVolumeResponse *resp = NULL;
		struct csi_status st;
		req.volume_id = d->handle;
		req.staging_target_path = d->staging;
		int rc = csi_node_unstage_volume(drv->conn, &req, &resp, nd->cfg->timeout_ns, &st);
		csi_msg_free(resp);
		nd_driver_put(nd, drv);
		if (rc) {
			KLOG_E("UnmountDevice failed for volume \"%s\": rpc error: code = %s desc = %.400s",
			       d->spec, csi_code_go_name(st.code), st.message);
			backoff_fail(&d->next_try, &d->delay);
			pp = &d->next;
			continue;
		}
		KLOG_I("UnmountDevice succeeded for volume \"%s\" staging=\"%s\"", d->spec, d->staging);
		rmdir(d->staging);
		if (d->block) {
			char *ddir = block_data_dir(nd, d->spec);
			char *data = path_join("%s/vol_data.json", ddir);
			unlink(data);
			rmdir(ddir);
			char *pvdir = parent_of(ddir);
			rmdir(pvdir);
			free(pvdir);
			free(data);
			free(ddir);
		} else {
			char *parent = parent_of(d->staging);
			char *data = path_join("%s/vol_data.json", parent);
			unlink(data);
			rmdir(parent);
			free(data);
			free(parent);
		}
		*pp = d->next;
		device_free(d);
	}
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
		struct vm_mount *m = d->resolved && d->pv ? mount_find(d->uid, d->spec) : NULL;
		if (!m || !m->published)
			continue;
		struct nd_driver *drv = nd_driver_get(nd, d->driver);
		if (!drv)
			continue;
		struct vm_device *dev = device_find(d->unique);
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
		struct vm_mount *m = d->resolved && d->pv ? mount_find(d->uid, d->spec) : NULL;
		if (!m || !m->published || !d->vol->claim_name)
			continue;
		struct vm_device *dev = device_find(d->unique);
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
	struct vm_mount *m = mount_find(d->uid, d->spec);
	if (m && m->published)
		return;
	if (!m) {
		char *target = target_path(nd, d->uid, d->spec, d->block);
		m = mount_add(d->uid, d->spec, d->driver, d->handle, d->unique, target, d->block);
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
		backoff_fail(&m->next_try, &m->delay);
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
		backoff_fail(&m->next_try, &m->delay);
		goto out;
	}
	if (attach) {
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
	}
	if (!d->inline_vol && !is_reported(d->unique))
		goto out; /* volumesInUse first, so the controller never detaches a mounted volume */

	char *staging = NULL;
	if (drv->stage_unstage && !d->inline_vol) {
		struct vm_device *dev = device_find(d->unique);
		if (!dev) {
			char *sp = d->block ? block_staging_path(nd, d->spec)
					    : fs_staging_path(nd, d->driver, d->handle);
			dev = device_add(d->unique, d->driver, d->handle, d->spec, sp, d->block);
			free(sp);
		}
		if (!dev->staged) {
			json_t *vd = d->block ? vol_data(nd, d, attach)
					      : json_pack("{s:s, s:s}", "driverName", d->driver,
							  "volumeHandle", d->handle);
			char *ddir = d->block ? block_data_dir(nd, d->spec) : parent_of(dev->staging);
			char *data = path_join("%s/vol_data.json", ddir);
			mkdir_p(ddir, 0750);
			if (d->block)
				mkdir_p(dev->staging, 0750);
			int wrc = write_json(data, vd);
			json_decref(vd);
			free(data);
			free(ddir);
			if (wrc) {
				backoff_fail(&m->next_try, &m->delay);
				goto out;
			}
			dev->maybe = true;
			struct csi_status st;
			if (stage(nd, drv, d, dev, attach, &st, err, sizeof(err))) {
				pod_event(nd, d->pod, "FailedMount",
					  "MountVolume.MountDevice failed for volume \"%s\" : %s", d->spec,
					  err);
				KLOG_E("MountVolume.MountDevice failed for volume \"%s\": %s", d->spec, err);
				backoff_fail(&m->next_try, &m->delay);
				goto out;
			}
			dev->staged = true;
			KLOG_I("MountVolume.MountDevice succeeded for volume \"%s\" staging=\"%s\"",
			       d->spec, dev->staging);
		}
		staging = dev->staging;
		/* Offline expansion: a claim grown while no pod used it, before the pod sees it. */
		if (expand(nd, drv, d, dev->staging, dev->staging, &dev->rs, true)) {
			backoff_fail(&m->next_try, &m->delay);
			goto out;
		}
	}
	/* SetUp: the parent of the target and vol_data.json, then NodePublishVolume. */
	char *parent = parent_of(m->target);
	mkdir_p(parent, 0750);
	if (!d->block) {
		json_t *vd = vol_data(nd, d, attach);
		char *data = path_join("%s/vol_data.json", parent);
		int wrc = write_json(data, vd);
		json_decref(vd);
		free(data);
		if (wrc) {
			free(parent);
			backoff_fail(&m->next_try, &m->delay);
			goto out;
		}
	} else {
		char *link = block_pod_link(nd, d->uid, d->spec);
		char *ldir = parent_of(link);
		mkdir_p(ldir, 0750);
		/* the link is the pod's record of the mapping: it exists before the publish */
		unlink(link);
		if (symlink(m->target, link) != 0)
			KLOG_E("Cannot create %s: %s", link, strerror(errno));
		free(ldir);
		free(link);
	}
	free(parent);
	m->maybe = true;
	if (publish(nd, drv, d, m->target, staging, attach, err, sizeof(err))) {
		pod_event(nd, d->pod, "FailedMount", "MountVolume.SetUp failed for volume \"%s\" : %s",
			  d->spec, err);
		KLOG_E("MountVolume.SetUp failed for volume \"%s\" pod=\"%s/%s\": %s", d->spec,
		       d->pod->meta.ns, d->pod->meta.name, err);
		backoff_fail(&m->next_try, &m->delay);
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
		KLOG_E("Failed to read pod pod=\"%s/%s\": %s", pod->meta.ns, pod->meta.name,
		       e.message);
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
		KLOG_E("Failed to update pod status pod=\"%s/%s\": %s", pod->meta.ns, pod->meta.name,
		       e.message);
	else
		KLOG_I("Pod is running pod=\"%s/%s\"", pod->meta.ns, pod->meta.name);
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
		KLOG_E("Failed to delete pod pod=\"%s/%s\": %s", pod->meta.ns, pod->meta.name, e.message);
	else
		KLOG_I("Pod's volumes are unmounted, deleted pod=\"%s/%s\"", pod->meta.ns, pod->meta.name);
	strbuf_release(&path);
	strbuf_release(&body);
	strbuf_release(&out);
}

static bool pod_has_mounts(const char *uid)
{
	for (struct vm_mount *m = mounts; m; m = m->next)
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
	unpublish_unwanted(nd, want, nwant);
	unstage_unused(nd, want, nwant);
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
			struct vm_mount *m = want[w].resolved ? mount_find(uid, want[w].spec) : NULL;
			all = m && m->published;
		}
		if (all)
			set_pod_running(nd, pod, uid);
	}
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
	while (mounts) {
		struct vm_mount *m = mounts;
		mounts = m->next;
		mount_free(m);
	}
	while (devices) {
		struct vm_device *d = devices;
		devices = d->next;
		device_free(d);
	}
	for (size_t i = 0; i < nreported; i++)
		free(reported[i]);
	free(reported);
	reported = NULL;
	nreported = 0;
}

static void *volumes_main(void *arg)
{
	struct nd *nd = arg;
	reconstruct(nd);
	struct kube_informer *infs[] = { nd->pods, nd->nodes, nd->pvs, nd->pvcs, nd->csidrivers };
	for (size_t i = 0; i < 5 && !atomic_load(&nd->stop);)
		if (kube_informer_wait_synced(infs[i], 200 * NSEC_PER_MSEC))
			i++;
	KLOG_I("Volume manager started node=\"%s\"", nd->cfg->node_name);
	while (!atomic_load(&nd->stop)) {
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
