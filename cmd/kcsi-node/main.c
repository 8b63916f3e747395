/* kcsi-node: flags -> config -> run. See src/node/node.h. */
#include "base/flags.h"
#include "base/log.h"
#include "base/log_flags.h"
#include "node/fleet.h"
#include "node/node.h"

int main(int argc, char **argv)
{
	struct flagset *fs = flags_new("kcsi-node", "kcsi-node [flags]");
	struct nd_config cfg;
	int fleet_size;

	nd_register_flags(fs, &cfg);
	nd_fleet_register_flags(fs, &fleet_size);
	/* The kubelet's client defaults (KubeletConfiguration kubeAPIQPS 50, kubeAPIBurst 100
	 * since Kubernetes 1.27), not the sidecars' 5/10; --help shows these. */
	flags_set_default(fs, "kube-api-qps", "50");
	flags_set_default(fs, "kube-api-burst", "100");
	log_parse_command_line(fs, argc, argv);
	int rc = fleet_size ? nd_fleet_run(&cfg, fleet_size) : nd_run(&cfg);
	flags_free(fs);
	return rc;
}
