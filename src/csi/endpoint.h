/*
 * csi/endpoint: CSI endpoints as the upstream sidecars accept them: "unix:///run/csi/socket",
 * "unix:/path", or a bare "/path". Anything else (tcp, dns) is refused with an error. Pure: no
 * I/O; the client (client.h) and the server (server.h) both start from here.
 */
#ifndef KCSI_CSI_ENDPOINT_H
#define KCSI_CSI_ENDPOINT_H

#include <stddef.h>

/*
 * Parses an endpoint into a socket path (malloc'd, caller frees). Returns 0, or -1 with a reason
 * in err for anything that is not a unix socket endpoint (or whose path does not fit a socket
 * address, 107 bytes).
 */
int csi_endpoint_path(const char *endpoint, char **path, char *err, size_t errlen);

#endif
