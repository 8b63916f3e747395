/* livenessprobe: flags -> config -> run. See src/livenessprobe/livenessprobe.h. */
#include "base/flags.h"
#include "base/log.h"
#include "base/log_flags.h"
#include "livenessprobe/livenessprobe.h"

int main(int argc, char **argv)
{
	struct flagset *fs = flags_new("livenessprobe", "livenessprobe [flags]");
	struct lvp_config cfg;

	lvp_register_flags(fs, &cfg);
	log_parse_command_line(fs, argc, argv);
	int rc = lvp_run(&cfg);
	flags_free(fs);
	return rc;
}
