/*
 * One call of the CSI server: the registry of handlers by method path, dispatch (decode the
 * request, run the handler, pack its answer, log both at -v=5 with secrets stripped) and what a
 * handler asks of its context. csi_server_call() runs a call in-process, without a socket.
 */
#include "csi/server_int.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>

#include "base/log.h"
#include "base/strbuf.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "csi/endpoint.h"
#include "csi/wire.h"

static int add_handler(struct csi_server *s, const char *method,
		       const ProtobufCMethodDescriptor *md, csi_handler_fn fn, void *arg);

int csi_server_handle(struct csi_server *s, const char *method, csi_handler_fn fn, void *arg)
{
	const ProtobufCMethodDescriptor *md = csi_method_lookup(method);
	if (!md)
		return -1;
	return add_handler(s, method, md, fn, arg);
}

int csi_server_handle_service(struct csi_server *s, const ProtobufCServiceDescriptor *svc,
			      const char *name, csi_handler_fn fn, void *arg)
{
	for (unsigned i = 0; i < svc->n_methods; i++) {
		if (strcmp(svc->methods[i].name, name) != 0)
			continue;
		struct strbuf path = STRBUF_INIT;
		strbuf_addf(&path, "/%s/%s", svc->name, name);
		int rc = add_handler(s, path.buf, &svc->methods[i], fn, arg);
		strbuf_release(&path);
		return rc;
	}
	return -1;
}

static int add_handler(struct csi_server *s, const char *method,
		       const ProtobufCMethodDescriptor *md, csi_handler_fn fn, void *arg)
{
	for (struct handler *h = s->handlers; h; h = h->next) {
		if (strcmp(h->method, method) == 0) {
			h->fn = fn;
			h->arg = arg;
			return 0;
		}
	}
	struct handler *h = xcalloc(1, sizeof(*h));
	h->method = xstrdup(method);
	h->md = md;
	h->fn = fn;
	h->arg = arg;
	h->next = s->handlers;
	s->handlers = h;
	return 0;
}

const struct handler *srv_find_handler(struct csi_server *s, const char *method)
{
	for (const struct handler *h = s->handlers; h; h = h->next)
		if (strcmp(h->method, method) == 0)
			return h;
	return NULL;
}

/* ---- one call ---- */

static void log_msg(const char *what, const ProtobufCMessage *m)
{
	struct strbuf sb = STRBUF_INIT;
	csi_msg_to_json(m, CSI_JSON_STRIP_SECRETS, &sb);
	KLOG_I("GRPC %s: %s", what, sb.buf);
	strbuf_release(&sb);
}

int srv_dispatch(struct csi_server *s, struct csi_call_ctx *ctx, const uint8_t *data,
		    size_t len, uint8_t **out, size_t *outlen)
{
	const struct handler *h = srv_find_handler(s, ctx->method);
	if (!h)
		return csi_ctx_error(ctx, CSI_CODE_UNIMPLEMENTED, "unknown method %s",
				     ctx->method);
	const ProtobufCMethodDescriptor *md = h->md;
	ProtobufCMessage *req = protobuf_c_message_unpack(md->input, NULL, len, data);
	if (!req)
		return csi_ctx_error(ctx, CSI_CODE_INVALID_ARGUMENT,
				     "malformed request: cannot decode %s", md->input->name);
	bool verbose = log_v(5);
	if (verbose) {
		KLOG_I("GRPC call: %s", ctx->method);
		log_msg("request", req);
	}
	ProtobufCMessage *resp = csi_msg_new(ctx->arena, md->output);
	ctx->streaming = csi_method_server_streams(md);
	int code = h->fn(ctx, req, resp, h->arg);
	/* Pack before freeing the request: a response may borrow strings from it. */
	if (ctx->streaming) {
		if (code == 0) {
			*out = ctx->sent ? ctx->sent : xmalloc(1);
			*outlen = ctx->sent_len;
			ctx->sent = NULL;
			if (verbose)
				KLOG_I("GRPC response: %d messages in the stream", ctx->nsent);
		} else if (verbose) {
			KLOG_I("GRPC error: rpc error: code = %s desc = %s", csi_code_go_name(code),
			       ctx->message ? ctx->message : "");
		}
		free(ctx->sent);
		ctx->sent = NULL;
	} else if (code == 0) {
		size_t n = protobuf_c_message_get_packed_size(resp);
		uint8_t *buf = xmalloc(n ? n : 1);
		protobuf_c_message_pack(resp, buf);
		*out = buf;
		*outlen = n;
		if (verbose)
			log_msg("response", resp);
	} else if (verbose) {
		KLOG_I("GRPC error: rpc error: code = %s desc = %s", csi_code_go_name(code),
		       ctx->message ? ctx->message : "");
	}
	protobuf_c_message_free_unpacked(req, NULL);
	return code;
}

/* ---- inside a handler ---- */

struct csi_arena *csi_ctx_arena(struct csi_call_ctx *ctx)
{
	return ctx->arena;
}

const char *csi_ctx_method(const struct csi_call_ctx *ctx)
{
	return ctx->method;
}

int csi_ctx_error(struct csi_call_ctx *ctx, int code, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	ctx->message = csi_arena_strdup(ctx->arena, sb.buf);
	strbuf_release(&sb);
	return code;
}

int csi_ctx_send(struct csi_call_ctx *ctx, const ProtobufCMessage *msg)
{
	assert(ctx->streaming);
	size_t n = protobuf_c_message_get_packed_size(msg);
	if (n + 5 > CSI_SERVER_MAX_STREAM_BYTES - ctx->sent_len)
		return csi_ctx_error(ctx, CSI_CODE_RESOURCE_EXHAUSTED,
				     "the answer would exceed %u MiB; ask again from a later "
				     "starting_offset", CSI_SERVER_MAX_STREAM_BYTES >> 20);
	if (ctx->sent_len + n + 5 > ctx->sent_cap) {
		size_t cap = ctx->sent_cap ? ctx->sent_cap : 4096;
		while (cap < ctx->sent_len + n + 5)
			cap *= 2;
		ctx->sent = xrealloc(ctx->sent, cap);
		ctx->sent_cap = cap;
	}
	csi_wire_msg_prefix(ctx->sent + ctx->sent_len, (uint32_t)n);
	protobuf_c_message_pack(msg, ctx->sent + ctx->sent_len + 5);
	ctx->sent_len += n + 5;
	ctx->nsent++;
	if (log_v(5))
		log_msg("stream message", msg);
	return 0;
}

int64_t csi_ctx_remaining_ns(const struct csi_call_ctx *ctx)
{
	if (!ctx->deadline)
		return INT64_MAX;
	return ctx->deadline - mono_now_ns();
}

int csi_server_call(struct csi_server *s, const char *method, const uint8_t *req, size_t len,
		    uint8_t **resp, size_t *resp_len, char *message, size_t msglen)
{
	struct csi_call_ctx ctx = { 0 };
	ctx.arena = csi_arena_new();
	ctx.method = method;
	ctx.deadline = 0;
	*resp = NULL;
	*resp_len = 0;
	int code = srv_dispatch(s, &ctx, req, len, resp, resp_len);
	if (message && msglen)
		snprintf(message, msglen, "%s", ctx.message ? ctx.message : "");
	csi_arena_free(ctx.arena);
	return code;
}
