/*
 * Unit tests of kcsi-node's pure parts: the SHA-256 hex digest (base/sha256) that names the
 * kubelet's global mount directories and VolumeAttachments (a wrong digest means mounts nobody
 * finds again); node expansion's rules (which claim gets NodeExpandVolume, what a failure
 * means, the claim's status patch per outcome); the kubelet_volume_stats_* exposition.
 */
#include "check.h"
#include "base/sha256.h"
#include "kube/objects.h"
#include "node/resize.h"
#include "node/stats.h"

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
	Csi__V1__VolumeCondition cond = CSI__V1__VOLUME_CONDITION__INIT;
	cond.abnormal = 1;
	Csi__V1__NodeGetVolumeStatsResponse r = CSI__V1__NODE_GET_VOLUME_STATS_RESPONSE__INIT;
	r.n_usage = 2;
	r.usage = u;
	r.volume_condition = &cond;
	struct nd_sample s[2] = { { .ns = "default", .claim = "a\"b" }, { .ns = "ns2", .claim = "c" } };
	nd_sample_fill(&s[0], &r, true);
	nd_sample_fill(&s[1], &r, false); /* no VOLUME_CONDITION capability: no health series */
	CHECK_INT(s[0].abnormal, 1);
	CHECK_INT(s[1].abnormal, -1);
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
	CHECK(strstr(out.buf, "kubelet_volume_stats_health_status_abnormal{namespace=\"default\",persistentvolumeclaim=\"a\\\"b\"} 1\n") != NULL);
	CHECK(strstr(out.buf, "health_status_abnormal{namespace=\"ns2\"") == NULL);
	strbuf_release(&out);
	/* nothing collected: no families at all */
	nd_samples_render(NULL, 0, &out);
	CHECK_INT(out.len, 0);
	strbuf_release(&out);
}

int main(void)
{
	RUN(test_sha256_vectors);
	RUN(test_pvc_resize_fields);
	RUN(test_resize_decide);
	RUN(test_resize_classify);
	RUN(test_resize_patch);
	RUN(test_volume_stats_render);
	return CHECK_DONE();
}
