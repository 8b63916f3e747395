/* libFuzzer: kubeconfig loading (src/kube/config.c) from a file holding the input. File-typed
 * fields name files that do not exist or that the harness made, never a device or a FIFO. */
#include "fuzz_common.h"
#include "kube/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char path[64];

static void remove_input(void)
{
	unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!path[0]) {
		snprintf(path, sizeof(path), "/tmp/kcsi-fuzz-kubeconfig-%d", (int)getpid());
		atexit(remove_input); /* libFuzzer ends with exit() after -max_total_time */
	}
	FILE *f = fopen(path, "w");
	if (!f)
		return 0;
	fwrite(data, 1, size, f);
	fclose(f);
	char err[1024];
	struct kube_config *c = kube_config_from_kubeconfig(path, err, sizeof(err));
	kube_config_free(c);
	return 0;
}
