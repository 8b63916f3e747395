/* libFuzzer: an exec credential plugin's output, the ExecCredential JSON a kubeconfig's exec
 * plugin prints (src/kube/config.c kube_exec_parse_output: status.token,
 * clientCertificateData, clientKeyData, expirationTimestamp). The plugin is not run: the input
 * is its standard output, checked against client.authentication.k8s.io/v1 (the harness also
 * asserts what callers rely on: a result is all or nothing, certificate and key together). */
#include <assert.h>

#include "fuzz_common.h"
#include "kube/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kube_exec_cred cred;
	char err[512];
	if (kube_exec_parse_output((const char *)data, size, "client.authentication.k8s.io/v1",
				   &cred, err, sizeof(err)) == 0) {
		assert(cred.token);
		assert(!cred.cert_pem == !cred.key_pem);
		assert(*cred.token || cred.cert_pem);
	} else {
		assert(!cred.token && !cred.cert_pem && !cred.key_pem && err[0]);
	}
	kube_exec_cred_release(&cred);
	return 0;
}
