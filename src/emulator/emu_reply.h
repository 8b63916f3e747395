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

struct emu_call;

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

#endif
