/*
 * driver: the wiring of kcsi-loopplugin's CSI services: the driver's life cycle (pool opened,
 * the node's lock taken, pool recovered, node recorded) and which files' handlers the mode
 * registers.
 */
#include "loopplugin/driver_int.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/xalloc.h"
#include "loopplugin/fs.h"

struct lp_driver *lp_driver_new(const struct lp_config *cfg, struct lp_status *st)
{
	bool controller = strcmp(cfg->mode, "all") == 0 || strcmp(cfg->mode, "controller") == 0;
	bool node = strcmp(cfg->mode, "all") == 0 || strcmp(cfg->mode, "node") == 0;
	if (!controller && !node) {
		lp_fail(st, LP_INVALID_ARGUMENT, "--mode=%s: expected all, controller or node",
			cfg->mode);
		return NULL;
	}
	if (!lp_fs_supported(cfg->default_fstype)) {
		lp_fail(st, LP_INVALID_ARGUMENT, "--default-fstype=%s is not supported",
			cfg->default_fstype);
		return NULL;
	}
	char why[300];
	if (lp_tags_check(cfg->extra_tags, cfg->nextra_tags, why, sizeof(why))) {
		lp_fail(st, LP_INVALID_ARGUMENT, "--extra-volume-tags: %s", why);
		return NULL;
	}
	struct lp_pool *pool = lp_pool_open(cfg->pool_dir, st);
	if (!pool)
		return NULL;
	/* before the sweep and the node's records: a second node service of it stops here */
	if (node && lp_pool_node_lock(pool, cfg->nodeid, st)) {
		lp_pool_free(pool);
		return NULL;
	}
	if (controller) {
		int n = lp_pool_recover(pool, st);
		if (n > 0)
			KLOG_I("Removed leftovers of an interrupted operation pool=%s files=%d",
			       LOGQ(lp_pool_dir(pool)), n);
	}
	if (node && lp_pool_node_register(pool, cfg->nodeid, cfg->zone, st)) {
		lp_pool_free(pool);
		return NULL;
	}
	struct lp_driver *d = xcalloc(1, sizeof(*d));
	d->cfg = *cfg;
	d->controller = controller;
	d->node = node;
	d->pool = pool;
	d->inflight = lp_inflight_new();
	d->health = lp_health_cache_new();
	if (node)
		lp_node_recover(d);
	return d;
}

void lp_driver_free(struct lp_driver *d)
{
	if (!d)
		return;
	lp_pool_free(d->pool);
	lp_inflight_free(d->inflight);
	lp_health_cache_free(d->health);
	free(d);
}

void lp_driver_register(struct lp_driver *d, struct csi_server *s)
{
	lp_register_identity(d, s);
	if (d->controller) {
		lp_register_controller_volumes(d, s);
		lp_register_controller_publish(d, s);
		lp_register_controller_modify(d, s);
		lp_register_snapshots(d, s);
		lp_register_groups(d, s);
		lp_register_snapshot_metadata(d, s);
		lp_register_controller_health(d, s);
	}
	if (d->node) {
		lp_register_node_stage(d, s);
		lp_register_node_publish(d, s);
		lp_register_node(d, s);
		lp_register_node_health(d, s);
	}
}
