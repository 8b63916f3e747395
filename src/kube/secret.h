/*
 * kube secret: the one reader of a Secret's data for every component that hands secrets to a
 * CSI driver: the sidecars' controller calls (csi-provisioner, csi-attacher, csi-resizer,
 * csi-snapshotter) and kcsi-node's NodeStageVolume and NodePublishVolume.
 *
 * What it accepts. kube_secret_read() GETs the Secret and decodes every entry of `data` as the
 * Go client does when it decodes the object, then uses the decoded bytes as upstream does
 * (`string(value)`):
 *   - standard base64 with padding; "\r" and "\n" are skipped, anything else refuses the whole
 *     Secret with Go's words, "data key \"k\": illegal base64 data at input byte N" (upstream's
 *     Get fails the same way, before any value is used);
 *   - a decoded value that is not UTF-8 is refused ("data key \"k\": value is not valid UTF-8
 *     ..."): a CSI secret is a protobuf string, which upstream's gRPC marshal refuses at the call;
 *   - a decoded value holding a NUL byte is refused: kcsi passes CSI strings as C strings and
 *     would cut it short, where upstream would send it whole;
 *   - `data` absent or null is an empty Secret; a `data` that is not an object, or a value that is
 *     not a string, is refused as the Go client refuses it. `stringData` is write-only on an API
 *     server and is not read.
 * The error text (err) names the key, never a value; callers put it in their upstream component's
 * own words for a Secret it could not get ("error getting secret %s in namespace %s: %s", ...).
 *
 * Who frees, and the wiping. The caller owns *out once kube_secret_read() or kube_secret_decode()
 * returned 0, and releases it with kube_secret_free(), which overwrites every key and value with
 * explicit_bzero() before freeing (on failure there is nothing to free). On the way the reader
 * wipes the copies it held: the HTTP answer's JSON text (read into one buffer sized up front, so
 * no smaller copy is left behind by a realloc as long as the answer fits 64 KiB) and the base64
 * strings of the decoded JSON tree. Not wiped, and why: the HTTP client's socket and TLS buffers
 * (GnuTLS's and the kernel's, out of reach), an answer over 64 KiB's earlier buffer copies (the
 * strbuf grew by realloc), and what the caller does next (a CSI request arena: csi_arena_wipe();
 * the packed request: csi/call.c wipes it; nghttp2's frame buffers are nghttp2's).
 *
 * Thread-safe: no shared state but the test hook below.
 */
#ifndef KCSI_KUBE_SECRET_H
#define KCSI_KUBE_SECRET_H

#include <stddef.h>

#include <jansson.h>

#include "kube/client.h"

struct kube_secret_entry {
	const char *key;
	const char *value; /* NUL-terminated, len bytes, no NUL inside, valid UTF-8 */
	size_t len;
};

/* A Secret's data, decoded. entries[0..n) point into mem, one block of memlen bytes. */
struct kube_secret {
	struct kube_secret_entry *entries;
	size_t n;
	char *mem;
	size_t memlen;
};

/* GETs Secret ns/name and decodes its data into *out: 0, or -1 with err (nothing to free). */
int kube_secret_read(struct kube_client *kc, const char *ns, const char *name,
		     struct kube_secret *out, char *err, size_t errlen);
/* The decoding alone, of a Secret object already read: 0, or -1 with err. */
int kube_secret_decode(const json_t *secret, struct kube_secret *out, char *err, size_t errlen);
/* Wipes (explicit_bzero) and frees what *s holds, and zeroes *s. NULL and a zeroed s are no-ops. */
void kube_secret_free(struct kube_secret *s);

/*
 * Strict standard base64 as Go's encoding/base64 StdEncoding decodes: the decoded bytes in a
 * malloc'd buffer (NUL-terminated, *outlen bytes before it), or NULL with *bad the offset Go's
 * CorruptInputError reports. The caller wipes and frees the buffer.
 */
char *kube_base64_decode_strict(const char *in, size_t inlen, size_t *outlen, size_t *bad);

/* For tests: called by kube_secret_free() with each block it is about to free, after the wipe. */
extern void (*kube_secret_free_hook)(const void *block, size_t len);

#endif
