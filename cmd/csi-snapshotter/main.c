/* csi-snapshotter: flags -> config -> run. See src/snapshotter/snapshotter.h. */
#include "base/flags.h"
#include "base/log.h"
#include "base/log_flags.h"
#include "snapshotter/snapshotter.h"

int main(int argc, char **argv)
{
	struct flagset *fs = flags_new("csi-snapshotter", "csi-snapshotter [flags]");
	struct snapper_config cfg;

	snapper_register_flags(fs, &cfg);
	log_parse_command_line(fs, argc, argv);
	int rc = snapper_run(&cfg);
	flags_free(fs);
	return rc;
}
