/*
 * emu_kubeconfig: the kubeconfig kube-emulator writes for its clients (--write-kubeconfig): its
 * URL, the CA of its TLS certificate, its token. Written to a temporary file and renamed, so a
 * reader (kcsi up waits for "server:" in it, and a restart rewrites it) never sees half a file.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/strbuf.h"
#include "emulator/emu_base64.h"
#include "emulator/emu_internal.h"
#include "emulator/emu_server.h"

int emu_server_write_kubeconfig(const struct emu_server *srv, const char *path, char *err,
				size_t errlen)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "apiVersion: v1\nkind: Config\nclusters:\n- name: kube-emulator\n"
		    "  cluster:\n    server: %s\n", srv->url);
	if (srv->tls_ca) {
		char *ca = emu_base64_encode((unsigned char *)srv->tls_ca, strlen(srv->tls_ca), false);
		strbuf_addf(&sb, "    certificate-authority-data: %s\n", ca);
		free(ca);
	}
	strbuf_addstr(&sb, "users:\n- name: kube-emulator\n  user:");
	if (srv->token)
		strbuf_addf(&sb, "\n    token: \"%s\"\n", srv->token);
	else
		strbuf_addstr(&sb, " {}\n");
	strbuf_addstr(&sb, "contexts:\n- name: kube-emulator\n  context:\n    cluster: kube-emulator\n"
		      "    user: kube-emulator\n    namespace: default\n"
		      "current-context: kube-emulator\n");
	struct strbuf tmp = STRBUF_INIT;
	strbuf_addf(&tmp, "%s.tmp.%d", path, (int)getpid());
	int rc = -1;
	int fd = open(tmp.buf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		snprintf(err, errlen, "cannot create %s: %s", tmp.buf, strerror(errno));
	} else {
		ssize_t n = write(fd, sb.buf, sb.len);
		if (n != (ssize_t)sb.len || close(fd) < 0)
			snprintf(err, errlen, "cannot write %s: %s", tmp.buf, strerror(errno));
		else if (rename(tmp.buf, path) < 0)
			snprintf(err, errlen, "cannot rename to %s: %s", path, strerror(errno));
		else
			rc = 0;
		if (rc < 0)
			unlink(tmp.buf);
	}
	strbuf_release(&tmp);
	strbuf_release(&sb);
	return rc;
}
