/*
 * emu_reply: what every verb of kube-emulator answers with and reads its input by: metav1.Status
 * errors, JSON replies, query arguments and the request body. Below the verbs, the watch and the
 * fault endpoint, which use it; the server only dispatches to them.
 *
 * Ownership: a struct reply owns its text; reply_*() replace it. emu_reply_*() take over the text
 * or JSON they are given and queue it on the connection.
 */
#ifndef KCSI_EMULATOR_REPLY_H
#define KCSI_EMULATOR_REPLY_H

#include <jansson.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct emu_call;
struct emu_resource;

/* An answer being built under the store lock: HTTP code and JSON text (owned). */
struct reply {
	unsigned code;
	char *text;
};
void reply_status(struct reply *rp, unsigned code, const char *reason, const char *msg,
		  json_t *details);
void reply_bad(struct reply *rp, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A metav1.Status JSON text (owned by the caller); details is taken over, may be NULL. */
char *emu_status_text(unsigned code, const char *reason, const char *message, json_t *details);
/*
 * kube-apiserver's answer to a resourceVersion it has not reached (k8s.io/apiserver's
 * storage.NewTooLargeResourceVersionError): 504 Timeout "Timeout: Too large resource version:
 * <asked>, current: <current>", one cause of reason ResourceVersionTooLarge and message "Too large
 * resource version", and details.retryAfterSeconds when retry_after > 0. A Status JSON text.
 */
char *emu_status_rv_too_large(uint64_t asked, uint64_t current, int retry_after);

/* Replies. `text` and `j` are taken over. */
enum MHD_Result emu_reply_text(struct MHD_Connection *c, unsigned code, char *text,
			       int retry_after);
enum MHD_Result emu_reply_json(struct MHD_Connection *c, unsigned code, json_t *j);
enum MHD_Result emu_reply_status(struct MHD_Connection *c, unsigned code, const char *reason,
				 const char *message, json_t *details);

/* Arguments. A query parameter of the request, or NULL. */
const char *emu_arg(struct emu_call *k, const char *name);
/*
 * The request body as a JSON object in *out (owned by the caller), or false with a 400 in rp
 * when it is empty, not JSON, or nested deeper than EMU_MAX_JSON_DEPTH.
 */
bool parse_body(struct emu_call *k, json_t **out, struct reply *rp);

/*
 * kube-apiserver's Status errors about one object of resource r (name may be NULL): 404
 * NotFound, 409 Conflict ("Operation cannot be fulfilled on ...: why"), 422 Invalid with one
 * field cause. details_for() is the Status details naming the object (a new JSON object).
 */
json_t *details_for(const struct emu_resource *r, const char *name);
/* "plural.group" (or "plural" for the core group) in buf, which it returns. */
const char *emu_qualified(const struct emu_resource *r, char *buf, size_t len);
void reply_not_found(struct reply *rp, const struct emu_resource *r, const char *name);
void reply_conflict(struct reply *rp, const struct emu_resource *r, const char *name,
		    const char *why);
void reply_invalid(struct reply *rp, const struct emu_resource *r, const char *name,
		   const char *field, const char *cause_type, const char *detail);
/* A 2xx answer: the object's text (copied) or the JSON serialized. */
void reply_object(struct reply *rp, unsigned code, const char *text);
void reply_dump(struct reply *rp, unsigned code, const json_t *obj);
/*
 * An answer in the version the client addressed (k->api_version) when that is not the storage
 * version: obj's apiVersion, or text's and its items' (text taken over, the result returned).
 */
void emu_served_object(const struct emu_call *k, json_t *obj);
/* The same for an object of resource r served as api_version (a watch's events). */
void emu_serve_as(const struct emu_resource *r, const char *api_version, json_t *obj);
char *emu_served_text(const struct emu_call *k, char *text);
/* Queues rp's answer on k's connection (takes its text), in k's served version. */
enum MHD_Result emu_send_reply(struct emu_call *k, struct reply *rp);

#endif
