/* libFuzzer: Kubernetes quantities (src/kube/quantity.c): parse, format, parse again. */
#include "fuzz_common.h"
#include "kube/quantity.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = fuzz_cstr(data, size), err[256], buf[64];
	int64_t v, w;
	if (kube_quantity_parse(s, &v, err, sizeof(err)) == 0) {
		for (int bin = 0; bin < 2; bin++) {
			kube_quantity_format(v, bin, buf, sizeof(buf));
			if (kube_quantity_parse(buf, &w, err, sizeof(err)) != 0 || w != v)
				abort(); /* a formatted quantity must parse back to the same bytes */
		}
	}
	free(s);
	return 0;
}
