/* csi-resizer: flags -> config -> run. See src/resizer/resizer.h. */
#include "base/flags.h"
#include "base/log.h"
#include "base/log_flags.h"
#include "resizer/resizer.h"

int main(int argc, char **argv)
{
	struct flagset *fs = flags_new("csi-resizer", "csi-resizer [flags]");
	struct rsz_config cfg;

	rsz_register_flags(fs, &cfg);
	log_parse_command_line(fs, argc, argv);
	rsz_config_resolve(&cfg, fs);
	int rc = rsz_run(&cfg);
	flags_free(fs);
	return rc;
}
