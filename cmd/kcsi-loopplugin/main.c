/*
 * kcsi-loopplugin: a CSI driver for local block volumes (image files on loop devices).
 * Flags -> config -> driver -> server; everything else lives in src/loopplugin.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/flags.h"
#include "base/log.h"
#include "csi/server.h"
#include "loopplugin/driver.h"
#include "loopplugin/pool.h"

int main(int argc, char **argv)
{
	struct lp_config cfg;
	const char *endpoint, *max_size;
	int threads;
	struct flagset *fs = flags_new("kcsi-loopplugin", "kcsi-loopplugin [flags]");
	flags_enable_version(fs, KCSI_VERSION);
	flags_string(fs, "endpoint", &endpoint, "unix:///csi/csi.sock",
		     "CSI endpoint to serve (unix:///path)");
	flags_string(fs, "nodeid", &cfg.nodeid, "", "This node's ID (required)");
	flags_string(fs, "drivername", &cfg.drivername, "loop.kcsi.io", "CSI driver name");
	flags_string(fs, "mode", &cfg.mode, "all",
		     "Services to run: all, controller (no loop devices or mounts) or node "
		     "(creates and deletes nothing)");
	flags_string(fs, "pool-dir", &cfg.pool_dir, "/var/lib/kcsi-loop",
		     "Folder holding volume images and metadata; may be shared between nodes");
	flags_string(fs, "zone", &cfg.zone, "local",
		     "Value of the topology.loop.kcsi.io/zone topology key");
	flags_int(fs, "volume-attach-limit", &cfg.attach_limit, 0,
		  "Most volumes published to one node; 0 means the device-name range (650)");
	flags_string(fs, "max-volume-size", &max_size, "1Ti",
		     "Largest volume CreateVolume and ControllerExpandVolume accept");
	flags_string(fs, "default-fstype", &cfg.default_fstype, "ext4",
		     "Filesystem for mount volumes that name none (ext4 or xfs)");
	flags_int(fs, "threads", &threads, 8, "Concurrent CSI calls served");
	log_register_flags(fs);
	int rest = flags_parse_or_exit(fs, argc, argv);
	char err[512];
	/* The seed driver's form, `kcsi-loopplugin controller [flags]`: the mode as the first
	 * positional argument, flags after it. Honoured; anything else positional is refused. */
	if (rest < argc && (!strcmp(argv[rest], "all") || !strcmp(argv[rest], "controller") ||
			    !strcmp(argv[rest], "node"))) {
		const char *pos = argv[rest];
		if (flags_is_set(fs, "mode") && strcmp(cfg.mode, pos) != 0) {
			fprintf(stderr, "kcsi-loopplugin: mode %s given twice: --mode=%s and the "
					"argument %s\n", pos, cfg.mode, pos);
			flags_free(fs);
			return 2;
		}
		rest += flags_parse_or_exit(fs, argc - rest, argv + rest);
		if (flags_is_set(fs, "mode") && strcmp(cfg.mode, pos) != 0) {
			fprintf(stderr, "kcsi-loopplugin: the argument %s conflicts with --mode=%s\n",
				pos, cfg.mode);
			flags_free(fs);
			return 2;
		}
		cfg.mode = pos;
	}
	if (rest < argc) {
		fprintf(stderr, "kcsi-loopplugin: unexpected argument %s (the mode is --mode=all, "
				"controller or node, or the first argument)\n", argv[rest]);
		flags_free(fs);
		return 2;
	}
	if (log_apply_flags(err, sizeof(err))) {
		fprintf(stderr, "kcsi-loopplugin: %s\n", err);
		return 2;
	}
	if (!*cfg.nodeid) {
		fprintf(stderr, "kcsi-loopplugin: --nodeid is required\n");
		return 2;
	}
	if (!lp_id_valid(cfg.nodeid)) {
		fprintf(stderr, "kcsi-loopplugin: --nodeid=%s: use letters, digits, '-', '_', '.'\n",
			cfg.nodeid);
		return 2;
	}
	if (lp_parse_size(max_size, &cfg.max_volume_size) || cfg.max_volume_size < 1048576) {
		fprintf(stderr, "kcsi-loopplugin: --max-volume-size=%s: expected a size of at "
				"least 1Mi, like 1Ti or 500Gi\n",
			max_size);
		return 2;
	}
	if (cfg.attach_limit < 0 || cfg.attach_limit > lp_device_range_size()) {
		fprintf(stderr, "kcsi-loopplugin: --volume-attach-limit=%d: expected 0..%d\n",
			cfg.attach_limit, lp_device_range_size());
		return 2;
	}
	if (strcmp(cfg.mode, "all") != 0 && strcmp(cfg.mode, "controller") != 0 &&
	    strcmp(cfg.mode, "node") != 0) {
		fprintf(stderr, "kcsi-loopplugin: --mode=%s: expected all, controller or node\n",
			cfg.mode);
		return 2;
	}
	if (threads < 1)
		threads = 1;
	cfg.version = KCSI_VERSION;

	struct lp_status st;
	struct lp_driver *d = lp_driver_new(&cfg, &st);
	if (!d) {
		fprintf(stderr, "kcsi-loopplugin: %s\n", st.msg);
		flags_free(fs);
		return 1;
	}
	struct csi_server_opts o = CSI_SERVER_OPTS_INIT;
	o.threads = threads;
	struct csi_server *s = csi_server_new(&o);
	lp_driver_register(d, s);
	if (csi_server_start(s, endpoint, err, sizeof(err))) {
		fprintf(stderr, "kcsi-loopplugin: %s\n", err);
		csi_server_free(s);
		lp_driver_free(d);
		flags_free(fs);
		return 1;
	}
	KLOG_I("Serving CSI driver=%s version=%s mode=%s node=%s pool=%s endpoint=%s",
	       LOGQ(cfg.drivername), LOGQ(cfg.version), LOGQ(cfg.mode), LOGQ(cfg.nodeid),
	       LOGQ(cfg.pool_dir), LOGQ(endpoint));
	csi_server_run(s);
	csi_server_free(s);
	lp_driver_free(d);
	flags_free(fs);
	return 0;
}
