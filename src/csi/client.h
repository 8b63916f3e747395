/*
 * csi/client: a connection to a CSI driver over a unix socket, and unary CSI calls on it.
 *
 * Transport is gRPC's HTTP/2 mapping on nghttp2 (client.c, wire.h): one socket and one HTTP/2
 * session per connection, one stream per call, requests and responses serialized by protobuf-c.
 * A connection is safe to use from many threads at once; each call is independent and blocks
 * the calling thread until the response, an error, or its deadline. A connection that was lost
 * is connected again by the next call (which fails with UNAVAILABLE if the driver does not
 * accept it), as a gRPC channel does.
 *
 * Endpoints, as the upstream sidecars accept them: "unix:///run/csi/socket", "unix:/path",
 * or a bare "/path". Anything else (tcp, dns) is refused with an error.
 *
 * Life cycle:
 *     struct csi_conn_opts o = CSI_CONN_OPTS_INIT;
 *     o.on_lost = exit_on_loss;                       // sidecars exit, as upstream
 *     struct csi_conn *c = csi_connect("unix:///csi/csi.sock", &o, err, sizeof err);
 *     if (!c || csi_wait_ready(c, 10 * NSEC_PER_SEC, err, sizeof err)) ... fail
 *     Csi__V1__ControllerPublishVolumeResponse *resp;
 *     struct csi_status st;
 *     if (csi_controller_publish_volume(c, &req, &resp, timeout_ns, &st) == 0) {
 *             use(resp); csi_msg_free(resp);
 *     } else {
 *             report(csi_code_name(st.code), st.message);
 *     }
 *     csi_conn_free(c);
 *
 * Logging: at -v=5 every call logs "GRPC call: <method>", the request and the response (or
 * error) as JSON with every csi_secret field replaced by "***stripped***". opts.max_log_len
 * (--max-grpc-log-length; <0 means no limit) truncates the request/response text.
 *
 * Connection loss: once connected, the connection's I/O thread notices when the driver closes
 * the socket, exits, is restarted, sends GOAWAY or breaks the protocol, ends every call in flight
 * with UNAVAILABLE and calls opts.on_lost once, from that thread. Upstream sidecars exit at that point so that Kubernetes restarts them; kcsi's
 * sidecars do the same from their callback.
 */
#ifndef KCSI_CSI_CLIENT_H
#define KCSI_CSI_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "csi/endpoint.h" /* csi_endpoint_path(), for callers of csi_connect() */
#include "csi/msg.h"

struct csi_conn;

/*
 * Called once per connection when an established connection is lost, on the connection's I/O
 * thread. It may exit the process (what the sidecars do) or signal another thread; it must not call
 * csi_conn_free() on the same connection, which waits for that thread to finish.
 */
typedef void (*csi_conn_lost_fn)(void *arg);
/* Called after every call: full method path, gRPC status code, duration. Must be thread-safe. */
typedef void (*csi_call_observer_fn)(void *arg, const char *method, int code, int64_t duration_ns);

struct csi_conn_opts {
	/* How long csi_connect() waits for the socket and the driver; <= 0 waits forever. */
	int64_t connect_timeout_ns;
	/* Progress is logged at this interval while waiting (default 10 s). */
	int64_t log_interval_ns;
	csi_conn_lost_fn on_lost;
	void *on_lost_arg;
	csi_call_observer_fn observer; /* metrics hook, see csi/metrics.h */
	void *observer_arg;
	/* Truncate logged request/response JSON to this many bytes; < 0: no limit. */
	int max_log_len;
	/* Largest response accepted, bytes (gRPC's default is 4 MiB). */
	int max_recv_bytes;
	/*
	 * > 0: send an HTTP/2 PING after this long without a frame from the driver, and count the
	 * connection lost when the PING is not answered within the same time. 0 (default): off, as
	 * upstream's sidecars (a gRPC server may answer frequent pings with GOAWAY).
	 */
	int64_t keepalive_ns;
	/*
	 * For a command line (the kcsi CLI): csi_connect() does not wait for the socket. A missing
	 * path, a file that is not a socket, a socket nobody listens on and a peer that closes or
	 * answers with something else than HTTP/2 fail at once with that reason; a peer that stays
	 * silent fails after connect_timeout_ns. Daemons leave it false and wait, as upstream.
	 */
	bool fail_fast;
};
#define CSI_CONN_OPTS_INIT { 0, 10000000000LL, NULL, NULL, NULL, NULL, -1, 4 * 1024 * 1024, 0, false }

/* The outcome of a call: gRPC status code (0 = OK) and the driver's message. */
struct csi_status {
	int code;
	char message[1024];
};

/*
 * Connects: waits until the socket file exists, the driver accepts a connection and its HTTP/2
 * SETTINGS arrive (what a gRPC channel calls READY), logging progress every opts->log_interval_ns. Returns NULL with a reason in
 * err on a bad endpoint or when opts->connect_timeout_ns passes. opts may be NULL (defaults).
 */
struct csi_conn *csi_connect(const char *endpoint, const struct csi_conn_opts *opts, char *err,
			     size_t errlen);
/*
 * Calls Probe until the driver reports ready (ready unset or true), each attempt bounded by
 * call_timeout_ns, retrying once a second. Returns 0, or -1 with the last error in err when the
 * driver answers with an error (Probe failing is final, as upstream treats it).
 */
int csi_wait_ready(struct csi_conn *c, int64_t call_timeout_ns, char *err, size_t errlen);
/* True once the established connection was lost (on_lost has been or is being called). */
bool csi_conn_lost(struct csi_conn *c);
/* The options the connection was made with (defaults filled in), and its endpoint. */
const struct csi_conn_opts *csi_conn_opts(const struct csi_conn *c);
const char *csi_conn_endpoint(const struct csi_conn *c);
/* Closes the socket and stops the I/O thread; on_lost is not called for this. NULL is a no-op. */
void csi_conn_free(struct csi_conn *c);

/*
 * One unary call. `method` is the gRPC path, e.g. "/csi.v1.Node/NodeGetInfo". On OK (return 0)
 * *resp is an unpacked message of type resp_desc, freed by the caller with csi_msg_free().
 * Otherwise returns the gRPC code (also in st->code) with st->message set and *resp NULL.
 * timeout_ns <= 0 means no deadline. st may be NULL.
 */
int csi_call(struct csi_conn *c, const char *method, const ProtobufCMessage *req,
	     const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
	     int64_t timeout_ns, struct csi_status *st);
/*
 * The same with pre-serialized request bytes and the raw response bytes (malloc'd, caller frees)
 * returned through out and outlen. For tools and tests (malformed input); not logged.
 */
int csi_call_bytes(struct csi_conn *c, const char *method, const void *data, size_t len,
		   void **out, size_t *outlen, int64_t timeout_ns, struct csi_status *st);

/*
 * One server-streaming call (csi_method_server_streams(): GetMetadataAllocated,
 * GetMetadataDelta). fn is called on the calling thread with each response message, decoded as
 * resp_desc, in the order sent; the message is freed when fn returns, and a non-zero return
 * stops the calls and becomes csi_call_stream()'s return (st->code is left alone). The messages
 * are handed on when the stream has ended, also those that came before an error status, which
 * is then returned (with st set) as for csi_call(). The whole stream is held in memory until it
 * ends, up to 64 MiB (RESOURCE_EXHAUSTED beyond). Logged at -v=5 and observed as csi_call().
 */
typedef int (*csi_stream_fn)(void *arg, const ProtobufCMessage *msg);
int csi_call_stream(struct csi_conn *c, const char *method, const ProtobufCMessage *req,
		    const ProtobufCMessageDescriptor *resp_desc, csi_stream_fn fn, void *arg,
		    int64_t timeout_ns, struct csi_status *st);
/*
 * The transport under it: the request bytes go out as csi_call_bytes() sends them; *out gets
 * the response body as it came (length-prefixed messages, malloc'd, caller frees; NULL when the
 * call never got an answer), whatever the status.
 */
int csi_call_stream_bytes(struct csi_conn *c, const char *method, const void *data, size_t len,
			  void **out, size_t *outlen, int64_t timeout_ns, struct csi_status *st);

/*
 * Typed helpers, one per unary CSI RPC: csi_<snake_name>(conn, req, &resp, timeout_ns, &status),
 * e.g. csi_probe(), csi_create_volume(), csi_controller_publish_volume(), csi_node_get_info().
 * Same contract as csi_call().
 */
#define CSI_RPC_LIST(X) \
	X(Identity, GetPluginInfo, get_plugin_info) \
	X(Identity, GetPluginCapabilities, get_plugin_capabilities) \
	X(Identity, Probe, probe) \
	X(Controller, CreateVolume, create_volume) \
	X(Controller, DeleteVolume, delete_volume) \
	X(Controller, ControllerPublishVolume, controller_publish_volume) \
	X(Controller, ControllerUnpublishVolume, controller_unpublish_volume) \
	X(Controller, ValidateVolumeCapabilities, validate_volume_capabilities) \
	X(Controller, ListVolumes, list_volumes) \
	X(Controller, ControllerListVolumeHealth, controller_list_volume_health) \
	X(Controller, ControllerGetVolumeHealth, controller_get_volume_health) \
	X(Controller, GetCapacity, get_capacity) \
	X(Controller, ControllerGetCapabilities, controller_get_capabilities) \
	X(Controller, CreateSnapshot, create_snapshot) \
	X(Controller, DeleteSnapshot, delete_snapshot) \
	X(Controller, ListSnapshots, list_snapshots) \
	X(Controller, GetSnapshot, get_snapshot) \
	X(Controller, ControllerExpandVolume, controller_expand_volume) \
	X(Controller, ControllerGetVolume, controller_get_volume) \
	X(Controller, ControllerModifyVolume, controller_modify_volume) \
	X(GroupController, GroupControllerGetCapabilities, group_controller_get_capabilities) \
	X(GroupController, CreateVolumeGroupSnapshot, create_volume_group_snapshot) \
	X(GroupController, DeleteVolumeGroupSnapshot, delete_volume_group_snapshot) \
	X(GroupController, GetVolumeGroupSnapshot, get_volume_group_snapshot) \
	X(Node, NodeStageVolume, node_stage_volume) \
	X(Node, NodeUnstageVolume, node_unstage_volume) \
	X(Node, NodePublishVolume, node_publish_volume) \
	X(Node, NodeUnpublishVolume, node_unpublish_volume) \
	X(Node, NodeGetVolumeStats, node_get_volume_stats) \
	X(Node, NodeGetVolumeHealth, node_get_volume_health) \
	X(Node, NodeGetStorageHealth, node_get_storage_health) \
	X(Node, NodeExpandVolume, node_expand_volume) \
	X(Node, NodeGetCapabilities, node_get_capabilities) \
	X(Node, NodeGetInfo, node_get_info)

/* Method paths: CSI_METHOD(Identity, Probe) is "/csi.v1.Identity/Probe". */
#define CSI_METHOD(svc, name) "/csi.v1." #svc "/" #name

#define CSI_TYPED_HELPER(svc, Name, snake) \
	static inline int csi_##snake(struct csi_conn *c, const Csi__V1__##Name##Request *req, \
				      Csi__V1__##Name##Response **resp, int64_t timeout_ns, \
				      struct csi_status *st) \
	{ \
		return csi_call(c, CSI_METHOD(svc, Name), &req->base, \
				&csi__v1__##snake##_response__descriptor, (ProtobufCMessage **)resp, \
				timeout_ns, st); \
	}
CSI_RPC_LIST(CSI_TYPED_HELPER)
#undef CSI_TYPED_HELPER

#endif
