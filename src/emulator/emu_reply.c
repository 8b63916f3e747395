/*
 * emu_reply: Status objects and JSON answers queued on a libmicrohttpd connection, and the
 * request's arguments and body as the verbs read them. Every answer is JSON with no-cache, as
 * kube-apiserver's; a reply that could not be serialized becomes a 500 rather than nothing.
 */
#include "emulator/emu_reply.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/xalloc.h"
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
