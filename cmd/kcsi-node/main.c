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
	rest = flags_parse_or_exit(fs, argc, argv);
	/* The kubelet's client defaults (50 qps, burst 100), not the sidecars' 5/10. */
	if (!flags_is_set(fs, "kube-api-qps"))
		cfg.kube.qps = 50;
	if (!flags_is_set(fs, "kube-api-burst"))
		cfg.kube.burst = 100;
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
