/*
 * volumes_state.c: the volume manager's actual state (volumes.c has the design): the records of
 * what is published (vm_mounts) and staged (vm_devices), the kubelet's paths for them, and their
 * reconstruction from vol_data.json and the mount table after a restart.
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

_Thread_local struct vm_mount *vm_mounts;
_Thread_local struct vm_device *vm_devices;

/* ---- small helpers ---- */

char *vm_path_join(const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	return strbuf_detach(&sb, NULL);
}

void vm_mkdir_p(const char *path, mode_t mode)
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

char *vm_parent_of(const char *path)
{
	char *p = xstrdup(path);
	char *slash = strrchr(p, '/');
	if (slash && slash != p)
		*slash = '\0';
	return p;
}

/* True when path is a mount point in this mount namespace (/proc/self/mountinfo). */
bool vm_is_mountpoint(const char *path)
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

int vm_write_json(const char *path, json_t *obj)
{
	char *tmp = vm_path_join("%s.tmp", path);
	int rc = json_dump_file(obj, tmp, JSON_COMPACT | JSON_SORT_KEYS);
	if (rc == 0)
		rc = rename(tmp, path);
	if (rc)
		KLOG_ERR(strerror(errno), "Cannot write %s", path);
	unlink(tmp);
	free(tmp);
	return rc;
}

json_t *vm_read_json(const char *path)
{
	return json_load_file(path, 0, NULL);
}

const char *vm_jget(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

void vm_backoff_fail(int64_t *next_try, int64_t *delay)
{
	*delay = *delay ? (*delay * 2 > NSEC_PER_MIN ? NSEC_PER_MIN : *delay * 2) : 500 * NSEC_PER_MSEC;
	*next_try = mono_now_ns() + *delay;
}


/* ---- paths ---- */

char *vm_fs_staging_path(struct nd *nd, const char *driver, const char *handle)
{
	char sha[65];
	sha256_hex(handle, strlen(handle), sha);
	return vm_path_join("%s/plugins/kubernetes.io/csi/%s/%s/globalmount", nd->cfg->root_dir, driver,
			 sha);
}

char *vm_block_staging_path(struct nd *nd, const char *pv)
{
	return vm_path_join("%s/plugins/kubernetes.io/csi/volumeDevices/staging/%s", nd->cfg->root_dir, pv);
}

char *vm_target_path(struct nd *nd, const char *uid, const char *spec, bool block)
{
	if (block)
		return vm_path_join("%s/plugins/kubernetes.io/csi/volumeDevices/publish/%s/%s",
				 nd->cfg->root_dir, spec, uid);
	return vm_path_join("%s/pods/%s/volumes/kubernetes.io~csi/%s/mount", nd->cfg->root_dir, uid, spec);
}

char *vm_block_data_dir(struct nd *nd, const char *pv)
{
	return vm_path_join("%s/plugins/kubernetes.io/csi/volumeDevices/%s/data", nd->cfg->root_dir, pv);
}

char *vm_block_pod_link(struct nd *nd, const char *uid, const char *pv)
{
	return vm_path_join("%s/pods/%s/volumeDevices/kubernetes.io~csi/%s", nd->cfg->root_dir, uid, pv);
}

void vm_va_name(struct nd *nd, const char *driver, const char *handle, char out[80])
{
	char *s = vm_path_join("%s%s%s", handle, driver, nd->cfg->node_name);
	char sha[65];
	sha256_hex(s, strlen(s), sha);
	free(s);
	snprintf(out, 80, "csi-%s", sha);
}

/* Removes the pod's empty kubelet directories, deepest first (non-empty ones stay). */
void vm_prune_pod_dirs(struct nd *nd, const char *uid)
{
	const char *sub[] = { "volumes/kubernetes.io~csi", "volumes", "volumeDevices/kubernetes.io~csi",
			      "volumeDevices", "" };
	for (size_t i = 0; i < sizeof(sub) / sizeof(sub[0]); i++) {
		char *p = vm_path_join("%s/pods/%s/%s", nd->cfg->root_dir, uid, sub[i]);
		rmdir(p);
		free(p);
	}
}

/* ---- actual state ---- */

struct vm_mount *vm_mount_find(const char *uid, const char *spec)
{
	for (struct vm_mount *m = vm_mounts; m; m = m->next)
		if (!strcmp(m->pod_uid, uid) && !strcmp(m->spec, spec))
			return m;
	return NULL;
}

struct vm_mount *vm_mount_add(const char *uid, const char *spec, const char *driver,
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
	m->next = vm_mounts;
	vm_mounts = m;
	return m;
}

void vm_mount_free(struct vm_mount *m)
{
	free(m->pod_uid);
	free(m->spec);
	free(m->driver);
	free(m->handle);
	free(m->unique);
	free(m->target);
	free(m);
}

struct vm_device *vm_device_find(const char *unique)
{
	for (struct vm_device *d = vm_devices; d; d = d->next)
		if (!strcmp(d->unique, unique))
			return d;
	return NULL;
}

struct vm_device *vm_device_add(const char *unique, const char *driver, const char *handle,
				    const char *spec, const char *staging, bool block)
{
	struct vm_device *d = xcalloc(1, sizeof(*d));
	d->unique = xstrdup(unique);
	d->driver = xstrdup(driver);
	d->handle = xstrdup(handle);
	d->spec = xstrdup(spec);
	d->staging = xstrdup(staging);
	d->block = block;
	d->next = vm_devices;
	vm_devices = d;
	return d;
}

void vm_device_free(struct vm_device *d)
{
	free(d->unique);
	free(d->driver);
	free(d->handle);
	free(d->spec);
	free(d->staging);
	free(d);
}

void vm_unique_name(const char *driver, const char *handle, char *out, size_t len)
{
	snprintf(out, len, "kubernetes.io/csi/%s^%s", driver, handle);
}

/* ---- reconstruction after a restart ---- */

static void reconstruct_pod(struct nd *nd, const char *uid)
{
	char unique[600];
	char *dir = vm_path_join("%s/pods/%s/volumes/kubernetes.io~csi", nd->cfg->root_dir, uid);
	DIR *dd = opendir(dir);
	for (struct dirent *de; dd && (de = readdir(dd));) {
		if (de->d_name[0] == '.')
			continue;
		char *data = vm_path_join("%s/%s/vol_data.json", dir, de->d_name);
		json_t *j = vm_read_json(data);
		const char *drv = vm_jget(j, "driverName"), *h = vm_jget(j, "volumeHandle");
		if (drv && h) {
			char *target = vm_target_path(nd, uid, de->d_name, false);
			vm_unique_name(drv, h, unique, sizeof(unique));
			struct vm_mount *m = vm_mount_add(uid, de->d_name, drv, h, unique, target, false);
			m->maybe = true;
			m->published = vm_is_mountpoint(target);
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
	dir = vm_path_join("%s/pods/%s/volumeDevices/kubernetes.io~csi", nd->cfg->root_dir, uid);
	dd = opendir(dir);
	for (struct dirent *de; dd && (de = readdir(dd));) {
		if (de->d_name[0] == '.')
			continue;
		char *ddir = vm_block_data_dir(nd, de->d_name);
		char *data = vm_path_join("%s/vol_data.json", ddir);
		json_t *j = vm_read_json(data);
		const char *drv = vm_jget(j, "driverName"), *h = vm_jget(j, "volumeHandle");
		if (drv && h) {
			char *target = vm_target_path(nd, uid, de->d_name, true);
			vm_unique_name(drv, h, unique, sizeof(unique));
			struct vm_mount *m = vm_mount_add(uid, de->d_name, drv, h, unique, target, true);
			m->maybe = true;
			m->published = vm_is_mountpoint(target);
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

void vm_reconstruct(struct nd *nd)
{
	char unique[600];
	char *dir = vm_path_join("%s/pods", nd->cfg->root_dir);
	DIR *dd = opendir(dir);
	for (struct dirent *de; dd && (de = readdir(dd));)
		if (de->d_name[0] != '.')
			reconstruct_pod(nd, de->d_name);
	if (dd)
		closedir(dd);
	free(dir);

	char *csi = vm_path_join("%s/plugins/kubernetes.io/csi", nd->cfg->root_dir);
	DIR *drivers = opendir(csi);
	for (struct dirent *dr; drivers && (dr = readdir(drivers));) {
		if (dr->d_name[0] == '.' || !strcmp(dr->d_name, "volumeDevices"))
			continue;
		char *ddir = vm_path_join("%s/%s", csi, dr->d_name);
		DIR *vols = opendir(ddir);
		for (struct dirent *v; vols && (v = readdir(vols));) {
			if (v->d_name[0] == '.')
				continue;
			char *data = vm_path_join("%s/%s/vol_data.json", ddir, v->d_name);
			json_t *j = vm_read_json(data);
			const char *drv = vm_jget(j, "driverName"), *h = vm_jget(j, "volumeHandle");
			if (drv && h) {
				char *staging = vm_path_join("%s/%s/globalmount", ddir, v->d_name);
				vm_unique_name(drv, h, unique, sizeof(unique));
				struct vm_device *d = vm_device_add(unique, drv, h, v->d_name, staging, false);
				d->maybe = true;
				d->staged = vm_is_mountpoint(staging);
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
	char *staging_dir = vm_path_join("%s/volumeDevices/staging", csi);
	DIR *st = opendir(staging_dir);
	for (struct dirent *v; st && (v = readdir(st));) {
		if (v->d_name[0] == '.')
			continue;
		char *ddir = vm_block_data_dir(nd, v->d_name);
		char *data = vm_path_join("%s/vol_data.json", ddir);
		json_t *j = vm_read_json(data);
		const char *drv = vm_jget(j, "driverName"), *h = vm_jget(j, "volumeHandle");
		if (drv && h) {
			char *staging = vm_block_staging_path(nd, v->d_name);
			vm_unique_name(drv, h, unique, sizeof(unique));
			struct vm_device *d = vm_device_add(unique, drv, h, v->d_name, staging, true);
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
