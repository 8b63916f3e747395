/* csi-provisioner: flags -> config -> run. See src/provisioner/provisioner.h. */
#include "base/flags.h"
#include "base/log.h"
#include "base/log_flags.h"
#include "provisioner/provisioner.h"

int main(int argc, char **argv)
{
	struct flagset *fs = flags_new("csi-provisioner", "csi-provisioner [flags]");
	struct prov_config cfg;

	prov_register_flags(fs, &cfg);
	log_parse_command_line(fs, argc, argv);
	int rc = prov_run(&cfg);
	flags_free(fs);
	return rc;
}
