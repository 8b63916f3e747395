/*
 * interop_client: kcsi's CSI client (src/csi/client.h) against a gRPC server kcsi did not write,
 * the grpc-go peer of tests/peers/csipeer (google.golang.org/grpc, the gRPC of the kubelet and
 * of every upstream sidecar). tests/e2e/grpc_interop_go.sh runs it; docs/development.md
 * ("Interoperability with grpc-go") lists what it checks.
 *
 *   interop_client --peer build-peers/bin/csipeer --dir DIR [-v N] [CASE ...]
 *
 * This program starts the peer itself (`csipeer server` on DIR/peer.sock, log in DIR/peer.log)
 * so that the peer's programme (PEER_PROGRAM below) and the expectations live in one file, and
 * so that it can kill and restart the peer for the connection-loss case. Some cases start a
 * second peer with other grpc-go server options (DIR/<name>.sock: keepalive policy, server
 * pings, 64 KiB windows, a stream limit) and stop it when they end. Every peer writes each call
 * it sees to DIR/peer.rec (one JSON line each, with the number of its calls in flight at the
 * start); the cases read it to check what the server saw: the grpc-timeout, cancellations,
 * how many streams were open at once.
 *
 * Per-call behaviour goes in the request: CreateVolume's parameters "interop.delay_ms",
 * "interop.code", "interop.message", "interop.details", "interop.reply_bytes" (see
 * tests/peers/csipeer/server.go). Each case prints one line: "ok", or "FAIL" with the reason;
 * the last line is "N passed, M failed"; the exit status is 1 when any failed.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/flags.h"
#include "base/log.h"
#include "base/log_flags.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "csi/client.h"

#define MiB (1024 * 1024)
#define NEAR_LIMIT 4089446 /* 3.9 MiB, under gRPC's default 4 MiB */
#define OVER_LIMIT (9 * MiB / 2)
#define MS (1000 * 1000LL)
#define INT64_MAX_STR "9223372036854775807"

/* What the peer answers, per method (csipeer --program, protojson); the checks below expect it. */
#define PLUGIN_NAME "interop.grpc-go.kcsi.dev"
#define PLUGIN_VERSION "v1.14.7-\xc3\xbc" /* ü */
#define MANIFEST_KEY "\xc3\xbcn\xc3\xaf" "code" /* ünïcode */
#define MANIFEST_VALUE "v\xc3\xa4lue \xe6\x97\xa5\xe6\x9c\xac" /* välue 日本 */
static const char PEER_PROGRAM[] =
	"{\"GetPluginInfo\": {\"reply\": {\"name\": \"" PLUGIN_NAME "\", "
	"\"vendor_version\": \"" PLUGIN_VERSION "\", \"manifest\": {\"" MANIFEST_KEY "\": \""
	MANIFEST_VALUE "\", \"empty\": \"\", \"peer\": \"grpc-go\"}}},"
	/* Not ready twice, then ready: csi_wait_ready() must retry. */
	" \"Probe\": [{\"reply\": {\"ready\": false}},"
	" {\"reply\": {\"ready\": false}},"
	" {\"reply\": {\"ready\": true}}],"
	" \"GetPluginCapabilities\": {\"reply\": {\"capabilities\": ["
	"{\"service\": {\"type\": \"CONTROLLER_SERVICE\"}},"
	" {\"volume_expansion\": {\"type\": \"OFFLINE\"}}]}},"
	" \"ControllerGetCapabilities\": {\"reply\": {\"capabilities\": ["
	"{\"rpc\": {\"type\": \"CREATE_DELETE_VOLUME\"}},"
	" {\"rpc\": {\"type\": \"MODIFY_VOLUME\"}}]}},"
	/* A wrapper set to zero is present: minimum_volume_size must arrive non-NULL. */
	" \"GetCapacity\": {\"reply\": {\"available_capacity\": \"" INT64_MAX_STR "\","
	" \"maximum_volume_size\": \"10737418240\","
	" \"minimum_volume_size\": \"0\"}}}";

/* Status codes 1..16, each with a message that gRPC must carry intact (percent-encoded). */
static const struct {
	int code;
	const char *message;
	int details; /* bytes of grpc-status-details-bin payload; 0: no trailer */
} STATUSES[] = {
	{ 1, "cancelled: \xc3\xbcmlaut fa\xc3\xa7" "ade", 16 },
	{ 2, "100% unknown, 50%-off, %41 is not A, %zz, a lone % at the end %", 0 },
	{ 3, "line one\nline two\r\nline three\tafter a tab", 16 },
	{ 4, "deadline \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e (Japanese)", 0 },
	{ 5, "volume \xc2\xabvol-1\xc2\xbb not found", 2048 },
	{ 6, "emoji \xf0\x9f\x9a\x80 and +plus+ signs, #hash, ?query=1&x", 0 },
	{ 7, "\"double\" 'single' \\backslash {braces} [brackets] <angle>", 16 },
	{ 8, " leading and trailing spaces ", 0 },
	{ 9, "precondition: %s %d %n are not formats", 16 },
	{ 10, "aborted\n", 0 },
	{ 11, "out of range: \xe2\x88\x9e > 2^63-1", 16 },
	{ 12, "unimplemented \xd0\x9a\xd0\xb8\xd1\x80\xd0\xb8\xd0\xbb" /* Кирилл */
	      "\xd0\xbb\xd0\xb8\xd1\x86\xd0\xb0", 0 },                     /* ица */
	{ 13, "internal: "
	      "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	      "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	      "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	      "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	      "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	      "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	      "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	      "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	      "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	      " (a long one)", 16 },
	{ 14, "unavailable: driver restarting", 2048 },
	{ 15, "data loss %E2%9C%93 (an escape sequence as text)", 0 },
	{ 16, "unauthenticated \xc3\x9f\xc3\xa9\xc3\xa0", 16 },
};

/* ---- the peer processes ---- */

static const char *peer_bin, *dir;
static char endpoint[256], record_path[256];
static pid_t peer_pid = -1; /* the main peer, DIR/peer.sock */

/*
 * The main peer's grpc-go options: its keepalive policy allows kcsi's 1 s pings (the keepalive
 * case); grpc-go's default policy (5 min, none without calls) is the keepalive_policy case's.
 */
static const char *const MAIN_PEER_FLAGS[] = { "--keepalive-min-time", "500ms",
					       "--keepalive-permit-without-stream", NULL };

static char *path_in_dir(const char *name, const char *ext)
{
	char *p = xmalloc(strlen(dir) + strlen(name) + strlen(ext) + 3);
	sprintf(p, "%s/%s.%s", dir, name, ext);
	return p;
}

/* The pid in a pid file (written once the peer listens), or -1. */
static pid_t read_pidfile(const char *p)
{
	FILE *f = fopen(p, "r");
	long pid = -1;
	if (f) {
		if (fscanf(f, "%ld", &pid) != 1)
			pid = -1;
		fclose(f);
	}
	return (pid_t)pid;
}

/*
 * Starts `csipeer server` on DIR/<name>.sock with the extra flags (NULL-terminated) and waits
 * until it listens. Returns its pid, or -1 with a reason in why.
 */
static pid_t peer_spawn(const char *name, const char *const *extra, char *why, size_t len)
{
	char *log = path_in_dir(name, "log"), *pidfile = path_in_dir(name, "pid");
	char *sock = path_in_dir(name, "sock");
	char ep[300];
	snprintf(ep, sizeof(ep), "unix://%s", sock);
	free(sock);
	unlink(pidfile);
	const char *argv[32] = { peer_bin, "server", "--listen", ep, "--program", PEER_PROGRAM,
				 "--record", record_path, "--pidfile", pidfile };
	size_t n = 10;
	for (; extra && *extra && n < 31; extra++)
		argv[n++] = *extra;
	argv[n] = NULL;
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive this program */
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execv(peer_bin, (char *const *)argv);
		fprintf(stderr, "interop_client: cannot run %s: %s\n", peer_bin, strerror(errno));
		_exit(127);
	}
	free(log);
	if (pid < 0) {
		free(pidfile);
		snprintf(why, len, "fork: %s", strerror(errno));
		return -1;
	}
	for (int i = 0; i < 300; i++) {
		if (read_pidfile(pidfile) == pid) {
			free(pidfile);
			return pid;
		}
		if (waitpid(pid, NULL, WNOHANG) == pid) {
			free(pidfile);
			snprintf(why, len, "the grpc-go peer %s exited at start (see %s/%s.log)", name, dir,
				 name);
			return -1;
		}
		sleep_ns(50 * MS);
	}
	free(pidfile);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	snprintf(why, len, "the grpc-go peer %s did not listen within 15 s (see %s/%s.log)", name,
		 dir, name);
	return -1;
}

/* Starts the main peer. 0, or -1 with a reason in why. */
static int peer_start(char *why, size_t len)
{
	peer_pid = peer_spawn("peer", MAIN_PEER_FLAGS, why, len);
	return peer_pid > 0 ? 0 : -1;
}

/* Signals a peer and reaps it; *pid becomes -1. */
static void pid_kill(pid_t *pid, int sig)
{
	if (*pid <= 0)
		return;
	kill(*pid, sig);
	waitpid(*pid, NULL, 0);
	*pid = -1;
}

static void peer_kill(int sig)
{
	pid_kill(&peer_pid, sig);
}

/* ---- the peer's record ---- */

/* The first record line holding all of `needles` (NULL-terminated), copied to line. */
static bool record_find(char *line, size_t len, const char *needle, ...)
{
	FILE *f = fopen(record_path, "r");
	if (!f)
		return false;
	char buf[4096];
	bool found = false;
	while (!found && fgets(buf, sizeof(buf), f)) {
		va_list ap;
		va_start(ap, needle);
		found = true;
		for (const char *n = needle; n; n = va_arg(ap, const char *))
			if (!strstr(buf, n))
				found = false;
		va_end(ap);
	}
	fclose(f);
	if (found)
		snprintf(line, len, "%s", buf);
	return found;
}

/* Record lines of a method's calls: `"method":"Probe","key":"","event":"start"`. */
static int record_count(const char *needle)
{
	FILE *f = fopen(record_path, "r");
	if (!f)
		return 0;
	char buf[4096];
	int n = 0;
	while (fgets(buf, sizeof(buf), f))
		n += strstr(buf, needle) != NULL;
	fclose(f);
	return n;
}

/* ---- cases ---- */

struct result {
	char why[8192];  /* a failure's reason */
	char note[4096]; /* what a pass showed */
};

enum { PASS = 0, FAIL = -1 };

#define EXPECT(cond, ...) \
	do { \
		if (!(cond)) { \
			snprintf(r->why, sizeof(r->why), __VA_ARGS__); \
			return FAIL; \
		} \
	} while (0)

/* A status for a message: "CODE \"message\"". */
static const char *st_str(const struct csi_status *st)
{
	static __thread char buf[1200];
	snprintf(buf, sizeof(buf), "%s \"%s\"", csi_code_name(st->code), st->message);
	return buf;
}

/* Connects to the peer at ep (NULL: the main peer). */
static struct csi_conn *connect_to(const char *ep, const struct csi_conn_opts *opts,
				   struct result *r)
{
	struct csi_conn_opts o = opts ? *opts : (struct csi_conn_opts)CSI_CONN_OPTS_INIT;
	o.connect_timeout_ns = 15000 * MS;
	char err[512];
	struct csi_conn *c = csi_connect(ep ? ep : endpoint, &o, err, sizeof(err));
	if (!c)
		snprintf(r->why, sizeof(r->why), "csi_connect: %s", err);
	return c;
}

static struct csi_conn *connect_peer(const struct csi_conn_opts *opts, struct result *r)
{
	return connect_to(NULL, opts, r);
}

/* A CreateVolume request with the given name and parameters (key, value, ..., NULL). */
static Csi__V1__CreateVolumeRequest *cv_request(struct csi_arena *a, const char *name, ...)
{
	Csi__V1__CreateVolumeRequest *q = csi_msg_new(a, &csi__v1__create_volume_request__descriptor);
	q->name = csi_arena_strdup(a, name);
	va_list ap;
	va_start(ap, name);
	for (const char *k = va_arg(ap, const char *); k; k = va_arg(ap, const char *))
		csi_map_add(a, &q->base, "parameters", k, va_arg(ap, const char *));
	va_end(ap);
	return q;
}

static const char *ctx_get(const Csi__V1__Volume *v, const char *key)
{
	return csi_map_get(v->n_volume_context, v->volume_context, key);
}

static bool str_is(const char *got, const char *want)
{
	return got && strcmp(got, want) == 0;
}

/* csi_wait_ready() retries while Probe says not ready (the peer says so twice). */
static int case_wait_ready(struct csi_conn *c, struct result *r)
{
	char err[512];
	int64_t start = mono_now_ns();
	EXPECT(csi_wait_ready(c, 5000 * MS, err, sizeof(err)) == 0, "csi_wait_ready: %s", err);
	int probes = record_count("\"method\":\"Probe\",\"key\":\"\",\"event\":\"start\"");
	EXPECT(probes >= 3,
	       "csi_wait_ready returned after %d Probe calls, the peer was ready at the third", probes);
	snprintf(r->note, sizeof(r->note), "ready after %d Probe calls, %lld ms", probes,
		 (long long)((mono_now_ns() - start) / MS));
	return PASS;
}

/* The typed helpers and csi_call() on programmed answers: strings, maps, oneofs, wrappers. */
static int case_identity(struct csi_conn *c, struct result *r)
{
	struct csi_status st;
	Csi__V1__GetPluginInfoRequest iq = CSI__V1__GET_PLUGIN_INFO_REQUEST__INIT;
	Csi__V1__GetPluginInfoResponse *info;
	EXPECT(csi_get_plugin_info(c, &iq, &info, 5000 * MS, &st) == 0, "GetPluginInfo: %s",
	       st_str(&st));
	size_t nm = info->n_manifest;
	bool info_ok = str_is(info->name, PLUGIN_NAME) &&
		       str_is(info->vendor_version, PLUGIN_VERSION) && nm == 3 &&
		       str_is(csi_map_get(nm, info->manifest, MANIFEST_KEY), MANIFEST_VALUE) &&
		       str_is(csi_map_get(nm, info->manifest, "empty"), "") &&
		       str_is(csi_map_get(nm, info->manifest, "peer"), "grpc-go");
	char name[256];
	snprintf(name, sizeof(name), "%s %s, %zu manifest entries", info->name, info->vendor_version,
		 info->n_manifest);
	csi_msg_free(info);
	EXPECT(info_ok, "GetPluginInfo: got %s", name);

	Csi__V1__ProbeRequest pq = CSI__V1__PROBE_REQUEST__INIT;
	Csi__V1__ProbeResponse *probe;
	EXPECT(csi_probe(c, &pq, &probe, 5000 * MS, &st) == 0, "Probe: %s", st_str(&st));
	bool ready = probe->ready && probe->ready->value;
	csi_msg_free(probe);
	EXPECT(ready, "Probe: ready is not a BoolValue true");

	Csi__V1__GetPluginCapabilitiesRequest cq = CSI__V1__GET_PLUGIN_CAPABILITIES_REQUEST__INIT;
	Csi__V1__GetPluginCapabilitiesResponse *caps;
	EXPECT(csi_get_plugin_capabilities(c, &cq, &caps, 5000 * MS, &st) == 0,
	       "GetPluginCapabilities: %s", st_str(&st));
	bool caps_ok = caps->n_capabilities == 2 &&
		caps->capabilities[0]->type_case == CSI__V1__PLUGIN_CAPABILITY__TYPE_SERVICE &&
		caps->capabilities[0]->service->type ==
			CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__CONTROLLER_SERVICE &&
		caps->capabilities[1]->type_case == CSI__V1__PLUGIN_CAPABILITY__TYPE_VOLUME_EXPANSION &&
		caps->capabilities[1]->volume_expansion->type ==
			CSI__V1__PLUGIN_CAPABILITY__VOLUME_EXPANSION__TYPE__OFFLINE;
	csi_msg_free(caps);
	EXPECT(caps_ok, "GetPluginCapabilities: the two oneof members did not arrive as sent");

	/* csi_call() by method path and descriptor. */
	Csi__V1__ControllerGetCapabilitiesRequest gq =
		CSI__V1__CONTROLLER_GET_CAPABILITIES_REQUEST__INIT;
	Csi__V1__ControllerGetCapabilitiesResponse *gc;
	EXPECT(csi_call(c, CSI_METHOD(Controller, ControllerGetCapabilities), &gq.base,
			&csi__v1__controller_get_capabilities_response__descriptor,
			(ProtobufCMessage **)&gc, 5000 * MS, &st) == 0,
	       "ControllerGetCapabilities: %s", st_str(&st));
	bool gc_ok = gc->n_capabilities == 2 &&
		gc->capabilities[0]->rpc->type ==
			CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_VOLUME &&
		gc->capabilities[1]->rpc->type ==
			CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__MODIFY_VOLUME;
	csi_msg_free(gc);
	EXPECT(gc_ok, "ControllerGetCapabilities: enum values did not arrive as sent");
	snprintf(r->note, sizeof(r->note),
		 "GetPluginInfo (non-ASCII, map), Probe (BoolValue), GetPluginCapabilities (oneof), "
		 "ControllerGetCapabilities via csi_call()");
	return PASS;
}

/* GetCapacity through csi_call_bytes(): int64 at its limit, a wrapper set to 0 is present. */
static int case_call_bytes(struct csi_conn *c, struct result *r)
{
	struct csi_arena *a = csi_arena_new();
	Csi__V1__GetCapacityRequest *q = csi_msg_new(a, &csi__v1__get_capacity_request__descriptor);
	csi_map_add(a, &q->base, "parameters", "type", "fast");
	size_t len = protobuf_c_message_get_packed_size(&q->base);
	uint8_t *buf = xmalloc(len);
	protobuf_c_message_pack(&q->base, buf);
	csi_arena_free(a);
	void *out;
	size_t outlen;
	struct csi_status st;
	int code = csi_call_bytes(c, CSI_METHOD(Controller, GetCapacity), buf, len, &out, &outlen,
				  5000 * MS, &st);
	free(buf);
	EXPECT(code == 0, "GetCapacity bytes: %s", st_str(&st));
	Csi__V1__GetCapacityResponse *resp = csi__v1__get_capacity_response__unpack(NULL, outlen, out);
	free(out);
	EXPECT(resp, "GetCapacity: %zu response bytes do not decode", outlen);
	size_t answer_len = outlen;
	bool ok = resp->available_capacity == INT64_MAX && resp->maximum_volume_size &&
		  resp->maximum_volume_size->value == 10737418240LL && resp->minimum_volume_size &&
		  resp->minimum_volume_size->value == 0;
	csi_msg_free(resp);
	EXPECT(ok, "GetCapacity: available_capacity or the Int64Value wrappers did not arrive as sent");

	/*
	 * Bytes that are no CreateVolumeRequest (field 1 with wire type 7, which does not exist):
	 * the peer refuses them, the connection lives.
	 */
	static const uint8_t garbage[] = { 0x0f };
	code = csi_call_bytes(c, CSI_METHOD(Controller, CreateVolume), garbage, sizeof(garbage), &out,
			      &outlen, 5000 * MS, &st);
	free(out);
	EXPECT(code != 0, "malformed CreateVolume bytes: OK");
	char refused[1200];
	snprintf(refused, sizeof(refused), "%s", st_str(&st));
	Csi__V1__GetPluginInfoRequest iq = CSI__V1__GET_PLUGIN_INFO_REQUEST__INIT;
	Csi__V1__GetPluginInfoResponse *info;
	EXPECT(csi_get_plugin_info(c, &iq, &info, 5000 * MS, &st) == 0,
	       "GetPluginInfo after the malformed request: %s", st_str(&st));
	csi_msg_free(info);
	snprintf(r->note, sizeof(r->note),
		 "%zu bytes, INT64_MAX, Int64Value 10 GiB and 0; malformed bytes: %s", answer_len,
		 refused);
	return PASS;
}

/* CreateVolume's echo: every field kind of the request arrives, and the response's too. */
static int case_roundtrip(struct csi_conn *c, struct result *r)
{
	struct csi_arena *a = csi_arena_new();
	const char *name = "pvc-\xc3\xbc-\xe6\x97\xa5\xe6\x9c\xac"; /* pvc-ü-日本 */
	Csi__V1__CreateVolumeRequest *q = cv_request(a, name, "type", "fast", MANIFEST_KEY,
						     MANIFEST_VALUE, "empty", "", NULL);
	csi_map_add(a, &q->base, "secrets", "password", "s3cret");
	q->capacity_range = csi_msg_new(a, &csi__v1__capacity_range__descriptor);
	q->capacity_range->required_bytes = INT64_MAX;
	Csi__V1__VolumeCapability *cap = csi_msg_new(a, &csi__v1__volume_capability__descriptor);
	cap->access_mode = csi_msg_new(a, &csi__v1__volume_capability__access_mode__descriptor);
	cap->access_mode->mode =
		CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_MULTI_WRITER;
	cap->access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
	cap->mount = csi_msg_new(a, &csi__v1__volume_capability__mount_volume__descriptor);
	cap->mount->fs_type = "xfs";
	csi_repeated_add(a, &cap->mount->base, "mount_flags", "noatime");
	csi_repeated_add(a, &cap->mount->base, "mount_flags", "\xc3\xbc=1");
	csi_repeated_add(a, &q->base, "volume_capabilities", cap);
	q->volume_content_source = csi_msg_new(a, &csi__v1__volume_content_source__descriptor);
	q->volume_content_source->type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_VOLUME;
	q->volume_content_source->volume =
		csi_msg_new(a, &csi__v1__volume_content_source__volume_source__descriptor);
	q->volume_content_source->volume->volume_id = "src-\xc3\xbc";
	q->accessibility_requirements = csi_msg_new(a, &csi__v1__topology_requirement__descriptor);
	for (int i = 0; i < 2; i++) {
		Csi__V1__Topology *t = csi_msg_new(a, &csi__v1__topology__descriptor);
		csi_map_add(a, &t->base, "segments", "zone", i ? "b" : "a");
		if (!i)
			csi_map_add(a, &t->base, "segments", "rack", "r1");
		csi_repeated_add(a, &q->accessibility_requirements->base, "requisite", t);
	}
	size_t sent = protobuf_c_message_get_packed_size(&q->base);

	Csi__V1__CreateVolumeResponse *resp;
	struct csi_status st;
	int code = csi_create_volume(c, q, &resp, 5000 * MS, &st);
	csi_arena_free(a);
	EXPECT(code == 0, "CreateVolume: %s", st_str(&st));
	const Csi__V1__Volume *v = resp->volume;
	char want_id[64];
	snprintf(want_id, sizeof(want_id), "vol-%s", name);
	char got_bytes[32];
	snprintf(got_bytes, sizeof(got_bytes), "%zu", sent);
	const char *bad = !v ? "no volume"
		: !str_is(v->volume_id, want_id) ? "volume_id"
		: v->capacity_bytes != INT64_MAX ? "capacity_bytes (int64 max)"
		: !str_is(ctx_get(v, "type"), "fast") ? "parameters[type]"
		: !str_is(ctx_get(v, MANIFEST_KEY), MANIFEST_VALUE) ? "a non-ASCII parameter"
		: !str_is(ctx_get(v, "empty"), "") ? "an empty parameter"
		: !str_is(ctx_get(v, "secret/password"), "s3cret") ? "secrets"
		: !str_is(ctx_get(v, "access_mode"), "MULTI_NODE_MULTI_WRITER") ? "access_mode (enum)"
		: !str_is(ctx_get(v, "fs_type"), "xfs") ? "mount.fs_type"
		: !str_is(ctx_get(v, "mount_flags"), "noatime,\xc3\xbc=1") ? "mount_flags (repeated)"
		: !str_is(ctx_get(v, "request_bytes"), got_bytes) ? "the request's size at the peer"
		: !v->content_source ||
		  v->content_source->type_case != CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_VOLUME ||
		  !str_is(v->content_source->volume->volume_id, "src-\xc3\xbc")
			? "content_source (oneof)"
		: v->n_accessible_topology != 2 ||
		  !str_is(csi_map_get(v->accessible_topology[0]->n_segments,
				      v->accessible_topology[0]->segments, "rack"), "r1") ||
		  !str_is(csi_map_get(v->accessible_topology[1]->n_segments,
				      v->accessible_topology[1]->segments, "zone"), "b")
			? "accessible_topology (repeated message with a map)"
		: NULL;
	char ctx[512] = "";
	if (v && bad)
		snprintf(ctx, sizeof(ctx), "volume_id=%s request_bytes=%s (sent %zu)", v->volume_id,
			 ctx_get(v, "request_bytes") ? ctx_get(v, "request_bytes") : "-", sent);
	csi_msg_free(resp);
	EXPECT(!bad, "CreateVolume echo: %s did not round-trip; %s", bad, ctx);
	snprintf(r->note, sizeof(r->note),
		 "strings, int64 max, maps, repeated, enum, oneof, secrets; %zu request bytes seen "
		 "whole", sent);
	return PASS;
}

/* grpc-timeout is sent and honoured: 200 ms against a 2 s handler; the peer sees the cancel. */
static int case_deadline(struct csi_conn *c, struct result *r)
{
	struct csi_arena *a = csi_arena_new();
	Csi__V1__CreateVolumeResponse *resp;
	struct csi_status st;
	int64_t start = mono_now_ns();
	int code = csi_create_volume(c, cv_request(a, "deadline", "interop.delay_ms", "2000", NULL),
				     &resp, 200 * MS, &st);
	int64_t took = (mono_now_ns() - start) / MS;
	csi_arena_free(a);
	EXPECT(code == 4, "a 200 ms deadline on a 2 s handler: %s, want DEADLINE_EXCEEDED",
	       st_str(&st));
	EXPECT(took < 1500, "DEADLINE_EXCEEDED after %lld ms, want well under the handler's 2 s",
	       (long long)took);
	char line[4096];
	EXPECT(record_find(line, sizeof(line), "\"key\":\"deadline\",\"event\":\"start\"", NULL),
	       "the peer never saw the call");
	/* What is left of the 200 ms when the handler starts: a number (null means no deadline). */
	const char *tm = strstr(line, "\"timeout_ms\":");
	char *end = NULL;
	long timeout_ms = tm ? strtol(tm + 13, &end, 10) : 0;
	EXPECT(tm && end != tm + 13 && timeout_ms <= 250,
	       "the peer saw no deadline or one past 200 ms (grpc-timeout): %s", line);
	bool cancelled = false;
	for (int i = 0; i < 100 && !cancelled; i++) {
		cancelled = record_find(line, sizeof(line),
					"\"key\":\"deadline\",\"event\":\"cancelled\"", NULL);
		if (!cancelled)
			sleep_ns(50 * MS);
	}
	EXPECT(cancelled, "the peer did not see the call cancelled at its deadline");
	EXPECT(!record_find(line, sizeof(line), "\"key\":\"deadline\",\"event\":\"ok\"", NULL),
	       "the peer answered the call after its deadline");

	/* No deadline: no grpc-timeout at all. */
	a = csi_arena_new();
	code = csi_create_volume(c, cv_request(a, "no-deadline", NULL), &resp, 0, &st);
	csi_arena_free(a);
	EXPECT(code == 0, "a call without deadline: %s", st_str(&st));
	csi_msg_free(resp);
	EXPECT(record_find(line, sizeof(line), "\"key\":\"no-deadline\",\"event\":\"start\"",
			   "\"timeout_ms\":null", NULL),
	       "a call without deadline reached the peer with one");
	snprintf(r->note, sizeof(r->note),
		 "DEADLINE_EXCEEDED after %lld ms; the peer saw grpc-timeout (%ld ms left) and the "
		 "cancellation; no deadline sends none", (long long)took, timeout_ms);
	return PASS;
}

/* Codes 1..16 with their messages, some with a grpc-status-details-bin trailer. */
static int case_status(struct csi_conn *c, struct result *r)
{
	int details = 0;
	size_t longest = 0;
	for (size_t i = 0; i < sizeof(STATUSES) / sizeof(STATUSES[0]); i++) {
		if (strlen(STATUSES[i].message) > longest)
			longest = strlen(STATUSES[i].message);
		struct csi_arena *a = csi_arena_new();
		char name[32], code[8], det[16];
		snprintf(name, sizeof(name), "status-%d", STATUSES[i].code);
		snprintf(code, sizeof(code), "%d", STATUSES[i].code);
		snprintf(det, sizeof(det), "%d", STATUSES[i].details);
		Csi__V1__CreateVolumeResponse *resp = NULL;
		struct csi_status st;
		Csi__V1__CreateVolumeRequest *q = cv_request(a, name, "interop.code", code,
							     "interop.message", STATUSES[i].message,
							     "interop.details", det, NULL);
		int got = csi_create_volume(c, q, &resp, 5000 * MS, &st);
		csi_arena_free(a);
		csi_msg_free(resp);
		EXPECT(got == STATUSES[i].code && resp == NULL &&
			       strcmp(st.message, STATUSES[i].message) == 0,
		       "code %d: got %s, want \"%s\"%s", STATUSES[i].code, st_str(&st),
		       STATUSES[i].message, STATUSES[i].details ? " (with a details trailer)" : "");
		details += STATUSES[i].details > 0;
	}
	snprintf(r->note, sizeof(r->note),
		 "16 codes, messages with non-ASCII, '%%', CR/LF, tab, '+', up to %zu bytes; %d with "
		 "a grpc-status-details-bin trailer", longest, details);
	return PASS;
}

/* A CreateVolume whose answer is padded to `bytes`; returns the code and the bytes received. */
static int padded_call(struct csi_conn *c, const char *name, long bytes, size_t *got,
		       struct csi_status *st)
{
	struct csi_arena *a = csi_arena_new();
	char n[32];
	snprintf(n, sizeof(n), "%ld", bytes);
	Csi__V1__CreateVolumeRequest *q = cv_request(a, name, "interop.reply_bytes", n, NULL);
	size_t len = protobuf_c_message_get_packed_size(&q->base);
	uint8_t *buf = xmalloc(len);
	protobuf_c_message_pack(&q->base, buf);
	csi_arena_free(a);
	void *out;
	int code = csi_call_bytes(c, CSI_METHOD(Controller, CreateVolume), buf, len, &out, got,
				  10000 * MS, st);
	free(buf);
	free(out);
	return code;
}

/* A CreateVolume whose request carries `bytes` of padding in its parameters. */
static int big_request(struct csi_conn *c, const char *name, size_t bytes,
		       Csi__V1__CreateVolumeResponse **resp, struct csi_status *st)
{
	struct csi_arena *a = csi_arena_new();
	char *pad = xmalloc(bytes + 1);
	memset(pad, 'q', bytes);
	pad[bytes] = 0;
	int code = csi_create_volume(c, cv_request(a, name, "pad", pad, NULL), resp, 10000 * MS, st);
	free(pad);
	csi_arena_free(a);
	return code;
}

static int probe_info(struct csi_conn *c, struct csi_status *st)
{
	Csi__V1__GetPluginInfoRequest q = CSI__V1__GET_PLUGIN_INFO_REQUEST__INIT;
	Csi__V1__GetPluginInfoResponse *resp;
	int code = csi_get_plugin_info(c, &q, &resp, 5000 * MS, st);
	if (code == 0)
		csi_msg_free(resp);
	return code;
}

/* 3.9 MiB each way; over the limit each way is RESOURCE_EXHAUSTED and the connection lives. */
static int case_large(struct csi_conn *c, struct result *r)
{
	struct csi_status st;
	size_t got;
	EXPECT(padded_call(c, "near-limit", NEAR_LIMIT, &got, &st) == 0,
	       "a 3.9 MiB response: %s", st_str(&st));
	EXPECT(got == NEAR_LIMIT, "a 3.9 MiB response arrived as %zu bytes, want %d", got,
	       NEAR_LIMIT);

	Csi__V1__CreateVolumeResponse *resp;
	EXPECT(big_request(c, "big-request", NEAR_LIMIT - 300, &resp, &st) == 0,
	       "a 3.9 MiB request: %s", st_str(&st));
	const char *pad = ctx_get(resp->volume, "pad");
	size_t echoed = pad ? strlen(pad) : 0;
	csi_msg_free(resp);
	EXPECT(echoed == NEAR_LIMIT - 300, "a 3.9 MiB request arrived with %zu bytes of its %d",
	       echoed, NEAR_LIMIT - 300);

	EXPECT(padded_call(c, "over-limit", OVER_LIMIT, &got, &st) == 8,
	       "a 4.5 MiB response to a client with max_recv_bytes 4 MiB: %s, want RESOURCE_EXHAUSTED",
	       st_str(&st));
	char over_resp[1200];
	snprintf(over_resp, sizeof(over_resp), "%s", st.message);
	EXPECT(probe_info(c, &st) == 0, "the call after the oversize response: %s", st_str(&st));

	EXPECT(big_request(c, "huge-request", OVER_LIMIT, &resp, &st) == 8,
	       "a 4.5 MiB request to grpc-go (4 MiB limit): %s, want RESOURCE_EXHAUSTED",
	       st_str(&st));
	char over_req[1200];
	snprintf(over_req, sizeof(over_req), "%s", st.message);
	EXPECT(probe_info(c, &st) == 0, "the call after the oversize request: %s", st_str(&st));
	EXPECT(!csi_conn_lost(c), "the connection was reported lost after oversize messages");

	/* max_recv_bytes is honoured below the default too. */
	struct csi_conn_opts o = CSI_CONN_OPTS_INIT;
	o.max_recv_bytes = MiB;
	struct csi_conn *small = connect_peer(&o, r);
	if (!small)
		return FAIL;
	int over = padded_call(small, "small-over", 3 * MiB / 2, &got, &st);
	int under = over == 8 ? padded_call(small, "small-under", 900 * 1024, &got, &st) : -1;
	csi_conn_free(small);
	EXPECT(over == 8,
	       "a 1.5 MiB response with max_recv_bytes 1 MiB: code %d, want RESOURCE_EXHAUSTED", over);
	EXPECT(under == 0, "a 900 KiB response with max_recv_bytes 1 MiB after the refused one: %s",
	       st_str(&st));
	snprintf(r->note, sizeof(r->note),
		 "3.9 MiB response and request OK; 4.5 MiB response: \"%.300s\"; "
		 "4.5 MiB request: \"%.300s\"; max_recv_bytes 1 MiB honoured", over_resp, over_req);
	return PASS;
}

struct conc {
	struct csi_conn *c;
	pthread_barrier_t *go;
	int i, code;
	char why[256];
};

static void *conc_call(void *arg)
{
	struct conc *k = arg;
	struct csi_arena *a = csi_arena_new();
	char name[32], want[40];
	snprintf(name, sizeof(name), "conc-%d", k->i);
	snprintf(want, sizeof(want), "vol-conc-%d", k->i);
	Csi__V1__CreateVolumeRequest *q = cv_request(a, name, "interop.delay_ms", "100", NULL);
	pthread_barrier_wait(k->go);
	Csi__V1__CreateVolumeResponse *resp;
	struct csi_status st;
	k->code = csi_create_volume(k->c, q, &resp, 30000 * MS, &st);
	if (k->code)
		snprintf(k->why, sizeof(k->why), "%.200s", st_str(&st));
	else if (!str_is(resp->volume->volume_id, want))
		snprintf(k->why, sizeof(k->why), "answered %.100s, want %s",
			 resp->volume->volume_id, want);
	if (k->code == 0)
		csi_msg_free(resp);
	csi_arena_free(a);
	return NULL;
}

/* 64 calls in flight at once on one connection, each 100 ms at the peer. */
static int case_concurrency(struct csi_conn *c, struct result *r)
{
	enum { N = 64 };
	struct conc k[N];
	pthread_t th[N];
	pthread_barrier_t go;
	pthread_barrier_init(&go, NULL, N + 1);
	for (int i = 0; i < N; i++) {
		k[i] = (struct conc){ .c = c, .go = &go, .i = i };
		pthread_create(&th[i], NULL, conc_call, &k[i]);
	}
	pthread_barrier_wait(&go);
	int64_t start = mono_now_ns();
	for (int i = 0; i < N; i++)
		pthread_join(th[i], NULL);
	int64_t took = (mono_now_ns() - start) / MS;
	pthread_barrier_destroy(&go);
	for (int i = 0; i < N; i++)
		EXPECT(k[i].code == 0 && !k[i].why[0], "call %d: %s", i, k[i].why);
	EXPECT(took < 3200, "64 calls of 100 ms took %lld ms, want much less than 6400",
	       (long long)took);
	snprintf(r->note, sizeof(r->note), "64 calls in %lld ms", (long long)took);
	return PASS;
}

static atomic_int lost_calls;

static void on_lost(void *arg)
{
	(void)arg;
	atomic_fetch_add(&lost_calls, 1);
}

struct inflight {
	struct csi_conn *c;
	const char *name;
	int code;
	int64_t took_ms;
	struct csi_status st;
};

static void *inflight_call(void *arg)
{
	struct inflight *f = arg;
	struct csi_arena *a = csi_arena_new();
	Csi__V1__CreateVolumeResponse *resp = NULL;
	int64_t start = mono_now_ns();
	f->code = csi_create_volume(f->c, cv_request(a, f->name, "interop.delay_ms", "10000", NULL),
				    &resp, 20000 * MS, &f->st);
	f->took_ms = (mono_now_ns() - start) / MS;
	csi_msg_free(resp);
	csi_arena_free(a);
	return NULL;
}

/* Polls cond (a function of c) every 50 ms for up to ms; true when it held. */
static bool wait_until(bool (*cond)(struct csi_conn *), struct csi_conn *c, int ms)
{
	for (int i = 0; i <= ms / 50; i++) {
		if (cond(c))
			return true;
		sleep_ns(50 * MS);
	}
	return false;
}

static bool peer_started_loss_call(struct csi_conn *c)
{
	(void)c;
	char line[4096];
	return record_find(line, sizeof(line), "\"key\":\"loss\",\"event\":\"start\"", NULL);
}

/*
 * The peer is killed -9 during a call: the call ends UNAVAILABLE, csi_conn_lost() turns true and
 * on_lost fires once; a peer started again on the same socket serves a new connection.
 */
static int case_reconnect(struct csi_conn *main_conn, struct result *r)
{
	(void)main_conn;
	struct csi_conn_opts o = CSI_CONN_OPTS_INIT;
	o.on_lost = on_lost;
	atomic_store(&lost_calls, 0);
	struct csi_conn *c = connect_peer(&o, r);
	if (!c)
		return FAIL;
	struct inflight f = { .c = c, .name = "loss" };
	pthread_t th;
	pthread_create(&th, NULL, inflight_call, &f);
	bool started = wait_until(peer_started_loss_call, c, 5000);
	peer_kill(SIGKILL);
	pthread_join(th, NULL);
	bool lost = wait_until(csi_conn_lost, c, 5000);
	sleep_ns(200 * MS); /* a second on_lost would come now */
	int fired = atomic_load(&lost_calls);
	csi_conn_free(c);
	EXPECT(started, "the peer never saw the call");
	EXPECT(f.code == 14, "the call in flight when the peer was killed: %s, want UNAVAILABLE",
	       st_str(&f.st));
	EXPECT(f.took_ms < 8000, "the call ended %lld ms after it started (the handler takes 10 s)",
	       (long long)f.took_ms);
	EXPECT(lost, "csi_conn_lost() still false 5 s after the peer was killed");
	EXPECT(fired == 1, "on_lost fired %d times, want once", fired);

	char why[512];
	EXPECT(peer_start(why, sizeof(why)) == 0, "restarting the peer: %s", why);
	c = connect_peer(NULL, r);
	if (!c)
		return FAIL;
	struct csi_status st;
	int code = probe_info(c, &st);
	csi_conn_free(c);
	EXPECT(code == 0, "GetPluginInfo on a new connection to the restarted peer: %s", st_str(&st));
	snprintf(r->note, sizeof(r->note),
		 "UNAVAILABLE \"%.300s\" after %lld ms; csi_conn_lost() true, on_lost fired once; "
		 "a new csi_connect() reaches the restarted peer", f.st.message, (long long)f.took_ms);
	return PASS;
}

/*
 * With keepalive_ns = 1 s the connection outlives 5 idle seconds; a peer that stops answering
 * (SIGSTOP: its socket stays open, nothing replies) is a lost connection.
 */
static int case_keepalive(struct csi_conn *main_conn, struct result *r)
{
	(void)main_conn;
	struct csi_conn_opts o = CSI_CONN_OPTS_INIT;
	o.keepalive_ns = 1000 * MS;
	o.on_lost = on_lost;
	atomic_store(&lost_calls, 0);
	struct csi_conn *c = connect_peer(&o, r);
	if (!c)
		return FAIL;
	sleep_ns(5500 * MS);
	bool lost_idle = csi_conn_lost(c);
	struct csi_status st;
	int code = probe_info(c, &st);
	kill(peer_pid, SIGSTOP);
	int64_t start = mono_now_ns();
	bool lost = wait_until(csi_conn_lost, c, 10000);
	int64_t took = (mono_now_ns() - start) / MS;
	kill(peer_pid, SIGCONT);
	csi_conn_free(c);
	EXPECT(!lost_idle, "the connection was lost during 5.5 idle seconds with 1 s pings");
	EXPECT(code == 0, "GetPluginInfo after 5.5 idle seconds: %s", st_str(&st));
	EXPECT(lost, "a peer that stopped answering (SIGSTOP) was not reported lost within 10 s");
	snprintf(r->note, sizeof(r->note),
		 "connected through 5.5 idle seconds of 1 s pings; an unanswering peer lost after "
		 "%lld ms", (long long)took);
	return PASS;
}


/* ---- what grpc-go does that the other peers do not ---- */

/* A second peer for one case, with its own grpc-go options; stopped by extra_peer_stop(). */
struct extra_peer {
	pid_t pid;
	char endpoint[300];
};

static int extra_peer_start(struct extra_peer *p, const char *name, const char *const *flags,
			    struct result *r)
{
	p->pid = peer_spawn(name, flags, r->why, sizeof(r->why));
	snprintf(p->endpoint, sizeof(p->endpoint), "unix://%s/%s.sock", dir, name);
	return p->pid > 0 ? 0 : -1;
}

static void extra_peer_stop(struct extra_peer *p)
{
	pid_kill(&p->pid, SIGTERM);
}

/* The largest "inflight" of the record's start lines whose key begins with prefix. */
static int record_max_inflight(const char *prefix)
{
	FILE *f = fopen(record_path, "r");
	if (!f)
		return 0;
	char needle[128], buf[4096];
	snprintf(needle, sizeof(needle), "\"key\":\"%s", prefix);
	int most = 0;
	while (fgets(buf, sizeof(buf), f)) {
		const char *in = strstr(buf, "\"inflight\":");
		if (in && strstr(buf, needle) && strstr(buf, "\"event\":\"start\"")) {
			int n = atoi(in + 11);
			if (n > most)
				most = n;
		}
	}
	fclose(f);
	return most;
}

/*
 * grpc-go's server keepalive enforcement at its defaults (pings at most every 5 min, none
 * without calls): kcsi's client as the sidecars run it (no pings) stays connected through idle
 * seconds; with keepalive_ns = 1 s it is answered GOAWAY ENHANCE_YOUR_CALM "too_many_pings"
 * after three strikes, which kcsi reports as a lost connection (on_lost once), and the next
 * call connects again.
 */
static int case_keepalive_policy(struct csi_conn *main_conn, struct result *r)
{
	(void)main_conn;
	struct extra_peer p;
	if (extra_peer_start(&p, "strict", NULL, r))
		return FAIL;
	struct csi_conn *quiet = connect_to(p.endpoint, NULL, r);
	struct csi_conn_opts o = CSI_CONN_OPTS_INIT;
	o.keepalive_ns = 1000 * MS;
	o.on_lost = on_lost;
	atomic_store(&lost_calls, 0);
	struct csi_conn *pinging = quiet ? connect_to(p.endpoint, &o, r) : NULL;
	if (!pinging) {
		csi_conn_free(quiet);
		extra_peer_stop(&p);
		return FAIL;
	}
	int64_t start = mono_now_ns();
	bool lost = wait_until(csi_conn_lost, pinging, 10000);
	int64_t took = (mono_now_ns() - start) / MS;
	sleep_ns(200 * MS); /* a second on_lost would come now */
	int fired = atomic_load(&lost_calls);
	struct csi_status st, st2;
	int again = probe_info(pinging, &st);
	bool quiet_lost = csi_conn_lost(quiet);
	int quiet_code = probe_info(quiet, &st2);
	csi_conn_free(pinging);
	csi_conn_free(quiet);
	extra_peer_stop(&p);
	EXPECT(lost, "kcsi's client pinging every 1 s was not lost within 10 s of a grpc-go server "
	       "with the default keepalive policy (it should be sent GOAWAY too_many_pings)");
	EXPECT(fired == 1, "on_lost fired %d times, want once", fired);
	EXPECT(again == 0, "the call after the GOAWAY (a new connection): %s", st_str(&st));
	EXPECT(!quiet_lost, "kcsi's client without keepalive lost its connection to the same server");
	EXPECT(quiet_code == 0, "a call on the connection without keepalive: %s", st_str(&st2));
	snprintf(r->note, sizeof(r->note),
		 "1 s pings: GOAWAY too_many_pings, lost after %lld ms, on_lost once, the next call "
		 "reconnected; no pings (the sidecars' default): connected for the same %lld ms",
		 (long long)took, (long long)took);
	return PASS;
}

/*
 * grpc-go's server pinging an idle client every second (keepalive.ServerParameters, Time and
 * Timeout 1 s): kcsi's client must acknowledge each PING or the server closes the connection.
 */
static int case_server_keepalive(struct csi_conn *main_conn, struct result *r)
{
	(void)main_conn;
	static const char *const flags[] = { "--keepalive-time", "1s", NULL };
	struct extra_peer p;
	if (extra_peer_start(&p, "pinger", flags, r))
		return FAIL;
	struct csi_conn_opts o = CSI_CONN_OPTS_INIT;
	o.on_lost = on_lost;
	atomic_store(&lost_calls, 0);
	struct csi_conn *c = connect_to(p.endpoint, &o, r);
	if (!c) {
		extra_peer_stop(&p);
		return FAIL;
	}
	sleep_ns(5500 * MS);
	bool lost = csi_conn_lost(c);
	struct csi_status st;
	int code = probe_info(c, &st);
	csi_conn_free(c);
	extra_peer_stop(&p);
	EXPECT(!lost && atomic_load(&lost_calls) == 0,
	       "the connection was lost during 5.5 idle seconds of the server's 1 s pings");
	EXPECT(code == 0, "GetPluginInfo after 5.5 idle seconds: %s", st_str(&st));
	snprintf(r->note, sizeof(r->note),
		 "connected through 5.5 idle seconds of the server's 1 s pings (1 s timeout)");
	return PASS;
}

struct conc_opts {
	const char *prefix, *delay_ms;
};

struct conc_many {
	struct csi_conn *c;
	pthread_barrier_t *go;
	const struct conc_opts *o;
	int i, code;
	int64_t timeout_ms;
	char why[256];
};

static void *conc_many_call(void *arg)
{
	struct conc_many *k = arg;
	struct csi_arena *a = csi_arena_new();
	char name[64], want[80];
	snprintf(name, sizeof(name), "%s-%d", k->o->prefix, k->i);
	snprintf(want, sizeof(want), "vol-%s", name);
	Csi__V1__CreateVolumeRequest *q = cv_request(a, name, "interop.delay_ms", k->o->delay_ms,
						     NULL);
	pthread_barrier_wait(k->go);
	Csi__V1__CreateVolumeResponse *resp = NULL;
	struct csi_status st;
	k->code = csi_create_volume(k->c, q, &resp, k->timeout_ms * MS, &st);
	if (k->code)
		snprintf(k->why, sizeof(k->why), "%.200s", st_str(&st));
	else if (!str_is(resp->volume->volume_id, want))
		snprintf(k->why, sizeof(k->why), "answered %.100s, want %s",
			 resp->volume->volume_id, want);
	csi_msg_free(resp);
	csi_arena_free(a);
	return NULL;
}

/* n CreateVolume calls at once on c, each delay_ms at the peer; returns the ms they took. */
static int64_t run_many(struct csi_conn *c, int n, const struct conc_opts *o, int64_t timeout_ms,
			struct conc_many *k)
{
	pthread_t *th = xmalloc(sizeof(*th) * (size_t)n);
	pthread_barrier_t go;
	pthread_barrier_init(&go, NULL, (unsigned)n + 1);
	for (int i = 0; i < n; i++) {
		k[i] = (struct conc_many){ .c = c, .go = &go, .o = o, .i = i,
					   .timeout_ms = timeout_ms };
		pthread_create(&th[i], NULL, conc_many_call, &k[i]);
	}
	pthread_barrier_wait(&go);
	int64_t start = mono_now_ns();
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	int64_t took = (mono_now_ns() - start) / MS;
	pthread_barrier_destroy(&go);
	free(th);
	return took;
}

/*
 * 128 calls at once on one connection to a server without a stream limit (grpc-go's default):
 * the peer sees at least 100 of them in flight together, and 128 calls of 1 s end in under 2 s.
 */
static int case_streams(struct csi_conn *c, struct result *r)
{
	enum { N = 128 };
	static struct conc_many k[N];
	static const struct conc_opts o = { "streams", "1000" };
	int64_t took = run_many(c, N, &o, 30000, k);
	for (int i = 0; i < N; i++)
		EXPECT(k[i].code == 0 && !k[i].why[0], "call %d: %s", i, k[i].why);
	int most = record_max_inflight("streams-");
	EXPECT(most >= 100, "the peer saw at most %d of 128 calls in flight at once, want >= 100",
	       most);
	EXPECT(took < 1900, "128 calls of 1 s on one connection took %lld ms", (long long)took);
	snprintf(r->note, sizeof(r->note), "128 calls of 1 s in %lld ms; the peer saw %d in flight "
		 "at once", (long long)took, most);
	return PASS;
}

/*
 * A grpc-go server with static 64 KiB windows (grpc.InitialWindowSize and
 * InitialConnWindowSize) and at most 16 streams per connection (grpc.MaxConcurrentStreams):
 * 3.9 MiB each way is flow-controlled through its windows, and 100 calls at once are held by
 * kcsi's client to 16 open streams, all answered.
 */
static int case_window(struct csi_conn *main_conn, struct result *r)
{
	(void)main_conn;
	static const char *const flags[] = { "--window", "65536", "--max-streams", "16", NULL };
	struct extra_peer p;
	if (extra_peer_start(&p, "small", flags, r))
		return FAIL;
	struct csi_conn *c = connect_to(p.endpoint, NULL, r);
	if (!c) {
		extra_peer_stop(&p);
		return FAIL;
	}
	struct csi_status st;
	size_t got = 0;
	int resp_code = padded_call(c, "window-response", NEAR_LIMIT, &got, &st);
	char resp_why[1200];
	snprintf(resp_why, sizeof(resp_why), "%s", st_str(&st));
	Csi__V1__CreateVolumeResponse *resp = NULL;
	int req_code = big_request(c, "window-request", NEAR_LIMIT - 300, &resp, &st);
	size_t echoed = 0;
	if (req_code == 0) {
		const char *pad = ctx_get(resp->volume, "pad");
		echoed = pad ? strlen(pad) : 0;
		csi_msg_free(resp);
	}
	enum { N = 100 };
	static struct conc_many k[N];
	static const struct conc_opts o = { "limited", "200" };
	int64_t took = run_many(c, N, &o, 30000, k);
	csi_conn_free(c);
	extra_peer_stop(&p);
	EXPECT(resp_code == 0 && got == NEAR_LIMIT,
	       "a 3.9 MiB response through 64 KiB windows: %s, %zu bytes", resp_why, got);
	EXPECT(req_code == 0 && echoed == NEAR_LIMIT - 300,
	       "a 3.9 MiB request into 64 KiB windows: %s, %zu bytes arrived", st_str(&st), echoed);
	for (int i = 0; i < N; i++)
		EXPECT(k[i].code == 0 && !k[i].why[0], "call %d of 100 on a 16-stream server: %s", i,
		       k[i].why);
	int most = record_max_inflight("limited-");
	EXPECT(most <= 16, "the peer had %d calls in flight, over its MAX_CONCURRENT_STREAMS 16",
	       most);
	snprintf(r->note, sizeof(r->note),
		 "3.9 MiB response and request through 64 KiB windows; 100 calls of 200 ms on a "
		 "16-stream server in %lld ms, at most %d in flight", (long long)took, most);
	return PASS;
}

/*
 * 20 calls at once, each cancelled by its 300 ms deadline while the peer's handler waits 5 s:
 * every one ends DEADLINE_EXCEEDED at the client, and grpc-go's server sees every one cancelled
 * (by kcsi's RST_STREAM or, a moment later, by its own timer for the grpc-timeout, which then
 * resets the stream with CANCEL), none answered; the connection serves the next call. A reset
 * that beat kcsi's own timer once ended such a call CANCELLED (under ASan, 4 runs in 6).
 */
static int case_cancel(struct csi_conn *c, struct result *r)
{
	enum { N = 20 };
	static struct conc_many k[N];
	static const struct conc_opts o = { "cancel", "5000" };
	int64_t took = run_many(c, N, &o, 300, k);
	for (int i = 0; i < N; i++)
		EXPECT(k[i].code == 4, "call %d with a 300 ms deadline: %s, want DEADLINE_EXCEEDED", i,
		       k[i].why);
	EXPECT(took < 1500, "20 calls with 300 ms deadlines took %lld ms", (long long)took);
	int cancelled = 0, answered = 0, by_rst = 0;
	for (int tries = 0; tries < 50 && cancelled < N; tries++) {
		cancelled = answered = by_rst = 0;
		for (int i = 0; i < N; i++) {
			char key[64], line[4096];
			snprintf(key, sizeof(key), "\"key\":\"cancel-%d\",", i);
			cancelled += record_find(line, sizeof(line), key, "\"event\":\"cancelled\"",
						 NULL);
			answered += record_find(line, sizeof(line), key, "\"event\":\"ok\"", NULL);
			by_rst += record_find(line, sizeof(line), key, "\"why\":\"context canceled\"",
					      NULL);
		}
		if (cancelled < N)
			sleep_ns(50 * MS);
	}
	struct csi_status st;
	int code = probe_info(c, &st);
	EXPECT(cancelled == N, "grpc-go's server saw %d of 20 calls cancelled", cancelled);
	EXPECT(answered == 0, "grpc-go's server answered %d calls after their deadline", answered);
	EXPECT(code == 0, "the call after the cancelled ones: %s", st_str(&st));
	snprintf(r->note, sizeof(r->note), "20 calls ended DEADLINE_EXCEEDED in %lld ms; the peer "
		 "saw all 20 cancelled (%d by kcsi's RST_STREAM, %d by its own grpc-timeout timer), "
		 "answered none", (long long)took, by_rst, N - by_rst);
	return PASS;
}

static const struct {
	const char *name;
	int (*fn)(struct csi_conn *c, struct result *r);
} CASES[] = {
	{ "wait_ready", case_wait_ready },
	{ "identity", case_identity },
	{ "call_bytes", case_call_bytes },
	{ "roundtrip", case_roundtrip },
	{ "deadline", case_deadline },
	{ "status", case_status },
	{ "large", case_large },
	{ "concurrency", case_concurrency },
	{ "reconnect", case_reconnect },
	{ "keepalive", case_keepalive },
	{ "keepalive_policy", case_keepalive_policy },
	{ "server_keepalive", case_server_keepalive },
	{ "window", case_window },
	{ "cancel", case_cancel },
	{ "streams", case_streams },
};
#define N_CASES (sizeof(CASES) / sizeof(CASES[0]))

static bool wanted(const char *name, int argc, char **argv, int first)
{
	if (first >= argc)
		return true;
	for (int i = first; i < argc; i++)
		if (strcmp(argv[i], name) == 0)
			return true;
	return false;
}

int main(int argc, char **argv)
{
	struct flagset *fs = flags_new("interop_client", "interop_client [flags] [CASE ...]");
	flags_string(fs, "peer", &peer_bin, "",
		     "the grpc-go peer program (build-peers/bin/csipeer, built by make peers)");
	flags_string(fs, "dir", &dir, "", "a directory for the peer's socket, log and record");
	log_register_flags(fs);
	int first = flags_parse_or_exit(fs, argc, argv);
	char err[512];
	if (log_apply_flags(err, sizeof(err)) || !peer_bin[0] || !dir[0]) {
		fprintf(stderr, "interop_client: %s\n",
			peer_bin[0] && dir[0] ? err : "--peer and --dir are required");
		flags_free(fs);
		return 2;
	}
	for (int i = first; i < argc; i++) {
		bool known = false;
		for (size_t k = 0; k < N_CASES; k++)
			known |= strcmp(argv[i], CASES[k].name) == 0;
		if (!known) {
			fprintf(stderr, "interop_client: no case %s\n", argv[i]);
			flags_free(fs);
			return 2;
		}
	}
	snprintf(endpoint, sizeof(endpoint), "unix://%s/peer.sock", dir);
	snprintf(record_path, sizeof(record_path), "%s/peer.rec", dir);
	signal(SIGPIPE, SIG_IGN);

	int passed = 0, failed = 0;
	struct result r = { "", "" };
	struct csi_conn *c = NULL;
	if (peer_start(r.why, sizeof(r.why)) || !(c = connect_peer(NULL, &r))) {
		printf("FAIL kcsi -> grpc-go start: %s\n", r.why);
		peer_kill(SIGKILL);
		flags_free(fs);
		return 1;
	}
	for (size_t k = 0; k < N_CASES; k++) {
		if (!wanted(CASES[k].name, argc, argv, first))
			continue;
		r.why[0] = r.note[0] = '\0';
		int64_t start = mono_now_ns();
		int rc = CASES[k].fn(c, &r);
		long long ms = (mono_now_ns() - start) / MS;
		if (rc == PASS) {
			printf("ok   kcsi -> grpc-go %s (%lld ms): %s\n", CASES[k].name, ms, r.note);
			passed++;
		} else {
			printf("FAIL kcsi -> grpc-go %s: %s\n", CASES[k].name, r.why);
			failed++;
		}
		fflush(stdout);
		if (peer_pid <= 0) { /* a case killed the peer and could not restart it */
			char why[512];
			if (peer_start(why, sizeof(why)))
				printf("FAIL kcsi -> grpc-go restart: %s\n", why);
		}
	}
	csi_conn_free(c);
	peer_kill(SIGTERM);
	flags_free(fs);
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
