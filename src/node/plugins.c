/*
 * The plugin watcher and CSI driver registration, as the kubelet's plugin manager and CSI
 * plugin do it.
 *
 * One thread watches <root>/plugins_registry with inotify (and lists it once at start). Each
 * socket found becomes a watched entry: PENDING until registration is tried (retried with
 * backoff while the socket does not answer), then REGISTERED or FAILED. Registration: GetInfo
 * (type CSIPlugin, a 1.x version) -> connect to the driver's endpoint -> NodeGetInfo ->
 * NodeGetCapabilities -> CSINode entry (name, nodeID, topologyKeys, allocatable.count) ->
 * nodeid annotation and topology labels on the Node -> NotifyRegistrationStatus(true). A failure
 * after GetInfo removes the driver's CSINode entry and annotation (stale data must not survive a
 * broken driver) and is reported with NotifyRegistrationStatus(false, error); the entry stays
 * FAILED until its socket goes away. A removed socket deregisters its driver (CSINode entry and
 * annotation removed; topology labels stay, as the kubelet leaves them).
 */
#include "node/node_int.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "base/strbuf.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "pluginregistration.pb-c.h"

enum { W_PENDING, W_REGISTERED, W_FAILED };

struct watched {
	struct watched *next;
	char *path;
	char *driver; /* once GetInfo answered */
	int state;
	int64_t next_try;
	int64_t delay;
};

/* The watched sockets belong to the watcher thread: a fleet process runs one per node. */
static _Thread_local struct watched *watched;

/* ---- driver table ---- */

struct nd_driver *nd_driver_get(struct nd *nd, const char *name)
{
	struct nd_driver *d = NULL;
	pthread_mutex_lock(&nd->lock);
	for (int i = 0; i < nd->ndrivers; i++) {
		if (strcmp(nd->drivers[i]->name, name) == 0) {
			d = nd->drivers[i];
			d->refs++;
			break;
		}
	}
	pthread_mutex_unlock(&nd->lock);
	return d;
}

void nd_driver_put(struct nd *nd, struct nd_driver *d)
{
	if (!d)
		return;
	pthread_mutex_lock(&nd->lock);
	bool last = --d->refs == 0;
	pthread_mutex_unlock(&nd->lock);
	if (!last)
		return;
	csi_conn_free(d->conn);
	free(d->name);
	free(d->endpoint);
	free(d->reg_socket);
	free(d->node_id);
	free(d);
}

/* Takes d (one reference) into the table, replacing a driver of the same name. */
static void driver_add(struct nd *nd, struct nd_driver *d)
{
	struct nd_driver *old = NULL;
	pthread_mutex_lock(&nd->lock);
	for (int i = 0; i < nd->ndrivers; i++) {
		if (strcmp(nd->drivers[i]->name, d->name) == 0) {
			old = nd->drivers[i];
			nd->drivers[i] = d;
			d = NULL;
			break;
		}
	}
	if (d && nd->ndrivers < ND_MAX_DRIVERS)
		nd->drivers[nd->ndrivers++] = d, d = NULL;
	pthread_mutex_unlock(&nd->lock);
	nd_driver_put(nd, old);
	if (d) {
		KLOG_E("Too many CSI drivers registered (%d); ignoring driver=\"%s\"", ND_MAX_DRIVERS,
		       d->name);
		nd_driver_put(nd, d);
	}
}

static void driver_remove(struct nd *nd, const char *name)
{
	struct nd_driver *old = NULL;
	pthread_mutex_lock(&nd->lock);
	for (int i = 0; i < nd->ndrivers; i++) {
		if (strcmp(nd->drivers[i]->name, name) == 0) {
			old = nd->drivers[i];
			nd->drivers[i] = nd->drivers[--nd->ndrivers];
			break;
		}
	}
	pthread_mutex_unlock(&nd->lock);
	nd_driver_put(nd, old);
}

/* ---- CSINode and Node ---- */

static json_t *csinode_new(struct nd *nd)
{
	struct kube_err e;
	json_t *owner = json_array();
	json_t *node = kube_get(nd->kc, &KUBE_RES_NODES, NULL, nd->cfg->node_name, &e);
	const char *uid = json_string_value(json_object_get(json_object_get(node, "metadata"), "uid"));
	if (uid)
		json_array_append_new(owner, json_pack("{s:s, s:s, s:s, s:s}", "apiVersion", "v1",
						       "kind", "Node", "name", nd->cfg->node_name,
						       "uid", uid));
	json_decref(node);
	return json_pack("{s:s, s:s, s:{s:s, s:o}, s:{s:[]}}", "apiVersion", "storage.k8s.io/v1",
			 "kind", "CSINode", "metadata", "name", nd->cfg->node_name, "ownerReferences",
			 owner, "spec", "drivers");
}

void nd_csinode_ensure(struct nd *nd)
{
	struct kube_err e;
	json_t *cur = kube_get(nd->kc, &KUBE_RES_CSINODES, NULL, nd->cfg->node_name, &e);
	if (!cur && kube_err_is_not_found(&e)) {
		json_t *obj = csinode_new(nd);
		cur = kube_create(nd->kc, &KUBE_RES_CSINODES, NULL, obj, &e);
		json_decref(obj);
		if (!cur && !kube_err_is_already_exists(&e))
			KLOG_ERR(e.message, "Failed to create CSINode node=\"%s\"",
				 nd->cfg->node_name);
	}
	json_decref(cur);
}

/* Replaces (entry != NULL) or removes this driver's entry in the CSINode, with retries. */
static int csinode_set(struct nd *nd, const char *driver, json_t *entry)
{
	struct kube_err e = { 0 };
	for (int attempt = 0; attempt < 5; attempt++) {
		json_t *cur = kube_get(nd->kc, &KUBE_RES_CSINODES, NULL, nd->cfg->node_name, &e);
		bool create = false;
		if (!cur) {
			if (!kube_err_is_not_found(&e))
				continue;
			if (!entry)
				return 0;
			cur = csinode_new(nd);
			create = true;
		}
		json_t *spec = json_object_get(cur, "spec");
		if (!json_is_object(spec)) {
			spec = json_object();
			json_object_set_new(cur, "spec", spec);
		}
		json_t *drivers = json_object_get(spec, "drivers");
		if (!json_is_array(drivers)) {
			drivers = json_array();
			json_object_set_new(spec, "drivers", drivers);
		}
		bool changed = false;
		for (size_t i = json_array_size(drivers); i-- > 0;) {
			const char *n = json_string_value(json_object_get(json_array_get(drivers, i), "name"));
			if (n && !strcmp(n, driver)) {
				if (entry && json_equal(entry, json_array_get(drivers, i))) {
					json_decref(cur);
					return 0;
				}
				json_array_remove(drivers, i);
				changed = true;
			}
		}
		if (entry) {
			json_array_append(drivers, entry);
			changed = true;
		}
		if (!changed) {
			json_decref(cur);
			return 0;
		}
		json_t *res = create ? kube_create(nd->kc, &KUBE_RES_CSINODES, NULL, cur, &e)
				     : kube_update(nd->kc, &KUBE_RES_CSINODES, NULL, cur, false, &e);
		json_decref(cur);
		if (res) {
			json_decref(res);
			return 0;
		}
		if (!kube_err_is_conflict(&e) && !kube_err_is_already_exists(&e))
			break;
	}
	KLOG_ERR(e.message, "Failed to update CSINode node=\"%s\" driver=\"%s\"",
		 nd->cfg->node_name, driver);
	return -1;
}

/*
 * Sets (node_id != NULL) or removes the driver in the csi.volume.kubernetes.io/nodeid annotation
 * and adds the topology labels.
 */
static int node_set_driver(struct nd *nd, const char *driver, const char *node_id, json_t *labels)
{
	struct kube_err e;
	json_t *node = kube_get(nd->kc, &KUBE_RES_NODES, NULL, nd->cfg->node_name, &e);
	if (!node) {
		KLOG_ERR(e.message, "Failed to get node node=\"%s\"", nd->cfg->node_name);
		return -1;
	}
	const char *cur = json_string_value(json_object_get(
		json_object_get(json_object_get(node, "metadata"), "annotations"),
		"csi.volume.kubernetes.io/nodeid"));
	json_t *ids = cur ? json_loads(cur, 0, NULL) : NULL;
	if (!json_is_object(ids)) {
		json_decref(ids);
		ids = json_object();
	}
	json_decref(node);
	if (node_id)
		json_object_set_new(ids, driver, json_string(node_id));
	else
		json_object_del(ids, driver);
	json_t *ann = json_object();
	if (json_object_size(ids) == 0) {
		json_object_set_new(ann, "csi.volume.kubernetes.io/nodeid", json_null());
	} else {
		char *s = json_dumps(ids, JSON_COMPACT | JSON_SORT_KEYS);
		json_object_set_new(ann, "csi.volume.kubernetes.io/nodeid", json_string(s));
		free(s);
	}
	json_decref(ids);
	json_t *md = json_pack("{s:o}", "annotations", ann);
	if (labels && json_object_size(labels))
		json_object_set(md, "labels", labels);
	json_t *patch = json_pack("{s:o}", "metadata", md);
	char *body = json_dumps(patch, JSON_COMPACT);
	json_t *res = kube_patch(nd->kc, &KUBE_RES_NODES, NULL, nd->cfg->node_name, false,
				 KUBE_PATCH_MERGE, body, &e);
	free(body);
	json_decref(patch);
	if (!res) {
		KLOG_ERR(e.message, "Failed to update node annotations node=\"%s\"",
			 nd->cfg->node_name);
		return -1;
	}
	json_decref(res);
	return 0;
}

static void uninstall_driver(struct nd *nd, const char *driver)
{
	driver_remove(nd, driver);
	csinode_set(nd, driver, NULL);
	node_set_driver(nd, driver, NULL, NULL);
}

/* ---- registration of one socket ---- */

static void notify(struct csi_conn *c, bool ok, const char *error, int64_t timeout)
{
	Pluginregistration__RegistrationStatus req = PLUGINREGISTRATION__REGISTRATION_STATUS__INIT;
	ProtobufCMessage *resp = NULL;
	struct csi_status st;
	req.plugin_registered = ok;
	req.error = (char *)(error ? error : "");
	if (csi_call(c, "/pluginregistration.Registration/NotifyRegistrationStatus", &req.base,
		     &pluginregistration__registration_status_response__descriptor, &resp, timeout,
		     &st) != 0)
		KLOG_W("NotifyRegistrationStatus failed: rpc error: code = %s desc = %.400s",
		       csi_code_go_name(st.code), st.message);
	csi_msg_free(resp);
}

static bool version_supported(const Pluginregistration__PluginInfo *info)
{
	for (size_t i = 0; i < info->n_supported_versions; i++) {
		const char *v = info->supported_versions[i];
		if (v[0] == 'v')
			v++;
		if (v[0] == '1' && (v[1] == '\0' || v[1] == '.'))
			return true;
	}
	return false;
}

/* Whether the driver's NodeGetCapabilities lists an RPC capability. */
static bool has_node_cap(const Csi__V1__NodeGetCapabilitiesResponse *r,
			 Csi__V1__NodeServiceCapability__RPC__Type type)
{
	for (size_t i = 0; r && i < r->n_capabilities; i++)
		if (r->capabilities[i]->type_case == CSI__V1__NODE_SERVICE_CAPABILITY__TYPE_RPC &&
		    r->capabilities[i]->rpc->type == type)
			return true;
	return false;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Registers the driver behind driver socket `info->endpoint`. Returns 0, or -1 with the reason in
 * err (the caller reports it to the registrar and removes the driver's entries).
 */
static int install_driver(struct nd *nd, const Pluginregistration__PluginInfo *info,
			  const char *reg_socket, char *err, size_t errlen)
{
	struct csi_conn_opts o = CSI_CONN_OPTS_INIT;
	o.connect_timeout_ns = 5 * NSEC_PER_SEC;
	char cerr[512];
	struct csi_conn *c = csi_connect(info->endpoint, &o, cerr, sizeof(cerr));
	if (!c) {
		snprintf(err, errlen, "cannot connect to CSI driver %s at %s: %s", info->name,
			 info->endpoint, cerr);
		return -1;
	}
	Csi__V1__NodeGetInfoRequest ireq = CSI__V1__NODE_GET_INFO_REQUEST__INIT;
	Csi__V1__NodeGetInfoResponse *ni = NULL;
	struct csi_status st;
	if (csi_node_get_info(c, &ireq, &ni, nd->cfg->timeout_ns, &st) != 0) {
		snprintf(err, errlen, "error updating CSINode object with CSI driver node info: "
				      "NodeGetInfo failed: rpc error: code = %s desc = %.400s",
			 csi_code_go_name(st.code), st.message);
		csi_conn_free(c);
		return -1;
	}
	if (!ni->node_id || !*ni->node_id) {
		snprintf(err, errlen, "NodeGetInfo of %s returned an empty node ID", info->name);
		csi_msg_free(ni);
		csi_conn_free(c);
		return -1;
	}
	Csi__V1__NodeGetCapabilitiesRequest creq = CSI__V1__NODE_GET_CAPABILITIES_REQUEST__INIT;
	Csi__V1__NodeGetCapabilitiesResponse *caps = NULL;
	if (csi_node_get_capabilities(c, &creq, &caps, nd->cfg->timeout_ns, &st) != 0) {
		snprintf(err, errlen, "NodeGetCapabilities failed: rpc error: code = %s desc = %.400s",
			 csi_code_go_name(st.code), st.message);
		csi_msg_free(ni);
		csi_conn_free(c);
		return -1;
	}
	struct nd_driver *d = xcalloc(1, sizeof(*d));
	d->refs = 1;
	d->name = xstrdup(info->name);
	d->endpoint = xstrdup(info->endpoint);
	d->reg_socket = xstrdup(reg_socket);
	d->node_id = xstrdup(ni->node_id);
	d->conn = c;
	d->stage_unstage = has_node_cap(caps, CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__STAGE_UNSTAGE_VOLUME);
	d->expand = has_node_cap(caps, CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__EXPAND_VOLUME);
	d->volume_stats = has_node_cap(caps, CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__GET_VOLUME_STATS);
	d->snmw = has_node_cap(caps, CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__SINGLE_NODE_MULTI_WRITER);
	csi_msg_free(caps);

	/* CSINode entry: topology keys sorted, as the kubelet writes them. */
	json_t *labels = json_object();
	json_t *keys = json_array();
	const Csi__V1__Topology *topo = ni->accessible_topology;
	size_t nseg = topo ? topo->n_segments : 0;
	char **names = xcalloc(nseg + 1, sizeof(char *));
	for (size_t i = 0; i < nseg; i++) {
		struct csi_map_entry *e = (struct csi_map_entry *)topo->segments[i];
		names[i] = e->key;
		json_object_set_new(labels, e->key, json_string(e->value));
	}
	qsort(names, nseg, sizeof(char *), cmp_str);
	for (size_t i = 0; i < nseg; i++)
		json_array_append_new(keys, json_string(names[i]));
	free(names);
	json_t *entry = json_pack("{s:s, s:s, s:o}", "name", info->name, "nodeID", ni->node_id,
				  "topologyKeys", keys);
	if (ni->max_volumes_per_node > 0)
		json_object_set_new(entry, "allocatable",
				    json_pack("{s:I}", "count", (json_int_t)ni->max_volumes_per_node));
	int rc = node_set_driver(nd, info->name, ni->node_id, labels);
	if (rc == 0)
		rc = csinode_set(nd, info->name, entry);
	json_decref(entry);
	json_decref(labels);
	csi_msg_free(ni);
	if (rc) {
		snprintf(err, errlen, "error updating Node and CSINode objects for driver %s",
			 info->name);
		nd_driver_put(nd, d);
		return -1;
	}
	KLOG_I("Registered CSI driver driver=\"%s\" endpoint=\"%s\" nodeID=\"%s\" stageUnstage=%d "
	       "singleNodeMultiWriter=%d",
	       d->name, d->endpoint, d->node_id, d->stage_unstage, d->snmw);
	driver_add(nd, d);
	return 0;
}

/* One attempt at a watched socket; leaves w->state updated. */
static void try_register(struct nd *nd, struct watched *w)
{
	char err[1024];
	struct csi_conn_opts o = CSI_CONN_OPTS_INIT;
	o.connect_timeout_ns = NSEC_PER_SEC;
	struct csi_conn *c = csi_connect(w->path, &o, err, sizeof(err));
	Pluginregistration__InfoRequest req = PLUGINREGISTRATION__INFO_REQUEST__INIT;
	Pluginregistration__PluginInfo *info = NULL;
	struct csi_status st;
	if (!c || csi_call(c, "/pluginregistration.Registration/GetInfo", &req.base,
			   &pluginregistration__plugin_info__descriptor, (ProtobufCMessage **)&info,
			   NSEC_PER_SEC, &st) != 0) {
		if (c)
			snprintf(err, sizeof(err), "rpc error: code = %s desc = %.400s",
				 csi_code_go_name(st.code), st.message);
		KLOG_V(2, "GetInfo on plugin socket failed, will retry path=\"%s\": %s", w->path, err);
		csi_conn_free(c);
		w->delay = w->delay ? (w->delay * 2 > 10 * NSEC_PER_SEC ? 10 * NSEC_PER_SEC : w->delay * 2)
				    : 500 * NSEC_PER_MSEC;
		w->next_try = mono_now_ns() + w->delay;
		return;
	}
	KLOG_I("Register plugin path=\"%s\" type=\"%s\" name=\"%s\" endpoint=\"%s\"", w->path,
	       info->type, info->name, info->endpoint);
	int rc = -1;
	if (strcmp(info->type, "CSIPlugin") != 0) {
		snprintf(err, sizeof(err), "plugin type %s is not supported by kcsi-node", info->type);
	} else if (!*info->name || !*info->endpoint) {
		snprintf(err, sizeof(err), "plugin at %s sent an empty name or endpoint", w->path);
	} else if (!version_supported(info)) {
		snprintf(err, sizeof(err), "none of the versions specified by %s are supported",
			 info->name);
	} else {
		free(w->driver);
		w->driver = xstrdup(info->name);
		rc = install_driver(nd, info, w->path, err, sizeof(err));
		if (rc)
			uninstall_driver(nd, info->name);
	}
	if (rc == 0) {
		w->state = W_REGISTERED;
		notify(c, true, NULL, NSEC_PER_SEC);
	} else {
		w->state = W_FAILED;
		KLOG_ERR(err, "RegisterPlugin error -- plugin registration failed path=\"%s\"",
			 w->path);
		char msg[1200];
		snprintf(msg, sizeof(msg), "RegisterPlugin error -- plugin registration failed with err: %s", err);
		notify(c, false, msg, NSEC_PER_SEC);
	}
	csi_msg_free(info);
	csi_conn_free(c);
}

/* ---- the watcher ---- */

static void watch_add(const char *path)
{
	for (struct watched *w = watched; w; w = w->next)
		if (!strcmp(w->path, path)) {
			w->state = W_PENDING; /* replaced: register again */
			w->next_try = 0;
			w->delay = 0;
			return;
		}
	struct watched *w = xcalloc(1, sizeof(*w));
	w->path = xstrdup(path);
	w->next = watched;
	watched = w;
}

static void watch_remove(struct nd *nd, const char *path)
{
	for (struct watched **pp = &watched; *pp; pp = &(*pp)->next) {
		struct watched *w = *pp;
		if (strcmp(w->path, path) != 0)
			continue;
		*pp = w->next;
		if (w->driver) {
			/* Only when this socket's registration is the driver's current one. */
			struct nd_driver *d = nd_driver_get(nd, w->driver);
			bool mine = d && !strcmp(d->reg_socket, w->path);
			nd_driver_put(nd, d);
			if (mine || w->state == W_FAILED) {
				KLOG_I("Deregistering CSI driver driver=\"%s\" (socket %s removed)",
				       w->driver, w->path);
				uninstall_driver(nd, w->driver);
			}
		}
		free(w->path);
		free(w->driver);
		free(w);
		return;
	}
}

static bool is_socket_name(const char *dir, const char *name, char *path, size_t len)
{
	if (name[0] == '.')
		return false;
	snprintf(path, len, "%s/%s", dir, name);
	struct stat sb;
	return lstat(path, &sb) == 0 && S_ISSOCK(sb.st_mode);
}

static bool is_watched(const char *path)
{
	for (struct watched *w = watched; w; w = w->next)
		if (!strcmp(w->path, path))
			return true;
	return false;
}

/* Adds the sockets in the registry dir that are not watched yet (start, and polling mode). */
static void scan_registry(struct nd *nd, char *path, size_t len)
{
	DIR *dir = opendir(nd->registry_dir);
	for (struct dirent *de; dir && (de = readdir(dir));)
		if (is_socket_name(nd->registry_dir, de->d_name, path, len) && !is_watched(path))
			watch_add(path);
	if (dir)
		closedir(dir);
}

/*
 * inotify instances are a per-user limit (fs.inotify.max_user_instances, 128 by default): a
 * fleet of a thousand nodes in one process runs out of them. A node that cannot have one lists
 * its registry dir every pass instead (200 ms, so a new socket is seen as soon), and a socket
 * that went away is dropped when it is no longer listed.
 */
static void poll_registry(struct nd *nd, char *path, size_t len)
{
	scan_registry(nd, path, len);
	for (struct watched *w = watched, *next; w; w = next) {
		next = w->next;
		struct stat sb;
		if (lstat(w->path, &sb) != 0)
			watch_remove(nd, w->path);
	}
}

static void *watcher_main(void *arg)
{
	struct nd *nd = arg;
	char path[4096];
	int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (fd < 0 || inotify_add_watch(fd, nd->registry_dir, IN_CREATE | IN_DELETE | IN_MOVED_TO |
								     IN_MOVED_FROM) < 0) {
		static atomic_int said; /* once per process: a fleet has hundreds of these */
		if (!atomic_exchange(&said, 1))
			KLOG_W("Cannot watch %s with inotify (%s); listing it every 200 ms instead "
			       "(and so for every node that has none)", nd->registry_dir, strerror(errno));
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	KLOG_I("Watching plugin registration directory path=\"%s\"", nd->registry_dir);
	scan_registry(nd, path, sizeof(path));
	while (!atomic_load(&nd->stop)) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (fd < 0) {
			sleep_ns(200 * NSEC_PER_MSEC);
			poll_registry(nd, path, sizeof(path));
		} else if (poll(&p, 1, 200) > 0) {
			char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
			ssize_t n = read(fd, buf, sizeof(buf));
			for (ssize_t off = 0; n > 0 && off < n;) {
				struct inotify_event *ev = (struct inotify_event *)(buf + off);
				off += (ssize_t)sizeof(*ev) + ev->len;
				if (!ev->len || ev->name[0] == '.')
					continue;
				snprintf(path, sizeof(path), "%s/%s", nd->registry_dir, ev->name);
				if (ev->mask & (IN_DELETE | IN_MOVED_FROM))
					watch_remove(nd, path);
				else if (is_socket_name(nd->registry_dir, ev->name, path, sizeof(path)))
					watch_add(path);
			}
		}
		int64_t now = mono_now_ns();
		for (struct watched *w = watched; w && !atomic_load(&nd->stop); w = w->next)
			if (w->state == W_PENDING && now >= w->next_try)
				try_register(nd, w);
	}
	if (fd >= 0)
		close(fd);
	while (watched) {
		struct watched *w = watched;
		watched = w->next;
		free(w->path);
		free(w->driver);
		free(w);
	}
	return NULL;
}

int nd_plugins_start(struct nd *nd)
{
	if (pthread_create(&nd->watcher, NULL, watcher_main, nd) != 0) {
		KLOG_E("Cannot start the plugin watcher thread");
		return -1;
	}
	nd->watcher_started = true;
	return 0;
}

int nd_plugins_stop(struct nd *nd)
{
	if (nd->watcher_started) {
		/* the watcher may be in a CSI call (NodeGetInfo of a slow driver): never wait long */
		struct timespec dl = wall_deadline(250 * NSEC_PER_MSEC);
		if (pthread_timedjoin_np(nd->watcher, NULL, &dl) != 0) {
			KLOG_W("Plugin watcher busy in a call to a driver; exiting without waiting for it");
			return -1;
		}
	}
	nd->watcher_started = false;
	pthread_mutex_lock(&nd->lock);
	int n = nd->ndrivers;
	struct nd_driver *all[ND_MAX_DRIVERS];
	memcpy(all, nd->drivers, sizeof(all));
	nd->ndrivers = 0;
	pthread_mutex_unlock(&nd->lock);
	for (int i = 0; i < n; i++)
		nd_driver_put(nd, all[i]);
	return 0;
}
