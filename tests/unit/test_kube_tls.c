/*
 * TLS and authentication against a real kube-emulator serving HTTPS with a certificate made by
 * openssl here: CA file and data, a wrong CA, insecure-skip-tls-verify, tls-server-name, client
 * certificates (files and data, and a key that does not match), and bearer tokens (static,
 * file, exec plugin, wrong).
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/timeutil.h"
#include "check.h"
#include "kube/client.h"
#include "kube/http.h"
#include "kube/testing/testenv.h"

static struct kube_testenv env;
static int retries = 1; /* the clients' max_retries */
static char dir[256];
static char server[256];

static void pathf(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
}

static int sh(const char *fmt, const char *arg)
{
	char cmd[4096];
	snprintf(cmd, sizeof(cmd), fmt, arg, arg, arg, arg, arg, arg, arg, arg, arg, arg, arg, arg);
	return system(cmd);
}

static int make_certs(void)
{
	/* EC keys keep this fast. The server certificate names only kube.test, not 127.0.0.1. */
	return sh("set -e; cd %s; "
		  "K='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes'; "
		  "openssl req -x509 $K -keyout ca.key -out ca.crt -days 2 -subj /CN=kcsi-ca 2>/dev/null; "
		  "openssl req -x509 $K -keyout other.key -out other.crt -days 2 -subj /CN=other-ca 2>/dev/null; "
		  "echo subjectAltName=DNS:kube.test > san.ext; "
		  "openssl req $K -keyout srv.key -out srv.csr -subj /CN=kube.test 2>/dev/null; "
		  "openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out srv.crt "
		  "-days 2 -extfile san.ext 2>/dev/null; "
		  "openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out exp.crt "
		  "-days -1 -extfile san.ext 2>/dev/null; "
		  "openssl req $K -keyout cli.key -out cli.csr -subj /CN=kcsi-user 2>/dev/null; "
		  "openssl x509 -req -in cli.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out cli.crt "
		  "-days 2 2>/dev/null; "
		  "printf 'file-token' > tok; "
		  "printf '#!/bin/sh\\necho '\"'\"'{\"apiVersion\":\"client.authentication.k8s.io/v1\","
		  "\"kind\":\"ExecCredential\",\"status\":{\"token\":\"s3cret\"}}'\"'\"'\\n' > plugin.sh; "
		  "chmod +x plugin.sh", dir);
}

/* Writes a kubeconfig with the given cluster and user bodies, then GETs the node list. */
static int try_get(const char *cluster, const char *user, struct kube_err *e, char *err, size_t errlen)
{
	char kc[320];
	pathf(kc, sizeof(kc), "kc.yaml");
	FILE *f = fopen(kc, "w");
	fprintf(f, "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
		   "contexts:\n- name: t\n  context: {cluster: c, user: u}\n"
		   "clusters:\n- name: c\n  cluster:\n    server: %s\n%s"
		   "users:\n- name: u\n  user:\n%s",
		server, cluster, user);
	fclose(f);
	struct kube_config *cfg = kube_config_load(kc, NULL, NULL, err, errlen);
	if (!cfg)
		return -2;
	struct kube_client_opts o = { .qps = -1, .max_retries = retries };
	struct kube_client *c = kube_client_new(cfg, &o, err, errlen);
	if (!c) { /* a certificate or key that cannot be used is refused at start */
		memset(e, 0, sizeof(*e));
		snprintf(e->message, sizeof(e->message), "%s", err);
		kube_config_free(cfg);
		return -1;
	}
	json_t *j = kube_list(c, &KUBE_RES_NODES, NULL, NULL, e);
	int rc = j ? 0 : -1;
	json_decref(j);
	kube_client_free(c);
	kube_config_free(cfg);
	return rc;
}

#define CA "    certificate-authority: ca.crt\n"
#define SNI "    tls-server-name: kube.test\n"
#define TOKEN "    token: s3cret\n"

static void test_ca(void)
{
	struct kube_err e;
	char err[512];
	CHECK_INT(try_get(CA SNI, TOKEN, &e, err, sizeof(err)), 0);
	/* certificate-authority-data */
	char ca[320], cmd[700];
	pathf(ca, sizeof(ca), "ca.crt");
	snprintf(cmd, sizeof(cmd), "base64 -w0 %s", ca);
	FILE *p = popen(cmd, "r");
	char b64[4096] = "";
	if (p) {
		if (!fgets(b64, sizeof(b64), p))
			b64[0] = 0;
		pclose(p);
	}
	char cluster[4400];
	snprintf(cluster, sizeof(cluster), "    certificate-authority-data: %s\n" SNI, b64);
	CHECK_INT(try_get(cluster, TOKEN, &e, err, sizeof(err)), 0);
}

static void test_wrong_ca_and_name(void)
{
	struct kube_err e;
	char err[512];
	CHECK_INT(try_get("    certificate-authority: other.crt\n" SNI, TOKEN, &e, err, sizeof(err)), -1);
	CHECK_INT(e.code, 0);
	CHECK(strstr(e.message, "certificate") || strstr(e.message, "SSL"));
	/* Without tls-server-name the certificate (for kube.test) does not match 127.0.0.1. */
	CHECK_INT(try_get(CA, TOKEN, &e, err, sizeof(err)), -1);
	CHECK_INT(e.code, 0);
	/* insecure-skip-tls-verify turns verification off, as asked. */
	CHECK_INT(try_get("    insecure-skip-tls-verify: true\n", TOKEN, &e, err, sizeof(err)), 0);
}

/*
 * Issue 16: a refused server certificate is said at once (no retries: ~10 s of them before) and
 * in words a person can act on: the server, the reason, the certificate's subject and issuer,
 * the CAs trusted.
 */
static void expect_tls(const char *cluster, const char *reason, const char *more)
{
	struct kube_err e;
	char err[512];
	int64_t t0 = mono_now_ns();
	CHECK_INT(try_get(cluster, TOKEN, &e, err, sizeof(err)), -1);
	int64_t ms = (mono_now_ns() - t0) / 1000000;
	CHECK(ms < 1500);
	CHECK_INT(e.code, 0);
	CHECK(strstr(e.message, reason) != NULL);
	CHECK(strstr(e.message, server) != NULL);
	CHECK(strstr(e.message, "kube.test") != NULL); /* the certificate's subject */
	CHECK(strstr(e.message, "kcsi-ca") != NULL);   /* and its issuer */
	CHECK(!more || strstr(e.message, more) != NULL);
	fprintf(stderr, "  %lld ms: %s\n", (long long)ms, e.message);
}

static void test_tls_errors_say_why(void)
{
	retries = 10;
	expect_tls("    certificate-authority: other.crt\n" SNI, "signed by unknown authority",
		   "other.crt");
	expect_tls(CA, "name mismatch", "ca.crt");
	retries = 1;
}

static void test_client_cert(void)
{
	struct kube_err e;
	char err[512];
	CHECK_INT(try_get(CA SNI, TOKEN "    client-certificate: cli.crt\n    client-key: cli.key\n",
			  &e, err, sizeof(err)), 0);
	/* a key that does not belong to the certificate is refused before any request */
	CHECK_INT(try_get(CA SNI, TOKEN "    client-certificate: cli.crt\n    client-key: srv.key\n",
			  &e, err, sizeof(err)), -1);
	CHECK_INT(e.code, 0);
}

/* Writes an ExecCredential with token and the given certificate/key files, and a plugin that prints it. */
static void write_cert_plugin(const char *certname, const char *keyname)
{
	char p[320];
	FILE *f;
	char buf[8192];
	size_t n;
	json_t *st = json_pack("{s:s}", "token", "s3cret");
	const char *files[2] = { certname, keyname };
	const char *fields[2] = { "clientCertificateData", "clientKeyData" };
	for (int i = 0; i < 2; i++) {
		pathf(p, sizeof(p), files[i]);
		f = fopen(p, "r");
		n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
		buf[n] = 0;
		if (f)
			fclose(f);
		json_object_set_new(st, fields[i], json_string(buf));
	}
	json_t *cred = json_pack("{s:s, s:s, s:o}", "apiVersion", "client.authentication.k8s.io/v1",
				 "kind", "ExecCredential", "status", st);
	pathf(p, sizeof(p), "cred.json");
	json_dump_file(cred, p, JSON_COMPACT);
	json_decref(cred);
	char script[320];
	pathf(script, sizeof(script), "certplugin.sh");
	f = fopen(script, "w");
	fprintf(f, "#!/bin/sh\ncat %s\n", p);
	fclose(f);
	chmod(script, 0700);
}

static void test_exec_client_cert(void)
{
	struct kube_err e;
	char err[512];
	const char *user = "    exec: {apiVersion: client.authentication.k8s.io/v1, command: ./certplugin.sh}\n";
	write_cert_plugin("cli.crt", "cli.key");
	CHECK_INT(try_get(CA SNI, user, &e, err, sizeof(err)), 0);
	/* The plugin's certificate is really used: a key that does not match fails the handshake. */
	write_cert_plugin("cli.crt", "srv.key");
	CHECK_INT(try_get(CA SNI, user, &e, err, sizeof(err)), -1);
	CHECK_INT(e.code, 0);
}

static void test_tokens(void)
{
	struct kube_err e;
	char err[512];
	CHECK_INT(try_get(CA SNI, "    token: wrong\n", &e, err, sizeof(err)), -1);
	CHECK_INT(e.code, 401);
	CHECK_STR(e.reason, "Unauthorized");
	CHECK_INT(try_get(CA SNI, "    tokenFile: tok\n", &e, err, sizeof(err)), -1);
	CHECK_INT(e.code, 401); /* the file holds "file-token" */
	char tok[320];
	pathf(tok, sizeof(tok), "tok");
	FILE *f = fopen(tok, "w");
	fputs("s3cret\n", f);
	fclose(f);
	CHECK_INT(try_get(CA SNI, "    tokenFile: tok\n", &e, err, sizeof(err)), 0);
	/* A token with a line break inside is refused (kube_config_bearer), not sent as two
	 * header lines by the HTTP layer. */
	f = fopen(tok, "w");
	fputs("s3cret\r\nX-Injected: 1", f);
	fclose(f);
	CHECK_INT(try_get(CA SNI, "    tokenFile: tok\n", &e, err, sizeof(err)), -1);
	CHECK(e.code == 0 && strstr(e.message, "control character") != NULL);
	f = fopen(tok, "w");
	fputs("s3cret\n", f);
	fclose(f);
	/* Rotation while a client runs: the next request uses the new file content. */
	char kc[320];
	pathf(kc, sizeof(kc), "kc.yaml");
	char err2[512];
	struct kube_config *cfg = kube_config_load(kc, NULL, NULL, err2, sizeof(err2));
	struct kube_client_opts o = { .qps = -1, .max_retries = 1 };
	struct kube_client *c = kube_client_new(cfg, &o, err2, sizeof(err2));
	json_t *j = kube_list(c, &KUBE_RES_NODES, NULL, NULL, &e);
	CHECK(j != NULL);
	json_decref(j);
	char tmp[320];
	pathf(tmp, sizeof(tmp), "tok.new");
	f = fopen(tmp, "w");
	fputs("rotated-wrong", f);
	fclose(f);
	rename(tmp, tok);
	j = kube_list(c, &KUBE_RES_NODES, NULL, NULL, &e);
	CHECK(j == NULL && e.code == 401);
	f = fopen(tmp, "w");
	fputs("s3cret", f);
	fclose(f);
	rename(tmp, tok);
	j = kube_list(c, &KUBE_RES_NODES, NULL, NULL, &e);
	CHECK(j != NULL);
	json_decref(j);
	kube_client_free(c);
	kube_config_free(cfg);
	CHECK_INT(try_get(CA SNI,
			  "    exec: {apiVersion: client.authentication.k8s.io/v1, command: ./plugin.sh}\n",
			  &e, err, sizeof(err)), 0);
	/* A plugin whose first credential is stale: after the 401 the client runs it again. */
	char script[320], runs[320];
	pathf(script, sizeof(script), "stale.sh");
	pathf(runs, sizeof(runs), "runs");
	f = fopen(script, "w");
	fprintf(f, "#!/bin/sh\n"
		   "n=$(cat %s 2>/dev/null || echo 0); echo $((n+1)) > %s\n"
		   "if [ $n = 0 ]; then t=stale; else t=s3cret; fi\n"
		   "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\","
		   "\"kind\":\"ExecCredential\",\"status\":{\"token\":\"%%s\"}}' $t\n", runs, runs);
	fclose(f);
	chmod(script, 0700);
	CHECK_INT(try_get(CA SNI,
			  "    exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: ./stale.sh}\n",
			  &e, err, sizeof(err)), 0);
	f = fopen(runs, "r");
	int n = 0;
	if (f) {
		if (fscanf(f, "%d", &n) != 1)
			n = 0;
		fclose(f);
	}
	CHECK_INT(n, 2);
	CHECK_INT(try_get(CA SNI, "    {}\n", &e, err, sizeof(err)), -1);
	CHECK_INT(e.code, 401);
}

/* A free TCP port on 127.0.0.1 (bound and released; the next bind of it is very likely free). */
static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	bind(fd, (struct sockaddr *)&a, sizeof(a));
	getsockname(fd, (struct sockaddr *)&a, &al);
	close(fd);
	return ntohs(a.sin_port);
}

static int body_to(void *ud, int status, const char *p, size_t n)
{
	(void)status;
	strbuf_add(ud, p, n);
	return 0;
}

/*
 * The HTTP client's TLS against a TLS stack nobody here wrote: `openssl s_server -WWW` (OpenSSL,
 * where kube-emulator is GnuTLS through libmicrohttpd) serving a file over HTTP/1.0, so the
 * answer also ends at the close. Verified against the CA and tls-server-name; a wrong CA is
 * refused with its reason.
 */
static void test_openssl_peer(void)
{
	int port = free_port();
	char hello[320];
	pathf(hello, sizeof(hello), "hello.txt");
	FILE *f = fopen(hello, "w");
	fputs("served by openssl s_server\n", f);
	fclose(f);
	pid_t pid = fork();
	if (pid == 0) {
		char acc[32];
		snprintf(acc, sizeof(acc), "127.0.0.1:%d", port);
		if (chdir(dir) != 0)
			_exit(127);
		int nul = open("/dev/null", O_WRONLY);
		dup2(nul, 1);
		dup2(nul, 2);
		execlp("openssl", "openssl", "s_server", "-quiet", "-accept", acc, "-cert", "srv.crt",
		       "-key", "srv.key", "-WWW", (char *)NULL);
		_exit(127);
	}
	char url[64], ca[320], other[320], err[400];
	snprintf(url, sizeof(url), "https://127.0.0.1:%d", port);
	pathf(ca, sizeof(ca), "ca.crt");
	pathf(other, sizeof(other), "other.crt");
	struct http_client_opts o = { .server = url, .tls_server_name = "kube.test", .ca_file = ca,
				      .no_proxy_env = true };
	struct http_client *hc = http_client_new(&o, err, sizeof(err));
	CHECK(hc != NULL);
	struct strbuf out = STRBUF_INIT;
	struct http_result res;
	int rc = -1;
	for (int i = 0; i < 60 && rc != 0; i++) { /* until s_server listens */
		struct http_request rq = { .method = "GET", .target = "/hello.txt",
					   .deadline_ns = mono_now_ns() + 2 * NSEC_PER_SEC };
		strbuf_reset(&out);
		rc = http_do(hc, &rq, body_to, &out, &res);
		if (rc != 0)
			usleep(50 * 1000);
	}
	CHECK_INT(rc, 0);
	CHECK_INT(res.status, 200);
	CHECK(out.buf && strcmp(out.buf, "served by openssl s_server\n") == 0);
	http_client_free(hc);
	o.ca_file = other;
	hc = http_client_new(&o, err, sizeof(err));
	struct http_request rq = { .method = "GET", .target = "/hello.txt",
				   .deadline_ns = mono_now_ns() + 2 * NSEC_PER_SEC };
	CHECK_INT(http_do(hc, &rq, body_to, &out, &res), -1);
	CHECK(res.fail == HTTP_TLS_REFUSED);
	CHECK_STR(http_verify_reason(res.verify_status), "certificate signed by unknown authority");
	CHECK(strstr(res.peer, "kube.test") != NULL);
	http_client_free(hc);
	strbuf_release(&out);
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
}

int main(void)
{
	if (access(KCSI_EMULATOR_BIN, X_OK) != 0) {
		fprintf(stderr, "FAIL: kube-emulator not found at %s\n", KCSI_EMULATOR_BIN);
		return 1;
	}
	if (system("openssl version >/dev/null 2>&1") != 0) {
		fprintf(stderr, "FAIL: openssl is not installed (scripts/deps.sh installs it)\n");
		return 1;
	}
	snprintf(dir, sizeof(dir), "/tmp/kcsi-kube-tls-XXXXXX");
	if (!mkdtemp(dir) || make_certs() != 0) {
		fprintf(stderr, "could not make certificates in %s\n", dir);
		return 1;
	}
	char cert[320], key[320];
	pathf(cert, sizeof(cert), "srv.crt");
	pathf(key, sizeof(key), "srv.key");
	const char *args[] = { "--tls-cert", cert, "--tls-key", key, "--token", "s3cret", NULL };
	/* The emulator's own kubeconfig names 127.0.0.1, which this certificate does not cover;
	 * only its server URL is used here. */
	int rc = kube_testenv_start(&env, KCSI_EMULATOR_BIN, args);
	if (rc == 0 || env.cfg) {
		snprintf(server, sizeof(server), "%s", env.cfg->server);
		RUN(test_ca);
		RUN(test_wrong_ca_and_name);
		RUN(test_client_cert);
		RUN(test_tokens);
		RUN(test_exec_client_cert);
		RUN(test_tls_errors_say_why);
		RUN(test_openssl_peer);
	} else {
		CHECK(!"emulator did not start");
	}
	kube_testenv_stop(&env);
	/* a second server, whose certificate has expired */
	pathf(cert, sizeof(cert), "exp.crt");
	if (kube_testenv_start(&env, KCSI_EMULATOR_BIN, args) == 0 || env.cfg) {
		snprintf(server, sizeof(server), "%s", env.cfg->server);
		retries = 10;
		expect_tls(CA SNI, "certificate has expired", NULL);
		retries = 1;
	} else {
		CHECK(!"emulator with the expired certificate did not start");
	}
	kube_testenv_stop(&env);
	sh("rm -rf '%s'", dir);
	return CHECK_DONE();
}
