/*
 * ad_plan: seed 002's "Reconcile State" and "Act" as a pure function (see ad.h).
 *
 * Two passes over hash sets built for the call: first the actual pairs nobody wants any more
 * (detaches, so that a volume moving between nodes is freed before it is attached again), then
 * the desired pairs not attached yet. A volume gets at most one operation per plan: `locked`
 * collects the volumes an action of this plan already claimed, on top of the caller's busy().
 *
 * Safe detach follows the upstream reconciler: a pair still mounted (in status.volumesInUse) is
 * left alone unless the node has the out-of-service taint, or the node is not Ready and the
 * detach has been wanted for the max wait for unmount; a healthy node is waited for forever.
 */
#include "controllers/ad.h"
#include "base/sha256.h"
#include "kube/hmap.h"

#include <stdio.h>
#include <string.h>

const char *ad_unique_name(const char *driver, const char *handle, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s^%s", AD_CSI_PLUGIN, driver, handle);
	return buf;
}

int ad_parse_unique_name(const char *uniq, char *driver, size_t dlen, char *handle, size_t hlen)
{
	const size_t pl = sizeof(AD_CSI_PLUGIN) - 1;
	const char *d, *caret;

	if (strncmp(uniq, AD_CSI_PLUGIN "/", pl + 1) != 0)
		return -1;
	d = uniq + pl + 1;
	caret = strchr(d, '^');
	if (!caret || caret == d || !caret[1] || (size_t)(caret - d) >= dlen || strlen(caret + 1) >= hlen)
		return -1;
	memcpy(driver, d, (size_t)(caret - d));
	driver[caret - d] = 0;
	strcpy(handle, caret + 1);
	return 0;
}

void ad_va_name(enum ad_va_naming naming, const char *driver, const char *handle, const char *pv,
		const char *node, char *buf, size_t len)
{
	char in[2048], hex[65];
	int n;

	if (naming == AD_NAMING_SEED)
		n = snprintf(in, sizeof(in), "%s%s", pv ? pv : "", node);
	else
		n = snprintf(in, sizeof(in), "%s%s%s", handle, driver, node);
	if (n < 0 || (size_t)n >= sizeof(in))
		n = (int)sizeof(in) - 1; /* names are bounded by the API far below this */
	sha256_hex(in, (size_t)n, hex);
	snprintf(buf, len, "%s-%s", naming == AD_NAMING_SEED ? "pv" : "csi", hex);
}

static void pair_key(const char *uniq, const char *node, char *buf, size_t len)
{
	snprintf(buf, len, "%s\n%s", uniq, node); /* '\n' appears in neither a node nor a name */
}

static bool attached_elsewhere(const struct ad_plan_in *in, const char *uniq, const char *node)
{
	for (size_t i = 0; i < in->nactual; i++)
		if (!strcmp(in->actual[i].uniq, uniq) && strcmp(in->actual[i].node, node))
			return true;
	return false;
}

size_t ad_plan(struct ad_plan_in *in, struct ad_action *out, size_t max)
{
	struct kube_hmap want = KUBE_HMAP_INIT, have = KUBE_HMAP_INIT, locked = KUBE_HMAP_INIT;
	struct kube_hmap by_volume = KUBE_HMAP_INIT; /* volumes with more than zero actual pairs */
	char key[1024];
	size_t n = 0;

	for (size_t i = 0; i < in->ndesired; i++) {
		pair_key(in->desired[i].uniq, in->desired[i].node, key, sizeof(key));
		kube_hmap_put(&want, key, (void *)1);
	}
	for (size_t i = 0; i < in->nactual; i++) {
		pair_key(in->actual[i].uniq, in->actual[i].node, key, sizeof(key));
		kube_hmap_put(&have, key, &in->actual[i]);
		kube_hmap_put(&by_volume, in->actual[i].uniq, (void *)1);
	}

	/* Act, first half: detach what no pod wants. */
	for (size_t i = 0; i < in->nactual && n < max; i++) {
		struct ad_actual *a = &in->actual[i];
		struct ad_node_health h = { false, false };
		uint8_t forced = AD_FORCE_NONE;

		pair_key(a->uniq, a->node, key, sizeof(key));
		if (kube_hmap_has(&want, key)) {
			a->detach_requested_ns = 0;
			continue;
		}
		if (kube_hmap_has(&locked, a->uniq) || (in->busy && in->busy(a->uniq, in->ud)))
			continue;
		if (!a->detach_requested_ns)
			a->detach_requested_ns = in->now_ns;
		if (in->health)
			in->health(a->node, &h, in->ud);
		/* upstream's reconciler: the timeout forces only on a node that is not healthy, but
		 * once expired any detach skips the safety check and counts as forced (timeout before
		 * out-of-service); --disable-force-detach-on-timeout leaves only the taint. */
		bool expired = !in->no_force_timeout &&
			       in->now_ns - a->detach_requested_ns >= in->max_wait_ns;
		if (a->mounted && !(expired && !h.ready) && !h.out_of_service) {
			out[n++] = (struct ad_action){ AD_ACT_WAIT_UNMOUNT, AD_FORCE_NONE, i };
			continue;
		}
		forced = expired ? AD_FORCE_TIMEOUT
			 : h.out_of_service ? AD_FORCE_OUT_OF_SERVICE : AD_FORCE_NONE;
		out[n++] = (struct ad_action){ AD_ACT_DETACH, forced, i };
		kube_hmap_put(&locked, a->uniq, (void *)1);
	}

	/* Act, second half: attach what pods want and is not attached. */
	for (size_t i = 0; i < in->ndesired && n < max; i++) {
		const struct ad_desired *d = &in->desired[i];
		const struct ad_actual *a;

		pair_key(d->uniq, d->node, key, sizeof(key));
		a = kube_hmap_get(&have, key);
		if (a && a->state == AD_ATTACHED)
			continue;
		if (kube_hmap_has(&locked, d->uniq) || (in->busy && in->busy(d->uniq, in->ud)))
			continue;
		if (!d->multi_attach_ok && kube_hmap_has(&by_volume, d->uniq) &&
		    attached_elsewhere(in, d->uniq, d->node)) {
			out[n++] = (struct ad_action){ AD_ACT_MULTI_ATTACH, AD_FORCE_NONE, i };
			continue;
		}
		out[n++] = (struct ad_action){ AD_ACT_ATTACH, AD_FORCE_NONE, i };
		kube_hmap_put(&locked, d->uniq, (void *)1);
	}
	kube_hmap_clear(&want);
	kube_hmap_clear(&have);
	kube_hmap_clear(&locked);
	kube_hmap_clear(&by_volume);
	return n;
}
