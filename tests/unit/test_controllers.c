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
#include "controllers/nl.h"
#include "controllers/te.h"
#include "controllers/vs.h"
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

static bool t_no_force; /* --disable-force-detach-on-timeout for the cases being run */

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
		else if (f == '%') /* NotReady and out-of-service */
			h->out_of_service = true;
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
	struct ad_plan_in in = { d, nd, a, na, t_busy, t_health, NULL, NOW, MAX_WAIT, t_no_force };
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
		{ "not mounted, wanted detached past the max wait: upstream counts it as forced",
		  { 0 }, { "v1@n1/400" }, { "n1" }, { 0 }, "detach v1@n1 (timeout)" },
		{ "still mounted on a Ready node past the max wait: wait (only an unhealthy node is forced)",
		  { 0 }, { "v1@n1m/400" }, { "n1" }, { 0 }, "wait v1@n1" },
		{ "out-of-service past the max wait: counted as timeout, as upstream's reconciler does",
		  { 0 }, { "v1@n1m/400" }, { "n1%" }, { 0 }, "detach v1@n1 (timeout)" },
	};
	static const struct plan_case no_force[] = {
		{ "--disable-force-detach-on-timeout: a NotReady node's mounted volume waits for ever",
		  { 0 }, { "v1@n1m/100000" }, { "n1!" }, { 0 }, "wait v1@n1" },
		{ "--disable-force-detach-on-timeout: the out-of-service taint still detaches",
		  { 0 }, { "v1@n1m/100000" }, { "n1%" }, { 0 }, "detach v1@n1 (out-of-service)" },
		{ "--disable-force-detach-on-timeout: an unmounted volume is a normal detach",
		  { 0 }, { "v1@n1/100000" }, { "n1!" }, { 0 }, "detach v1@n1" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		run_plan_case(&cases[i]);
	t_no_force = true;
	for (size_t i = 0; i < sizeof(no_force) / sizeof(no_force[0]); i++)
		run_plan_case(&no_force[i]);
	t_no_force = false;
}

/* The wanted-again rule: a pair that is desired again forgets when its detach was first wanted. */
static void test_plan_requested_time(void)
{
	struct ad_actual a = { "v", "n", AD_ATTACHED, true, 0 };
	struct ad_desired d = { "v", "n", false };
	struct plan_case none = { 0 };
	struct ad_action out[4];

	cur = &none;
	struct ad_plan_in in = { NULL, 0, &a, 1, NULL, t_health, NULL, NOW, MAX_WAIT, false };
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


/* ---- nodelifecycle: nl_plan ----
 *
 * Notation: conditions "Type=Status" (output: ":Reason" follows when the plan wrote one);
 * taints "key:Effect", a key without '/' meaning node.kubernetes.io/<key>; in the output a
 * trailing "+" marks a taint the plan added (timeAdded = now). "age" is how long ago the node
 * last showed a sign of life; the grace period is 50 s.
 */
struct nl_case {
	const char *what;
	const char *conds[6];
	const char *taints[6];
	bool unschedulable;
	int age;                 /* seconds since the last sign of life */
	const char *want_conds;  /* NULL: unchanged */
	const char *want_taints; /* NULL: unchanged; else the whole list */
};

static const struct nl_case nl_cases[] = {
	{ "Ready True: the not-ready taint a node registered with goes",
	  { "Ready=True" }, { "not-ready:NoSchedule" }, false, 1, NULL, "" },
	{ "Ready True: both unreachable taints go, a taint of someone else stays",
	  { "Ready=True" }, { "unreachable:NoSchedule", "example.com/gpu:NoSchedule", "unreachable:NoExecute" },
	  false, 1, NULL, "example.com/gpu:NoSchedule" },
	{ "Ready False: not-ready for scheduling and execution",
	  { "Ready=False" }, { 0 }, false, 1, NULL, "not-ready:NoSchedule+ not-ready:NoExecute+" },
	{ "Ready False after Unknown: unreachable swapped for not-ready",
	  { "Ready=False" }, { "unreachable:NoSchedule", "unreachable:NoExecute" }, false, 1, NULL,
	  "not-ready:NoSchedule+ not-ready:NoExecute+" },
	{ "silent for 51 s: every condition Unknown, the unreachable taints",
	  { "Ready=True", "MemoryPressure=False", "NetworkUnavailable=False" }, { 0 }, false, 51,
	  "Ready=Unknown:NodeStatusUnknown MemoryPressure=Unknown:NodeStatusUnknown NetworkUnavailable=False "
	  "DiskPressure=Unknown:NodeStatusNeverUpdated PIDPressure=Unknown:NodeStatusNeverUpdated",
	  "unreachable:NoSchedule+ unreachable:NoExecute+" },
	{ "silent for 49 s: still within the grace period",
	  { "Ready=True" }, { 0 }, false, 49, NULL, NULL },
	{ "already Unknown and tainted: nothing to write",
	  { "Ready=Unknown", "MemoryPressure=Unknown", "DiskPressure=Unknown", "PIDPressure=Unknown" },
	  { "unreachable:NoSchedule", "unreachable:NoExecute" }, false, 300, NULL, NULL },
	{ "back: Ready True again, the unreachable taints go",
	  { "Ready=True" }, { "unreachable:NoSchedule", "unreachable:NoExecute" }, false, 0, NULL, "" },
	{ "no Ready condition yet: NoExecute untouched, NoSchedule follows the (absent) conditions",
	  { 0 }, { "not-ready:NoSchedule", "not-ready:NoExecute" }, false, 10, NULL, "not-ready:NoExecute" },
	{ "pressure and cordon: their NoSchedule taints",
	  { "Ready=True", "MemoryPressure=True", "DiskPressure=False", "PIDPressure=True" }, { 0 }, true, 1,
	  NULL, "memory-pressure:NoSchedule+ pid-pressure:NoSchedule+ unschedulable:NoSchedule+" },
	{ "PreferNoSchedule with a managed key is not ours",
	  { "Ready=True" }, { "not-ready:PreferNoSchedule" }, false, 1, NULL, NULL },
	{ "a taint already there keeps its timeAdded",
	  { "Ready=False" }, { "not-ready:NoSchedule" }, false, 1, NULL, "not-ready:NoSchedule not-ready:NoExecute+" },
};

static const char *nl_key(const char *k, char *buf, size_t len)
{
	if (strchr(k, '/'))
		return k;
	snprintf(buf, len, "node.kubernetes.io/%s", k);
	return buf;
}

static void nl_short(const char *k, char *buf, size_t len)
{
	const char *p = "node.kubernetes.io/";
	snprintf(buf, len, "%s", strncmp(k, p, strlen(p)) ? k : k + strlen(p));
}

static void run_nl_case(const struct nl_case *c)
{
	struct kube_node_condition conds[6];
	struct kube_taint taints[6];
	char ctype[6][64], cstat[6][64], tkey[6][160], teff[6][64], kb[160];
	size_t nc = 0, nt = 0;
	const int64_t now = NOW;
	struct nl_plan_out out;
	char got[1024] = "";

	for (; nc < 6 && c->conds[nc]; nc++) {
		const char *eq = strchr(c->conds[nc], '=');
		snprintf(ctype[nc], sizeof(ctype[nc]), "%.*s", (int)(eq - c->conds[nc]), c->conds[nc]);
		snprintf(cstat[nc], sizeof(cstat[nc]), "%s", eq + 1);
		conds[nc] = (struct kube_node_condition){ ctype[nc], cstat[nc], NULL, NULL, "hb", "tr" };
	}
	for (; nt < 6 && c->taints[nt]; nt++) {
		const char *colon = strrchr(c->taints[nt], ':');
		char k[64];
		snprintf(k, sizeof(k), "%.*s", (int)(colon - c->taints[nt]), c->taints[nt]);
		snprintf(tkey[nt], sizeof(tkey[nt]), "%s", nl_key(k, kb, sizeof(kb)));
		snprintf(teff[nt], sizeof(teff[nt]), "%s", colon + 1);
		taints[nt] = (struct kube_taint){ tkey[nt], "", teff[nt], NULL };
	}
	struct nl_plan_in in = { conds, nc, taints, nt, c->unschedulable, "2020-01-01T00:00:00Z",
				 now - (int64_t)c->age * NSEC_PER_SEC, 50 * NSEC_PER_SEC, now,
				 NL_NOEXEC_ADD };
	nl_plan(&in, &out);
	if (!c->want_conds != !out.conds_changed) {
		fprintf(stderr, "case \"%s\": conditions %s\n", c->what, out.conds_changed ? "changed" : "unchanged");
		check_failures++;
	}
	if (c->want_conds) {
		for (size_t i = 0; i < out.nconds; i++) {
			const struct kube_node_condition *x = &out.conds[i];
			snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s=%s%s%s", i ? " " : "",
				 x->type, x->status, x->reason ? ":" : "", x->reason ? x->reason : "");
			if (x->reason && strcmp(x->transition, out.now)) {
				fprintf(stderr, "case \"%s\": %s's lastTransitionTime is not now\n", c->what, x->type);
				check_failures++;
			}
		}
		if (strcmp(got, c->want_conds)) {
			fprintf(stderr, "case \"%s\":\n  want conditions: %s\n  got:             %s\n", c->what, c->want_conds, got);
			check_failures++;
		}
	}
	if (!c->want_taints != !out.taints_changed) {
		fprintf(stderr, "case \"%s\": taints %s\n", c->what, out.taints_changed ? "changed" : "unchanged");
		check_failures++;
	}
	if (c->want_taints) {
		got[0] = 0;
		for (size_t i = 0; i < out.ntaints; i++) {
			nl_short(out.taints[i].key, kb, sizeof(kb));
			snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s:%s%s", i ? " " : "", kb,
				 out.taints[i].effect,
				 out.taints[i].time_added && !strcmp(out.taints[i].time_added, out.now) ? "+" : "");
		}
		if (strcmp(got, c->want_taints)) {
			fprintf(stderr, "case \"%s\":\n  want taints: %s\n  got:         %s\n", c->what, c->want_taints, got);
			check_failures++;
		}
	}
	nl_plan_out_release(&out);
}

static void test_nl_plan(void)
{
	for (size_t i = 0; i < sizeof(nl_cases) / sizeof(nl_cases[0]); i++)
		run_nl_case(&nl_cases[i]);
}

/* The NeverUpdated conditions take the node's creation time as their heartbeat. */
static void test_nl_plan_never_posted(void)
{
	struct nl_plan_in in = { NULL, 0, NULL, 0, false, "2020-01-01T00:00:00Z",
				 NOW - 61 * NSEC_PER_SEC, 60 * NSEC_PER_SEC, NOW, NL_NOEXEC_ADD };
	struct nl_plan_out out;

	nl_plan(&in, &out);
	CHECK_INT(out.nconds, 4);
	CHECK_STR(out.conds[0].type, "Ready");
	CHECK_STR(out.conds[0].reason, "NodeStatusNeverUpdated");
	CHECK_STR(out.conds[0].message, "Kubelet never posted node status.");
	CHECK_STR(out.conds[0].heartbeat, "2020-01-01T00:00:00Z");
	CHECK_INT(out.ntaints, 2);
	nl_plan_out_release(&out);
}

/* A sign of life is a change of the heartbeat or of the Lease renewal, seen by our clock. */
static void test_nl_observe(void)
{
	struct nl_health h = { .seen = false };
	const int64_t s = NSEC_PER_SEC, created = 100 * s;

	nl_observe(&h, true, "t1", NULL, created, 1000 * s);
	CHECK_INT(h.probe_ns, 1000 * s); /* first sight with Ready: counts from now */
	nl_observe(&h, true, "t1", NULL, created, 1030 * s);
	CHECK_INT(h.probe_ns, 1000 * s); /* nothing moved */
	nl_observe(&h, true, "t1", "r1", created, 1040 * s);
	CHECK_INT(h.probe_ns, 1040 * s); /* the Lease appeared */
	nl_observe(&h, true, "t1", "r2", created, 1050 * s);
	CHECK_INT(h.probe_ns, 1050 * s); /* renewed */
	nl_observe(&h, true, "t2", "r2", created, 1060 * s);
	CHECK_INT(h.probe_ns, 1060 * s); /* heartbeat */
	nl_observe(&h, true, "t2", "r2", created, 1200 * s);
	CHECK_INT(h.probe_ns, 1060 * s);

	struct nl_health fresh = { .seen = false };
	nl_observe(&fresh, false, NULL, NULL, created, 1000 * s);
	CHECK_INT(fresh.probe_ns, created); /* never posted: counts from creation */
}

/* ---- volume-scheduler: TaintToleration and NodeVolumeLimits ---- */

struct tol_case {
	const char *taint; /* "key=value:Effect" */
	const char *tol;   /* "key=value:Effect", "key:Exists:Effect"; an empty part is absent */
	bool tolerated;
};

static const struct tol_case tol_cases[] = {
	{ "k=v:NoSchedule", "k=v:NoSchedule", true },
	{ "k=v:NoSchedule", "k=v:", true },            /* no effect: every effect */
	{ "k=v:NoSchedule", "k=w:NoSchedule", false },  /* value differs */
	{ "k=v:NoSchedule", "k=v:NoExecute", false },   /* effect differs */
	{ "k=v:NoSchedule", "k:Exists:", true },
	{ "k=v:NoSchedule", "j:Exists:", false },
	{ "k=v:NoExecute", ":Exists:", true },          /* empty key + Exists: everything */
	{ "k=v:NoExecute", ":Exists:NoSchedule", false },
	{ "k=:NoSchedule", "k=:NoSchedule", true },     /* empty values match */
	{ "k=v:NoSchedule", "=v:NoSchedule", false },   /* Equal without a key matches nothing */
	{ "k=v:NoSchedule", "k:Bogus:", false },        /* unknown operator */
};

static void parse_taint(const char *s, char *k, char *v, char *e, struct kube_taint *t)
{
	sscanf(s, "%63[^=]", k);
	if (s[0] == '=')
		k[0] = 0;
	const char *eq = strchr(s, '='), *colon = strrchr(s, ':');
	snprintf(v, 64, "%.*s", (int)(colon - eq - 1), eq + 1);
	snprintf(e, 64, "%s", colon + 1);
	*t = (struct kube_taint){ k, v, e, NULL };
}

static void parse_tol(const char *s, char *k, char *v, char *e, char *op, struct kube_toleration *t)
{
	const char *ex = strstr(s, ":Exists:"), *bogus = strstr(s, ":Bogus:");
	const char *sep = ex ? ex : bogus;
	if (sep) {
		snprintf(k, 64, "%.*s", (int)(sep - s), s);
		snprintf(op, 64, "%s", ex ? "Exists" : "Bogus");
		snprintf(e, 64, "%s", sep + 8 - (bogus ? 1 : 0));
		t->key = *k ? k : NULL, t->op = op, t->value = NULL, t->effect = *e ? e : NULL;
		return;
	}
	const char *eq = strchr(s, '='), *colon = strrchr(s, ':');
	snprintf(k, 64, "%.*s", (int)(eq - s), s);
	snprintf(v, 64, "%.*s", (int)(colon - eq - 1), eq + 1);
	snprintf(e, 64, "%s", colon + 1);
	t->key = *k ? k : NULL, t->op = NULL, t->value = v, t->effect = *e ? e : NULL;
}

/* What nl_plan does with the NoExecute taint under each limiter answer (upstream's queue). */
static void test_nl_noexec(void)
{
	static const struct {
		const char *what, *ready, *taint; /* taint: an existing NoExecute key, or NULL */
		enum nl_noexec mode;
		const char *want; /* the NoExecute keys after, "" none */
		bool pending;
	} cases[] = {
		{ "Unknown, the limiter says yes: unreachable added", "Unknown", NULL, NL_NOEXEC_ADD, "unreachable", false },
		{ "Unknown, the limiter says not yet: nothing, pending", "Unknown", NULL, NL_NOEXEC_HOLD, "", true },
		{ "Unknown, already tainted: kept without a token", "Unknown", "unreachable", NL_NOEXEC_HOLD, "unreachable", false },
		{ "False after Unknown: swapped at once, no token needed", "False", "unreachable", NL_NOEXEC_HOLD, "not-ready", false },
		{ "True: the taint goes whatever the limiter", "True", "unreachable", NL_NOEXEC_HOLD, "", false },
		{ "every zone fully disrupted: removed", "Unknown", "unreachable", NL_NOEXEC_REMOVE, "", false },
		{ "every zone fully disrupted: not added either", "Unknown", NULL, NL_NOEXEC_REMOVE, "", false },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct kube_node_condition rc = { "Ready", cases[i].ready, NULL, NULL, "hb", "tr" };
		char key[128];
		snprintf(key, sizeof(key), "node.kubernetes.io/%s", cases[i].taint ? cases[i].taint : "");
		struct kube_taint t = { key, "", "NoExecute", NULL };
		struct nl_plan_in in = { &rc, 1, &t, cases[i].taint ? 1 : 0, false, "2020-01-01T00:00:00Z",
					 NOW, 50 * NSEC_PER_SEC, NOW, cases[i].mode };
		struct nl_plan_out out;
		char got[256] = "";
		nl_plan(&in, &out);
		for (size_t k = 0; k < out.ntaints; k++)
			if (!strcmp(out.taints[k].effect, "NoExecute"))
				snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s", *got ? " " : "",
					 out.taints[k].key + strlen("node.kubernetes.io/"));
		if (strcmp(got, cases[i].want) || out.noexec_pending != cases[i].pending) {
			fprintf(stderr, "case \"%s\": got \"%s\" pending %d\n", cases[i].what, got,
				out.noexec_pending);
			check_failures++;
		}
		nl_plan_out_release(&out);
	}
}

/* Zone states (ComputeZoneState) with the default threshold 0.55. */
static void test_nl_zone_state(void)
{
	CHECK_INT(nl_zone_state(3, 0, 0.55), NL_ZONE_NORMAL);
	CHECK_INT(nl_zone_state(0, 1, 0.55), NL_ZONE_FULL);
	CHECK_INT(nl_zone_state(0, 0, 0.55), NL_ZONE_NORMAL);  /* no nodes */
	CHECK_INT(nl_zone_state(1, 2, 0.55), NL_ZONE_NORMAL);  /* 2 not Ready: fewer than 3 */
	CHECK_INT(nl_zone_state(2, 3, 0.55), NL_ZONE_PARTIAL); /* 3 of 5 = 0.6 */
	CHECK_INT(nl_zone_state(3, 3, 0.55), NL_ZONE_NORMAL);  /* 0.5 */
	CHECK_INT(nl_zone_state(1, 3, 0.75), NL_ZONE_PARTIAL); /* exactly the threshold */
}

static struct nl_zone zone(int ready, int not_ready, uint8_t state, double rate)
{
	struct nl_zone z = { .ready = ready, .not_ready = not_ready, .state = state, .rate = rate,
			     .tokens = 1 };
	return z;
}

/* handleDisruption: the modes and the limiter rates per zone state. */
static void test_nl_zones_update(void)
{
	const struct nl_rates r = { 0.1, 0.01, 0.55, 50 };
	const int64_t s = NSEC_PER_SEC;

	/* two zones, one wholly silent: it is FullDisruption and keeps the primary rate (upstream
	 * assumes a zone really down when the others are up); the other stays Normal */
	struct nl_zone z[2] = { zone(2, 0, NL_ZONE_INITIAL, 0.1), zone(0, 2, NL_ZONE_INITIAL, 0.1) };
	CHECK_INT(nl_zones_update(z, 2, &r, 0), NL_DISRUPTION_NONE);
	CHECK_INT(z[0].state, NL_ZONE_NORMAL);
	CHECK_INT(z[1].state, NL_ZONE_FULL);
	CHECK(z[1].rate == 0.1);
	/* a small zone partly down (3 of 4): evictions stop there (ReducedQPSFunc) */
	struct nl_zone p[2] = { zone(1, 3, NL_ZONE_NORMAL, 0.1), zone(5, 0, NL_ZONE_NORMAL, 0.1) };
	CHECK_INT(nl_zones_update(p, 2, &r, 0), NL_DISRUPTION_NONE);
	CHECK_INT(p[0].state, NL_ZONE_PARTIAL);
	CHECK(p[0].rate == 0);
	CHECK(!nl_zone_take(&p[0], 100 * s));
	/* a large zone partly down (40 of 60): the secondary rate */
	struct nl_zone l[2] = { zone(20, 40, NL_ZONE_NORMAL, 0.1), zone(5, 0, NL_ZONE_NORMAL, 0.1) };
	nl_zones_update(l, 2, &r, 0);
	CHECK(l[0].rate == 0.01);
	/* every zone silent: master disruption mode, no rate anywhere; then still in it */
	struct nl_zone a[2] = { zone(0, 2, NL_ZONE_NORMAL, 0.1), zone(0, 3, NL_ZONE_FULL, 0.1) };
	CHECK_INT(nl_zones_update(a, 2, &r, 0), NL_DISRUPTION_ENTER);
	CHECK(a[0].rate == 0 && a[1].rate == 0);
	CHECK_INT(a[0].state, NL_ZONE_FULL);
	CHECK_INT(nl_zones_update(a, 2, &r, s), NL_DISRUPTION_IN);
	/* one node back: exit, each zone's rate set for its new state */
	a[0].ready = 1;
	a[0].not_ready = 1;
	CHECK_INT(nl_zones_update(a, 2, &r, 2 * s), NL_DISRUPTION_EXIT);
	CHECK_INT(a[0].state, NL_ZONE_NORMAL);
	CHECK_INT(a[1].state, NL_ZONE_FULL);
	CHECK(a[0].rate == 0.1 && a[1].rate == 0.1);
	/* a single zone that is all silent is "every zone": no eviction */
	struct nl_zone one = zone(0, 1, NL_ZONE_NORMAL, 0.1);
	CHECK_INT(nl_zones_update(&one, 1, &r, 0), NL_DISRUPTION_ENTER);
	CHECK_INT(nl_zones_update(NULL, 0, &r, 0), NL_DISRUPTION_NONE);
}

/* The per-zone token bucket: burst 1, then one node per 1/rate seconds. */
static void test_nl_zone_take(void)
{
	const int64_t s = NSEC_PER_SEC;
	struct nl_zone z = zone(1, 1, NL_ZONE_NORMAL, 0.1);

	z.refilled_ns = 0;
	CHECK(nl_zone_take(&z, 0));       /* the first at once */
	CHECK(!nl_zone_take(&z, 5 * s));  /* the second not within 10 s */
	CHECK(!nl_zone_take(&z, 9 * s));
	CHECK(nl_zone_take(&z, 10 * s));
	CHECK(!nl_zone_take(&z, 10 * s));
	CHECK(nl_zone_take(&z, 100 * s)); /* burst 1: a long pause does not save up tokens */
	CHECK(!nl_zone_take(&z, 100 * s));
}

/* Taint eviction: te_decide's verdicts and te_schedule's clock, as tables. */
static void test_te(void)
{
	static const struct {
		const char *what;
		const char *taints;  /* "key:Effect" words */
		const char *tols;    /* "key:op:effect:seconds" words ("-" empty, seconds "-" absent) */
		enum te_verdict want;
		int64_t secs;
	} cases[] = {
		{ "no taint: keep", "", "", TE_KEEP, 0 },
		{ "NoSchedule only: not this controller's", "u:NoSchedule", "", TE_KEEP, 0 },
		{ "untolerated NoExecute: now", "u:NoExecute", "", TE_NOW, 0 },
		{ "the admission's defaults: 300 s", "u:NoExecute",
		  "n:Exists:NoExecute:300 u:Exists:NoExecute:300", TE_AFTER, 300 },
		{ "tolerated for ever", "u:NoExecute", "u:Exists:NoExecute:-", TE_KEEP, 0 },
		{ "Exists with no key and no effect tolerates all, for ever", "u:NoExecute n:NoExecute",
		  "-:Exists:-:-", TE_KEEP, 0 },
		{ "one of two taints untolerated: now", "u:NoExecute x:NoExecute", "u:Exists:NoExecute:5",
		  TE_NOW, 0 },
		{ "two taints: the smaller tolerationSeconds of the tolerations used", "u:NoExecute x:NoExecute",
		  "u:Exists:NoExecute:50 x:Exists:NoExecute:5", TE_AFTER, 5 },
		{ "a forever toleration and a timed one: the timed one counts", "u:NoExecute x:NoExecute",
		  "u:Exists:NoExecute:- x:Exists:NoExecute:7", TE_AFTER, 7 },
		{ "the first toleration that matches is the one used", "u:NoExecute",
		  "u:Exists:NoExecute:- u:Exists:NoExecute:5", TE_KEEP, 0 },
		{ "tolerationSeconds 0: now", "u:NoExecute", "u:Exists:NoExecute:0", TE_NOW, 0 },
		{ "negative tolerationSeconds: now", "u:NoExecute", "u:Exists:NoExecute:-3", TE_NOW, 0 },
		{ "a NoSchedule toleration does not tolerate NoExecute", "u:NoExecute",
		  "u:Exists:NoSchedule:-", TE_NOW, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct kube_taint ts[4];
		struct kube_toleration tl[4];
		char tb[4][64], eb[4][64], kb[4][64], ob[4][64], fb[4][64];
		size_t nt = 0, nl = 0;
		const char *p = cases[i].taints;
		while (*p && nt < 4) {
			int used = 0;
			if (sscanf(p, " %63[^:]:%63s%n", tb[nt], eb[nt], &used) != 2)
				break;
			ts[nt] = (struct kube_taint){ tb[nt], "", eb[nt], NULL };
			nt++;
			p += used;
			while (*p == ' ')
				p++;
		}
		p = cases[i].tols;
		while (*p && nl < 4) {
			char sec[16];
			int used = 0;
			if (sscanf(p, " %63[^:]:%63[^:]:%63[^:]:%15s%n", kb[nl], ob[nl], fb[nl], sec, &used) != 4)
				break;
			tl[nl] = (struct kube_toleration){ strcmp(kb[nl], "-") ? kb[nl] : NULL, ob[nl], NULL,
							   strcmp(fb[nl], "-") ? fb[nl] : NULL,
							   strcmp(sec, "-") != 0, atoll(sec) };
			nl++;
			p += used;
			while (*p == ' ')
				p++;
		}
		int64_t secs = -1;
		enum te_verdict v = te_decide(ts, nt, tl, nl, &secs);
		if (v != cases[i].want || (v == TE_AFTER && secs != cases[i].secs)) {
			fprintf(stderr, "case \"%s\": verdict %d secs %lld\n", cases[i].what, v, (long long)secs);
			check_failures++;
		}
	}

	/* The schedule: the clock starts when the taint is first seen and is not restarted. */
	const int64_t s = NSEC_PER_SEC;
	struct te_sched sc = { 0 };
	CHECK_INT(te_schedule(&sc, TE_KEEP, 0, 0), TE_UNCHANGED);
	CHECK_INT(te_schedule(&sc, TE_AFTER, 5, 10 * s), TE_SCHEDULED);
	CHECK(sc.fire_ns == 15 * s);
	CHECK_INT(te_schedule(&sc, TE_AFTER, 5, 12 * s), TE_UNCHANGED);
	CHECK(sc.fire_ns == 15 * s);
	/* the taint goes first: cancelled (told with the cancel event) */
	CHECK_INT(te_schedule(&sc, TE_KEEP, 0, 13 * s), TE_CANCELLED);
	CHECK(!sc.set);
	/* a new untolerated taint while waiting: now, the waiting one cancelled */
	CHECK_INT(te_schedule(&sc, TE_AFTER, 300, 20 * s), TE_SCHEDULED);
	CHECK_INT(te_schedule(&sc, TE_NOW, 0, 21 * s), TE_RESCHEDULED);
	CHECK(sc.fire_ns == 21 * s);
	CHECK_INT(te_schedule(&sc, TE_NOW, 0, 22 * s), TE_UNCHANGED);
}

static void test_vs_tolerations(void)
{
	for (size_t i = 0; i < sizeof(tol_cases) / sizeof(tol_cases[0]); i++) {
		char tk[64], tv[64], te[64], ok[64], ov[64], oe[64], oo[64];
		struct kube_taint t;
		struct kube_toleration o;

		parse_taint(tol_cases[i].taint, tk, tv, te, &t);
		parse_tol(tol_cases[i].tol, ok, ov, oe, oo, &o);
		if (vs_tolerates(&o, &t) != tol_cases[i].tolerated) {
			fprintf(stderr, "taint %s, toleration %s: want %s\n", tol_cases[i].taint,
				tol_cases[i].tol, tol_cases[i].tolerated ? "tolerated" : "not tolerated");
			check_failures++;
		}
	}
	/* The first taint that matters and is not tolerated; PreferNoSchedule never stops a pod. */
	struct kube_taint ts[] = { { "soft", "", "PreferNoSchedule", NULL }, { "a", "1", "NoSchedule", NULL },
				   { "b", "2", "NoExecute", NULL } };
	struct kube_toleration ta = { "a", "Exists", NULL, NULL, false, 0 };
	const struct kube_taint *u = vs_untolerated(ts, 3, NULL, 0);
	CHECK(u && !strcmp(u->key, "a"));
	u = vs_untolerated(ts, 3, &ta, 1);
	CHECK(u && !strcmp(u->key, "b"));
	CHECK(vs_untolerated(ts, 1, NULL, 0) == NULL);
}

struct limit_case {
	const char *what;
	const char *used; /* "driver/id ..." */
	const char *add;
	const char *limits; /* "driver=N ..." */
	const char *want;   /* the driver over its limit, or "" */
};

static const struct limit_case limit_cases[] = {
	{ "one slot, taken: a second volume does not fit", "d/a", "d/b", "d=1", "d" },
	{ "one slot, taken by the same volume: fits (no new attachment)", "d/a", "d/a", "d=1", "" },
	{ "two slots, one taken", "d/a", "d/b", "d=2", "" },
	{ "the pod's own two new volumes pass a limit of two with one taken", "d/a", "d/b d/c", "d=2", "d" },
	{ "a volume used by two pods counts once", "d/a d/a", "d/b", "d=2", "" },
	{ "a volume named twice by the pod counts once", "", "d/b d/b", "d=1", "" },
	{ "no allocatable for the driver: no limit", "d/a d/b", "d/c", "", "" },
	{ "another driver's volumes do not count", "e/a e/b", "d/c", "d=1 e=1", "" },
	{ "zero slots", "", "d/a", "d=0", "d" },
	{ "the second driver is over", "", "d/a e/b e/c", "d=5 e=1", "e" },
};

static int32_t t_limit(const char *driver, void *ud)
{
	const char *l = ud;
	size_t n = strlen(driver);

	for (const char *p = l; (p = strstr(p, driver)); p += n)
		if ((p == l || p[-1] == ' ') && p[n] == '=')
			return atoi(p + n + 1);
	return -1;
}

static size_t parse_vols(const char *s, char buf[][32], struct vs_volume *v)
{
	size_t n = 0;
	char copy[256], *save = NULL;

	snprintf(copy, sizeof(copy), "%s", s);
	for (char *w = strtok_r(copy, " ", &save); w && n < 8; w = strtok_r(NULL, " ", &save), n++) {
		snprintf(buf[n], 32, "%s", w);
		char *slash = strchr(buf[n], '/');
		*slash = 0;
		v[n] = (struct vs_volume){ buf[n], slash + 1 };
	}
	return n;
}

static void test_vs_limits(void)
{
	for (size_t i = 0; i < sizeof(limit_cases) / sizeof(limit_cases[0]); i++) {
		const struct limit_case *c = &limit_cases[i];
		char ub[8][32], ab[8][32];
		struct vs_volume u[8], a[8];
		size_t nu = parse_vols(c->used, ub, u), na = parse_vols(c->add, ab, a);
		const char *got = vs_over_limit(u, nu, a, na, t_limit, (void *)c->limits);

		if (strcmp(got ? got : "", c->want)) {
			fprintf(stderr, "case \"%s\": want \"%s\", got \"%s\"\n", c->what, c->want, got ? got : "");
			check_failures++;
		}
	}
}

/*
 * FailedScheduling's message, kube-scheduler v1.37's FitError: each case is the nodes' verdicts
 * ("U:" refused for good, UnschedulableAndUnresolvable; "R:" refused as Unschedulable, where
 * upstream would look for pods to evict; reasons of one node separated by "|"), or a prefilter
 * message, and the message the pod gets.
 */

struct fit_case {
	const char *what;
	size_t nnodes;
	const char *nodes[6];
	const char *prefilter;
	bool never; /* spec.preemptionPolicy: Never */
	const char *want;
};

static const struct fit_case fit_cases[] = {
	/* A prefilter refusal: DynamicResources' PostFilter then fails ("not found"), as v1.36.1's
	 * kube-scheduler prints it (e2e.cm_unschedulable compares). */
	{ "a missing claim, one node", 1, { NULL }, "persistentvolumeclaim \"ghost\" not found", false,
	  "0/1 nodes are available: persistentvolumeclaim \"ghost\" not found. not found" },
	{ "an unbound immediate claim, three nodes", 3, { NULL }, VS_REASON_UNBOUND_IMMEDIATE, false,
	  "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. not found" },
	{ "a claim being deleted", 2, { NULL }, "persistentvolumeclaim \"x\" is being deleted", false,
	  "0/2 nodes are available: persistentvolumeclaim \"x\" is being deleted. not found" },
	{ "taints and a selector, counted and sorted", 3,
	  { "U:" VS_REASON_TAINT, "U:" VS_REASON_SELECTOR, "U:" VS_REASON_TAINT }, NULL, false,
	  "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 2 node(s) had "
	  "untolerated taint(s). " "preemption: 0/3 nodes are available: 3 Preemption is not "
	  "helpful for scheduling." },
	{ "a volume's node affinity", 2, { "U:" VS_REASON_NODE_CONFLICT, "U:" VS_REASON_NODE_CONFLICT },
	  NULL, false,
	  "0/2 nodes are available: 2 node(s) didn't match PersistentVolume's node affinity. "
	  "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling." },
	{ "attach limits: preemption could help, but there is nobody to evict", 2,
	  { "R:" VS_REASON_MAX_VOLUMES, "R:" VS_REASON_MAX_VOLUMES }, NULL, false,
	  "0/2 nodes are available: 2 node(s) exceed max volume count. " "preemption: 0/2 nodes "
	  "are available: 2 No preemption victims found for incoming pod." },
	{ "both kinds of node", 3, { "R:" VS_REASON_MAX_VOLUMES, "U:" VS_REASON_TAINT, "R:" VS_REASON_TOO_MANY_PODS },
	  NULL, false,
	  "0/3 nodes are available: 1 Too many pods, 1 node(s) exceed max volume count, 1 node(s) had "
	  "untolerated taint(s). " "preemption: 0/3 nodes are available: 1 Preemption is not "
	  "helpful for scheduling, 2 No preemption victims found for incoming pod." },
	{ "ReadWriteOncePod in use", 2, { "R:" VS_REASON_RWOP_CONFLICT, "R:" VS_REASON_RWOP_CONFLICT },
	  NULL, false,
	  "0/2 nodes are available: 2 node(s) unavailable due to PersistentVolumeClaim with "
	  "ReadWriteOncePod access mode already in-use by another pod. " "preemption: 0/2 nodes "
	  "are available: 2 No preemption victims found for incoming pod." },
	{ "VolumeBinding's reasons of one node each counted", 2,
	  { "U:" VS_REASON_NODE_CONFLICT "|" VS_REASON_BIND_CONFLICT, "U:" VS_REASON_BIND_CONFLICT },
	  NULL, false,
	  "0/2 nodes are available: 1 node(s) didn't match PersistentVolume's node affinity, 2 node(s) "
	  "didn't find available persistent volumes to bind. " "preemption: 0/2 nodes are "
	  "available: 2 Preemption is not helpful for scheduling." },
	{ "ten nodes sort before two, as Go sorts strings", 12,
	  { "U:" VS_REASON_TAINT "*10", "U:" VS_REASON_UNSCHEDULABLE "*2" }, NULL, false,
	  "0/12 nodes are available: 10 node(s) had untolerated taint(s), 2 node(s) were unschedulable. "
	  "preemption: 0/12 nodes are available: 12 Preemption is not helpful for scheduling." },
	{ "preemptionPolicy Never", 1, { "U:" VS_REASON_TAINT }, NULL, true,
	  "0/1 nodes are available: 1 node(s) had untolerated taint(s). " "preemption: not "
	  "eligible due to preemptionPolicy=Never." },
	{ "no nodes at all", 0, { NULL }, "persistentvolumeclaim \"ghost\" not found", false,
	  "no nodes available to schedule pods" },
};

/* "U:a|b*3": three nodes refused for good with reasons a and b. */
static void add_verdicts(struct vs_reasons *r, const char *spec)
{
	char buf[512], *star, *save = NULL;
	struct vs_verdict v = { .unresolvable = spec[0] == 'U' };
	int times = 1;

	snprintf(buf, sizeof(buf), "%s", spec + 2);
	if ((star = strrchr(buf, '*'))) {
		*star = '\0';
		times = atoi(star + 1);
	}
	for (char *t = strtok_r(buf, "|", &save); t && v.n < VS_NODE_REASONS_MAX; t = strtok_r(NULL, "|", &save))
		v.reason[v.n++] = t;
	while (times--)
		vs_reasons_node(r, &v);
}

static void test_vs_fit_message(void)
{
	for (size_t i = 0; i < sizeof(fit_cases) / sizeof(fit_cases[0]); i++) {
		const struct fit_case *c = &fit_cases[i];
		struct vs_reasons r = { 0 };
		char msg[1024];

		for (size_t k = 0; k < 6 && c->nodes[k]; k++)
			add_verdicts(&r, c->nodes[k]);
		vs_fit_message(&r, c->nnodes, c->prefilter, c->never, msg, sizeof(msg));
		if (strcmp(msg, c->want)) {
			fprintf(stderr, "case \"%s\":\n  want \"%s\"\n  got  \"%s\"\n", c->what, c->want, msg);
			check_failures++;
		}
	}
	/* A buffer too small cuts the message; it never overflows. */
	struct vs_reasons r = { 0 };
	char small[24];
	add_verdicts(&r, "U:" VS_REASON_TAINT);
	vs_fit_message(&r, 1, NULL, false, small, sizeof(small));
	CHECK_STR(small, "0/1 nodes are available");
	/* An event's note stops at 1,024 bytes, kube-scheduler's truncateMessage. */
	char big[1500], note[1100];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	vs_event_note(big, note, sizeof(note));
	CHECK_INT(strlen(note), VS_NOTE_MAX);
	CHECK_STR(note + VS_NOTE_MAX - 4, " ...");
	vs_event_note("short", note, sizeof(note));
	CHECK_STR(note, "short");
	/* The backoff: 1 s doubling to 10 s. */
	CHECK_INT(vs_backoff_ns(1), 1000000000LL);
	CHECK_INT(vs_backoff_ns(2), 2000000000LL);
	CHECK_INT(vs_backoff_ns(4), 8000000000LL);
	CHECK_INT(vs_backoff_ns(5), 10000000000LL);
	CHECK_INT(vs_backoff_ns(40), 10000000000LL);
}

/*
 * The pod's claims before any node (PreFilter). A claim is written "name" (missing), "name~"
 * (a generic ephemeral volume's claim, missing), or "name phase volume flags" with flags among
 * b (bind-completed), d (being deleted), w (its class is WaitForFirstConsumer).
 */
struct pre_case {
	const char *what;
	const char *claims[4];
	const char *want; /* "" when the pod passes */
};

static const struct pre_case pre_cases[] = {
	{ "bound claims pass", { "a Bound pv-a b", "b Bound pv-b b" }, "" },
	{ "a missing claim", { "a Bound pv-a b", "ghost" }, "persistentvolumeclaim \"ghost\" not found" },
	{ "a missing claim is found before an earlier one being deleted",
	  { "a Bound pv-a bd", "ghost" }, "persistentvolumeclaim \"ghost\" not found" },
	{ "a generic ephemeral volume's claim not made yet", { "web-data~" },
	  "waiting for ephemeral volume controller to create the persistentvolumeclaim \"web-data\"" },
	{ "a Lost claim", { "a Lost pv-gone b" },
	  "persistentvolumeclaim \"a\" bound to non-existent persistentvolume \"pv-gone\"" },
	{ "a claim being deleted", { "a Bound pv-a bd" }, "persistentvolumeclaim \"a\" is being deleted" },
	{ "being deleted wins over unbound", { "a Pending - ", "b Bound pv-b bd" },
	  "persistentvolumeclaim \"b\" is being deleted" },
	{ "an unbound Immediate claim", { "a Pending -" }, VS_REASON_UNBOUND_IMMEDIATE },
	{ "an unbound WaitForFirstConsumer claim waits for a node", { "a Pending - w" }, "" },
	{ "a volumeName without bind-completed is not bound yet", { "a Pending pv-a" },
	  VS_REASON_UNBOUND_IMMEDIATE },
	{ "nor is a pre-bound WaitForFirstConsumer claim", { "a Pending pv-a w" }, VS_REASON_UNBOUND_IMMEDIATE },
	{ "no claims", { NULL }, "" },
};

static struct kube_obj *mkpvc(const char *spec, char *name, size_t len, bool *delay)
{
	char phase[16] = "", vol[64] = "", flags[8] = "", buf[1024];
	int n = sscanf(spec, "%63s %15s %63s %7s", name, phase, vol, flags);

	*delay = strchr(flags, 'w') != NULL;
	(void)len;
	if (n < 2)
		return NULL;
	snprintf(buf, sizeof(buf),
		 "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"d\",\"uid\":\"u-%s\"%s%s},"
		 "\"spec\":{%s%s%s\"accessModes\":[\"ReadWriteOnce\"]},\"status\":{\"phase\":\"%s\"}}",
		 name, name, strchr(flags, 'd') ? ",\"deletionTimestamp\":\"2026-01-01T00:00:00Z\"" : "",
		 strchr(flags, 'b') ? ",\"annotations\":{\"pv.kubernetes.io/bind-completed\":\"yes\"}" : "",
		 strcmp(vol, "-") ? "\"volumeName\":\"" : "", strcmp(vol, "-") ? vol : "",
		 strcmp(vol, "-") ? "\"," : "", phase);
	return decode(&KUBE_KIND_PERSISTENTVOLUMECLAIM, buf);
}

static void test_vs_prefilter(void)
{
	for (size_t i = 0; i < sizeof(pre_cases) / sizeof(pre_cases[0]); i++) {
		const struct pre_case *c = &pre_cases[i];
		struct kube_obj *objs[4] = { NULL };
		char names[4][64], msg[512] = "";
		struct vs_claim vc[4];
		size_t n = 0;

		for (; n < 4 && c->claims[n]; n++) {
			bool delay = false;
			objs[n] = mkpvc(c->claims[n], names[n], sizeof(names[n]), &delay);
			size_t l = strlen(names[n]);
			bool eph = l && names[n][l - 1] == '~';
			if (eph)
				names[n][l - 1] = '\0';
			vc[n] = (struct vs_claim){ names[n], eph, kube_pvc_of(objs[n]), delay };
		}
		bool refused = vs_prefilter(vc, n, msg, sizeof(msg));
		if (refused != (c->want[0] != '\0') || (refused && strcmp(msg, c->want))) {
			fprintf(stderr, "case \"%s\": want \"%s\", got \"%s\"\n", c->what, c->want,
				refused ? msg : "");
			check_failures++;
		}
		for (size_t k = 0; k < n; k++)
			kube_obj_unref(objs[k]);
	}
}

/* The pod record keeps what volume-scheduler compares before it writes PodScheduled again. */
static void test_vs_pod_condition(void)
{
	struct kube_obj *o = decode(&KUBE_KIND_POD_T,
		"{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\",\"uid\":\"u\",\"generation\":3},"
		"\"spec\":{\"preemptionPolicy\":\"Never\"},\"status\":{\"conditions\":["
		"{\"type\":\"Ready\",\"status\":\"False\"},"
		"{\"type\":\"PodScheduled\",\"status\":\"False\",\"reason\":\"Unschedulable\",\"message\":\"m\"}]}}");
	const struct kube_pod *p = kube_pod_of(o);

	CHECK(p != NULL);
	if (p) {
		CHECK_INT(p->scheduled, KUBE_POD_SCHED_FALSE);
		CHECK(p->scheduled_hash == kube_pod_cond_hash("Unschedulable", "m"));
		CHECK(p->scheduled_hash != kube_pod_cond_hash("Unschedulable", "m2"));
		CHECK(p->preempt_never);
		CHECK_INT(p->meta.generation, 3);
	}
	kube_obj_unref(o);
	o = decode(&KUBE_KIND_POD_T, "{\"metadata\":{\"name\":\"q\",\"namespace\":\"d\",\"uid\":\"v\"}}");
	p = kube_pod_of(o);
	CHECK(p && p->scheduled == KUBE_POD_SCHED_ABSENT && !p->preempt_never);
	kube_obj_unref(o);
}

/*
 * VolumeRestrictions (ReadWriteOncePod): who else uses claim "c" of pod d/p. A pod is written
 * "namespace name node phase claims [deleting]", "-" for no node and for Running; claims are
 * comma-separated; assumed names the pods this scheduler bound a moment ago (not in the cache yet).
 */
struct rwop_case {
	const char *what;
	const char *pods[4];
	const char *assumed;
	const char *want; /* the user's name, "" for none */
};

static const struct rwop_case rwop_cases[] = {
	{ "a scheduled pod uses the claim", { "d a1 node-1 - x,c" }, "", "a1" },
	{ "on another node too", { "d a1 node-2 - c" }, "", "a1" },
	{ "a pending pod does not count", { "d a2 - - c" }, "", "" },
	{ "unless this scheduler just bound it", { "d a2 - - c" }, "a2", "a2" },
	{ "a terminated pod gave it back", { "d a1 node-1 Succeeded c", "d a4 node-1 Failed c" }, "", "" },
	{ "a terminating pod still has it mounted", { "d a1 node-1 - c deleting" }, "", "a1" },
	{ "a claim of that name in another namespace", { "e a1 node-1 - c" }, "", "" },
	{ "another claim", { "d a1 node-1 - x,y" }, "", "" },
	{ "the pod itself, as another record", { "d p node-1 - c" }, "", "" },
	{ "the first user found", { "d a0 - - c", "d a1 node-1 - c" }, "", "a1" },
	{ "no pods", { NULL }, "", "" },
};

static struct kube_obj *mkpod(const char *spec)
{
	char ns[32], name[32], node[32], phase[32], claims[64], del[32] = "", buf[2048], vols[1024];
	size_t at = 0;
	int n = sscanf(spec, "%31s %31s %31s %31s %63s %31s", ns, name, node, phase, claims, del);

	if (n < 5)
		return NULL;
	vols[0] = '\0';
	char *save = NULL;
	for (char *c = strtok_r(claims, ",", &save); c; c = strtok_r(NULL, ",", &save))
		at += (size_t)snprintf(vols + at, sizeof(vols) - at,
				       "%s{\"name\":\"v-%s\",\"persistentVolumeClaim\":{\"claimName\":\"%s\"}}",
				       at ? "," : "", c, c);
	snprintf(buf, sizeof(buf),
		 "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\",\"uid\":\"u-%s\"%s},"
		 "\"spec\":{%s%s%s\"volumes\":[%s]},\"status\":{\"phase\":\"%s\"}}",
		 name, ns, name, del[0] ? ",\"deletionTimestamp\":\"2026-01-01T00:00:00Z\"" : "",
		 strcmp(node, "-") ? "\"nodeName\":\"" : "", strcmp(node, "-") ? node : "",
		 strcmp(node, "-") ? "\"," : "", vols, strcmp(phase, "-") ? phase : "Running");
	return decode(&KUBE_KIND_POD_T, buf);
}

static bool t_assumed(const struct kube_pod *p, void *ud)
{
	return strstr((const char *)ud, p->meta.name) != NULL;
}

static void test_vs_rwop(void)
{
	struct kube_obj *self = mkpod("d p - Pending c");
	const struct kube_pod *p = kube_pod_of(self);

	CHECK(p != NULL);
	for (size_t i = 0; p && i < sizeof(rwop_cases) / sizeof(rwop_cases[0]); i++) {
		const struct rwop_case *c = &rwop_cases[i];
		struct kube_obj *pods[5] = { self };
		size_t n = 1;

		for (size_t k = 0; k < 4 && c->pods[k]; k++)
			if ((pods[n] = mkpod(c->pods[k])))
				n++;
		const struct kube_pod *got = vs_rwop_user(p, "c", pods, n, t_assumed, (void *)c->assumed);
		if (strcmp(got ? got->meta.name : "", c->want)) {
			fprintf(stderr, "case \"%s\": want \"%s\", got \"%s\"\n", c->what, c->want,
				got ? got->meta.name : "");
			check_failures++;
		}
		for (size_t k = 1; k < n; k++)
			kube_obj_unref(pods[k]);
	}
	/* Without a placed() callback only spec.nodeName counts. */
	struct kube_obj *pods[2] = { self, mkpod("d a2 - - c") };
	CHECK(vs_rwop_user(p, "c", pods, 2, NULL, NULL) == NULL);
	kube_obj_unref(pods[1]);
	kube_obj_unref(self);
	/* The reason is kube-scheduler's, word for word, as FailedScheduling prints it. */
	struct vs_reasons r = { 0 };
	struct vs_verdict v = { { VS_REASON_RWOP_CONFLICT }, 1, false };
	char msg[512];
	vs_reasons_node(&r, &v);
	vs_reasons_node(&r, &v);
	vs_fit_message(&r, 2, NULL, false, msg, sizeof(msg));
	CHECK_STR(msg, "0/2 nodes are available: 2 node(s) unavailable due to PersistentVolumeClaim "
		       "with ReadWriteOncePod access mode already in-use by another pod. "
		       "preemption: 0/2 nodes are available: 2 No preemption victims found for "
		       "incoming pod.");
}

/* The records carry what the two controllers read: taints, conditions, tolerations, leases. */
static void test_records(void)
{
	struct kube_obj *n = decode(&KUBE_KIND_NODE_T,
		"{\"metadata\":{\"name\":\"n1\",\"creationTimestamp\":\"2026-01-01T00:00:00Z\"},"
		"\"spec\":{\"taints\":[{\"key\":\"k\",\"value\":\"v\",\"effect\":\"NoSchedule\",\"timeAdded\":\"2026-01-01T00:00:01Z\"},{\"key\":\"j\",\"effect\":\"NoExecute\"}]},"
		"\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"KubeletReady\",\"lastHeartbeatTime\":\"2026-01-01T00:00:02Z\"}]}}");
	const struct kube_node *node = kube_node_of(n);
	CHECK(node != NULL);
	if (node) {
		CHECK_STR(node->created, "2026-01-01T00:00:00Z");
		CHECK_INT(node->ntaints, 2);
		CHECK_STR(node->taints[0].value, "v");
		CHECK_STR(node->taints[0].time_added, "2026-01-01T00:00:01Z");
		CHECK_STR(node->taints[1].value, "");
		CHECK(node->taints[1].time_added == NULL);
		CHECK_INT(node->nconditions, 1);
		CHECK_STR(node->conditions[0].heartbeat, "2026-01-01T00:00:02Z");
		CHECK(node->conditions[0].message == NULL);
	}
	kube_obj_unref(n);
	struct kube_obj *p = decode(&KUBE_KIND_POD_T,
		"{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\"},\"spec\":{\"tolerations\":[{\"operator\":\"Exists\"},{\"key\":\"k\",\"value\":\"v\",\"effect\":\"NoSchedule\"}]}}");
	const struct kube_pod *pod = kube_pod_of(p);
	CHECK(pod && pod->ntolerations == 2);
	if (pod && pod->ntolerations == 2) {
		CHECK(pod->tolerations[0].key == NULL);
		CHECK_STR(pod->tolerations[0].op, "Exists");
		CHECK_STR(pod->tolerations[1].effect, "NoSchedule");
	}
	kube_obj_unref(p);
	struct kube_obj *l = decode(&KUBE_KIND_LEASE_T,
		"{\"metadata\":{\"name\":\"n1\",\"namespace\":\"kube-node-lease\"},\"spec\":{\"holderIdentity\":\"n1\",\"renewTime\":\"2026-01-01T00:00:03.123456Z\"}}");
	const struct kube_lease *lease = kube_lease_of(l);
	CHECK(lease && !strcmp(lease->renew_time, "2026-01-01T00:00:03.123456Z"));
	kube_obj_unref(l);
}

int main(void)
{
	RUN(test_plan);
	RUN(test_plan_requested_time);
	RUN(test_names);
	RUN(test_controllers_flag);
	RUN(test_binder_match);
	RUN(test_nl_plan);
	RUN(test_nl_plan_never_posted);
	RUN(test_nl_observe);
	RUN(test_nl_noexec);
	RUN(test_nl_zone_state);
	RUN(test_nl_zones_update);
	RUN(test_nl_zone_take);
	RUN(test_te);
	RUN(test_vs_tolerations);
	RUN(test_vs_limits);
	RUN(test_vs_fit_message);
	RUN(test_vs_prefilter);
	RUN(test_vs_pod_condition);
	RUN(test_vs_rwop);
	RUN(test_records);
	return CHECK_DONE();
}
