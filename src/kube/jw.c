#include "kube/jw.h"

#include <inttypes.h>
#include <string.h>

void jw_quote(struct strbuf *sb, const char *s)
{
	s = s ? s : "";
	strbuf_addjson(sb, s, strlen(s));
}

/* The separator before a value or key at the current depth. */
static void before_value(struct jw *w)
{
	if (w->after_key) {
		w->after_key = false;
		return;
	}
	uint64_t bit = 1ull << w->depth;
	if (w->depth && (w->nonempty & bit))
		strbuf_addch(w->sb, ',');
	w->nonempty |= bit;
}

static void begin(struct jw *w, char open)
{
	before_value(w);
	strbuf_addch(w->sb, open);
	if (w->depth + 1 < JW_MAX_DEPTH)
		w->depth++;
	w->nonempty &= ~(1ull << w->depth);
}

static void end(struct jw *w, char close)
{
	strbuf_addch(w->sb, close);
	if (w->depth)
		w->depth--;
}

void jw_begin_object(struct jw *w) { begin(w, '{'); }
void jw_end_object(struct jw *w) { end(w, '}'); }
void jw_begin_array(struct jw *w) { begin(w, '['); }
void jw_end_array(struct jw *w) { end(w, ']'); }

void jw_key(struct jw *w, const char *key)
{
	before_value(w);
	jw_quote(w->sb, key);
	strbuf_addch(w->sb, ':');
	w->after_key = true;
}

void jw_str(struct jw *w, const char *s)
{
	before_value(w);
	jw_quote(w->sb, s);
}

void jw_int(struct jw *w, int64_t v)
{
	before_value(w);
	strbuf_addf(w->sb, "%" PRId64, v);
}

void jw_bool(struct jw *w, bool v)
{
	before_value(w);
	strbuf_addstr(w->sb, v ? "true" : "false");
}

void jw_null(struct jw *w)
{
	before_value(w);
	strbuf_addstr(w->sb, "null");
}
