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
 * 2 value}. Only these kinds are decoded (and only the fields listed); anything else is
 * refused with 415, as the emulator did for every protobuf body before.
 *
 * The decoder is a bounds-checked walk over the wire format: varints, length-delimited fields,
 * fixed 32/64-bit fields skipped. Nothing is trusted: every length is checked against the bytes
 * that remain, nesting is as deep as the message types above (three levels).
 */
#include "emulator/emu_proto.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* A map entry {1 key, 2 value} into m; bytes values become base64. */
static bool pb_map_entry(const struct pb_field *f, json_t *m, bool bytes)
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
			if (bytes) {
				char *s = emu_base64_encode(e.bytes, e.len, false);
				val = json_string(s);
				free(s);
			} else {
				val = pb_string(&e);
			}
		}
	}
	bool ok = rc == 0 && key;
	if (ok)
		json_object_set_new(m, json_string_value(key), val ? val : json_string(""));
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
		case 11: ok = pb_map_entry(&f, map_of(m, "labels"), false); break;
		case 12: ok = pb_map_entry(&f, map_of(m, "annotations"), false); break;
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
			ok = pb_map_entry(&f, map_of(o, "data"), secret);
		} else if (secret && f.num == 3 && f.wire == 2) {
			ok = set_str(o, "type", &f);
		} else if (secret && f.num == 4 && f.wire == 2) {
			ok = pb_map_entry(&f, map_of(o, "stringData"), false);
		} else if (!secret && !ns && f.num == 3 && f.wire == 2) {
			ok = pb_map_entry(&f, map_of(o, "binaryData"), true);
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
	if (strcmp(api_version, "v1") || (strcmp(kind, "Namespace") && strcmp(kind, "Secret") &&
					   strcmp(kind, "ConfigMap"))) {
		snprintf(err, errlen, "kube-emulator decodes protobuf only for v1 Namespace, Secret "
			 "and ConfigMap, not %s %s; send JSON", api_version, kind);
		return NULL;
	}
	json_t *o = pb_object(kind, raw ? raw : (const unsigned char *)"", raw_len);
	if (!o) {
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
