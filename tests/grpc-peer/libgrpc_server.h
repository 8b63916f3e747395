/*
 * grpc-peer/libgrpc_server: a libgrpc (gRPC C core) transport for a struct csi_server, for
 * interoperability tests only: csi-testdriver-libgrpc serves the test driver's handlers through
 * it, so kcsi's client and the kcsi CLI are tested against a gRPC server nobody here wrote.
 */
#ifndef KCSI_TESTS_LIBGRPC_SERVER_H
#define KCSI_TESTS_LIBGRPC_SERVER_H

#include "csi/server.h"

/*
 * Serves s's handlers (registered with csi_server_handle) on endpoint with `threads` workers
 * until SIGTERM or SIGINT. Calls carry no deadline into the handler. Returns 0, or -1 when the
 * endpoint cannot be served.
 */
int libgrpc_peer_serve(struct csi_server *s, const char *endpoint, int threads,
		       int max_recv_bytes);

#endif
