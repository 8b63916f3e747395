/* libFuzzer: label selectors (src/kube/selector.c) parsed and matched against a fixed label set. */
#include "fuzz_common.h"
#include "kube/objects.h"
#include "kube/selector.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct kube_kv labels[] = { { "app", "web" }, { "topology.x/zone", "z1" },
						 { "tier", "" } };
	char *s = fuzz_cstr(data, size), err[256];
	struct kube_selector *sel = kube_selector_parse(s, err, sizeof(err));
	if (sel) {
		kube_selector_matches(sel, labels, 3);
		kube_selector_empty(sel);
		kube_selector_free(sel);
	}
	free(s);
	return 0;
}
