/*
 * emu_store: resource table, sorted object arrays and the event ring (the state file and its
 * log: emu_state.c).
 *
 * Sorted arrays rather than hash tables: lookups are a binary search, a namespace is a key range,
 * and paginated lists need key order anyway. Inserting into a 10,000-entry array moves at most
 * 160 KB of pointers, far below the cost of the JSON work around it.
 */
#include "emulator/emu_store.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/flags.h"
#include "base/xalloc.h"

const char *const emu_event_names[3] = { "ADDED", "MODIFIED", "DELETED" };

#define PENDING "{\"phase\":\"Pending\"}"

/* Only the descriptive fields are given; the runtime ones start zeroed. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const struct emu_resource resource_table[] = {
	/* group, version, plural, singular, kind, namespaced, status, short, fields, create_status,
	 * also_version */
	{ "", "v1", "namespaces", "namespace", "Namespace", false, false, "ns", "status.phase",
	  "{\"phase\":\"Active\"}" },
	{ "", "v1", "nodes", "node", "Node", false, true, "no", "spec.unschedulable", NULL },
	{ "", "v1", "persistentvolumes", "persistentvolume", "PersistentVolume", false, true, "pv",
	  "", PENDING },
	{ "", "v1", "persistentvolumeclaims", "persistentvolumeclaim", "PersistentVolumeClaim", true,
	  true, "pvc", "", PENDING },
	{ "", "v1", "pods", "pod", "Pod", true, true, "po",
	  "spec.nodeName,spec.restartPolicy,spec.schedulerName,spec.serviceAccountName,status.phase,"
	  "status.podIP,status.nominatedNodeName", PENDING },
	{ "", "v1", "secrets", "secret", "Secret", true, false, "", "type", NULL },
	{ "", "v1", "configmaps", "configmap", "ConfigMap", true, false, "cm", "", NULL },
	{ "", "v1", "serviceaccounts", "serviceaccount", "ServiceAccount", true, false, "sa", "",
	  NULL },
	{ "", "v1", "events", "event", "Event", true, false, "ev",
	  "involvedObject.kind,involvedObject.namespace,involvedObject.name,involvedObject.uid,"
	  "involvedObject.apiVersion,involvedObject.resourceVersion,involvedObject.fieldPath,reason,"
	  "reportingComponent,source,type", NULL },
	{ "storage.k8s.io", "v1", "storageclasses", "storageclass", "StorageClass", false, false,
	  "sc", "", NULL },
	{ "storage.k8s.io", "v1", "volumeattachments", "volumeattachment", "VolumeAttachment", false,
	  true, "", "", "{\"attached\":false}" },
	{ "storage.k8s.io", "v1", "csinodes", "csinode", "CSINode", false, false, "", "", NULL },
	{ "storage.k8s.io", "v1", "csidrivers", "csidriver", "CSIDriver", false, false, "", "", NULL },
	{ "storage.k8s.io", "v1", "csistoragecapacities", "csistoragecapacity", "CSIStorageCapacity",
	  true, false, "", "", NULL },
	{ "storage.k8s.io", "v1", "volumeattributesclasses", "volumeattributesclass",
	  "VolumeAttributesClass", false, false, "vac", "", NULL },
	{ "coordination.k8s.io", "v1", "leases", "lease", "Lease", true, false, "", "", NULL },
	{ "events.k8s.io", "v1", "events", "event", "Event", true, false, "ev",
	  "reason,regarding.kind,regarding.namespace,regarding.name,regarding.uid,type", NULL },
	/* the external-snapshotter's CRDs; with a status subresource, create drops status */
	{ "snapshot.storage.k8s.io", "v1", "volumesnapshots", "volumesnapshot", "VolumeSnapshot",
	  true, true, "vs", "", "" },
	{ "snapshot.storage.k8s.io", "v1", "volumesnapshotcontents", "volumesnapshotcontent",
	  "VolumeSnapshotContent", false, true, "vsc,vscs", "", "" },
	{ "snapshot.storage.k8s.io", "v1", "volumesnapshotclasses", "volumesnapshotclass",
	  "VolumeSnapshotClass", false, false, "vsclass,vsclasses", "", NULL },
	/*
	 * its group snapshot CRDs as v8.6 serves them: stored at v1beta2, served at v1beta2 and v1
	 * (same schema; v8.6's sidecars use v1, v8.2-v8.5's v1beta2)
	 */
	{ "groupsnapshot.storage.k8s.io", "v1beta2", "volumegroupsnapshots", "volumegroupsnapshot",
	  "VolumeGroupSnapshot", true, true, "vgs", "", "", "v1" },
	{ "groupsnapshot.storage.k8s.io", "v1beta2", "volumegroupsnapshotcontents",
	  "volumegroupsnapshotcontent", "VolumeGroupSnapshotContent", false, true, "vgsc,vgscs", "",
	  "", "v1" },
	{ "groupsnapshot.storage.k8s.io", "v1beta2", "volumegroupsnapshotclasses",
	  "volumegroupsnapshotclass", "VolumeGroupSnapshotClass", false, false,
	  "vgsclass,vgsclasses", "", NULL, "v1" },
	/* RBAC, stored only (nothing is authorized by it): deploy/kubernetes applies here too */
	{ "rbac.authorization.k8s.io", "v1", "clusterroles", "clusterrole", "ClusterRole", false,
	  false, "", "", NULL },
	{ "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "clusterrolebinding",
	  "ClusterRoleBinding", false, false, "", "", NULL },
	{ "rbac.authorization.k8s.io", "v1", "roles", "role", "Role", true, false, "", "", NULL },
	{ "rbac.authorization.k8s.io", "v1", "rolebindings", "rolebinding", "RoleBinding", true,
	  false, "", "", NULL },
	/* workloads, stored only (no controller runs them): owner chains of the sidecars' pods */
	{ "apps", "v1", "deployments", "deployment", "Deployment", true, true, "deploy", "", "" },
	{ "apps", "v1", "replicasets", "replicaset", "ReplicaSet", true, true, "rs", "", "" },
	{ "apps", "v1", "statefulsets", "statefulset", "StatefulSet", true, true, "sts", "", "" },
	{ "apps", "v1", "daemonsets", "daemonset", "DaemonSet", true, true, "ds", "", "" },
	/*
	 * Stored only, for kube-scheduler: it lists and watches these (Services, ReplicationControllers
	 * and the apps kinds for default topology spreading, PodDisruptionBudgets for preemption, the
	 * resource.k8s.io kinds for DynamicResources) and schedules nothing until every list answers.
	 */
	{ "", "v1", "services", "service", "Service", true, true, "svc", "", "" },
	{ "", "v1", "replicationcontrollers", "replicationcontroller", "ReplicationController", true,
	  true, "rc", "", "" },
	{ "policy", "v1", "poddisruptionbudgets", "poddisruptionbudget", "PodDisruptionBudget", true,
	  true, "pdb", "", "" },
	{ "resource.k8s.io", "v1", "deviceclasses", "deviceclass", "DeviceClass", false, false, "",
	  "", NULL },
	/* kube-scheduler v1.37 lists these too (device taints, on by default) */
	{ "resource.k8s.io", "v1", "devicetaintrules", "devicetaintrule", "DeviceTaintRule", false,
	  true, "", "", "" },
	{ "resource.k8s.io", "v1", "resourceclaims", "resourceclaim", "ResourceClaim", true, true, "",
	  "", "" },
	{ "resource.k8s.io", "v1", "resourceslices", "resourceslice", "ResourceSlice", false, false,
	  "", "", NULL },
};
#pragma GCC diagnostic pop

void emu_store_init(struct emu_store *st, size_t history)
{
	memset(st, 0, sizeof(*st));
	pthread_mutex_init(&st->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* watch waits must not jump with the clock */
	pthread_cond_init(&st->cv, &ca);
	pthread_condattr_destroy(&ca);
	st->ring_cap = history ? history : 1;
	st->ring_bytes_max = SIZE_MAX;
	st->ring = xcalloc(st->ring_cap, sizeof(*st->ring));
	st->state_lock_fd = st->log_fd = -1;
	st->nres = sizeof(resource_table) / sizeof(resource_table[0]);
	st->res = xcalloc(st->nres, sizeof(*st->res));
	for (size_t i = 0; i < st->nres; i++) {
		st->res[i] = resource_table[i];
		struct emu_resource *r = &st->res[i];
		if (*r->group)
			snprintf(r->api_version, sizeof(r->api_version), "%s/%s", r->group, r->version);
		else
			snprintf(r->api_version, sizeof(r->api_version), "%s", r->version);
	}
}

static void event_clear(struct emu_event *ev)
{
	json_decref(ev->obj);
	json_decref(ev->prev);
	free(ev->text);
	memset(ev, 0, sizeof(*ev));
}

void emu_store_free(struct emu_store *st)
{
	for (size_t i = 0; i < st->ring_len; i++)
		event_clear(&st->ring[(st->ring_head + i) % st->ring_cap]);
	free(st->ring);
	for (size_t i = 0; i < st->nres; i++) {
		for (size_t j = 0; j < st->res[i].n; j++) {
			free(st->res[i].items[j].key);
			json_decref(st->res[i].items[j].obj);
		}
		free(st->res[i].items);
	}
	free(st->res);
	if (st->log_fd >= 0)
		close(st->log_fd);
	if (st->state_lock_fd >= 0)
		close(st->state_lock_fd); /* the kernel drops the lock with it */
	free(st->state_path);
	free(st->log_path);
	pthread_mutex_destroy(&st->mu);
	pthread_cond_destroy(&st->cv);
}

/* ---- --runtime-config ---- */

/* Stops serving st->res[i]: its (empty) array goes and the table closes up. */
static void drop_resource(struct emu_store *st, size_t i)
{
	free(st->res[i].items);
	memmove(&st->res[i], &st->res[i + 1], (st->nres - i - 1) * sizeof(st->res[0]));
	st->nres--;
}

/* Whether r is served at group/version, and as its storage version or its also_version. */
static bool served_at(const struct emu_resource *r, const char *group, const char *version,
		      bool *also)
{
	*also = r->also_version && !strcmp(r->also_version, version);
	return !strcmp(r->group, group) && (*also || !strcmp(r->version, version));
}

/* One entry: key GROUP/VERSION or GROUP/VERSION/RESOURCE switched off (on is what is served). */
static int runtime_entry(struct emu_store *st, const char *key, bool on, char *err,
			 size_t errlen)
{
	char group[128], version[64], plural[128] = "";
	int n = sscanf(key, "%127[^/]/%63[^/]/%127[^/]", group, version, plural);
	const char *third = strchr(strchr(key, '/') ? strchr(key, '/') + 1 : key, '/');
	if (n < 2 || !strcmp(group, "api") || (third && strchr(third + 1, '/'))) {
		snprintf(err, errlen, "--runtime-config: %s: kube-emulator takes only GROUP/VERSION "
			 "or GROUP/VERSION/RESOURCE of a named group (the core group, api/all, "
			 "api/ga, api/beta and api/alpha are always as they are)", key);
		return -1;
	}
	bool matched = false;
	for (size_t i = 0; i < st->nres;) {
		struct emu_resource *r = &st->res[i];
		bool also;
		if (!served_at(r, group, version, &also) || (*plural && strcmp(r->plural, plural))) {
			i++;
			continue;
		}
		matched = true;
		if (on) {
			i++;
		} else if (also) {
			r->also_version = NULL; /* still served at its storage version */
			i++;
		} else if (r->also_version) {
			snprintf(err, errlen, "--runtime-config: %s: kube-emulator cannot stop serving "
				 "%s/%s at %s, the version it stores, while it serves %s",
				 key, r->group, r->plural, r->version, r->also_version);
			return -1;
		} else {
			drop_resource(st, i);
		}
	}
	if (!matched) {
		snprintf(err, errlen, "--runtime-config: %s: kube-emulator serves no such %s", key,
			 *plural ? "resource" : "group version");
		return -1;
	}
	return 0;
}

int emu_store_runtime_config(struct emu_store *st, const struct flag_map *m, char *err,
			     size_t errlen)
{
	for (size_t i = 0; m && i < m->len; i++) {
		/* the flag parser (flags_gates) let only Go's bools through */
		const char *v = m->items[i].value;
		while (*v == ' ')
			v++;
		if (runtime_entry(st, m->items[i].key, *v && strchr("1tT", *v), err, errlen))
			return -1;
	}
	return 0;
}

int emu_store_resource(const struct emu_store *st, const char *group, const char *version,
		       const char *plural)
{
	for (size_t i = 0; i < st->nres; i++) {
		const struct emu_resource *r = &st->res[i];
		if (!strcmp(r->group, group) && !strcmp(r->plural, plural) &&
		    (!strcmp(r->version, version) ||
		     (r->also_version && !strcmp(r->also_version, version))))
			return (int)i;
	}
	return -1;
}

int emu_store_resource_by_kind(const struct emu_store *st, const char *api_version,
			       const char *kind)
{
	for (size_t i = 0; i < st->nres; i++)
		if (!strcmp(st->res[i].api_version, api_version) && !strcmp(st->res[i].kind, kind))
			return (int)i;
	return -1;
}

void emu_store_key(const struct emu_resource *r, const char *ns, const char *name, char *buf,
		   size_t len)
{
	if (r->namespaced)
		snprintf(buf, len, "%s/%s", ns ? ns : "", name);
	else
		snprintf(buf, len, "%s", name);
}

size_t emu_store_lower_bound(const struct emu_resource *r, const char *key)
{
	size_t lo = 0, hi = r->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (strcmp(r->items[mid].key, key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

json_t *emu_store_get(struct emu_store *st, int res, const char *key)
{
	struct emu_resource *r = &st->res[res];
	size_t i = emu_store_lower_bound(r, key);
	return i < r->n && !strcmp(r->items[i].key, key) ? r->items[i].obj : NULL;
}

static void set_rv(json_t *obj, uint64_t rv)
{
	json_t *meta = json_object_get(obj, "metadata");
	if (!json_is_object(meta)) {
		meta = json_object();
		json_object_set_new(obj, "metadata", meta);
	}
	char buf[32];
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)rv);
	json_object_set_new(meta, "resourceVersion", json_string(buf));
}

/* Puts obj (a new reference) at key; returns the previous object (reference) or NULL. */
static json_t *items_put(struct emu_resource *r, const char *key, json_t *obj, bool remove)
{
	size_t i = emu_store_lower_bound(r, key);
	bool found = i < r->n && !strcmp(r->items[i].key, key);
	json_t *prev = found ? r->items[i].obj : NULL;
	if (remove) {
		if (found) {
			free(r->items[i].key);
			memmove(&r->items[i], &r->items[i + 1], (r->n - i - 1) * sizeof(*r->items));
			r->n--;
		}
		json_decref(obj);
		return prev;
	}
	if (found) {
		r->items[i].obj = obj;
		return prev;
	}
	if (r->n == r->cap) {
		r->cap = r->cap ? 2 * r->cap : 16;
		r->items = xrealloc(r->items, r->cap * sizeof(*r->items));
	}
	memmove(&r->items[i + 1], &r->items[i], (r->n - i) * sizeof(*r->items));
	r->items[i].key = xstrdup(key);
	r->items[i].obj = obj;
	r->n++;
	return NULL;
}

/* One malloc'd block as glibc holds it: an 8-byte header, 16-byte steps, 32 bytes at least. */
static size_t chunk(size_t n)
{
	n = (n + 8 + 15) & ~(size_t)15;
	return n < 32 ? 32 : n;
}

/*
 * What a decoded object holds in memory, as jansson 2.x allocates it: a block per value (true,
 * false and null are shared), a string's text, an array's slot table, an object's hash table
 * with one block per member holding its key. Measured against RSS (docs/kube-emulator.md): a
 * map of 2,000 short strings costs ~350 KiB decoded for 35 KiB of text, ten times the text, so
 * counting only the text let the history outgrow its budget tenfold.
 */
static size_t json_cost(const json_t *j)
{
	size_t n = 0, i;
	const char *k;
	json_t *v;

	switch (json_typeof(j)) {
	case JSON_OBJECT:
		n = chunk(72) + chunk(16 * (json_object_size(j) + 8));
		json_object_foreach((json_t *)j, k, v)
			n += chunk(56 + strlen(k) + 1) + json_cost(v);
		return n;
	case JSON_ARRAY:
		n = chunk(40) + chunk(8 * (json_array_size(j) + 8));
		json_array_foreach(j, i, v)
			n += json_cost(v);
		return n;
	case JSON_STRING:
		return chunk(32) + chunk(json_string_length(j) + 1);
	case JSON_INTEGER:
	case JSON_REAL:
		return chunk(24);
	default:
		return 0;
	}
}

const struct emu_event *emu_store_commit(struct emu_store *st, int res, const char *key,
					 json_t *obj, enum emu_event_type type)
{
	uint64_t rv = ++st->rv;
	set_rv(obj, rv);
	json_t *prev = items_put(&st->res[res], key, json_incref(obj), type == EMU_DELETED);

	char *text = json_dumps(obj, JSON_COMPACT);
	if (!text)
		text = xstrdup("{}");
	/* An event holds its text and its decoded object (prev is the event before's object). */
	size_t cost = chunk(strlen(text) + 1) + json_cost(obj) + sizeof(struct emu_event);
	while (st->ring_len && (st->ring_len == st->ring_cap ||
				st->ring_bytes + cost > st->ring_bytes_max)) {
		struct emu_event *old = &st->ring[st->ring_head];
		st->history_start = old->rv;
		st->ring_bytes -= old->cost;
		event_clear(old);
		st->ring_head = (st->ring_head + 1) % st->ring_cap;
		st->ring_len--;
	}
	struct emu_event *ev = &st->ring[(st->ring_head + st->ring_len) % st->ring_cap];
	st->ring_len++;
	ev->rv = rv;
	ev->res = res;
	ev->type = type;
	ev->obj = obj;
	ev->prev = prev;
	ev->text = text;
	ev->cost = cost;
	st->ring_bytes += cost;
	if (st->on_commit)
		st->on_commit(st, ev, key);
	pthread_cond_broadcast(&st->cv);
	return ev;
}

const struct emu_event *emu_store_event(const struct emu_store *st, uint64_t rv)
{
	if (!st->ring_len)
		return NULL;
	uint64_t first = st->ring[st->ring_head].rv;
	if (rv < first || rv - first >= st->ring_len)
		return NULL;
	return &st->ring[(st->ring_head + (rv - first)) % st->ring_cap];
}

void emu_store_restore(struct emu_store *st, int res, const char *key, json_t *obj, bool remove)
{
	json_decref(items_put(&st->res[res], key, obj, remove));
}

bool emu_resource_is_crd(const struct emu_resource *r)
{
	return !strcmp(r->group, "snapshot.storage.k8s.io") ||
	       !strcmp(r->group, "groupsnapshot.storage.k8s.io");
}

bool emu_resource_has_generation(const struct emu_resource *r)
{
	return emu_resource_is_crd(r) || !strcmp(r->group, "apps") ||
	       (!*r->group && !strcmp(r->plural, "pods"));
}

bool emu_resource_returns_deleted(const struct emu_resource *r)
{
	static const char *const core[] = { "namespaces", "persistentvolumes",
					    "persistentvolumeclaims", "pods", "serviceaccounts" };
	if (!*r->group) {
		for (size_t i = 0; i < sizeof(core) / sizeof(core[0]); i++)
			if (!strcmp(r->plural, core[i]))
				return true;
		return false;
	}
	return !strcmp(r->group, "storage.k8s.io") && strcmp(r->plural, "csistoragecapacities");
}
