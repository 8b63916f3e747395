/*
 * Unit tests for the attacher's pure rules: names it writes into the API and the mapping from a
 * PersistentVolume to the CSI VolumeCapability (table-driven, as the upstream rules read).
 */
#include "attacher/att.h"
#include "kube/leader.h"
#include "check.h"

#include <stdlib.h>

static void test_names(void)
{
	char buf[320];

	att_finalizer_name("loop.kcsi.io", buf, sizeof(buf));
	CHECK_STR(buf, "external-attacher/loop-kcsi-io");
	att_finalizer_name("csi/dummy", buf, sizeof(buf));
	CHECK_STR(buf, "external-attacher/csi-dummy");
	att_finalizer_name("hostpath.csi.k8s.io.", buf, sizeof(buf));
	CHECK_STR(buf, "external-attacher/hostpath-csi-k8s-io-X"); /* no trailing '-' */
	kube_leader_lease_name("external-attacher-leader", "ebs.csi.aws.com", buf, sizeof(buf));
	CHECK_STR(buf, "external-attacher-leader-ebs-csi-aws-com");
	kube_leader_lease_name("external-attacher-leader", "odd.driver/", buf, sizeof(buf));
	CHECK_STR(buf, "external-attacher-leader-odd-driver-X");
	att_sanitize_name("Ab-9_Z", buf, sizeof(buf));
	CHECK_STR(buf, "Ab-9-Z");
}

static void test_access_modes(void)
{
	static const struct {
		unsigned modes;
		bool snmw;
		int want; /* -1: error */
	} cases[] = {
		{ KUBE_RWO, false, CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER },
		{ KUBE_RWO, true, CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_MULTI_WRITER },
		{ KUBE_RWOP, false, CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER },
		{ KUBE_RWOP, true, CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_SINGLE_WRITER },
		{ KUBE_RWOP | KUBE_RWO, true, -1 },
		{ KUBE_ROX, false, CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_READER_ONLY },
		{ KUBE_RWX, false, CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_MULTI_WRITER },
		{ KUBE_RWX | KUBE_ROX | KUBE_RWO, true,
		  CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_MULTI_WRITER },
		{ KUBE_ROX | KUBE_RWO, false, -1 },
		{ 0, false, -1 },
	};
	char err[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		err[0] = '\0';
		int got = att_access_mode(cases[i].modes, cases[i].snmw, err, sizeof(err));
		if (got != cases[i].want) {
			fprintf(stderr, "case %zu: modes=%u snmw=%d got %d want %d\n", i, cases[i].modes,
				cases[i].snmw, got, cases[i].want);
			check_failures++;
		}
		if (cases[i].want < 0)
			CHECK(err[0] != '\0');
	}
	att_access_mode(KUBE_ROX | KUBE_RWO, false, err, sizeof(err));
	CHECK_STR(err, "CSI does not support ReadOnlyMany and ReadWriteOnce on the same PersistentVolume");
}

static void test_capability(void)
{
	const char *opts[] = { "noatime", "discard" };
	struct kube_pv pv = { 0 };
	struct csi_arena *a = csi_arena_new();
	char err[256];
	Csi__V1__VolumeCapability *cap;

	pv.driver = "loop.kcsi.io";
	pv.access_modes = KUBE_RWO;
	pv.mount_options = opts;
	pv.nmount_options = 2;
	cap = att_capability(a, &pv, false, "", err, sizeof(err));
	CHECK(cap && cap->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT);
	CHECK_STR(cap->mount->fs_type, ""); /* no fsType and no --default-fstype: left to the driver */
	CHECK_INT(cap->mount->n_mount_flags, 2);
	CHECK_STR(cap->mount->mount_flags[1], "discard");
	cap = att_capability(a, &pv, false, "xfs", err, sizeof(err));
	CHECK_STR(cap->mount->fs_type, "xfs");
	pv.fs_type = "ext4";
	cap = att_capability(a, &pv, false, "xfs", err, sizeof(err));
	CHECK_STR(cap->mount->fs_type, "ext4"); /* the PV's own fsType wins */
	pv.block = true;
	cap = att_capability(a, &pv, false, "xfs", err, sizeof(err));
	CHECK(cap && cap->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK);
	CHECK_INT(cap->access_mode->mode, CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER);
	pv.driver = NULL;
	CHECK(att_capability(a, &pv, false, "", err, sizeof(err)) == NULL);
	CHECK_STR(err, "CSI volume source was nil");
	csi_arena_free(a);
}

static void test_finalizer_patch_list(void)
{
	const char *fins[] = { "kubernetes.io/pv-protection", "external-attacher/loop-kcsi-io" };
	struct kube_pv pv = { 0 };
	char *s;

	pv.meta.finalizers = fins;
	pv.meta.nfinalizers = 2;
	json_t *j = att_finalizers_json(&pv.meta, "external-attacher/loop-kcsi-io", NULL);
	s = json_dumps(j, JSON_COMPACT);
	CHECK_STR(s, "[\"kubernetes.io/pv-protection\"]"); /* others' finalizers are kept */
	free(s);
	json_decref(j);
	pv.meta.nfinalizers = 1;
	j = att_finalizers_json(&pv.meta, "kubernetes.io/pv-protection", NULL);
	CHECK(json_is_null(j)); /* the last one removed: null deletes the field in a merge patch */
	json_decref(j);
	j = att_finalizers_json(&pv.meta, NULL, "external-attacher/x");
	s = json_dumps(j, JSON_COMPACT);
	CHECK_STR(s, "[\"kubernetes.io/pv-protection\",\"external-attacher/x\"]");
	free(s);
	json_decref(j);
}

static void test_grpc_error_wording(void)
{
	struct csi_status st = { 5, "volume vol-1 not found" };
	char buf[256];

	att_grpc_error(&st, buf, sizeof(buf));
	CHECK_STR(buf, "rpc error: code = NotFound desc = volume vol-1 not found");
	st.code = 4;
	att_grpc_error(&st, buf, sizeof(buf));
	CHECK(strstr(buf, "code = DeadlineExceeded") != NULL);
}

int main(void)
{
	RUN(test_names);
	RUN(test_access_modes);
	RUN(test_capability);
	RUN(test_finalizer_patch_list);
	RUN(test_grpc_error_wording);
	return CHECK_DONE();
}
