/*
 * Compact records, the store with its index, the watch-stream decoder and the token bucket:
 * the pure parts of the informer path.
 */
#include <stdlib.h>

#include "base/timeutil.h"
#include "check.h"
#include "kube/objects.h"
#include "kube/ratelimit.h"
#include "kube/selector.h"
#include "kube/store.h"
#include "kube/watch.h"

static const char *VA_JSON =
	"{\"apiVersion\":\"storage.k8s.io/v1\",\"kind\":\"VolumeAttachment\",\"metadata\":{"
	"\"name\":\"csi-0123\",\"uid\":\"3f1e2d4c-5b6a-4789-8abc-def012345678\",\"resourceVersion\":\"42\","
	"\"generation\":3,\"finalizers\":[\"external-attacher/hostpath-csi-k8s-io\"],"
	"\"deletionTimestamp\":\"2026-11-22T10:00:00Z\","
	"\"annotations\":{\"csi.alpha.kubernetes.io/node-id\":\"node-id-1\"}},"
	"\"spec\":{\"attacher\":\"hostpath.csi.k8s.io\",\"nodeName\":\"node-1\","
	"\"source\":{\"persistentVolumeName\":\"pv-1\"}},"
	"\"status\":{\"attached\":true,\"attachmentMetadata\":{\"devicePath\":\"/dev/xvdf\"},"
	"\"detachError\":{\"time\":\"2026-11-22T10:00:00Z\",\"message\":\"rpc error: busy\"}}}";

static struct kube_obj *decode(const struct kube_kind *k, const char *text)
{
	json_t *j = json_loads(text, 0, NULL);
	char err[128];
	struct kube_obj *o = kube_decode_json(k, j, err, sizeof(err));
	json_decref(j);
	return o;
}

static void test_va_record(void)
{
	struct kube_obj *o = decode(&KUBE_KIND_VOLUMEATTACHMENT, VA_JSON);
	const struct kube_va *va = kube_va_of(o);
	CHECK(va != NULL);
	if (!va)
		return;
	CHECK_STR(o->name, "csi-0123");
	CHECK(o->ns == NULL);
	CHECK_STR(o->rv, "42");
	CHECK_INT(o->generation, 3);
	CHECK_INT(o->deletion_ts, 1795341600);
	char uid[64];
	CHECK_STR(kube_obj_uid(o, uid, sizeof(uid)), "3f1e2d4c-5b6a-4789-8abc-def012345678");
	CHECK(kube_obj_has_finalizer(o, "external-attacher/hostpath-csi-k8s-io"));
	CHECK(!kube_obj_has_finalizer(o, "other"));
	CHECK_STR(va->attacher, "hostpath.csi.k8s.io");
	CHECK_STR(va->node_name, "node-1");
	CHECK_STR(va->pv_name, "pv-1");
	CHECK_STR(va->node_id, "node-id-1");
	CHECK(va->attached);
	CHECK(!va->inline_spec);
	CHECK_INT(va->nmetadata, 1);
	CHECK_STR(va->metadata[0].key, "devicePath");
	CHECK_STR(va->metadata[0].value, "/dev/xvdf");
	CHECK(va->attach_error == NULL);
	CHECK_STR(va->detach_error, "rpc error: busy");
	/* interned: the same pointer for another object with the same node */
	struct kube_obj *o2 = decode(&KUBE_KIND_VOLUMEATTACHMENT, VA_JSON);
	CHECK(kube_va_of(o2)->node_name == va->node_name);
	CHECK(kube_va_of(o2)->pv_name != va->pv_name);
	CHECK(kube_pv_of(o) == NULL);
	/* one allocation holds the struct and every string of the record */
	CHECK(kube_obj_mem_size(o) >= sizeof(struct kube_va));
	CHECK(kube_obj_mem_size(o) < sizeof(struct kube_va) + 160);
	kube_obj_unref(o2);
	kube_obj_unref(o);
	/* no name: rejected with a reason */
	json_t *j = json_loads("{\"metadata\":{}}", 0, NULL);
	char err[128];
	CHECK(kube_decode_json(&KUBE_KIND_VOLUMEATTACHMENT, j, err, sizeof(err)) == NULL);
	CHECK(strstr(err, "metadata.name") != NULL);
	json_decref(j);
}

static void test_pv_csinode_node(void)
{
	struct kube_obj *o = decode(&KUBE_KIND_PERSISTENTVOLUME,
		"{\"metadata\":{\"name\":\"pv-1\",\"uid\":\"not-a-uuid\",\"resourceVersion\":\"7\"},"
		"\"spec\":{\"capacity\":{\"storage\":\"10Gi\"},\"accessModes\":[\"ReadOnlyMany\",\"ReadWriteOnce\"],"
		"\"volumeMode\":\"Block\",\"mountOptions\":[\"noatime\",\"discard\"],"
		"\"storageClassName\":\"fast\",\"persistentVolumeReclaimPolicy\":\"Retain\","
		"\"claimRef\":{\"namespace\":\"default\",\"name\":\"claim-1\"},"
		"\"csi\":{\"driver\":\"d.example\",\"volumeHandle\":\"vol-1\",\"readOnly\":true,\"fsType\":\"ext4\","
		"\"volumeAttributes\":{\"a\":\"1\",\"b\":\"2\"},"
		"\"controllerPublishSecretRef\":{\"name\":\"s\",\"namespace\":\"kube-system\"}}},"
		"\"status\":{\"phase\":\"Bound\"}}");
	const struct kube_pv *pv = kube_pv_of(o);
	CHECK(pv != NULL);
	if (pv) {
		char uid[64];
		CHECK_STR(kube_obj_uid(o, uid, sizeof(uid)), "not-a-uuid");
		CHECK_STR(pv->driver, "d.example");
		CHECK_STR(pv->volume_handle, "vol-1");
		CHECK(pv->read_only);
		CHECK_STR(pv->fs_type, "ext4");
		CHECK_INT(pv->nvolume_attributes, 2);
		CHECK_STR(pv->secret_name, "s");
		CHECK_STR(pv->secret_ns, "kube-system");
		CHECK_INT(pv->nmount_options, 2);
		CHECK_STR(pv->mount_options[1], "discard");
		CHECK_INT(pv->capacity, 10LL << 30);
		CHECK_INT(pv->access_modes, KUBE_RWO | KUBE_ROX);
		/* the kubelet's CSI access mode comes from the first one, not from the set */
		CHECK_INT(pv->first_access_mode, KUBE_ROX);
		CHECK(pv->block);
		CHECK_INT(pv->reclaim, 1);
		CHECK_INT(pv->phase, KUBE_PV_BOUND);
		CHECK_STR(pv->claim_ns, "default");
		CHECK_STR(pv->claim_name, "claim-1");
	}
	kube_obj_unref(o);
	o = decode(&KUBE_KIND_CSINODE_T, "{\"metadata\":{\"name\":\"n1\"},\"spec\":{\"drivers\":["
		   "{\"name\":\"a\",\"nodeID\":\"id-a\"},{\"name\":\"b\",\"nodeID\":\"id-b\","
		   "\"topologyKeys\":[\"topology.b/zone\"],\"allocatable\":{\"count\":39}}]}}");
	const struct kube_csinode *cn = kube_csinode_of(o);
	CHECK(cn && cn->ndrivers == 2);
	if (cn && cn->ndrivers == 2) {
		CHECK_STR(cn->drivers[1].name, "b");
		CHECK_STR(cn->drivers[1].node_id, "id-b");
		CHECK_INT(cn->drivers[1].ntopology_keys, 1);
		CHECK_STR(cn->drivers[1].topology_keys[0], "topology.b/zone");
		CHECK_INT(cn->drivers[1].allocatable, 39);
		CHECK_INT(cn->drivers[0].allocatable, -1);
		CHECK_INT(cn->drivers[0].ntopology_keys, 0);
	}
	kube_obj_unref(o);
	o = decode(&KUBE_KIND_NODE_T, "{\"metadata\":{\"name\":\"n1\",\"annotations\":{"
		   "\"csi.volume.kubernetes.io/nodeid\":\"{\\\"a\\\":\\\"id-a\\\"}\"},"
		   "\"labels\":{\"topology.b/zone\":\"z1\",\"kubernetes.io/hostname\":\"n1\"}}}");
	CHECK(kube_node_of(o) && strcmp(kube_node_of(o)->csi_node_ids, "{\"a\":\"id-a\"}") == 0);
	if (kube_node_of(o)) {
		const struct kube_node *nd = kube_node_of(o);
		CHECK_INT(nd->nlabels, 2);
		char err[128];
		struct kube_selector *sel = kube_selector_parse("topology.b/zone in (z1,z2)", err, sizeof(err));
		CHECK(sel && kube_selector_matches(sel, nd->labels, nd->nlabels));
		kube_selector_free(sel);
	}
	kube_obj_unref(o);
}

/* Issue 16: a CSINode entry without name crashed csi-attacher (NULL name read by strcmp). */
static void test_csinode_entry_without_name_is_refused(void)
{
	static const char *bad[] = {
		"{\"metadata\":{\"name\":\"n1\"},\"spec\":{\"drivers\":[{\"nodeID\":\"x\"}]}}",
		"{\"metadata\":{\"name\":\"n1\"},\"spec\":{\"drivers\":[{\"name\":null,\"nodeID\":\"x\"}]}}",
		"{\"metadata\":{\"name\":\"n1\"},\"spec\":{\"drivers\":[{\"name\":\"\",\"nodeID\":\"x\"}]}}",
		"{\"metadata\":{\"name\":\"n1\"},\"spec\":{\"drivers\":[{\"name\":\"a\",\"nodeID\":\"x\"},7]}}",
		"{\"metadata\":{\"name\":\"n1\"},\"spec\":{\"drivers\":[{\"name\":\"a\"}]}}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_t *j = json_loads(bad[i], 0, NULL);
		char err[128] = "";
		struct kube_obj *o = kube_decode_json(&KUBE_KIND_CSINODE_T, j, err, sizeof(err));
		CHECK(o == NULL);
		CHECK(strstr(err, "CSINode n1: spec.drivers[") != NULL);
		kube_obj_unref(o);
		json_decref(j);
	}
	/* Any JSON value in any field decodes or is refused, never crashes: every kind, odd types. */
	static const char *odd[] = { "null", "7", "[]", "{\"metadata\":7}", "{\"metadata\":{\"name\":7}}",
		("{\"metadata\":{\"name\":\"x\",\"finalizers\":[1,null],\"labels\":{\"a\":1},"
		 "\"annotations\":[]},\"spec\":[],\"status\":\"s\",\"parameters\":{\"k\":{}}}") };
	const struct kube_kind *kinds[] = { &KUBE_KIND_VOLUMEATTACHMENT, &KUBE_KIND_PERSISTENTVOLUME,
		&KUBE_KIND_CSINODE_T, &KUBE_KIND_NODE_T, &KUBE_KIND_PERSISTENTVOLUMECLAIM,
		&KUBE_KIND_STORAGECLASS };
	for (size_t k = 0; k < 6; k++)
		for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
			json_t *j = json_loads(odd[i], JSON_DECODE_ANY, NULL);
			char err[128];
			struct kube_obj *o = kube_decode_json(kinds[k], j, err, sizeof(err));
			CHECK((o != NULL) == (i == 5));
			kube_obj_unref(o);
			json_decref(j);
		}
}

static void test_pvc_storageclass(void)
{
	struct kube_obj *o = decode(&KUBE_KIND_PERSISTENTVOLUMECLAIM,
		"{\"metadata\":{\"name\":\"data-0\",\"namespace\":\"prod\",\"annotations\":{"
		"\"volume.beta.kubernetes.io/storage-provisioner\":\"d.example\","
		"\"volume.kubernetes.io/selected-node\":\"node-7\"}},"
		"\"spec\":{\"storageClassName\":\"fast\",\"accessModes\":[\"ReadWriteOncePod\"],"
		"\"resources\":{\"requests\":{\"storage\":\"1.5Gi\"}},\"volumeMode\":\"Block\","
		"\"dataSource\":{\"kind\":\"VolumeSnapshot\",\"apiGroup\":\"snapshot.storage.k8s.io\",\"name\":\"snap\"}},"
		"\"status\":{\"phase\":\"Pending\"}}");
	const struct kube_pvc *pvc = kube_pvc_of(o);
	CHECK(pvc != NULL);
	if (pvc) {
		CHECK_STR(o->ns, "prod");
		CHECK_STR(pvc->storage_class, "fast");
		CHECK_STR(pvc->provisioner, "d.example");
		CHECK_STR(pvc->selected_node, "node-7");
		CHECK_INT(pvc->request, 1610612736LL);
		CHECK_INT(pvc->limit, -1);
		CHECK_INT(pvc->capacity, -1);
		CHECK_INT(pvc->access_modes, KUBE_RWOP);
		CHECK(pvc->block);
		CHECK_STR(pvc->data_source_kind, "VolumeSnapshot");
		CHECK_STR(pvc->data_source_name, "snap");
		CHECK_INT(pvc->phase, KUBE_PVC_PENDING);
		CHECK(pvc->volume_name == NULL);
		char key[128];
		kube_obj_key(o, key, sizeof(key));
		CHECK_STR(key, "prod/data-0");
	}
	kube_obj_unref(o);
	o = decode(&KUBE_KIND_STORAGECLASS,
		   "{\"metadata\":{\"name\":\"fast\"},\"provisioner\":\"d.example\","
		   "\"parameters\":{\"type\":\"gp3\"},\"reclaimPolicy\":\"Retain\","
		   "\"volumeBindingMode\":\"WaitForFirstConsumer\",\"allowVolumeExpansion\":true,"
		   "\"mountOptions\":[\"noatime\"]}");
	const struct kube_storageclass *sc = kube_storageclass_of(o);
	CHECK(sc != NULL);
	if (sc) {
		CHECK_STR(sc->provisioner, "d.example");
		CHECK_INT(sc->nparameters, 1);
		CHECK_STR(sc->parameters[0].value, "gp3");
		CHECK_INT(sc->reclaim, 1);
		CHECK(sc->wait_for_first_consumer);
		CHECK(sc->allow_expansion);
		CHECK_INT(sc->nmount_options, 1);
	}
	kube_obj_unref(o);
}

/* What the attach/detach controller, the scheduler and the node agent read of Pods and Nodes. */
static void test_pod_node_csidriver(void)
{
	struct kube_obj *o = decode(&KUBE_KIND_POD_T,
		"{\"metadata\":{\"name\":\"web\",\"namespace\":\"app\",\"uid\":\"u1\"},"
		"\"spec\":{\"nodeName\":\"node-a\",\"volumes\":["
		"{\"name\":\"data\",\"persistentVolumeClaim\":{\"claimName\":\"pvc-1\",\"readOnly\":true}},"
		"{\"name\":\"tmp\",\"emptyDir\":{}},"
		"{\"name\":\"scratch\",\"ephemeral\":{\"volumeClaimTemplate\":{}}},"
		"{\"name\":\"raw\",\"persistentVolumeClaim\":{\"claimName\":\"blk\"}},"
		"{\"name\":\"inl\",\"csi\":{\"driver\":\"d.example\",\"fsType\":\"xfs\","
		"\"volumeAttributes\":{\"size\":\"1Gi\"},\"nodePublishSecretRef\":{\"name\":\"s\"}}},"
		"{\"csi\":{\"driver\":\"nameless\"}}],"
		"\"containers\":[{\"name\":\"c\",\"volumeDevices\":[{\"name\":\"raw\",\"devicePath\":\"/dev/x\"}]}]},"
		"\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}");
	const struct kube_pod *p = kube_pod_of(o);
	CHECK(p != NULL);
	if (p) {
		CHECK_STR(p->node_name, "node-a");
		CHECK_INT(p->phase, KUBE_POD_RUNNING);
		CHECK(p->ready);
		CHECK(!kube_pod_terminated(p));
		CHECK_INT(p->nvolumes, 4); /* emptyDir and the nameless entry are not kept */
		CHECK_STR(p->volumes[0].claim_name, "pvc-1");
		CHECK(p->volumes[0].read_only);
		CHECK(!p->volumes[0].block);
		CHECK_STR(p->volumes[1].claim_name, "web-scratch");
		CHECK(p->volumes[1].ephemeral);
		CHECK(p->volumes[2].block);
		CHECK(p->volumes[3].claim_name == NULL);
		CHECK_STR(p->volumes[3].csi_driver, "d.example");
		CHECK_STR(p->volumes[3].csi_fs_type, "xfs");
		CHECK_STR(p->volumes[3].csi_secret_name, "s");
		CHECK_INT(p->volumes[3].ncsi_attributes, 1);
	}
	kube_obj_unref(o);

	o = decode(&KUBE_KIND_NODE_T,
		"{\"metadata\":{\"name\":\"node-a\",\"labels\":{\"zone\":\"z1\",\"rack\":\"7\"},"
		"\"annotations\":{\"volumes.kubernetes.io/controller-managed-attach-detach\":\"true\"}},"
		"\"spec\":{\"taints\":[{\"key\":\"node.kubernetes.io/out-of-service\",\"effect\":\"NoExecute\"}]},"
		"\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\"}],"
		"\"volumesAttached\":[{\"name\":\"kubernetes.io/csi/d^v1\",\"devicePath\":\"\"}],"
		"\"volumesInUse\":[\"kubernetes.io/csi/d^v1\",\"kubernetes.io/csi/d^v2\"]}}");
	const struct kube_node *n = kube_node_of(o);
	CHECK(n != NULL);
	if (n) {
		CHECK(n->controller_managed);
		CHECK(n->out_of_service);
		CHECK_INT(n->ready, KUBE_COND_FALSE);
		CHECK_INT(n->nvolumes_attached, 1);
		CHECK_STR(n->volumes_attached[0].name, "kubernetes.io/csi/d^v1");
		CHECK_INT(n->nvolumes_in_use, 2);
		CHECK_STR(n->volumes_in_use[1], "kubernetes.io/csi/d^v2");
	}
	struct kube_obj *pvo = decode(&KUBE_KIND_PERSISTENTVOLUME,
		"{\"metadata\":{\"name\":\"pv1\",\"annotations\":{\"pv.kubernetes.io/provisioned-by\":\"d\","
		"\"pv.kubernetes.io/bound-by-controller\":\"yes\"}},\"spec\":{\"claimRef\":{\"uid\":\"c1\"},"
		"\"nodeAffinity\":{\"required\":{\"nodeSelectorTerms\":["
		"{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"In\",\"values\":[\"z2\"]}]},"
		"{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"In\",\"values\":[\"z1\"]},"
		"{\"key\":\"rack\",\"operator\":\"Gt\",\"values\":[\"5\"]}]}]}}}}");
	const struct kube_pv *pv = kube_pv_of(pvo);
	CHECK(pv != NULL);
	if (pv && n) {
		CHECK_STR(pv->provisioned_by, "d");
		CHECK(pv->bound_by_controller);
		CHECK_STR(pv->claim_uid, "c1");
		CHECK_INT(pv->nnode_affinity, 2);
		/* the second term matches zone z1 with rack 7 > 5 */
		CHECK(kube_node_selector_match(pv->node_affinity, pv->nnode_affinity, n->labels, n->nlabels));
		CHECK(!kube_node_selector_match(pv->node_affinity, 1, n->labels, n->nlabels));
		CHECK(kube_node_selector_match(NULL, 0, n->labels, n->nlabels));
	}
	kube_obj_unref(pvo);
	kube_obj_unref(o);

	o = decode(&KUBE_KIND_CSIDRIVER_T, "{\"metadata\":{\"name\":\"d\"},\"spec\":{\"attachRequired\":false,"
		   "\"podInfoOnMount\":true,\"volumeLifecycleModes\":[\"Ephemeral\"]}}");
	const struct kube_csidriver *d = kube_csidriver_of(o);
	CHECK(d != NULL);
	if (d) {
		CHECK(!d->attach_required);
		CHECK(d->pod_info_on_mount);
		CHECK(d->ephemeral);
		CHECK(!d->persistent);
	}
	kube_obj_unref(o);
	o = decode(&KUBE_KIND_CSIDRIVER_T, "{\"metadata\":{\"name\":\"d2\"},\"spec\":{}}");
	d = kube_csidriver_of(o);
	CHECK(d && d->attach_required && d->persistent && !d->ephemeral);
	kube_obj_unref(o);
}

static size_t by_pv(const struct kube_obj *o, const char **vals, size_t max)
{
	const struct kube_va *va = kube_va_of(o);
	if (!va || !va->pv_name || !max)
		return 0;
	vals[0] = va->pv_name;
	return 1;
}

static struct kube_obj *make_va(const char *name, const char *pv, const char *rv)
{
	char text[512];
	snprintf(text, sizeof(text), "{\"metadata\":{\"name\":\"%s\",\"resourceVersion\":\"%s\"},"
		 "\"spec\":{\"source\":{\"persistentVolumeName\":\"%s\"}}}", name, rv, pv);
	return decode(&KUBE_KIND_VOLUMEATTACHMENT, text);
}

/* A pod moves from unscheduled to its node's index when it is bound (the volume manager's read). */
static void test_pod_by_node_index(void)
{
	struct kube_store *s = kube_store_new();
	kube_store_add_index(s, "node", kube_index_pod_by_node);
	const char *pending = "{\"metadata\":{\"name\":\"p\",\"namespace\":\"default\","
			      "\"resourceVersion\":\"1\"},\"spec\":{}}";
	const char *bound = "{\"metadata\":{\"name\":\"p\",\"namespace\":\"default\","
			    "\"resourceVersion\":\"2\"},\"spec\":{\"nodeName\":\"node-7\"}}";
	CHECK(kube_store_put(s, decode(&KUBE_KIND_POD_T, pending)) == NULL);
	size_t n;
	struct kube_obj **v = kube_store_by_index(s, "node", "node-7", &n);
	CHECK_INT(n, 0);
	kube_objs_free(v, n);
	kube_obj_unref(kube_store_put(s, decode(&KUBE_KIND_POD_T, bound)));
	v = kube_store_by_index(s, "node", "node-7", &n);
	CHECK_INT(n, 1);
	CHECK(n == 1 && strcmp(kube_pod_of(v[0])->node_name, "node-7") == 0);
	kube_objs_free(v, n);
	v = kube_store_by_index(s, "node", "node-8", &n);
	CHECK_INT(n, 0);
	kube_objs_free(v, n);
	kube_store_free(s);
}

static void test_store_and_index(void)
{
	struct kube_store *s = kube_store_new();
	kube_store_add_index(s, "pv", by_pv);
	kube_store_add_index(s, "pv2", kube_index_va_by_pv);
	char name[32];
	for (int i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "va-%d", i);
		CHECK(kube_store_put(s, make_va(name, i % 2 ? "pv-odd" : "pv-even", "1")) == NULL);
	}
	CHECK_INT(kube_store_len(s), 1000);
	size_t n;
	struct kube_obj **v = kube_store_by_index(s, "pv", "pv-odd", &n);
	CHECK_INT(n, 500);
	kube_objs_free(v, n);
	/* A reader keeps the old version while the store replaces it. */
	struct kube_obj *held = kube_store_get(s, NULL, "va-1");
	CHECK(held && strcmp(held->rv, "1") == 0);
	struct kube_obj *old = kube_store_put(s, make_va("va-1", "pv-new", "2"));
	CHECK(old == held);
	kube_obj_unref(old);
	CHECK_STR(held->rv, "1");
	CHECK_STR(kube_va_of(held)->pv_name, "pv-odd");
	kube_obj_unref(held);
	v = kube_store_by_index(s, "pv", "pv-odd", &n);
	CHECK_INT(n, 499);
	kube_objs_free(v, n);
	v = kube_store_by_index(s, "pv", "pv-new", &n);
	CHECK_INT(n, 1);
	kube_objs_free(v, n);
	v = kube_store_by_index(s, "pv2", "pv-new", &n);
	CHECK_INT(n, 1);
	kube_objs_free(v, n);
	v = kube_store_by_index(s, "no-such-index", "pv-new", &n);
	CHECK_INT(n, 0);
	kube_objs_free(v, n);
	/* remove half, the rest stays reachable (backward-shift deletion) */
	for (int i = 0; i < 1000; i += 2) {
		snprintf(name, sizeof(name), "va-%d", i);
		kube_obj_unref(kube_store_remove(s, "", name));
	}
	CHECK_INT(kube_store_len(s), 500);
	int found = 0;
	for (int i = 1; i < 1000; i += 2) {
		snprintf(name, sizeof(name), "va-%d", i);
		struct kube_obj *o = kube_store_get(s, NULL, name);
		found += o != NULL;
		kube_obj_unref(o);
	}
	CHECK_INT(found, 500);
	CHECK(kube_store_get(s, NULL, "va-0") == NULL);
	v = kube_store_by_index(s, "pv", "pv-even", &n);
	CHECK_INT(n, 0);
	kube_objs_free(v, n);
	v = kube_store_list(s, &n);
	CHECK_INT(n, 500);
	kube_objs_free(v, n);
	kube_store_free(s);
}

struct seen {
	int n;
	int types[16];
	char names[16][32];
};

static int on_ev(enum kube_watch_type t, const jv_t *obj, void *ud)
{
	struct seen *s = ud;
	if (s->n < 16) {
		s->types[s->n] = t;
		const char *nm = jv_str(jv_get(jv_get(obj, "metadata"), "name"));
		snprintf(s->names[s->n], 32, "%s", nm ? nm : "");
	}
	s->n++;
	return 0;
}

static void test_watch_decoder(void)
{
	const char *stream =
		"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n"
		"{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"b\"}}}\n"
		"{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"9\"}}}\n"
		"{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"c\"}}}\n"
		"{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410}}\n";
	/* Every possible split into chunks of k bytes gives the same events. */
	for (size_t k = 1; k < 40; k += 3) {
		struct kube_watch_decoder d;
		kube_watch_decoder_init(&d, 0);
		struct seen s = { 0 };
		size_t len = strlen(stream);
		for (size_t off = 0; off < len; off += k)
			CHECK_INT(kube_watch_feed(&d, stream + off, off + k > len ? len - off : k, on_ev, &s), 0);
		CHECK_INT(s.n, 5);
		CHECK_INT(s.types[0], KUBE_WATCH_ADDED);
		CHECK_STR(s.names[1], "b");
		CHECK_INT(s.types[2], KUBE_WATCH_BOOKMARK);
		CHECK_INT(s.types[3], KUBE_WATCH_DELETED);
		CHECK_INT(s.types[4], KUBE_WATCH_ERROR);
		kube_watch_decoder_release(&d);
	}
	/* Oversize: an error, not unbounded growth. */
	struct kube_watch_decoder d;
	kube_watch_decoder_init(&d, 1024);
	struct seen s = { 0 };
	char big[600];
	memset(big, 'x', sizeof(big));
	CHECK_INT(kube_watch_feed(&d, "{\"type\":\"ADDED\",\"object\":{\"x\":\"", 31, on_ev, &s), 0);
	CHECK_INT(kube_watch_feed(&d, big, sizeof(big), on_ev, &s), 0);
	CHECK_INT(kube_watch_feed(&d, big, sizeof(big), on_ev, &s), -1);
	CHECK(strstr(d.err, "larger than 1024") != NULL);
	/* Malformed and unknown events are errors with a reason. */
	CHECK_INT(kube_watch_feed(&d, "{not json}\n", 11, on_ev, &s), -1);
	CHECK(strstr(d.err, "malformed") != NULL);
	CHECK_INT(kube_watch_feed(&d, "{\"type\":\"WEIRD\",\"object\":{}}\n", 29, on_ev, &s), -1);
	CHECK_INT(s.n, 0);
	kube_watch_decoder_release(&d);
}

static void test_ratelimit(void)
{
	struct kube_ratelimit rl;
	kube_ratelimit_init(&rl, 50, 5);
	/* the burst is free, then one token per 1/qps */
	for (int i = 0; i < 5; i++)
		CHECK(kube_ratelimit_try(&rl));
	CHECK(!kube_ratelimit_try(&rl));
	int64_t t0 = mono_now_ns();
	for (int i = 0; i < 10; i++)
		kube_ratelimit_wait(&rl);
	int64_t ms = (mono_now_ns() - t0) / NSEC_PER_MSEC;
	CHECK(ms >= 150); /* 10 tokens at 50/s = 200 ms, minus what accrued meanwhile */
	kube_ratelimit_destroy(&rl);
	kube_ratelimit_init(&rl, 0, 0); /* disabled */
	for (int i = 0; i < 1000; i++)
		CHECK_INT(kube_ratelimit_reserve(&rl), 0);
	kube_ratelimit_destroy(&rl);
}

/*
 * Records of a burst do not stay mapped: 20,000 VolumeAttachments decoded, then all but every
 * 1,000th freed, give back most of the record slab; the survivors stay valid and the freed
 * slots are reused. (Under AddressSanitizer the slab is bypassed: nothing is mapped.)
 */
static void test_slab_gives_back(void)
{
	enum { N = 20000 };
	struct kube_obj **v = calloc(N, sizeof(*v));
	size_t before = kube_record_bytes_mapped();
	for (int i = 0; i < N; i++)
		v[i] = decode(&KUBE_KIND_VOLUMEATTACHMENT, VA_JSON);
	size_t full = kube_record_bytes_mapped();
	if (full == before) { /* no slab (sanitizer build) */
		for (int i = 0; i < N; i++)
			kube_obj_unref(v[i]);
		free(v);
		return;
	}
	CHECK(full - before >= (size_t)N * 200); /* each record is more than 200 bytes */
	for (int i = 0; i < N; i++)
		if (i % 1000 != 0) {
			kube_obj_unref(v[i]);
			v[i] = NULL;
		}
	size_t after = kube_record_bytes_mapped();
	/* 20 survivors in at most 20 chunks of 64 KiB, plus one chunk kept for the class. */
	CHECK(after - before <= 21 * 64 * 1024);
	CHECK(after < full / 2);
	for (int i = 0; i < N; i += 1000)
		CHECK_STR(kube_va_of(v[i])->pv_name, "pv-1");
	struct kube_obj *again = decode(&KUBE_KIND_VOLUMEATTACHMENT, VA_JSON);
	CHECK(kube_record_bytes_mapped() == after); /* a freed slot, no new chunk */
	kube_obj_unref(again);
	for (int i = 0; i < N; i += 1000)
		kube_obj_unref(v[i]);
	free(v);
}

int main(void)
{
	RUN(test_pod_node_csidriver);
	RUN(test_va_record);
	RUN(test_pv_csinode_node);
	RUN(test_pvc_storageclass);
	RUN(test_csinode_entry_without_name_is_refused);
	RUN(test_store_and_index);
	RUN(test_pod_by_node_index);
	RUN(test_watch_decoder);
	RUN(test_ratelimit);
	RUN(test_slab_gives_back);
	return CHECK_DONE();
}
