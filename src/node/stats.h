/*
 * stats: the volume stats kcsi-node keeps for /metrics, as the kubelet's volume stats collector
 * exports them (kubelet_volume_stats_*, labels namespace and persistentvolumeclaim). The pure
 * parts: one NodeGetVolumeStats answer -> one sample, and samples -> Prometheus text. stats.c
 * also holds the polling (node_int.h: nd_stats_collect).
 *
 * A sample owns its two strings (sample_clear frees them).
 */
#ifndef KCSI_NODE_STATS_H
#define KCSI_NODE_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/strbuf.h"
#include "csi/client.h"

struct nd_sample {
	char *ns, *claim;
	int64_t capacity, available, used;         /* bytes (usage unit BYTES) */
	int64_t inodes, inodes_free, inodes_used;  /* usage unit INODES */
};

/* Fills s's figures from a response. */
void nd_sample_fill(struct nd_sample *s, const Csi__V1__NodeGetVolumeStatsResponse *r);
void nd_sample_clear(struct nd_sample *s);
/* Appends the kubelet_volume_stats_* families for n samples sorted by namespace and claim. */
void nd_samples_render(const struct nd_sample *v, size_t n, struct strbuf *out);

#endif
