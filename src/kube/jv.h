/*
 * kube/jv: read-only JSON documents for the decoding hot path (watch events, list pages).
 *
 One strict pass turns the text into an array of nodes that know their subtree size (so a
 * value is one pointer and walking an object needs no document), with strings unescaped into
 * one buffer. A jv_doc keeps its buffers between
 * parses: decoding a stream of events allocates nothing once the largest event has been seen.
 * Jansson built a tree of malloc'd nodes per event, and its parse with the frees after it was the
 * largest user-space cost of csi-attacher and csi-provisioner (docs/performance.md, round 3).
 *
 * What jansson accepts, jv accepts, with the same values (checked by fuzz_kube_jv against
 * jansson), except: duplicate keys keep every member (jv_get returns the last, as jansson's
 * object does).
 *
 * Values point into their document: valid until the next jv_parse() or jv_release() of it.
 */
#ifndef KCSI_KUBE_JV_H
#define KCSI_KUBE_JV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum jv_type { JV_NULL, JV_FALSE, JV_TRUE, JV_INT, JV_REAL, JV_STRING, JV_ARRAY, JV_OBJECT };

#define JV_KEY 1  /* a member's key; its value is the next node */
#define JV_LAST 2 /* the last element of its array, or (on the key) the last member */

typedef struct jv {
	uint8_t type;
	uint8_t flags;  /* JV_KEY, JV_LAST */
	uint32_t skip;  /* nodes in this value's subtree, itself included (an object's keys too) */
	uint32_t count; /* elements, members; a string's length */
	const char *s;  /* string value or member key, NUL-terminated */
	int64_t i;      /* JV_INT */
} jv_t;

struct jv_doc {
	jv_t *node;
	size_t nnode, node_cap;
	char *buf; /* the text, strings unescaped in place */
	size_t buf_cap;
};

#define JV_MAX_DEPTH 2048 /* as jansson's parser */

/* Parses text[0..len) (one JSON value, surrounding whitespace allowed). Returns the root, or
 * NULL with a reason in err. */
const jv_t *jv_parse(struct jv_doc *d, const char *text, size_t len, char *err, size_t errlen);
void jv_release(struct jv_doc *d);

/* NULL-safe accessors, as jansson's: a wrong type or a NULL value gives NULL, 0 or false. */
const jv_t *jv_get(const jv_t *obj, const char *key); /* the last member named key */
const char *jv_str(const jv_t *v);                    /* a string's value */
int64_t jv_int(const jv_t *v);
size_t jv_size(const jv_t *v); /* elements of an array, members of an object */
static inline bool jv_is_object(const jv_t *v) { return v && v->type == JV_OBJECT; }
static inline bool jv_is_array(const jv_t *v) { return v && v->type == JV_ARRAY; }
static inline bool jv_is_string(const jv_t *v) { return v && v->type == JV_STRING; }
static inline bool jv_is_true(const jv_t *v) { return v && v->type == JV_TRUE; }
static inline bool jv_is_boolean(const jv_t *v) { return v && (v->type == JV_TRUE || v->type == JV_FALSE); }
static inline bool jv_is_integer(const jv_t *v) { return v && v->type == JV_INT; }

/*
 * Iteration without the container: elements with jv_first()/jv_next(); members by their values
 * with jv_first_member()/jv_next_member(), the key of a value being jv_key(value). NULL at the
 * end, or for a value of another type.
 */
const jv_t *jv_first(const jv_t *arr);
const jv_t *jv_next(const jv_t *elem);
const jv_t *jv_first_member(const jv_t *obj);
const jv_t *jv_next_member(const jv_t *value);
static inline const char *jv_key(const jv_t *value) { return value[-1].s; }

#define jv_array_foreach(arr, idx, val) \
	for ((idx) = 0, (val) = jv_first(arr); (val); (idx)++, (val) = jv_next(val))
#define jv_object_foreach(obj, key, val)                                               \
	for ((val) = jv_first_member(obj); (val) && ((key) = jv_key(val), 1);          \
	     (val) = jv_next_member(val))

#endif
