/*
 * emu_binding: POST pods/{name}/binding, as the scheduler binds: spec.nodeName is set once (a
 * bound or terminating pod is a 409), the Binding's annotations are copied to the pod and the
 * PodScheduled condition turns True, in one commit under the store lock.
 */
#include <stdio.h>
#include <string.h>

#include "base/timeutil.h"
#include "base/xalloc.h"
#include "emulator/emu_internal.h"
#include "emulator/emu_object.h"
#include "emulator/emu_verbs.h"

#define KEY_MAX 600

/* The PodScheduled condition a bind sets (True), added or updated in status.conditions. */
static void set_pod_scheduled(json_t *pod)
{
	json_t *status = json_object_get(pod, "status");
	if (!json_is_object(status)) {
		status = json_object();
		json_object_set_new(pod, "status", status);
	}
	json_t *conds = json_object_get(status, "conditions");
	if (!json_is_array(conds)) {
		conds = json_array();
		json_object_set_new(status, "conditions", conds);
	}
	char ts[RFC3339_BUFLEN];
	emu_now_rfc3339(ts, sizeof(ts));
	size_t i;
	json_t *c;
	/* the whole condition, as the bind writes it: a reason the scheduler left goes */
	json_t *cond = json_pack("{s:s, s:s, s:n, s:s}", "type", "PodScheduled", "status", "True",
				 "lastProbeTime", "lastTransitionTime", ts);
	json_array_foreach(conds, i, c) {
		const char *t = json_string_value(json_object_get(c, "type"));
		if (json_is_object(c) && t && !strcmp(t, "PodScheduled")) {
			json_array_set_new(conds, i, cond);
			return;
		}
	}
	json_array_append_new(conds, cond);
}

/* 409 Conflict as kube-apiserver words it for this subresource ("pods/binding"). */
static void binding_conflict(struct reply *rp, const char *name, const char *why)
{
	char msg[1400];
	snprintf(msg, sizeof(msg), "Operation cannot be fulfilled on pods/binding \"%s\": %s", name,
		 why);
	reply_status(rp, 409, "Conflict", msg,
		     json_pack("{s:s, s:s}", "name", name, "kind", "pods/binding"));
}

enum MHD_Result emu_do_binding(struct emu_call *k)
{
	struct reply rp = { 0 };
	json_t *b = NULL;
	struct emu_store *st = &k->srv->st;
	if (!parse_body(k, &b, &rp))
		goto out;
	if (!json_is_object(b)) {
		reply_bad(&rp, "the request body must be a JSON Binding object");
		goto out;
	}
	const char *kind = json_string_value(json_object_get(b, "kind"));
	if (kind && strcmp(kind, "Binding")) {
		reply_bad(&rp, "the kind in the data (%s) does not match the expected kind (Binding)",
			  kind);
		goto out;
	}
	const json_t *bmeta = json_object_get(b, "metadata");
	const char *bname = json_string_value(json_object_get(bmeta, "name"));
	const char *bns = json_string_value(json_object_get(bmeta, "namespace"));
	if ((bname && *bname && strcmp(bname, k->name)) || (bns && *bns && strcmp(bns, k->ns))) {
		reply_bad(&rp, "the name or namespace of the Binding (%s/%s) does not match the "
			  "request (%s/%s)", bns ? bns : "", bname ? bname : "", k->ns, k->name);
		goto out;
	}
	const json_t *target = json_object_get(b, "target");
	const char *tkind = json_string_value(json_object_get(target, "kind"));
	const char *node = json_string_value(json_object_get(target, "name"));
	const json_t *ann = json_object_get(bmeta, "annotations");
	if (!node || !*node) {
		reply_invalid(&rp, k->r, k->name, "target.name", "FieldValueRequired",
			      "Required value");
		goto out;
	}
	if (tkind && *tkind && strcmp(tkind, "Node")) {
		reply_invalid(&rp, k->r, k->name, "target.kind", "FieldValueNotSupported",
			      "Unsupported value: must be empty or \"Node\"");
		goto out;
	}
	if (ann && !json_is_null(ann) && !emu_all_strings(ann, true)) {
		reply_bad(&rp, "metadata.annotations must be a map of strings to strings");
		goto out;
	}
	char key[KEY_MAX], why[600];
	emu_store_key(k->r, k->ns, k->name, key, sizeof(key));
	pthread_mutex_lock(&st->mu);
	json_t *pod = emu_store_get(st, k->res, key);
	const char *buid = json_string_value(json_object_get(bmeta, "uid"));
	if (!pod) {
		reply_not_found(&rp, k->r, k->name);
	} else if (buid && *buid && strcmp(buid, emu_meta_str(pod, "uid"))) {
		snprintf(why, sizeof(why), "Precondition failed: UID in precondition: %s, UID in "
			 "object meta: %s", buid, emu_meta_str(pod, "uid"));
		binding_conflict(&rp, k->name, why);
	} else if (json_object_get(json_object_get(pod, "metadata"), "deletionTimestamp")) {
		snprintf(why, sizeof(why), "pod %s is being deleted, cannot be assigned to a host",
			 k->name);
		binding_conflict(&rp, k->name, why);
	} else if (*emu_pod_node(pod)) {
		snprintf(why, sizeof(why), "pod %s is already assigned to node \"%s\"", k->name,
			 emu_pod_node(pod));
		binding_conflict(&rp, k->name, why);
	} else if (k->dry_run) {
		rp.code = 201;
		rp.text = xstrdup("{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
				  "\"status\":\"Success\",\"code\":201}");
	} else {
		json_t *nobj = json_deep_copy(pod);
		json_t *spec = json_object_get(nobj, "spec");
		if (!json_is_object(spec)) {
			spec = json_object();
			json_object_set_new(nobj, "spec", spec);
		}
		json_object_set_new(spec, "nodeName", json_string(node));
		if (json_object_size(ann)) {
			json_t *m = emu_meta_of(nobj), *a = json_object_get(m, "annotations");
			if (!json_is_object(a)) {
				a = json_object();
				json_object_set_new(m, "annotations", a);
			}
			json_object_update(a, (json_t *)ann);
		}
		set_pod_scheduled(nobj);
		emu_store_commit(st, k->res, key, nobj, EMU_MODIFIED);
		rp.code = 201;
		rp.text = xstrdup("{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
				  "\"status\":\"Success\",\"code\":201}");
	}
	pthread_mutex_unlock(&st->mu);
out:
	json_decref(b);
	return emu_send_reply(k, &rp);
}
