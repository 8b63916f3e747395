/*
 * Unit tests of kcsi-node's pure parts: the SHA-256 hex digest (base/sha256) that names the
 * kubelet's global mount directories and VolumeAttachments (a wrong digest means mounts nobody
 * finds again); node expansion's rules (which claim gets NodeExpandVolume, what a failure
 * means, the claim's status patch per outcome); the kubelet_volume_stats_* exposition; the Node's
 * and the pods' status as the scheduler and kubectl read them (capacity, allocatable, conditions,
 * READY and Running); the CSI access mode the volume manager sends (one writer or many).
 */
#include "check.h"
#include "base/sha256.h"
#include "base/version.h"
#include "kube/objects.h"
#include "node/node_int.h"
#include "node/resize.h"
#include "node/stats.h"
#include "node/status.h"

#include <stdlib.h>
#include <string.h>

#define MiB (1024LL * 1024)

static void test_sha256_vectors(void)
{
	static const struct {
		const char *in, *hex;
	} cases[] = {
		/* FIPS 180-4 examples: empty, one block, two blocks (padding spills over) */
		{ "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" },
		{ "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" },
		{ "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
		  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1" },
		/* 55 and 64 bytes: the last length that fits one padded block, and a full block */
		{ "0123456789012345678901234567890123456789012345678901234",
		  "f34d5a0f80c0cbf84c8c0b90218c22637abd199965249da736a20143c8c9c9d9" },
		{ "0123456789012345678901234567890123456789012345678901234567890123",
		  "9674d9e078535b7cec43284387a6ee39956188e735a85452b0050b55341cda56" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char out[65];
		sha256_hex(cases[i].in, strlen(cases[i].in), out);
		CHECK_STR(out, cases[i].hex);
	}
}

static struct kube_obj *pvc_of(const char *text)
{
	json_t *j = json_loads(text, 0, NULL);
	char err[128];
	struct kube_obj *o = kube_decode_json(&KUBE_KIND_PERSISTENTVOLUMECLAIM, j, err, sizeof(err));
	json_decref(j);
	return o;
}

/* The claim fields node expansion reads, as the resizer writes them (and when absent). */
static void test_pvc_resize_fields(void)
{
	struct kube_obj *o = pvc_of(
		"{\"metadata\":{\"name\":\"c1\",\"namespace\":\"default\"},\"status\":{"
		"\"capacity\":{\"storage\":\"16Mi\"},\"allocatedResources\":{\"storage\":\"32Mi\"},"
		"\"allocatedResourceStatuses\":{\"storage\":\"NodeResizePending\"},"
		"\"conditions\":[{\"type\":\"Resizing\",\"status\":\"True\"},"
		"{\"type\":\"FileSystemResizePending\",\"status\":\"True\"}]}}");
	const struct kube_pvc *pvc = kube_pvc_of(o);
	CHECK(pvc != NULL);
	if (pvc) {
		CHECK(pvc->conds & KUBE_PVC_FS_RESIZE_PENDING);
		CHECK_INT(pvc->resize_status, KUBE_RESIZE_NODE_PENDING);
		CHECK_INT(pvc->allocated, 32 * MiB);
		CHECK_INT(pvc->capacity, 16 * MiB);
	}
	kube_obj_unref(o);
	o = pvc_of("{\"metadata\":{\"name\":\"c2\",\"namespace\":\"default\"},\"status\":{"
		   "\"conditions\":[{\"type\":\"FileSystemResizePending\",\"status\":\"False\"}]}}");
	pvc = kube_pvc_of(o);
	CHECK(pvc != NULL);
	if (pvc) {
		CHECK(!(pvc->conds & KUBE_PVC_FS_RESIZE_PENDING));
		CHECK_INT(pvc->resize_status, KUBE_RESIZE_NONE);
		CHECK_INT(pvc->allocated, -1);
	}
	kube_obj_unref(o);
}

/* Which claim needs the node, as the kubelet's expandVolumeDuringMount / node expander. */
static void test_resize_decide(void)
{
	static const struct {
		const char *why;
		struct nd_resize_in in;
		enum nd_resize_verdict verdict;
		bool recovery, mark_infeasible;
	} cases[] = {
		{ "online, FileSystemResizePending, PV larger, older resizer",
		  { .pv_capacity = 32 * MiB, .pvc_capacity = 16 * MiB, .pvc_request = 32 * MiB,
		    .fs_resize_pending = true, .allocated = -1, .driver_expands = true },
		  ND_RESIZE_EXPAND, false, false },
		{ "online, NodeResizePending (recovery semantics)",
		  { .pv_capacity = 32 * MiB, .pvc_capacity = 16 * MiB, .pvc_request = 32 * MiB,
		    .fs_resize_pending = true, .resize_status = KUBE_RESIZE_NODE_PENDING,
		    .allocated = 32 * MiB, .driver_expands = true },
		  ND_RESIZE_EXPAND, true, false },
		{ "online, NodeResizeInProgress left by an earlier try",
		  { .pv_capacity = 32 * MiB, .pvc_capacity = 16 * MiB, .pvc_request = 32 * MiB,
		    .resize_status = KUBE_RESIZE_NODE_IN_PROGRESS, .allocated = 32 * MiB,
		    .driver_expands = true },
		  ND_RESIZE_EXPAND, true, false },
		{ "condition set but PV not larger: no call",
		  { .pv_capacity = 16 * MiB, .pvc_capacity = 16 * MiB, .pvc_request = 16 * MiB,
		    .fs_resize_pending = true, .allocated = -1, .driver_expands = true },
		  ND_RESIZE_NONE, false, false },
		{ "PV larger but no word from the resizer: a mounted volume waits",
		  { .pv_capacity = 32 * MiB, .pvc_capacity = 16 * MiB, .pvc_request = 32 * MiB,
		    .allocated = -1, .driver_expands = true },
		  ND_RESIZE_NONE, false, false },
		{ "PV larger at mount (offline): the sizes alone decide",
		  { .pv_capacity = 32 * MiB, .pvc_capacity = 16 * MiB, .pvc_request = 32 * MiB,
		    .allocated = -1, .at_mount = true, .driver_expands = true },
		  ND_RESIZE_EXPAND, false, false },
		{ "controller still expanding: not the node's turn",
		  { .pv_capacity = 32 * MiB, .pvc_capacity = 16 * MiB, .pvc_request = 32 * MiB,
		    .resize_status = KUBE_RESIZE_CONTROLLER_IN_PROGRESS, .allocated = 32 * MiB,
		    .at_mount = true, .driver_expands = true },
		  ND_RESIZE_NONE, true, false },
		{ "NodeResizeInfeasible: never again by itself",
		  { .pv_capacity = 32 * MiB, .pvc_capacity = 16 * MiB, .pvc_request = 32 * MiB,
		    .fs_resize_pending = true, .resize_status = KUBE_RESIZE_NODE_INFEASIBLE,
		    .allocated = 32 * MiB, .driver_expands = true },
		  ND_RESIZE_NONE, true, false },
		{ "already expanded here, claim status on its way",
		  { .pv_capacity = 32 * MiB, .pvc_capacity = 16 * MiB, .pvc_request = 32 * MiB,
		    .fs_resize_pending = true, .allocated = -1, .driver_expands = true,
		    .done_size = 32 * MiB },
		  ND_RESIZE_NONE, false, false },
		{ "a final failure for this size is not retried",
		  { .pv_capacity = 32 * MiB, .pvc_capacity = 16 * MiB, .pvc_request = 32 * MiB,
		    .resize_status = KUBE_RESIZE_NODE_IN_PROGRESS, .allocated = 32 * MiB,
		    .driver_expands = true, .failed_final_size = 32 * MiB },
		  ND_RESIZE_NONE, true, false },
		{ "a new size after a final failure, request changed again: infeasible if final",
		  { .pv_capacity = 48 * MiB, .pvc_capacity = 16 * MiB, .pvc_request = 64 * MiB,
		    .resize_status = KUBE_RESIZE_NODE_PENDING, .allocated = 48 * MiB,
		    .driver_expands = true, .failed_final_size = 32 * MiB },
		  ND_RESIZE_EXPAND, true, true },
		{ "driver without EXPAND_VOLUME: record the size only",
		  { .pv_capacity = 32 * MiB, .pvc_capacity = 16 * MiB, .pvc_request = 32 * MiB,
		    .fs_resize_pending = true, .allocated = -1 },
		  ND_RESIZE_FINISH, false, false },
		{ "read-only volume",
		  { .pv_capacity = 32 * MiB, .pvc_capacity = 16 * MiB, .pvc_request = 32 * MiB,
		    .fs_resize_pending = true, .allocated = -1, .driver_expands = true,
		    .readonly = true },
		  ND_RESIZE_READONLY, false, false },
		{ "claim without status capacity (not bound yet)",
		  { .pv_capacity = 32 * MiB, .pvc_capacity = -1, .pvc_request = 32 * MiB,
		    .fs_resize_pending = true, .allocated = -1, .driver_expands = true },
		  ND_RESIZE_NONE, false, false },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct nd_resize_plan p;
		nd_resize_decide(&cases[i].in, &p);
		if (p.verdict != cases[i].verdict)
			fprintf(stderr, "case: %s\n", cases[i].why);
		CHECK_INT(p.verdict, cases[i].verdict);
		if (p.verdict == ND_RESIZE_NONE)
			continue;
		CHECK_INT(p.recovery, cases[i].recovery);
		CHECK_INT(p.mark_infeasible, cases[i].mark_infeasible);
		CHECK_INT(p.new_size, cases[i].in.pv_capacity);
	}
}

static void test_resize_classify(void)
{
	static const struct {
		int code;
		enum nd_resize_error want;
	} cases[] = {
		{ 14, ND_RESIZE_ERR_RETRY },      { 4, ND_RESIZE_ERR_RETRY },
		{ 8, ND_RESIZE_ERR_RETRY },       { 10, ND_RESIZE_ERR_RETRY },
		{ 1, ND_RESIZE_ERR_RETRY },       { 9, ND_RESIZE_ERR_PRECONDITION },
		{ 3, ND_RESIZE_ERR_INFEASIBLE },  { 11, ND_RESIZE_ERR_INFEASIBLE },
		{ 5, ND_RESIZE_ERR_INFEASIBLE },  { 13, ND_RESIZE_ERR_FINAL },
		{ 12, ND_RESIZE_ERR_FINAL },      { 2, ND_RESIZE_ERR_FINAL },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		CHECK_INT(nd_resize_classify(cases[i].code), cases[i].want);
}

/* The claim's status patch per outcome, compared as compact JSON with sorted keys. */
static void test_resize_patch(void)
{
	static const char claim[] =
		"{\"metadata\":{\"name\":\"c1\",\"resourceVersion\":\"42\"},"
		"\"status\":{\"capacity\":{\"storage\":\"16Mi\"},"
		"\"allocatedResourceStatuses\":{\"storage\":\"NodeResizePending\"},"
		"\"conditions\":[{\"type\":\"Other\",\"status\":\"True\"},"
		"{\"type\":\"FileSystemResizePending\",\"status\":\"True\"}]}}";
	static const char legacy[] =
		"{\"metadata\":{\"resourceVersion\":\"7\"},\"status\":{\"capacity\":{\"storage\":\"16Mi\"},"
		"\"conditions\":[{\"type\":\"FileSystemResizePending\",\"status\":\"True\"}]}}";
	static const char failed[] =
		"{\"metadata\":{\"resourceVersion\":\"9\"},\"status\":{"
		"\"allocatedResourceStatuses\":{\"storage\":\"NodeResizeInProgress\",\"cpu\":\"x\"},"
		"\"conditions\":[{\"type\":\"NodeResizeError\",\"status\":\"True\",\"message\":\"old\"}]}}";
	static const struct {
		const char *why, *pvc;
		enum nd_resize_mark mark;
		const char *want; /* NULL: no patch */
	} cases[] = {
		{ "in progress", claim, ND_MARK_IN_PROGRESS,
		  "{\"metadata\":{\"resourceVersion\":\"42\"},\"status\":{\"allocatedResourceStatuses\":{\"storage\":\"NodeResizeInProgress\"}}}" },
		{ "in progress already", failed, ND_MARK_IN_PROGRESS, NULL },
		{ "finished: capacity, resize conditions gone, storage status gone", claim,
		  ND_MARK_FINISHED,
		  "{\"metadata\":{\"resourceVersion\":\"42\"},\"status\":{\"allocatedResourceStatuses\":null,"
		  "\"capacity\":{\"storage\":\"32Mi\"},\"conditions\":[{\"status\":\"True\",\"type\":\"Other\"}]}}" },
		{ "finished, older resizer: no allocatedResourceStatuses touched", legacy, ND_MARK_FINISHED,
		  "{\"metadata\":{\"resourceVersion\":\"7\"},\"status\":{\"capacity\":{\"storage\":\"32Mi\"},\"conditions\":[]}}" },
		{ "finished keeps other resources' statuses", failed, ND_MARK_FINISHED,
		  "{\"metadata\":{\"resourceVersion\":\"9\"},\"status\":{\"allocatedResourceStatuses\":{\"storage\":null},"
		  "\"capacity\":{\"storage\":\"32Mi\"},\"conditions\":[]}}" },
		{ "failed: NodeResizeError added, no resourceVersion", claim, ND_MARK_FAILED,
		  "{\"status\":{\"conditions\":[{\"status\":\"True\",\"type\":\"Other\"},"
		  "{\"status\":\"True\",\"type\":\"FileSystemResizePending\"},"
		  "{\"lastTransitionTime\":\"T\",\"message\":\"failed to expand pvc with boom\",\"status\":\"True\",\"type\":\"NodeResizeError\"}]}}" },
		{ "failed again: the condition stays as it is", failed, ND_MARK_FAILED, NULL },
		{ "infeasible: status NodeResizeInfeasible", failed, ND_MARK_INFEASIBLE,
		  "{\"status\":{\"allocatedResourceStatuses\":{\"storage\":\"NodeResizeInfeasible\"}}}" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *pvc = json_loads(cases[i].pvc, 0, NULL);
		CHECK(pvc != NULL);
		json_t *p = nd_resize_patch(pvc, cases[i].mark, 32 * MiB, "boom", "T");
		char *got = p ? json_dumps(p, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
		if (!cases[i].want) {
			if (got)
				fprintf(stderr, "case %s: unexpected patch %s\n", cases[i].why, got);
			CHECK(got == NULL);
		} else {
			if (!got || strcmp(got, cases[i].want))
				fprintf(stderr, "case %s\n", cases[i].why);
			CHECK_STR(got, cases[i].want);
		}
		free(got);
		json_decref(p);
		json_decref(pvc);
	}
}

/* A NodeGetVolumeStats answer becomes the kubelet's gauges, one series per claim. */
static void test_volume_stats_render(void)
{
	Csi__V1__VolumeUsage b = CSI__V1__VOLUME_USAGE__INIT, n = CSI__V1__VOLUME_USAGE__INIT;
	b.unit = CSI__V1__VOLUME_USAGE__UNIT__BYTES;
	b.total = 100;
	b.used = 30;
	b.available = 60;
	n.unit = CSI__V1__VOLUME_USAGE__UNIT__INODES;
	n.total = 10;
	n.used = 4;
	n.available = 6;
	Csi__V1__VolumeUsage *u[] = { &b, &n };
	Csi__V1__NodeGetVolumeStatsResponse r = CSI__V1__NODE_GET_VOLUME_STATS_RESPONSE__INIT;
	r.n_usage = 2;
	r.usage = u;
	struct nd_sample s[2] = { { .ns = "default", .claim = "a\"b" }, { .ns = "ns2", .claim = "c" } };
	nd_sample_fill(&s[0], &r);
	nd_sample_fill(&s[1], &r);
	struct strbuf out = STRBUF_INIT;
	nd_samples_render(s, 2, &out);
	CHECK(strstr(out.buf, "# HELP kubelet_volume_stats_capacity_bytes [ALPHA] Capacity in bytes of the volume\n"
			      "# TYPE kubelet_volume_stats_capacity_bytes gauge\n"
			      "kubelet_volume_stats_capacity_bytes{namespace=\"default\",persistentvolumeclaim=\"a\\\"b\"} 100\n"
			      "kubelet_volume_stats_capacity_bytes{namespace=\"ns2\",persistentvolumeclaim=\"c\"} 100\n") != NULL);
	CHECK(strstr(out.buf, "kubelet_volume_stats_used_bytes{namespace=\"ns2\",persistentvolumeclaim=\"c\"} 30\n") != NULL);
	CHECK(strstr(out.buf, "kubelet_volume_stats_available_bytes{namespace=\"ns2\",persistentvolumeclaim=\"c\"} 60\n") != NULL);
	CHECK(strstr(out.buf, "kubelet_volume_stats_inodes{namespace=\"ns2\",persistentvolumeclaim=\"c\"} 10\n") != NULL);
	CHECK(strstr(out.buf, "kubelet_volume_stats_inodes_free{namespace=\"ns2\",persistentvolumeclaim=\"c\"} 6\n") != NULL);
	CHECK(strstr(out.buf, "kubelet_volume_stats_inodes_used{namespace=\"ns2\",persistentvolumeclaim=\"c\"} 4\n") != NULL);
	/* CSI v1.13 has no VolumeCondition and the kubelet v1.37 no health gauge */
	CHECK(strstr(out.buf, "health_status_abnormal") == NULL);
	strbuf_release(&out);
	/* nothing collected: no families at all */
	nd_samples_render(NULL, 0, &out);
	CHECK_INT(out.len, 0);
	strbuf_release(&out);
}

static struct nd_machine test_machine(void)
{
	struct nd_machine m;
	memset(&m, 0, sizeof(m));
	m.cpus = 8;
	m.memory = 16LL * 1024 * 1024 * 1024 + 4096;
	m.ephemeral = 100LL * 1024 * 1024 * 1024;
	snprintf(m.hugepage_names[0], sizeof(m.hugepage_names[0]), "hugepages-2Mi");
	m.nhugepages = 1;
	snprintf(m.kernel, sizeof(m.kernel), "6.1.0-test");
	snprintf(m.os_image, sizeof(m.os_image), "Debian GNU/Linux 12 (bookworm)");
	snprintf(m.hostname, sizeof(m.hostname), "host-a");
	snprintf(m.node_ip, sizeof(m.node_ip), "10.1.2.3");
	return m;
}

static struct flag_map map_of(struct flag_kv *kv, size_t n)
{
	struct flag_map m = { kv, n };
	return m;
}

/* Capacity and allocatable as the scheduler reads them, per flag combination. */
static void test_node_resources(void)
{
	struct flag_kv cap[] = { { "cpu", "4" }, { "memory", "8Gi" }, { "example.com/gpu", "2" } };
	struct flag_kv sys[] = { { "cpu", "250m" }, { "memory", "1Gi" } };
	struct flag_kv kube[] = { { "cpu", "5" }, { "ephemeral-storage", "10Gi" } };
	struct flag_kv bad_cpu[] = { { "cpu", "four" } };
	struct flag_kv bad_mem[] = { { "memory", "8Qi" } };
	struct flag_kv unknown[] = { { "gpu", "1" } };
	struct flag_map m_cap = map_of(cap, 3), m_sys = map_of(sys, 2), m_kube = map_of(kube, 2),
			m_bad_cpu = map_of(bad_cpu, 1), m_bad_mem = map_of(bad_mem, 1),
			m_unknown = map_of(unknown, 1);
	static const struct {
		const char *what;
		int max_pods;
		int cap, sys, kube; /* which maps: 0 none, else index into maps[] */
		const char *capacity, *allocatable, *err;
	} cases[] = {
		{ "the machine, kubelet's 110 pods", 110, 0, 0, 0,
		  "{\"cpu\":\"8\",\"ephemeral-storage\":\"100Gi\",\"hugepages-2Mi\":\"0\",\"memory\":\"16777220Ki\",\"pods\":\"110\"}",
		  "{\"cpu\":\"8\",\"ephemeral-storage\":\"100Gi\",\"hugepages-2Mi\":\"0\",\"memory\":\"16777220Ki\",\"pods\":\"110\"}", NULL },
		{ "--capacity replaces and adds, --system-reserved subtracts", 3, 1, 2, 0,
		  "{\"cpu\":\"4\",\"ephemeral-storage\":\"100Gi\",\"example.com/gpu\":\"2\",\"hugepages-2Mi\":\"0\",\"memory\":\"8Gi\",\"pods\":\"3\"}",
		  "{\"cpu\":\"3750m\",\"ephemeral-storage\":\"100Gi\",\"example.com/gpu\":\"2\",\"hugepages-2Mi\":\"0\",\"memory\":\"7Gi\",\"pods\":\"3\"}", NULL },
		{ "reserving more than there is leaves 0, not a negative", 110, 1, 0, 3,
		  NULL, "{\"cpu\":\"0\",\"ephemeral-storage\":\"90Gi\",\"example.com/gpu\":\"2\",\"hugepages-2Mi\":\"0\",\"memory\":\"8Gi\",\"pods\":\"110\"}", NULL },
		{ "--max-pods 0", 0, 0, 0, 0, NULL, NULL, "--max-pods must be positive, not 0" },
		{ "a cpu that is no quantity", 110, 4, 0, 0, NULL, NULL, "--capacity cpu=four: " },
		{ "a memory that is no quantity", 110, 5, 0, 0, NULL, NULL, "--capacity memory=8Qi: " },
		{ "reserving what the node does not have", 110, 0, 6, 0, NULL, NULL,
		  "--system-reserved: gpu is not a resource of this node" },
	};
	const struct flag_map *maps[] = { NULL, &m_cap, &m_sys, &m_kube, &m_bad_cpu, &m_bad_mem, &m_unknown };
	struct nd_machine m = test_machine();
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct nd_resource_flags f = { cases[i].max_pods, maps[cases[i].cap], maps[cases[i].sys],
					       maps[cases[i].kube] };
		struct nd_resources cap_r, alloc_r;
		char err[256] = "";
		int rc = nd_resources_build(&m, &f, &cap_r, &alloc_r, err, sizeof(err));
		if (cases[i].err) {
			CHECK_INT(rc, -1);
			CHECK(strncmp(err, cases[i].err, strlen(cases[i].err)) == 0);
			continue;
		}
		CHECK_INT(rc, 0);
		json_t *st = nd_node_status(&m, &cap_r, &alloc_r, "2026-01-01T00:00:10Z", "2026-01-01T00:00:00Z");
		char *c = json_dumps(json_object_get(st, "capacity"), JSON_COMPACT | JSON_SORT_KEYS);
		char *a = json_dumps(json_object_get(st, "allocatable"), JSON_COMPACT | JSON_SORT_KEYS);
		if (cases[i].capacity)
			CHECK_STR(c, cases[i].capacity);
		CHECK_STR(a, cases[i].allocatable);
		free(c);
		free(a);
		json_decref(st);
	}
}

/* The Node's identity, addresses and the kubelet's conditions. */
static void test_node_status_shape(void)
{
	struct nd_machine m = test_machine();
	struct nd_resource_flags f = { .max_pods = 110 };
	struct nd_resources cap_r, alloc_r;
	char err[256];
	CHECK_INT(nd_resources_build(&m, &f, &cap_r, &alloc_r, err, sizeof(err)), 0);
	json_t *st = nd_node_status(&m, &cap_r, &alloc_r, "2026-01-01T00:00:10Z", "2026-01-01T00:00:00Z");
	json_t *info = json_object_get(st, "nodeInfo");
	CHECK_STR(json_string_value(json_object_get(info, "kubeletVersion")), kcsi_version);
	CHECK_STR(json_string_value(json_object_get(info, "kernelVersion")), "6.1.0-test");
	CHECK_STR(json_string_value(json_object_get(info, "osImage")), "Debian GNU/Linux 12 (bookworm)");
	CHECK_STR(json_string_value(json_object_get(info, "operatingSystem")), "linux");
	CHECK_STR(json_string_value(json_object_get(info, "architecture")), nd_goarch());
	CHECK(json_object_get(info, "kubeProxyVersion") == NULL); /* kubelet stopped setting it */
	char *addrs = json_dumps(json_object_get(st, "addresses"), JSON_COMPACT | JSON_SORT_KEYS);
	CHECK_STR(addrs, "[{\"address\":\"10.1.2.3\",\"type\":\"InternalIP\"},{\"address\":\"host-a\",\"type\":\"Hostname\"}]");
	free(addrs);
	size_t i;
	json_t *c;
	int seen = 0;
	json_array_foreach(json_object_get(st, "conditions"), i, c) {
		const char *type = json_string_value(json_object_get(c, "type"));
		const char *status = json_string_value(json_object_get(c, "status"));
		CHECK_STR(json_string_value(json_object_get(c, "lastHeartbeatTime")), "2026-01-01T00:00:10Z");
		CHECK_STR(json_string_value(json_object_get(c, "lastTransitionTime")), "2026-01-01T00:00:00Z");
		if (strcmp(type, "Ready") == 0) {
			CHECK_STR(status, "True");
			CHECK_STR(json_string_value(json_object_get(c, "reason")), "KubeletReady");
			CHECK_STR(json_string_value(json_object_get(c, "message")), "kubelet is posting ready status");
		} else {
			CHECK_STR(status, "False"); /* no pressure: the scheduler's taints stay off */
		}
		seen++;
	}
	CHECK_INT(seen, 4);
	json_decref(st);
}

/* A running pod: what `kubectl get pods` (READY, STATUS) and `kubectl wait` read. */
static void test_pod_status(void)
{
	json_error_t je;
	json_t *pod = json_loads(
		"{\"spec\":{\"initContainers\":[{\"name\":\"init\",\"image\":\"busybox\"}],"
		"\"containers\":[{\"name\":\"app\",\"image\":\"nginx:1\"},{\"name\":\"side\"}]},"
		"\"status\":{\"conditions\":[{\"type\":\"PodScheduled\",\"status\":\"True\","
		"\"lastTransitionTime\":\"2026-01-01T00:00:01Z\"}]}}", 0, &je);
	CHECK(pod != NULL);
	json_t *st = nd_pod_status(pod, "u-1", "10.1.2.3", "2026-01-01T00:00:05Z");
	CHECK_STR(json_string_value(json_object_get(st, "phase")), "Running");
	CHECK_STR(json_string_value(json_object_get(st, "podIP")), "10.1.2.3");
	CHECK_STR(json_string_value(json_object_get(st, "hostIP")), "10.1.2.3");
	CHECK_STR(json_string_value(json_object_get(json_array_get(json_object_get(st, "podIPs"), 0), "ip")), "10.1.2.3");
	size_t i;
	json_t *c;
	int ready = 0;
	json_array_foreach(json_object_get(st, "conditions"), i, c) {
		CHECK_STR(json_string_value(json_object_get(c, "status")), "True");
		if (strcmp(json_string_value(json_object_get(c, "type")), "PodScheduled") == 0)
			CHECK_STR(json_string_value(json_object_get(c, "lastTransitionTime")), "2026-01-01T00:00:01Z");
		ready += strcmp(json_string_value(json_object_get(c, "type")), "Ready") == 0;
	}
	CHECK_INT(json_array_size(json_object_get(st, "conditions")), 5);
	CHECK_INT(ready, 1);
	json_t *cs = json_object_get(st, "containerStatuses");
	CHECK_INT(json_array_size(cs), 2);
	json_t *app = json_array_get(cs, 0), *side = json_array_get(cs, 1);
	CHECK_STR(json_string_value(json_object_get(app, "containerID")), "kcsi://u-1/app");
	CHECK_STR(json_string_value(json_object_get(app, "image")), "nginx:1");
	CHECK(json_is_true(json_object_get(app, "ready")) && json_is_true(json_object_get(app, "started")));
	CHECK_STR(json_string_value(json_object_get(json_object_get(json_object_get(app, "state"), "running"), "startedAt")),
		  "2026-01-01T00:00:05Z");
	CHECK_STR(json_string_value(json_object_get(side, "image")), ""); /* no image: no crash */
	json_t *init = json_array_get(json_object_get(st, "initContainerStatuses"), 0);
	CHECK_STR(json_string_value(json_object_get(json_object_get(json_object_get(init, "state"), "terminated"), "reason")),
		  "Completed");
	CHECK(json_is_false(json_object_get(init, "ready")));
	json_decref(st);
	json_decref(pod);

	/* A pod the scheduler never touched (nodeName set by hand): PodScheduled is now. */
	pod = json_loads("{\"spec\":{\"containers\":[{\"name\":\"a\",\"image\":\"x\"}]}}", 0, &je);
	st = nd_pod_status(pod, "u-2", "10.1.2.3", "2026-01-01T00:00:05Z");
	CHECK(json_object_get(st, "initContainerStatuses") == NULL);
	json_array_foreach(json_object_get(st, "conditions"), i, c)
		CHECK_STR(json_string_value(json_object_get(c, "lastTransitionTime")), "2026-01-01T00:00:05Z");
	json_decref(st);
	json_decref(pod);
	/* Waiting for its volumes: what the kubelet reports, which kubectl shows as
	 * ContainerCreating, or Init:0/1 with an init container. */
	pod = json_loads("{\"spec\":{\"containers\":[{\"name\":\"a\",\"image\":\"x\"},"
			 "{\"name\":\"b\"}]}}", 0, &je);
	st = nd_pod_status_waiting(pod, "10.1.2.3", "2026-01-01T00:00:05Z");
	CHECK_STR(json_string_value(json_object_get(st, "phase")), "Pending");
	CHECK(json_object_get(st, "podIP") == NULL);
	json_t *w = json_array_get(json_object_get(st, "containerStatuses"), 1);
	CHECK_STR(json_string_value(json_object_get(json_object_get(json_object_get(w, "state"),
		  "waiting"), "reason")), "ContainerCreating");
	CHECK(json_is_false(json_object_get(w, "ready")));
	int notready = 0;
	json_array_foreach(json_object_get(st, "conditions"), i, c) {
		const char *type = json_string_value(json_object_get(c, "type"));
		if (!strcmp(type, "Ready") || !strcmp(type, "ContainersReady")) {
			CHECK_STR(json_string_value(json_object_get(c, "status")), "False");
			CHECK_STR(json_string_value(json_object_get(c, "message")),
				  "containers with unready status: [a b]");
			notready++;
		}
		if (!strcmp(type, "Initialized"))
			CHECK_STR(json_string_value(json_object_get(c, "status")), "True");
	}
	CHECK_INT(notready, 2);
	json_decref(st);
	json_decref(pod);
	pod = json_loads("{\"spec\":{\"initContainers\":[{\"name\":\"i\"}],"
			 "\"containers\":[{\"name\":\"a\"}]}}", 0, &je);
	st = nd_pod_status_waiting(pod, "10.1.2.3", "2026-01-01T00:00:05Z");
	w = json_array_get(json_object_get(st, "initContainerStatuses"), 0);
	CHECK_STR(json_string_value(json_object_get(json_object_get(json_object_get(w, "state"),
		  "waiting"), "reason")), "PodInitializing");
	json_array_foreach(json_object_get(st, "conditions"), i, c)
		if (!strcmp(json_string_value(json_object_get(c, "type")), "Initialized"))
			CHECK_STR(json_string_value(json_object_get(c, "message")),
				  "containers with incomplete status: [i]");
	json_decref(st);
	json_decref(pod);
}

/* The machine's files: the default route's interface and the OS image. */
static void test_machine_parsers(void)
{
	const char *route =
		"Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\n"
		"eth1\t0011A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\n"
		"eth0\t00000000\t0100A8C0\t0003\t0\t0\t0\t00000000\n";
	char iface[32];
	CHECK(nd_route_default_iface(route, iface, sizeof(iface)));
	CHECK_STR(iface, "eth0");
	CHECK(!nd_route_default_iface("Iface\tDestination\n", iface, sizeof(iface)));
	CHECK(!nd_route_default_iface("", iface, sizeof(iface)));
	CHECK(!nd_route_default_iface(NULL, iface, sizeof(iface)));
	/* a default route that is down does not count */
	CHECK(!nd_route_default_iface("h\neth0\t00000000\t0100A8C0\t0002\n", iface, sizeof(iface)));
	static const struct {
		const char *text, *want;
	} os[] = {
		{ "NAME=\"Debian\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\n",
		  "Debian GNU/Linux 12 (bookworm)" },
		{ "PRETTY_NAME='Alpine Linux v3.19'", "Alpine Linux v3.19" },
		{ "PRETTY_NAME=Plain\n", "Plain" },
		{ "NAME=x\n", "Linux" },
		{ "PRETTY_NAME=\"\"\n", "Linux" },
		{ "PRETTY_NAME=\"unterminated\n", "unterminated" },
		{ NULL, "Linux" },
	};
	for (size_t i = 0; i < sizeof(os) / sizeof(os[0]); i++) {
		char out[64];
		nd_os_release_pretty(os[i].text, out, sizeof(out));
		CHECK_STR(out, os[i].want);
	}
}

/*
 * The kubelet's access-mode mapping (pkg/volume/csi): the PV's first access mode, read against
 * the driver's SINGLE_NODE_MULTI_WRITER node capability. Only with it does ReadWriteOncePod
 * reach the driver as SINGLE_NODE_SINGLE_WRITER, which the driver publishes at one target.
 */
static void test_access_mode(void)
{
	enum { SNW = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER,
	       SNSW = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_SINGLE_WRITER,
	       SNMW = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_MULTI_WRITER,
	       ROX = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_READER_ONLY,
	       RWX = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_MULTI_WRITER };
	static const struct {
		uint8_t mode;
		bool snmw;
		int want;
	} cases[] = {
		{ KUBE_RWOP, true, SNSW }, { KUBE_RWOP, false, SNW },
		{ KUBE_RWO, true, SNMW },  { KUBE_RWO, false, SNW },
		{ KUBE_ROX, true, ROX },   { KUBE_ROX, false, ROX },
		{ KUBE_RWX, true, RWX },   { KUBE_RWX, false, RWX },
		{ 0, true, SNMW },         { 0, false, SNW }, /* no access mode: ReadWriteOnce */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int got = nd_csi_access_mode(cases[i].mode, cases[i].snmw);
		if (got != cases[i].want) {
			fprintf(stderr, "case %zu: mode %u snmw %d: got %d, want %d\n", i,
				cases[i].mode, cases[i].snmw, got, cases[i].want);
			check_failures++;
		}
	}
	/* A PV's capability: its first access mode wins over the others it lists. */
	json_error_t je;
	json_t *j = json_loads("{\"metadata\":{\"name\":\"pv\"},\"spec\":{\"accessModes\":"
			       "[\"ReadWriteOncePod\",\"ReadWriteMany\"],\"volumeMode\":\"Block\","
			       "\"csi\":{\"driver\":\"d\",\"volumeHandle\":\"h\"}}}", 0, &je);
	char err[128];
	struct kube_obj *o = kube_decode_json(&KUBE_KIND_PERSISTENTVOLUME, j, err, sizeof(err));
	json_decref(j);
	const struct kube_pv *pv = kube_pv_of(o);
	CHECK(pv != NULL);
	if (pv) {
		struct csi_arena *a = csi_arena_new();
		Csi__V1__VolumeCapability *cap = nd_pv_capability(a, pv, true);
		CHECK_INT(cap->access_mode->mode, SNSW);
		CHECK(cap->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK);
		cap = nd_pv_capability(a, pv, false);
		CHECK_INT(cap->access_mode->mode, SNW);
		csi_arena_free(a);
	}
	kube_obj_unref(o);
}

int main(void)
{
	RUN(test_sha256_vectors);
	RUN(test_pvc_resize_fields);
	RUN(test_resize_decide);
	RUN(test_resize_classify);
	RUN(test_resize_patch);
	RUN(test_volume_stats_render);
	RUN(test_node_resources);
	RUN(test_node_status_shape);
	RUN(test_pod_status);
	RUN(test_machine_parsers);
	RUN(test_access_mode);
	return CHECK_DONE();
}
