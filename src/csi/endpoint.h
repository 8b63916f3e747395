/*
 * csi/endpoint: CSI endpoints as the upstream sidecars accept them: "unix:///run/csi/socket",
 * "unix:/path", or a bare "/path". Anything else (tcp, dns) is refused with an error. Pure but
 * for csi_endpoint_why's stat(); the client (client.h) and the server (server.h) both start here.
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
/*
 * Why connecting to the socket at path failed, in a user's words (a missing path, a file that is
 * not a socket, nobody listening): cerr is connect()'s errno, or 0 when the socket connected and
 * the peer broke the HTTP/2 handshake as broken_why says. Looks at the path (stat) only.
 */
void csi_endpoint_why(const char *path, int cerr, const char *broken_why, char *err, size_t errlen);

#endif
