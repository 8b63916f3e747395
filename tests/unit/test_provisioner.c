/*
 * Unit tests of csi-provisioner's decisions: tables that read like seed 004 and upstream's rules.
 */
#include "check.h"
#include "provisioner/prov.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static struct kube_obj *decode(const struct kube_kind *k, const char *json)
{
	json_error_t je;
	json_t *j = json_loads(json, 0, &je);
	char err[256];
	struct kube_obj *o = j ? kube_decode_json(k, j, err, sizeof(err)) : NULL;
	if (!o)
		fprintf(stderr, "decode failed: %s %s\n", je.text, j ? err : "");
	json_decref(j);
	return o;
}

/* ---- which claims (upstream shouldProvision) ---- */
static void test_should_provision(void)
{
	static const struct {
		const char *what, *ann, *volume, *node;
		bool wffc, has_class;
		enum prov_claim_decision want;
	} rows[] = {
		/* what                      provisioner annotation          volumeName node  WFFC  class  decision */
		{ "ours, immediate",          "volume.kubernetes.io/storage-provisioner", NULL, NULL, false, true, PROV_PROVISION },
		{ "beta annotation",          "volume.beta.kubernetes.io/storage-provisioner", NULL, NULL, false, true, PROV_PROVISION },
		{ "no annotation yet",        NULL, NULL, NULL, false, true, PROV_IGNORE },
		{ "already bound",            "volume.kubernetes.io/storage-provisioner", "pv-1", NULL, false, true, PROV_IGNORE },
		{ "class missing",            "volume.kubernetes.io/storage-provisioner", NULL, NULL, false, false, PROV_NO_CLASS },
		{ "WFFC, no node yet",        "volume.kubernetes.io/storage-provisioner", NULL, NULL, true, true, PROV_WAIT_FOR_NODE },
		{ "WFFC, node selected",      "volume.kubernetes.io/storage-provisioner", NULL, "n1", true, true, PROV_PROVISION },
	};
	struct kube_obj *sc_imm = decode(&KUBE_KIND_STORAGECLASS,
		"{\"metadata\":{\"name\":\"sc\",\"uid\":\"u\",\"resourceVersion\":\"1\"},\"provisioner\":\"d.io\"}");
	struct kube_obj *sc_wffc = decode(&KUBE_KIND_STORAGECLASS,
		"{\"metadata\":{\"name\":\"sc\",\"uid\":\"u\",\"resourceVersion\":\"1\"},\"provisioner\":\"d.io\",\"volumeBindingMode\":\"WaitForFirstConsumer\"}");
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		char js[1024], ann[512] = "";
		int n = 0;
		if (rows[i].ann)
			n += snprintf(ann + n, sizeof(ann) - (size_t)n, "\"%s\":\"d.io\"", rows[i].ann);
		if (rows[i].node)
			n += snprintf(ann + n, sizeof(ann) - (size_t)n, "%s\"volume.kubernetes.io/selected-node\":\"%s\"",
				      n ? "," : "", rows[i].node);
		snprintf(js, sizeof(js),
			 "{\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\",\"uid\":\"6a3f4b1e-0000-4000-8000-000000000001\","
			 "\"resourceVersion\":\"1\",\"annotations\":{%s}},\"spec\":{\"storageClassName\":\"sc\"%s%s%s}}",
			 ann, rows[i].volume ? ",\"volumeName\":\"" : "", rows[i].volume ? rows[i].volume : "",
			 rows[i].volume ? "\"" : "");
		struct kube_obj *o = decode(&KUBE_KIND_PERSISTENTVOLUMECLAIM, js);
		const struct kube_storageclass *sc =
			rows[i].has_class ? kube_storageclass_of(rows[i].wffc ? sc_wffc : sc_imm) : NULL;
		enum prov_claim_decision d = prov_should_provision(kube_pvc_of(o), "d.io", sc);
		if (d != rows[i].want)
			fprintf(stderr, "row \"%s\": got %d want %d\n", rows[i].what, d, rows[i].want);
		CHECK_INT(d, rows[i].want);
		kube_obj_unref(o);
	}
	/* Another driver's claim is never ours. */
	struct kube_obj *o = decode(&KUBE_KIND_PERSISTENTVOLUMECLAIM,
		"{\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\",\"uid\":\"u\",\"resourceVersion\":\"1\","
		"\"annotations\":{\"volume.kubernetes.io/storage-provisioner\":\"other.io\"}},\"spec\":{\"storageClassName\":\"sc\"}}");
	CHECK_INT(prov_should_provision(kube_pvc_of(o), "d.io", kube_storageclass_of(sc_imm)), PROV_IGNORE);
	kube_obj_unref(o);
	kube_obj_unref(sc_imm);
	kube_obj_unref(sc_wffc);
}

static void test_volume_name(void)
{
	static const struct {
		const char *prefix, *uid;
		int len;
		const char *want; /* NULL: error */
	} rows[] = {
		{ "pvc", "6a3f4b1e-1c2d-4e5f-8a9b-0c1d2e3f4a5b", -1, "pvc-6a3f4b1e-1c2d-4e5f-8a9b-0c1d2e3f4a5b" },
		{ "pvc", "6a3f4b1e-1c2d-4e5f-8a9b-0c1d2e3f4a5b", 8, "pvc-6a3f4b1e" },
		{ "vol", "6a3f4b1e-1c2d-4e5f-8a9b-0c1d2e3f4a5b", 16, "vol-6a3f4b1e1c2d4e5f" },
		{ "pvc", "6a3f4b1e-1c2d-4e5f-8a9b-0c1d2e3f4a5b", 0, "pvc-" },
		{ "", "6a3f", -1, NULL },
		{ "pvc", "", -1, NULL },
		{ "pvc", "6a3f-4b", 40, NULL },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		char out[256], err[256];
		int rc = prov_volume_name(rows[i].prefix, rows[i].uid, rows[i].len, out, sizeof(out), err,
					  sizeof(err));
		if (rows[i].want) {
			CHECK_INT(rc, 0);
			CHECK_STR(out, rows[i].want);
		} else {
			CHECK(rc != 0);
		}
	}
}

static void test_params(void)
{
	struct kube_kv p1[] = { { "csi.storage.k8s.io/fstype", "xfs" }, { "type", "fast" },
				{ "csi.storage.k8s.io/provisioner-secret-name", "s" },
				{ "csi.storage.k8s.io/provisioner-secret-namespace", "ns" },
				{ "csiProvisionerSecretName", "kept" } };
	struct kube_kv out[8];
	char err[256];
	const char *fs;

	CHECK_INT(prov_fstype(p1, 5, "ext4", &fs, err, sizeof(err)), 0);
	CHECK_STR(fs, "xfs");
	CHECK_INT(prov_fstype(p1 + 1, 1, "ext4", &fs, err, sizeof(err)), 0);
	CHECK_STR(fs, "ext4");
	CHECK_INT(prov_fstype(p1 + 1, 1, NULL, &fs, err, sizeof(err)), 0);
	CHECK_STR(fs, "");
	struct kube_kv both[] = { { "fsType", "ext3" }, { "csi.storage.k8s.io/fstype", "xfs" } };
	CHECK(prov_fstype(both, 2, NULL, &fs, err, sizeof(err)) != 0);
	CHECK(strstr(err, "both") != NULL);
	/* Stripping keeps the driver's keys and the deprecated csiXxx ones, drops csi.storage.k8s.io/. */
	int n = prov_strip_params(p1, 5, out, err, sizeof(err));
	CHECK_INT(n, 2);
	CHECK_STR(out[0].key, "type");
	CHECK_STR(out[1].key, "csiProvisionerSecretName");
	struct kube_kv bad[] = { { "csi.storage.k8s.io/bogus", "x" } };
	CHECK_INT(prov_strip_params(bad, 1, out, err, sizeof(err)), -1);
	CHECK(strstr(err, "unknown parameter key") != NULL);
}

static void test_expand(void)
{
	struct kube_kv vars[] = { { "pv.name", "pvc-1" }, { "pvc.namespace", "team" },
				  { "pvc.annotations['a/b']", "sekrit-x" } };
	char out[256], err[256];

	CHECK_INT(prov_expand("${pvc.namespace}-${pv.name}", vars, 3, out, sizeof(out), err, sizeof(err)), 0);
	CHECK_STR(out, "team-pvc-1");
	CHECK_INT(prov_expand("${pvc.annotations['a/b']}", vars, 3, out, sizeof(out), err, sizeof(err)), 0);
	CHECK_STR(out, "sekrit-x");
	CHECK_INT(prov_expand("plain", vars, 3, out, sizeof(out), err, sizeof(err)), 0);
	CHECK_STR(out, "plain");
	CHECK_INT(prov_expand("${pvc.name}", vars, 3, out, sizeof(out), err, sizeof(err)), -1);
	CHECK(strstr(err, "invalid tokens") && strstr(err, "pvc.name"));
}

/* Secret references from StorageClass parameters (upstream getSecretReference). */
static void test_secret_refs(void)
{
	struct kube_kv ann[] = { { "team/secret", "from-annotation" } };
	struct prov_template_ctx ctx = { "pvc-abc", "data", "team", ann, 1 };
	struct prov_template_ctx noann = { "pvc-abc", "data", "team", NULL, 0 };
	static const struct {
		const char *what;
		enum prov_secret_kind kind;
		struct kube_kv params[4];
		size_t n;
		bool annotations;
		const char *name, *ns; /* NULL name: no reference; "ERR": error */
	} rows[] = {
		{ "none", PROV_SECRET_PROVISIONER, { { "x", "y" } }, 1, true, NULL, NULL },
		{ "provisioner, templates", PROV_SECRET_PROVISIONER,
		  { { "csi.storage.k8s.io/provisioner-secret-name", "${pvc.name}-creds" },
		    { "csi.storage.k8s.io/provisioner-secret-namespace", "${pvc.namespace}" } }, 2, false,
		  "data-creds", "team" },
		{ "deprecated keys", PROV_SECRET_PROVISIONER,
		  { { "csiProvisionerSecretName", "s1" }, { "csiProvisionerSecretNamespace", "kube-system" } },
		  2, false, "s1", "kube-system" },
		{ "both current and deprecated", PROV_SECRET_PROVISIONER,
		  { { "csiProvisionerSecretName", "s1" }, { "csiProvisionerSecretNamespace", "k" },
		    { "csi.storage.k8s.io/provisioner-secret-name", "s2" },
		    { "csi.storage.k8s.io/provisioner-secret-namespace", "k" } }, 4, false, "ERR", NULL },
		{ "name without namespace", PROV_SECRET_NODE_STAGE,
		  { { "csi.storage.k8s.io/node-stage-secret-name", "s" } }, 1, false, "ERR", NULL },
		{ "default secret for every kind", PROV_SECRET_CONTROLLER_EXPAND,
		  { { "csi.storage.k8s.io/secret-name", "all" },
		    { "csi.storage.k8s.io/secret-namespace", "${pv.name}" } }, 2, false, "all", "pvc-abc" },
		{ "annotation in a node-publish name", PROV_SECRET_NODE_PUBLISH,
		  { { "csi.storage.k8s.io/node-publish-secret-name", "${pvc.annotations['team/secret']}" },
		    { "csi.storage.k8s.io/node-publish-secret-namespace", "team" } }, 2, true,
		  "from-annotation", "team" },
		{ "annotation without annotations", PROV_SECRET_PROVISIONER,
		  { { "csi.storage.k8s.io/provisioner-secret-name", "${pvc.annotations['team/secret']}" },
		    { "csi.storage.k8s.io/provisioner-secret-namespace", "team" } }, 2, false, "ERR", NULL },
		{ "claim name not allowed in namespace", PROV_SECRET_NODE_STAGE,
		  { { "csi.storage.k8s.io/node-stage-secret-name", "s" },
		    { "csi.storage.k8s.io/node-stage-secret-namespace", "${pvc.name}" } }, 2, false, "ERR", NULL },
		{ "resolves to an invalid name", PROV_SECRET_NODE_STAGE,
		  { { "csi.storage.k8s.io/node-stage-secret-name", "Bad_${pvc.name}" },
		    { "csi.storage.k8s.io/node-stage-secret-namespace", "team" } }, 2, false, "ERR", NULL },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct prov_secret_ref ref;
		char err[512];
		int rc = prov_secret_ref(rows[i].kind, rows[i].params, rows[i].n,
					 rows[i].annotations ? &ctx : &noann, &ref, err, sizeof(err));
		if (rows[i].name && !strcmp(rows[i].name, "ERR")) {
			if (rc == 0)
				fprintf(stderr, "row \"%s\": want an error\n", rows[i].what);
			CHECK(rc != 0);
		} else if (!rows[i].name) {
			CHECK_INT(rc, 0);
			CHECK(!ref.set);
		} else {
			if (rc)
				fprintf(stderr, "row \"%s\": %s\n", rows[i].what, err);
			CHECK_INT(rc, 0);
			CHECK(ref.set);
			CHECK_STR(ref.name, rows[i].name);
			CHECK_STR(ref.ns, rows[i].ns);
		}
	}
}

static void test_access_modes_and_errors(void)
{
	CHECK_INT(prov_access_mode(KUBE_RWO, false), CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER);
	CHECK_INT(prov_access_mode(KUBE_RWO, true), CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_MULTI_WRITER);
	CHECK_INT(prov_access_mode(KUBE_ROX, false), CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_READER_ONLY);
	CHECK_INT(prov_access_mode(KUBE_RWX, false), CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_MULTI_WRITER);
	CHECK_INT(prov_access_mode(KUBE_RWOP, false), CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER);
	CHECK_INT(prov_access_mode(KUBE_RWOP, true), CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_SINGLE_WRITER);

	/* Seed 004, "CSI error and timeout handling". */
	static const struct { int code; bool resched; enum prov_state want; } rows[] = {
		{ 4 /* DEADLINE_EXCEEDED */, false, PROV_IN_BACKGROUND },
		{ 4, true, PROV_IN_BACKGROUND },
		{ 14 /* UNAVAILABLE */, false, PROV_IN_BACKGROUND },
		{ 10 /* ABORTED */, true, PROV_IN_BACKGROUND },
		{ 1 /* CANCELLED */, false, PROV_IN_BACKGROUND },
		{ 8 /* RESOURCE_EXHAUSTED */, false, PROV_FINISHED },
		{ 8, true, PROV_RESCHEDULE },
		{ 3 /* INVALID_ARGUMENT */, false, PROV_FINISHED },
		{ 3, true, PROV_FINISHED },
		{ 13 /* INTERNAL */, false, PROV_FINISHED },
		/* a final error other than RESOURCE_EXHAUSTED keeps the selected node (upstream) */
		{ 13, true, PROV_FINISHED },
		{ 5 /* NOT_FOUND */, true, PROV_FINISHED },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		CHECK_INT(prov_check_error(rows[i].code, rows[i].resched), rows[i].want);
}

/* ---- topology: seed 004's table ---- */

static const char *const zone_key[] = { "topology.kcsi.io/zone" };
static const struct kube_kv labels_a[] = { { "topology.kcsi.io/zone", "a" } };
static const struct kube_kv labels_b[] = { { "topology.kcsi.io/zone", "b" } };
static const struct kube_kv labels_c[] = { { "topology.kcsi.io/zone", "c" } };
static const struct kube_kv labels_d[] = { { "topology.kcsi.io/zone", "d" } };
static const struct prov_topo_node cluster[] = {
	{ .name = "n-a", .has_csinode = true, .keys = zone_key, .nkeys = 1, .has_node = true,
	  .labels = labels_a, .nlabels = 1 },
	{ .name = "n-b", .has_csinode = true, .keys = zone_key, .nkeys = 1, .has_node = true,
	  .labels = labels_b, .nlabels = 1 },
	{ .name = "n-c", .has_csinode = true, .keys = zone_key, .nkeys = 1, .has_node = true,
	  .labels = labels_c, .nlabels = 1 },
	/* labelled for zone c, but without a CSINode */
	{ .name = "n-nodriver", .has_node = true, .labels = labels_c, .nlabels = 1 },
	/* labelled for zone d, but its CSINode registers no keys for the driver: no segment */
	{ .name = "n-d-nodriver", .has_csinode = true, .has_node = true, .labels = labels_d,
	  .nlabels = 1 },
};

/* "a,b" for requisite or preferred lists of one-key terms. */
static void zones(const struct prov_terms *t, char *out, size_t len)
{
	size_t n = 0;
	out[0] = 0;
	for (size_t i = 0; i < t->n; i++)
		n += (size_t)snprintf(out + n, len - n, "%s%s", i ? "," : "", t->t[i].n ? t->t[i].segs[0].value : "");
}

static void test_topology_table(void)
{
	const char *ab[] = { "a", "b" };
	struct kube_node_selector_req req = { "topology.kcsi.io/zone", ab, 2, KUBE_OP_IN };
	struct kube_node_selector_term allowed = { &req, 1 };
	static const struct {
		const char *row;
		const char *selected; /* delayed binding when set */
		bool strict, allowed, immediate;
		const char *requisite, *preferred; /* NULL requisite: no requirements */
	} rows[] = {
		/*  row                                   selected strict allowed immediate  requisite  preferred */
		{ "1 delayed, strict",                    "n-b", true,  false, true,  "b",     "b" },
		{ "1 delayed, strict, allowed",           "n-b", true,  true,  true,  "b",     "b" },
		{ "2 delayed, aggregated cluster",        "n-b", false, false, true,  "a,b,c", "b,c,a" },
		{ "3 delayed, allowed topologies",        "n-b", false, true,  true,  "a,b",   "b,a" },
		{ "4 immediate, allowed topologies",      NULL,  false, true,  true,  "a,b",   "*" },
		{ "5 immediate, aggregated cluster",      NULL,  false, false, true,  "a,b,c", "*" },
		{ "6 immediate, --immediate-topology=false", NULL, false, false, false, NULL,  NULL },
		{ "4 with --immediate-topology=false",    NULL,  false, true,  false, "a,b",   "*" },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct prov_topo_input in = {
			.pvc_name = "data-web-1", .allowed = rows[i].allowed ? &allowed : NULL,
			.nallowed = rows[i].allowed ? 1 : 0, .selected_node = rows[i].selected,
			.strict = rows[i].strict, .immediate = rows[i].immediate, .nodes = cluster,
			.nnodes = 5,
		};
		struct prov_terms rq, pf;
		char err[256], got_r[128], got_p[128];
		int rc = prov_accessibility(&in, &rq, &pf, err, sizeof(err));
		CHECK_INT(rc, 0);
		zones(&rq, got_r, sizeof(got_r));
		zones(&pf, got_p, sizeof(got_p));
		if (!rows[i].requisite) {
			CHECK_INT(rq.n, 0);
			CHECK_INT(pf.n, 0);
		} else {
			if (strcmp(got_r, rows[i].requisite))
				fprintf(stderr, "row %s: requisite %s\n", rows[i].row, got_r);
			CHECK_STR(got_r, rows[i].requisite);
			if (rows[i].preferred[0] == '*') {
				/* a rotation of the requisite */
				CHECK_INT(pf.n, rq.n);
			} else {
				if (strcmp(got_p, rows[i].preferred))
					fprintf(stderr, "row %s: preferred %s\n", rows[i].row, got_p);
				CHECK_STR(got_p, rows[i].preferred);
			}
		}
		prov_terms_free(&rq);
		prov_terms_free(&pf);
	}
}

static void test_topology_errors_and_spreading(void)
{
	const char *ab[] = { "a", "b" };
	struct kube_node_selector_req req = { "topology.kcsi.io/zone", ab, 2, KUBE_OP_IN };
	struct kube_node_selector_term allowed = { &req, 1 };
	struct prov_terms rq, pf;
	char err[256];
	struct prov_topo_input in = { .pvc_name = "c", .selected_node = "n-nodriver", .nodes = cluster,
				      .nnodes = 5, .immediate = true };

	CHECK_INT(prov_accessibility(&in, &rq, &pf, err, sizeof(err)), -1);
	CHECK(strstr(err, "no topology key found for node n-nodriver") != NULL);
	in.selected_node = "n-c";
	in.strict = true;
	in.allowed = &allowed;
	in.nallowed = 1;
	CHECK_INT(prov_accessibility(&in, &rq, &pf, err, sizeof(err)), -1);
	CHECK_STR(err, "selected node '\"n-c\"' topology '[{topology.kcsi.io/zone c}]' is not in allowed topologies: "
		       "[[{topology.kcsi.io/zone a}] [{topology.kcsi.io/zone b}]]");
	/* Without --strict-topology the allowed topologies are the requisite, and the selected
	 * node's zone must be among them. */
	in.strict = false;
	CHECK_INT(prov_accessibility(&in, &rq, &pf, err, sizeof(err)), -1);
	CHECK_STR(err, "topology [{topology.kcsi.io/zone c}] from selected node \"n-c\" is not in requisite: "
		       "[[{topology.kcsi.io/zone a}] [{topology.kcsi.io/zone b}]]");
	CHECK_INT(rq.n + pf.n, 0);
	in.selected_node = "gone";
	CHECK_INT(prov_accessibility(&in, &rq, &pf, err, sizeof(err)), -1);
	CHECK_STR(err, "no topology key found for node gone");

	/* StatefulSet spreading: replicas 0,1,2 of one set start in three different zones, and the
	 * claims of one replica (data-web-1, logs-web-1) start in the same zone. */
	char first[3][8];
	for (int r = 0; r < 3; r++) {
		char name[32];
		snprintf(name, sizeof(name), "data-web-%d", r);
		struct prov_topo_input im = { .pvc_name = name, .nodes = cluster, .nnodes = 5,
					      .immediate = true };
		CHECK_INT(prov_accessibility(&im, &rq, &pf, err, sizeof(err)), 0);
		CHECK_INT(pf.n, 3);
		snprintf(first[r], sizeof(first[r]), "%s", pf.t[0].segs[0].value);
		prov_terms_free(&rq);
		prov_terms_free(&pf);
	}
	CHECK(strcmp(first[0], first[1]) && strcmp(first[1], first[2]) && strcmp(first[0], first[2]));
	uint32_t h1, i1, h2, i2;
	prov_pvc_name_hash("data-web-1", &h1, &i1);
	prov_pvc_name_hash("logs-web-1", &h2, &i2);
	CHECK(h1 == h2 && i1 == 1 && i2 == 1);
	prov_pvc_name_hash("plain", &h1, &i1);
	CHECK_INT(i1, 0);
	/* FNV-1 32 of "" is the offset basis, of "a" 0x050c5d7e (Go's hash/fnv New32). */
	prov_pvc_name_hash("a", &h1, &i1);
	CHECK_INT(h1, 0x050c5d7eu);
}

/* ---- topology: v6.4's aggregation per registered key set ---- */

/* "k=v+k2=v2;k=v" for a list of terms. */
static void terms_str(const struct prov_terms *t, char *out, size_t len)
{
	size_t n = 0;
	out[0] = 0;
	for (size_t i = 0; i < t->n && n < len; i++)
		for (size_t j = 0; j < t->t[i].n && n < len; j++)
			n += (size_t)snprintf(out + n, len - n, "%s%s=%s", j ? "+" : i ? ";" : "",
					      t->t[i].segs[j].key, t->t[i].segs[j].value);
}

static const char *const k_zone[] = { "zone" };
static const char *const k_zone_rack[] = { "zone", "rack" }; /* as a CSINode lists them */
static const char *const k_rack_zone[] = { "rack", "zone" };
static const struct kube_kv l_za[] = { { "zone", "a" } };
static const struct kube_kv l_za_r1[] = { { "zone", "a" }, { "rack", "r1" } };
static const struct kube_kv l_r2_zb[] = { { "rack", "r2" }, { "zone", "b" } };
static const struct kube_kv l_zc_r3[] = { { "zone", "c" }, { "rack", "r3" } };
static const struct kube_kv l_zd[] = { { "zone", "d" } };
static const struct kube_kv l_ze[] = { { "zone", "e" }, { "os", "linux" } };
#define NODE(nm, k, nk, l, nl) { .name = nm, .has_csinode = (nk) > 0, .keys = k, .nkeys = nk, \
				 .has_node = (nl) > 0, .labels = l, .nlabels = nl }
/* Part of the cluster reports zones, part zones and racks; some nodes carry the labels without
 * the driver having registered the keys there. */
static const struct prov_topo_node mixed[] = {
	NODE("z1", k_zone, 1, l_za, 1),
	NODE("zr1", k_zone_rack, 2, l_za_r1, 2),
	NODE("zr2", k_rack_zone, 2, l_r2_zb, 2),
	NODE("labels-only", NULL, 0, l_zc_r3, 2),        /* no CSINode: left out */
	{ .name = "no-keys", .has_csinode = true, .has_node = true, .labels = l_zd, .nlabels = 1 },
	NODE("no-rack-label", k_zone_rack, 2, l_ze, 2),  /* counts under {zone} only */
	NODE("csinode-only", k_zone, 1, NULL, 0),        /* no Node: no labels */
};

static void test_topology_key_sets(void)
{
	static const struct {
		const char *row;
		const char *selected;
		size_t nnodes; /* the first n of mixed */
		const char *requisite, *preferred; /* preferred NULL: a rotation of the requisite */
	} rows[] = {
		{ "immediate: every registered key set, each term once, shorter terms first", NULL, 7,
		  "zone=a;zone=b;zone=e;rack=r1+zone=a;rack=r2+zone=b", NULL },
		{ "immediate, one key set registered", NULL, 1, "zone=a", NULL },
		{ "delayed on a zone-and-rack node: its key set, nodes that registered it", "zr1", 7,
		  "rack=r1+zone=a;rack=r2+zone=b", "rack=r1+zone=a;rack=r2+zone=b" },
		{ "delayed on zr2: its term first", "zr2", 7,
		  "rack=r1+zone=a;rack=r2+zone=b", "rack=r2+zone=b;rack=r1+zone=a" },
		{ "delayed on a zone node: every node that registered zone", "z1", 7,
		  "zone=a;zone=b;zone=e", "zone=a;zone=b;zone=e" },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct prov_topo_input in = { .pvc_name = "data-db-2", .selected_node = rows[i].selected,
					      .immediate = true, .nodes = mixed,
					      .nnodes = rows[i].nnodes };
		struct prov_terms rq, pf;
		char err[256] = "", got_r[256], got_p[256];
		CHECK_INT(prov_accessibility(&in, &rq, &pf, err, sizeof(err)), 0);
		terms_str(&rq, got_r, sizeof(got_r));
		terms_str(&pf, got_p, sizeof(got_p));
		if (strcmp(got_r, rows[i].requisite))
			fprintf(stderr, "row %s: requisite %s (%s)\n", rows[i].row, got_r, err);
		CHECK_STR(got_r, rows[i].requisite);
		if (rows[i].preferred) {
			CHECK_STR(got_p, rows[i].preferred);
		} else {
			/* StatefulSet spreading: rotated by hash(set name) + replica index */
			uint32_t h, idx;
			struct prov_term rot[8];
			prov_pvc_name_hash("data-db-2", &h, &idx);
			CHECK(rq.n <= 8);
			for (size_t k = 0; k < rq.n && k < 8; k++)
				rot[k] = rq.t[(k + (h + idx) % rq.n) % rq.n];
			struct prov_terms want = { rot, rq.n };
			char want_p[256];
			terms_str(&want, want_p, sizeof(want_p));
			CHECK_STR(got_p, want_p);
		}
		prov_terms_free(&rq);
		prov_terms_free(&pf);
	}

	/* What refuses a claim, with upstream's words. */
	static const struct prov_topo_node unregistered[] = {
		NODE("labels-only", NULL, 0, l_zc_r3, 2),
		{ .name = "no-keys", .has_csinode = true, .has_node = true, .labels = l_zd, .nlabels = 1 },
	};
	static const struct prov_topo_node unlabelled[] = {
		NODE("csinode-only", k_zone, 1, NULL, 0),
		NODE("rack-zone-only", k_rack_zone, 2, NULL, 0),
		NODE("labels-only", NULL, 0, l_zc_r3, 2),
	};
	static const struct {
		const char *row;
		const struct prov_topo_node *nodes;
		size_t nnodes;
		const char *selected;
		const char *err;
	} bad[] = {
		{ "immediate, no node registered keys (labels alone do not count)", unregistered, 2, NULL,
		  "no available topology found" },
		{ "immediate, no node at all", NULL, 0, NULL, "no available topology found" },
		{ "immediate, keys registered but no Node labelled with them", unlabelled, 3, NULL,
		  "topologyKeys [[rack zone] [zone]] were not found on any nodes" },
		{ "delayed on a node whose driver registered no keys", mixed, 7, "no-keys",
		  "no topology key found for node no-keys" },
		{ "delayed on a node without the labels of its keys", mixed, 7, "no-rack-label",
		  "topology labels from selected node map[os:linux zone:e] does not match topology keys from CSINode [zone rack]" },
		{ "delayed on a node without a Node object", mixed, 7, "csinode-only",
		  "topology labels from selected node map[] does not match topology keys from CSINode [zone]" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct prov_topo_input in = { .pvc_name = "c", .selected_node = bad[i].selected,
					      .immediate = true, .nodes = bad[i].nodes,
					      .nnodes = bad[i].nnodes };
		struct prov_terms rq, pf;
		char err[256] = "";
		CHECK_INT(prov_accessibility(&in, &rq, &pf, err, sizeof(err)), -1);
		if (strcmp(err, bad[i].err))
			fprintf(stderr, "row %s: %s\n", bad[i].row, err);
		CHECK_STR(err, bad[i].err);
		CHECK_INT(rq.n + pf.n, 0);
	}
	/* --immediate-topology=false: no requirement at all, registered or not. */
	struct prov_topo_input off = { .pvc_name = "c", .nodes = unregistered, .nnodes = 2 };
	struct prov_terms rq, pf;
	char err[64];
	CHECK_INT(prov_accessibility(&off, &rq, &pf, err, sizeof(err)), 0);
	CHECK_INT(rq.n + pf.n, 0);
}

static void test_pv_json(void)
{
	struct prov_secret_ref secrets[PROV_SECRET_KINDS] = { 0 };
	struct kube_kv attrs[] = { { PROV_IDENTITY_KEY, "1-2-d.io" }, { "k", "v" } };
	const char *mo[] = { "noatime" };
	struct kube_kv seg[] = { { "topology.kcsi.io/zone", "a" } };
	struct prov_term t = { seg, 1 };
	struct prov_terms aff = { &t, 1 };

	secrets[PROV_SECRET_PROVISIONER] = (struct prov_secret_ref){ true, "ps", "team" };
	secrets[PROV_SECRET_NODE_STAGE] = (struct prov_secret_ref){ true, "ns-s", "team" };
	struct prov_pv_spec s = {
		.name = "pvc-1", .driver = "d.io", .volume_handle = "vol-1", .fs_type = "ext4",
		.storage_class = "fast", .attributes = attrs, .nattributes = 2, .capacity = 1 << 30,
		.access_modes = KUBE_RWO, .reclaim = 0, .mount_options = mo, .nmount_options = 1,
		.secrets = secrets, .claim_ns = "team", .claim_name = "data", .claim_uid = "u-1",
		.claim_rv = "42", .finalizer = true, .affinity = &aff,
	};
	/* Written without jansson: parse it back (valid JSON) and compare it in sorted form. */
	char *raw = prov_pv_json(&s);
	json_t *pv = json_loads(raw, 0, NULL);
	CHECK(pv != NULL);
	free(raw);
	char *txt = json_dumps(pv, JSON_SORT_KEYS | JSON_COMPACT);
	CHECK(strstr(txt, "\"pv.kubernetes.io/provisioned-by\":\"d.io\""));
	CHECK(strstr(txt, "\"volume.kubernetes.io/provisioner-deletion-secret-name\":\"ps\""));
	CHECK(strstr(txt, "\"volume.kubernetes.io/provisioner-deletion-secret-namespace\":\"team\""));
	CHECK(strstr(txt, "\"finalizers\":[\"external-provisioner.volume.kubernetes.io/finalizer\"]"));
	CHECK(strstr(txt, "\"capacity\":{\"storage\":\"1Gi\"}"));
	CHECK(strstr(txt, "\"claimRef\":{\"apiVersion\":\"v1\",\"kind\":\"PersistentVolumeClaim\",\"name\":\"data\",\"namespace\":\"team\",\"resourceVersion\":\"42\",\"uid\":\"u-1\"}"));
	CHECK(strstr(txt, "\"nodeStageSecretRef\":{\"name\":\"ns-s\",\"namespace\":\"team\"}"));
	CHECK(!strstr(txt, "controllerPublishSecretRef"));
	CHECK(strstr(txt, "\"fsType\":\"ext4\""));
	CHECK(strstr(txt, "\"mountOptions\":[\"noatime\"]"));
	CHECK(strstr(txt, "\"persistentVolumeReclaimPolicy\":\"Delete\""));
	CHECK(strstr(txt, "\"volumeMode\":\"Filesystem\""));
	CHECK(strstr(txt, "\"nodeAffinity\":{\"required\":{\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\"topology.kcsi.io/zone\",\"operator\":\"In\",\"values\":[\"a\"]}]}]}}"));
	CHECK(strstr(txt, "\"storage.kubernetes.io/csiProvisionerIdentity\":\"1-2-d.io\""));
	CHECK(!strstr(txt, "readOnly"));
	free(txt);
	json_decref(pv);
	/* Block: no fsType; no provisioner secret: empty deletion annotations; no finalizer. */
	s.block = true;
	s.finalizer = false;
	s.affinity = NULL;
	secrets[PROV_SECRET_PROVISIONER].set = false;
	s.reclaim = 1;
	s.volume_handle = "v\xff\"1"; /* a driver's id that is not UTF-8 still gives valid JSON */
	raw = prov_pv_json(&s);
	pv = json_loads(raw, 0, NULL);
	CHECK(pv != NULL);
	free(raw);
	txt = json_dumps(pv, JSON_SORT_KEYS | JSON_COMPACT);
	CHECK(!strstr(txt, "fsType"));
	CHECK(!strstr(txt, "finalizers"));
	CHECK(!strstr(txt, "nodeAffinity"));
	CHECK(strstr(txt, "\"volume.kubernetes.io/provisioner-deletion-secret-name\":\"\""));
	CHECK(strstr(txt, "\"volumeMode\":\"Block\""));
	CHECK(strstr(txt, "\"persistentVolumeReclaimPolicy\":\"Retain\""));
	CHECK(strstr(txt, "\"volumeHandle\":\"v\xef\xbf\xbd\\\"1\""));
	free(txt);
	json_decref(pv);
	/* Filesystem without a fstype (none in the class, no --default-fstype): no fsType at all,
	 * as upstream's omitempty writes it, not "" */
	s.block = false;
	s.fs_type = "";
	raw = prov_pv_json(&s);
	CHECK(raw && !strstr(raw, "fsType"));
	free(raw);
}

static void test_gates_and_metrics(void)
{
	struct flag_map none = { NULL, 0 };
	struct prov_gates g;
	char err[256];

	/* v6.3's defaults: Topology is GA and on, the PV finalizer is always added. */
	CHECK_INT(prov_parse_gates(&none, &g, err, sizeof(err)), 0);
	CHECK(g.topology && g.honor_pv_reclaim_policy && !g.cross_namespace_source);
	/* Upstream's gate list, generic apiserver gates and AllAlpha included, is accepted. */
	struct flag_kv items[] = { { "Topology", "false" }, { "VolumeAttributesClass", "true" },
				   { "ReleaseLeaderElectionOnExit", "1" }, { "AllAlpha", "true" },
				   { "WatchList", "false" } };
	struct flag_map m = { items, 5 };
	CHECK_INT(prov_parse_gates(&m, &g, err, sizeof(err)), 0);
	CHECK(!g.topology && g.cross_namespace_source); /* AllAlpha switches the alpha gate on */
	/* Removed in v6.2: refused as upstream's binary refuses it. */
	struct flag_kv gone[] = { { "HonorPVReclaimPolicy", "true" } };
	struct flag_map mg = { gone, 1 };
	CHECK_INT(prov_parse_gates(&mg, &g, err, sizeof(err)), -1);
	CHECK(strstr(err, "unrecognized feature gate: HonorPVReclaimPolicy") != NULL);
	/* A gate locked to its default refuses the other value. */
	struct flag_kv locked[] = { { "WatchCacheInitializationPostStartHook", "false" } };
	struct flag_map ml = { locked, 1 };
	CHECK_INT(prov_parse_gates(&ml, &g, err, sizeof(err)), -1);
	CHECK(strstr(err, "cannot set feature gate WatchCacheInitializationPostStartHook to false, feature is locked to true") != NULL);
	struct flag_kv bad[] = { { "NoSuchGate", "true" } };
	struct flag_map mb = { bad, 1 };
	CHECK_INT(prov_parse_gates(&mb, &g, err, sizeof(err)), -1);
	CHECK(strstr(err, "unrecognized feature gate: NoSuchGate") != NULL);
	struct flag_kv badv[] = { { "Topology", "yes" } };
	struct flag_map mv = { badv, 1 };
	CHECK_INT(prov_parse_gates(&mv, &g, err, sizeof(err)), -1);

	struct prov_metrics *pm = prov_metrics_new();
	prov_metrics_provision(pm, "fast", "", true, 30 * 1000 * 1000);
	prov_metrics_provision(pm, "fast", "", false, 0);
	prov_metrics_provision(pm, "fast", "Evil\"Kind\n", false, 0);
	prov_metrics_delete(pm, "fast", true, 2 * 1000 * 1000);
	struct strbuf sb = STRBUF_INIT;
	prov_metrics_render(pm, &sb);
	CHECK(strstr(sb.buf, "controller_persistentvolumeclaim_provision_total{class=\"fast\",source=\"\"} 1\n"));
	CHECK(strstr(sb.buf, "controller_persistentvolumeclaim_provision_failed_total{class=\"fast\",source=\"\"} 1\n"));
	CHECK(strstr(sb.buf, "controller_persistentvolumeclaim_provision_duration_seconds_bucket{class=\"fast\",source=\"\",le=\"0.05\"} 1\n"));
	CHECK(strstr(sb.buf, "controller_persistentvolume_delete_total{class=\"fast\"} 1\n"));
	CHECK(strstr(sb.buf, "source=\"Evil\\\"Kind\\n\""));
	strbuf_release(&sb);
	prov_metrics_free(pm);
}

/* Node deployment: the delay before owning a claim, and which node deletes a volume. */
static void test_node_deployment(void)
{
	const int64_t s = 1000000000LL;
	struct { int64_t base, max; unsigned attempts; double rnd; unsigned rank, n; int64_t want; } rows[] = {
		{ 20 * s, 60 * s, 0, 0.0, 0, 1, 0 },          /* the random part starts at zero */
		{ 20 * s, 60 * s, 0, 0.5, 0, 1, 10 * s },     /* first try: up to the base delay */
		{ 20 * s, 60 * s, 1, 0.5, 0, 1, 20 * s },     /* after a conflict: doubled */
		{ 20 * s, 60 * s, 5, 0.5, 0, 1, 30 * s },     /* capped by the max delay */
		{ 1 * s, 60 * s, 200, 0.5, 0, 1, 30 * s },    /* no overflow with many attempts */
		{ 0, 0, 3, 0.9, 0, 1, 0 },                    /* no delay at all */
		{ 2 * s, 60 * s, 0, 1.5, 0, 1, 0 },           /* a bad random number is treated as 0 */
		{ 20 * s, 60 * s, 0, 0.9, 0, 101, 0 },        /* first in the claim's order: at once */
		{ 20 * s, 60 * s, 0, 0.0, 1, 101, 10 * s },   /* the next: after half the base ... */
		{ 20 * s, 60 * s, 0, 0.5, 1, 101, 15 * s },   /* ... within its half-base slot */
		{ 20 * s, 60 * s, 0, 0.5, 2, 101, 25 * s },   /* the third: half a base later */
		{ 20 * s, 60 * s, 0, 0.0, 100, 101, 60 * s }, /* the last: at most the max delay */
		{ 20 * s, 60 * s, 0, 0.0, 500, 101, 60 * s }, /* a rank out of range */
		{ 20 * s, 60 * s, 1, 0.5, 0, 101, 20 * s },   /* after a conflict: uniform, doubled */
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		int64_t got = prov_owner_delay(rows[i].base, rows[i].max, rows[i].attempts, rows[i].rnd,
					       rows[i].rank, rows[i].n);
		if (llabs(got - rows[i].want) > 1000) /* within a microsecond of rounding */
			CHECK_INT(got, rows[i].want);
	}
	/* Every instance computes the same order; over many claims each node goes first about as
	 * often as any other (10 nodes, 2000 claims: 200 each on average). */
	CHECK(prov_owner_score("uid-1", "node-1") == prov_owner_score("uid-1", "node-1"));
	CHECK(prov_owner_score("uid-1", "node-1") != prov_owner_score("uid-1", "node-2"));
	int first[10] = { 0 };
	for (int c = 0; c < 2000; c++) {
		char uid[64], node[16];
		snprintf(uid, sizeof(uid), "3f1c%04d-aa00-4d21-9d2e-%012d", c, c * 7);
		int best = 0;
		uint64_t best_score = UINT64_MAX;
		for (int k = 0; k < 10; k++) {
			snprintf(node, sizeof(node), "node-%d", k);
			uint64_t sc = prov_owner_score(uid, node);
			if (sc < best_score) {
				best_score = sc;
				best = k;
			}
		}
		first[best]++;
	}
	for (int k = 0; k < 10; k++)
		CHECK(first[k] > 140 && first[k] < 260);

	struct kube_obj *pv = decode(&KUBE_KIND_PERSISTENTVOLUME,
		"{\"metadata\":{\"name\":\"pv1\"},\"spec\":{\"csi\":{\"driver\":\"d.io\",\"volumeHandle\":\"h\"},"
		"\"nodeAffinity\":{\"required\":{\"nodeSelectorTerms\":[{\"matchExpressions\":"
		"[{\"key\":\"zone\",\"operator\":\"In\",\"values\":[\"n1\"]}]}]}}}}");
	struct kube_obj *bare = decode(&KUBE_KIND_PERSISTENTVOLUME,
		"{\"metadata\":{\"name\":\"pv2\"},\"spec\":{\"csi\":{\"driver\":\"d.io\",\"volumeHandle\":\"h\"}}}");
	struct kube_kv n1[] = { { "zone", "n1" } }, n2[] = { { "zone", "n2" } };
	CHECK(prov_pv_on_node(kube_pv_of(pv), n1, 1));
	CHECK(!prov_pv_on_node(kube_pv_of(pv), n2, 1));
	CHECK(!prov_pv_on_node(kube_pv_of(pv), NULL, 0));
	CHECK(!prov_pv_on_node(kube_pv_of(bare), n1, 1)); /* no affinity: no node's to delete */
	kube_obj_unref(pv);
	kube_obj_unref(bare);

	char buf[96];
	prov_capacity_managed_by(NULL, buf, sizeof(buf));
	CHECK_STR(buf, "external-provisioner");
	prov_capacity_managed_by("node-1", buf, sizeof(buf));
	CHECK_STR(buf, "external-provisioner-node-1");
	/* Upstream's getNameWithMaxLength, values from a Go run of its rule (hash/fnv): */
	prov_capacity_managed_by("a-very-long-node-name-that-does-not-fit-into-a-label-value.example.com", buf, sizeof(buf));
	CHECK_STR(buf, "external-provisioner-ab5bdb89"); /* node alone too long: hash of all */
	prov_capacity_managed_by("worker-node-0123456789-abcdefghij-klmnopq", buf, sizeof(buf));
	CHECK_STR(buf, "external-provisioner-worker-node-0123456789-abcdefghij-klmnopq"); /* 62 */
	prov_capacity_managed_by("worker-node-0123456789-abcdefghij-klmnopqrst", buf, sizeof(buf));
	CHECK_STR(buf, "external--53f40b57-worker-node-0123456789-abcdefghij-klmnopqrst");
}

/* ---- the snapshot finalizer sweep: which claims still hold a snapshot (upstream's index) ---- */
static void test_snapshot_restore_pending(void)
{
	static const struct {
		const char *what, *phase, *source;
		const char *want; /* the snapshot key, NULL: holds nothing */
	} rows[] = {
		/* what                         status.phase  spec.dataSource                                                  key */
		{ "Pending restore",            "Pending", "{\"apiGroup\":\"snapshot.storage.k8s.io\",\"kind\":\"VolumeSnapshot\",\"name\":\"s1\"}", "ns/s1" },
		{ "no phase yet",               NULL,      "{\"apiGroup\":\"snapshot.storage.k8s.io\",\"kind\":\"VolumeSnapshot\",\"name\":\"s1\"}", "ns/s1" },
		{ "no API group",               "Pending", "{\"kind\":\"VolumeSnapshot\",\"name\":\"s2\"}", "ns/s2" },
		{ "Bound: restore done",        "Bound",   "{\"apiGroup\":\"snapshot.storage.k8s.io\",\"kind\":\"VolumeSnapshot\",\"name\":\"s1\"}", NULL },
		{ "Lost",                       "Lost",    "{\"apiGroup\":\"snapshot.storage.k8s.io\",\"kind\":\"VolumeSnapshot\",\"name\":\"s1\"}", NULL },
		{ "another group's kind",       "Pending", "{\"apiGroup\":\"example.com\",\"kind\":\"VolumeSnapshot\",\"name\":\"s1\"}", NULL },
		{ "a clone",                    "Pending", "{\"kind\":\"PersistentVolumeClaim\",\"name\":\"src\"}", NULL },
		{ "no data source",             "Pending", NULL, NULL },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		char js[1024], st[64] = "", key[512] = "";
		if (rows[i].phase)
			snprintf(st, sizeof(st), ",\"status\":{\"phase\":\"%s\"}", rows[i].phase);
		snprintf(js, sizeof(js),
			 "{\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\",\"uid\":\"u\",\"resourceVersion\":\"1\"},"
			 "\"spec\":{\"storageClassName\":\"sc\"%s%s}%s}",
			 rows[i].source ? ",\"dataSource\":" : "", rows[i].source ? rows[i].source : "", st);
		struct kube_obj *o = decode(&KUBE_KIND_PERSISTENTVOLUMECLAIM, js);
		bool held = prov_snapshot_restore_pending(kube_pvc_of(o), key, sizeof(key));
		if (held != (rows[i].want != NULL))
			fprintf(stderr, "row \"%s\": held %d\n", rows[i].what, held);
		CHECK(held == (rows[i].want != NULL));
		if (rows[i].want)
			CHECK_STR(key, rows[i].want);
		kube_obj_unref(o);
	}
	CHECK(!prov_snapshot_restore_pending(NULL, (char[8]){ 0 }, 8)); /* not a claim */
}

int main(void)
{
	RUN(test_should_provision);
	RUN(test_volume_name);
	RUN(test_params);
	RUN(test_expand);
	RUN(test_secret_refs);
	RUN(test_access_modes_and_errors);
	RUN(test_topology_table);
	RUN(test_topology_errors_and_spreading);
	RUN(test_topology_key_sets);
	RUN(test_pv_json);
	RUN(test_gates_and_metrics);
	RUN(test_node_deployment);
	RUN(test_snapshot_restore_pending);
	return CHECK_DONE();
}
