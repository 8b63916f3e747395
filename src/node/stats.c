/*
 * Volume stats (stats.h): every --volume-stats-agg-period the volume manager hands over the
 * published volumes of its pods; each claim's volume is asked NodeGetVolumeStats once (drivers
 * with GET_VOLUME_STATS), and the new table replaces the old one under a mutex, so /metrics
 * (the diagnostics thread) always renders one complete pass. Volume health is not part of the
 * stats since CSI v1.13 removed VolumeCondition (the kubelet v1.37 dropped its health gauge and
 * VolumeConditionAbnormal event with it; docs/kcsi-node.md).
 */
#include "node/node_int.h"
#include "node/stats.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/xalloc.h"

struct nd_stats {
	pthread_mutex_t lock; /* v, n */
	struct nd_sample *v;
	size_t n;
};

/* ---- pure parts ---- */

void nd_sample_fill(struct nd_sample *s, const Csi__V1__NodeGetVolumeStatsResponse *r)
{
	for (size_t i = 0; i < r->n_usage; i++) {
		const Csi__V1__VolumeUsage *u = r->usage[i];
		if (u->unit == CSI__V1__VOLUME_USAGE__UNIT__BYTES) {
			s->capacity = u->total;
			s->available = u->available;
			s->used = u->used;
		} else if (u->unit == CSI__V1__VOLUME_USAGE__UNIT__INODES) {
			s->inodes = u->total;
			s->inodes_free = u->available;
			s->inodes_used = u->used;
		}
	}
}

void nd_sample_clear(struct nd_sample *s)
{
	free(s->ns);
	free(s->claim);
	memset(s, 0, sizeof(*s));
}

static int cmp_sample(const void *a, const void *b)
{
	const struct nd_sample *x = a, *y = b;
	int c = strcmp(x->ns, y->ns);
	return c ? c : strcmp(x->claim, y->claim);
}

static void add_label_value(struct strbuf *out, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			strbuf_addch(out, '\\');
		if (*v == '\n')
			strbuf_addstr(out, "\\n");
		else
			strbuf_addch(out, *v);
	}
}

enum field { F_AVAIL, F_CAP, F_INODES, F_INODES_FREE, F_INODES_USED, F_USED };

static const struct {
	const char *name, *help;
} families[] = {
	/* sorted by name, as the Prometheus client writes them */
	[F_AVAIL] = { "kubelet_volume_stats_available_bytes", "Number of available bytes in the volume" },
	[F_CAP] = { "kubelet_volume_stats_capacity_bytes", "Capacity in bytes of the volume" },
	[F_INODES] = { "kubelet_volume_stats_inodes", "Maximum number of inodes in the volume" },
	[F_INODES_FREE] = { "kubelet_volume_stats_inodes_free", "Number of free inodes in the volume" },
	[F_INODES_USED] = { "kubelet_volume_stats_inodes_used", "Number of used inodes in the volume" },
	[F_USED] = { "kubelet_volume_stats_used_bytes", "Number of used bytes in the volume" },
};

static int64_t field_of(const struct nd_sample *s, enum field f)
{
	switch (f) {
	case F_AVAIL: return s->available;
	case F_CAP: return s->capacity;
	case F_INODES: return s->inodes;
	case F_INODES_FREE: return s->inodes_free;
	case F_INODES_USED: return s->inodes_used;
	case F_USED: return s->used;
	}
	return 0;
}

void nd_samples_render(const struct nd_sample *v, size_t n, struct strbuf *out)
{
	for (size_t f = 0; f < sizeof(families) / sizeof(families[0]) && n; f++) {
		strbuf_addf(out, "# HELP %s [ALPHA] %s\n# TYPE %s gauge\n", families[f].name,
			    families[f].help, families[f].name);
		for (size_t i = 0; i < n; i++) {
			strbuf_addf(out, "%s{namespace=\"", families[f].name);
			add_label_value(out, v[i].ns);
			strbuf_addstr(out, "\",persistentvolumeclaim=\"");
			add_label_value(out, v[i].claim);
			strbuf_addf(out, "\"} %lld\n", (long long)field_of(&v[i], (enum field)f));
		}
	}
}

/* ---- the table ---- */

struct nd_stats *nd_stats_new(void)
{
	struct nd_stats *s = xcalloc(1, sizeof(*s));
	pthread_mutex_init(&s->lock, NULL);
	return s;
}

static void samples_free(struct nd_sample *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		nd_sample_clear(&v[i]);
	free(v);
}

void nd_stats_free(struct nd_stats *s)
{
	if (!s)
		return;
	samples_free(s->v, s->n);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

void nd_stats_render(struct nd_stats *s, struct strbuf *out)
{
	pthread_mutex_lock(&s->lock);
	nd_samples_render(s->v, s->n, out);
	pthread_mutex_unlock(&s->lock);
}

static bool seen(const struct nd_sample *v, size_t n, const char *ns, const char *claim)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i].ns, ns) && !strcmp(v[i].claim, claim))
			return true;
	return false;
}

/* One volume's NodeGetVolumeStats; 0 and a filled sample, or -1 (no stats from this driver). */
static int stats_one(struct nd *nd, const struct nd_stats_volume *vol, struct nd_sample *out)
{
	struct nd_driver *drv = nd_driver_get(nd, vol->driver);
	if (!drv || !drv->volume_stats) {
		nd_driver_put(nd, drv);
		return -1;
	}
	Csi__V1__NodeGetVolumeStatsRequest req = CSI__V1__NODE_GET_VOLUME_STATS_REQUEST__INIT;
	Csi__V1__NodeGetVolumeStatsResponse *resp = NULL;
	struct csi_status st;
	req.volume_id = (char *)vol->handle;
	req.volume_path = (char *)vol->target;
	req.staging_target_path = (char *)(vol->staging ? vol->staging : "");
	int rc = csi_node_get_volume_stats(drv->conn, &req, &resp, nd->cfg->timeout_ns, &st);
	nd_driver_put(nd, drv);
	if (rc) {
		KLOG_V(4, "Failed to calculate volume metrics pod=\"%s/%s\" volumeName=\"%s\": rpc error: code = %s desc = %.400s",
		       vol->pod->meta.ns, vol->pod->meta.name, vol->pod_volume,
		       csi_code_go_name(st.code), st.message);
		return -1;
	}
	nd_sample_fill(out, resp);
	csi_msg_free(resp);
	return 0;
}

void nd_stats_collect(struct nd *nd, const struct nd_stats_volume *vols, size_t nvols)
{
	struct nd_sample *v = xcalloc(nvols + 1, sizeof(*v));
	size_t n = 0;
	for (size_t i = 0; i < nvols && !atomic_load(&nd->stop); i++) {
		const struct nd_stats_volume *vol = &vols[i];
		if (seen(v, n, vol->pod->meta.ns, vol->claim))
			continue; /* one series per claim, as the kubelet's collector */
		struct nd_sample s = { 0 };
		if (stats_one(nd, vol, &s))
			continue;
		s.ns = xstrdup(vol->pod->meta.ns);
		s.claim = xstrdup(vol->claim);
		v[n++] = s;
	}
	qsort(v, n, sizeof(*v), cmp_sample);
	pthread_mutex_lock(&nd->stats->lock);
	struct nd_sample *old = nd->stats->v;
	size_t nold = nd->stats->n;
	nd->stats->v = v;
	nd->stats->n = n;
	pthread_mutex_unlock(&nd->stats->lock);
	samples_free(old, nold);
	KLOG_V(4, "Volume stats collected volumes=%zu", n);
}
