/* csi-provisioner: flags -> config -> run. See src/provisioner/provisioner.h. */
#include "base/flags.h"
#include "base/log.h"
#include "provisioner/provisioner.h"

#include <stdio.h>

int main(int argc, char **argv)
{
	struct flagset *fs = flags_new("csi-provisioner", "csi-provisioner [flags]");
	struct prov_config cfg;
	char err[256];
	int rc, rest;

	prov_register_flags(fs, &cfg);
	log_register_flags(fs);
	flags_enable_version(fs, KCSI_VERSION);
	rest = flags_parse_or_exit(fs, argc, argv);
	for (int i = rest; i < argc; i++)
		KLOG_W("Ignoring unexpected argument \"%s\" (flags must come first)", argv[i]);
	if (log_apply_flags(err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		flags_free(fs);
		return 2;
	}
	rc = prov_run(&cfg);
	flags_free(fs);
	return rc;
}
