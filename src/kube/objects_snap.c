/*
 * Record decoders of snapshot.storage.k8s.io/v1 (VolumeSnapshot, VolumeSnapshotContent,
 * VolumeSnapshotClass) and groupsnapshot.storage.k8s.io/v1 (VolumeGroupSnapshot, its
 * content and class), as the snapshot components read them, and their struct kube_kind. Same
 * two-pass packing as objects_core.c (objects_pack.h).
 */
#include "kube/objects_pack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- snapshot.storage.k8s.io/v1 ---- */

static uint8_t snap_policy(const char *p)
{
	if (p && !strcmp(p, "Delete"))
		return KUBE_SNAP_DELETE;
	if (p && !strcmp(p, "Retain"))
		return KUBE_SNAP_RETAIN;
	return KUBE_SNAP_POLICY_INVALID;
}

static uint8_t cond_of(const jv_t *v)
{
	if (!jv_is_boolean(v))
		return KUBE_COND_UNKNOWN;
	return jv_is_true(v) ? KUBE_COND_TRUE : KUBE_COND_FALSE;
}

static int vs_fields(struct packer *pk, const jv_t *obj, void *rec, char *err, size_t errlen)
{
	struct kube_vs *vs = rec;
	if (pk_meta(pk, obj, &vs->meta, err, errlen))
		return -1;
	const jv_t *spec = jv_get(obj, "spec"), *st = jv_get(obj, "status");
	const jv_t *src = jv_get(spec, "source");
	vs->source_pvc = pk_str(pk, pk_jstr(src, "persistentVolumeClaimName"));
	vs->source_content = pk_str(pk, pk_jstr(src, "volumeSnapshotContentName"));
	vs->class_name = kube_intern(pk_jstr(spec, "volumeSnapshotClassName"));
	vs->has_status = jv_is_object(st);
	vs->bound_content = pk_str(pk, pk_jstr(st, "boundVolumeSnapshotContentName"));
	vs->creation_time = pk_str(pk, pk_jstr(st, "creationTime"));
	vs->error_message = pk_str(pk, pk_jstr(jv_get(st, "error"), "message"));
	vs->error_time = pk_str(pk, pk_jstr(jv_get(st, "error"), "time"));
	vs->restore_size = jv_get(st, "restoreSize") ? pk_quantity(st, "restoreSize") : -1;
	vs->ready = cond_of(jv_get(st, "readyToUse"));
	vs->group_name = pk_str(pk, pk_jstr(st, "volumeGroupSnapshotName"));
	size_t i;
	const jv_t *ref;
	jv_array_foreach(jv_get(jv_get(obj, "metadata"), "ownerReferences"), i, ref) {
		const char *k = pk_jstr(ref, "kind"), *av = pk_jstr(ref, "apiVersion");
		if (k && av && !strcmp(k, "VolumeGroupSnapshot") &&
		    !strcmp(av, "groupsnapshot.storage.k8s.io/v1") && !vs->owner_group)
			vs->owner_group = pk_str(pk, pk_jstr(ref, "name"));
	}
	return 0;
}

static struct kube_obj *vs_decode(const jv_t *obj, char *err, size_t errlen)
{
	return pk_decode(obj, sizeof(struct kube_vs), KUBE_KIND_VS, vs_fields, err, errlen);
}

static int vsc_fields(struct packer *pk, const jv_t *obj, void *rec, char *err, size_t errlen)
{
	struct kube_vsc *c = rec;
	if (pk_meta(pk, obj, &c->meta, err, errlen))
		return -1;
	const jv_t *md = jv_get(obj, "metadata"), *ann = jv_get(md, "annotations");
	const jv_t *spec = jv_get(obj, "spec"), *st = jv_get(obj, "status");
	const jv_t *src = jv_get(spec, "source"), *ref = jv_get(spec, "volumeSnapshotRef");
	c->driver = kube_intern(pk_jstr(spec, "driver"));
	c->volume_handle = pk_str(pk, pk_jstr(src, "volumeHandle"));
	c->snapshot_handle = pk_str(pk, pk_jstr(src, "snapshotHandle"));
	c->class_name = kube_intern(pk_jstr(spec, "volumeSnapshotClassName"));
	c->source_volume_mode = kube_intern(pk_jstr(spec, "sourceVolumeMode"));
	c->policy = snap_policy(pk_jstr(spec, "deletionPolicy"));
	c->ref_name = pk_str(pk, pk_jstr(ref, "name"));
	c->ref_ns = kube_intern(pk_jstr(ref, "namespace"));
	c->ref_uid = pk_str(pk, pk_jstr(ref, "uid") ? pk_jstr(ref, "uid") : "");
	c->deletion_secret_name = kube_intern(pk_jstr(ann, "snapshot.storage.kubernetes.io/deletion-secret-name"));
	c->deletion_secret_ns = kube_intern(pk_jstr(ann, "snapshot.storage.kubernetes.io/deletion-secret-namespace"));
	c->being_created = jv_get(ann, "snapshot.storage.kubernetes.io/volumesnapshot-being-created") != NULL;
	c->being_deleted = jv_get(ann, "snapshot.storage.kubernetes.io/volumesnapshot-being-deleted") != NULL;
	c->in_group = jv_get(ann, "groupsnapshot.storage.k8s.io/volumeGroupSnapshotHandle") != NULL;
	c->managed_by = kube_intern(pk_jstr(jv_get(md, "labels"), "snapshot.storage.kubernetes.io/managed-by"));
	c->has_status = jv_is_object(st);
	c->status_handle = pk_str(pk, pk_jstr(st, "snapshotHandle"));
	c->error_message = pk_str(pk, pk_jstr(jv_get(st, "error"), "message"));
	c->error_time = pk_str(pk, pk_jstr(jv_get(st, "error"), "time"));
	const jv_t *ct = jv_get(st, "creationTime"), *rs = jv_get(st, "restoreSize");
	c->creation_time = jv_is_integer(ct) ? jv_int(ct) : -1;
	c->restore_size = jv_is_integer(rs) ? jv_int(rs) : -1;
	c->ready = cond_of(jv_get(st, "readyToUse"));
	return 0;
}

static struct kube_obj *vsc_decode(const jv_t *obj, char *err, size_t errlen)
{
	return pk_decode(obj, sizeof(struct kube_vsc), KUBE_KIND_VSC, vsc_fields, err, errlen);
}

static int vsclass_fields(struct packer *pk, const jv_t *obj, void *rec, char *err, size_t errlen)
{
	struct kube_vsclass *c = rec;
	if (pk_meta(pk, obj, &c->meta, err, errlen))
		return -1;
	const jv_t *ann = jv_get(jv_get(obj, "metadata"), "annotations");
	const char *def = pk_jstr(ann, "snapshot.storage.kubernetes.io/is-default-class");
	c->driver = kube_intern(pk_jstr(obj, "driver"));
	c->parameters = pk_map(pk, jv_get(obj, "parameters"), &c->nparameters);
	c->policy = snap_policy(pk_jstr(obj, "deletionPolicy"));
	c->is_default = def && !strcmp(def, "true");
	return 0;
}

static struct kube_obj *vsclass_decode(const jv_t *obj, char *err, size_t errlen)
{
	return pk_decode(obj, sizeof(struct kube_vsclass), KUBE_KIND_VSCLASS, vsclass_fields, err, errlen);
}

/* ---- groupsnapshot.storage.k8s.io/v1 ---- */

static int vgs_fields(struct packer *pk, const jv_t *obj, void *rec, char *err, size_t errlen)
{
	struct kube_vgs *g = rec;
	if (pk_meta(pk, obj, &g->meta, err, errlen))
		return -1;
	const jv_t *spec = jv_get(obj, "spec"), *st = jv_get(obj, "status");
	const jv_t *src = jv_get(spec, "source"), *sel = jv_get(src, "selector");
	if (jv_is_object(sel)) {
		char text[1024];
		pk_selector_text(sel, text, sizeof(text));
		g->selector = pk_str(pk, text);
	}
	g->source_content = pk_str(pk, pk_jstr(src, "volumeGroupSnapshotContentName"));
	g->class_name = kube_intern(pk_jstr(spec, "volumeGroupSnapshotClassName"));
	g->has_status = jv_is_object(st);
	g->bound_content = pk_str(pk, pk_jstr(st, "boundVolumeGroupSnapshotContentName"));
	g->creation_time = pk_str(pk, pk_jstr(st, "creationTime"));
	g->error_message = pk_str(pk, pk_jstr(jv_get(st, "error"), "message"));
	g->error_time = pk_str(pk, pk_jstr(jv_get(st, "error"), "time"));
	g->ready = cond_of(jv_get(st, "readyToUse"));
	return 0;
}

static struct kube_obj *vgs_decode(const jv_t *obj, char *err, size_t errlen)
{
	return pk_decode(obj, sizeof(struct kube_vgs), KUBE_KIND_VGS, vgs_fields, err, errlen);
}

static void pk_vgs_member(struct packer *pk, const jv_t *e, void *out)
{
	struct kube_vgs_member *m = out;
	const jv_t *ct = jv_get(e, "creationTime"), *rs = jv_get(e, "restoreSize");
	m->volume_handle = pk_str(pk, pk_jstr(e, "volumeHandle"));
	m->snapshot_handle = pk_str(pk, pk_jstr(e, "snapshotHandle"));
	m->creation_time = jv_is_integer(ct) ? jv_int(ct) : -1;
	m->restore_size = jv_is_integer(rs) ? jv_int(rs) : -1;
	m->ready = cond_of(jv_get(e, "readyToUse"));
}

static int vgsc_fields(struct packer *pk, const jv_t *obj, void *rec, char *err, size_t errlen)
{
	struct kube_vgsc *c = rec;
	if (pk_meta(pk, obj, &c->meta, err, errlen))
		return -1;
	const jv_t *ann = jv_get(jv_get(obj, "metadata"), "annotations");
	const jv_t *spec = jv_get(obj, "spec"), *st = jv_get(obj, "status");
	const jv_t *src = jv_get(spec, "source"), *ref = jv_get(spec, "volumeGroupSnapshotRef");
	c->driver = kube_intern(pk_jstr(spec, "driver"));
	c->class_name = kube_intern(pk_jstr(spec, "volumeGroupSnapshotClassName"));
	c->policy = snap_policy(pk_jstr(spec, "deletionPolicy"));
	c->ref_name = pk_str(pk, pk_jstr(ref, "name"));
	c->ref_ns = kube_intern(pk_jstr(ref, "namespace"));
	c->ref_uid = pk_str(pk, pk_jstr(ref, "uid") ? pk_jstr(ref, "uid") : "");
	c->volume_handles = pk_strv(pk, jv_get(src, "volumeHandles"), false, &c->nvolume_handles);
	const jv_t *gh = jv_get(src, "groupSnapshotHandles");
	c->group_handle = pk_str(pk, pk_jstr(gh, "volumeGroupSnapshotHandle"));
	c->snapshot_handles = pk_strv(pk, jv_get(gh, "volumeSnapshotHandles"), false,
				      &c->nsnapshot_handles);
	c->deletion_secret_name = kube_intern(pk_jstr(ann, "groupsnapshot.storage.kubernetes.io/deletion-secret-name"));
	c->deletion_secret_ns = kube_intern(pk_jstr(ann, "groupsnapshot.storage.kubernetes.io/deletion-secret-namespace"));
	c->being_deleted = jv_get(ann, "groupsnapshot.storage.kubernetes.io/volumegroupsnapshot-being-deleted") != NULL;
	c->being_created = jv_get(ann, "groupsnapshot.storage.kubernetes.io/volumegroupsnapshot-being-created") != NULL;
	c->has_status = jv_is_object(st);
	c->status_handle = pk_str(pk, pk_jstr(st, "volumeGroupSnapshotHandle"));
	c->creation_time = pk_str(pk, pk_jstr(st, "creationTime"));
	c->error_message = pk_str(pk, pk_jstr(jv_get(st, "error"), "message"));
	c->ready = cond_of(jv_get(st, "readyToUse"));
	c->members = pk_array(pk, jv_get(st, "volumeSnapshotInfoList"), sizeof(struct kube_vgs_member),
			      pk_vgs_member, &c->nmembers);
	return 0;
}

static struct kube_obj *vgsc_decode(const jv_t *obj, char *err, size_t errlen)
{
	return pk_decode(obj, sizeof(struct kube_vgsc), KUBE_KIND_VGSC, vgsc_fields, err, errlen);
}

static int vgsclass_fields(struct packer *pk, const jv_t *obj, void *rec, char *err, size_t errlen)
{
	struct kube_vsclass *c = rec;
	if (vsclass_fields(pk, obj, rec, err, errlen))
		return -1;
	const jv_t *ann = jv_get(jv_get(obj, "metadata"), "annotations");
	const char *def = pk_jstr(ann, "groupsnapshot.storage.kubernetes.io/is-default-class");
	c->is_default = def && !strcmp(def, "true");
	return 0;
}

static struct kube_obj *vgsclass_decode(const jv_t *obj, char *err, size_t errlen)
{
	return pk_decode(obj, sizeof(struct kube_vsclass), KUBE_KIND_VGSCLASS, vgsclass_fields, err,
		       errlen);
}

const struct kube_kind KUBE_KIND_VOLUMESNAPSHOT = { "VolumeSnapshot", &KUBE_RES_VOLUMESNAPSHOTS, vs_decode };
const struct kube_kind KUBE_KIND_VOLUMESNAPSHOTCONTENT = { "VolumeSnapshotContent", &KUBE_RES_VOLUMESNAPSHOTCONTENTS, vsc_decode };
const struct kube_kind KUBE_KIND_VOLUMESNAPSHOTCLASS = { "VolumeSnapshotClass", &KUBE_RES_VOLUMESNAPSHOTCLASSES, vsclass_decode };
const struct kube_kind KUBE_KIND_VOLUMEGROUPSNAPSHOT = { "VolumeGroupSnapshot", &KUBE_RES_VOLUMEGROUPSNAPSHOTS, vgs_decode };
const struct kube_kind KUBE_KIND_VOLUMEGROUPSNAPSHOTCONTENT = { "VolumeGroupSnapshotContent", &KUBE_RES_VOLUMEGROUPSNAPSHOTCONTENTS, vgsc_decode };
const struct kube_kind KUBE_KIND_VOLUMEGROUPSNAPSHOTCLASS = { "VolumeGroupSnapshotClass", &KUBE_RES_VOLUMEGROUPSNAPSHOTCLASSES, vgsclass_decode };
