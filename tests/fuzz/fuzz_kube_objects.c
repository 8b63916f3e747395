/* libFuzzer: every kind's record decoder (src/kube/objects.c) on any JSON document parsed by kube/jv (the informer's path), then the
 * record's accessors, which read what the decoder promised to fill. */
#include "fuzz_common.h"
#include "kube/objects.h"

static const struct kube_kind *const kinds[] = {
	&KUBE_KIND_VOLUMEATTACHMENT, &KUBE_KIND_PERSISTENTVOLUME, &KUBE_KIND_CSINODE_T,
	&KUBE_KIND_NODE_T, &KUBE_KIND_PERSISTENTVOLUMECLAIM, &KUBE_KIND_STORAGECLASS,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct jv_doc doc;
	char perr[160];
	const jv_t *j = jv_parse(&doc, (const char *)data, size, perr, sizeof(perr));
	if (!j)
		return 0;
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		char err[128], buf[512];
		struct kube_obj *o = kinds[k]->decode(j, err, sizeof(err));
		if (!o)
			continue;
		kube_obj_key(o, buf, sizeof(buf));
		kube_obj_uid(o, buf, sizeof(buf));
		kube_obj_has_finalizer(o, "x");
		const struct kube_csinode *cn = kube_csinode_of(o);
		for (size_t i = 0; cn && i < cn->ndrivers; i++)
			if (!cn->drivers[i].name || !cn->drivers[i].node_id)
				abort(); /* objects.h promises both */
		kube_obj_unref(o);
	}
	return 0;
}
