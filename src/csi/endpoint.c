/*
 * csi/endpoint: the endpoint syntax, shared by the client transport, the server and the CLI; it
 * sits below all of them so that none depends on another for it.
 */
#include "csi/endpoint.h"

#include <string.h>

#include "base/strbuf.h"
#include "base/xalloc.h"

int csi_endpoint_path(const char *endpoint, char **path, char *err, size_t errlen)
{
	const char *p = NULL;
	if (!endpoint || !*endpoint) {
		errbuf_printf(err, errlen, "empty CSI endpoint");
		return -1;
	}
	if (strncmp(endpoint, "unix://", 7) == 0)
		p = endpoint + 7;
	else if (strncmp(endpoint, "unix:", 5) == 0)
		p = endpoint + 5;
	else if (endpoint[0] == '/')
		p = endpoint;
	if (!p || p[0] != '/' || strlen(p) >= 108) {
		errbuf_printf(err, errlen,
			"unsupported CSI endpoint %s: want unix:///path/to/socket, unix:/path or /path "
			"(at most 107 bytes)", endpoint);
		return -1;
	}
	*path = xstrdup(p);
	return 0;
}
