/*
 * csi/endpoint: the endpoint syntax, shared by the client transport, the server and the CLI; it
 * sits below all of them so that none depends on another for it.
 */
#include "csi/endpoint.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

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

void csi_endpoint_why(const char *path, int cerr, const char *broken_why, char *err, size_t errlen)
{
	struct stat st;
	if (cerr == 0)
		errbuf_printf(err, errlen, "%s does not speak gRPC (HTTP/2): %s", path, broken_why);
	else if (cerr == ENOENT)
		errbuf_printf(err, errlen, "%s does not exist: no driver listens there (is it running, "
			      "and is this its --endpoint?)", path);
	else if (stat(path, &st) == 0 && !S_ISSOCK(st.st_mode))
		errbuf_printf(err, errlen, "%s is not a socket", path);
	else if (cerr == ECONNREFUSED)
		errbuf_printf(err, errlen, "nobody listens on %s (a socket left by a driver that is no "
			      "longer running?)", path);
	else
		errbuf_printf(err, errlen, "cannot connect to %s: %s", path, strerror(cerr));
}
