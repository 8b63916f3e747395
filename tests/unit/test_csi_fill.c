/*
 * test_csi_fill: see test_csi_fill.h. Oneof members are grouped by their shared case offset;
 * the member chosen is seed modulo the group size. Recursion stops at depth 6 (CSI has no
 * recursive messages, the bound is only a guard).
 */
#include "test_csi_fill.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fill_scalar(struct csi_arena *a, const ProtobufCFieldDescriptor *f, void *p,
			unsigned seed, unsigned idx, int depth)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32:
		*(int32_t *)p = (int32_t)(f->id * 10 + seed + idx + 1);
		break;
	case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64:
		*(int64_t *)p = (int64_t)(f->id * 1000000007LL + seed + idx + 1);
		break;
	case PROTOBUF_C_TYPE_FLOAT:
		*(float *)p = 1.5f + (float)seed;
		break;
	case PROTOBUF_C_TYPE_DOUBLE:
		*(double *)p = 2.5 + seed;
		break;
	case PROTOBUF_C_TYPE_BOOL:
		*(protobuf_c_boolean *)p = 1;
		break;
	case PROTOBUF_C_TYPE_ENUM: {
		const ProtobufCEnumDescriptor *e = f->descriptor;
		*(int *)p = e->values[(seed + idx) % (e->n_values - 1) + 1].value;
		break;
	}
	case PROTOBUF_C_TYPE_STRING:
		*(char **)p = csi_arena_printf(a, "%s-%u-%u", f->name, seed, idx);
		break;
	case PROTOBUF_C_TYPE_BYTES: {
		ProtobufCBinaryData *b = p;
		b->data = (uint8_t *)csi_arena_printf(a, "b%u", seed);
		b->len = strlen((char *)b->data);
		break;
	}
	case PROTOBUF_C_TYPE_MESSAGE: {
		ProtobufCMessage *sub = csi_msg_new(a, f->descriptor);
		csi_test_fill(a, sub, seed + idx, depth + 1);
		*(ProtobufCMessage **)p = sub;
		break;
	}
	}
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

void csi_test_fill(struct csi_arena *a, ProtobufCMessage *m, unsigned seed, int depth)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;
	char *base = (char *)m;
	if (depth > 6)
		return;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		void *p = base + f->offset;
		if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
			unsigned members = 0, pos = 0;
			for (unsigned j = 0; j < d->n_fields; j++) {
				if ((d->fields[j].flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
				    d->fields[j].quantifier_offset == f->quantifier_offset) {
					if (j == i)
						pos = members;
					members++;
				}
			}
			if (pos != seed % members)
				continue;
			*(uint32_t *)(base + f->quantifier_offset) = f->id;
			fill_scalar(a, f, p, seed, 0, depth);
		} else if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = 2, sz = elem_size(f);
			char *arr = csi_arena_alloc(a, n * sz);
			for (size_t j = 0; j < n; j++)
				fill_scalar(a, f, arr + j * sz, seed, (unsigned)j, depth);
			*(size_t *)(base + f->quantifier_offset) = n;
			*(void **)p = arr;
		} else {
			fill_scalar(a, f, p, seed, 0, depth);
		}
	}
}

uint8_t *csi_test_pack(const ProtobufCMessage *m, size_t *len)
{
	*len = protobuf_c_message_get_packed_size(m);
	uint8_t *buf = malloc(*len ? *len : 1);
	protobuf_c_message_pack(m, buf);
	return buf;
}
