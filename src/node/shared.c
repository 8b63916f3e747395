/*
 * What volumes.c, expand.c and stats.c all use: the volume capability the kubelet sends for a
 * volume (events on pods and claims are kube_event_about(), through node_int.h's nd_event). It
 * sits below the three and calls none of them.
 *
 * The access mode is the kubelet's (pkg/volume/csi), by the rule every component shares
 * (csi/msg.h csi_access_mode_of_k8s): the PV's first access mode, read against
 * whether the driver advertises the SINGLE_NODE_MULTI_WRITER node capability. Such a driver
 * learns the number of writers on the node: ReadWriteOnce becomes SINGLE_NODE_MULTI_WRITER and
 * ReadWriteOncePod SINGLE_NODE_SINGLE_WRITER, which the driver must publish at one target only
 * (the CSI spec's NodePublishVolume table: FAILED_PRECONDITION for a second target).
 */
#include "node/node_int.h"

#include <stdarg.h>

#include "base/strbuf.h"

Csi__V1__VolumeCapability *nd_capability_of(struct csi_arena *a, uint8_t mode, bool snmw,
					     bool block, const char *fs, const char *const *opts,
					     uint16_t nopts)
{
	Csi__V1__VolumeCapability *cap = csi_msg_new(a, &csi__v1__volume_capability__descriptor);
	Csi__V1__VolumeCapability__AccessMode *am =
		csi_msg_new(a, &csi__v1__volume_capability__access_mode__descriptor);
	am->mode = nd_csi_access_mode(mode, snmw);
	cap->access_mode = am;
	if (block) {
		cap->access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;
		cap->block = csi_msg_new(a, &csi__v1__volume_capability__block_volume__descriptor);
	} else {
		cap->access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
		cap->mount = csi_msg_new(a, &csi__v1__volume_capability__mount_volume__descriptor);
		cap->mount->fs_type = csi_arena_strdup(a, fs ? fs : "");
		for (uint16_t i = 0; i < nopts; i++)
			csi_repeated_add(a, &cap->mount->base, "mount_flags", csi_arena_strdup(a, opts[i]));
	}
	return cap;
}

Csi__V1__VolumeCapability *nd_pv_capability(struct csi_arena *a, const struct kube_pv *pv,
					     bool snmw)
{
	return nd_capability_of(a, pv->first_access_mode, snmw, pv->block, pv->fs_type,
				pv->mount_options, pv->nmount_options);
}
