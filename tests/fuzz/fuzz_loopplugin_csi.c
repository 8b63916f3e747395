/*
 * libFuzzer: kcsi-loopplugin's CSI request handling from request bytes to response
 * (src/loopplugin/driver.c behind src/csi/server.c's decode/dispatch/encode, through
 * csi_server_call(): everything a gRPC call runs but the transport).
 *
 * Input: up to MAX_CALLS records, each a method selector byte (modulo the methods below), a
 * 16-bit little-endian length and that many bytes of protobuf request (the last record takes
 * what is left). The calls run in order against state reset before every input, so an input can
 * create, snapshot, publish, list and delete, and replaying it gives the same answers.
 *
 * Which handlers run, and why none touches the system (the fuzzer runs as root):
 *   - Identity, every Controller and every GroupController method run on a controller-mode
 *     driver (no loop device, mount or freeze in that mode) whose pool lives in a private
 *     temporary folder; volumes are at most 16 MiB (--max-volume-size), so a thick volume or a
 *     snapshot copy stays small.
 *     The pool records node "node-1", so ControllerPublishVolume can succeed.
 *   - Every Node method runs on a node-mode driver over a second, separate pool in which no
 *     volume ever exists: each Node call ends in its request checks (INVALID_ARGUMENT,
 *     ALREADY_EXISTS...) or at the volume lookup (NOT_FOUND) before any losetup, mkfs, mount or
 *     unlink; paths from the input are only resolved (realpath, lstat, statvfs), never changed.
 * Both pools are emptied and the drivers made anew before each input. Files: one folder,
 * /dev/shm/kcsi-fuzz-lp-<pid> (tmpfs: the pool's fsyncs cost nothing; /tmp when there is no
 * /dev/shm), removed at exit; its size is bounded by MAX_CALLS volumes of 16 MiB.
 *
 * Checked besides the sanitizers: every status is a gRPC code, and every OK response decodes
 * as the method's response type. FUZZ_VERBOSE=1 prints each call and its status (replays).
 */
#include <assert.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "csi/server.h"
#include "fuzz_common.h"
#include "loopplugin/driver.h"
#include "loopplugin/pool.h"

#define MAX_CALLS 8
#define NODE "node-1"

static const struct method {
	const char *path;
	bool node; /* served by the node-mode driver */
} methods[] = {
	{ "/csi.v1.Identity/GetPluginInfo", false },
	{ "/csi.v1.Identity/GetPluginCapabilities", false },
	{ "/csi.v1.Identity/Probe", false },
	{ "/csi.v1.Controller/CreateVolume", false },
	{ "/csi.v1.Controller/DeleteVolume", false },
	{ "/csi.v1.Controller/ControllerPublishVolume", false },
	{ "/csi.v1.Controller/ControllerUnpublishVolume", false },
	{ "/csi.v1.Controller/ValidateVolumeCapabilities", false },
	{ "/csi.v1.Controller/ListVolumes", false },
	{ "/csi.v1.Controller/GetCapacity", false },
	{ "/csi.v1.Controller/ControllerGetCapabilities", false },
	{ "/csi.v1.Controller/ControllerGetVolume", false },
	{ "/csi.v1.Controller/ControllerExpandVolume", false },
	{ "/csi.v1.Controller/CreateSnapshot", false },
	{ "/csi.v1.Controller/DeleteSnapshot", false },
	{ "/csi.v1.Controller/ListSnapshots", false },
	{ "/csi.v1.Node/NodeStageVolume", true },
	{ "/csi.v1.Node/NodeUnstageVolume", true },
	{ "/csi.v1.Node/NodePublishVolume", true },
	{ "/csi.v1.Node/NodeUnpublishVolume", true },
	{ "/csi.v1.Node/NodeGetVolumeStats", true },
	{ "/csi.v1.Node/NodeExpandVolume", true },
	{ "/csi.v1.Node/NodeGetInfo", true },
	{ "/csi.v1.Node/NodeGetCapabilities", true },
	/* appended, so that the selector bytes of older inputs keep their meaning */
	{ "/csi.v1.Controller/ControllerModifyVolume", false },
	{ "/csi.v1.GroupController/GroupControllerGetCapabilities", false },
	{ "/csi.v1.GroupController/CreateVolumeGroupSnapshot", false },
	{ "/csi.v1.GroupController/DeleteVolumeGroupSnapshot", false },
	{ "/csi.v1.GroupController/GetVolumeGroupSnapshot", false },
	{ "/csi.v1.Controller/ControllerGetVolumeHealth", false },
	{ "/csi.v1.Controller/ControllerListVolumeHealth", false },
	{ "/csi.v1.Node/NodeGetVolumeHealth", true },
	{ "/csi.v1.Node/NodeGetStorageHealth", true },
};
#define N_METHODS (sizeof(methods) / sizeof(methods[0]))

static char dir[128], cpool[160], npool[160];
static struct lp_driver *cdrv, *ndrv;
static struct csi_server *csrv, *nsrv;
static bool verbose; /* FUZZ_VERBOSE=1: each call and its answer on stderr, for replays */

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static void rm_tree(const char *path)
{
	nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void cleanup(void)
{
	lp_driver_free(cdrv);
	lp_driver_free(ndrv);
	rm_tree(dir);
}

static struct lp_driver *driver(const char *mode, const char *pool)
{
	struct lp_config cfg = {
		.drivername = "loop.kcsi.io", .version = "fuzz", .nodeid = NODE, .mode = mode,
		.pool_dir = pool, .zone = "local", .attach_limit = 3,
		.max_volume_size = 16 * 1024 * 1024, .default_fstype = "ext4",
	};
	struct lp_status st;
	struct lp_driver *d = lp_driver_new(&cfg, &st);
	if (!d) {
		fprintf(stderr, "fuzz_loopplugin_csi: %s driver: %s\n", mode, st.msg);
		abort();
	}
	return d;
}

/* Empty pools, fresh drivers, node-1 known to the controller's pool. */
static void reset(void)
{
	lp_driver_free(cdrv);
	lp_driver_free(ndrv);
	rm_tree(cpool);
	rm_tree(npool);
	struct lp_status st;
	struct lp_pool *p = lp_pool_open(cpool, &st);
	if (!p || lp_pool_node_register(p, NODE, "local", &st)) {
		fprintf(stderr, "fuzz_loopplugin_csi: pool %s: %s\n", cpool, st.msg);
		abort();
	}
	lp_pool_free(p);
	cdrv = driver("controller", cpool);
	ndrv = driver("node", npool);
	lp_driver_register(cdrv, csrv);
	lp_driver_register(ndrv, nsrv);
}

static void init(void)
{
	log_set_output_fd(open("/dev/null", O_WRONLY | O_CLOEXEC));
	const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	snprintf(dir, sizeof(dir), "%s/kcsi-fuzz-lp-%d", base, (int)getpid());
	snprintf(cpool, sizeof(cpool), "%s/controller", dir);
	snprintf(npool, sizeof(npool), "%s/node", dir);
	rm_tree(dir);
	if (mkdir(dir, 0700) < 0) {
		perror(dir);
		abort();
	}
	verbose = getenv("FUZZ_VERBOSE") != NULL;
	csrv = csi_server_new(NULL);
	nsrv = csi_server_new(NULL);
	atexit(cleanup);
}

static void call(const struct method *m, const uint8_t *req, size_t len)
{
	uint8_t *resp;
	size_t resp_len;
	char msg[512];
	int code = csi_server_call(m->node ? nsrv : csrv, m->path, req, len, &resp, &resp_len,
				   msg, sizeof(msg));
	assert(code >= 0 && code <= 16);
	if (verbose)
		fprintf(stderr, "%s: %s %s\n", m->path, csi_code_name(code), msg);
	if (code == 0) {
		const ProtobufCMethodDescriptor *md = csi_method_lookup(m->path);
		ProtobufCMessage *out = protobuf_c_message_unpack(md->output, NULL, resp_len, resp);
		assert(out != NULL);
		protobuf_c_message_free_unpacked(out, NULL);
	}
	free(resp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!dir[0])
		init();
	reset();
	for (int i = 0; i < MAX_CALLS && size >= 1; i++) {
		const struct method *m = &methods[data[0] % N_METHODS];
		size_t len = size >= 3 ? (size_t)data[1] | (size_t)data[2] << 8 : 0;
		size_t hdr = size >= 3 ? 3 : size;
		data += hdr;
		size -= hdr;
		if (len > size)
			len = size;
		call(m, data, len);
		data += len;
		size -= len;
	}
	return 0;
}
