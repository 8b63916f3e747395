/*
 * The resizer's decisions as plain functions of records and flags: which claims need what, the
 * size to expand to, which status a step writes, and how a CSI error is classed. Nothing here
 * talks to the API server or the driver, so tests/unit/test_resizer.c states upstream's rules
 * (expandAndRecover, the mark* functions, IsFinalError, modify()) as tables.
 */
#include "resizer/resizer.h"

#include "base/featuregate.h"
#include "kube/jw.h"
#include "kube/quantity.h"

#include <stdio.h>
#include <string.h>

/* ---- feature gates ---- */

/*
 * external-resizer v2.3's own gates (the generic ones are base/featuregate.h's).
 * RecoverVolumeExpansionFailure is not one: v2.3 removed it (its behaviour is the only one), so
 * naming it is "unrecognized feature gate", as upstream.
 */
const struct feature_gate rsz_feature_gates[] = {
	{ "AnnotateFsResize", true, FG_BETA, false },
	{ "VolumeAttributesClass", true, FG_GA, false },
	{ "ReleaseLeaderElectionOnExit", false, FG_ALPHA, false },
};
const size_t rsz_feature_gates_len = sizeof(rsz_feature_gates) / sizeof(rsz_feature_gates[0]);

int rsz_parse_gates(const struct flag_map *m, struct rsz_gates *g, char *err, size_t errlen)
{
	const struct feature_gate *t = rsz_feature_gates;
	size_t n = rsz_feature_gates_len;

	*g = (struct rsz_gates){ .vac = true, .annotate_fs_resize = true };
	if (feature_gates_check(m, t, n, err, errlen))
		return -1;
	g->vac = feature_gate_enabled(m, t, n, "VolumeAttributesClass");
	g->vac_explicit = flag_map_get(m, "VolumeAttributesClass") != NULL;
	g->annotate_fs_resize = feature_gate_enabled(m, t, n, "AnnotateFsResize");
	return 0;
}

/* ---- per-call timeouts ---- */

void rsz_resolve_timeouts(int64_t timeout, bool timeout_given, int64_t resize, int64_t modify,
			  int64_t *resize_out, int64_t *modify_out)
{
	/* Only a --timeout on the command line counts: its default must not hide the others. */
	*resize_out = timeout_given ? timeout : resize;
	*modify_out = timeout_given ? timeout : modify;
}

/* ---- which claims ---- */

bool rsz_claim_needs_resize(const struct kube_pvc *pvc)
{
	if (pvc->phase != KUBE_PVC_BOUND || !pvc->volume_name || !*pvc->volume_name)
		return false;
	/* An absent capacity is zero, as a missing Quantity compares in Go. */
	int64_t cap = pvc->capacity < 0 ? 0 : pvc->capacity;
	return pvc->request > cap;
}

static bool streq(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

enum rsz_skip rsz_can_expand(const struct kube_pvc *pvc, const struct kube_pv *pv,
			     const struct kube_storageclass *sc, const char *driver)
{
	char uid[64];

	if (!pv->driver || strcmp(pv->driver, driver))
		return RSZ_NOT_OURS;
	if (!pv->claim_name || !streq(pv->claim_ns, pvc->meta.ns) ||
	    !streq(pv->claim_uid, kube_obj_uid(&pvc->meta, uid, sizeof(uid))))
		return RSZ_NOT_BOUND_TO;
	if (!sc)
		return RSZ_NO_CLASS;
	if (!sc->allow_expansion)
		return RSZ_NOT_ALLOWED;
	return RSZ_OK;
}

const char *rsz_skip_reason(enum rsz_skip s)
{
	switch (s) {
	case RSZ_OK: return "";
	case RSZ_NOT_OURS: return "Resizer doesn't support PV";
	case RSZ_NOT_BOUND_TO: return "Persistent volume is not bound to PVC being updated";
	case RSZ_NO_CLASS: return "StorageClass of the claim not found";
	case RSZ_NOT_ALLOWED: return "StorageClass does not allow volume expansion";
	}
	return "?";
}

/* ---- the size to expand to ---- */

static int64_t or_zero(int64_t v)
{
	return v < 0 ? 0 : v;
}

/* The PV is smaller than the request: finish an earlier expansion before starting a new one. */
static bool plan_pv_smaller(const struct kube_pvc *pvc, int64_t pv_size,
			    const struct rsz_memory *mem, int64_t *size)
{
	bool have = pvc->allocated >= 0;

	*size = pvc->request;
	switch (pvc->resize_status) {
	case KUBE_RESIZE_NODE_INFEASIBLE:
		if (have)
			*size = pvc->allocated;
		break;
	case KUBE_RESIZE_NODE_PENDING:
	case KUBE_RESIZE_NODE_IN_PROGRESS:
		if (have)
			*size = pvc->allocated;
		/* The node has yet to finish what the PV already holds: no call needed. */
		if (pv_size >= *size)
			return false;
		break;
	case KUBE_RESIZE_CONTROLLER_IN_PROGRESS:
		/* An uncertain earlier call must end first; after a final error the user's new
		 * request wins. */
		if (!mem->final_error && have)
			*size = pvc->allocated;
		break;
	default:
		break;
	}
	return true;
}

/* The PV already holds the request: resume what the API objects do not show yet. */
static bool plan_pv_larger(const struct kube_pvc *pvc, const struct rsz_memory *mem,
			   bool controller_expand, int64_t *size)
{
	bool have = pvc->allocated >= 0;

	(void)mem;
	*size = pvc->request;
	switch (pvc->resize_status) {
	case KUBE_RESIZE_NODE_IN_PROGRESS:
	case KUBE_RESIZE_NODE_PENDING:
		return false;
	case KUBE_RESIZE_NODE_INFEASIBLE:
		if (controller_expand && have)
			*size = pvc->allocated;
		break;
	case KUBE_RESIZE_CONTROLLER_IN_PROGRESS:
	case KUBE_RESIZE_CONTROLLER_INFEASIBLE:
		if (have)
			*size = pvc->allocated;
		break;
	default:
		if (have)
			*size = pvc->allocated;
		else if (pvc->conds & KUBE_PVC_FS_RESIZE_PENDING)
			return false;
		break;
	}
	return true;
}

struct rsz_plan rsz_plan_recover(const struct kube_pvc *pvc, const struct kube_pv *pv,
				 const struct rsz_memory *mem, bool controller_expand)
{
	struct rsz_plan p = { .action = RSZ_EXPAND, .update_status = true };
	int64_t pv_size = or_zero(pv->capacity);
	bool go = pv_size < pvc->request ? plan_pv_smaller(pvc, pv_size, mem, &p.new_size)
					 : plan_pv_larger(pvc, mem, controller_expand, &p.new_size);

	if (!go)
		return (struct rsz_plan){ .action = RSZ_NOTHING };
	/* Expanding to the size already recorded: no status change, unless it was infeasible
	 * lately, which waits out the slow set. */
	if (pvc->allocated >= 0 && pvc->allocated == p.new_size) {
		if (mem->slow)
			return (struct rsz_plan){ .action = RSZ_DELAY, .new_size = p.new_size };
		p.update_status = false;
	}
	return p;
}

bool rsz_pre_resize_ann_done(const struct kube_pvc *pvc, const struct kube_pv *pv)
{
	/* Absent quantities compare as zero, as Go's zero Quantity. */
	return pv->pre_resize_capacity && or_zero(pvc->capacity) >= or_zero(pv->capacity);
}

/* ---- CSI errors ---- */

enum { CODE_CANCELLED = 1, CODE_INVALID_ARGUMENT = 3, CODE_DEADLINE_EXCEEDED = 4,
       CODE_NOT_FOUND = 5, CODE_RESOURCE_EXHAUSTED = 8, CODE_FAILED_PRECONDITION = 9,
       CODE_ABORTED = 10, CODE_OUT_OF_RANGE = 11, CODE_UNAVAILABLE = 14 };

bool rsz_is_final(int code)
{
	switch (code) {
	case RSZ_NOT_GRPC: /* failed before the driver was asked: it may still be busy */
	case CODE_CANCELLED:
	case CODE_DEADLINE_EXCEEDED:
	case CODE_UNAVAILABLE:
	case CODE_RESOURCE_EXHAUSTED:
	case CODE_ABORTED:
		return false;
	default:
		return true;
	}
}

bool rsz_is_infeasible(int code)
{
	return code == CODE_INVALID_ARGUMENT || code == CODE_OUT_OF_RANGE || code == CODE_NOT_FOUND;
}

bool rsz_is_inuse(int code)
{
	return code == CODE_FAILED_PRECONDITION;
}

enum rsz_failure rsz_classify_failure(int code)
{
	if (!rsz_is_final(code))
		return RSZ_FAIL_RETRY;
	return rsz_is_infeasible(code) ? RSZ_FAIL_INFEASIBLE : RSZ_FAIL_FINAL;
}

/* ---- status patches ---- */

static const char *const cond_names[6] = { "Resizing", "FileSystemResizePending",
	"ControllerResizeError", "NodeResizeError", "ModifyingVolume", "ModifyVolumeError" };
static const char *const resize_names[] = { "", "ControllerResizeInProgress",
	"ControllerResizeInfeasible", "NodeResizePending", "NodeResizeInProgress",
	"NodeResizeInfeasible" };
static const char *const modify_names[] = { "", "Pending", "InProgress", "Infeasible" };

#define RESIZE_CONDS (KUBE_PVC_RESIZING | KUBE_PVC_FS_RESIZE_PENDING | \
		      KUBE_PVC_CONTROLLER_RESIZE_ERROR | KUBE_PVC_NODE_RESIZE_ERROR)
#define MODIFY_CONDS (KUBE_PVC_MODIFYING_VOLUME | KUBE_PVC_MODIFY_VOLUME_ERROR)

static void add_conditions(struct jw *w, const struct rsz_patch *p, const char *now)
{
	jw_key(w, "conditions");
	if (p->conds_null) {
		jw_null(w);
		return;
	}
	jw_begin_array(w);
	for (unsigned i = 0; i < 6; i++) {
		unsigned bit = 1u << i;
		if (!((p->cond_set | p->cond_drop) & bit))
			continue;
		jw_begin_object(w);
		jw_kv_str(w, "type", cond_names[i]);
		if (p->cond_set & bit) {
			jw_kv_str(w, "status", "True");
			if (p->probe_time)
				jw_kv_str(w, "lastProbeTime", now);
			jw_kv_str(w, "lastTransitionTime", now);
			if (p->reasons[i])
				jw_kv_str(w, "reason", p->reasons[i]);
			if (p->messages[i])
				jw_kv_str(w, "message", p->messages[i]);
		} else {
			jw_kv_str(w, "$patch", "delete");
		}
		jw_end_object(w);
	}
	jw_end_array(w);
}

static void add_quantity(struct jw *w, const char *map, int64_t bytes)
{
	char q[64];

	kube_quantity_format(bytes, true, q, sizeof(q));
	jw_key(w, map);
	jw_begin_object(w);
	jw_kv_str(w, "storage", q);
	jw_end_object(w);
}

static void add_modify_status(struct jw *w, const struct rsz_patch *p)
{
	jw_key(w, "modifyVolumeStatus");
	if (p->modify_status == KUBE_MODIFY_NONE) {
		jw_null(w);
		return;
	}
	jw_begin_object(w);
	jw_kv_str(w, "status", modify_names[p->modify_status]);
	if (p->modify_target)
		jw_kv_str(w, "targetVolumeAttributesClassName", p->modify_target);
	jw_end_object(w);
}

void rsz_patch_json(const struct rsz_patch *p, const char *now, struct strbuf *out)
{
	struct jw w = JW_INIT(out);

	jw_begin_object(&w);
	if (p->rv || p->not_required_ann) {
		jw_key(&w, "metadata");
		jw_begin_object(&w);
		if (p->not_required_ann) {
			jw_key(&w, "annotations");
			jw_begin_object(&w);
			jw_kv_str(&w, RSZ_ANN_NODE_EXPANSION_NOT_REQUIRED, "true");
			jw_end_object(&w);
		}
		if (p->rv)
			jw_kv_str(&w, "resourceVersion", p->rv);
		jw_end_object(&w);
	}
	jw_key(&w, "status");
	jw_begin_object(&w);
	if (p->capacity >= 0)
		add_quantity(&w, "capacity", p->capacity);
	if (p->allocated >= 0)
		add_quantity(&w, "allocatedResources", p->allocated);
	if (p->resize_status >= 0) {
		jw_key(&w, "allocatedResourceStatuses");
		jw_begin_object(&w);
		if (p->resize_status == KUBE_RESIZE_NONE) {
			jw_key(&w, "storage");
			jw_null(&w);
		} else {
			jw_kv_str(&w, "storage", resize_names[p->resize_status]);
		}
		jw_end_object(&w);
	}
	if (p->cond_set | p->cond_drop || p->conds_null)
		add_conditions(&w, p, now);
	if (p->modify_status >= 0)
		add_modify_status(&w, p);
	if (p->current_vac)
		jw_kv_str(&w, "currentVolumeAttributesClassName", p->current_vac);
	jw_end_object(&w);
	jw_end_object(&w);
}

static int cond_index(unsigned bit)
{
	for (int i = 0; i < 6; i++)
		if (bit == 1u << i)
			return i;
	return 0;
}

/* MergeResizeConditionsOfPVC: the new ones replace their type; without keep_old every other
 * resize condition goes. */
static void merge_resize(struct rsz_patch *p, unsigned set, bool keep_old)
{
	p->cond_set = set;
	p->cond_drop = keep_old ? 0 : (RESIZE_CONDS & ~set);
}

struct rsz_patch rsz_mark_in_progress(const struct kube_pvc *pvc, const struct rsz_plan *plan)
{
	struct rsz_patch p = RSZ_PATCH_INIT;

	p.rv = pvc->meta.rv;
	merge_resize(&p, KUBE_PVC_RESIZING, !plan->update_status);
	if (plan->update_status)
		p.resize_status = KUBE_RESIZE_CONTROLLER_IN_PROGRESS;
	p.allocated = plan->new_size;
	return p;
}

struct rsz_patch rsz_mark_node_pending(const struct kube_pvc *pvc)
{
	struct rsz_patch p = RSZ_PATCH_INIT;

	p.rv = pvc->meta.rv;
	/* The other resize conditions (Resizing) stay, as upstream's markForPendingNodeExpansion
	 * keeps them. */
	merge_resize(&p, KUBE_PVC_FS_RESIZE_PENDING, true);
	p.messages[cond_index(KUBE_PVC_FS_RESIZE_PENDING)] = RSZ_FS_PENDING_MESSAGE;
	p.resize_status = KUBE_RESIZE_NODE_PENDING;
	return p;
}

struct rsz_patch rsz_mark_failed(const struct kube_pvc *pvc, bool infeasible, const char *error,
				 char *buf, size_t buflen)
{
	struct rsz_patch p = RSZ_PATCH_INIT;

	(void)pvc;
	/* No resourceVersion: the failure must be recorded even over a slightly newer claim. */
	snprintf(buf, buflen, "failed to expand pvc with %s", error);
	merge_resize(&p, KUBE_PVC_CONTROLLER_RESIZE_ERROR, true);
	p.messages[cond_index(KUBE_PVC_CONTROLLER_RESIZE_ERROR)] = buf;
	if (infeasible)
		p.resize_status = KUBE_RESIZE_CONTROLLER_INFEASIBLE;
	return p;
}

struct rsz_patch rsz_mark_finished(const struct kube_pvc *pvc, int64_t new_size)
{
	struct rsz_patch p = RSZ_PATCH_INIT;

	p.rv = pvc->meta.rv;
	p.capacity = new_size;
	merge_resize(&p, 0, false);
	p.resize_status = KUBE_RESIZE_NONE;
	p.not_required_ann = true;
	return p;
}

/* ---- secrets ---- */

/* DNS-1123 label: [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63 characters. */
static bool dns1123_label(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return false;
	return true;
}

/* os.Expand over ${name} and $name with the given variables; an unknown one is an error. */
static int expand(const char *field, const char *tmpl, const struct kube_kv *vars, size_t nvars,
		  char *out, size_t outlen, char *err, size_t errlen)
{
	struct strbuf sb = STRBUF_INIT;
	int rc = 0;

	for (const char *p = tmpl; *p && !rc;) {
		if (*p != '$') {
			strbuf_addch(&sb, *p++);
			continue;
		}
		const char *name = p + 1;
		size_t len;
		if (*name == '{') {
			name++;
			len = strcspn(name, "}");
			p = name + len + (name[len] ? 1 : 0);
		} else {
			len = 0;
			while (name[len] && (name[len] == '_' || (name[len] >= 'a' && name[len] <= 'z') ||
					     (name[len] >= 'A' && name[len] <= 'Z') ||
					     (name[len] >= '0' && name[len] <= '9')))
				len++;
			p = name + len;
		}
		size_t i;
		for (i = 0; i < nvars; i++)
			if (strlen(vars[i].key) == len && !strncmp(vars[i].key, name, len))
				break;
		if (i == nvars) {
			snprintf(err, errlen, "error resolving secret %s \"%s\": invalid tokens: [\"%.*s\"]",
				 field, tmpl, (int)len, name);
			rc = -1;
		} else {
			strbuf_addstr(&sb, vars[i].value);
		}
	}
	if (!rc && !dns1123_label(sb.buf ? sb.buf : "")) {
		if (strcmp(tmpl, sb.buf ? sb.buf : ""))
			snprintf(err, errlen, "\"%s\" resolved to \"%s\" which is not a valid %s name", tmpl,
				 sb.buf ? sb.buf : "", field);
		else
			snprintf(err, errlen, "\"%s\" is not a valid %s name", tmpl, field);
		rc = -1;
	}
	if (!rc)
		snprintf(out, outlen, "%s", sb.buf);
	strbuf_release(&sb);
	return rc;
}

static const char *param(const struct kube_storageclass *sc, const char *key)
{
	for (uint16_t i = 0; sc && i < sc->nparameters; i++)
		if (!strcmp(sc->parameters[i].key, key))
			return sc->parameters[i].value;
	return NULL;
}

int rsz_secret_ref(const struct kube_pv *pv, const struct kube_pvc *pvc,
		   const struct kube_storageclass *sc, struct rsz_secret_ref *ref, char *err,
		   size_t errlen)
{
	memset(ref, 0, sizeof(*ref));
	if (pv->expand_secret_name && *pv->expand_secret_name) {
		ref->set = true;
		snprintf(ref->name, sizeof(ref->name), "%s", pv->expand_secret_name);
		snprintf(ref->ns, sizeof(ref->ns), "%s", pv->expand_secret_ns ? pv->expand_secret_ns : "");
		return 0;
	}
	const char *name = param(sc, RSZ_PARAM_SECRET_NAME), *ns = param(sc, RSZ_PARAM_SECRET_NS);
	if (!name && !ns)
		return 0;
	if (!name || !ns || !*name || !*ns) {
		snprintf(err, errlen, "%s and %s must both be set in StorageClass %s",
			 RSZ_PARAM_SECRET_NAME, RSZ_PARAM_SECRET_NS, sc->meta.name);
		return -1;
	}
	struct kube_kv vars[] = { { "pv.name", pv->meta.name }, { "pvc.namespace", pvc->meta.ns },
				  { "pvc.name", pvc->meta.name } };
	if (expand("namespace", ns, vars, 2, ref->ns, sizeof(ref->ns), err, errlen) ||
	    expand("name", name, vars, 3, ref->name, sizeof(ref->name), err, errlen))
		return -1;
	ref->set = true;
	return 0;
}

/* ---- VolumeAttributesClass modification ---- */

static const char *or_empty(const char *s)
{
	return s ? s : "";
}

bool rsz_modify_targets_spec(const struct kube_pvc *pvc)
{
	return pvc->modify_status != KUBE_MODIFY_NONE && pvc->vac_name &&
	       !strcmp(or_empty(pvc->modify_target), pvc->vac_name);
}

enum rsz_modify_action rsz_plan_modify(const struct kube_pvc *pvc,
				       const struct rsz_modify_memory *mem)
{
	const char *want = or_empty(pvc->vac_name), *cur = or_empty(pvc->current_vac);
	bool in_progress = pvc->modify_status == KUBE_MODIFY_IN_PROGRESS;

	if (mem->slow)
		return RSZ_MODIFY_DELAY;
	if (pvc->modify_status == KUBE_MODIFY_NONE && !strcmp(want, cur))
		return RSZ_MODIFY_NOTHING;
	/* The user took the class out of the spec: stay where we are (the API server refuses an
	 * empty class once a current one is set, so this is a claim that never got one). */
	if (!*want && !in_progress)
		return RSZ_MODIFY_ROLLED_BACK;
	/* A call that may still run in the driver must end before the target may change; a
	 * status written by someone else is a new target, as if it were not uncertain. */
	if ((in_progress && mem->uncertain) || !*want)
		return RSZ_MODIFY_CONTINUE;
	return RSZ_MODIFY_START;
}

struct rsz_patch rsz_mark_modify(const struct kube_pvc *pvc, int status, const char *target,
				 int code, const char *message, bool final, char *buf, size_t buflen)
{
	struct rsz_patch p = RSZ_PATCH_INIT;
	bool err = code >= 0;

	p.rv = err ? NULL : pvc->meta.rv; /* after an InProgress write the claim is newer */
	p.modify_status = status;
	p.modify_target = err ? target : or_empty(pvc->vac_name);
	if (status == KUBE_MODIFY_PENDING)
		return p; /* conditions stay as they are */
	if (!err)
		snprintf(buf, buflen, "Modifying volume to \"%s\" is in progress.", p.modify_target);
	else if (final)
		snprintf(buf, buflen, "Modifying volume to \"%s\" failed. Waiting for retry.",
			 or_empty(p.modify_target));
	else
		snprintf(buf, buflen, "Modifying volume to \"%s\" is still in progress.",
			 or_empty(p.modify_target));
	/* MergePVCConditions: the conditions written replace their type, the others stay. */
	p.probe_time = true;
	p.cond_set = KUBE_PVC_MODIFYING_VOLUME;
	p.messages[cond_index(KUBE_PVC_MODIFYING_VOLUME)] = buf;
	if (err) {
		p.cond_set |= KUBE_PVC_MODIFY_VOLUME_ERROR;
		p.reasons[cond_index(KUBE_PVC_MODIFY_VOLUME_ERROR)] = csi_code_go_name(code);
		p.messages[cond_index(KUBE_PVC_MODIFY_VOLUME_ERROR)] = message;
	}
	return p;
}

struct rsz_patch rsz_mark_modify_done(const struct kube_pvc *pvc, const char *target)
{
	struct rsz_patch p = RSZ_PATCH_INIT;

	p.modify_status = KUBE_MODIFY_NONE;
	p.current_vac = target;
	p.cond_drop = MODIFY_CONDS;
	p.conds_null = !pvc->other_conds;
	return p;
}

struct rsz_patch rsz_mark_rolled_back(const struct kube_pvc *pvc)
{
	struct rsz_patch p = RSZ_PATCH_INIT;

	p.cond_drop = KUBE_PVC_MODIFYING_VOLUME;
	p.conds_null = !pvc->other_conds && !(pvc->conds & KUBE_PVC_MODIFY_VOLUME_ERROR);
	return p;
}
