/*
 * test_csi_rpc: the CSI client against servers built on the server layer, over real unix
 * sockets. In-process servers for round trips and error paths; the csi-testdriver binary as a
 * separate process where process death or late start is the point.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/log.h"
#include "base/strbuf.h"
#include "base/timeutil.h"
#include "check.h"
#include "csi/client.h"
#include "csi/metrics.h"
#include "csi/server.h"
#include "test_csi_fill.h"

static char tmpdir[] = "/tmp/test_csi_rpc.XXXXXX";
static char sock[PATH_MAX], endpoint[PATH_MAX + 8];
static atomic_uint current_seed;

/* ---- the round-trip server: checks the request is the fixture, answers the fixture ---- */

#define STREAM_ECHOES 3

static int echo_check(struct csi_call_ctx *ctx, const ProtobufCMessage *req,
		      ProtobufCMessage *resp, void *arg)
{
	(void)arg;
	unsigned seed = atomic_load(&current_seed);
	struct csi_arena *a = csi_ctx_arena(ctx);
	ProtobufCMessage *want = csi_msg_new(a, req->descriptor);
	csi_test_fill(a, want, seed, 0);
	size_t n1, n2;
	uint8_t *b1 = csi_test_pack(req, &n1), *b2 = csi_test_pack(want, &n2);
	bool same = n1 == n2 && memcmp(b1, b2, n1) == 0;
	free(b1);
	free(b2);
	if (!same)
		return csi_ctx_error(ctx, 13, "request %s differs from the fixture",
				     req->descriptor->name);
	csi_test_fill(a, resp, seed, 0);
	if (!csi_method_server_streams(csi_method_lookup(csi_ctx_method(ctx))))
		return 0;
	/* A stream of STREAM_ECHOES copies; the scratch response may be sent again. */
	for (int i = 0; i < STREAM_ECHOES; i++)
		if (csi_ctx_send(ctx, resp))
			return 13;
	return 0;
}

static int slow(struct csi_call_ctx *ctx, const ProtobufCMessage *req, ProtobufCMessage *resp,
		void *arg)
{
	(void)req, (void)resp;
	int64_t ms = (int64_t)(intptr_t)arg;
	sleep_ns(ms * NSEC_PER_MSEC);
	(void)ctx;
	return 0;
}

static int not_found(struct csi_call_ctx *ctx, const ProtobufCMessage *req, ProtobufCMessage *resp,
		     void *arg)
{
	(void)req, (void)resp, (void)arg;
	return csi_ctx_error(ctx, 5, "volume %s not found", "vol-x");
}

static int huge_resp(struct csi_call_ctx *ctx, const ProtobufCMessage *req, ProtobufCMessage *resp,
		     void *arg)
{
	(void)req, (void)arg;
	struct csi_arena *a = csi_ctx_arena(ctx);
	char *big = csi_arena_alloc(a, 5 * 1024 * 1024 + 1);
	memset(big, 'x', 5 * 1024 * 1024);
	Csi__V1__GetPluginInfoResponse *r = (void *)resp;
	r->name = big;
	return 0;
}

static struct csi_server *srv;
static struct csi_conn *conn;

static void start_server(void)
{
	struct csi_server_opts o = CSI_SERVER_OPTS_INIT;
	o.threads = 4;
	o.grace_ns = 5 * NSEC_PER_SEC;
	srv = csi_server_new(&o);
	for (const ProtobufCServiceDescriptor *const *s = csi_services; *s; s++) {
		for (unsigned i = 0; i < (*s)->n_methods; i++) {
			char path[256];
			snprintf(path, sizeof(path), "/%s/%s", (*s)->name, (*s)->methods[i].name);
			csi_server_handle(srv, path, echo_check, NULL);
		}
	}
	/* A few methods get special behaviour for the error-path tests. */
	csi_server_handle(srv, CSI_METHOD(Node, NodeGetInfo), slow, (void *)(intptr_t)1500);
	csi_server_handle(srv, CSI_METHOD(Controller, ControllerGetVolume), not_found, NULL);
	csi_server_handle(srv, CSI_METHOD(Identity, GetPluginInfo), huge_resp, NULL);
	csi_server_handle(srv, CSI_METHOD(Node, NodeUnstageVolume), slow, (void *)(intptr_t)700);
	char err[256];
	int rc = csi_server_start(srv, endpoint, err, sizeof(err));
	if (rc)
		fprintf(stderr, "start: %s\n", err);
	CHECK_INT(rc, 0);
}

static void test_endpoints(void)
{
	char *p, err[256];
	CHECK_INT(csi_endpoint_path("unix:///run/csi/socket", &p, err, sizeof(err)), 0);
	CHECK_STR(p, "/run/csi/socket");
	free(p);
	CHECK_INT(csi_endpoint_path("unix:/run/csi/socket", &p, err, sizeof(err)), 0);
	CHECK_STR(p, "/run/csi/socket");
	free(p);
	CHECK_INT(csi_endpoint_path("/run/csi/socket", &p, err, sizeof(err)), 0);
	CHECK_STR(p, "/run/csi/socket");
	free(p);
	CHECK_INT(csi_endpoint_path("tcp://1.2.3.4:10000", &p, err, sizeof(err)), -1);
	CHECK(strstr(err, "unsupported CSI endpoint") != NULL);
	CHECK_INT(csi_endpoint_path("", &p, err, sizeof(err)), -1);
	CHECK_INT(csi_endpoint_path("unix://relative", &p, err, sizeof(err)), -1);
}

static void test_socket_mode(void)
{
	struct stat st;
	CHECK_INT(stat(sock, &st), 0);
	CHECK(S_ISSOCK(st.st_mode));
	CHECK_INT(st.st_mode & 0777, 0660);
}

struct stream_seen {
	struct csi_arena *a;
	unsigned seed;
	int n, same;
};

static int count_echo(void *arg, const ProtobufCMessage *msg)
{
	struct stream_seen *s = arg;
	ProtobufCMessage *want = csi_msg_new(s->a, msg->descriptor);
	csi_test_fill(s->a, want, s->seed, 0);
	size_t n1, n2;
	uint8_t *b1 = csi_test_pack(msg, &n1), *b2 = csi_test_pack(want, &n2);
	s->same += n1 == n2 && memcmp(b1, b2, n1) == 0;
	s->n++;
	free(b1);
	free(b2);
	return 0;
}

/* A streaming method's answer arrives as every message the handler sent, each intact. */
static void check_stream_echo(struct csi_arena *a, const char *path, const ProtobufCMessage *req,
			      const ProtobufCMessageDescriptor *out, unsigned seed)
{
	struct stream_seen seen = { a, seed, 0, 0 };
	struct csi_status st;
	int rc = csi_call_stream(conn, path, req, out, count_echo, &seen, 5 * NSEC_PER_SEC, &st);
	if (rc)
		fprintf(stderr, "%s: %s %s\n", path, csi_code_name(rc), st.message);
	CHECK_INT(rc, 0);
	CHECK_INT(seen.n, STREAM_ECHOES);
	CHECK_INT(seen.same, STREAM_ECHOES);
}

/* Every RPC of the schema round-trips every field, with both members of each oneof. */
static void test_roundtrip_all_rpcs(void)
{
	int methods = 0;
	for (unsigned seed = 0; seed < 2; seed++) {
		atomic_store(&current_seed, seed);
		for (const ProtobufCServiceDescriptor *const *s = csi_services; *s; s++) {
			for (unsigned i = 0; i < (*s)->n_methods; i++) {
				const ProtobufCMethodDescriptor *m = &(*s)->methods[i];
				char path[256];
				snprintf(path, sizeof(path), "/%s/%s", (*s)->name, m->name);
				if (!strcmp(m->name, "NodeGetInfo") ||
				    !strcmp(m->name, "ControllerGetVolume") ||
				    !strcmp(m->name, "GetPluginInfo") ||
				    !strcmp(m->name, "NodeUnstageVolume"))
					continue;
				struct csi_arena *a = csi_arena_new();
				ProtobufCMessage *req = csi_msg_new(a, m->input);
				csi_test_fill(a, req, seed, 0);
				if (csi_method_server_streams(m)) {
					check_stream_echo(a, path, req, m->output, seed);
					csi_arena_free(a);
					methods++;
					continue;
				}
				ProtobufCMessage *resp;
				struct csi_status st;
				int rc = csi_call(conn, path, req, m->output, &resp, 5 * NSEC_PER_SEC,
						  &st);
				if (rc)
					fprintf(stderr, "%s: %s %s\n", path, csi_code_name(rc),
						st.message);
				CHECK_INT(rc, 0);
				if (rc == 0) {
					ProtobufCMessage *want = csi_msg_new(a, m->output);
					csi_test_fill(a, want, seed, 0);
					size_t n1, n2;
					uint8_t *b1 = csi_test_pack(resp, &n1);
					uint8_t *b2 = csi_test_pack(want, &n2);
					CHECK(n1 == n2 && memcmp(b1, b2, n1) == 0);
					free(b1);
					free(b2);
					csi_msg_free(resp);
				}
				csi_arena_free(a);
				methods++;
			}
		}
	}
	CHECK_INT(methods, 2 * (36 - 4)); /* v1.13: 36 RPCs */
}

/* The typed helpers and a sample of field values, read back through the generated structs. */
static void test_typed_helper_fields(void)
{
	atomic_store(&current_seed, 0);
	struct csi_arena *a = csi_arena_new();
	Csi__V1__CreateVolumeRequest *req = csi_msg_new(a, &csi__v1__create_volume_request__descriptor);
	csi_test_fill(a, &req->base, 0, 0);
	CHECK_INT(req->n_secrets, 2);
	Csi__V1__CreateVolumeResponse *resp;
	struct csi_status st;
	CHECK_INT(csi_create_volume(conn, req, &resp, 5 * NSEC_PER_SEC, &st), 0);
	if (resp) {
		CHECK(resp->volume != NULL);
		CHECK_STR(resp->volume->volume_id, "volume_id-0-0");
		CHECK_INT(resp->volume->n_volume_context, 2);
		CHECK_STR(csi_map_get(resp->volume->n_volume_context, resp->volume->volume_context,
				      "key-1-0"), "value-1-0");
		CHECK(resp->volume->content_source != NULL);
		CHECK_INT(resp->volume->content_source->type_case,
			  CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT);
		csi_msg_free(resp);
	}
	Csi__V1__CreateSnapshotRequest *sreq =
		csi_msg_new(a, &csi__v1__create_snapshot_request__descriptor);
	csi_test_fill(a, &sreq->base, 0, 0);
	Csi__V1__CreateSnapshotResponse *sresp;
	CHECK_INT(csi_create_snapshot(conn, sreq, &sresp, 5 * NSEC_PER_SEC, &st), 0);
	if (sresp) {
		CHECK(sresp->snapshot && sresp->snapshot->creation_time);
		CHECK(sresp->snapshot->creation_time->seconds != 0);
		CHECK(sresp->snapshot->creation_time->nanos != 0);
		csi_msg_free(sresp);
	}
	Csi__V1__GetCapacityRequest *creq = csi_msg_new(a, &csi__v1__get_capacity_request__descriptor);
	csi_test_fill(a, &creq->base, 0, 0);
	Csi__V1__GetCapacityResponse *cresp;
	CHECK_INT(csi_get_capacity(conn, creq, &cresp, 5 * NSEC_PER_SEC, &st), 0);
	if (cresp) {
		CHECK(cresp->maximum_volume_size && cresp->minimum_volume_size);
		CHECK(cresp->maximum_volume_size->value != 0);
		csi_msg_free(cresp);
	}
	csi_arena_free(a);
}

static void test_deadline_exceeded(void)
{
	Csi__V1__NodeGetInfoRequest req = CSI__V1__NODE_GET_INFO_REQUEST__INIT;
	Csi__V1__NodeGetInfoResponse *resp;
	struct csi_status st;
	int64_t t0 = mono_now_ns();
	int rc = csi_node_get_info(conn, &req, &resp, 200 * NSEC_PER_MSEC, &st);
	CHECK_INT(rc, 4);
	CHECK_INT(st.code, 4);
	CHECK(resp == NULL);
	CHECK(mono_now_ns() - t0 < 1400 * NSEC_PER_MSEC);
}

static void test_error_status(void)
{
	Csi__V1__ControllerGetVolumeRequest req = CSI__V1__CONTROLLER_GET_VOLUME_REQUEST__INIT;
	Csi__V1__ControllerGetVolumeResponse *resp;
	struct csi_status st;
	CHECK_INT(csi_controller_get_volume(conn, &req, &resp, 5 * NSEC_PER_SEC, &st), 5);
	CHECK_STR(st.message, "volume vol-x not found");
	CHECK(resp == NULL);
}

static void test_unimplemented(void)
{
	struct csi_server_opts o = CSI_SERVER_OPTS_INIT;
	struct csi_server *s2 = csi_server_new(&o);
	char ep[PATH_MAX + 16], err[256];
	snprintf(ep, sizeof(ep), "unix://%s/unimpl.sock", tmpdir);
	CHECK_INT(csi_server_handle(s2, CSI_METHOD(Identity, Probe), echo_check, NULL), 0);
	CHECK_INT(csi_server_handle(s2, "/csi.v1.Identity/NoSuchMethod", echo_check, NULL), -1);
	CHECK_INT(csi_server_start(s2, ep, err, sizeof(err)), 0);
	struct csi_conn *c = csi_connect(ep, NULL, err, sizeof(err));
	CHECK(c != NULL);
	if (c) {
		Csi__V1__NodeGetInfoRequest req = CSI__V1__NODE_GET_INFO_REQUEST__INIT;
		Csi__V1__NodeGetInfoResponse *resp;
		struct csi_status st;
		CHECK_INT(csi_node_get_info(c, &req, &resp, 5 * NSEC_PER_SEC, &st), 12);
		void *out;
		size_t outlen;
		CHECK_INT(csi_call_bytes(c, "/csi.v1.Foo/Bar", "", 0, &out, &outlen,
					 5 * NSEC_PER_SEC, &st), 12);
		csi_conn_free(c);
	}
	csi_server_free(s2);
}

static void test_malformed_and_oversize(void)
{
	struct csi_status st;
	void *out;
	size_t outlen;
	/* A length-delimited field whose length runs past the end: not decodable. */
	static const uint8_t garbage[] = { 0x0a, 0x7f, 'x', 'y' };
	CHECK_INT(csi_call_bytes(conn, CSI_METHOD(Controller, CreateVolume), garbage,
				 sizeof(garbage), &out, &outlen, 5 * NSEC_PER_SEC, &st), 3);
	CHECK(strstr(st.message, "malformed request") != NULL);

	/* A 5 MiB request exceeds the server's 4 MiB limit. */
	struct csi_arena *a = csi_arena_new();
	Csi__V1__CreateVolumeRequest *req = csi_msg_new(a, &csi__v1__create_volume_request__descriptor);
	char *big = csi_arena_alloc(a, 5 * 1024 * 1024 + 1);
	memset(big, 'y', 5 * 1024 * 1024);
	req->name = big;
	Csi__V1__CreateVolumeResponse *resp;
	CHECK_INT(csi_create_volume(conn, req, &resp, 10 * NSEC_PER_SEC, &st), 8);
	csi_arena_free(a);
	CHECK(strstr(st.message, "larger than max") != NULL);

	/* A 5 MiB response exceeds the client's 4 MiB limit. */
	Csi__V1__GetPluginInfoRequest ireq = CSI__V1__GET_PLUGIN_INFO_REQUEST__INIT;
	Csi__V1__GetPluginInfoResponse *iresp;
	CHECK_INT(csi_get_plugin_info(conn, &ireq, &iresp, 10 * NSEC_PER_SEC, &st), 8);
	/* Rejected messages fail the call, not the connection. */
	CHECK(!csi_conn_lost(conn));

	/* The server survived all of that. */
	Csi__V1__ProbeRequest preq = CSI__V1__PROBE_REQUEST__INIT;
	Csi__V1__ProbeResponse *presp;
	atomic_store(&current_seed, 0);
	CHECK_INT(csi_probe(conn, &preq, &presp, 5 * NSEC_PER_SEC, &st), 0);
	csi_msg_free(presp);
}

static void test_secrets_never_logged(void)
{
	char logpath[PATH_MAX];
	snprintf(logpath, sizeof(logpath), "%s/log", tmpdir);
	int fd = open(logpath, O_CREAT | O_TRUNC | O_WRONLY, 0600);
	CHECK(fd >= 0);
	log_set_output_fd(fd);
	log_set_verbosity(10);
	atomic_store(&current_seed, 0);
	struct csi_arena *a = csi_arena_new();
	Csi__V1__CreateVolumeRequest *req = csi_msg_new(a, &csi__v1__create_volume_request__descriptor);
	csi_test_fill(a, &req->base, 0, 0);
	/* Planted values in the secret map, as keys and values. */
	req->secrets[0]->value = "planted-s3cret-value";
	req->secrets[1]->key = "planted-s3cret-key";
	Csi__V1__CreateVolumeResponse *resp;
	struct csi_status st;
	/* The server answers INTERNAL (the request is not the fixture any more); logged too. */
	csi_create_volume(conn, req, &resp, 5 * NSEC_PER_SEC, &st);
	csi_msg_free(resp);
	Csi__V1__NodePublishVolumeRequest *np =
		csi_msg_new(a, &csi__v1__node_publish_volume_request__descriptor);
	csi_test_fill(a, &np->base, 0, 0);
	np->secrets[0]->value = "planted-s3cret-value";
	Csi__V1__NodePublishVolumeResponse *npr;
	csi_node_publish_volume(conn, np, &npr, 5 * NSEC_PER_SEC, &st);
	csi_msg_free(npr);
	csi_arena_free(a);
	log_set_verbosity(0);
	log_set_output_fd(-1);
	close(fd);

	FILE *f = fopen(logpath, "r");
	CHECK(f != NULL);
	struct strbuf all = STRBUF_INIT;
	char line[65536];
	while (f && fgets(line, sizeof(line), f))
		strbuf_addstr(&all, line);
	if (f)
		fclose(f);
	CHECK(strstr(all.buf, "GRPC call: /csi.v1.Controller/CreateVolume") != NULL);
	CHECK(strstr(all.buf, "GRPC request: {") != NULL);
	CHECK(strstr(all.buf, "\"secrets\":\"***stripped***\"") != NULL);
	CHECK(strstr(all.buf, "\"name\":\"name-0-0\"") != NULL);
	CHECK(strstr(all.buf, "planted-s3cret") == NULL);
	strbuf_release(&all);
}

/* --max-grpc-log-length: logged JSON is cut to the limit and marked with "...". */
static void test_log_truncation(void)
{
	char logpath[PATH_MAX], err[256];
	snprintf(logpath, sizeof(logpath), "%s/log2", tmpdir);
	int fd = open(logpath, O_CREAT | O_TRUNC | O_WRONLY, 0600);
	struct csi_conn_opts o = CSI_CONN_OPTS_INIT;
	o.max_log_len = 24;
	struct csi_conn *c = csi_connect(endpoint, &o, err, sizeof(err));
	CHECK(c != NULL);
	if (!c)
		return;
	log_set_output_fd(fd);
	log_set_verbosity(5);
	struct csi_arena *a = csi_arena_new();
	Csi__V1__CreateVolumeRequest *req = csi_msg_new(a, &csi__v1__create_volume_request__descriptor);
	req->name = "a-rather-long-volume-name-that-will-be-cut";
	Csi__V1__CreateVolumeResponse *resp;
	struct csi_status st;
	csi_create_volume(c, req, &resp, 5 * NSEC_PER_SEC, &st);
	csi_msg_free(resp);
	log_set_verbosity(0);
	log_set_output_fd(-1);
	close(fd);
	csi_arena_free(a);
	csi_conn_free(c);
	FILE *f = fopen(logpath, "r");
	char line[4096];
	bool found = false;
	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "GRPC request: {\"name\":\"a-rather-long-v...\n"))
			found = true;
	if (f)
		fclose(f);
	CHECK(found);
}

static void *call_slow(void *arg)
{
	struct csi_status *st = arg;
	Csi__V1__NodeUnstageVolumeRequest req = CSI__V1__NODE_UNSTAGE_VOLUME_REQUEST__INIT;
	Csi__V1__NodeUnstageVolumeResponse *resp;
	csi_node_unstage_volume(conn, &req, &resp, 10 * NSEC_PER_SEC, st);
	csi_msg_free(resp);
	return NULL;
}

static atomic_int observed;
static void observer(void *arg, const char *method, int code, int64_t ns)
{
	(void)arg, (void)method, (void)code, (void)ns;
	atomic_fetch_add(&observed, 1);
}

/* Stop lets a call in flight finish, and the socket file goes away. */
static void test_graceful_stop(void)
{
	struct csi_status st = { .code = -1 };
	pthread_t t;
	pthread_create(&t, NULL, call_slow, &st);
	sleep_ns(300 * NSEC_PER_MSEC); /* the call is inside its 700 ms handler by now */
	csi_server_stop(srv);
	pthread_join(t, NULL);
	CHECK_INT(st.code, 0);
	struct stat sb;
	CHECK(stat(sock, &sb) != 0);
}

static pid_t spawn_driver(const char *ep, const char *extra)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 32);
	if (n <= 0)
		return -1;
	exe[n] = '\0';
	strcpy(strrchr(exe, '/') + 1, "csi-testdriver");
	pid_t pid = fork();
	if (pid == 0) {
		char epflag[PATH_MAX + 32];
		snprintf(epflag, sizeof(epflag), "--endpoint=%s", ep);
		if (extra)
			execl(exe, exe, epflag, extra, (char *)NULL);
		else
			execl(exe, exe, epflag, (char *)NULL);
		_exit(127);
	}
	return pid;
}

static atomic_int lost;
static void on_lost(void *arg)
{
	(void)arg;
	atomic_fetch_add(&lost, 1);
}

/* A driver that starts late is waited for; killing it fires the loss callback. */
static void test_late_start_and_loss(void)
{
	char ep[PATH_MAX + 16], err[256];
	snprintf(ep, sizeof(ep), "unix://%s/late.sock", tmpdir);
	pid_t pid = spawn_driver(ep, "--start-delay=1s");
	CHECK(pid > 0);
	struct csi_conn_opts o = CSI_CONN_OPTS_INIT;
	o.connect_timeout_ns = 60 * NSEC_PER_SEC;
	o.on_lost = on_lost;
	o.observer = observer;
	o.log_interval_ns = 250 * NSEC_PER_MSEC;
	char logpath[PATH_MAX];
	snprintf(logpath, sizeof(logpath), "%s/log3", tmpdir);
	int fd = open(logpath, O_CREAT | O_TRUNC | O_WRONLY, 0600);
	log_set_output_fd(fd);
	int64_t t0 = mono_now_ns();
	struct csi_conn *c = csi_connect(ep, &o, err, sizeof(err));
	log_set_output_fd(-1);
	close(fd);
	CHECK(c != NULL);
	CHECK(mono_now_ns() - t0 >= 900 * NSEC_PER_MSEC);
	/* Progress was logged while waiting. */
	FILE *f = fopen(logpath, "r");
	char line[1024];
	int waits = 0;
	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "Still connecting to unix://"))
			waits++;
	if (f)
		fclose(f);
	CHECK(waits >= 2);
	if (c) {
		CHECK_INT(csi_wait_ready(c, 5 * NSEC_PER_SEC, err, sizeof(err)), 0);
		CHECK(atomic_load(&observed) >= 1);
		CHECK_INT(atomic_load(&lost), 0);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		pid = -1;
		for (int i = 0; i < 200 && !atomic_load(&lost); i++)
			sleep_ns(50 * NSEC_PER_MSEC);
		CHECK_INT(atomic_load(&lost), 1);
		/* Calls after the loss fail fast with UNAVAILABLE. */
		Csi__V1__ProbeRequest req = CSI__V1__PROBE_REQUEST__INIT;
		Csi__V1__ProbeResponse *resp;
		struct csi_status st;
		CHECK_INT(csi_probe(c, &req, &resp, 5 * NSEC_PER_SEC, &st), 14);
		csi_conn_free(c);
	}
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
}

/* Connect gives up after its timeout when nothing ever listens. */
static void test_connect_timeout(void)
{
	char ep[PATH_MAX + 16], err[256];
	snprintf(ep, sizeof(ep), "unix://%s/never.sock", tmpdir);
	struct csi_conn_opts o = CSI_CONN_OPTS_INIT;
	o.connect_timeout_ns = 300 * NSEC_PER_MSEC;
	CHECK(csi_connect(ep, &o, err, sizeof(err)) == NULL);
	CHECK(strstr(err, "timed out") != NULL);
}

/* Stale sockets are replaced; live ones and non-sockets are not. */
static void test_socket_claiming(void)
{
	char path[100], ep[PATH_MAX + 16], err[256];
	snprintf(path, sizeof(path), "%s/stale.sock", tmpdir);
	snprintf(ep, sizeof(ep), "unix://%s", path);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	CHECK_INT(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd); /* the file stays, nobody listens: stale */

	struct csi_server *a = csi_server_new(NULL);
	csi_server_handle(a, CSI_METHOD(Identity, Probe), echo_check, NULL);
	CHECK_INT(csi_server_start(a, ep, err, sizeof(err)), 0);

	struct csi_server *b = csi_server_new(NULL);
	CHECK_INT(csi_server_start(b, ep, err, sizeof(err)), -1);
	CHECK(strstr(err, "another server is listening") != NULL);
	csi_server_free(b);
	csi_server_free(a);

	char file[PATH_MAX];
	snprintf(file, sizeof(file), "%s/plain-file", tmpdir);
	FILE *f = fopen(file, "w");
	fputs("keep me\n", f);
	fclose(f);
	snprintf(ep, sizeof(ep), "unix://%s", file);
	struct csi_server *c = csi_server_new(NULL);
	CHECK_INT(csi_server_start(c, ep, err, sizeof(err)), -1);
	CHECK(strstr(err, "not a socket") != NULL);
	csi_server_free(c);
	struct stat st;
	CHECK_INT(stat(file, &st), 0);
}

static void test_metrics(void)
{
	struct csi_metrics *m = csi_metrics_new();
	csi_metrics_set_driver(m, "d.example.com");
	csi_metrics_observe(m, "/csi.v1.Identity/Probe", 0, 20 * NSEC_PER_MSEC);
	csi_metrics_observe(m, "/csi.v1.Identity/Probe", 0, 2 * NSEC_PER_SEC);
	csi_metrics_observe(m, "/csi.v1.Controller/CreateVolume", 4, 700 * NSEC_PER_SEC);
	struct strbuf sb = STRBUF_INIT;
	csi_metrics_render(m, &sb);
	CHECK(strstr(sb.buf, "# TYPE csi_sidecar_operations_seconds histogram") != NULL);
	CHECK(strstr(sb.buf, "csi_sidecar_operations_seconds_bucket{driver_name=\"d.example.com\","
			     "grpc_status_code=\"OK\",method_name=\"/csi.v1.Identity/Probe\","
			     "le=\"0.1\"} 1\n") != NULL);
	CHECK(strstr(sb.buf, "grpc_status_code=\"OK\",method_name=\"/csi.v1.Identity/Probe\","
			     "le=\"2.5\"} 2\n") != NULL);
	CHECK(strstr(sb.buf, "grpc_status_code=\"DeadlineExceeded\",method_name=\"/csi.v1."
			     "Controller/CreateVolume\",le=\"600\"} 0\n") != NULL);
	CHECK(strstr(sb.buf, "method_name=\"/csi.v1.Controller/CreateVolume\",le=\"+Inf\"} 1\n") !=
	      NULL);
	CHECK(strstr(sb.buf, "csi_sidecar_operations_seconds_count{driver_name=\"d.example.com\","
			     "grpc_status_code=\"OK\",method_name=\"/csi.v1.Identity/Probe\"} 2\n") !=
	      NULL);
	strbuf_release(&sb);
	csi_metrics_free(m);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(sock, sizeof(sock), "%s/csi.sock", tmpdir);
	snprintf(endpoint, sizeof(endpoint), "unix://%s", sock);
	RUN(test_endpoints);
	RUN(test_metrics);
	start_server();
	char err[256];
	conn = csi_connect(endpoint, NULL, err, sizeof(err));
	CHECK(conn != NULL);
	if (conn) {
		RUN(test_socket_mode);
		RUN(test_roundtrip_all_rpcs);
		RUN(test_typed_helper_fields);
		RUN(test_deadline_exceeded);
		RUN(test_error_status);
		RUN(test_malformed_and_oversize);
		RUN(test_secrets_never_logged);
		RUN(test_log_truncation);
		RUN(test_graceful_stop);
		csi_conn_free(conn);
	}
	csi_server_free(srv);
	RUN(test_unimplemented);
	RUN(test_connect_timeout);
	RUN(test_socket_claiming);
	RUN(test_late_start_and_loss);
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", tmpdir);
	return CHECK_DONE();
}
