/*
 * timeutil: durations, wall-clock timestamps and a monotonic clock.
 *
 * Durations are int64_t nanoseconds, like Go's time.Duration, so flag values and their printed
 * defaults match the upstream sidecars exactly ("15s", "5m0s", "1h2m3.5s").
 *
 * Timestamps are Kubernetes' metav1.Time: RFC 3339, UTC, second precision ("2026-11-22T10:00:00Z").
 */
#ifndef KCSI_BASE_TIMEUTIL_H
#define KCSI_BASE_TIMEUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define NSEC_PER_USEC 1000LL
#define NSEC_PER_MSEC 1000000LL
#define NSEC_PER_SEC  1000000000LL
#define NSEC_PER_MIN  (60 * NSEC_PER_SEC)
#define NSEC_PER_HOUR (60 * NSEC_PER_MIN)

/* Monotonic clock in nanoseconds; only differences are meaningful. */
int64_t mono_now_ns(void);
/* Wall clock in nanoseconds since the Unix epoch. */
int64_t wall_now_ns(void);
/* The wall-clock instant ns from now, as the absolute deadline of pthread_*timed* calls. */
struct timespec wall_deadline(int64_t ns);
/* Sleeps for ns nanoseconds (restarting after signals). */
void sleep_ns(int64_t ns);

/*
 * Parses a Go duration: an optional sign, then one or more decimal numbers each with a unit
 * (ns, us, µs, ms, s, m, h), e.g. "300ms", "-1.5h", "1h2m3.5s". "0" alone is allowed.
 * Returns 0 and sets *ns, or -1 with a reason in err (which may be NULL).
 */
int duration_parse(const char *s, int64_t *ns, char *err, size_t errlen);
/* Formats like Go's Duration.String(): "0s", "500ms", "1.5µs", "1m30s", "5m0s", "2h0m0s". */
void duration_format(int64_t ns, char *buf, size_t len);
#define DURATION_BUFLEN 32

#define RFC3339_BUFLEN 32
/* Formats t (seconds since the epoch) as "YYYY-MM-DDTHH:MM:SSZ". */
void rfc3339_format(time_t t, char *buf, size_t len);
/*
 * Parses an RFC 3339 timestamp: "YYYY-MM-DDTHH:MM:SS" then optional fraction, then "Z" or
 * "+HH:MM"/"-HH:MM". Fractions are dropped (metav1.Time has second precision).
 * Returns 0 and sets *t (UTC seconds), or -1 when s is not a valid timestamp.
 */
int rfc3339_parse(const char *s, time_t *t);

#endif
