/* snapshot-controller: flags -> config -> run. See src/snapshotctrl/snapshotctrl.h. */
#include "base/flags.h"
#include "base/log.h"
#include "base/log_flags.h"
#include "snapshotctrl/snapshotctrl.h"

int main(int argc, char **argv)
{
	struct flagset *fs = flags_new("snapshot-controller", "snapshot-controller [flags]");
	struct sctrl_config cfg;

	sctrl_register_flags(fs, &cfg);
	log_parse_command_line(fs, argc, argv);
	int rc = sctrl_run(&cfg);
	flags_free(fs);
	return rc;
}
