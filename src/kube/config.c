/*
 * Kubeconfig loading with libyaml's document API: the file is loaded into libyaml's node graph
 * and walked by key, so every error can name the field path ("users[0].user.client-key") and the
 * line. Only the current context's cluster and user are read; other entries are not validated,
 * as kubectl does not validate them either.
 *
 * Credentials that change at run time (token file, exec plugin) are resolved per request by
 * kube_config_bearer() under a mutex; a stat() per request is cheap next to an HTTP round trip
 * and means a rotated token is picked up by the very next request.
 */
#include "kube/config.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml.h>

#include "base/log.h"
#include "base/timeutil.h"
#include "base/xalloc.h"

#define MAX_FILE (4 << 20)

static int errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

static const char *not_regular(mode_t m);

/* Reads a whole regular file (up to MAX_FILE) into a NUL-terminated buffer. */
static char *read_file(const char *path, size_t *len, char *why, size_t whylen)
{
	/* O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused just below. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		snprintf(why, whylen, "%s", strerror(errno));
		return NULL;
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || not_regular(st.st_mode)) {
		snprintf(why, whylen, "%s, not a regular file",
			 fstat(fd, &st) ? strerror(errno) : not_regular(st.st_mode));
		close(fd);
		return NULL;
	}
	struct strbuf sb = STRBUF_INIT;
	char tmp[8192];
	ssize_t n;
	while ((n = read(fd, tmp, sizeof(tmp))) > 0) {
		if (sb.len + (size_t)n > MAX_FILE) {
			snprintf(why, whylen, "file larger than %d bytes", MAX_FILE);
			close(fd);
			strbuf_release(&sb);
			return NULL;
		}
		strbuf_add(&sb, tmp, n);
	}
	int e = errno;
	close(fd);
	if (n < 0) {
		snprintf(why, whylen, "%s", strerror(e));
		strbuf_release(&sb);
		return NULL;
	}
	if (len)
		*len = sb.len;
	if (!sb.alloc)
		return xstrdup("");
	return strbuf_detach(&sb, NULL);
}

char *kube_base64_decode(const char *in, size_t *outlen)
{
	size_t n = strlen(in);
	unsigned char *out = xmalloc(n / 4 * 3 + 4);
	size_t o = 0;
	unsigned acc = 0;
	int bits = 0, pad = 0;
	for (const char *p = in; *p; p++) {
		int v;
		char ch = *p;
		if (ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t')
			continue;
		if (ch == '=') {
			pad++;
			continue;
		}
		if (pad)
			goto bad; /* data after padding */
		if (ch >= 'A' && ch <= 'Z') v = ch - 'A';
		else if (ch >= 'a' && ch <= 'z') v = ch - 'a' + 26;
		else if (ch >= '0' && ch <= '9') v = ch - '0' + 52;
		else if (ch == '+') v = 62;
		else if (ch == '/') v = 63;
		else goto bad;
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(acc >> bits);
		}
	}
	if (pad > 2 || bits >= 6)
		goto bad;
	out[o] = 0;
	*outlen = o;
	return (char *)out;
bad:
	free(out);
	return NULL;
}

/* ---- YAML walking ---- */

struct ydoc {
	yaml_document_t doc;
	const char *file;
	char *err;
	size_t errlen;
};

static yaml_node_t *ymap_get(struct ydoc *y, yaml_node_t *map, const char *key)
{
	if (!map || map->type != YAML_MAPPING_NODE)
		return NULL;
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(&y->doc, p->key);
		if (k && k->type == YAML_SCALAR_NODE && strcmp((char *)k->data.scalar.value, key) == 0)
			return yaml_document_get_node(&y->doc, p->value);
	}
	return NULL;
}

static bool yaml_is_null(yaml_node_t *n)
{
	if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	const char *v = (const char *)n->data.scalar.value;
	return !*v || !strcmp(v, "null") || !strcmp(v, "~");
}

/*
 * Reads an optional string field: returns 0 with *out NULL when absent or null, 0 with a copy
 * when a scalar, -1 with an error naming the field when it is not a scalar.
 */
static int ystr(struct ydoc *y, yaml_node_t *map, const char *path, const char *key, char **out)
{
	*out = NULL;
	yaml_node_t *n = ymap_get(y, map, key);
	if (!n || yaml_is_null(n))
		return 0;
	if (n->type != YAML_SCALAR_NODE)
		return errf(y->err, y->errlen, "%s: %s.%s (line %zu): must be a string", y->file, path,
			    key, n->start_mark.line + 1);
	*out = xstrdup((const char *)n->data.scalar.value);
	return 0;
}

static int ybool(struct ydoc *y, yaml_node_t *map, const char *path, const char *key, bool *out)
{
	yaml_node_t *n = ymap_get(y, map, key);
	*out = false;
	if (!n || yaml_is_null(n))
		return 0;
	const char *v = n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : "";
	if (!strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "TRUE"))
		*out = true;
	else if (strcmp(v, "false") && strcmp(v, "False") && strcmp(v, "FALSE"))
		return errf(y->err, y->errlen, "%s: %s.%s (line %zu): must be true or false", y->file,
			    path, key, n->start_mark.line + 1);
	return 0;
}

/*
 * Finds the entry `name` in a named list (contexts, clusters, users) and returns its inner map
 * (entry[field]). *idx receives the entry's index for messages.
 */
static yaml_node_t *ynamed(struct ydoc *y, yaml_node_t *root, const char *list, const char *field,
			   const char *name, int *idx)
{
	yaml_node_t *seq = ymap_get(y, root, list);
	if (!seq || yaml_is_null(seq)) {
		errf(y->err, y->errlen, "%s: %s: missing, but %s \"%s\" is needed", y->file, list,
		     field, name);
		return NULL;
	}
	if (seq->type != YAML_SEQUENCE_NODE) {
		errf(y->err, y->errlen, "%s: %s (line %zu): must be a list", y->file, list,
		     seq->start_mark.line + 1);
		return NULL;
	}
	int i = 0;
	for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top;
	     it++, i++) {
		yaml_node_t *e = yaml_document_get_node(&y->doc, *it);
		yaml_node_t *nm = ymap_get(y, e, "name");
		if (nm && nm->type == YAML_SCALAR_NODE &&
		    strcmp((const char *)nm->data.scalar.value, name) == 0) {
			yaml_node_t *inner = ymap_get(y, e, field);
			if (!inner || inner->type != YAML_MAPPING_NODE) {
				errf(y->err, y->errlen, "%s: %s[%d].%s (line %zu): missing or not a map",
				     y->file, list, i, field, e->start_mark.line + 1);
				return NULL;
			}
			*idx = i;
			return inner;
		}
	}
	errf(y->err, y->errlen, "%s: %s: no entry named \"%s\"", y->file, list, name);
	return NULL;
}

/* Makes a relative path absolute against dir. */
static char *resolve(const char *dir, char *path)
{
	if (!path || path[0] == '/' || !*path)
		return path;
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "%s/%s", dir, path);
	free(path);
	return strbuf_detach(&sb, NULL);
}

/* What a non-regular file is, for error messages; NULL for a regular file. */
static const char *not_regular(mode_t m)
{
	return S_ISREG(m) ? NULL : S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO"
	       : S_ISCHR(m) || S_ISBLK(m) ? "a device" : S_ISSOCK(m) ? "a socket" : "not a file";
}

/* File-typed fields must name readable regular files: a directory, device or FIFO is refused
 * at load time (a FIFO would otherwise hang every request that reads it). */
static int check_readable(struct ydoc *y, const char *field, const char *path)
{
	struct stat st;
	if (path && access(path, R_OK) != 0)
		return errf(y->err, y->errlen, "%s: %s: cannot read file %s: %s", y->file, field, path,
			    strerror(errno));
	if (path && stat(path, &st) == 0 && not_regular(st.st_mode))
		return errf(y->err, y->errlen, "%s: %s: %s is %s, not a regular file", y->file,
			    field, path, not_regular(st.st_mode));
	return 0;
}

static int ydata(struct ydoc *y, yaml_node_t *map, const char *path, const char *key, char **out,
		 size_t *len)
{
	char *b64;
	*out = NULL;
	if (ystr(y, map, path, key, &b64) != 0)
		return -1;
	if (!b64)
		return 0;
	*out = kube_base64_decode(b64, len);
	free(b64);
	if (!*out)
		return errf(y->err, y->errlen, "%s: %s.%s: not valid base64", y->file, path, key);
	return 0;
}

static char **ystrlist(struct ydoc *y, yaml_node_t *n, const char *path, int *rc)
{
	*rc = 0;
	size_t cnt = 0;
	if (n && !yaml_is_null(n) && n->type != YAML_SEQUENCE_NODE) {
		*rc = errf(y->err, y->errlen, "%s: %s (line %zu): must be a list", y->file, path,
			   n->start_mark.line + 1);
		return NULL;
	}
	if (n && n->type == YAML_SEQUENCE_NODE)
		cnt = n->data.sequence.items.top - n->data.sequence.items.start;
	char **v = xcalloc(cnt + 1, sizeof(char *));
	for (size_t i = 0; i < cnt; i++) {
		yaml_node_t *e = yaml_document_get_node(&y->doc, n->data.sequence.items.start[i]);
		if (!e || e->type != YAML_SCALAR_NODE) {
			*rc = errf(y->err, y->errlen, "%s: %s[%zu]: must be a string", y->file, path, i);
			return v;
		}
		v[i] = xstrdup((const char *)e->data.scalar.value);
	}
	return v;
}

static void free_strv(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

static void exec_free(struct kube_exec *e)
{
	if (!e)
		return;
	free(e->api_version);
	free(e->command);
	free_strv(e->args);
	free_strv(e->env);
	free(e);
}

static int load_exec(struct ydoc *y, yaml_node_t *n, const char *path, const char *dir,
		     struct kube_config *c)
{
	struct kube_exec *e = xcalloc(1, sizeof(*e));
	c->exec = e;
	char p[256];
	snprintf(p, sizeof(p), "%s.exec", path);
	if (n->type != YAML_MAPPING_NODE)
		return errf(y->err, y->errlen, "%s: %s: must be a map", y->file, p);
	if (ystr(y, n, p, "apiVersion", &e->api_version) || ystr(y, n, p, "command", &e->command))
		return -1;
	if (!e->command)
		return errf(y->err, y->errlen, "%s: %s.command: missing", y->file, p);
	if (!e->api_version)
		return errf(y->err, y->errlen, "%s: %s.apiVersion: missing", y->file, p);
	if (strcmp(e->api_version, "client.authentication.k8s.io/v1") &&
	    strcmp(e->api_version, "client.authentication.k8s.io/v1beta1"))
		return errf(y->err, y->errlen,
			    "%s: %s.apiVersion: \"%s\" is not supported (use "
			    "client.authentication.k8s.io/v1 or v1beta1)",
			    y->file, p, e->api_version);
	if (strchr(e->command, '/'))
		e->command = resolve(dir, e->command);
	int rc;
	char ap[300];
	snprintf(ap, sizeof(ap), "%s.args", p);
	e->args = ystrlist(y, ymap_get(y, n, "args"), ap, &rc);
	if (rc)
		return -1;
	yaml_node_t *env = ymap_get(y, n, "env");
	size_t cnt = (env && env->type == YAML_SEQUENCE_NODE)
			     ? (size_t)(env->data.sequence.items.top - env->data.sequence.items.start)
			     : 0;
	e->env = xcalloc(cnt + 1, sizeof(char *));
	for (size_t i = 0; i < cnt; i++) {
		yaml_node_t *ent = yaml_document_get_node(&y->doc, env->data.sequence.items.start[i]);
		char ep[300], *name = NULL, *value = NULL;
		snprintf(ep, sizeof(ep), "%s.env[%zu]", p, i);
		if (ystr(y, ent, ep, "name", &name) || ystr(y, ent, ep, "value", &value) || !name) {
			free(name);
			free(value);
			return name ? -1 : errf(y->err, y->errlen, "%s: %s.name: missing", y->file, ep);
		}
		struct strbuf sb = STRBUF_INIT;
		strbuf_addf(&sb, "%s=%s", name, value ? value : "");
		e->env[i] = strbuf_detach(&sb, NULL);
		free(name);
		free(value);
	}
	return 0;
}

static int load_cluster(struct ydoc *y, yaml_node_t *cl, const char *p, const char *dir,
			struct kube_config *c)
{
	if (ystr(y, cl, p, "server", &c->server) ||
	    ystr(y, cl, p, "certificate-authority", &c->ca_file) ||
	    ydata(y, cl, p, "certificate-authority-data", &c->ca_pem, &c->ca_pem_len) ||
	    ybool(y, cl, p, "insecure-skip-tls-verify", &c->insecure) ||
	    ystr(y, cl, p, "tls-server-name", &c->tls_server_name))
		return -1;
	if (!c->server || !*c->server)
		return errf(y->err, y->errlen, "%s: %s.server: missing", y->file, p);
	if (strncmp(c->server, "https://", 8) && strncmp(c->server, "http://", 7))
		return errf(y->err, y->errlen, "%s: %s.server: \"%s\" is not an http(s) URL", y->file,
			    p, c->server);
	if (c->insecure && (c->ca_file || c->ca_pem))
		return errf(y->err, y->errlen,
			    "%s: %s: insecure-skip-tls-verify and a certificate authority exclude each "
			    "other (drop one)", y->file, p);
	c->ca_file = resolve(dir, c->ca_file);
	char f[300];
	snprintf(f, sizeof(f), "%s.certificate-authority", p);
	return check_readable(y, f, c->ca_file);
}

static int load_user(struct ydoc *y, yaml_node_t *u, const char *p, const char *dir,
		     struct kube_config *c)
{
	if (ystr(y, u, p, "token", &c->token) || ystr(y, u, p, "tokenFile", &c->token_file) ||
	    ystr(y, u, p, "client-certificate", &c->cert_file) ||
	    ystr(y, u, p, "client-key", &c->key_file) ||
	    ydata(y, u, p, "client-certificate-data", &c->cert_pem, &c->cert_pem_len) ||
	    ydata(y, u, p, "client-key-data", &c->key_pem, &c->key_pem_len) ||
	    ystr(y, u, p, "username", &c->username) || ystr(y, u, p, "password", &c->password))
		return -1;
	c->token_file = resolve(dir, c->token_file);
	c->cert_file = resolve(dir, c->cert_file);
	c->key_file = resolve(dir, c->key_file);
	char f[300];
	static const char *names[] = { "tokenFile", "client-certificate", "client-key" };
	const char *files[] = { c->token_file, c->cert_file, c->key_file };
	for (int i = 0; i < 3; i++) {
		snprintf(f, sizeof(f), "%s.%s", p, names[i]);
		if (check_readable(y, f, files[i]))
			return -1;
	}
	bool has_cert = c->cert_file || c->cert_pem, has_key = c->key_file || c->key_pem;
	if (has_cert != has_key)
		return errf(y->err, y->errlen, "%s: %s: %s is set but %s is missing", y->file, p,
			    has_cert ? "client-certificate" : "client-key",
			    has_cert ? "client-key" : "client-certificate");
	yaml_node_t *ex = ymap_get(y, u, "exec");
	if (ex && !yaml_is_null(ex))
		return load_exec(y, ex, p, dir, c);
	return 0;
}

static struct kube_config *config_new(const char *source)
{
	struct kube_config *c = xcalloc(1, sizeof(*c));
	c->source = xstrdup(source);
	pthread_mutex_init(&c->mu, NULL);
	return c;
}

struct kube_config *kube_config_from_kubeconfig(const char *path, char *err, size_t errlen)
{
	char why[256];
	size_t len;
	char *text = read_file(path, &len, why, sizeof(why));
	if (!text) {
		errf(err, errlen, "kubeconfig %s: %s", path, why);
		return NULL;
	}
	struct ydoc y = { .file = path, .err = err, .errlen = errlen };
	yaml_parser_t parser;
	yaml_parser_initialize(&parser);
	yaml_parser_set_input_string(&parser, (unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &y.doc)) {
		errf(err, errlen, "%s: invalid YAML at line %zu column %zu: %s", path,
		     parser.problem_mark.line + 1, parser.problem_mark.column + 1,
		     parser.problem ? parser.problem : "parse error");
		yaml_parser_delete(&parser);
		free(text);
		return NULL;
	}
	yaml_parser_delete(&parser);
	free(text);

	struct kube_config *c = config_new(path);
	char *pathcopy = xstrdup(path);
	const char *dir = dirname(pathcopy);
	char *cur = NULL, *cluster = NULL, *user = NULL;
	yaml_node_t *root = yaml_document_get_root_node(&y.doc);
	int rc = -1, ci, ui, xi;
	char p[128];
	if (!root || root->type != YAML_MAPPING_NODE) {
		errf(err, errlen, "%s: not a kubeconfig (the top level must be a map)", path);
		goto out;
	}
	if (ystr(&y, root, "", "current-context", &cur))
		goto out;
	if (!cur || !*cur) {
		errf(err, errlen, "%s: current-context: missing", path);
		goto out;
	}
	yaml_node_t *ctx = ynamed(&y, root, "contexts", "context", cur, &xi);
	if (!ctx)
		goto out;
	snprintf(p, sizeof(p), "contexts[%d].context", xi);
	if (ystr(&y, ctx, p, "cluster", &cluster) || ystr(&y, ctx, p, "user", &user) ||
	    ystr(&y, ctx, p, "namespace", &c->namespace))
		goto out;
	if (!cluster) {
		errf(err, errlen, "%s: %s.cluster: missing", path, p);
		goto out;
	}
	yaml_node_t *cl = ynamed(&y, root, "clusters", "cluster", cluster, &ci);
	if (!cl)
		goto out;
	snprintf(p, sizeof(p), "clusters[%d].cluster", ci);
	if (load_cluster(&y, cl, p, dir, c))
		goto out;
	if (user && *user) {
		yaml_node_t *u = ynamed(&y, root, "users", "user", user, &ui);
		if (!u)
			goto out;
		snprintf(p, sizeof(p), "users[%d].user", ui);
		if (load_user(&y, u, p, dir, c))
			goto out;
	}
	rc = 0;
out:
	free(cur);
	free(cluster);
	free(user);
	free(pathcopy);
	yaml_document_delete(&y.doc);
	if (rc) {
		kube_config_free(c);
		return NULL;
	}
	return c;
}

struct kube_config *kube_config_in_cluster(const char *sa_dir, char *err, size_t errlen)
{
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *port = getenv("KUBERNETES_SERVICE_PORT");
	if (!sa_dir)
		sa_dir = KUBE_SA_DIR;
	if (!host || !*host || !port || !*port) {
		errf(err, errlen,
		     "in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be "
		     "set (or pass --kubeconfig)");
		return NULL;
	}
	struct kube_config *c = config_new("in-cluster");
	struct strbuf sb = STRBUF_INIT;
	if (strchr(host, ':'))
		strbuf_addf(&sb, "https://[%s]:%s", host, port);
	else
		strbuf_addf(&sb, "https://%s:%s", host, port);
	c->server = strbuf_detach(&sb, NULL);
	strbuf_addf(&sb, "%s/token", sa_dir);
	c->token_file = strbuf_detach(&sb, NULL);
	strbuf_addf(&sb, "%s/ca.crt", sa_dir);
	c->ca_file = strbuf_detach(&sb, NULL);
	if (access(c->token_file, R_OK) != 0 || access(c->ca_file, R_OK) != 0) {
		errf(err, errlen, "in-cluster config: cannot read %s: %s",
		     access(c->token_file, R_OK) ? c->token_file : c->ca_file, strerror(errno));
		kube_config_free(c);
		return NULL;
	}
	strbuf_addf(&sb, "%s/namespace", sa_dir);
	char why[128];
	char *ns = read_file(sb.buf, NULL, why, sizeof(why));
	strbuf_release(&sb);
	if (ns) {
		ns[strcspn(ns, "\r\n")] = 0;
		c->namespace = ns;
	}
	return c;
}

struct kube_config *kube_config_load(const char *kubeconfig, const char *master, const char *sa_dir,
				     char *err, size_t errlen)
{
	struct kube_config *c;
	bool has_master = master && *master;
	if (kubeconfig && *kubeconfig) {
		c = kube_config_from_kubeconfig(kubeconfig, err, errlen);
	} else if (has_master) {
		c = config_new("--master");
	} else {
		return kube_config_in_cluster(sa_dir, err, errlen);
	}
	if (c && has_master) {
		if (strncmp(master, "https://", 8) && strncmp(master, "http://", 7)) {
			errf(err, errlen, "--master: \"%s\" is not an http(s) URL", master);
			kube_config_free(c);
			return NULL;
		}
		free(c->server);
		c->server = xstrdup(master);
	}
	if (c) {
		size_t n = strlen(c->server);
		while (n > 0 && c->server[n - 1] == '/')
			c->server[--n] = 0;
	}
	return c;
}

void kube_config_free(struct kube_config *c)
{
	if (!c)
		return;
	free(c->source);
	free(c->server);
	free(c->ca_file);
	free(c->ca_pem);
	free(c->tls_server_name);
	free(c->namespace);
	free(c->token);
	free(c->token_file);
	free(c->cert_file);
	free(c->key_file);
	free(c->cert_pem);
	free(c->key_pem);
	free(c->username);
	free(c->password);
	exec_free(c->exec);
	free(c->cached_token);
	free(c->exec_cert_pem);
	free(c->exec_key_pem);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

/* ---- credentials ---- */

static int refresh_token_file(struct kube_config *c, char *err, size_t errlen)
{
	struct stat st;
	if (stat(c->token_file, &st) != 0)
		return errf(err, errlen, "%s: token file %s: %s", c->source, c->token_file,
			    strerror(errno));
	if (c->cached_token && st.st_mtim.tv_sec == c->token_mtime.tv_sec &&
	    st.st_mtim.tv_nsec == c->token_mtime.tv_nsec && (int64_t)st.st_ino == c->token_ino &&
	    st.st_size == c->token_size)
		return 0;
	char why[128];
	char *t = read_file(c->token_file, NULL, why, sizeof(why));
	if (!t)
		return errf(err, errlen, "%s: token file %s: %s", c->source, c->token_file, why);
	size_t n = strlen(t);
	while (n && (t[n - 1] == '\n' || t[n - 1] == '\r' || t[n - 1] == ' '))
		t[--n] = 0;
	if (c->cached_token)
		KLOG_V(2, "Token file changed, using the new token file=%s", LOGQ(c->token_file));
	free(c->cached_token);
	c->cached_token = t;
	c->token_mtime = st.st_mtim;
	c->token_ino = st.st_ino;
	c->token_size = st.st_size;
	c->cred_generation++;
	return 0;
}

/* Runs the exec plugin and parses its ExecCredential. */
static int run_exec(struct kube_config *c, char *err, size_t errlen)
{
	struct kube_exec *e = c->exec;
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) != 0)
		return errf(err, errlen, "exec plugin %s: pipe: %s", e->command, strerror(errno));
	/* Build argv and envp before fork: only async-signal-safe calls after it. */
	size_t na = 0, ne = 0, nenv = 0;
	while (e->args[na])
		na++;
	while (e->env[ne])
		ne++;
	extern char **environ;
	while (environ[nenv])
		nenv++;
	char **argv = xcalloc(na + 2, sizeof(char *));
	argv[0] = e->command;
	memcpy(argv + 1, e->args, na * sizeof(char *));
	char **envp = xcalloc(nenv + ne + 2, sizeof(char *));
	memcpy(envp, environ, nenv * sizeof(char *));
	memcpy(envp + nenv, e->env, ne * sizeof(char *));
	struct strbuf info = STRBUF_INIT;
	strbuf_addf(&info,
		    "KUBERNETES_EXEC_INFO={\"apiVersion\":\"%s\",\"kind\":\"ExecCredential\","
		    "\"spec\":{\"interactive\":false}}",
		    e->api_version);
	envp[nenv + ne] = info.buf;
	pid_t pid = fork();
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDONLY);
		if (devnull >= 0)
			dup2(devnull, 0);
		dup2(pfd[1], 1);
		execvpe(argv[0], argv, envp);
		_exit(127);
	}
	close(pfd[1]);
	free(argv);
	free(envp);
	strbuf_release(&info);
	if (pid < 0) {
		close(pfd[0]);
		return errf(err, errlen, "exec plugin %s: fork: %s", e->command, strerror(errno));
	}
	struct strbuf out = STRBUF_INIT;
	char buf[4096];
	ssize_t n;
	bool too_big = false;
	while ((n = read(pfd[0], buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR)) {
		if (n > 0 && out.len + (size_t)n <= MAX_FILE)
			strbuf_add(&out, buf, n);
		else if (n > 0)
			too_big = true; /* read on, so that the plugin does not block on a full pipe */
	}
	close(pfd[0]);
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	int rc = -1;
	struct kube_exec_cred cred = { 0 };
	char why[384];
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		errf(err, errlen, "exec plugin %s: exited with status %d%s", e->command,
		     WIFEXITED(status) ? WEXITSTATUS(status) : -1,
		     WIFEXITED(status) && WEXITSTATUS(status) == 127 ? " (command not found?)" : "");
		goto out;
	}
	if (too_big) {
		errf(err, errlen, "exec plugin %s: output larger than %d bytes", e->command, MAX_FILE);
		goto out;
	}
	if (kube_exec_parse_output(out.buf, out.len, e->api_version, &cred, why, sizeof(why))) {
		errf(err, errlen, "exec plugin %s: %s", e->command, why);
		goto out;
	}
	free(c->cached_token);
	c->cached_token = cred.token;
	free(c->exec_cert_pem);
	free(c->exec_key_pem);
	c->exec_cert_pem = cred.cert_pem;
	c->exec_key_pem = cred.key_pem;
	c->exec_expiry = cred.expiry;
	c->exec_valid = true;
	c->cred_generation++;
	rc = 0;
out:
	strbuf_release(&out);
	return rc;
}

int kube_exec_parse_output(const char *out, size_t len, const char *api_version,
			   struct kube_exec_cred *cred, char *err, size_t errlen)
{
	memset(cred, 0, sizeof(*cred));
	json_error_t jerr;
	json_t *root = json_loadb(out, len, 0, &jerr);
	if (!root) {
		/* jansson quotes the text near the error, which may be part of a token or key */
		char *near = strstr(jerr.text, " near ");
		if (near)
			*near = '\0';
		return errf(err, errlen, "output is not JSON: %s (line %d, column %d)", jerr.text,
			    jerr.line, jerr.column);
	}
	int rc = -1;
	const char *kind = json_string_value(json_object_get(root, "kind"));
	const char *api = json_string_value(json_object_get(root, "apiVersion"));
	if (!kind || strcmp(kind, "ExecCredential") || !api || strcmp(api, api_version)) {
		errf(err, errlen, "output is not an ExecCredential of %s", api_version);
		goto out;
	}
	json_t *st = json_object_get(root, "status");
	const char *tok = json_string_value(json_object_get(st, "token"));
	const char *cert = json_string_value(json_object_get(st, "clientCertificateData"));
	const char *key = json_string_value(json_object_get(st, "clientKeyData"));
	if (!cert != !key) {
		errf(err, errlen, "status.%s: missing (clientCertificateData and clientKeyData come "
				  "together)", cert ? "clientKeyData" : "clientCertificateData");
		goto out;
	}
	if ((!tok || !*tok) && !cert) {
		errf(err, errlen, "status: neither token nor clientCertificateData given");
		goto out;
	}
	const char *exp = json_string_value(json_object_get(st, "expirationTimestamp"));
	time_t t = 0;
	if (exp && rfc3339_parse(exp, &t) != 0) {
		errf(err, errlen, "status.expirationTimestamp: \"%.64s\" is not RFC 3339", exp);
		goto out;
	}
	cred->token = xstrdup(tok ? tok : "");
	cred->cert_pem = cert ? xstrdup(cert) : NULL;
	cred->key_pem = key ? xstrdup(key) : NULL;
	cred->expiry = t;
	rc = 0;
out:
	json_decref(root);
	return rc;
}

void kube_exec_cred_release(struct kube_exec_cred *cred)
{
	free(cred->token);
	free(cred->cert_pem);
	free(cred->key_pem);
	memset(cred, 0, sizeof(*cred));
}

int kube_config_bearer(struct kube_config *c, struct strbuf *token, unsigned *gen, char *err,
		       size_t errlen)
{
	int rc = 0;
	strbuf_reset(token);
	pthread_mutex_lock(&c->mu);
	/* As client-go: a token file, when given, wins over a static token (it is the one kept fresh). */
	if (c->token_file) {
		rc = refresh_token_file(c, err, errlen);
		if (!rc)
			strbuf_addstr(token, c->cached_token);
	} else if (c->token) {
		strbuf_addstr(token, c->token);
	} else if (c->exec) {
		/* Renew a little before expiry so a request never carries a just-expired token. */
		if (!c->exec_valid || (c->exec_expiry && time(NULL) + 10 >= c->exec_expiry))
			rc = run_exec(c, err, errlen);
		if (!rc)
			strbuf_addstr(token, c->cached_token);
	}
	if (gen)
		*gen = c->cred_generation;
	pthread_mutex_unlock(&c->mu);
	/* It goes into an HTTP header: a CR or LF would add headers of the token source's choosing. */
	for (size_t i = 0; !rc && i < token->len; i++) {
		unsigned char ch = (unsigned char)token->buf[i];
		if (ch < 0x20 || ch == 0x7f) {
			snprintf(err, errlen, "the bearer token (from the %s) contains a control character (0x%02x at byte %zu); not sending it",
				 c->token_file ? "tokenFile" : c->token ? "kubeconfig token" : "exec plugin", ch, i);
			strbuf_reset(token);
			rc = -1;
		}
	}
	return rc;
}

void kube_config_exec_cert(struct kube_config *c, struct strbuf *cert, struct strbuf *key)
{
	strbuf_reset(cert);
	strbuf_reset(key);
	pthread_mutex_lock(&c->mu);
	if (c->exec_cert_pem && c->exec_key_pem) {
		strbuf_addstr(cert, c->exec_cert_pem);
		strbuf_addstr(key, c->exec_key_pem);
	}
	pthread_mutex_unlock(&c->mu);
}

void kube_config_invalidate(struct kube_config *c, unsigned gen)
{
	pthread_mutex_lock(&c->mu);
	if (gen == c->cred_generation)
		c->exec_valid = false;
	pthread_mutex_unlock(&c->mu);
}
