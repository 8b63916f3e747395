/*
 * status: the result of a loop-plugin operation, as a gRPC status code and a message.
 *
 * The storage backend (pool, loopdev, mount) knows nothing about gRPC, but every failure it
 * reports must end up as a CSI status code the CO acts on (retry, give up, fix the request).
 * Using gRPC's numbering from the start keeps that mapping the identity, and the message is
 * written where the failure is understood, naming the volume and what is wrong.
 *
 * A struct lp_status is plain data owned by the caller; lp_fail() overwrites it.
 */
#ifndef KCSI_LOOPPLUGIN_STATUS_H
#define KCSI_LOOPPLUGIN_STATUS_H

enum lp_code {
	LP_OK = 0,
	LP_CANCELLED = 1,
	LP_UNKNOWN = 2,
	LP_INVALID_ARGUMENT = 3,
	LP_DEADLINE_EXCEEDED = 4,
	LP_NOT_FOUND = 5,
	LP_ALREADY_EXISTS = 6,
	LP_RESOURCE_EXHAUSTED = 8,
	LP_FAILED_PRECONDITION = 9,
	LP_ABORTED = 10,
	LP_OUT_OF_RANGE = 11,
	LP_UNIMPLEMENTED = 12,
	LP_INTERNAL = 13,
	LP_UNAVAILABLE = 14,
};

struct lp_status {
	enum lp_code code;
	char msg[512];
};

/* Sets st (if not NULL) to code and the formatted message; returns -(int)code (never 0). */
int lp_fail(struct lp_status *st, enum lp_code code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Resets st to LP_OK with an empty message. */
void lp_status_ok(struct lp_status *st);
/* The canonical name of a code ("NOT_FOUND"). */
const char *lp_code_name(enum lp_code code);

#endif
