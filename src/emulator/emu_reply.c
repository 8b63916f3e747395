/*
 * emu_reply: Status objects and JSON answers queued on a libmicrohttpd connection, and the
 * request's arguments and body as the verbs read them. Every answer is JSON with no-cache, as
 * kube-apiserver's; a reply that could not be serialized becomes a 500 rather than nothing.
 */
#include "emulator/emu_reply.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/xalloc.h"
#include "emulator/emu_events.h"
#include "emulator/emu_internal.h"
#include "emulator/emu_patch.h"

enum MHD_Result emu_reply_text(struct MHD_Connection *c, unsigned code, char *text,
			       int retry_after)
{
	if (!text) {
		code = 500;
		text = xstrdup("{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
			       "\"status\":\"Failure\",\"message\":\"internal error\","
			       "\"reason\":\"InternalError\",\"code\":500}");
	}
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), text,
								 MHD_RESPMEM_MUST_FREE);
	MHD_add_response_header(r, "Content-Type", "application/json");
	MHD_add_response_header(r, "Cache-Control", "no-cache, private");
	if (retry_after > 0) {
		char buf[16];
		snprintf(buf, sizeof(buf), "%d", retry_after);
		MHD_add_response_header(r, "Retry-After", buf);
	}
	enum MHD_Result ret = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return ret;
}

enum MHD_Result emu_reply_json(struct MHD_Connection *c, unsigned code, json_t *j)
{
	char *text = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return emu_reply_text(c, code, text, 0);
}

char *emu_status_text(unsigned code, const char *reason, const char *message, json_t *details)
{
	json_t *s = json_pack("{s:s, s:s, s:{}, s:s, s:s, s:s, s:i}", "kind", "Status",
			      "apiVersion", "v1", "metadata", "status", "Failure", "message",
			      message, "reason", reason, "code", (int)code);
	if (details)
		json_object_set_new(s, "details", details);
	char *text = json_dumps(s, JSON_COMPACT);
	json_decref(s);
	return text;
}

char *emu_status_rv_too_large(uint64_t asked, uint64_t current, int retry_after)
{
	char msg[160];
	snprintf(msg, sizeof(msg), "Timeout: Too large resource version: %" PRIu64 ", current: %"
		 PRIu64, asked, current);
	json_t *d = json_pack("{s:[{s:s, s:s}]}", "causes", "reason", "ResourceVersionTooLarge",
			      "message", "Too large resource version");
	if (retry_after > 0)
		json_object_set_new(d, "retryAfterSeconds", json_integer(retry_after));
	return emu_status_text(504, "Timeout", msg, d);
}

enum MHD_Result emu_reply_status(struct MHD_Connection *c, unsigned code, const char *reason,
				 const char *message, json_t *details)
{
	return emu_reply_text(c, code, emu_status_text(code, reason, message, details), 0);
}

void reply_status(struct reply *rp, unsigned code, const char *reason, const char *msg,
		  json_t *details)
{
	free(rp->text);
	rp->code = code;
	rp->text = emu_status_text(code, reason, msg, details);
}

void reply_bad(struct reply *rp, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	reply_status(rp, 400, "BadRequest", msg, NULL);
}

/* ---- arguments ---- */

const char *emu_arg(struct emu_call *k, const char *name)
{
	return MHD_lookup_connection_value(k->conn, MHD_GET_ARGUMENT_KIND, name);
}

bool parse_body(struct emu_call *k, json_t **out, struct reply *rp)
{
	json_error_t je;
	*out = NULL;
	if (!k->body_len) {
		reply_bad(rp, "the request body is empty; expected a JSON %s object", k->r->kind);
		return false;
	}
	json_t *j = json_loadb(k->body, k->body_len, 0, &je);
	if (!j) {
		reply_bad(rp, "the request body is not valid JSON: %s (line %d, column %d)", je.text,
			  je.line, je.column);
		return false;
	}
	if (emu_json_too_deep(j, EMU_MAX_JSON_DEPTH)) {
		json_decref(j);
		reply_bad(rp, "the request body nests deeper than %d levels", EMU_MAX_JSON_DEPTH);
		return false;
	}
	*out = j;
	return true;
}

/* ---- the Status errors the verbs answer, named after the resource ---- */

const char *emu_qualified(const struct emu_resource *r, char *buf, size_t len)
{
	if (*r->group)
		snprintf(buf, len, "%s.%s", r->plural, r->group);
	else
		snprintf(buf, len, "%s", r->plural);
	return buf;
}

json_t *details_for(const struct emu_resource *r, const char *name)
{
	json_t *d = json_object();
	if (name)
		json_object_set_new(d, "name", json_string(name));
	if (*r->group)
		json_object_set_new(d, "group", json_string(r->group));
	json_object_set_new(d, "kind", json_string(r->plural));
	return d;
}

void reply_not_found(struct reply *rp, const struct emu_resource *r, const char *name)
{
	char q[128], msg[1024];
	snprintf(msg, sizeof(msg), "%s \"%s\" not found", emu_qualified(r, q, sizeof(q)), name);
	reply_status(rp, 404, "NotFound", msg, details_for(r, name));
}

void reply_conflict(struct reply *rp, const struct emu_resource *r, const char *name,
			   const char *why)
{
	char q[128], msg[1400];
	snprintf(msg, sizeof(msg), "Operation cannot be fulfilled on %s \"%s\": %s",
		 emu_qualified(r, q, sizeof(q)), name, why);
	reply_status(rp, 409, "Conflict", msg, details_for(r, name));
}

/* 422 Invalid with one cause, shaped like upstream's field errors. */
void reply_invalid(struct reply *rp, const struct emu_resource *r, const char *name,
			  const char *field, const char *cause_type, const char *detail)
{
	char msg[1600];
	snprintf(msg, sizeof(msg), "%s%s%s \"%s\" is invalid: %s: %s", r->kind, *r->group ? "." : "",
		 r->group, name ? name : "", field, detail);
	json_t *d = json_object();
	if (name)
		json_object_set_new(d, "name", json_string(name));
	if (*r->group)
		json_object_set_new(d, "group", json_string(r->group));
	json_object_set_new(d, "kind", json_string(r->kind));
	json_object_set_new(d, "causes",
			    json_pack("[{s:s, s:s, s:s}]", "reason", cause_type, "message", detail,
				      "field", field));
	reply_status(rp, 422, "Invalid", msg, d);
}

void reply_object(struct reply *rp, unsigned code, const char *text)
{
	free(rp->text);
	rp->code = code;
	rp->text = xstrdup(text);
}

void reply_dump(struct reply *rp, unsigned code, const json_t *obj)
{
	free(rp->text);
	rp->code = code;
	rp->text = json_dumps(obj, JSON_COMPACT);
}

void emu_serve_as(const struct emu_resource *r, const char *api_version, json_t *obj)
{
	const char *kind = json_string_value(json_object_get(obj, "kind"));
	if (!strcmp(api_version, "events.k8s.io/v1") && !*r->group) {
		/* a core Event read through events.k8s.io (a Status or a list head is left alone) */
		if (kind && !strcmp(kind, "Event"))
			emu_event_to_served(obj);
		return;
	}
	const json_t *av = json_object_get(obj, "apiVersion");
	if (json_is_string(av) && !strcmp(json_string_value(av), r->api_version))
		json_object_set_new(obj, "apiVersion", json_string(api_version));
}

void emu_served_object(const struct emu_call *k, json_t *obj)
{
	emu_serve_as(k->r, k->api_version, obj);
}

char *emu_served_text(const struct emu_call *k, char *text)
{
	if (!text || !k->r || k->api_version == k->r->api_version)
		return text;
	json_t *doc = json_loads(text, 0, NULL);
	if (!json_is_object(doc)) {
		json_decref(doc);
		return text;
	}
	/* an object, or a list whose apiVersion and items' apiVersion name the storage version */
	emu_served_object(k, doc);
	json_t *items = json_object_get(doc, "items"), *it;
	size_t i;
	if (json_is_array(items))
		json_array_foreach(items, i, it)
			emu_served_object(k, it);
	char *out = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	if (!out)
		return text;
	free(text);
	return out;
}

enum MHD_Result emu_send_reply(struct emu_call *k, struct reply *rp)
{
	return emu_reply_text(k->conn, rp->code, emu_served_text(k, rp->text), 0);
}
