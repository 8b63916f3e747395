/*
 * csi/server: serve CSI (or any service of the schema) over a unix socket, for drivers.
 *
 * A driver registers one handler per full method path, then starts the server:
 *
 *     static int probe(struct csi_call_ctx *ctx, const ProtobufCMessage *req,
 *                      ProtobufCMessage *resp, void *arg)
 *     {
 *             Csi__V1__ProbeResponse *r = (Csi__V1__ProbeResponse *)resp;
 *             r->ready = csi_msg_new(csi_ctx_arena(ctx), &google__protobuf__bool_value__descriptor);
 *             r->ready->value = 1;
 *             return 0;                                    // OK
 *     }
 *     struct csi_server_opts o = CSI_SERVER_OPTS_INIT;
 *     struct csi_server *s = csi_server_new(&o);
 *     csi_server_handle(s, CSI_METHOD(Identity, Probe), probe, NULL);
 *     if (csi_server_start(s, "unix:///csi/csi.sock", err, sizeof err)) ... fail
 *     csi_server_run(s);                                    // until SIGTERM/SIGINT
 *     csi_server_free(s);
 *
 * Handler contract:
 *   - req is the decoded request, owned by the server, valid during the call only.
 *   - resp is a pre-initialised (all defaults) response of the method's output type. Anything
 *     the handler hangs off it must live until the handler's return is packed: allocate it from
 *     csi_ctx_arena(ctx) (freed after the response is sent), point into req (freed after the
 *     response is packed), or point at memory the driver keeps.
 *   - Return 0 for OK, or a gRPC status code; csi_ctx_error(ctx, code, fmt, ...) sets the
 *     message and returns code, so `return csi_ctx_error(ctx, 5, "volume %s not found", id);`.
 *   - Handlers run on the server's worker threads (opts.threads of them): they must be
 *     thread-safe, and a handler that blocks occupies one thread.
 *
 * Behaviour:
 *   - A method with no handler answers UNIMPLEMENTED (as does a path not in the schema).
 *   - Undecodable request bytes answer INVALID_ARGUMENT; the handler is not called.
 *   - Requests over opts.max_recv_bytes are refused with RESOURCE_EXHAUSTED, decided from the
 *     message's length prefix before anything of that size is allocated.
 *   - Calls beyond opts.threads wait in a queue; one whose stream ends there (client cancel,
 *     closed connection) leaves it, and one whose deadline passed there is answered
 *     DEADLINE_EXCEEDED without running its handler. Bounds on connections, streams and buffered
 *     bytes are in server.c (docs/development.md, limits table).
 *   - At start a stale socket file (nothing listening) is removed; if another server answers on
 *     it, start fails rather than steal the socket; a path that exists but is not a socket is
 *     left alone and start fails. The socket gets opts.socket_mode (default 0660).
 *   - Stop (csi_server_stop, or SIGTERM/SIGINT in csi_server_run) refuses new calls (GOAWAY),
 *     lets calls in flight finish for up to opts.grace_ns, then closes every connection; it
 *     waits for handlers still running to return.
 *   - At -v=5 each call is logged like the client does, secrets stripped.
 */
#ifndef KCSI_CSI_SERVER_H
#define KCSI_CSI_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "csi/msg.h"

struct csi_server;
struct csi_call_ctx;

typedef int (*csi_handler_fn)(struct csi_call_ctx *ctx, const ProtobufCMessage *req,
			      ProtobufCMessage *resp, void *arg);

struct csi_server_opts {
	int threads;        /* worker threads, i.e. concurrent calls (default 4) */
	mode_t socket_mode; /* permissions of the socket file (default 0660) */
	int64_t grace_ns;   /* how long a stop waits for calls in flight (default 10 s) */
	int max_recv_bytes; /* largest request accepted (default 4 MiB) */
};
#define CSI_SERVER_OPTS_INIT { 4, 0660, 10000000000LL, 4 * 1024 * 1024 }

struct csi_server *csi_server_new(const struct csi_server_opts *opts);
/*
 * Registers fn for a method path such as CSI_METHOD(Controller, CreateVolume). Returns 0, or -1
 * when the schema has no such method. Register before csi_server_start(); a later registration
 * for the same path replaces the earlier one.
 */
int csi_server_handle(struct csi_server *s, const char *method, csi_handler_fn fn, void *arg);
/*
 * The same for a method of a service outside the CSI schema (the kubelet's
 * pluginregistration.Registration): `svc` is its generated descriptor, `name` the method name
 * ("GetInfo"); the path served is "/<svc->name>/<name>". Returns 0, or -1 when svc has no such
 * method.
 */
int csi_server_handle_service(struct csi_server *s, const ProtobufCServiceDescriptor *svc,
			      const char *name, csi_handler_fn fn, void *arg);
/* Binds the endpoint (see client.h for forms) and starts the workers. 0, or -1 with err. */
int csi_server_start(struct csi_server *s, const char *endpoint, char *err, size_t errlen);
/*
 * Blocks until SIGTERM or SIGINT (or csi_server_stop from another thread), then stops. It
 * installs process-wide handlers for those signals while it runs (restored on return), so one
 * server per process runs this at a time.
 */
void csi_server_run(struct csi_server *s);
/* Graceful stop as described above; safe to call from any thread, more than once. */
void csi_server_stop(struct csi_server *s);
/* Stops if needed, removes the socket file, frees everything. NULL is a no-op. */
void csi_server_free(struct csi_server *s);

/*
 * Runs one call in this process as a gRPC call of `method` with request bytes req[0..len) would
 * run (lookup, decode, handler, encode), without the transport and with no deadline: for tests
 * and fuzzing. The server need not be started. Returns the status code; for OK *resp is the
 * packed response (malloc'd, *resp_len bytes; the caller frees it), else NULL; for a streaming
 * method it is the messages sent, each with its 5-byte gRPC length prefix. message, when
 * not NULL, receives the status message ("" for none).
 */
int csi_server_call(struct csi_server *s, const char *method, const uint8_t *req, size_t len,
		    uint8_t **resp, size_t *resp_len, char *message, size_t msglen);

/* ---- inside a handler ---- */
struct csi_arena *csi_ctx_arena(struct csi_call_ctx *ctx);
/* Full method path of this call. */
const char *csi_ctx_method(const struct csi_call_ctx *ctx);
/* Sets the status message; returns code so a handler can `return csi_ctx_error(...)`. */
int csi_ctx_error(struct csi_call_ctx *ctx, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/*
 * Server streaming (csi_method_server_streams(): GetMetadataAllocated, GetMetadataDelta): the
 * answer is the messages the handler passes here, in order; `resp` is then a scratch message it
 * may fill, send, reset and fill again (it is packed at once). Zero messages is a valid answer.
 * The messages are sent when the handler returns 0; an error status replaces them all. Returns
 * 0, or RESOURCE_EXHAUSTED (message set, for the handler to return) once the answer would pass
 * 16 MiB.
 */
int csi_ctx_send(struct csi_call_ctx *ctx, const ProtobufCMessage *msg);
/* Nanoseconds left before the caller's deadline (INT64_MAX when it set none). */
int64_t csi_ctx_remaining_ns(const struct csi_call_ctx *ctx);

#endif
