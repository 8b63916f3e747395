/*
 * libFuzzer: label and field selectors (src/kube/selector.c, the one grammar), each matched the
 * way both of its users do (a record's label pairs in kube, stored JSON in kube-emulator's
 * emu_select.c), and the name rules (src/kube/names.c) on the same input.
 */
#include "fuzz_common.h"
#include "emulator/emu_select.h"
#include "kube/names.h"
#include "kube/objects.h"
#include "kube/selector.h"

#include <jansson.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct kube_kv labels[] = { { "app", "web" }, { "topology.x/zone", "z1" },
						 { "tier", "" } };
	static json_t *obj;
	char *s = fuzz_cstr(data, size), err[256];
	if (!obj)
		obj = json_pack("{s:{s:s,s:{s:s,s:s}},s:{s:s},s:{s:b}}", "metadata", "name", "n1",
				"labels", "app", "web", "zone", "z1", "spec", "nodeName", "node-1",
				"status", "attached", 1);
	struct kube_selector *sel = kube_selector_parse(s, err, sizeof(err));
	if (sel) {
		kube_selector_matches(sel, labels, 3);
		emu_selector_match_labels(sel, json_object_get(json_object_get(obj, "metadata"),
							       "labels"));
		kube_selector_empty(sel);
		kube_selector_free(sel);
	}
	sel = kube_field_selector_parse(s, err, sizeof(err));
	if (sel) {
		for (size_t i = 0; i < kube_selector_len(sel); i++)
			kube_selector_key(sel, i);
		emu_selector_match_fields(sel, obj);
		kube_selector_free(sel);
	}
	kube_name_is_dns1123_subdomain(s, err, sizeof(err));
	kube_name_is_dns1123_label(s, err, sizeof(err));
	kube_name_is_qualified(s, strlen(s));
	free(s);
	return 0;
}
