/* csi-attacher: flags -> config -> run. See src/attacher/attacher.h. */
#include "base/flags.h"
#include "base/log.h"
#include "base/log_flags.h"
#include "attacher/attacher.h"

int main(int argc, char **argv)
{
	struct flagset *fs = flags_new("csi-attacher", "csi-attacher [flags]");
	struct att_config cfg;

	att_register_flags(fs, &cfg);
	log_parse_command_line(fs, argc, argv);
	int rc = att_run(&cfg);
	flags_free(fs);
	return rc;
}
