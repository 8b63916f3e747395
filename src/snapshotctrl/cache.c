/*
 * snapshot-controller's reads of its informers' caches, by name or by queue key: apart from the
 * two sync files (controller.c, group.c), which both use them, so neither depends on the other.
 */
#include "snapshotctrl/internal.h"

#include <stdio.h>
#include <string.h>

struct kube_obj *sctrl_get(struct sctrl *c, int inf, const char *ns, const char *name)
{
	if (!name || !c->inf[inf])
		return NULL;
	return kube_store_get(kube_informer_store(c->inf[inf]), ns, name);
}

struct kube_obj *sctrl_get_key(struct sctrl *c, int inf, const char *key)
{
	char ns[256];
	const char *slash = strchr(key, '/');

	if (!slash)
		return NULL;
	snprintf(ns, sizeof(ns), "%.*s", (int)(slash - key), key);
	return sctrl_get(c, inf, ns, slash + 1);
}
