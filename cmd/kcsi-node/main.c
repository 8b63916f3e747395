/* kcsi-node: flags -> config -> run. See src/node/node.h. */
#include "base/flags.h"
#include "base/log.h"
#include "node/node.h"

#include <stdio.h>

int main(int argc, char **argv)
{
	struct flagset *fs = flags_new("kcsi-node", "kcsi-node [flags]");
	struct nd_config cfg;
	char err[256];
	int rc, rest;

	nd_register_flags(fs, &cfg);
	log_register_flags(fs);
	flags_enable_version(fs, KCSI_VERSION);
	/* The kubelet's client defaults (KubeletConfiguration kubeAPIQPS 50, kubeAPIBurst 100
	 * since Kubernetes 1.27), not the sidecars' 5/10; --help shows these. */
	flags_set_default(fs, "kube-api-qps", "50");
	flags_set_default(fs, "kube-api-burst", "100");
	rest = flags_parse_or_exit(fs, argc, argv);
	for (int i = rest; i < argc; i++)
		KLOG_W("Ignoring unexpected argument \"%s\" (flags must come first)", argv[i]);
	if (log_apply_flags(err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		flags_free(fs);
		return 2;
	}
	rc = nd_run(&cfg);
	flags_free(fs);
	return rc;
}
