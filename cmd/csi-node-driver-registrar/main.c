/* csi-node-driver-registrar: flags -> config -> run. See src/registrar/registrar.h. */
#include "base/flags.h"
#include "base/log.h"
#include "base/log_flags.h"
#include "registrar/fleet.h"
#include "registrar/registrar.h"

int main(int argc, char **argv)
{
	struct flagset *fs = flags_new("csi-node-driver-registrar", "csi-node-driver-registrar [flags]");
	struct reg_config cfg;
	int fleet_size;
	const char *fleet_prefix;

	reg_register_flags(fs, &cfg);
	reg_fleet_register_flags(fs, &fleet_size, &fleet_prefix);
	log_parse_command_line(fs, argc, argv);
	int rc = fleet_size ? reg_fleet_run(&cfg, fleet_size, fleet_prefix) : reg_run(&cfg);
	flags_free(fs);
	return rc;
}
