/*
 * test_resizer: csi-resizer's decisions (src/resizer/decide.c) as tables that read like
 * upstream's rules: which claims are taken, the size expandAndRecover picks from the PV, the
 * request, allocatedResources and allocatedResourceStatuses, how CSI errors are classed, the
 * status patches each step writes, the controller-expand secret, the modify decisions, and the
 * flags v2.3 added or changed (gates, --resize-timeout / --modify-timeout against --timeout).
 */
#include "check.h"
#include "resizer/resizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GI (1024LL * 1024 * 1024)
#define UID "11111111-2222-3333-4444-555555555555"

static struct kube_obj *decode(const struct kube_kind *k, const char *json)
{
	char err[256];
	struct kube_obj *o = kube_decode_text(k, json, strlen(json), err, sizeof(err));
	if (!o)
		fprintf(stderr, "decode failed: %s: %s\n", err, json);
	return o;
}

/* A bound claim of `req` Gi with status capacity `cap` Gi (-1: none), allocated `alloc` Gi
 * (-1: none), an allocatedResourceStatuses value and extra status JSON. */
static struct kube_obj *claim(int req, int cap, int alloc, const char *rstatus, const char *extra)
{
	char js[2048], caps[64] = "", allocs[96] = "", rs[128] = "";
	if (cap >= 0)
		snprintf(caps, sizeof(caps), ",\"capacity\":{\"storage\":\"%dGi\"}", cap);
	if (alloc >= 0)
		snprintf(allocs, sizeof(allocs), ",\"allocatedResources\":{\"storage\":\"%dGi\"}", alloc);
	if (rstatus)
		snprintf(rs, sizeof(rs), ",\"allocatedResourceStatuses\":{\"storage\":\"%s\"}", rstatus);
	snprintf(js, sizeof(js),
		 "{\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\",\"uid\":\"" UID "\",\"resourceVersion\":\"7\"},"
		 "\"spec\":{\"storageClassName\":\"fast\",\"volumeName\":\"pv1\",\"accessModes\":[\"ReadWriteOnce\"],"
		 "\"resources\":{\"requests\":{\"storage\":\"%dGi\"}}},"
		 "\"status\":{\"phase\":\"Bound\"%s%s%s%s}}", req, caps, allocs, rs, extra ? extra : "");
	return decode(&KUBE_KIND_PERSISTENTVOLUMECLAIM, js);
}

static struct kube_obj *volume(int size, const char *driver, const char *claim_uid, const char *extra)
{
	char js[2048];
	snprintf(js, sizeof(js),
		 "{\"metadata\":{\"name\":\"pv1\"},\"spec\":{\"capacity\":{\"storage\":\"%dGi\"},"
		 "\"csi\":{\"driver\":\"%s\",\"volumeHandle\":\"h1\"%s},"
		 "\"claimRef\":{\"namespace\":\"ns\",\"name\":\"c\",\"uid\":\"%s\"}}}",
		 size, driver, extra ? extra : "", claim_uid);
	return decode(&KUBE_KIND_PERSISTENTVOLUME, js);
}

static struct kube_obj *class_(bool allow, const char *params)
{
	char js[1024];
	snprintf(js, sizeof(js), "{\"metadata\":{\"name\":\"fast\"},\"provisioner\":\"d\","
		 "\"allowVolumeExpansion\":%s,\"parameters\":{%s}}", allow ? "true" : "false",
		 params ? params : "");
	return decode(&KUBE_KIND_STORAGECLASS, js);
}

/* ---- which claims ---- */

static void test_needs_resize(void)
{
	static const struct { int req, cap; const char *phase; bool want; } t[] = {
		{ 2, 1, "Bound", true },    /* request above capacity */
		{ 1, 1, "Bound", false },   /* equal: done */
		{ 1, 2, "Bound", false },   /* below: never shrinks */
		{ 2, -1, "Bound", true },   /* no capacity yet counts as zero */
		{ 2, 1, "Pending", false }, /* only bound claims */
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		char js[1024], cap[64] = "";
		if (t[i].cap >= 0)
			snprintf(cap, sizeof(cap), ",\"capacity\":{\"storage\":\"%dGi\"}", t[i].cap);
		snprintf(js, sizeof(js),
			 "{\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\"},\"spec\":{\"volumeName\":\"pv1\","
			 "\"resources\":{\"requests\":{\"storage\":\"%dGi\"}}},\"status\":{\"phase\":\"%s\"%s}}",
			 t[i].req, t[i].phase, cap);
		struct kube_obj *o = decode(&KUBE_KIND_PERSISTENTVOLUMECLAIM, js);
		CHECK(rsz_claim_needs_resize(kube_pvc_of(o)) == t[i].want);
		kube_obj_unref(o);
	}
}

static void test_can_expand(void)
{
	static const struct { const char *driver, *uid; int cls; enum rsz_skip want; } t[] = {
		{ "d", UID, 1, RSZ_OK },
		{ "other", UID, 1, RSZ_NOT_OURS },                  /* another driver's volume */
		{ "d", "99999999-2222-3333-4444-555555555555", 1, RSZ_NOT_BOUND_TO },
		{ "d", UID, 0, RSZ_NO_CLASS },                      /* class gone */
		{ "d", UID, 2, RSZ_NOT_ALLOWED },                   /* allowVolumeExpansion unset */
	};
	struct kube_obj *c = claim(2, 1, -1, NULL, NULL);
	struct kube_obj *yes = class_(true, NULL), *no = class_(false, NULL);
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct kube_obj *v = volume(1, t[i].driver, t[i].uid, NULL);
		const struct kube_storageclass *sc = t[i].cls == 1 ? kube_storageclass_of(yes)
						     : t[i].cls == 2 ? kube_storageclass_of(no) : NULL;
		CHECK_INT(rsz_can_expand(kube_pvc_of(c), kube_pv_of(v), sc, "d"), t[i].want);
		kube_obj_unref(v);
	}
	kube_obj_unref(c);
	kube_obj_unref(yes);
	kube_obj_unref(no);
}

/* ---- expandAndRecover ---- */

static void test_plan_recover(void)
{
	static const struct {
		const char *what;
		int req, cap, alloc, pv;
		const char *status;
		bool fs_pending, final, slow, ctrl;
		enum rsz_action action;
		int size;
		bool update;
	} t[] = {
		{ "first expansion: to the request, status written",
		  2, 1, -1, 1, NULL, false, false, false, true, RSZ_EXPAND, 2, true },
		{ "uncertain earlier call: finish the allocated size first",
		  3, 1, 2, 1, "ControllerResizeInProgress", false, false, false, true, RSZ_EXPAND, 2, false },
		{ "after a final error the new request wins",
		  3, 1, 2, 1, "ControllerResizeInProgress", false, true, false, true, RSZ_EXPAND, 3, true },
		{ "infeasible, user lowered the request: recover to it",
		  3, 1, 100, 1, "ControllerResizeInfeasible", false, true, true, true, RSZ_EXPAND, 3, true },
		{ "infeasible, same size again within the slow set: wait",
		  100, 1, 100, 1, "ControllerResizeInfeasible", false, true, true, true, RSZ_DELAY, 100, false },
		{ "infeasible, same size after the slow set: retry without a new status",
		  100, 1, 100, 1, "ControllerResizeInfeasible", false, true, false, true, RSZ_EXPAND, 100, false },
		{ "node pending and the PV holds it: no call",
		  2, 1, 2, 2, "NodeResizePending", true, false, false, true, RSZ_NOTHING, 0, false },
		{ "node pending, larger request: PV smaller than allocated? no, finish allocated",
		  3, 1, 2, 2, "NodeResizePending", true, false, false, true, RSZ_NOTHING, 0, false },
		{ "node pending, PV smaller than allocated: expand to allocated",
		  3, 1, 2, 1, "NodeResizePending", true, false, false, true, RSZ_EXPAND, 2, false },
		{ "PV expanded but status not recorded: resume at allocated",
		  2, 1, 2, 2, "ControllerResizeInProgress", false, false, false, true, RSZ_EXPAND, 2, false },
		{ "node infeasible with controller expansion: allocated",
		  2, 1, 3, 3, "NodeResizeInfeasible", false, false, false, true, RSZ_EXPAND, 3, false },
		{ "node infeasible without controller expansion: the request",
		  2, 1, 3, 3, "NodeResizeInfeasible", false, false, false, false, RSZ_EXPAND, 2, true },
		{ "old API server (no status), FileSystemResizePending: nothing",
		  2, 1, -1, 2, NULL, true, false, false, true, RSZ_NOTHING, 0, false },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		const char *fs = t[i].fs_pending
			? ",\"conditions\":[{\"type\":\"FileSystemResizePending\",\"status\":\"True\"}]" : NULL;
		struct kube_obj *c = claim(t[i].req, t[i].cap, t[i].alloc, t[i].status, fs);
		struct kube_obj *v = volume(t[i].pv, "d", UID, NULL);
		struct rsz_memory mem = { .final_error = t[i].final, .slow = t[i].slow };
		struct rsz_plan p = rsz_plan_recover(kube_pvc_of(c), kube_pv_of(v), &mem, t[i].ctrl);
		if (p.action != t[i].action || (p.action == RSZ_EXPAND &&
		    (p.new_size != t[i].size * GI || p.update_status != t[i].update)))
			fprintf(stderr, "case %zu (%s): action %d size %lld update %d\n", i, t[i].what,
				p.action, (long long)p.new_size, p.update_status);
		CHECK_INT(p.action, t[i].action);
		if (t[i].action == RSZ_EXPAND) {
			CHECK_INT(p.new_size, t[i].size * GI);
			CHECK(p.update_status == t[i].update);
		}
		kube_obj_unref(c);
		kube_obj_unref(v);
	}
}

/* AnnotateFsResize: when the PV's pre-resize-capacity annotation has served its purpose. */
static void test_pre_resize_ann(void)
{
	static const struct { const char *what; int pv, cap; bool annotated, drop; } t[] = {
		{ "node still to expand (claim 1Gi, PV 2Gi): the annotation stays", 2, 1, true, false },
		{ "node done (claim reached the PV's 2Gi): it goes", 2, 2, true, true },
		{ "claim above the PV (bound anew, larger): it goes", 2, 3, true, true },
		{ "claim without status.capacity (zero): it stays", 2, -1, true, false },
		{ "no annotation: nothing to remove", 2, 2, false, false },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		char js[512];
		snprintf(js, sizeof(js), "{\"metadata\":{\"name\":\"pv1\"%s},"
			 "\"spec\":{\"capacity\":{\"storage\":\"%dGi\"}}}",
			 t[i].annotated ? ",\"annotations\":{\"" RSZ_ANN_PRE_RESIZE_CAPACITY "\":\"1Gi\"}"
					: "", t[i].pv);
		struct kube_obj *v = decode(&KUBE_KIND_PERSISTENTVOLUME, js);
		struct kube_obj *c = claim(3, t[i].cap, -1, NULL, NULL);
		bool drop = rsz_pre_resize_ann_done(kube_pvc_of(c), kube_pv_of(v));
		if (drop != t[i].drop)
			fprintf(stderr, "pre-resize annotation: %s\n", t[i].what);
		CHECK(drop == t[i].drop);
		if (t[i].annotated)
			CHECK_STR(kube_pv_of(v)->pre_resize_capacity, "1Gi");
		else
			CHECK(kube_pv_of(v)->pre_resize_capacity == NULL);
		kube_obj_unref(c);
		kube_obj_unref(v);
	}
}

/* ---- CSI errors ---- */

static void test_errors(void)
{
	static const struct { int code; enum rsz_failure want; bool inuse; } t[] = {
		{ 3, RSZ_FAIL_INFEASIBLE, false },  /* InvalidArgument */
		{ 11, RSZ_FAIL_INFEASIBLE, false }, /* OutOfRange: above the driver's maximum */
		{ 5, RSZ_FAIL_INFEASIBLE, false },  /* NotFound */
		{ 9, RSZ_FAIL_FINAL, true },        /* FailedPrecondition: in use */
		{ 2, RSZ_FAIL_FINAL, false },       /* Unknown */
		{ 12, RSZ_FAIL_FINAL, false },      /* Unimplemented */
		{ 4, RSZ_FAIL_RETRY, false },       /* DeadlineExceeded: may be in progress */
		{ 14, RSZ_FAIL_RETRY, false },      /* Unavailable: driver gone */
		{ 10, RSZ_FAIL_RETRY, false },      /* Aborted */
		{ 8, RSZ_FAIL_RETRY, false },       /* ResourceExhausted */
		{ 1, RSZ_FAIL_RETRY, false },       /* Canceled */
		{ RSZ_NOT_GRPC, RSZ_FAIL_RETRY, false }, /* secret not found: before the driver */
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		CHECK_INT(rsz_classify_failure(t[i].code), t[i].want);
		CHECK(rsz_is_inuse(t[i].code) == t[i].inuse);
	}
}

/* ---- status patches ---- */

static char *patch_text(const struct rsz_patch *p)
{
	struct strbuf sb = STRBUF_INIT;
	rsz_patch_json(p, "2026-01-01T00:00:00Z", &sb);
	return strbuf_detach(&sb, NULL);
}

static void test_patches(void)
{
	struct kube_obj *c = claim(2, 1, -1, NULL, NULL);
	const struct kube_pvc *pvc = kube_pvc_of(c);
	struct rsz_plan plan = { RSZ_EXPAND, 2 * GI, true };
	char buf[300];
	static const char *const res_drop =
		"{\"type\":\"FileSystemResizePending\",\"$patch\":\"delete\"},"
		"{\"type\":\"ControllerResizeError\",\"$patch\":\"delete\"},"
		"{\"type\":\"NodeResizeError\",\"$patch\":\"delete\"}";
	struct { const char *what; struct rsz_patch p; char want[1200]; } t[6];
	size_t n = 0;

	t[n].what = "in progress: Resizing, allocated size and status, resourceVersion check";
	t[n].p = rsz_mark_in_progress(pvc, &plan);
	snprintf(t[n++].want, sizeof(t[0].want),
		 "{\"metadata\":{\"resourceVersion\":\"7\"},\"status\":{\"allocatedResources\":{\"storage\":\"2Gi\"},"
		 "\"allocatedResourceStatuses\":{\"storage\":\"ControllerResizeInProgress\"},\"conditions\":["
		 "{\"type\":\"Resizing\",\"status\":\"True\",\"lastTransitionTime\":\"2026-01-01T00:00:00Z\"},%s]}}",
		 res_drop);
	t[n].what = "node pending: FileSystemResizePending with upstream's message, NodeResizePending";
	t[n].p = rsz_mark_node_pending(pvc);
	t[n].p.rv = NULL;
	snprintf(t[n++].want, sizeof(t[0].want),
		 "{\"status\":{\"allocatedResourceStatuses\":{\"storage\":\"NodeResizePending\"},\"conditions\":["
		 "{\"type\":\"FileSystemResizePending\",\"status\":\"True\",\"lastTransitionTime\":\"2026-01-01T00:00:00Z\","
		 "\"message\":\"" RSZ_FS_PENDING_MESSAGE "\"}]}}");
	t[n].what = "infeasible: ControllerResizeInfeasible and ControllerResizeError, no version check";
	t[n].p = rsz_mark_failed(pvc, true, "rpc error: code = OutOfRange desc = too big", buf, sizeof(buf));
	snprintf(t[n++].want, sizeof(t[0].want),
		 "{\"status\":{\"allocatedResourceStatuses\":{\"storage\":\"ControllerResizeInfeasible\"},\"conditions\":["
		 "{\"type\":\"ControllerResizeError\",\"status\":\"True\",\"lastTransitionTime\":\"2026-01-01T00:00:00Z\","
		 "\"message\":\"failed to expand pvc with rpc error: code = OutOfRange desc = too big\"}]}}");
	t[n].what = "finished without node expansion: capacity, status removed, resize conditions gone";
	t[n].p = rsz_mark_finished(pvc, 2 * GI);
	snprintf(t[n++].want, sizeof(t[0].want),
		 "{\"metadata\":{\"annotations\":{\"" RSZ_ANN_NODE_EXPANSION_NOT_REQUIRED "\":\"true\"},"
		 "\"resourceVersion\":\"7\"},\"status\":{\"capacity\":{\"storage\":\"2Gi\"},"
		 "\"allocatedResourceStatuses\":{\"storage\":null},\"conditions\":["
		 "{\"type\":\"Resizing\",\"$patch\":\"delete\"},%s]}}", res_drop);
	for (size_t i = 0; i < n; i++) {
		char *got = patch_text(&t[i].p);
		if (strcmp(got, t[i].want))
			fprintf(stderr, "%s\n got %s\nwant %s\n", t[i].what, got, t[i].want);
		CHECK_STR(got, t[i].want);
		free(got);
	}
	kube_obj_unref(c);
}

/* ---- secrets ---- */

static void test_secrets(void)
{
	static const struct {
		const char *pv_extra, *params, *name, *ns, *err;
	} t[] = {
		{ ",\"controllerExpandSecretRef\":{\"name\":\"s\",\"namespace\":\"kube-system\"}",
		  "\"csi.storage.k8s.io/controller-expand-secret-name\":\"other\","
		  "\"csi.storage.k8s.io/controller-expand-secret-namespace\":\"x\"",
		  "s", "kube-system", NULL },   /* the PV's reference wins, as upstream v2 */
		{ NULL, "\"csi.storage.k8s.io/controller-expand-secret-name\":\"${pvc.name}-key\","
		  "\"csi.storage.k8s.io/controller-expand-secret-namespace\":\"${pvc.namespace}\"",
		  "c-key", "ns", NULL },        /* templates from the class */
		{ NULL, "\"csi.storage.k8s.io/controller-expand-secret-name\":\"$pv.name\","
		  "\"csi.storage.k8s.io/controller-expand-secret-namespace\":\"static\"",
		  NULL, NULL, "invalid tokens" },  /* $pv stops at the dot: unknown */
		{ NULL, "\"csi.storage.k8s.io/controller-expand-secret-name\":\"s\"",
		  NULL, NULL, "must both be set" },
		{ NULL, "\"csi.storage.k8s.io/controller-expand-secret-name\":\"x\","
		  "\"csi.storage.k8s.io/controller-expand-secret-namespace\":\"${pvc.name}\"",
		  NULL, NULL, "invalid tokens" },  /* the namespace may not use the claim's name */
		{ NULL, "\"csi.storage.k8s.io/controller-expand-secret-name\":\"Bad_Name\","
		  "\"csi.storage.k8s.io/controller-expand-secret-namespace\":\"ns\"",
		  NULL, NULL, "is not a valid name name" },
		{ NULL, NULL, "", "", NULL },   /* no secret at all */
	};
	struct kube_obj *c = claim(2, 1, -1, NULL, NULL);
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct kube_obj *v = volume(1, "d", UID, t[i].pv_extra);
		struct kube_obj *sc = class_(true, t[i].params);
		struct rsz_secret_ref ref;
		char err[300] = "";
		int rc = rsz_secret_ref(kube_pv_of(v), kube_pvc_of(c), kube_storageclass_of(sc), &ref,
					err, sizeof(err));
		if (t[i].err) {
			CHECK_INT(rc, -1);
			if (!strstr(err, t[i].err))
				fprintf(stderr, "case %zu: %s\n", i, err);
			CHECK(strstr(err, t[i].err) != NULL);
		} else {
			CHECK_INT(rc, 0);
			CHECK(ref.set == (t[i].name[0] != 0));
			CHECK_STR(ref.name, t[i].name);
			CHECK_STR(ref.ns, t[i].ns);
		}
		kube_obj_unref(v);
		kube_obj_unref(sc);
	}
	kube_obj_unref(c);
}

/* ---- VolumeAttributesClass ---- */

static void test_plan_modify(void)
{
	/* upstream v2.x's modify(): spec, current class, modifyVolumeStatus and memory */
	static const struct {
		const char *what, *spec, *current, *status, *target;
		bool uncertain, slow;
		enum rsz_modify_action want;
	} t[] = {
		{ "no class asked", NULL, NULL, NULL, NULL, false, false, RSZ_MODIFY_NOTHING },
		{ "already current", "gold", "gold", NULL, NULL, false, false, RSZ_MODIFY_NOTHING },
		{ "first class: start", "gold", NULL, NULL, NULL, false, false, RSZ_MODIFY_START },
		{ "a change: start", "gold", "silver", NULL, NULL, false, false, RSZ_MODIFY_START },
		{ "uncertain call: the same target again", "gold", "silver", "InProgress", "bronze", true, false, RSZ_MODIFY_CONTINUE },
		{ "InProgress after a final error: the spec's class", "gold", "silver", "InProgress", "bronze", false, false, RSZ_MODIFY_START },
		{ "infeasible lately, same target: wait", "bad", "gold", "Infeasible", "bad", false, true, RSZ_MODIFY_DELAY },
		{ "rolled back to the current class after Infeasible: start", "gold", "gold", "Infeasible", "bad", false, false, RSZ_MODIFY_START },
		{ "class taken out, nothing in progress: rolled back", NULL, NULL, "Pending", "gold", false, false, RSZ_MODIFY_ROLLED_BACK },
		{ "class taken out while InProgress: continue", NULL, NULL, "InProgress", "gold", false, false, RSZ_MODIFY_CONTINUE },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		char js[1024], spec[96] = "", cur[96] = "", st[160] = "";
		if (t[i].spec)
			snprintf(spec, sizeof(spec), ",\"volumeAttributesClassName\":\"%s\"", t[i].spec);
		if (t[i].current)
			snprintf(cur, sizeof(cur), ",\"currentVolumeAttributesClassName\":\"%s\"", t[i].current);
		if (t[i].status)
			snprintf(st, sizeof(st), ",\"modifyVolumeStatus\":{\"status\":\"%s\","
				 "\"targetVolumeAttributesClassName\":\"%s\"}", t[i].status, t[i].target);
		snprintf(js, sizeof(js), "{\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\"},"
			 "\"spec\":{\"volumeName\":\"pv1\"%s},\"status\":{\"phase\":\"Bound\"%s%s}}",
			 spec, cur, st);
		struct kube_obj *c = decode(&KUBE_KIND_PERSISTENTVOLUMECLAIM, js);
		struct rsz_modify_memory mem = { t[i].uncertain, t[i].slow };
		enum rsz_modify_action got = rsz_plan_modify(kube_pvc_of(c), &mem);
		if (got != t[i].want)
			fprintf(stderr, "case %zu (%s): %d\n", i, t[i].what, got);
		CHECK_INT(got, t[i].want);
		/* the slow set applies only while the status targets the spec's class */
		CHECK(rsz_modify_targets_spec(kube_pvc_of(c)) ==
		      (t[i].status && t[i].spec && !strcmp(t[i].spec, t[i].target)));
		kube_obj_unref(c);
	}
}

static void test_modify_patches(void)
{
	struct kube_obj *c = decode(&KUBE_KIND_PERSISTENTVOLUMECLAIM,
		"{\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\",\"resourceVersion\":\"9\"},"
		"\"spec\":{\"volumeAttributesClassName\":\"gold\"},\"status\":{\"phase\":\"Bound\","
		"\"conditions\":[{\"type\":\"ModifyingVolume\",\"status\":\"True\"}],"
		"\"modifyVolumeStatus\":{\"status\":\"Infeasible\",\"targetVolumeAttributesClassName\":\"bad\"}}}");
	const struct kube_pvc *pvc = kube_pvc_of(c);
	char buf[300];
	CHECK_INT(pvc->modify_status, KUBE_MODIFY_INFEASIBLE);
	CHECK_STR(pvc->modify_target, "bad");
	CHECK(!pvc->other_conds);

	/* InProgress for the spec's class: ModifyingVolume replaced, ModifyVolumeError kept */
	struct rsz_patch p = rsz_mark_modify(pvc, KUBE_MODIFY_IN_PROGRESS, NULL, -1, NULL, false, buf, sizeof(buf));
	char *got = patch_text(&p);
	CHECK_STR(got, "{\"metadata\":{\"resourceVersion\":\"9\"},\"status\":{\"conditions\":["
		  "{\"type\":\"ModifyingVolume\",\"status\":\"True\",\"lastProbeTime\":\"2026-01-01T00:00:00Z\","
		  "\"lastTransitionTime\":\"2026-01-01T00:00:00Z\","
		  "\"message\":\"Modifying volume to \\\"gold\\\" is in progress.\"}],"
		  "\"modifyVolumeStatus\":{\"status\":\"InProgress\",\"targetVolumeAttributesClassName\":\"gold\"}}}");
	free(got);
	/* the driver's InvalidArgument: Infeasible, the target kept, the error as a condition */
	p = rsz_mark_modify(pvc, KUBE_MODIFY_INFEASIBLE, "bad", 3, "bad type", true, buf, sizeof(buf));
	got = patch_text(&p);
	CHECK_STR(got, "{\"status\":{\"conditions\":["
		  "{\"type\":\"ModifyingVolume\",\"status\":\"True\",\"lastProbeTime\":\"2026-01-01T00:00:00Z\","
		  "\"lastTransitionTime\":\"2026-01-01T00:00:00Z\","
		  "\"message\":\"Modifying volume to \\\"bad\\\" failed. Waiting for retry.\"},"
		  "{\"type\":\"ModifyVolumeError\",\"status\":\"True\",\"lastProbeTime\":\"2026-01-01T00:00:00Z\","
		  "\"lastTransitionTime\":\"2026-01-01T00:00:00Z\",\"reason\":\"InvalidArgument\",\"message\":\"bad type\"}],"
		  "\"modifyVolumeStatus\":{\"status\":\"Infeasible\",\"targetVolumeAttributesClassName\":\"bad\"}}}");
	free(got);
	/* an uncertain error: still in progress */
	p = rsz_mark_modify(pvc, KUBE_MODIFY_IN_PROGRESS, "bad", 4, "timeout", false, buf, sizeof(buf));
	CHECK_STR(buf, "Modifying volume to \"bad\" is still in progress.");
	CHECK_STR(p.reasons[5], "DeadlineExceeded");
	p = rsz_mark_modify(pvc, KUBE_MODIFY_PENDING, NULL, -1, NULL, false, buf, sizeof(buf));
	got = patch_text(&p);
	/* Pending leaves the conditions alone. */
	CHECK_STR(got, "{\"metadata\":{\"resourceVersion\":\"9\"},\"status\":{\"modifyVolumeStatus\":"
		  "{\"status\":\"Pending\",\"targetVolumeAttributesClassName\":\"gold\"}}}");
	free(got);
	/* done: nothing else in the conditions, so they go as a whole (as upstream's patch) */
	p = rsz_mark_modify_done(pvc, "gold");
	got = patch_text(&p);
	CHECK_STR(got, "{\"status\":{\"conditions\":null,\"modifyVolumeStatus\":null,"
		  "\"currentVolumeAttributesClassName\":\"gold\"}}");
	free(got);
	p = rsz_mark_rolled_back(pvc);
	got = patch_text(&p);
	CHECK_STR(got, "{\"status\":{\"conditions\":null}}");
	free(got);
	kube_obj_unref(c);

	/* another condition stays: the modify ones are deleted one by one */
	c = decode(&KUBE_KIND_PERSISTENTVOLUMECLAIM,
		"{\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\"},\"status\":{\"phase\":\"Bound\","
		"\"conditions\":[{\"type\":\"FileSystemResizePending\",\"status\":\"True\"},"
		"{\"type\":\"ModifyingVolume\",\"status\":\"True\"}]}}");
	CHECK(kube_pvc_of(c)->other_conds);
	p = rsz_mark_modify_done(kube_pvc_of(c), "gold");
	got = patch_text(&p);
	CHECK_STR(got, "{\"status\":{\"conditions\":[{\"type\":\"ModifyingVolume\",\"$patch\":\"delete\"},"
		  "{\"type\":\"ModifyVolumeError\",\"$patch\":\"delete\"}],\"modifyVolumeStatus\":null,"
		  "\"currentVolumeAttributesClassName\":\"gold\"}}");
	free(got);
	kube_obj_unref(c);
}

/* --feature-gates as csi-resizer v2.3 takes it. */
static void test_gates(void)
{
	static const struct {
		const char *what;
		struct flag_kv kv[2];
		size_t n;
		const char *err; /* NULL: accepted */
		bool vac, vac_explicit, annotate;
	} t[] = {
		{ "defaults: VolumeAttributesClass on, AnnotateFsResize on (beta since v2.2)",
		  { { 0 } }, 0, NULL, true, false, true },
		{ "AnnotateFsResize can be switched off",
		  { { "AnnotateFsResize", "false" } }, 1, NULL, true, false, false },
		{ "AllBeta=false switches the beta AnnotateFsResize off, not the GA gate",
		  { { "AllBeta", "false" } }, 1, NULL, true, false, false },
		{ "VolumeAttributesClass named: explicit, discovery leaves it alone",
		  { { "VolumeAttributesClass", "true" } }, 1, NULL, true, true, true },
		{ "VolumeAttributesClass=false: off and explicit",
		  { { "VolumeAttributesClass", "false" } }, 1, NULL, false, true, true },
		{ "RecoverVolumeExpansionFailure was removed in v2.3: unknown even at its old default",
		  { { "RecoverVolumeExpansionFailure", "true" } }, 1,
		  "unrecognized feature gate: RecoverVolumeExpansionFailure", false, false, false },
		{ "RecoverVolumeExpansionFailure=false: the same refusal",
		  { { "VolumeAttributesClass", "true" }, { "RecoverVolumeExpansionFailure", "false" } },
		  2, "unrecognized feature gate: RecoverVolumeExpansionFailure", false, false, false },
		{ "an unknown gate", { { "NoSuchGate", "true" } }, 1,
		  "unrecognized feature gate: NoSuchGate", false, false, false },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct flag_map m = { (struct flag_kv *)t[i].kv, t[i].n };
		struct rsz_gates g;
		char err[300] = "";
		int rc = rsz_parse_gates(&m, &g, err, sizeof(err));
		if (t[i].err) {
			CHECK_INT(rc, -1);
			CHECK_STR(err, t[i].err);
			continue;
		}
		if (rc || g.vac != t[i].vac || g.vac_explicit != t[i].vac_explicit ||
		    g.annotate_fs_resize != t[i].annotate)
			fprintf(stderr, "gates: %s (%s)\n", t[i].what, err);
		CHECK_INT(rc, 0);
		CHECK(g.vac == t[i].vac && g.vac_explicit == t[i].vac_explicit &&
		      g.annotate_fs_resize == t[i].annotate);
	}
}

/* --resize-timeout, --modify-timeout and --timeout as v2.3's resolveOperationTimeouts weighs them. */
static void test_timeouts(void)
{
	static const struct {
		const char *args[4];
		int64_t resize_s, modify_s;
	} t[] = {
		{ { NULL }, 10, 10 },                                       /* all defaults */
		{ { "--resize-timeout=30s" }, 30, 10 },
		{ { "--modify-timeout", "2m" }, 10, 120 },
		{ { "--resize-timeout=30s", "--modify-timeout=45s" }, 30, 45 },
		{ { "--timeout=5s", "--resize-timeout=30s" }, 5, 5 },        /* --timeout wins */
		{ { "--modify-timeout=45s", "--timeout=1m" }, 60, 60 },      /* in any order */
		/* given at its default value it still wins: only whether it was given counts */
		{ { "--timeout=10s", "--resize-timeout=30s", "--modify-timeout=45s" }, 10, 10 },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		char *argv[6] = { (char *)"csi-resizer" };
		int argc = 1, rest = 0;
		for (int j = 0; j < 4 && t[i].args[j]; j++)
			argv[argc++] = (char *)t[i].args[j];
		struct flagset *fs = flags_new("csi-resizer", "");
		struct rsz_config cfg;
		char err[256];
		rsz_register_flags(fs, &cfg);
		CHECK_INT(flags_parse(fs, argc, argv, &rest, err, sizeof(err)), FLAGS_OK);
		rsz_config_resolve(&cfg, fs);
		int64_t r, m;
		rsz_resolve_timeouts(cfg.sc.timeout_ns, cfg.timeout_given, cfg.resize_timeout_ns,
				     cfg.modify_timeout_ns, &r, &m);
		if (r != t[i].resize_s * 1000000000LL || m != t[i].modify_s * 1000000000LL)
			fprintf(stderr, "timeouts case %zu: resize %lld modify %lld\n", i,
				(long long)r, (long long)m);
		CHECK_INT(r, t[i].resize_s * 1000000000LL);
		CHECK_INT(m, t[i].modify_s * 1000000000LL);
		flags_free(fs);
	}
}

static void test_decode(void)
{
	struct kube_obj *c = claim(3, 1, 2, "NodeResizePending",
		",\"conditions\":[{\"type\":\"Resizing\",\"status\":\"True\"},"
		"{\"type\":\"FileSystemResizePending\",\"status\":\"True\"},"
		"{\"type\":\"ControllerResizeError\",\"status\":\"False\"}]");
	const struct kube_pvc *p = kube_pvc_of(c);
	CHECK_INT(p->allocated, 2 * GI);
	CHECK_INT(p->resize_status, KUBE_RESIZE_NODE_PENDING);
	CHECK_INT(p->conds, KUBE_PVC_RESIZING | KUBE_PVC_FS_RESIZE_PENDING);
	CHECK_INT(p->modify_status, KUBE_MODIFY_NONE);
	kube_obj_unref(c);
	struct kube_obj *v = decode(&KUBE_KIND_VOLUMEATTRIBUTESCLASS,
		"{\"metadata\":{\"name\":\"gold\"},\"driverName\":\"d\",\"parameters\":{\"iops\":\"3000\"}}");
	CHECK_STR(kube_vac_of(v)->driver_name, "d");
	CHECK_INT(kube_vac_of(v)->nparameters, 1);
	CHECK_STR(kube_vac_of(v)->parameters[0].value, "3000");
	kube_obj_unref(v);
}

int main(void)
{
	RUN(test_needs_resize);
	RUN(test_can_expand);
	RUN(test_plan_recover);
	RUN(test_pre_resize_ann);
	RUN(test_errors);
	RUN(test_patches);
	RUN(test_secrets);
	RUN(test_plan_modify);
	RUN(test_modify_patches);
	RUN(test_gates);
	RUN(test_timeouts);
	RUN(test_decode);
	return CHECK_DONE();
}
