/*
 * Kubeconfig and in-cluster configuration: every field the issue lists, relative paths, token
 * rotation, exec plugins, and the error a user sees for a broken file.
 */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/strbuf.h"
#include "check.h"
#include "kube/config.h"
#include "kube/options.h"
#include "base/flags.h"
#include "base/timeutil.h"

static char dir[256];

static void write_file(const char *name, const char *content, int mode)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	FILE *f = fopen(p, "w");
	fputs(content, f);
	fclose(f);
	chmod(p, mode);
}

static char *path(const char *name)
{
	static char bufs[4][512];
	static int next;
	char *p = bufs[next++ % 4];
	snprintf(p, 512, "%s/%s", dir, name);
	return p;
}

static struct kube_config *load(const char *yaml, char *err, size_t errlen)
{
	write_file("kc.yaml", yaml, 0600);
	return kube_config_from_kubeconfig(path("kc.yaml"), err, errlen);
}

#define HEAD "apiVersion: v1\nkind: Config\ncurrent-context: c1\n" \
	     "contexts:\n- name: c0\n  context: {cluster: x, user: x}\n" \
	     "- name: c1\n  context:\n    cluster: k1\n    user: u1\n    namespace: ns1\n"

static void test_full_kubeconfig(void)
{
	char err[512] = "";
	write_file("ca.pem", "CA", 0600);
	write_file("cert.pem", "CERT", 0600);
	write_file("key.pem", "KEY", 0600);
	struct kube_config *c = load(HEAD
		"clusters:\n- name: k1\n  cluster:\n    server: https://10.0.0.1:6443/\n"
		"    certificate-authority: ca.pem\n    tls-server-name: api.example\n"
		"users:\n- name: u1\n  user:\n    token: sekret\n    client-certificate: cert.pem\n"
		"    client-key: ./key.pem\n    username: admin\n    password: pw\n", err, sizeof(err));
	CHECK(c != NULL);
	if (!c) {
		fprintf(stderr, "%s\n", err);
		return;
	}
	CHECK_STR(c->server, "https://10.0.0.1:6443/");
	CHECK_STR(c->ca_file, path("ca.pem")); /* relative to the kubeconfig's folder */
	CHECK_STR(c->tls_server_name, "api.example");
	CHECK_STR(c->namespace, "ns1");
	CHECK_STR(c->token, "sekret");
	CHECK_STR(c->username, "admin");
	CHECK_STR(c->password, "pw");
	CHECK_STR(c->key_file, path("./key.pem"));
	CHECK(!c->insecure);
	struct strbuf t = STRBUF_INIT;
	CHECK_INT(kube_config_bearer(c, &t, NULL, err, sizeof(err)), 0);
	CHECK_STR(t.buf, "sekret");
	strbuf_release(&t);
	kube_config_free(c);
}

static void test_data_fields(void)
{
	char err[512] = "";
	/* "Q0EK" = "CA\n", "Q0VSVA==" = "CERT", "S0VZ" = "KEY" */
	struct kube_config *c = load(HEAD
		"clusters:\n- name: k1\n  cluster:\n    server: https://h:1\n"
		"    insecure-skip-tls-verify: true\n"
		"users:\n- name: u1\n  user:\n    client-certificate-data: Q0VSVA==\n"
		"    client-key-data: S0VZ\n", err, sizeof(err));
	CHECK(c != NULL);
	if (!c)
		return;
	CHECK_STR(c->cert_pem, "CERT");
	struct kube_config *c2 = load(HEAD
		"clusters:\n- name: k1\n  cluster: {server: 'https://h:1', certificate-authority-data: Q0EK}\n"
		"users:\n- name: u1\n  user: {}\n",
		err, sizeof(err));
	CHECK(c2 && c2->ca_pem_len == 3 && memcmp(c2->ca_pem, "CA\n", 3) == 0 && !c2->insecure);
	kube_config_free(c2);
	CHECK_STR(c->key_pem, "KEY");
	CHECK(c->insecure);
	kube_config_free(c);
}

static void test_token_file_rotation(void)
{
	char err[512] = "";
	write_file("tok", "first\n", 0600);
	struct kube_config *c = load(HEAD
		"clusters:\n- name: k1\n  cluster: {server: 'https://h:1'}\n"
		"users:\n- name: u1\n  user: {tokenFile: tok}\n", err, sizeof(err));
	CHECK(c != NULL);
	if (!c)
		return;
	struct strbuf t = STRBUF_INIT;
	CHECK_INT(kube_config_bearer(c, &t, NULL, err, sizeof(err)), 0);
	CHECK_STR(t.buf, "first");
	/* Rotation the way kubelet does it: a new file renamed over the old one. */
	write_file("tok.new", "second-token", 0600);
	rename(path("tok.new"), path("tok"));
	CHECK_INT(kube_config_bearer(c, &t, NULL, err, sizeof(err)), 0);
	CHECK_STR(t.buf, "second-token");
	kube_config_free(c);
	/* tokenFile wins over a static token */
	c = load(HEAD "clusters:\n- name: k1\n  cluster: {server: 'https://h:1'}\n"
		 "users:\n- name: u1\n  user: {tokenFile: tok, token: static}\n", err, sizeof(err));
	CHECK(c != NULL);
	if (!c)
		return;
	CHECK_INT(kube_config_bearer(c, &t, NULL, err, sizeof(err)), 0);
	CHECK_STR(t.buf, "second-token");
	unlink(path("tok"));
	CHECK_INT(kube_config_bearer(c, &t, NULL, err, sizeof(err)), -1);
	CHECK(strstr(err, "tok") != NULL);
	/* A token with a line break would inject headers: refused, and not echoed. */
	write_file("tok", "abc\r\nX-Injected: yes", 0600);
	CHECK_INT(kube_config_bearer(c, &t, NULL, err, sizeof(err)), -1);
	CHECK(strstr(err, "control character (0x0d at byte 3)") != NULL);
	CHECK(strstr(err, "X-Injected") == NULL);
	CHECK_INT((int)t.len, 0);
	strbuf_release(&t);
	kube_config_free(c);
}

static void test_in_cluster(void)
{
	char err[512] = "";
	write_file("sa_token", "", 0600);
	mkdir(path("sa"), 0700);
	write_file("sa/token", "tok-1", 0600);
	write_file("sa/ca.crt", "CA", 0600);
	write_file("sa/namespace", "kube-system\n", 0600);
	unsetenv("KUBERNETES_SERVICE_HOST");
	struct kube_config *c = kube_config_load(NULL, NULL, path("sa"), err, sizeof(err));
	CHECK(c == NULL);
	CHECK(strstr(err, "KUBERNETES_SERVICE_HOST") != NULL);
	setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);
	c = kube_config_load("", "", path("sa"), err, sizeof(err));
	CHECK(c != NULL);
	if (!c)
		return;
	CHECK_STR(c->server, "https://10.96.0.1:443");
	CHECK_STR(c->namespace, "kube-system");
	CHECK_STR(c->ca_file, path("sa/ca.crt"));
	struct strbuf t = STRBUF_INIT;
	CHECK_INT(kube_config_bearer(c, &t, NULL, err, sizeof(err)), 0);
	CHECK_STR(t.buf, "tok-1");
	write_file("sa/token.tmp", "tok-2", 0600);
	rename(path("sa/token.tmp"), path("sa/token"));
	CHECK_INT(kube_config_bearer(c, &t, NULL, err, sizeof(err)), 0);
	CHECK_STR(t.buf, "tok-2");
	strbuf_release(&t);
	kube_config_free(c);
	setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
	c = kube_config_load(NULL, NULL, path("sa"), err, sizeof(err));
	CHECK(c && strcmp(c->server, "https://[fd00::1]:443") == 0);
	kube_config_free(c);
}

static void test_master_override(void)
{
	char err[512] = "";
	struct kube_config *c = kube_config_load(NULL, "http://127.0.0.1:8080/", NULL, err, sizeof(err));
	CHECK(c && strcmp(c->server, "http://127.0.0.1:8080") == 0);
	kube_config_free(c);
	load(HEAD "clusters:\n- name: k1\n  cluster: {server: 'https://h:1'}\nusers: []\n", err,
	     sizeof(err));
	/* user u1 is missing from users */
	CHECK(strstr(err, "users: no entry named \"u1\"") != NULL);
	write_file("kc2.yaml", HEAD "clusters:\n- name: k1\n  cluster: {server: 'https://h:1'}\n"
		   "users:\n- name: u1\n  user: {}\n", 0600);
	c = kube_config_load(path("kc2.yaml"), "https://other:2", NULL, err, sizeof(err));
	CHECK(c && strcmp(c->server, "https://other:2") == 0);
	kube_config_free(c);
	c = kube_config_load(NULL, "ftp://x", NULL, err, sizeof(err));
	CHECK(c == NULL && strstr(err, "--master") != NULL);
}

static void test_exec_plugin(void)
{
	char err[512] = "";
	/* The plugin counts its runs in a file, so the test sees when the cache is used. */
	char script[1024];
	snprintf(script, sizeof(script),
		 "#!/bin/sh\n"
		 "echo run >> %s/runs\n"
		 "case \"$KUBERNETES_EXEC_INFO\" in *ExecCredential*) ;; *) exit 3;; esac\n"
		 "echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
		 "\"status\":{\"token\":\"'$MYTOKEN-$1'\",\"expirationTimestamp\":\"'$EXP'\"}}'\n",
		 dir);
	write_file("plugin.sh", script, 0700);
	const char *yaml_fmt = HEAD
		"clusters:\n- name: k1\n  cluster: {server: 'https://h:1'}\n"
		"users:\n- name: u1\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
		"      command: ./plugin.sh\n      args: [arg1]\n"
		"      env:\n      - {name: MYTOKEN, value: abc}\n      - {name: EXP, value: '%s'}\n";
	char yaml[2048];
	snprintf(yaml, sizeof(yaml), yaml_fmt, "2999-01-01T00:00:00Z");
	struct kube_config *c = load(yaml, err, sizeof(err));
	CHECK(c != NULL);
	if (!c) {
		fprintf(stderr, "%s\n", err);
		return;
	}
	struct strbuf t = STRBUF_INIT;
	unsigned gen = 0;
	CHECK_INT(kube_config_bearer(c, &t, &gen, err, sizeof(err)), 0);
	CHECK_STR(t.buf, "abc-arg1");
	CHECK_INT(kube_config_bearer(c, &t, &gen, err, sizeof(err)), 0);
	char why[64];
	(void)why;
	FILE *f = fopen(path("runs"), "r");
	int runs = 0;
	char line[16];
	while (f && fgets(line, sizeof(line), f))
		runs++;
	if (f)
		fclose(f);
	CHECK_INT(runs, 1); /* cached until expiry */
	kube_config_invalidate(c, gen); /* as after a 401 */
	CHECK_INT(kube_config_bearer(c, &t, &gen, err, sizeof(err)), 0);
	f = fopen(path("runs"), "r");
	runs = 0;
	while (f && fgets(line, sizeof(line), f))
		runs++;
	if (f)
		fclose(f);
	CHECK_INT(runs, 2);
	kube_config_free(c);

	/* A certificate without its key is refused with the field named. */
	write_file("half.sh", "#!/bin/sh\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1\","
		   "\"kind\":\"ExecCredential\",\"status\":{\"clientCertificateData\":\"x\"}}'\n", 0700);
	c = load(HEAD "clusters:\n- name: k1\n  cluster: {server: 'https://h:1'}\n"
		 "users:\n- name: u1\n  user:\n    exec: {apiVersion: client.authentication.k8s.io/v1, command: ./half.sh}\n",
		 err, sizeof(err));
	CHECK(c != NULL);
	if (c) {
		CHECK_INT(kube_config_bearer(c, &t, NULL, err, sizeof(err)), -1);
		CHECK(strstr(err, "status.clientKeyData: missing") != NULL);
		kube_config_free(c);
	}

	/* A plugin that fails: the error names the command and status. */
	write_file("bad.sh", "#!/bin/sh\nexit 4\n", 0700);
	c = load(HEAD "clusters:\n- name: k1\n  cluster: {server: 'https://h:1'}\n"
		 "users:\n- name: u1\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n"
		 "      command: ./bad.sh\n", err, sizeof(err));
	CHECK(c != NULL);
	if (c) {
		CHECK_INT(kube_config_bearer(c, &t, NULL, err, sizeof(err)), -1);
		CHECK(strstr(err, "bad.sh") && strstr(err, "status 4"));
		kube_config_free(c);
	}
	strbuf_release(&t);
}

static void expect_error(const char *yaml, const char *want)
{
	char err[512] = "";
	struct kube_config *c = load(yaml, err, sizeof(err));
	CHECK(c == NULL);
	if (!strstr(err, want) || !strstr(err, "kc.yaml"))
		fprintf(stderr, "want \"%s\" in \"%s\"\n", want, err);
	CHECK(strstr(err, want) != NULL);
	CHECK(strstr(err, "kc.yaml") != NULL);
	kube_config_free(c);
}

static void test_errors(void)
{
	expect_error("current-context: [\n", "invalid YAML at line");
	expect_error("- a\n- b\n", "top level must be a map");
	expect_error("apiVersion: v1\n", "current-context: missing");
	expect_error(HEAD "clusters:\n- name: k1\n  cluster: {}\n", "clusters[0].cluster.server: missing");
	expect_error(HEAD "clusters:\n- name: k1\n  cluster: {server: 'https://h', certificate-authority: nope.pem}\n",
		     "certificate-authority: cannot read file");
	expect_error(HEAD "clusters:\n- name: k1\n  cluster: {server: 'https://h', certificate-authority-data: '@@@'}\n",
		     "certificate-authority-data: not valid base64");
	expect_error(HEAD "clusters:\n- name: k1\n  cluster: {server: 'https://h', insecure-skip-tls-verify: maybe}\n",
		     "insecure-skip-tls-verify (line");
	expect_error(HEAD "clusters:\n- name: k1\n  cluster: {server: 'https://h', insecure-skip-tls-verify: true,"
		     " certificate-authority-data: Q0EK}\n", "exclude each other");
	expect_error(HEAD "clusters:\n- name: k1\n  cluster: {server: 'https://h'}\n"
		     "users:\n- name: u1\n  user: {client-certificate-data: Q0VSVA==}\n",
		     "client-certificate is set but client-key is missing");
	expect_error(HEAD "clusters:\n- name: k1\n  cluster: {server: 'https://h'}\n"
		     "users:\n- name: u1\n  user:\n    exec: {apiVersion: client.authentication.k8s.io/v1alpha1, command: x}\n",
		     "users[0].user.exec.apiVersion");
	expect_error(HEAD "clusters:\n- name: k1\n  cluster: {server: 'https://h'}\n"
		     "users:\n- name: u1\n  user:\n    token: [a]\n", "users[0].user.token (line 18)");
	/* Issue 16: file-typed fields must be regular files, checked at load (a FIFO used to hang
	 * every request, a directory or device passed the checks). */
	char fifo[600], kcyaml[1400];
	snprintf(fifo, sizeof(fifo), "%s/token.fifo", dir);
	CHECK_INT(mkfifo(fifo, 0600), 0);
	snprintf(kcyaml, sizeof(kcyaml), HEAD "clusters:\n- name: k1\n  cluster: {server: 'https://h', "
		 "certificate-authority: %s}\n", dir);
	expect_error(kcyaml, "is a directory, not a regular file");
	expect_error(HEAD "clusters:\n- name: k1\n  cluster: {server: 'https://h', certificate-authority: "
		     "/dev/null}\n", "/dev/null is a device, not a regular file");
	snprintf(kcyaml, sizeof(kcyaml), HEAD "clusters:\n- name: k1\n  cluster: {server: 'https://h'}\n"
		 "users:\n- name: u1\n  user: {tokenFile: %s}\n", fifo);
	expect_error(kcyaml, "token.fifo is a FIFO, not a regular file");
	char err[256];
	CHECK(kube_config_from_kubeconfig(fifo, err, sizeof(err)) == NULL);
	CHECK(strstr(err, "a FIFO, not a regular file") != NULL);
	CHECK(kube_config_from_kubeconfig(dir, err, sizeof(err)) == NULL);
	CHECK(strstr(err, "a directory, not a regular file") != NULL);
	unlink(fifo);
	CHECK(kube_config_from_kubeconfig("/nonexistent/kc", err, sizeof(err)) == NULL);
	CHECK(strstr(err, "/nonexistent/kc") && strstr(err, "No such file"));
}

static void test_options(void)
{
	struct flagset *fs = flags_new("t", "t [flags]");
	struct kube_options o;
	kube_options_register(fs, &o);
	CHECK(o.qps == 5);
	CHECK_INT(o.burst, 10);
	CHECK_INT(o.resync_ns, 10 * NSEC_PER_MIN);
	CHECK_INT(o.le_lease_ns, 15 * NSEC_PER_SEC);
	CHECK_INT(o.le_renew_ns, 10 * NSEC_PER_SEC);
	CHECK_INT(o.le_retry_ns, 5 * NSEC_PER_SEC);
	CHECK_INT(o.retry_start_ns, NSEC_PER_SEC);
	CHECK_INT(o.retry_max_ns, 5 * NSEC_PER_MIN);
	char *argv[] = { "t", "--kubeconfig=/x", "--kube-api-qps", "20.5", "--leader-election",
			 "--leader-election-lease-duration=30s", "--retry-interval-max=1m", NULL };
	int rest;
	char err[256];
	CHECK_INT(flags_parse(fs, 7, argv, &rest, err, sizeof(err)), FLAGS_OK);
	CHECK_STR(o.kubeconfig, "/x");
	CHECK(o.qps == 20.5);
	CHECK(o.leader_election);
	CHECK_INT(o.le_lease_ns, 30 * NSEC_PER_SEC);
	CHECK_INT(o.retry_max_ns, NSEC_PER_MIN);
	flags_free(fs);
}

/*
 * The ExecCredential parser on its own (what fuzz_kube_exec drives): both credential forms,
 * each refusal, and no credential in an error, even from output that is not JSON.
 */
static void test_exec_parse_output(void)
{
	const char *v1 = "client.authentication.k8s.io/v1";
	struct kube_exec_cred cr;
	char err[512];
#define PARSE(text) kube_exec_parse_output(text, strlen(text), v1, &cr, err, sizeof(err))
	CHECK_INT(PARSE("{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":"
			"\"ExecCredential\",\"status\":{\"token\":\"t0k\",\"expirationTimestamp\":"
			"\"2030-01-02T03:04:05Z\"}}"), 0);
	CHECK_STR(cr.token, "t0k");
	CHECK(cr.cert_pem == NULL && cr.key_pem == NULL);
	CHECK_INT(cr.expiry, 1893553445);
	kube_exec_cred_release(&cr);
	CHECK_INT(PARSE("{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":"
			"\"ExecCredential\",\"status\":{\"clientCertificateData\":\"C\","
			"\"clientKeyData\":\"K\"}}"), 0);
	CHECK_STR(cr.token, "");
	CHECK_STR(cr.cert_pem, "C");
	CHECK_STR(cr.key_pem, "K");
	CHECK_INT(cr.expiry, 0);
	kube_exec_cred_release(&cr);
	CHECK_INT(PARSE("{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":"
			"\"ExecCredential\",\"status\":{\"token\":\"t\"}}"), -1);
	CHECK(strstr(err, "not an ExecCredential of client.authentication.k8s.io/v1") != NULL);
	CHECK(cr.token == NULL);
	CHECK_INT(PARSE("{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":"
			"\"ExecCredential\",\"status\":{\"token\":\"\"}}"), -1);
	CHECK(strstr(err, "neither token nor clientCertificateData") != NULL);
	CHECK_INT(PARSE("{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":"
			"\"ExecCredential\",\"status\":{\"token\":\"t\",\"expirationTimestamp\":"
			"\"tomorrow\"}}"), -1);
	CHECK(strstr(err, "expirationTimestamp: \"tomorrow\" is not RFC 3339") != NULL);
	/* jansson would quote the text near the error: here the start of the token */
	CHECK_INT(PARSE("{\"status\":{\"token\":\"s3cr3t-token\\q\"}}"), -1);
	CHECK(strstr(err, "output is not JSON") != NULL);
	CHECK(strstr(err, "s3cr3t") == NULL);
	CHECK_INT(PARSE("{\"status\":{\"token\":\"s3cr3t-token"), -1);
	CHECK(strstr(err, "s3cr3t") == NULL);
	CHECK_INT(kube_exec_parse_output("", 0, v1, &cr, err, sizeof(err)), -1);
#undef PARSE
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/kcsi-kubecfg-XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	RUN(test_full_kubeconfig);
	RUN(test_data_fields);
	RUN(test_token_file_rotation);
	RUN(test_in_cluster);
	RUN(test_master_override);
	RUN(test_exec_plugin);
	RUN(test_exec_parse_output);
	RUN(test_errors);
	RUN(test_options);
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		return 1;
	return CHECK_DONE();
}
