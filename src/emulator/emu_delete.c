/*
 * emu_delete: DELETE with kube-apiserver's semantics: preconditions, DeleteOptions
 * (gracePeriodSeconds, propagationPolicy), finalizers that keep an object with a
 * deletionTimestamp, graceful deletion of a pod a node runs, and the termination of a namespace
 * with everything in it (what upstream's namespace controller does, done inline). Each DELETE
 * decides and commits under one store lock, as the other verbs (emu_verbs.c) do; deletecollection
 * (emu_watch.c) deletes through emu_delete_locked().
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/timeutil.h"
#include "base/xalloc.h"
#include "emulator/emu_internal.h"
#include "emulator/emu_object.h"
#include "emulator/emu_verbs.h"

#define KEY_MAX 600

static bool check_preconditions(struct emu_call *k, const json_t *opts, const json_t *old,
				struct reply *rp)
{
	const json_t *pre = json_object_get(opts, "preconditions");
	const json_t *juid = json_object_get(pre, "uid"), *jrv = json_object_get(pre, "resourceVersion");
	if ((pre && !json_is_object(pre) && !json_is_null(pre)) ||
	    (juid && !json_is_string(juid) && !json_is_null(juid)) ||
	    (jrv && !json_is_string(jrv) && !json_is_null(jrv))) {
		reply_bad(rp, "DeleteOptions.preconditions must be {\"uid\": string, "
			  "\"resourceVersion\": string}");
		return false;
	}
	const char *uid = json_string_value(juid);
	const char *rv = json_string_value(jrv);
	char why[512];
	if (uid && strcmp(uid, emu_meta_str(old, "uid"))) {
		snprintf(why, sizeof(why), "Precondition failed: UID in precondition: %s, UID in "
			 "object meta: %s", uid, emu_meta_str(old, "uid"));
		reply_conflict(rp, k->r, k->name, why);
		return false;
	}
	if (rv && strcmp(rv, emu_meta_str(old, "resourceVersion"))) {
		snprintf(why, sizeof(why), "Precondition failed: ResourceVersion in precondition: %s, "
			 "ResourceVersion in object meta: %s", rv, emu_meta_str(old, "resourceVersion"));
		reply_conflict(rp, k->r, k->name, why);
		return false;
	}
	return true;
}

/* What a DELETE asks for: gracePeriodSeconds when given. */
struct grace {
	bool given;
	long long seconds;
};

/* Marks old as being deleted: deletionTimestamp = now + seconds, deletionGracePeriodSeconds. */
static json_t *mark_deleting(const json_t *old, long long seconds, bool bump_generation)
{
	char ts[RFC3339_BUFLEN];
	rfc3339_format(time(NULL) + (time_t)seconds, ts, sizeof(ts));
	json_t *nobj = json_deep_copy(old);
	json_t *nmeta = emu_meta_of(nobj);
	json_object_set_new(nmeta, "deletionTimestamp", json_string(ts));
	json_object_set_new(nmeta, "deletionGracePeriodSeconds", json_integer(seconds));
	json_int_t gen = json_integer_value(json_object_get(nmeta, "generation"));
	if (bump_generation && gen > 0)
		json_object_set_new(nmeta, "generation", json_integer(gen + 1));
	return nobj;
}

/*
 * The grace period of a pod delete, as upstream's pod strategy computes it: the request's
 * gracePeriodSeconds (negative means 1), else spec.terminationGracePeriodSeconds, else 30; 0
 * for a pod no node runs (no spec.nodeName) or one that has terminated.
 */
static long long pod_grace(const json_t *pod, struct grace g)
{
	long long s;
	if (g.given) {
		s = g.seconds < 0 ? 1 : g.seconds;
	} else {
		json_t *t = json_object_get(json_object_get(pod, "spec"),
					    "terminationGracePeriodSeconds");
		s = json_is_integer(t) ? (long long)json_integer_value(t) : 30;
		if (s < 0)
			s = 1;
	}
	const char *phase = json_string_value(json_object_get(json_object_get(pod, "status"),
							      "phase"));
	if (!*emu_pod_node(pod) || (phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"))))
		s = 0;
	return s;
}

/*
 * Graceful deletion of a pod (lock held). Returns true when it answered: the pod got (or already
 * had) a deletionTimestamp with a grace period > 0 and stays, for its node agent to finish the
 * delete with grace period 0 (a shorter period shortens the pending one). False: delete it now.
 */
static bool pod_graceful_delete(struct emu_server *srv, int res, const char *key, json_t *old,
				struct grace g, struct reply *rp)
{
	const json_t *meta = json_object_get(old, "metadata");
	const json_t *jgp = json_object_get(meta, "deletionGracePeriodSeconds");
	long long s;
	json_t *nobj;
	if (json_object_get(meta, "deletionTimestamp")) {
		long long pending = json_integer_value(jgp);
		if (!json_is_integer(jgp) || pending <= 0)
			return false;
		s = g.given ? (g.seconds < 0 ? 1 : g.seconds) : pending;
		if (s == 0)
			return false;
		if (s >= pending) {
			if (rp)
				reply_dump(rp, 200, old);
			return true;
		}
		/* shorten: the deadline moves back by the difference */
		time_t dts;
		const char *dtext = emu_meta_str(old, "deletionTimestamp");
		if (!dtext || rfc3339_parse(dtext, &dts) < 0)
			dts = time(NULL) + (time_t)pending;
		char ts[RFC3339_BUFLEN];
		rfc3339_format(dts - (time_t)(pending - s), ts, sizeof(ts));
		nobj = json_deep_copy(old);
		json_object_set_new(emu_meta_of(nobj), "deletionTimestamp", json_string(ts));
		json_object_set_new(emu_meta_of(nobj), "deletionGracePeriodSeconds", json_integer(s));
	} else {
		s = pod_grace(old, g);
		if (s == 0)
			return false;
		nobj = mark_deleting(old, s, true);
	}
	const struct emu_event *ev = emu_store_commit(&srv->st, res, key, nobj, EMU_MODIFIED);
	if (rp)
		reply_object(rp, 200, ev->text);
	return true;
}

/*
 * Deletes one stored object (lock held): a scheduled pod is deleted gracefully (above);
 * finalizers make an object pending (deletionTimestamp, grace period 0, 200 with the object, as
 * kube-apiserver answers unless orphanDependents is false); else it goes (200 with the object
 * for the kinds whose registry returns it, else a Success Status). rp may be NULL.
 */
static void delete_object(struct emu_server *srv, int res, const char *key, json_t *old,
			  struct grace g, struct reply *rp)
{
	struct emu_resource *r = &srv->st.res[res];
	json_t *meta = json_object_get(old, "metadata");
	if (emu_is_pod(r) && pod_graceful_delete(srv, res, key, old, g, rp))
		return;
	if (json_array_size(json_object_get(meta, "finalizers")) > 0) {
		json_t *jgp = json_object_get(meta, "deletionGracePeriodSeconds");
		if (json_object_get(meta, "deletionTimestamp") &&
		    (!jgp || json_integer_value(jgp) == 0)) {
			if (rp)
				reply_dump(rp, 200, old);
			return;
		}
		const struct emu_event *ev = emu_store_commit(&srv->st, res, key,
							      mark_deleting(old, 0, false),
							      EMU_MODIFIED);
		if (rp)
			reply_object(rp, 200, ev->text);
		return;
	}
	if (emu_resource_returns_deleted(r)) {
		/* a pod deleted now is answered as deleted with grace period 0 (upstream marks it
		 * first); a graceful one keeps its deletionTimestamp */
		json_t *gone = !emu_is_pod(r) ? json_deep_copy(old)
			       : !json_object_get(meta, "deletionTimestamp") ? mark_deleting(old, 0, true)
										: json_deep_copy(old);
		if (emu_is_pod(r))
			json_object_set_new(emu_meta_of(gone), "deletionGracePeriodSeconds",
					    json_integer(0));
		const struct emu_event *ev = emu_store_commit(&srv->st, res, key, gone, EMU_DELETED);
		if (rp)
			reply_object(rp, 200, ev->text);
		return;
	}
	json_t *d = details_for(r, emu_meta_str(old, "name"));
	json_object_set_new(d, "uid", json_string(emu_meta_str(old, "uid")));
	emu_store_commit(&srv->st, res, key, json_deep_copy(old), EMU_DELETED);
	json_t *s = json_pack("{s:s, s:s, s:{}, s:s, s:o}", "kind", "Status", "apiVersion", "v1",
			      "metadata", "status", "Success", "details", d);
	if (rp) {
		free(rp->text);
		rp->code = 200;
		rp->text = json_dumps(s, JSON_COMPACT);
	}
	json_decref(s);
}

/* ---- namespace termination (what upstream's namespace controller does, done inline) ---- */

static int ns_res(struct emu_server *srv)
{
	return emu_store_resource(&srv->st, "", "v1", "namespaces");
}

bool emu_ns_terminating(struct emu_server *srv, const char *ns)
{
	json_t *o = emu_store_get(&srv->st, ns_res(srv), ns);
	return o && json_object_get(json_object_get(o, "metadata"), "deletionTimestamp");
}

/* Keys of every object in namespace ns of resource res (caller frees). */
static char **ns_keys(struct emu_store *st, int res, const char *ns, size_t *n)
{
	char prefix[300];
	snprintf(prefix, sizeof(prefix), "%s/", ns);
	struct emu_resource *r = &st->res[res];
	char **keys = NULL;
	*n = 0;
	for (size_t i = emu_store_lower_bound(r, prefix);
	     i < r->n && !strncmp(r->items[i].key, prefix, strlen(prefix)); i++) {
		keys = xrealloc(keys, (*n + 1) * sizeof(char *));
		keys[(*n)++] = xstrdup(r->items[i].key);
	}
	return keys;
}

/* A terminating namespace goes once its last object is gone. */
void emu_ns_maybe_finish(struct emu_server *srv, const char *ns)
{
	if (!ns || !emu_ns_terminating(srv, ns))
		return;
	for (size_t i = 0; i < srv->st.nres; i++) {
		size_t n;
		char **keys = srv->st.res[i].namespaced ? ns_keys(&srv->st, (int)i, ns, &n) : NULL;
		for (size_t j = 0; keys && j < n; j++)
			free(keys[j]);
		free(keys);
		if (keys)
			return;
	}
	int res = ns_res(srv);
	char *name = xstrdup(ns); /* ns may point into the object being deleted */
	emu_store_commit(&srv->st, res, name, json_deep_copy(emu_store_get(&srv->st, res, name)),
			 EMU_DELETED);
	free(name);
}

static void ns_delete(struct emu_call *k, const char *name, json_t *old, struct reply *rp)
{
	if (!strcmp(name, "default") || !strcmp(name, "kube-system") ||
	    !strcmp(name, "kube-public")) {
		char msg[512];
		snprintf(msg, sizeof(msg), "namespaces \"%s\" is forbidden: this namespace may not "
			 "be deleted", name);
		reply_status(rp, 403, "Forbidden", msg, details_for(k->r, name));
		return;
	}
	if (emu_ns_terminating(k->srv, name)) {
		reply_dump(rp, 200, old);
		return;
	}
	char ts[RFC3339_BUFLEN];
	emu_now_rfc3339(ts, sizeof(ts));
	json_t *nobj = json_deep_copy(old);
	json_object_set_new(emu_meta_of(nobj), "deletionTimestamp", json_string(ts));
	json_object_set_new(nobj, "status", json_pack("{s:s}", "phase", "Terminating"));
	const struct emu_event *ev = emu_store_commit(&k->srv->st, k->res, name, nobj,
						      EMU_MODIFIED);
	reply_object(rp, 200, ev->text);
	for (size_t i = 0; i < k->srv->st.nres; i++) {
		if (!k->srv->st.res[i].namespaced)
			continue;
		size_t n;
		char **keys = ns_keys(&k->srv->st, (int)i, name, &n);
		for (size_t j = 0; j < n; j++) {
			json_t *o = emu_store_get(&k->srv->st, (int)i, keys[j]);
			if (o)
				delete_object(k->srv, (int)i, keys[j], o, (struct grace){ 0 },
					      NULL);
			free(keys[j]);
		}
		free(keys);
	}
	emu_ns_maybe_finish(k->srv, name);
}

void emu_delete_locked(struct emu_call *k, const char *key, json_t *old, struct reply *rp)
{
	if (k->dry_run) {
		reply_dump(rp, 200, old);
		return;
	}
	if (!strcmp(k->r->plural, "namespaces") && !*k->r->group) {
		ns_delete(k, key, old, rp);
		return;
	}
	char ns[300] = "";
	snprintf(ns, sizeof(ns), "%s", emu_meta_str(old, "namespace") ?: "");
	delete_object(k->srv, k->res, key, old,
		      (struct grace){ .given = k->has_grace, .seconds = k->grace }, rp);
	if (k->r->namespaced)
		emu_ns_maybe_finish(k->srv, ns);
}

enum MHD_Result emu_do_delete(struct emu_call *k)
{
	struct reply rp = { 0 };
	json_t *opts = NULL;
	struct emu_store *st = &k->srv->st;
	if (k->body_len) {
		if (!parse_body(k, &opts, &rp))
			goto out;
		if (!json_is_object(opts)) {
			reply_bad(&rp, "DeleteOptions must be a JSON object");
			goto out;
		}
	}
	if (!emu_delete_options(k, opts, &rp))
		goto out;
	char key[KEY_MAX];
	emu_store_key(k->r, k->ns, k->name, key, sizeof(key));
	pthread_mutex_lock(&st->mu);
	json_t *old = emu_store_get(st, k->res, key);
	if (!old)
		reply_not_found(&rp, k->r, k->name);
	else if (check_preconditions(k, opts, old, &rp))
		emu_delete_locked(k, key, old, &rp);
	pthread_mutex_unlock(&st->mu);
out:
	json_decref(opts);
	return emu_send_reply(k, &rp);
}

bool emu_delete_options(struct emu_call *k, const json_t *opts, struct reply *rp)
{
	const char *q = emu_arg(k, "gracePeriodSeconds");
	if (q) {
		char *end;
		long long v = strtoll(q, &end, 10);
		if (!*q || *end) {
			reply_bad(rp, "gracePeriodSeconds: invalid value \"%.64s\": must be an integer",
				  q);
			return false;
		}
		k->has_grace = true;
		k->grace = v;
	}
	json_t *jg = json_object_get(opts, "gracePeriodSeconds");
	if (jg && !json_is_null(jg)) {
		if (!json_is_integer(jg)) {
			reply_bad(rp, "DeleteOptions.gracePeriodSeconds must be an integer");
			return false;
		}
		k->has_grace = true;
		k->grace = (long long)json_integer_value(jg);
	}
	const char *pp = emu_arg(k, "propagationPolicy");
	json_t *jp = json_object_get(opts, "propagationPolicy");
	if (jp && !json_is_null(jp)) {
		if (!json_is_string(jp)) {
			reply_bad(rp, "DeleteOptions.propagationPolicy must be a string");
			return false;
		}
		pp = json_string_value(jp);
	}
	if (pp && strcmp(pp, "Orphan") && strcmp(pp, "Background") && strcmp(pp, "Foreground")) {
		char detail[256];
		snprintf(detail, sizeof(detail), "Unsupported value: \"%.64s\": supported values: "
			 "\"Foreground\", \"Background\", \"Orphan\", \"nil\"", pp);
		reply_invalid(rp, k->r, k->name, "propagationPolicy", "FieldValueNotSupported",
			      detail);
		return false;
	}
	return true;
}
