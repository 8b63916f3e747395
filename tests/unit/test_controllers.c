/*
 * Unit tests for kcsi-controller-manager's pure rules. The attach/detach cases are seed 002's
 * loop as tables: the state fetched (desired pairs, actual pairs with their mount state, node
 * health, volumes with an operation in flight) goes in, the actions of "Act" come out, in order.
 *
 * Notation: a pair is "volume@node". Desired: "v@n" (ReadWriteOnce) or "v@n+" (multi-attach
 * allowed). Actual: "v@n" attached, "v@n?" uncertain, a trailing "m" for mounted (listed in
 * volumesInUse), "/<seconds>" for how long the detach has been wanted. Nodes: "n" Ready, "n!"
 * not Ready, "n#" out-of-service taint (absent nodes are not Ready). Actions: "detach v@n",
 * "detach v@n (timeout)", "detach v@n (out-of-service)", "wait v@n", "attach v@n", "multi v@n".
 */
#include "controllers/ad.h"
#include "controllers/binder.h"
#include "controllers/cm.h"
#include "base/sha256.h"
#include "check.h"

#include <stdlib.h>

#define MAXP 8
#define NOW (1000LL * 1000000000LL)
#define MAX_WAIT (360LL * 1000000000LL)

struct plan_case {
	const char *what;
	const char *desired[MAXP];
	const char *actual[MAXP];
	const char *nodes[MAXP];
	const char *busy[MAXP];
	const char *want; /* actions joined by "; " */
};

static const struct plan_case *cur;

static bool t_busy(const char *uniq, void *ud)
{
	(void)ud;
	for (int i = 0; i < MAXP && cur->busy[i]; i++)
		if (!strcmp(cur->busy[i], uniq))
			return true;
	return false;
}

static void t_health(const char *node, struct ad_node_health *h, void *ud)
{
	(void)ud;
	h->ready = h->out_of_service = false;
	for (int i = 0; i < MAXP && cur->nodes[i]; i++) {
		size_t l = strlen(node);
		if (strncmp(cur->nodes[i], node, l))
			continue;
		char f = cur->nodes[i][l];
		if (f == 0)
			h->ready = true;
		else if (f == '#')
			h->ready = true, h->out_of_service = true;
		else if (f != '!')
			continue;
		return;
	}
}

/* Splits "v@n<suffix>" into static buffers. */
static void split(const char *s, char *v, char *n, const char **suffix)
{
	const char *at = strchr(s, '@');
	size_t i = 0;

	memcpy(v, s, (size_t)(at - s));
	v[at - s] = 0;
	for (at++; *at && strchr("+?m/", *at) == NULL; at++)
		n[i++] = *at;
	n[i] = 0;
	*suffix = at;
}

static void run_plan_case(const struct plan_case *c)
{
	struct ad_desired d[MAXP];
	struct ad_actual a[MAXP];
	char dv[MAXP][32], dn[MAXP][32], av[MAXP][32], an[MAXP][32];
	struct ad_action out[2 * MAXP];
	size_t nd = 0, na = 0, n;
	char got[512] = "";
	const char *suf;

	cur = c;
	for (; nd < MAXP && c->desired[nd]; nd++) {
		split(c->desired[nd], dv[nd], dn[nd], &suf);
		d[nd] = (struct ad_desired){ dv[nd], dn[nd], *suf == '+' };
	}
	for (; na < MAXP && c->actual[na]; na++) {
		split(c->actual[na], av[na], an[na], &suf);
		a[na] = (struct ad_actual){ av[na], an[na], AD_ATTACHED, false, 0 };
		for (; *suf; suf++) {
			if (*suf == '?')
				a[na].state = AD_UNCERTAIN;
			else if (*suf == 'm')
				a[na].mounted = true;
			else if (*suf == '/') {
				a[na].detach_requested_ns = NOW - atoll(suf + 1) * 1000000000LL;
				break;
			}
		}
	}
	struct ad_plan_in in = { d, nd, a, na, t_busy, t_health, NULL, NOW, MAX_WAIT };
	n = ad_plan(&in, out, 2 * MAXP);
	for (size_t i = 0; i < n; i++) {
		const struct ad_action *x = &out[i];
		char one[128];
		static const char *kinds[] = { "detach", "wait", "attach", "multi" };
		static const char *why[] = { "", " (timeout)", " (out-of-service)" };
		const char *v = x->kind <= AD_ACT_WAIT_UNMOUNT ? av[x->index] : dv[x->index];
		const char *nn = x->kind <= AD_ACT_WAIT_UNMOUNT ? an[x->index] : dn[x->index];

		snprintf(one, sizeof(one), "%s%s %s@%s%s", i ? "; " : "", kinds[x->kind], v, nn,
			 why[x->forced]);
		strcat(got, one);
	}
	if (strcmp(got, c->want)) {
		fprintf(stderr, "case \"%s\":\n  want: %s\n  got:  %s\n", c->what, c->want, got);
		check_failures++;
	}
}

static void test_plan(void)
{
	static const struct plan_case cases[] = {
		{ "a new pod on a node: attach its volume",
		  { "v1@n1" }, { 0 }, { "n1" }, { 0 }, "attach v1@n1" },
		{ "already attached: nothing to do",
		  { "v1@n1" }, { "v1@n1m" }, { "n1" }, { 0 }, "" },
		{ "uncertain (a VolumeAttachment from before a crash) and wanted: attach again",
		  { "v1@n1" }, { "v1@n1?" }, { "n1" }, { 0 }, "attach v1@n1" },
		{ "uncertain and not wanted: detach (delete the VolumeAttachment)",
		  { 0 }, { "v1@n1?" }, { "n1" }, { 0 }, "detach v1@n1" },
		{ "pod gone, node no longer lists the volume in use: detach",
		  { 0 }, { "v1@n1" }, { "n1" }, { 0 }, "detach v1@n1" },
		{ "pod gone, still mounted on a healthy node: wait, however long",
		  { 0 }, { "v1@n1m/100000" }, { "n1" }, { 0 }, "wait v1@n1" },
		{ "still mounted on a NotReady node, within the max wait: wait",
		  { 0 }, { "v1@n1m/359" }, { "n1!" }, { 0 }, "wait v1@n1" },
		{ "still mounted on a NotReady node past the max wait: force detach",
		  { 0 }, { "v1@n1m/360" }, { "n1!" }, { 0 }, "detach v1@n1 (timeout)" },
		{ "still mounted, node deleted, past the max wait: force detach",
		  { 0 }, { "v1@gonem/400" }, { 0 }, { 0 }, "detach v1@gone (timeout)" },
		{ "still mounted, out-of-service taint: detach at once",
		  { 0 }, { "v1@n1m" }, { "n1#" }, { 0 }, "detach v1@n1 (out-of-service)" },
		{ "detaches come before attaches: pod moved from n1 to n2 (RWO)",
		  { "v1@n2" }, { "v1@n1" }, { "n1", "n2" }, { 0 }, "detach v1@n1" },
		{ "RWO attached on n1 and still used there: Multi-Attach for the pod on n2",
		  { "v1@n1", "v1@n2" }, { "v1@n1m" }, { "n1", "n2" }, { 0 }, "multi v1@n2" },
		{ "RWO uncertain on n1 counts as attached: Multi-Attach",
		  { "v1@n2" }, { "v1@n1?m" }, { "n1", "n2" }, { 0 }, "wait v1@n1; multi v1@n2" },
		{ "RWX attached on n1: attach to n2 too",
		  { "v1@n1+", "v1@n2+" }, { "v1@n1m" }, { "n1", "n2" }, { 0 }, "attach v1@n2" },
		{ "two pods on two nodes want a new RWO volume: one attach, the other waits its turn",
		  { "v1@n1", "v1@n2" }, { 0 }, { "n1", "n2" }, { 0 }, "attach v1@n1" },
		{ "operation in flight on the volume: nothing (per-volume lock)",
		  { "v1@n1" }, { "v2@n1" }, { "n1" }, { "v1", "v2" }, "" },
		{ "operation on another volume does not block this one",
		  { "v1@n1", "v3@n1" }, { "v2@n1" }, { "n1" }, { "v2" }, "attach v1@n1; attach v3@n1" },
		{ "many volumes: detaches first, in order, then attaches",
		  { "a@n1", "b@n2" }, { "c@n1", "d@n2m", "e@n2" }, { "n1", "n2" }, { 0 },
		  "detach c@n1; wait d@n2; detach e@n2; attach a@n1; attach b@n2" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		run_plan_case(&cases[i]);
}

/* The wanted-again rule: a pair that is desired again forgets when its detach was first wanted. */
static void test_plan_requested_time(void)
{
	struct ad_actual a = { "v", "n", AD_ATTACHED, true, 0 };
	struct ad_desired d = { "v", "n", false };
	struct plan_case none = { 0 };
	struct ad_action out[4];

	cur = &none;
	struct ad_plan_in in = { NULL, 0, &a, 1, NULL, t_health, NULL, NOW, MAX_WAIT };
	CHECK_INT(ad_plan(&in, out, 4), 1);
	CHECK_INT(out[0].kind, AD_ACT_WAIT_UNMOUNT);
	CHECK_INT(a.detach_requested_ns, NOW);
	in.desired = &d;
	in.ndesired = 1;
	CHECK_INT(ad_plan(&in, out, 4), 0);
	CHECK_INT(a.detach_requested_ns, 0);
}

static void test_names(void)
{
	char buf[128], drv[64], h[64];
	char hex[65];

	sha256_hex("", 0, hex);
	CHECK_STR(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	sha256_hex("abc", 3, hex);
	CHECK_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, hex);
	CHECK_STR(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");

	CHECK_STR(ad_unique_name("loop.kcsi.io", "vol-1", buf, sizeof(buf)),
		  "kubernetes.io/csi/loop.kcsi.io^vol-1");
	CHECK_INT(ad_parse_unique_name("kubernetes.io/csi/loop.kcsi.io^vol^1", drv, sizeof(drv), h,
				       sizeof(h)), 0);
	CHECK_STR(drv, "loop.kcsi.io");
	CHECK_STR(h, "vol^1");
	CHECK_INT(ad_parse_unique_name("kubernetes.io/gce-pd/x", drv, sizeof(drv), h, sizeof(h)), -1);
	CHECK_INT(ad_parse_unique_name("kubernetes.io/csi/^x", drv, sizeof(drv), h, sizeof(h)), -1);

	/* csi-<sha256(handle + driver + node)>, as `printf %s%s%s h d n | sha256sum` */
	ad_va_name(AD_NAMING_KUBERNETES, "loop.kcsi.io", "vol-1", "pv-1", "node-1", buf, sizeof(buf));
	sha256_hex("vol-1loop.kcsi.ionode-1", 23, hex);
	CHECK(!strncmp(buf, "csi-", 4) && !strcmp(buf + 4, hex));
	ad_va_name(AD_NAMING_SEED, "loop.kcsi.io", "vol-1", "pv-1", "node-1", buf, sizeof(buf));
	sha256_hex("pv-1node-1", 10, hex);
	CHECK(!strncmp(buf, "pv-", 3) && !strcmp(buf + 3, hex));
}

static void test_controllers_flag(void)
{
	static const struct {
		const char *spec, *name;
		bool def, want;
	} cases[] = {
		{ "*", "attachdetach", true, true },
		{ "*", "volume-scheduler", false, false },
		{ "*,volume-scheduler", "volume-scheduler", false, true },
		{ "*,-attachdetach", "attachdetach", true, false },
		{ "-attachdetach,*", "attachdetach", true, false },
		{ "attachdetach", "pv-protection", true, false },
		{ "attachdetach", "attachdetach", true, true },
		{ "", "attachdetach", true, false },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (cm_controller_enabled(cases[i].spec, cases[i].name, cases[i].def) != cases[i].want) {
			fprintf(stderr, "--controllers=%s %s: want %d\n", cases[i].spec, cases[i].name,
				cases[i].want);
			check_failures++;
		}
	const struct cm_controller *all[] = { &cm_attachdetach };
	char err[128];
	CHECK_INT(cm_check_controllers("*,-attachdetach", all, 1, err, sizeof(err)), 0);
	CHECK_INT(cm_check_controllers("*,bogus", all, 1, err, sizeof(err)), -1);
	CHECK(strstr(err, "bogus") != NULL);
}

/* ---- persistentvolume-binder: which volume a claim gets ---- */

static struct kube_obj *decode(const struct kube_kind *k, const char *json)
{
	json_error_t je;
	json_t *j = json_loads(json, 0, &je);
	char err[256];
	struct kube_obj *o = kube_decode_json(k, j, err, sizeof(err));

	if (!o)
		fprintf(stderr, "decode: %s: %s\n", err, json);
	json_decref(j);
	return o;
}

static struct kube_obj *mkpv(const char *name, const char *size, const char *extra_spec,
			     const char *phase, const char *labels)
{
	char buf[2048];

	snprintf(buf, sizeof(buf),
		 "{\"metadata\":{\"name\":\"%s\",\"uid\":\"u-%s\",\"resourceVersion\":\"1\",\"labels\":%s},"
		 "\"spec\":{\"capacity\":{\"storage\":\"%s\"},\"accessModes\":[\"ReadWriteOnce\"],"
		 "\"csi\":{\"driver\":\"d\",\"volumeHandle\":\"h\"}%s},\"status\":{\"phase\":\"%s\"}}",
		 name, name, labels ? labels : "{}", size, extra_spec ? extra_spec : "", phase);
	return decode(&KUBE_KIND_PERSISTENTVOLUME, buf);
}

static void test_binder_match(void)
{
	struct kube_obj *pvs[] = {
		mkpv("big", "5Gi", NULL, "Available", NULL),
		mkpv("small", "1Gi", NULL, "Available", NULL),
		mkpv("tiny", "100Mi", NULL, "Available", NULL),
		mkpv("gold", "2Gi", NULL, "Available", "{\"tier\":\"gold\"}"),
		mkpv("fast", "1Gi", ",\"storageClassName\":\"fast\"", "Available", NULL),
		mkpv("block", "1Gi", ",\"volumeMode\":\"Block\"", "Available", NULL),
		mkpv("rwx", "1Gi", ",\"accessModes\":[\"ReadWriteMany\",\"ReadWriteOnce\"]", "Available", NULL),
		mkpv("taken", "1Gi", ",\"claimRef\":{\"namespace\":\"default\",\"name\":\"other\",\"uid\":\"x\"}", "Bound", NULL),
		mkpv("pre", "3Gi", ",\"claimRef\":{\"namespace\":\"default\",\"name\":\"c-pre\"}", "Available", NULL),
		mkpv("zone-b", "1Gi", ",\"storageClassName\":\"local\",\"nodeAffinity\":{\"required\":{\"nodeSelectorTerms\":"
				      "[{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"In\",\"values\":[\"b\"]}]}]}}",
		     "Available", NULL),
		mkpv("released", "1Gi", ",\"storageClassName\":\"old\"", "Released", NULL),
	};
	static const struct {
		const char *what;
		const char *claim_spec; /* inside "spec":{...} */
		bool delay;
		const char *node_labels; /* NULL: no node chosen */
		const char *want;        /* NULL: no match */
	} cases[] = {
		{ "smallest volume that fits", "\"resources\":{\"requests\":{\"storage\":\"500Mi\"}}", false, NULL, "small" },
		{ "exact size fits", "\"resources\":{\"requests\":{\"storage\":\"100Mi\"}}", false, NULL, "tiny" },
		{ "too big for all but one", "\"resources\":{\"requests\":{\"storage\":\"4Gi\"}}", false, NULL, "big" },
		{ "too big for all", "\"resources\":{\"requests\":{\"storage\":\"50Gi\"}}", false, NULL, NULL },
		{ "class must match", "\"storageClassName\":\"fast\",\"resources\":{\"requests\":{\"storage\":\"1Gi\"}}", false, NULL, "fast" },
		{ "volumeMode must match", "\"volumeMode\":\"Block\",\"resources\":{\"requests\":{\"storage\":\"1Gi\"}}", false, NULL, "block" },
		{ "access modes must be offered", "\"accessModes\":[\"ReadWriteMany\"],\"resources\":{\"requests\":{\"storage\":\"1Gi\"}}", false, NULL, "rwx" },
		{ "selector picks labelled volumes", "\"selector\":{\"matchLabels\":{\"tier\":\"gold\"}},\"resources\":{\"requests\":{\"storage\":\"1Gi\"}}", false, NULL, "gold" },
		{ "selector with expressions", "\"selector\":{\"matchExpressions\":[{\"key\":\"tier\",\"operator\":\"In\",\"values\":[\"gold\",\"silver\"]}]}", false, NULL, "gold" },
		{ "selector nobody matches", "\"selector\":{\"matchLabels\":{\"tier\":\"iron\"}}", false, NULL, NULL },
		{ "WaitForFirstConsumer without a node: unbound volumes are the scheduler's",
		  "\"storageClassName\":\"local\",\"resources\":{\"requests\":{\"storage\":\"1Gi\"}}", true, NULL, NULL },
		{ "WaitForFirstConsumer, node in the volume's zone", "\"storageClassName\":\"local\",\"resources\":{\"requests\":{\"storage\":\"1Gi\"}}",
		  false, "{\"zone\":\"b\"}", "zone-b" },
		{ "WaitForFirstConsumer, node elsewhere", "\"storageClassName\":\"local\",\"resources\":{\"requests\":{\"storage\":\"1Gi\"}}",
		  false, "{\"zone\":\"a\"}", NULL },
		{ "a Released volume is not Available", "\"storageClassName\":\"old\"", false, NULL, NULL },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char buf[1024];
		struct kube_obj *co, *no = NULL;

		snprintf(buf, sizeof(buf),
			 "{\"metadata\":{\"name\":\"c\",\"namespace\":\"default\",\"uid\":\"cu\",\"resourceVersion\":\"1\"},"
			 "\"spec\":{\"accessModes\":[\"ReadWriteOnce\"],\"storageClassName\":\"\",%s}}", cases[i].claim_spec);
		co = decode(&KUBE_KIND_PERSISTENTVOLUMECLAIM, buf);
		if (cases[i].node_labels) {
			snprintf(buf, sizeof(buf), "{\"metadata\":{\"name\":\"n\",\"labels\":%s}}", cases[i].node_labels);
			no = decode(&KUBE_KIND_NODE_T, buf);
		}
		const struct kube_pv *got = pvb_best_match(kube_pvc_of(co), pvs, sizeof(pvs) / sizeof(pvs[0]),
							   cases[i].delay, kube_node_of(no));
		const char *gn = got ? got->meta.name : NULL;
		if ((gn == NULL) != (cases[i].want == NULL) || (gn && strcmp(gn, cases[i].want))) {
			fprintf(stderr, "binder case \"%s\": want %s, got %s\n", cases[i].what,
				cases[i].want ? cases[i].want : "none", gn ? gn : "none");
			check_failures++;
		}
		kube_obj_unref(co);
		kube_obj_unref(no);
	}

	/* A volume pre-bound to the claim wins over a smaller free one, even when delayed. */
	struct kube_obj *co = decode(&KUBE_KIND_PERSISTENTVOLUMECLAIM,
		"{\"metadata\":{\"name\":\"c-pre\",\"namespace\":\"default\",\"uid\":\"cu\"},"
		"\"spec\":{\"accessModes\":[\"ReadWriteOnce\"],\"storageClassName\":\"\",\"resources\":{\"requests\":{\"storage\":\"1Gi\"}}}}");
	const struct kube_pv *got = pvb_best_match(kube_pvc_of(co), pvs, sizeof(pvs) / sizeof(pvs[0]), true, NULL);
	CHECK(got && !strcmp(got->meta.name, "pre"));
	CHECK(pvb_prebound_to(kube_pv_of(pvs[8]), kube_pvc_of(co)));
	CHECK(!pvb_prebound_to(kube_pv_of(pvs[7]), kube_pvc_of(co)));
	CHECK_STR(pvb_mismatch(kube_pv_of(pvs[2]), kube_pvc_of(co)), "requested PV is too small");
	CHECK_STR(pvb_mismatch(kube_pv_of(pvs[4]), kube_pvc_of(co)), "storageClassName does not match");
	kube_obj_unref(co);
	for (size_t i = 0; i < sizeof(pvs) / sizeof(pvs[0]); i++)
		kube_obj_unref(pvs[i]);
}

int main(void)
{
	RUN(test_plan);
	RUN(test_plan_requested_time);
	RUN(test_names);
	RUN(test_controllers_flag);
	RUN(test_binder_match);
	return CHECK_DONE();
}
