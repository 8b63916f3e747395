/*
 * csi/msg: arena, generic message building, JSON rendering and status names.
 *
 * Everything here is driven by protobuf-c's runtime descriptors, so it works for every message
 * of the schema (and the well-known types) without per-message code. The arena is a simple
 * linked list of malloc'd blocks: messages are small and short-lived, and freeing them in one
 * sweep is what keeps handler and CLI code free of leaks.
 *
 * Repeated fields are (n, array) pairs with no room for a capacity, and arena blocks are never
 * freed one by one, so appending by copying into an array one larger would cost O(N^2) for N
 * elements. Instead the arena keeps a small hash table of the arrays it grew (array -> capacity,
 * and the count of the field that last appended): an append whose field still holds such an
 * array at that count writes into the spare room; anything else is copied into a new array of
 * twice the size. See msg.h for why that is safe for every array a caller may have put there.
 */
#include "csi/msg.h"

#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "base/xalloc.h"
#include "csi/secrets_table.h"

struct arena_block {
	struct arena_block *next;
	size_t size; /* of the whole block, for the wipe */
	max_align_t data[];
};

/* An array repeated_push() allocated: room for cap pointers, len in use by its last appender. */
struct grown_array {
	void **arr; /* NULL: a free slot */
	size_t len, cap;
};

struct csi_arena {
	struct arena_block *blocks;
	size_t bytes;               /* see csi_arena_bytes() */
	struct grown_array *grown;  /* open addressing, linear probing; size a power of two */
	size_t grown_size, grown_used;
	bool wipe; /* csi_arena_wipe_on_free(): it holds secrets */
};

struct csi_arena *csi_arena_new(void)
{
	return xcalloc(1, sizeof(struct csi_arena));
}

void csi_arena_free(struct csi_arena *a)
{
	if (!a)
		return;
	struct arena_block *b = a->blocks;
	while (b) {
		struct arena_block *next = b->next;
		if (a->wipe)
			explicit_bzero(b, b->size);
		free(b);
		b = next;
	}
	free(a->grown);
	free(a);
}

void *csi_arena_alloc(struct csi_arena *a, size_t n)
{
	if (n > SIZE_MAX - sizeof(struct arena_block))
		n = SIZE_MAX - sizeof(struct arena_block); /* xcalloc then dies with a message */
	size_t size = sizeof(struct arena_block) + (n ? n : 1);
	struct arena_block *b = xcalloc(1, size);
	b->size = size;
	b->next = a->blocks;
	a->blocks = b;
	a->bytes += size;
	return b->data;
}

void csi_arena_wipe_on_free(struct csi_arena *a)
{
	a->wipe = true;
}

size_t csi_arena_bytes(const struct csi_arena *a)
{
	return a->bytes + a->grown_size * sizeof(*a->grown);
}

char *csi_arena_strdup(struct csi_arena *a, const char *s)
{
	size_t n = strlen(s);
	char *p = csi_arena_alloc(a, n + 1);
	memcpy(p, s, n);
	return p;
}

char *csi_arena_printf(struct csi_arena *a, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	char *p = csi_arena_strdup(a, sb.buf);
	strbuf_release(&sb);
	return p;
}

void *csi_msg_new(struct csi_arena *a, const ProtobufCMessageDescriptor *desc)
{
	ProtobufCMessage *m = csi_arena_alloc(a, desc->sizeof_message);
	protobuf_c_message_init(desc, m);
	return m;
}

void csi_msg_free(void *msg)
{
	if (msg)
		protobuf_c_message_free_unpacked(msg, NULL);
}

/* ---- growing repeated fields ---- */

static size_t grown_slot(const struct csi_arena *a, void **arr)
{
	uint64_t h = (uint64_t)(uintptr_t)arr * 0x9e3779b97f4a7c15ULL;
	size_t i = (size_t)(h >> 32) & (a->grown_size - 1);
	while (a->grown[i].arr && a->grown[i].arr != arr)
		i = (i + 1) & (a->grown_size - 1);
	return i;
}

/* The record of arr when this arena grew it, else NULL. */
static struct grown_array *grown_find(struct csi_arena *a, void **arr)
{
	if (!a->grown_used || !arr)
		return NULL;
	struct grown_array *g = &a->grown[grown_slot(a, arr)];
	return g->arr ? g : NULL;
}

/*
 * Records arr, which replaces old (NULL when there is none). old's record is kept but its
 * room marked as used up, so a field still holding old (an alias, or a field the caller set
 * to it) copies on its next append; records of used-up arrays are dropped when the table grows.
 */
static void grown_add(struct csi_arena *a, struct grown_array *old, void **arr, size_t len,
		      size_t cap)
{
	if (old)
		old->cap = old->len = 0;
	if ((a->grown_used + 1) * 2 > a->grown_size) {
		struct grown_array *prev = a->grown;
		size_t prev_size = a->grown_size;
		a->grown_size = prev_size ? prev_size * 2 : 16;
		a->grown = xcalloc(a->grown_size, sizeof(*a->grown));
		a->grown_used = 0;
		for (size_t i = 0; i < prev_size; i++) {
			if (!prev[i].arr || !prev[i].cap)
				continue;
			a->grown[grown_slot(a, prev[i].arr)] = prev[i];
			a->grown_used++;
		}
		free(prev);
	}
	struct grown_array *g = &a->grown[grown_slot(a, arr)];
	assert(!g->arr);
	*g = (struct grown_array){ arr, len, cap };
	a->grown_used++;
}

/* Appends elem (a pointer-sized value) to the repeated field f of msg, growing in the arena. */
static void repeated_push(struct csi_arena *a, ProtobufCMessage *msg,
			  const ProtobufCFieldDescriptor *f, void *elem)
{
	size_t *n = (size_t *)((char *)msg + f->quantifier_offset);
	void ***arr = (void ***)((char *)msg + f->offset);
	struct grown_array *g = grown_find(a, *arr);
	if (g && g->len == *n && *n < g->cap) {
		(*arr)[(*n)++] = elem;
		g->len = *n;
		return;
	}
	size_t cap = *n < 4 ? 4 : *n * 2;
	void **grown = csi_arena_alloc(a, cap * sizeof(void *));
	if (*n)
		memcpy(grown, *arr, *n * sizeof(void *));
	grown[*n] = elem;
	*arr = grown;
	(*n)++;
	grown_add(a, g, grown, *n, cap);
}

static bool is_map_entry(const ProtobufCMessageDescriptor *d)
{
	size_t len = strlen(d->name);
	return d->n_fields == 2 && len > 5 && strcmp(d->name + len - 5, "Entry") == 0 &&
	       strcmp(d->fields[0].name, "key") == 0 && strcmp(d->fields[1].name, "value") == 0;
}

int csi_map_add(struct csi_arena *a, ProtobufCMessage *msg, const char *field, const char *key,
		const char *value)
{
	const ProtobufCFieldDescriptor *f =
		protobuf_c_message_descriptor_get_field_by_name(msg->descriptor, field);
	if (!f || f->label != PROTOBUF_C_LABEL_REPEATED || f->type != PROTOBUF_C_TYPE_MESSAGE)
		return -1;
	const ProtobufCMessageDescriptor *ed = f->descriptor;
	if (!is_map_entry(ed) || ed->fields[0].type != PROTOBUF_C_TYPE_STRING ||
	    ed->fields[1].type != PROTOBUF_C_TYPE_STRING)
		return -1;
	struct csi_map_entry *e = csi_msg_new(a, f->descriptor);
	e->key = csi_arena_strdup(a, key);
	e->value = csi_arena_strdup(a, value);
	repeated_push(a, msg, f, e);
	return 0;
}

const char *csi_map_get(size_t n, void *entries, const char *key)
{
	struct csi_map_entry **e = entries;
	for (size_t i = 0; i < n; i++)
		if (e[i]->key && strcmp(e[i]->key, key) == 0)
			return e[i]->value;
	return NULL;
}

int csi_repeated_add(struct csi_arena *a, ProtobufCMessage *msg, const char *field, void *elem)
{
	const ProtobufCFieldDescriptor *f =
		protobuf_c_message_descriptor_get_field_by_name(msg->descriptor, field);
	if (!f || f->label != PROTOBUF_C_LABEL_REPEATED ||
	    (f->type != PROTOBUF_C_TYPE_MESSAGE && f->type != PROTOBUF_C_TYPE_STRING))
		return -1;
	repeated_push(a, msg, f, elem);
	return 0;
}

/* ---- secrets ---- */

bool csi_field_is_secret(const ProtobufCMessageDescriptor *desc, const ProtobufCFieldDescriptor *f)
{
	for (const struct csi_secret_field *s = csi_secret_fields; s->message; s++)
		if (s->field == f->id && strcmp(s->message, desc->name) == 0)
			return true;
	return false;
}

/* ---- JSON ---- */

static void json_value(const ProtobufCFieldDescriptor *f, const void *p, int flags, int depth,
		       struct strbuf *out);
static void json_message(const ProtobufCMessage *m, int flags, int depth, struct strbuf *out);

static void json_string(const char *s, size_t len, struct strbuf *out)
{
	strbuf_addjson(out, s, len);
}

static void indent(int flags, int depth, struct strbuf *out)
{
	if (!(flags & CSI_JSON_PRETTY))
		return;
	strbuf_addch(out, '\n');
	for (int i = 0; i < depth; i++)
		strbuf_addstr(out, "  ");
}

static void json_value(const ProtobufCFieldDescriptor *f, const void *p, int flags, int depth,
		       struct strbuf *out)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		strbuf_addf(out, "%" PRId32, *(const int32_t *)p);
		break;
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		strbuf_addf(out, "%" PRIu32, *(const uint32_t *)p);
		break;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		strbuf_addf(out, "%" PRId64, *(const int64_t *)p);
		break;
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		strbuf_addf(out, "%" PRIu64, *(const uint64_t *)p);
		break;
	case PROTOBUF_C_TYPE_FLOAT:
		strbuf_addf(out, "%g", (double)*(const float *)p);
		break;
	case PROTOBUF_C_TYPE_DOUBLE:
		strbuf_addf(out, "%g", *(const double *)p);
		break;
	case PROTOBUF_C_TYPE_BOOL:
		strbuf_addstr(out, *(const protobuf_c_boolean *)p ? "true" : "false");
		break;
	case PROTOBUF_C_TYPE_ENUM: {
		int v = *(const int *)p;
		const ProtobufCEnumValue *ev =
			protobuf_c_enum_descriptor_get_value(f->descriptor, v);
		if (ev)
			json_string(ev->name, strlen(ev->name), out);
		else
			strbuf_addf(out, "%d", v);
		break;
	}
	case PROTOBUF_C_TYPE_STRING: {
		const char *s = *(char *const *)p;
		json_string(s ? s : "", s ? strlen(s) : 0, out);
		break;
	}
	case PROTOBUF_C_TYPE_BYTES: {
		const ProtobufCBinaryData *b = p;
		strbuf_addf(out, "\"<%zu bytes>\"", b->len);
		break;
	}
	case PROTOBUF_C_TYPE_MESSAGE: {
		const ProtobufCMessage *sub = *(ProtobufCMessage *const *)p;
		if (sub)
			json_message(sub, flags, depth, out);
		else
			strbuf_addstr(out, "null");
		break;
	}
	}
}

/* Whether a singular (LABEL_NONE, proto3 implicit presence) field holds a non-default value. */
static bool singular_present(const ProtobufCFieldDescriptor *f, const void *p)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32: case PROTOBUF_C_TYPE_ENUM:
		return *(const uint32_t *)p != 0;
	case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64:
		return *(const uint64_t *)p != 0;
	case PROTOBUF_C_TYPE_FLOAT:
		return *(const float *)p != 0;
	case PROTOBUF_C_TYPE_DOUBLE:
		return *(const double *)p != 0;
	case PROTOBUF_C_TYPE_BOOL:
		return *(const protobuf_c_boolean *)p != 0;
	case PROTOBUF_C_TYPE_STRING: {
		const char *s = *(char *const *)p;
		return s && s[0];
	}
	case PROTOBUF_C_TYPE_BYTES:
		return ((const ProtobufCBinaryData *)p)->len != 0;
	case PROTOBUF_C_TYPE_MESSAGE:
		return *(void *const *)p != NULL;
	}
	return false;
}

static void json_map(const ProtobufCFieldDescriptor *f, size_t n, void *const *entries, int flags,
		     int depth, struct strbuf *out)
{
	const ProtobufCMessageDescriptor *ed = f->descriptor;
	strbuf_addch(out, '{');
	for (size_t i = 0; i < n; i++) {
		const char *e = entries[i];
		if (i)
			strbuf_addch(out, ',');
		indent(flags, depth + 1, out);
		/* JSON keys must be strings: render non-string keys through a temporary. */
		if (ed->fields[0].type == PROTOBUF_C_TYPE_STRING) {
			const char *k = *(char *const *)(e + ed->fields[0].offset);
			json_string(k ? k : "", k ? strlen(k) : 0, out);
		} else {
			struct strbuf tmp = STRBUF_INIT;
			json_value(&ed->fields[0], e + ed->fields[0].offset, flags, depth + 1, &tmp);
			json_string(tmp.buf, tmp.len, out);
			strbuf_release(&tmp);
		}
		strbuf_addstr(out, (flags & CSI_JSON_PRETTY) ? ": " : ":");
		json_value(&ed->fields[1], e + ed->fields[1].offset, flags, depth + 1, out);
	}
	if (n)
		indent(flags, depth, out);
	strbuf_addch(out, '}');
}

static size_t elem_size(const ProtobufCFieldDescriptor *f)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64: case PROTOBUF_C_TYPE_DOUBLE:
		return 8;
	case PROTOBUF_C_TYPE_BOOL:
		return sizeof(protobuf_c_boolean);
	case PROTOBUF_C_TYPE_STRING: case PROTOBUF_C_TYPE_MESSAGE:
		return sizeof(void *);
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	default:
		return 4;
	}
}

static void json_message(const ProtobufCMessage *m, int flags, int depth, struct strbuf *out)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;
	const char *base = (const char *)m;
	bool first = true;
	strbuf_addch(out, '{');
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		const void *p = base + f->offset;
		size_t n = 0;
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			n = *(const size_t *)(base + f->quantifier_offset);
			if (!n)
				continue;
		} else if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
			if (*(const uint32_t *)(base + f->quantifier_offset) != f->id)
				continue;
		} else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset &&
			   f->type != PROTOBUF_C_TYPE_MESSAGE && f->type != PROTOBUF_C_TYPE_STRING) {
			if (!*(const protobuf_c_boolean *)(base + f->quantifier_offset))
				continue;
		} else if (!singular_present(f, p)) {
			continue;
		}
		if (!first)
			strbuf_addch(out, ',');
		first = false;
		indent(flags, depth + 1, out);
		json_string(f->name, strlen(f->name), out);
		strbuf_addstr(out, (flags & CSI_JSON_PRETTY) ? ": " : ":");
		if ((flags & CSI_JSON_STRIP_SECRETS) && csi_field_is_secret(d, f)) {
			strbuf_addstr(out, "\"***stripped***\"");
			continue;
		}
		if (f->label != PROTOBUF_C_LABEL_REPEATED) {
			json_value(f, p, flags, depth + 1, out);
			continue;
		}
		const char *arr = *(char *const *)p;
		if (f->type == PROTOBUF_C_TYPE_MESSAGE && is_map_entry(f->descriptor)) {
			json_map(f, n, (void *const *)arr, flags, depth + 1, out);
			continue;
		}
		size_t sz = elem_size(f);
		strbuf_addch(out, '[');
		for (size_t j = 0; j < n; j++) {
			if (j)
				strbuf_addch(out, ',');
			indent(flags, depth + 2, out);
			json_value(f, arr + j * sz, flags, depth + 2, out);
		}
		indent(flags, depth + 1, out);
		strbuf_addch(out, ']');
	}
	if (!first)
		indent(flags, depth, out);
	strbuf_addch(out, '}');
}

void csi_msg_to_json(const ProtobufCMessage *msg, int flags, struct strbuf *out)
{
	if (!msg) {
		strbuf_addstr(out, "null");
		return;
	}
	json_message(msg, flags, 0, out);
}

/* ---- status codes ---- */

static const char *const code_names[] = {
	"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
	"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
	"ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
	"UNAUTHENTICATED",
};
static const char *const go_names[] = {
	"OK", "Canceled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound",
	"AlreadyExists", "PermissionDenied", "ResourceExhausted", "FailedPrecondition",
	"Aborted", "OutOfRange", "Unimplemented", "Internal", "Unavailable", "DataLoss",
	"Unauthenticated",
};
#define N_CODES (sizeof(code_names) / sizeof(code_names[0]))

const char *csi_code_name(int code)
{
	return code >= 0 && (size_t)code < N_CODES ? code_names[code] : "UNKNOWN_CODE";
}

const char *csi_code_go_name(int code)
{
	return code >= 0 && (size_t)code < N_CODES ? go_names[code] : "Unknown";
}

int csi_code_parse(const char *name)
{
	for (size_t i = 0; i < N_CODES; i++)
		if (strcasecmp(name, code_names[i]) == 0 || strcmp(name, go_names[i]) == 0)
			return (int)i;
	char *end;
	long v = strtol(name, &end, 10);
	if (*name && !*end && v >= 0 && (size_t)v < N_CODES)
		return (int)v;
	return -1;
}

/* ---- schema ---- */

const ProtobufCServiceDescriptor *const csi_services[] = {
	&csi__v1__identity__descriptor,
	&csi__v1__controller__descriptor,
	&csi__v1__group_controller__descriptor,
	&csi__v1__snapshot_metadata__descriptor,
	&csi__v1__node__descriptor,
	NULL,
};

const ProtobufCMethodDescriptor *csi_method_lookup(const char *path)
{
	if (!path || path[0] != '/')
		return NULL;
	const char *slash = strchr(path + 1, '/');
	if (!slash)
		return NULL;
	size_t svc_len = (size_t)(slash - path - 1);
	for (const ProtobufCServiceDescriptor *const *s = csi_services; *s; s++) {
		if (strlen((*s)->name) != svc_len || strncmp((*s)->name, path + 1, svc_len) != 0)
			continue;
		for (unsigned i = 0; i < (*s)->n_methods; i++)
			if (strcmp((*s)->methods[i].name, slash + 1) == 0)
				return &(*s)->methods[i];
	}
	return NULL;
}

bool csi_method_server_streams(const ProtobufCMethodDescriptor *md)
{
	/* protoc-c keeps no streaming flag; the schema's only streaming service is this one. */
	for (unsigned i = 0; i < csi__v1__snapshot_metadata__descriptor.n_methods; i++)
		if (md == &csi__v1__snapshot_metadata__descriptor.methods[i])
			return true;
	return false;
}

Csi__V1__VolumeCapability__AccessMode__Mode csi_access_mode_of_k8s(const char *k8s_mode, bool snmw)
{
	const char *m = k8s_mode ? k8s_mode : "";

	if (!strcmp(m, "ReadOnlyMany"))
		return CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_READER_ONLY;
	if (!strcmp(m, "ReadWriteMany"))
		return CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_MULTI_WRITER;
	if (!strcmp(m, "ReadWriteOncePod"))
		return snmw ? CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_SINGLE_WRITER
			    : CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER;
	return snmw ? CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_MULTI_WRITER
		    : CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER;
}
