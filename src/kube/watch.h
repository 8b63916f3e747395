/*
 * kube watch: decoding the event stream of a watch request.
 *
 * The API server answers a watch with a chunked response of JSON events, one per line:
 *   {"type":"ADDED","object":{...}}
 * Chunk boundaries fall anywhere, so the decoder buffers a partial line until its newline. The
 * buffer is bounded: a line longer than max_event bytes (default 16 MiB) is an error returned to
 * the caller, never an unbounded allocation.
 *
 * The decoder owns its buffers; kube_watch_decoder_release() frees them. The object passed to
 * the callback lives in the decoder's document until the callback returns.
 */
#ifndef KCSI_KUBE_WATCH_H
#define KCSI_KUBE_WATCH_H

#include <stddef.h>

#include "base/strbuf.h"
#include "kube/jv.h"

#define KUBE_WATCH_MAX_EVENT (16u << 20)

enum kube_watch_type { KUBE_WATCH_ADDED, KUBE_WATCH_MODIFIED, KUBE_WATCH_DELETED,
		       KUBE_WATCH_BOOKMARK, KUBE_WATCH_ERROR };

/* Returns 0 to continue, non-zero to stop decoding (kube_watch_feed then returns that value). */
typedef int (*kube_watch_event_fn)(enum kube_watch_type type, const jv_t *object, void *ud);

struct kube_watch_decoder {
	struct strbuf line;
	struct jv_doc doc;
	size_t max_event;
	char err[256]; /* why the last feed failed */
};

void kube_watch_decoder_init(struct kube_watch_decoder *d, size_t max_event);
void kube_watch_decoder_release(struct kube_watch_decoder *d);
/*
 * Feeds bytes. Returns 0 when all complete events were delivered, -1 on an oversize or malformed
 * event (reason in d->err), or the callback's non-zero return value.
 */
int kube_watch_feed(struct kube_watch_decoder *d, const char *data, size_t len,
		    kube_watch_event_fn fn, void *ud);

#endif
