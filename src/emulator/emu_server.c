/*
 * emu_server: the HTTP side of kube-emulator — listening socket, libmicrohttpd daemon, request
 * accumulation, token auth, discovery documents, routing of REST paths to the verbs (emu_verbs,
 * emu_watch, emu_faults, which answer through emu_reply; the server only dispatches), and the
 * kubeconfig a test hands to its clients.
 *
 * Routing follows kube-apiserver's path grammar:
 *   /api/v1/[namespaces/{ns}/]{resource}[/{name}[/status]]
 *   /apis/{group}/{version}/[namespaces/{ns}/]{resource}[/{name}[/status]]
 * where "namespaces/{ns}/" is only a scope when the segment after it names a namespaced
 * resource; otherwise /api/v1/namespaces/{name} is the Namespace object itself.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/strbuf.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "emulator/emu_events.h"
#include "emulator/emu_internal.h"
#include "emulator/emu_object.h"
#include "emulator/emu_proto.h"
#include "emulator/emu_reply.h"
#include "emulator/emu_server.h"
#include "emulator/emu_state.h"
#include "emulator/emu_verbs.h"
#include "emulator/emu_watch.h"

#define MAX_BODY (3 * 1024 * 1024) /* kube-apiserver's default request body limit */

struct req {
	struct strbuf body;
	bool too_big;
	bool started;
	bool watch;        /* served a watch: the idle timeout was lifted for it */
	char bad_uri[160]; /* why the raw URI is refused (400), or "" */
};

static enum MHD_Result reply_path_not_found(struct MHD_Connection *c)
{
	return emu_reply_status(c, 404, "NotFound", "the server could not find the requested "
				"resource", NULL);
}

/* ---- discovery ---- */

static json_t *resource_list(struct emu_server *srv, const char *group, const char *version)
{
	json_t *list = json_array();
	char gv[96] = "";
	for (size_t i = 0; i < srv->st.nres; i++) {
		struct emu_resource *r = &srv->st.res[i];
		if (strcmp(r->group, group) || (strcmp(r->version, version) &&
		    (!r->also_version || strcmp(r->also_version, version))))
			continue;
		snprintf(gv, sizeof(gv), "%s%s%s", group, *group ? "/" : "", version);
		json_t *shorts = json_array();
		for (const char *p = r->short_names; *p;) {
			size_t n = strcspn(p, ",");
			json_array_append_new(shorts, json_stringn(p, n));
			p += n + (p[n] ? 1 : 0);
		}
		json_t *e = json_pack("{s:s, s:s, s:b, s:s, s:[s,s,s,s,s,s,s,s]}", "name", r->plural,
				      "singularName", r->singular, "namespaced", r->namespaced,
				      "kind", r->kind, "verbs", "create", "delete",
				      "deletecollection", "get", "list", "patch", "update", "watch");
		if (json_array_size(shorts))
			json_object_set(e, "shortNames", shorts);
		if (!strcmp(r->plural, "pods")) /* so that "kubectl get all" resolves */
			json_object_set_new(e, "categories", json_pack("[s]", "all"));
		json_decref(shorts);
		json_array_append_new(list, e);
		if (r->has_status) {
			char sub[96];
			snprintf(sub, sizeof(sub), "%s/status", r->plural);
			json_array_append_new(list, json_pack("{s:s, s:s, s:b, s:s, s:[s,s,s]}",
				"name", sub, "singularName", "", "namespaced", r->namespaced,
				"kind", r->kind, "verbs", "get", "patch", "update"));
		}
	}
	if (!json_array_size(list)) {
		json_decref(list);
		return NULL;
	}
	return json_pack("{s:s, s:s, s:s, s:o}", "kind", "APIResourceList", "apiVersion", "v1",
			 "groupVersion", gv, "resources", list);
}

/* A group's APIGroup entry, the preferred version first: also_version (v1 where v1beta2 is
 * stored) when there is one, as kube-apiserver orders a CRD's versions by maturity. */
static json_t *group_entry(const struct emu_resource *r)
{
	const char *versions[2] = { r->also_version ? r->also_version : r->version,
				    r->also_version ? r->version : NULL };
	json_t *list = json_array();
	char gv[96];
	for (int i = 0; i < 2 && versions[i]; i++) {
		snprintf(gv, sizeof(gv), "%s/%s", r->group, versions[i]);
		json_array_append_new(list, json_pack("{s:s, s:s}", "groupVersion", gv, "version",
						      versions[i]));
	}
	snprintf(gv, sizeof(gv), "%s/%s", r->group, versions[0]);
	return json_pack("{s:s, s:o, s:{s:s, s:s}}", "name", r->group, "versions", list,
			 "preferredVersion", "groupVersion", gv, "version", versions[0]);
}

static json_t *group_list(struct emu_server *srv)
{
	json_t *groups = json_array();
	for (size_t i = 0; i < srv->st.nres; i++) {
		const char *g = srv->st.res[i].group;
		bool seen = !*g;
		for (size_t j = 0; j < i && !seen; j++)
			seen = !strcmp(srv->st.res[j].group, g);
		if (!seen)
			json_array_append_new(groups, group_entry(&srv->st.res[i]));
	}
	return json_pack("{s:s, s:s, s:o}", "kind", "APIGroupList", "apiVersion", "v1", "groups",
			 groups);
}

/*
 * OpenAPI v3, reduced to what kubectl reads: per group-version, one PATCH operation per kind that
 * declares the fieldValidation query parameter. kubectl then validates on the server side (which
 * this emulator accepts without schema checks) instead of downloading full schemas.
 */
static json_t *openapi_root(struct emu_server *srv)
{
	json_t *paths = json_object();
	for (size_t i = 0; i < srv->st.nres; i++) {
		const struct emu_resource *r = &srv->st.res[i];
		char key[128], url[192];
		snprintf(key, sizeof(key), "%s%s", *r->group ? "apis/" : "api/", r->api_version);
		snprintf(url, sizeof(url), "/openapi/v3/%s?hash=kube-emulator-1", key);
		json_object_set_new(paths, key, json_pack("{s:s}", "serverRelativeURL", url));
		if (r->also_version) {
			snprintf(key, sizeof(key), "apis/%s/%s", r->group, r->also_version);
			snprintf(url, sizeof(url), "/openapi/v3/%s?hash=kube-emulator-1", key);
			json_object_set_new(paths, key, json_pack("{s:s}", "serverRelativeURL", url));
		}
	}
	return json_pack("{s:o}", "paths", paths);
}

static json_t *openapi_gv(struct emu_server *srv, const char *gvpath)
{
	json_t *paths = json_object();
	for (size_t i = 0; i < srv->st.nres; i++) {
		const struct emu_resource *r = &srv->st.res[i];
		char key[128], alt[128] = "", path[256];
		snprintf(key, sizeof(key), "%s%s", *r->group ? "apis/" : "api/", r->api_version);
		if (r->also_version)
			snprintf(alt, sizeof(alt), "apis/%s/%s", r->group, r->also_version);
		const char *version = r->version;
		if (*alt && !strcmp(alt, gvpath)) {
			snprintf(key, sizeof(key), "%s", alt);
			version = r->also_version;
		}
		if (strcmp(key, gvpath))
			continue;
		const char *ns = r->namespaced ? "namespaces/{namespace}/" : "";
		snprintf(path, sizeof(path), "/%s/%s%s/{name}", key, ns, r->plural);
		json_t *op = json_pack("{s:{s:s, s:s, s:s}, s:s, s:[{s:s, s:s, s:{s:s}}], s:{s:{s:s}}}",
			"x-kubernetes-group-version-kind", "group", r->group, "version", version,
			"kind", r->kind, "x-kubernetes-action", "patch", "parameters", "name",
			"fieldValidation", "in", "query", "schema", "type", "string", "responses",
			"200", "description", "OK");
		json_object_set_new(paths, path, json_pack("{s:o}", "patch", op));
	}
	if (!json_object_size(paths)) {
		json_decref(paths);
		return NULL;
	}
	return json_pack("{s:s, s:{s:s, s:s}, s:o}", "openapi", "3.0.0", "info", "title",
			 "kube-emulator", "version", EMU_KUBE_VERSION, "paths", paths);
}

static enum MHD_Result discovery(struct emu_server *srv, struct MHD_Connection *c,
				 const char *url, bool *handled)
{
	*handled = true;
	/* kube-apiserver v1.37.2's answer (emulation 1.37, minimum compatibility 1.36); the build
	 * facts (commit, date, toolchain) are kube-emulator's */
	if (!strcmp(url, "/version"))
		return emu_reply_json(c, 200, json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, "
			"s:s, s:s, s:s, s:s}", "major", "1", "minor", "37", "emulationMajor", "1",
			"emulationMinor", "37", "minCompatibilityMajor", "1", "minCompatibilityMinor", "36",
			"gitVersion", EMU_KUBE_VERSION, "gitCommit", "0000000000000000000000000000000000000000",
			"gitTreeState", "clean", "buildDate", "2026-01-01T00:00:00Z", "goVersion", "none",
			"compiler", "gcc", "platform", "linux/amd64"));
	if (!strcmp(url, "/api"))
		return emu_reply_json(c, 200, json_pack("{s:s, s:[s], s:[{s:s, s:s}]}", "kind",
			"APIVersions", "versions", "v1", "serverAddressByClientCIDRs", "clientCIDR",
			"0.0.0.0/0", "serverAddress", srv->host_port));
	if (!strcmp(url, "/api/v1"))
		return emu_reply_json(c, 200, resource_list(srv, "", "v1"));
	if (!strcmp(url, "/apis"))
		return emu_reply_json(c, 200, group_list(srv));
	if (!strncmp(url, "/apis/", 6)) {
		char g[64], v[32], extra;
		int n = sscanf(url + 6, "%63[^/]/%31[^/]%c", g, v, &extra);
		if (n == 1 || (n == 2 && url[strlen(url) - 1] != '/')) {
			for (size_t i = 0; i < srv->st.nres; i++) {
				if (strcmp(srv->st.res[i].group, g))
					continue;
				if (n == 1) {
					json_t *e = group_entry(&srv->st.res[i]);
					json_object_set_new(e, "kind", json_string("APIGroup"));
					json_object_set_new(e, "apiVersion", json_string("v1"));
					return emu_reply_json(c, 200, e);
				}
				json_t *l = resource_list(srv, g, v);
				if (l)
					return emu_reply_json(c, 200, l);
				break;
			}
			return reply_path_not_found(c);
		}
	}
	if (!strcmp(url, "/openapi/v2")) {
		/*
		 * An OpenAPI v2 document with no definitions. Older kubectl (Debian's 1.20) validates
		 * manifests against /openapi/v2 and skips kinds the document does not describe, so
		 * an empty document makes "create -f" work; a 404 would make it fail. The protobuf
		 * form of an empty message is zero bytes.
		 */
		const char *accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Accept");
		bool proto = accept && strstr(accept, "protobuf");
		const char *body = proto ? "" : "{\"swagger\":\"2.0\",\"info\":{\"title\":"
						"\"kube-emulator\",\"version\":\"" EMU_KUBE_VERSION "\"},\"paths\":{}}";
		struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), (void *)body,
									 MHD_RESPMEM_PERSISTENT);
		/* as upstream: clients' media-type parsers reject the '@' of the Accept value */
		MHD_add_response_header(r, "Content-Type", proto ? "application/octet-stream" :
			"application/json");
		enum MHD_Result ret = MHD_queue_response(c, 200, r);
		MHD_destroy_response(r);
		return ret;
	}
	if (!strcmp(url, "/openapi/v3"))
		return emu_reply_json(c, 200, openapi_root(srv));
	if (!strncmp(url, "/openapi/v3/", 12)) {
		json_t *doc = openapi_gv(srv, url + 12);
		return doc ? emu_reply_json(c, 200, doc) : reply_path_not_found(c);
	}
	if (!strcmp(url, "/healthz") || !strcmp(url, "/livez") || !strcmp(url, "/readyz")) {
		struct MHD_Response *r = MHD_create_response_from_buffer(2, (void *)"ok",
									 MHD_RESPMEM_PERSISTENT);
		MHD_add_response_header(r, "Content-Type", "text/plain; charset=utf-8");
		enum MHD_Result ret = MHD_queue_response(c, 200, r);
		MHD_destroy_response(r);
		return ret;
	}
	*handled = false;
	return MHD_NO;
}

/* ---- routing ---- */

#define MAX_SEGS 8

static int split_path(char *path, char **segs)
{
	int n = 0;
	char *save = NULL;
	for (char *tok = strtok_r(path, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
		if (n == MAX_SEGS)
			return -1;
		segs[n++] = tok;
	}
	return n;
}

/* Fills k from the path; returns false when the path names nothing we serve. */
static bool route_resource(struct emu_server *srv, char **s, int n, struct emu_call *k)
{
	const char *group, *version;
	int i;
	if (n >= 3 && !strcmp(s[0], "api") && !strcmp(s[1], "v1")) {
		group = "";
		version = "v1";
		i = 2;
	} else if (n >= 4 && !strcmp(s[0], "apis")) {
		group = s[1];
		version = s[2];
		i = 3;
	} else {
		return false;
	}
	int rest = n - i;
	if (rest >= 3 && !strcmp(s[i], "namespaces")) {
		int res = emu_store_resource(&srv->st, group, version, s[i + 2]);
		if (res >= 0 && srv->st.res[res].namespaced) {
			k->ns = s[i + 1];
			i += 2;
			rest -= 2;
		}
	}
	if (rest < 1 || rest > 3)
		return false;
	k->res = emu_store_resource(&srv->st, group, version, s[i]);
	if (k->res < 0)
		return false;
	k->r = &srv->st.res[k->res];
	snprintf(k->api_version_buf, sizeof(k->api_version_buf), "%s/%s", group, version);
	k->api_version = strcmp(version, k->r->version) ? k->api_version_buf : k->r->api_version;
	if (emu_events_is_view(k->r)) {
		/* one storage for both groups' Events, as kube-apiserver's */
		k->view = k->r;
		k->res = emu_store_resource(&srv->st, "", "v1", "events");
		k->r = &srv->st.res[k->res];
		k->api_version = k->api_version_buf;
	}
	k->name = rest >= 2 ? s[i + 1] : NULL;
	k->sub = rest == 3 ? s[i + 2] : NULL;
	bool binding = k->sub && !strcmp(k->sub, "binding") && !*k->r->group &&
		       !strcmp(k->r->plural, "pods");
	if (k->sub && !binding && (strcmp(k->sub, "status") || !k->r->has_status))
		return false;
	if (k->name && k->r->namespaced && !k->ns)
		return false;
	return true;
}

/*
 * A body sent to a view (events.k8s.io Events) in the storage's terms: the object or patch
 * converted, a create checked by the view's own rules first. True when *r answered already (a
 * body that is not JSON is left to the verbs' own error).
 */
static bool view_body(struct emu_call *k, struct req *rq, enum MHD_Result *r)
{
	json_t *doc = json_loadb(k->body, k->body_len, 0, NULL);
	const char *cause, *field = NULL;
	char detail[300];
	if (doc && !strcmp(k->method, "POST"))
		field = emu_event_create_invalid(doc, k->ns, &cause, detail, sizeof(detail));
	if (field) { /* named as kube-apiserver names it: the stored kind, core Event */
		struct reply rp = { 0, NULL };
		reply_invalid(&rp, k->r, emu_meta_str(doc, "name"), field, cause, detail);
		json_decref(doc);
		*r = emu_reply_text(k->conn, rp.code, rp.text, 0);
		return true;
	}
	emu_event_to_stored(doc);
	char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
	json_decref(doc);
	if (text) {
		strbuf_reset(&rq->body);
		strbuf_addstr(&rq->body, text);
		free(text);
		k->body = rq->body.buf;
		k->body_len = rq->body.len;
	}
	return false;
}

static const char *verb_of(struct emu_call *k, bool *ok)
{
	const char *m = k->method;
	*ok = true;
	if (k->sub && !strcmp(k->sub, "binding")) {
		*ok = !strcmp(m, "POST");
		return "create";
	}
	if (!strcmp(m, "GET")) {
		if (k->name)
			return "get";
		const char *w = emu_arg(k, "watch");
		return w && (!strcmp(w, "true") || !strcmp(w, "1")) ? "watch" : "list";
	}
	if (!strcmp(m, "POST") && !k->name && !k->sub)
		return k->r->namespaced && !k->ns ? (*ok = false, "create") : "create";
	if (!strcmp(m, "PUT") && k->name)
		return "update";
	if (!strcmp(m, "PATCH") && k->name)
		return "patch";
	if (!strcmp(m, "DELETE") && !k->sub)
		return k->name ? "delete" : "deletecollection";
	*ok = false;
	return m;
}

static enum MHD_Result dispatch(struct emu_call *k, const char *verb)
{
	if (!strcmp(verb, "get"))
		return emu_do_get(k);
	if (!strcmp(verb, "list"))
		return emu_do_list(k);
	if (!strcmp(verb, "watch")) {
		/* a quiet watch is not idle: it is bounded by --max-watch-timeout instead */
		MHD_set_connection_option(k->conn, MHD_CONNECTION_OPTION_TIMEOUT, 0);
		struct req *rq = k->rq;
		rq->watch = true;
		return emu_do_watch(k);
	}
	if (!strcmp(verb, "create"))
		return k->sub ? emu_do_binding(k) : emu_do_create(k);
	if (!strcmp(verb, "update"))
		return emu_do_update(k);
	if (!strcmp(verb, "patch"))
		return emu_do_patch(k);
	if (!strcmp(verb, "delete"))
		return emu_do_delete(k);
	return emu_do_delete_collection(k);
}

static bool body_is_json(struct MHD_Connection *c, const char *method)
{
	if (strcmp(method, "POST") && strcmp(method, "PUT"))
		return true;
	const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
	return !ct || !strncasecmp(ct, "application/json", 16) || !strncmp(ct, "*/*", 3);
}

static enum MHD_Result handle_api(struct emu_server *srv, struct MHD_Connection *c,
				  const char *url, const char *method, struct req *rq)
{
	char path[2048];
	char *segs[MAX_SEGS];
	snprintf(path, sizeof(path), "%s", url);
	int n = split_path(path, segs);
	struct emu_call k = { .srv = srv, .conn = c, .method = method, .res = -1,
			      .body = rq->body.buf, .body_len = rq->body.len, .rq = rq };
	if (n < 0 || !route_resource(srv, segs, n, &k))
		return reply_path_not_found(c);
	bool ok;
	const char *verb = verb_of(&k, &ok);
	if (!ok) /* kube-apiserver's words: no method, no URL, details {} */
		return emu_reply_status(c, 405, "MethodNotAllowed",
					"the server does not allow this method on the requested resource",
					json_object());
	const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
	/* client-go sends DeleteOptions in the content type of its objects: protobuf too */
	bool body_verb = !strcmp(method, "POST") || !strcmp(method, "PUT") ||
			 !strcmp(method, "DELETE");
	if (body_verb && ct && !strncasecmp(ct, "application/vnd.kubernetes.protobuf", 35) &&
	    rq->body.len) {
		char err[1024];
		char *json = emu_proto_to_json(rq->body.buf, rq->body.len, err, sizeof(err));
		if (!json) {
			KLOG_V(2, "Refused a protobuf body: %s", err);
			return emu_reply_status(c, 415, "UnsupportedMediaType", err, NULL);
		}
		strbuf_reset(&rq->body);
		strbuf_addstr(&rq->body, json);
		free(json);
		k.body = rq->body.buf;
		k.body_len = rq->body.len;
	} else if (!body_is_json(c, method)) {
		return emu_reply_status(c, 415, "UnsupportedMediaType", "the body of the request was "
			"in an unknown format - accepted media types include: application/json, "
			"application/vnd.kubernetes.protobuf (the kinds docs/kube-emulator.md lists)", NULL);
	}
	if (k.view && k.body && k.body_len && strcmp(method, "DELETE")) {
		enum MHD_Result r;
		if (view_body(&k, rq, &r))
			return r;
	}
	if (!strcmp(method, "GET"))
		k.table = emu_table_wanted(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Accept"),
					   emu_arg(&k, "includeObject"), &k.treq);
	const char *dry = emu_arg(&k, "dryRun");
	if (dry && *dry) {
		if (strcmp(dry, "All")) {
			char msg[256];
			snprintf(msg, sizeof(msg), "dryRun: Unsupported value: \"%.100s\": supported "
				 "values: \"All\"", dry);
			return emu_reply_status(c, 400, "BadRequest", msg, NULL);
		}
		k.dry_run = true;
	}
	struct emu_fault_hit hit;
	if (emu_faults_apply(&srv->faults, verb, k.r->plural, &hit))
		return emu_faults_reply(&srv->st, c, &hit, verb, k.r->plural, k.name,
					emu_arg(&k, "resourceVersion"));
	return dispatch(&k, verb);
}

static bool authorized(struct emu_server *srv, struct MHD_Connection *c)
{
	if (!srv->token)
		return true;
	const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	return h && !strncmp(h, "Bearer ", 7) && !strcmp(h + 7, srv->token);
}

/* Whether s[0..n) is UTF-8 as Go accepts it (no overlongs, no surrogates, <= U+10FFFF). */
static bool valid_utf8(const unsigned char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		unsigned char c = s[i];
		size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ?
			     4 : 0;
		if (!len || i + len > n)
			return false;
		uint32_t cp = len == 1 ? c : c & (0x7f >> len);
		for (size_t j = 1; j < len; j++) {
			if ((s[i + j] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + j] & 0x3f);
		}
		if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
		    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += len;
	}
	return true;
}

/*
 * Checks the raw request URI before libmicrohttpd unescapes it (it would cut the path at a %00
 * and pass other bytes through): a bad %-escape, an escaped NUL, or bytes that are not UTF-8
 * once unescaped are refused with 400, as kube-apiserver refuses them. Fills why, or leaves "".
 */
static void check_raw_uri(const char *uri, char *why, size_t len)
{
	size_t n = strlen(uri);
	unsigned char *dec = xmalloc(n + 1);
	size_t o = 0;
	*why = '\0';
	for (size_t i = 0; i < n; i++) {
		if (uri[i] != '%') {
			dec[o++] = (unsigned char)(uri[i] == '+' ? ' ' : uri[i]);
			continue;
		}
		int h = i + 2 < n ? hex_digit(uri[i + 1]) : -1, l = h >= 0 ? hex_digit(uri[i + 2]) : -1;
		if (h < 0 || l < 0) {
			snprintf(why, len, "invalid URL escape \"%.3s\"", uri + i);
			break;
		}
		if (!(h | l)) {
			snprintf(why, len, "the URL contains an escaped NUL byte (%%00)");
			break;
		}
		dec[o++] = (unsigned char)(h << 4 | l);
		i += 2;
	}
	if (!*why && !valid_utf8(dec, o))
		snprintf(why, len, "the URL is not valid UTF-8 once unescaped");
	free(dec);
}

/* libmicrohttpd's URI log hook: runs first for every request and creates its state. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
	(void)cls;
	(void)c;
	struct req *rq = xcalloc(1, sizeof(*rq));
	rq->body = (struct strbuf)STRBUF_INIT;
	check_raw_uri(uri, rq->bad_uri, sizeof(rq->bad_uri));
	return rq;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **con_cls)
{
	struct emu_server *srv = cls;
	struct req *rq = *con_cls;
	(void)version;
	if (!rq->started) { /* the first call only announces the request (headers read) */
		rq->started = true;
		return MHD_YES;
	}
	if (*upload_size) {
		if (rq->body.len + *upload_size > MAX_BODY)
			rq->too_big = true;
		else
			strbuf_add(&rq->body, upload, *upload_size);
		*upload_size = 0;
		return MHD_YES;
	}
	KLOG_V(4, "%s %s", method, url);
	if (*rq->bad_uri) {
		KLOG_I("Refused a request with a bad URL: %s", rq->bad_uri);
		return emu_reply_status(c, 400, "BadRequest", rq->bad_uri, NULL);
	}
	if (rq->too_big)
		return emu_reply_status(c, 413, "RequestEntityTooLarge", "the request body is larger "
					"than 3 MiB", NULL);
	if (!authorized(srv, c))
		return emu_reply_status(c, 401, "Unauthorized", "Unauthorized", NULL);
	if (!strcmp(url, "/emulator/faults"))
		return emu_faults_http(&srv->faults, &srv->st, c, method, rq->body.buf, rq->body.len);
	if (!strcmp(method, "GET")) {
		bool handled;
		enum MHD_Result r = discovery(srv, c, url, &handled);
		if (handled)
			return r;
	}
	return handle_api(srv, c, url, method, rq);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct req *rq = *con_cls;
	(void)toe;
	if (rq) {
		if (rq->watch) /* the connection may be kept alive: it is subject to idle again */
			MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT,
						  ((struct emu_server *)cls)->cfg.idle_timeout_s);
		strbuf_release(&rq->body);
		free(rq);
		*con_cls = NULL;
	}
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char buf[512];
	(void)cls;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	size_t n = strlen(buf);
	while (n && buf[n - 1] == '\n')
		buf[--n] = '\0';
	KLOG_V(2, "libmicrohttpd: %s", buf);
}

/* ---- start / stop ---- */

static int open_listener(struct emu_server *srv, const char *listen_addr, bool *addr_in_use,
			 char *err, size_t errlen)
{
	char host[256], port[16];
	const char *colon = strrchr(listen_addr, ':');
	if (!colon || colon == listen_addr || strlen(colon + 1) >= sizeof(port)) {
		snprintf(err, errlen, "--listen must be host:port, got \"%s\"", listen_addr);
		return -1;
	}
	size_t hl = (size_t)(colon - listen_addr);
	if (listen_addr[0] == '[' && hl >= 2 && listen_addr[hl - 1] == ']')
		snprintf(host, sizeof(host), "%.*s", (int)(hl - 2), listen_addr + 1);
	else
		snprintf(host, sizeof(host), "%.*s", (int)hl, listen_addr);
	snprintf(port, sizeof(port), "%s", colon + 1);
	char *end;
	long pnum = strtol(port, &end, 10);
	if (!*port || *end || pnum < 0 || pnum > 65535) {
		snprintf(err, errlen, "--listen %s: port must be a number from 0 to 65535", listen_addr);
		return -1;
	}
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV }, *ai;
	int rc = getaddrinfo(host, port, &hints, &ai);
	if (rc) {
		snprintf(err, errlen, "--listen %s: %s", listen_addr, gai_strerror(rc));
		return -1;
	}
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 1024) < 0) {
		int e = errno;
		snprintf(err, errlen, "cannot listen on %s: %s", listen_addr, strerror(e));
		if (addr_in_use)
			*addr_in_use = e == EADDRINUSE;
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return -1;
	}
	bool v6 = ai->ai_family == AF_INET6;
	freeaddrinfo(ai);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	getsockname(fd, (struct sockaddr *)&ss, &sl);
	int p = ntohs(v6 ? ((struct sockaddr_in6 *)&ss)->sin6_port :
			   ((struct sockaddr_in *)&ss)->sin_port);
	const char *h = host;
	if (!strcmp(h, "0.0.0.0") || !*h)
		h = "127.0.0.1";
	else if (!strcmp(h, "::"))
		h = "::1";
	snprintf(srv->host_port, sizeof(srv->host_port), v6 ? "[%s]:%d" : "%s:%d", h, p);
	snprintf(srv->url, sizeof(srv->url), "%s://%s", srv->tls_cert ? "https" : "http",
		 srv->host_port);
	srv->listen_fd = fd;
	return 0;
}

static char *read_file(const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
		return NULL;
	}
	struct strbuf sb = STRBUF_INIT;
	char buf[4096];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		strbuf_add(&sb, buf, n);
	fclose(f);
	return strbuf_detach(&sb, NULL);
}

static void server_free(struct emu_server *srv)
{
	emu_store_free(&srv->st);
	emu_faults_free(&srv->faults);
	free(srv->token);
	free(srv->state_file);
	free(srv->tls_cert);
	free(srv->tls_key);
	free(srv->tls_ca);
	free(srv);
}

static int load_tls(struct emu_server *srv, const struct emu_config *cfg, char *err,
		    size_t errlen)
{
	bool cert = cfg->tls_cert_file && *cfg->tls_cert_file;
	bool key = cfg->tls_key_file && *cfg->tls_key_file;
	if (!cert && !key)
		return 0;
	if (cert != key) {
		snprintf(err, errlen, "--tls-cert and --tls-key must be given together");
		return -1;
	}
	if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
		snprintf(err, errlen, "this libmicrohttpd was built without TLS support");
		return -1;
	}
	srv->tls_cert = read_file(cfg->tls_cert_file, err, errlen);
	srv->tls_key = srv->tls_cert ? read_file(cfg->tls_key_file, err, errlen) : NULL;
	const char *ca = cfg->tls_ca_file && *cfg->tls_ca_file ? cfg->tls_ca_file : NULL;
	srv->tls_ca = srv->tls_key ? (ca ? read_file(ca, err, errlen) : xstrdup(srv->tls_cert))
				   : NULL;
	return srv->tls_ca ? 0 : -1;
}

static void add_default_namespaces(struct emu_store *st)
{
	int res = emu_store_resource(st, "", "v1", "namespaces");
	/* the namespaces kube-apiserver creates at start */
	const char *names[] = { "default", "kube-system", "kube-public", "kube-node-lease" };
	for (int i = 0; i < 4; i++) {
		if (emu_store_get(st, res, names[i]))
			continue;
		char uid[40], ts[RFC3339_BUFLEN];
		snprintf(uid, sizeof(uid), "00000000-0000-4000-8000-00000000000%d", i + 1);
		rfc3339_format(time(NULL), ts, sizeof(ts));
		json_t *ns = json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:{s:s}}, s:{s:[s]}, s:{s:s}}",
			"apiVersion", "v1", "kind", "Namespace", "metadata", "name", names[i], "uid",
			uid, "creationTimestamp", ts, "labels", "kubernetes.io/metadata.name",
			names[i], "spec", "finalizers", "kubernetes", "status", "phase", "Active");
		emu_store_commit(st, res, names[i], ns, EMU_ADDED);
	}
}

struct emu_server *emu_server_start(const struct emu_config *cfg, bool *addr_in_use, char *err,
				    size_t errlen)
{
	if (addr_in_use)
		*addr_in_use = false;
	struct emu_server *srv = xcalloc(1, sizeof(*srv));
	srv->cfg = *cfg;
	srv->listen_fd = -1;
	srv->token = cfg->token && *cfg->token ? xstrdup(cfg->token) : NULL;
	srv->state_file = cfg->state_file && *cfg->state_file ? xstrdup(cfg->state_file) : NULL;
	srv->cfg.token = srv->token;
	srv->cfg.state_file = srv->state_file;
	if (srv->cfg.bookmark_interval_ns <= 0)
		srv->cfg.bookmark_interval_ns = 60 * 1000000000LL;
	if (!srv->cfg.watch_history_bytes)
		srv->cfg.watch_history_bytes = EMU_DEFAULT_WATCH_HISTORY_BYTES;
	if (!srv->cfg.idle_timeout_s)
		srv->cfg.idle_timeout_s = EMU_DEFAULT_IDLE_TIMEOUT_S;
	if (!srv->cfg.max_connections)
		srv->cfg.max_connections = EMU_DEFAULT_MAX_CONNECTIONS;
	emu_store_init(&srv->st, cfg->watch_history ? cfg->watch_history : 10000);
	srv->st.ring_bytes_max = srv->cfg.watch_history_bytes;
	emu_faults_init(&srv->faults);
	/* What is served, then the state file before the listener (a second emulator on it is
	 * refused before it binds) */
	if (emu_store_runtime_config(&srv->st, cfg->runtime_config, err, errlen) < 0 ||
	    (srv->state_file && emu_state_open(&srv->st, srv->state_file, err, errlen) < 0) ||
	    load_tls(srv, cfg, err, errlen) < 0 ||
	    open_listener(srv, cfg->listen, addr_in_use, err, errlen) < 0) {
		server_free(srv);
		return NULL;
	}
	add_default_namespaces(&srv->st);
	unsigned long long start_rv = (unsigned long long)srv->st.rv; /* read before threads exist */
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
			 MHD_USE_POLL | MHD_USE_ERROR_LOG;
	if (srv->tls_cert)
		flags |= MHD_USE_TLS;
	struct MHD_OptionItem opts[] = {
		{ MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)mhd_log, srv },
		{ MHD_OPTION_LISTEN_SOCKET, srv->listen_fd, NULL },
		{ MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, srv },
		{ MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)on_uri, srv },
		{ MHD_OPTION_CONNECTION_LIMIT, srv->cfg.max_connections, NULL },
		{ MHD_OPTION_PER_IP_CONNECTION_LIMIT, srv->cfg.max_connections_per_ip, NULL },
		{ MHD_OPTION_CONNECTION_TIMEOUT, srv->cfg.idle_timeout_s, NULL },
		/* 8 MiB of (virtual) stack per connection thread: JSON nesting up to jansson's
		 * 2048-level limit recurses deeply, more so under sanitizers */
		{ MHD_OPTION_THREAD_STACK_SIZE, 8 * 1024 * 1024, NULL },
		{ srv->tls_cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, srv->tls_cert },
		{ MHD_OPTION_HTTPS_MEM_KEY, 0, srv->tls_key },
		{ MHD_OPTION_END, 0, NULL },
	};
	srv->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, srv,
				       MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
	if (!srv->daemon) {
		snprintf(err, errlen, "libmicrohttpd failed to start on %s (bad TLS certificate or "
			 "key?)", srv->host_port);
		close(srv->listen_fd);
		server_free(srv);
		return NULL;
	}
	KLOG_I("kube-emulator serving url=\"%s\" resourceVersion=%llu", srv->url, start_rv);
	return srv;
}

const char *emu_server_url(const struct emu_server *srv)
{
	return srv->url;
}

struct stopper {
	struct MHD_Daemon *daemon;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done;
};

static void *stop_daemon(void *arg)
{
	struct stopper *s = arg;
	MHD_stop_daemon(s->daemon);
	pthread_mutex_lock(&s->mu);
	s->done = true;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* Stops the daemon, waiting at most EMU_STOP_GRACE_MS; false when connections are still busy. */
static bool stop_daemon_bounded(struct emu_server *srv)
{
	static struct stopper s; /* outlives this call when the stopper thread is left behind */
	s.daemon = srv->daemon;
	pthread_mutex_init(&s.mu, NULL);
	pthread_cond_init(&s.cv, NULL);
	pthread_t t;
	if (pthread_create(&t, NULL, stop_daemon, &s) != 0) {
		MHD_stop_daemon(srv->daemon);
		return true;
	}
	struct timespec until = wall_deadline(EMU_STOP_GRACE_MS * NSEC_PER_MSEC);
	pthread_mutex_lock(&s.mu);
	while (!s.done && pthread_cond_timedwait(&s.cv, &s.mu, &until) == 0)
		;
	bool done = s.done;
	pthread_mutex_unlock(&s.mu);
	if (done)
		pthread_join(t, NULL);
	else
		pthread_detach(t);
	return done;
}

int emu_server_stop(struct emu_server *srv, char *err, size_t errlen)
{
	pthread_mutex_lock(&srv->st.mu);
	srv->st.shutdown = true;
	pthread_cond_broadcast(&srv->st.cv);
	pthread_mutex_unlock(&srv->st.mu);
	emu_faults_shutdown(&srv->faults);
	bool stopped = stop_daemon_bounded(srv);
	if (!stopped)
		KLOG_I("Connections still busy after %d ms; exiting without waiting for them",
		       EMU_STOP_GRACE_MS);
	int rc = 0;
	if (srv->state_file) {
		rc = emu_state_save(&srv->st, err, errlen);
		if (rc == 0)
			KLOG_I("Saved state file=\"%s\" resourceVersion=%llu", srv->state_file,
			       (unsigned long long)srv->st.rv);
	}
	if (!stopped) /* connection threads still use srv: the caller _exit()s */
		return rc < 0 ? -2 : 1;
	server_free(srv);
	return rc;
}
