/*
 * kube config: where the API server is and how to authenticate to it.
 *
 * Sources, as the upstream sidecars choose them:
 *   --kubeconfig PATH       the kubeconfig's current context (cluster + user);
 *   --master URL            overrides the server (alone: that server, no credentials);
 *   neither                 in-cluster: KUBERNETES_SERVICE_HOST/_PORT, the service-account token
 *                           and ca.crt under /var/run/secrets/kubernetes.io/serviceaccount/.
 *
 * Bearer token precedence: tokenFile, then token, then the exec plugin.
 *
 * A struct kube_config is immutable after loading except for its credential cache, which is
 * guarded by an internal mutex: kube_config_credential() may be called from any thread. It
 * re-reads a token file when the file changes (bound service-account tokens rotate hourly) and
 * runs an exec credential plugin again when its credential expires or the server answered 401.
 *
 * All strings are owned by the config; kube_config_free() releases everything. Errors name the
 * file, the field and what is wrong. Secrets (tokens, keys, passwords) are never logged.
 */
#ifndef KCSI_KUBE_CONFIG_H
#define KCSI_KUBE_CONFIG_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "base/strbuf.h"

#define KUBE_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

struct kube_exec {
	char *api_version; /* client.authentication.k8s.io/v1 or v1beta1 */
	char *command;     /* resolved against the kubeconfig folder when relative with a '/' */
	char **args;       /* NULL-terminated */
	char **env;        /* NULL-terminated "NAME=value" */
};

struct kube_config {
	char *source;          /* kubeconfig path, "in-cluster" or "--master" (for messages) */
	char *server;          /* https://host:port, no trailing slash */
	char *ca_file;         /* PEM file, or NULL */
	char *ca_pem;          /* decoded certificate-authority-data, or NULL */
	size_t ca_pem_len;
	bool insecure;         /* insecure-skip-tls-verify */
	char *tls_server_name; /* name to verify the server certificate against, or NULL */
	char *namespace;       /* context namespace / in-cluster namespace, or NULL */

	/* user */
	char *token;      /* static bearer token, or NULL */
	char *token_file; /* re-read on change, or NULL */
	char *cert_file, *key_file;
	char *cert_pem, *key_pem; /* decoded *-data, or NULL */
	size_t cert_pem_len, key_pem_len;
	char *username, *password;
	struct kube_exec *exec;

	/* credential cache (guarded by mu) */
	pthread_mutex_t mu;
	char *cached_token;
	struct timespec token_mtime;
	int64_t token_ino, token_size;
	time_t exec_expiry; /* 0: no expiry given */
	bool exec_valid;
	char *exec_cert_pem, *exec_key_pem; /* status.clientCertificateData/clientKeyData, or NULL */
	unsigned cred_generation; /* bumped each time the credential changes */
};

/*
 * Loads the configuration as described above. kubeconfig and master may be NULL or "".
 * sa_dir is the service-account folder for in-cluster config (NULL: KUBE_SA_DIR).
 * Returns NULL with a reason in err.
 */
struct kube_config *kube_config_load(const char *kubeconfig, const char *master, const char *sa_dir,
				     char *err, size_t errlen);
struct kube_config *kube_config_from_kubeconfig(const char *path, char *err, size_t errlen);
struct kube_config *kube_config_in_cluster(const char *sa_dir, char *err, size_t errlen);
void kube_config_free(struct kube_config *c);

/*
 * The bearer token to send now (token, token file or exec plugin), copied into *token (left
 * empty when the config has none). Returns 0, or -1 with a reason in err when the token file
 * cannot be read or the plugin fails. *gen receives the credential generation.
 */
int kube_config_bearer(struct kube_config *c, struct strbuf *token, unsigned *gen, char *err,
		       size_t errlen);
/*
 * Copies the client certificate and key an exec plugin returned (PEM) into cert and key; both
 * stay empty when the plugin gave none. Call after kube_config_bearer(), which runs the plugin.
 */
void kube_config_exec_cert(struct kube_config *c, struct strbuf *cert, struct strbuf *key);
/* Called after a 401: forgets an exec credential so the next call runs the plugin again. */
void kube_config_invalidate(struct kube_config *c, unsigned gen);

/*
 * An exec plugin's credential (client.authentication.k8s.io ExecCredential status). Every
 * string is malloc'd and owned by the struct; kube_exec_cred_release() frees them.
 */
struct kube_exec_cred {
	char *token;              /* status.token, "" when only a certificate was given */
	char *cert_pem, *key_pem; /* status.clientCertificateData/clientKeyData, both or neither */
	time_t expiry;            /* status.expirationTimestamp; 0 when not given */
};
/*
 * Parses an exec plugin's standard output (len bytes, not NUL-terminated): an ExecCredential of
 * api_version with a token or a certificate and key. Returns 0 with *cred filled, or -1 with a
 * reason in err (never quoting a credential) and *cred empty. Pure: no I/O, no global state.
 */
int kube_exec_parse_output(const char *out, size_t len, const char *api_version,
			   struct kube_exec_cred *cred, char *err, size_t errlen);
void kube_exec_cred_release(struct kube_exec_cred *cred);

/* Decodes standard base64 (whitespace ignored). Returns a malloc'd buffer or NULL if invalid. */
char *kube_base64_decode(const char *in, size_t *outlen);

#endif
