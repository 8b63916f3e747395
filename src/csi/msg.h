/*
 * csi/msg: helpers around the generated CSI messages (csi.pb-c.h, protobuf-c).
 *
 * The generated structs are plain C: strings are char *, sub-messages are pointers, repeated
 * fields and maps are (n_x, x) pairs, and every map<string, string> is a repeated message whose
 * entries all share the layout of `struct csi_map_entry`. Building a message by hand means
 * allocating many small pieces; a `csi_arena` owns them all so one csi_arena_free() releases a
 * whole request or response that was built (not unpacked).
 *
 * Ownership rules used across src/csi:
 *   - messages built with csi_msg_new()/csi_map_add() belong to the arena they came from;
 *   - messages returned by a client call were unpacked by protobuf-c and are freed with
 *     csi_msg_free() (protobuf_c_message_free_unpacked);
 *   - a message may point at memory the caller owns (string literals, its own buffers) as long
 *     as that memory outlives the message's use; nothing here frees such pointers.
 *
 * Repeated fields and maps grow in amortised O(1) per element: csi_map_add() and
 * csi_repeated_add() give a field an arena array with spare room (doubling), and the arena
 * remembers each array it grew and how many elements the field had after its last append. An
 * append writes in place only into such an array whose recorded length equals the field's
 * count; any other array (NULL, the caller's own, one shared by two messages, one whose count
 * the caller changed) is copied into a new arena array first, so the caller's memory is never
 * written. Building a message with N entries costs O(N) time and arena bytes.
 *
 * JSON: csi_msg_to_json() renders any message as compact JSON with the proto field names
 * (the form upstream sidecars log), omitting unset fields, maps as objects, enums by name. With
 * CSI_JSON_STRIP_SECRETS every field the schema marks (csi_secret) = true is replaced by the
 * string "***stripped***"; the set of such fields is generated from proto/csi.proto at build
 * time, so new secret fields need no code change here.
 */
#ifndef KCSI_CSI_MSG_H
#define KCSI_CSI_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "csi.pb-c.h"

struct strbuf;

/* Every generated map<string,string> entry has exactly this layout. */
struct csi_map_entry {
	ProtobufCMessage base;
	char *key;
	char *value;
};

/* ---- arena ---- */
struct csi_arena;
struct csi_arena *csi_arena_new(void);
/* Frees every block allocated from the arena, then the arena. NULL is a no-op. */
void csi_arena_free(struct csi_arena *a);
/* Marks an arena that holds secrets: csi_arena_free() then overwrites every block with
 * explicit_bzero() before freeing it (the values, and the strings and messages around them). */
void csi_arena_wipe_on_free(struct csi_arena *a);
/* Zeroed memory owned by the arena; never NULL. */
void *csi_arena_alloc(struct csi_arena *a, size_t n);
/* Bytes the arena holds: its blocks with their headers plus its own bookkeeping. */
size_t csi_arena_bytes(const struct csi_arena *a);
char *csi_arena_strdup(struct csi_arena *a, const char *s);
char *csi_arena_printf(struct csi_arena *a, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* ---- building messages ---- */
/* A new message of type `desc`, initialised to defaults, owned by the arena. */
void *csi_msg_new(struct csi_arena *a, const ProtobufCMessageDescriptor *desc);
/*
 * Adds key=value to the map field named `field` (e.g. "secrets") of msg. The strings are copied
 * into the arena. Returns 0, or -1 when msg has no such map<string,string> field.
 * msg is one built by hand (csi_msg_new() or a generated __INIT), never one unpacked by
 * protobuf-c: its arrays belong to protobuf-c, and csi_msg_free() would free an arena pointer.
 */
int csi_map_add(struct csi_arena *a, ProtobufCMessage *msg, const char *field, const char *key,
		const char *value);
/* Value of key in a map field given as its (n, entries) pair, or NULL. */
const char *csi_map_get(size_t n, void *entries, const char *key);
/*
 * Appends one element to a repeated message or string field named `field` (the same rule on
 * msg as csi_map_add). Returns 0, or -1 when msg has no such field.
 */
int csi_repeated_add(struct csi_arena *a, ProtobufCMessage *msg, const char *field, void *elem);

/* Frees a message produced by protobuf-c unpacking (client responses). NULL is a no-op. */
void csi_msg_free(void *msg);

/* ---- JSON rendering ---- */
enum {
	CSI_JSON_STRIP_SECRETS = 1 << 0, /* replace csi_secret fields with "***stripped***" */
	CSI_JSON_PRETTY = 1 << 1,        /* indent two spaces per level, for people */
};
void csi_msg_to_json(const ProtobufCMessage *msg, int flags, struct strbuf *out);
/* True when field `f` of message type `desc` is marked (csi_secret) = true in the schema. */
bool csi_field_is_secret(const ProtobufCMessageDescriptor *desc, const ProtobufCFieldDescriptor *f);

/* ---- gRPC status codes ---- */
/* "OK", "CANCELLED", ..., "UNAUTHENTICATED"; "UNKNOWN_CODE" outside 0..16. */
const char *csi_code_name(int code);
/* Go's codes.Code String(): "OK", "Canceled", "DeadlineExceeded" (the metrics label form). */
const char *csi_code_go_name(int code);
/* Parses either form; returns the code or -1. */
int csi_code_parse(const char *name);

/* ---- schema lookup ---- */
/*
 * Finds a CSI method by its gRPC path ("/csi.v1.Controller/CreateVolume"). Returns the method
 * descriptor (input/output message descriptors inside) or NULL when the schema has no such method.
 */
const ProtobufCMethodDescriptor *csi_method_lookup(const char *path);
/*
 * All services of the schema, NULL-terminated: Identity, Controller, GroupController,
 * SnapshotMetadata, Node.
 */
extern const ProtobufCServiceDescriptor *const csi_services[];
/*
 * True for a method whose answer is a stream of response messages (the schema's
 * `returns (stream ...)`: GetMetadataAllocated and GetMetadataDelta), which protoc-c's
 * descriptors do not record.
 */
bool csi_method_server_streams(const ProtobufCMethodDescriptor *md);

/*
 * The CSI access mode of a Kubernetes one, by its API name ("ReadWriteOnce", "ReadOnlyMany",
 * "ReadWriteMany", "ReadWriteOncePod"), as csi-lib-utils' accessmodes.ToCSIAccessMode maps it for
 * the provisioner and the kubelet for a volume it stages. snmw: the driver announces
 * SINGLE_NODE_MULTI_WRITER, and then ReadWriteOnce is SINGLE_NODE_MULTI_WRITER and
 * ReadWriteOncePod SINGLE_NODE_SINGLE_WRITER; without it both are SINGLE_NODE_WRITER (and only
 * the scheduler keeps a second pod off a ReadWriteOncePod volume). NULL, an empty or an unknown
 * name is ReadWriteOnce, the kubelet's default for a PV without access modes. One function for
 * every component, so the rule cannot drift between them.
 */
Csi__V1__VolumeCapability__AccessMode__Mode csi_access_mode_of_k8s(const char *k8s_mode, bool snmw);

#endif
