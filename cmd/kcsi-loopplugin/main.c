/*
 * kcsi-loopplugin: a CSI driver for local block volumes (image files on loop devices).
 * Flags -> config -> driver -> server; everything else lives in src/loopplugin.
 *
 * Shutdown: SIGTERM/SIGINT (blocked in every thread, taken here with sigwait) stop the server on a
 * thread of its own; calls in flight get STOP_GRACE_MS to finish. One that does not (an mkfs, a
 * snapshot copy) is left behind: the driver thaws any filesystem it froze and the process exits
 * 0 within a second, as after a kill -9 every call is safe to retry.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/flags.h"
#include "base/log.h"
#include "base/log_flags.h"
#include "base/version.h"
#include "base/xalloc.h"
#include "csi/server.h"
#include "loopplugin/driver.h"
#include "loopplugin/fleet.h"
#include "loopplugin/pool.h"

#define STOP_GRACE_MS 400
#define STOP_BUDGET_MS 600

struct stopper {
	struct csi_server *s;
	atomic_int done;
};

static void *stopper_main(void *arg)
{
	struct stopper *st = arg;
	csi_server_stop(st->s);
	atomic_store(&st->done, 1);
	return NULL;
}

/* Waits for a signal, then stops the server within STOP_BUDGET_MS or exits without it. */
static void serve_until_signal(struct csi_server *s, struct lp_driver *d, const sigset_t *set)
{
	int sig = 0;
	while (sigwait(set, &sig) != 0 || (sig != SIGTERM && sig != SIGINT))
		;
	KLOG_I("Received %s, stopping the CSI server", sig == SIGTERM ? "SIGTERM" : "SIGINT");
	struct stopper st = { .s = s };
	pthread_t th;
	if (pthread_create(&th, NULL, stopper_main, &st) == 0) {
		for (int i = 0; i < STOP_BUDGET_MS / 20 && !atomic_load(&st.done); i++) {
			struct timespec ts = { 0, 20 * 1000 * 1000 };
			nanosleep(&ts, NULL);
		}
		if (atomic_load(&st.done)) {
			pthread_join(th, NULL);
			return;
		}
	}
	lp_driver_thaw_all(d);
	KLOG_W("Calls still running after %d ms; exiting without them (a retry redoes or finds "
	       "their work)", STOP_BUDGET_MS);
	fflush(NULL);
	_exit(0);
}

int main(int argc, char **argv)
{
	struct lp_config cfg;
	const char *endpoint, *max_size;
	int threads, fleet_size;
	struct flag_map tags = { NULL, 0 };
	struct lp_tag *tagv = NULL;
	struct flagset *fs = flags_new("kcsi-loopplugin", "kcsi-loopplugin [flags]");
	flags_enable_version(fs, kcsi_version);
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
	flags_bool(fs, "detach-staged", &cfg.detach_staged, false,
		   "ControllerUnpublishVolume of a volume a node still has staged detaches it anyway, "
		   "as a SAN fences a host it can no longer reach (the attach/detach controller's "
		   "forced detach of a node that is gone); by default it is refused "
		   "(FAILED_PRECONDITION) until the node unstages it");
	flags_map(fs, "extra-volume-tags", &tags,
		  "Tags every volume CreateVolume makes carries, key=value pairs separated by "
		  "commas (at most 50; keys of 1-128 printable ASCII characters, values of at most "
		  "256 bytes): recorded in the volume's metadata and shown in its volume_context "
		  "as tag.loop.kcsi.io/<key>");
	flags_bool(fs, "get-snapshot-capability", &cfg.get_snapshot_cap, true,
		   "Announce GET_SNAPSHOT (alpha) in ControllerGetCapabilities; GetSnapshot is "
		   "served either way. On by default since csi-sanity v5.6.0 tests it; "
		   "--get-snapshot-capability=false hides it from COs that refuse alpha "
		   "capabilities they do not know");
	flags_int(fs, "threads", &threads, 8, "Concurrent CSI calls served");
	flags_int(fs, "fleet-size", &fleet_size, 0,
		  "Serve the node service of this many emulated nodes (kcsi up --nodes above 16): "
		  "node i has the ID <nodeid>-<i> and the socket --endpoint with {node} replaced by "
		  "that ID; needs --mode node. 0: one node");
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
		goto usage;
	}
	if (!*cfg.nodeid) {
		fprintf(stderr, "kcsi-loopplugin: --nodeid is required\n");
		goto usage;
	}
	if (!lp_id_valid(cfg.nodeid)) {
		fprintf(stderr, "kcsi-loopplugin: --nodeid=%s: use letters, digits, '-', '_', '.'\n",
			cfg.nodeid);
		goto usage;
	}
	if (lp_parse_size(max_size, &cfg.max_volume_size) || cfg.max_volume_size < 1048576) {
		fprintf(stderr, "kcsi-loopplugin: --max-volume-size=%s: expected a size of at "
				"least 1Mi, like 1Ti or 500Gi\n",
			max_size);
		goto usage;
	}
	if (cfg.attach_limit < 0 || cfg.attach_limit > lp_device_range_size()) {
		fprintf(stderr, "kcsi-loopplugin: --volume-attach-limit=%d: expected 0..%d\n",
			cfg.attach_limit, lp_device_range_size());
		goto usage;
	}
	if (strcmp(cfg.mode, "all") != 0 && strcmp(cfg.mode, "controller") != 0 &&
	    strcmp(cfg.mode, "node") != 0) {
		fprintf(stderr, "kcsi-loopplugin: --mode=%s: expected all, controller or node\n",
			cfg.mode);
		goto usage;
	}
	/* flag_kv's key/value are the same two strings as lp_tag's: borrowed, not copied */
	tagv = tags.len ? xcalloc(tags.len, sizeof(*tagv)) : NULL;
	for (size_t i = 0; i < tags.len; i++)
		tagv[i] = (struct lp_tag){ .key = tags.items[i].key, .value = tags.items[i].value };
	cfg.extra_tags = tagv;
	cfg.nextra_tags = tags.len;
	if (lp_tags_check(tagv, tags.len, err, sizeof(err))) {
		fprintf(stderr, "kcsi-loopplugin: --extra-volume-tags: %s\n", err);
		goto usage;
	}
	if (threads < 1)
		threads = 1;
	cfg.version = kcsi_version;

	/* blocked before any thread starts, so that every thread inherits the mask */
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);

	if (fleet_size) {
		int rc = lp_fleet_serve(&cfg, endpoint, fleet_size, &sigs);
		free(tagv);
		flags_free(fs);
		return rc;
	}
	struct lp_status st;
	struct lp_driver *d = lp_driver_new(&cfg, &st);
	if (!d) {
		fprintf(stderr, "kcsi-loopplugin: %s\n", st.msg);
		free(tagv);
		flags_free(fs);
		return 1;
	}
	struct csi_server_opts o = CSI_SERVER_OPTS_INIT;
	o.threads = threads;
	o.grace_ns = STOP_GRACE_MS * 1000000LL;
	struct csi_server *s = csi_server_new(&o);
	lp_driver_register(d, s);
	if (csi_server_start(s, endpoint, err, sizeof(err))) {
		fprintf(stderr, "kcsi-loopplugin: %s\n", err);
		csi_server_free(s);
		lp_driver_free(d);
		free(tagv);
		flags_free(fs);
		return 1;
	}
	KLOG_I("Serving CSI driver=%s version=%s mode=%s node=%s pool=%s endpoint=%s",
	       LOGQ(cfg.drivername), LOGQ(cfg.version), LOGQ(cfg.mode), LOGQ(cfg.nodeid),
	       LOGQ(cfg.pool_dir), LOGQ(endpoint));
	serve_until_signal(s, d, &sigs);
	csi_server_free(s);
	lp_driver_free(d);
	free(tagv);
	flags_free(fs);
	return 0;
usage: /* a bad flag value: said on stderr, exit 2 as upstream's flag package */
	free(tagv);
	flags_free(fs);
	return 2;
}
