/*
 * VolumeCapability from a PersistentVolume, with the upstream sidecars' access-mode rules:
 * ReadWriteOncePod alone maps to SINGLE_NODE_SINGLE_WRITER when the driver can tell single from
 * multi writers (SINGLE_NODE_MULTI_WRITER capability), else to SINGLE_NODE_WRITER; ReadWriteMany
 * wins over everything; ReadOnlyMany with ReadWriteOnce cannot be expressed in CSI.
 */
#include "attacher/att.h"

#include <stdio.h>
#include <string.h>

int att_access_mode(unsigned modes, bool snmw, char *err, size_t errlen)
{
	if (modes & KUBE_RWOP) {
		if (modes & ~(unsigned)KUBE_RWOP) {
			snprintf(err, errlen, "Kubernetes does not support use of ReadWriteOncePod "
					      "with other access modes on the same PersistentVolume");
			return -1;
		}
		return snmw ? CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_SINGLE_WRITER
			    : CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER;
	}
	if (modes & KUBE_RWX)
		return CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_MULTI_WRITER;
	if ((modes & KUBE_ROX) && (modes & KUBE_RWO)) {
		snprintf(err, errlen, "CSI does not support ReadOnlyMany and ReadWriteOnce on the "
				      "same PersistentVolume");
		return -1;
	}
	if (modes & KUBE_ROX)
		return CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_READER_ONLY;
	if (modes & KUBE_RWO)
		return snmw ? CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_MULTI_WRITER
			    : CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER;
	snprintf(err, errlen, "unsupported AccessMode combination: the PersistentVolume has no "
			      "access mode");
	return -1;
}

Csi__V1__VolumeCapability *att_capability(struct csi_arena *a, const struct kube_pv *pv, bool snmw,
					  const char *default_fstype, char *err, size_t errlen)
{
	Csi__V1__VolumeCapability *cap;
	int mode;

	if (!pv->driver) {
		snprintf(err, errlen, "CSI volume source was nil");
		return NULL;
	}
	mode = att_access_mode(pv->access_modes, snmw, err, errlen);
	if (mode < 0)
		return NULL;
	cap = csi_msg_new(a, &csi__v1__volume_capability__descriptor);
	cap->access_mode = csi_msg_new(a, &csi__v1__volume_capability__access_mode__descriptor);
	cap->access_mode->mode = (Csi__V1__VolumeCapability__AccessMode__Mode)mode;
	if (pv->block) {
		cap->access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;
		cap->block = csi_msg_new(a, &csi__v1__volume_capability__block_volume__descriptor);
		return cap;
	}
	Csi__V1__VolumeCapability__MountVolume *m =
		csi_msg_new(a, &csi__v1__volume_capability__mount_volume__descriptor);
	const char *fs = pv->fs_type && *pv->fs_type ? pv->fs_type : default_fstype;
	m->fs_type = csi_arena_strdup(a, fs ? fs : "");
	if (pv->nmount_options) {
		m->n_mount_flags = pv->nmount_options;
		m->mount_flags = csi_arena_alloc(a, pv->nmount_options * sizeof(char *));
		for (size_t i = 0; i < pv->nmount_options; i++)
			m->mount_flags[i] = csi_arena_strdup(a, pv->mount_options[i]);
	}
	cap->access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
	cap->mount = m;
	return cap;
}
