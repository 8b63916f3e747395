/*
 * grpc-peer/libgrpc_server: serves a struct csi_server's handlers through Debian's libgrpc
 * instead of kcsi's own transport, for interoperability tests (see libgrpc_server.h). Each call
 * is run with csi_server_call(): the same lookup, decode, handler and encode as kcsi's server,
 * so only the HTTP/2 and gRPC layer differs. A server-streaming answer goes out message by
 * message (send_stream).
 *
 * Design: N worker threads, each with its own completion queue; a worker asks for one call at a
 * time, reads the request, runs it, answers, then asks for the next. Stop: shutdown_and_notify,
 * a grace second, then every call is cancelled.
 */
#include "libgrpc_server.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include "base/log.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "csi/client.h"
#include "csi/wire.h"

struct peer_worker {
	struct csi_server *s;
	grpc_server *srv;
	grpc_completion_queue *cq;
	pthread_t thread;
};

static bool wait_tag(grpc_completion_queue *cq, void *tag)
{
	for (;;) {
		grpc_event ev = grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME),
							   NULL);
		if (ev.type == GRPC_QUEUE_SHUTDOWN)
			return false;
		if (ev.type == GRPC_OP_COMPLETE && ev.tag == tag)
			return ev.success != 0;
	}
}

/*
 * A streaming method's answer (csi_server_call gives its messages length-prefixed, one after the
 * other): the initial metadata, then one SEND_MESSAGE batch per message, as libgrpc allows one
 * message in flight at a time. The status follows in the caller's last batch. Takes out.
 */
static void send_stream(struct peer_worker *w, grpc_call *call, uint8_t *out, size_t outlen)
{
	grpc_op op = { .op = GRPC_OP_SEND_INITIAL_METADATA };
	bool ok = grpc_call_start_batch(call, &op, 1, (void *)4, NULL) == GRPC_CALL_OK &&
		  wait_tag(w->cq, (void *)4);
	size_t off = 0;
	const uint8_t *m;
	uint32_t mlen;
	while (ok && csi_wire_next(out, outlen, &off, UINT32_MAX, &m, &mlen) == CSI_WIRE_NEXT_MSG) {
		grpc_slice s = grpc_slice_from_copied_buffer((const char *)m, mlen);
		grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
		grpc_slice_unref(s);
		op = (grpc_op){ .op = GRPC_OP_SEND_MESSAGE };
		op.data.send_message.send_message = bb;
		ok = grpc_call_start_batch(call, &op, 1, (void *)4, NULL) == GRPC_CALL_OK &&
		     wait_tag(w->cq, (void *)4);
		grpc_byte_buffer_destroy(bb);
	}
	free(out);
}

static void serve_one(struct peer_worker *w, grpc_call *call, grpc_call_details *det)
{
	char method[512];
	size_t ml = GRPC_SLICE_LENGTH(det->method);
	if (ml >= sizeof(method))
		ml = sizeof(method) - 1;
	memcpy(method, GRPC_SLICE_START_PTR(det->method), ml);
	method[ml] = '\0';

	grpc_byte_buffer *req_bb = NULL;
	grpc_op recv = { .op = GRPC_OP_RECV_MESSAGE };
	recv.data.recv_message.recv_message = &req_bb;
	int code;
	char message[1024] = "";
	uint8_t *out = NULL;
	size_t outlen = 0;
	if (grpc_call_start_batch(call, &recv, 1, (void *)2, NULL) != GRPC_CALL_OK ||
	    !wait_tag(w->cq, (void *)2) || !req_bb) {
		code = 3;
		snprintf(message, sizeof(message), "no request message");
	} else {
		grpc_byte_buffer_reader r;
		grpc_byte_buffer_reader_init(&r, req_bb);
		grpc_slice all = grpc_byte_buffer_reader_readall(&r);
		grpc_byte_buffer_reader_destroy(&r);
		code = csi_server_call(w->s, method, GRPC_SLICE_START_PTR(all),
				       GRPC_SLICE_LENGTH(all), &out, &outlen, message,
				       sizeof(message));
		grpc_slice_unref(all);
	}
	if (req_bb)
		grpc_byte_buffer_destroy(req_bb);

	grpc_byte_buffer *resp_bb = NULL;
	const ProtobufCMethodDescriptor *md = csi_method_lookup(method);
	bool streamed = code == 0 && md && csi_method_server_streams(md);
	if (streamed) {
		send_stream(w, call, out, outlen);
	} else if (code == 0) {
		grpc_slice resp = grpc_slice_new(out, outlen, free);
		resp_bb = grpc_raw_byte_buffer_create(&resp, 1);
		grpc_slice_unref(resp);
	} else {
		free(out);
	}
	grpc_slice details = grpc_slice_from_copied_string(message);
	int cancelled = 0;
	grpc_op ops[4];
	memset(ops, 0, sizeof(ops));
	size_t n = 0;
	if (!streamed)
		ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
	if (resp_bb) {
		ops[n].op = GRPC_OP_SEND_MESSAGE;
		ops[n++].data.send_message.send_message = resp_bb;
	}
	ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
	ops[n].data.send_status_from_server.status = (grpc_status_code)code;
	ops[n++].data.send_status_from_server.status_details = &details;
	ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
	ops[n++].data.recv_close_on_server.cancelled = &cancelled;
	if (grpc_call_start_batch(call, ops, n, (void *)3, NULL) == GRPC_CALL_OK)
		wait_tag(w->cq, (void *)3);
	grpc_slice_unref(details);
	if (resp_bb)
		grpc_byte_buffer_destroy(resp_bb);
}

static void *worker_main(void *arg)
{
	struct peer_worker *w = arg;
	for (;;) {
		grpc_call *call = NULL;
		grpc_call_details det;
		grpc_metadata_array md;
		grpc_call_details_init(&det);
		grpc_metadata_array_init(&md);
		bool ok = grpc_server_request_call(w->srv, &call, &det, &md, w->cq, w->cq,
						   (void *)1) == GRPC_CALL_OK &&
			  wait_tag(w->cq, (void *)1);
		if (ok)
			serve_one(w, call, &det);
		if (call)
			grpc_call_unref(call);
		grpc_call_details_destroy(&det);
		grpc_metadata_array_destroy(&md);
		if (!ok)
			break;
	}
	return NULL;
}

static int stop_pipe[2] = { -1, -1 };

static void on_signal(int sig)
{
	(void)sig;
	ssize_t w = write(stop_pipe[1], "s", 1);
	(void)w;
}

int libgrpc_peer_serve(struct csi_server *s, const char *endpoint, int threads,
		       int max_recv_bytes)
{
	char *path, err[256];
	if (csi_endpoint_path(endpoint, &path, err, sizeof(err))) {
		KLOG_E("%s", err);
		return -1;
	}
	unlink(path);
	if (pipe2(stop_pipe, O_CLOEXEC) != 0) {
		free(path);
		return -1;
	}
	grpc_init();
	grpc_arg args[] = {
		{ .type = GRPC_ARG_INTEGER, .key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
		  .value.integer = max_recv_bytes },
	};
	grpc_channel_args cargs = { .num_args = 1, .args = args };
	grpc_server *srv = grpc_server_create(&cargs, NULL);
	struct peer_worker *ws = xcalloc((size_t)threads, sizeof(*ws));
	for (int i = 0; i < threads; i++) {
		ws[i].s = s;
		ws[i].srv = srv;
		ws[i].cq = grpc_completion_queue_create_for_next(NULL);
		grpc_server_register_completion_queue(srv, ws[i].cq, NULL);
	}
	struct strbuf target = STRBUF_INIT;
	strbuf_addf(&target, "unix:%s", path);
	grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
	int port = grpc_server_add_http2_port(srv, target.buf, creds);
	grpc_server_credentials_release(creds);
	strbuf_release(&target);
	if (port == 0) {
		KLOG_E("libgrpc peer: cannot listen on %s", path);
		free(path);
		return -1;
	}
	grpc_server_start(srv);
	for (int i = 0; i < threads; i++)
		pthread_create(&ws[i].thread, NULL, worker_main, &ws[i]);
	KLOG_I("libgrpc peer: listening for CSI connections on %s", path);

	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	char c;
	while (read(stop_pipe[0], &c, 1) < 0)
		;
	KLOG_I("libgrpc peer: stopping");
	grpc_completion_queue *scq = grpc_completion_queue_create_for_pluck(NULL);
	grpc_server_shutdown_and_notify(srv, scq, (void *)9);
	grpc_server_cancel_all_calls(srv);
	grpc_completion_queue_pluck(scq, (void *)9, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
	grpc_completion_queue_destroy(scq);
	for (int i = 0; i < threads; i++) {
		pthread_join(ws[i].thread, NULL);
		grpc_completion_queue_shutdown(ws[i].cq);
		while (grpc_completion_queue_next(ws[i].cq, gpr_inf_future(GPR_CLOCK_REALTIME),
						  NULL).type != GRPC_QUEUE_SHUTDOWN)
			;
	}
	grpc_server_destroy(srv);
	for (int i = 0; i < threads; i++)
		grpc_completion_queue_destroy(ws[i].cq);
	free(ws);
	unlink(path);
	free(path);
	grpc_shutdown();
	return 0;
}
