/* libFuzzer: kube-emulator's three patch types (src/emulator/emu_patch.c). The input is a
 * target document, a NUL byte, then a patch; the first byte picks merge, JSON or strategic. */
#include "fuzz_common.h"
#include "emulator/emu_patch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	int type = data[0] % 3;
	const char *p = (const char *)data + 1;
	size_t n = size - 1;
	const char *nul = memchr(p, '\0', n);
	if (!nul)
		return 0;
	json_t *target = json_loadb(p, (size_t)(nul - p), JSON_DECODE_ANY, NULL);
	json_t *patch = json_loadb(nul + 1, n - (size_t)(nul - p) - 1, JSON_DECODE_ANY, NULL);
	if (target && patch) {
		char err[512];
		int status = 0;
		json_t *out = type == 0 ? emu_merge_patch(target, patch)
			    : type == 1 ? emu_json_patch(target, patch, &status, err, sizeof(err))
					: emu_strategic_patch(target, patch, &status, err, sizeof(err));
		json_decref(out);
	}
	json_decref(target);
	json_decref(patch);
	return 0;
}
