/*
 * Unit tests of the snapshot components' decisions (src/snapshots): tables of object states and
 * the step upstream's external-snapshotter v8 takes for each.
 */
#include "check.h"
#include "snapshots/snapshots.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UID "6a3f4b1e-0000-4000-8000-000000000001"
#define UID2 "6a3f4b1e-0000-4000-8000-000000000002"

static struct kube_obj *decode(const struct kube_kind *k, const char *json)
{
	json_error_t je;
	json_t *j = json_loads(json, 0, &je);
	char err[256];
	struct kube_obj *o = j ? kube_decode_json(k, j, err, sizeof(err)) : NULL;
	if (!o)
		fprintf(stderr, "decode failed: %s: %s\n", json, j ? err : je.text);
	json_decref(j);
	return o;
}

/*
 * A record of kind k: head is its first metadata members (name, namespace, uid), spec_head what
 * its spec starts with; meta, spec and status are JSON fragments (status NULL: none).
 */
static struct kube_obj *rec(const struct kube_kind *k, const char *head, const char *spec_head,
			    const char *meta, const char *spec, const char *status)
{
	char js[2048];
	snprintf(js, sizeof(js), "{\"metadata\":{%s,\"resourceVersion\":\"5\"%s%s},\"spec\":{%s%s}%s%s%s}",
		 head, *meta ? "," : "", meta, spec_head, spec, status ? ",\"status\":{" : "",
		 status ? status : "", status ? "}" : "");
	return decode(k, js);
}

/* A VolumeSnapshot "s1" in "ns" with uid UID. */
static struct kube_obj *vs(const char *meta, const char *spec, const char *status)
{
	return rec(&KUBE_KIND_VOLUMESNAPSHOT, "\"name\":\"s1\",\"namespace\":\"ns\",\"uid\":\"" UID "\"",
		   "", meta, spec, status);
}

static struct kube_obj *vsc(const char *meta, const char *spec, const char *status)
{
	return rec(&KUBE_KIND_VOLUMESNAPSHOTCONTENT, "\"name\":\"snapcontent-" UID "\",\"uid\":\"" UID2 "\"",
		   "\"driver\":\"d.io\",", meta, spec, status);
}

#define REF_OK "\"volumeSnapshotRef\":{\"name\":\"s1\",\"namespace\":\"ns\",\"uid\":\"" UID "\"}"
#define REF_NOUID "\"volumeSnapshotRef\":{\"name\":\"s1\",\"namespace\":\"ns\"}"
#define REF_OTHER "\"volumeSnapshotRef\":{\"name\":\"s2\",\"namespace\":\"ns\",\"uid\":\"" UID2 "\"}"
#define DYN "\"source\":{\"volumeHandle\":\"vol-1\"},\"deletionPolicy\":\"Delete\""
#define DYN_RETAIN "\"source\":{\"volumeHandle\":\"vol-1\"},\"deletionPolicy\":\"Retain\""
#define PRE "\"source\":{\"snapshotHandle\":\"h-1\"},\"deletionPolicy\":\"Delete\""
#define FINS(x) "\"finalizers\":[" x "]"
#define F_SRC "\"" SNAP_FIN_SOURCE "\""
#define F_BOUND "\"" SNAP_FIN_BOUND "\""
#define F_VSC "\"" SNAP_FIN_CONTENT "\""
#define DEL "\"deletionTimestamp\":\"2026-01-01T00:00:00Z\""

/* ---- records ---- */
static void test_decode(void)
{
	struct kube_obj *s = vs(FINS(F_SRC), "\"source\":{\"persistentVolumeClaimName\":\"c1\"},"
				"\"volumeSnapshotClassName\":\"gold\"",
				"\"boundVolumeSnapshotContentName\":\"x\",\"readyToUse\":true,"
				"\"restoreSize\":\"1Gi\",\"creationTime\":\"2026-01-01T00:00:00Z\"");
	const struct kube_vs *v = kube_vs_of(s);
	CHECK(v != NULL);
	CHECK_STR(v->source_pvc, "c1");
	CHECK(v->source_content == NULL);
	CHECK_STR(v->class_name, "gold");
	CHECK_STR(v->bound_content, "x");
	CHECK_INT(v->ready, KUBE_COND_TRUE);
	CHECK_INT(v->restore_size, 1073741824);
	kube_obj_unref(s);

	struct kube_obj *c = vsc("\"annotations\":{\"" SNAP_ANN_BEING_CREATED "\":\"yes\","
				 "\"" SNAP_ANN_SECRET_NAME "\":\"sec\",\"" SNAP_ANN_SECRET_NS "\":\"kube-system\"}",
				 DYN_RETAIN "," REF_OK ",\"sourceVolumeMode\":\"Block\"",
				 "\"snapshotHandle\":\"snap-1\",\"creationTime\":1767225600123456789,"
				 "\"restoreSize\":1024,\"readyToUse\":false");
	const struct kube_vsc *k = kube_vsc_of(c);
	CHECK(k != NULL);
	CHECK_STR(k->driver, "d.io");
	CHECK_STR(k->volume_handle, "vol-1");
	CHECK_INT(k->policy, KUBE_SNAP_RETAIN);
	CHECK_STR(k->ref_uid, UID);
	CHECK(k->being_created && !k->being_deleted);
	CHECK_STR(k->deletion_secret_name, "sec");
	CHECK_STR(k->status_handle, "snap-1");
	CHECK_INT(k->creation_time, 1767225600123456789LL);
	CHECK_INT(k->restore_size, 1024);
	CHECK_INT(k->ready, KUBE_COND_FALSE);
	CHECK_STR(k->source_volume_mode, "Block");
	kube_obj_unref(c);
}

/* ---- names ---- */
static void test_names(void)
{
	char buf[128], err[256];
	struct kube_obj *s = vs("", "", NULL);

	snap_content_name(kube_vs_of(s), buf, sizeof(buf));
	CHECK_STR(buf, "snapcontent-" UID);
	kube_obj_unref(s);
	CHECK_INT(snap_csi_name("snapshot", UID, -1, buf, sizeof(buf), err, sizeof(err)), 0);
	CHECK_STR(buf, "snapshot-" UID);
	CHECK_INT(snap_csi_name("snap", UID, 8, buf, sizeof(buf), err, sizeof(err)), 0);
	CHECK_STR(buf, "snap-6a3f4b1e");
	CHECK_INT(snap_csi_name("snap", UID, 12, buf, sizeof(buf), err, sizeof(err)), 0);
	CHECK_STR(buf, "snap-6a3f4b1e0000");
	CHECK_INT(snap_csi_name("snap", "", -1, buf, sizeof(buf), err, sizeof(err)), -1);
	CHECK_STR(err, "Corrupted snapshot object, it is missing UID");
	CHECK_INT(snap_csi_name("snap", UID, 40, buf, sizeof(buf), err, sizeof(err)), -1);
}

/* ---- parameters and secrets ---- */
static void test_params(void)
{
	struct kube_kv p[] = { { "a", "1" }, { "csi.storage.k8s.io/snapshotter-secret-name", "s" },
			       { "b", "2" } };
	struct kube_kv out[3];
	char err[256];

	CHECK_INT(snap_csi_params(p, 3, out, err, sizeof(err)), 2);
	CHECK_STR(out[0].key, "a");
	CHECK_STR(out[1].key, "b");
	struct kube_kv bad[] = { { "csi.storage.k8s.io/fstype", "ext4" } };
	CHECK_INT(snap_csi_params(bad, 1, out, err, sizeof(err)), -1);
	CHECK(strstr(err, "found unknown parameter key \"csi.storage.k8s.io/fstype\"") != NULL);
}

static void test_secret_ref(void)
{
	static const struct {
		const char *what, *name, *ns;
		enum snap_secret_kind kind;
		int want;
		const char *want_name, *want_ns;
	} rows[] = {
		{ "none", NULL, NULL, SNAP_SECRET_CREATE, 0, NULL, NULL },
		{ "plain", "sec", "kube-system", SNAP_SECRET_CREATE, 1, "sec", "kube-system" },
		{ "templates", "${volumesnapshot.name}-${volumesnapshotcontent.name}",
		  "${volumesnapshot.namespace}", SNAP_SECRET_CREATE, 1, "s1-snapcontent-x", "ns" },
		{ "name only", "sec", NULL, SNAP_SECRET_CREATE, -1, NULL, NULL },
		{ "snapshot name not in namespace", "sec", "${volumesnapshot.name}",
		  SNAP_SECRET_CREATE, -1, NULL, NULL },
		{ "unknown token", "${pvc.name}", "ns", SNAP_SECRET_CREATE, -1, NULL, NULL },
		{ "invalid result", "Sec_Ret", "ns", SNAP_SECRET_CREATE, -1, NULL, NULL },
		{ "list keys apart", "sec", "ns", SNAP_SECRET_LIST, 0, NULL, NULL },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct kube_kv p[2];
		size_t n = 0;
		char name[128], ns[128], err[256];
		if (rows[i].name)
			p[n++] = (struct kube_kv){ "csi.storage.k8s.io/snapshotter-secret-name", rows[i].name };
		if (rows[i].ns)
			p[n++] = (struct kube_kv){ "csi.storage.k8s.io/snapshotter-secret-namespace", rows[i].ns };
		int got = snap_secret_ref(rows[i].kind, p, n, "snapcontent-x", "s1", "ns", name,
					  sizeof(name), ns, sizeof(ns), err, sizeof(err));
		if (got != rows[i].want)
			fprintf(stderr, "row %s: got %d (%s)\n", rows[i].what, got, err);
		CHECK_INT(got, rows[i].want);
		if (got == 1) {
			CHECK_STR(name, rows[i].want_name);
			CHECK_STR(ns, rows[i].want_ns);
		}
	}
}

static void test_default_class(void)
{
	struct kube_obj *a = decode(&KUBE_KIND_VOLUMESNAPSHOTCLASS,
		"{\"metadata\":{\"name\":\"a\",\"annotations\":{\"snapshot.storage.kubernetes.io/is-default-class\":\"true\"}},\"driver\":\"d.io\",\"deletionPolicy\":\"Delete\"}");
	struct kube_obj *b = decode(&KUBE_KIND_VOLUMESNAPSHOTCLASS,
		"{\"metadata\":{\"name\":\"b\"},\"driver\":\"d.io\",\"deletionPolicy\":\"Delete\"}");
	struct kube_obj *o = decode(&KUBE_KIND_VOLUMESNAPSHOTCLASS,
		"{\"metadata\":{\"name\":\"o\",\"annotations\":{\"snapshot.storage.kubernetes.io/is-default-class\":\"true\"}},\"driver\":\"other.io\",\"deletionPolicy\":\"Retain\"}");
	struct kube_obj *a2 = decode(&KUBE_KIND_VOLUMESNAPSHOTCLASS,
		"{\"metadata\":{\"name\":\"a2\",\"annotations\":{\"snapshot.storage.kubernetes.io/is-default-class\":\"true\"}},\"driver\":\"d.io\",\"deletionPolicy\":\"Delete\"}");
	const struct kube_vsclass *one[] = { kube_vsclass_of(a), kube_vsclass_of(b), kube_vsclass_of(o) };
	const struct kube_vsclass *two[] = { kube_vsclass_of(a), kube_vsclass_of(a2) };
	char err[128];

	CHECK(snap_default_class(one, 3, "d.io", err, sizeof(err)) == kube_vsclass_of(a));
	CHECK(snap_default_class(one, 3, "x.io", err, sizeof(err)) == NULL);
	CHECK_STR(err, "cannot find default snapshot class");
	CHECK(snap_default_class(two, 2, "d.io", err, sizeof(err)) == NULL);
	CHECK_STR(err, "2 default snapshot classes were found");
	CHECK_INT(kube_vsclass_of(o)->policy, KUBE_SNAP_RETAIN);
	kube_obj_unref(a);
	kube_obj_unref(b);
	kube_obj_unref(o);
	kube_obj_unref(a2);
}

/* ---- snapshot-controller ---- */
static void test_validate(void)
{
	static const struct { const char *spec; bool valid; } rows[] = {
		{ "\"source\":{\"persistentVolumeClaimName\":\"c\"}", true },
		{ "\"source\":{\"volumeSnapshotContentName\":\"x\"}", true },
		{ "\"source\":{}", false },
		{ "\"source\":{\"persistentVolumeClaimName\":\"c\",\"volumeSnapshotContentName\":\"x\"}", false },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct kube_obj *s = vs("", rows[i].spec, NULL);
		CHECK(!snap_validate_vs(kube_vs_of(s)) == rows[i].valid);
		kube_obj_unref(s);
	}
	struct kube_obj *both = vsc("", "\"source\":{\"volumeHandle\":\"v\",\"snapshotHandle\":\"h\"}", NULL);
	CHECK_STR(snap_validate_vsc(kube_vsc_of(both)),
		  "Exactly one of VolumeHandle and SnapshotHandle should be specified");
	kube_obj_unref(both);
}

static void test_finalizers(void)
{
	static const struct {
		const char *what, *meta, *status, *content;
		bool source, bound;
	} rows[] = {
		{ "new snapshot", "", NULL, NULL, true, false },
		{ "bound, Delete", FINS(F_SRC), "\"boundVolumeSnapshotContentName\":\"x\"", DYN "," REF_OK, false, true },
		{ "bound, Retain: no bound finalizer", FINS(F_SRC), "\"boundVolumeSnapshotContentName\":\"x\"", DYN_RETAIN "," REF_OK, false, false },
		{ "has both", FINS(F_SRC "," F_BOUND), "\"boundVolumeSnapshotContentName\":\"x\"", DYN "," REF_OK, false, false },
		{ "being deleted", DEL, NULL, NULL, false, false },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct kube_obj *s = vs(rows[i].meta, "\"source\":{\"persistentVolumeClaimName\":\"c\"}", rows[i].status);
		struct kube_obj *c = rows[i].content ? vsc("", rows[i].content, NULL) : NULL;
		bool src, bound;
		snap_finalizers_needed(kube_vs_of(s), kube_vsc_of(c), &src, &bound);
		if (src != rows[i].source || bound != rows[i].bound)
			fprintf(stderr, "row %s\n", rows[i].what);
		CHECK(src == rows[i].source);
		CHECK(bound == rows[i].bound);
		kube_obj_unref(s);
		kube_obj_unref(c);
	}
}

static void test_deletion(void)
{
	static const struct {
		const char *what, *fins, *content_meta, *content;
		bool restoring;
		struct snap_deletion want; /* pending, annotate, delete, rm source, rm bound */
	} rows[] = {
		{ "Delete: annotate, delete content, keep bound", F_SRC "," F_BOUND, "", DYN "," REF_OK, false,
		  { false, true, true, true, false } },
		{ "Delete, content already going", F_BOUND, "\"annotations\":{\"" SNAP_ANN_BEING_DELETED "\":\"yes\"}," DEL, DYN "," REF_OK, false,
		  { false, false, false, false, false } },
		{ "Retain: annotate, both finalizers go", F_SRC "," F_BOUND, "", DYN_RETAIN "," REF_OK, false,
		  { false, true, false, true, true } },
		{ "no content: both go", F_SRC "," F_BOUND, NULL, NULL, false, { false, false, false, true, true } },
		{ "content of another snapshot: untouched", F_SRC "," F_BOUND, "", DYN "," REF_OTHER, false,
		  { false, false, false, true, true } },
		{ "restoring: pending", F_SRC "," F_BOUND, "", DYN "," REF_OK, true, { true, false, false, false, false } },
		{ "no finalizers of ours", "\"other\"", "", DYN "," REF_OK, false, { false, false, false, false, false } },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		char meta[512];
		snprintf(meta, sizeof(meta), DEL ",\"finalizers\":[%s]", rows[i].fins);
		struct kube_obj *s = vs(meta, "\"source\":{\"persistentVolumeClaimName\":\"c\"}",
					"\"boundVolumeSnapshotContentName\":\"snapcontent-" UID "\"");
		struct kube_obj *c = rows[i].content ? vsc(rows[i].content_meta, rows[i].content, NULL) : NULL;
		struct snap_deletion d;
		snap_plan_deletion(kube_vs_of(s), kube_vsc_of(c), rows[i].restoring, &d);
		if (memcmp(&d, &rows[i].want, sizeof(d)))
			fprintf(stderr, "row %s: %d %d %d %d %d\n", rows[i].what, d.pending,
				d.annotate_content, d.delete_content, d.remove_source, d.remove_bound);
		CHECK(memcmp(&d, &rows[i].want, sizeof(d)) == 0);
		kube_obj_unref(s);
		kube_obj_unref(c);
	}
}

static void test_preprovisioned(void)
{
	static const struct {
		const char *what, *content;
		enum snap_bind want;
		const char *reason;
	} rows[] = {
		{ "missing", NULL, SNAP_BIND_MISSING, "SnapshotContentMissing" },
		{ "dynamic content", DYN "," REF_OK, SNAP_BIND_DYNAMIC, "SnapshotContentMismatch" },
		{ "points elsewhere", PRE "," REF_OTHER, SNAP_BIND_MISBOUND, "SnapshotContentMisbound" },
		{ "points back, no uid", PRE "," REF_NOUID, SNAP_BIND_NEEDED, NULL },
		{ "bound", PRE "," REF_OK, SNAP_BIND_OK, NULL },
	};
	struct kube_obj *s = vs("", "\"source\":{\"volumeSnapshotContentName\":\"snapcontent-" UID "\"}", NULL);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct kube_obj *c = rows[i].content ? vsc("", rows[i].content, NULL) : NULL;
		struct snap_error e = { 0 };
		CHECK_INT(snap_check_preprovisioned(kube_vs_of(s), kube_vsc_of(c), &e), rows[i].want);
		if (rows[i].reason)
			CHECK_STR(e.reason, rows[i].reason);
		kube_obj_unref(c);
	}
	kube_obj_unref(s);
}

static void test_status(void)
{
	static const struct {
		const char *what, *vs_status, *c_status;
		bool changed, ready, created_event, ready_event;
		int64_t size;
	} rows[] = {
		{ "content not cut yet", NULL, NULL, true, false, false, false, -1 },
		{ "cut, not ready", "\"boundVolumeSnapshotContentName\":\"snapcontent-" UID "\",\"readyToUse\":false",
		  "\"snapshotHandle\":\"h\",\"creationTime\":1767225600000000000,\"restoreSize\":1024,\"readyToUse\":false",
		  true, false, true, false, 1024 },
		{ "becomes ready", "\"boundVolumeSnapshotContentName\":\"snapcontent-" UID "\",\"readyToUse\":false,\"creationTime\":\"2026-01-01T00:00:00Z\",\"restoreSize\":\"1Ki\"",
		  "\"snapshotHandle\":\"h\",\"creationTime\":1767225600000000000,\"restoreSize\":1024,\"readyToUse\":true",
		  true, true, false, true, 1024 },
		{ "nothing new", "\"boundVolumeSnapshotContentName\":\"snapcontent-" UID "\",\"readyToUse\":true,\"creationTime\":\"2026-01-01T00:00:00Z\",\"restoreSize\":\"1Ki\"",
		  "\"snapshotHandle\":\"h\",\"creationTime\":1767225600000000000,\"restoreSize\":1024,\"readyToUse\":true",
		  false, true, false, false, 1024 },
		{ "content error copied", "\"boundVolumeSnapshotContentName\":\"snapcontent-" UID "\",\"readyToUse\":false",
		  "\"readyToUse\":false,\"error\":{\"message\":\"boom\",\"time\":\"2026-01-01T00:00:00Z\"}",
		  true, false, false, false, -1 },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct kube_obj *s = vs("", "\"source\":{\"persistentVolumeClaimName\":\"c\"}", rows[i].vs_status);
		struct kube_obj *c = vsc("", DYN "," REF_OK, rows[i].c_status);
		struct snap_vs_status st;
		snap_status_from_content(kube_vs_of(s), kube_vsc_of(c), &st);
		if (st.changed != rows[i].changed)
			fprintf(stderr, "row %s\n", rows[i].what);
		CHECK(st.changed == rows[i].changed);
		CHECK(st.ready == rows[i].ready);
		CHECK(st.created_event == rows[i].created_event);
		CHECK(st.ready_event == rows[i].ready_event);
		CHECK_INT(st.restore_size, rows[i].size);
		CHECK_STR(st.bound, "snapcontent-" UID);
		kube_obj_unref(s);
		kube_obj_unref(c);
	}
}

static void test_source(void)
{
	char err[512];
	struct kube_obj *s = vs("", "\"source\":{\"persistentVolumeClaimName\":\"c1\"}", NULL);
	struct kube_obj *pending = decode(&KUBE_KIND_PERSISTENTVOLUMECLAIM,
		"{\"metadata\":{\"name\":\"c1\",\"namespace\":\"ns\",\"uid\":\"" UID2 "\"},\"spec\":{}}");
	struct kube_obj *bound = decode(&KUBE_KIND_PERSISTENTVOLUMECLAIM,
		"{\"metadata\":{\"name\":\"c1\",\"namespace\":\"ns\",\"uid\":\"" UID2 "\"},\"spec\":{\"volumeName\":\"pv1\"},\"status\":{\"phase\":\"Bound\"}}");
	struct kube_obj *pv = decode(&KUBE_KIND_PERSISTENTVOLUME,
		"{\"metadata\":{\"name\":\"pv1\"},\"spec\":{\"csi\":{\"driver\":\"d.io\",\"volumeHandle\":\"vol-1\"},"
		"\"claimRef\":{\"name\":\"c1\",\"namespace\":\"ns\",\"uid\":\"" UID2 "\"}}}");
	struct kube_obj *nfs = decode(&KUBE_KIND_PERSISTENTVOLUME,
		"{\"metadata\":{\"name\":\"pv1\"},\"spec\":{\"nfs\":{},\"claimRef\":{\"name\":\"c1\",\"namespace\":\"ns\",\"uid\":\"" UID2 "\"}}}");
	const struct kube_vs *v = kube_vs_of(s);

	CHECK_INT(snap_check_source(v, NULL, NULL, err, sizeof(err)), -1);
	CHECK(strstr(err, "failed to retrieve PVC c1 from the lister") != NULL);
	CHECK_INT(snap_check_source(v, kube_pvc_of(pending), NULL, err, sizeof(err)), -1);
	CHECK_STR(err, "the PVC c1 is not yet bound to a PV, will not attempt to take a snapshot");
	CHECK_INT(snap_check_source(v, kube_pvc_of(bound), NULL, err, sizeof(err)), -1);
	CHECK(strstr(err, "failed to retrieve PV pv1") != NULL);
	CHECK_INT(snap_check_source(v, kube_pvc_of(bound), kube_pv_of(nfs), err, sizeof(err)), -1);
	CHECK(strstr(err, "snapshotting non-CSI volumes is not supported") != NULL);
	CHECK_INT(snap_check_source(v, kube_pvc_of(bound), kube_pv_of(pv), err, sizeof(err)), 0);

	/* The claim's finalizer stays while a snapshot of it has no creationTime. */
	struct kube_obj *cut = vs("", "\"source\":{\"persistentVolumeClaimName\":\"c1\"}",
				  "\"creationTime\":\"2026-01-01T00:00:00Z\"");
	const struct kube_vs *one[] = { v }, *done[] = { kube_vs_of(cut) };
	CHECK(snap_claim_in_use(kube_pvc_of(bound), one, 1, NULL));
	CHECK(!snap_claim_in_use(kube_pvc_of(bound), one, 1, v));
	CHECK(!snap_claim_in_use(kube_pvc_of(bound), done, 1, NULL));

	/* A Pending claim restoring from the snapshot holds its deletion. */
	struct kube_obj *restore = decode(&KUBE_KIND_PERSISTENTVOLUMECLAIM,
		"{\"metadata\":{\"name\":\"r\",\"namespace\":\"ns\",\"uid\":\"" UID2 "\"},\"spec\":{\"dataSource\":"
		"{\"kind\":\"VolumeSnapshot\",\"apiGroup\":\"snapshot.storage.k8s.io\",\"name\":\"s1\"}}}");
	const struct kube_pvc *claims[] = { kube_pvc_of(restore) };
	CHECK(snap_restoring(v, claims, 1));
	kube_obj_unref(restore);
	kube_obj_unref(cut);
	kube_obj_unref(s);
	kube_obj_unref(pending);
	kube_obj_unref(bound);
	kube_obj_unref(pv);
	kube_obj_unref(nfs);
}

static void test_content_plan(void)
{
	static const struct {
		const char *what, *meta, *spec;
		const char *vs_meta; /* NULL: no snapshot */
		enum snap_vsc_step want;
	} rows[] = {
		{ "invalid", "", "\"source\":{}," REF_OK, NULL, SNAP_VSC_INVALID },
		{ "pre-bound, not yet bound", "", PRE "," REF_NOUID, NULL, SNAP_VSC_NOTHING },
		{ "needs finalizer", "", DYN "," REF_OK, "", SNAP_VSC_ADD_FINALIZER },
		{ "snapshot deleted: annotate", FINS(F_VSC), DYN "," REF_OK, DEL "," FINS(F_BOUND), SNAP_VSC_ANNOTATE_DELETE },
		{ "settled", FINS(F_VSC), DYN "," REF_OK, FINS(F_SRC), SNAP_VSC_NOTHING },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct kube_obj *c = vsc(rows[i].meta, rows[i].spec, NULL);
		struct kube_obj *s = rows[i].vs_meta ? vs(rows[i].vs_meta, "\"source\":{\"persistentVolumeClaimName\":\"c\"}", NULL) : NULL;
		if (snap_plan_content(kube_vsc_of(c), kube_vs_of(s)) != rows[i].want)
			fprintf(stderr, "row %s\n", rows[i].what);
		CHECK_INT(snap_plan_content(kube_vsc_of(c), kube_vs_of(s)), rows[i].want);
		kube_obj_unref(c);
		kube_obj_unref(s);
	}
}

/* ---- csi-snapshotter ---- */
static void test_sidecar_plan(void)
{
#define ANN(x) "\"annotations\":{" x "}"
#define CREATING "\"" SNAP_ANN_BEING_CREATED "\":\"yes\""
#define DELETING "\"" SNAP_ANN_BEING_DELETED "\":\"yes\""
	static const struct {
		const char *what, *meta, *spec, *status;
		enum snap_sidecar_step want;
	} rows[] = {
		{ "new dynamic content", "", DYN "," REF_OK, NULL, SNAP_SC_CREATE },
		{ "failed once: CreateSnapshot again", "", DYN "," REF_OK, "\"readyToUse\":false,\"error\":{\"message\":\"x\"}", SNAP_SC_CREATE },
		{ "cut, not ready: poll with CreateSnapshot", "", DYN "," REF_OK, "\"snapshotHandle\":\"h\",\"readyToUse\":false", SNAP_SC_CREATE },
		{ "ready", "", DYN "," REF_OK, "\"snapshotHandle\":\"h\",\"readyToUse\":true", SNAP_SC_NOTHING },
		{ "ready, annotation left", ANN(CREATING), DYN "," REF_OK, "\"snapshotHandle\":\"h\",\"readyToUse\":true", SNAP_SC_CLEAR_CREATING },
		{ "pre-provisioned: ListSnapshots", "", PRE "," REF_OK, NULL, SNAP_SC_LIST },
		{ "deleted, Delete", DEL "," FINS(F_VSC) "," ANN(DELETING), DYN "," REF_OK, "\"snapshotHandle\":\"h\",\"readyToUse\":true", SNAP_SC_DELETE },
		{ "deleted, handle gone: finalizer", DEL "," FINS(F_VSC) "," ANN(DELETING), DYN "," REF_OK, "\"readyToUse\":false", SNAP_SC_REMOVE_FINALIZER },
		{ "deleted, Retain: finalizer only", DEL "," FINS(F_VSC) "," ANN(DELETING), DYN_RETAIN "," REF_OK, "\"snapshotHandle\":\"h\",\"readyToUse\":true", SNAP_SC_REMOVE_FINALIZER },
		{ "deleted while CreateSnapshot unanswered: create on", DEL "," FINS(F_VSC) "," ANN(DELETING "," CREATING), DYN "," REF_OK, NULL, SNAP_SC_CREATE },
		{ "deleted without the controller's word: keep going", DEL "," FINS(F_VSC), DYN "," REF_OK, "\"snapshotHandle\":\"h\",\"readyToUse\":true", SNAP_SC_NOTHING },
		{ "unbound pre-provisioned deleted", DEL "," FINS(F_VSC), PRE "," REF_NOUID, NULL, SNAP_SC_REMOVE_FINALIZER },
		{ "group member not ready: ListSnapshots by its handle, never CreateSnapshot", ANN("\"" SNAP_ANN_GROUP_HANDLE "\":\"gh\""), DYN "," REF_OK, "\"snapshotHandle\":\"h\",\"readyToUse\":false", SNAP_SC_LIST },
		{ "group member before its status: never CreateSnapshot", ANN("\"" SNAP_ANN_GROUP_HANDLE "\":\"gh\""), DYN "," REF_OK, NULL, SNAP_SC_NOTHING },
		{ "group member deleted: its group's call deletes it", DEL "," FINS(F_VSC) "," ANN(DELETING ",\"" SNAP_ANN_GROUP_HANDLE "\":\"gh\""), DYN "," REF_OK, "\"snapshotHandle\":\"h\",\"readyToUse\":true", SNAP_SC_REMOVE_FINALIZER },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct kube_obj *c = vsc(rows[i].meta, rows[i].spec, rows[i].status);
		if (snap_plan_sidecar(kube_vsc_of(c)) != rows[i].want)
			fprintf(stderr, "row %s: %d\n", rows[i].what, snap_plan_sidecar(kube_vsc_of(c)));
		CHECK_INT(snap_plan_sidecar(kube_vsc_of(c)), rows[i].want);
		kube_obj_unref(c);
	}
	/* Timeouts, aborts and unavailability may still cut a snapshot: not final. */
	CHECK(!snap_csi_final(4) && !snap_csi_final(14) && !snap_csi_final(10));
	CHECK(snap_csi_final(3) && snap_csi_final(5) && snap_csi_final(9));
}

/* ---- group snapshots ---- */
#define GUID "6a3f4b1e-0000-4000-8000-0000000000aa"
#define GREF_OK "\"volumeGroupSnapshotRef\":{\"name\":\"g1\",\"namespace\":\"ns\",\"uid\":\"" GUID "\"}"
#define G_BOUND "\"" SNAP_GFIN_BOUND "\""
#define G_VGSC "\"" SNAP_GFIN_CONTENT "\""
#define SEL_APP "\"source\":{\"selector\":{\"matchLabels\":{\"app\":\"db\"}}}"

static struct kube_obj *vgs(const char *meta, const char *spec, const char *status)
{
	return rec(&KUBE_KIND_VOLUMEGROUPSNAPSHOT, "\"name\":\"g1\",\"namespace\":\"ns\",\"uid\":\"" GUID "\"",
		   "", meta, spec, status);
}

static struct kube_obj *vgsc(const char *meta, const char *spec, const char *status)
{
	return rec(&KUBE_KIND_VOLUMEGROUPSNAPSHOTCONTENT,
		   "\"name\":\"groupsnapcontent-" GUID "\",\"uid\":\"" UID2 "\"", "\"driver\":\"d.io\",",
		   meta, spec, status);
}

static void test_group_records(void)
{
	struct kube_obj *g = vgs("", "\"source\":{\"selector\":{\"matchLabels\":{\"app\":\"db\"},"
				 "\"matchExpressions\":[{\"key\":\"tier\",\"operator\":\"In\",\"values\":[\"a\",\"b\"]}]}},"
				 "\"volumeGroupSnapshotClassName\":\"gold\"", NULL);
	CHECK_STR(kube_vgs_of(g)->selector, "app=db,tier in (a,b)");
	CHECK_STR(kube_vgs_of(g)->class_name, "gold");
	char name[128];
	snap_group_content_name(kube_vgs_of(g), name, sizeof(name));
	CHECK_STR(name, "groupsnapcontent-" GUID);
	kube_obj_unref(g);

	struct kube_obj *c = vgsc("", "\"deletionPolicy\":\"Retain\",\"source\":{\"volumeHandles\":[\"v1\",\"v2\"]}," GREF_OK,
				  "\"volumeGroupSnapshotHandle\":\"gh\",\"readyToUse\":true,\"volumeSnapshotInfoList\":["
				  "{\"volumeHandle\":\"v1\",\"snapshotHandle\":\"s1\",\"readyToUse\":true,\"restoreSize\":1024,"
				  "\"creationTime\":1700000000000000000}]");
	const struct kube_vgsc *vc = kube_vgsc_of(c);
	CHECK_INT(vc->nvolume_handles, 2);
	CHECK_STR(vc->volume_handles[1], "v2");
	CHECK_INT(vc->policy, KUBE_SNAP_RETAIN);
	CHECK_STR(vc->status_handle, "gh");
	CHECK_INT(vc->nmembers, 1);
	CHECK_STR(vc->members[0].snapshot_handle, "s1");
	CHECK_INT(vc->members[0].restore_size, 1024);
	CHECK_INT(vc->members[0].ready, KUBE_COND_TRUE);
	kube_obj_unref(c);

	/* a pre-provisioned content: the driver's group and member IDs an admin wrote */
	c = vgsc("", "\"source\":{\"groupSnapshotHandles\":{\"volumeGroupSnapshotHandle\":\"gh\","
		 "\"volumeSnapshotHandles\":[\"s1\",\"s2\"]}}", NULL);
	vc = kube_vgsc_of(c);
	CHECK_STR(vc->group_handle, "gh");
	CHECK_INT(vc->nsnapshot_handles, 2);
	CHECK_STR(vc->snapshot_handles[1], "s2");
	CHECK_INT(vc->nvolume_handles, 0);
	kube_obj_unref(c);

	/* member names are upstream's digest of the group's uid and the volume handle */
	char vs[80], vsc[80];
	snap_group_member_names("uid", "vol", vs, sizeof(vs), vsc, sizeof(vsc));
	CHECK_STR(vs, "snapshot-59a84980f8ef4826da54c7ced3605cf80e85f6bb08948be904a09383f8317b93");
	CHECK_STR(vsc + strlen("snapcontent-"), vs + strlen("snapshot-"));
	char vs2[80];
	snap_group_member_names("uid", "vol2", vs2, sizeof(vs2), NULL, 0);
	CHECK(strcmp(vs, vs2) != 0);

	/* group classes: their own default annotation, their own parameters' secret keys */
	struct kube_obj *cl = decode(&KUBE_KIND_VOLUMEGROUPSNAPSHOTCLASS,
		"{\"metadata\":{\"name\":\"g\",\"annotations\":{\"groupsnapshot.storage.kubernetes.io/is-default-class\":\"true\"}},"
		"\"driver\":\"d.io\",\"deletionPolicy\":\"Delete\",\"parameters\":{\"csi.storage.k8s.io/group-snapshotter-secret-name\":"
		"\"s-${volumegroupsnapshot.name}\",\"csi.storage.k8s.io/group-snapshotter-secret-namespace\":\"${volumegroupsnapshot.namespace}\","
		"\"csi.storage.k8s.io/group-snapshotter-get-secret-name\":\"get-${volumegroupsnapshotcontent.name}\","
		"\"csi.storage.k8s.io/group-snapshotter-get-secret-namespace\":\"kube-system\","
		"\"speed\":\"fast\"}}");
	const struct kube_vsclass *k = kube_vgsclass_of(cl), *ks[] = { k };
	char err[256], sn[64], sns[64];
	CHECK(snap_default_group_class(ks, 1, "d.io", err, sizeof(err)) == k);
	CHECK(snap_default_group_class(ks, 1, "other.io", err, sizeof(err)) == NULL);
	CHECK_STR(err, "cannot find default group snapshot class");
	struct kube_kv out[4];
	CHECK_INT(snap_csi_params(k->parameters, k->nparameters, out, err, sizeof(err)), 1);
	CHECK_STR(out[0].key, "speed");
	CHECK_INT(snap_secret_ref(SNAP_SECRET_GROUP, k->parameters, k->nparameters, "gc", "g1", "ns",
				  sn, sizeof(sn), sns, sizeof(sns), err, sizeof(err)), 1);
	CHECK_STR(sn, "s-g1");
	CHECK_STR(sns, "ns");
	/* GetVolumeGroupSnapshot's secret: no group at hand, the content's name only */
	CHECK_INT(snap_secret_ref(SNAP_SECRET_GROUP_GET, k->parameters, k->nparameters, "gc", NULL,
				  NULL, sn, sizeof(sn), sns, sizeof(sns), err, sizeof(err)), 1);
	CHECK_STR(sn, "get-gc");
	CHECK_STR(sns, "kube-system");
	kube_obj_unref(cl);
}

/* A claim c<i> in ns labelled app=<app>, Bound (to the volume passed beside it) or Pending. */
static struct kube_obj *gclaim(int i, const char *ns, const char *app, bool bound)
{
	char js[512];
	snprintf(js, sizeof(js), "{\"metadata\":{\"name\":\"c%d\",\"namespace\":\"%s\",\"labels\":{\"app\":\"%s\"}},"
		 "\"spec\":{%s}%s}", i, ns, app, bound ? "\"volumeName\":\"pv\"" : "",
		 bound ? ",\"status\":{\"phase\":\"Bound\"}" : "");
	return decode(&KUBE_KIND_PERSISTENTVOLUMECLAIM, js);
}

static struct kube_obj *gpv(int i, const char *driver)
{
	char js[512];
	snprintf(js, sizeof(js), "{\"metadata\":{\"name\":\"pv%d\"},\"spec\":{\"csi\":{\"driver\":\"%s\","
		 "\"volumeHandle\":\"vol-%d\"}}}", i, driver, i);
	return decode(&KUBE_KIND_PERSISTENTVOLUME, js);
}

static void test_group_volumes(void)
{
	static const struct {
		const char *what;
		const char *ns[3], *app[3], *driver[3];
		bool bound[3];
		int want;
		const char *msg; /* the error's start, or the handles joined */
	} rows[] = {
		{ "two of three selected", { "ns", "ns", "ns" }, { "db", "web", "db" }, { "d.io", "d.io", "d.io" },
		  { true, true, true }, 2, "vol-0,vol-2" },
		{ "other namespace ignored", { "ns", "other", "ns" }, { "db", "db", "web" }, { "d.io", "d.io", "d.io" },
		  { true, true, true }, 1, "vol-0" },
		{ "none selected", { "ns", "ns", "ns" }, { "web", "web", "web" }, { "d.io", "d.io", "d.io" },
		  { true, true, true }, -1, "label selector app=db for group snapshot not applied to any PVC" },
		{ "an unbound member", { "ns", "ns", "ns" }, { "db", "db", "web" }, { "d.io", "d.io", "d.io" },
		  { true, false, true }, -1, "the PVC c1 is not yet bound to a PV" },
		{ "two drivers", { "ns", "ns", "ns" }, { "db", "db", "web" }, { "d.io", "e.io", "d.io" },
		  { true, true, true }, -1, "the volumes of group snapshot ns/g1 belong to more than one CSI driver" },
	};
	struct kube_obj *g = vgs("", SEL_APP, NULL);
	for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
		struct kube_obj *co[3], *po[3];
		const struct kube_pvc *claims[3];
		const struct kube_pv *pvs[3];
		for (int i = 0; i < 3; i++) {
			co[i] = gclaim(i, rows[r].ns[i], rows[r].app[i], rows[r].bound[i]);
			po[i] = gpv(i, rows[r].driver[i]);
			claims[i] = kube_pvc_of(co[i]);
			pvs[i] = kube_pv_of(po[i]);
		}
		const char *handles[3], *driver;
		char err[256], got[256] = "";
		int n = snap_group_volumes(kube_vgs_of(g), claims, pvs, 3, handles, &driver, err,
					   sizeof(err));
		for (int i = 0; i < n; i++)
			snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s", i ? "," : "", handles[i]);
		if (n != rows[r].want)
			fprintf(stderr, "row %s: %d %s\n", rows[r].what, n, n < 0 ? err : got);
		CHECK_INT(n, rows[r].want);
		if (n > 0) {
			CHECK_STR(got, rows[r].msg);
			CHECK_STR(driver, "d.io");
		} else {
			CHECK(!strncmp(err, rows[r].msg, strlen(rows[r].msg)));
		}
		for (int i = 0; i < 3; i++) {
			kube_obj_unref(co[i]);
			kube_obj_unref(po[i]);
		}
	}
	kube_obj_unref(g);
	/* a group without a selector is refused with a clear error */
	g = vgs("", "\"source\":{}", NULL);
	const char *h[1], *d;
	char err[256];
	CHECK_INT(snap_group_volumes(kube_vgs_of(g), NULL, NULL, 0, h, &d, err, sizeof(err)), -1);
	CHECK(strstr(err, "none given") != NULL);
	kube_obj_unref(g);
}

static void test_group_plan(void)
{
#define VGS_PRE "\"source\":{\"volumeGroupSnapshotContentName\":\"groupsnapcontent-" GUID "\"}"
#define GHANDLES "\"source\":{\"groupSnapshotHandles\":{\"volumeGroupSnapshotHandle\":\"gh\",\"volumeSnapshotHandles\":[\"s1\",\"s2\"]}}"
#define GREF_NOUID "\"volumeGroupSnapshotRef\":{\"name\":\"g1\",\"namespace\":\"ns\"}"
#define GREADY "\"volumeGroupSnapshotHandle\":\"gh\",\"readyToUse\":true,\"creationTime\":\"2026-01-01T00:00:00Z\""
	static const struct {
		const char *what, *g_meta, *g_spec, *g_status;
		const char *c_spec, *c_status; /* c_spec NULL: no content */
		bool members_done;
		enum snap_group_step want;
		bool content_fin; /* the content holds its bound-protection finalizer */
	} rows[] = {
		{ "new group: create its content", "", SEL_APP, NULL, NULL, NULL, false, SNAP_G_CREATE_CONTENT, false },
		{ "neither a selector nor a content: refused", "", "\"source\":{}", NULL, NULL, NULL, false, SNAP_G_INVALID, false },
		{ "both a selector and a content: refused", "", "\"source\":{\"volumeGroupSnapshotContentName\":\"x\",\"selector\":{}}", NULL, NULL, NULL, false, SNAP_G_INVALID, false },
		{ "pre-provisioned, its content not there", "", VGS_PRE, NULL, NULL, NULL, true, SNAP_G_CONTENT_MISSING, false },
		{ "pre-provisioned names a dynamic content", "", VGS_PRE, NULL, GREF_OK ",\"source\":{\"volumeHandles\":[\"v1\"]}", NULL, true, SNAP_G_MISMATCH, false },
		{ "pre-provisioned names another group's content", "", VGS_PRE, NULL, GHANDLES ",\"volumeGroupSnapshotRef\":{\"name\":\"g2\",\"namespace\":\"ns\"}", NULL, true, SNAP_G_MISBOUND, false },
		{ "pre-provisioned, another uid in the ref", "", VGS_PRE, NULL, GHANDLES ",\"volumeGroupSnapshotRef\":{\"name\":\"g1\",\"namespace\":\"ns\",\"uid\":\"" UID "\"}", NULL, true, SNAP_G_MISBOUND, false },
		{ "pre-provisioned, unbound: finalizer first", "", VGS_PRE, NULL, GHANDLES "," GREF_NOUID, NULL, true, SNAP_G_ADD_FINALIZER, false },
		{ "pre-provisioned: the ref's uid", FINS(G_BOUND), VGS_PRE, NULL, GHANDLES "," GREF_NOUID, NULL, true, SNAP_G_BIND, false },
		{ "pre-provisioned: the group's class into the content", FINS(G_BOUND), "\"volumeGroupSnapshotClassName\":\"k\"," VGS_PRE, NULL, GHANDLES "," GREF_OK, NULL, true, SNAP_G_BIND, false },
		{ "pre-provisioned bound: the content's finalizer", FINS(G_BOUND), VGS_PRE, NULL, GHANDLES "," GREF_OK, NULL, true, SNAP_G_ADD_CONTENT_FINALIZER, false },
		{ "pre-provisioned, ready without members: ready", FINS(G_BOUND), VGS_PRE, NULL, GHANDLES "," GREF_OK, GREADY, true, SNAP_G_STATUS, true },
		{ "pre-provisioned settled", FINS(G_BOUND), VGS_PRE, "\"boundVolumeGroupSnapshotContentName\":\"groupsnapcontent-" GUID "\",\"readyToUse\":true,"
		  "\"creationTime\":\"2026-01-01T00:00:00Z\"", GHANDLES "," GREF_OK, GREADY, true, SNAP_G_NOTHING, true },
		{ "content made: finalizer first", "", SEL_APP, NULL, GREF_OK, NULL, false, SNAP_G_ADD_FINALIZER, false },
		{ "content not cut: bind the name", FINS(G_BOUND), SEL_APP, NULL, GREF_OK, NULL, false, SNAP_G_STATUS, false },
		{ "bound, waiting for the driver", FINS(G_BOUND), SEL_APP, "\"boundVolumeGroupSnapshotContentName\":\"groupsnapcontent-" GUID "\",\"readyToUse\":false",
		  GREF_OK, NULL, false, SNAP_G_NOTHING, false },
		{ "content ready: members", FINS(G_BOUND), SEL_APP, "\"boundVolumeGroupSnapshotContentName\":\"groupsnapcontent-" GUID "\"",
		  GREF_OK, GREADY, false, SNAP_G_CREATE_MEMBERS, false },
		{ "members made: ready", FINS(G_BOUND), SEL_APP, "\"boundVolumeGroupSnapshotContentName\":\"groupsnapcontent-" GUID "\"",
		  GREF_OK, GREADY, true, SNAP_G_STATUS, false },
		{ "settled", FINS(G_BOUND), SEL_APP, "\"boundVolumeGroupSnapshotContentName\":\"groupsnapcontent-" GUID "\",\"readyToUse\":true,"
		  "\"creationTime\":\"2026-01-01T00:00:00Z\"", GREF_OK, GREADY, true, SNAP_G_NOTHING, false },
		{ "a stranger's content under the name", "", SEL_APP, NULL,
		  "\"volumeGroupSnapshotRef\":{\"name\":\"g2\",\"namespace\":\"ns\",\"uid\":\"" UID "\"}", NULL, false, SNAP_G_NOTHING, false },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct kube_obj *g = vgs(rows[i].g_meta, rows[i].g_spec, rows[i].g_status);
		struct kube_obj *c = rows[i].c_spec ? vgsc(rows[i].content_fin ? FINS(G_VGSC) : "",
						     rows[i].c_spec, rows[i].c_status) : NULL;
		enum snap_group_step got = snap_plan_group(kube_vgs_of(g), kube_vgsc_of(c), rows[i].members_done);
		if (got != rows[i].want)
			fprintf(stderr, "row %s: %d\n", rows[i].what, got);
		CHECK_INT(got, rows[i].want);
		kube_obj_unref(g);
		kube_obj_unref(c);
	}
}

static void test_group_sidecar_plan(void)
{
#define GDELETING "\"annotations\":{\"" SNAP_GANN_BEING_DELETED "\":\"yes\"}"
#define GDEL_POLICY "\"deletionPolicy\":\"Delete\",\"source\":{\"volumeHandles\":[\"v1\"]}," GREF_OK
#define GPRE "\"deletionPolicy\":\"Delete\",\"source\":{\"groupSnapshotHandles\":{\"volumeGroupSnapshotHandle\":\"gh\",\"volumeSnapshotHandles\":[\"s1\"]}}"
#define GRET_POLICY "\"deletionPolicy\":\"Retain\",\"source\":{\"volumeHandles\":[\"v1\"]}," GREF_OK
	static const struct {
		const char *what, *meta, *spec, *status;
		enum snap_group_sidecar_step want;
	} rows[] = {
		{ "new: finalizer before the call", "", GDEL_POLICY, NULL, SNAP_GSC_ADD_FINALIZER },
		{ "then CreateVolumeGroupSnapshot", FINS(G_VGSC), GDEL_POLICY, NULL, SNAP_GSC_CREATE },
		{ "not ready: ask again", FINS(G_VGSC), GDEL_POLICY, "\"volumeGroupSnapshotHandle\":\"gh\",\"readyToUse\":false", SNAP_GSC_CREATE },
		{ "ready", FINS(G_VGSC), GDEL_POLICY, GREADY, SNAP_GSC_NOTHING },
		{ "deleted, Delete: DeleteVolumeGroupSnapshot", DEL "," FINS(G_VGSC) "," GDELETING, GDEL_POLICY, GREADY, SNAP_GSC_DELETE },
		{ "deleted, Retain: let it go", DEL "," FINS(G_VGSC) "," GDELETING, GRET_POLICY, GREADY, SNAP_GSC_REMOVE_FINALIZER },
		{ "deleted, never cut", DEL "," FINS(G_VGSC) "," GDELETING, GDEL_POLICY, NULL, SNAP_GSC_REMOVE_FINALIZER },
		{ "deleted without the controller's word: wait", DEL "," FINS(G_VGSC), GDEL_POLICY, GREADY, SNAP_GSC_NOTHING },
		{ "deleted while CreateVolumeGroupSnapshot has no answer: wait", DEL "," FINS(G_VGSC) ",\"annotations\":{\"" SNAP_GANN_BEING_DELETED "\":\"yes\",\"" SNAP_GANN_BEING_CREATED "\":\"yes\"}", GDEL_POLICY, NULL, SNAP_GSC_CREATE },
		{ "ready, the being-created mark left: drop it", FINS(G_VGSC) ",\"annotations\":{\"" SNAP_GANN_BEING_CREATED "\":\"yes\"}", GDEL_POLICY, GREADY, SNAP_GSC_CLEAR_CREATING },
		{ "pre-provisioned, unbound: GetVolumeGroupSnapshot, no finalizer of ours", "", GPRE, NULL, SNAP_GSC_GET },
		{ "pre-provisioned, not ready: ask again", FINS(G_VGSC), GPRE "," GREF_OK, "\"volumeGroupSnapshotHandle\":\"gh\",\"readyToUse\":false", SNAP_GSC_GET },
		{ "pre-provisioned ready", FINS(G_VGSC), GPRE "," GREF_OK, GREADY, SNAP_GSC_NOTHING },
		{ "pre-provisioned, deleted unbound: DeleteVolumeGroupSnapshot", DEL "," FINS(G_VGSC), GPRE, GREADY, SNAP_GSC_DELETE },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct kube_obj *c = vgsc(rows[i].meta, rows[i].spec, rows[i].status);
		enum snap_group_sidecar_step got = snap_plan_group_sidecar(kube_vgsc_of(c));
		if (got != rows[i].want)
			fprintf(stderr, "row %s: %d\n", rows[i].what, got);
		CHECK_INT(got, rows[i].want);
		kube_obj_unref(c);
	}
}

/*
 * Which updates csi-snapshotter syncs (updates.c): not the echoes of its own status, finalizer
 * and being-created writes while the next step stays the same, so a content that is not ready
 * keeps the queue's back-off (v8.7: group contents too); everything else upstream syncs.
 */
#define RV6 "\"resourceVersion\":\"6\","
#define GCREATING "\"annotations\":{\"" SNAP_GANN_BEING_CREATED "\":\"yes\"}"
#define GNOTREADY "\"volumeGroupSnapshotHandle\":\"gh\",\"readyToUse\":false"
static void test_group_sidecar_updates(void)
{
	static const struct {
		const char *what, *old_meta, *old_status, *new_meta, *new_status;
		bool want;
	} rows[] = {
		{ "a resync (same version)", FINS(G_VGSC), GNOTREADY, FINS(G_VGSC), GNOTREADY, true },
		{ "its not-ready answer written", FINS(G_VGSC) "," GCREATING, NULL, RV6 FINS(G_VGSC) "," GCREATING, GNOTREADY, false },
		{ "its being-created mark dropped", FINS(G_VGSC) "," GCREATING, GNOTREADY, RV6 FINS(G_VGSC), GNOTREADY, false },
		{ "its error written", FINS(G_VGSC), GNOTREADY, RV6 FINS(G_VGSC), GNOTREADY ",\"error\":{\"message\":\"x\"}", false },
		{ "turned ready", FINS(G_VGSC), GNOTREADY, RV6 FINS(G_VGSC), GREADY, true },
		{ "its finalizer added: the call is next", "", NULL, RV6 FINS(G_VGSC), NULL, true },
		{ "snapshot-controller's being-deleted mark", FINS(G_VGSC), GREADY, RV6 FINS(G_VGSC) "," GDELETING, GREADY, true },
		{ "deleted", FINS(G_VGSC), GNOTREADY, RV6 DEL "," FINS(G_VGSC), GNOTREADY, true },
		{ "its spec changed", "\"generation\":1," FINS(G_VGSC), GNOTREADY, RV6 "\"generation\":2," FINS(G_VGSC), GNOTREADY, true },
		{ "the handle cleared after the delete: the finalizer is next", DEL "," FINS(G_VGSC) "," GDELETING, GREADY, RV6 DEL "," FINS(G_VGSC) "," GDELETING, "\"readyToUse\":true", true },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct kube_obj *a = vgsc(rows[i].old_meta, GDEL_POLICY, rows[i].old_status);
		struct kube_obj *b = vgsc(rows[i].new_meta, GDEL_POLICY, rows[i].new_status);
		bool got = snap_group_sidecar_update_wanted(kube_vgsc_of(a), kube_vgsc_of(b));
		if (got != rows[i].want)
			fprintf(stderr, "row %s: %d\n", rows[i].what, got);
		CHECK(got == rows[i].want);
		kube_obj_unref(a);
		kube_obj_unref(b);
	}
}

#define NOTREADY "\"snapshotHandle\":\"h\",\"readyToUse\":false"
static void test_sidecar_updates(void)
{
	static const struct {
		const char *what, *old_meta, *old_status, *new_meta, *new_status;
		bool want;
	} rows[] = {
		{ "a resync (same version)", FINS(F_VSC), NOTREADY, FINS(F_VSC), NOTREADY, true },
		{ "its not-ready answer written", FINS(F_VSC) "," ANN(CREATING), NULL, RV6 FINS(F_VSC) "," ANN(CREATING), NOTREADY, false },
		{ "its being-created mark dropped", FINS(F_VSC) "," ANN(CREATING), NOTREADY, RV6 FINS(F_VSC), NOTREADY, false },
		{ "turned ready", FINS(F_VSC), NOTREADY, RV6 FINS(F_VSC), "\"snapshotHandle\":\"h\",\"readyToUse\":true", true },
		{ "deleted and marked by snapshot-controller", FINS(F_VSC), NOTREADY, RV6 DEL "," FINS(F_VSC) "," ANN(DELETING), NOTREADY, true },
		{ "its node label set", FINS(F_VSC), NOTREADY, RV6 FINS(F_VSC) ",\"labels\":{\"" SNAP_LABEL_MANAGED_BY "\":\"n1\"}", NOTREADY, true },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct kube_obj *a = vsc(rows[i].old_meta, DYN "," REF_OK, rows[i].old_status);
		struct kube_obj *b = vsc(rows[i].new_meta, DYN "," REF_OK, rows[i].new_status);
		bool got = snap_sidecar_update_wanted(kube_vsc_of(a), kube_vsc_of(b));
		if (got != rows[i].want)
			fprintf(stderr, "row %s: %d\n", rows[i].what, got);
		CHECK(got == rows[i].want);
		kube_obj_unref(a);
		kube_obj_unref(b);
	}
}

int main(void)
{
	RUN(test_decode);
	RUN(test_names);
	RUN(test_params);
	RUN(test_secret_ref);
	RUN(test_default_class);
	RUN(test_validate);
	RUN(test_finalizers);
	RUN(test_deletion);
	RUN(test_preprovisioned);
	RUN(test_status);
	RUN(test_source);
	RUN(test_content_plan);
	RUN(test_sidecar_plan);
	RUN(test_group_records);
	RUN(test_group_volumes);
	RUN(test_group_plan);
	RUN(test_group_sidecar_plan);
	RUN(test_sidecar_updates);
	RUN(test_group_sidecar_updates);
	return CHECK_DONE();
}
