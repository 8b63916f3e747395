/* status: see status.h. */
#include "loopplugin/status.h"

#include <stdarg.h>
#include <stdio.h>

int lp_fail(struct lp_status *st, enum lp_code code, const char *fmt, ...)
{
	if (st) {
		va_list ap;
		va_start(ap, fmt);
		st->code = code;
		vsnprintf(st->msg, sizeof(st->msg), fmt, ap);
		va_end(ap);
	}
	return code == LP_OK ? -LP_UNKNOWN : -(int)code;
}

void lp_status_ok(struct lp_status *st)
{
	if (st) {
		st->code = LP_OK;
		st->msg[0] = '\0';
	}
}

const char *lp_code_name(enum lp_code code)
{
	static const char *const names[] = {
		"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
		"NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
		"FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL",
		"UNAVAILABLE",
	};
	if ((unsigned)code < sizeof(names) / sizeof(names[0]))
		return names[code];
	return "UNKNOWN";
}
