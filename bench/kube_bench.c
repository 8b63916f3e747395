/*
 * kube_bench: figures for the Kubernetes client against a real kube-emulator.
 *
 *   - RSS per cached object after syncing 10,000 VolumeAttachments and 10,000 PersistentVolumes
 *     of realistic size (what an EBS-like driver's objects look like on a real cluster);
 *   - time from informer start to synced for those 20,000 objects (both informers at once);
 *   - PATCH requests per second with 16 threads.
 *
 * Prints figures; never fails on a number. Usage: kube_bench [objects-per-kind] [patch-seconds]
 */
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/timeutil.h"
#include "kube/informer.h"
#include "kube/testing/testenv.h"

static struct kube_testenv env;
static int nobj = 10000;

static void hex(char *out, int n, unsigned seed)
{
	for (int i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		out[i] = "0123456789abcdef"[(seed >> 16) & 15];
	}
	out[n] = 0;
}

static void uuid(char *out, unsigned seed)
{
	char h[33];
	hex(h, 32, seed);
	snprintf(out, 37, "%.8s-%.4s-%.4s-%.4s-%.12s", h, h + 8, h + 12, h + 16, h + 20);
}

static json_t *make_pv(int i)
{
	char name[64], u[40], hx[20], handle[32], node[64];
	uuid(u, (unsigned)i * 7u + 1u);
	snprintf(name, sizeof(name), "pvc-%s", u);
	hex(hx, 17, (unsigned)i);
	snprintf(handle, sizeof(handle), "vol-%s", hx);
	snprintf(node, sizeof(node), "ip-10-0-%d-%d.ec2.internal", i % 20, (i / 20) % 25); /* 500 nodes, 20 volumes each */
	char cu[40];
	uuid(cu, (unsigned)i * 13u + 5u);
	char claim[32];
	snprintf(claim, sizeof(claim), "data-db-%d", i);
	return json_pack(
		"{s:s, s:s,"
		" s:{s:s, s:{s:s}, s:[s, s]},"
		" s:{s:[s], s:{s:s}, s:{s:s, s:s, s:s, s:s, s:s, s:s},"
		"    s:{s:s, s:s, s:s, s:{s:s}},"
		"    s:{s:{s:[{s:[{s:s, s:s, s:[s]}]}]}},"
		"    s:s, s:s, s:s},"
		" s:{s:s}}",
		"apiVersion", "v1", "kind", "PersistentVolume",
		"metadata", "name", name, "annotations", "pv.kubernetes.io/provisioned-by",
		"ebs.csi.aws.com", "finalizers", "kubernetes.io/pv-protection",
		"external-attacher/ebs-csi-aws-com",
		"spec", "accessModes", "ReadWriteOnce", "capacity", "storage", "10Gi", "claimRef",
		"apiVersion", "v1", "kind", "PersistentVolumeClaim", "name", claim, "namespace",
		"production", "uid", cu, "resourceVersion", "123456",
		"csi", "driver", "ebs.csi.aws.com", "volumeHandle", handle, "fsType", "ext4",
		"volumeAttributes", "storage.kubernetes.io/csiProvisionerIdentity",
		"1700000000000-8081-ebs.csi.aws.com",
		"nodeAffinity", "required", "nodeSelectorTerms", "matchExpressions", "key",
		"topology.ebs.csi.aws.com/zone", "operator", "In", "values", "us-east-1a",
		"persistentVolumeReclaimPolicy", "Delete", "storageClassName", "gp3", "volumeMode",
		"Filesystem", "status", "phase", "Bound");
}

static json_t *make_va(int i)
{
	char name[80], h[65], u[40], pv[64], node[64];
	hex(h, 64, (unsigned)i * 31u + 3u);
	/* Real names are "csi-" + 64 hex digits (68 characters). The emulator currently rejects
	 * dot-free names longer than 63, so a dot splits the digits; the length is the same plus one. */
	snprintf(name, sizeof(name), "csi-%.32s.%.32s", h, h + 32);
	uuid(u, (unsigned)i * 7u + 1u);
	snprintf(pv, sizeof(pv), "pvc-%s", u);
	snprintf(node, sizeof(node), "ip-10-0-%d-%d.ec2.internal", i % 20, (i / 20) % 25); /* 500 nodes, 20 volumes each */
	char dev[16];
	snprintf(dev, sizeof(dev), "/dev/xvd%c%c", 'a' + i % 26, 'a' + (i / 26) % 26);
	return json_pack("{s:s, s:s, s:{s:s, s:[s]}, s:{s:s, s:s, s:{s:s}},"
			 " s:{s:b, s:{s:s}}}",
			 "apiVersion", "storage.k8s.io/v1", "kind", "VolumeAttachment", "metadata",
			 "name", name, "finalizers", "external-attacher/ebs-csi-aws-com", "spec",
			 "attacher", "ebs.csi.aws.com", "nodeName", node, "source",
			 "persistentVolumeName", pv, "status", "attached", 1, "attachmentMetadata",
			 "devicePath", dev);
}

struct job {
	int from, to;
};

static void *creator(void *arg)
{
	struct job *j = arg;
	for (int i = j->from; i < j->to; i++) {
		struct kube_err e;
		json_t *pv = make_pv(i), *va = make_va(i);
		json_t *r1 = kube_create(env.client, &KUBE_RES_PERSISTENTVOLUMES, NULL, pv, &e);
		json_t *r2 = kube_create(env.client, &KUBE_RES_VOLUMEATTACHMENTS, NULL, va, &e);
		if (!r1 || !r2)
			fprintf(stderr, "create failed: %s\n", e.message);
		json_decref(r1);
		json_decref(r2);
		json_decref(pv);
		json_decref(va);
	}
	return NULL;
}

static struct kube_informer *informer(const struct kube_kind *k)
{
	struct kube_informer_opts o = { .kind = k };
	struct kube_informer *inf = kube_informer_new(env.client, &o);
	kube_informer_start(inf);
	return inf;
}

static double rss_per_object(const struct kube_kind *k, struct kube_informer **keep)
{
	malloc_trim(0);
	long before = kube_testenv_rss();
	struct kube_informer *inf = informer(k);
	if (!kube_informer_wait_synced(inf, 120 * NSEC_PER_SEC))
		fprintf(stderr, "%s informer did not sync\n", k->name);
	malloc_trim(0);
	long after = kube_testenv_rss();
	*keep = inf;
	return (double)(after - before) / (double)kube_store_len(kube_informer_store(inf));
}

static atomic_long patches, patch_errors;
static int64_t patch_until;

static void *patcher(void *arg)
{
	int t = (int)(intptr_t)arg;
	for (int i = t; mono_now_ns() < patch_until; i += 16) {
		json_t *va = make_va(i % nobj);
		const char *name = json_string_value(json_object_get(json_object_get(va, "metadata"), "name"));
		char body[128];
		snprintf(body, sizeof(body), "{\"status\":{\"attached\":%s}}", i & 1 ? "true" : "false");
		struct kube_err e;
		json_t *r = kube_patch(env.client, &KUBE_RES_VOLUMEATTACHMENTS, NULL, name, true,
				       KUBE_PATCH_MERGE, body, &e);
		if (r)
			atomic_fetch_add(&patches, 1);
		else
			atomic_fetch_add(&patch_errors, 1);
		json_decref(r);
		json_decref(va);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		nobj = atoi(argv[1]);
	int patch_s = argc > 2 ? atoi(argv[2]) : 5;
	const char *args[] = { "--watch-history", "1000", NULL };
	int rc = kube_testenv_start(&env, KCSI_EMULATOR_BIN, args);
	if (rc)
		return rc == KUBE_TESTENV_SKIP ? 0 : 1;

	int64_t t0 = mono_now_ns();
	pthread_t th[16];
	struct job jobs[16];
	for (int i = 0; i < 16; i++) {
		jobs[i] = (struct job){ nobj * i / 16, nobj * (i + 1) / 16 };
		pthread_create(&th[i], NULL, creator, &jobs[i]);
	}
	for (int i = 0; i < 16; i++)
		pthread_join(th[i], NULL);
	printf("created %d VolumeAttachments + %d PersistentVolumes in %.2f s\n", nobj, nobj,
	       (double)(mono_now_ns() - t0) / NSEC_PER_SEC);

	/*
	 * Memory first, on a heap that has not yet held and freed other caches (which would make
	 * the growth look smaller): one kind at a time, RSS growth per cached object after the sync.
	 */
	struct kube_informer *va_inf, *pv_inf;
	double va_b = rss_per_object(&KUBE_KIND_VOLUMEATTACHMENT, &va_inf);
	double pv_b = rss_per_object(&KUBE_KIND_PERSISTENTVOLUME, &pv_inf);
	printf("RSS per cached VolumeAttachment: %.0f bytes (target <= 300)\n", va_b);
	printf("RSS per cached PersistentVolume: %.0f bytes (target <= 600)\n", pv_b);
	printf("process RSS with both caches: %.1f MiB\n", kube_testenv_rss() / 1048576.0);
	size_t n;
	struct kube_obj **v = kube_store_list(kube_informer_store(va_inf), &n);
	if (n)
		printf("one VolumeAttachment record: %zu bytes\n", kube_obj_mem_size(v[0]));
	kube_objs_free(v, n);
	v = kube_store_list(kube_informer_store(pv_inf), &n);
	if (n)
		printf("one PersistentVolume record: %zu bytes\n", kube_obj_mem_size(v[0]));
	kube_objs_free(v, n);
	kube_informer_free(va_inf);
	kube_informer_free(pv_inf);

	/* Sync time: both informers at once, as the attacher starts them. */
	t0 = mono_now_ns();
	struct kube_informer *a = informer(&KUBE_KIND_VOLUMEATTACHMENT);
	struct kube_informer *b = informer(&KUBE_KIND_PERSISTENTVOLUME);
	kube_informer_wait_synced(a, 120 * NSEC_PER_SEC);
	kube_informer_wait_synced(b, 120 * NSEC_PER_SEC);
	double sync_s = (double)(mono_now_ns() - t0) / NSEC_PER_SEC;
	printf("informers synced %zu objects in %.3f s (target <= 1 s)\n",
	       kube_store_len(kube_informer_store(a)) + kube_store_len(kube_informer_store(b)), sync_s);
	kube_informer_free(a);
	kube_informer_free(b);

	patch_until = mono_now_ns() + patch_s * NSEC_PER_SEC;
	t0 = mono_now_ns();
	for (int i = 0; i < 16; i++)
		pthread_create(&th[i], NULL, patcher, (void *)(intptr_t)i);
	for (int i = 0; i < 16; i++)
		pthread_join(th[i], NULL);
	double secs = (double)(mono_now_ns() - t0) / NSEC_PER_SEC;
	printf("PATCH (status merge patch), 16 threads: %.0f requests/s (%ld ok, %ld errors)\n",
	       (double)atomic_load(&patches) / secs, atomic_load(&patches), atomic_load(&patch_errors));
	kube_testenv_stop(&env);
	return 0;
}
