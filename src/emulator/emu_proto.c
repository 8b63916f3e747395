/*
 * emu_proto: the few protobuf request bodies kubectl sends, turned into the JSON the verbs read.
 *
 * kubectl's generators (`kubectl create namespace`, `create secret generic`, `create configmap`)
 * send `application/vnd.kubernetes.protobuf` whatever the server advertises: the magic "k8s\0",
 * then a runtime.Unknown {1: typeMeta {1: apiVersion, 2: kind}, 2: raw, 3: contentEncoding,
 * 4: contentType} whose raw bytes are the object. Field numbers are those of kubernetes/api's
 * generated.proto: ObjectMeta {1 name, 2 generateName, 3 namespace, 5 uid, 6 resourceVersion,
 * 11 labels, 12 annotations, 14 finalizers}; Namespace {1 metadata, 2 spec {1 finalizers}};
 * Secret {1 metadata, 2 data (bytes), 3 type, 4 stringData, 5 immutable}; ConfigMap
 * {1 metadata, 2 data, 3 binaryData (bytes), 4 immutable}. A map is a repeated entry {1 key,
 * 2 value}. Only these kinds are decoded (and only the fields listed).
 *
 * The upstream sidecars and controllers (client-go with ContentType protobuf) send protobuf for
 * every built-in kind they create or update, and for DeleteOptions. Those kinds are decoded from
 * tables (struct pbmsg below: field number -> JSON name and type, the numbers of kubernetes/api's
 * generated.proto): v1 Binding, Event, PersistentVolume, PersistentVolumeClaim; events.k8s.io/v1
 * Event; coordination.k8s.io/v1 Lease; storage.k8s.io/v1 VolumeAttachment, CSIStorageCapacity;
 * DeleteOptions. A field number a
 * table lacks is refused (415 naming the message and number) rather than dropped, so nothing a
 * client sent is lost silently. Go's encoder writes non-pointer fields even when empty, and the
 * JSON it would send omits them: empty strings, zero numbers, false and the zero Time are left out
 * unless the field is a pointer or written without omitempty (PB_KEEP). Anything else is refused
 * with 415.
 *
 * The decoder is a bounds-checked walk over the wire format: varints, length-delimited fields,
 * fixed 32/64-bit fields skipped. Nothing is trusted: every length is checked against the bytes
 * that remain, nesting is bounded by the message types (a table's recursion is its own depth).
 */
#include "emulator/emu_proto.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "emulator/emu_base64.h"

struct pb {
	const unsigned char *p, *end;
};

struct pb_field {
	unsigned num;
	unsigned wire;
	uint64_t v;                 /* varint value */
	const unsigned char *bytes; /* length-delimited value */
	size_t len;
};

static bool pb_varint(struct pb *b, uint64_t *out)
{
	uint64_t v = 0;
	for (int shift = 0; shift < 64; shift += 7) {
		if (b->p >= b->end)
			return false;
		unsigned char c = *b->p++;
		v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80)) {
			*out = v;
			return true;
		}
	}
	return false;
}

/* Next field; returns 1, 0 at the end, -1 on malformed input. */
static int pb_next(struct pb *b, struct pb_field *f)
{
	if (b->p >= b->end)
		return 0;
	uint64_t tag;
	if (!pb_varint(b, &tag) || (tag >> 3) == 0 || (tag >> 3) > 536870911u)
		return -1;
	f->num = (unsigned)(tag >> 3);
	f->wire = (unsigned)(tag & 7);
	switch (f->wire) {
	case 0:
		return pb_varint(b, &f->v) ? 1 : -1;
	case 1:
	case 5: {
		size_t n = f->wire == 1 ? 8 : 4;
		if ((size_t)(b->end - b->p) < n)
			return -1;
		b->p += n;
		return 1;
	}
	case 2: {
		uint64_t n;
		if (!pb_varint(b, &n) || n > (uint64_t)(b->end - b->p))
			return -1;
		f->bytes = b->p;
		f->len = (size_t)n;
		b->p += n;
		return 1;
	}
	default:
		return -1;
	}
}

static json_t *pb_string(const struct pb_field *f)
{
	if (memchr(f->bytes, '\0', f->len))
		return NULL;
	return json_stringn((const char *)f->bytes, f->len); /* NULL when not UTF-8 */
}

/* What a map's values are: strings, bytes (written as base64) or Quantity messages. */
enum pb_map_value { PB_MAP_STRING, PB_MAP_BYTES, PB_MAP_QUANTITY };
static json_t *pb_quantity(const unsigned char *p, size_t len);

/* A map entry {1 key, 2 value} into m. A string or bytes entry without a value is ""; a
 * Quantity entry needs one. */
static bool pb_map_entry(const struct pb_field *f, json_t *m, enum pb_map_value kind)
{
	struct pb b = { f->bytes, f->bytes + f->len };
	struct pb_field e = { 0 };
	json_t *key = NULL, *val = NULL;
	int rc;
	while ((rc = pb_next(&b, &e)) > 0) {
		if (e.wire != 2)
			continue;
		if (e.num == 1) {
			json_decref(key);
			key = pb_string(&e);
		} else if (e.num == 2) {
			json_decref(val);
			if (kind == PB_MAP_BYTES) {
				char *s = emu_base64_encode(e.bytes, e.len, false);
				val = json_string(s);
				free(s);
			} else if (kind == PB_MAP_QUANTITY) {
				val = pb_quantity(e.bytes, e.len);
			} else {
				val = pb_string(&e);
			}
		}
	}
	if (!val && kind != PB_MAP_QUANTITY)
		val = json_string("");
	bool ok = rc == 0 && key && val;
	if (ok)
		json_object_set_new(m, json_string_value(key), val);
	else
		json_decref(val);
	json_decref(key);
	return ok;
}

static json_t *map_of(json_t *obj, const char *field)
{
	json_t *m = json_object_get(obj, field);
	if (!m) {
		m = json_object();
		json_object_set_new(obj, field, m);
	}
	return m;
}

static json_t *array_of(json_t *obj, const char *field)
{
	json_t *a = json_object_get(obj, field);
	if (!a) {
		a = json_array();
		json_object_set_new(obj, field, a);
	}
	return a;
}

/* Sets a non-empty string field; false when it is not UTF-8. */
static bool set_str(json_t *obj, const char *field, const struct pb_field *f)
{
	if (!f->len)
		return true;
	json_t *s = pb_string(f);
	if (!s)
		return false;
	json_object_set_new(obj, field, s);
	return true;
}

static json_t *pb_meta(const unsigned char *p, size_t len)
{
	struct pb b = { p, p + len };
	struct pb_field f = { 0 };
	json_t *m = json_object();
	int rc;
	bool ok = true;
	while (ok && (rc = pb_next(&b, &f)) > 0) {
		if (f.wire != 2)
			continue;
		switch (f.num) {
		case 1: ok = set_str(m, "name", &f); break;
		case 2: ok = set_str(m, "generateName", &f); break;
		case 3: ok = set_str(m, "namespace", &f); break;
		case 5: ok = set_str(m, "uid", &f); break;
		case 6: ok = set_str(m, "resourceVersion", &f); break;
		case 11: ok = pb_map_entry(&f, map_of(m, "labels"), PB_MAP_STRING); break;
		case 12: ok = pb_map_entry(&f, map_of(m, "annotations"), PB_MAP_STRING); break;
		case 14: {
			json_t *s = pb_string(&f);
			ok = s != NULL;
			if (ok)
				json_array_append_new(array_of(m, "finalizers"), s);
			break;
		}
		default: break;
		}
	}
	if (!ok || rc < 0) {
		json_decref(m);
		return NULL;
	}
	return m;
}

/* The object in raw for kind; NULL when malformed. */
static json_t *pb_object(const char *kind, const unsigned char *p, size_t len)
{
	struct pb b = { p, p + len };
	struct pb_field f = { 0 };
	json_t *o = json_object();
	bool ns = !strcmp(kind, "Namespace"), secret = !strcmp(kind, "Secret");
	int rc;
	bool ok = true;
	while (ok && (rc = pb_next(&b, &f)) > 0) {
		if (f.num == 1 && f.wire == 2) {
			json_t *m = pb_meta(f.bytes, f.len);
			ok = m != NULL;
			if (ok)
				json_object_set_new(o, "metadata", m);
		} else if (ns && f.num == 2 && f.wire == 2) {
			struct pb s = { f.bytes, f.bytes + f.len };
			struct pb_field e = { 0 };
			json_t *spec = map_of(o, "spec");
			while (ok && (rc = pb_next(&s, &e)) > 0) {
				if (e.num == 1 && e.wire == 2) {
					json_t *str = pb_string(&e);
					ok = str != NULL;
					if (ok)
						json_array_append_new(array_of(spec, "finalizers"),
								      str);
				}
			}
			ok = ok && rc == 0;
		} else if (!ns && f.num == 2 && f.wire == 2) {
			ok = pb_map_entry(&f, map_of(o, "data"), secret ? PB_MAP_BYTES : PB_MAP_STRING);
		} else if (secret && f.num == 3 && f.wire == 2) {
			ok = set_str(o, "type", &f);
		} else if (secret && f.num == 4 && f.wire == 2) {
			ok = pb_map_entry(&f, map_of(o, "stringData"), PB_MAP_STRING);
		} else if (!secret && !ns && f.num == 3 && f.wire == 2) {
			ok = pb_map_entry(&f, map_of(o, "binaryData"), PB_MAP_BYTES);
		} else if (!ns && f.num == (secret ? 5u : 4u) && f.wire == 0) {
			json_object_set_new(o, "immutable", json_boolean(f.v != 0));
		}
	}
	if (!ok || rc < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* ---- the kinds client-go writes, decoded from tables ---- */

enum pbtype {
	T_STR,    /* string */
	T_BOOL,   /* bool */
	T_INT,    /* int32 / int64 (varint, two's complement) */
	T_MSG,    /* a message: a JSON object */
	T_INLINE, /* a message whose fields JSON inlines into the parent (PersistentVolumeSource) */
	T_QTY,    /* resource.Quantity {1 string}: a JSON string */
	T_TIME,   /* metav1.Time {1 seconds, 2 nanos}: RFC 3339, seconds */
	T_MICRO,  /* metav1.MicroTime: RFC 3339, microseconds */
	T_MAP,    /* map<string, string> */
	T_MAPQ,   /* map<string, Quantity> */
	T_STRS,   /* repeated string */
	T_MSGS,   /* repeated message */
};
#define PB_KEEP 1u /* a pointer in Go, or no omitempty: written in JSON even when empty */

struct pbmsg;
struct pbfield {
	unsigned num;
	const char *json;
	enum pbtype t;
	unsigned flags;
	const struct pbmsg *msg;
};
struct pbmsg {
	const char *name;
	const struct pbfield *f;
	size_t n;
};
#define PBMSG(var, ...)                                                                    \
	static const struct pbfield var##_f[] = { __VA_ARGS__ };                           \
	static const struct pbmsg var = { &(#var)[2], var##_f, sizeof(var##_f) / sizeof(var##_f[0]) }
#define S(n, j) { n, j, T_STR, 0, NULL }
#define SK(n, j) { n, j, T_STR, PB_KEEP, NULL }
#define M(n, j, m) { n, j, T_MSG, 0, &m }
#define MS(n, j, m) { n, j, T_MSGS, 0, &m }

/* apimachinery: meta/v1 */
PBMSG(m_OwnerReference, S(5, "apiVersion"), S(1, "kind"), S(3, "name"), S(4, "uid"),
      { 6, "controller", T_BOOL, PB_KEEP, NULL }, { 7, "blockOwnerDeletion", T_BOOL, PB_KEEP, NULL });
PBMSG(m_ObjectMeta, S(1, "name"), S(2, "generateName"), S(3, "namespace"), S(4, "selfLink"),
      S(5, "uid"), S(6, "resourceVersion"), { 7, "generation", T_INT, 0, NULL },
      { 8, "creationTimestamp", T_TIME, 0, NULL }, { 9, "deletionTimestamp", T_TIME, 0, NULL },
      { 10, "deletionGracePeriodSeconds", T_INT, PB_KEEP, NULL }, { 11, "labels", T_MAP, 0, NULL },
      { 12, "annotations", T_MAP, 0, NULL }, MS(13, "ownerReferences", m_OwnerReference),
      { 14, "finalizers", T_STRS, 0, NULL });
PBMSG(m_LabelSelectorRequirement, S(1, "key"), S(2, "operator"), { 3, "values", T_STRS, 0, NULL });
PBMSG(m_LabelSelector, { 1, "matchLabels", T_MAP, 0, NULL },
      MS(2, "matchExpressions", m_LabelSelectorRequirement));
PBMSG(m_Preconditions, SK(1, "uid"), SK(2, "resourceVersion"));
PBMSG(m_DeleteOptions, { 1, "gracePeriodSeconds", T_INT, PB_KEEP, NULL },
      M(2, "preconditions", m_Preconditions), { 3, "orphanDependents", T_BOOL, PB_KEEP, NULL },
      SK(4, "propagationPolicy"), { 5, "dryRun", T_STRS, 0, NULL },
      { 6, "ignoreStoreReadErrorWithClusterBreakingPotential", T_BOOL, PB_KEEP, NULL });

/* core/v1 */
PBMSG(m_ObjectReference, S(1, "kind"), S(2, "namespace"), S(3, "name"), S(4, "uid"),
      S(5, "apiVersion"), S(6, "resourceVersion"), S(7, "fieldPath"));
PBMSG(m_SecretReference, S(1, "name"), S(2, "namespace"));
/* pods/binding, as kube-scheduler posts it */
PBMSG(m_Binding, M(1, "metadata", m_ObjectMeta), M(2, "target", m_ObjectReference));
PBMSG(m_CSIPersistentVolumeSource, S(1, "driver"), S(2, "volumeHandle"),
      { 3, "readOnly", T_BOOL, 0, NULL }, S(4, "fsType"), { 5, "volumeAttributes", T_MAP, 0, NULL },
      M(6, "controllerPublishSecretRef", m_SecretReference),
      M(7, "nodeStageSecretRef", m_SecretReference),
      M(8, "nodePublishSecretRef", m_SecretReference),
      M(9, "controllerExpandSecretRef", m_SecretReference),
      M(10, "nodeExpandSecretRef", m_SecretReference));
PBMSG(m_HostPathVolumeSource, S(1, "path"), SK(2, "type"));
PBMSG(m_LocalVolumeSource, S(1, "path"), SK(2, "fsType"));
PBMSG(m_PersistentVolumeSource, M(3, "hostPath", m_HostPathVolumeSource),
      M(20, "local", m_LocalVolumeSource), M(22, "csi", m_CSIPersistentVolumeSource));
PBMSG(m_NodeSelectorRequirement, S(1, "key"), S(2, "operator"), { 3, "values", T_STRS, 0, NULL });
PBMSG(m_NodeSelectorTerm, MS(1, "matchExpressions", m_NodeSelectorRequirement),
      MS(2, "matchFields", m_NodeSelectorRequirement));
PBMSG(m_NodeSelector, MS(1, "nodeSelectorTerms", m_NodeSelectorTerm));
PBMSG(m_VolumeNodeAffinity, M(1, "required", m_NodeSelector));
PBMSG(m_PersistentVolumeSpec, { 1, "capacity", T_MAPQ, 0, NULL },
      { 2, "", T_INLINE, 0, &m_PersistentVolumeSource }, { 3, "accessModes", T_STRS, 0, NULL },
      M(4, "claimRef", m_ObjectReference), S(5, "persistentVolumeReclaimPolicy"),
      S(6, "storageClassName"), { 7, "mountOptions", T_STRS, 0, NULL }, SK(8, "volumeMode"),
      M(9, "nodeAffinity", m_VolumeNodeAffinity), SK(10, "volumeAttributesClassName"));
PBMSG(m_PersistentVolumeStatus, S(1, "phase"), S(2, "message"), S(3, "reason"),
      { 4, "lastPhaseTransitionTime", T_TIME, 0, NULL });
PBMSG(m_PersistentVolume, M(1, "metadata", m_ObjectMeta), M(2, "spec", m_PersistentVolumeSpec),
      M(3, "status", m_PersistentVolumeStatus));
PBMSG(m_VolumeResourceRequirements, { 1, "limits", T_MAPQ, 0, NULL },
      { 2, "requests", T_MAPQ, 0, NULL });
PBMSG(m_TypedLocalObjectReference, SK(1, "apiGroup"), S(2, "kind"), S(3, "name"));
PBMSG(m_TypedObjectReference, SK(1, "apiGroup"), S(2, "kind"), S(3, "name"), SK(4, "namespace"));
PBMSG(m_PersistentVolumeClaimSpec, { 1, "accessModes", T_STRS, 0, NULL },
      M(4, "selector", m_LabelSelector), M(2, "resources", m_VolumeResourceRequirements),
      S(3, "volumeName"), SK(5, "storageClassName"), SK(6, "volumeMode"),
      M(7, "dataSource", m_TypedLocalObjectReference),
      M(8, "dataSourceRef", m_TypedObjectReference), SK(9, "volumeAttributesClassName"));
PBMSG(m_PersistentVolumeClaimCondition, S(1, "type"), S(2, "status"),
      { 3, "lastProbeTime", T_TIME, 0, NULL }, { 4, "lastTransitionTime", T_TIME, 0, NULL },
      S(5, "reason"), S(6, "message"));
PBMSG(m_ModifyVolumeStatus, S(1, "targetVolumeAttributesClassName"), S(2, "status"));
PBMSG(m_PersistentVolumeClaimStatus, S(1, "phase"), { 2, "accessModes", T_STRS, 0, NULL },
      { 3, "capacity", T_MAPQ, 0, NULL }, MS(4, "conditions", m_PersistentVolumeClaimCondition),
      { 5, "allocatedResources", T_MAPQ, 0, NULL },
      { 7, "allocatedResourceStatuses", T_MAP, 0, NULL },
      SK(8, "currentVolumeAttributesClassName"), M(9, "modifyVolumeStatus", m_ModifyVolumeStatus));
PBMSG(m_PersistentVolumeClaim, M(1, "metadata", m_ObjectMeta),
      M(2, "spec", m_PersistentVolumeClaimSpec), M(3, "status", m_PersistentVolumeClaimStatus));
PBMSG(m_EventSource, S(1, "component"), S(2, "host"));
PBMSG(m_EventSeries, { 1, "count", T_INT, 0, NULL }, { 2, "lastObservedTime", T_MICRO, 0, NULL });
PBMSG(m_Event, M(1, "metadata", m_ObjectMeta), M(2, "involvedObject", m_ObjectReference),
      S(3, "reason"), S(4, "message"), M(5, "source", m_EventSource),
      { 6, "firstTimestamp", T_TIME, 0, NULL }, { 7, "lastTimestamp", T_TIME, 0, NULL },
      { 8, "count", T_INT, 0, NULL }, S(9, "type"), { 10, "eventTime", T_MICRO, 0, NULL },
      M(11, "series", m_EventSeries), S(12, "action"), M(13, "related", m_ObjectReference),
      S(14, "reportingComponent"), S(15, "reportingInstance"));
/* events.k8s.io/v1 (kube-scheduler's recorder) */
PBMSG(m_EventsV1Event, M(1, "metadata", m_ObjectMeta), { 2, "eventTime", T_MICRO, 0, NULL },
      M(3, "series", m_EventSeries), S(4, "reportingController"), S(5, "reportingInstance"),
      S(6, "action"), S(7, "reason"), M(8, "regarding", m_ObjectReference),
      M(9, "related", m_ObjectReference), S(10, "note"), S(11, "type"),
      M(12, "deprecatedSource", m_EventSource),
      { 13, "deprecatedFirstTimestamp", T_TIME, 0, NULL },
      { 14, "deprecatedLastTimestamp", T_TIME, 0, NULL },
      { 15, "deprecatedCount", T_INT, 0, NULL });

/* coordination/v1 */
PBMSG(m_LeaseSpec, SK(1, "holderIdentity"), { 2, "leaseDurationSeconds", T_INT, PB_KEEP, NULL },
      { 3, "acquireTime", T_MICRO, 0, NULL }, { 4, "renewTime", T_MICRO, 0, NULL },
      { 5, "leaseTransitions", T_INT, PB_KEEP, NULL }, SK(6, "strategy"),
      SK(7, "preferredHolder"));
PBMSG(m_Lease, M(1, "metadata", m_ObjectMeta), M(2, "spec", m_LeaseSpec));

/* storage/v1 */
PBMSG(m_VolumeError, { 1, "time", T_TIME, 0, NULL }, S(2, "message"),
      { 3, "errorCode", T_INT, PB_KEEP, NULL });
PBMSG(m_VolumeAttachmentSource, SK(1, "persistentVolumeName"),
      M(2, "inlineVolumeSpec", m_PersistentVolumeSpec));
PBMSG(m_VolumeAttachmentSpec, S(1, "attacher"), M(2, "source", m_VolumeAttachmentSource),
      S(3, "nodeName"));
PBMSG(m_VolumeAttachmentStatus, { 1, "attached", T_BOOL, PB_KEEP, NULL },
      { 2, "attachmentMetadata", T_MAP, 0, NULL }, M(3, "attachError", m_VolumeError),
      M(4, "detachError", m_VolumeError));
PBMSG(m_VolumeAttachment, M(1, "metadata", m_ObjectMeta), M(2, "spec", m_VolumeAttachmentSpec),
      M(3, "status", m_VolumeAttachmentStatus));
PBMSG(m_CSIStorageCapacity, M(1, "metadata", m_ObjectMeta), M(2, "nodeTopology", m_LabelSelector),
      S(3, "storageClassName"), { 4, "capacity", T_QTY, 0, NULL },
      { 5, "maximumVolumeSize", T_QTY, 0, NULL });

static const struct {
	const char *api_version; /* NULL: any (DeleteOptions travels under several) */
	const char *kind;
	const struct pbmsg *msg;
} pb_kinds[] = {
	{ "v1", "Binding", &m_Binding },
	{ "v1", "Event", &m_Event },
	{ "events.k8s.io/v1", "Event", &m_EventsV1Event },
	{ "v1", "PersistentVolume", &m_PersistentVolume },
	{ "v1", "PersistentVolumeClaim", &m_PersistentVolumeClaim },
	{ "coordination.k8s.io/v1", "Lease", &m_Lease },
	{ "storage.k8s.io/v1", "VolumeAttachment", &m_VolumeAttachment },
	{ "storage.k8s.io/v1", "CSIStorageCapacity", &m_CSIStorageCapacity },
	{ NULL, "DeleteOptions", &m_DeleteOptions },
};

#define PB_ZERO_TIME (-62135596800LL) /* Go's time.Time{} in Unix seconds */

/* Time and MicroTime {1 seconds, 2 nanos} as RFC 3339; *out NULL for the zero time (written
 * as an empty message, or as Go's time.Time{} in seconds). */
static bool pb_time(const struct pb_field *f, bool micro, json_t **out)
{
	struct pb b = { f->bytes, f->bytes + f->len };
	struct pb_field e = { 0 };
	int64_t sec = 0, nsec = 0;
	int rc;
	while ((rc = pb_next(&b, &e)) > 0) {
		if (e.num == 1 && e.wire == 0)
			sec = (int64_t)e.v;
		else if (e.num == 2 && e.wire == 0)
			nsec = (int64_t)e.v;
	}
	*out = NULL;
	if (rc < 0 || nsec < 0 || nsec > 999999999)
		return false;
	/* metav1.Time's Marshal writes nothing for the zero time: an empty message, not 1970 */
	if (!f->len || (sec == PB_ZERO_TIME && !nsec))
		return true;
	time_t t = (time_t)sec;
	struct tm tm;
	char buf[64];
	if (sec < -62135596800LL || sec > 253402300799LL || !gmtime_r(&t, &tm) ||
	    !strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm))
		return false;
	if (micro)
		snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), ".%06dZ", (int)(nsec / 1000));
	else
		snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "Z");
	*out = json_string(buf);
	return true;
}

/* Quantity {1 string} as a JSON string; NULL when malformed. */
static json_t *pb_quantity(const unsigned char *p, size_t len)
{
	struct pb b = { p, p + len };
	struct pb_field e = { 0 };
	json_t *s = NULL;
	int rc;
	while ((rc = pb_next(&b, &e)) > 0) {
		if (e.num == 1 && e.wire == 2) {
			json_decref(s);
			s = pb_string(&e);
			if (!s)
				return NULL;
		}
	}
	if (rc < 0) {
		json_decref(s);
		return NULL;
	}
	return s ? s : json_string("0");
}

static bool pb_decode(const struct pbmsg *m, const unsigned char *p, size_t len, json_t *o,
		      int depth, char *err, size_t errlen);

/* One field of a table message into o; false with err set. */
static bool pb_field_into(const struct pbmsg *m, const struct pbfield *d, const struct pb_field *f,
			  json_t *o, int depth, char *err, size_t errlen)
{
	bool varint = d->t == T_BOOL || d->t == T_INT;
	if (varint != (f->wire == 0) || (!varint && f->wire != 2)) {
		snprintf(err, errlen, "the protobuf %s field %u (%s) has wire type %u", m->name,
			 d->num, d->json, f->wire);
		return false;
	}
	bool keep = d->flags & PB_KEEP;
	json_t *v = NULL;
	switch (d->t) {
	case T_STR:
		if (!f->len && !keep)
			return true;
		v = pb_string(f);
		break;
	case T_BOOL:
		if (!f->v && !keep)
			return true;
		v = json_boolean(f->v != 0);
		break;
	case T_INT:
		if (!f->v && !keep)
			return true;
		v = json_integer((json_int_t)(int64_t)f->v);
		break;
	case T_QTY:
		v = pb_quantity(f->bytes, f->len);
		break;
	case T_TIME:
	case T_MICRO:
		if (!pb_time(f, d->t == T_MICRO, &v))
			break;
		if (!v)
			return true;
		break;
	case T_MAP:
		if (pb_map_entry(f, map_of(o, d->json), PB_MAP_STRING))
			return true;
		break;
	case T_MAPQ:
		if (pb_map_entry(f, map_of(o, d->json), PB_MAP_QUANTITY))
			return true;
		break;
	case T_STRS:
		v = pb_string(f);
		if (v) {
			json_array_append_new(array_of(o, d->json), v);
			return true;
		}
		break;
	case T_INLINE:
		return pb_decode(d->msg, f->bytes, f->len, o, depth + 1, err, errlen);
	case T_MSG:
	case T_MSGS:
		v = json_object();
		if (!pb_decode(d->msg, f->bytes, f->len, v, depth + 1, err, errlen)) {
			json_decref(v);
			return false;
		}
		if (d->t == T_MSGS) {
			json_array_append_new(array_of(o, d->json), v);
			return true;
		}
		/* a repeated occurrence of a message field merges, as protobuf says */
		json_t *old = json_object_get(o, d->json);
		if (old && json_is_object(old)) {
			json_object_update(old, v);
			json_decref(v);
			return true;
		}
		break;
	}
	if (!v) {
		snprintf(err, errlen, "the protobuf %s field %u (%s) is malformed (or a string is "
			 "not UTF-8)", m->name, d->num, d->json);
		return false;
	}
	json_object_set_new(o, d->json, v);
	return true;
}

static bool pb_decode(const struct pbmsg *m, const unsigned char *p, size_t len, json_t *o,
		      int depth, char *err, size_t errlen)
{
	if (depth > 16) {
		snprintf(err, errlen, "the protobuf %s is nested too deeply", m->name);
		return false;
	}
	struct pb b = { p, p + len };
	struct pb_field f = { 0 };
	int rc;
	while ((rc = pb_next(&b, &f)) > 0) {
		const struct pbfield *d = NULL;
		for (size_t i = 0; i < m->n && !d; i++)
			if (m->f[i].num == f.num)
				d = &m->f[i];
		if (!d) {
			snprintf(err, errlen, "kube-emulator does not decode field %u of protobuf %s; "
				 "send JSON", f.num, m->name);
			return false;
		}
		if (!pb_field_into(m, d, &f, o, depth, err, errlen))
			return false;
	}
	if (rc < 0) {
		snprintf(err, errlen, "the protobuf %s is malformed", m->name);
		return false;
	}
	return true;
}

static const struct pbmsg *pb_table(const char *api_version, const char *kind)
{
	for (size_t i = 0; i < sizeof(pb_kinds) / sizeof(pb_kinds[0]); i++)
		if (!strcmp(pb_kinds[i].kind, kind) &&
		    (!pb_kinds[i].api_version || !strcmp(pb_kinds[i].api_version, api_version)))
			return pb_kinds[i].msg;
	return NULL;
}

char *emu_proto_to_json(const void *body, size_t len, char *err, size_t errlen)
{
	const unsigned char *p = body;
	if (len < 4 || memcmp(p, "k8s\0", 4)) {
		snprintf(err, errlen, "the protobuf body does not start with the Kubernetes magic "
			 "number");
		return NULL;
	}
	struct pb b = { p + 4, p + len };
	struct pb_field f = { 0 };
	char api_version[64] = "", kind[64] = "";
	const unsigned char *raw = NULL;
	size_t raw_len = 0;
	int rc;
	while ((rc = pb_next(&b, &f)) > 0) {
		if (f.num == 1 && f.wire == 2) {
			struct pb t = { f.bytes, f.bytes + f.len };
			struct pb_field e = { 0 };
			while ((rc = pb_next(&t, &e)) > 0) {
				if (e.wire == 2 && e.num == 1 && e.len < sizeof(api_version))
					snprintf(api_version, sizeof(api_version), "%.*s",
						 (int)e.len, (const char *)e.bytes);
				else if (e.wire == 2 && e.num == 2 && e.len < sizeof(kind))
					snprintf(kind, sizeof(kind), "%.*s", (int)e.len,
						 (const char *)e.bytes);
			}
			if (rc < 0)
				break;
		} else if (f.num == 2 && f.wire == 2) {
			raw = f.bytes;
			raw_len = f.len;
		} else if (f.num == 3 && f.wire == 2 && f.len) {
			snprintf(err, errlen, "protobuf bodies with a content encoding are not "
				 "supported");
			return NULL;
		}
	}
	if (rc < 0) {
		snprintf(err, errlen, "the protobuf body is malformed");
		return NULL;
	}
	const unsigned char *obj = raw ? raw : (const unsigned char *)"";
	json_t *o = NULL;
	const struct pbmsg *table = pb_table(api_version, kind);
	if (table) {
		o = json_object();
		if (!pb_decode(table, obj, raw_len, o, 0, err, errlen)) {
			json_decref(o);
			return NULL;
		}
	} else if (strcmp(api_version, "v1") || (strcmp(kind, "Namespace") &&
						  strcmp(kind, "Secret") && strcmp(kind, "ConfigMap"))) {
		snprintf(err, errlen, "kube-emulator decodes protobuf only for v1 Namespace, Secret, "
			 "ConfigMap, Binding, Event (v1 and events.k8s.io/v1), PersistentVolume, "
			 "PersistentVolumeClaim, "
			 "coordination.k8s.io/v1 Lease, storage.k8s.io/v1 VolumeAttachment, "
			 "CSIStorageCapacity and DeleteOptions, not %s %s; send JSON", api_version,
			 kind);
		return NULL;
	} else if (!(o = pb_object(kind, obj, raw_len))) {
		snprintf(err, errlen, "the protobuf %s is malformed (or has a string that is not "
			 "UTF-8)", kind);
		return NULL;
	}
	json_object_set_new(o, "apiVersion", json_string(api_version));
	json_object_set_new(o, "kind", json_string(kind));
	char *text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return text;
}
