/*
 * volumes_unmount.c: the volume manager's teardown (volumes.c has the design): each pass,
 * NodeUnpublishVolume of the pod volumes no pod wants any more and NodeUnstageVolume of the
 * volumes no pod uses, with the directories the kubelet made for them. Failures back off per
 * record and are retried.
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

void vm_unpublish_unwanted(struct nd *nd, struct desired *want, size_t nwant)
{
	int64_t now = mono_now_ns();
	for (struct vm_mount **pp = &vm_mounts; *pp;) {
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
				vm_backoff_fail(&m->next_try, &m->delay);
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
				vm_backoff_fail(&m->next_try, &m->delay);
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
			char *link = vm_block_pod_link(nd, m->pod_uid, m->spec);
			unlink(link);
			free(link);
			char *parent = vm_parent_of(m->target);
			rmdir(parent);
			free(parent);
		} else {
			char *parent = vm_parent_of(m->target);
			char *data = vm_path_join("%s/vol_data.json", parent);
			unlink(data);
			rmdir(parent);
			free(data);
			free(parent);
		}
		vm_prune_pod_dirs(nd, m->pod_uid);
		*pp = m->next;
		vm_mount_free(m);
	}
}

static bool device_in_use(const struct vm_device *d)
{
	for (struct vm_mount *m = vm_mounts; m; m = m->next)
		if (!strcmp(m->unique, d->unique) && (m->maybe || m->published))
			return true;
	return false;
}

void vm_unstage_unused(struct nd *nd, struct desired *want, size_t nwant)
{
	int64_t now = mono_now_ns();
	for (struct vm_device **pp = &vm_devices; *pp;) {
		struct vm_device *d = *pp;
		if (unique_wanted(want, nwant, d->unique) || device_in_use(d) || now < d->next_try) {
			pp = &d->next;
			continue;
		}
		struct nd_driver *drv = nd_driver_get(nd, d->driver);
		if (!drv) {
			vm_backoff_fail(&d->next_try, &d->delay);
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
			vm_backoff_fail(&d->next_try, &d->delay);
			pp = &d->next;
			continue;
		}
		KLOG_I("UnmountDevice succeeded for volume \"%s\" staging=\"%s\"", d->spec, d->staging);
		rmdir(d->staging);
		if (d->block) {
			char *ddir = vm_block_data_dir(nd, d->spec);
			char *data = vm_path_join("%s/vol_data.json", ddir);
			unlink(data);
			rmdir(ddir);
			char *pvdir = vm_parent_of(ddir);
			rmdir(pvdir);
			free(pvdir);
			free(data);
			free(ddir);
		} else {
			char *parent = vm_parent_of(d->staging);
			char *data = vm_path_join("%s/vol_data.json", parent);
			unlink(data);
			rmdir(parent);
			free(data);
			free(parent);
		}
		*pp = d->next;
		vm_device_free(d);
	}
}
