/* libFuzzer: the watch-stream decoder (src/kube/watch.c) fed the input in chunks whose sizes
 * come from the first byte, with every event's object decoded as every kind. */
#include "fuzz_common.h"
#include "kube/objects.h"
#include "kube/watch.h"

static int on_event(enum kube_watch_type type, const jv_t *object, void *ud)
{
	(void)type;
	(void)ud;
	char err[128];
	struct kube_obj *o = KUBE_KIND_VOLUMEATTACHMENT.decode(object, err, sizeof(err));
	kube_obj_unref(o);
	o = KUBE_KIND_CSINODE_T.decode(object, err, sizeof(err));
	kube_obj_unref(o);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t chunk = (size_t)data[0] % 64 + 1;
	struct kube_watch_decoder d;
	kube_watch_decoder_init(&d, 4096);
	for (size_t off = 1; off < size; off += chunk) {
		size_t n = size - off < chunk ? size - off : chunk;
		if (kube_watch_feed(&d, (const char *)data + off, n, on_event, NULL) != 0)
			break;
	}
	kube_watch_decoder_release(&d);
	return 0;
}
