/*
 * plugin-reg-client: calls the kubelet plugin registration service on a registration socket, as
 * the kubelet's plugin watcher does; for e2e tests of csi-node-driver-registrar.
 *
 *   plugin-reg-client SOCKET info                  prints PluginInfo as JSON
 *   plugin-reg-client SOCKET notify true|false [ERROR]
 *
 * Exits 0 on an OK answer, 1 on an error answer (printed), 2 on bad usage.
 */
#include <stdio.h>
#include <string.h>

#include "base/strbuf.h"
#include "csi/client.h"
#include "pluginregistration.pb-c.h"

int main(int argc, char **argv)
{
	if (argc < 3 || (strcmp(argv[2], "info") && strcmp(argv[2], "notify")) ||
	    (!strcmp(argv[2], "notify") && argc < 4)) {
		fprintf(stderr, "usage: plugin-reg-client SOCKET info | notify true|false [ERROR]\n");
		return 2;
	}
	char err[512];
	struct csi_conn_opts o = CSI_CONN_OPTS_INIT;
	o.connect_timeout_ns = 5000000000LL;
	struct csi_conn *c = csi_connect(argv[1], &o, err, sizeof(err));
	if (!c) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	struct csi_status st;
	ProtobufCMessage *resp = NULL;
	int rc;
	if (!strcmp(argv[2], "info")) {
		Pluginregistration__InfoRequest req = PLUGINREGISTRATION__INFO_REQUEST__INIT;
		rc = csi_call(c, "/pluginregistration.Registration/GetInfo", &req.base,
			      &pluginregistration__plugin_info__descriptor, &resp, 5000000000LL, &st);
	} else {
		Pluginregistration__RegistrationStatus req = PLUGINREGISTRATION__REGISTRATION_STATUS__INIT;
		req.plugin_registered = !strcmp(argv[3], "true");
		req.error = argc > 4 ? argv[4] : "";
		rc = csi_call(c, "/pluginregistration.Registration/NotifyRegistrationStatus", &req.base,
			      &pluginregistration__registration_status_response__descriptor, &resp,
			      5000000000LL, &st);
	}
	if (rc == 0) {
		struct strbuf sb = STRBUF_INIT;
		csi_msg_to_json(resp, 0, &sb);
		printf("%s\n", sb.buf);
		strbuf_release(&sb);
		csi_msg_free(resp);
	} else {
		fprintf(stderr, "rpc error: code = %s desc = %s\n", csi_code_go_name(st.code), st.message);
	}
	csi_conn_free(c);
	return rc == 0 ? 0 : 1;
}
