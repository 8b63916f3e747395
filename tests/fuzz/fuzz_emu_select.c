/* libFuzzer: kube-emulator's label and field selectors and name checks (src/emulator/emu_select.c). */
#include "fuzz_common.h"
#include "emulator/emu_select.h"

#include <jansson.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = fuzz_cstr(data, size), err[256];
	static json_t *obj;
	if (!obj)
		obj = json_pack("{s:{s:s,s:{s:s,s:s}},s:{s:s},s:{s:b}}", "metadata", "name", "n1",
				"labels", "app", "web", "zone", "z1", "spec", "nodeName", "node-1",
				"status", "attached", 1);
	struct emu_selector *sel = NULL;
	if (emu_label_selector_parse(s, &sel, err, sizeof(err)) == 0) {
		emu_selector_match_labels(sel, json_object_get(json_object_get(obj, "metadata"), "labels"));
		emu_selector_free(sel);
	}
	sel = NULL;
	if (emu_field_selector_parse(s, &sel, err, sizeof(err)) == 0) {
		for (size_t i = 0; i < emu_selector_len(sel); i++)
			emu_selector_key(sel, i);
		emu_selector_match_fields(sel, obj);
		emu_selector_free(sel);
	}
	emu_name_is_dns1123_subdomain(s, err, sizeof(err));
	emu_name_is_dns1123_label(s, err, sizeof(err));
	free(s);
	return 0;
}
