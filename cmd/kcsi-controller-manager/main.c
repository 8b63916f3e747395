/* kcsi-controller-manager: flags -> config -> run. See src/controllers/cm.h. */
#include "base/flags.h"
#include "base/log.h"
#include "base/log_flags.h"
#include "controllers/cm.h"

int main(int argc, char **argv)
{
	struct flagset *fs = flags_new("kcsi-controller-manager", "kcsi-controller-manager [flags]");
	struct cm_config cfg;

	cm_register_flags(fs, &cfg);
	log_parse_command_line(fs, argc, argv);
	int rc = cm_run(&cfg);
	flags_free(fs);
	return rc;
}
